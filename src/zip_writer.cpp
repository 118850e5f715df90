#include "zip_writer.hpp"

#include "error.hpp"
#include "zip_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace ckpt {

namespace {

using namespace zip;

constexpr uint16_t kVersion20 = 20;
constexpr uint16_t kVersionZip64 = 45;
constexpr uint16_t kMadeByUnix = 3 << 8;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, what Python's zipfile writes
constexpr uint32_t kRegularFile0644 = 0100644u << 16;

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr size_t kChunk = size_t{64} << 20;  // progress granularity; also under zlib's 32-bit counts

// Little-endian record builder.
struct Record {
    std::vector<unsigned char> b;
    Record& u16(uint16_t v) {
        for (int i = 0; i < 2; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    Record& u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    Record& u64(uint64_t v) {
        for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
        return *this;
    }
    Record& bytes(const std::string& s) {
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
};

uint32_t clamp32(uint64_t v) { return v >= kMax32 ? kMax32 : static_cast<uint32_t>(v); }

bool is_ascii(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

uint64_t total_size(const std::vector<ZipWriter::Piece>& pieces) {
    uint64_t n = 0;
    for (const auto& p : pieces) n += p.size;
    return n;
}

}  // namespace

ZipWriter::ZipWriter(OutputFile& out) : out_(out) { buf_.reserve(kBufferBytes); }

void ZipWriter::put(const void* data, size_t n) {
    if (buf_.size() + n > kBufferBytes) flush();
    if (n >= kBufferBytes) {
        out_.write(data, n);
    } else {
        const auto* p = static_cast<const unsigned char*>(data);
        buf_.insert(buf_.end(), p, p + n);
    }
    offset_ += n;
}

void ZipWriter::flush() {
    if (!buf_.empty()) out_.write(buf_.data(), buf_.size());
    buf_.clear();
}

uint32_t ZipWriter::crc_of(const std::vector<Piece>& pieces) {
    uLong crc = crc32_z(0, Z_NULL, 0);
    for (const auto& p : pieces)
        if (p.size > 0) crc = crc32_z(crc, static_cast<const Bytef*>(p.data), p.size);  // (crc, NULL, 0) resets
    return static_cast<uint32_t>(crc);
}

void ZipWriter::add(const std::string& name, const std::vector<Piece>& pieces, int level,
                    const OnPieceBytes& on_bytes, const std::function<uint32_t()>& crc) {
    if (name.size() > kMax16) fail(Code::invalid, "member name '{}' is longer than a zip allows", name);
    Entry e{name, offset_, 0, total_size(pieces), 0, level < 0 ? kMethodStore : kMethodDeflate,
            static_cast<uint16_t>(is_ascii(name) ? 0 : kFlagUtf8)};
    if (level < 0)
        add_stored(e, pieces, on_bytes, crc);
    else
        add_deflated(e, pieces, level, on_bytes);
    entries_.push_back(std::move(e));
}

void ZipWriter::add_stored(Entry& e, const std::vector<Piece>& pieces, const OnPieceBytes& on_bytes,
                           const std::function<uint32_t()>& crc) {
    e.crc = crc ? crc() : crc_of(pieces);
    e.compressed = e.size;

    const bool zip64 = e.size >= kMax32;
    Record h;
    h.u32(kLocalHeaderSig).u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method);
    h.u16(0).u16(kDosDate1980).u32(e.crc).u32(clamp32(e.size)).u32(clamp32(e.size));
    h.u16(static_cast<uint16_t>(e.name.size())).u16(zip64 ? 20 : 0).bytes(e.name);
    if (zip64) h.u16(kZip64ExtraId).u16(16).u64(e.size).u64(e.size);
    put(h.b.data(), h.b.size());

    for (size_t i = 0; i < pieces.size(); ++i) {
        const char* p = static_cast<const char*>(pieces[i].data);
        for (size_t done = 0; done < pieces[i].size;) {
            const size_t n = std::min(pieces[i].size - done, kChunk);
            put(p + done, n);
            done += n;
            if (on_bytes) on_bytes(i, n);
        }
    }
}

void ZipWriter::add_deflated(Entry& e, const std::vector<Piece>& pieces, int level, const OnPieceBytes& on_bytes) {
    z_stream zs{};
    if (deflateInit2(&zs, level == 0 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, -MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::bad_alloc();
    struct End {
        z_stream* zs;
        ~End() { deflateEnd(zs); }
    } end{&zs};

    // The compressed size is known only at the end: sizes go in a data descriptor after the data. zip64 is
    // decided up front from the worst case deflate can produce.
    const bool zip64 = e.size >= kMax32 || deflateBound(&zs, e.size) >= kMax32;
    e.flags |= kFlagDataDescriptor;
    Record h;
    h.u32(kLocalHeaderSig).u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method);
    h.u16(0).u16(kDosDate1980).u32(0).u32(zip64 ? kMax32 : 0).u32(zip64 ? kMax32 : 0);
    h.u16(static_cast<uint16_t>(e.name.size())).u16(zip64 ? 20 : 0).bytes(e.name);
    if (zip64) h.u16(kZip64ExtraId).u16(16).u64(0).u64(0);
    put(h.b.data(), h.b.size());

    std::vector<unsigned char> out(size_t{256} << 10);
    uLong crc = crc32_z(0, Z_NULL, 0);
    uint64_t compressed = 0;
    const auto drain = [&](int flush_mode) {
        int rc;
        do {
            zs.next_out = out.data();
            zs.avail_out = static_cast<uInt>(out.size());
            rc = deflate(&zs, flush_mode);
            if (rc == Z_STREAM_ERROR) fail(Code::error, "member '{}': zlib deflate failed", e.name);
            const size_t n = out.size() - zs.avail_out;
            put(out.data(), n);
            compressed += n;
        } while (zs.avail_out == 0 || (flush_mode == Z_FINISH && rc != Z_STREAM_END));
    };
    for (size_t i = 0; i < pieces.size(); ++i) {
        const auto* p = static_cast<const Bytef*>(pieces[i].data);
        for (size_t done = 0; done < pieces[i].size;) {
            const size_t n = std::min(pieces[i].size - done, kChunk);
            crc = crc32_z(crc, p + done, n);
            zs.next_in = const_cast<Bytef*>(p + done);
            zs.avail_in = static_cast<uInt>(n);
            drain(Z_NO_FLUSH);
            done += n;
            if (on_bytes) on_bytes(i, n);
        }
    }
    drain(Z_FINISH);
    e.crc = static_cast<uint32_t>(crc);
    e.compressed = compressed;

    Record d;
    d.u32(kDataDescriptorSig).u32(e.crc);
    if (zip64)
        d.u64(e.compressed).u64(e.size);
    else
        d.u32(static_cast<uint32_t>(e.compressed)).u32(static_cast<uint32_t>(e.size));
    put(d.b.data(), d.b.size());
}

void ZipWriter::finish() {
    const uint64_t cd_offset = offset_;
    for (const Entry& e : entries_) {
        Record extra;
        if (e.size >= kMax32) extra.u64(e.size);
        if (e.compressed >= kMax32) extra.u64(e.compressed);
        if (e.offset >= kMax32) extra.u64(e.offset);
        const bool zip64 = !extra.b.empty();
        Record c;
        c.u32(kCentralHeaderSig).u16(kMadeByUnix | (zip64 ? kVersionZip64 : kVersion20));
        c.u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method).u16(0).u16(kDosDate1980);
        c.u32(e.crc).u32(clamp32(e.compressed)).u32(clamp32(e.size));
        c.u16(static_cast<uint16_t>(e.name.size())).u16(zip64 ? static_cast<uint16_t>(4 + extra.b.size()) : 0);
        c.u16(0).u16(0).u16(0).u32(kRegularFile0644).u32(clamp32(e.offset)).bytes(e.name);
        if (zip64) c.u16(kZip64ExtraId).u16(static_cast<uint16_t>(extra.b.size()));
        c.b.insert(c.b.end(), extra.b.begin(), extra.b.end());
        put(c.b.data(), c.b.size());
    }
    const uint64_t cd_size = offset_ - cd_offset;
    const uint64_t count = entries_.size();
    if (count >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32) {
        const uint64_t zip64_end = offset_;
        Record z;
        z.u32(kZip64EndSig).u64(44).u16(kMadeByUnix | kVersionZip64).u16(kVersionZip64).u32(0).u32(0);
        z.u64(count).u64(count).u64(cd_size).u64(cd_offset);
        z.u32(kZip64LocatorSig).u32(0).u64(zip64_end).u32(1);
        put(z.b.data(), z.b.size());
    }
    Record end;
    const uint16_t count16 = count >= kMax16 ? kMax16 : static_cast<uint16_t>(count);
    end.u32(kEndSig).u16(0).u16(0).u16(count16).u16(count16).u32(clamp32(cd_size)).u32(clamp32(cd_offset)).u16(0);
    put(end.b.data(), end.b.size());
    flush();
}

}  // namespace ckpt
