// SPDX-License-Identifier: Apache-2.0
// Writing safetensors files that the reference reader, transformers and @huggingface/hub read: the header of
// safetensors_header.hpp, then every tensor's bytes, little-endian and in C order, each tensor aligned to its element
// size (tensors are laid out by descending element size; the header lists them in the collection's order).
#pragma once

#include "core/progress.hpp"
#include "core/var_collection.hpp"
#include "incremental/chunk_stream.hpp"
#include "storage/storage.hpp"  // OutputFile

#include <cstdint>
#include <functional>

namespace ckpt::core {

struct SafetensorsWriteOptions {
    Progress progress;
    // Called once the file is planned, before its first byte, with its exact size; may throw to refuse the save
    // (the checkpoint manager's disk check).
    std::function<void(uint64_t size)> before_write;
    // Whether the collection's "ckpt."-prefixed metadata keys are written (written_metadata, core/metadata.hpp).
    bool manager_keys = false;
    // A save of several files (the shards of one checkpoint): advanced instead of `progress`, and not started again.
    Progress* shared_progress = nullptr;
    // Incremental saves (incremental/chunk_stream.hpp): where set, the header is padded so that the data starts at a
    // multiple of 4096, the data's chunk hashes are recorded here, and each chunk equal to `base`'s at the same place
    // is shared with the base's file instead of written; *shared_bytes (where set) receives how many bytes were.
    RegionChunks* record = nullptr;
    RegionBase base;
    uint64_t* shared_bytes = nullptr;
};

// The chunk size of incremental safetensors saves: a multiple of every common filesystem block.
constexpr uint32_t kSafetensorsChunkBytes = uint32_t{16} << 10;

// Checks that safetensors can hold every array of `vars`, before anything is written: Error(unsupported) naming the
// array for complex128, strings, bytes and void ("safetensors has no … type").
void check_safetensors_types(const VarCollection& vars);

// Writes the whole file for `vars` into `out`; returns its size in bytes. Throws Error: unsupported (see
// check_safetensors_types), invalid (a header over the format's limit), io, no_memory.
uint64_t write_safetensors(OutputFile& out, const VarCollection& vars, SafetensorsWriteOptions options);

}  // namespace ckpt::core
