// SPDX-License-Identifier: Apache-2.0
// The data of a zip member, once the directory is read (zip_reader.cpp): stored bytes by ranged reads, deflated ones
// through a stream that inflates them in order, and the CRC-32 each must end with.
#include "npz/zip_reader.hpp"

#include "npz/crc32.hpp"
#include "core/error.hpp"
#include "npz/zip_format.hpp"
#include "npz/zlib_memory.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ckpt::core {

namespace {

using namespace zip;

constexpr size_t kInflateInput = size_t{256} << 10;
// Data is read (or inflated) and CRC-checked in pieces this large, so the check reads what is still in the cache.
constexpr size_t kChunk = size_t{1} << 20;

}  // namespace

// Raw-deflate decoding of one member, reading its compressed bytes in chunks.
struct ZipReader::Stream::Inflater {
    z_stream zs{};
    std::vector<unsigned char> input;  // no larger than the member's compressed data
    uint64_t consumed = 0;             // compressed bytes handed to zlib
    bool ended = false;
    explicit Inflater(uint64_t compressed)
        : input(static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(kInflateInput, compressed)))) {
        zs.zalloc = zlib_alloc;
        zs.zfree = zlib_free;
        if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
    }
    ~Inflater() { inflateEnd(&zs); }
};

ZipReader::Stream::Stream(const ZipReader& zip, size_t index) : zip_(zip), m_(zip.members_.at(index)) {
    zip_.check_local(index);
    if (m_.method == 8) inflater_ = std::make_unique<Inflater>(m_.compressed);
}

ZipReader::Stream::~Stream() = default;

void ZipReader::Stream::refill() {
    Inflater& inf = *inflater_;
    if (inf.zs.avail_in != 0 || inf.consumed == m_.compressed) return;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(inf.input.size(), m_.compressed - inf.consumed));
    if (zip_.file_.read_at(m_.data_offset + inf.consumed, inf.input.data(), k) != k)
        fail(Code::format, "{}: compressed data runs past the end of the file", zip_.where(m_));
    inf.zs.next_in = inf.input.data();
    inf.zs.avail_in = static_cast<uInt>(k);
    inf.consumed += k;
}

size_t ZipReader::Stream::read(void* dst, size_t n) {
    unsigned char* out = static_cast<unsigned char*>(dst);
    n = static_cast<size_t>(std::min<uint64_t>(n, m_.size - out_));  // never more than the declared size
    size_t done = 0;
    while (done < n) {
        const size_t want = std::min(n - done, kChunk);
        size_t got;
        if (!inflater_) {
            got = zip_.file_.read_at(m_.data_offset + out_, out + done, want);
            if (got == 0) break;
        } else {
            Inflater& inf = *inflater_;
            if (inf.ended) break;
            refill();
            inf.zs.next_out = out + done;
            inf.zs.avail_out = static_cast<uInt>(want);
            const int rc = inflate(&inf.zs, Z_NO_FLUSH);
            got = want - inf.zs.avail_out;
            if (rc == Z_STREAM_END) {
                inf.ended = true;
            } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
                fail(Code::format, "{}: corrupt deflate data ({})", zip_.where(m_), inf.zs.msg ? inf.zs.msg : "invalid");
            } else if (rc == Z_MEM_ERROR) {
                throw std::bad_alloc();
            } else if (rc == Z_BUF_ERROR && got == 0 && inf.zs.avail_in == 0 && inf.consumed == m_.compressed) {
                fail(Code::format, "{}: deflate data ends before the member's {} bytes", zip_.where(m_), m_.size);
            }
        }
        crc_ = crc32(crc_, out + done, got);
        done += got;
        out_ += got;
    }
    return done;
}

void ZipReader::Stream::skip_prefix(size_t n, uint32_t crc) {
    if (inflater_ || out_ != 0 || n > m_.size) throw std::logic_error("ZipReader::Stream::skip_prefix: not at the start of a stored member");
    crc_ = crc;
    out_ = n;
}

uint32_t ZipReader::read_stored(size_t index, uint64_t offset, void* dst, size_t n, bool with_crc) const {
    const Member& m = members_.at(index);
    if (m.method != kMethodStore) throw std::logic_error("ZipReader::read_stored: not a stored member");
    check_local(index);
    if (offset > m.size || n > m.size - offset)
        fail(Code::format, "{}: data ends after {} of {} bytes", where(m), m.size, offset + n);
    auto* out = static_cast<unsigned char*>(dst);
    uint32_t crc = 0;
    for (size_t done = 0; done < n;) {
        const size_t want = std::min(n - done, kChunk);
        const size_t got = file_.read_at(m.data_offset + offset + done, out + done, want);
        if (with_crc) crc = crc32(crc, out + done, got);
        done += got;
        if (got < want) fail(Code::format, "{}: data ends after {} of {} bytes", where(m), offset + done, m.size);
    }
    return crc;
}

void ZipReader::check_crc(size_t index, uint32_t crc) const {
    const Member& m = members_.at(index);
    if (crc != m.crc)
        fail(Code::format, "{}: CRC-32 mismatch (the zip says {:08x}, the data gives {:08x})", where(m), m.crc, crc);
}

void ZipReader::drop_heads() {
    for (Member& m : members_) std::string().swap(m.head);
}

void ZipReader::Stream::read_exact(void* dst, size_t n) {
    const size_t got = read(dst, n);
    if (got != n) fail(Code::format, "{}: data ends after {} of {} bytes", zip_.where(m_), got, n);
}

void ZipReader::Stream::finish() {
    if (out_ != m_.size)
        fail(Code::format, "{}: data ends after {} of {} bytes", zip_.where(m_), out_, m_.size);
    if (inflater_) {
        // The deflate stream must end exactly at the declared size: no bytes left to produce.
        Inflater& inf = *inflater_;
        unsigned char extra;
        while (!inf.ended) {
            refill();
            inf.zs.next_out = &extra;
            inf.zs.avail_out = 1;
            const int rc = inflate(&inf.zs, Z_NO_FLUSH);
            if (inf.zs.avail_out == 0)
                fail(Code::format, "{}: deflate data is longer than the declared {} bytes", zip_.where(m_), m_.size);
            if (rc == Z_STREAM_END) break;
            if (rc == Z_MEM_ERROR) throw std::bad_alloc();
            if (rc != Z_OK || (inf.zs.avail_in == 0 && inf.consumed == m_.compressed))
                fail(Code::format, "{}: deflate data is truncated or corrupt", zip_.where(m_));
        }
    }
    zip_.check_crc(static_cast<size_t>(&m_ - zip_.members_.data()), crc_);
}

}  // namespace ckpt::core
