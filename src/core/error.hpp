// SPDX-License-Identifier: Apache-2.0
// ckpt::core::Error: the one exception type of the core. It carries a C API status code and a message that names
// the file, the member and the problem; the C boundary turns it into a return value and a thread's message.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ckpt::core {

// Mirrors the CKPT_E* codes of ckpt.h (fixed values).
enum class Code : int {
    ok = 0,
    error = -1,
    invalid = -2,
    not_found = -3,
    format = -4,
    io = -5,
    no_memory = -6,
    mismatch = -7,
    unsupported = -8,
    busy = -9,
    exists = -10,
    buffer_small = -11,
};

class Error : public std::runtime_error {
public:
    Error(Code code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
    Code code() const noexcept { return code_; }

private:
    Code code_;
};

// An error caused by the caller's own callbacks or arguments (a renamer's refusal, two names renamed to one),
// not by the file being read: restoring the latest checkpoint does not fall back to older ones for it.
class CallerError : public Error {
public:
    using Error::Error;
};

// Whether a checkpoint that failed to restore with this code may be skipped for an older one: corrupt,
// unreadable, not a regular file (a FIFO with a checkpoint's name), unsupported, or gone since the listing (a
// missing shard of a step; a file another manager's retention removed).
inline bool unreadable_checkpoint(Code code) {
    return code == Code::format || code == Code::io || code == Code::unsupported || code == Code::invalid ||
           code == Code::not_found;
}

template <typename... Args>
[[noreturn]] void fail(Code code, fmt::format_string<Args...> f, Args&&... args) {
    throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

// Throws Code::io with "<what>: <strerror(err)>".
[[noreturn]] void fail_errno(int err, const std::string& what);

// Rethrows `e` with "<prefix>: " in front of its message, keeping its code: how a lower layer's message gains
// the file and member it concerns.
[[noreturn]] void rethrow_with_context(const Error& e, const std::string& prefix);
// As rethrow_with_context, unless the message already names `path` (storage messages do).
[[noreturn]] void rethrow_naming(const Error& e, const std::string& path);

}  // namespace ckpt::core
