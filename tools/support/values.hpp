// SPDX-License-Identifier: Apache-2.0
// The elements of an array read through the C API: as numbers (every numeric type, including bfloat16, float16
// and float8, as exact doubles), compared NaN-aware, and written as text or JSON.
#pragma once

#include <ckpt/ckpt.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ckpt_tool {

using Json = nlohmann::ordered_json;

enum class Kind { boolean, signed_integer, unsigned_integer, real, complex, text };
Kind kind_of(uint32_t dtype);

// One array's bytes as ckpt_reader_read_into leaves them: native byte order, C order.
struct ArrayView {
    uint32_t dtype = 0;
    size_t itemsize = 0;
    std::vector<int64_t> shape;
    const unsigned char* data = nullptr;

    uint64_t count() const;
    const unsigned char* item(uint64_t i) const { return data + i * itemsize; }
};

// The dtype as the tool shows it: ckpt_dtype_name(), with the item width for the per-array sizes
// ("unicode<5>" holds 5 characters, "bytes<3>" and "void<4>" that many bytes).
std::string dtype_label(uint32_t dtype, size_t itemsize);

// Element i of a signed integer array, and of a boolean or unsigned integer array, exactly.
int64_t signed_item(const ArrayView& a, uint64_t i);
uint64_t unsigned_item(const ArrayView& a, uint64_t i);
// How a boolean, integer or real element is read as a double (exact for every type but 64-bit integers past
// 2^53), for loops that look at the dtype once: nullptr for other dtypes.
using RealFn = double (*)(const unsigned char*);
RealFn real_fn(uint32_t dtype);
// Element i of a boolean, integer or real array as a double (exact for every type but 64-bit integers past 2^53).
double real_at(const ArrayView& a, uint64_t i);

// How two arrays of the same dtype and shape differ. NaN equals NaN here, and 0 equals -0; an element where only
// one side is NaN counts as differing (nan_mismatches) but not in the maximum differences. The relative
// difference is |b - a| / |a| (infinite where a is 0 and b is not).
struct Comparison {
    uint64_t elements = 0;
    uint64_t differing = 0;
    uint64_t nan_mismatches = 0;
    bool numeric = false;                 // max_abs and max_rel mean something (not for strings and raw bytes)
    bool any_numeric_difference = false;  // a differing element where neither side is NaN
    double max_abs = 0;
    double max_rel = 0;
    uint64_t max_abs_at = 0;  // the element (in C order) of the largest absolute difference
};
Comparison compare(const ArrayView& a, const ArrayView& b);

// A real number as one of the array's real types holds it (dtype CKPT_FLOAT16 ... CKPT_FLOAT64, CKPT_BFLOAT16,
// the float8 types): its value, and for the narrow types its bits (which say what the neighbouring values are).
struct Real {
    uint32_t dtype = CKPT_FLOAT64;
    double value = 0;
    unsigned bits = 0;
};
// Element i of a real array; the real and imaginary parts of element i of a complex array.
Real real_item(const ArrayView& a, uint64_t i);
void complex_item(const ArrayView& a, uint64_t i, Real& re, Real& im);
// Whether `text` reads back as r's value of r's type: for the narrow types, whether it lies nearer to r than to
// either neighbouring value.
bool reads_back(const Real& r, const std::string& text);
// The shortest decimal that reads back as r, as Python's repr writes floats: "0.1", "1.0", "1e-10", "nan".
std::string shortest_repr(const Real& r);

// Element i as numpy's str() writes a 0-d array of it: 0.1, 1.0, 1e-10, nan, (1+2j), True, 7, text (unicode,
// unquoted), b'bytes'.
std::string format_scalar(const ArrayView& a, uint64_t i);
// Element i of a boolean or integer array in decimal (True/False for booleans).
std::string integer_text(const ArrayView& a, uint64_t i);
// Element i of a unicode, bytes or void array as numpy's repr writes it inside an array: 'text', b'by\xfftes'.
std::string text_repr(const ArrayView& a, uint64_t i);
// Element i as JSON: numbers exact (nan, inf and -inf as strings "nan", "inf", "-inf"), complex as [re, im],
// unicode as a string, bytes as a string of one character per byte (U+0000..U+00FF, trailing NULs dropped), void
// as lowercase hex.
Json json_element(const ArrayView& a, uint64_t i);
// A double as JSON: a number, or "nan", "inf", "-inf".
Json json_number(double v);

}  // namespace ckpt_tool
