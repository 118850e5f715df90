// SPDX-License-Identifier: Apache-2.0
// on_cloning_filesystems: a test body run on each filesystem that clones (XFS with reflink, btrfs), each in an image
// of its own mounted where only a forked child sees it (private_image.hpp, in_child.hpp).
#pragma once

#include "support/in_child.hpp"
#include "support/private_image.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <functional>
#include <string>

namespace ckpt::testing {

// Runs body(mount point) in a child for "xfs" and "btrfs", on a fresh 512 MiB image of each. The body returns
// "OK…" or "FAIL: …"; a filesystem that cannot be mounted here (not root, no mkfs, no loop device) is a warning.
inline void on_cloning_filesystems(const std::function<std::string(const std::string& mount_point)>& body) {
    for (const std::string type : {"xfs", "btrfs"}) {
        TempDir dir;
        const std::string mount_point = dir.file("mnt");
        ::mkdir(mount_point.c_str(), 0755);
        const std::string result = in_child([&]() -> std::string {
            const std::string why_not = mount_private_image(dir.file(type + ".img"), mount_point, type, "512m");
            if (!why_not.empty()) return "SKIP: " + why_not;
            return body(mount_point);
        });
        INFO(type << ": " << result);
        if (result.rfind("SKIP", 0) == 0) {
            WARN(type << ": " << result);
            continue;
        }
        CHECK(result.rfind("OK", 0) == 0);
    }
}

}  // namespace ckpt::testing
