// SPDX-License-Identifier: Apache-2.0
// Resuming: which checkpoint a restore or read takes (the one asked for, or the newest readable one, past unreadable
// ones with a warning each), alone or agreed on by every rank of a collective manager.
#include "manager/checkpoint.hpp"

#include "core/error.hpp"
#include "core/newest_readable.hpp"

#include <algorithm>

namespace ckpt::core {

// A restore lists the directory once and opens the checkpoint it takes once: the steps it found are what it tries,
// the log line, the free space and path() included.
uint64_t CheckpointManager::try_checkpoint(const Step& step, const Attempt& attempt) {
    if (step.sharded) {
        ShardedStep sharded(*options_.storage, step_path(step.index), options_.npz_read);
        attempt(nullptr, &sharded);
        return 0;
    }
    // Every variable is read (a shard may be read only in part, for another world size: not there).
    ContainerReadOptions read;
    read.npz = options_.npz_read;
    read.npz.read_ahead = true;
    const std::unique_ptr<Container> file = open_container(*options_.storage, path_of(step), read);
    attempt(file.get(), nullptr);
    return file->file_size();
}

void CheckpointManager::log_resuming(const Step& step) const {
    if (options_.log) log(info, fmt::format("Resuming from {}", path_of(step)));
}

namespace {
// The step of `index` among those listed; a file of `format` when it is not there (opening it then says what is
// missing).
template <typename Steps>
auto step_in(const Steps& steps, int64_t index, Format format) {
    for (const auto& step : steps)
        if (step.index == index) return step;
    return typename Steps::value_type{index, false, format};
}
}  // namespace

int64_t CheckpointManager::with_checkpoint(std::optional<int64_t> index, const Attempt& attempt) {
    writer_->drain();  // a restore sees every save made before it
    const auto check_index = [&] {
        if (index && *index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, *index);
    };
    if (options_.comm) {
        finish_pending();
        agree_on_arguments(check_index, index.value_or(-1), "sharded restore");
    } else {
        check_index();
    }
    // Listed once, when first needed: a rank other than 0 of a collective restore lists only to try a step (rank
    // 0's listing gives the candidates).
    std::optional<std::vector<Step>> listed;
    const auto listing = [&]() -> const std::vector<Step>& {
        if (!listed) listed = steps();
        return *listed;
    };
    std::vector<int64_t> candidates;
    if (index) {
        candidates.push_back(*index);
    } else if (!options_.comm || options_.comm->rank() == 0) {
        for (auto step = listing().rbegin(); step != listing().rend(); ++step) candidates.push_back(step->index);
        if (candidates.empty()) log(info, fmt::format("No checkpoints found in {}", dir_));
    }
    const bool fallback = !index && options_.fallback;
    uint64_t size = 0;  // of the file restored
    const auto try_one = [&](int64_t i) { size = try_checkpoint(step_in(listing(), i, options_.format), attempt); };
    const auto skipped = [&](const std::string& why) {
        log(warning, fmt::format("Skipping unreadable checkpoint: {}", why));
    };
    const int64_t i = options_.comm ? restore_collectively(*options_.comm, candidates, fallback, dir_, try_one, skipped)
                                    : newest_readable(
                                          candidates, fallback, dir_,
                                          [&](int64_t i) { return attempt_here([&] { try_one(i); }); }, skipped);
    const Step restored = step_in(listing(), i, options_.format);
    log_resuming(restored);
    {
        std::lock_guard<std::mutex> lock(restored_mutex_);
        restored_ = restored;
    }
    // The first restore of a manager that saves tells whether the disk holds what `keep` will accumulate, at the
    // size of the checkpoint it resumes from (a save tells it after each save).
    if (!options_.read_only && !options_.comm && size > 0 && !space_told_.exchange(true)) {
        try {
            warn_if_disk_low(size, listing().size());
        } catch (const Error&) {
            // a save asks again, and fails with the storage's error
        }
    }
    return i;
}

void CheckpointManager::forget_restored() {
    std::lock_guard<std::mutex> lock(restored_mutex_);
    restored_.reset();
}

int64_t CheckpointManager::restore(VarCollection& vars, std::optional<int64_t> index) {
    return with_checkpoint(index, [&](Container* file, ShardedStep* step) {
        if (file != nullptr)
            restore_container(*file, vars, options_.rename, options_.partial);
        else
            step->restore(vars, options_.rename, options_.partial);
    });
}

std::pair<VarCollection, int64_t> CheckpointManager::read(std::optional<int64_t> index) {
    VarCollection out;
    const int64_t i = with_checkpoint(index, [&](Container* file, ShardedStep* step) {
        out = file != nullptr ? file->read_all() : step->read_all();
    });
    return {std::move(out), i};
}

}  // namespace ckpt::core
