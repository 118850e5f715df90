// The element types ckpt stores: numpy's numeric types and fixed-width strings. Values equal the CKPT_* dtype
// constants of ckpt.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt {

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
};

// True for every value of DType.
bool is_dtype(uint32_t value);
// True for unicode and bytes, whose itemsize is chosen per array.
inline bool is_string_dtype(DType d) { return d == DType::unicode || d == DType::bytes; }
// Bytes per item of a numeric dtype; 0 for string dtypes.
size_t numeric_size(DType d);
// "float32", "unicode", …
const char* dtype_name(DType d);
// Size of the unit that byte order applies to: the itemsize for integers and floats, half of it for complex,
// 4 for unicode, 1 for bool, int8, uint8 and bytes (nothing to swap).
size_t swap_unit(DType d);

}  // namespace ckpt
