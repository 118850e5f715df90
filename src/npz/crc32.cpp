// SPDX-License-Identifier: Apache-2.0
#include "npz/crc32.hpp"

#include <zlib.h>

#include <algorithm>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CKPT_CRC32_CLMUL 1
#endif

namespace ckpt::core {

namespace {

uint32_t crc32_zlib(uint32_t crc, const unsigned char* p, size_t n) {
    return static_cast<uint32_t>(crc32_z(crc, p, n));
}

#ifdef CKPT_CRC32_CLMUL

// Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel,
// 2009): a 128-bit block A followed, d bits later, by block B has the same CRC as the single block
// B xor (A.lo * (x^(d+32) mod P)) xor (A.hi * (x^(d-32) mod P)), in the bit-reflected domain. Four blocks are
// carried at once (d = 512) to keep the multiplier busy; they are then folded into one (d = 128), and the last
// 16 bytes — which now stand for everything before them — are finished by zlib, as is the tail of n % 16 bytes.
// The constants are x^(512±32) and x^(128±32) modulo the zip polynomial, bit-reflected and shifted left by one.
__attribute__((target("pclmul,sse2"))) inline __m128i fold(__m128i a, __m128i k, __m128i b) {
    const __m128i lo = _mm_clmulepi64_si128(a, k, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(a, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), b);
}

// Folds 64-byte blocks into the four accumulators x[0..3] (one block's four 16-byte parts), then the accumulators
// into one, and finishes the CRC.
__attribute__((target("pclmul,sse2"))) uint32_t finish_clmul(__m128i x0, __m128i x1, __m128i x2, __m128i x3,
                                                             const unsigned char* p, size_t n) {
    const __m128i k512 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
    const __m128i k128 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
    const auto load = [](const unsigned char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
    for (; n >= 64; p += 64, n -= 64) {
        x0 = fold(x0, k512, load(p));
        x1 = fold(x1, k512, load(p + 16));
        x2 = fold(x2, k512, load(p + 32));
        x3 = fold(x3, k512, load(p + 48));
    }
    __m128i x = fold(fold(fold(x0, k128, x1), k128, x2), k128, x3);
    for (; n >= 16; p += 16, n -= 16) x = fold(x, k128, load(p));

    // x is congruent to the whole input so far: its CRC, started from zero and not complemented before, is the
    // answer — zlib's crc32 from 0xffffffff does exactly that.
    unsigned char last[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(last), x);
    return crc32_zlib(crc32_zlib(0xffffffffu, last, sizeof last), p, n);
}

__attribute__((target("pclmul,sse2"))) uint32_t crc32_clmul(uint32_t crc, const unsigned char* p, size_t n) {
    const auto load = [](const unsigned char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
    // zlib's CRC starts from the complement of `crc`: xor it into the first four bytes.
    const __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
    return finish_clmul(x0, load(p + 16), load(p + 32), load(p + 48), p + 64, n - 64);
}

// The same folding 512 bits per instruction (VPCLMULQDQ on AVX-512, 2019 and later): four 64-byte accumulators
// carried 256 bytes at a time (d = 2048), folded into one (d = 512), whose four 16-byte lanes are the four
// accumulators of the loop above. Three times the speed of crc32_clmul here — the check of every small array a
// restore reads.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse2"))) inline __m512i fold512(__m512i a, __m512i k, __m512i b) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), b, 0x96);
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse2"))) uint32_t crc32_vpclmul(uint32_t crc, const unsigned char* p,
                                                                                size_t n) {
    // (Set element by element: GCC 12's broadcasts and casts trip -Wuninitialized in its own headers.)
    const __m512i k2048 = _mm512_set_epi64(0x1322d1430, 0x11542778a, 0x1322d1430, 0x11542778a, 0x1322d1430, 0x11542778a,
                                           0x1322d1430, 0x11542778a);
    const __m512i k512 = _mm512_set_epi64(0x1c6e41596, 0x154442bd4, 0x1c6e41596, 0x154442bd4, 0x1c6e41596, 0x154442bd4,
                                          0x1c6e41596, 0x154442bd4);
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, ~crc));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    for (; n >= 256; p += 256, n -= 256) {
        // The hardware prefetchers stop at each 4 KiB page, and a file mapping's pages lie anywhere in memory: the
        // lines 2 KiB ahead are asked for here (a hint, never a fault past the end). Through a mapping of cached
        // file pages, 7-10% faster on one core.
        for (size_t ahead = 2048; ahead < 2048 + 256; ahead += 64)
            _mm_prefetch(reinterpret_cast<const char*>(p) + ahead, _MM_HINT_T0);
        x0 = fold512(x0, k2048, _mm512_loadu_si512(p));
        x1 = fold512(x1, k2048, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k2048, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k2048, _mm512_loadu_si512(p + 192));
    }
    __m128i lanes[4];
    _mm512_storeu_si512(lanes, fold512(fold512(fold512(x0, k512, x1), k512, x2), k512, x3));
    return finish_clmul(lanes[0], lanes[1], lanes[2], lanes[3], p, n);
}

bool have_vpclmul() {
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                            __builtin_cpu_supports("pclmul");
    return yes;
}

bool have_clmul() {
    static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
    return yes;
}

#endif

// Below this the setup costs more than zlib's table walk.
constexpr size_t kClmulMinBytes = 64;
// From this on, the 512-bit folding pays for its setup.
constexpr size_t kVpclmulMinBytes = 512;

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    if (n == 0) return crc;
#ifdef CKPT_CRC32_CLMUL
    if (n >= kVpclmulMinBytes && have_vpclmul()) return crc32_vpclmul(crc, p, n);
    if (n >= kClmulMinBytes && have_clmul()) return crc32_clmul(crc, p, n);
#endif
    return crc32_zlib(crc, p, n);
}

Crc32Join::Crc32Join(uint64_t part_bytes) : op_(crc32_combine_gen(static_cast<z_off_t>(part_bytes))) {}

uint32_t Crc32Join::operator()(uint32_t before, uint32_t part) const {
    return static_cast<uint32_t>(crc32_combine_op(before, part, op_));
}

uint32_t crc32_parallel(const void* data, size_t n, unsigned threads) {
    // Each thread gets at least this much: below it, starting and joining a thread (which on a loaded machine waits
    // to be scheduled) costs more than the part takes on one core (4 MiB of cached file pages: about 0.6 ms). At
    // 16 MiB, every array of 8 to 31 MiB was checked on one core: mapping W1's 64 arrays of 8 MiB with their CRCs
    // took 78-80 ms, and takes 42-50 ms on two.
    constexpr size_t kPerThreadMin = size_t{4} << 20;
    const auto* p = static_cast<const unsigned char*>(data);
    threads = static_cast<unsigned>(std::min<size_t>(std::max(threads, 1u), n / kPerThreadMin));
    if (threads <= 1) return crc32(0, p, n);
    const size_t part = n / threads;
    std::vector<uint32_t> crc(threads);
    std::vector<std::thread> helpers;
    helpers.reserve(threads - 1);
    unsigned started = 1;  // parts 1 .. started-1 have their own thread; the caller takes part 0 and the rest
    const auto range = [&](unsigned t) { return t + 1 == threads ? n - part * t : part; };
    try {
        for (; started < threads; ++started)
            helpers.emplace_back([&, t = started] { crc[t] = crc32(0, p + part * t, range(t)); });
    } catch (...) {
        // No more threads (or memory for one): the caller checks what is left.
    }
    crc[0] = crc32(0, p, part);
    for (unsigned t = started; t < threads; ++t) crc[t] = crc32(0, p + part * t, range(t));
    for (auto& h : helpers) h.join();
    uint32_t all = crc[0];
    for (unsigned t = 1; t < threads; ++t)
        all = static_cast<uint32_t>(crc32_combine(all, crc[t], static_cast<z_off_t>(range(t))));
    return all;
}

}  // namespace ckpt::core
