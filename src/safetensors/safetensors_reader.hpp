// SPDX-License-Identifier: Apache-2.0
// Reading safetensors files, treating every byte as untrusted: opening reads the length and the header (at most
// what the file's size justifies) and checks every rule of safetensors_header.hpp against the file's size; tensors
// are read on demand, straight into the destination. safetensors has no checksums: what a read delivers is what the
// file holds.
#pragma once

#include "safetensors/safetensors_header.hpp"
#include "storage/storage.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

struct SafetensorsReadOptions {
    uint64_t max_tensors = uint64_t{1} << 24;
    uint64_t max_total_bytes = UINT64_MAX;  // tensor bytes of the whole file
};

// Whether the first bytes of a file are those of a safetensors file rather than a zip: the byte after the 8-byte
// length is '{' or JSON whitespace, which no zip's local header has there (its compression method). `n` bytes of
// the file's start, n >= 9 for a yes.
bool looks_like_safetensors(const void* start, size_t n);

class SafetensorsReader {
public:
    // Reads `file`'s header, named `label` in messages. Throws Error(format) ("<label>: safetensors header: …"),
    // Error(unsupported) (a sub-byte float tensor), Error(io), Error(no_memory).
    SafetensorsReader(std::unique_ptr<InputFile> file, std::string label, SafetensorsReadOptions options);

    const std::string& label() const { return label_; }
    size_t size() const { return tensors_.size(); }
    const SafetensorsTensor& tensor(size_t i) const { return tensors_[i]; }
    size_t nbytes(size_t i) const { return static_cast<size_t>(tensors_[i].end - tensors_[i].begin); }
    // Where tensor i's data starts in the file.
    uint64_t data_offset(size_t i) const { return data_start_ + tensors_[i].begin; }
    uint64_t header_bytes() const { return data_start_; }
    const Metadata& metadata() const { return metadata_; }
    InputFile& file() const { return *file_; }

    // Reads bytes [offset, offset + n) of tensor i's data into dst, in native byte order (safetensors is
    // little-endian; offset and n whole items). Throws Error(format) when the file is shorter than it was at open,
    // Error(io).
    void read(size_t i, uint64_t offset, void* dst, size_t n);
    void read_into(size_t i, void* dst) { read(i, 0, dst, nbytes(i)); }

private:
    std::unique_ptr<InputFile> file_;
    std::string label_;
    std::vector<SafetensorsTensor> tensors_;
    Metadata metadata_;
    uint64_t data_start_ = 0;
};

}  // namespace ckpt::core
