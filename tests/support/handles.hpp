// SPDX-License-Identifier: Apache-2.0
// Owning pointers for the C API's handles in tests, and the one-line constructors every C API test needs.
#pragma once

#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>

namespace ckpt::testing {

// The calling thread's last ckpt failure, for CHECK_THAT(message(), Contains(...)).
inline std::string message() { return ckpt_error_message(); }

struct Release {
    void operator()(ckpt_vars* v) const { ckpt_vars_free(v); }
    void operator()(ckpt_reader* n) const { ckpt_reader_close(n); }
    void operator()(ckpt_manager* m) const { ckpt_manager_close(m); }
};
using Vars = std::unique_ptr<ckpt_vars, Release>;
using Reader = std::unique_ptr<ckpt_reader, Release>;
using Manager = std::unique_ptr<ckpt_manager, Release>;

inline Vars new_vars() {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    REQUIRE(v != nullptr);
    return Vars(v);
}

// Opens an .npz lazily (ckpt_reader_open), requiring success; the library's message is shown when it fails.
inline Reader open_file(const std::string& path, const ckpt_options* opts = nullptr) {
    ckpt_reader* n = nullptr;
    const int rc = ckpt_reader_open(&n, path.c_str(), opts);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    return Reader(n);
}

}  // namespace ckpt::testing
