// SPDX-License-Identifier: Apache-2.0
// mount_private_tmpfs: a small tmpfs that only this process (and its children) sees, for tests of a full disk.
// The mount lives in a private mount namespace — entered directly as root, otherwise inside a user namespace
// (as `unshare -rm` does) — so it vanishes with the process however that ends.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ckpt::testing {

namespace detail {
inline bool write_text(const char* path, const std::string& text) {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
}
}  // namespace detail

// Moves the calling process into a private mount namespace and mounts a tmpfs of `size` ("64k", "8m") on the
// existing directory `mount_point`. Returns "" when mounted, otherwise why not (for the test to skip): a
// container without user namespaces, for one.
inline std::string mount_private_tmpfs(const std::string& mount_point, const std::string& size) {
    if (::unshare(CLONE_NEWNS) != 0) {
        const uid_t uid = ::getuid();
        const gid_t gid = ::getgid();
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return std::string("unshare: ") + std::strerror(errno);
        detail::write_text("/proc/self/setgroups", "deny");
        if (!detail::write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
            !detail::write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
            return std::string("cannot map ids in a user namespace: ") + std::strerror(errno);
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("cannot make mounts private: ") + std::strerror(errno);
    if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0)
        return std::string("cannot mount a tmpfs: ") + std::strerror(errno);
    return "";
}

}  // namespace ckpt::testing
