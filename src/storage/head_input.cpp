// SPDX-License-Identifier: Apache-2.0
#include "storage/head_input.hpp"

#include <algorithm>
#include <cstring>

namespace ckpt::core {

HeadInput::HeadInput(std::unique_ptr<InputFile> file, size_t head_bytes) : file_(std::move(file)) {
    head_.resize(static_cast<size_t>(std::min<uint64_t>(head_bytes, file_->size())));
    size_t at = 0;
    while (at < head_.size()) {
        const size_t got = file_->read_at(at, &head_[at], head_.size() - at);
        if (got == 0) break;  // shorter than its size says: its reader finds out
        at += got;
    }
    head_.resize(at);
}

size_t HeadInput::from_head(uint64_t offset, void* dst, size_t n) const {
    if (offset >= head_.size()) return 0;
    const size_t k = std::min<size_t>(n, head_.size() - static_cast<size_t>(offset));
    std::memcpy(dst, head_.data() + offset, k);
    return k;
}

size_t HeadInput::read_at(uint64_t offset, void* dst, size_t n) {
    const size_t k = from_head(offset, dst, n);
    return k == n ? k : k + file_->read_at(offset + k, static_cast<char*>(dst) + k, n - k);
}

size_t HeadInput::read_uncached_at(uint64_t offset, void* dst, size_t n) {
    const size_t k = from_head(offset, dst, n);
    return k == n ? k : k + file_->read_uncached_at(offset + k, static_cast<char*>(dst) + k, n - k);
}

}  // namespace ckpt::core
