// SPDX-License-Identifier: Apache-2.0
// What the npz reader and writer share: layouts and member naming (and progress reporting, core/progress.hpp).
#pragma once

#include "core/progress.hpp"

#include <cstdint>
#include <string_view>

namespace ckpt::core {

// Values equal CKPT_LAYOUT_* of ckpt.h.
enum class Layout : uint32_t {
    automatic = 0,  // reading: detect; writing: plain
    plain = 1,      // "<name>.npy" per variable, as np.savez(**vars)
    objax = 2,      // "names.npy" (a '<U' array) + "0.npy", "1.npy", … as objax.io.save_var_collection
};

constexpr std::string_view kNpySuffix = ".npy";
constexpr std::string_view kObjaxNamesKey = "names";

}  // namespace ckpt::core
