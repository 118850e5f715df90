// SPDX-License-Identifier: Apache-2.0
// A file whose first bytes were read once, up front: what telling a file's format by its content costs, paid with a
// read the file's reader then need not make again. A safetensors file's length and header come from it (on an object
// store, one request instead of three); an .npz's zip directory, read from its end, does when the file is small, and
// its first local header does (an object store: one request more than the zip reader alone makes, for a large file).
#pragma once

#include "storage/storage.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace ckpt::core {

class HeadInput final : public InputFile {
public:
    // Reads bytes [0, min(size, head_bytes)) of `file`. Throws what file.read_at throws.
    HeadInput(std::unique_ptr<InputFile> file, size_t head_bytes);

    // The bytes read up front (fewer than asked only for a shorter file).
    const std::string& head() const { return head_; }

    uint64_t size() const override { return file_->size(); }
    // Reads within the head are served from it; the rest, from the file.
    size_t read_at(uint64_t offset, void* dst, size_t n) override;
    size_t read_uncached_at(uint64_t offset, void* dst, size_t n) override;
    bool concurrent_reads() const override { return file_->concurrent_reads(); }
    bool cached(uint64_t offset, uint64_t n) override { return offset + n <= head_.size() || file_->cached(offset, n); }
    std::unique_ptr<MappedFile> map(bool writable) override { return file_->map(writable); }

private:
    // Copies what of [offset, offset + n) the head holds into dst; returns how many bytes (0 past it).
    size_t from_head(uint64_t offset, void* dst, size_t n) const;

    std::unique_ptr<InputFile> file_;
    std::string head_;
};

}  // namespace ckpt::core
