// SPDX-License-Identifier: Apache-2.0
// bfloat16, float8 and void arrays, and a collection's metadata, through the public C API: every read path, both
// layouts, stored and deflated; what a file without anything to record looks like; and every way a metadata member
// can be malformed, each refused with its code and a message naming the file, the member and the problem.
#include "ckpt/ckpt.h"
#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using ckpt::testing::message;
using ckpt::testing::read_file;
using ckpt::testing::write_file;

namespace {

using ckpt::testing::TempDir;

using ckpt::testing::new_vars;
using ckpt::testing::Reader;
using ckpt::testing::Vars;

ckpt_options options(uint32_t layout, uint32_t compression) {
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.layout = layout;
    o.compression = compression;
    return o;
}

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(seed * 37 + i * 11 + (i >> 8));
    return bytes;
}

// One array of each new dtype (a matrix, a 0-d scalar and an empty one for bfloat16), with distinct bytes.
struct Spec {
    const char* name;
    uint32_t dtype;
    size_t itemsize;
    std::vector<int64_t> shape;
};
const std::vector<Spec>& specs() {
    static const std::vector<Spec> s = {
        {"bf16", CKPT_BFLOAT16, 2, {3, 4}},          {"bf16_scalar", CKPT_BFLOAT16, 2, {}},
        {"bf16_empty", CKPT_BFLOAT16, 2, {0, 5}},    {"e4m3fn", CKPT_FLOAT8_E4M3FN, 1, {7}},
        {"e5m2", CKPT_FLOAT8_E5M2, 1, {2, 2}},       {"e4m3fnuz", CKPT_FLOAT8_E4M3FNUZ, 1, {5}},
        {"e5m2fnuz", CKPT_FLOAT8_E5M2FNUZ, 1, {1}},  {"e8m0", CKPT_FLOAT8_E8M0FNU, 1, {}},
        {"void2", CKPT_VOID, 2, {3}},                {"void6", CKPT_VOID, 6, {2}},
        {"void_empty", CKPT_VOID, 3, {0}},
    };
    return s;
}

size_t nbytes_of(const Spec& s) {
    size_t n = s.itemsize;
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    return n;
}

Vars spec_vars(std::vector<std::vector<unsigned char>>& data) {
    Vars vars = new_vars();
    data.clear();
    unsigned seed = 1;
    for (const Spec& s : specs()) {
        data.push_back(pattern(nbytes_of(s), seed++));
        const void* p = data.back().empty() ? nullptr : data.back().data();
        const auto ndim = static_cast<uint32_t>(s.shape.size());
        const int rc = s.dtype == CKPT_VOID
                           ? ckpt_vars_add_strings(vars.get(), s.name, s.dtype, s.itemsize, ndim, s.shape.data(), p, CKPT_COPY)
                           : ckpt_vars_add(vars.get(), s.name, s.dtype, ndim, s.shape.data(), p, CKPT_COPY);
        INFO(s.name << ": " << message());
        REQUIRE(rc == CKPT_OK);
    }
    return vars;
}

// Checks that array i of some accessor set matches spec i: dtype, itemsize, shape and bytes.
template <typename Dtype, typename Itemsize, typename Ndim, typename Shape>
void check_header(size_t i, Dtype dtype, Itemsize itemsize, Ndim ndim, Shape shape) {
    const Spec& s = specs()[i];
    INFO(s.name);
    CHECK(dtype(i) == s.dtype);
    CHECK(itemsize(i) == s.itemsize);
    REQUIRE(ndim(i) == s.shape.size());
    for (size_t k = 0; k < s.shape.size(); ++k) CHECK(shape(i)[k] == s.shape[k]);
}

void check_vars(const ckpt_vars* vars, const std::vector<std::vector<unsigned char>>& data) {
    REQUIRE(ckpt_vars_count(vars) == specs().size());
    for (size_t i = 0; i < specs().size(); ++i) {
        CHECK(std::string(ckpt_vars_name(vars, i)) == specs()[i].name);
        check_header(
            i, [&](size_t k) { return ckpt_vars_dtype(vars, k); }, [&](size_t k) { return ckpt_vars_itemsize(vars, k); },
            [&](size_t k) { return ckpt_vars_ndim(vars, k); }, [&](size_t k) { return ckpt_vars_shape(vars, k); });
        REQUIRE(ckpt_vars_nbytes(vars, i) == data[i].size());
        if (!data[i].empty()) CHECK(std::memcmp(ckpt_vars_data(vars, i), data[i].data(), data[i].size()) == 0);
    }
}

// The central directory's member names, in order, read with the test's own zip walker.
std::vector<std::string> member_names(const std::string& bytes) {
    const size_t eocd = bytes.rfind(std::string("PK\x05\x06", 4));
    REQUIRE(eocd != std::string::npos);
    const size_t count = zipb::get(bytes, eocd + 10, 2);
    size_t at = zipb::get(bytes, eocd + 16, 4);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
        const size_t name_len = zipb::get(bytes, at + 28, 2);
        names.push_back(bytes.substr(at + 46, name_len));
        at += 46 + name_len + zipb::get(bytes, at + 30, 2) + zipb::get(bytes, at + 32, 2);
    }
    return names;
}

// The text of a saved file's metadata member (UTF-32 data of a 0-d '<U' array, as ASCII here).
std::string metadata_text(const std::string& path) {
    Vars vars = new_vars();
    const std::string bytes = read_file(path);
    const std::string magic = "\x93NUMPY";
    const size_t name_at = bytes.find("__ckpt_metadata__.npy");
    REQUIRE(name_at != std::string::npos);
    const size_t npy = bytes.find(magic, name_at);
    REQUIRE(npy != std::string::npos);
    const size_t data = npy + 10 + zipb::get(bytes, npy + 8, 2);
    const size_t chars_at = bytes.find("'<U", npy) + 3;
    const size_t chars = std::stoul(bytes.substr(chars_at, bytes.find('\'', chars_at) - chars_at));
    std::string text;
    for (size_t i = 0; i < chars; ++i) text += bytes[data + 4 * i];
    return text;
}

}  // namespace

// ------------------------------------------------------------------------------------------------------ dtypes

TEST_CASE("the new dtypes have ml_dtypes' names and their sizes", "[metadata][dtype]") {
    CHECK(std::string(ckpt_dtype_name(CKPT_BFLOAT16)) == "bfloat16");
    CHECK(std::string(ckpt_dtype_name(CKPT_FLOAT8_E4M3FN)) == "float8_e4m3fn");
    CHECK(std::string(ckpt_dtype_name(CKPT_FLOAT8_E5M2)) == "float8_e5m2");
    CHECK(std::string(ckpt_dtype_name(CKPT_FLOAT8_E4M3FNUZ)) == "float8_e4m3fnuz");
    CHECK(std::string(ckpt_dtype_name(CKPT_FLOAT8_E5M2FNUZ)) == "float8_e5m2fnuz");
    CHECK(std::string(ckpt_dtype_name(CKPT_FLOAT8_E8M0FNU)) == "float8_e8m0fnu");
    CHECK(std::string(ckpt_dtype_name(CKPT_VOID)) == "void");
    CHECK(ckpt_dtype_size(CKPT_BFLOAT16) == 2);
    for (uint32_t d = CKPT_FLOAT8_E4M3FN; d <= CKPT_FLOAT8_E8M0FNU; ++d) CHECK(ckpt_dtype_size(d) == 1);
    CHECK(ckpt_dtype_size(CKPT_VOID) == 0);
}

TEST_CASE("void arrays go through ckpt_vars_add_strings with their itemsize", "[metadata][dtype]") {
    Vars vars = new_vars();
    const int64_t shape[] = {2};
    const unsigned char raw[6] = {1, 2, 3, 4, 5, 6};
    CHECK(ckpt_vars_add(vars.get(), "v", CKPT_VOID, 1, shape, raw, CKPT_COPY) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("ckpt_vars_add_strings"));
    CHECK(ckpt_vars_add_strings(vars.get(), "v", CKPT_VOID, 0, 1, shape, raw, CKPT_COPY) == CKPT_EINVAL);
    CHECK(ckpt_vars_add_strings(vars.get(), "bf", CKPT_BFLOAT16, 2, 1, shape, raw, CKPT_COPY) == CKPT_EINVAL);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "v", CKPT_VOID, 3, 1, shape, raw, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_vars_itemsize(vars.get(), 0) == 3);
    CHECK(ckpt_vars_nbytes(vars.get(), 0) == 6);
}

TEST_CASE("bfloat16, float8 and void arrays round-trip through every read path", "[metadata][dtype]") {
    TempDir dir;
    std::vector<std::vector<unsigned char>> data;
    Vars vars = spec_vars(data);
    for (const uint32_t layout : {CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX}) {
        for (const uint32_t compression : {CKPT_STORE, CKPT_DEFLATE}) {
            DYNAMIC_SECTION("layout " << layout << ", compression " << compression) {
                const ckpt_options o = options(layout, compression);
                const std::string path = dir.file("new-dtypes.npz");
                REQUIRE(ckpt_save(path.c_str(), vars.get(), &o) == CKPT_OK);

                ckpt_vars* read = nullptr;
                REQUIRE(ckpt_read(&read, path.c_str(), nullptr) == CKPT_OK);
                check_vars(Vars(read).get(), data);

                const std::string bytes = read_file(path);
                ckpt_vars* from_memory = nullptr;
                REQUIRE(ckpt_read_memory(&from_memory, bytes.data(), bytes.size(), nullptr) == CKPT_OK);
                check_vars(Vars(from_memory).get(), data);

                ckpt_reader* n = nullptr;
                REQUIRE(ckpt_reader_open(&n, path.c_str(), nullptr) == CKPT_OK);
                Reader npz(n);
                REQUIRE(ckpt_reader_count(n) == specs().size());
                for (size_t i = 0; i < specs().size(); ++i) {
                    CHECK(std::string(ckpt_reader_name(n, i)) == specs()[i].name);
                    check_header(
                        i, [&](size_t k) { return ckpt_reader_dtype(n, k); },
                        [&](size_t k) { return ckpt_reader_itemsize(n, k); },
                        [&](size_t k) { return ckpt_reader_ndim(n, k); },
                        [&](size_t k) { return ckpt_reader_shape(n, k); });
                    std::vector<unsigned char> out(data[i].size() + 1, 0xEE);
                    REQUIRE(ckpt_reader_read_into(n, i, out.data(), out.size()) == CKPT_OK);
                    CHECK(std::equal(data[i].begin(), data[i].end(), out.begin()));
                }

                std::vector<std::vector<unsigned char>> zeros;
                Vars target = spec_vars(zeros);
                for (size_t i = 0; i < specs().size(); ++i)
                    if (!zeros[i].empty()) std::memset(ckpt_vars_data(target.get(), i), 0, zeros[i].size());
                REQUIRE(ckpt_restore(path.c_str(), target.get(), nullptr) == CKPT_OK);
                check_vars(target.get(), data);
            }
        }
    }
}

TEST_CASE("the members are raw bytes numpy loads, with the real types recorded by numpy.load's key",
          "[metadata][dtype]") {
    TempDir dir;
    std::vector<std::vector<unsigned char>> data;
    Vars vars = spec_vars(data);
    const std::string plain = dir.file("plain.npz"), objax = dir.file("objax.npz");
    const ckpt_options p = options(CKPT_LAYOUT_PLAIN, CKPT_STORE), o = options(CKPT_LAYOUT_OBJAX, CKPT_STORE);
    REQUIRE(ckpt_save(plain.c_str(), vars.get(), &p) == CKPT_OK);
    REQUIRE(ckpt_save(objax.c_str(), vars.get(), &o) == CKPT_OK);

    const std::string bytes = read_file(plain);
    CHECK_THAT(bytes, Contains("{'descr': '<V2', 'fortran_order': False, 'shape': (3, 4), }"));
    CHECK_THAT(bytes, Contains("{'descr': '<V1', 'fortran_order': False, 'shape': (7,), }"));
    CHECK_THAT(bytes, Contains("{'descr': '|V6', 'fortran_order': False, 'shape': (2,), }"));
    const std::vector<std::string> names = member_names(bytes);
    REQUIRE(names.size() == specs().size() + 1);
    CHECK(names.back() == "__ckpt_metadata__.npy");  // last, after every array

    // Every array whose descr does not say its type, and the 2-byte void (which would otherwise read as bfloat16).
    CHECK(metadata_text(plain) ==
          "{\"format\": 1, \"dtypes\": {\"bf16\": \"bfloat16\", \"bf16_scalar\": \"bfloat16\", \"bf16_empty\": "
          "\"bfloat16\", \"e4m3fn\": \"float8_e4m3fn\", \"e5m2\": \"float8_e5m2\", \"e4m3fnuz\": \"float8_e4m3fnuz\", "
          "\"e5m2fnuz\": \"float8_e5m2fnuz\", \"e8m0\": \"float8_e8m0fnu\", \"void2\": \"void\"}, \"metadata\": {}}");
    // The objax layout's members are indices, and so are the record's keys.
    CHECK_THAT(metadata_text(objax), Contains("{\"0\": \"bfloat16\", \"1\": \"bfloat16\""));
    CHECK_THAT(metadata_text(objax), Contains("\"8\": \"void\"}"));
}

TEST_CASE("a collection of numpy's own dtypes without metadata gets no metadata member", "[metadata]") {
    TempDir dir;
    Vars vars = new_vars();
    const float w[3] = {1, 2, 3};
    const int64_t shape[] = {3};
    const unsigned char raw[4] = {9, 8, 7, 6};
    const int64_t one[] = {1};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 1, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "v4", CKPT_VOID, 4, 1, one, raw, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("plain.npz");
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(member_names(read_file(path)) == std::vector<std::string>{"w.npy", "v4.npy"});

    // Setting and then removing the only key leaves nothing to record either.
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "k", "v") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "k", nullptr) == CKPT_OK);
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(member_names(read_file(path)).size() == 2);
}

TEST_CASE("a typed variable restores from raw void bytes of its item size; other dtypes stay a mismatch",
          "[metadata][dtype]") {
    TempDir dir;
    const std::string path = dir.file("raw.npz");
    const uint32_t words[2] = {0x3f800000u, 0x40000000u};  // 1.0f and 2.0f
    {
        Vars raw = new_vars();
        const int64_t shape[] = {2};
        REQUIRE(ckpt_vars_add_strings(raw.get(), "w", CKPT_VOID, 4, 1, shape, words, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_save(path.c_str(), raw.get(), nullptr) == CKPT_OK);
    }
    float w[2] = {0, 0};
    const int64_t shape[] = {2};
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 1, shape, w, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_restore(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(w[0] == 1.0f);
    CHECK(w[1] == 2.0f);

    SECTION("another item size is a mismatch") {
        Vars wide = new_vars();
        REQUIRE(ckpt_vars_add(wide.get(), "w", CKPT_FLOAT64, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(path.c_str(), wide.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'w' is float64 (2) in the collection but void4 (2) in the file"));
    }
    SECTION("a recorded bfloat16 does not fill a float16 variable") {
        Vars bf = new_vars();
        const uint16_t bits[2] = {0x3f80, 0x4000};
        REQUIRE(ckpt_vars_add(bf.get(), "w", CKPT_BFLOAT16, 1, shape, bits, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_save(path.c_str(), bf.get(), nullptr) == CKPT_OK);
        Vars half = new_vars();
        REQUIRE(ckpt_vars_add(half.get(), "w", CKPT_FLOAT16, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(path.c_str(), half.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'w' is float16 (2) in the collection but bfloat16 (2) in the file"));
    }
}

// ---------------------------------------------------------------------------------------------------- metadata

TEST_CASE("metadata keys keep their order; a value is replaced in place and removed with NULL", "[metadata]") {
    Vars vars = new_vars();
    CHECK(ckpt_vars_metadata_count(vars.get()) == 0);
    CHECK(ckpt_vars_metadata(vars.get(), "step") == nullptr);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "100") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "loss", "0.25") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "note", "") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "200") == CKPT_OK);
    REQUIRE(ckpt_vars_metadata_count(vars.get()) == 3);
    CHECK(std::string(ckpt_vars_metadata_key(vars.get(), 0)) == "step");
    CHECK(std::string(ckpt_vars_metadata_value(vars.get(), 0)) == "200");
    CHECK(std::string(ckpt_vars_metadata_key(vars.get(), 2)) == "note");
    CHECK(std::string(ckpt_vars_metadata(vars.get(), "note")).empty());
    CHECK(ckpt_vars_metadata_key(vars.get(), 3) == nullptr);
    CHECK(ckpt_vars_metadata_value(vars.get(), 3) == nullptr);

    REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", nullptr) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "absent", nullptr) == CKPT_OK);
    REQUIRE(ckpt_vars_metadata_count(vars.get()) == 2);
    CHECK(std::string(ckpt_vars_metadata_key(vars.get(), 0)) == "loss");
    CHECK(std::string(ckpt_vars_metadata(vars.get(), "note")).empty());
    CHECK(ckpt_vars_metadata(vars.get(), "step") == nullptr);

    CHECK(ckpt_vars_metadata(nullptr, "x") == nullptr);
    CHECK(ckpt_vars_metadata(vars.get(), nullptr) == nullptr);
    CHECK(ckpt_vars_metadata_count(nullptr) == 0);
    CHECK(ckpt_vars_metadata_key(nullptr, 0) == nullptr);
}

TEST_CASE("bad metadata arguments are CKPT_EINVAL and change nothing", "[metadata]") {
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "k", "v") == CKPT_OK);
    CHECK(ckpt_vars_set_metadata(nullptr, "k", "v") == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("vars is NULL"));
    CHECK(ckpt_vars_set_metadata(vars.get(), nullptr, "v") == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("key is NULL"));
    CHECK(ckpt_vars_set_metadata(vars.get(), "", "v") == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("metadata key is empty"));
    CHECK(ckpt_vars_set_metadata(vars.get(), "bad\xff", "v") == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("not valid UTF-8"));
    CHECK(ckpt_vars_set_metadata(vars.get(), "k", "\xc3\x28") == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("'k'"));
    REQUIRE(ckpt_vars_metadata_count(vars.get()) == 1);
    CHECK(std::string(ckpt_vars_metadata(vars.get(), "k")) == "v");
}

TEST_CASE("a variable cannot take the metadata member's name", "[metadata]") {
    Vars vars = new_vars();
    const float x = 1;
    CHECK(ckpt_vars_add(vars.get(), "__ckpt_metadata__", CKPT_FLOAT32, 0, nullptr, &x, CKPT_COPY) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("reserved"));
    CHECK(ckpt_vars_count(vars.get()) == 0);
}

TEST_CASE("metadata round-trips with unicode, empty values and a thousand keys, in both layouts", "[metadata]") {
    TempDir dir;
    Vars vars = new_vars();
    const float w[2] = {1.5f, -2.5f};
    const int64_t shape[] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 1, shape, w, CKPT_COPY) == CKPT_OK);
    const std::vector<std::pair<std::string, std::string>> special = {
        {"\xc3\xa9tape", "\xe2\x88\x82L/\xe2\x88\x82w \xf0\x9f\x98\x80"},  // "étape": "∂L/∂w 😀"
        {"empty", ""},
        {"quotes \" and \\ and\nnewline", "tab\there, control \x01, {\"json\": [1]}"},
    };
    for (const auto& [k, v] : special) REQUIRE(ckpt_vars_set_metadata(vars.get(), k.c_str(), v.c_str()) == CKPT_OK);
    for (int i = 0; i < 1000; ++i) {
        const std::string k = "key" + std::to_string(i), v = std::string(static_cast<size_t>(i % 7), 'x') + std::to_string(i);
        REQUIRE(ckpt_vars_set_metadata(vars.get(), k.c_str(), v.c_str()) == CKPT_OK);
    }
    const auto check = [&](size_t count, auto key, auto value, auto find) {
        REQUIRE(count == special.size() + 1000);
        for (size_t i = 0; i < special.size(); ++i) {
            CHECK(key(i) == special[i].first);
            CHECK(value(i) == special[i].second);
        }
        CHECK(std::string(find("key999")) == "xxxxx999");
        CHECK(key(special.size() + 500) == "key500");
        CHECK(value(special.size() + 500) == "xxx500");  // 500 % 7 == 3
    };
    for (const uint32_t layout : {CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX}) {
        for (const uint32_t compression : {CKPT_STORE, CKPT_DEFLATE}) {
            DYNAMIC_SECTION("layout " << layout << ", compression " << compression) {
                const ckpt_options o = options(layout, compression);
                const std::string path = dir.file("meta.npz");
                REQUIRE(ckpt_save(path.c_str(), vars.get(), &o) == CKPT_OK);

                ckpt_vars* r = nullptr;
                REQUIRE(ckpt_read(&r, path.c_str(), nullptr) == CKPT_OK);
                Vars read(r);
                CHECK(ckpt_vars_count(r) == 1);
                check(
                    ckpt_vars_metadata_count(r), [&](size_t i) { return std::string(ckpt_vars_metadata_key(r, i)); },
                    [&](size_t i) { return std::string(ckpt_vars_metadata_value(r, i)); },
                    [&](const char* k) { return ckpt_vars_metadata(r, k); });

                ckpt_reader* n = nullptr;
                REQUIRE(ckpt_reader_open(&n, path.c_str(), nullptr) == CKPT_OK);
                Reader npz(n);
                CHECK(ckpt_reader_count(n) == 1);  // the metadata member is not an array
                check(
                    ckpt_reader_metadata_count(n),
                    [&](size_t i) { return std::string(ckpt_reader_metadata_key(n, i)); },
                    [&](size_t i) { return std::string(ckpt_reader_metadata_value(n, i)); },
                    [&](const char* k) { return ckpt_reader_metadata(n, k); });
                CHECK(ckpt_reader_metadata(n, "absent") == nullptr);
                CHECK(ckpt_reader_metadata_key(n, 5000) == nullptr);

                // A restore replaces the collection's metadata with the file's.
                Vars target = new_vars();
                REQUIRE(ckpt_vars_add(target.get(), "w", CKPT_FLOAT32, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
                REQUIRE(ckpt_vars_set_metadata(target.get(), "stale", "yes") == CKPT_OK);
                REQUIRE(ckpt_restore(path.c_str(), target.get(), nullptr) == CKPT_OK);
                CHECK(ckpt_vars_metadata(target.get(), "stale") == nullptr);
                CHECK(ckpt_vars_metadata_count(target.get()) == special.size() + 1000);
                CHECK(std::memcmp(ckpt_vars_data(target.get(), 0), w, sizeof w) == 0);
            }
        }
    }
}

TEST_CASE("a failed restore leaves the collection's metadata as it was; a file without any clears it",
          "[metadata]") {
    TempDir dir;
    const std::string path = dir.file("plain.npz");
    const float w[2] = {1, 2};
    const int64_t shape[] = {2}, other[] = {3};
    Vars saved = new_vars();
    REQUIRE(ckpt_vars_add(saved.get(), "w", CKPT_FLOAT32, 1, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_save(path.c_str(), saved.get(), nullptr) == CKPT_OK);

    Vars mismatched = new_vars();
    REQUIRE(ckpt_vars_add(mismatched.get(), "w", CKPT_FLOAT32, 1, other, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(mismatched.get(), "mine", "1") == CKPT_OK);
    CHECK(ckpt_restore(path.c_str(), mismatched.get(), nullptr) == CKPT_EMISMATCH);
    CHECK(std::string(ckpt_vars_metadata(mismatched.get(), "mine")) == "1");

    Vars matching = new_vars();
    REQUIRE(ckpt_vars_add(matching.get(), "w", CKPT_FLOAT32, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(matching.get(), "mine", "1") == CKPT_OK);
    REQUIRE(ckpt_restore(path.c_str(), matching.get(), nullptr) == CKPT_OK);
    CHECK(ckpt_vars_metadata_count(matching.get()) == 0);
}

TEST_CASE("the manager saves metadata and gives it back from read and restore, also when saving in the background",
          "[metadata][manager]") {
    TempDir dir;
    for (const uint32_t flags : {0u, static_cast<uint32_t>(CKPT_MANAGER_ASYNC)}) {
        DYNAMIC_SECTION("flags " << flags) {
            ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
            mo.flags = flags;
            ckpt_manager* m = nullptr;
            REQUIRE(ckpt_manager_open(&m, dir.path().c_str(), &mo) == CKPT_OK);
            Vars vars = new_vars();
            const uint16_t bits[3] = {0x3f80, 0xff80, 0x0001};  // 1.0, -inf, the smallest subnormal
            const int64_t shape[] = {3};
            REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_BFLOAT16, 1, shape, bits, CKPT_COPY) == CKPT_OK);
            for (int64_t step : {10, 20}) {
                const std::string s = std::to_string(step);
                REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", s.c_str()) == CKPT_OK);
                REQUIRE(ckpt_manager_save(m, vars.get(), step) == CKPT_OK);
            }
            REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "changed after the save") == CKPT_OK);

            ckpt_vars* r = nullptr;
            int64_t idx = -1;
            REQUIRE(ckpt_manager_read(m, CKPT_LATEST, &r, &idx) == CKPT_OK);
            Vars read(r);
            CHECK(idx == 20);
            CHECK(std::string(ckpt_vars_metadata(r, "step")) == "20");
            CHECK(ckpt_vars_dtype(r, 0) == CKPT_BFLOAT16);
            CHECK(std::memcmp(ckpt_vars_data(r, 0), bits, sizeof bits) == 0);

            Vars target = new_vars();
            REQUIRE(ckpt_vars_add(target.get(), "w", CKPT_BFLOAT16, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
            REQUIRE(ckpt_manager_restore(m, target.get(), 10, &idx) == CKPT_OK);
            CHECK(std::string(ckpt_vars_metadata(target.get(), "step")) == "10");
            CHECK(ckpt_manager_close(m) == CKPT_OK);
        }
    }
}

// ------------------------------------------------------------------------------------- files others wrote

namespace {

std::string u32_text(const std::string& ascii) {  // a '<U' array's data for ASCII text
    std::string out;
    for (char c : ascii) out += std::string{c, '\0', '\0', '\0'};
    return out;
}

std::string metadata_member(const std::string& json) {
    if (json.empty()) return zipb::npy_member("<U1", "()", std::string(4, '\0'));  // numpy's empty string
    return zipb::npy_member("<U" + std::to_string(json.size()), "()", u32_text(json));
}

zipb::Member member(const std::string& name, const std::string& data, uint16_t method = zipb::kStored) {
    zipb::Member m;
    m.name = name;
    m.data = data;
    m.method = method;
    return m;
}

// "w.npy": two raw bytes pairs (3f80, c000) as '<V2', and a metadata member holding `json`.
std::string with_metadata(const std::string& json, uint16_t method = zipb::kStored) {
    zipb::Archive a;
    a.members = {member("w.npy", zipb::npy_member("<V2", "(2,)", std::string("\x80\x3f\x00\xc0", 4))),
                 member("__ckpt_metadata__.npy", metadata_member(json), method)};
    return zipb::build(a);
}

struct Result {
    int rc;
    std::string message;
    Vars vars;
};

Result read_bytes(const TempDir& dir, const std::string& bytes, const ckpt_options* o = nullptr) {
    const std::string path = dir.file("given.npz");
    write_file(path, bytes);
    ckpt_vars* v = nullptr;
    const int rc = ckpt_read(&v, path.c_str(), o);
    Result r{rc, rc == CKPT_OK ? "" : message(), Vars(v)};
    if (rc == CKPT_OK) {  // the lazy path must agree with the whole read
        ckpt_reader* n = nullptr;
        CHECK(ckpt_reader_open(&n, path.c_str(), o) == CKPT_OK);
        ckpt_reader_close(n);
    } else {
        ckpt_reader* n = nullptr;
        CHECK(ckpt_reader_open(&n, path.c_str(), o) == rc);
        CHECK(n == nullptr);
    }
    return r;
}

}  // namespace

TEST_CASE("raw bytes others wrote read by numpy's and ml_dtypes' conventions", "[metadata][dtype]") {
    TempDir dir;
    const std::string two = std::string("\x80\x3f\x00\xc0", 4);
    const struct {
        const char* descr;
        std::string data;
        uint32_t dtype;
        size_t itemsize;
    } cases[] = {
        {"<V2", two, CKPT_BFLOAT16, 2},          {"|V2", two, CKPT_BFLOAT16, 2},
        {"<V1", "\x01\x02", CKPT_VOID, 1},       {"|V1", "\x01\x02", CKPT_VOID, 1},
        {"|V3", "abcdef", CKPT_VOID, 3},         {"<f1", "\x3c\xbc", CKPT_FLOAT8_E5M2, 1},
        {"bfloat16", two, CKPT_BFLOAT16, 2},     {"float8_e4m3fn", "\x38\xb8", CKPT_FLOAT8_E4M3FN, 1},
        {"float8_e5m2", "\x3c\xbc", CKPT_FLOAT8_E5M2, 1}, {"float8_e4m3fnuz", "\x40\xc0", CKPT_FLOAT8_E4M3FNUZ, 1},
        {"float8_e5m2fnuz", "\x40\xc0", CKPT_FLOAT8_E5M2FNUZ, 1}, {"float8_e8m0fnu", "\x7f\x80", CKPT_FLOAT8_E8M0FNU, 1},
    };
    for (const auto& c : cases) {
        INFO(c.descr);
        zipb::Archive a;
        const std::string shape = "(" + std::to_string(c.data.size() / c.itemsize) + ",)";
        a.members = {member("w.npy", zipb::npy_member(c.descr, shape, c.data))};
        const Result r = read_bytes(dir, zipb::build(a));
        INFO(r.message);
        REQUIRE(r.rc == CKPT_OK);
        CHECK(ckpt_vars_dtype(r.vars.get(), 0) == c.dtype);
        CHECK(ckpt_vars_itemsize(r.vars.get(), 0) == c.itemsize);
        REQUIRE(ckpt_vars_nbytes(r.vars.get(), 0) == c.data.size());
        CHECK(std::memcmp(ckpt_vars_data(r.vars.get(), 0), c.data.data(), c.data.size()) == 0);
    }
    SECTION("a big-endian bfloat16 ('>V2') is swapped; a big-endian void is not") {
        zipb::Archive a;
        a.members = {member("b.npy", zipb::npy_member(">V2", "(1,)", "\x3f\x80")),
                     member("v.npy", zipb::npy_member(">V2", "(1,)", "\x3f\x80")),
                     member("__ckpt_metadata__.npy", metadata_member(R"({"format": 1, "dtypes": {"v": "void"}})"))};
        const Result r = read_bytes(dir, zipb::build(a));
        REQUIRE(r.rc == CKPT_OK);
        uint16_t b;
        std::memcpy(&b, ckpt_vars_data(r.vars.get(), 0), 2);
        CHECK(b == 0x3f80);
        CHECK(ckpt_vars_dtype(r.vars.get(), 1) == CKPT_VOID);
        CHECK(std::memcmp(ckpt_vars_data(r.vars.get(), 1), "\x3f\x80", 2) == 0);
    }
    SECTION("the record decides: raw bytes of two recorded as void stay void") {
        const Result r = read_bytes(dir, with_metadata(R"({"format": 1, "dtypes": {"w": "void"}, "metadata": {}})"));
        REQUIRE(r.rc == CKPT_OK);
        CHECK(ckpt_vars_dtype(r.vars.get(), 0) == CKPT_VOID);
        CHECK(ckpt_vars_itemsize(r.vars.get(), 0) == 2);
    }
    SECTION("ml_dtypes' other types are unsupported") {
        zipb::Archive a;
        a.members = {member("w.npy", zipb::npy_member("int4", "(2,)", "\x01\x02"))};
        const Result r = read_bytes(dir, zipb::build(a));
        CHECK(r.rc == CKPT_EUNSUPPORTED);
        CHECK_THAT(r.message, Contains("given.npz: member 'w.npy'") && Contains("'int4' is an ml_dtypes type"));
    }
}

TEST_CASE("a well-formed metadata member written by hand is read in any key order", "[metadata]") {
    TempDir dir;
    const Result r = read_bytes(
        dir, with_metadata(R"(  {"metadata": {"b": "2", "a": "\u00e9\n"}, "dtypes": {"w": "bfloat16"}, "format": 1} )"));
    INFO(r.message);
    REQUIRE(r.rc == CKPT_OK);
    CHECK(ckpt_vars_count(r.vars.get()) == 1);
    REQUIRE(ckpt_vars_metadata_count(r.vars.get()) == 2);
    CHECK(std::string(ckpt_vars_metadata_key(r.vars.get(), 0)) == "b");
    CHECK(std::string(ckpt_vars_metadata(r.vars.get(), "a")) == "\xc3\xa9\n");
    const Result minimal = read_bytes(dir, with_metadata(R"({"format": 1})"));
    CHECK(minimal.rc == CKPT_OK);
    CHECK(ckpt_vars_dtype(minimal.vars.get(), 0) == CKPT_BFLOAT16);
}

TEST_CASE("a malformed metadata member is CKPT_EFORMAT naming the file, the member and the problem",
          "[metadata][malformed]") {
    TempDir dir;
    const struct {
        const char* what;
        std::string json;
        const char* problem;
    } cases[] = {
        {"not JSON", "{\"format\": 1,", "not valid JSON"},
        {"empty text", "", "not valid JSON"},
        {"trailing text", "{\"format\": 1} x", "not valid JSON"},
        {"not an object", "[1, 2]", "the text is an array, not a JSON object"},
        {"a string", "\"hello\"", "the text is a string, not a JSON object"},
        {"deep nesting", "{\"format\": 1, \"metadata\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
         "'metadata' is an array, not an object of strings"},
        {"nested object in metadata", R"({"format": 1, "metadata": {"a": {"b": "c"}}})",
         "the value of 'a' in 'metadata' is an object, not a string"},
        {"a number value", R"({"format": 1, "metadata": {"step": 100}})",
         "the value of 'step' in 'metadata' is a number, not a string"},
        {"a null value", R"({"format": 1, "metadata": {"step": null}})", "is null, not a string"},
        {"no format", R"({"metadata": {}})", "'format' is missing"},
        {"a fractional format", R"({"format": 1.5})", "'format' is a fractional number, not a whole number"},
        {"a string format", R"({"format": "1"})", "'format' is a string, not a whole number"},
        {"an unknown key", R"({"format": 1, "extra": true})", "unexpected key 'extra'"},
        {"an unknown key with an object", R"({"format": 1, "extra": {}})", "unexpected key 'extra'"},
        {"a repeated key", R"({"format": 1, "format": 1})", "key 'format' appears twice"},
        {"a repeated metadata key", R"({"format": 1, "metadata": {"a": "1", "a": "2"}})", "'a' appears twice"},
        {"a repeated dtype", R"({"format": 1, "dtypes": {"w": "bfloat16", "w": "void"}})", "'w' appears twice"},
        {"an empty metadata key", R"({"format": 1, "metadata": {"": "x"}})", "a key in 'metadata' is empty"},
        {"NUL in a value", R"({"format": 1, "metadata": {"a": "x\u0000y"}})", "the value of 'a' contains NUL"},
        {"NUL in a key", R"({"format": 1, "metadata": {"a\u0000": "x"}})", "contains NUL"},
        {"an unknown dtype name", R"({"format": 1, "dtypes": {"w": "bfloat17"}})", "unknown dtype 'bfloat17' for array 'w'"},
        {"a dtype for a missing array", R"({"format": 1, "dtypes": {"x": "bfloat16"}})",
         "dtype bfloat16 is recorded for 'x', which is not a member of the file"},
        {"a dtype of another size", R"({"format": 1, "dtypes": {"w": "float8_e4m3fn"}})",
         "member 'w.npy': dtype float8_e4m3fn (1 bytes) is recorded for raw items of 2 bytes"},
        {"a numpy dtype recorded", R"({"format": 1, "dtypes": {"w": "float16"}})", "that is numpy's own"},
        {"dtypes not an object", R"({"format": 1, "dtypes": ["w"]})", "'dtypes' is an array, not an object of strings"},
        {"a negative format", R"({"format": -1})", "'format' is a negative number"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const Result r = read_bytes(dir, with_metadata(c.json));
        CHECK(r.rc == CKPT_EFORMAT);
        CHECK_THAT(r.message, Contains("given.npz: member '__ckpt_metadata__.npy'") && Contains(c.problem));
    }
    SECTION("a format newer than this library reads is CKPT_EUNSUPPORTED") {
        for (const char* json : {R"({"format": 2, "shards": {"a": [1]}})", R"({"shards": 1, "format": 7})"}) {
            INFO(json);
            const Result r = read_bytes(dir, with_metadata(json));
            CHECK(r.rc == CKPT_EUNSUPPORTED);
            CHECK_THAT(r.message, Contains("__ckpt_metadata__.npy") && Contains("newer than this library reads (1)"));
        }
    }
    SECTION("a metadata member that is not a 0-d '<U' array") {
        for (const auto& [descr, shape, data] : std::vector<std::tuple<std::string, std::string, std::string>>{
                 {"<U2", "(1,)", u32_text("{}")}, {"|S2", "()", "{}"}, {"<f4", "()", "abcd"}}) {
            INFO(descr << " " << shape);
            zipb::Archive a;
            a.members = {member("__ckpt_metadata__.npy", zipb::npy_member(descr, shape, data))};
            const Result r = read_bytes(dir, zipb::build(a));
            CHECK(r.rc == CKPT_EFORMAT);
            CHECK_THAT(r.message, Contains("__ckpt_metadata__.npy") && Contains("must be a 0-d '<U' array"));
        }
    }
    SECTION("text that is not valid unicode") {
        zipb::Archive a;
        a.members = {member("__ckpt_metadata__.npy", zipb::npy_member("<U1", "()", std::string("\x00\xd8\x00\x00", 4)))};
        const Result r = read_bytes(dir, zipb::build(a));
        CHECK(r.rc == CKPT_EFORMAT);
        CHECK_THAT(r.message, Contains("not valid unicode"));
    }
    SECTION("a huge metadata member is refused before it is read") {
        const size_t chars = (size_t{64} << 20) / 4 + 1;
        zipb::Archive a;
        a.members = {member("__ckpt_metadata__.npy",
                            zipb::npy_member("<U" + std::to_string(chars), "()", std::string(chars * 4, ' ')),
                            zipb::kDeflated)};
        const Result r = read_bytes(dir, zipb::build(a));
        CHECK(r.rc == CKPT_EFORMAT);
        CHECK_THAT(r.message, Contains("__ckpt_metadata__.npy") && Contains("more than the limit of 67108864"));
    }
    SECTION("an objax names table that names the metadata member") {
        const std::string name = "__ckpt_metadata__";
        zipb::Archive a;
        a.members = {member("names.npy", zipb::npy_member("<U17", "(1,)", u32_text(name))),
                     member("0.npy", zipb::npy_member("<f4", "(1,)", "abcd"))};
        const Result r = read_bytes(dir, zipb::build(a));
        CHECK(r.rc == CKPT_EFORMAT);
        CHECK_THAT(r.message, Contains("member 'names.npy'") && Contains("reserved for ckpt's own member"));
    }
    SECTION("a corrupt metadata member fails its CRC like any other") {
        std::string bytes = with_metadata(R"({"format": 1, "metadata": {"step": "7"}})");
        const size_t at = bytes.find(u32_text("7"));
        REQUIRE(at != std::string::npos);
        bytes[at] = '8';
        const Result r = read_bytes(dir, bytes);
        CHECK(r.rc == CKPT_EFORMAT);
        CHECK_THAT(r.message, Contains("__ckpt_metadata__.npy") && Contains("CRC"));
    }
}
