// SPDX-License-Identifier: Apache-2.0
// The C API as a user sees it: every documented behaviour and return code of include/ckpt/ckpt.h, exercised
// through the public functions of the shared library only.
#include <catch2/catch.hpp>

#include "support/handles.hpp"
#include "support/in_child.hpp"
#include "support/temp_dir.hpp"

#include <ckpt/ckpt.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <atomic>
#include <thread>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ckpt::testing::message;

namespace {

using ckpt::testing::TempDir;

// ------------------------------------------------------------------------------------------------ helpers


using ckpt::testing::new_vars;
using ckpt::testing::Reader;
using ckpt::testing::Vars;

Vars read_npz(const std::string& path, const ckpt_options* opts = nullptr) {
    ckpt_vars* v = nullptr;
    const int rc = ckpt_read(&v, path.c_str(), opts);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    REQUIRE(v != nullptr);
    return Vars(v);
}

Reader open_reader(const std::string& path, const ckpt_options* opts = nullptr) {
    ckpt_reader* n = nullptr;
    const int rc = ckpt_reader_open(&n, path.c_str(), opts);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    REQUIRE(n != nullptr);
    return Reader(n);
}

void save_npz(const std::string& path, const ckpt_vars* vars, const ckpt_options* opts = nullptr) {
    const int rc = ckpt_save(path.c_str(), vars, opts);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
}

ckpt_options options(uint32_t layout = CKPT_LAYOUT_AUTO, uint32_t compression = CKPT_STORE) {
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.layout = layout;
    o.compression = compression;
    return o;
}

std::vector<unsigned char> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<unsigned char> bytes_of(const ckpt_vars* vars, size_t i) {
    const size_t n = ckpt_vars_nbytes(vars, i);
    const auto* p = static_cast<const unsigned char*>(ckpt_vars_data(vars, i));
    if (n == 0) return {};
    REQUIRE(p != nullptr);
    return std::vector<unsigned char>(p, p + n);
}

std::vector<int64_t> shape_of(const ckpt_vars* vars, size_t i) {
    const int64_t* s = ckpt_vars_shape(vars, i);
    REQUIRE(s != nullptr);
    return std::vector<int64_t>(s, s + ckpt_vars_ndim(vars, i));
}

std::vector<std::string> names_of(const ckpt_vars* vars) {
    std::vector<std::string> names;
    for (size_t i = 0; i < ckpt_vars_count(vars); ++i) names.emplace_back(ckpt_vars_name(vars, i));
    return names;
}

// Same names in the same order, same dtype, itemsize, shape and bytes.
void require_same(const ckpt_vars* expected, const ckpt_vars* actual) {
    REQUIRE(ckpt_vars_count(actual) == ckpt_vars_count(expected));
    for (size_t i = 0; i < ckpt_vars_count(expected); ++i) {
        const std::string name = ckpt_vars_name(expected, i);
        CAPTURE(i, name);
        REQUIRE(ckpt_vars_name(actual, i) == name);
        REQUIRE(ckpt_vars_dtype(actual, i) == ckpt_vars_dtype(expected, i));
        REQUIRE(ckpt_vars_itemsize(actual, i) == ckpt_vars_itemsize(expected, i));
        REQUIRE(shape_of(actual, i) == shape_of(expected, i));
        REQUIRE(ckpt_vars_nbytes(actual, i) == ckpt_vars_nbytes(expected, i));
        REQUIRE(bytes_of(actual, i) == bytes_of(expected, i));
    }
}

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) { ++i; continue; }
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1Fu, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0Fu, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07u, min = 0x10000;
        else return false;
        if (s.size() - i < len) return false;
        for (size_t k = 1; k < len; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

struct DtypeInfo {
    uint32_t dtype;
    size_t size;
    const char* name;
};
constexpr DtypeInfo kNumeric[] = {
    {CKPT_BOOL, 1, "bool"},       {CKPT_INT8, 1, "int8"},       {CKPT_INT16, 2, "int16"},
    {CKPT_INT32, 4, "int32"},     {CKPT_INT64, 8, "int64"},     {CKPT_UINT8, 1, "uint8"},
    {CKPT_UINT16, 2, "uint16"},   {CKPT_UINT32, 4, "uint32"},   {CKPT_UINT64, 8, "uint64"},
    {CKPT_FLOAT16, 2, "float16"}, {CKPT_FLOAT32, 4, "float32"}, {CKPT_FLOAT64, 8, "float64"},
    {CKPT_COMPLEX64, 8, "complex64"}, {CKPT_COMPLEX128, 16, "complex128"},
};

// Distinct bytes for array `seed` of n bytes: every byte pattern, so no value is special-cased.
std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = static_cast<unsigned char>(k * 31u + seed * 7u + 1u);
    return v;
}

// One (2, 3) array of every numeric dtype, plus a unicode and a bytes array, each with distinct content.
void add_every_dtype(ckpt_vars* vars) {
    const int64_t shape[2] = {2, 3};
    for (const DtypeInfo& d : kNumeric) {
        std::vector<unsigned char> data = pattern(6 * d.size, d.dtype);
        if (d.dtype == CKPT_BOOL)
            for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<unsigned char>(k % 2);
        REQUIRE(ckpt_vars_add(vars, d.name, d.dtype, 2, shape, data.data(), CKPT_COPY) == CKPT_OK);
    }
    // '<U3': zero-padded UTF-32 items, including a character outside the BMP.
    const char32_t text[6][3] = {{U'a', U'b', U'c'}, {U'\u00e9', 0, 0}, {U'\U0001F600', U'x', 0},
                                 {0, 0, 0},          {U'\u5c64', U'z', U'\u00fc'}, {U'q', 0, 0}};
    REQUIRE(ckpt_vars_add_strings(vars, "unicode", CKPT_UNICODE, 12, 2, shape, text, CKPT_COPY) == CKPT_OK);
    // '|S5': arbitrary bytes, zero-padded.
    const char raw[6][5] = {{'h', 'e', 'l', 'l', 'o'}, {'a', 0, 0, 0, 0}, {'\xff', '\x01', 0, 0, 0},
                            {0, 0, 0, 0, 0},          {'\x80', 'b', 'c', 'd', 0}, {'z', 'z', 0, 0, 0}};
    REQUIRE(ckpt_vars_add_strings(vars, "bytes", CKPT_BYTES, 5, 2, shape, raw, CKPT_COPY) == CKPT_OK);
}

// Records every progress call.
struct ProgressLog {
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    static void record(uint64_t done, uint64_t total, void* payload) {
        static_cast<ProgressLog*>(payload)->calls.emplace_back(done, total);
    }
};

void require_progress_to(const ProgressLog& log, uint64_t total) {
    REQUIRE_FALSE(log.calls.empty());
    uint64_t previous = 0;
    for (size_t k = 0; k < log.calls.size(); ++k) {
        CAPTURE(k, log.calls[k].first, log.calls[k].second);
        CHECK(log.calls[k].second == total);
        CHECK(log.calls[k].first > previous);
        CHECK(log.calls[k].first <= total);
        previous = log.calls[k].first;
    }
    CHECK(log.calls.back().first == total);
}

uint64_t total_nbytes(const ckpt_vars* vars) {
    uint64_t total = 0;
    for (size_t i = 0; i < ckpt_vars_count(vars); ++i) total += ckpt_vars_nbytes(vars, i);
    return total;
}

}  // namespace

// ------------------------------------------------------------------------------------------------ version

TEST_CASE("The version macros match the library loaded at run time", "[capi][version]") {
    CHECK(CKPT_VERSION_NUMBER == CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH);
    CHECK(ckpt_version_number() == static_cast<uint32_t>(CKPT_VERSION_NUMBER));
    REQUIRE(ckpt_version_string() != nullptr);
    CHECK(std::string(ckpt_version_string()) == CKPT_VERSION_STRING);
    CHECK(std::string(ckpt_version_string()) == std::to_string(CKPT_VERSION_MAJOR) + "." +
                                                    std::to_string(CKPT_VERSION_MINOR) + "." +
                                                    std::to_string(CKPT_VERSION_PATCH));
}

// ------------------------------------------------------------------------------------------- status codes

TEST_CASE("ckpt_strerror names every status code with its own text", "[capi][errors]") {
    const int codes[] = {CKPT_OK,     CKPT_ERROR,       CKPT_EINVAL, CKPT_ENOTFOUND, CKPT_EFORMAT, CKPT_EIO,
                         CKPT_ENOMEM, CKPT_EMISMATCH,   CKPT_EUNSUPPORTED, CKPT_EBUSY, CKPT_EEXIST, CKPT_EBUFS};
    std::vector<std::string> texts;
    for (int code : codes) {
        CAPTURE(code);
        const char* text = ckpt_strerror(code);
        REQUIRE(text != nullptr);
        CHECK(std::string(text) != "");
        CHECK(std::string(text) != "unknown error code");
        texts.emplace_back(text);
    }
    std::sort(texts.begin(), texts.end());
    CHECK(std::adjacent_find(texts.begin(), texts.end()) == texts.end());
    CHECK(std::string(ckpt_strerror(CKPT_EINVAL)) == "invalid argument");
}

TEST_CASE("ckpt_strerror says 'unknown error code' for values that are not codes", "[capi][errors]") {
    for (int code : {1, -12, 12345, INT_MIN, INT_MAX}) {
        CAPTURE(code);
        CHECK(std::string(ckpt_strerror(code)) == "unknown error code");
    }
}

TEST_CASE("The status codes keep their fixed values", "[capi][errors]") {
    CHECK(CKPT_OK == 0);
    CHECK(CKPT_ERROR == -1);
    CHECK(CKPT_EINVAL == -2);
    CHECK(CKPT_ENOTFOUND == -3);
    CHECK(CKPT_EFORMAT == -4);
    CHECK(CKPT_EIO == -5);
    CHECK(CKPT_ENOMEM == -6);
    CHECK(CKPT_EMISMATCH == -7);
    CHECK(CKPT_EUNSUPPORTED == -8);
    CHECK(CKPT_EBUSY == -9);
    CHECK(CKPT_EEXIST == -10);
    CHECK(CKPT_EBUFS == -11);
}

TEST_CASE("ckpt_error_message is empty on a thread where no call has failed", "[capi][errors]") {
    std::string seen = "not run";
    std::thread([&] { seen = ckpt_error_message(); }).join();
    CHECK(seen == "");
}

TEST_CASE("ckpt_error_message is per thread", "[capi][errors]") {
    REQUIRE(ckpt_vars_new(nullptr) == CKPT_EINVAL);
    const std::string mine = message();
    std::thread([] { (void)ckpt_read(nullptr, "x", nullptr); }).join();  // fails on another thread
    CHECK(message() == mine);
}

TEST_CASE("Successful calls leave ckpt_error_message unchanged", "[capi][errors]") {
    TempDir dir;
    ckpt_vars* none = nullptr;
    REQUIRE(ckpt_read(&none, dir.file("absent.npz").c_str(), nullptr) == CKPT_ENOTFOUND);
    const std::string before = message();
    REQUIRE_THAT(before, Contains("absent.npz"));

    Vars vars = new_vars();
    const float x[2] = {1, 2};
    const int64_t shape[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "x", CKPT_FLOAT32, 1, shape, x, CKPT_COPY) == CKPT_OK);
    size_t index = 99;
    REQUIRE(ckpt_vars_find(vars.get(), "x", &index) == CKPT_OK);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    save_npz(dir.file("a.npz"), vars.get(), &o);
    Vars back = read_npz(dir.file("a.npz"));
    REQUIRE(ckpt_restore(dir.file("a.npz").c_str(), vars.get(), nullptr) == CKPT_OK);
    Reader npz = open_reader(dir.file("a.npz"));
    float y[2];
    REQUIRE(ckpt_reader_read_into(npz.get(), 0, y, sizeof y) == CKPT_OK);

    CHECK(message() == before);
}

// ------------------------------------------------------------------------------------------------- dtypes

TEST_CASE("ckpt_dtype_size and ckpt_dtype_name describe every numeric dtype", "[capi][dtype]") {
    for (const DtypeInfo& d : kNumeric) {
        CAPTURE(d.name);
        CHECK(ckpt_dtype_size(d.dtype) == d.size);
        REQUIRE(ckpt_dtype_name(d.dtype) != nullptr);
        CHECK(std::string(ckpt_dtype_name(d.dtype)) == d.name);
    }
}

TEST_CASE("String dtypes have no fixed size and are named 'unicode' and 'bytes'", "[capi][dtype]") {
    CHECK(ckpt_dtype_size(CKPT_UNICODE) == 0);
    CHECK(ckpt_dtype_size(CKPT_BYTES) == 0);
    CHECK(std::string(ckpt_dtype_name(CKPT_UNICODE)) == "unicode");
    CHECK(std::string(ckpt_dtype_name(CKPT_BYTES)) == "bytes");
}

TEST_CASE("Values that are not dtypes have size 0 and no name", "[capi][dtype]") {
    for (uint32_t v : {0u, 24u, 255u, UINT32_MAX}) {
        CAPTURE(v);
        CHECK(ckpt_dtype_size(v) == 0);
        CHECK(ckpt_dtype_name(v) == nullptr);
    }
}

// ------------------------------------------------------------------------------------ variable collections

TEST_CASE("A new collection is empty", "[capi][vars]") {
    Vars vars = new_vars();
    CHECK(ckpt_vars_count(vars.get()) == 0);
    CHECK(ckpt_vars_name(vars.get(), 0) == nullptr);
}

TEST_CASE("ckpt_vars_new with a NULL out-parameter is CKPT_EINVAL", "[capi][vars]") {
    CHECK(ckpt_vars_new(nullptr) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("out"));
}

TEST_CASE("Freeing a NULL collection is harmless", "[capi][vars]") {
    ckpt_vars_free(nullptr);
    SUCCEED();
}

TEST_CASE("ckpt_vars_add with CKPT_COPY keeps its own copy of the caller's bytes", "[capi][vars]") {
    Vars vars = new_vars();
    int32_t data[4] = {1, -2, 3, -4};
    const int64_t shape[2] = {2, 2};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_INT32, 2, shape, data, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_vars_data(vars.get(), 0) != static_cast<void*>(data));

    std::fill(std::begin(data), std::end(data), 77);  // the caller reuses its buffer

    const auto* stored = static_cast<const int32_t*>(ckpt_vars_data(vars.get(), 0));
    CHECK(std::vector<int32_t>(stored, stored + 4) == std::vector<int32_t>{1, -2, 3, -4});
}

TEST_CASE("ckpt_vars_add with CKPT_BORROW keeps the caller's pointer", "[capi][vars]") {
    Vars vars = new_vars();
    double data[3] = {0.5, 1.5, 2.5};
    const int64_t shape[1] = {3};
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_FLOAT64, 1, shape, data, CKPT_BORROW) == CKPT_OK);
    CHECK(ckpt_vars_data(vars.get(), 0) == static_cast<void*>(data));

    data[1] = 9.0;  // the collection sees the caller's later writes

    CHECK(static_cast<const double*>(ckpt_vars_data(vars.get(), 0))[1] == 9.0);
}

TEST_CASE("ckpt_vars_add with CKPT_COPY and NULL data gives zeros", "[capi][vars]") {
    Vars vars = new_vars();
    const int64_t shape[2] = {3, 5};
    REQUIRE(ckpt_vars_add(vars.get(), "z", CKPT_FLOAT64, 2, shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_nbytes(vars.get(), 0) == 15 * 8);
    CHECK(bytes_of(vars.get(), 0) == std::vector<unsigned char>(15 * 8, 0));
}

TEST_CASE("ckpt_vars_add_strings with CKPT_COPY and NULL data gives zeros", "[capi][vars]") {
    Vars vars = new_vars();
    const int64_t shape[1] = {4};
    REQUIRE(ckpt_vars_add_strings(vars.get(), "s", CKPT_UNICODE, 8, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    CHECK(bytes_of(vars.get(), 0) == std::vector<unsigned char>(32, 0));
}

TEST_CASE("CKPT_BORROW accepts NULL data for an empty array", "[capi][vars]") {
    Vars vars = new_vars();
    const int64_t shape[2] = {4, 0};
    REQUIRE(ckpt_vars_add(vars.get(), "e", CKPT_FLOAT32, 2, shape, nullptr, CKPT_BORROW) == CKPT_OK);
    CHECK(ckpt_vars_nbytes(vars.get(), 0) == 0);
}

TEST_CASE("Accessors describe each array", "[capi][vars]") {
    Vars vars = new_vars();
    const int64_t s1[3] = {2, 3, 4};
    const int64_t s2[1] = {5};
    REQUIRE(ckpt_vars_add(vars.get(), "conv/w", CKPT_FLOAT16, 3, s1, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "labels", CKPT_UNICODE, 24, 1, s2, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "raw", CKPT_BYTES, 3, 1, s2, nullptr, CKPT_COPY) == CKPT_OK);

    REQUIRE(ckpt_vars_count(vars.get()) == 3);
    CHECK(names_of(vars.get()) == std::vector<std::string>{"conv/w", "labels", "raw"});

    CHECK(ckpt_vars_dtype(vars.get(), 0) == CKPT_FLOAT16);
    CHECK(ckpt_vars_itemsize(vars.get(), 0) == 2);
    CHECK(ckpt_vars_ndim(vars.get(), 0) == 3);
    CHECK(shape_of(vars.get(), 0) == std::vector<int64_t>{2, 3, 4});
    CHECK(ckpt_vars_nbytes(vars.get(), 0) == 48);

    CHECK(ckpt_vars_dtype(vars.get(), 1) == CKPT_UNICODE);
    CHECK(ckpt_vars_itemsize(vars.get(), 1) == 24);
    CHECK(ckpt_vars_nbytes(vars.get(), 1) == 120);

    CHECK(ckpt_vars_dtype(vars.get(), 2) == CKPT_BYTES);
    CHECK(ckpt_vars_itemsize(vars.get(), 2) == 3);
    CHECK(ckpt_vars_nbytes(vars.get(), 2) == 15);
}

TEST_CASE("The shape is copied: the caller's shape array may be reused", "[capi][vars]") {
    Vars vars = new_vars();
    int64_t shape[2] = {2, 3};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_INT8, 2, shape, nullptr, CKPT_COPY) == CKPT_OK);
    shape[0] = 100;
    CHECK(shape_of(vars.get(), 0) == std::vector<int64_t>{2, 3});
}

TEST_CASE("Accessors out of range give 0 or NULL", "[capi][vars]") {
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_INT64, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    for (size_t i : {size_t{1}, size_t{1000}, SIZE_MAX}) {
        CAPTURE(i);
        CHECK(ckpt_vars_name(vars.get(), i) == nullptr);
        CHECK(ckpt_vars_dtype(vars.get(), i) == 0);
        CHECK(ckpt_vars_itemsize(vars.get(), i) == 0);
        CHECK(ckpt_vars_ndim(vars.get(), i) == 0);
        CHECK(ckpt_vars_shape(vars.get(), i) == nullptr);
        CHECK(ckpt_vars_nbytes(vars.get(), i) == 0);
        CHECK(ckpt_vars_data(vars.get(), i) == nullptr);
    }
}

TEST_CASE("Accessors of a NULL collection give 0 or NULL", "[capi][vars]") {
    CHECK(ckpt_vars_count(nullptr) == 0);
    CHECK(ckpt_vars_name(nullptr, 0) == nullptr);
    CHECK(ckpt_vars_dtype(nullptr, 0) == 0);
    CHECK(ckpt_vars_itemsize(nullptr, 0) == 0);
    CHECK(ckpt_vars_ndim(nullptr, 0) == 0);
    CHECK(ckpt_vars_shape(nullptr, 0) == nullptr);
    CHECK(ckpt_vars_nbytes(nullptr, 0) == 0);
    CHECK(ckpt_vars_data(nullptr, 0) == nullptr);
}

TEST_CASE("A 0-d array has ndim 0, a non-NULL shape pointer and one item", "[capi][vars]") {
    Vars vars = new_vars();
    const double pi = 3.25;
    REQUIRE(ckpt_vars_add(vars.get(), "scalar", CKPT_FLOAT64, 0, nullptr, &pi, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_vars_ndim(vars.get(), 0) == 0);
    CHECK(ckpt_vars_shape(vars.get(), 0) != nullptr);
    CHECK(ckpt_vars_nbytes(vars.get(), 0) == 8);
    CHECK(*static_cast<const double*>(ckpt_vars_data(vars.get(), 0)) == 3.25);
}

TEST_CASE("An array of 64 dimensions is accepted", "[capi][vars]") {
    Vars vars = new_vars();
    std::vector<int64_t> shape(64, 1);
    shape[10] = 2;
    REQUIRE(ckpt_vars_add(vars.get(), "deep", CKPT_UINT8, 64, shape.data(), nullptr, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_vars_ndim(vars.get(), 0) == 64);
    CHECK(ckpt_vars_nbytes(vars.get(), 0) == 2);
}

TEST_CASE("ckpt_vars_find gives the position of a name", "[capi][vars]") {
    Vars vars = new_vars();
    for (const char* name : {"a", "b", "c"})
        REQUIRE(ckpt_vars_add(vars.get(), name, CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    size_t index = 99;

    SECTION("a present name gives its insertion position") {
        REQUIRE(ckpt_vars_find(vars.get(), "c", &index) == CKPT_OK);
        CHECK(index == 2);
        REQUIRE(ckpt_vars_find(vars.get(), "a", &index) == CKPT_OK);
        CHECK(index == 0);
    }
    SECTION("an absent name is CKPT_ENOTFOUND, naming it") {
        CHECK(ckpt_vars_find(vars.get(), "nope", &index) == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains("nope"));
    }
    SECTION("NULL arguments are CKPT_EINVAL") {
        CHECK(ckpt_vars_find(nullptr, "a", &index) == CKPT_EINVAL);
        CHECK(ckpt_vars_find(vars.get(), nullptr, &index) == CKPT_EINVAL);
        CHECK(ckpt_vars_find(vars.get(), "a", nullptr) == CKPT_EINVAL);
    }
}

TEST_CASE("ckpt_reader_find gives the position of a name in an open file, of either layout", "[capi][npz]") {
    TempDir dir;
    Vars vars = new_vars();
    // More names than a guess would cover, in an order that is not sorted.
    std::vector<std::string> names;
    for (int i = 0; i < 300; ++i) names.push_back("v" + std::to_string((i * 7919) % 1000));
    for (const std::string& name : names)
        REQUIRE(ckpt_vars_add(vars.get(), name.c_str(), CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const ckpt_options o = options(layout);
    save_npz(dir.file("f.npz"), vars.get(), &o);
    Reader npz = open_reader(dir.file("f.npz"));
    size_t index = 99;

    SECTION("every name gives the position ckpt_reader_name has it at, also from several threads at once") {
        std::vector<std::thread> threads;
        std::atomic<int> wrong{0};
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&] {
                for (size_t i = 0; i < names.size(); ++i) {
                    size_t at = 0;
                    if (ckpt_reader_find(npz.get(), names[i].c_str(), &at) != CKPT_OK ||
                        names[i] != ckpt_reader_name(npz.get(), at))
                        ++wrong;
                }
            });
        }
        for (auto& t : threads) t.join();
        CHECK(wrong == 0);
    }
    SECTION("an absent name is CKPT_ENOTFOUND naming it and the file, and leaves *out_index alone") {
        CHECK(ckpt_reader_find(npz.get(), "v1001", &index) == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains("f.npz: no array 'v1001'"));
        CHECK(index == 99);
        CHECK(ckpt_reader_find(npz.get(), "", &index) == CKPT_ENOTFOUND);
        CHECK(ckpt_reader_find(npz.get(), "names", &index) == CKPT_ENOTFOUND);  // objax's list of names is no array
    }
    SECTION("NULL arguments are CKPT_EINVAL") {
        CHECK(ckpt_reader_find(nullptr, "v0", &index) == CKPT_EINVAL);
        CHECK(ckpt_reader_find(npz.get(), nullptr, &index) == CKPT_EINVAL);
        CHECK(ckpt_reader_find(npz.get(), "v0", nullptr) == CKPT_EINVAL);
    }
}

TEST_CASE("ckpt_vars_add refuses bad arguments with an exact code and a message naming the variable",
          "[capi][vars]") {
    Vars vars = new_vars();
    const float one = 1.0f;
    REQUIRE(ckpt_vars_add(vars.get(), "taken", CKPT_FLOAT32, 0, nullptr, &one, CKPT_COPY) == CKPT_OK);
    const int64_t shape[1] = {4};
    const float data[4] = {1, 2, 3, 4};
    const char* name = "layer7/kernel";

    SECTION("NULL vars is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(nullptr, name, CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("vars"));
        CHECK(ckpt_vars_add_strings(nullptr, name, CKPT_BYTES, 1, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
    }
    SECTION("NULL name is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), nullptr, CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("name"));
        CHECK(ckpt_vars_add_strings(vars.get(), nullptr, CKPT_BYTES, 1, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
    }
    SECTION("NULL shape with ndim > 0 is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 1, nullptr, data, CKPT_COPY) == CKPT_EINVAL);
    }
    SECTION("an empty name is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), "", CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("empty"));
    }
    SECTION("a name that is not valid UTF-8 is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), "bad\xff\xfe", CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("UTF-8"));
        CHECK_THAT(message(), Contains("bad"));
    }
    SECTION("the message about a name that is not valid UTF-8 is itself valid UTF-8") {
        REQUIRE(ckpt_vars_add(vars.get(), "bad\xff\xfe", CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK(valid_utf8(message()));
    }
    SECTION("an overlong or surrogate UTF-8 sequence is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), "\xc0\xaf", CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK(ckpt_vars_add(vars.get(), "\xed\xa0\x80", CKPT_FLOAT32, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
    }
    SECTION("a name already present is CKPT_EEXIST and the first array stays") {
        CHECK(ckpt_vars_add(vars.get(), "taken", CKPT_INT8, 1, shape, data, CKPT_COPY) == CKPT_EEXIST);
        CHECK_THAT(message(), Contains("taken"));
        CHECK(ckpt_vars_add_strings(vars.get(), "taken", CKPT_BYTES, 2, 1, shape, nullptr, CKPT_COPY) ==
              CKPT_EEXIST);
        CHECK(ckpt_vars_dtype(vars.get(), 0) == CKPT_FLOAT32);
        CHECK(*static_cast<const float*>(ckpt_vars_data(vars.get(), 0)) == 1.0f);
    }
    SECTION("an unknown dtype is CKPT_EINVAL") {
        for (uint32_t dtype : {0u, 24u, 1000u}) {
            CAPTURE(dtype);
            CHECK(ckpt_vars_add(vars.get(), name, dtype, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
            CHECK_THAT(message(), Contains(name));
        }
    }
    SECTION("a string or void dtype through ckpt_vars_add is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_UNICODE, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_VOID, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_vars_add_strings"));
        CHECK_THAT(message(), Contains(name));
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_BYTES, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("a numeric dtype through ckpt_vars_add_strings is CKPT_EINVAL") {
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_FLOAT32, 4, 1, shape, data, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("a unicode itemsize that is not a multiple of 4 is CKPT_EINVAL") {
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_UNICODE, 6, 1, shape, nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("itemsize 0 is CKPT_EINVAL") {
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_BYTES, 0, 1, shape, nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_UNICODE, 0, 1, shape, nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("65 dimensions is CKPT_EINVAL") {
        std::vector<int64_t> deep(65, 1);
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 65, deep.data(), nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("a negative dimension is CKPT_EINVAL") {
        const int64_t negative[2] = {3, -1};
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 2, negative, nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }
    SECTION("a negative dimension is refused even when another dimension is 0") {
        const int64_t negative[2] = {0, -1};
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 2, negative, nullptr, CKPT_COPY) == CKPT_EINVAL);
    }
    SECTION("a shape whose byte size overflows is CKPT_EINVAL") {
        const int64_t huge[2] = {INT64_MAX, INT64_MAX};
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 2, huge, nullptr, CKPT_COPY) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
        const int64_t wide[3] = {int64_t{1} << 21, int64_t{1} << 21, int64_t{1} << 21};  // 2^63 * 8 bytes
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT64, 3, wide, nullptr, CKPT_BORROW) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_BYTES, SIZE_MAX, 1, shape, nullptr, CKPT_COPY) ==
              CKPT_EINVAL);
    }
    SECTION("unknown flags are CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 1, shape, data, 2u) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 1, shape, data, 0x80000000u) == CKPT_EINVAL);
    }
    SECTION("CKPT_BORROW with NULL data for a non-empty array is CKPT_EINVAL") {
        CHECK(ckpt_vars_add(vars.get(), name, CKPT_FLOAT32, 1, shape, nullptr, CKPT_BORROW) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
        CHECK(ckpt_vars_add_strings(vars.get(), name, CKPT_BYTES, 3, 1, shape, nullptr, CKPT_BORROW) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains(name));
    }

    // Whatever was refused, nothing was added.
    CHECK(ckpt_vars_count(vars.get()) == 1);
    size_t index;
    CHECK(ckpt_vars_find(vars.get(), name, &index) == CKPT_ENOTFOUND);
}

TEST_CASE("Failed constructors set *out to NULL", "[capi][vars][npz]") {
    TempDir dir;
    SECTION("ckpt_read") {
        ckpt_vars* out = reinterpret_cast<ckpt_vars*>(&dir);
        CHECK(ckpt_read(&out, dir.file("missing.npz").c_str(), nullptr) == CKPT_ENOTFOUND);
        CHECK(out == nullptr);
    }
    SECTION("ckpt_read_memory") {
        ckpt_vars* out = reinterpret_cast<ckpt_vars*>(&dir);
        const char junk[] = "this is not a zip archive at all, not even close";
        CHECK(ckpt_read_memory(&out, junk, sizeof junk, nullptr) == CKPT_EFORMAT);
        CHECK(out == nullptr);
    }
    SECTION("ckpt_reader_open") {
        ckpt_reader* out = reinterpret_cast<ckpt_reader*>(&dir);
        CHECK(ckpt_reader_open(&out, dir.file("missing.npz").c_str(), nullptr) == CKPT_ENOTFOUND);
        CHECK(out == nullptr);
    }
    SECTION("a constructor with bad options") {
        Vars vars = new_vars();
        save_npz(dir.file("ok.npz"), vars.get());
        ckpt_options o = options(7);
        ckpt_vars* out = reinterpret_cast<ckpt_vars*>(&dir);
        CHECK(ckpt_read(&out, dir.file("ok.npz").c_str(), &o) == CKPT_EINVAL);
        CHECK(out == nullptr);
    }
}

// ------------------------------------------------------------------------------------------------ options

TEST_CASE("ckpt_options_init fills the current version's defaults", "[capi][options]") {
    ckpt_options o;
    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    CHECK(o.version == CKPT_OPTIONS_VERSION);
    CHECK(o.storage == nullptr);
    CHECK(o.layout == CKPT_LAYOUT_AUTO);
    CHECK(o.compression == CKPT_STORE);
    CHECK(o.level == 0);
    CHECK(o.rename == nullptr);
    CHECK(o.rename_payload == nullptr);
    CHECK(o.max_header_bytes == 0);
    CHECK(o.progress == nullptr);
    CHECK(o.progress_payload == nullptr);
}

TEST_CASE("A version 1 options struct (built against an older header) is filled and accepted", "[capi][options]") {
    ckpt_options o;
    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_options_init(&o, 1) == CKPT_OK);
    CHECK(o.version == 1);
    CHECK(o.progress_payload == nullptr);
    // Fields of later versions are not the caller's memory in a version 1 struct: left untouched, and ignored.
    unsigned char storage_bytes[sizeof o.storage];
    std::memcpy(storage_bytes, &o.storage, sizeof storage_bytes);
    CHECK(storage_bytes[0] == 0xAB);
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_INT16, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_save(dir.file("v1.npz").c_str(), vars.get(), &o) == CKPT_OK);
    CHECK(dir.entries() == std::vector<std::string>{"v1.npz"});
}

TEST_CASE("A version 2 options struct is accepted and its missing limits are the defaults", "[capi][options]") {
    ckpt_options o;
    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_options_init(&o, 2) == CKPT_OK);
    CHECK(o.version == 2);
    CHECK(o.storage == nullptr);
    unsigned char limit_bytes[sizeof o.max_members];
    std::memcpy(limit_bytes, &o.max_members, sizeof limit_bytes);
    CHECK(limit_bytes[0] == 0xAB);  // not the caller's memory in a version 2 struct: untouched, and ignored
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_INT16, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_save(dir.file("v2.npz").c_str(), vars.get(), &o) == CKPT_OK);
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, dir.file("v2.npz").c_str(), &o) == CKPT_OK);
    ckpt_vars_free(out);
}

TEST_CASE("Reading limits: member count, total array bytes and header bytes are settable", "[capi][options]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {100};
    for (const char* name : {"a", "b", "c"})
        REQUIRE(ckpt_vars_add(vars.get(), name, CKPT_FLOAT64, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("three.npz");
    save_npz(path, vars.get());
    ckpt_options o = options();
    ckpt_vars* out = nullptr;

    o.max_members = 3;
    o.max_total_bytes = 2400;
    REQUIRE(ckpt_read(&out, path.c_str(), &o) == CKPT_OK);  // limits are inclusive
    ckpt_vars_free(out);
    out = nullptr;

    SECTION("max_members") {
        o.max_members = 2;
        CHECK(ckpt_read(&out, path.c_str(), &o) == CKPT_EFORMAT);
        CHECK_THAT(message(), Contains(path) && Contains("lists 3 members") && Contains("max_members"));
    }
    SECTION("max_total_bytes") {
        o.max_total_bytes = 2399;
        CHECK(ckpt_restore(path.c_str(), vars.get(), &o) == CKPT_EFORMAT);
        CHECK_THAT(message(), Contains(path) && Contains("2400 bytes") && Contains("max_total_bytes"));
    }
    SECTION("max_header_bytes") {
        o.max_header_bytes = 100;  // numpy's headers here are 118 bytes after the preamble
        CHECK(ckpt_read(&out, path.c_str(), &o) == CKPT_EFORMAT);
        CHECK_THAT(message(), Contains(path) && Contains("max_header_bytes"));
    }
    CHECK(out == nullptr);
}

TEST_CASE("CKPT_OPTIONS_INIT gives the same defaults as ckpt_options_init", "[capi][options]") {
    // Compiled with -Wall -Wextra -Werror: the macro must spell out every field (-Wmissing-field-initializers).
    const ckpt_options m = CKPT_OPTIONS_INIT;
    const ckpt_options f = options();
    CHECK(m.version == f.version);
    CHECK(m.layout == f.layout);
    CHECK(m.compression == f.compression);
    CHECK(m.level == f.level);
    CHECK(m.rename == f.rename);
    CHECK(m.max_header_bytes == f.max_header_bytes);
    CHECK(m.progress == f.progress);
}

TEST_CASE("ckpt_options_init refuses unknown versions and NULL", "[capi][options]") {
    ckpt_options o;
    CHECK(ckpt_options_init(&o, 0) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("0"));
    CHECK(ckpt_options_init(&o, CKPT_OPTIONS_VERSION + 1) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains(std::to_string(CKPT_OPTIONS_VERSION + 1)));
    CHECK(ckpt_options_init(nullptr, CKPT_OPTIONS_VERSION) == CKPT_EINVAL);
}

TEST_CASE("Options with a bad version, layout, compression or level are CKPT_EINVAL", "[capi][options]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "a", CKPT_INT16, 1, shape, nullptr, CKPT_COPY) == CKPT_OK);
    save_npz(dir.file("existing.npz"), vars.get());
    ckpt_options o = options();

    SECTION("version 0") { o.version = 0; }
    SECTION("a version newer than the library's") { o.version = CKPT_OPTIONS_VERSION + 1; }
    SECTION("layout 3") { o.layout = 3; }
    SECTION("compression 2") { o.compression = 2; }
    SECTION("level 10") {
        o.compression = CKPT_DEFLATE;
        o.level = 10;
    }
    SECTION("level -1") {
        o.compression = CKPT_DEFLATE;
        o.level = -1;
    }

    CHECK(ckpt_save(dir.file("new.npz").c_str(), vars.get(), &o) == CKPT_EINVAL);
    CHECK(dir.entries() == std::vector<std::string>{"existing.npz"});
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, dir.file("existing.npz").c_str(), &o) == CKPT_EINVAL);
    CHECK(out == nullptr);
    CHECK(ckpt_restore(dir.file("existing.npz").c_str(), vars.get(), &o) == CKPT_EINVAL);
    ckpt_reader* npz = nullptr;
    CHECK(ckpt_reader_open(&npz, dir.file("existing.npz").c_str(), &o) == CKPT_EINVAL);
    CHECK(npz == nullptr);
}

TEST_CASE("Deflate levels 1 to 9 and 0 (zlib's default) are accepted", "[capi][options]") {
    TempDir dir;
    Vars vars = new_vars();
    add_every_dtype(vars.get());
    for (int32_t level = 0; level <= 9; ++level) {
        CAPTURE(level);
        ckpt_options o = options(CKPT_LAYOUT_AUTO, CKPT_DEFLATE);
        o.level = level;
        save_npz(dir.file("l.npz"), vars.get(), &o);
        require_same(vars.get(), read_npz(dir.file("l.npz")).get());
    }
}

TEST_CASE("NULL arguments to the npz functions are CKPT_EINVAL", "[capi][npz]") {
    TempDir dir;
    Vars vars = new_vars();
    save_npz(dir.file("e.npz"), vars.get());
    ckpt_vars* out = nullptr;
    ckpt_reader* npz = nullptr;
    CHECK(ckpt_save(nullptr, vars.get(), nullptr) == CKPT_EINVAL);
    CHECK(ckpt_save(dir.file("x.npz").c_str(), nullptr, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_read(nullptr, dir.file("e.npz").c_str(), nullptr) == CKPT_EINVAL);
    CHECK(ckpt_read(&out, nullptr, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_read_memory(nullptr, "x", 1, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_read_memory(&out, nullptr, 10, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_restore(nullptr, vars.get(), nullptr) == CKPT_EINVAL);
    CHECK(ckpt_restore(dir.file("e.npz").c_str(), nullptr, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_reader_open(nullptr, dir.file("e.npz").c_str(), nullptr) == CKPT_EINVAL);
    CHECK(ckpt_reader_open(&npz, nullptr, nullptr) == CKPT_EINVAL);
    CHECK(dir.entries() == std::vector<std::string>{"e.npz"});
}

// ------------------------------------------------------------------------------------------- round trips

TEST_CASE("Every dtype survives ckpt_save and ckpt_read", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_AUTO, CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    add_every_dtype(vars.get());
    const ckpt_options o = options(layout, compression);

    save_npz(dir.file("all.npz"), vars.get(), &o);

    require_same(vars.get(), read_npz(dir.file("all.npz")).get());
}

TEST_CASE("0-d and empty arrays survive a save and read", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    const double scalar = -0.125;
    const int64_t empty1[1] = {0};
    const int64_t empty3[3] = {3, 0, 2};
    const char letter[4] = {'a', 'b', 0, 0};
    REQUIRE(ckpt_vars_add(vars.get(), "scalar", CKPT_FLOAT64, 0, nullptr, &scalar, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "empty", CKPT_INT32, 1, empty1, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "empty3", CKPT_COMPLEX128, 3, empty3, nullptr, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "noword", CKPT_UNICODE, 8, 1, empty1, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "word", CKPT_BYTES, 4, 0, nullptr, letter, CKPT_COPY) == CKPT_OK);
    const ckpt_options o = options(layout, compression);

    save_npz(dir.file("edge.npz"), vars.get(), &o);

    Vars back = read_npz(dir.file("edge.npz"));
    require_same(vars.get(), back.get());
    CHECK(shape_of(back.get(), 2) == std::vector<int64_t>{3, 0, 2});
    CHECK(ckpt_vars_shape(back.get(), 0) != nullptr);
}

TEST_CASE("An empty collection saves as a valid empty archive", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    CAPTURE(layout);
    TempDir dir;
    Vars vars = new_vars();
    const ckpt_options o = options(layout);

    save_npz(dir.file("empty.npz"), vars.get(), &o);

    CHECK(ckpt_vars_count(read_npz(dir.file("empty.npz")).get()) == 0);
    CHECK(ckpt_reader_count(open_reader(dir.file("empty.npz")).get()) == 0);
}

TEST_CASE("Unicode names and names containing '/' survive a save and read", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    const char* names[] = {"(Linear).w", "\xe5\xb1\xa4/\xe9\x87\x8d\xe3\x81\xbf", "emoji\xf0\x9f\x98\x80",
                           "a/b/c", "with space", "caf\xc3\xa9"};
    unsigned seed = 0;
    for (const char* name : names) {
        const std::vector<unsigned char> data = pattern(12, ++seed);
        const int64_t shape[1] = {3};
        REQUIRE(ckpt_vars_add(vars.get(), name, CKPT_UINT32, 1, shape, data.data(), CKPT_COPY) == CKPT_OK);
    }
    const ckpt_options o = options(layout, compression);

    save_npz(dir.file("names.npz"), vars.get(), &o);

    require_same(vars.get(), read_npz(dir.file("names.npz")).get());
}

TEST_CASE("1000 small arrays survive in insertion order", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    CAPTURE(layout);
    TempDir dir;
    Vars vars = new_vars();
    std::vector<std::string> expected;
    for (unsigned i = 0; i < 1000; ++i) {
        // Neither sorted as strings nor as numbers: insertion order is the only order that matches.
        expected.push_back("v" + std::to_string((i * 7919u) % 1000u));
        const int64_t shape[1] = {static_cast<int64_t>(i % 5)};
        const std::vector<unsigned char> data = pattern(static_cast<size_t>(shape[0]) * 2, i);
        REQUIRE(ckpt_vars_add(vars.get(), expected.back().c_str(), CKPT_INT16, 1, shape, data.data(), CKPT_COPY) ==
                CKPT_OK);
    }
    const ckpt_options o = options(layout);

    save_npz(dir.file("many.npz"), vars.get(), &o);

    Vars back = read_npz(dir.file("many.npz"));
    CHECK(names_of(back.get()) == expected);
    require_same(vars.get(), back.get());
}

TEST_CASE("Reading detects or obeys the layout", "[capi][npz]") {
    TempDir dir;
    Vars vars = new_vars();
    const int64_t shape[1] = {2};
    const int32_t a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {5, 6};
    REQUIRE(ckpt_vars_add(vars.get(), "zeta", CKPT_INT32, 1, shape, a, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "alpha/\xc3\xa9", CKPT_INT32, 1, shape, b, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "mid", CKPT_INT32, 1, shape, c, CKPT_COPY) == CKPT_OK);
    const ckpt_options objax = options(CKPT_LAYOUT_OBJAX);
    save_npz(dir.file("objax.npz"), vars.get(), &objax);
    save_npz(dir.file("plain.npz"), vars.get());

    SECTION("AUTO reads an objax file back with the original names in order") {
        require_same(vars.get(), read_npz(dir.file("objax.npz")).get());
    }
    SECTION("AUTO reads a plain file back with its member names") {
        require_same(vars.get(), read_npz(dir.file("plain.npz")).get());
    }
    SECTION("PLAIN on an objax file gives 'names', '0', '1', ... as stored") {
        const ckpt_options plain = options(CKPT_LAYOUT_PLAIN);
        Vars back = read_npz(dir.file("objax.npz"), &plain);
        CHECK(names_of(back.get()) == std::vector<std::string>{"names", "0", "1", "2"});
        CHECK(ckpt_vars_dtype(back.get(), 0) == CKPT_UNICODE);
        CHECK(shape_of(back.get(), 0) == std::vector<int64_t>{3});
        REQUIRE(ckpt_vars_itemsize(back.get(), 0) == 4 * 7);  // "alpha/é" is the longest: 7 characters
        const auto* table = static_cast<const char32_t*>(ckpt_vars_data(back.get(), 0));
        CHECK(std::u32string(table, 4) == U"zeta");
        CHECK(std::u32string(table + 7, 7) == U"alpha/\u00e9");
        CHECK(std::u32string(table + 14, 7) == std::u32string(U"mid\0\0\0\0", 7));
        CHECK(bytes_of(back.get(), 2) == bytes_of(vars.get(), 1));
    }
    SECTION("OBJAX on a plain file is CKPT_EFORMAT naming the file") {
        ckpt_vars* out = nullptr;
        CHECK(ckpt_read(&out, dir.file("plain.npz").c_str(), &objax) == CKPT_EFORMAT);
        CHECK(out == nullptr);
        CHECK_THAT(message(), Contains("plain.npz"));
    }
    SECTION("OBJAX on an objax file reads the original names") {
        require_same(vars.get(), read_npz(dir.file("objax.npz"), &objax).get());
    }
}

TEST_CASE("ckpt_read_memory reads a saved file's bytes as ckpt_read reads the file", "[capi][npz]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    add_every_dtype(vars.get());
    const ckpt_options o = options(layout, compression);
    save_npz(dir.file("m.npz"), vars.get(), &o);
    std::vector<unsigned char> bytes = file_bytes(dir.file("m.npz"));

    ckpt_vars* out = nullptr;
    REQUIRE(ckpt_read_memory(&out, bytes.data(), bytes.size(), nullptr) == CKPT_OK);
    Vars from_memory(out);
    std::fill(bytes.begin(), bytes.end(), 0);  // `bytes` is not retained

    require_same(read_npz(dir.file("m.npz")).get(), from_memory.get());
    require_same(vars.get(), from_memory.get());
}

TEST_CASE("ckpt_read_memory names the data '<memory>' in messages", "[capi][npz]") {
    const char junk[64] = "PK not really";
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read_memory(&out, junk, sizeof junk, nullptr) == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains("<memory>"));
    CHECK(ckpt_read_memory(&out, junk, 0, nullptr) == CKPT_EFORMAT);
    CHECK(out == nullptr);
}

TEST_CASE("max_header_bytes below a member's npy header is CKPT_EFORMAT naming the member", "[capi][npz]") {
    TempDir dir;
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    save_npz(dir.file("h.npz"), vars.get());
    ckpt_options o = options();

    o.max_header_bytes = 16;
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, dir.file("h.npz").c_str(), &o) == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains("h.npz") && Contains("w.npy"));
    CHECK(out == nullptr);

    o.max_header_bytes = 100000;
    CHECK(ckpt_vars_count(read_npz(dir.file("h.npz"), &o).get()) == 1);
}

TEST_CASE("Different handles may be used from different threads at once", "[capi][threads]") {
    TempDir dir;
    constexpr int kThreads = 4;
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            const std::string path = dir.file("t" + std::to_string(t) + ".npz");
            for (int round = 0; round < 10; ++round) {
                ckpt_vars* vars = nullptr;
                ckpt_vars* back = nullptr;
                const std::vector<unsigned char> data = pattern(4096, static_cast<unsigned>(t * 100 + round));
                const int64_t shape[1] = {1024};
                ckpt_options o;
                ckpt_options_init(&o, CKPT_OPTIONS_VERSION);
                o.layout = round % 2 == 0 ? CKPT_LAYOUT_PLAIN : CKPT_LAYOUT_OBJAX;
                o.compression = round % 3 == 0 ? CKPT_DEFLATE : CKPT_STORE;
                if (ckpt_vars_new(&vars) != CKPT_OK ||
                    ckpt_vars_add(vars, "x", CKPT_FLOAT32, 1, shape, data.data(), CKPT_COPY) != CKPT_OK ||
                    ckpt_save(path.c_str(), vars, &o) != CKPT_OK ||
                    ckpt_read(&back, path.c_str(), nullptr) != CKPT_OK || ckpt_vars_nbytes(back, 0) != 4096 ||
                    std::memcmp(ckpt_vars_data(back, 0), data.data(), 4096) != 0)
                    ++failures[static_cast<size_t>(t)];
                // A failure on this thread leaves its own message.
                if (ckpt_vars_add(vars, "x", CKPT_FLOAT32, 1, shape, nullptr, CKPT_COPY) != CKPT_EEXIST ||
                    std::string(ckpt_error_message()).find("'x'") == std::string::npos)
                    ++failures[static_cast<size_t>(t)];
                ckpt_vars_free(back);
                ckpt_vars_free(vars);
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == std::vector<int>(kThreads, 0));
    CHECK(dir.entries() == std::vector<std::string>{"t0.npz", "t1.npz", "t2.npz", "t3.npz"});
}

// ------------------------------------------------------------------------------------------- atomic save

TEST_CASE("ckpt_save replaces the target atomically", "[capi][npz][atomic]") {
    TempDir dir;
    Vars first = new_vars();
    Vars second = new_vars();
    const int64_t shape[1] = {3};
    const int8_t a[3] = {1, 2, 3};
    const int64_t b[3] = {-7, 8, -9};
    REQUIRE(ckpt_vars_add(first.get(), "a", CKPT_INT8, 1, shape, a, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(second.get(), "b", CKPT_INT64, 1, shape, b, CKPT_COPY) == CKPT_OK);
    const std::string path = dir.file("model.npz");

    SECTION("a successful save leaves only the file: no '.model.npz.tmp-*' remains") {
        save_npz(path, first.get());
        CHECK(dir.entries() == std::vector<std::string>{"model.npz"});
    }
    SECTION("saving over an existing file replaces its content") {
        save_npz(path, first.get());
        save_npz(path, second.get());
        CHECK(dir.entries() == std::vector<std::string>{"model.npz"});
        require_same(second.get(), read_npz(path).get());
    }
    SECTION("saving into a missing directory is CKPT_ENOTFOUND and creates nothing") {
        const std::string missing = dir.file("no/such/dir/model.npz");
        CHECK(ckpt_save(missing.c_str(), first.get(), nullptr) == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains(missing));
        CHECK(dir.entries().empty());
    }
    SECTION("saving where the target is a directory fails and leaves the directory untouched") {
        fs::create_directory(path);
        { std::ofstream(path + "/inside.txt") << "keep me"; }
        CHECK(ckpt_save(path.c_str(), first.get(), nullptr) == CKPT_EIO);
        CHECK_THAT(message(), Contains(path));
        CHECK(fs::is_directory(path));
        CHECK(TempDir::list(path) == std::vector<std::string>{"inside.txt"});
        CHECK(dir.entries() == std::vector<std::string>{"model.npz"});
    }
    SECTION("saving into a read-only directory is CKPT_EIO and keeps the previous file") {
        save_npz(path, first.get());
        const std::vector<unsigned char> before = file_bytes(path);
        REQUIRE(::chmod(dir.path().c_str(), 0555) == 0);
        // Root ignores permissions: the save runs in a child, which gives root up (as nobody) where it has it.
        const std::string result = ckpt::testing::in_child([&]() -> std::string {
            if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
                return std::string("FAIL: cannot give up root: ") + std::strerror(errno);
            const int rc = ckpt_save(path.c_str(), second.get(), nullptr);
            if (rc != CKPT_EIO) return "FAIL: code " + std::to_string(rc) + ": " + message();
            if (message().find(path) == std::string::npos)
                return "FAIL: the message does not name the file: " + message();
            return "OK";
        });
        REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
        CHECK(result == "OK");
        CHECK(file_bytes(path) == before);
        CHECK(dir.entries() == std::vector<std::string>{"model.npz"});
    }
    SECTION("a failed save with bad options leaves the previous file") {
        save_npz(path, first.get());
        const std::vector<unsigned char> before = file_bytes(path);
        ckpt_options o = options();
        o.level = 42;
        CHECK(ckpt_save(path.c_str(), second.get(), &o) == CKPT_EINVAL);
        CHECK(file_bytes(path) == before);
        CHECK(dir.entries() == std::vector<std::string>{"model.npz"});
    }
}

TEST_CASE("ckpt_read of a missing file is CKPT_ENOTFOUND naming the path", "[capi][npz]") {
    TempDir dir;
    const std::string path = dir.file("nothing-here.npz");
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, path.c_str(), nullptr) == CKPT_ENOTFOUND);
    CHECK_THAT(message(), Contains(path));
    Vars vars = new_vars();
    CHECK(ckpt_restore(path.c_str(), vars.get(), nullptr) == CKPT_ENOTFOUND);
    CHECK_THAT(message(), Contains(path));
    ckpt_reader* npz = nullptr;
    CHECK(ckpt_reader_open(&npz, path.c_str(), nullptr) == CKPT_ENOTFOUND);
    CHECK_THAT(message(), Contains(path));
}

TEST_CASE("ckpt_read of a directory is CKPT_EINVAL naming the path", "[capi][npz]") {
    TempDir dir;
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, dir.path().c_str(), nullptr) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains(dir.path()));
    CHECK(out == nullptr);
}

TEST_CASE("ckpt_read of an empty or non-zip file is CKPT_EFORMAT", "[capi][npz]") {
    TempDir dir;
    { std::ofstream(dir.file("empty.npz")); }
    { std::ofstream(dir.file("text.npz")) << "hello, this is not a zip file at all\n"; }
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, dir.file("empty.npz").c_str(), nullptr) == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains("empty.npz"));
    CHECK(ckpt_read(&out, dir.file("text.npz").c_str(), nullptr) == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains("text.npz"));
}

// ------------------------------------------------------------------------------------------------ restore

namespace {

// A file with w (float32 2x3), b (int64 4), s ('<U2' 2) and extra (uint8 1).
struct RestoreFixture {
    TempDir dir;
    std::string path = dir.file("ckpt.npz");
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t b[4] = {10, -20, 30, -40};
    char32_t s[4] = {U'h', U'i', U'\u00e9', 0};
    uint8_t extra[1] = {9};

    void save(uint32_t layout = CKPT_LAYOUT_PLAIN, const char* prefix = "") {
        Vars disk = new_vars();
        const int64_t sw[2] = {2, 3}, sb[1] = {4}, ss[1] = {2}, se[1] = {1};
        const std::string p = prefix;
        REQUIRE(ckpt_vars_add(disk.get(), (p + "w").c_str(), CKPT_FLOAT32, 2, sw, w, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_vars_add(disk.get(), (p + "b").c_str(), CKPT_INT64, 1, sb, b, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_vars_add_strings(disk.get(), (p + "s").c_str(), CKPT_UNICODE, 8, 1, ss, s, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_vars_add(disk.get(), (p + "extra").c_str(), CKPT_UINT8, 1, se, extra, CKPT_COPY) == CKPT_OK);
        const ckpt_options o = options(layout);
        save_npz(path, disk.get(), &o);
    }
};

}  // namespace

TEST_CASE("ckpt_restore fills an existing collection from the file", "[capi][restore]") {
    RestoreFixture f;
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    CAPTURE(layout);
    f.save(layout);
    Vars vars = new_vars();
    const int64_t sw[2] = {2, 3}, sb[1] = {4}, ss[1] = {2};
    float w[6] = {};
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_INT64, 1, sb, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 2, sw, w, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(vars.get(), "s", CKPT_UNICODE, 8, 1, ss, nullptr, CKPT_COPY) == CKPT_OK);

    const int rc = ckpt_restore(f.path.c_str(), vars.get(), nullptr);
    INFO(message());
    REQUIRE(rc == CKPT_OK);

    SECTION("owned arrays hold the values on disk") {
        const auto* b = static_cast<const int64_t*>(ckpt_vars_data(vars.get(), 0));
        CHECK(std::vector<int64_t>(b, b + 4) == std::vector<int64_t>{10, -20, 30, -40});
        const auto* s = static_cast<const char32_t*>(ckpt_vars_data(vars.get(), 2));
        CHECK(std::u32string(s, 4) == std::u32string(f.s, 4));
    }
    SECTION("borrowed arrays receive the values in the caller's memory") {
        CHECK(ckpt_vars_data(vars.get(), 1) == static_cast<void*>(w));
        CHECK(std::vector<float>(w, w + 6) == std::vector<float>(f.w, f.w + 6));
    }
    SECTION("arrays on disk that no variable asks for are ignored") {
        CHECK(names_of(vars.get()) == std::vector<std::string>{"b", "w", "s"});
    }
}

TEST_CASE("ckpt_restore fills 0-d and empty variables", "[capi][restore]") {
    TempDir dir;
    Vars disk = new_vars();
    const int64_t empty[2] = {0, 5};
    const uint16_t scalar = 65535;
    REQUIRE(ckpt_vars_add(disk.get(), "e", CKPT_FLOAT32, 2, empty, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(disk.get(), "s", CKPT_UINT16, 0, nullptr, &scalar, CKPT_COPY) == CKPT_OK);
    save_npz(dir.file("r.npz"), disk.get());
    Vars vars = new_vars();
    uint16_t target = 0;
    REQUIRE(ckpt_vars_add(vars.get(), "e", CKPT_FLOAT32, 2, empty, nullptr, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "s", CKPT_UINT16, 0, nullptr, &target, CKPT_BORROW) == CKPT_OK);

    CHECK(ckpt_restore(dir.file("r.npz").c_str(), vars.get(), nullptr) == CKPT_OK);

    CHECK(target == 65535);
}

TEST_CASE("ckpt_restore of an empty collection succeeds and reads nothing", "[capi][restore]") {
    RestoreFixture f;
    f.save();
    Vars vars = new_vars();
    CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(ckpt_vars_count(vars.get()) == 0);
}

TEST_CASE("ckpt_restore reports every mismatch in one message and changes nothing", "[capi][restore]") {
    RestoreFixture f;
    f.save();
    Vars vars = new_vars();
    const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s4[1] = {4}, s2[1] = {2};
    float untouched[6] = {-1, -1, -1, -1, -1, -1};
    int64_t ok[4] = {7, 7, 7, 7};
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_INT64, 1, s4, ok, CKPT_BORROW) == CKPT_OK);  // matches
    REQUIRE(ckpt_vars_add(vars.get(), "missing_one", CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);

    SECTION("a missing variable is named, and so is every unused name on disk") {
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        const std::string m = message();
        CHECK_THAT(m, Contains(f.path));
        CHECK_THAT(m, Contains("'missing_one'"));
        CHECK_THAT(m, Contains("'w'"));
        CHECK_THAT(m, Contains("'s'"));
        CHECK_THAT(m, Contains("'extra'"));
    }
    SECTION("a dtype difference is reported with both dtypes") {
        REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT64, 2, s23, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'w'") && Contains("float64") && Contains("float32"));
    }
    SECTION("a shape difference is reported with both shapes") {
        REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 2, s32, untouched, CKPT_BORROW) == CKPT_OK);
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'w'") && Contains("(3, 2)") && Contains("(2, 3)"));
    }
    SECTION("a string itemsize difference is a mismatch") {
        REQUIRE(ckpt_vars_add_strings(vars.get(), "s", CKPT_UNICODE, 12, 1, s2, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'s'"));
    }
    SECTION("all problems at once are in the one message") {
        REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 2, s32, untouched, CKPT_BORROW) == CKPT_OK);
        REQUIRE(ckpt_vars_add(vars.get(), "s", CKPT_BYTES, 1, s2, nullptr, CKPT_COPY) == CKPT_EINVAL);
        REQUIRE(ckpt_vars_add_strings(vars.get(), "s", CKPT_BYTES, 8, 1, s2, nullptr, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_vars_add(vars.get(), "missing_two", CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        const std::string m = message();
        CHECK_THAT(m, Contains("'missing_one'") && Contains("'missing_two'"));
        CHECK_THAT(m, Contains("'w'") && Contains("(3, 2)") && Contains("(2, 3)"));
        CHECK_THAT(m, Contains("'s'") && Contains("bytes") && Contains("unicode"));
        CHECK_THAT(m, Contains("'extra'"));
    }

    // Nothing was written, not even into the variable that matched.
    CHECK(std::vector<int64_t>(ok, ok + 4) == std::vector<int64_t>{7, 7, 7, 7});
    CHECK(std::vector<float>(untouched, untouched + 6) == std::vector<float>(6, -1.0f));
}

namespace {

struct RenameLog {
    std::string strip;                 // prefix removed from names on disk
    std::string to;                    // if non-empty: every name becomes this
    int code = 0;                      // if non-zero: returned for every name
    size_t long_name = 0;              // if non-zero: "x" becomes this many 'x's
    bool always_more = false;          // ask for one byte more than offered, every time
    std::vector<std::string> names;    // names seen, in call order
    std::vector<size_t> sizes;         // buf_size of every call
};

int log_rename(const char* name, char* buf, size_t buf_size, void* payload) {
    auto& log = *static_cast<RenameLog*>(payload);
    log.names.emplace_back(name);
    log.sizes.push_back(buf_size);
    if (log.code != 0) return log.code;
    if (log.always_more) return static_cast<int>(buf_size + 1);
    std::string out;
    if (log.long_name != 0 && std::string(name) == "x") {
        out.assign(log.long_name, 'x');
    } else if (!log.to.empty()) {
        out = log.to;
    } else if (!log.strip.empty() && std::string(name).rfind(log.strip, 0) == 0) {
        out = std::string(name).substr(log.strip.size());
    } else {
        return 0;
    }
    if (out.size() > buf_size) return static_cast<int>(out.size());
    std::memcpy(buf, out.data(), out.size());
    return static_cast<int>(out.size());
}

}  // namespace

TEST_CASE("The renamer maps names on disk before they are matched", "[capi][restore][rename]") {
    RestoreFixture f;
    f.save(CKPT_LAYOUT_PLAIN, "model/");
    Vars vars = new_vars();
    const int64_t s4[1] = {4};
    int64_t b[4] = {};
    REQUIRE(ckpt_vars_add(vars.get(), "b", CKPT_INT64, 1, s4, b, CKPT_BORROW) == CKPT_OK);
    RenameLog log;
    ckpt_options o = options();
    o.rename = log_rename;
    o.rename_payload = &log;

    SECTION("the renamed names are matched against the collection") {
        log.strip = "model/";
        REQUIRE(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_OK);
        CHECK(std::vector<int64_t>(b, b + 4) == std::vector<int64_t>{10, -20, 30, -40});
        CHECK(log.names == std::vector<std::string>{"model/w", "model/b", "model/s", "model/extra"});
    }
    SECTION("returning 0 keeps the name on disk") {
        Vars exact = new_vars();
        REQUIRE(ckpt_vars_add(exact.get(), "model/b", CKPT_INT64, 1, s4, b, CKPT_BORROW) == CKPT_OK);
        REQUIRE(ckpt_restore(f.path.c_str(), exact.get(), &o) == CKPT_OK);
        CHECK(log.names.size() == 4);
        CHECK(b[3] == -40);
    }
    SECTION("the payload and a buffer reach the renamer") {
        log.strip = "model/";
        REQUIRE(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_OK);
        REQUIRE_FALSE(log.sizes.empty());
        CHECK(*std::min_element(log.sizes.begin(), log.sizes.end()) > 0);
    }
    SECTION("without the renamer the prefixed names do not match") {
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), nullptr) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'b'") && Contains("'model/b'"));
    }
    SECTION("unused names in the mismatch message are the renamed ones") {
        log.strip = "model/";
        REQUIRE(ckpt_vars_add(vars.get(), "absent", CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_EMISMATCH);
        CHECK_THAT(message(), Contains("'absent'") && Contains("'extra'"));
    }
    SECTION("a negative return aborts the restore with that code, changing nothing") {
        log.code = CKPT_EBUSY;
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_EBUSY);
        CHECK(log.names.size() == 1);
        CHECK(std::vector<int64_t>(b, b + 4) == std::vector<int64_t>(4, 0));
    }
    SECTION("two names on disk renamed to the same name is CKPT_EINVAL naming both") {
        log.to = "b";
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("'model/w'") && Contains("'model/b'"));
        CHECK(std::vector<int64_t>(b, b + 4) == std::vector<int64_t>(4, 0));
    }
    SECTION("a renamer that keeps asking for more room is CKPT_EBUFS") {
        log.always_more = true;
        CHECK(ckpt_restore(f.path.c_str(), vars.get(), &o) == CKPT_EBUFS);
        CHECK_THAT(message(), Contains("model/w"));
    }
}

TEST_CASE("A renamer asking for a larger buffer is called again with one that large", "[capi][restore][rename]") {
    TempDir dir;
    Vars disk = new_vars();
    const int32_t value = 42;
    REQUIRE(ckpt_vars_add(disk.get(), "x", CKPT_INT32, 0, nullptr, &value, CKPT_COPY) == CKPT_OK);
    save_npz(dir.file("x.npz"), disk.get());
    const std::string long_name(5000, 'x');
    Vars vars = new_vars();
    int32_t target = 0;
    REQUIRE(ckpt_vars_add(vars.get(), long_name.c_str(), CKPT_INT32, 0, nullptr, &target, CKPT_BORROW) == CKPT_OK);
    RenameLog log;
    log.long_name = long_name.size();
    ckpt_options o = options();
    o.rename = log_rename;
    o.rename_payload = &log;

    const int rc = ckpt_restore(dir.file("x.npz").c_str(), vars.get(), &o);
    INFO(message());
    REQUIRE(rc == CKPT_OK);

    CHECK(target == 42);
    REQUIRE(log.sizes.size() == 2);
    CHECK(log.sizes[0] < long_name.size());
    CHECK(log.sizes[1] >= long_name.size());
    CHECK(log.names == std::vector<std::string>{"x", "x"});
}

// ------------------------------------------------------------------------------------------- lazy access

TEST_CASE("ckpt_reader_open gives lazy access to each array", "[capi][open]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    add_every_dtype(vars.get());
    const double scalar = 2.5;
    const int64_t empty[2] = {3, 0};
    REQUIRE(ckpt_vars_add(vars.get(), "scalar", CKPT_FLOAT64, 0, nullptr, &scalar, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "empty", CKPT_FLOAT32, 2, empty, nullptr, CKPT_COPY) == CKPT_OK);
    const ckpt_options o = options(layout, compression);
    save_npz(dir.file("lazy.npz"), vars.get(), &o);
    Reader npz = open_reader(dir.file("lazy.npz"));
    const size_t n = ckpt_vars_count(vars.get());

    SECTION("count, names, dtypes, itemsizes, shapes and sizes match the saved collection") {
        REQUIRE(ckpt_reader_count(npz.get()) == n);  // for objax, 'names' is not counted
        for (size_t i = 0; i < n; ++i) {
            CAPTURE(i);
            CHECK(std::string(ckpt_reader_name(npz.get(), i)) == ckpt_vars_name(vars.get(), i));
            CHECK(ckpt_reader_dtype(npz.get(), i) == ckpt_vars_dtype(vars.get(), i));
            CHECK(ckpt_reader_itemsize(npz.get(), i) == ckpt_vars_itemsize(vars.get(), i));
            REQUIRE(ckpt_reader_ndim(npz.get(), i) == ckpt_vars_ndim(vars.get(), i));
            const int64_t* shape = ckpt_reader_shape(npz.get(), i);
            REQUIRE(shape != nullptr);
            CHECK(std::vector<int64_t>(shape, shape + ckpt_reader_ndim(npz.get(), i)) == shape_of(vars.get(), i));
            CHECK(ckpt_reader_nbytes(npz.get(), i) == ckpt_vars_nbytes(vars.get(), i));
        }
    }
    SECTION("read_into gives each array's bytes") {
        for (size_t i = 0; i < n; ++i) {
            CAPTURE(i);
            std::vector<unsigned char> buf(ckpt_reader_nbytes(npz.get(), i) + 1, 0xEE);
            REQUIRE(ckpt_reader_read_into(npz.get(), i, buf.data(), buf.size()) == CKPT_OK);
            CHECK(buf.back() == 0xEE);  // nothing past nbytes
            buf.pop_back();
            CHECK(buf == bytes_of(vars.get(), i));
        }
    }
    SECTION("the same array can be read twice") {
        std::vector<unsigned char> one(ckpt_reader_nbytes(npz.get(), 1)), two(one.size());
        std::vector<unsigned char> other(ckpt_reader_nbytes(npz.get(), 0));
        REQUIRE(ckpt_reader_read_into(npz.get(), 1, one.data(), one.size()) == CKPT_OK);
        REQUIRE(ckpt_reader_read_into(npz.get(), 0, other.data(), other.size()) == CKPT_OK);
        REQUIRE(ckpt_reader_read_into(npz.get(), 1, two.data(), two.size()) == CKPT_OK);
        CHECK(one == two);
        CHECK(one == bytes_of(vars.get(), 1));
    }
    SECTION("a buffer one byte too small is CKPT_EBUFS naming the array") {
        std::vector<unsigned char> buf(ckpt_reader_nbytes(npz.get(), 3));
        CHECK(ckpt_reader_read_into(npz.get(), 3, buf.data(), buf.size() - 1) == CKPT_EBUFS);
        CHECK_THAT(message(), Contains(ckpt_reader_name(npz.get(), 3)));
    }
    SECTION("an index out of range is CKPT_ENOTFOUND, and its accessors give 0 or NULL") {
        unsigned char buf[16];
        CHECK(ckpt_reader_read_into(npz.get(), n, buf, sizeof buf) == CKPT_ENOTFOUND);
        CHECK(ckpt_reader_read_into(npz.get(), SIZE_MAX, buf, sizeof buf) == CKPT_ENOTFOUND);
        CHECK(ckpt_reader_name(npz.get(), n) == nullptr);
        CHECK(ckpt_reader_dtype(npz.get(), n) == 0);
        CHECK(ckpt_reader_itemsize(npz.get(), n) == 0);
        CHECK(ckpt_reader_ndim(npz.get(), n) == 0);
        CHECK(ckpt_reader_shape(npz.get(), n) == nullptr);
        CHECK(ckpt_reader_nbytes(npz.get(), n) == 0);
    }
    SECTION("NULL dst for a non-empty array is CKPT_EINVAL") {
        CHECK(ckpt_reader_read_into(npz.get(), 0, nullptr, ckpt_reader_nbytes(npz.get(), 0)) == CKPT_EINVAL);
    }
    SECTION("NULL dst for an empty array is fine") {
        CHECK(ckpt_reader_read_into(npz.get(), n - 1, nullptr, 0) == CKPT_OK);
    }
    SECTION("a 0-d array has a non-NULL shape pointer") {
        CHECK(ckpt_reader_ndim(npz.get(), n - 2) == 0);
        CHECK(ckpt_reader_shape(npz.get(), n - 2) != nullptr);
        double back = 0;
        REQUIRE(ckpt_reader_read_into(npz.get(), n - 2, &back, sizeof back) == CKPT_OK);
        CHECK(back == 2.5);
    }
}

TEST_CASE("The lazy accessors accept a NULL handle", "[capi][open]") {
    ckpt_reader_close(nullptr);
    CHECK(ckpt_reader_count(nullptr) == 0);
    CHECK(ckpt_reader_name(nullptr, 0) == nullptr);
    CHECK(ckpt_reader_dtype(nullptr, 0) == 0);
    CHECK(ckpt_reader_itemsize(nullptr, 0) == 0);
    CHECK(ckpt_reader_ndim(nullptr, 0) == 0);
    CHECK(ckpt_reader_shape(nullptr, 0) == nullptr);
    CHECK(ckpt_reader_nbytes(nullptr, 0) == 0);
    char buf[1];
    CHECK(ckpt_reader_read_into(nullptr, 0, buf, 1) == CKPT_EINVAL);
}

TEST_CASE("An objax file opened as PLAIN counts 'names' as an array", "[capi][open]") {
    TempDir dir;
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_add(vars.get(), "only", CKPT_INT8, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    const ckpt_options objax = options(CKPT_LAYOUT_OBJAX);
    save_npz(dir.file("o.npz"), vars.get(), &objax);
    const ckpt_options plain = options(CKPT_LAYOUT_PLAIN);

    CHECK(ckpt_reader_count(open_reader(dir.file("o.npz")).get()) == 1);
    Reader as_plain = open_reader(dir.file("o.npz"), &plain);
    REQUIRE(ckpt_reader_count(as_plain.get()) == 2);
    CHECK(std::string(ckpt_reader_name(as_plain.get(), 0)) == "names");
    CHECK(std::string(ckpt_reader_name(as_plain.get(), 1)) == "0");
}

// ---------------------------------------------------------------------------------------------- progress

TEST_CASE("Progress reports increasing byte counts that end at the total", "[capi][progress]") {
    const uint32_t layout = GENERATE(CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX);
    const uint32_t compression = GENERATE(CKPT_STORE, CKPT_DEFLATE);
    CAPTURE(layout, compression);
    TempDir dir;
    Vars vars = new_vars();
    const int64_t big[1] = {100000}, small[2] = {3, 7};
    REQUIRE(ckpt_vars_add(vars.get(), "big", CKPT_FLOAT64, 1, big, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "small", CKPT_INT16, 2, small, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "scalar", CKPT_INT32, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    const uint64_t total = total_nbytes(vars.get());
    REQUIRE(total == 800000 + 42 + 4);
    ProgressLog log;
    ckpt_options o = options(layout, compression);
    o.progress = ProgressLog::record;
    o.progress_payload = &log;

    SECTION("while saving") {
        save_npz(dir.file("p.npz"), vars.get(), &o);
        require_progress_to(log, total);
    }
    SECTION("while reading") {
        const ckpt_options saved = options(layout, compression);
        save_npz(dir.file("p.npz"), vars.get(), &saved);
        o.layout = CKPT_LAYOUT_AUTO;
        read_npz(dir.file("p.npz"), &o);
        require_progress_to(log, total);
    }
    SECTION("while restoring") {
        const ckpt_options saved = options(layout, compression);
        save_npz(dir.file("p.npz"), vars.get(), &saved);
        o.layout = CKPT_LAYOUT_AUTO;
        REQUIRE(ckpt_restore(dir.file("p.npz").c_str(), vars.get(), &o) == CKPT_OK);
        require_progress_to(log, total);
    }
}
