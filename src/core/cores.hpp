// SPDX-License-Identifier: Apache-2.0
// How many threads the machine runs at once, for sizing the threads of reads, checks and compression.
#pragma once

#include <algorithm>
#include <thread>

namespace ckpt::core {

// std::thread::hardware_concurrency(), at least 1, asked once: glibc reads /sys/devices/system/cpu/online at
// every call, which is a file open and read in the middle of every restore.
inline unsigned cores() {
    static const unsigned n = std::max(std::thread::hardware_concurrency(), 1u);
    return n;
}

}  // namespace ckpt::core
