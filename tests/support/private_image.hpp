// SPDX-License-Identifier: Apache-2.0
// mount_private_image: a filesystem that clones (XFS with reflink, btrfs) in an image file, mounted where only this
// process (and its children) sees it, for tests of saves that share blocks with an earlier checkpoint.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ckpt::testing {

// Moves the calling process (a child: see in_child) into a private mount namespace, makes an image of `type`
// ("xfs" or "btrfs") of `size` ("512m") in the file `image`, and mounts it on the existing directory `mount_point`.
// Returns "" when mounted, otherwise why not (for the test to skip): not root, no mkfs for the type, no loop device.
inline std::string mount_private_image(const std::string& image, const std::string& mount_point,
                                       const std::string& type, const std::string& size) {
    if (::geteuid() != 0) return "mounting an image needs root";
    const std::string mkfs = type == "xfs" ? "mkfs.xfs -q -m reflink=1" : "mkfs.btrfs -q";
    const std::string tool = type == "xfs" ? "mkfs.xfs" : "mkfs.btrfs";
    if (std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) != 0)
        return tool + " is not installed (Debian: " + (type == "xfs" ? "xfsprogs" : "btrfs-progs") + ")";
    if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare: ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("cannot make mounts private: ") + std::strerror(errno);
    if (std::system(
            ("truncate -s " + size + " '" + image + "' && " + mkfs + " '" + image + "' >/dev/null 2>&1").c_str()) != 0)
        return "cannot make a " + type + " image";
    if (std::system(("mount -o loop '" + image + "' '" + mount_point + "' 2>/dev/null").c_str()) != 0)
        return "cannot mount a " + type + " image (no loop device?)";
    return "";
}

}  // namespace ckpt::testing
