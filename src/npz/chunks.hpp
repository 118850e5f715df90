// SPDX-License-Identifier: Apache-2.0
// Chunk hashes: what lets a save reuse the bytes of a previous checkpoint that did not change, while every file stays
// a complete .npz (docs/format.md, "Chunk hashes").
//
// A save that records them puts the first data byte of each stored array of kMinChunkedBytes or more (smaller ones are
// rewritten whole) on a 4096-byte boundary of the file, and hashes its data in fixed chunks of kChunkBytes (the last
// one shorter) with hash128, and records each chunk's CRC-32 beside its hash. The table goes into one more member,
// "__ckpt_chunks__.npy" (a 1-D uint8 array numpy loads as any other; ckpt's reader sets it aside like the metadata
// member): a later save, in this process or another, knows what the file holds without reading its data, clones
// every chunk whose hash it matches from this file, and takes that chunk's CRC-32 from the table instead of reading
// the chunk a second time (a member's CRC-32 is its header's and chunks' joined: join_chunks).
#pragma once

#include "core/metadata.hpp"
#include "incremental/hash128.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

// Chunk size (docs/performance.md, "Incremental saves", measured it): a multiple of every common filesystem block.
constexpr uint32_t kChunkBytes = uint32_t{16} << 10;
// Arrays smaller than this are neither aligned nor hashed (rewritten whole): the alignment's padding, up to a block,
// stays a small part of the arrays that pay it.
constexpr uint64_t kMinChunkedBytes = uint64_t{64} << 10;
// Where chunked arrays' data starts in the file: a multiple of this (the largest common filesystem block).
constexpr uint64_t kBlockAlignment = 4096;

// What a table records of one chunk: its hash and its CRC-32 (zlib's, of the chunk's bytes alone).
struct ChunkSum {
    Hash128 hash;
    uint32_t crc = 0;
};

// How many chunks an array of `nbytes` has.
inline uint64_t chunk_count(uint64_t nbytes, uint32_t chunk_bytes) {
    return nbytes / chunk_bytes + (nbytes % chunk_bytes != 0 ? 1 : 0);
}

// The sum of the n bytes of one chunk: their hash, and their CRC-32 — taken from `base` (the same chunk's sum in
// an earlier file) when the hashes match, computed otherwise.
ChunkSum chunk_sum(const void* data, size_t n, const ChunkSum* base = nullptr);

// The CRC-32 of an npy member from its header's CRC-32 and its array's chunk CRC-32s (chunks of chunk_bytes, the
// last of what remains of data_bytes).
uint32_t join_chunks(uint32_t head_crc, const std::vector<ChunkSum>& chunks, uint64_t data_bytes, uint32_t chunk_bytes);

// The table one file holds: per chunked member, its name, its CRC-32 (as the central directory has it: a table
// that does not describe the member beside it is not used), the CRC-32 of its npy header (the bytes before the
// array's), its array's byte count, and its chunks' hashes and CRC-32s.
struct ChunkTable {
    struct Member {
        std::string name;  // the zip member's name
        uint32_t crc = 0;
        uint32_t head_crc = 0;
        uint64_t data_bytes = 0;
        std::vector<ChunkSum> chunks;
    };
    uint32_t chunk_bytes = kChunkBytes;
    std::vector<Member> members;
};

// The member's bytes (docs/format.md): "CKPTCHNK", u32 version 3, u32 chunk size, u64 member count; per member:
// u16 name length, the name (UTF-8), u32 CRC-32, u32 header CRC-32, u64 data bytes, u64 chunk count, then 20 bytes
// per chunk (hash lo, hash hi, CRC-32; little-endian throughout). Versions 1 (no CRC-32s) and 2 (an earlier hash)
// are not read: a save against such a file is a full one.
std::vector<unsigned char> encode_chunk_table(const ChunkTable& table);
// The size encode_chunk_table gives for members with these name lengths and array sizes.
uint64_t chunk_table_bytes(const std::vector<std::pair<size_t, uint64_t>>& name_and_data_bytes, uint32_t chunk_bytes);
// Parses a table, treating every byte as untrusted. Throws Error(format) saying what is wrong.
ChunkTable decode_chunk_table(const unsigned char* data, size_t n);

}  // namespace ckpt::core
