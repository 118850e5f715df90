// SPDX-License-Identifier: Apache-2.0
// Resuming past unreadable checkpoints: the one loop that tries checkpoints newest first, for a manager in one
// process and for the ranks of a sharded restore (which agree on each attempt's outcome before they go on).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ckpt::core {

// Why an attempt failed, and whether an older checkpoint may do instead (the file was unreadable; not the caller's
// renamer or arguments, which an older checkpoint would not change: a CallerError).
struct FailedAttempt {
    std::exception_ptr error;  // an Error
    bool retry = false;
};

// Tries `candidates` in order (newest first) until `attempt` returns no failure; returns the index it succeeded
// with. A failure that may not be retried, or any failure when !fallback, is rethrown — after an older checkpoint
// was tried, naming how many newer ones were skipped (a CallerError as it is). `skipped` is told each skipped
// failure's message. Throws Error(not_found) when there are no candidates, and Error(format) naming the newest
// failure when every candidate failed. Exceptions `attempt` throws pass through.
int64_t newest_readable(const std::vector<int64_t>& candidates, bool fallback, const std::string& dir,
                        const std::function<std::optional<FailedAttempt>(int64_t index)>& attempt,
                        const std::function<void(const std::string& why)>& skipped);

// An attempt run in this process: its failure when it throws an Error.
std::optional<FailedAttempt> attempt_here(const std::function<void()>& body);

}  // namespace ckpt::core
