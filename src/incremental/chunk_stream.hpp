// SPDX-License-Identifier: Apache-2.0
// Incremental saves of a file region laid out the same way from save to save (a safetensors file's data, whose
// tensors keep their places while their names, dtypes and shapes do): the region is cut into chunks at fixed
// offsets, each chunk hashed (hash128), and a run of chunks whose hashes equal those of the same chunks of the file
// saved before is shared with that file (OutputFile::clone_from: a reflink, a server-side copy) instead of written.
// Every file stays complete; where nothing can be shared the bytes are simply written.
#pragma once

#include "incremental/hash128.hpp"
#include "incremental/share_runs.hpp"
#include "storage/storage.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ckpt::core {

// Where a chunked region starts in its file: a multiple of this (the largest common filesystem block).
constexpr uint64_t kChunkRegionAlignment = 4096;

// What a save knows of a region it wrote, for the next save to share with: where the region starts in the file
// (a multiple of 4096), its length, and its chunks' hashes (the last chunk may be shorter).
struct RegionChunks {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint32_t chunk_bytes = 0;
    std::vector<Hash128> hashes;
};

// The earlier file a region is shared with: its bytes and what was recorded of its region when it was saved.
struct RegionBase {
    InputFile* file = nullptr;
    const RegionChunks* chunks = nullptr;
};

// Writes one region to `out`, which holds exactly the bytes before the region (a multiple of 4096 of them).
class ChunkStream {
public:
    // chunk_bytes: a multiple of 4096. base: the earlier file (none: every byte is written, the hashes recorded).
    ChunkStream(OutputFile& out, uint64_t offset, uint32_t chunk_bytes, RegionBase base);
    ChunkStream(const ChunkStream&) = delete;
    ChunkStream& operator=(const ChunkStream&) = delete;
    ~ChunkStream();

    // The region's next n bytes. They are written or shared before this returns (data may then be reused), except
    // the end of a chunk not yet whole, which is kept.
    void put(const void* data, size_t n);
    // Writes what remains (the last chunk) and returns what was recorded of the region.
    RegionChunks finish();
    // Bytes shared with the base rather than written.
    uint64_t shared() const { return shared_; }

private:
    // The next chunk (whole, or the region's last): hashed, then added to the run of its kind, shared or written.
    void chunk(const char* data, size_t n);

    OutputFile& out_;
    RegionBase base_;
    RegionChunks chunks_;
    std::unique_ptr<char[]> partial_;  // the start of a chunk that straddles two put()s
    size_t partial_n_ = 0;
    uint64_t shared_ = 0;
    ShareRuns runs_;
};

}  // namespace ckpt::core
