// SPDX-License-Identifier: Apache-2.0
// Chunk hashes and saves against a base (npz/chunks.hpp, npz/chunk_base.hpp): the hash, the table's codec, and
// saves that reuse an earlier file's unchanged chunks — in memory, on a filesystem that cannot clone, and on XFS and
// btrfs images, where the blocks must be shared.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "npz/chunk_base.hpp"
#include "npz/chunks.hpp"
#include "npz/crc32.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "npz/zip_writer.hpp"
#include "storage/memory_storage.hpp"
#include "support/files.hpp"
#include "support/on_cloning_filesystems.hpp"
#include "support/stored.hpp"
#include "support/temp_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Contains;
using ckpt::testing::stored;
using ckpt::testing::TempDir;

namespace {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<unsigned char> v(n);
    for (auto& b : v) b = static_cast<unsigned char>(rng());
    return v;
}

std::string hex(const Hash128& h) { return fmt::format("{:016x}{:016x}", h.hi, h.lo); }

// Two arrays of several chunks (one of them not a whole number of chunks), one too small to chunk.
struct State {
    std::vector<float> big = std::vector<float>(5 * kChunkBytes / 4);
    std::vector<double> odd = std::vector<double>((5 * kChunkBytes + 1000) / 8);
    std::vector<int32_t> small = std::vector<int32_t>(100);
    State() {
        for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
        for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<double>(i) * 0.25;
        for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<int32_t>(i);
    }
    VarCollection vars() {
        VarCollection v;
        v.add("big", Array::borrow(DType::float32, 4, {5, static_cast<int64_t>(kChunkBytes / 4)}, big.data()));
        v.add("odd", Array::borrow(DType::float64, 8, {static_cast<int64_t>(odd.size())}, odd.data()));
        v.add("small", Array::borrow(DType::int32, 4, {100}, small.data()));
        return v;
    }
};

NpzWriteOptions chunked(const ChunkBase* base = nullptr, uint64_t* shared = nullptr) {
    NpzWriteOptions o;
    o.chunk_hashes = true;
    o.base = base;
    o.shared_bytes = shared;
    return o;
}

// Saves the state with chunk hashes to `path` and opens the file as a base, which must serve.
std::unique_ptr<ChunkBase> saved_base(Storage& storage, const std::string& path, State& s) {
    save_npz(storage, path, s.vars(), chunked());
    std::string why;
    std::unique_ptr<ChunkBase> base = ChunkBase::open(storage, path, &why);
    INFO(why);
    REQUIRE(base);
    return base;
}

}  // namespace

TEST_CASE("hash128 gives the values the file format fixes") {
    CHECK(hex(hash128("", 0)) == "ccfddec0399634ee9d45b6919e12cd43");
    std::vector<unsigned char> counting(1000);
    for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<unsigned char>(i);
    CHECK(hex(hash128(counting.data(), counting.size())) == "d755d78a135540c7876366922098baa6");
    const std::vector<unsigned char> zeros(65536, 0);
    CHECK(hex(hash128(zeros.data(), zeros.size())) == "d969d5dc38cf7ae37195279aa71342dc");
}

TEST_CASE("hash128: every path (scalar, SSE2, AVX2) gives the same values, at any length and address") {
    const std::vector<unsigned char> data = random_bytes(3 * kChunkBytes + 200, 5);
    const HashPath paths[] = {HashPath::sse2, HashPath::avx2};
    size_t compared = 0;
    for (const HashPath path : paths) {
        if (!hash_path_available(path)) {
            WARN("this CPU or build has no path " << static_cast<int>(path) << ": not compared");
            continue;
        }
        for (size_t n = 0; n <= 300; ++n)
            for (const size_t at : {size_t{0}, size_t{1}, size_t{7}, size_t{64}}) {
                INFO(n << " bytes at +" << at << ", path " << static_cast<int>(path));
                const bool same =
                    hash128_by(path, data.data() + at, n) == hash128_by(HashPath::scalar, data.data() + at, n);
                CHECK(same);
                ++compared;
            }
        for (const size_t n : {size_t{4096}, size_t{kChunkBytes - 1}, size_t{kChunkBytes}, size_t{3 * kChunkBytes}}) {
            const bool same = hash128_by(path, data.data() + 3, n) == hash128_by(HashPath::scalar, data.data() + 3, n);
            CHECK(same);
        }
        CHECK(hash128_by(path, data.data(), 1000) == hash128(data.data(), 1000));
    }
#if defined(__x86_64__)
    CHECK(compared >= 301 * 4);  // SSE2 is every x86-64's
#endif
}

TEST_CASE("hash128: one bit flipped anywhere changes the hash") {
    for (const size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4096}, size_t{kChunkBytes}}) {
        for (const bool zero : {true, false}) {
            std::vector<unsigned char> data = zero ? std::vector<unsigned char>(n, 0) : random_bytes(n, 7);
            const Hash128 before = hash128(data.data(), n);
            const size_t step = n > 4096 ? 61 : 1;  // every bit of small inputs, a bit of every 61st byte of large
            size_t changed = 0, tried = 0;
            for (size_t byte = 0; byte < n; byte += step) {
                for (int bit = 0; bit < 8; bit += (n > 4096 ? 3 : 1)) {
                    data[byte] ^= static_cast<unsigned char>(1u << bit);
                    const Hash128 after = hash128(data.data(), n);
                    changed += after.lo != before.lo && after.hi != before.hi;
                    ++tried;
                    data[byte] ^= static_cast<unsigned char>(1u << bit);
                }
            }
            INFO(n << " bytes, " << (zero ? "zeros" : "random"));
            CHECK(changed == tried);
        }
    }
}

TEST_CASE("hash128: blocks in another order, other lengths and many small inputs all hash apart") {
    std::vector<unsigned char> data = random_bytes(4096, 11);
    const Hash128 h = hash128(data.data(), data.size());
    std::vector<unsigned char> swapped = data;
    std::swap_ranges(swapped.begin(), swapped.begin() + 64, swapped.begin() + 1024);  // two 64-byte blocks
    CHECK(hash128(swapped.data(), swapped.size()) != h);
    std::vector<unsigned char> rows = data;  // two 8-byte words within a block
    std::swap_ranges(rows.begin(), rows.begin() + 8, rows.begin() + 16);
    CHECK(hash128(rows.data(), rows.size()) != h);

    std::set<std::pair<uint64_t, uint64_t>> seen;
    const std::vector<unsigned char> zeros(300, 0);
    for (size_t n = 0; n < zeros.size(); ++n) {  // zeros of every length
        const Hash128 z = hash128(zeros.data(), n);
        CHECK(seen.insert({z.lo, z.hi}).second);
    }
    for (uint64_t i = 1; i <= 1000000; ++i) {  // a counter in a 64-byte block, as float tables hold small integers
        unsigned char block[64] = {};
        std::memcpy(block + (i % 8) * 8, &i, 8);
        const Hash128 c = hash128(block, sizeof block);
        if (!seen.insert({c.lo, c.hi}).second) FAIL("a collision at " << i);
    }
}

TEST_CASE("chunk table: what is encoded decodes, and every damaged table is refused in words") {
    ChunkTable t;
    t.members.push_back({"w.npy",
                         0x12345678,
                         0x9abcdef0,
                         3 * uint64_t{kChunkBytes} + 5,
                         {{{1, 2}, 21}, {{3, 4}, 22}, {{5, 6}, 23}, {{7, 8}, 0xfedcba98}}});
    t.members.push_back({"ü.npy", 9, 10, kChunkBytes, {{{10, 11}, 12}}});
    const std::vector<unsigned char> bytes = encode_chunk_table(t);
    CHECK(bytes.size() == chunk_table_bytes({{5, t.members[0].data_bytes}, {6, kChunkBytes}}, kChunkBytes));
    const ChunkTable back = decode_chunk_table(bytes.data(), bytes.size());
    REQUIRE(back.members.size() == 2);
    CHECK(back.chunk_bytes == kChunkBytes);
    CHECK(back.members[0].name == "w.npy");
    CHECK(back.members[0].crc == 0x12345678);
    CHECK(back.members[0].head_crc == 0x9abcdef0);
    CHECK(back.members[0].data_bytes == t.members[0].data_bytes);
    REQUIRE(back.members[0].chunks.size() == 4);
    CHECK(back.members[0].chunks[3].hash == Hash128{7, 8});
    CHECK(back.members[0].chunks[3].crc == 0xfedcba98);
    CHECK(back.members[1].name == "ü.npy");
    CHECK(back.members[1].chunks[0].crc == 12);

    for (size_t n = 0; n < bytes.size(); ++n) {  // every truncation
        try {
            decode_chunk_table(bytes.data(), n);
            FAIL("a table cut to " << n << " bytes was accepted");
        } catch (const Error& e) {
            CHECK(e.code() == Code::format);
            CHECK_THAT(e.what(), Contains("chunk table"));
        }
    }
    const auto refused = [&](size_t at, unsigned char value, const std::string& words) {
        std::vector<unsigned char> bad = bytes;
        bad[at] = value;
        try {
            decode_chunk_table(bad.data(), bad.size());
            FAIL("byte " << at << " = " << int(value) << " was accepted");
        } catch (const Error& e) {
            CHECK_THAT(e.what(), Contains(words));
        }
    };
    refused(0, 'X', "CKPTCHNK");
    refused(8, 1, "version 1 is not one this library reads (3)");  // tables without CRC-32s
    refused(8, 2, "version 2 is not one this library reads (3)");  // tables of the scalar hash before this one
    refused(13, 0x11, "chunk size");                               // 4352: not a multiple of 4096
    refused(16, 0xff, "members cannot fit");                       // the member count
    refused(24 + 2 + 5 + 4 + 4 + 8, 9, "has 9 chunks");            // the first member's chunk count
    std::vector<unsigned char> longer = bytes;
    longer.push_back(0);
    CHECK_THROWS_WITH(decode_chunk_table(longer.data(), longer.size()), Contains("1 bytes follow"));
}

TEST_CASE("a save with chunk hashes aligns its large arrays, hides its table and reads back the same") {
    State s;
    MemoryStorage storage;
    save_npz(storage, "/a.npz", s.vars(), chunked());
    NpzReader r = NpzReader::open(storage, "/a.npz", {});
    REQUIRE(r.size() == 3);  // the table is not an array
    for (size_t i = 0; i < r.size(); ++i) {
        const uint64_t offset = r.member(i).data_offset + r.entry(i).header.data_offset;
        INFO(r.entry(i).name);
        CHECK(offset % (r.entry(i).name == "small" ? 64 : kBlockAlignment) == 0);
    }
    const std::optional<ChunkTable> table = r.chunk_table();
    REQUIRE(table);
    REQUIRE(table->members.size() == 2);  // "small" is under a chunk
    CHECK(table->members[0].name == "big.npy");
    REQUIRE(table->members[0].chunks.size() == 5);
    const unsigned char* chunk2 = reinterpret_cast<const unsigned char*>(s.big.data()) + 2 * kChunkBytes;
    CHECK(table->members[0].chunks[2].hash == hash128(chunk2, kChunkBytes));
    CHECK(table->members[0].chunks[2].crc == crc32(0, chunk2, kChunkBytes));
    CHECK(table->members[1].chunks.size() == 6);
    for (const ChunkTable::Member& m : table->members) {  // a member's CRC-32 is its header's and chunks' joined
        const size_t i = m.name == "big.npy" ? 0 : 1;
        CHECK(m.crc == r.member(i).crc);
        CHECK(join_chunks(m.head_crc, m.chunks, m.data_bytes, table->chunk_bytes) == m.crc);
    }
    VarCollection back = r.read_all();
    CHECK(std::memcmp(back.array(0).data(), s.big.data(), s.big.size() * 4) == 0);
    CHECK(std::memcmp(back.array(1).data(), s.odd.data(), s.odd.size() * 8) == 0);

    save_npz(storage, "/plain.npz", s.vars(), {});  // without chunk hashes: no table, no block alignment
    CHECK_FALSE(NpzReader::open(storage, "/plain.npz", {}).chunk_table());
    CHECK(stored(storage, "/plain.npz").size() < stored(storage, "/a.npz").size());
}

TEST_CASE("a save against a base clones its unchanged chunks and writes the bytes a full save writes") {
    State s;
    MemoryStorage storage;
    std::unique_ptr<ChunkBase> base = saved_base(storage, "/base.npz", s);

    s.big[kChunkBytes / 4 * 3 + 7] += 1.0f;  // chunk 3 of 5 of "big"
    s.odd.back() += 1.0;                     // the last, partial chunk of "odd" (always written)
    uint64_t shared = 0;
    save_npz(storage, "/next.npz", s.vars(), chunked(base.get(), &shared));
    save_npz(storage, "/full.npz", s.vars(), chunked());
    CHECK(stored(storage, "/next.npz") == stored(storage, "/full.npz"));
    CHECK(shared == (4 + 5) * uint64_t{kChunkBytes});  // big: 0, 1, 2, 4; odd: 0 to 4

    SECTION("an array of another shape or dtype takes nothing from the base") {
        State t;
        VarCollection v;
        v.add("big", Array::borrow(DType::float32, 4, {static_cast<int64_t>(t.big.size())}, t.big.data()));
        v.add("odd", Array::borrow(DType::int64, 8, {static_cast<int64_t>(t.odd.size())}, t.odd.data()));
        save_npz(storage, "/other.npz", v, chunked(base.get(), &shared));
        CHECK(shared == 0);
        save_npz(storage, "/other-full.npz", v, chunked());
        CHECK(stored(storage, "/other.npz") == stored(storage, "/other-full.npz"));
    }
    SECTION("a base without a table, or whose table does not describe its members, is not used, and says why") {
        std::string why;
        save_npz(storage, "/plain.npz", s.vars(), {});
        CHECK_FALSE(ChunkBase::open(storage, "/plain.npz", &why));
        CHECK_THAT(why, Contains("/plain.npz") && Contains("no chunk table"));
        // "big.npy" changed after the table was written, its CRC-32 with it (in its local header, the first
        // occurrence, and in the central directory, the last; the table's copy, between them, stays).
        std::string bytes = stored(storage, "/base.npz");
        NpzReader r = NpzReader::open(storage, "/base.npz", {});
        const uint64_t at = r.member(0).data_offset + r.entry(0).header.data_offset;
        bytes[at] = static_cast<char>(bytes[at] ^ 1);
        const std::string old_crc(reinterpret_cast<const char*>(&r.member(0).crc), 4);
        const uint32_t crc = crc32(0, bytes.data() + r.member(0).data_offset, r.member(0).size);
        const std::string new_crc(reinterpret_cast<const char*>(&crc), 4);
        bytes.replace(bytes.find(old_crc), 4, new_crc);
        bytes.replace(bytes.rfind(old_crc), 4, new_crc);
        storage.put("/changed.npz", bytes);
        CHECK_FALSE(ChunkBase::open(storage, "/changed.npz", &why));
        CHECK_THAT(why, Contains("/changed.npz") && Contains("does not describe member 'big.npy'"));
        CHECK_FALSE(ChunkBase::open(storage, "/missing.npz", &why));
        CHECK_THAT(why, Contains("/missing.npz"));
    }
}

TEST_CASE("a source array is chunked and reused like one in memory") {
    State s;
    MemoryStorage storage;
    std::unique_ptr<ChunkBase> base = saved_base(storage, "/base.npz", s);
    s.big[0] = -1.0f;
    VarCollection v;
    const float* big = s.big.data();
    v.add("big", Array::from_source(DType::float32, 4, {5, static_cast<int64_t>(kChunkBytes / 4)},
                                    std::make_shared<const ByteSource>([big](uint64_t offset, void* dst, size_t n) {
                                        std::memcpy(dst, reinterpret_cast<const char*>(big) + offset, n);
                                    })));
    uint64_t shared = 0;
    save_npz(storage, "/next.npz", v, chunked(base.get(), &shared));
    CHECK(shared == 4 * uint64_t{kChunkBytes});
    VarCollection back = NpzReader::open(storage, "/next.npz", {}).read_all();
    CHECK(std::memcmp(back.array(0).data(), s.big.data(), s.big.size() * 4) == 0);
}

TEST_CASE("a large save hashes on the CRC's thread the table the writer's thread hashes; one changed float is found") {
    // 64 MiB: saved from memory, the chunks are hashed ahead of the writer with the CRC; from a source, as written.
    std::vector<float> w(size_t{16} << 20);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 1000003) * 0.5f;
    const auto in_memory = [&] {
        VarCollection v;
        v.add("w", Array::borrow(DType::float32, 4, {static_cast<int64_t>(w.size())}, w.data()));
        return v;
    };
    const auto from_source = [&] {
        VarCollection v;
        const char* bytes = reinterpret_cast<const char*>(w.data());
        v.add("w", Array::from_source(DType::float32, 4, {static_cast<int64_t>(w.size())},
                                      std::make_shared<const ByteSource>([bytes](uint64_t offset, void* dst, size_t n) {
                                          std::memcpy(dst, bytes + offset, n);
                                      })));
        return v;
    };
    MemoryStorage storage;
    save_npz(storage, "/base.npz", in_memory(), chunked());
    std::string why;
    std::unique_ptr<ChunkBase> base = ChunkBase::open(storage, "/base.npz", &why);
    INFO(why);
    REQUIRE(base);
    const ChunkBase::Array* table = base->find("w.npy");
    REQUIRE(table);
    const std::vector<ChunkSum>& sums = table->table->chunks;
    REQUIRE(sums.size() == w.size() * 4 / kChunkBytes);
    size_t wrong = 0;
    for (size_t k = 0; k < sums.size(); ++k) {
        const float* chunk = w.data() + k * (kChunkBytes / 4);
        wrong += !(sums[k].hash == hash128(chunk, kChunkBytes)) + (sums[k].crc != crc32(0, chunk, kChunkBytes));
    }
    CHECK(wrong == 0);

    w[12345677] = -w[12345677] - 1.0f;  // one float, in chunk 3014
    uint64_t shared_memory = 0, shared_source = 0;
    save_npz(storage, "/memory.npz", in_memory(), chunked(base.get(), &shared_memory));
    save_npz(storage, "/source.npz", from_source(), chunked(base.get(), &shared_source));
    save_npz(storage, "/full.npz", in_memory(), chunked());
    CHECK(shared_memory == w.size() * 4 - kChunkBytes);
    CHECK(shared_source == shared_memory);
    const std::string full = stored(storage, "/full.npz");
    CHECK(stored(storage, "/memory.npz") == full);
    CHECK(stored(storage, "/source.npz") == full);
    VarCollection back = NpzReader::open(storage, "/memory.npz", {}).read_all();
    CHECK(std::memcmp(back.array(0).data(), w.data(), w.size() * 4) == 0);

    // Nothing changed since memory.npz: every chunk's CRC-32, and the member's, come from its table and directory.
    std::unique_ptr<ChunkBase> same = ChunkBase::open(storage, "/memory.npz", &why);
    REQUIRE(same);
    uint64_t shared_all = 0;
    save_npz(storage, "/again.npz", in_memory(), chunked(same.get(), &shared_all));
    CHECK(shared_all == w.size() * 4);
    CHECK(stored(storage, "/again.npz") == full);
}

TEST_CASE("after a megabyte of chunks that differed, a save writes the chunks whose hashes are not ready yet") {
    // ZipWriter alone, given its hashes as a thread computes them: promptly, or lagging behind the writer (hash_of
    // answers only when told to wait). The first 100 chunks changed; the other 412 did not.
    MemoryStorage storage;
    std::vector<float> w(size_t{2} << 20);  // 8 MiB: 512 chunks
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    VarCollection v;
    v.add("w", Array::borrow(DType::float32, 4, {static_cast<int64_t>(w.size())}, w.data()));
    save_npz(storage, "/base.npz", v, chunked());
    std::string why;
    std::unique_ptr<ChunkBase> base = ChunkBase::open(storage, "/base.npz", &why);
    REQUIRE(base);
    const ChunkBase::Array* was = base->find("w.npy");
    REQUIRE(was);
    for (size_t i = 0; i < 100 * kChunkBytes / 4; ++i) w[i] += 1.0f;
    const size_t per_chunk = kChunkBytes / 4;

    using Asked = std::vector<std::pair<size_t, bool>>;  // the chunks hash_of was asked for, and whether to wait
    const auto write = [&](bool lagging, Asked& asked, bool with_base = true) {
        std::string temp;
        std::unique_ptr<OutputFile> out = storage.create_temp(lagging ? "/lagging" : "/prompt", &temp);
        ZipWriter zip(*out);
        ZipWriter::Chunking ch;
        if (with_base) {
            ch.base = &base->file();
            ch.base_offset = was->offset;
            ch.base_sums = &was->table->chunks;
        }
        ch.hash_of = [&](size_t k, bool wait) -> std::optional<Hash128> {
            asked.emplace_back(k, wait);
            if (lagging && !wait) return std::nullopt;
            return hash128(w.data() + k * per_chunk, kChunkBytes);
        };
        const std::string head = "HEAD";
        zip.add_stored("w.npy", {{head.data(), head.size()}, {w.data(), w.size() * 4}}, nullptr, nullptr, 0,
                       ZipWriter::CrcWhen::before_data, &ch);
        zip.finish();
        out->close();
        return std::make_pair(stored(storage, temp), ch.shared);
    };
    const auto waited = [](const Asked& asked) {
        return std::count_if(asked.begin(), asked.end(), [](const auto& a) { return a.second; });
    };
    Asked asked_prompt, asked_lagging, asked_without_base;
    const auto prompt = write(false, asked_prompt);
    const auto lagging = write(true, asked_lagging);
    CHECK(prompt.second == 412 * uint64_t{kChunkBytes});
    CHECK(lagging.second == 0);  // from chunk 64 on, every hash came too late: written, not shared
    CHECK(asked_lagging.size() == 512);
    CHECK(waited(asked_lagging) == 64);
    CHECK(waited(asked_prompt) == 64 + 411);  // chunk 100 matched: it waits again for 101 to 511
    const bool same = prompt.first == lagging.first;
    CHECK(same);  // the file is the same whichever way each chunk got there
    const auto alone = write(false, asked_without_base, false);
    CHECK(asked_without_base.empty());  // nothing to compare with: the writer never asks (the table's come later)
    CHECK(alone.second == 0);
    CHECK(alone.first == prompt.first);
}

TEST_CASE("a base whose table holds a wrong chunk CRC-32 gives no wrong CRC to a save against it") {
    std::vector<float> w(size_t{16} << 20);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 999983);
    VarCollection vars;
    vars.add("w", Array::borrow(DType::float32, 4, {static_cast<int64_t>(w.size())}, w.data()));
    MemoryStorage storage;
    save_npz(storage, "/base.npz", vars, chunked());

    // Chunk 0's CRC-32 in the table made wrong, the table member's own CRC-32 made right for it: the table reads
    // as sound, but its chunk CRC-32s no longer join to the member's.
    std::string file = stored(storage, "/base.npz");
    const size_t table = file.find("CKPTCHNK");
    const size_t table_end = file.find("PK\x01\x02", table);
    const size_t member = file.rfind("\x93NUMPY", table);
    REQUIRE(table != std::string::npos);
    REQUIRE(table_end != std::string::npos);
    REQUIRE(member != std::string::npos);
    const auto crc_of = [&] { return crc32(0, file.data() + member, table_end - member); };
    const uint32_t before = crc_of();
    file[table + 24 + 2 + 5 + 4 + 4 + 8 + 8 + 16] ^= 1;  // header, "w.npy", CRCs, sizes, chunk 0's hash
    const uint32_t after = crc_of();
    // Where the CRC-32 sits: in the table member's local header (before its npy header) and directory entry.
    const std::string old_crc(reinterpret_cast<const char*>(&before), 4);
    size_t patched = 0;
    for (size_t at = file.find(old_crc, member - 256); at != std::string::npos; at = file.find(old_crc, at + 4)) {
        if (at > member && at < table_end) continue;
        std::memcpy(&file[at], &after, 4);
        ++patched;
    }
    REQUIRE(patched == 2);
    write_atomically(storage, "/base.npz", [&](OutputFile& out) { out.write(file.data(), file.size()); });
    std::string why;
    std::unique_ptr<ChunkBase> base = ChunkBase::open(storage, "/base.npz", &why);
    INFO(why);
    REQUIRE(base);
    REQUIRE(base->find("w.npy")->table->chunks[0].crc != crc32(0, w.data(), kChunkBytes));

    w[w.size() - 1] += 1.0f;  // the last chunk changes; chunk 0's CRC-32 would come from the base
    save_npz(storage, "/next.npz", vars, chunked(base.get()));
    save_npz(storage, "/full.npz", vars, chunked());
    CHECK(stored(storage, "/next.npz") == stored(storage, "/full.npz"));
    CHECK_NOTHROW(NpzReader::open(storage, "/next.npz", {}).read_all());
}

TEST_CASE("where the filesystem cannot clone, a save against a base writes every byte, the same file") {
    State s;
    TempDir dir;
    auto storage = posix_storage();
    std::unique_ptr<ChunkBase> base = saved_base(*storage, dir.file("base.npz"), s);
    s.big[1] = 3.0f;
    uint64_t shared = 0;
    save_npz(*storage, dir.file("next.npz"), s.vars(), chunked(base.get(), &shared));
    save_npz(*storage, dir.file("full.npz"), s.vars(), chunked());
    CHECK(ckpt::testing::read_file(dir.file("next.npz")) == ckpt::testing::read_file(dir.file("full.npz")));
    // ext4 and tmpfs cannot clone: everything was written. (Where this directory can, the blocks were shared.)
    if (shared == 0) CHECK(storage->shared_bytes(dir.file("next.npz")).value_or(0) == 0);
}

TEST_CASE("on XFS and btrfs a save against a base shares its unchanged chunks' blocks with it") {
    ckpt::testing::on_cloning_filesystems([](const std::string& mount_point) -> std::string {
        // 48 MiB in 768 chunks, one of which changes.
        std::vector<float> emb(size_t{12} << 20);
        for (size_t i = 0; i < emb.size(); ++i) emb[i] = static_cast<float>(i % 100003);
        const auto vars = [&] {
            VarCollection v;
            v.add("emb", Array::borrow(DType::float32, 4, {static_cast<int64_t>(emb.size() / 256), 256}, emb.data()));
            return v;
        };
        auto storage = posix_storage();
        const std::string base_path = mount_point + "/0.npz", next_path = mount_point + "/1.npz";
        save_npz(*storage, base_path, vars(), chunked());
        emb[size_t{5} << 20] = -1.0f;
        std::string why;
        std::unique_ptr<ChunkBase> base = ChunkBase::open(*storage, base_path, &why);
        if (!base) return "FAIL: base: " + why;
        struct statvfs before {};
        ::statvfs(mount_point.c_str(), &before);
        uint64_t shared = 0;
        save_npz(*storage, next_path, vars(), chunked(base.get(), &shared));
        struct statvfs after {};
        ::statvfs(mount_point.c_str(), &after);
        base.reset();
        const uint64_t total = emb.size() * 4;
        if (shared != total - kChunkBytes)
            return fmt::format("FAIL: {} bytes shared, {} expected", shared, total - kChunkBytes);
        const uint64_t used = (before.f_bfree - after.f_bfree) * before.f_frsize;
        if (used > total / 8)
            return fmt::format("FAIL: the save took {} bytes of the disk for {} changed", used, kChunkBytes);
        const uint64_t extents = storage->shared_bytes(next_path).value_or(0);  // FIEMAP's shared extents
        if (extents < total - 2 * uint64_t{kChunkBytes})
            return fmt::format("FAIL: the filesystem reports {} bytes shared", extents);
        save_npz(*storage, mount_point + "/full.npz", vars(), chunked());
        if (ckpt::testing::read_file(next_path) != ckpt::testing::read_file(mount_point + "/full.npz"))
            return "FAIL: the incremental file differs from a full save";
        storage->remove(base_path);  // retention: the next file keeps its bytes
        VarCollection back = NpzReader::open(*storage, next_path, {}).read_all();
        if (std::memcmp(back.array(0).data(), emb.data(), total) != 0) return "FAIL: read back differs";
        return fmt::format("OK: {} MiB shared, {} KiB of the disk used", shared >> 20, used >> 10);
    });
}
