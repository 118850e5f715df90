// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/comm.hpp — ckpt::Comm and ckpt::CommHandle: how the processes of a sharded save coordinate (ckpt_comm_ops).
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_COMM_HPP
#define CKPT_CPP_COMM_HPP

#include <ckpt/cpp/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ckpt {

// How the processes of one job that save a sharded checkpoint together coordinate: a C++ face of ckpt_comm_ops.
// Subclass it over the job's transport (MPI, NCCL, Gloo) and make a CommHandle of it; or adopt libckpt_mpi's
// (CommHandle::adopt(ckpt_mpi_comm_new's result)). Every method but rank and size is collective: ckpt makes the
// same calls in the same order on every rank, from the thread that called it, with small buffers only. What a
// method throws fails the ckpt call (with an Error's own code, else CKPT_ERROR), whose message then says
// "communicator callback '<method>' failed: <what()>".
class Comm {
public:
    virtual ~Comm() = default;
    virtual int32_t rank() const = 0;
    virtual int32_t size() const = 0;
    virtual void barrier() = 0;
    // The minimum, maximum or sum (op: CKPT_REDUCE_*) of every rank's value.
    virtual int64_t all_reduce(int64_t value, uint32_t op) = 0;
    // Replaces buf[0..size) on every rank with rank root's bytes.
    virtual void broadcast(void* buf, size_t size, int32_t root) = 0;
    // recv[r*size .. (r+1)*size) gets rank r's send[0..size).
    virtual void all_gather(const void* send, size_t size, void* recv) = 0;
};

// A reference to a ckpt communicator, for ManagerOptions::comm; copies share it, and managers keep their own.
class CommHandle {
public:
    explicit CommHandle(std::shared_ptr<Comm> comm) {
        if (!comm) throw Error(CKPT_EINVAL, "ckpt::CommHandle: no communicator");
        auto* payload = new std::shared_ptr<Comm>(std::move(comm));
        ckpt_comm_ops ops{CKPT_COMM_OPS_VERSION, payload, &Callbacks::rank, &Callbacks::size, &Callbacks::barrier,
                          &Callbacks::all_reduce, &Callbacks::broadcast, &Callbacks::all_gather, &Callbacks::destroy};
        ckpt_comm* c = nullptr;
        const int rc = ckpt_comm_new(&c, &ops);
        if (rc != CKPT_OK) {
            delete payload;  // on failure the library does not call destroy
            detail::check(rc);
        }
        c_.reset(c, [](ckpt_comm* x) { ckpt_comm_free(x); });
    }
    // Takes over the caller's reference to a communicator made through the C API (ckpt_comm_new,
    // ckpt_mpi_comm_new).
    static CommHandle adopt(ckpt_comm* comm) {
        if (comm == nullptr) throw Error(CKPT_EINVAL, "ckpt::CommHandle::adopt: NULL communicator");
        CommHandle h;
        h.c_.reset(comm, [](ckpt_comm* x) { ckpt_comm_free(x); });
        return h;
    }
    int32_t rank() const noexcept { return ckpt_comm_rank(c_.get()); }
    int32_t size() const noexcept { return ckpt_comm_size(c_.get()); }
    ckpt_comm* native() const noexcept { return c_.get(); }

private:
    CommHandle() = default;
    struct Callbacks {
        static Comm& self(void* p) noexcept { return **static_cast<std::shared_ptr<Comm>*>(p); }
        template <typename F>
        static int run(F&& f) noexcept {
            try {
                f();
                return CKPT_OK;
            } catch (...) {
                return detail::current_exception_code(CKPT_ERROR);
            }
        }
        static int rank(void* p, int32_t* out) noexcept { return run([&] { *out = self(p).rank(); }); }
        static int size(void* p, int32_t* out) noexcept { return run([&] { *out = self(p).size(); }); }
        static int barrier(void* p) noexcept { return run([&] { self(p).barrier(); }); }
        static int all_reduce(void* p, int64_t* value, uint32_t op) noexcept {
            return run([&] { *value = self(p).all_reduce(*value, op); });
        }
        static int broadcast(void* p, void* buf, size_t size, int32_t root) noexcept {
            return run([&] { self(p).broadcast(buf, size, root); });
        }
        static int all_gather(void* p, const void* send, size_t size, void* recv) noexcept {
            return run([&] { self(p).all_gather(send, size, recv); });
        }
        static void destroy(void* p) noexcept { delete static_cast<std::shared_ptr<Comm>*>(p); }
    };
    std::shared_ptr<ckpt_comm> c_;
};

}  // namespace ckpt

#endif  // CKPT_CPP_COMM_HPP
