// SPDX-License-Identifier: Apache-2.0
// The bytes of a file in any core storage (a MemoryStorage the test saved into, a crash view): stored().
#pragma once

#include <string>

#include "storage/storage.hpp"

namespace ckpt::testing {

// The whole file at `path`, read through storage.open_read; throws its Error (not_found when there is none).
inline std::string stored(ckpt::core::Storage& storage, const std::string& path) {
    auto in = storage.open_read(path);
    std::string bytes(static_cast<size_t>(in->size()), '\0');
    if (in->read_at(0, &bytes[0], bytes.size()) != bytes.size()) throw std::runtime_error(path + ": short read");
    return bytes;
}

}  // namespace ckpt::testing
