// SPDX-License-Identifier: Apache-2.0
// ckpt_comm: the C face of ckpt::core::Comm, and the adapter that turns a C callback table into one.
#include "comm.hpp"

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::core::Code;

namespace {

void check(int rc, const char* op) {
    if (rc != CKPT_OK) ckpt::capi::callback_failed(rc, fmt::format("communicator callback '{}'", op));
}

class CallbackComm final : public ckpt::core::Comm {
public:
    explicit CallbackComm(const ckpt_comm_ops& ops) : ops_(ops) {
        int32_t rank = -1, size = 0;
        check(ops_.size(ops_.payload, &size), "size");
        check(ops_.rank(ops_.payload, &rank), "rank");
        if (size < 1) ckpt::core::fail(Code::invalid, "ckpt_comm_new: the size callback reported {} ranks", size);
        if (rank < 0 || rank >= size)
            ckpt::core::fail(Code::invalid, "ckpt_comm_new: the rank callback reported rank {} of {}", rank, size);
        rank_ = rank;
        size_ = size;
    }
    ~CallbackComm() override {
        if (ops_.destroy != nullptr) ops_.destroy(ops_.payload);
    }
    int32_t rank() const override { return rank_; }
    int32_t size() const override { return size_; }
    void barrier() override { check(ops_.barrier(ops_.payload), "barrier"); }
    int64_t all_reduce(int64_t value, Reduce op) override {
        check(ops_.all_reduce_i64(ops_.payload, &value, static_cast<uint32_t>(op)), "all_reduce_i64");
        return value;
    }
    void broadcast(void* buf, size_t n, int32_t root) override {
        check(ops_.broadcast(ops_.payload, buf, n, root), "broadcast");
    }
    void all_gather(const void* send, size_t n, void* recv) override {
        check(ops_.all_gather(ops_.payload, send, n, recv), "all_gather");
    }

private:
    ckpt_comm_ops ops_;
    int32_t rank_ = 0;
    int32_t size_ = 1;
};

}  // namespace

namespace ckpt::capi {

std::shared_ptr<Comm> comm_of(const ckpt_comm* c) { return c != nullptr ? c->comm : nullptr; }

}  // namespace ckpt::capi

extern "C" {

CKPT_API int ckpt_comm_new(ckpt_comm** out, const ckpt_comm_ops* ops) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_comm_new", "out");
        require(ops, "ckpt_comm_new", "ops");
        if (ops->version != CKPT_COMM_OPS_VERSION)
            ckpt::core::fail(Code::invalid, "ckpt_comm_new: ops version {} is not supported ({})", ops->version,
                             CKPT_COMM_OPS_VERSION);
        const std::pair<const void*, const char*> required[] = {
            {reinterpret_cast<const void*>(ops->rank), "rank"},
            {reinterpret_cast<const void*>(ops->size), "size"},
            {reinterpret_cast<const void*>(ops->barrier), "barrier"},
            {reinterpret_cast<const void*>(ops->all_reduce_i64), "all_reduce_i64"},
            {reinterpret_cast<const void*>(ops->broadcast), "broadcast"},
            {reinterpret_cast<const void*>(ops->all_gather), "all_gather"},
        };
        for (const auto& [fn, name] : required)
            if (fn == nullptr) ckpt::core::fail(Code::invalid, "ckpt_comm_new: the '{}' callback is NULL", name);
        auto handle = std::make_unique<ckpt_comm>();
        handle->comm = std::make_shared<CallbackComm>(*ops);
        *out = handle.release();
    });
}

CKPT_API void ckpt_comm_free(ckpt_comm* comm) { delete comm; }

CKPT_API int32_t ckpt_comm_rank(const ckpt_comm* comm) { return comm != nullptr ? comm->comm->rank() : -1; }

CKPT_API int32_t ckpt_comm_size(const ckpt_comm* comm) { return comm != nullptr ? comm->comm->size() : 0; }

}
