// SPDX-License-Identifier: Apache-2.0
#include "storage/read_ahead.hpp"

#include <algorithm>
#include <vector>

namespace ckpt::core {

ReadAhead::ReadAhead(InputFile& file, uint64_t n) : thread_([this, &file, n] { run(file, n); }) {}

ReadAhead::~ReadAhead() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
}

void ReadAhead::run(InputFile& file, uint64_t n) {
    try {
        std::vector<unsigned char> scratch(kStep);
        for (uint64_t at = 0; at < n && !stop_.load(std::memory_order_relaxed); at += kStep)
            if (file.read_at(at, scratch.data(), static_cast<size_t>(std::min<uint64_t>(kStep, n - at))) == 0) return;
    } catch (...) {
        // A failed read (or no memory for the scratch): the caller's own read of these bytes reports it.
    }
}

}  // namespace ckpt::core
