// SPDX-License-Identifier: Apache-2.0
// ckpt::core::crc32 must agree with zlib's crc32_z for every length, alignment and starting value: the SIMD path
// handles 64-byte steps, 16-byte steps and a tail, so lengths around those boundaries are all tried.
#include "npz/crc32.hpp"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <vector>

namespace {
uint32_t zlib_crc(uint32_t crc, const unsigned char* p, size_t n) { return static_cast<uint32_t>(crc32_z(crc, p, n)); }
}  // namespace

TEST_CASE("crc32 of known strings") {
    CHECK(ckpt::core::crc32(0, "", 0) == 0u);
    CHECK(ckpt::core::crc32(0, "123456789", 9) == 0xCBF43926u);  // the CRC-32 check value
    const std::string zeros(4096, '\0');
    CHECK(ckpt::core::crc32(0, zeros.data(), zeros.size()) ==
          zlib_crc(0, reinterpret_cast<const unsigned char*>(zeros.data()), zeros.size()));
}

TEST_CASE("crc32 matches zlib for every length, alignment and starting CRC") {
    std::mt19937 gen(7);
    std::vector<unsigned char> bytes(4200);
    for (auto& b : bytes) b = static_cast<unsigned char>(gen());
    // Up to 1100 every length; then lengths around multiples of 256, the step of the 512-bit form.
    for (size_t n = 0; n <= 4190; n += n < 1100 || n % 256 < 20 || n % 256 > 236 ? 1 : 7) {
        for (size_t offset = 0; offset < 4; ++offset) {
            const uint32_t start = n % 3 == 0 ? 0u : static_cast<uint32_t>(gen());
            INFO("n=" << n << " offset=" << offset << " start=" << start);
            REQUIRE(ckpt::core::crc32(start, bytes.data() + offset, n) == zlib_crc(start, bytes.data() + offset, n));
        }
    }
}

TEST_CASE("crc32 in pieces equals crc32 of the whole") {
    std::mt19937 gen(11);
    std::vector<unsigned char> bytes(size_t{3} << 20);
    for (auto& b : bytes) b = static_cast<unsigned char>(gen());
    const uint32_t whole = ckpt::core::crc32(0, bytes.data(), bytes.size());
    CHECK(whole == zlib_crc(0, bytes.data(), bytes.size()));
    uint32_t crc = 0;
    for (size_t at = 0; at < bytes.size();) {
        const size_t n = std::min<size_t>(bytes.size() - at, 1 + gen() % 100000);
        crc = ckpt::core::crc32(crc, bytes.data() + at, n);
        at += n;
    }
    CHECK(crc == whole);
}

TEST_CASE("crc32_parallel equals crc32 for any number of threads, around the sizes where threads start") {
    std::mt19937 gen(11);
    std::vector<unsigned char> bytes((size_t{64} << 20) + 3);
    for (auto& b : bytes) b = static_cast<unsigned char>(gen());
    // Threads take at least 4 MiB each: 8 MiB is where a second one starts.
    for (const size_t n : {size_t{0}, size_t{1}, (size_t{8} << 20) - 1, size_t{8} << 20, (size_t{12} << 20) + 5,
                           (size_t{32} << 20) + 1, bytes.size()})
        for (const unsigned threads : {0u, 1u, 2u, 3u, 4u}) {
            CAPTURE(n, threads);
            CHECK(ckpt::core::crc32_parallel(bytes.data(), n, threads) == zlib_crc(0, bytes.data(), n));
        }
}

TEST_CASE("crc32 of bytes that end where the memory does reads nothing past them") {
    // The 512-bit loop asks for lines ahead of it; a guard page right after the data would fault on any read there.
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), span = 4 * page;
    void* const m = ::mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    auto* const bytes = static_cast<unsigned char*>(m);
    REQUIRE(::mprotect(bytes + span, page, PROT_NONE) == 0);
    std::mt19937 gen(5);
    for (size_t i = 0; i < span; ++i) bytes[i] = static_cast<unsigned char>(gen());
    for (const size_t n : {size_t{256}, size_t{257}, size_t{2048}, size_t{2304}, span - 1, span}) {
        CAPTURE(n);
        CHECK(ckpt::core::crc32(0, bytes + span - n, n) == zlib_crc(0, bytes + span - n, n));
    }
    ::munmap(m, span + page);
}
