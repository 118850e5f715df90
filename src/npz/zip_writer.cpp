// SPDX-License-Identifier: Apache-2.0
#include "npz/zip_writer.hpp"

#include "npz/chunks.hpp"
#include "npz/crc32.hpp"
#include "core/error.hpp"
#include "npz/zip_format.hpp"
#include "incremental/share_runs.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ckpt::core {

namespace {

using namespace zip;

constexpr uint16_t kVersion20 = 20;
constexpr uint16_t kVersionZip64 = 45;
constexpr uint16_t kMadeByUnix = 3 << 8;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, what Python's zipfile writes
constexpr uint32_t kRegularFile0644 = 0100644u << 16;

constexpr size_t kBufferBytes = size_t{1} << 20;
// After this many chunks in a row that differed from the base's, a save against it stops waiting for hashes not yet
// computed (a megabyte of 16 KiB chunks): an array that changed is written at the speed of one that has no base.
constexpr size_t kWaitAfterDiffering = 64;
constexpr size_t kChunk = size_t{64} << 20;  // progress granularity
constexpr size_t kSourcePiece = size_t{4} << 20;  // bytes read from a source per call

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
    template <typename Bytes>
    Record& bytes(const Bytes& s) {
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

void ZipWriter::for_each_run(const Piece& p, const std::function<void(const void*, size_t)>& f) {
    if (p.source == nullptr) {
        const char* d = static_cast<const char*>(p.data);
        for (size_t done = 0; done < p.size; done += std::min(p.size - done, kChunk))
            f(d + done, std::min(p.size - done, kChunk));
        return;
    }
    std::vector<unsigned char> bytes(std::min(p.size, kSourcePiece));
    for (size_t done = 0; done < p.size;) {
        const size_t n = std::min(p.size - done, kSourcePiece);
        (*p.source)(done, bytes.data(), n);
        f(bytes.data(), n);
        done += n;
    }
}

uint32_t ZipWriter::crc_of(const std::vector<Piece>& pieces) {
    uint32_t crc = 0;
    for (const auto& p : pieces) for_each_run(p, [&](const void* d, size_t n) { crc = crc32(crc, d, n); });
    return crc;
}

ZipWriter::Entry ZipWriter::start_entry(const std::string& name, uint64_t size, uint16_t method) const {
    if (name.size() > kMax16) fail(Code::invalid, "member name '{}' is longer than a zip allows", name);
    return Entry{name, offset_, 0, size, 0, method, static_cast<uint16_t>(is_ascii(name) ? 0 : kFlagUtf8), {}};
}

void ZipWriter::patch(uint64_t offset, const void* data, size_t n) {
    const uint64_t buffered = offset_ - buf_.size();  // the offset of buf_'s first byte
    if (offset >= buffered) {
        std::memcpy(buf_.data() + (offset - buffered), data, n);
    } else {
        if (offset + n > buffered) throw std::logic_error("ZipWriter::patch across the buffer's start");
        out_.patch(offset, data, n);
    }
}

void ZipWriter::add_stored(const std::string& name, const std::vector<Piece>& pieces, const OnBytes& on_bytes,
                           const std::function<uint32_t()>& crc, size_t head, CrcWhen when) {
    add_stored(name, pieces, on_bytes, crc, head, when, nullptr);
}

void ZipWriter::put_chunked(const Piece& piece, Chunking& ch, bool crc_here, uint32_t& running, const OnBytes& on_bytes,
                            uint64_t& at) {
    if (crc_here && ch.hash_of)
        throw std::logic_error("ZipWriter::put_chunked: a CRC computed here needs the chunks' CRC-32s computed here");
    const Crc32Join whole(ch.chunk_bytes);
    size_t differed = 0;  // chunks compared with the base's in a row that differed
    // Runs to write go out in large steps (a step of kBufferBytes goes to the output directly, without a copy into
    // the buffer).
    ShareRuns runs(
        [&](const char* data, uint64_t from, uint64_t n) {
            flush();
            ch.shared += out_.clone_from(*ch.base, from, n, data);
            offset_ += n;
        },
        [&](const char* data, size_t n) { put(data, n); }, kBufferBytes);
    for_each_run(piece, [&](const void* p, size_t n) {
        // Runs are offered to the output only while it may share them; else they are written as any bytes are.
        const bool base = ch.base != nullptr && ch.base_sums != nullptr && out_.may_share();
        // Runs begin at multiples of the chunk size (64 MiB of memory, 4 MiB of a source), so chunks never span two.
        const char* c = static_cast<const char*>(p);
        for (size_t done = 0; done < n;) {
            const size_t len = std::min<size_t>(n - done, ch.chunk_bytes);
            const size_t k = ch.sums.size();
            // Whether the chunk could be shared with the base's, which takes its hash now; a thread's hashes that
            // nothing waits for are the table's, taken with the thread's sums once the member is written.
            bool comparable = base && len == ch.chunk_bytes && k < ch.base_sums->size();
            ChunkSum sum;
            if (!ch.hash_of) {
                sum = chunk_sum(c + done, len);
            } else if (comparable) {
                // After a run of chunks that all differed, a hash not computed yet is not waited for: the chunk
                // is written (as it most likely would be), and the writer keeps writing instead of hashing.
                const std::optional<Hash128> hash = ch.hash_of(k, differed < kWaitAfterDiffering);
                comparable = hash.has_value();
                if (hash) sum.hash = *hash;
            }
            if (crc_here)  // (crc_here: no thread computes the sums) the member's CRC from the chunk's
                running = len == ch.chunk_bytes ? whole(running, sum.crc) : Crc32Join(len)(running, sum.crc);
            ch.sums.push_back(sum);
            const bool same = comparable && (*ch.base_sums)[k].hash == sum.hash;
            if (comparable) differed = same ? 0 : differed + 1;
            if (same)
                runs.shared(c + done, len, ch.base_offset + uint64_t{k} * ch.chunk_bytes);
            else
                runs.written(c + done, len);
            done += len;
        }
        runs.flush();  // the run's bytes may change once the next one is offered
        if (on_bytes) on_bytes(at, n);
        at += n;
    });
}

uint32_t ZipWriter::add_stored(const std::string& name, const std::vector<Piece>& pieces, const OnBytes& on_bytes,
                               const std::function<uint32_t()>& crc, size_t head, CrcWhen when, Chunking* chunking) {
    if (chunking != nullptr &&
        (pieces.size() != 2 || chunking->chunk_bytes == 0 || chunking->chunk_bytes % kBlockAlignment != 0 ||
         (size_t{4} << 20) % chunking->chunk_bytes != 0))
        throw std::logic_error(
            "ZipWriter::add_stored: chunking needs a header and an array, and a chunk size that "
            "is a multiple of the block and divides 4 MiB");
    if (when == CrcWhen::after_data && !out_.can_patch())
        throw std::logic_error("ZipWriter::add_stored: a CRC after the data needs an output that can be patched");
    Entry e = start_entry(name, total_size(pieces), kMethodStore);
    if (when == CrcWhen::before_data) e.crc = crc ? crc() : crc_of(pieces);  // else 0 until patched
    e.compressed = e.size;

    const bool zip64 = e.size >= kMax32;
    Record extra;
    if (zip64) extra.u16(kZip64ExtraId).u16(16).u64(e.size).u64(e.size);
    // Pad the extra field so the data starts on a kAlignment boundary: an alignment field holds the alignment
    // (u16) and then zeros.
    // A chunked array's first byte (after the header piece) on a block boundary instead.
    const uint64_t unpadded =
        e.offset + kLocalHeaderBytes + e.name.size() + extra.b.size() + 6 + (chunking != nullptr ? pieces[0].size : 0);
    const uint64_t alignment = chunking != nullptr ? kBlockAlignment : kAlignment;
    const uint16_t pad = static_cast<uint16_t>((alignment - unpadded % alignment) % alignment);
    extra.u16(kAlignmentExtraId).u16(static_cast<uint16_t>(2 + pad)).u16(static_cast<uint16_t>(kAlignment));
    extra.b.resize(extra.b.size() + pad, 0);

    Record h;
    h.u32(kLocalHeaderSig).u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method);
    h.u16(0).u16(kDosDate1980).u32(e.crc).u32(clamp32(e.size)).u32(clamp32(e.size));
    h.u16(static_cast<uint16_t>(e.name.size())).u16(static_cast<uint16_t>(extra.b.size())).bytes(e.name);
    h.b.insert(h.b.end(), extra.b.begin(), extra.b.end());
    put(h.b.data(), h.b.size());

    if (head > 0) {
        if (pieces.empty() || head > pieces[0].size || head > kMax32 || pieces[0].source != nullptr)
            throw std::logic_error("ZipWriter::add_stored: the head to copy is not in the first piece");
        const char* p = static_cast<const char*>(pieces[0].data);
        size_t kept = head;
        if (p[kept - 1] == '\n') {
            --kept;
            while (kept > 0 && p[kept - 1] == ' ' && head - kept < kHeadCopyMaxPadding) --kept;
        }
        Record copy;
        copy.u16(static_cast<uint16_t>(extra.b.size())).u32(static_cast<uint32_t>(head));
        copy.b.insert(copy.b.end(), p, p + kept);
        e.head_copy = std::move(copy.b);
    }

    // Computed here, as the data is written: in buffer-sized steps, so the write copies bytes the CRC just read
    // from cache (a step of kBufferBytes goes to the output directly, not through the buffer).
    const bool crc_here = when == CrcWhen::after_data && !crc;
    uint32_t running = 0;
    uint64_t at = 0;
    for (const Piece& piece : pieces) {
        if (chunking != nullptr && &piece == &pieces[1]) {
            put_chunked(piece, *chunking, crc_here, running, on_bytes, at);
            continue;
        }
        for_each_run(piece, [&](const void* p, size_t n) {
            if (crc_here) {
                const char* c = static_cast<const char*>(p);
                for (size_t done = 0; done < n;) {
                    const size_t step = std::min(n - done, kBufferBytes);
                    running = crc32(running, c + done, step);
                    put(c + done, step);
                    done += step;
                }
            } else {
                put(p, n);
            }
            if (on_bytes) on_bytes(at, n);
            at += n;
        });
    }
    if (when == CrcWhen::after_data) {
        e.crc = crc_here ? running : crc();
        Record field;
        field.u32(e.crc);
        patch(e.offset + kLocalHeaderCrcOffset, field.b.data(), field.b.size());
    }
    const uint32_t member_crc = e.crc;
    entries_.push_back(std::move(e));
    return member_crc;
}

void ZipWriter::add_deflated(const std::string& name, uint64_t size, DeflateAhead& source, const OnBytes& on_bytes) {
    Entry e = start_entry(name, size, kMethodDeflate);
    // The compressed size is known only at the end: sizes go in a data descriptor after the data. zip64 is
    // decided up front from the worst case deflate can produce.
    const bool zip64 = e.size >= kMax32 || DeflateAhead::bound(e.size) >= kMax32;
    e.flags |= kFlagDataDescriptor;
    Record h;
    h.u32(kLocalHeaderSig).u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method);
    h.u16(0).u16(kDosDate1980).u32(0).u32(zip64 ? kMax32 : 0).u32(zip64 ? kMax32 : 0);
    h.u16(static_cast<uint16_t>(e.name.size())).u16(zip64 ? 20 : 0).bytes(e.name);
    if (zip64) h.u16(kZip64ExtraId).u16(16).u64(0).u64(0);
    put(h.b.data(), h.b.size());

    uint64_t at = 0;
    for (bool last = false; !last;) {
        const DeflateAhead::Block b = source.take();
        put(b.out.data(), b.out.size());
        e.compressed += b.out.size();
        e.crc = at == 0 ? b.crc : static_cast<uint32_t>(crc32_combine(e.crc, b.crc, static_cast<z_off_t>(b.in_bytes)));
        if (on_bytes) on_bytes(at, b.in_bytes);
        at += b.in_bytes;
        last = b.last;
    }
    if (at != e.size) fail(Code::error, "member '{}': {} bytes compressed, {} expected", e.name, at, e.size);

    Record d;
    d.u32(kDataDescriptorSig).u32(e.crc);
    if (zip64)
        d.u64(e.compressed).u64(e.size);
    else
        d.u32(static_cast<uint32_t>(e.compressed)).u32(static_cast<uint32_t>(e.size));
    put(d.b.data(), d.b.size());
    entries_.push_back(std::move(e));
}

uint64_t ZipWriter::finish() {
    const uint64_t cd_offset = offset_;
    for (const Entry& e : entries_) {
        Record extra;
        if (e.size >= kMax32) extra.u64(e.size);
        if (e.compressed >= kMax32) extra.u64(e.compressed);
        if (e.offset >= kMax32) extra.u64(e.offset);
        const bool zip64 = !extra.b.empty();
        if (zip64) {
            Record field;
            field.u16(kZip64ExtraId).u16(static_cast<uint16_t>(extra.b.size()));
            extra.b.insert(extra.b.begin(), field.b.begin(), field.b.end());
        }
        // The head copy goes only where the extra field, at most 64 KiB, has room for it.
        if (!e.head_copy.empty() && extra.b.size() + 4 + e.head_copy.size() <= kMax16)
            extra.u16(kHeadCopyExtraId).u16(static_cast<uint16_t>(e.head_copy.size())).bytes(e.head_copy);
        Record c;
        c.u32(kCentralHeaderSig).u16(kMadeByUnix | (zip64 ? kVersionZip64 : kVersion20));
        c.u16(zip64 ? kVersionZip64 : kVersion20).u16(e.flags).u16(e.method).u16(0).u16(kDosDate1980);
        c.u32(e.crc).u32(clamp32(e.compressed)).u32(clamp32(e.size));
        c.u16(static_cast<uint16_t>(e.name.size())).u16(static_cast<uint16_t>(extra.b.size()));
        c.u16(0).u16(0).u16(0).u32(kRegularFile0644).u32(clamp32(e.offset)).bytes(e.name);
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
    return offset_;
}

}  // namespace ckpt::core
