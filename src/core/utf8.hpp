// SPDX-License-Identifier: Apache-2.0
// UTF-8 checks and UTF-8 <-> UTF-32 conversion for variable names (zip member names are UTF-8; objax's
// names array is numpy '<U', i.e. UTF-32).
#pragma once

#include <string>
#include <string_view>

namespace ckpt::core {

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s);
// `s` with every byte that is not part of valid UTF-8, and every control character, written as \xNN: safe to put
// in a message (a NUL would end it at the C boundary).
std::string printable(std::string_view s);
// Code points of valid UTF-8 `s`.
std::u32string utf8_to_utf32(std::string_view s);
// UTF-8 of `s`; returns false (and leaves `out` unspecified) on a surrogate or a value above U+10FFFF.
bool utf32_to_utf8(std::u32string_view s, std::string& out);

}  // namespace ckpt::core
