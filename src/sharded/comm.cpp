// SPDX-License-Identifier: Apache-2.0
#include "sharded/comm.hpp"

#include "core/error.hpp"

#include <cstring>

namespace ckpt::core {

std::string broadcast_string(Comm& comm, std::string s, int32_t root) {
    uint64_t n = s.size();
    comm.broadcast(&n, sizeof n, root);
    s.resize(static_cast<size_t>(n));
    if (n > 0) comm.broadcast(&s[0], s.size(), root);
    return s;
}

std::vector<std::string> all_gather_strings(Comm& comm, const std::string& s) {
    const auto longest = static_cast<size_t>(comm.all_reduce(static_cast<int64_t>(s.size()), Comm::Reduce::max));
    const size_t slot = sizeof(uint64_t) + longest;
    const auto world = static_cast<size_t>(comm.size());
    std::string send(slot, '\0');
    const uint64_t n = s.size();
    std::memcpy(&send[0], &n, sizeof n);
    if (!s.empty()) std::memcpy(&send[sizeof n], s.data(), s.size());
    std::string recv(slot * world, '\0');
    comm.all_gather(send.data(), slot, &recv[0]);
    std::vector<std::string> out(world);
    for (size_t r = 0; r < world; ++r) {
        uint64_t len = 0;
        std::memcpy(&len, &recv[r * slot], sizeof len);
        if (len > longest) fail(Code::error, "all-gather: rank {} sent a length of {} bytes, more than the {} agreed", r, len, longest);
        out[r].assign(&recv[r * slot + sizeof len], static_cast<size_t>(len));
    }
    return out;
}

void agree(Comm& comm, const std::exception_ptr& failed, const std::string& what) {
    const int32_t world = comm.size();
    const auto lowest = static_cast<int32_t>(comm.all_reduce(failed ? comm.rank() : world, Comm::Reduce::min));
    if (lowest >= world) return;
    const int64_t failures = comm.all_reduce(failed ? 1 : 0, Comm::Reduce::sum);
    int64_t code = static_cast<int64_t>(Code::error);
    std::string message;
    if (comm.rank() == lowest) {
        try {
            std::rethrow_exception(failed);
        } catch (const Error& e) {
            code = static_cast<int64_t>(e.code());
            message = e.what();
        } catch (const std::bad_alloc&) {
            code = static_cast<int64_t>(Code::no_memory);
            message = "out of memory";
        } catch (const std::exception& e) {
            message = e.what();
        } catch (...) {
            message = "an unknown exception";
        }
    }
    comm.broadcast(&code, sizeof code, lowest);
    message = broadcast_string(comm, std::move(message), lowest);
    if (code >= 0) code = static_cast<int64_t>(Code::error);  // a rank that sent no code (a broken transport)
    const std::string more = failures > 1 ? fmt::format(", and on {} more", failures - 1) : std::string();
    throw Error(static_cast<Code>(code),
                fmt::format("{} failed on rank {} of {}{}: {}", what, lowest, world, more, message));
}

}  // namespace ckpt::core
