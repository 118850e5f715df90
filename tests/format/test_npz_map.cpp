// SPDX-License-Identifier: Apache-2.0
// ckpt_reader_map: views of an open file's arrays, mapped in place or decoded once, against what ckpt_reader_read_into
// reads; CRC-32 checks at the first view; files that shrink, lie or are corrupt.
#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"

#include <ckpt/ckpt.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
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

const unsigned char* map_array(ckpt_reader* npz, size_t i) {
    const void* p = nullptr;
    const int rc = ckpt_reader_map(npz, i, &p);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    REQUIRE(p != nullptr);
    return static_cast<const unsigned char*>(p);
}

std::vector<unsigned char> read_array(ckpt_reader* npz, size_t i) {
    std::vector<unsigned char> out(ckpt_reader_nbytes(npz, i) + 1);  // +1: never a NULL data() for an empty array
    REQUIRE(ckpt_reader_read_into(npz, i, out.data(), out.size()) == CKPT_OK);
    out.pop_back();
    return out;
}

// Every array's view holds what ckpt_reader_read_into reads, and a second call gives the same pointer.
void require_views_match_reads(ckpt_reader* npz) {
    for (size_t i = 0; i < ckpt_reader_count(npz); ++i) {
        CAPTURE(i, ckpt_reader_name(npz, i));
        const unsigned char* p = map_array(npz, i);
        const std::vector<unsigned char> expected = read_array(npz, i);
        REQUIRE(std::vector<unsigned char>(p, p + expected.size()) == expected);
        REQUIRE(map_array(npz, i) == p);
    }
}

// Stored arrays lie in one mapping of the file: their views are as far apart as their data in the file.
void require_one_mapping(ckpt_reader* npz) {
    const unsigned char* first = map_array(npz, 0);
    for (size_t i = 1; i < ckpt_reader_count(npz); ++i) {
        CAPTURE(i);
        if (ckpt_reader_nbytes(npz, i) == 0) continue;
        REQUIRE(ckpt_reader_compression(npz, i) == CKPT_STORE);
        CHECK(map_array(npz, i) - first ==
              static_cast<ptrdiff_t>(ckpt_reader_data_offset(npz, i) - ckpt_reader_data_offset(npz, 0)));
    }
}

// Flips `mask` in the byte `from_end` bytes before the end of array i's data in the file at path; returns its offset.
uint64_t flip_data_byte(const std::string& path, size_t i, uint64_t from_end, unsigned char mask) {
    uint64_t at;
    {
        Reader npz = open_file(path);
        at = ckpt_reader_data_offset(npz.get(), i) + ckpt_reader_nbytes(npz.get(), i) - from_end;
    }
    std::string bytes = read_file(path);
    bytes[at] = static_cast<char>(bytes[at] ^ mask);
    write_file(path, bytes);
    return at;
}

// One (3, 5) array of each fixed-size dtype and of the three with an item size of their own, with distinct bytes.
Vars every_dtype() {
    Vars vars = new_vars();
    const int64_t shape[2] = {3, 5};
    for (uint32_t dtype = CKPT_BOOL; dtype <= CKPT_VOID; ++dtype) {
        const size_t fixed = ckpt_dtype_size(dtype);
        const size_t itemsize = fixed != 0 ? fixed : dtype == CKPT_UNICODE ? 12 : 3;
        std::vector<unsigned char> data(15 * itemsize);
        for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<unsigned char>(dtype == CKPT_BOOL ? k % 2 : k * 37 + dtype);
        if (dtype == CKPT_UNICODE)
            for (size_t k = 0; k < data.size(); ++k) data[k] = k % 4 == 0 ? static_cast<unsigned char>('a' + k % 26) : 0;
        const std::string name = ckpt_dtype_name(dtype);
        const int rc = fixed != 0 ? ckpt_vars_add(vars.get(), name.c_str(), dtype, 2, shape, data.data(), CKPT_COPY)
                                  : ckpt_vars_add_strings(vars.get(), name.c_str(), dtype, itemsize, 2, shape,
                                                          data.data(), CKPT_COPY);
        INFO(name << ": " << ckpt_error_message());
        REQUIRE(rc == CKPT_OK);
    }
    return vars;
}

void save(const std::string& path, const ckpt_vars* vars, uint32_t layout = CKPT_LAYOUT_PLAIN,
          uint32_t compression = CKPT_STORE) {
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.layout = layout;
    o.compression = compression;
    REQUIRE(ckpt_save(path.c_str(), vars, &o) == CKPT_OK);
}

std::string floats(std::initializer_list<float> values) {
    std::string out;
    for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
    return out;
}

std::string big_endian_floats(std::initializer_list<float> values) {
    std::string out = floats(values);
    for (size_t k = 0; k < out.size(); k += 4) std::swap(out[k], out[k + 3]), std::swap(out[k + 1], out[k + 2]);
    return out;
}

zipb::Member stored(const std::string& name, const std::string& data, bool zip64 = false) {
    zipb::Member m;
    m.name = name;
    m.data = data;
    m.zip64 = zip64;
    return m;
}

// A member name that puts the data of a stored npy member at a multiple of 64 bytes in a zip_builder archive
// whose earlier members end at such a multiple: 30 bytes of local header (+ 20 of zip64 extra) and the name.
std::string aligning_name(const std::string& stem, bool zip64 = false) {
    const size_t header = 30 + (zip64 ? 20 : 0);
    const size_t len = (64 - (header + stem.size() + 4) % 64) % 64 + stem.size() + 4;
    return stem + std::string(len - stem.size() - 4, '_') + ".npy";
}

}  // namespace

TEST_CASE("Mapped views hold the bytes reads give, for every dtype, both layouts, stored and deflated", "[map]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = every_dtype();
    save(dir.file("all.npz"), vars.get(), layout, compression);

    Reader npz = open_file(dir.file("all.npz"));
    REQUIRE(ckpt_reader_count(npz.get()) == ckpt_vars_count(vars.get()));
    require_views_match_reads(npz.get());
    for (size_t i = 0; i < ckpt_vars_count(vars.get()); ++i) {
        CAPTURE(i);
        REQUIRE(std::memcmp(map_array(npz.get(), i), ckpt_vars_data(vars.get(), i), ckpt_vars_nbytes(vars.get(), i)) == 0);
    }
    if (compression == CKPT_STORE) require_one_mapping(npz.get());
}

TEST_CASE("Views of 0-d and empty arrays are not NULL", "[map]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t empty[2] = {0, 4};
    const double one = 2.5;
    REQUIRE(ckpt_vars_add(vars.get(), "empty", CKPT_FLOAT64, 2, empty, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "scalar", CKPT_FLOAT64, 0, nullptr, &one, CKPT_COPY) == CKPT_OK);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    save(dir.file("e.npz"), vars.get(), CKPT_LAYOUT_PLAIN, compression);

    Reader npz = open_file(dir.file("e.npz"));
    CHECK(map_array(npz.get(), 0) != nullptr);
    double got;
    std::memcpy(&got, map_array(npz.get(), 1), sizeof got);
    CHECK(got == 2.5);
}

TEST_CASE("Big-endian, Fortran-order and unaligned members are decoded to native C order", "[map]") {
    TempDir dir;
    zipb::Archive a;
    // As numpy writes them: data 64 bytes into each member, so not aligned in the file.
    a.members.push_back(stored("big.npy", zipb::npy_member(">f4", "(3,)", big_endian_floats({1.5f, -2.0f, 3.25f}))));
    a.members.push_back(stored("fortran.npy", zipb::npy_raw(zipb::npy_dict("<f4", "(2, 3)", true),
                                                          floats({1, 4, 2, 5, 3, 6}))));  // columns first
    a.members.push_back(stored("odd.npy", zipb::npy_member("<f4", "(2,)", floats({7, 8}))));
    write_file(dir.file("numpy.npz"), zipb::build(a));

    Reader npz = open_file(dir.file("numpy.npz"));
    const auto as_floats = [&](size_t i, size_t n) {
        std::vector<float> v(n);
        std::memcpy(v.data(), map_array(npz.get(), i), n * sizeof(float));
        return v;
    };
    CHECK(as_floats(0, 3) == std::vector<float>{1.5f, -2.0f, 3.25f});
    CHECK(as_floats(1, 6) == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(as_floats(2, 2) == std::vector<float>{7, 8});
    CHECK(ckpt_reader_data_offset(npz.get(), 2) % 4 != 0);
    require_views_match_reads(npz.get());
}

TEST_CASE("zip64 members map in place", "[map][zip64]") {
    TempDir dir;
    zipb::Archive a;
    std::string first = zipb::npy_member("<f8", "(8,)", std::string(64, '\x11'));  // 128 bytes
    a.members.push_back(stored(aligning_name("first", true), first, true));
    const std::string second_npy = zipb::npy_member("<f4", "(16,)", floats({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
    a.members.push_back(stored(aligning_name("second", true), second_npy, true));
    a.zip64_eocd = true;
    zipb::Layout lay;
    const std::string bytes = zipb::build(a, &lay);
    REQUIRE(lay.data_offsets[1] % 64 == 0);
    write_file(dir.file("z64.npz"), bytes);

    Reader npz = open_file(dir.file("z64.npz"));
    const float* second = reinterpret_cast<const float*>(map_array(npz.get(), 1));
    CHECK(second[15] == 16.0f);
    CHECK(reinterpret_cast<const unsigned char*>(second) - map_array(npz.get(), 0) ==
          static_cast<ptrdiff_t>(ckpt_reader_data_offset(npz.get(), 1) - ckpt_reader_data_offset(npz.get(), 0)));
    require_views_match_reads(npz.get());
}

TEST_CASE("A member corrupted on disk fails its first map with CKPT_EFORMAT naming file and member", "[map][crc]") {
    TempDir dir;
    Vars vars = new_vars();
    // 40 MiB: its CRC-32 is checked on several threads; the flipped byte is in the last part.
    const int64_t big[1] = {int64_t{10} << 20};
    const int64_t small[1] = {4};
    REQUIRE(ckpt_vars_add(vars.get(), "big", CKPT_FLOAT32, 1, big, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "ok", CKPT_FLOAT32, 1, small, nullptr, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("bad.npz");
    save(path, vars.get());
    uint64_t at = flip_data_byte(path, 0, 3, 0x40);

    Reader npz = open_file(path);
    const void* p = &at;
    CHECK(ckpt_reader_map(npz.get(), 0, &p) == CKPT_EFORMAT);
    CHECK(p == nullptr);
    CHECK_THAT(ckpt_error_message(), Contains(path) && Contains("member 'big.npy'") && Contains("CRC-32 mismatch"));
    CHECK(ckpt_reader_map(npz.get(), 0, &p) == CKPT_EFORMAT);  // asked again, checked again
    CHECK(map_array(npz.get(), 1) != nullptr);               // the other members are fine

    SECTION("unless the file was opened with CKPT_MAP_UNVERIFIED: the corrupt bytes are handed over") {
        ckpt_options o;
        REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
        o.flags = CKPT_MAP_UNVERIFIED;
        Reader unverified = open_file(path, &o);
        const unsigned char* view = map_array(unverified.get(), 0);
        CHECK(view[ckpt_reader_nbytes(unverified.get(), 0) - 3] == 0x40);  // 0.0f's bytes, one flipped
        CHECK(ckpt_reader_read_into(unverified.get(), 0, nullptr, 0) == CKPT_EBUFS);
        std::vector<unsigned char> copy(ckpt_reader_nbytes(unverified.get(), 0));
        CHECK(ckpt_reader_read_into(unverified.get(), 0, copy.data(), copy.size()) ==
              CKPT_EFORMAT);  // reads still check
    }
}

TEST_CASE("CKPT_MAP_UNVERIFIED still decodes and checks members that cannot be mapped", "[map][crc]") {
    TempDir dir;
    Vars vars = every_dtype();
    save(dir.file("d.npz"), vars.get(), CKPT_LAYOUT_PLAIN, CKPT_DEFLATE);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.flags = CKPT_MAP_UNVERIFIED | CKPT_PARTIAL;
    Reader npz = open_file(dir.file("d.npz"), &o);
    require_views_match_reads(npz.get());
}

TEST_CASE("A file that shrank after opening is CKPT_EIO at its first map, not a fault", "[map]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {1024};
    REQUIRE(ckpt_vars_add(vars.get(), "x", CKPT_FLOAT64, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("x.npz");
    save(path, vars.get());
    Reader npz = open_file(path);
    REQUIRE(::truncate(path.c_str(), 100) == 0);
    const void* p = nullptr;
    CHECK(ckpt_reader_map(npz.get(), 0, &p) == CKPT_EIO);
    CHECK_THAT(ckpt_error_message(), Contains(path) && Contains("shrank"));
}

TEST_CASE("A file replaced after opening keeps its old bytes in the views", "[map]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    const double before[2] = {1, 2}, after[2] = {3, 4};
    REQUIRE(ckpt_vars_add(vars.get(), "x", CKPT_FLOAT64, 1, shape, before, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("x.npz");
    save(path, vars.get());
    Reader npz = open_file(path);
    const unsigned char* early = map_array(npz.get(), 0);

    std::memcpy(ckpt_vars_data(vars.get(), 0), after, sizeof after);
    save(path, vars.get());  // renamed over the mapped file
    REQUIRE(::unlink(path.c_str()) == 0);
    CHECK(std::memcmp(early, before, sizeof before) == 0);
}

TEST_CASE("Storages that cannot map give decoded views", "[map][storage]") {
    ckpt_storage* s = nullptr;
    REQUIRE(ckpt_storage_new_memory(&s) == CKPT_OK);
    std::unique_ptr<ckpt_storage, void (*)(ckpt_storage*)> storage(s, ckpt_storage_free);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.storage = s;
    Vars vars = every_dtype();
    REQUIRE(ckpt_save("m.npz", vars.get(), &o) == CKPT_OK);
    Reader npz = open_file("m.npz", &o);
    require_views_match_reads(npz.get());
}

TEST_CASE("ckpt_reader_map refuses NULL arguments and indices out of range", "[map]") {
    TempDir dir;
    Vars vars = every_dtype();
    save(dir.file("a.npz"), vars.get());
    Reader npz = open_file(dir.file("a.npz"));
    const void* p = &p;
    CHECK(ckpt_reader_map(nullptr, 0, &p) == CKPT_EINVAL);
    CHECK(p == nullptr);
    CHECK(ckpt_reader_map(npz.get(), 0, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_reader_map(npz.get(), ckpt_reader_count(npz.get()), &p) == CKPT_ENOTFOUND);
    CHECK_THAT(ckpt_error_message(), Contains("no array #"));
}

TEST_CASE("A member whose declared offset or size points past the file is refused before anything is mapped",
          "[map][malformed]") {
    TempDir dir;
    const std::string npy = zipb::npy_member("<f8", "(4,)", std::string(32, '\x01'));
    const auto lie = [&](const char* what, auto&& change) {
        zipb::Archive a;
        a.members.push_back(stored(aligning_name("w"), npy));
        change(a.members.back());
        const std::string path = dir.file(std::string(what) + ".npz");
        write_file(path, zipb::build(a));
        CAPTURE(what);
        ckpt_reader* npz = nullptr;
        CHECK(ckpt_reader_open(&npz, path.c_str(), nullptr) == CKPT_EFORMAT);
        CHECK_THAT(ckpt_error_message(), Contains(path));
        CHECK(npz == nullptr);
    };
    lie("size-past-the-end", [](zipb::Member& m) { m.comp_size = m.uncomp_size = uint64_t{1} << 40; });
    lie("offset-past-the-end", [](zipb::Member& m) { m.central_offset = uint64_t{1} << 33; m.zip64 = true; });
    lie("shape-past-the-member", [&](zipb::Member& m) { m.data = zipb::npy_member("<f8", "(1000000,)", std::string(32, '\x01')); });
}

TEST_CASE("ckpt_reader_map_vars restores every array without a copy; with CKPT_MAP_WRITABLE it may be written",
          "[map]") {
    TempDir dir;
    Vars vars = every_dtype();
    ckpt_vars_set_metadata(vars.get(), "epoch", "7");
    const std::string path = dir.file("all.npz");
    save(path, vars.get());
    const std::string before = read_file(path);
    const bool writable = GENERATE(false, true);
    CAPTURE(writable);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.flags = writable ? CKPT_MAP_WRITABLE : 0;
    Reader npz = open_file(path, &o);
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_reader_map_vars(npz.get(), &raw) == CKPT_OK);
    Vars mapped(raw);
    REQUIRE(ckpt_vars_count(mapped.get()) == ckpt_vars_count(vars.get()));
    for (size_t i = 0; i < ckpt_vars_count(vars.get()); ++i) {
        CAPTURE(i);
        CHECK(std::string(ckpt_vars_name(mapped.get(), i)) == ckpt_vars_name(vars.get(), i));
        CHECK(ckpt_vars_dtype(mapped.get(), i) == ckpt_vars_dtype(vars.get(), i));
        CHECK(ckpt_vars_nbytes(mapped.get(), i) == ckpt_vars_nbytes(vars.get(), i));
        CHECK(ckpt_vars_data(mapped.get(), i) == map_array(npz.get(), i));  // the views themselves
        CHECK(std::memcmp(ckpt_vars_data(mapped.get(), i), ckpt_vars_data(vars.get(), i), ckpt_vars_nbytes(vars.get(), i)) == 0);
    }
    const char* epoch = ckpt_vars_metadata(mapped.get(), "epoch");
    REQUIRE(epoch != nullptr);
    CHECK(std::string(epoch) == "7");
    if (writable) {
        // Copy-on-write: the process sees its writes, the file keeps its bytes.
        auto* p = static_cast<unsigned char*>(ckpt_vars_data(mapped.get(), 1));
        p[0] ^= 0xff;
        CHECK(map_array(npz.get(), 1)[0] == p[0]);
        CHECK(read_file(path) == before);
        Reader again = open_file(path);
        CHECK(map_array(again.get(), 1)[0] != p[0]);
    }
    CHECK(ckpt_reader_map_vars(nullptr, &raw) == CKPT_EINVAL);
    CHECK(ckpt_reader_map_vars(npz.get(), nullptr) == CKPT_EINVAL);
}

TEST_CASE("ckpt_reader_map_vars fails on a corrupt member, naming it, and returns no collection", "[map][crc]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t four[1] = {4};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_FLOAT32, 1, four, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_FLOAT32, 1, four, nullptr, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("bad.npz");
    save(path, vars.get());
    uint64_t at = flip_data_byte(path, 1, ckpt_reader_nbytes(open_file(path).get(), 1), 0x01);  // its first byte
    Reader npz = open_file(path);
    ckpt_vars* raw = reinterpret_cast<ckpt_vars*>(&at);
    CHECK(ckpt_reader_map_vars(npz.get(), &raw) == CKPT_EFORMAT);
    CHECK(raw == nullptr);
    CHECK_THAT(ckpt_error_message(), Contains("member 'b.npy'") && Contains("CRC-32 mismatch"));
}
