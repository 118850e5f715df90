// SPDX-License-Identifier: Apache-2.0
// A checkpoint manager's directory opened only to look: CKPT_MANAGER_READ_ONLY takes no lock and removes
// nothing, so it works while a training program holds the directory and saves into it. Local directories and
// s3:// prefixes alike: the listing comes from the manager.
#pragma once

#include "failure.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ckpt_tool {

struct CheckpointDir {
    std::string directory;  // where the checkpoints are: LOGDIR/SUBDIR, or LOGDIR itself
    Manager manager;
    std::vector<int64_t> indices;  // ascending

    std::string path_of(int64_t index) const;
    // Whether the checkpoint at `path` (from path_of) is a sharded step, a directory, rather than a file: the
    // manager lists steps by their bare number and files with ".npz".
    static bool is_step(const std::string& path);
    // Temporary files of saves in progress or interrupted (".<checkpoint>.tmp-XXXXXX"), by name, sorted. None on
    // S3: a save there uploads to the checkpoint's own key, leaving no temporary object behind.
    std::vector<std::string> temporaries() const;
};

// Opens LOGDIR's checkpoint directory LOGDIR/SUBDIR (SUBDIR "" is LOGDIR itself). Without an explicit subdir it is
// "ckpt", the manager's default, unless LOGDIR has no such directory but holds checkpoints itself: then LOGDIR is
// the checkpoint directory (so both `ckpt ls run` and `ckpt ls run/ckpt` work). On S3, where a directory is only
// the prefix of the keys under it and an empty one cannot be told from a missing one, "no such directory" is
// "no checkpoints under it". Throws on failure.
CheckpointDir open_checkpoint_dir(const std::string& logdir, const std::optional<std::string>& subdir);

// Temporary files of saves in progress or interrupted in a local directory, by name, sorted: of numbered
// checkpoints (".0000000005.npz.tmp-XXXXXX"), or, numbered false, of any .npz, safetensors or index file (what
// `ckpt convert` and other saves leave when killed).
std::vector<std::string> temporaries_in(const std::string& dir, bool numbered);
// Names of the entries of a local directory, sorted, without "." and ".." (none when it cannot be read).
std::vector<std::string> directory_entries(const std::string& dir);
// The index of a checkpoint named `name`: "0000000042.npz" (a file) or "0000000042" (a step directory); none for
// other names.
std::optional<int64_t> checkpoint_index(const std::string& name);
// Whether the local directory `logdir` is a manager's as open_checkpoint_dir takes it without a subdir: it has a
// "ckpt" directory, or it holds checkpoints itself.
bool is_manager_dir(const std::string& logdir);
// What a checkpoint manager records in a checkpoint's metadata: its metrics as "ckpt.metric.<name>", its own other
// keys (the saving time, the index) under "ckpt.". The metric `key` records ("ckpt.metric.loss" -> "loss"); none
// for other keys.
std::optional<std::string> metric_name(const std::string& key);
// Whether `key` is one of the manager's own keys other than its metrics ("ckpt.saved_at", "ckpt.index").
bool manager_key(const std::string& key);
// Bytes of the file whose blocks it shares with other files (incremental saves on XFS or btrfs); none where the
// storage cannot tell (S3, tmpfs).
std::optional<uint64_t> shared_bytes_of(const std::string& file);
// Whether `path` is a directory on the local file system (stat says so).
bool is_local_directory(const std::string& path);

// A checkpoint of a local directory that is not a manager's, found by name: an .npz file, or a sharded step's
// directory (one holding manifest.json).
struct NamedCheckpoint {
    std::string name;
    std::string path;  // the directory joined with name
    bool step = false;
};
// The .npz files and sharded steps of the local directory `dir`, sorted by name: what `ckpt ls DIR` lists of a
// directory that is not a manager's, and what `ckpt verify DIR` checks there. Other files are left out.
std::vector<NamedCheckpoint> named_checkpoints(const std::string& dir);

enum class PathKind { file, step, directory };
// What a path given to a command names. A local path: what stat says — a directory holding manifest.json is a
// sharded step, another directory a directory, anything else (a missing path too) a file. An s3:// URL, what the
// C API finds there: an object (one that ckpt_reader_open opens, or finds broken) is a file; else a manifest.json
// under it (ckpt_step_open) a sharded step; else checkpoints under it (as open_checkpoint_dir finds them) a
// directory; else a file, a missing one. A URL of a bucket's root or ending in '/' is never a file.
// `not_a_file`: the caller knows already that no object has the URL's key, so it is not asked again.
PathKind path_kind(const std::string& path, bool not_a_file = false);

struct StepCloser {
    void operator()(ckpt_step* s) const { ckpt_step_close(s); }
};
using Step = std::unique_ptr<ckpt_step, StepCloser>;

// Whether `path` is a sharded step: a directory holding manifest.json; for an s3:// URL, one under which
// ckpt_step_open finds a manifest (a broken one too).
bool is_step_dir(const std::string& path);
// Bytes of the step's files (its shards and manifest); none for an s3:// URL, whose objects' sizes the C API does
// not tell.
std::optional<uint64_t> step_bytes(const std::string& path);
}  // namespace ckpt_tool
