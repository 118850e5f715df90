// SPDX-License-Identifier: Apache-2.0
// The bytes of a safetensors file made by hand, for tests of what other writers (and hostile ones) write.
#pragma once

#include <cstdint>
#include <string>

namespace ckpt::testing {

// The 8-byte little-endian length of `json`, `json` as it is (no padding), then `data`.
inline std::string safetensors_file(const std::string& json, const std::string& data = "") {
    std::string out(8, '\0');
    uint64_t n = json.size();
    for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xff);
    return out + json + data;
}

}  // namespace ckpt::testing
