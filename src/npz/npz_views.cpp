// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_views.hpp"

#include "core/cores.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"
#include "npz/crc32.hpp"
#include "npz/zip_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <thread>

namespace ckpt::core {

namespace {

// What a view of an empty array points at.
const unsigned char kEmpty[1] = {0};

// Checking a large member's CRC-32 scales with cores up to about the memory bandwidth (as reading does).
constexpr unsigned kMaxCrcThreads = 4;

// The alignment a pointer to items of this size needs: the largest power of two dividing it, at most 8 (a complex
// number's parts, a '<U' string's 4-byte units, a void's bytes all need no more).
size_t alignment_for(size_t itemsize) {
    size_t a = 1;
    while (a < 8 && itemsize % (a * 2) == 0) a *= 2;
    return a;
}

}  // namespace

bool NpzViews::mappable(const NpzReader& reader, size_t i) {
    const NpyHeader& h = reader.entry(i).header;
    const ZipReader::Member& m = reader.member(i);
    return m.method == zip::kMethodStore && !h.byteswap && !(h.fortran_order && h.shape.size() > 1) &&
           (m.data_offset + h.data_offset) % alignment_for(h.itemsize) == 0;
}

const void* NpzViews::view(NpzReader& reader, size_t i) {
    if (views_.empty()) views_.assign(reader.size(), nullptr);
    if (const void* done = views_.at(i)) return done;
    const void* p = mappable(reader, i) ? map(reader, i) : nullptr;
    if (p == nullptr) {
        const NpyHeader& h = reader.entry(i).header;
        Array a = Array::allocate(h.dtype, h.itemsize, h.shape, false);
        unsigned char none;
        reader.read_into(i, h.nbytes > 0 ? a.data() : &none);
        p = h.nbytes > 0 ? a.data() : kEmpty;
        decoded_.emplace(i, std::move(a));
    }
    views_[i] = p;
    return p;
}

// The view into the mapping, verified if asked; nullptr if the file cannot be mapped.
const void* NpzViews::map(NpzReader& reader, size_t i) {
    if (!map_tried_) {
        mapping_ = reader.file().map(writable_);
        map_tried_ = true;
    }
    if (!mapping_) return nullptr;
    const NpzReader::Entry& e = reader.entry(i);
    const ZipReader::Member& m = reader.member(i);
    const uint64_t at = m.data_offset + e.header.data_offset;
    // The zip reader kept every member inside the file it opened, and the mapping has that file's size: this only
    // makes sure that no view can ever reach past the mapping.
    if (at > mapping_->size() || e.header.nbytes > mapping_->size() - at)
        fail(Code::format, "{}: member '{}': data ({} bytes at offset {}) runs past the end of the file ({} bytes)",
             reader.label(), printable(e.member), e.header.nbytes, at, mapping_->size());
    const unsigned char* p = static_cast<const unsigned char*>(mapping_->data()) + at;
    // The local header, where opening left it to the first read: through the mapping when every page of the member
    // is read anyway, else read on its own, so that a view costs no page of memory until it is touched.
    if (verify_)
        reader.zip().check_local(e.index, static_cast<const unsigned char*>(mapping_->data()), 0, mapping_->size());
    else
        reader.zip().check_local(e.index);
    if (verify_) {
        const unsigned threads = std::min(cores(), kMaxCrcThreads);
        const uint32_t data_crc = crc32_parallel(p, e.header.nbytes, threads);
        reader.zip().check_crc(e.index, static_cast<uint32_t>(crc32_combine(e.npy_crc, data_crc,
                                                                           static_cast<z_off_t>(e.header.nbytes))));
    }
    return e.header.nbytes > 0 ? p : kEmpty;
}

}  // namespace ckpt::core
