// SPDX-License-Identifier: Apache-2.0
// Fuzzes the npy codec on arbitrary bytes taken as one .npy member: the preamble and header parser, and — when
// the bytes after the header hold the array — the byte-order and Fortran-order conversions a read applies.
// ckpt::core::Error is the expected answer to bad input; any other exception, a crash, UB or a leak is a bug.
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "npy/npy.hpp"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

// A header the parser accepted must survive ckpt's own formatting: format_npy_header of the same dtype, itemsize
// and shape parses back to exactly those (C order, native byte order), given the type a metadata member records.
void check_reformat(const ckpt::core::NpyHeader& h) {
    const std::string again = ckpt::core::format_npy_header(h.dtype, h.itemsize, h.shape);
    const size_t offset =
        ckpt::core::npy_data_offset(again.data(), again.size(), again.size(), ckpt::core::kDefaultMaxHeaderBytes);
    FUZZ_CHECK(offset == again.size());
    FUZZ_CHECK(offset % 64 == 0);
    ckpt::core::NpyHeader r = ckpt::core::parse_npy_header(again.data(), offset, ckpt::core::kDefaultMaxHeaderBytes);
    // bfloat16, float8 and 2-byte void are written as raw bytes whose type the metadata member records.
    if (r.dtype != h.dtype) ckpt::core::retype_npy_header(r, h.dtype);
    FUZZ_CHECK(r.dtype == h.dtype && r.itemsize == h.itemsize && r.shape == h.shape);
    FUZZ_CHECK(!r.fortran_order && !r.byteswap && r.nbytes == h.nbytes);
}

// Runs the conversions NpzReader::read_into applies, on the data that follows the header.
void convert(const ckpt::core::NpyHeader& h, const uint8_t* data, size_t size) {
    if (h.nbytes > size - h.data_offset || h.nbytes > ckpt_fuzz::kMaxArrayBytes) return;
    std::vector<unsigned char> out(h.nbytes);
    if (h.fortran_order && h.shape.size() > 1 && h.nbytes > 0) {
        ckpt::core::fortran_to_c_order(data + h.data_offset, out.data(), h.shape, h.itemsize);
    } else if (h.nbytes > 0) {
        std::memcpy(out.data(), data + h.data_offset, h.nbytes);
    }
    if (h.byteswap) ckpt::core::byteswap_in_place(h.dtype, out.data(), out.size());
}

struct Outcome {
    std::optional<ckpt::core::NpyHeader> header;  // or the error
    ckpt::core::Code code = ckpt::core::Code::ok;
    std::string message;
};

Outcome parse(const uint8_t* data, size_t size, ckpt::core::NpyParse how) {
    try {
        const size_t offset = ckpt::core::npy_data_offset(data, size, size, ckpt::core::kDefaultMaxHeaderBytes);
        FUZZ_CHECK(offset <= size);
        return {ckpt::core::parse_npy_header(data, offset, ckpt::core::kDefaultMaxHeaderBytes, how),
                ckpt::core::Code::ok,
                {}};
    } catch (const ckpt::core::Error& e) {
        return {std::nullopt, e.code(), e.what()};
    }
}

// The parsed header, or nothing when the codec rejected the bytes with ckpt::core::Error (as it should bad input).
// The fast path for numpy's own text and the grammar alone must give the same header, or the same error.
std::optional<ckpt::core::NpyHeader> parse(const uint8_t* data, size_t size) {
    Outcome fast = parse(data, size, ckpt::core::NpyParse::fast_path_first);
    const Outcome grammar = parse(data, size, ckpt::core::NpyParse::grammar_only);
    FUZZ_CHECK(fast.header.has_value() == grammar.header.has_value());
    if (fast.header) FUZZ_CHECK(*fast.header == *grammar.header);
    FUZZ_CHECK(fast.code == grammar.code && fast.message == grammar.message);
    return std::move(fast.header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::optional<ckpt::core::NpyHeader> h = parse(data, size);
    if (!h) return 0;
    FUZZ_CHECK(h->data_offset <= size);
    FUZZ_CHECK(h->itemsize > 0 && h->shape.size() <= ckpt::core::kMaxDims);
    // Past a successful parse nothing may throw: an escaping exception ends the run as a crash.
    check_reformat(*h);
    convert(*h, data, size);
    return 0;
}
