// SPDX-License-Identifier: Apache-2.0
// An earlier file as the base of a save (chunks.hpp): the arrays its chunk table describes, where their bytes lie,
// and the file to clone them from.
#pragma once

#include "npz/chunks.hpp"
#include "npz/npz_reader.hpp"
#include "storage/storage.hpp"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ckpt::core {

class ChunkBase {
public:
    struct Array {
        uint64_t offset = 0;  // of its first byte in the base's file, a multiple of kBlockAlignment
        NpyHeader header;
        const ChunkTable::Member* table = nullptr;  // its CRC-32s and its chunks' sums
    };

    // The file at `path` as a base, or nullptr with the reason in *why_not (no file, unreadable, no chunk table, a
    // table that does not describe the members beside it): a save without a base is then
    // a full one, never a failed one.
    static std::unique_ptr<ChunkBase> open(Storage& storage, const std::string& path, std::string* why_not);

    // The base's array stored as zip member `member`, or nullptr.
    const Array* find(const std::string& member) const;
    InputFile& file() const { return reader_.file(); }
    const std::string& label() const { return reader_.label(); }
    uint32_t chunk_bytes() const { return table_.chunk_bytes; }

private:
    explicit ChunkBase(NpzReader reader) : reader_(std::move(reader)) {}
    NpzReader reader_;
    ChunkTable table_;
    std::unordered_map<std::string, Array> arrays_;
};

}  // namespace ckpt::core
