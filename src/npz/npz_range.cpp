// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_range.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "npz/crc32.hpp"
#include "npz/zip_format.hpp"

#include <algorithm>

namespace ckpt::core {

namespace {

constexpr size_t kSkipBytes = size_t{1} << 20;

std::string where(const NpzReader& reader, const NpzReader::Entry& e) {
    return fmt::format("{}: member '{}'", reader.label(), printable(e.member));
}

}  // namespace

void NpzRanges::reset() {
    entry_ = kNone;
    next_ = 0;
    in_order_ = false;
    stream_.reset();
}

void NpzRanges::read(NpzReader& reader, size_t i, uint64_t offset, void* dst, size_t size) {
    const NpzReader::Entry& e = reader.entry(i);
    const NpyHeader& h = e.header;
    const uint64_t item = h.itemsize;
    if ((item == 0 && (offset != 0 || size != 0)) || (item != 0 && (offset % item != 0 || size % item != 0)))
        fail(Code::invalid, "{}: range [{}, {} + {}) of array '{}' is not made of whole items of {} bytes",
             where(reader, e), offset, offset, size, e.name, item);
    if (offset > h.nbytes || size > h.nbytes - offset)
        fail(Code::invalid, "{}: range [{}, {} + {}) reaches past the end of array '{}' ({} bytes)", where(reader, e),
             offset, offset, size, e.name, h.nbytes);
    if (h.fortran_order && h.shape.size() > 1 && h.nbytes > 0)
        fail(Code::unsupported,
             "{}: array '{}' is in Fortran order: ranged reads take C-order arrays only (read it whole instead)",
             where(reader, e), e.name);
    const ZipReader& zip = reader.zip();
    try {
        if (reader.member(i).method != zip::kMethodStore) {
            read_deflated(reader, i, offset, dst, size);
        } else {
            if (entry_ != i || offset != next_ || stream_) {
                reset();
                entry_ = i;
                in_order_ = offset == 0;
                crc_ = e.npy_crc;
            }
            if (size > 0) zip.read_stored(e.index, h.data_offset + offset, dst, size, false);
            if (in_order_) crc_ = crc32(crc_, dst, size);
            next_ = offset + size;
            if (in_order_ && next_ == h.nbytes) {
                reset();
                zip.check_crc(e.index, crc_);
            }
        }
    } catch (...) {
        reset();
        throw;
    }
    if (h.byteswap && size > 0) byteswap_in_place(h.dtype, dst, size);
}

void NpzRanges::read_deflated(NpzReader& reader, size_t i, uint64_t offset, void* dst, size_t size) {
    const NpzReader::Entry& e = reader.entry(i);
    const NpyHeader& h = e.header;
    if (entry_ != i || !stream_ || offset < next_) {
        reset();
        stream_ = std::make_unique<ZipReader::Stream>(reader.zip(), e.index);
        entry_ = i;
        std::string header(h.data_offset, '\0');
        stream_->read_exact(&header[0], header.size());
    }
    while (next_ < offset) {
        skip_.resize(kSkipBytes);
        const size_t n = static_cast<size_t>(std::min<uint64_t>(offset - next_, skip_.size()));
        stream_->read_exact(skip_.data(), n);
        next_ += n;
    }
    if (size > 0) stream_->read_exact(dst, size);
    next_ += size;
    if (next_ == h.nbytes) {
        stream_->finish();
        reset();
    }
}

}  // namespace ckpt::core
