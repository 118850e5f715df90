// SPDX-License-Identifier: Apache-2.0
#include "core/error.hpp"

#include <cstring>
#include <string_view>

namespace ckpt::core {

void fail_errno(int err, const std::string& what) {
    char buf[256];
    // GNU strerror_r returns the message pointer (which may or may not be buf).
    const char* text = strerror_r(err, buf, sizeof buf);
    throw Error(Code::io, fmt::format("{}: {}", what, text));
}

void rethrow_with_context(const Error& e, const std::string& prefix) {
    throw Error(e.code(), fmt::format("{}: {}", prefix, e.what()));
}

void rethrow_naming(const Error& e, const std::string& path) {
    if (std::string_view(e.what()).find(path) != std::string_view::npos) throw e;
    rethrow_with_context(e, path);
}

}  // namespace ckpt::core
