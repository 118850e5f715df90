// SPDX-License-Identifier: Apache-2.0
#include "core/newest_readable.hpp"

#include "core/error.hpp"

namespace ckpt::core {

int64_t newest_readable(const std::vector<int64_t>& candidates, bool fallback, const std::string& dir,
                        const std::function<std::optional<FailedAttempt>(int64_t index)>& attempt,
                        const std::function<void(const std::string& why)>& skipped) {
    if (candidates.empty()) fail(Code::not_found, "{}: no checkpoints found", dir);
    std::string newest;
    for (size_t k = 0; k < candidates.size(); ++k) {
        const std::optional<FailedAttempt> failed = attempt(candidates[k]);
        if (!failed) return candidates[k];
        try {
            std::rethrow_exception(failed->error);
        } catch (const CallerError&) {
            throw;
        } catch (const Error& e) {
            if (!fallback || !failed->retry) {
                if (k == 0) throw;
                rethrow_with_context(e, fmt::format("after skipping {} unreadable newer checkpoint(s)", k));
            }
            skipped(e.what());
            if (newest.empty()) newest = e.what();
        }
    }
    fail(Code::format, "{}: every checkpoint is unreadable; the newest: {}", dir, newest);
}

std::optional<FailedAttempt> attempt_here(const std::function<void()>& body) {
    try {
        body();
        return std::nullopt;
    } catch (const CallerError&) {
        return FailedAttempt{std::current_exception(), false};
    } catch (const Error& e) {
        return FailedAttempt{std::current_exception(), unreadable_checkpoint(e.code())};
    }
}

}  // namespace ckpt::core
