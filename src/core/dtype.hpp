// SPDX-License-Identifier: Apache-2.0
// The element types ckpt stores: numpy's numeric types, fixed-width strings and raw bytes, and the ML types numpy
// has no name for (bfloat16 and the float8 family, stored as ml_dtypes lays them out). Values equal the CKPT_*
// dtype constants of ckpt.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ckpt::core {

enum class DType : uint32_t {
    bool_ = 1,
    int8 = 2,
    int16 = 3,
    int32 = 4,
    int64 = 5,
    uint8 = 6,
    uint16 = 7,
    uint32 = 8,
    uint64 = 9,
    float16 = 10,
    float32 = 11,
    float64 = 12,
    complex64 = 13,
    complex128 = 14,
    unicode = 15,  // numpy '<U<n>': UTF-32 code units, itemsize 4n
    bytes = 16,    // numpy '|S<n>': itemsize n
    bfloat16 = 17,
    float8_e4m3fn = 18,
    float8_e5m2 = 19,
    float8_e4m3fnuz = 20,
    float8_e5m2fnuz = 21,
    float8_e8m0fnu = 22,
    void_ = 23,  // numpy '|V<n>': itemsize n raw bytes
};

// True for every value of DType.
bool is_dtype(uint32_t value);
// True for unicode, bytes and void, whose itemsize is chosen per array.
inline bool has_array_itemsize(DType d) { return d == DType::unicode || d == DType::bytes || d == DType::void_; }
// True for the types numpy has no descr for (bfloat16, float8_*): their .npy members are written as raw bytes
// ('<V2', '<V1') and their real type is recorded in the file's metadata member.
inline bool is_ml_dtype(DType d) { return d >= DType::bfloat16 && d <= DType::float8_e8m0fnu; }
// Bytes per item of a fixed-size dtype; 0 for unicode, bytes and void.
size_t numeric_size(DType d);
// "float32", "unicode", "bfloat16", "float8_e4m3fn" (ml_dtypes' spelling), "void", …
const char* dtype_name(DType d);
// The dtype dtype_name gives `name`, if any.
std::optional<DType> dtype_named(std::string_view name);
// Size of the unit that byte order applies to: the itemsize for integers and floats, half of it for complex,
// 4 for unicode, 1 for bool, int8, uint8, float8, bytes and void (nothing to swap).
size_t swap_unit(DType d);

}  // namespace ckpt::core
