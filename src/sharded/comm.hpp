// SPDX-License-Identifier: Apache-2.0
// Comm: what a sharded checkpoint needs from the processes that write it together — their number, their rank, a
// barrier, an all-reduce of an int64, a broadcast and an all-gather of small byte buffers. ckpt has no transport of
// its own: MPI (libckpt_mpi), NCCL/Gloo/torch.distributed or a test's threads plug in through ckpt_comm_ops.
//
// Every call is collective: every rank makes the same calls in the same order. A failing call throws ckpt::core::Error;
// what the other ranks then see is the transport's business (MPI aborts the job by default).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace ckpt::core {

class Comm {
public:
    enum class Reduce : uint32_t { min = 0, max = 1, sum = 2 };

    virtual ~Comm() = default;
    virtual int32_t rank() const = 0;
    virtual int32_t size() const = 0;
    virtual void barrier() = 0;
    virtual int64_t all_reduce(int64_t value, Reduce op) = 0;
    // Replaces buf[0..n) on every rank with root's bytes (every rank passes the same n).
    virtual void broadcast(void* buf, size_t n, int32_t root) = 0;
    // recv[r*n .. (r+1)*n) gets rank r's send[0..n) (every rank passes the same n; recv holds size()*n bytes).
    virtual void all_gather(const void* send, size_t n, void* recv) = 0;
};

// Root's string on every rank (its length first, then its bytes).
std::string broadcast_string(Comm& comm, std::string s, int32_t root);
// Every rank's string, indexed by rank (strings of any length: padded to the longest).
std::vector<std::string> all_gather_strings(Comm& comm, const std::string& s);

// The agreement of the ranks on a step each made alone (checking its own arguments, preparing its part): every
// rank passes what it met (nullptr: success). Returns on every rank when every rank succeeded; otherwise throws on
// every rank the same Error: the code of the lowest failing rank, and "<what> failed on rank R of N: <its
// message>" (", and on K more" when others failed too). One all-reduce when every rank succeeded.
void agree(Comm& comm, const std::exception_ptr& failed, const std::string& what);

}  // namespace ckpt::core
