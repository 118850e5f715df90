// SPDX-License-Identifier: Apache-2.0
#include "float_formats.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace ckpt_tool {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A finite value of a binary format with `mantissa_bits` fraction bits and exponent `bias`, from its biased
// exponent field and fraction: subnormal when the field is 0 (no implicit leading 1).
double finite(bool negative, unsigned exponent, unsigned fraction, int mantissa_bits, int bias) {
    const double magnitude = exponent == 0 ? std::ldexp(static_cast<double>(fraction), 1 - bias - mantissa_bits)
                                           : std::ldexp(static_cast<double>(fraction | (1u << mantissa_bits)),
                                                        static_cast<int>(exponent) - bias - mantissa_bits);
    return negative ? -magnitude : magnitude;
}

double signed_nan(bool negative) { return negative ? -kNaN : kNaN; }

}  // namespace

double float16_to_double(uint16_t bits) {
    const bool negative = (bits & 0x8000u) != 0;
    const unsigned exponent = (bits >> 10) & 0x1Fu, fraction = bits & 0x3FFu;
    if (exponent == 0x1F) return fraction == 0 ? (negative ? -kInf : kInf) : signed_nan(negative);
    return finite(negative, exponent, fraction, 10, 15);
}

double bfloat16_to_double(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    static_assert(sizeof f == sizeof wide, "binary32 float");
    std::memcpy(&f, &wide, sizeof f);
    return static_cast<double>(f);
}

double float8_e4m3fn_to_double(uint8_t bits) {
    const bool negative = (bits & 0x80u) != 0;
    const unsigned exponent = (bits >> 3) & 0xFu, fraction = bits & 0x7u;
    if (exponent == 0xF && fraction == 0x7) return signed_nan(negative);
    return finite(negative, exponent, fraction, 3, 7);
}

double float8_e5m2_to_double(uint8_t bits) {
    const bool negative = (bits & 0x80u) != 0;
    const unsigned exponent = (bits >> 2) & 0x1Fu, fraction = bits & 0x3u;
    if (exponent == 0x1F) return fraction == 0 ? (negative ? -kInf : kInf) : signed_nan(negative);
    return finite(negative, exponent, fraction, 2, 15);
}

double float8_e4m3fnuz_to_double(uint8_t bits) {
    if (bits == 0x80u) return kNaN;
    return finite((bits & 0x80u) != 0, (bits >> 3) & 0xFu, bits & 0x7u, 3, 8);
}

double float8_e5m2fnuz_to_double(uint8_t bits) {
    if (bits == 0x80u) return kNaN;
    return finite((bits & 0x80u) != 0, (bits >> 2) & 0x1Fu, bits & 0x3u, 2, 16);
}

double float8_e8m0fnu_to_double(uint8_t bits) {
    if (bits == 0xFFu) return kNaN;
    return std::ldexp(1.0, static_cast<int>(bits) - 127);
}

}  // namespace ckpt_tool
