#include "manager/checkpoint.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <set>

namespace ckpt {

namespace {

constexpr std::string_view kSuffix = ".npz";
constexpr size_t kPaddedDigits = 10;  // objax's %010d

// True for the temporaries of checkpoint files: ".<checkpoint name>.tmp-XXXXXX".
bool is_checkpoint_temp(const std::string& name) {
    if (!is_temp_name(name)) return false;
    const size_t end = name.rfind(".tmp-");
    return checkpoint_index(name.substr(1, end - 1)).has_value();
}

}  // namespace

std::optional<int64_t> checkpoint_index(const std::string& filename) {
    const std::string name = base_name(filename);
    if (name.size() <= kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
        return std::nullopt;
    const std::string digits = name.substr(0, name.size() - kSuffix.size());
    if (digits.size() < kPaddedDigits || digits.size() > 19) return std::nullopt;
    if (digits.size() > kPaddedDigits && digits[0] == '0') return std::nullopt;  // not what checkpoint_name writes
    uint64_t value = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    if (value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(value);
}

std::string checkpoint_name(int64_t index) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%010" PRId64 ".npz", index);
    return buf;
}

CheckpointManager::CheckpointManager(std::string dir, Options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
    if (!options_.storage) options_.storage = posix_storage();
    Storage& storage = *options_.storage;
    if (options_.make_dir && !options_.read_only) {
        storage.make_dirs(dir_);
    } else {
        storage.list(dir_);  // throws not_found for a missing directory
    }
    if (!options_.read_only) {  // another manager may hold it and save meanwhile: nothing here may change it
        lock_ = storage.lock(dir_);
        remove_stale_temporaries();
    }
    const auto kind = options_.async ? Writer::Kind::queue : Writer::Kind::simple;
    writer_ = std::make_unique<Writer>(kind, options_.queue_depth, options_.storage);
    if (options_.async) snapshots_ = SnapshotPool::create(options_.queue_depth, options_.max_staging_bytes);
    last_save_ns_ = now_ns();
    if (!options_.read_only) {
        const std::vector<int64_t> indices = list();
        if (!indices.empty()) {
            try {
                warn_if_disk_low(options_.storage->open_read(path(indices.back()))->size(), indices.size());
            } catch (const Error&) {
                // the newest file is unreadable: its size says nothing, and restoring will say what is wrong
            }
        }
    }
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
void CheckpointManager::check_disk_space(uint64_t needed, int64_t index) const {
    const std::optional<uint64_t> free = options_.storage->free_bytes(dir_);
    if (!free || *free >= needed) return;
    fail(Code::io, "{}: not enough space for checkpoint {}: it needs up to {} and {} is free", path(index), index,
         byte_size(needed), byte_size(*free));
}

int64_t CheckpointManager::now_ns() const {
    if (options_.now_ns) return options_.now_ns();
    using namespace std::chrono;
    return duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
}

std::vector<CheckpointFacts> CheckpointManager::facts(const std::vector<int64_t>& indices) const {
    std::vector<CheckpointFacts> out;
    out.reserve(indices.size());
    for (int64_t i : indices) {
        try {
            // Opening reads the zip directory, the npy headers and the metadata member, never the arrays.
            const NpzReader reader = NpzReader::open(*options_.storage, path(i), options_.npz_read);
            out.push_back(checkpoint_facts(i, reader.metadata(), options_.best_metric));
        } catch (const Error&) {
            out.push_back(CheckpointFacts{i, std::nullopt, std::nullopt});  // unreadable: neither best nor recent
        }
    }
    return out;
}

CheckpointManager::~CheckpointManager() {
    try {
        close();
    } catch (...) {
        // Documented: errors nobody asked for by now are dropped.
    }
}

std::string CheckpointManager::path(int64_t index) const { return join_path(dir_, checkpoint_name(index)); }

void CheckpointManager::log(int level, const std::string& message) const {
    if (options_.log) options_.log(level, message);
}

void CheckpointManager::remove_stale_temporaries() {
    for (const std::string& name : options_.storage->list(dir_)) {
        if (!is_checkpoint_temp(name)) continue;  // never touch a file that is not ckpt's
        const std::string path = join_path(dir_, name);
        try {
            options_.storage->remove(path);
            log(warning, fmt::format("Removed stale temporary file {} (left by an interrupted save)", path));
        } catch (const Error& e) {
            log(warning, fmt::format("Could not remove stale temporary file: {}", e.what()));
        }
    }
}

std::vector<int64_t> CheckpointManager::list() {
    writer_->drain();
    return on_disk();
}

std::vector<int64_t> CheckpointManager::on_disk() const {
    std::vector<int64_t> indices;
    for (const std::string& name : options_.storage->list(dir_))
        if (auto i = checkpoint_index(name)) indices.push_back(*i);
    std::sort(indices.begin(), indices.end());
    return indices;
}

void CheckpointManager::apply_retention(int64_t just_saved) {
    if (options_.keep <= 0) return;
    // Retention runs once the new checkpoint is durable, and is best effort: running out of memory here, like a
    // storage error, leaves old checkpoints for the next save's retention instead of failing a save that
    // succeeded.
    try {
        std::vector<int64_t> indices;
        try {
            indices = on_disk();
        } catch (const Error& e) {
            log(warning, fmt::format("Retention could not list the checkpoints: {}", e.what()));
            return;
        }
        RetentionPolicy policy;
        policy.keep = options_.keep;
        policy.keep_every = options_.keep_every;
        policy.keep_best = options_.keep_best;
        policy.best_max = options_.best_max;
        policy.keep_seconds = options_.keep_seconds;
        std::vector<CheckpointFacts> known;
        if (policy.needs_facts()) {
            known = facts(indices);
        } else {
            for (int64_t i : indices) known.push_back(CheckpointFacts{i, std::nullopt, std::nullopt});
        }
        for (int64_t i : checkpoints_to_delete(known, policy, just_saved, now_ns())) {
            try {
                options_.storage->remove(path(i));
            } catch (const Error& e) {
                // The new checkpoint is safe; a file that could not go is retried by the next save's retention.
                log(warning, fmt::format("Retention could not remove a checkpoint: {}", e.what()));
            }
        }
    } catch (const std::bad_alloc&) {
        try {
            log(warning, "Retention ran out of memory; the next save's retention removes what it left");
        } catch (const std::bad_alloc&) {
        }
    }
}

void CheckpointManager::save(const VarCollection& vars, int64_t index, const Metrics& metrics) {
    if (options_.read_only) fail(Code::invalid, "{}: the manager was opened read-only (CKPT_MANAGER_READ_ONLY)", dir_);
    if (index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, index);
    const std::string target = path(index);
    const int64_t saved_at = now_ns();
    // The file gets the caller's arrays with the manager's metadata: a view that borrows the arrays leaves the
    // caller's collection as it was; an asynchronous save copies the view (arrays and metadata) before returning.
    auto view = std::make_shared<VarCollection>();
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        view->add(vars.name(i), Array::borrow(a.dtype(), a.itemsize(), a.shape(), a.data()));
    }
    view->metadata() = saved_metadata(vars.metadata(), index, saved_at, metrics);
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
    const NpzWriteOptions npz = options_.npz_write;
    const uint64_t needed = npz_size_bound(*data, npz);
    writer_->submit(
        target,
        [this, data, npz, needed, index](OutputFile& out) {
            check_disk_space(needed, index);  // here, once earlier saves and their retention are done
            write_npz(out, *data, npz);
        },
        false,
        [this, index, target] {
            apply_retention(index);
            try {  // best effort, as retention: the save has succeeded
                warn_if_disk_low(options_.storage->open_read(target)->size(), on_disk().size());
            } catch (const std::exception&) {
            }
        });
    if (options_.async && !background) {
        data.reset();
        writer_->wait();
    }
}

int64_t CheckpointManager::with_checkpoint(std::optional<int64_t> index,
                                           const std::function<void(NpzReader&)>& attempt) {
    writer_->drain();  // a restore sees every save made before it
    std::vector<int64_t> candidates;
    if (index) {
        if (*index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, *index);
        candidates.push_back(*index);
    } else {
        candidates = list();
        std::reverse(candidates.begin(), candidates.end());
        if (candidates.empty()) {
            log(info, fmt::format("No checkpoints found in {}", dir_));
            fail(Code::not_found, "{}: no checkpoints found", dir_);
        }
    }
    std::vector<std::string> skipped;
    for (int64_t i : candidates) {
        const std::string p = path(i);
        try {
            NpzReader reader = NpzReader::open(*options_.storage, p, options_.npz_read);
            attempt(reader);
            log(info, fmt::format("Resuming from {}", p));
            return i;
        } catch (const CallerError&) {
            throw;  // the caller's renamer or arguments, not the file: an older checkpoint would not help
        } catch (const Error& e) {
            // Corrupt, unreadable, or not a regular file (a FIFO with a checkpoint's name): try an older one.
            const bool unreadable = e.code() == Code::format || e.code() == Code::io ||
                                    e.code() == Code::unsupported || e.code() == Code::invalid;
            if (index || !options_.fallback || !unreadable) {
                if (skipped.empty()) throw;
                rethrow_with_context(e, fmt::format("after skipping {} unreadable newer checkpoint(s)", skipped.size()));
            }
            log(warning, fmt::format("Skipping unreadable checkpoint: {}", e.what()));
            skipped.push_back(e.what());
        }
    }
    fail(Code::format, "{}: every checkpoint is unreadable; the newest: {}", dir_, skipped.front());
}

int64_t CheckpointManager::restore(VarCollection& vars, std::optional<int64_t> index) {
    return with_checkpoint(index, [&](NpzReader& reader) { restore_npz(reader, vars, options_.rename, options_.partial); });
}

std::pair<VarCollection, int64_t> CheckpointManager::read(std::optional<int64_t> index) {
    VarCollection out;
    const int64_t i = with_checkpoint(index, [&](NpzReader& reader) { out = reader.read_all(); });
    return {std::move(out), i};
}

std::optional<double> CheckpointManager::metric(int64_t index, const std::string& name) {
    if (index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, index);
    writer_->drain();
    const std::string p = path(index);
    const NpzReader reader = NpzReader::open(*options_.storage, p, options_.npz_read);
    const std::string* text = reader.metadata().find(std::string(kMetricPrefix) + name);
    if (text == nullptr) return std::nullopt;
    const std::optional<double> value = parse_metric(*text);
    if (!value) fail(Code::format, "{}: metric '{}' is '{}', not a number", p, name, *text);
    return value;
}

std::optional<int64_t> CheckpointManager::best() {
    if (options_.best_metric.empty()) fail(Code::invalid, "{}: no best_metric is set", dir_);
    return best_checkpoint(facts(list()), options_.best_max);
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

void CheckpointManager::wait() { writer_->wait(); }

void CheckpointManager::close() {
    if (writer_) writer_->finalize();
    lock_.reset();
}

}  // namespace ckpt
