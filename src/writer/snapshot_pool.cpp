// SPDX-License-Identifier: Apache-2.0
#include "writer/snapshot_pool.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace ckpt::core {

namespace {
constexpr std::align_val_t kAlignment{64};

struct Snapshot {
    VarCollection vars;
    std::vector<std::shared_ptr<unsigned char>> buffers;
};
}  // namespace

std::shared_ptr<SnapshotPool> SnapshotPool::create(size_t keep, uint64_t budget) {
    return std::shared_ptr<SnapshotPool>(new SnapshotPool(keep == 0 ? 1 : keep, budget));
}

SnapshotPool::~SnapshotPool() {
    for (auto& [n, p] : free_) ::operator delete[](p, kAlignment);
}

void SnapshotPool::reserve(uint64_t total) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (budget_ != 0) {
        returned_.wait(lock, [&] { return live_bytes_ + total <= budget_; });
        // Buffers kept for reuse count against the budget too: free the largest until this snapshot fits (the
        // buffers it takes from the pool then only lower the total).
        while (live_bytes_ + total + free_bytes_ > budget_ && !free_.empty()) {
            auto it = std::prev(free_.end());
            ::operator delete[](it->second, kAlignment);
            free_bytes_ -= it->first;
            free_.erase(it);
        }
    }
    live_bytes_ += total;
}

unsigned char* SnapshotPool::take(size_t n) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = free_.find(n);
        if (it != free_.end()) {
            unsigned char* p = it->second;
            free_.erase(it);
            free_bytes_ -= n;
            return p;
        }
    }
    return static_cast<unsigned char*>(::operator new[](n, kAlignment));
}

void SnapshotPool::give_back(unsigned char* p, size_t n) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    live_bytes_ -= n;
    returned_.notify_all();
    const bool within_budget = budget_ == 0 || live_bytes_ + free_bytes_ + n <= budget_;
    if (within_budget && free_bytes_ + n <= snapshot_bytes_ * keep_) {
        // This runs in a shared_ptr deleter, where an exception would end the process: when the pool cannot make
        // room for the buffer, the buffer is freed instead of kept.
        try {
            free_.emplace(n, p);
            free_bytes_ += n;
            return;
        } catch (const std::bad_alloc&) {
        }
    }
    ::operator delete[](p, kAlignment);
}

std::shared_ptr<const VarCollection> SnapshotPool::for_save(const VarCollection& vars, bool borrow) {
    if (!borrow) return copy(vars);
    return std::shared_ptr<const VarCollection>(&vars, [](const VarCollection*) {});
}

std::shared_ptr<const VarCollection> SnapshotPool::copy(const VarCollection& vars) {
    auto snapshot = std::make_shared<Snapshot>();
    std::weak_ptr<SnapshotPool> pool = weak_from_this();
    size_t total = 0;
    for (size_t i = 0; i < vars.size(); ++i) total += vars.array(i).nbytes();
    reserve(total);
    // What is not yet handed to a buffer's deleter is given back here if the copy fails half way.
    size_t unclaimed = total;
    struct Release {
        SnapshotPool& pool;
        size_t& bytes;
        ~Release() {
            std::lock_guard<std::mutex> lock(pool.mutex_);
            pool.live_bytes_ -= bytes;
            pool.returned_.notify_all();
        }
    } release{*this, unclaimed};
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        const size_t n = a.nbytes();
        void* data = nullptr;
        if (n > 0) {
            unsigned char* raw = take(n);
            unclaimed -= n;  // from here the deleter gives it back, even if the shared_ptr cannot be made
            std::shared_ptr<unsigned char> buffer(raw, [pool, n](unsigned char* p) {
                if (auto owner = pool.lock())
                    owner->give_back(p, n);
                else
                    ::operator delete[](p, kAlignment);
            });
            // A source is pulled in pieces of kSourcePiece (each piece a call of the caller's callback).
            constexpr size_t kSourcePiece = size_t{4} << 20;
            for (size_t at = 0; at < n; at += kSourcePiece)
                a.read(at, buffer.get() + at, std::min(kSourcePiece, n - at));
            data = buffer.get();
            snapshot->buffers.push_back(std::move(buffer));
        }
        snapshot->vars.add(vars.name(i), Array::borrow(a.dtype(), a.itemsize(), a.shape(), data));
    }
    snapshot->vars.metadata() = vars.metadata();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        snapshot_bytes_ = total;
    }
    return std::shared_ptr<const VarCollection>(snapshot, &snapshot->vars);
}

}  // namespace ckpt::core
