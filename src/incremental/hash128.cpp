// SPDX-License-Identifier: Apache-2.0
#include "incremental/hash128.hpp"

#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include <immintrin.h>
#define CKPT_HASH_X86 1
#endif

namespace ckpt::core {

namespace {

// Odd 64-bit constants with no structure (the first bits of the fractional parts of sqrt(2), sqrt(3), ...).
constexpr uint64_t kKey[8] = {0x6a09e667f3bcc909, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
                              0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179};
constexpr uint64_t kStep = 0x9e3779b97f4a7c15;  // the golden ratio's bits: each stripe's keys differ by it
constexpr size_t kStripe = 64;

using Lanes = uint64_t[8];
using Stripes = void (*)(Lanes& lanes, const unsigned char* p, size_t count, uint64_t first);

inline uint64_t load64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

// The 128-bit product of a and b, its halves xored: every bit of either input reaches the result.
inline uint64_t fold(uint64_t a, uint64_t b) {
    const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

// A bijective mixer: every input bit flips about half the output bits.
inline uint64_t avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccd;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53;
    return h ^ (h >> 33);
}

// `count` stripes at p, the first of them stripe number `first` of the input.
void stripes_scalar(Lanes& lanes, const unsigned char* p, size_t count, uint64_t first) {
    uint64_t t = (first + 1) * kStep;
    for (size_t s = 0; s < count; ++s, p += kStripe, t += kStep) {
        for (int i = 0; i < 8; ++i) {
            const uint64_t w = load64(p + 8 * i);
            const uint64_t x = w ^ (kKey[i] + t);
            lanes[i] += (x & 0xffffffffu) * (x >> 32);
            lanes[i ^ 1] += w;
        }
    }
}

#ifdef CKPT_HASH_X86
__attribute__((target("sse2"))) void stripes_sse2(Lanes& lanes, const unsigned char* p, size_t count, uint64_t first) {
    const uint64_t t = (first + 1) * kStep;
    __m128i acc[4], key[4];
    for (int v = 0; v < 4; ++v) {
        acc[v] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes + 2 * v));
        key[v] = _mm_set_epi64x(static_cast<long long>(kKey[2 * v + 1] + t), static_cast<long long>(kKey[2 * v] + t));
    }
    const __m128i step = _mm_set1_epi64x(static_cast<long long>(kStep));
    for (size_t s = 0; s < count; ++s, p += kStripe) {
        for (int v = 0; v < 4; ++v) {
            const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v));
            const __m128i x = _mm_xor_si128(w, key[v]);
            const __m128i product = _mm_mul_epu32(x, _mm_srli_epi64(x, 32));
            const __m128i swapped = _mm_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2));  // word i to lane i ^ 1
            acc[v] = _mm_add_epi64(acc[v], _mm_add_epi64(product, swapped));
            key[v] = _mm_add_epi64(key[v], step);
        }
    }
    for (int v = 0; v < 4; ++v) _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes + 2 * v), acc[v]);
}

__attribute__((target("avx2"))) void stripes_avx2(Lanes& lanes, const unsigned char* p, size_t count, uint64_t first) {
    const uint64_t t = (first + 1) * kStep;
    __m256i acc[2], key[2];
    for (int v = 0; v < 2; ++v) {
        acc[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 4 * v));
        key[v] =
            _mm256_set_epi64x(static_cast<long long>(kKey[4 * v + 3] + t), static_cast<long long>(kKey[4 * v + 2] + t),
                              static_cast<long long>(kKey[4 * v + 1] + t), static_cast<long long>(kKey[4 * v] + t));
    }
    const __m256i step = _mm256_set1_epi64x(static_cast<long long>(kStep));
    for (size_t s = 0; s < count; ++s, p += kStripe) {
        for (int v = 0; v < 2; ++v) {
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * v));
            const __m256i x = _mm256_xor_si256(w, key[v]);
            const __m256i product = _mm256_mul_epu32(x, _mm256_srli_epi64(x, 32));
            const __m256i swapped = _mm256_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2));  // word i to lane i ^ 1
            acc[v] = _mm256_add_epi64(acc[v], _mm256_add_epi64(product, swapped));
            key[v] = _mm256_add_epi64(key[v], step);
        }
    }
    for (int v = 0; v < 2; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 4 * v), acc[v]);
}
#endif

Stripes stripes_of(HashPath path) {
    switch (path) {
#ifdef CKPT_HASH_X86
        case HashPath::sse2: return stripes_sse2;
        case HashPath::avx2: return stripes_avx2;
#endif
        default: return stripes_scalar;
    }
}

HashPath fastest() {
#ifdef CKPT_HASH_X86
    if (__builtin_cpu_supports("avx2")) return HashPath::avx2;
    if (__builtin_cpu_supports("sse2")) return HashPath::sse2;
#endif
    return HashPath::scalar;
}

Hash128 hash_by(Stripes stripes, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    Lanes l = {kKey[0], kKey[1], kKey[2], kKey[3], kKey[4], kKey[5], kKey[6], kKey[7]};
    const size_t whole = n / kStripe;
    stripes(l, p, whole, 0);
    if (n % kStripe != 0) {
        unsigned char last[kStripe] = {};
        std::memcpy(last, p + kStripe * whole, n % kStripe);
        stripes(l, last, 1, whole);
    }
    const uint64_t length = static_cast<uint64_t>(n);
    Hash128 h;
    h.lo = avalanche(fold(l[0] ^ kKey[1], l[1] ^ kKey[2]) + fold(l[2] ^ kKey[3], l[3] ^ kKey[4]) +
                     fold(l[4] ^ kKey[5], l[5] ^ kKey[6]) + fold(l[6] ^ kKey[7], l[7] ^ kKey[0]) + length * kStep);
    h.hi = avalanche(fold(l[0] ^ kKey[4], l[3] ^ kKey[5]) + fold(l[1] ^ kKey[6], l[6] ^ kKey[7]) +
                     fold(l[2] ^ kKey[0], l[5] ^ kKey[1]) + fold(l[4] ^ kKey[2], l[7] ^ kKey[3]) + length);
    return h;
}

}  // namespace

Hash128 hash128(const void* data, size_t n) {
    static const Stripes best = stripes_of(fastest());
    return hash_by(best, data, n);
}

bool hash_path_available(HashPath path) {
    switch (path) {
        case HashPath::scalar: return true;
#ifdef CKPT_HASH_X86
        case HashPath::sse2: return __builtin_cpu_supports("sse2");
        case HashPath::avx2: return __builtin_cpu_supports("avx2");
#endif
        default: return false;
    }
}

Hash128 hash128_by(HashPath path, const void* data, size_t n) {
    if (!hash_path_available(path)) throw std::logic_error("hash128_by: this CPU or build cannot take that path");
    return hash_by(stripes_of(path), data, n);
}

}  // namespace ckpt::core
