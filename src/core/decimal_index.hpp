// SPDX-License-Identifier: Apache-2.0
// Indices written as decimal digits in names: a checkpoint's file ("0000000042.npz"), a sharded step's directory
// ("0000000042") and objax's members ("42.npy"). One writer and one reader, so every name a save writes is read back
// and nothing else is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ckpt::core {

// The width of checkpoint and step names: objax's "%010d".
constexpr size_t kCheckpointDigits = 10;

// `index` (>= 0) in decimal, padded with zeros to `width` digits.
std::string padded_index(int64_t index, size_t width = kCheckpointDigits);
// The inverse of padded_index: the value of `digits` when they are what padded_index writes for some index — at
// least `width` (>= 1) digits, no leading zero beyond the padding, at most INT64_MAX — and nullopt otherwise.
std::optional<int64_t> parse_padded_index(std::string_view digits, size_t width = kCheckpointDigits);

}  // namespace ckpt::core
