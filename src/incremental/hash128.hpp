// SPDX-License-Identifier: Apache-2.0
// hash128: the 128-bit content hash of chunk tables (docs/format.md, "Chunk hashes"). Its values are part of the file
// format and never change; the code that computes them is chosen for the CPU it runs on (scalar, SSE2, AVX2), and
// every path gives the same values.
//
// The data is read as 64-byte stripes of eight little-endian 64-bit words w[0..7] (the last stripe zero-padded),
// into eight 64-bit lanes. Stripe j's keys are key[i] + (j + 1) * step, so the same bytes in another stripe count
// otherwise; with x = w[i] ^ key, lane i adds lo32(x) * hi32(x), and lane i ^ 1 adds w[i] itself, so that a word's
// change always changes a lane by exactly its difference (one changed element is never missed, whatever the product
// does). The lanes meet pairwise in 64x64->128-bit products, two ways, one for each half, each ending in an avalanche.
// 32x32->64-bit products and 64-bit adds are what SSE2 and AVX2 do on every lane at once: one stripe is two AVX2
// steps. Not cryptographic: it tells a training state's own chunks apart and never resists an adversary.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt::core {

struct Hash128 {
    uint64_t lo = 0;
    uint64_t hi = 0;
};
inline bool operator==(const Hash128& a, const Hash128& b) { return a.lo == b.lo && a.hi == b.hi; }
inline bool operator!=(const Hash128& a, const Hash128& b) { return !(a == b); }

// The hash of n bytes at data.
Hash128 hash128(const void* data, size_t n);

// The ways of running the stripes through the lanes: hash128 takes the fastest the CPU has.
enum class HashPath { scalar, sse2, avx2 };
// Whether this build and CPU can take `path`.
bool hash_path_available(HashPath path);
// hash128 by one path, which must be available (the hash's tests hold every path to the same values).
Hash128 hash128_by(HashPath path, const void* data, size_t n);

}  // namespace ckpt::core
