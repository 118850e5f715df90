// SPDX-License-Identifier: Apache-2.0
// A sharded checkpoint step: one directory <dir>/<%010d>/ holding shard-RRRRR-of-WWWWW.npz per rank (ordinary npz
// files numpy reads) and manifest.json, the commit point (manifest.hpp). docs/distributed.md has the protocol.
#pragma once

#include "sharded/comm.hpp"
#include "sharded/manifest.hpp"
#include "npz/npz_reader.hpp"
#include "core/restore_match.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace ckpt::core {

// "0000000042": the directory name of step 42; step_dir_index is its inverse (nullopt for other names).
std::string step_dir_name(int64_t index);
std::optional<int64_t> step_dir_index(const std::string& name);
// True for the staging directories of sharded saves (".0000000042.tmp-XXXXXX") and for replaced steps set aside
// (".0000000042.old.tmp-XXXXXX"): what a manager removes when it opens.
bool is_step_temp(const std::string& name);

// Removes a step directory: its manifest first, so that a removal cut short never leaves a step that lists as
// committed with shards missing.
void remove_step(Storage& storage, const std::string& step_dir);
// Whether <step_dir>/manifest.json exists: only then is the directory a checkpoint.
bool has_manifest(Storage& storage, const std::string& step_dir);

// The collective save of `vars` (whose metadata is the step's) as step `index` of `dir`: every rank writes its
// shard into a staging directory, the ranks gather their statuses, rank 0 writes the manifest and renames the
// staging directory to the step's (on a storage that cannot rename directories: every shard goes into the step's
// directory, and the manifest, written last, commits it); then every rank returns, or throws the same Error naming
// the failing rank(s). A step that existed is replaced (set aside, then removed once the new one is in place;
// without directory renames, removed first). `failed`: this rank could not prepare its part (it still takes part
// in every collective, and its error fails the save everywhere).
// `on_commit` runs on rank 0 once the step is committed, before any rank returns (so that what it does — retention
// — is done when the save returns anywhere), with how long the commit took: from every shard known durable to the
// step visible and durable. What it throws is ignored: the save has succeeded.
using OnCommit = std::function<void(double commit_ms)>;
void save_sharded(Comm& comm, Storage& storage, const std::string& dir, int64_t index, const VarCollection& vars,
                  const NpzWriteOptions& options, std::exception_ptr failed = nullptr, const OnCommit& on_commit = {});

// save_sharded in its three phases, for a save whose shard is written in the background: begin (collective: where
// the shards go), then this rank's shard written at shard_path(), by any thread, after describe_shard(), then
// finish (collective: the statuses gathered, the commit). Between begin and finish every rank must make the same
// collective calls, and none of them may be made from the thread writing the shard.
struct ShardedSave {
    int64_t index = 0;
    std::string dir, target, staging, what;
    std::string description;  // this rank's variables, for the manifest
    Metadata metadata;        // the step's (rank 0's goes into the manifest)
};
ShardedSave begin_sharded_save(Comm& comm, Storage& storage, const std::string& dir, int64_t index);
void describe_shard(ShardedSave& save, const VarCollection& vars);
std::string shard_path(const ShardedSave& save, const Comm& comm);
void finish_sharded_save(Comm& comm, Storage& storage, const ShardedSave& save, std::exception_ptr failed,
                         const OnCommit& on_commit = {});

// One committed step, read by one process: its manifest, and its shards opened on demand.
class ShardedStep {
public:
    // Reads and checks <step_dir>/manifest.json. Error(not_found) without one, Error(format) for a bad one.
    ShardedStep(Storage& storage, std::string step_dir, NpzReadOptions options);
    const std::string& path() const { return dir_; }
    const Manifest& manifest() const { return manifest_; }
    // The file name of each rank's shard ("shard-00001-of-00004.npz"), by rank.
    const std::vector<std::string>& shard_names() const { return shard_names_; }

    // Restores `vars` in place with the rules of core/restore_match, as a file's restore (restore_container): each
    // variable is looked up by name (after `rename`) and must have the manifest's dtype and shape — for a row split
    // (VarCollection::set_rows), the global rows and the other dimensions. Every variable is checked before any data is
    // read. Reads only the rows each variable needs, from whichever shards hold them. Replaces the collection's
    // metadata with the step's. `partial`: a variable the step does not have is left untouched (VarCollection::restored
    // says which were filled).
    void restore(VarCollection& vars, const Renamer& rename, bool partial = false);
    // Every variable, whole (split ones assembled), with the step's metadata.
    VarCollection read_all();
    // Reads rows [first, first + count) of variable v (all its rows: whole) into dst.
    void read_rows(const ManifestVariable& v, int64_t first, int64_t count, void* dst);

private:
    using Reads = std::map<int64_t, std::vector<NpzReader::Job>>;  // whole members to read, by shard
    void plan_rows(const ManifestVariable& v, int64_t first, int64_t count, void* dst, Reads& reads);
    void run(const Reads& reads);
    // The shard of `rank`, opened on first use.
    NpzReader& shard(int64_t rank);
    size_t entry_of(const NpzReader& shard, const ManifestVariable& v, const std::vector<int64_t>& shape);

    Storage& storage_;
    std::string dir_;
    NpzReadOptions options_;
    Manifest manifest_;
    std::vector<std::string> shard_names_;
    std::map<int64_t, NpzReader> shards_;
};

}  // namespace ckpt::core

namespace ckpt::core {

// The collective choice of the step to restore. Rank 0's `candidates` (newest first; the other ranks' are ignored)
// go to every rank; each is tried by `attempt` on every rank, and the ranks move on together past a step that any
// rank found unreadable (corrupt or missing shard, manifest) when `fallback` is on, calling `skipped` with the
// reason on every rank. Returns the step every rank restored, or throws on every rank the same Error, naming
// the ranks that failed. Errors the caller caused (CallerError, a mismatch) are never skipped past.
int64_t restore_collectively(Comm& comm, const std::vector<int64_t>& candidates, bool fallback, const std::string& dir,
                             const std::function<void(int64_t)>& attempt,
                             const std::function<void(const std::string&)>& skipped);

}  // namespace ckpt::core
