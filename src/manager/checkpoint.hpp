// SPDX-License-Identifier: Apache-2.0
// CheckpointManager: objax.io.Checkpoint — a directory of numbered checkpoints (<dir>/%010d.npz) that a
// training program saves into and resumes from — without its faults: indices are compared as numbers, not
// strings; saves are atomic and durable, synchronous or in the background; retention runs only after a save is
// durable and never deletes the checkpoint just written; restoring the latest falls back past corrupt files;
// one manager owns a directory at a time, from its first save: it locks the directory then and removes the stale
// temporaries of interrupted saves. A manager that only lists, reads and restores never locks nor deletes.
//
// A checkpoint is a file named by its index, or — saved by a manager with a communicator, by every rank together
// — a directory named by its index holding one shard per rank and a manifest (sharded/sharded_step.hpp). Both kinds
// are listed, retained and restored together.
#pragma once

#include "sharded/comm.hpp"
#include "sharded/sharded_step.hpp"
#include "manager/checkpoint_policy.hpp"
#include "manager/save_bases.hpp"
#include "manager/temporaries.hpp"
#include "npz/npz_reader.hpp"
#include "container/container.hpp"
#include "npz/npz_writer.hpp"
#include "writer/snapshot_pool.hpp"
#include "storage/storage.hpp"
#include "writer/writer.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ckpt::core {

// A checkpoint file's name: its index and format.
struct CheckpointFile {
    int64_t index;
    Format format;
};
// "…/0000000042.npz" -> {42, npz}, "…/0000000042.safetensors" -> {42, safetensors}; nullopt for anything that is not
// a checkpoint name (ten or more digits, no leading zero beyond the ten-digit padding, ".npz" or ".safetensors", no
// larger than INT64_MAX).
std::optional<CheckpointFile> checkpoint_file(const std::string& filename);
// The index of checkpoint_file.
std::optional<int64_t> checkpoint_index(const std::string& filename);
// "0000000042.npz", "0000000042.safetensors"
std::string checkpoint_name(int64_t index, Format format = Format::npz);

// A manager's hold on its directory: manager/dir_claim.hpp.
class DirClaim;

class CheckpointManager {
public:
    enum LogLevel { info = 1, warning = 2 };
    using Log = std::function<void(int level, const std::string& message)>;

    struct Options {
        int32_t keep = 10;       // newest checkpoints kept; <= 0 keeps all
        int64_t keep_every = 0;  // also keep indices that are multiples of this; 0 = off
        int32_t keep_best = 0;   // also keep the best N by best_metric; <= 0 = off
        std::string best_metric; // the metric of keep_best and best(); "" = none
        bool best_max = false;   // higher values of best_metric are better
        int64_t keep_seconds = 0;        // also keep what was saved within the last S seconds; 0 = off
        int64_t save_every_steps = 0;    // should_save: steps that are multiples of this; 0 = off
        int64_t save_every_seconds = 0;  // should_save: once this long has passed since the last save; 0 = off
        // The clock of the recorded save times, keep_seconds and save_every_seconds: nanoseconds since the Unix
        // epoch. Empty = the system clock; tests set it to go forward without sleeping.
        std::function<int64_t()> now_ns;
        bool async = false;
        bool fallback = true;    // restore(latest) tries older checkpoints when the newest is unreadable
        bool make_dir = true;
        bool read_only = false;  // no lock, no cleanup, no directory made, no saves: for tools and evaluators
        size_t queue_depth = 1;
        // The format of the checkpoints this manager saves (npz or safetensors: "<index>.npz", "<index>.safetensors").
        // It lists, restores and retains both. Sharded steps are .npz's alone for now; a safetensors checkpoint is
        // saved incrementally against the one this manager saved before (its chunk hashes are kept in memory).
        Format format = Format::npz;
        NpzWriteOptions npz_write;
        NpzReadOptions npz_read;
        Renamer rename;
        bool partial = false;           // restore(): variables missing from the file are left untouched
        uint64_t max_staging_bytes = 0; // async: bound on the copies held by queued and running saves; 0 = none
        Log log;
        std::shared_ptr<Storage> storage;
        // Incremental saves (docs/checkpoint-manager.md, "Incremental saves"): where the storage can share blocks
        // between files (Storage::clones), each file records its chunk hashes, and a save clones the chunks that did
        // not change from the checkpoint saved before it. Every file stays complete. full_every > 0 makes every
        // full_every-th save of this manager a full one, sharing nothing.
        bool incremental = true;
        int64_t full_every = 0;
        // With a communicator the manager is collective: opening, every save (each rank writes its own shard of a
        // step directory, rank 0 commits it), and every restore (the ranks agree on the step). With async, each
        // rank's shard is written in the background and the step committed at the next save, wait, close,
        // restore or read (all collective).
        std::shared_ptr<Comm> comm;

        // Error(invalid) naming `dir` and the option for values no manager can work with: a negative keep_every,
        // keep_seconds or save_every_*, keep_best without a best_metric, a best_metric that is not UTF-8,
        // asynchronous saves in a read-only manager. The constructor calls it.
        void check(const std::string& dir) const;
    };

    // Creates the directory (unless !make_dir or read_only: Error(not_found) if missing). It locks nothing: the
    // first save does (see save()).
    CheckpointManager(std::string dir, Options options);
    // Waits for background saves (dropping unreported errors: call close() to see them), then releases the
    // directory unless a newer manager of this process took it over.
    ~CheckpointManager();

    const std::string& dir() const { return dir_; }
    // The path of checkpoint `index`: its directory when it is a sharded step on disk, its file otherwise.
    std::string path(int64_t index) const;

    // Saves `vars` as checkpoint `index` (>= 0), replacing one that exists, then applies retention. In async
    // mode the arrays are copied before this returns and errors surface at the next save, wait or close.
    // The first save takes the directory (claim()); a later one first checks that this manager still owns it.
    // Every save records the index, the time, ckpt's version and `metrics` in the file's metadata (the keys of
    // checkpoint_policy.hpp) without changing `vars`.
    void save(const VarCollection& vars, int64_t index, const Metrics& metrics = {});
    // The value of metric `name` that checkpoint `index` recorded (reading only its metadata), or nullopt.
    // Error(not_found) when there is no such checkpoint, Error(format) for a value that is not a number.
    std::optional<double> metric(int64_t index, const std::string& name);
    // The checkpoint with the best value of best_metric (NaN never is; a tie goes to the higher index), or
    // nullopt when none records it. Error(invalid) when no best_metric is set. Unreadable files are skipped.
    std::optional<int64_t> best();
    // Whether the training loop should save at `step` (>= 0): after request_save(), at multiples of
    // save_every_steps, and once save_every_seconds have passed since the last save (or since opening).
    // A request is consumed by the call that reports it.
    bool should_save(int64_t step);
    // Makes the next should_save() true. Async-signal-safe: one lock-free atomic store.
    void request_save() noexcept { save_requested_.store(true, std::memory_order_relaxed); }
    // Indices on disk, ascending (waits for background saves first).
    std::vector<int64_t> list();
    // Restores into `vars` from checkpoint `index`, or from the newest readable one when index is nullopt;
    // returns the index restored. Error(not_found) when there is none.
    int64_t restore(VarCollection& vars, std::optional<int64_t> index);
    // Reads a whole checkpoint into a new collection; returns it with its index.
    std::pair<VarCollection, int64_t> read(std::optional<int64_t> index);
    // Waits for background saves; throws the first unreported error.
    void wait();
    // wait(), then stops the background writer and releases the directory (unless a newer manager of this process
    // took it over: its lock stays with that one). Idempotent.
    void close();
    // Removes the temporaries interrupted saves left in the directory: what the first save removes (see claim())
    // and the temporary of any other ckpt save there (TemporaryKinds::any), but none that a live save is writing
    // where the storage tells (Storage::temp_in_use); with dry_run, only finds them. Takes the directory first:
    // Error(busy) naming the holder while another process's manager holds it; a dry run takes nothing and writes
    // nothing, and is refused the same way. Calls `each` for every one removed (dry_run: found) and returns how
    // many. Error(invalid) when read-only (except for a dry run) or over several ranks; Error(io) after trying them
    // all when one would not go.
    size_t clean(bool dry_run, const std::function<void(const StaleTemporary&)>& each);
    // Whether this manager owns its directory: it has saved (or otherwise claimed it), and no newer manager of this
    // process took it over since.
    bool owns_directory() const;

private:
    struct Step {
        int64_t index;
        bool sharded;  // a step directory with a manifest (it hides a file of the same index)
        Format format = Format::npz;  // a file's
    };
    // The checkpoints on disk, ascending, without waiting for background saves.
    std::vector<Step> steps() const;
    std::vector<Step> steps_in(const Storage::Entries& entries) const;  // of dir_'s listing
    std::optional<Step> find_step(int64_t index) const;
    std::string path_of(const Step& step) const;
    std::string file_path(int64_t index) const;  // of a checkpoint this manager saves (its format)
    // After a save of `index`: removes a file of that index in the other format, once a listing showed files of the
    // other format (a run that changed its format); a run in one format spends no request on it.
    void remove_other_format(int64_t index);
    std::string step_path(int64_t index) const;
    // The metadata of a checkpoint (the file's metadata member, or the step's manifest), reading nothing else.
    Metadata metadata_of(const Step& step) const;
    // Restores or reads one checkpoint (the attempt of with_checkpoint).
    using Attempt = std::function<void(Container*, ShardedStep*)>;
    void remove_stale_temporaries();
    // Before anything that writes or deletes in the directory: the first call locks it — Error(busy) naming the
    // holder when another process holds it — or takes it over from an older manager of this process (a warning
    // in the log), then removes stale temporaries (not after a takeover: the older manager's save in flight may
    // be writing them). Later calls throw Error(busy) once a newer manager of this process took it over.
    void claim(bool clean_up = true);
    // claim() on rank 0, every rank getting its error (collective).
    void claim_collectively();
    // Runs `work`, which deletes in the directory, while this manager owns it — a takeover waits for it to end —
    // and returns true; returns false, logging why `what` was skipped, when another manager took the directory.
    bool while_owner(const std::string& what, const std::function<void()>& work);
    std::vector<int64_t> on_disk() const;  // list() without waiting for background saves
    // Fails with "<what>: it needs up to X and Y is free" when the storage says `needed` bytes will not fit.
    void check_disk_space(uint64_t needed, const std::string& what) const;
    void warn_if_disk_low(uint64_t checkpoint_bytes, size_t on_disk) const;
    // Returns how many checkpoints are left on disk, or nullopt when it did not list them (keep off, a failure).
    std::optional<size_t> apply_retention(int64_t just_saved);
    std::optional<size_t> retain(int64_t just_saved);  // apply_retention's work, while this manager owns the directory
    int64_t now_ns() const;
    // What retention needs to know of each checkpoint on disk, ascending; unreadable files record nothing.
    // `owned`: this manager owns the directory (the caller knows; asking would deadlock inside while_owner), so
    // what it knows of a checkpoint holds.
    std::vector<CheckpointFacts> facts(const std::vector<Step>& steps, bool owned);
    // Keeps what retention knows of a checkpoint this manager saved or read (nullopt: forgets it, as it is being
    // replaced or deleted).
    void remember_facts(const Step& step, std::optional<CheckpointFacts> facts);
    void save_sharded_step(const VarCollection& vars, int64_t index, int64_t saved_at, const Metrics& metrics);
    // The newest checkpoint file and sharded step of a listing: where incremental saves may take their bases.
    static SaveBases::Newest newest(const std::vector<Step>& steps);
    // Commits the asynchronous sharded step whose shard is being written, if any (collective); throws its error.
    void finish_pending();
    // Every rank runs `check` (its own arguments) and passes its index (-1: the latest): every rank then throws the
    // lowest failing rank's error, or one naming the indices when the ranks passed different ones.
    void agree_on_arguments(const std::function<void()>& check, int64_t index, const char* what);
    // Rank 0, once a sharded step is committed and before any rank returns: the log, the file of that index
    // replaced, retention.
    void committed(int64_t index, double commit_ms);
    // Runs `attempt` on checkpoint `index`, or on the newest first and then older ones when index is nullopt and
    // fallback is on, skipping (and logging) those that are corrupt or unreadable.
    int64_t with_checkpoint(std::optional<int64_t> index, const Attempt& attempt);
    // Returns the size of the file it read (0 for a sharded step).
    uint64_t try_checkpoint(const Step& step, const Attempt& attempt);
    // path() of an index forgets the step last restored, which it answers without listing (a save may replace it).
    void forget_restored();
    void log_resuming(const Step& step) const;
    void log(int level, const std::string& message) const;
    // Says why unfinished uploads are not looked for (find_stale_temporaries' `unlisted`), if they are not.
    void log_unlisted(const std::string& why) const;

    std::string dir_;
    Options options_;
    // This manager's hold on the directory (the storage's lock, shared with the newer managers of this process
    // that take it over); null until the first save.
    std::shared_ptr<DirClaim> claim_;
    std::shared_ptr<SnapshotPool> snapshots_;
    std::unique_ptr<Writer> writer_;
    // An asynchronous sharded save: its shard on the writer's thread, its commit at the next collective call.
    struct Pending {
        ShardedSave save;
        std::exception_ptr failed;  // this rank's part already failed
    };
    std::optional<Pending> pending_;
    // facts() of the checkpoints read while this manager owned the directory, by (index, sharded); retention runs
    // on the writer's thread, best() on the caller's.
    std::mutex facts_mutex_;
    std::map<std::pair<int64_t, bool>, CheckpointFacts> known_facts_;
    std::atomic<bool> save_requested_{false};
    std::unique_ptr<SaveBases> bases_;                    // incremental saves: what each save shares with
    mutable std::atomic<bool> other_format_seen_{false};  // a listing showed a checkpoint file of the other format
    // The checkpoint the last restore or read took, until a save: path() of its index needs no listing.
    mutable std::mutex restored_mutex_;
    std::optional<Step> restored_;
    // Whether the free space was judged already: by the first restore or save (not by opening, which reads nothing).
    std::atomic<bool> space_told_{false};
    int64_t last_save_ns_ = 0;  // should_save's reference for save_every_seconds: opening, then each save
    static_assert(std::atomic<bool>::is_always_lock_free, "request_save must be async-signal-safe");
};

}  // namespace ckpt::core
