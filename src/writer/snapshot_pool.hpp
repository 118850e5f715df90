// SPDX-License-Identifier: Apache-2.0
// Copies of collections for background saves, in buffers recycled from one save to the next.
//
// A background save must copy the state before it returns (training goes on changing it). Copying 512 MiB into
// freshly allocated memory blocked the caller 4.4x as long as a memcpy into mapped memory, the difference being
// first-touch page faults (bench/bench_writers); buffers kept from the previous save are already mapped.
#pragma once

#include "core/var_collection.hpp"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace ckpt::core {

class SnapshotPool : public std::enable_shared_from_this<SnapshotPool> {
public:
    // `keep`: how many snapshots' worth of buffers to hold for reuse between saves (the writer's queue depth).
    // `budget`: when non-zero, the bytes of live snapshots plus the buffers kept for reuse never exceed it.
    static std::shared_ptr<SnapshotPool> create(size_t keep, uint64_t budget = 0);
    ~SnapshotPool();

    // A deep copy of `vars` whose buffers return to the pool when the last reference goes. With a budget, first
    // waits until the snapshots still alive leave room for this one (their owners must be releasing them: the
    // writer's queued saves); the caller checks that the copy fits the budget at all (fits()).
    std::shared_ptr<const VarCollection> copy(const VarCollection& vars);
    // What a save of `vars` writes from: `vars` itself, borrowed (the caller keeps it alive and unchanged until the
    // save is done), when `borrow` — the save runs in the caller, or the caller asked for no copy — else copy(vars).
    std::shared_ptr<const VarCollection> for_save(const VarCollection& vars, bool borrow);
    bool fits(uint64_t bytes) const { return budget_ == 0 || bytes <= budget_; }

private:
    SnapshotPool(size_t keep, uint64_t budget) : keep_(keep), budget_(budget) {}
    unsigned char* take(size_t n);
    void give_back(unsigned char* p, size_t n) noexcept;
    void reserve(uint64_t total);

    const size_t keep_;
    const uint64_t budget_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::multimap<size_t, unsigned char*> free_;
    size_t free_bytes_ = 0;
    size_t snapshot_bytes_ = 0;  // size of the latest snapshot: the pool holds at most keep_ of these
    uint64_t live_bytes_ = 0;    // buffers of snapshots still alive (reserved as a whole before copying)
};

}  // namespace ckpt::core
