// SPDX-License-Identifier: Apache-2.0
// The ckpt program's own arithmetic: the narrow float formats decoded exactly from known bit patterns, numbers
// printed as numpy prints them, NaN-aware comparisons with exact differences, and human-readable sizes.
#include "float_formats.hpp"
#include "text.hpp"
#include "values.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace ckpt_tool;

namespace {

bool is_negative_zero(double v) { return v == 0 && std::signbit(v); }

template <typename T>
ArrayView view_of(uint32_t dtype, const std::vector<T>& values) {
    ArrayView a;
    a.dtype = dtype;
    a.itemsize = sizeof(T);
    a.shape = {static_cast<int64_t>(values.size())};
    a.data = reinterpret_cast<const unsigned char*>(values.data());
    return a;
}

}  // namespace

TEST_CASE("float16 bit patterns decode to their exact values") {
    CHECK(float16_to_double(0x3C00) == 1.0);
    CHECK(float16_to_double(0xC000) == -2.0);
    CHECK(float16_to_double(0x3555) == 0.333251953125);
    CHECK(float16_to_double(0x7BFF) == 65504.0);
    CHECK(float16_to_double(0x0400) == std::ldexp(1.0, -14));  // smallest normal
    CHECK(float16_to_double(0x0001) == std::ldexp(1.0, -24));  // smallest subnormal
    CHECK(float16_to_double(0x03FF) == std::ldexp(1023.0, -24));
    CHECK(is_negative_zero(float16_to_double(0x8000)));
    CHECK(float16_to_double(0x7C00) == std::numeric_limits<double>::infinity());
    CHECK(float16_to_double(0xFC00) == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(float16_to_double(0x7E00)));
    CHECK(std::isnan(float16_to_double(0x7C01)));
    CHECK(std::signbit(float16_to_double(0xFE00)));
}

TEST_CASE("bfloat16 bit patterns decode to their exact values") {
    CHECK(bfloat16_to_double(0x3F80) == 1.0);
    CHECK(bfloat16_to_double(0x4049) == 3.140625);
    CHECK(bfloat16_to_double(0x3DCD) == 0.10009765625);
    CHECK(bfloat16_to_double(0xC2F7) == -123.5);
    CHECK(bfloat16_to_double(0x7F7F) == std::ldexp(255.0, 120));  // largest finite: (2 - 2^-7) * 2^127
    CHECK(bfloat16_to_double(0x0001) == std::ldexp(1.0, -133));    // smallest subnormal
    CHECK(is_negative_zero(bfloat16_to_double(0x8000)));
    CHECK(bfloat16_to_double(0x7F80) == std::numeric_limits<double>::infinity());
    CHECK(bfloat16_to_double(0xFF80) == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(bfloat16_to_double(0x7FC0)));
}

TEST_CASE("float8_e4m3fn has no infinities and one NaN pattern per sign") {
    CHECK(float8_e4m3fn_to_double(0x38) == 1.0);
    CHECK(float8_e4m3fn_to_double(0x7E) == 448.0);
    CHECK(float8_e4m3fn_to_double(0xFE) == -448.0);
    CHECK(float8_e4m3fn_to_double(0x78) == 256.0);  // exponent field 15 holds normal numbers
    CHECK(float8_e4m3fn_to_double(0x08) == std::ldexp(1.0, -6));
    CHECK(float8_e4m3fn_to_double(0x01) == std::ldexp(1.0, -9));
    CHECK(float8_e4m3fn_to_double(0x07) == std::ldexp(7.0, -9));
    CHECK(is_negative_zero(float8_e4m3fn_to_double(0x80)));
    CHECK(std::isnan(float8_e4m3fn_to_double(0x7F)));
    CHECK(std::isnan(float8_e4m3fn_to_double(0xFF)));
}

TEST_CASE("float8_e5m2 is IEEE-like, with infinities") {
    CHECK(float8_e5m2_to_double(0x3C) == 1.0);
    CHECK(float8_e5m2_to_double(0x7B) == 57344.0);
    CHECK(float8_e5m2_to_double(0x04) == std::ldexp(1.0, -14));
    CHECK(float8_e5m2_to_double(0x01) == std::ldexp(1.0, -16));
    CHECK(float8_e5m2_to_double(0xC2) == -3.0);
    CHECK(float8_e5m2_to_double(0x7C) == std::numeric_limits<double>::infinity());
    CHECK(float8_e5m2_to_double(0xFC) == -std::numeric_limits<double>::infinity());
    for (unsigned bits : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu}) CHECK(std::isnan(float8_e5m2_to_double(static_cast<uint8_t>(bits))));
}

TEST_CASE("the fnuz float8 formats have one NaN, 0x80, and no negative zero") {
    CHECK(float8_e4m3fnuz_to_double(0x40) == 1.0);
    CHECK(float8_e4m3fnuz_to_double(0x7F) == 240.0);
    CHECK(float8_e4m3fnuz_to_double(0xFF) == -240.0);
    CHECK(float8_e4m3fnuz_to_double(0x01) == std::ldexp(1.0, -10));
    CHECK(float8_e4m3fnuz_to_double(0x00) == 0.0);
    CHECK(std::isnan(float8_e4m3fnuz_to_double(0x80)));
    CHECK(float8_e5m2fnuz_to_double(0x40) == 1.0);
    CHECK(float8_e5m2fnuz_to_double(0x7F) == 57344.0);
    CHECK(float8_e5m2fnuz_to_double(0xFF) == -57344.0);
    CHECK(float8_e5m2fnuz_to_double(0x01) == std::ldexp(1.0, -17));
    CHECK(std::isnan(float8_e5m2fnuz_to_double(0x80)));
}

TEST_CASE("float8_e8m0fnu is an unsigned power of two with NaN at 0xFF") {
    CHECK(float8_e8m0fnu_to_double(0x7F) == 1.0);
    CHECK(float8_e8m0fnu_to_double(0x80) == 2.0);
    CHECK(float8_e8m0fnu_to_double(0x7E) == 0.5);
    CHECK(float8_e8m0fnu_to_double(0x00) == std::ldexp(1.0, -127));
    CHECK(float8_e8m0fnu_to_double(0xFE) == std::ldexp(1.0, 127));
    CHECK(std::isnan(float8_e8m0fnu_to_double(0xFF)));
}

TEST_CASE("0-d numbers print as numpy prints them, in the shortest text of their own type") {
    const std::vector<float> f32 = {0.1f, 1.0f, -2.5f, 1e-10f, std::numeric_limits<float>::quiet_NaN(),
                                    -std::numeric_limits<float>::infinity(), -0.0f};
    const ArrayView a = view_of(CKPT_FLOAT32, f32);
    CHECK(format_scalar(a, 0) == "0.1");
    CHECK(format_scalar(a, 1) == "1.0");
    CHECK(format_scalar(a, 2) == "-2.5");
    CHECK(format_scalar(a, 3) == "1e-10");
    CHECK(format_scalar(a, 4) == "nan");
    CHECK(format_scalar(a, 5) == "-inf");
    CHECK(format_scalar(a, 6) == "-0.0");
    const std::vector<double> f64 = {1.0 / 3, 1e20, 0.25};
    const ArrayView b = view_of(CKPT_FLOAT64, f64);
    CHECK(format_scalar(b, 0) == "0.3333333333333333");
    CHECK(format_scalar(b, 1) == "1e+20");
    CHECK(format_scalar(b, 2) == "0.25");
    const std::vector<uint16_t> bf16 = {0x3DCD, 0x4049, 0x3F80};
    const ArrayView c = view_of(CKPT_BFLOAT16, bf16);
    CHECK(format_scalar(c, 0) == "0.1");  // 0.10009765625, the bfloat16 nearest to 0.1
    CHECK(format_scalar(c, 1) == "3.14");
    CHECK(format_scalar(c, 2) == "1.0");
    const std::vector<uint16_t> f16 = {0x7BFF, 0x2E66};
    const ArrayView d = view_of(CKPT_FLOAT16, f16);
    CHECK(format_scalar(d, 0) == "65500.0");  // as numpy prints np.float16(65504)
    CHECK(format_scalar(d, 1) == "0.1");
    const std::vector<uint8_t> e8 = {0x7E, 0x01};
    const ArrayView e = view_of(CKPT_FLOAT8_E4M3FN, e8);
    CHECK(format_scalar(e, 0) == "450.0");  // 448: the nearest other values are 416 and none (as numpy's 65500.0)
    CHECK(format_scalar(e, 1) == "0.002");  // 2^-9 = 0.001953125; its neighbours are 0 and 2^-8
}

TEST_CASE("a decimal reads back as a narrow float only when it is nearer to it than to its neighbours") {
    Real r;
    r.dtype = CKPT_BFLOAT16;
    r.bits = 0x3DCD;  // 0.10009765625; neighbours 0.099609375 and 0.1005859375
    r.value = bfloat16_to_double(0x3DCD);
    CHECK(reads_back(r, "0.1"));
    CHECK(reads_back(r, "0.1003"));
    CHECK_FALSE(reads_back(r, "0.0998"));
    CHECK_FALSE(reads_back(r, "-0.1"));
    r.dtype = CKPT_FLOAT8_E4M3FN;
    r.bits = 0x7E;  // 448, the largest: its only neighbour is 416 below
    r.value = 448;
    CHECK(reads_back(r, "440"));
    CHECK_FALSE(reads_back(r, "430"));  // past 432, the midpoint
    CHECK_FALSE(reads_back(r, "4e2"));
}

TEST_CASE("other element types print as numpy prints them") {
    const std::vector<float> z = {1.0f, 2.0f, -0.5f, -1.0f};  // complex64 (1+2j), (-0.5-1j)
    ArrayView c = view_of(CKPT_FLOAT32, z);
    c.dtype = CKPT_COMPLEX64;
    c.itemsize = 8;
    c.shape = {2};
    CHECK(format_scalar(c, 0) == "(1+2j)");
    CHECK(format_scalar(c, 1) == "(-0.5-1j)");
    const std::vector<uint8_t> flags = {1, 0};
    CHECK(format_scalar(view_of(CKPT_BOOL, flags), 0) == "True");
    CHECK(integer_text(view_of(CKPT_BOOL, flags), 1) == "False");
    const std::vector<uint32_t> text = {'a', '\'', 'b', 0};  // unicode<4>: "a'b", NUL-padded
    ArrayView u = view_of(CKPT_UNICODE, text);
    u.itemsize = 16;
    u.shape = {1};
    CHECK(text_repr(u, 0) == "\"a'b\"");  // Python's repr: double quotes around a single quote
    CHECK(format_scalar(u, 0) == "a'b");
    CHECK(json_element(u, 0) == "a'b");
    const std::vector<uint8_t> bytes = {'o', 'k', 0xFF, 0};
    ArrayView s = view_of(CKPT_BYTES, bytes);
    s.itemsize = 4;
    s.shape = {1};
    CHECK(text_repr(s, 0) == "b'ok\\xff'");
    s.dtype = CKPT_VOID;
    CHECK(text_repr(s, 0) == "b'\\x6f\\x6b\\xff\\x00'");
    CHECK(json_element(s, 0) == "6f6bff00");
}

TEST_CASE("non-finite numbers are strings in JSON") {
    CHECK(json_number(std::numeric_limits<double>::quiet_NaN()) == "nan");
    CHECK(json_number(std::numeric_limits<double>::infinity()) == "inf");
    CHECK(json_number(-std::numeric_limits<double>::infinity()) == "-inf");
    CHECK(json_number(0.5) == 0.5);
}

TEST_CASE("comparisons treat NaN as equal to NaN and 0 as equal to -0") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> a = {nan, 0.0, 1.0, 2.0, 4.0};
    const std::vector<double> b = {nan, -0.0, 1.0, 2.5, nan};
    const Comparison c = compare(view_of(CKPT_FLOAT64, a), view_of(CKPT_FLOAT64, b));
    CHECK(c.elements == 5);
    CHECK(c.differing == 2);
    CHECK(c.nan_mismatches == 1);
    CHECK(c.max_abs == 0.5);
    CHECK(c.max_rel == 0.25);
}

TEST_CASE("comparisons of bfloat16 are of the numbers, not the bits") {
    const std::vector<uint16_t> a = {0x3F80, 0x4000, 0x7FC0};  // 1, 2, NaN
    const std::vector<uint16_t> b = {0x3F80, 0x4040, 0x7FC1};  // 1, 3, another NaN
    const Comparison c = compare(view_of(CKPT_BFLOAT16, a), view_of(CKPT_BFLOAT16, b));
    CHECK(c.differing == 1);
    CHECK(c.max_abs == 1.0);
    CHECK(c.max_rel == 0.5);
}

TEST_CASE("integer differences are exact, whatever their size") {
    const std::vector<int64_t> a = {std::numeric_limits<int64_t>::min(), 5};
    const std::vector<int64_t> b = {std::numeric_limits<int64_t>::max(), 5};
    const Comparison c = compare(view_of(CKPT_INT64, a), view_of(CKPT_INT64, b));
    CHECK(c.differing == 1);
    CHECK(c.max_abs == std::ldexp(1.0, 64));  // 2^64 - 1, rounded to the nearest double
    const std::vector<uint64_t> x = {0, 7}, y = {1, 7};
    const Comparison d = compare(view_of(CKPT_UINT64, x), view_of(CKPT_UINT64, y));
    CHECK(d.differing == 1);
    CHECK(d.max_abs == 1.0);
    CHECK(std::isinf(d.max_rel));  // relative to a zero
}

TEST_CASE("sizes are written in binary units, or exactly") {
    CHECK(human_size(0, false) == "0 B");
    CHECK(human_size(1023, false) == "1023 B");
    CHECK(human_size(1024, false) == "1.0 KiB");
    CHECK(human_size(1536, false) == "1.5 KiB");
    CHECK(human_size(1048575, false) == "1.0 MiB");
    CHECK(human_size(uint64_t{3} << 30, false) == "3.0 GiB");
    CHECK(human_size(1048575, true) == "1048575");
    CHECK(shape_text({}) == "()");
    CHECK(shape_text({3}) == "(3,)");
    CHECK(shape_text({2, 3}) == "(2, 3)");
    CHECK(dtype_label(CKPT_UNICODE, 20) == "unicode<5>");
    CHECK(dtype_label(CKPT_BFLOAT16, 2) == "bfloat16");
}
