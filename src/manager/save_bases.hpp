// SPDX-License-Identifier: Apache-2.0
// SaveBases: what a checkpoint manager's incremental saves share with (docs/checkpoint-manager.md, "Incremental
// saves"). It plans each save — whether it records chunk hashes and may share (full_every, ShareBackoff) — and keeps
// each save's base: the checkpoint file, or this rank's shard of the step, that the manager saved before, unless it
// changed since; before the manager's first save, the newest on disk. An .npz file's base is its chunk table; a
// safetensors file records none, so its base is the chunk hashes this manager kept when it saved it.
//
// Threads: plan() and the shard methods run on the caller's thread; open_file(), file_saved() and saved_against() on
// the writer's thread (listed() before the first save is handed to it).
#pragma once

#include "container/container.hpp"
#include "manager/share_backoff.hpp"
#include "npz/chunk_base.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ckpt::core {

class SaveBases {
public:
    // The checkpoints of a listing a base may come from.
    struct Newest {
        std::optional<int64_t> file;  // the newest checkpoint file
        std::optional<int64_t> step;  // the newest sharded step
    };
    struct Env {
        Storage* storage = nullptr;
        std::function<std::string(int64_t)> file_path;  // of checkpoint file `index` in the manager's format
        std::function<Newest()> list;                   // lists the directory
        std::function<void(const std::string&)> log;    // an info line
    };
    // clones: the storage can share blocks in the directory, and incremental saves are on.
    // why_full: when saves are to be incremental but cannot be (the storage shares nothing), why — logged at the
    // first save, once.
    SaveBases(Env env, bool clones, int64_t full_every, std::string why_full = {})
        : env_(std::move(env)), clones_(clones), full_every_(full_every), why_full_(std::move(why_full)) {}

    // Counts a save (its ordinal is saves() after) and plans it: npz.chunk_hashes says whether it records chunk hashes
    // (never for a deflated one, nor where the storage cannot share, nor in a pause of share_backoff), and the result
    // whether it may share with a base (not a full_every-th save, and the save before it recorded hashes).
    bool plan(NpzWriteOptions& npz);
    int64_t saves() const { return saves_; }
    // After save `ordinal` was saved against a base, sharing `shared` of its arrays' `bytes`: tells the backoff, and
    // logs a pause it starts. `what`: "Checkpoint 3", "Rank 1's shard of step 3".
    void saved_against(int64_t ordinal, uint64_t shared, uint64_t bytes, const std::string& what);

    // The base of a save of a checkpoint file, open.
    struct Opened {
        int64_t index = -1;
        std::unique_ptr<ChunkBase> npz;              // an .npz file's chunk table
        std::unique_ptr<InputFile> file;             // a safetensors file
        std::shared_ptr<const RegionChunks> region;  // and its chunk hashes, as this manager saved it
        explicit operator bool() const { return npz || file; }
    };
    // The base of the save of checkpoint `index` in `format`, or none (logging why not, where there was one).
    Opened open_file(int64_t index, Format format);
    // Checkpoint `index` was saved (and hashed: region holds a safetensors file's chunk hashes): the next file's base.
    void file_saved(int64_t index, std::shared_ptr<const RegionChunks> region);
    // A listing the manager made anyway, before its first save: the first save's base.
    void listed(const Newest& newest);

    // The path of this rank's shard of the step the next sharded save may share with ("" for none), given whether it
    // may (plan()) and where a step's shard of this rank lies.
    std::string shard_base(bool share, const std::function<std::string(int64_t step)>& shard_path);
    // That shard's chunk table ("" or an unusable one: nullptr, logging why) for the save of step `index`.
    std::unique_ptr<ChunkBase> open_shard(const std::string& path, int64_t index) const;
    // Step `index` is committed: this rank's shard of it is the next sharded save's base.
    void step_saved(int64_t index) { shard_base_ = index; }

private:
    std::unique_ptr<ChunkBase> open_chunk_base(const std::string& path, const std::string& what) const;

    Env env_;
    bool clones_;
    int64_t full_every_;
    int64_t saves_ = 0;
    std::string why_full_;
    ShareBackoff backoff_;
    // The checkpoint file the next save takes as its base, as it was when saved (its size and time). Unknown
    // (file_listed_ false) until a save lists the directory.
    struct SavedFile {
        int64_t index = 0;
        std::optional<FileInfo> as_saved;            // nullopt: found on disk, not saved by this manager
        std::shared_ptr<const RegionChunks> region;  // a safetensors file's chunk hashes, as this manager saved it
    };
    std::optional<SavedFile> file_;
    bool file_listed_ = false;
    std::optional<int64_t> shard_base_;  // the step whose shard of this rank the next sharded save shares with
    bool shard_listed_ = false;
};

}  // namespace ckpt::core
