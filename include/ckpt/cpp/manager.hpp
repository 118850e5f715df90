// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/manager.hpp — ckpt::Manager, objax's Checkpoint: a directory of numbered checkpoints (ckpt_manager).
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_MANAGER_HPP
#define CKPT_CPP_MANAGER_HPP

#include <ckpt/cpp/comm.hpp>
#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/options.hpp>
#include <ckpt/cpp/storage.hpp>
#include <ckpt/cpp/vars.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

// ---------------------------------------------------------------------------------------------- checkpoint manager

inline constexpr int64_t latest = CKPT_LATEST;

enum class LogLevel : int {
    info = CKPT_LOG_INFO,        // "Resuming from …", "No checkpoints found"
    warning = CKPT_LOG_WARNING,  // a corrupt checkpoint skipped, a stale temporary removed
};

// Whether lower (min) or higher (max) values of the best metric are better.
enum class BestMode : uint32_t { min = CKPT_BEST_MIN, max = CKPT_BEST_MAX };

// ckpt_manager_options. Unset values keep ckpt's defaults.
struct ManagerOptions {
    std::optional<int32_t> keep;  // newest checkpoints kept; <= 0 keeps all; unset = ckpt's default (10)
    int64_t keep_every = 0;       // also keep indices that are multiples of this; 0 = off
    bool async = false;           // saves run on a background writer (CKPT_MANAGER_ASYNC)
    bool fallback = true;         // restore(latest) tries older checkpoints past unreadable ones
    bool make_dir = true;         // create the directory (false: CKPT_MANAGER_NO_MAKEDIR)
    bool verbose = false;         // log to stderr when there is no log function (CKPT_MANAGER_VERBOSE)
    // For tools and evaluators: open a directory another manager may hold, without a lock, cleanup or saves
    // (CKPT_MANAGER_READ_ONLY).
    bool read_only = false;
    uint32_t queue_depth = 0;     // async: saves in flight before save() blocks; 0 = 1
    std::optional<std::string> subdir;  // nullopt = "ckpt" (objax's DIR_NAME); "" = the logdir itself
    Options npz;                        // how saves write (reads detect the layout); leave npz.storage unset
    // Called from the thread doing the work (a background save's, for retention messages); must not throw.
    std::function<void(LogLevel level, std::string_view message)> log;
    std::shared_ptr<Storage> storage;  // null = the local filesystem
    // Retention policies that add to keep (a checkpoint is kept when any policy keeps it):
    int32_t keep_best = 0;                   // also keep the best N by best_metric; 0 = off
    std::string best_metric;                 // the metric of keep_best and best(); "" = none
    BestMode best_mode = BestMode::min;
    int64_t keep_seconds = 0;                // also keep what was saved within the last S seconds; 0 = off
    // When should_save() says to save:
    int64_t save_every_steps = 0;            // at multiples of this step; 0 = off
    int64_t save_every_seconds = 0;          // once this long has passed since the last save or opening; 0 = off
    // async: the copies held by queued and running saves never exceed this; a save larger than the whole budget is
    // written at once from the caller's arrays, without a copy. 0 = no limit
    uint64_t max_staging_bytes = 0;
    // Makes the manager collective over the communicator's ranks (sharded checkpoints, docs/distributed.md).
    std::optional<CommHandle> comm;
    // Incremental saves (false: CKPT_MANAGER_FULL_SAVES): where the storage can share blocks between files (XFS with
    // reflink, btrfs; Storage::memory() copies instead), each file records its chunk hashes and a save shares the
    // 16 KiB chunks that did not change with the checkpoint saved before it. Every file stays complete.
    bool incremental = true;
    // Incremental saves: every full_every-th save of the manager shares nothing (files that share blocks share a media
    // error); 0 = never.
    int64_t full_every = 0;
};

// A metric of a save: recorded as "ckpt.metric.<name>" in the checkpoint's metadata.
struct Metric {
    std::string name;
    double value;
};

// A temporary an interrupted save left, as Manager::clean reports it: its path (the manager's directory joined with
// its name) and whether it is a directory.
struct StaleTemporary {
    std::string path;
    bool is_dir = false;
    bool upload = false;  // an unfinished write of the file at path (an incomplete multipart upload on S3)
    bool operator==(const StaleTemporary& o) const {
        return path == o.path && is_dir == o.is_dir && upload == o.upload;
    }
};

// What Manager::read returns: a new collection, and the index it came from (auto [vars, idx] = m.read()).
struct ReadResult {
    Vars vars;
    int64_t index;
};

// A ckpt_manager: objax's Checkpoint, a directory <logdir>/<subdir> of numbered checkpoints that a training
// program saves into and resumes from, with retention, fallback past corrupt files and a lock (ckpt.h has every
// rule). With async, save errors surface at the next save, wait or close.
class Manager {
public:
    explicit Manager(const std::string& logdir, const ManagerOptions& options = {})
        : callbacks_(std::make_unique<Callbacks>(options)) {
        detail::refuse_npz_storage(options.npz, options.storage, "ckpt::Manager");
        detail::CNpzOptions npz(options.npz, &callbacks_->npz, false);
        detail::StorageRef storage(options.storage);
        ckpt_manager_options c;
        detail::check(ckpt_manager_options_init(&c, CKPT_MANAGER_OPTIONS_VERSION));
        if (options.keep) c.keep = *options.keep;
        c.keep_every = options.keep_every;
        c.flags = (options.async ? CKPT_MANAGER_ASYNC : 0u) | (options.fallback ? 0u : CKPT_MANAGER_NO_FALLBACK) |
                  (options.make_dir ? 0u : CKPT_MANAGER_NO_MAKEDIR) | (options.verbose ? CKPT_MANAGER_VERBOSE : 0u) |
                  (options.read_only ? CKPT_MANAGER_READ_ONLY : 0u) |
                  (options.incremental ? 0u : CKPT_MANAGER_FULL_SAVES);
        c.queue_depth = options.queue_depth;
        c.subdir = options.subdir ? options.subdir->c_str() : nullptr;
        c.npz = &npz.c;
        if (callbacks_->log) {
            c.log = &Callbacks::log_fn;
            c.log_payload = callbacks_.get();
        }
        c.storage = storage.get();
        c.keep_best = options.keep_best;
        c.best_metric = options.best_metric.empty() ? nullptr : options.best_metric.c_str();
        c.best_mode = static_cast<uint32_t>(options.best_mode);
        c.keep_seconds = options.keep_seconds;
        c.save_every_steps = options.save_every_steps;
        c.save_every_seconds = options.save_every_seconds;
        c.max_staging_bytes = options.max_staging_bytes;
        if (options.comm) c.comm = options.comm->native();
        c.full_every = options.full_every;
        detail::check(ckpt_manager_open(&m_, logdir.c_str(), &c));
    }
    // Closes (waiting for background saves), dropping their errors: call close() to see them.
    ~Manager() { ckpt_manager_close(m_); }
    Manager(Manager&& other) noexcept
        : m_(std::exchange(other.m_, nullptr)),
          callbacks_(std::move(other.callbacks_)) {}
    Manager& operator=(Manager&& other) noexcept {
        if (this != &other) {
            ckpt_manager_close(m_);
            m_ = std::exchange(other.m_, nullptr);
            callbacks_ = std::move(other.callbacks_);
        }
        return *this;
    }
    Manager(const Manager&) = delete;
    Manager& operator=(const Manager&) = delete;

    ckpt_manager* native() const noexcept { return m_; }
    explicit operator bool() const noexcept { return m_ != nullptr; }

    // Saves vars as checkpoint idx (>= 0), then applies retention. async: the arrays are copied first.
    void save(const Vars& vars, int64_t idx) { detail::check(ckpt_manager_save(m_, vars.native(), idx)); }
    // save(), also recording the metrics in the checkpoint's metadata (for metric(), best() and keep_best).
    void save(const Vars& vars, int64_t idx, const std::vector<Metric>& metrics) {
        std::vector<const char*> names;
        std::vector<double> values;
        names.reserve(metrics.size());
        values.reserve(metrics.size());
        for (const Metric& m : metrics) {
            names.push_back(m.name.c_str());
            values.push_back(m.value);
        }
        detail::check(ckpt_manager_save_metrics(m_, vars.native(), idx, names.data(), values.data(), metrics.size()));
    }
    // The value of metric `name` that checkpoint idx recorded, or nullopt when it records none.
    // Error(CKPT_ENOTFOUND) when there is no checkpoint idx.
    std::optional<double> metric(int64_t idx, const std::string& name) {
        double out = 0;
        const int rc = ckpt_manager_metric(m_, idx, name.c_str(), &out);
        if (rc == CKPT_ENOTFOUND) {
            const std::vector<int64_t> indices = list();
            if (std::binary_search(indices.begin(), indices.end(), idx)) return std::nullopt;
        }
        detail::check(rc);
        return out;
    }
    // The checkpoint with the best value of best_metric (ties go to the newer; NaN never is), or nullopt.
    std::optional<int64_t> best() {
        int64_t idx = -1;
        const int rc = ckpt_manager_best(m_, &idx);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        detail::check(rc);
        return idx;
    }
    // Whether to save at step: after request_save() (consumed by the call that reports it), at multiples of
    // save_every_steps, or once save_every_seconds have passed.
    bool should_save(int64_t step) {
        const int rc = ckpt_manager_should_save(m_, step);
        if (rc < 0) detail::check(rc);
        return rc == 1;
    }
    // Makes the next should_save() true. Async-signal-safe, for a SIGTERM handler: one atomic store.
    void request_save() noexcept { ckpt_manager_request_save(m_); }
    // Restores vars in place from checkpoint idx, or the newest readable one for `latest` (falling back past corrupt
    // files), and returns the index restored. Error(CKPT_ENOTFOUND) when there is no such checkpoint,
    // Error(CKPT_EMISMATCH) naming every missing variable.
    int64_t restore(Vars& vars, int64_t idx = latest) {
        int64_t restored = -1;
        detail::check(ckpt_manager_restore(m_, vars.native(), idx, &restored));
        return restored;
    }
    // restore(vars, latest) for a training program's start: nullopt when there is no checkpoint yet (objax's
    // restore returning 0), the index restored otherwise.
    std::optional<int64_t> resume(Vars& vars) {
        int64_t restored = -1;
        const int rc = ckpt_manager_restore(m_, vars.native(), latest, &restored);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        detail::check(rc);
        return restored;
    }
    // Reads checkpoint idx (or the newest readable one) into a new collection.
    ReadResult read(int64_t idx = latest) {
        ckpt_vars* out = nullptr;
        int64_t restored = -1;
        detail::check(ckpt_manager_read(m_, idx, &out, &restored));
        return ReadResult{Vars(out), restored};
    }
    // The newest checkpoint index on disk (not validated), or nullopt if there is none.
    std::optional<int64_t> latest_index() {
        int64_t idx = -1;
        const int rc = ckpt_manager_latest(m_, &idx);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        detail::check(rc);
        return idx;
    }
    // Checkpoint indices, ascending.
    std::vector<int64_t> list() {
        std::vector<int64_t> out(8);
        for (;;) {
            size_t count = 0;
            const int rc = ckpt_manager_list(m_, out.data(), out.size(), &count);
            if (rc == CKPT_EBUFS && count > out.size()) {  // more checkpoints than room: ask again with enough
                out.resize(count);
                continue;
            }
            detail::check(rc);
            out.resize(count);
            return out;
        }
    }
    // The path of checkpoint idx.
    std::string path(int64_t idx) {
        std::string buf(256, '\0');
        for (;;) {
            const int rc = ckpt_manager_path(m_, idx, &buf[0], buf.size());
            if (rc == CKPT_EBUFS && buf.size() < (size_t(1) << 24)) {
                buf.resize(buf.size() * 4);
                continue;
            }
            detail::check(rc);
            buf.resize(std::strlen(buf.c_str()));
            return buf;
        }
    }
    // Removes the temporaries that interrupted saves left in the directory (those of checkpoints, sharded saves'
    // staging directories, steps without a manifest, ".NAME.npz.tmp-XXXXXX" of any ckpt save, and unfinished writes
    // such as S3's incomplete multipart uploads) and returns them; with dry_run, only finds them. Throws Error(CKPT_EBUSY) while a manager of another process holds the directory.
    std::vector<StaleTemporary> clean(bool dry_run = false) {
        std::vector<StaleTemporary> found;
        const auto record = [](const char* path, int is_dir, void* payload) {
            auto& out = *static_cast<std::vector<StaleTemporary>*>(payload);
            try {
                out.push_back({path, is_dir == CKPT_CLEAN_DIR, is_dir == CKPT_CLEAN_UPLOAD});
            } catch (...) {
                // Out of memory: this one goes unreported; the count below tells.
            }
        };
        size_t count = 0;
        detail::check(ckpt_manager_clean(m_, dry_run ? CKPT_CLEAN_DRY_RUN : 0u, record, &found, &count));
        if (found.size() != count) throw std::bad_alloc();
        return found;
    }
    // Waits for background saves; throws the first error not yet reported.
    void wait() { detail::check(ckpt_manager_wait(m_)); }
    // Waits for background saves, unlocks the directory and frees the manager, throwing the first unreported error;
    // the object is empty after, whatever happened.
    void close() {
        const int rc = ckpt_manager_close(std::exchange(m_, nullptr));
        callbacks_.reset();
        detail::check(rc);
    }

private:
    struct Callbacks {
        detail::NpzCallbacks npz;
        std::function<void(LogLevel, std::string_view)> log;
        explicit Callbacks(const ManagerOptions& o) : npz(o.npz), log(o.log) {}
        static void log_fn(int level, const char* message, void* payload) noexcept {
            try {
                static_cast<Callbacks*>(payload)->log(static_cast<LogLevel>(level), message);
            } catch (...) {
                // A log line cannot fail the work it reports on.
            }
        }
    };

    ckpt_manager* m_ = nullptr;
    std::unique_ptr<Callbacks> callbacks_;  // what the manager's callbacks point to, for its whole life
};

// objax's checkpoint_idx: "…/0000000042.npz" -> 42; nullopt if the file name is not a checkpoint's.
inline std::optional<int64_t> checkpoint_idx(const std::string& filename) noexcept {
    const int64_t idx = ckpt_checkpoint_idx(filename.c_str());
    if (idx < 0) return std::nullopt;
    return idx;
}

}  // namespace ckpt

#endif  // CKPT_CPP_MANAGER_HPP
