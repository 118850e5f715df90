// SPDX-License-Identifier: Apache-2.0
// Ranged reads of one open file's arrays (ckpt_reader_read_range): bytes [offset, offset + size) of an array's data
// as NpzReader::read_into would deliver them, in bounded memory. A stored member is a ranged read of the file; a
// deflated one is inflated as a stream whose state is kept between calls, so ranges taken in order cost one pass
// over the member (a range before the last one's end starts the member again).
#pragma once

#include "npz/npz_reader.hpp"
#include "npz/zip_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ckpt::core {

class NpzRanges {
public:
    // Reads bytes [offset, offset + size) of entry i of `reader` (the same reader at every call) into dst.
    // Integrity: a stored member read range after range in order from byte 0 to its last byte has its CRC-32
    // checked at that last range; a deflated member has it checked whenever a range ends at its last byte (bytes
    // skipped are inflated anyway). Throws Error(invalid) for offsets or sizes that are not multiples of the
    // itemsize or reach past the end; Error(unsupported) for a Fortran-order array of more than one dimension;
    // Error(format) for corrupt data (a CRC-32 mismatch naming file and member); Error(io).
    void read(NpzReader& reader, size_t i, uint64_t offset, void* dst, size_t size);

private:
    void reset();
    void read_deflated(NpzReader& reader, size_t i, uint64_t offset, void* dst, size_t size);

    static constexpr size_t kNone = SIZE_MAX;
    size_t entry_ = kNone;   // the entry the ranges so far were of
    uint64_t next_ = 0;      // where the last range ended (data bytes)
    bool in_order_ = false;  // stored: every byte of [0, next_) came through ranges in order, so crc_ covers them
    uint32_t crc_ = 0;       // stored: CRC-32 of the npy header and data bytes [0, next_)
    std::unique_ptr<ZipReader::Stream> stream_;  // deflated: the member's inflater, at data byte next_
    std::vector<unsigned char> skip_;            // deflated: where skipped bytes go
};

}  // namespace ckpt::core
