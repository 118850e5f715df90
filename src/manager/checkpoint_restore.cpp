// SPDX-License-Identifier: Apache-2.0
// Resuming: which checkpoint a restore or read takes (the one asked for, or the newest readable one, past unreadable
// ones with a warning each), alone or agreed on by every rank of a collective manager.
#include "manager/checkpoint.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ckpt {

void CheckpointManager::try_checkpoint(int64_t index, const Attempt& attempt) {
    const std::optional<Step> step = find_step(index);
    if (step && step->sharded) {
        ShardedStep sharded(*options_.storage, step_path(index), options_.npz_read);
        attempt(nullptr, &sharded);
    } else {
        // Every variable is read (a shard may be read only in part, for another world size: not there).
        NpzReadOptions read = options_.npz_read;
        read.read_ahead = true;
        NpzReader reader = NpzReader::open(*options_.storage, file_path(index), read);
        attempt(&reader, nullptr);
    }
}

int64_t CheckpointManager::with_checkpoint(std::optional<int64_t> index, const Attempt& attempt) {
    writer_->drain();  // a restore sees every save made before it
    if (options_.comm) {
        finish_pending();
        agree_on_arguments(
            [&] {
                if (index && *index < 0) fail(Code::invalid, "{}: checkpoint index {} is negative", dir_, *index);
            },
            index.value_or(-1), "sharded restore");
        std::vector<int64_t> candidates;
        if (index) {
            candidates.push_back(*index);
        } else if (options_.comm->rank() == 0) {
            candidates = list();
            std::reverse(candidates.begin(), candidates.end());
            if (candidates.empty()) log(info, fmt::format("No checkpoints found in {}", dir_));
        }
        const int64_t i = restore_collectively(
            *options_.comm, candidates, !index && options_.fallback, dir_,
            [&](int64_t i) { try_checkpoint(i, attempt); },
            [&](const std::string& why) { log(warning, fmt::format("Skipping unreadable checkpoint: {}", why)); });
        log(info, fmt::format("Resuming from {}", path(i)));
        return i;
    }
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
        try {
            try_checkpoint(i, attempt);
            log(info, fmt::format("Resuming from {}", path(i)));
            return i;
        } catch (const CallerError&) {
            throw;  // the caller's renamer or arguments, not the file: an older checkpoint would not help
        } catch (const Error& e) {
            // Try an older one, as the ranks of a sharded restore do.
            if (index || !options_.fallback || !unreadable_checkpoint(e.code())) {
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
    return with_checkpoint(index, [&](NpzReader* file, ShardedStep* step) {
        if (file != nullptr)
            restore_npz(*file, vars, options_.rename, options_.partial);
        else
            step->restore(vars, options_.rename, options_.partial);
    });
}

std::pair<VarCollection, int64_t> CheckpointManager::read(std::optional<int64_t> index) {
    VarCollection out;
    const int64_t i = with_checkpoint(index, [&](NpzReader* file, ShardedStep* step) {
        out = file != nullptr ? file->read_all() : step->read_all();
    });
    return {std::move(out), i};
}

}  // namespace ckpt
