// SPDX-License-Identifier: Apache-2.0
// Writing .npz files that numpy.load reads: one stored or deflated zip member per array, each member the exact
// bytes np.save writes, timestamps fixed at 1980-01-01 so output is deterministic, zip64 where sizes need it.
#pragma once

#include "npz/npz.hpp"
#include "storage/storage.hpp"
#include "core/var_collection.hpp"
#include "npz/chunk_base.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace ckpt::core {

struct NpzWriteOptions {
    Layout layout = Layout::plain;  // automatic means plain
    bool deflate = false;
    int level = 0;  // 1..9; 0 = zlib's default
    Progress progress;
    // Called once the archive is planned, before its first byte, with an upper bound on the bytes it will write
    // (exact but for padding and zip64 fields it may leave out; for deflate, the size if nothing compresses); may
    // throw to refuse the save (the checkpoint manager's disk check).
    std::function<void(uint64_t size_bound)> before_write;
    // Whether the collection's "ckpt."-prefixed metadata keys — the checkpoint manager's own (its index, time,
    // version, metrics) — are written. The manager sets it, for the keys it has just made, and so does a copy that
    // asks to keep them (CKPT_KEEP_MANAGER_KEYS: ckpt convert); any other save leaves them out, so that keys a
    // restore brought in are never written again as if they described this file.
    bool manager_keys = false;
    // Whether stored arrays of kMinChunkedBytes or more are hashed in chunks into a chunk table member (chunks.hpp), so
    // that a later save can take this file as its base.
    bool chunk_hashes = false;
    // An earlier file whose unchanged chunks this save clones instead of writing (with chunk_hashes; not deflated).
    const ChunkBase* base = nullptr;
    // Receives how many array bytes were shared with the base rather than written.
    uint64_t* shared_bytes = nullptr;
    // The chunk size (a multiple of kBlockAlignment dividing 4 MiB): kChunkBytes but where a benchmark compares
    // others. A base of another chunk size serves as none.
    uint32_t chunk_bytes = kChunkBytes;
};

// Writes the whole archive for `vars` into `out`; returns its size in bytes. Throws Error: invalid (bad options),
// io, no_memory.
uint64_t write_npz(OutputFile& out, const VarCollection& vars, NpzWriteOptions options);

// Saves `vars` to `path` atomically and durably through `storage` (see write_atomically). Throws Error: invalid,
// not_found (no such directory), io, no_memory.
void save_npz(Storage& storage, const std::string& path, const VarCollection& vars, const NpzWriteOptions& options);

}  // namespace ckpt::core
