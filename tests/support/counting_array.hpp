// SPDX-License-Identifier: Apache-2.0
// Arrays of pseudo-random bytes for the reader tests: each seed gives other bytes, so a misplaced one shows.
#pragma once

#include "core/array.hpp"

#include <cstdint>
#include <vector>

namespace ckpt::testing {

using namespace ckpt::core;

inline Array counting_array(DType dtype, size_t itemsize, std::vector<int64_t> shape, uint32_t seed) {
    Array a = Array::allocate(dtype, itemsize, std::move(shape), false);
    auto* p = static_cast<unsigned char*>(a.data());
    uint32_t x = seed;
    for (size_t i = 0; i < a.nbytes(); ++i) {
        x = x * 1664525u + 1013904223u;
        p[i] = static_cast<unsigned char>(x >> 24);
    }
    return a;
}

}  // namespace ckpt::testing
