// SPDX-License-Identifier: Apache-2.0
// ckpt_reader_read_range: ranges of an array's data equal the same bytes of what ckpt_reader_read_into reads, for
// stored, deflated and big-endian members, in any order; the CRC-32 check at the last in-order range; bad ranges.
#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"

#include <ckpt/ckpt.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using ckpt::testing::new_vars;
using ckpt::testing::open_file;
using ckpt::testing::read_file;
using ckpt::testing::Reader;
using ckpt::testing::TempDir;
using ckpt::testing::Vars;
using ckpt::testing::write_file;

namespace {

std::vector<unsigned char> read_whole(ckpt_reader* npz, size_t i) {
    std::vector<unsigned char> out(ckpt_reader_nbytes(npz, i) + 1);
    const int rc = ckpt_reader_read_into(npz, i, out.data(), out.size());
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    out.pop_back();
    return out;
}

std::vector<unsigned char> read_range(ckpt_reader* npz, size_t i, uint64_t offset, size_t size) {
    std::vector<unsigned char> out(size + 1);
    const int rc = ckpt_reader_read_range(npz, i, offset, out.data(), size);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    out.pop_back();
    return out;
}

// Reads array i in pieces of `piece` items, in order, and checks the pieces against a whole read.
void require_pieces_match(ckpt_reader* npz, size_t i, size_t piece_items) {
    const std::vector<unsigned char> whole = read_whole(npz, i);
    const size_t step = piece_items * ckpt_reader_itemsize(npz, i);
    std::vector<unsigned char> joined;
    for (uint64_t at = 0; at < whole.size(); at += step) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(step, whole.size() - at));
        const std::vector<unsigned char> part = read_range(npz, i, at, n);
        joined.insert(joined.end(), part.begin(), part.end());
    }
    REQUIRE(joined == whole);
}

void save(const std::string& path, const ckpt_vars* vars, uint32_t compression, ckpt_storage* storage = nullptr) {
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.compression = compression;
    o.storage = storage;
    REQUIRE(ckpt_save(path.c_str(), vars, &o) == CKPT_OK);
}

// "a": 3 MiB of float32 counting up (several inflate chunks when deflated); "b": (7, 3) int64; "s": a scalar.
Vars sample() {
    Vars vars = new_vars();
    const int64_t n[1] = {int64_t{3} << 18};
    std::vector<float> a(static_cast<size_t>(n[0]));
    for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<float>(k % 1000) * 0.5f;
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_FLOAT32, 1, n, a.data(), CKPT_COPY) == CKPT_OK);
    const int64_t shape[2] = {7, 3};
    std::vector<int64_t> b(21);
    for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<int64_t>(k * k) - 40;
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_INT64, 2, shape, b.data(), CKPT_COPY) == CKPT_OK);
    const double s = -1.25;
    REQUIRE(ckpt_vars_add(vars.get(), "s", CKPT_FLOAT64, 0, nullptr, &s, CKPT_COPY) == CKPT_OK);
    return vars;
}

std::string floats(std::initializer_list<float> values) {
    std::string out;
    for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
    return out;
}

zipb::Member stored(const std::string& name, const std::string& data) {
    zipb::Member m;
    m.name = name;
    m.data = data;
    return m;
}

}  // namespace

TEST_CASE("Ranges read in order equal a whole read, stored and deflated", "[range]") {
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(compression);
    TempDir dir;
    Vars vars = sample();
    save(dir.file("s.npz"), vars.get(), compression);
    Reader npz = open_file(dir.file("s.npz"));
    for (size_t i = 0; i < ckpt_reader_count(npz.get()); ++i) {
        CAPTURE(i);
        REQUIRE(read_whole(npz.get(), i) ==
                std::vector<unsigned char>(static_cast<const unsigned char*>(ckpt_vars_data(vars.get(), i)),
                                           static_cast<const unsigned char*>(ckpt_vars_data(vars.get(), i)) +
                                               ckpt_vars_nbytes(vars.get(), i)));
        for (size_t piece : {size_t{1}, size_t{5}, size_t{100000}, size_t{1} << 20}) require_pieces_match(npz.get(), i, piece);
    }
}

TEST_CASE("Random ranges in any order equal the same bytes of a whole read", "[range]") {
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(compression);
    TempDir dir;
    Vars vars = sample();
    save(dir.file("r.npz"), vars.get(), compression);
    Reader npz = open_file(dir.file("r.npz"));
    std::vector<std::vector<unsigned char>> whole;
    for (size_t i = 0; i < ckpt_reader_count(npz.get()); ++i) whole.push_back(read_whole(npz.get(), i));
    std::mt19937_64 rng(7);
    for (int round = 0; round < 200; ++round) {
        const size_t i = rng() % 3;
        const size_t item = ckpt_reader_itemsize(npz.get(), i);
        const uint64_t items = whole[i].size() / item;
        const uint64_t first = rng() % (items + 1);
        const uint64_t count = rng() % (std::min<uint64_t>(items - first, 50000) + 1);
        CAPTURE(round, i, first, count);
        const std::vector<unsigned char> got = read_range(npz.get(), i, first * item, static_cast<size_t>(count * item));
        REQUIRE(std::equal(got.begin(), got.end(), whole[i].begin() + static_cast<ptrdiff_t>(first * item)));
    }
}

TEST_CASE("Big-endian members are byte-swapped in ranges; Fortran order is refused", "[range]") {
    TempDir dir;
    zipb::Archive a;
    std::string big = floats({1.5f, -2.0f, 3.25f, 8.0f});
    for (size_t k = 0; k < big.size(); k += 4) std::swap(big[k], big[k + 3]), std::swap(big[k + 1], big[k + 2]);
    a.members.push_back(stored("big.npy", zipb::npy_member(">f4", "(4,)", big)));
    a.members.push_back(stored("fortran.npy", zipb::npy_raw(zipb::npy_dict("<f4", "(2, 3)", true), floats({1, 4, 2, 5, 3, 6}))));
    a.members.push_back(stored("column.npy", zipb::npy_raw(zipb::npy_dict("<f4", "(3,)", true), floats({1, 2, 3}))));
    write_file(dir.file("numpy.npz"), zipb::build(a));
    Reader npz = open_file(dir.file("numpy.npz"));
    const std::vector<unsigned char> mid = read_range(npz.get(), 0, 4, 8);
    float v[2];
    std::memcpy(v, mid.data(), sizeof v);
    CHECK(v[0] == -2.0f);
    CHECK(v[1] == 3.25f);
    require_pieces_match(npz.get(), 0, 1);
    require_pieces_match(npz.get(), 2, 2);  // one dimension: Fortran order is C order

    float out[6];
    CHECK(ckpt_reader_read_range(npz.get(), 1, 0, out, sizeof out) == CKPT_EUNSUPPORTED);
    CHECK_THAT(ckpt_error_message(), Contains("member 'fortran.npy'") && Contains("Fortran order"));
}

TEST_CASE("A corrupt byte is caught at the last of the ranges read in order from byte 0", "[range][crc]") {
    TempDir dir;
    Vars vars = sample();
    const std::string path = dir.file("bad.npz");
    save(path, vars.get(), CKPT_STORE);
    uint64_t at, nbytes;
    {
        Reader npz = open_file(path);
        nbytes = ckpt_reader_nbytes(npz.get(), 0);
        at = ckpt_reader_data_offset(npz.get(), 0) + 1000;  // in the first range
    }
    std::string bytes = read_file(path);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    write_file(path, bytes);

    Reader npz = open_file(path);
    const size_t piece = size_t{1} << 20;
    std::vector<unsigned char> buf(piece);
    for (uint64_t off = 0; off + piece < nbytes; off += piece)
        REQUIRE(ckpt_reader_read_range(npz.get(), 0, off, buf.data(), piece) == CKPT_OK);
    const uint64_t last = (nbytes - 1) / piece * piece;
    CHECK(ckpt_reader_read_range(npz.get(), 0, last, buf.data(), static_cast<size_t>(nbytes - last)) == CKPT_EFORMAT);
    CHECK_THAT(ckpt_error_message(), Contains(path) && Contains("member 'a.npy'") && Contains("CRC-32 mismatch"));

    // Not in order from byte 0: no check (the doc says so), and the corrupt byte is handed over.
    CHECK(ckpt_reader_read_range(npz.get(), 0, last, buf.data(), static_cast<size_t>(nbytes - last)) == CKPT_OK);
    CHECK(ckpt_reader_read_range(npz.get(), 0, 996, buf.data(), 8) == CKPT_OK);
    float flipped, good;
    std::memcpy(&flipped, buf.data() + 4, 4);
    std::memcpy(&good, static_cast<const char*>(ckpt_vars_data(vars.get(), 0)) + 1000, 4);
    CHECK(flipped != good);
    // The other arrays read fine.
    require_pieces_match(npz.get(), 1, 2);
}

TEST_CASE("A corrupt deflated member fails at the range that reaches its end, or where the inflate fails", "[range][crc]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t n[1] = {int64_t{1} << 20};
    std::vector<uint32_t> data(static_cast<size_t>(n[0]));
    std::mt19937 rng(3);
    for (auto& x : data) x = rng() % 16;  // compressible, but not to nothing
    REQUIRE(ckpt_vars_add(vars.get(), "d", CKPT_UINT32, 1, n, data.data(), CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("d.npz");
    save(path, vars.get(), CKPT_DEFLATE);
    std::string bytes = read_file(path);
    const size_t at = bytes.size() / 2;  // inside the deflate stream of the only member
    bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
    write_file(path, bytes);

    Reader npz = open_file(path);
    const size_t piece = size_t{256} << 10;
    std::vector<unsigned char> buf(piece);
    int rc = CKPT_OK;
    for (uint64_t off = 0; off < ckpt_reader_nbytes(npz.get(), 0) && rc == CKPT_OK; off += piece)
        rc = ckpt_reader_read_range(npz.get(), 0, off, buf.data(), piece);
    CHECK(rc == CKPT_EFORMAT);
    CHECK_THAT(ckpt_error_message(), Contains(path) && Contains("member 'd.npy'"));
}

TEST_CASE("Ranges that are not whole items, reach past the end, or name no array are refused", "[range]") {
    TempDir dir;
    Vars vars = sample();
    save(dir.file("a.npz"), vars.get(), CKPT_STORE);
    Reader npz = open_file(dir.file("a.npz"));
    unsigned char buf[64];
    const uint64_t nb = ckpt_reader_nbytes(npz.get(), 1);  // int64 (7, 3): 168 bytes
    CHECK(ckpt_reader_read_range(npz.get(), 1, 4, buf, 8) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("whole items of 8 bytes"));
    CHECK(ckpt_reader_read_range(npz.get(), 1, 0, buf, 12) == CKPT_EINVAL);
    CHECK(ckpt_reader_read_range(npz.get(), 1, nb - 8, buf, 16) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("past the end of array 'b'"));
    CHECK(ckpt_reader_read_range(npz.get(), 1, nb + 8, buf, 0) == CKPT_EINVAL);
    CHECK(ckpt_reader_read_range(npz.get(), 1, UINT64_MAX - 7, buf, 8) == CKPT_EINVAL);
    CHECK(ckpt_reader_read_range(npz.get(), 1, nb, nullptr, 0) == CKPT_OK);
    CHECK(ckpt_reader_read_range(npz.get(), 1, 0, nullptr, 8) == CKPT_EINVAL);
    CHECK(ckpt_reader_read_range(npz.get(), 3, 0, buf, 8) == CKPT_ENOTFOUND);
    CHECK_THAT(ckpt_error_message(), Contains("no array #3"));
    CHECK(ckpt_reader_read_range(nullptr, 0, 0, buf, 8) == CKPT_EINVAL);
    // After refusals, ranges still read right.
    require_pieces_match(npz.get(), 1, 4);
}

TEST_CASE("Ranges read through the memory storage", "[range][storage]") {
    ckpt_storage* s = nullptr;
    REQUIRE(ckpt_storage_new_memory(&s) == CKPT_OK);
    std::unique_ptr<ckpt_storage, void (*)(ckpt_storage*)> storage(s, ckpt_storage_free);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    Vars vars = sample();
    save("m.npz", vars.get(), compression, s);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.storage = s;
    Reader npz = open_file("m.npz", &o);
    for (size_t i = 0; i < ckpt_reader_count(npz.get()); ++i) require_pieces_match(npz.get(), i, 40000);
}
