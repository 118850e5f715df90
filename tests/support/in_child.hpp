// SPDX-License-Identifier: Apache-2.0
// in_child: runs a test body in a forked process, for tests that change process-wide state (mount namespaces,
// resource limits, signal dispositions) or measure the process's own memory.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

namespace ckpt::testing {

// Runs `body` in a forked child and returns what it returned ("OK…", "SKIP: …" or "FAIL: …"): for tests that
// change process-wide state (mount namespaces, resource limits, signal dispositions).
inline std::string in_child(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) return std::string("FAIL: pipe: ") + std::strerror(errno);
    const pid_t pid = ::fork();
    if (pid < 0) return std::string("FAIL: fork: ") + std::strerror(errno);
    if (pid == 0) {
        ::close(fds[0]);
        std::string result;
        try {
            result = body();
        } catch (const std::exception& e) {
            result = std::string("FAIL: unexpected exception: ") + e.what();
        } catch (...) {
            result = "FAIL: unexpected non-standard exception";
        }
        for (size_t done = 0; done < result.size();) {
            const ssize_t w = ::write(fds[1], result.data() + done, result.size() - done);
            if (w <= 0) break;
            done += static_cast<size_t>(w);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t r; (r = ::read(fds[0], buf, sizeof buf)) != 0;) {
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        out.append(buf, static_cast<size_t>(r));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) return out + "FAIL: child killed by signal " + std::to_string(WTERMSIG(status));
    if (out.empty()) return "FAIL: child reported nothing";
    return out;
}

}  // namespace ckpt::testing
