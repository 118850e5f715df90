// SPDX-License-Identifier: Apache-2.0
// The clock of the managers ckpt_manager_open creates: not part of the C API (the symbol is hidden in the shared
// library). Tests that link the library's objects directly set it to move time forward without sleeping.
#pragma once

#include <cstdint>
#include <functional>

namespace ckpt::capi {

// Managers opened after this call read the time (nanoseconds since the Unix epoch) from now_ns; an empty
// function restores the system clock.
void set_manager_clock(std::function<int64_t()> now_ns);

}  // namespace ckpt::capi
