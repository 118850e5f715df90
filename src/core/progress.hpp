// SPDX-License-Identifier: Apache-2.0
// Progress reporting of saves and reads, whatever the file format: array bytes done against a total.
#pragma once

#include <cstdint>

namespace ckpt::core {

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
