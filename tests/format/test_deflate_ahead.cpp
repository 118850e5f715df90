// SPDX-License-Identifier: Apache-2.0
// DeflateAhead: blocks compressed on worker threads must form, per member, one raw deflate stream that inflates
// to the member's bytes, with the right CRC-32 — and the bytes must not depend on the number of threads.
#include "npz/deflate_ahead.hpp"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <random>
#include <string>
#include <vector>

using ckpt::core::DeflateAhead;

namespace {

// Compressible bytes: runs and repeats with some noise, like weights with few distinct values.
std::string sample(size_t n, uint32_t seed) {
    std::mt19937 gen(seed);
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(gen() % 7 == 0 ? gen() : (i / 3) % 17);
    return s;
}

struct Member {
    std::vector<unsigned char> deflated;
    uint32_t crc = 0;
    uint64_t size = 0;
};

std::vector<Member> run(const std::vector<std::vector<std::string>>& members, unsigned threads, int level) {
    std::vector<std::vector<DeflateAhead::Piece>> pieces;
    for (const auto& m : members) {
        pieces.emplace_back();
        for (const auto& p : m) pieces.back().push_back({p.data(), p.size()});
    }
    DeflateAhead deflater(pieces, level, threads);
    std::vector<Member> out(members.size());
    for (auto& m : out) {
        for (bool last = false; !last;) {
            DeflateAhead::Block b = deflater.take();
            m.deflated.insert(m.deflated.end(), b.out.begin(), b.out.end());
            m.crc = m.size == 0 ? b.crc : static_cast<uint32_t>(crc32_combine(m.crc, b.crc, static_cast<z_off_t>(b.in_bytes)));
            m.size += b.in_bytes;
            last = b.last;
        }
    }
    return out;
}

std::string inflate_raw(const std::vector<unsigned char>& in, size_t expected) {
    z_stream zs{};
    REQUIRE(inflateInit2(&zs, -MAX_WBITS) == Z_OK);
    std::string out(expected + 16, '\0');
    zs.next_in = const_cast<unsigned char*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<unsigned char*>(&out[0]);
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&zs, Z_FINISH);
    CHECK(rc == Z_STREAM_END);
    CHECK(zs.avail_in == 0);  // the stream ends exactly at the end of the member's data
    out.resize(zs.total_out);
    inflateEnd(&zs);
    return out;
}

}  // namespace

TEST_CASE("DeflateAhead output inflates to the input, whatever the thread count, and is the same bytes") {
    const size_t block = DeflateAhead::kBlockBytes;
    // Members: empty, tiny, exactly one block, pieces crossing block boundaries, several blocks and a tail.
    const std::vector<std::vector<std::string>> members = {
        {},
        {"", ""},
        {sample(100, 1)},
        {sample(block, 2)},
        {sample(128, 3), sample(block - 128 + 5, 4), sample(7, 5)},
        {sample(3 * block + 12345, 6)},
        {sample(40000, 7), sample(2 * block, 8)},
    };
    for (int level : {1, 6, 9}) {
        const auto serial = run(members, 0, level);
        for (unsigned threads : {1u, 2u, 5u}) {
            INFO("level " << level << ", threads " << threads);
            const auto parallel = run(members, threads, level);
            for (size_t i = 0; i < members.size(); ++i) {
                INFO("member " << i);
                std::string whole;
                for (const auto& p : members[i]) whole += p;
                CHECK(parallel[i].deflated == serial[i].deflated);
                CHECK(parallel[i].size == whole.size());
                CHECK(parallel[i].crc == static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(whole.data()), whole.size())));
                CHECK(inflate_raw(parallel[i].deflated, whole.size()) == whole);
            }
        }
    }
}

TEST_CASE("DeflateAhead keeps the ratio of one stream: each block is primed with the input before it") {
    const std::string data = sample(4 * DeflateAhead::kBlockBytes, 9);
    const auto blocks = run({{data}}, 2, 6);
    uLongf one_size = compressBound(data.size());
    std::vector<unsigned char> one(one_size);
    REQUIRE(compress2(one.data(), &one_size, reinterpret_cast<const Bytef*>(data.data()), data.size(), 6) == Z_OK);
    INFO("blocks: " << blocks[0].deflated.size() << " bytes, one stream: " << one_size);
    CHECK(blocks[0].deflated.size() < one_size + one_size / 100);
}

TEST_CASE("DeflateAhead destroyed before every block is taken stops its workers") {
    const std::string data = sample(8 * DeflateAhead::kBlockBytes, 10);
    for (unsigned threads : {0u, 2u}) {
        DeflateAhead deflater({{{data.data(), data.size()}}}, 1, threads);
        const DeflateAhead::Block first = deflater.take();
        CHECK_FALSE(first.last);
        CHECK(first.in_bytes == DeflateAhead::kBlockBytes);
    }  // joins without hanging
}
