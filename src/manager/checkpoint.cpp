// SPDX-License-Identifier: Apache-2.0
#include "manager/checkpoint.hpp"
#include "manager/dir_claim.hpp"
#include "manager/temporaries.hpp"

#include "core/decimal_index.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include <sys/stat.h>
#include <unistd.h>

namespace ckpt::core {

namespace {

// Runs work on rank 0 alone, and makes every rank throw its error ("<message> (on rank 0 of N)") or go on.
void on_rank_zero_for_all(Comm& comm, const std::function<void()>& work) {
    std::string error;
    int code = 0;
    if (comm.rank() == 0) {
        try {
            work();
        } catch (const Error& e) {
            code = static_cast<int>(e.code());
            error = e.what();
        }
    }
    code = static_cast<int>(comm.all_reduce(code, Comm::Reduce::min));
    error = broadcast_string(comm, error, 0);
    if (code != 0) throw Error(static_cast<Code>(code), fmt::format("{} (on rank 0 of {})", error, comm.size()));
}

}  // namespace

std::optional<CheckpointFile> checkpoint_file(const std::string& filename) {
    const std::string base = base_name(filename);
    const std::string_view name = base;
    for (const Format format : {Format::npz, Format::safetensors}) {
        const std::string_view suffix = format_suffix(format);
        if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) continue;
        const std::optional<int64_t> index = parse_padded_index(name.substr(0, name.size() - suffix.size()));
        if (!index) return std::nullopt;
        return CheckpointFile{*index, format};
    }
    return std::nullopt;
}

std::optional<int64_t> checkpoint_index(const std::string& filename) {
    const std::optional<CheckpointFile> file = checkpoint_file(filename);
    return file ? std::optional<int64_t>(file->index) : std::nullopt;
}

std::string checkpoint_name(int64_t index, Format format) {
    return padded_index(index) + std::string(format_suffix(format));
}

namespace {
[[noreturn]] void fail_taken_over(const std::string& dir) {
    fail(Code::busy, "{}: another checkpoint manager of this process took the directory over; this one can no "
                     "longer save into it (use the newer manager)", dir);
}
}  // namespace

void CheckpointManager::claim(bool clean_up) {
    if (claim_) {
        if (!claim_->owned()) fail_taken_over(dir_);
        return;
    }
    bool took_over = false;
    std::shared_ptr<DirClaim> claim = DirClaim::take(options_.storage, dir_, &took_over);
    claim_ = claim;
    if (took_over) {
        log(warning, fmt::format("{}: took the directory over from another checkpoint manager of this process, "
                                 "whose saves now fail", dir_));
        return;  // its save in flight may be writing a temporary: nothing is cleaned up
    }
    if (clean_up) claim->while_owned([this] { remove_stale_temporaries(); });
}

void CheckpointManager::claim_collectively() {
    on_rank_zero_for_all(*options_.comm, [this] { claim(); });
}

bool CheckpointManager::owns_directory() const { return claim_ && claim_->owned(); }

bool CheckpointManager::while_owner(const std::string& what, const std::function<void()>& work) {
    if (claim_ && claim_->while_owned(work)) return true;
    log(warning, fmt::format("{}: {} skipped: another checkpoint manager of this process took the directory over",
                             dir_, what));
    return false;
}

void CheckpointManager::Options::check(const std::string& dir) const {
    const auto not_negative = [&](int64_t value, const char* name) {
        if (value < 0) fail(Code::invalid, "{}: {} {} is negative", dir, name, value);
    };
    not_negative(keep_every, "keep_every");
    not_negative(keep_seconds, "keep_seconds");
    not_negative(save_every_steps, "save_every_steps");
    not_negative(save_every_seconds, "save_every_seconds");
    not_negative(full_every, "full_every");
    if (!valid_utf8(best_metric)) fail(Code::invalid, "{}: best_metric is not valid UTF-8", dir);
    if (keep_best > 0 && best_metric.empty())
        fail(Code::invalid, "{}: keep_best {} needs a best_metric", dir, keep_best);
    if (read_only && async)
        fail(Code::invalid, "{}: a read-only manager makes no saves, so asynchronous saves have no use", dir);
    if (format == Format::automatic) fail(Code::invalid, "{}: a manager saves in one format, npz or safetensors", dir);
    if (format == Format::safetensors && (npz_write.deflate || npz_write.layout == Layout::objax))
        fail(Code::invalid, "{}: safetensors checkpoints have no {}: save them stored and plain, or as .npz", dir,
             npz_write.deflate ? "compression" : "objax layout");
    if (comm && format == Format::safetensors)
        fail(Code::invalid,
             "{}: sharded steps are saved as .npz shards; a manager with a communicator cannot save "
             "safetensors yet",
             dir);
}

CheckpointManager::CheckpointManager(std::string dir, Options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
    options_.check(dir_);
    if (!options_.storage) options_.storage = posix_storage();
    options_.npz_write.manager_keys = true;  // saves write the "ckpt." keys saved_metadata makes
    Storage& storage = *options_.storage;
    const auto prepare = [&] {
        if (options_.make_dir && !options_.read_only) {
            storage.make_dirs(dir_);
        } else {
            steps();  // throws not_found for a missing directory
        }
        // Nothing else: another manager may hold the directory and save meanwhile. The first save locks it.
    };
    if (!options_.comm) {
        prepare();
    } else {
        // Rank 0 makes (or finds) the directory, and from its first save owns it (its lock and its cleanup); the
        // others wait for it, and every rank gets rank 0's error.
        on_rank_zero_for_all(*options_.comm, prepare);
    }
    const auto kind = options_.async ? Writer::Kind::queue : Writer::Kind::simple;
    writer_ = std::make_unique<Writer>(kind, options_.queue_depth, options_.storage);
    if (options_.async) snapshots_ = SnapshotPool::create(options_.queue_depth, options_.max_staging_bytes);
    last_save_ns_ = now_ns();
    bool clones = false;
    if (options_.incremental && !options_.read_only) {
        try {
            clones = options_.storage->clones(dir_);
        } catch (const Error&) {
            // saves are full ones
        }
    }
    SaveBases::Env env;
    env.storage = options_.storage.get();
    env.file_path = [this](int64_t index) { return file_path(index); };
    env.list = [this] { return newest(steps()); };
    env.log = [this](const std::string& line) { log(info, line); };
    std::string why_full;
    if (options_.incremental && !options_.read_only && !clones)
        why_full = fmt::format(
            "Saving every checkpoint in full: the storage of {} cannot share blocks between files (incremental "
            "saves need a file system with reflinks, XFS or btrfs, or S3)",
            dir_);
    bases_ = std::make_unique<SaveBases>(std::move(env), clones, options_.full_every, std::move(why_full));
    // Opening lists nothing more and reads no file: the free space is judged at the first restore or save, which
    // list the directory and open or write a checkpoint anyway.
}

namespace {
std::string byte_size(uint64_t bytes) {
    if (bytes < (uint64_t{1} << 20)) return fmt::format("{} bytes", bytes);
    if (bytes < (uint64_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30));
}
}  // namespace

// The free space a manager needs: room for the checkpoints `keep` has yet to accumulate plus the one being
// written (one more when keep is off, or already reached — retention makes room after each save).
void CheckpointManager::warn_if_disk_low(uint64_t checkpoint_bytes, size_t on_disk) const {
    const std::optional<uint64_t> free = options_.storage->free_bytes(dir_);
    if (!free) return;
    const uint64_t keep = options_.keep > 0 ? static_cast<uint64_t>(options_.keep) : 0;
    const uint64_t more = keep > on_disk ? keep - on_disk + 1 : 1;
    if (*free / more >= checkpoint_bytes) return;
    log(warning, fmt::format("{}: {} free, less than the {} that {} more checkpoint(s) of the last size ({}) will need",
                             dir_, byte_size(*free), byte_size(more * checkpoint_bytes), more,
                             byte_size(checkpoint_bytes)));
}

// Refuses, before any byte is written, a save the file system has no room for (a full disk found half way
// would fail too, but only after filling it).
void CheckpointManager::check_disk_space(uint64_t needed, const std::string& what) const {
    const std::optional<uint64_t> free = options_.storage->free_bytes(dir_);
    if (!free || *free >= needed) return;
    fail(Code::io, "{}: it needs up to {} and {} is free", what, byte_size(needed), byte_size(*free));
}

int64_t CheckpointManager::now_ns() const {
    if (options_.now_ns) return options_.now_ns();
    using namespace std::chrono;
    return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

Metadata CheckpointManager::metadata_of(const Step& step) const {
    if (step.sharded) return ShardedStep(*options_.storage, step_path(step.index), options_.npz_read).manifest().metadata;
    // Opening reads the file's directory or header (and an npz file's metadata member), never the arrays.
    ContainerReadOptions read;
    read.npz = options_.npz_read;
    return open_container(*options_.storage, path_of(step), read)->metadata();
}

std::vector<CheckpointFacts> CheckpointManager::facts(const std::vector<Step>& steps, bool owned) {
    // While this manager owns the directory nobody else writes checkpoints into it, and a committed checkpoint
    // never changes: what was read once (or saved by this manager) holds until this manager replaces or deletes it.
    std::vector<CheckpointFacts> out;
    out.reserve(steps.size());
    for (const Step& step : steps) {
        if (owned) {
            std::lock_guard<std::mutex> lock(facts_mutex_);
            const auto known = known_facts_.find({step.index, step.sharded});
            if (known != known_facts_.end()) {
                out.push_back(known->second);
                continue;
            }
        }
        try {
            out.push_back(checkpoint_facts(step.index, metadata_of(step), options_.best_metric));
        } catch (const Error&) {
            out.push_back(CheckpointFacts{step.index, std::nullopt, std::nullopt});  // unreadable: neither best nor recent
            continue;  // and perhaps readable later: not kept
        }
        if (owned) remember_facts(step, out.back());
    }
    return out;
}

void CheckpointManager::remember_facts(const Step& step, std::optional<CheckpointFacts> facts) {
    std::lock_guard<std::mutex> lock(facts_mutex_);
    if (facts)
        known_facts_[{step.index, step.sharded}] = *facts;
    else
        known_facts_.erase({step.index, step.sharded});
}

CheckpointManager::~CheckpointManager() {
    try {
        close();
    } catch (...) {
        // Documented: errors nobody asked for by now are dropped.
    }
}

std::string CheckpointManager::file_path(int64_t index) const {
    return join_path(dir_, checkpoint_name(index, options_.format));
}
void CheckpointManager::remove_other_format(int64_t index) {
    if (!other_format_seen_) return;
    const Format other = options_.format == Format::npz ? Format::safetensors : Format::npz;
    try {  // best effort, as retention: the save has succeeded, and the listing shows this manager's format first
        options_.storage->remove(join_path(dir_, checkpoint_name(index, other)));
        log(info, fmt::format("Removed {}, replaced by checkpoint {} saved as {}", checkpoint_name(index, other), index,
                              format_name(options_.format)));
    } catch (const Error&) {}
}

std::string CheckpointManager::step_path(int64_t index) const { return join_path(dir_, step_dir_name(index)); }

std::string CheckpointManager::path(int64_t index) const {
    {
        std::lock_guard<std::mutex> lock(restored_mutex_);
        if (restored_ && restored_->index == index) return path_of(*restored_);
    }
    const std::optional<Step> step = find_step(index);
    return path_of(step.value_or(Step{index, false, options_.format}));
}

std::string CheckpointManager::path_of(const Step& step) const {
    return step.sharded ? step_path(step.index) : join_path(dir_, checkpoint_name(step.index, step.format));
}

std::vector<CheckpointManager::Step> CheckpointManager::steps() const {
    return steps_in(options_.storage->list_entries(dir_));  // one request on an object store
}

std::vector<CheckpointManager::Step> CheckpointManager::steps_in(const Storage::Entries& entries) const {
    Storage& storage = *options_.storage;
    std::vector<Step> out;
    std::set<int64_t> sharded;
    for (const std::string& name : entries.dirs) {
        const auto i = step_dir_index(name);
        if (!i) continue;
        // Committed steps have their manifest: the rename that made the directory carried it, or it was written last.
        try {
            if (!has_manifest(storage, join_path(dir_, name))) continue;
        } catch (const Error&) {
            continue;  // gone meanwhile (retention of another reader's view), or unreadable: not a checkpoint
        }
        sharded.insert(*i);
        out.push_back(Step{*i, true});
    }
    for (const std::string& name : entries.files) {
        const std::optional<CheckpointFile> f = checkpoint_file(name);
        if (!f) continue;
        if (f->format != options_.format) other_format_seen_ = true;
        if (!sharded.count(f->index)) out.push_back(Step{f->index, false, f->format});
    }
    // An index saved in both formats (a run that changed its format) counts once: as this manager saves it.
    std::sort(out.begin(), out.end(), [&](const Step& a, const Step& b) {
        return a.index != b.index ? a.index < b.index : (a.format == options_.format) > (b.format == options_.format);
    });
    out.erase(std::unique(out.begin(), out.end(), [](const Step& a, const Step& b) { return a.index == b.index; }),
              out.end());
    return out;
}

SaveBases::Newest CheckpointManager::newest(const std::vector<Step>& steps) {
    SaveBases::Newest out;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
        std::optional<int64_t>& slot = it->sharded ? out.step : out.file;
        if (!slot) slot = it->index;
    }
    return out;
}

std::optional<CheckpointManager::Step> CheckpointManager::find_step(int64_t index) const {
    try {
        for (const Step& step : steps())
            if (step.index == index) return step;
    } catch (const Error&) {
    }
    return std::nullopt;
}

void CheckpointManager::log(int level, const std::string& message) const {
    if (options_.log) options_.log(level, message);
}

void CheckpointManager::log_unlisted(const std::string& why) const {
    if (!why.empty())
        log(warning,
            fmt::format("{}: not looking for unfinished uploads of interrupted saves, which the storage cannot "
                        "list ({}); saves and clean go on without",
                        dir_, why));
}

void CheckpointManager::remove_stale_temporaries() {
    const Storage::Entries entries = options_.storage->list_entries(dir_);
    // The first save's base, from the same listing: this runs before that save is handed to the writer. The listing
    // also tells whether the directory holds checkpoints of the other format (remove_other_format).
    const std::vector<Step> listed = steps_in(entries);
    bases_->listed(newest(listed));
    std::string unlisted;
    const std::vector<StaleTemporary> found =
        find_stale_temporaries(*options_.storage, dir_, TemporaryKinds::checkpoints, &entries, &unlisted);
    log_unlisted(unlisted);
    remove_temporaries(
        *options_.storage, found,
        [this](const StaleTemporary& t) {
            log(warning, fmt::format("Removed stale temporary {} {} (left by an interrupted save)", kind_of(t), t.path));
        },
        [this](const StaleTemporary& t, const std::string& why) {
            log(warning, fmt::format("Could not remove stale temporary {}: {}", kind_of(t), why));
        });
}

size_t CheckpointManager::clean(bool dry_run, const std::function<void(const StaleTemporary&)>& each) {
    if (options_.read_only && !dry_run)
        fail(Code::invalid, "{}: the manager was opened read-only (CKPT_MANAGER_READ_ONLY)", dir_);
    if (options_.comm && options_.comm->size() > 1)
        fail(Code::invalid, "{}: clean is for one process, not a manager over {} ranks", dir_, options_.comm->size());
    writer_->drain();  // this manager's own saves in flight are not stale
    std::string unlisted;
    if (dry_run && !owns_directory()) {
        // A dry run only reads: it takes no lock (which would create the lock file), but it is refused as a clean
        // is while another manager holds the directory, whose saves may be writing what it would list.
        options_.storage->check_unlocked(dir_);
        const auto found = find_stale_temporaries(*options_.storage, dir_, TemporaryKinds::any, nullptr, &unlisted);
        log_unlisted(unlisted);
        for (const StaleTemporary& t : found) each(t);
        return found.size();
    }
    claim(false);
    size_t done = 0;
    const bool owned = while_owner("clean", [&] {
        const auto found = find_stale_temporaries(*options_.storage, dir_, TemporaryKinds::any, nullptr, &unlisted);
        log_unlisted(unlisted);
        if (dry_run) {
            for (const StaleTemporary& t : found) each(t);
            done = found.size();
            return;
        }
        std::string first_failure;
        remove_temporaries(
            *options_.storage, found,
            [&](const StaleTemporary& t) {
                ++done;
                each(t);
                log(info, fmt::format("Removed stale temporary {} {}", kind_of(t), t.path));
            },
            [&](const StaleTemporary&, const std::string& why) {
                if (first_failure.empty()) first_failure = why;
            });
        if (!first_failure.empty()) fail(Code::io, "{}", first_failure);
    });
    if (!owned) fail(Code::busy, "{}: another checkpoint manager of this process took the directory over", dir_);
    return done;
}

std::vector<int64_t> CheckpointManager::list() {
    writer_->drain();
    return on_disk();
}

std::vector<int64_t> CheckpointManager::on_disk() const {
    std::vector<int64_t> indices;
    for (const Step& step : steps()) indices.push_back(step.index);
    return indices;
}

std::optional<size_t> CheckpointManager::apply_retention(int64_t just_saved) {
    if (options_.keep <= 0) return std::nullopt;
    // A newer manager of this process that took the directory over decides what stays: this one's retention
    // (of a save that was in flight when it took over) must not delete beside it.
    std::optional<size_t> left;
    while_owner(fmt::format("retention after checkpoint {}", just_saved), [&] { left = retain(just_saved); });
    return left;
}

std::optional<size_t> CheckpointManager::retain(int64_t just_saved) {
    // Retention runs once the new checkpoint is durable, and is best effort: running out of memory here, like a
    // storage error, leaves old checkpoints for the next save's retention instead of failing a save that
    // succeeded.
    try {
        std::vector<Step> on_disk;
        try {
            on_disk = steps();
        } catch (const Error& e) {
            log(warning, fmt::format("Retention could not list the checkpoints: {}", e.what()));
            return std::nullopt;
        }
        RetentionPolicy policy;
        policy.keep = options_.keep;
        policy.keep_every = options_.keep_every;
        policy.keep_best = options_.keep_best;
        policy.best_max = options_.best_max;
        policy.keep_seconds = options_.keep_seconds;
        std::vector<CheckpointFacts> known;
        if (policy.needs_facts()) {
            known = facts(on_disk, true);  // retention runs while this manager owns the directory
        } else {
            for (const Step& step : on_disk) known.push_back(CheckpointFacts{step.index, std::nullopt, std::nullopt});
        }
        std::map<int64_t, Step> by_index;
        for (const Step& step : on_disk) by_index.emplace(step.index, step);
        size_t left = on_disk.size();
        for (int64_t i : checkpoints_to_delete(known, policy, just_saved, now_ns())) {
            try {
                const Step step = by_index.at(i);
                remember_facts(step, std::nullopt);
                if (step.sharded)
                    remove_step(*options_.storage, step_path(i));
                else
                    options_.storage->remove(path_of(step));
                --left;
            } catch (const Error& e) {
                // The new checkpoint is safe; a file that could not go is retried by the next save's retention.
                log(warning, fmt::format("Retention could not remove a checkpoint: {}", e.what()));
            }
        }
        return left;
    } catch (const std::bad_alloc&) {
        try {
            log(warning, "Retention ran out of memory; the next save's retention removes what it left");
        } catch (const std::bad_alloc&) {
        }
    }
    return std::nullopt;
}

void CheckpointManager::save(const VarCollection& vars, int64_t index, const Metrics& metrics) {
    const auto check_arguments = [&] {
        if (options_.read_only) fail(Code::invalid, "{}: the manager was opened read-only (CKPT_MANAGER_READ_ONLY)", dir_);
        if (index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, index);
    };
    if (!options_.comm) check_arguments();
    const std::string target = file_path(index);
    forget_restored();
    {
        ContainerWriteOptions w;  // what the format cannot hold is refused now, not when a background save runs
        w.format = options_.format;
        w.npz = options_.npz_write;
        check_save(target, options_.format, vars, w);
    }
    int64_t saved_at = now_ns();
    if (options_.comm) {
        finish_pending();  // the previous asynchronous step: its error, on every rank, means this save is not made
        // A rank whose arguments are wrong still takes part, so that every rank fails with its error.
        agree_on_arguments(check_arguments, index, "sharded save");
        claim_collectively();
        // One time for the whole step: rank 0's.
        options_.comm->broadcast(&saved_at, sizeof saved_at, 0);
        return save_sharded_step(vars, index, saved_at, metrics);
    }
    claim();
    // The file gets the caller's arrays with the manager's metadata: a view that borrows the arrays leaves the
    // caller's collection as it was; an asynchronous save copies the view (arrays and metadata) before returning.
    auto view = std::make_shared<VarCollection>();
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        view->add(vars.name(i), Array::view_of(a));
    }
    view->metadata() = saved_metadata(vars.metadata(), index, saved_at, metrics);
    // What retention needs to know of this checkpoint, known without reading it back once it is saved.
    const Step saved{index, false};
    const CheckpointFacts saved_facts = checkpoint_facts(index, view->metadata(), options_.best_metric);
    remember_facts(saved, std::nullopt);  // the file it replaces, if any
    // A file holds whole variables: a row split only means something to a sharded step.
    uint64_t bytes = 0;
    for (size_t i = 0; i < vars.size(); ++i) bytes += vars.array(i).nbytes();
    // A copy larger than the whole staging budget is never made: the save runs now, from the caller's arrays,
    // after the saves before it (whose errors it reports first, as an asynchronous save would).
    const bool background = options_.async && snapshots_->fits(bytes);
    if (options_.async && !background) {
        log(info, fmt::format("Saving checkpoint {} ({}) without a background copy: it is larger than "
                              "max_staging_bytes ({})", index, byte_size(bytes), byte_size(options_.max_staging_bytes)));
        writer_->wait();
    }
    std::shared_ptr<const VarCollection> data;
    if (background)
        data = snapshots_->copy(*view);  // waits while earlier saves hold too much of the budget
    else
        data = std::move(view);
    last_save_ns_ = saved_at;
    NpzWriteOptions npz = options_.npz_write;
    // The file's size, which the low-space warning after the save takes, and the bytes it shares with its base:
    // set and read on the writer's thread.
    auto size = std::make_shared<uint64_t>(0);
    auto shared = std::make_shared<uint64_t>(0);
    // On the writer's thread, once earlier saves and their retention are done, before the first byte.
    npz.before_write = [this, index, target](uint64_t needed) {
        check_disk_space(needed, fmt::format("{}: not enough space for checkpoint {}", target, index));
    };
    // Whether it records chunk hashes and may share (a safetensors file's hashes are kept here, in `recorded`, for
    // the next save).
    const bool full = !bases_->plan(npz);
    const int64_t ordinal = bases_->saves();
    auto recorded = std::make_shared<RegionChunks>();
    writer_->submit(
        target,
        [this, data, npz, size, shared, recorded, index, full, ordinal, bytes](OutputFile& out) {
            const SaveBases::Opened base = full ? SaveBases::Opened{} : bases_->open_file(index, options_.format);
            ContainerWriteOptions w;
            w.format = options_.format;
            w.npz = npz;
            w.npz.base = base.npz.get();
            w.npz.shared_bytes = shared.get();
            if (npz.chunk_hashes && options_.format == Format::safetensors) w.safetensors_record = recorded.get();
            w.safetensors_base = RegionBase{base.file.get(), base.region.get()};
            *size = write_container(out, options_.format, *data, w);
            if (*shared > 0)
                log(info, fmt::format("Checkpoint {} shares {} of its {} with checkpoint {}", index, byte_size(*shared),
                                      byte_size(*size), base.index));
            if (base) bases_->saved_against(ordinal, *shared, bytes, fmt::format("Checkpoint {}", index));
        },
        false,
        [this, index, size, saved, saved_facts, npz, recorded] {
            remember_facts(saved, saved_facts);
            remove_other_format(index);
            if (npz.chunk_hashes)  // the next save's base, as it is now
                bases_->file_saved(index, options_.format == Format::safetensors ? recorded : nullptr);
            const std::optional<size_t> left = apply_retention(index);
            try {  // best effort, as retention: the save has succeeded
                space_told_ = true;
                if (left || options_.keep <= 0) warn_if_disk_low(*size, left.value_or(0));
            } catch (const std::exception&) {}
        });
    if (options_.async && !background) {
        data.reset();
        writer_->wait();
    }
}

void CheckpointManager::save_sharded_step(const VarCollection& vars, int64_t index, int64_t saved_at,
                                          const Metrics& metrics) {
    VarCollection view;
    // A failure here (a bad metric name, no memory) is this rank's part of the save failing: it must still take
    // part in every collective, or the other ranks would wait for it forever.
    std::exception_ptr failed;
    uint64_t bytes = 0;
    try {
        for (size_t i = 0; i < vars.size(); ++i) {
            const Array& a = vars.array(i);
            view.add(vars.name(i), Array::view_of(a));
            view.set_rows(i, vars.rows(i));
            bytes += a.nbytes();
        }
        view.metadata() = saved_metadata(vars.metadata(), index, saved_at, metrics);
    } catch (...) {
        failed = std::current_exception();
    }
    last_save_ns_ = saved_at;
    // Each rank checks that its own shard fits, before its first byte; ranks that share a file system can still
    // run out of space together, which fails the save like any write error.
    NpzWriteOptions npz = options_.npz_write;
    npz.before_write = [this, index](uint64_t needed) {  // save_npz names the shard's path
        check_disk_space(needed, fmt::format("not enough space for this rank's shard of checkpoint {}", index));
    };
    // Incremental: this rank's shard against its shard of the step this manager committed before (the same world
    // size, since the same communicator), opened where the shard is written.
    const bool share = bases_->plan(npz);
    const int64_t ordinal = bases_->saves();
    const std::string shard_what = fmt::format("Rank {}'s shard of step {}", options_.comm->rank(), index);
    const std::string base_path = bases_->shard_base(share, [this](int64_t step) {
        return join_path(step_path(step), shard_name(options_.comm->rank(), options_.comm->size()));
    });
    const auto log_shared = [this, index](uint64_t shared, const std::string& base_path) {
        if (shared > 0)
            log(info, fmt::format("Rank {}'s shard of step {} shares {} with {}", options_.comm->rank(), index,
                                  byte_size(shared), base_path));
    };
    // Whether this rank can copy its arrays for a background write; the ranks agree, so that all of them write
    // in the background or none does.
    const bool background =
        options_.async && options_.comm->all_reduce(snapshots_->fits(bytes) ? 1 : 0, Comm::Reduce::min) == 1;
    if (options_.async && !background)
        log(info, fmt::format("Saving checkpoint {} without a background copy: a rank's part is larger than "
                              "max_staging_bytes ({})", index, byte_size(options_.max_staging_bytes)));
    if (!background) {
        std::unique_ptr<ChunkBase> base = failed ? nullptr : bases_->open_shard(base_path, index);
        uint64_t shared = 0;
        npz.base = base.get();
        npz.shared_bytes = &shared;
        save_sharded(*options_.comm, *options_.storage, dir_, index, view, npz, failed,
                     [this, index](double commit_ms) { committed(index, commit_ms); });
        log_shared(shared, base_path);
        if (base) bases_->saved_against(ordinal, shared, bytes, shard_what);
        bases_->step_saved(index);
        return;
    }

    // In the background: the staging directory now (collective), this rank's shard on the writer's thread, and
    // the commit — collective again — at the next save, wait, close, restore or read, on the caller's thread. No
    // collective ever runs on the writer's thread, so a failed write cannot leave the other ranks waiting.
    Pending pending{begin_sharded_save(*options_.comm, *options_.storage, dir_, index), failed};
    if (!pending.failed) {
        try {
            describe_shard(pending.save, view);
            std::shared_ptr<const VarCollection> data = snapshots_->copy(view);
            writer_->submit(
                shard_path(pending.save, *options_.comm),
                [this, data, npz, base_path, index, log_shared, ordinal, bytes, shard_what](OutputFile& out) {
                    NpzWriteOptions o = npz;
                    const std::unique_ptr<ChunkBase> base = bases_->open_shard(base_path, index);
                    uint64_t shared = 0;
                    o.base = base.get();
                    o.shared_bytes = &shared;
                    write_npz(out, *data, o);
                    log_shared(shared, base_path);
                    if (base) bases_->saved_against(ordinal, shared, bytes, shard_what);
                },
                false);
        } catch (...) {
            pending.failed = std::current_exception();
        }
    }
    pending_ = std::move(pending);
}

void CheckpointManager::agree_on_arguments(const std::function<void()>& check, int64_t index, const char* what) {
    std::exception_ptr failed;
    try {
        check();
    } catch (...) {
        failed = std::current_exception();
    }
    Comm& comm = *options_.comm;
    agree(comm, failed, fmt::format("{}: {}", dir_, what));
    const int64_t lowest = comm.all_reduce(index, Comm::Reduce::min), highest = comm.all_reduce(index, Comm::Reduce::max);
    const auto name = [](int64_t i) { return i < 0 ? std::string("the latest") : std::to_string(i); };
    if (lowest != highest)
        fail(Code::invalid, "{}: {}: the ranks ask for different steps, from {} to {} (every rank must pass the same index)",
             dir_, what, name(lowest), name(highest));
}

void CheckpointManager::finish_pending() {
    if (!pending_) return;
    Pending pending = std::move(*pending_);
    pending_.reset();
    if (!pending.failed) {
        try {
            writer_->wait();
        } catch (...) {
            pending.failed = std::current_exception();
        }
    }
    const int64_t index = pending.save.index;
    finish_sharded_save(*options_.comm, *options_.storage, pending.save, pending.failed,
                        [this, index](double commit_ms) { committed(index, commit_ms); });
    bases_->step_saved(index);  // committed on every rank: this rank's shard is the next save's base
}

void CheckpointManager::committed(int64_t index, double commit_ms) {
    log(info, fmt::format("Saved step {} from {} ranks; the commit took {:.3f} ms after the last shard was durable",
                          step_path(index), options_.comm->size(), commit_ms));
    remember_facts(Step{index, true}, std::nullopt);  // a step it replaced; read when retention needs it
    remember_facts(Step{index, false}, std::nullopt);
    // A file of the same index is replaced by the step (the listing shows the step already).
    while_owner(fmt::format("removing the file replaced by step {}", index), [&] {
        try {
            options_.storage->remove(file_path(index));
        } catch (const Error&) {
        }
        remove_other_format(index);
    });
    apply_retention(index);
}

std::optional<double> CheckpointManager::metric(int64_t index, const std::string& name) {
    if (index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, index);
    writer_->drain();
    const Step step = find_step(index).value_or(Step{index, false});
    const std::string p = path_of(step);
    const Metadata metadata = metadata_of(step);
    const std::string* text = metadata.find(std::string(kMetricPrefix) + name);
    if (text == nullptr) return std::nullopt;
    const std::optional<double> value = parse_metric(*text);
    if (!value) fail(Code::format, "{}: metric '{}' is '{}', not a number", p, name, *text);
    return value;
}

std::optional<int64_t> CheckpointManager::best() {
    if (options_.best_metric.empty()) fail(Code::invalid, "{}: no best_metric is set", dir_);
    writer_->drain();
    return best_checkpoint(facts(steps(), owns_directory()), options_.best_max);
}

bool CheckpointManager::should_save(int64_t step) {
    if (step < 0) fail(Code::invalid, "{}: step {} is negative", dir_, step);
    if (options_.read_only) fail(Code::invalid, "{}: the manager was opened read-only (CKPT_MANAGER_READ_ONLY)", dir_);
    if (save_requested_.exchange(false, std::memory_order_relaxed)) return true;
    if (options_.save_every_steps > 0 && step % options_.save_every_steps == 0) return true;
    if (options_.save_every_seconds > 0) {
        // In seconds, as doubles: neither a clock that went back nor a huge interval can overflow.
        const double elapsed = (static_cast<double>(now_ns()) - static_cast<double>(last_save_ns_)) / 1e9;
        if (elapsed >= static_cast<double>(options_.save_every_seconds)) return true;
    }
    return false;
}

void CheckpointManager::wait() {
    finish_pending();
    writer_->wait();
}

void CheckpointManager::close() {
    if (writer_) {
        std::exception_ptr commit;  // the pending sharded step's failure, reported once the writer has stopped
        try {
            finish_pending();
        } catch (...) {
            commit = std::current_exception();
        }
        writer_->finalize();
        if (commit) {
            claim_.reset();
            std::rethrow_exception(commit);
        }
    }
    claim_.reset();  // unlocks, unless a newer manager of this process took the directory over
}

}  // namespace ckpt::core
