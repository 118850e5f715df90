// Exit codes, and the error every command throws to end with one: a message naming the file and the problem.
#pragma once

#include <ckpt/ckpt.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace ckpt_tool {

// The program's exit codes (docs/cli.md). Fixed: scripts test them.
enum Exit : int {
    kExitOk = 0,
    kExitDifferent = 1,  // diff: the files differ; any command: a file is broken (corrupt or unsupported content)
    kExitUsage = 2,      // the command line is wrong
    kExitIo = 3,         // a file or directory is missing, unreadable, unwritable or locked
    kExitInternal = 4,   // out of memory, or an unexpected failure
};

// The exit code for a ckpt status code: broken content is 1, the storage 3, everything else 4.
int exit_code_for(int ckpt_code);

class Failure : public std::runtime_error {
public:
    Failure(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

private:
    int exit_code_;
};

// The library's message for the failed call `rc` about `path`: ckpt_error_message(), which names the file, or
// "<path>: <code's name>" when it is empty. Messages that do not name the path get it in front.
std::string ckpt_message(int rc, const std::string& path);
// Throws the Failure for a failed ckpt call about `path`.
[[noreturn]] void fail_ckpt(int rc, const std::string& path);
// Throws a Failure for a system call about `path` that failed with errno `err`.
[[noreturn]] void fail_errno(int err, const std::string& path, const std::string& what);

// The message of `full` without a leading "<path>: ", for lines that already start with the path.
std::string without_path(const std::string& full, const std::string& path);

// Owners of the C API's handles.
struct NpzCloser {
    void operator()(ckpt_npz* npz) const { ckpt_npz_close(npz); }
};
struct VarsFreer {
    void operator()(ckpt_vars* vars) const { ckpt_vars_free(vars); }
};
struct ManagerCloser {
    void operator()(ckpt_manager* m) const { ckpt_manager_close(m); }
};
using Npz = std::unique_ptr<ckpt_npz, NpzCloser>;
using Vars = std::unique_ptr<ckpt_vars, VarsFreer>;
using Manager = std::unique_ptr<ckpt_manager, ManagerCloser>;

// The exit code for a failure to open `path` for reading: as exit_code_for, except that the library's
// CKPT_EINVAL can only be about the path there (not a regular file), which is the storage's kind of failure.
int open_exit_code(int ckpt_code);
// Opens an .npz for reading (ckpt_npz_open); throws on failure (a directory gets a hint at ls and verify).
Npz open_npz(const std::string& path, const ckpt_npz_options* opts = nullptr);

// An uninitialised byte buffer that only grows (reading an array needs no zeroing first).
class Scratch {
public:
    unsigned char* get(size_t size);

private:
    std::unique_ptr<unsigned char[]> bytes_;
    size_t size_ = 0;
};

}  // namespace ckpt_tool
