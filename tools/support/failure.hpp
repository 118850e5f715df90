// SPDX-License-Identifier: Apache-2.0
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
// exit_code_for for a failure the library described with `message` (ckpt_message's): an s3:// path that libckpt
// cannot reach because libckpt_s3 could not be loaded is 4 (an installation's failure), not 1 (broken content),
// though the library's code for it is CKPT_EUNSUPPORTED.
int exit_code_of(int ckpt_code, const std::string& message);
// Whether `message` says that libckpt_s3 could not be loaded for an s3:// path.
bool needs_s3_library(const std::string& message);

// The CKPT_* status code that stands for an exit code where no library call failed: 1 CKPT_EFORMAT, 2 CKPT_EINVAL,
// 3 CKPT_EIO, 4 CKPT_ERROR.
int code_for_exit(int exit_code);
// A status code's name: "CKPT_EFORMAT", "CKPT_ENOTFOUND", ...; "CKPT_ERROR" for a code the library does not have.
const char* code_name(int ckpt_code);

class Failure : public std::runtime_error {
public:
    Failure(int exit_code, const std::string& message)
        : std::runtime_error(message), exit_code_(exit_code), code_(code_for_exit(exit_code)) {}
    Failure(int exit_code, const std::string& message, int ckpt_code)
        : std::runtime_error(message), exit_code_(exit_code), code_(ckpt_code) {}
    int exit_code() const { return exit_code_; }
    // The CKPT_* code of the failure, for --json's error document.
    int code() const { return code_; }

private:
    int exit_code_;
    int code_;
};

// The library's message for the failed call `rc` about `path`: ckpt_error_message(), which names the file, or
// "<path>: <code's name>" when it is empty. Messages that do not name the path get it in front. For an s3:// URL
// the library names objects by their keys: a message that starts with the URL's key starts with the URL instead
// (and one that starts with a URL this one is under needs no other in front); an object S3 found missing (HTTP 404
// without an S3 error code, as HEAD requests get) is said to be "not found", with whether the bucket or the key is
// missing, which takes one more request to tell. Call it right after the failed call: it reads the thread's last
// error.
std::string ckpt_message(int rc, const std::string& path);
// Throws the Failure for a failed ckpt call about `path`.
[[noreturn]] void fail_ckpt(int rc, const std::string& path);
// Throws a Failure for a system call about `path` that failed with errno `err`.
[[noreturn]] void fail_errno(int err, const std::string& path, const std::string& what);

// The message of `full` without a leading "<path>: ", for lines that already start with the path.
std::string without_path(const std::string& full, const std::string& path);

// Owners of the C API's handles.
struct ReaderCloser {
    void operator()(ckpt_reader* npz) const { ckpt_reader_close(npz); }
};
struct VarsFreer {
    void operator()(ckpt_vars* vars) const { ckpt_vars_free(vars); }
};
struct ManagerCloser {
    void operator()(ckpt_manager* m) const { ckpt_manager_close(m); }
};
using Reader = std::unique_ptr<ckpt_reader, ReaderCloser>;
using Vars = std::unique_ptr<ckpt_vars, VarsFreer>;
using Manager = std::unique_ptr<ckpt_manager, ManagerCloser>;

// The exit code for a failure to open `path` for reading, `message` being ckpt_message's: as exit_code_of,
// except that the library's CKPT_EINVAL can only be about the path there (not a regular file), which is the
// storage's kind of failure.
int open_exit_code(int ckpt_code, const std::string& message);
// Opens an .npz for reading (ckpt_reader_open); throws on failure (a directory gets a hint at ls and verify).
Reader open_reader(const std::string& path, const ckpt_options* opts = nullptr);

// An uninitialised byte buffer that only grows (reading an array needs no zeroing first).
class Scratch {
public:
    unsigned char* get(size_t size);

private:
    std::unique_ptr<unsigned char[]> bytes_;
    size_t size_ = 0;
};

}  // namespace ckpt_tool
