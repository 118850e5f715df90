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

// One array's bytes as ckpt_npz_read_into leaves them: native byte order, C order.
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

// Element i of a boolean, integer or real array as a double (exact for every type but 64-bit integers past 2^53).
double real_at(const ArrayView& a, uint64_t i);

// How two arrays of the same dtype and shape differ. NaN equals NaN here, and 0 equals -0; an element where only
// one side is NaN counts as differing (nan_mismatches) but not in the maximum differences. The relative
// difference is |b - a| / |a| (infinite where a is 0 and b is not).
struct Comparison {
    uint64_t elements = 0;
    uint64_t differing = 0;
    uint64_t nan_mismatches = 0;
    bool numeric = false;  // max_abs and max_rel mean something (not for strings and raw bytes)
    bool any_numeric_difference = false;  // a differing element where neither side is NaN
    double max_abs = 0;
    double max_rel = 0;
};
Comparison compare(const ArrayView& a, const ArrayView& b);

// Element i as numpy prints it: 1., 0.25, nan, -inf, 3+4j, True, 'text', b'bytes' — numbers in the shortest
// decimal that reads back as the same value of the array's type, at most 8 significant digits.
std::string format_element(const ArrayView& a, uint64_t i);
// Element i as JSON: numbers exact (nan, inf and -inf as strings "nan", "inf", "-inf"), complex as [re, im],
// unicode as a string, bytes as a string of one character per byte (U+0000..U+00FF, trailing NULs dropped), void
// as lowercase hex.
Json json_element(const ArrayView& a, uint64_t i);
// A double as JSON: a number, or "nan", "inf", "-inf".
Json json_number(double v);

}  // namespace ckpt_tool
