// SPDX-License-Identifier: Apache-2.0
// The .npy codec: pure functions between bytes and a validated header, and the conversions that bring
// numpy data into ckpt's native-byte-order, C-order form. No I/O.
//
// Reading follows numpy's format (numpy/lib/format.py): magic "\x93NUMPY", version 1.0 (u16 header length),
// 2.0 (u32, latin1) or 3.0 (u32, utf8); a header that is a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape' in any order, padded with spaces and ending in '\n'; data after it (aligned to 64
// bytes by numpy >= 1.14, to 16 before). The header is parsed by a strict grammar, never evaluated.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::core {

constexpr size_t kDefaultMaxHeaderBytes = 10000;  // numpy's _MAX_HEADER_SIZE
constexpr size_t kNpyMagicBytes = 6;               // "\x93NUMPY"
constexpr size_t kNpyPreambleMax = 12;             // magic + version + u32 length (v2/v3)

struct NpyHeader {
    DType dtype = DType::float32;
    size_t itemsize = 0;          // bytes per item (4n for '<Un', n for '|Sn')
    std::vector<int64_t> shape;   // as written; each >= 0
    bool fortran_order = false;
    bool byteswap = false;        // data is in the non-native byte order (and has units to swap)
    bool foreign_order = false;   // the descr says the non-native byte order
    bool raw_void = false;        // the descr is numpy's raw-bytes 'V<n>': metadata may say what the bytes are
    size_t data_offset = 0;       // bytes from the start of the member to the first data byte
    size_t nbytes = 0;            // product of shape times itemsize (checked)
};

inline bool operator==(const NpyHeader& a, const NpyHeader& b) {
    return a.dtype == b.dtype && a.itemsize == b.itemsize && a.shape == b.shape && a.fortran_order == b.fortran_order &&
           a.byteswap == b.byteswap && a.foreign_order == b.foreign_order &&
           a.raw_void == b.raw_void && a.data_offset == b.data_offset && a.nbytes == b.nbytes;
}

// Reads the preamble (magic, version, header length) from the first `n` bytes of a member of `member_size`
// bytes and returns the data offset (preamble + header length). Needs n >= min(member_size, kNpyPreambleMax).
// Throws Error(format) for a bad magic or version, a header longer than max_header_bytes, or one that does not
// fit in the member.
size_t npy_data_offset(const void* bytes, size_t n, uint64_t member_size, size_t max_header_bytes);

// Parses a whole header: `bytes` holds the member's first `data_offset` bytes (as returned by npy_data_offset).
// Throws Error(format) for anything malformed (not a dict, missing/extra/duplicate keys, bad literals, negative
// dimensions, more than kMaxDims dimensions, byte size overflow), Error(unsupported) for descr values numpy
// accepts but ckpt does not handle (object '|O', structured/list descr, datetime, longdouble, ml_dtypes' int4, …).
// Raw bytes 'V2' read as bfloat16 (what jax.numpy.load and Keras assume), other 'V<n>' as void; '<f1' as
// float8_e5m2 (what ml_dtypes' np.save writes); ml_dtypes names ('bfloat16', 'float8_e4m3fn', …) as those types.
// Messages start with "npy header: ". numpy's exact header text is recognised on a fast path first; tests can ask
// for the grammar alone, which must give the same header.
enum class NpyParse { fast_path_first, grammar_only };
NpyHeader parse_npy_header(const void* bytes, size_t data_offset, size_t max_header_bytes,
                           NpyParse how = NpyParse::fast_path_first);

// numpy's descr for a dtype in native byte order: "<f4", "|b1", "|u1", "<U10", "|S5", "|V4", … — and for the
// types numpy cannot name, the raw bytes ml_dtypes' np.save writes: "<V2" for bfloat16, "<V1" for every float8
// (ml_dtypes writes "<f1" for float8_e5m2, which np.load refuses).
std::string npy_descr(DType dtype, size_t itemsize);

// Gives a raw-bytes header (raw_void) the type the file's metadata records for it. Throws Error(format) when the
// header is not raw bytes of that type's size, unless it already has that type, or the type is one numpy names.
void retype_npy_header(NpyHeader& h, DType dtype);

// The exact bytes numpy >= 1.24 writes before the data of a C-order array of this dtype and shape with
// np.save: magic, version 1.0 (2.0 only if the header exceeds 65535 bytes), the dict with keys in sorted
// order, numpy's 21-minus-digits growth spaces, padding to a multiple of 64 and a final '\n'.
std::string format_npy_header(DType dtype, size_t itemsize, const std::vector<int64_t>& shape);

// Reverses the byte order of every swap_unit(dtype)-sized unit of `nbytes` bytes in place.
void byteswap_in_place(DType dtype, void* data, size_t nbytes);

// Copies Fortran-order (column-major) `src` into C-order (row-major) `dst`; both hold the product of the
// shape times itemsize bytes and do not overlap.
void fortran_to_c_order(const void* src, void* dst, const std::vector<int64_t>& shape, size_t itemsize);

}  // namespace ckpt::core
