// SPDX-License-Identifier: Apache-2.0
// What the npz reader and writer share: layouts, member naming and progress reporting.
#pragma once

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

using ProgressFn = void (*)(uint64_t done_bytes, uint64_t total_bytes, void* payload);

// Counts array bytes done against a total and tells the caller's callback, if any.
struct Progress {
    ProgressFn fn = nullptr;
    void* payload = nullptr;
    uint64_t done = 0;
    uint64_t total = 0;

    void start(uint64_t total_bytes) {
        done = 0;
        total = total_bytes;
    }
    void advance(uint64_t n) {
        done += n;
        if (fn != nullptr && n != 0) fn(done, total, payload);
    }
};

}  // namespace ckpt::core
