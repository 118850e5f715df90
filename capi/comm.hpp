// SPDX-License-Identifier: Apache-2.0
// The ckpt_comm handle, shared by the C API and libckpt_mpi (which builds its communicator through ckpt_comm_new,
// so it needs only the public header; this is for the managers that use one).
#pragma once

#include "sharded/comm.hpp"
#include "guard.hpp"

#include <memory>

struct ckpt_comm {
    std::shared_ptr<ckpt::core::Comm> comm;
};

namespace ckpt::capi {

// The communicator an option names, or nullptr for NULL.
std::shared_ptr<Comm> comm_of(const ckpt_comm* c);

}  // namespace ckpt::capi
