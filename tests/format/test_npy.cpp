// SPDX-License-Identifier: Apache-2.0
// Specification of the .npy codec (src/npy/npy.hpp): header parsing, numpy-identical formatting, byte order and
// Fortran order conversion.
#include "npy/npy.hpp"

#include "core/array.hpp"
#include "core/error.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A string literal's bytes, including embedded NULs.
template <size_t N>
std::string bytes(const char (&literal)[N]) {
    return std::string(literal, N - 1);
}

// A .npy member of format `major`.`minor` whose header is `dict`, padded with spaces and a final '\n' so the
// data starts on a multiple of `align` (64 since numpy 1.14, 16 before). The length field is 2 bytes for major 1,
// 4 otherwise.
std::string npy(const std::string& dict, unsigned major = 1, unsigned minor = 0, size_t align = 64) {
    const size_t preamble = major == 1 ? 10 : 12;
    const size_t pad = align - (preamble + dict.size() + 1) % align;
    const size_t len = dict.size() + pad + 1;
    std::string out = bytes("\x93NUMPY");
    out += static_cast<char>(major);
    out += static_cast<char>(minor);
    for (size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
    return out + dict + std::string(pad, ' ') + "\n";
}

std::string dict_with(const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

// The ckpt::core::Error that f() throws, or one with Code::ok when it throws none.
template <typename F>
Error error_from(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    return Error(Code::ok, "no ckpt::core::Error was thrown");
}

// Parses a whole member the way a reader does: the preamble first, then exactly data_offset bytes (copied to a
// buffer of that size so that the sanitizers catch any read past it). Every parse is done twice, with the fast
// path for numpy's own text and with the grammar alone: both must give the same header or the same error.
NpyHeader parse(const std::string& member, size_t max_header_bytes = kDefaultMaxHeaderBytes) {
    const size_t offset = npy_data_offset(member.data(), std::min(member.size(), kNpyPreambleMax), member.size(),
                                          max_header_bytes);
    const std::vector<char> header(member.begin(), member.begin() + static_cast<ptrdiff_t>(offset));
    NpyHeader grammar;
    const Error grammar_error = error_from(
        [&] { grammar = parse_npy_header(header.data(), header.size(), max_header_bytes, NpyParse::grammar_only); });
    NpyHeader fast;
    const Error fast_error = error_from([&] { fast = parse_npy_header(header.data(), header.size(), max_header_bytes); });
    CHECK(fast_error.code() == grammar_error.code());
    CHECK(std::string(fast_error.what()) == grammar_error.what());
    if (fast_error.code() != Code::ok) throw fast_error;
    CHECK(fast == grammar);
    return fast;
}

Error parse_error(const std::string& member, size_t max_header_bytes = kDefaultMaxHeaderBytes) {
    return error_from([&] { parse(member, max_header_bytes); });
}

Error parse_error_of_dict(const std::string& dict) { return parse_error(npy(dict)); }

bool little_endian_host() {
    const uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

template <typename T>
std::vector<unsigned char> raw(const std::vector<T>& values) {
    std::vector<unsigned char> out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

}  // namespace

// Every malformed input gives code `expected` and a message "npy header: ..." that contains `phrase`.
#define CHECK_NPY_ERROR(error_expr, expected, phrase)                   \
    do {                                                                \
        const Error e_ = (error_expr);                                  \
        CHECK(e_.code() == (expected));                                 \
        CHECK_THAT(e_.what(), StartsWith("npy header: ") && Contains(phrase)); \
    } while (0)

// ---------------------------------------------------------------------------------------------------------------
// Formatting

TEST_CASE("format_npy_header writes exactly the bytes numpy 1.24's np.save writes") {
    struct Case {
        DType dtype;
        size_t itemsize;
        std::vector<int64_t> shape;
        std::string expected;
    };
    // Produced once with Debian's python3-numpy 1.24.2: f = io.BytesIO(); np.save(f, <array>); then the first
    // 10 + HEADER_LEN bytes of f.getvalue(), printed as C string literals.
    const std::vector<Case> cases = {
    // np.save(f, np.zeros((3,), '<f4'))
    {DType::float32, 4, {3}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }                                                            \n")},
    // np.save(f, np.zeros((2, 3), '<i8'))
    {DType::int64, 8, {2, 3}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }                                                          \n")},
    // np.save(f, np.zeros((), '|b1'))
    {DType::bool_, 1, {}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (), }                                                              \n")},
    // np.save(f, np.zeros((0, 3), '<c16'))
    {DType::complex128, 16, {0, 3}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<c16', 'fortran_order': False, 'shape': (0, 3), }                                                         \n")},
    // np.save(f, np.zeros((5,), '<U10'))
    {DType::unicode, 40, {5}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<U10', 'fortran_order': False, 'shape': (5,), }                                                           \n")},
    // np.save(f, np.zeros((1,), '|S5'))
    {DType::bytes, 5, {1}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '|S5', 'fortran_order': False, 'shape': (1,), }                                                            \n")},
    // np.save(f, np.zeros((123456789,), '<u2'))
    {DType::uint16, 2, {123456789}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<u2', 'fortran_order': False, 'shape': (123456789,), }                                                    \n")},
    // np.save(f, np.zeros((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0), '<f8'))
    {DType::float64, 8, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0}, bytes("\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0), }                          \n")},
    // np.save(f, np.zeros((1,) * 14, '|S100'))
    {DType::bytes, 100, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, bytes("\x93NUMPY\x01\x00\xb6\x00{'descr': '|S100', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }                                                                                    \n")},
    // np.save(f, np.zeros((2,) * 19 + (0,), '<i4'))
    {DType::int32, 4, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0}, bytes("\x93NUMPY\x01\x00\xb6\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0), }                                                                    \n")},
    };
    for (const Case& c : cases) {
        CAPTURE(c.expected);
        const std::string header = format_npy_header(c.dtype, c.itemsize, c.shape);
        CHECK(header == c.expected);
        CHECK(header.size() % 64 == 0);
    }
}

TEST_CASE("a header that would end on a 64-byte boundary gets 64 padding spaces, as numpy pads it") {
    // 10 + 117 + 1 == 128: numpy's padlen = 64 - (128 % 64) is 64, not 0.
    const std::string header = format_npy_header(DType::bytes, 100, std::vector<int64_t>(14, 1));
    REQUIRE(header.size() == 192);
    CHECK(header.substr(10 + 117, 64) == std::string(64, ' '));
    CHECK(header.back() == '\n');
}

TEST_CASE("npy_descr names each dtype as numpy's dtype.str does on this host") {
    const char n = little_endian_host() ? '<' : '>';
    const std::string native(1, n);
    CHECK(npy_descr(DType::bool_, 1) == "|b1");
    CHECK(npy_descr(DType::int8, 1) == "|i1");
    CHECK(npy_descr(DType::uint8, 1) == "|u1");
    CHECK(npy_descr(DType::int16, 2) == native + "i2");
    CHECK(npy_descr(DType::int32, 4) == native + "i4");
    CHECK(npy_descr(DType::int64, 8) == native + "i8");
    CHECK(npy_descr(DType::uint16, 2) == native + "u2");
    CHECK(npy_descr(DType::uint32, 4) == native + "u4");
    CHECK(npy_descr(DType::uint64, 8) == native + "u8");
    CHECK(npy_descr(DType::float16, 2) == native + "f2");
    CHECK(npy_descr(DType::float32, 4) == native + "f4");
    CHECK(npy_descr(DType::float64, 8) == native + "f8");
    CHECK(npy_descr(DType::complex64, 8) == native + "c8");
    CHECK(npy_descr(DType::complex128, 16) == native + "c16");
    CHECK(npy_descr(DType::unicode, 40) == native + "U10");
    CHECK(npy_descr(DType::bytes, 5) == "|S5");
}

TEST_CASE("npy_descr refuses an itemsize that does not fit the dtype") {
    CHECK(error_from([] { npy_descr(DType::float32, 8); }).code() == Code::invalid);
    CHECK(error_from([] { npy_descr(DType::unicode, 6); }).code() == Code::invalid);
    CHECK(error_from([] { npy_descr(DType::unicode, 0); }).code() == Code::invalid);
    CHECK(error_from([] { npy_descr(DType::bytes, 0); }).code() == Code::invalid);
    CHECK(error_from([] { npy_descr(static_cast<DType>(99), 1); }).code() == Code::invalid);
}

TEST_CASE("format_npy_header refuses a negative dimension and more than kMaxDims dimensions") {
    CHECK(error_from([] { format_npy_header(DType::float32, 4, {2, -1}); }).code() == Code::invalid);
    CHECK(error_from([] { format_npy_header(DType::float32, 4, std::vector<int64_t>(kMaxDims + 1, 1)); }).code() ==
          Code::invalid);
}

// ---------------------------------------------------------------------------------------------------------------
// Round trip

TEST_CASE("every dtype and shape round-trips through format_npy_header and parse_npy_header") {
    struct Type {
        DType dtype;
        size_t itemsize;
    };
    const std::vector<Type> types = {
        {DType::bool_, 1},   {DType::int8, 1},    {DType::int16, 2},     {DType::int32, 4},
        {DType::int64, 8},   {DType::uint8, 1},   {DType::uint16, 2},    {DType::uint32, 4},
        {DType::uint64, 8},  {DType::float16, 2}, {DType::float32, 4},   {DType::float64, 8},
        {DType::complex64, 8}, {DType::complex128, 16}, {DType::unicode, 4}, {DType::unicode, 40},
        {DType::bytes, 1},   {DType::bytes, 7},
    };
    const std::vector<std::vector<int64_t>> shapes = {{}, {0, 3}, {5}, {2, 3, 4}, {1000000000000}, {0}};
    for (const Type& t : types) {
        for (const auto& shape : shapes) {
            CAPTURE(dtype_name(t.dtype), t.itemsize, shape);
            const std::string member = format_npy_header(t.dtype, t.itemsize, shape);
            const NpyHeader h = parse(member);
            CHECK(h.dtype == t.dtype);
            CHECK(h.itemsize == t.itemsize);
            CHECK(h.shape == shape);
            CHECK_FALSE(h.fortran_order);
            CHECK_FALSE(h.byteswap);
            CHECK(h.data_offset == member.size());
            size_t count = 1;
            for (int64_t d : shape) count *= static_cast<size_t>(d);
            CHECK(h.nbytes == count * t.itemsize);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing valid headers

TEST_CASE("npy_data_offset is the preamble plus the header length") {
    const std::string member = npy(dict_with("'<f4'", "False", "(3,)")) + std::string(12, '\0');
    CHECK(npy_data_offset(member.data(), kNpyPreambleMax, member.size(), kDefaultMaxHeaderBytes) == 128);
}

TEST_CASE("a format 2.0 header, with a 4-byte length, is parsed") {
    const std::string member = npy(dict_with("'<f8'", "False", "(2, 3)"), 2);
    CHECK(member.size() == 128);
    const NpyHeader h = parse(member);
    CHECK(h.dtype == DType::float64);
    CHECK(h.shape == std::vector<int64_t>{2, 3});
    CHECK(h.data_offset == 128);
    CHECK(h.nbytes == 48);
}

TEST_CASE("a format 3.0 header is parsed") {
    const NpyHeader h = parse(npy(dict_with("'<i2'", "False", "(7,)"), 3));
    CHECK(h.dtype == DType::int16);
    CHECK(h.shape == std::vector<int64_t>{7});
}

TEST_CASE("a header padded to 16 bytes, as numpy before 1.14 wrote it, is parsed") {
    const std::string member = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, 0, 16);
    REQUIRE(member.size() == 80);
    const NpyHeader h = parse(member);
    CHECK(h.data_offset == 80);
    CHECK(h.shape == std::vector<int64_t>{3});
}

TEST_CASE("the keys may come in any order") {
    const NpyHeader h = parse(npy("{'shape': (4, 5), 'fortran_order': True, 'descr': '<u4'}"));
    CHECK(h.dtype == DType::uint32);
    CHECK(h.shape == std::vector<int64_t>{4, 5});
    CHECK(h.fortran_order);
}

TEST_CASE("double-quoted strings, a missing trailing comma and extra whitespace are accepted") {
    const NpyHeader h = parse(npy("{ \"descr\" :\"<f2\",\n\t'fortran_order':False ,'shape':( 2 ,3 , ) }"));
    CHECK(h.dtype == DType::float16);
    CHECK(h.shape == std::vector<int64_t>{2, 3});
}

TEST_CASE("a Python 2 u'' string prefix is accepted") {
    const NpyHeader h = parse(npy("{u'descr': u'<i8', 'fortran_order': False, 'shape': (3,)}"));
    CHECK(h.dtype == DType::int64);
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': b'<i8', 'fortran_order': False, 'shape': (3,)}"), Code::format,
                    "expected a quoted string as 'descr', found 'b'<i8','");
}

TEST_CASE("near misses of numpy's own header text parse, or fail, as the grammar has them") {
    // parse() compares the fast path with the grammar alone for each of these.
    CHECK(parse(npy(dict_with("'<f4'", "False", "(2, )"))).shape == std::vector<int64_t>{2});
    CHECK(parse(npy(dict_with("'<f4'", "False", "(007, 0)"))).shape == std::vector<int64_t>{7, 0});
    CHECK(parse(npy(dict_with("'<u1'", "False", "(1234567890123456789,)"))).nbytes == 1234567890123456789u);
    CHECK(parse(npy(dict_with("'>f8'", "True", "(2, 3)"))).byteswap == little_endian_host());
    CHECK(parse(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\t")).shape == std::vector<int64_t>{3});
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(3)")), Code::format, "is an integer, not a tuple");
    CHECK(parse(npy(dict_with("'<f4'", "False", "(3L, 2)"))).shape == std::vector<int64_t>{3, 2});
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f7'", "False", "(3,)")), Code::format, "is not a dtype");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'|O'", "False", "(3,)")), Code::unsupported, "object array");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f\\4'", "False", "(3,)")), Code::format, "backslash");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(99999999999999999999,)")), Code::format,
                    "overflows int64");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f8'", "False", "(4611686018427387904,)")), Code::format,
                    "overflows the byte size");
}

TEST_CASE("shapes (), (3,), (2, 3) and (2, 3,) are parsed") {
    CHECK(parse(npy(dict_with("'<f4'", "False", "()"))).shape.empty());
    CHECK(parse(npy(dict_with("'<f4'", "False", "()"))).nbytes == 4);
    CHECK(parse(npy(dict_with("'<f4'", "False", "(3,)"))).shape == std::vector<int64_t>{3});
    CHECK(parse(npy(dict_with("'<f4'", "False", "(2, 3)"))).shape == std::vector<int64_t>{2, 3});
    CHECK(parse(npy(dict_with("'<f4'", "False", "(2, 3,)"))).shape == std::vector<int64_t>{2, 3});
    CHECK(parse(npy(dict_with("'<f4'", "False", "(007,)"))).shape == std::vector<int64_t>{7});
}

TEST_CASE("a shape of kMaxDims dimensions is accepted") {
    std::string shape = "(";
    for (size_t i = 0; i < kMaxDims; ++i) shape += "1, ";
    CHECK(parse(npy(dict_with("'<f4'", "False", shape + ")"))).shape.size() == kMaxDims);
}

TEST_CASE("a Python 2 'L' suffix on a dimension is accepted in formats 1.0 and 2.0") {
    CHECK(parse(npy(dict_with("'<f4'", "False", "(2L, 3L)"), 1)).shape == std::vector<int64_t>{2, 3});
    CHECK(parse(npy(dict_with("'<f4'", "False", "(3L,)"), 2)).shape == std::vector<int64_t>{3});
}

TEST_CASE("a Python 2 'L' suffix on a dimension is refused in format 3.0") {
    CHECK_NPY_ERROR(parse_error(npy(dict_with("'<f4'", "False", "(3L,)"), 3)), Code::format, "'L' suffix");
}

TEST_CASE("a descr in the foreign byte order sets byteswap for multi-byte types only") {
    const std::string foreign = little_endian_host() ? "'>" : "'<";
    const std::string native = little_endian_host() ? "'<" : "'>";
    CHECK(parse(npy(dict_with(foreign + "i4'", "False", "(3,)"))).byteswap);
    CHECK(parse(npy(dict_with(foreign + "c16'", "False", "(3,)"))).byteswap);
    CHECK(parse(npy(dict_with(foreign + "U3'", "False", "(3,)"))).byteswap);
    CHECK_FALSE(parse(npy(dict_with(foreign + "u1'", "False", "(3,)"))).byteswap);
    CHECK_FALSE(parse(npy(dict_with(foreign + "S4'", "False", "(3,)"))).byteswap);
    CHECK_FALSE(parse(npy(dict_with(native + "i4'", "False", "(3,)"))).byteswap);
}

TEST_CASE("'=' and a missing byte order mean native order") {
    CHECK_FALSE(parse(npy(dict_with("'=f8'", "False", "(3,)"))).byteswap);
    CHECK(parse(npy(dict_with("'f8'", "False", "(3,)"))).dtype == DType::float64);
}

TEST_CASE("'|' on a multi-byte type is read as native order, as numpy reads it") {
    const NpyHeader h = parse(npy(dict_with("'|f4'", "False", "(3,)")));
    CHECK(h.dtype == DType::float32);
    CHECK_FALSE(h.byteswap);
}

TEST_CASE("unicode and bytes descrs have itemsize 4n and n") {
    const NpyHeader u = parse(npy(dict_with("'<U10'", "False", "(2,)")));
    CHECK(u.dtype == DType::unicode);
    CHECK(u.itemsize == 40);
    CHECK(u.nbytes == 80);
    const NpyHeader s = parse(npy(dict_with("'|S5'", "False", "(2,)")));
    CHECK(s.dtype == DType::bytes);
    CHECK(s.itemsize == 5);
    CHECK(s.nbytes == 10);
}

TEST_CASE("fortran_order True is reported") {
    CHECK(parse(npy(dict_with("'<f4'", "True", "(2, 3)"))).fortran_order);
    CHECK_FALSE(parse(npy(dict_with("'<f4'", "False", "(2, 3)"))).fortran_order);
}

TEST_CASE("a Fortran-order file written by numpy reads back as the C-order array") {
    // np.save(f, np.asfortranarray(np.arange(6, dtype='<i4').reshape(2, 3)))
    const std::string file = bytes(
        "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }                                                           \n\x00\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00\x02\x00\x00\x00\x05\x00\x00\x00");
    const NpyHeader h = parse(file);
    REQUIRE(h.fortran_order);
    REQUIRE(h.data_offset + h.nbytes == file.size());
    if (!little_endian_host()) return;  // the data is little-endian
    std::vector<int32_t> values(6);
    fortran_to_c_order(file.data() + h.data_offset, values.data(), h.shape, h.itemsize);
    CHECK(values == std::vector<int32_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("a big-endian file written by numpy reads back after byteswap_in_place") {
    // np.save(f, np.array([1.5, -2.0], dtype='>f8'))
    const std::string file = bytes(
        "\x93NUMPY\x01\x00v\x00{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }                                                            \n?\xf8\x00\x00\x00\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\x00");
    const NpyHeader h = parse(file);
    REQUIRE(h.data_offset + h.nbytes == file.size());
    CHECK(h.byteswap == little_endian_host());
    std::vector<double> values(2);
    std::memcpy(values.data(), file.data() + h.data_offset, h.nbytes);
    if (h.byteswap) byteswap_in_place(h.dtype, values.data(), h.nbytes);
    CHECK(values == std::vector<double>{1.5, -2.0});
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed preambles

TEST_CASE("a member without the npy magic is a format error") {
    std::string member = npy(dict_with("'<f4'", "False", "(3,)"));
    member[1] = 'n';
    CHECK_NPY_ERROR(parse_error(member), Code::format, "magic");
    CHECK_NPY_ERROR(parse_error("PK\x03\x04"), Code::format, "magic");
}

TEST_CASE("format version 4.0 is a format error") {
    CHECK_NPY_ERROR(parse_error(npy(dict_with("'<f4'", "False", "(3,)"), 4)), Code::format, "version 4.0");
}

TEST_CASE("format version 1.1 is a format error") {
    CHECK_NPY_ERROR(parse_error(npy(dict_with("'<f4'", "False", "(3,)"), 1, 1)), Code::format, "version 1.1");
}

TEST_CASE("format version 0.0 is a format error") {
    CHECK_NPY_ERROR(parse_error(npy(dict_with("'<f4'", "False", "(3,)"), 0)), Code::format, "version 0.0");
}

TEST_CASE("a header longer than max_header_bytes is refused before it is read") {
    // The header length field says 20000, but none of those bytes exist: the limit is checked first.
    const std::string member = bytes("\x93NUMPY\x02\x00\x20\x4e\x00\x00");
    CHECK_NPY_ERROR(parse_error(member), Code::format, "header length 20000 exceeds the limit of 10000");
}

TEST_CASE("raising max_header_bytes accepts a header longer than the default") {
    const std::string dict = dict_with("'<f4'", "False", "(3,)") + std::string(12000, ' ');
    const std::string member = npy(dict, 2);
    CHECK_NPY_ERROR(parse_error(member), Code::format, "exceeds the limit");
    const NpyHeader h = parse(member, 20000);
    CHECK(h.shape == std::vector<int64_t>{3});
    CHECK(h.data_offset == member.size());
}

TEST_CASE("a preamble cut short is a truncation error") {
    const std::string member = npy(dict_with("'<f4'", "False", "(3,)"));
    for (size_t n : {0, 5, 6, 7, 8, 9}) {
        CAPTURE(n);
        CHECK_NPY_ERROR(error_from([&] { npy_data_offset(member.data(), n, n, kDefaultMaxHeaderBytes); }), Code::format,
                        "truncated");
    }
}

TEST_CASE("a format 2.0 preamble cut before its 4-byte length is a truncation error") {
    CHECK_NPY_ERROR(parse_error(bytes("\x93NUMPY\x02\x00\x10\x00\x00")), Code::format, "truncated");
}

TEST_CASE("a header length beyond the end of the member is a truncation error") {
    std::string member = npy(dict_with("'<f4'", "False", "(3,)"));
    member.pop_back();
    CHECK_NPY_ERROR(parse_error(member), Code::format, "truncated: the header needs 128 bytes but the member holds 127");
}

TEST_CASE("parse_npy_header refuses a data offset that disagrees with the header length") {
    const std::string member = npy(dict_with("'<f4'", "False", "(3,)")) + "xxxx";
    CHECK_NPY_ERROR(error_from([&] { parse_npy_header(member.data(), member.size(), kDefaultMaxHeaderBytes); }),
                    Code::format, "not at data offset 132");
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed header text

TEST_CASE("a header that is not a dict is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("[('descr', '<f4')]"), Code::format, "not a dict");
    CHECK_NPY_ERROR(parse_error_of_dict(""), Code::format, "not a dict");
}

TEST_CASE("a missing key is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': '<f4', 'fortran_order': False}"), Code::format,
                    "missing key 'shape'");
    CHECK_NPY_ERROR(parse_error_of_dict("{}"), Code::format, "missing key 'descr'");
}

TEST_CASE("an extra key is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}"),
                    Code::format, "unexpected key 'x'");
}

TEST_CASE("a duplicate key is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': '<f4', 'shape': (2,), 'fortran_order': False, 'shape': (3,)}"),
                    Code::format, "key 'shape' appears twice");
}

TEST_CASE("fortran_order other than True or False is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "1", "(3,)")), Code::format,
                    "'fortran_order' must be True or False, found '1");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "Truely", "(3,)")), Code::format,
                    "'fortran_order' must be True or False");
}

TEST_CASE("a shape given as a list is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "[3]")), Code::format,
                    "'shape' must be a tuple");
}

TEST_CASE("a shape given as a string is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "'(3,)'")), Code::format,
                    "'shape' must be a tuple");
}

TEST_CASE("a shape of one integer in parentheses, without a comma, is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(3)")), Code::format, "not a tuple");
}

TEST_CASE("a shape holding something other than integers is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(3.5,)")), Code::format, "malformed integer");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(None,)")), Code::format, "expected an integer");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(2 3)")), Code::format, "expected ',' or ')'");
}

TEST_CASE("a negative dimension is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(2, -3)")), Code::format,
                    "'shape' holds a negative dimension (-3)");
}

TEST_CASE("more than kMaxDims dimensions is a format error") {
    std::string shape = "(";
    for (size_t i = 0; i <= kMaxDims; ++i) shape += "1, ";
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", shape + ")")), Code::format,
                    "more than 64 dimensions");
}

TEST_CASE("a shape whose byte size overflows is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f8'", "False", "(4294967296, 4294967296)")), Code::format,
                    "overflows");
}

TEST_CASE("a dimension that overflows int64 is a format error") {
    CHECK(parse(npy(dict_with("'|u1'", "False", "(0, 9223372036854775807)"))).nbytes == 0);
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(9223372036854775808,)")), Code::format,
                    "dimension 9223372036854775808 overflows int64");
}

TEST_CASE("an unterminated string is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': '<f4}"), Code::format, "unterminated string '<f4}");
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr"), Code::format, "unterminated string 'descr");
}

TEST_CASE("a backslash escape in a string is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f\\x34'", "False", "(3,)")), Code::format, "backslash");
}

TEST_CASE("text after the dict is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(3,)") + " x"), Code::format,
                    "unexpected 'x' after the dict");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f4'", "False", "(3,)") + std::string(1, '\0')), Code::format,
                    "after the dict");
}

TEST_CASE("a dict without its closing brace is a format error") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)"), Code::format,
                    "expected '}' after a value, found the end of the header");
}

// ---------------------------------------------------------------------------------------------------------------
// descr values

TEST_CASE("an object descr is unsupported: pickled object arrays are refused") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'|O'", "False", "(3,)")), Code::unsupported,
                    "pickled object arrays are refused");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'|O8'", "False", "(3,)")), Code::unsupported, "'|O8'");
}

TEST_CASE("a structured descr is unsupported") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("[('a', '<i4'), ('b', '<f8', (2,))]", "False", "(3,)")),
                    Code::unsupported, "structured dtype");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("[(('t', 'a'), '<i4'), ('', '|V4'), ('n', [('x', '>u2')],)]",
                                                  "False", "(3,)")),
                    Code::unsupported, "structured dtype");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("[(u'a', '<i4', (2L, -1))]", "False", "(3,)")), Code::unsupported,
                    "structured dtype");
}

TEST_CASE("a subarray descr is unsupported") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("('<i4', (2,))", "False", "(3,)")), Code::unsupported,
                    "subarray dtype");
}

TEST_CASE("a structured header that is otherwise malformed is a format error, not unsupported") {
    CHECK_NPY_ERROR(parse_error_of_dict("{'descr': [('a', '<i4')], 'fortran_order': False}"), Code::format,
                    "missing key 'shape'");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("[('a', '<i4') ('b', '<i4')]", "False", "(3,)")), Code::format,
                    "expected ']' in 'descr'");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("[('a', object)]", "False", "(3,)")), Code::format,
                    "unexpected 'object)]");
}

TEST_CASE("a descr nested more than 16 levels deep is a format error") {
    const std::string deep = std::string(17, '[') + std::string(17, ']');
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with(deep, "False", "(3,)")), Code::format, "nested more than 16");
    const std::string bomb = std::string(5000, '[');
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with(bomb, "False", "(3,)")), Code::format, "nested more than 16");
}

TEST_CASE("a datetime or timedelta descr is unsupported") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<M8[ns]'", "False", "(3,)")), Code::unsupported, "datetime");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<m8'", "False", "(3,)")), Code::unsupported, "datetime");
}

TEST_CASE("zero-size void, long double, 'a' and ml_dtypes' other descrs are unsupported") {
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'|V0'", "False", "(3,)")), Code::unsupported, "zero-size void");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'int4'", "False", "(3,)")), Code::unsupported, "ml_dtypes type");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'float8_e4m3b11fnuz'", "False", "(3,)")), Code::unsupported,
                    "'float8_e4m3b11fnuz'");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<f16'", "False", "(3,)")), Code::unsupported, "long double");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'<c32'", "False", "(3,)")), Code::unsupported, "long double");
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("'|a5'", "False", "(3,)")), Code::unsupported, "'|a5'");
}

TEST_CASE("an unknown kind or size in descr is a format error") {
    for (const char* descr : {"'<x4'", "'<i3'", "'<i16'", "'<f3'", "'|b2'", "'<U0'", "'|S0'", "'<f'", "''", "'<'",
                              "'<f4 '", "'d'", "'float32'", "'<M8[ns'", "'<U99999999999999999999'", "'|O4x'"}) {
        CAPTURE(descr);
        CHECK_NPY_ERROR(parse_error_of_dict(dict_with(descr, "False", "(3,)")), Code::format, "is not a dtype");
    }
    CHECK_NPY_ERROR(parse_error_of_dict(dict_with("4", "False", "(3,)")), Code::format, "quoted string");
}

// ---------------------------------------------------------------------------------------------------------------
// Robustness

TEST_CASE("no truncation or single-byte change of a valid header makes the parser crash or over-read") {
    const std::string valid = npy("{'descr': [('a', '<i4', (2,))], 'fortran_order': False, 'shape': (2, 3), }");
    const char replacements[] = {'\0', ' ', '\'', '"', '(', ')', '[', ']', '{', '}', ',', ':', '-', '9', 'L',
                                 '\\', '\n', '\x80', '\xff', '\x7f'};
    size_t errors = 0;
    auto attempt = [&](const std::string& member) {
        // Only exact-size heap copies are handed over, so a read past the end is caught by the sanitizers.
        const std::vector<char> copy(member.begin(), member.end());
        try {
            const size_t offset = npy_data_offset(copy.data(), copy.size(), copy.size(), kDefaultMaxHeaderBytes);
            const std::vector<char> header(copy.begin(), copy.begin() + static_cast<ptrdiff_t>(offset));
            parse_npy_header(header.data(), header.size(), kDefaultMaxHeaderBytes);
        } catch (const Error& e) {
            CHECK((e.code() == Code::format || e.code() == Code::unsupported));
            CHECK_THAT(e.what(), StartsWith("npy header: "));
            ++errors;
        }
    };
    for (size_t n = 0; n <= valid.size(); ++n) attempt(valid.substr(0, n));
    for (size_t i = 0; i < valid.size(); ++i)
        for (char c : replacements) {
            std::string member = valid;
            member[i] = c;
            attempt(member);
        }
    CHECK(errors > valid.size());
}

// ---------------------------------------------------------------------------------------------------------------
// Byte order

TEST_CASE("byteswap_in_place reverses each 2-, 4- and 8-byte item") {
    std::vector<unsigned char> i16 = {0x01, 0x02, 0x03, 0x04};
    byteswap_in_place(DType::int16, i16.data(), i16.size());
    CHECK(i16 == std::vector<unsigned char>{0x02, 0x01, 0x04, 0x03});

    std::vector<unsigned char> f32 = {1, 2, 3, 4, 5, 6, 7, 8};
    byteswap_in_place(DType::float32, f32.data(), f32.size());
    CHECK(f32 == std::vector<unsigned char>{4, 3, 2, 1, 8, 7, 6, 5});

    std::vector<unsigned char> u64 = {1, 2, 3, 4, 5, 6, 7, 8};
    byteswap_in_place(DType::uint64, u64.data(), u64.size());
    CHECK(u64 == std::vector<unsigned char>{8, 7, 6, 5, 4, 3, 2, 1});
}

TEST_CASE("byteswap_in_place swaps each half of a complex number separately") {
    std::vector<unsigned char> c64 = {1, 2, 3, 4, 5, 6, 7, 8};
    byteswap_in_place(DType::complex64, c64.data(), c64.size());
    CHECK(c64 == std::vector<unsigned char>{4, 3, 2, 1, 8, 7, 6, 5});

    std::vector<unsigned char> c128(16);
    for (size_t i = 0; i < 16; ++i) c128[i] = static_cast<unsigned char>(i);
    byteswap_in_place(DType::complex128, c128.data(), c128.size());
    CHECK(c128 == std::vector<unsigned char>{7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8});
}

TEST_CASE("byteswap_in_place swaps each 4-byte code unit of a unicode string") {
    // '>U2' holding "ab": 00 00 00 61 00 00 00 62
    std::vector<unsigned char> u = {0, 0, 0, 'a', 0, 0, 0, 'b'};
    byteswap_in_place(DType::unicode, u.data(), u.size());
    CHECK(u == std::vector<unsigned char>{'a', 0, 0, 0, 'b', 0, 0, 0});
}

TEST_CASE("byteswap_in_place leaves single-byte types alone") {
    for (DType d : {DType::bool_, DType::int8, DType::uint8, DType::bytes}) {
        std::vector<unsigned char> v = {1, 2, 3};
        byteswap_in_place(d, v.data(), v.size());
        CHECK(v == std::vector<unsigned char>{1, 2, 3});
    }
}

TEST_CASE("byteswap_in_place refuses a size that is not a whole number of units") {
    std::vector<unsigned char> v = {1, 2, 3};
    CHECK(error_from([&] { byteswap_in_place(DType::int16, v.data(), v.size()); }).code() == Code::invalid);
}

// ---------------------------------------------------------------------------------------------------------------
// Fortran order

TEST_CASE("fortran_to_c_order reorders a 2x3 array of 1-, 4- and 8-byte items") {
    // C order [[0, 1, 2], [3, 4, 5]] is stored column by column in Fortran order: 0 3 1 4 2 5.
    const std::vector<int> fortran = {0, 3, 1, 4, 2, 5};
    const std::vector<int> c_order = {0, 1, 2, 3, 4, 5};
    SECTION("itemsize 1") {
        const std::vector<uint8_t> src(fortran.begin(), fortran.end());
        std::vector<uint8_t> dst(6);
        fortran_to_c_order(src.data(), dst.data(), {2, 3}, 1);
        CHECK(dst == std::vector<uint8_t>(c_order.begin(), c_order.end()));
    }
    SECTION("itemsize 4") {
        const std::vector<int32_t> src(fortran.begin(), fortran.end());
        std::vector<int32_t> dst(6);
        fortran_to_c_order(src.data(), dst.data(), {2, 3}, 4);
        CHECK(dst == std::vector<int32_t>(c_order.begin(), c_order.end()));
    }
    SECTION("itemsize 8") {
        const std::vector<int64_t> src(fortran.begin(), fortran.end());
        std::vector<int64_t> dst(6);
        fortran_to_c_order(src.data(), dst.data(), {2, 3}, 8);
        CHECK(dst == std::vector<int64_t>(c_order.begin(), c_order.end()));
    }
}

TEST_CASE("fortran_to_c_order reorders a 2x3x4 array of 1-, 4- and 8-byte items") {
    // np.arange(24).reshape(2, 3, 4).ravel(order='F')
    const std::vector<int> fortran = {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23};
    std::vector<int> c_order(24);
    for (int i = 0; i < 24; ++i) c_order[static_cast<size_t>(i)] = i;
    SECTION("itemsize 1") {
        const std::vector<uint8_t> src(fortran.begin(), fortran.end());
        std::vector<uint8_t> dst(24);
        fortran_to_c_order(src.data(), dst.data(), {2, 3, 4}, 1);
        CHECK(dst == std::vector<uint8_t>(c_order.begin(), c_order.end()));
    }
    SECTION("itemsize 4") {
        const std::vector<int32_t> src(fortran.begin(), fortran.end());
        std::vector<int32_t> dst(24);
        fortran_to_c_order(src.data(), dst.data(), {2, 3, 4}, 4);
        CHECK(dst == std::vector<int32_t>(c_order.begin(), c_order.end()));
    }
    SECTION("itemsize 8") {
        const std::vector<int64_t> src(fortran.begin(), fortran.end());
        std::vector<int64_t> dst(24);
        fortran_to_c_order(src.data(), dst.data(), {2, 3, 4}, 8);
        CHECK(dst == std::vector<int64_t>(c_order.begin(), c_order.end()));
    }
}

TEST_CASE("fortran_to_c_order moves items of any size whole") {
    // Three-byte items: the 2x2 array [[aa1, bb2], [cc3, dd4]] is stored in Fortran order as aa1 cc3 bb2 dd4.
    const std::string src = "aa1cc3bb2dd4";
    std::string dst(12, '?');
    fortran_to_c_order(src.data(), &dst[0], {2, 2}, 3);
    CHECK(dst == "aa1bb2cc3dd4");
}

TEST_CASE("fortran_to_c_order copies 0-d and 1-d arrays unchanged and does nothing for zero-size arrays") {
    const std::vector<int32_t> src = {7, 8, 9};
    std::vector<int32_t> dst(3, -1);
    fortran_to_c_order(src.data(), dst.data(), {}, 4);
    CHECK(dst == std::vector<int32_t>{7, -1, -1});
    fortran_to_c_order(src.data(), dst.data(), {3}, 4);
    CHECK(dst == src);
    std::vector<int32_t> untouched(3, -1);
    fortran_to_c_order(nullptr, untouched.data(), {0, 3}, 4);
    fortran_to_c_order(nullptr, untouched.data(), {3, 0}, 4);
    CHECK(untouched == std::vector<int32_t>(3, -1));
}

TEST_CASE("fortran_to_c_order handles a dimension of size 1") {
    // A 3x1x2 array: Fortran strides (1, 3, 3), C strides (2, 2, 1). C [[[0, 1]], [[2, 3]], [[4, 5]]] is
    // stored in Fortran order as 0 2 4 1 3 5.
    const std::vector<uint8_t> src = {0, 2, 4, 1, 3, 5};
    std::vector<uint8_t> dst(6);
    fortran_to_c_order(src.data(), dst.data(), {3, 1, 2}, 1);
    CHECK(dst == std::vector<uint8_t>{0, 1, 2, 3, 4, 5});
}
