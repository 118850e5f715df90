// SPDX-License-Identifier: Apache-2.0
// ThreadComm: ckpt::core::Comm between the threads of one process — the ranks of a test that needs no MPI. Each call is
// a round in which every rank deposits its bytes and receives everyone's.
#pragma once

#include "sharded/comm.hpp"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ckpt::testing {

using namespace ckpt::core;

class ThreadWorld {
public:
    explicit ThreadWorld(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
    int size() const { return size_; }

    // Every rank's `mine`, by rank, once every rank has called.
    std::vector<std::string> exchange(int rank, std::string mine) {
        std::unique_lock<std::mutex> lock(mutex_);
        slots_[static_cast<size_t>(rank)] = std::move(mine);
        const uint64_t generation = generation_;
        if (++arrived_ == size_) {
            result_ = slots_;
            arrived_ = 0;
            ++generation_;
            ready_.notify_all();
        } else {
            ready_.wait(lock, [&] { return generation_ != generation; });
        }
        return result_;  // not replaced before this rank has called again
    }

private:
    int size_;
    std::mutex mutex_;
    std::condition_variable ready_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    std::vector<std::string> slots_, result_;
};

class ThreadComm final : public Comm {
public:
    ThreadComm(std::shared_ptr<ThreadWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}
    int32_t rank() const override { return rank_; }
    int32_t size() const override { return world_->size(); }
    void barrier() override { world_->exchange(rank_, {}); }
    int64_t all_reduce(int64_t value, Reduce op) override {
        int64_t out = value;
        bool first = true;
        for (const std::string& s : world_->exchange(rank_, std::string(reinterpret_cast<char*>(&value), sizeof value))) {
            int64_t v;
            std::memcpy(&v, s.data(), sizeof v);
            if (first) out = v;
            else if (op == Reduce::min) out = std::min(out, v);
            else if (op == Reduce::max) out = std::max(out, v);
            else out += v;
            first = false;
        }
        return out;
    }
    void broadcast(void* buf, size_t n, int32_t root) override {
        const auto all = world_->exchange(rank_, std::string(static_cast<char*>(buf), n));
        std::memcpy(buf, all[static_cast<size_t>(root)].data(), n);
    }
    void all_gather(const void* send, size_t n, void* recv) override {
        const auto all = world_->exchange(rank_, std::string(static_cast<const char*>(send), n));
        for (size_t r = 0; r < all.size(); ++r) std::memcpy(static_cast<char*>(recv) + r * n, all[r].data(), n);
    }

private:
    std::shared_ptr<ThreadWorld> world_;
    int rank_;
};

// Runs body(rank, comm) on `size` threads, one per rank, and rethrows the first exception a rank threw.
inline void run_ranks(int size, const std::function<void(int, std::shared_ptr<Comm>)>& body) {
    auto world = std::make_shared<ThreadWorld>(size);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
        threads.emplace_back([&, r] {
            try {
                body(r, std::make_shared<ThreadComm>(world, r));
            } catch (...) {
                errors[static_cast<size_t>(r)] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace ckpt::testing
