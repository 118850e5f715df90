// SPDX-License-Identifier: Apache-2.0
// ckpt::Vars: arrays of every dtype added from C++ types and read back as them, through files of both layouts
// and deflate; typed views checked against the dtype; metadata.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <complex>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

using test::TempDir;

namespace {

// Five items of T with distinct, arbitrary bytes (every bit pattern is a valid raw item, and 0/1 for bool).
// std::array rather than std::vector: std::vector<bool> is not contiguous.
template <typename T>
std::array<T, 5> sample() {
    std::array<T, 5> out{};
    for (size_t k = 0; k < out.size(); ++k) {
        unsigned char bytes[sizeof(T)];
        for (size_t b = 0; b < sizeof(T); ++b) bytes[b] = static_cast<unsigned char>(k * 37 + b * 11 + 3);
        if constexpr (std::is_same_v<T, bool>) {
            bytes[0] = static_cast<unsigned char>(k % 2);
        } else if constexpr (std::is_floating_point_v<T>) {
            const T v = static_cast<T>(k) * T(-1.25) + T(0.5);
            std::memcpy(bytes, &v, sizeof v);
        }
        std::memcpy(&out[k], bytes, sizeof(T));
    }
    return out;
}

template <typename T, size_t N>
bool same_bytes(ckpt::ArrayView<const T> got, const std::array<T, N>& want) {
    return got.size() == N && std::memcmp(got.data(), want.data(), N * sizeof(T)) == 0;
}

struct Format {
    ckpt::Layout layout;
    ckpt::Compression compression;
    const char* what;
};

}  // namespace

TEMPLATE_TEST_CASE("An array of every fixed-size dtype comes back from a file as its C++ type, bit for bit", "[vars]",
                   bool, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, ckpt::float16,
                   float, double, std::complex<float>, std::complex<double>, ckpt::bfloat16, ckpt::float8_e4m3fn,
                   ckpt::float8_e5m2, ckpt::float8_e4m3fnuz, ckpt::float8_e5m2fnuz, ckpt::float8_e8m0fnu) {
    const Format format = GENERATE(Format{ckpt::Layout::plain, ckpt::Compression::store, "plain"},
                                   Format{ckpt::Layout::objax, ckpt::Compression::store, "objax"},
                                   Format{ckpt::Layout::plain, ckpt::Compression::deflate, "plain, deflate"},
                                   Format{ckpt::Layout::objax, ckpt::Compression::deflate, "objax, deflate"});
    CAPTURE(format.what, ckpt::dtype_name(ckpt::dtype_of_v<TestType>));
    TempDir dir;
    const std::array<TestType, 5> values = sample<TestType>();
    const TestType one = values[1];

    ckpt::Vars vars;
    vars.add("flat", values);
    vars.add("grid", values.data(), {1, 5});
    vars.add("one", one);
    vars.add("none", std::array<TestType, 0>{}, {0, 3});
    ckpt::Options options;
    options.layout = format.layout;
    options.compression = format.compression;
    ckpt::save(dir.path("a.npz"), vars, options);

    const ckpt::Vars back = ckpt::read(dir.path("a.npz"));
    REQUIRE(back.names() == std::vector<std::string>{"flat", "grid", "one", "none"});
    for (size_t i = 0; i < back.size(); ++i) {
        CHECK(back.dtype(i) == ckpt::dtype_of_v<TestType>);
        CHECK(back.itemsize(i) == sizeof(TestType));
    }
    CHECK(back.shape("flat") == ckpt::Shape{5});
    CHECK(back.shape("grid") == ckpt::Shape{1, 5});
    CHECK(back.shape("one") == ckpt::Shape{});
    CHECK(back.ndim(2) == 0);
    CHECK(back.shape("none") == ckpt::Shape{0, 3});
    CHECK(same_bytes(back.get<TestType>("flat"), values));
    CHECK(same_bytes(back.get<TestType>("grid"), values));
    CHECK(back.get<TestType>("none").empty());
    CHECK(back.nbytes(3) == 0);
    const TestType scalar = back.scalar<TestType>("one");
    CHECK(std::memcmp(&scalar, &one, sizeof one) == 0);
}

TEST_CASE("Strings and raw bytes round-trip as fixed-width items and as std::strings", "[vars]") {
    TempDir dir;
    const std::vector<ckpt::fixed_bytes<4>> tags = {ckpt::fixed_bytes<4>::from("ab"), ckpt::fixed_bytes<4>::from("wxyz")};
    const std::vector<ckpt::fixed_unicode<3>> words = {ckpt::fixed_unicode<3>::from(U"été"), ckpt::fixed_unicode<3>::from(U"∂")};
    const std::vector<ckpt::raw<3>> blobs = {ckpt::raw<3>{{1, 2, 3}}, ckpt::raw<3>{{0, 255, 7}}};
    const ckpt::raw<2> two{{0xab, 0xcd}};

    ckpt::Vars vars;
    vars.add("tags", tags);
    vars.add("words", words);
    vars.add("blobs", blobs);
    vars.add("two", std::vector<ckpt::raw<2>>{two});
    vars.add_bytes("labels", {"negative", "pos", ""}, {3, 1});
    vars.add_unicode("names", {U"∂x", U"y"});
    for (const auto layout : {ckpt::Layout::plain, ckpt::Layout::objax}) {
        ckpt::Options options;
        options.layout = layout;
        ckpt::save(dir.path("s.npz"), vars, options);
        const ckpt::Vars back = ckpt::read(dir.path("s.npz"));

        CHECK(back.dtype("tags") == ckpt::Dtype::bytes);
        CHECK(back.itemsize(back.index("tags")) == 4);
        const auto t = back.get<ckpt::fixed_bytes<4>>("tags");
        REQUIRE(t.size() == 2);
        CHECK(t[0].view() == "ab");
        CHECK(t[1].view() == "wxyz");
        CHECK(back.bytes("tags") == std::vector<std::string>{"ab", "wxyz"});

        CHECK(back.dtype("words") == ckpt::Dtype::unicode);
        CHECK(back.itemsize(back.index("words")) == 12);
        CHECK(back.get<ckpt::fixed_unicode<3>>("words")[0].view() == U"été");
        CHECK(back.unicode("words") == std::vector<std::u32string>{U"été", U"∂"});

        // A 2-byte void array keeps its type: the metadata member records it (it would read as bfloat16 otherwise).
        CHECK(back.dtype("blobs") == ckpt::Dtype::void_);
        CHECK(back.dtype("two") == ckpt::Dtype::void_);
        CHECK(back.get<ckpt::raw<3>>("blobs").to_vector() == blobs);
        CHECK(back.scalar<ckpt::raw<2>>("two") == two);

        CHECK(back.shape("labels") == ckpt::Shape{3, 1});
        CHECK(back.itemsize(back.index("labels")) == 8);  // the longest label
        CHECK(back.bytes("labels") == std::vector<std::string>{"negative", "pos", ""});
        CHECK(back.unicode("names") == std::vector<std::u32string>{U"∂x", U"y"});
    }
}

TEST_CASE("Typed views are checked against the dtype, the item size and the name", "[vars]") {
    ckpt::Vars vars;
    vars.add<float>("w", {1, 2, 3, 4, 5, 6}, {2, 3});
    vars.add_bytes("s", {"abc"});

    SECTION("the right type gives a writable view of the collection's copy") {
        ckpt::ArrayView<float> w = vars.get<float>("w");
        REQUIRE(w.size() == 6);
        w[5] = 60;
        CHECK(vars.get<float>(0).at(5) == 60);
        CHECK_THROWS_WITH(w.at(6), Catch::Contains("past the end"));
    }
    SECTION("another dtype is CKPT_EMISMATCH naming both") {
        try {
            vars.get<int32_t>("w");
            FAIL("get<int32_t> of a float32 array did not throw");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EMISMATCH);
            CHECK(std::string(e.what()) == "ckpt::Vars::get: 'w' is float32, not int32");
        }
        CHECK_THROWS_MATCHES(vars.get<ckpt::bfloat16>("w"), ckpt::Error,
                             Catch::Predicate<ckpt::Error>([](const ckpt::Error& e) { return e.code() == CKPT_EMISMATCH; }));
    }
    SECTION("another item size of the same dtype is CKPT_EMISMATCH") {
        try {
            vars.get<ckpt::fixed_bytes<2>>("s");
            FAIL("get<fixed_bytes<2>> of '|S3' did not throw");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EMISMATCH);
            CHECK(std::string(e.what()) == "ckpt::Vars::get: 's' is bytes of 3-byte items, not bytes of 2-byte items");
        }
        CHECK(vars.get<ckpt::fixed_bytes<3>>("s")[0].view() == "abc");
        CHECK_THROWS_WITH(vars.unicode("s"), "ckpt::Vars: 's' is bytes of 3-byte items, not unicode");
    }
    SECTION("a missing name is CKPT_ENOTFOUND from the library, an index past the end CKPT_ENOTFOUND too") {
        try {
            vars.get<float>("nope");
            FAIL("get of a missing name did not throw");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ENOTFOUND);
            CHECK(std::string(e.what()) == ckpt_error_message());
            CHECK_THAT(e.what(), Catch::Contains("nope"));
        }
        CHECK_FALSE(vars.find("nope").has_value());
        CHECK(vars.find("s") == std::optional<size_t>(1));
        try {
            vars.shape(2);
            FAIL("shape(2) of two arrays did not throw");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ENOTFOUND);
            CHECK(std::string(e.what()) == "ckpt::Vars: no variable 2 (2 variables)");
        }
    }
    SECTION("scalar() wants exactly one item") {
        CHECK_THROWS_WITH(vars.scalar<float>("w"), "ckpt::Vars::scalar: 'w' holds 6 items, not one");
    }
}

TEST_CASE("Shapes come from C arrays' extents or are given, and must hold the data's item count", "[vars]") {
    ckpt::Vars vars;
    const int16_t grid[2][3][4] = {};
    vars.add("grid", grid);
    CHECK(vars.shape("grid") == ckpt::Shape{2, 3, 4});
    std::array<double, 6> a{{1, 2, 3, 4, 5, 6}};
    vars.add("a", a, {3, 2});
    CHECK(vars.shape("a") == ckpt::Shape{3, 2});
    CHECK(vars.get<double>("a").to_vector() == std::vector<double>(a.begin(), a.end()));

    try {
        vars.add("bad", a, {4, 2});
        FAIL("a shape of 8 items for 6 did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) == "ckpt::Vars: variable 'bad': shape (4, 2) holds 8 items, the data 6");
    }
    // What the library refuses comes back with its code and message.
    try {
        vars.add("neg", a.data(), {-1, 6});
        FAIL("a negative dimension did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("'neg'"));
    }
    try {
        vars.add("a", a);
        FAIL("a second 'a' did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EEXIST);
        CHECK_THAT(e.what(), Catch::Contains("'a'"));
    }
    CHECK_THROWS_MATCHES(vars.add("__ckpt_metadata__", 1.0), ckpt::Error,
                         Catch::Predicate<ckpt::Error>([](const ckpt::Error& e) { return e.code() == CKPT_EINVAL; }));
    CHECK(vars.size() == 2);
}

TEST_CASE("Arrays of a dtype known only at run time go through the untyped calls", "[vars]") {
    TempDir dir;
    ckpt::Vars vars;
    const uint16_t bits[2] = {0x3f80, 0xc000};
    vars.add("bf", ckpt::Dtype::bfloat16, {2}, bits, ckpt::Ownership::copy);
    vars.add("v", ckpt::Dtype::void_, {2}, "abcdef", ckpt::Ownership::copy, 3);
    vars.add_zeros("z", ckpt::Dtype::unicode, {2}, 8);
    vars.add_zeros<double>("d", {2, 2});
    ckpt::save(dir.path("u.npz"), vars);
    const ckpt::Vars back = ckpt::read(dir.path("u.npz"));
    CHECK(back.get<ckpt::bfloat16>("bf")[1] == ckpt::bfloat16{0xc000});
    CHECK(std::memcmp(back.data(back.index("v")), "abcdef", 6) == 0);
    CHECK(back.unicode("z") == std::vector<std::u32string>{U"", U""});
    CHECK(back.get<double>("d").to_vector() == std::vector<double>(4, 0.0));
    CHECK_THROWS_MATCHES(vars.add("s", ckpt::Dtype::bytes, {1}, "x", ckpt::Ownership::copy, 0), ckpt::Error,
                         Catch::Predicate<ckpt::Error>([](const ckpt::Error& e) { return e.code() == CKPT_EINVAL; }));
}

TEST_CASE("Typed bool access refuses bytes other than 0 and 1, which a file may hold", "[vars][errors]") {
    TempDir dir;
    const unsigned char bytes[3] = {1, 0, 2};
    ckpt::Vars vars;
    vars.add("flags", ckpt::Dtype::bool_, {3}, bytes, ckpt::Ownership::copy);
    ckpt::save(dir.path("b.npz"), vars);
    const ckpt::Vars back = ckpt::read(dir.path("b.npz"));
    try {
        back.get<bool>("flags");
        FAIL("a bool byte of 2 was handed out as a bool");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        CHECK(std::string(e.what()) == "'flags': bool item 2 is the byte 2, not 0 or 1");
    }
    ckpt::Reader npz(dir.path("b.npz"));
    bool dst[3];
    CHECK_THROWS_WITH(npz.read_into("flags", dst), "'flags': bool item 2 is the byte 2, not 0 or 1");
    CHECK(std::memcmp(back.data(0), bytes, 3) == 0);  // the raw bytes stay reachable
}

TEST_CASE("bfloat16 converts to and from float as ml_dtypes does", "[vars]") {
    CHECK(ckpt::bfloat16::from_float(1.0f) == ckpt::bfloat16{0x3f80});
    CHECK(ckpt::bfloat16::from_float(-2.0f).bits == 0xc000);
    CHECK(ckpt::bfloat16{0x7f80}.to_float() == std::numeric_limits<float>::infinity());
    CHECK(ckpt::bfloat16{0x3f80}.to_float() == 1.0f);
    // Ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    CHECK(ckpt::bfloat16::from_float(1.00390625f).bits == 0x3f80);
    CHECK(ckpt::bfloat16::from_float(1.01171875f).bits == 0x3f82);
    const ckpt::bfloat16 nan = ckpt::bfloat16::from_float(-std::numeric_limits<float>::quiet_NaN());
    CHECK((nan.bits & 0x7f80) == 0x7f80);
    CHECK((nan.bits & 0x007f) != 0);
    CHECK((nan.bits & 0x8000) != 0);
}

TEST_CASE("Metadata is set, replaced in place, removed and iterated in insertion order, and saved with the arrays",
          "[vars][metadata]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add("step", int64_t{7});
    vars.set_metadata("step", "7");
    vars.set_metadata("note", "été ∂");
    vars.set_metadata("loss", "0.5");
    vars.set_metadata("step", "8");  // keeps its place
    vars.remove_metadata("loss");
    vars.remove_metadata("never there");
    CHECK(vars.metadata_count() == 2);
    CHECK(vars.metadata_key(0) == "step");
    CHECK(vars.metadata_value(0) == "8");
    CHECK(vars.metadata("note") == std::optional<std::string_view>("été ∂"));
    CHECK_FALSE(vars.metadata("loss").has_value());
    CHECK_THROWS_WITH(vars.metadata_key(2), "ckpt::Vars: no metadata key 2 (2 keys)");
    try {
        vars.set_metadata("", "x");
        FAIL("an empty key did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) == ckpt_error_message());
    }

    ckpt::save(dir.path("m.npz"), vars);
    const ckpt::Vars back = ckpt::read(dir.path("m.npz"));
    using Items = std::vector<std::pair<std::string, std::string>>;
    CHECK(back.metadata_items() == Items{{"step", "8"}, {"note", "été ∂"}});
    CHECK(back.names() == std::vector<std::string>{"step"});  // the metadata member is not a variable

    // A restore replaces the collection's metadata with the file's.
    ckpt::Vars into;
    into.add_zeros<int64_t>("step", {});
    into.set_metadata("stale", "yes");
    ckpt::restore(dir.path("m.npz"), into);
    CHECK(into.metadata_items() == Items{{"step", "8"}, {"note", "été ∂"}});
    CHECK(into.scalar<int64_t>("step") == 7);
}

TEST_CASE("A collection made through the C API is adopted, and one given up is freed by the C API", "[vars]") {
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
    const double x = 2.5;
    REQUIRE(ckpt_vars_add(raw, "x", CKPT_FLOAT64, 0, nullptr, &x, CKPT_COPY) == CKPT_OK);
    ckpt::Vars vars(raw);
    CHECK(vars.native() == raw);
    CHECK(vars.scalar<double>("x") == 2.5);
    ckpt_vars* back = vars.release();
    CHECK(back == raw);
    CHECK_FALSE(vars);
    CHECK(ckpt_vars_count(back) == 1);
    ckpt_vars_free(back);
}

TEST_CASE("A source's array is saved as the same array held in memory would be, stored and deflated", "[vars][source]") {
    TempDir dir;
    std::vector<float> values(3 << 20);  // 12 MiB: several pieces, several deflate blocks
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
    for (const auto compression : {ckpt::Compression::store, ckpt::Compression::deflate}) {
        ckpt::Vars vars;
        size_t calls = 0;
        vars.add_source("w", ckpt::Dtype::float32, {static_cast<int64_t>(values.size())},
                        [&](uint64_t offset, void* dst, size_t size) {
                            ++calls;
                            REQUIRE(offset + size <= values.size() * sizeof(float));
                            std::memcpy(dst, reinterpret_cast<const char*>(values.data()) + offset, size);
                        });
        CHECK(vars.is_source(0));
        CHECK(vars.native() != nullptr);
        ckpt::Options options;
        options.compression = compression;
        ckpt::save(dir.path("s.npz"), vars, options);
        CHECK(calls > 2);  // pulled in pieces
        ckpt::Vars held;
        held.add("w", ckpt::Dtype::float32, {static_cast<int64_t>(values.size())}, values.data(),
                 ckpt::Ownership::borrow);
        ckpt::save(dir.path("m.npz"), held, options);
        const ckpt::Vars back = ckpt::read(dir.path("s.npz"));
        const auto w = back.get<float>("w");
        REQUIRE(w.size() == values.size());
        CHECK(std::memcmp(w.data(), values.data(), values.size() * sizeof(float)) == 0);
        // Byte for byte what the same array in memory gives.
        std::ifstream a(dir.path("s.npz"), std::ios::binary), b(dir.path("m.npz"), std::ios::binary);
        const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
        CHECK(sa == sb);
    }
}

TEST_CASE("A failing source fails the save with its code and message, leaving the old file and no temporary",
          "[vars][source]") {
    TempDir dir;
    ckpt::Vars old;
    old.add("w", ckpt::Dtype::int32, {2}, std::vector<int32_t>{7, 8}.data(), ckpt::Ownership::copy);
    ckpt::save(dir.path("x.npz"), old);
    for (const auto compression : {ckpt::Compression::store, ckpt::Compression::deflate}) {
        ckpt::Vars vars;
        vars.add_source("w", ckpt::Dtype::uint8, {8 << 20}, [](uint64_t offset, void* dst, size_t size) {
            if (offset >= (4u << 20)) throw ckpt::Error(CKPT_EIO, "the disk went away");
            std::memset(dst, 1, size);
        });
        ckpt::Options options;
        options.compression = compression;
        try {
            ckpt::save(dir.path("x.npz"), vars, options);
            FAIL("the save succeeded");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EIO);
            CHECK_THAT(e.what(), Catch::Contains("variable 'w'") && Catch::Contains("the disk went away"));
        }
        const ckpt::Vars back = ckpt::read(dir.path("x.npz"));
        CHECK(back.get<int32_t>("w")[1] == 8);
        size_t files = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
            ++files;
            CHECK(e.path().filename() == "x.npz");
        }
        CHECK(files == 1);
        // Nothing restores into a source.
        CHECK(test::code_of([&] { ckpt::restore(dir.path("x.npz"), vars); }) == CKPT_EINVAL);
    }
}
