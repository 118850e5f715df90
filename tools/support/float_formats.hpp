// SPDX-License-Identifier: Apache-2.0
// Exact conversions of the narrow floating-point formats to double (every value of each is a double), for
// comparing and printing arrays whose types the C++ language lacks: IEEE binary16, bfloat16 and ml_dtypes' float8
// formats. NaNs come back as a NaN with the input's sign.
#pragma once

#include <cstdint>

namespace ckpt_tool {

double float16_to_double(uint16_t bits);         // IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits
double bfloat16_to_double(uint16_t bits);        // the top half of a binary32
double float8_e4m3fn_to_double(uint8_t bits);    // bias 7; no infinities; S.1111.111 is NaN; max 448
double float8_e5m2_to_double(uint8_t bits);      // bias 15; IEEE-like with infinities and NaNs; max 57344
double float8_e4m3fnuz_to_double(uint8_t bits);  // bias 8; no infinities, no -0: 0x80 is the only NaN; max 240
double float8_e5m2fnuz_to_double(uint8_t bits);  // bias 16; no infinities, no -0: 0x80 is the only NaN; max 57344
double float8_e8m0fnu_to_double(uint8_t bits);   // unsigned power of two 2^(bits-127); 0xFF is NaN; no zero

}  // namespace ckpt_tool
