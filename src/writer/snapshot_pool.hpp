// Copies of collections for background saves, in buffers recycled from one save to the next.
//
// A background save must copy the state before it returns (training goes on changing it). Copying 512 MiB into
// freshly allocated memory blocked the caller 4.4x as long as a memcpy into mapped memory, the difference being
// first-touch page faults (bench/bench_writers); buffers kept from the previous save are already mapped.
#pragma once

#include "core/var_collection.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace ckpt {

class SnapshotPool : public std::enable_shared_from_this<SnapshotPool> {
public:
    // `keep`: how many snapshots' worth of buffers to hold for reuse between saves (the writer's queue depth).
    static std::shared_ptr<SnapshotPool> create(size_t keep);
    ~SnapshotPool();

    // A deep copy of `vars` whose buffers return to the pool when the last reference goes.
    std::shared_ptr<const VarCollection> copy(const VarCollection& vars);

private:
    explicit SnapshotPool(size_t keep) : keep_(keep) {}
    unsigned char* take(size_t n);
    void give_back(unsigned char* p, size_t n) noexcept;

    const size_t keep_;
    std::mutex mutex_;
    std::multimap<size_t, unsigned char*> free_;
    size_t free_bytes_ = 0;
    size_t snapshot_bytes_ = 0;  // size of the latest snapshot: the pool holds at most keep_ of these
};

}  // namespace ckpt
