// SPDX-License-Identifier: Apache-2.0
// A checkpoint manager's hold on its directory.
//
// A storage's lock (for the local file system an flock on "<dir>/.ckpt.lock") keeps managers of other processes
// out. Within one process the lock is shared through a registry keyed by the directory's identity, so that a new
// manager of the directory — a notebook cell run again while the old object lives — takes the lock over from the
// older one instead of being refused: the older one's next save fails, and closing it leaves the lock alone.
#pragma once

#include "storage/storage.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>

namespace ckpt::core {

// The directory's identity: its device and inode on the local file system (two paths of one directory are one
// key), else the storage and the path (a storage's namespace is its own).
using DirKey = std::tuple<const Storage*, uint64_t, uint64_t, std::string>;

// One locked directory of this process (dir_claim.cpp).
struct DirHolder;

// A manager's claim on a directory: the lock it holds, or took over from an older manager of this process.
class DirClaim {
public:
    // Locks `dir` — Error(busy) naming the holder when another process holds it — or takes it over from the manager
    // of this process that holds it (*took_over = true).
    static std::shared_ptr<DirClaim> take(const std::shared_ptr<Storage>& storage, const std::string& dir,
                                          bool* took_over);

    DirClaim(DirKey key, std::shared_ptr<DirHolder> holder, uint64_t id);
    DirClaim(const DirClaim&) = delete;
    DirClaim& operator=(const DirClaim&) = delete;
    // Unlocks the directory, unless a newer manager took it over.
    ~DirClaim();

    // Whether no newer manager of this process took the directory over.
    bool owned() const;
    // Runs `f` while this claim owns the directory and returns true, or returns false.
    bool while_owned(const std::function<void()>& f) const;

private:
    struct Registry;
    static Registry& registry();

    DirKey key_;
    std::shared_ptr<DirHolder> holder_;  // null for a storage without locking
    uint64_t id_;
};

}  // namespace ckpt::core
