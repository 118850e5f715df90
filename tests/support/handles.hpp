// Owning pointers for the C API's handles in tests, and the one-line constructors every C API test needs.
#pragma once

#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include <memory>

namespace ckpt::testing {

struct Release {
    void operator()(ckpt_vars* v) const { ckpt_vars_free(v); }
    void operator()(ckpt_npz* n) const { ckpt_npz_close(n); }
    void operator()(ckpt_manager* m) const { ckpt_manager_close(m); }
};
using Vars = std::unique_ptr<ckpt_vars, Release>;
using Npz = std::unique_ptr<ckpt_npz, Release>;
using Manager = std::unique_ptr<ckpt_manager, Release>;

inline Vars new_vars() {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    REQUIRE(v != nullptr);
    return Vars(v);
}

}  // namespace ckpt::testing
