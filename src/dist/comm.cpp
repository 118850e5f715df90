#include "dist/comm.hpp"

#include "core/error.hpp"

#include <cstring>

namespace ckpt {

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

}  // namespace ckpt
