// SPDX-License-Identifier: Apache-2.0
// safetensors files through the C API: what ckpt writes (the header's bytes, alignment, metadata, every dtype's bits),
// what it reads (files other writers make: any key order, whitespace, unknown fields, unaligned tensors), and every
// header the reference reader refuses — and those ckpt refuses beyond it — refused with CKPT_EFORMAT naming the file.
#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/safetensors_file.hpp"
#include "support/temp_dir.hpp"

#include <ckpt/ckpt.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using ckpt::testing::new_vars;
using ckpt::testing::open_file;
using ckpt::testing::read_file;
using ckpt::testing::Reader;
using ckpt::testing::safetensors_file;
using ckpt::testing::TempDir;
using ckpt::testing::Vars;
using ckpt::testing::write_file;

namespace {

uint64_t length_of(const std::string& file) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
    return n;
}

std::vector<unsigned char> read_array(ckpt_reader* npz, size_t i) {
    std::vector<unsigned char> out(ckpt_reader_nbytes(npz, i) + 1);  // +1: never a NULL data() for an empty array
    const int rc = ckpt_reader_read_into(npz, i, out.data(), out.size());
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    out.pop_back();
    return out;
}

// Reads `bytes` as the file `name` in `dir`; returns the code and leaves the message for ckpt_error_message().
int read_as(const TempDir& dir, const std::string& name, const std::string& bytes) {
    const std::string path = dir.file(name);
    write_file(path, bytes);
    ckpt_vars* out = nullptr;
    const int rc = ckpt_read(&out, path.c_str(), nullptr);
    ckpt_vars_free(out);
    return rc;
}

struct Hostile {
    const char* what;
    std::string bytes;
    const char* message;  // a part of the error message
    int code = CKPT_EFORMAT;
};

std::vector<Hostile> hostile_headers() {
    const std::string f32 = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
    const std::string eight(8, 'x');
    std::string huge(8, '\0');
    const uint64_t over = 100'000'001;
    for (int i = 0; i < 8; ++i) huge[i] = static_cast<char>((over >> (8 * i)) & 0xff);
    std::string past = safetensors_file(R"({"a":{)" + f32 + "}}", eight);
    past[0] = static_cast<char>(past[0] + 1);  // the length reaches one byte past the JSON
    std::string dims = "[";
    for (int i = 0; i < 65; ++i) dims += i ? ",1" : "1";
    dims += "]";
    return {
        {"fewer than 8 bytes", std::string("\x02\x00\x00", 3), "fewer than the 8 of the header's length"},
        {"a length over 100,000,000", huge + "{}", "over the format's limit of 100000000 bytes"},
        {"a length past the end of the file", safetensors_file("{}").substr(0, 9), "reaches past the end of the file"},
        {"a byte-order mark", safetensors_file("\xEF\xBB\xBF{}    "), "does not start with a JSON object"},
        {"only whitespace", safetensors_file("        "), "holds no JSON"},
        {"NUL padding after the JSON", safetensors_file(std::string("{}") + std::string(6, '\0')), "not valid JSON"},
        {"bytes after the JSON", safetensors_file("{}  x    "), "not valid JSON"},
        {"not UTF-8", safetensors_file("{\"\xff\":{" + f32 + "}}", eight), "not valid JSON"},
        {"a JSON array", safetensors_file("[1,2]   "), "does not start with a JSON object"},
        {"a tensor that is a number", safetensors_file(R"({"a":5})"), "tensor 'a' is a number, not an object"},
        {"'__metadata__' with a number", safetensors_file(R"({"__metadata__":{"k":1}})"),
         "the value of 'k' in '__metadata__' is a number, not a string"},
        {"'__metadata__' a list", safetensors_file(R"({"__metadata__":["a"]})"), "'__metadata__' is an array"},
        {"'__metadata__' twice", safetensors_file(R"({"__metadata__":{},"__metadata__":{}})"),
         "'__metadata__' appears twice"},
        {"a metadata key twice", safetensors_file(R"({"__metadata__":{"k":"1","k":"2"}})"), "'k' appears twice"},
        {"a metadata key with NUL", safetensors_file(R"({"__metadata__":{"a\u0000b":"1"}})"), "contains NUL"},
        {"a tensor named twice", safetensors_file(R"({"a":{)" + f32 + R"(},"a":{)" + f32 + "}}", eight),
         "tensor 'a' appears twice"},
        {"a tensor name with NUL", safetensors_file(R"({"a\u0000x":{)" + f32 + "}}", eight), "contains NUL"},
        {"an empty tensor name", safetensors_file(R"({"":{)" + f32 + "}}", eight), "empty name"},
        {"a field given twice",
         safetensors_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
         "tensor 'a' gives 'dtype' twice"},
        {"no dtype", safetensors_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight),
         "tensor 'a' has no 'dtype'"},
        {"no shape", safetensors_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight),
         "tensor 'a' has no 'shape'"},
        {"no offsets", safetensors_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
         "tensor 'a' has no 'data_offsets'"},
        {"an unknown dtype", safetensors_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", eight),
         "unknown dtype 'F31'"},
        {"a lower-case dtype", safetensors_file(R"({"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", eight),
         "unknown dtype 'f32'"},
        {"a 4-bit float", safetensors_file(R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "x"),
         "dtype F4 (a float of 4 bits, packed) is not supported", CKPT_EUNSUPPORTED},
        {"a negative dimension", safetensors_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
         "'shape' holds a negative number"},
        {"a fractional dimension",
         safetensors_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight),
         "'shape' holds a fractional number"},
        {"a dimension of 2^64",
         safetensors_file(R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})", eight),
         "'shape' holds a number of 2^64 or more"},
        {"a dimension over 2^63 - 1",
         safetensors_file(R"({"a":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})"),
         "larger than ckpt's arrays allow"},
        {"65 dimensions", safetensors_file(R"({"a":{"dtype":"U8","shape":)" + dims + R"(,"data_offsets":[0,1]}})", "x"),
         "more than 64 dimensions"},
        {"a shape that is a string",
         safetensors_file(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", eight),
         "'shape' holds a string"},
        {"one offset", safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight),
         "'data_offsets' has 1 numbers, not 2"},
        {"three offsets", safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", eight),
         "'data_offsets' has more than 2 numbers"},
        {"a negative offset", safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,8]}})", eight),
         "'data_offsets' holds a negative number"},
        {"an end before the begin",
         safetensors_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight), "end before they begin"},
        {"a hole before the first tensor",
         safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", eight + "1234"),
         "leave a hole"},
        {"a hole between tensors",
         safetensors_file(
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
             eight + "1234"),
         "tensor 'b': data_offsets [8, 12) leave a hole"},
        {"overlapping tensors",
         safetensors_file(
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             eight),
         "overlap the tensor before"},
        {"a range of the wrong size",
         safetensors_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
         "hold 8 bytes; its dtype and shape need 12"},
        {"a byte size that overflows",
         safetensors_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", eight),
         "overflows"},
        {"bytes appended", safetensors_file(R"({"a":{)" + f32 + "}}", eight + "z"), "bytes appended"},
        {"truncated data", safetensors_file(R"({"a":{)" + f32 + "}}", "1234567"), "(truncated)"},
        {"a truncated JSON text", past, "not valid JSON"},
        {"an unterminated object", safetensors_file(R"({"a":{)" + f32 + "}"), "not valid JSON"},
    };
}

// Every dtype safetensors names, with bit patterns that must come back exactly: NaN, infinities, denormals.
struct TypedBytes {
    uint32_t dtype;
    const char* st_name;
    size_t itemsize;
    std::vector<unsigned char> bytes;
};

std::vector<TypedBytes> every_dtype() {
    std::vector<TypedBytes> out = {
        {CKPT_BOOL, "BOOL", 1, {0, 1, 1, 0}},
        {CKPT_INT8, "I8", 1, {0x80, 0x7f, 0xff, 0}},
        {CKPT_UINT8, "U8", 1, {0, 1, 254, 255}},
        {CKPT_INT16, "I16", 2, {0x00, 0x80, 0xff, 0x7f}},
        {CKPT_UINT16, "U16", 2, {0xff, 0xff, 0x01, 0x00}},
        {CKPT_INT32, "I32", 4, {0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0x7f}},
        {CKPT_UINT32, "U32", 4, {0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}},
        {CKPT_INT64, "I64", 8, {0, 0, 0, 0, 0, 0, 0, 0x80}},
        {CKPT_UINT64, "U64", 8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
        // float16: NaN (0x7e01), +Inf, the smallest denormal, -0
        {CKPT_FLOAT16, "F16", 2, {0x01, 0x7e, 0x00, 0x7c, 0x01, 0x00, 0x00, 0x80}},
        // float32: a signalling NaN's payload, -Inf, the smallest denormal
        {CKPT_FLOAT32, "F32", 4, {0x01, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0xff, 0x01, 0x00, 0x00, 0x00}},
        {CKPT_FLOAT64, "F64", 8, {0x01, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0x01, 0, 0, 0, 0, 0, 0, 0}},
        {CKPT_COMPLEX64, "C64", 8, {0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f}},
        // bfloat16: NaN 0x7fc1, +Inf 0x7f80, the smallest denormal 0x0001, -0
        {CKPT_BFLOAT16, "BF16", 2, {0xc1, 0x7f, 0x80, 0x7f, 0x01, 0x00, 0x00, 0x80}},
        // float8: every byte value is a bit pattern of its own (NaNs, Infs where the type has them, denormals)
        {CKPT_FLOAT8_E4M3FN, "F8_E4M3", 1, {}},
        {CKPT_FLOAT8_E5M2, "F8_E5M2", 1, {}},
        {CKPT_FLOAT8_E4M3FNUZ, "F8_E4M3FNUZ", 1, {}},
        {CKPT_FLOAT8_E5M2FNUZ, "F8_E5M2FNUZ", 1, {}},
        {CKPT_FLOAT8_E8M0FNU, "F8_E8M0", 1, {}},
    };
    for (TypedBytes& t : out)
        if (t.bytes.empty())
            for (int b = 0; b < 256; ++b) t.bytes.push_back(static_cast<unsigned char>(b));
    return out;
}

}  // namespace

TEST_CASE("every dtype safetensors names round-trips bit for bit, under its safetensors name") {
    TempDir tmp;
    const std::string path = tmp.file("all.safetensors");
    Vars vars = new_vars();
    const std::vector<TypedBytes> types = every_dtype();
    for (const TypedBytes& t : types) {
        const int64_t shape[1] = {static_cast<int64_t>(t.bytes.size() / t.itemsize)};
        REQUIRE(ckpt_vars_add(vars.get(), t.st_name, t.dtype, 1, shape, t.bytes.data(), CKPT_COPY) == CKPT_OK);
    }
    INFO(ckpt_error_message());
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    const std::string file = read_file(path);
    for (const TypedBytes& t : types)
        CHECK_THAT(file, Contains(std::string("\"") + t.st_name + "\":{\"dtype\":\"" + t.st_name + "\""));

    Reader npz = open_file(path);
    CHECK(ckpt_reader_format(npz.get()) == CKPT_FORMAT_SAFETENSORS);
    REQUIRE(ckpt_reader_count(npz.get()) == types.size());
    for (size_t i = 0; i < types.size(); ++i) {
        INFO(types[i].st_name);
        CHECK(ckpt_reader_name(npz.get(), i) == std::string(types[i].st_name));  // the header's order: the collection's
        CHECK(ckpt_reader_dtype(npz.get(), i) == types[i].dtype);
        CHECK(ckpt_reader_itemsize(npz.get(), i) == types[i].itemsize);
        CHECK(read_array(npz.get(), i) == types[i].bytes);
    }
}

TEST_CASE("a safetensors header as ckpt writes it: '{' first, spaces to a multiple of 8, every tensor aligned") {
    TempDir tmp;
    const std::string path = tmp.file("model.safetensors");
    Vars vars = new_vars();
    const unsigned char odd[3] = {1, 2, 3};
    const int64_t three[1] = {3};
    const double d[2] = {1.5, -2.5};
    const int64_t two[1] = {2};
    const uint16_t h[1] = {0x3c00};
    const int64_t one[1] = {1};
    const float f[2][2] = {{1, 2}, {3, 4}};
    const int64_t two_two[2] = {2, 2};
    // Added smallest first: the writer places them by descending element size, so none is misaligned.
    REQUIRE(ckpt_vars_add(vars.get(), "odd", CKPT_UINT8, 1, three, odd, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "h", CKPT_FLOAT16, 1, one, h, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "f", CKPT_FLOAT32, 2, two_two, f, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "d", CKPT_FLOAT64, 1, two, d, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "5") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "format", "pt") == CKPT_OK);
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);

    const std::string file = read_file(path);
    const uint64_t n = length_of(file);
    CHECK(n % 8 == 0);
    CHECK(file[8] == '{');
    const std::string json = file.substr(8, static_cast<size_t>(n));
    CHECK(json.rfind("{\"__metadata__\":{\"step\":\"5\",\"format\":\"pt\"},\"odd\":", 0) == 0);
    const size_t end = json.find_last_not_of(' ');
    CHECK(json[end] == '}');
    CHECK(json.size() - end - 1 < 8);
    CHECK(file.size() == 8 + n + 3 + 2 + 16 + 16);

    Reader npz = open_file(path);
    CHECK(std::string(ckpt_reader_metadata(npz.get(), "step")) == "5");
    CHECK(std::string(ckpt_reader_metadata(npz.get(), "format")) == "pt");
    for (size_t i = 0; i < ckpt_reader_count(npz.get()); ++i) {
        INFO(ckpt_reader_name(npz.get(), i));
        const uint64_t offset = ckpt_reader_data_offset(npz.get(), i);
        CHECK(offset % ckpt_reader_itemsize(npz.get(), i) == 0);
        CHECK(ckpt_reader_stored_bytes(npz.get(), i) == ckpt_reader_nbytes(npz.get(), i));
        CHECK(ckpt_reader_compression(npz.get(), i) == CKPT_STORE);
        CHECK(ckpt_reader_crc32(npz.get(), i) == 0u);
        CHECK(std::memcmp(file.data() + offset, read_array(npz.get(), i).data(), ckpt_reader_nbytes(npz.get(), i)) ==
              0);
    }
    CHECK(ckpt_reader_byte_order(npz.get(), 0) == '|');
    CHECK(ckpt_reader_byte_order(npz.get(), 2) == '<');
    CHECK(ckpt_reader_layout(npz.get()) == CKPT_LAYOUT_PLAIN);
    CHECK(ckpt_reader_file_size(npz.get()) == file.size());
}

TEST_CASE("types safetensors has none for are refused before anything is written, naming the array") {
    TempDir tmp;
    const std::string path = tmp.file("bad.safetensors");
    const int64_t one[1] = {1};
    SECTION("complex128") {
        Vars vars = new_vars();
        const double z[2] = {1, 2};
        REQUIRE(ckpt_vars_add(vars.get(), "z", CKPT_COMPLEX128, 1, one, z, CKPT_COPY) == CKPT_OK);
        CHECK(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_EUNSUPPORTED);
        CHECK_THAT(ckpt_error_message(), Contains("bad.safetensors: array 'z': safetensors has no complex128 type"));
    }
    SECTION("strings, bytes and void") {
        for (const uint32_t dtype : {CKPT_UNICODE, CKPT_BYTES, CKPT_VOID}) {
            Vars vars = new_vars();
            const char text[8] = "abcdefg";
            REQUIRE(ckpt_vars_add_strings(vars.get(), "s", dtype, 4, 1, one, text, CKPT_COPY) == CKPT_OK);
            CHECK(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_EUNSUPPORTED);
            CHECK_THAT(ckpt_error_message(), Contains("array 's': safetensors has no"));
        }
    }
    SECTION("deflate and the objax layout") {
        Vars vars = new_vars();
        const float x = 1;
        REQUIRE(ckpt_vars_add(vars.get(), "x", CKPT_FLOAT32, 0, nullptr, &x, CKPT_COPY) == CKPT_OK);
        ckpt_options o = CKPT_OPTIONS_INIT;
        o.compression = CKPT_DEFLATE;
        CHECK(ckpt_save(path.c_str(), vars.get(), &o) == CKPT_EINVAL);
        CHECK_THAT(ckpt_error_message(), Contains("safetensors files are not compressed"));
        o = CKPT_OPTIONS_INIT;
        o.layout = CKPT_LAYOUT_OBJAX;
        CHECK(ckpt_save(path.c_str(), vars.get(), &o) == CKPT_EINVAL);
        CHECK_THAT(ckpt_error_message(), Contains("no objax layout"));
    }
    // Nothing was left behind: no file, no temporary.
    CHECK(std::filesystem::is_empty(tmp.path()));
}

TEST_CASE("a save replaces a safetensors file atomically, and the format follows the name or the option") {
    TempDir tmp;
    Vars vars = new_vars();
    const int32_t v[2] = {7, 8};
    const int64_t two[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "v", CKPT_INT32, 1, two, v, CKPT_COPY) == CKPT_OK);
    const std::string st = tmp.file("a.safetensors");
    write_file(st, "old");
    REQUIRE(ckpt_save(st.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(read_file(st).substr(8, 1) == "{");
    // An .npz name writes a zip; the option overrides the name either way.
    const std::string npz = tmp.file("b.npz");
    REQUIRE(ckpt_save(npz.c_str(), vars.get(), nullptr) == CKPT_OK);
    CHECK(read_file(npz).substr(0, 2) == "PK");
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.format = CKPT_FORMAT_SAFETENSORS;
    const std::string forced = tmp.file("c.bin");
    REQUIRE(ckpt_save(forced.c_str(), vars.get(), &o) == CKPT_OK);
    CHECK(read_file(forced).substr(8, 1) == "{");
    o.format = CKPT_FORMAT_NPZ;
    const std::string zip = tmp.file("d.safetensors");
    REQUIRE(ckpt_save(zip.c_str(), vars.get(), &o) == CKPT_OK);
    CHECK(read_file(zip).substr(0, 2) == "PK");
    o.format = 3;
    CHECK(ckpt_save(zip.c_str(), vars.get(), &o) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("unknown format 3"));

    // Reading tells the format by content, whatever the name; an explicit format refuses the other.
    for (const std::string& path : {st, npz, forced, zip}) {
        INFO(path);
        Reader f = open_file(path);
        CHECK(read_array(f.get(), 0) == std::vector<unsigned char>({7, 0, 0, 0, 8, 0, 0, 0}));
    }
    o.format = CKPT_FORMAT_NPZ;
    ckpt_reader* f = nullptr;
    CHECK(ckpt_reader_open(&f, st.c_str(), &o) == CKPT_EFORMAT);
    CHECK_THAT(ckpt_error_message(), Contains("a.safetensors: not a npz file"));
}

TEST_CASE("metadata goes npz -> safetensors -> npz unchanged, each entry a key of its own in __metadata__") {
    TempDir tmp;
    Vars vars = new_vars();
    const uint16_t bf[2] = {0x3f80, 0xc000};  // bfloat16 1, -2: a type numpy cannot name, recorded in the npz
    const int64_t two[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_BFLOAT16, 1, two, bf, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "5") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "loss", "0.25") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "note", "caf\xc3\xa9 \"quoted\"\n") == CKPT_OK);
    const std::string a = tmp.file("a.npz"), b = tmp.file("b.safetensors"), c = tmp.file("c.npz");
    REQUIRE(ckpt_save(a.c_str(), vars.get(), nullptr) == CKPT_OK);
    ckpt_vars* first = nullptr;
    REQUIRE(ckpt_read(&first, a.c_str(), nullptr) == CKPT_OK);
    Vars one(first);
    REQUIRE(ckpt_save(b.c_str(), one.get(), nullptr) == CKPT_OK);
    CHECK_THAT(read_file(b), Contains(R"("__metadata__":{"step":"5","loss":"0.25","note":"café \"quoted\"\n"})"));
    ckpt_vars* second = nullptr;
    REQUIRE(ckpt_read(&second, b.c_str(), nullptr) == CKPT_OK);
    Vars two_(second);
    REQUIRE(ckpt_save(c.c_str(), two_.get(), nullptr) == CKPT_OK);
    ckpt_vars* third = nullptr;
    REQUIRE(ckpt_read(&third, c.c_str(), nullptr) == CKPT_OK);
    Vars back(third);
    REQUIRE(ckpt_vars_metadata_count(back.get()) == 3);
    CHECK(std::string(ckpt_vars_metadata(back.get(), "step")) == "5");
    CHECK(std::string(ckpt_vars_metadata(back.get(), "loss")) == "0.25");
    CHECK(std::string(ckpt_vars_metadata(back.get(), "note")) == "caf\xc3\xa9 \"quoted\"\n");
    CHECK(ckpt_vars_dtype(back.get(), 0) == CKPT_BFLOAT16);
    CHECK(std::memcmp(ckpt_vars_data(back.get(), 0), bf, sizeof bf) == 0);
}

TEST_CASE("files of other writers read: any key order, whitespace, null metadata, unknown fields, empty tensors") {
    TempDir tmp;
    // The reference writer's order (offsets ascending, metadata first) is not required: keys in any order.
    const std::string json =
        "  \n\t{\"b\": {\"data_offsets\": [8, 12], \"shape\": [1], \"dtype\": \"I32\", \"extra\": {\"x\": [1, {\"y\": "
        "null}], \"z\": true}},\r\n \"__metadata__\": null, \"a\": {\"shape\": [2], \"dtype\": \"F32\", "
        "\"data_offsets\": [0, 8]}, \"e\": {\"dtype\": \"F64\", \"shape\": [0, 3], \"data_offsets\": [12, 12]}, "
        "\"s\": {\"dtype\": \"U8\", \"shape\": [], \"data_offsets\": [12, 13]}}  \n";
    const float a[2] = {1.5f, -3};
    const int32_t b = 42;
    std::string data(reinterpret_cast<const char*>(a), 8);
    data += std::string(reinterpret_cast<const char*>(&b), 4) + "\x07";
    const std::string path = tmp.file("other.safetensors");
    write_file(path, safetensors_file(json, data));
    Reader npz = open_file(path);
    REQUIRE(ckpt_reader_count(npz.get()) == 4);
    CHECK(ckpt_reader_metadata_count(npz.get()) == 0);
    // In the header's order.
    CHECK(ckpt_reader_name(npz.get(), 0) == std::string("b"));
    CHECK(ckpt_reader_name(npz.get(), 1) == std::string("a"));
    size_t at = 0;
    REQUIRE(ckpt_reader_find(npz.get(), "a", &at) == CKPT_OK);
    CHECK(at == 1);
    CHECK(ckpt_reader_find(npz.get(), "nope", &at) == CKPT_ENOTFOUND);
    std::vector<unsigned char> got = read_array(npz.get(), 1);
    CHECK(std::memcmp(got.data(), a, 8) == 0);
    got = read_array(npz.get(), 0);
    CHECK(std::memcmp(got.data(), &b, 4) == 0);
    CHECK(ckpt_reader_nbytes(npz.get(), 2) == 0);
    CHECK(ckpt_reader_ndim(npz.get(), 2) == 2);
    CHECK(ckpt_reader_ndim(npz.get(), 3) == 0);
    CHECK(read_array(npz.get(), 3) == std::vector<unsigned char>{7});
    // The same bytes read from memory.
    const std::string bytes = read_file(path);
    ckpt_vars* out = nullptr;
    REQUIRE(ckpt_read_memory(&out, bytes.data(), bytes.size(), nullptr) == CKPT_OK);
    Vars vars(out);
    CHECK(ckpt_vars_count(vars.get()) == 4);
}

TEST_CASE("every header the rules refuse gives CKPT_EFORMAT naming the file and the problem") {
    TempDir tmp;
    // CKPT_DUMP_CORPUS=DIR writes each file there too: seeds for fuzz_safetensors, inputs for other readers.
    const char* dump = std::getenv("CKPT_DUMP_CORPUS");
    int n = 0;
    for (const Hostile& h : hostile_headers()) {
        if (dump != nullptr) write_file(std::string(dump) + "/hostile-" + std::to_string(n++), h.bytes);
        INFO(h.what);
        const int rc = read_as(tmp, "bad.safetensors", h.bytes);
        const std::string message = ckpt_error_message();
        INFO(message);
        CHECK(rc == h.code);
        CHECK_THAT(message, Contains("bad.safetensors") && Contains(h.message));
    }
}

TEST_CASE("a tensor other writers left unaligned is copied once for a view, never handed out misaligned") {
    TempDir tmp;
    // A 13-byte header (no padding) puts the data at byte 21: the float32 at 21 + 1 = 22 is not 4-aligned.
    const std::string json =
        R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
    std::string data = "\x05";
    const float f[2] = {0.5f, 2};
    data += std::string(reinterpret_cast<const char*>(f), 8);
    const std::string path = tmp.file("unaligned.safetensors");
    write_file(path, safetensors_file(json, data));
    Reader npz = open_file(path);
    size_t i = 0;
    REQUIRE(ckpt_reader_find(npz.get(), "f", &i) == CKPT_OK);
    CHECK(ckpt_reader_data_offset(npz.get(), i) % 4 != 0);
    const void* view = nullptr;
    REQUIRE(ckpt_reader_map(npz.get(), i, &view) == CKPT_OK);
    CHECK(reinterpret_cast<uintptr_t>(view) % alignof(float) == 0);
    CHECK(std::memcmp(view, f, 8) == 0);
    const void* again = nullptr;
    REQUIRE(ckpt_reader_map(npz.get(), i, &again) == CKPT_OK);
    CHECK(again == view);
}

TEST_CASE("an aligned tensor's view points into the file's mapping; ranges read any whole items") {
    TempDir tmp;
    Vars vars = new_vars();
    std::vector<float> w(1000);
    for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k) * 0.5f;
    const int64_t shape[2] = {10, 100};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 2, shape, w.data(), CKPT_COPY) == CKPT_OK);
    const std::string path = tmp.file("w.safetensors");
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    Reader npz = open_file(path);
    const void* view = nullptr;
    REQUIRE(ckpt_reader_map(npz.get(), 0, &view) == CKPT_OK);
    CHECK(std::memcmp(view, w.data(), 4000) == 0);
    float part[3] = {};
    REQUIRE(ckpt_reader_read_range(npz.get(), 0, 4 * 500, part, sizeof part) == CKPT_OK);
    CHECK(part[0] == 250.0f);
    CHECK(part[2] == 251.0f);
    CHECK(ckpt_reader_read_range(npz.get(), 0, 2, part, 4) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("not whole items"));
    CHECK(ckpt_reader_read_range(npz.get(), 0, 3996, part, 8) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("reaches past"));
    // ckpt_reader_map_vars: every array as a view, with the metadata.
    ckpt_vars* mapped = nullptr;
    REQUIRE(ckpt_reader_map_vars(npz.get(), &mapped) == CKPT_OK);
    Vars m(mapped);
    CHECK(ckpt_vars_data(m.get(), 0) == view);
}

TEST_CASE("a restore from a safetensors file goes through the one matcher: renamer, partial, mismatch") {
    TempDir tmp;
    Vars saved = new_vars();
    const float a[2] = {1, 2};
    const int64_t two[1] = {2};
    REQUIRE(ckpt_vars_add(saved.get(), "layer.a", CKPT_FLOAT32, 1, two, a, CKPT_COPY) == CKPT_OK);
    const std::string path = tmp.file("r.safetensors");
    REQUIRE(ckpt_save(path.c_str(), saved.get(), nullptr) == CKPT_OK);

    float into[2] = {0, 0};
    float other[2] = {9, 9};
    Vars target = new_vars();
    REQUIRE(ckpt_vars_add(target.get(), "a", CKPT_FLOAT32, 1, two, into, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add(target.get(), "missing", CKPT_FLOAT32, 1, two, other, CKPT_BORROW) == CKPT_OK);
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.rename = [](const char* name, char* buf, size_t size, void*) -> int {
        const std::string n(name);
        const std::string out = n.rfind("layer.", 0) == 0 ? n.substr(6) : n;
        if (out.size() <= size) std::memcpy(buf, out.data(), out.size());
        return static_cast<int>(out.size());
    };
    CHECK(ckpt_restore(path.c_str(), target.get(), &o) == CKPT_EMISMATCH);
    CHECK_THAT(ckpt_error_message(), Contains("r.safetensors") && Contains("missing"));
    CHECK(into[0] == 0);
    o.flags = CKPT_PARTIAL;
    REQUIRE(ckpt_restore(path.c_str(), target.get(), &o) == CKPT_OK);
    CHECK(into[1] == 2);
    CHECK(other[0] == 9);
    CHECK(ckpt_vars_restored(target.get(), 0) == 1);
    CHECK(ckpt_vars_restored(target.get(), 1) == 0);
}

namespace {

using ckpt::testing::Manager;

// A manager over `logdir` saving checkpoints in `format`, keeping the newest `keep`.
Manager manager_of(const std::string& logdir, uint32_t format, int32_t keep = 0, uint32_t flags = 0) {
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.format = format;
    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    o.npz = &npz;
    o.keep = keep;
    o.flags = flags;
    ckpt_manager* m = nullptr;
    const int rc = ckpt_manager_open(&m, logdir.c_str(), &o);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    return Manager(m);
}

std::vector<int64_t> listed(ckpt_manager* m) {
    std::vector<int64_t> out(64);
    size_t n = 0;
    REQUIRE(ckpt_manager_list(m, out.data(), out.size(), &n) == CKPT_OK);
    out.resize(n);
    return out;
}

// The files of `dir` but the hidden ones (the manager's lock).
std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().filename().string()[0] != '.') out.push_back(e.path().filename().string());  // not the lock
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("a manager saving safetensors numbers, retains, restores and falls back as for .npz") {
    TempDir tmp;
    const std::string logdir = tmp.file("run");
    int64_t step = 0;
    float w[3] = {0, 0, 0};
    const int64_t three[1] = {3};
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 1, three, w, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add(vars.get(), "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW) == CKPT_OK);
    // A stale temporary of an interrupted safetensors save goes at the first save.
    std::filesystem::create_directories(logdir + "/ckpt");
    write_file(logdir + "/ckpt/.0000000007.safetensors.tmp-aB3dE9", "partial");
    {
        Manager m = manager_of(logdir, CKPT_FORMAT_SAFETENSORS, 3);
        for (step = 1; step <= 5; ++step) {
            w[0] = static_cast<float>(step);
            REQUIRE(ckpt_manager_save(m.get(), vars.get(), step) == CKPT_OK);
        }
        CHECK(listed(m.get()) == std::vector<int64_t>{3, 4, 5});
        char path[512];
        REQUIRE(ckpt_manager_path(m.get(), 5, path, sizeof path) == CKPT_OK);
        CHECK(std::string(path) == logdir + "/ckpt/0000000005.safetensors");
        CHECK(ckpt_checkpoint_idx(path) == 5);
    }
    CHECK(names_in(logdir + "/ckpt") ==
          std::vector<std::string>{"0000000003.safetensors", "0000000004.safetensors", "0000000005.safetensors"});
    CHECK_FALSE(std::filesystem::exists(logdir + "/ckpt/.0000000007.safetensors.tmp-aB3dE9"));
    // The files are safetensors, with the manager's keys in __metadata__.
    const std::string newest = read_file(logdir + "/ckpt/0000000005.safetensors");
    CHECK(newest.substr(8, 16) == "{\"__metadata__\":");
    CHECK_THAT(newest, Contains("\"ckpt.index\":\"5\""));

    // A corrupt newest checkpoint is skipped for the one before it.
    write_file(logdir + "/ckpt/0000000005.safetensors", newest.substr(0, newest.size() - 1));
    Manager m = manager_of(logdir, CKPT_FORMAT_SAFETENSORS);
    step = 0;
    int64_t restored = -1;
    REQUIRE(ckpt_manager_restore(m.get(), vars.get(), CKPT_LATEST, &restored) == CKPT_OK);
    CHECK(restored == 4);
    CHECK(step == 4);
    CHECK(w[0] == 4.0f);
}

TEST_CASE("a run that changes format lists, restores and retains both, one file per index") {
    TempDir tmp;
    const std::string logdir = tmp.file("run");
    int64_t step = 0;
    Vars vars = new_vars();
    REQUIRE(ckpt_vars_add(vars.get(), "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW) == CKPT_OK);
    {
        Manager npz = manager_of(logdir, CKPT_FORMAT_AUTO);  // .npz, the default
        for (step = 1; step <= 3; ++step) REQUIRE(ckpt_manager_save(npz.get(), vars.get(), step) == CKPT_OK);
    }
    Manager m = manager_of(logdir, CKPT_FORMAT_SAFETENSORS, 3);
    step = 0;
    int64_t restored = -1;
    REQUIRE(ckpt_manager_restore(m.get(), vars.get(), CKPT_LATEST, &restored) == CKPT_OK);
    CHECK(restored == 3);
    CHECK(step == 3);
    // Saving index 3 again in the new format replaces the .npz of that index; retention removes old .npz files.
    REQUIRE(ckpt_manager_save(m.get(), vars.get(), 3) == CKPT_OK);
    step = 4;
    REQUIRE(ckpt_manager_save(m.get(), vars.get(), 4) == CKPT_OK);
    CHECK(listed(m.get()) == std::vector<int64_t>{2, 3, 4});
    CHECK(names_in(logdir + "/ckpt") ==
          std::vector<std::string>{"0000000002.npz", "0000000003.safetensors", "0000000004.safetensors"});
    step = 5;
    REQUIRE(ckpt_manager_save(m.get(), vars.get(), 5) == CKPT_OK);
    CHECK(names_in(logdir + "/ckpt") ==
          std::vector<std::string>{"0000000003.safetensors", "0000000004.safetensors", "0000000005.safetensors"});
}

TEST_CASE("a manager saving safetensors refuses options the format has no use for when it opens") {
    TempDir tmp;
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.format = CKPT_FORMAT_SAFETENSORS;
    npz.compression = CKPT_DEFLATE;
    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    o.npz = &npz;
    ckpt_manager* m = nullptr;
    CHECK(ckpt_manager_open(&m, tmp.file("run").c_str(), &o) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("safetensors checkpoints have no compression"));
    npz.compression = CKPT_STORE;
    npz.layout = CKPT_LAYOUT_OBJAX;
    CHECK(ckpt_manager_open(&m, tmp.file("run").c_str(), &o) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("safetensors checkpoints have no objax layout"));
    CHECK(m == nullptr);
}

TEST_CASE("a manager saving safetensors refuses what the format cannot hold at the save, even in the background") {
    TempDir tmp;
    Manager m = manager_of(tmp.file("run"), CKPT_FORMAT_SAFETENSORS, 0, CKPT_MANAGER_ASYNC);
    Vars vars = new_vars();
    const double z[2] = {1, 2};
    const int64_t one[1] = {1};
    REQUIRE(ckpt_vars_add(vars.get(), "z", CKPT_COMPLEX128, 1, one, z, CKPT_COPY) == CKPT_OK);
    CHECK(ckpt_manager_save(m.get(), vars.get(), 1) == CKPT_EUNSUPPORTED);
    CHECK_THAT(ckpt_error_message(), Contains("0000000001.safetensors: array 'z': safetensors has no complex128 type"));
    CHECK(ckpt_manager_wait(m.get()) == CKPT_OK);
    CHECK(listed(m.get()).empty());
}

TEST_CASE("a writer saves a safetensors file for its name, and refuses a shard size") {
    TempDir tmp;
    ckpt_writer_options o = CKPT_WRITER_OPTIONS_INIT;
    o.kind = CKPT_WRITER_THREAD;
    ckpt_writer* w = nullptr;
    REQUIRE(ckpt_writer_new(&w, &o) == CKPT_OK);
    Vars vars = new_vars();
    const float x[2] = {1.5f, 2.5f};
    const int64_t two[1] = {2};
    REQUIRE(ckpt_vars_add(vars.get(), "x", CKPT_FLOAT32, 1, two, x, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_writer_save_vars(w, tmp.path().c_str(), "snapshot.safetensors", vars.get(), nullptr, 0) == CKPT_OK);
    ckpt_options sharded = CKPT_OPTIONS_INIT;
    sharded.max_shard_bytes = 4;
    CHECK(ckpt_writer_save_vars(w, tmp.path().c_str(), "m.safetensors", vars.get(), &sharded, 0) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("a writer saves one file"));
    REQUIRE(ckpt_writer_finalize(w) == CKPT_OK);
    ckpt_writer_free(w);
    Reader npz = open_file(tmp.file("snapshot.safetensors"));
    CHECK(ckpt_reader_format(npz.get()) == CKPT_FORMAT_SAFETENSORS);
    CHECK(read_array(npz.get(), 0) == std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(x),
                                                                 reinterpret_cast<const unsigned char*>(x) + 8));
}
