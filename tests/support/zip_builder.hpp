// SPDX-License-Identifier: Apache-2.0
// A tiny, test-only zip writer that can lie. Header-only; needs zlib (crc32, raw deflate).
//
// It writes what the zip appnote describes — local file headers, member data, optional data descriptors, the
// central directory, an optional zip64 end-of-central-directory record and locator, and the end-of-central-
// directory record — and every field can be overridden so that tests can build archives that are malformed in
// one precise way: sizes, CRC, offsets, names, counts, flags and compression methods that disagree with the data.
//
// Also: npy_member(), which makes the bytes of a .npy file (the content of one npz member) the way numpy writes
// them, or with any header text at all.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zipb {

constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
constexpr uint16_t kBzip2 = 12;
constexpr uint16_t kFlagEncrypted = 1u << 0;
constexpr uint16_t kFlagDataDescriptor = 1u << 3;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;

inline void put16(std::string& out, uint64_t v) {
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>((v >> 8) & 0xff);
}
inline void put32(std::string& out, uint64_t v) {
    put16(out, v & 0xffff);
    put16(out, (v >> 16) & 0xffff);
}
inline void put64(std::string& out, uint64_t v) {
    put32(out, v & 0xffffffffu);
    put32(out, v >> 32);
}
// Overwrites the little-endian field of `width` bytes at `at`.
inline void patch(std::string& bytes, size_t at, uint64_t v, size_t width) {
    if (at + width > bytes.size()) throw std::out_of_range("zipb::patch beyond the end");
    for (size_t i = 0; i < width; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint64_t get(const std::string& bytes, size_t at, size_t width) {
    if (at + width > bytes.size()) throw std::out_of_range("zipb::get beyond the end");
    uint64_t v = 0;
    for (size_t i = 0; i < width; ++i) v |= uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    return v;
}

inline uint32_t crc32_of(const std::string& data) {
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t done = 0;
    while (done < data.size()) {
        const uInt n = static_cast<uInt>(std::min<size_t>(data.size() - done, 1u << 30));
        crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + done), n);
        done += n;
    }
    return static_cast<uint32_t>(crc);
}

// Raw deflate (no zlib or gzip wrapper: windowBits -15), as zip members hold it.
inline std::string raw_deflate(const std::string& data, int level = Z_DEFAULT_COMPRESSION) {
    z_stream zs{};
    if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("deflateInit2 failed");
    std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    const size_t produced = out.size() - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
    out.resize(produced);
    return out;
}

struct Member {
    std::string name;                     // name in the central directory (and the local header)
    std::string data;                     // uncompressed content
    uint16_t method = kStored;            // kStored and kDeflated compress `data`; anything else stores it as is
    uint16_t flags = 0;                   // general purpose bit flags (kFlagDataDescriptor is added by data_descriptor)
    bool data_descriptor = false;         // zeros in the local header, a descriptor after the data
    bool descriptor_signature = true;     // write PK\7\8 before the descriptor
    std::optional<bool> descriptor_zip64; // 8-byte sizes in the descriptor; by default exactly when zip64 is set
    bool zip64 = false;                   // zip64 extra field in both headers, 0xffffffff in the 32-bit fields
    bool local_zip64_extra = true;        // with zip64: false leaves the 0xffffffff markers without the extra field
    bool central_zip64_extra = true;      //   (in the local header, or in the central directory)
    uint16_t version_needed = 20;         // 45 is written when zip64 is set
    uint32_t external_attributes = 0100644u << 16;

    // Lies. Each override applies to both headers unless a local_* one is given as well.
    std::optional<std::string> compressed;         // the member's stored bytes instead of data compressed by method
    std::optional<uint32_t> crc;
    std::optional<uint64_t> comp_size;
    std::optional<uint64_t> uncomp_size;
    std::optional<std::string> local_name;
    std::optional<uint32_t> local_crc;
    std::optional<uint64_t> local_comp_size;
    std::optional<uint64_t> local_uncomp_size;
    std::optional<uint16_t> local_method;
    std::optional<uint32_t> descriptor_crc;         // lies in the data descriptor alone (after local_* ones)
    std::optional<uint64_t> descriptor_comp_size;
    std::optional<uint64_t> descriptor_uncomp_size;
    std::optional<uint64_t> central_offset;        // offset of the local header as the central directory says
    bool write_local = true;                        // false: only a central entry (use central_offset or share_local_of)
    std::optional<size_t> share_local_of;           // central entry points at another member's local header
    std::string central_extra;                      // appended to the central entry's extra field (head_copy())

    std::string stored_bytes() const {
        if (compressed) return *compressed;
        if (method == kDeflated) return raw_deflate(data);
        return data;
    }
};

struct Archive {
    std::vector<Member> members;
    std::string prefix;           // bytes before the first local header
    std::string comment;          // EOCD comment
    bool zip64_eocd = false;      // write a zip64 EOCD record and locator

    // Lies in the end records.
    std::optional<uint64_t> entries;          // both entry counts of the EOCD (16-bit fields)
    std::optional<uint64_t> cd_size;          // EOCD central directory size
    std::optional<uint64_t> cd_offset;        // EOCD central directory offset
    std::optional<uint64_t> entries64;        // both entry counts of the zip64 EOCD record
    std::optional<uint64_t> cd_size64;
    std::optional<uint64_t> cd_offset64;
    std::optional<uint64_t> eocd64_offset;    // where the locator says the zip64 EOCD record is
    std::optional<uint64_t> eocd64_record_size;
    std::optional<uint16_t> comment_length;   // EOCD comment length field
};

// Byte positions of the parts of an archive that build() wrote, for tests that flip or cut specific bytes.
struct Layout {
    std::vector<size_t> local_offsets;  // local header of each member (SIZE_MAX when not written)
    std::vector<size_t> data_offsets;   // first byte of each member's stored data
    std::vector<size_t> data_sizes;     // stored bytes of each member
    std::vector<size_t> central_offsets;
    size_t cd_offset = 0;
    size_t cd_size = 0;
    size_t eocd64_offset = SIZE_MAX;
    size_t eocd_offset = 0;
};

namespace detail {

inline uint16_t version_of(const Member& m) { return m.zip64 ? std::max<uint16_t>(m.version_needed, 45) : m.version_needed; }
inline uint16_t flags_of(const Member& m) {
    return static_cast<uint16_t>(m.flags | (m.data_descriptor ? kFlagDataDescriptor : 0));
}

inline std::string local_record(const Member& m, const std::string& stored) {
    const uint32_t crc = m.local_crc ? *m.local_crc : m.crc ? *m.crc : crc32_of(m.data);
    const uint64_t csize = m.local_comp_size ? *m.local_comp_size : m.comp_size ? *m.comp_size : stored.size();
    const uint64_t usize = m.local_uncomp_size ? *m.local_uncomp_size : m.uncomp_size ? *m.uncomp_size : m.data.size();
    const std::string& name = m.local_name ? *m.local_name : m.name;
    std::string extra;
    if (m.zip64 && m.local_zip64_extra) {
        put16(extra, 0x0001);
        put16(extra, 16);
        put64(extra, m.data_descriptor ? 0 : usize);
        put64(extra, m.data_descriptor ? 0 : csize);
    }
    std::string out = "PK\x03\x04";
    put16(out, version_of(m));
    put16(out, flags_of(m));
    put16(out, m.local_method ? *m.local_method : m.method);
    put16(out, 0);  // time
    put16(out, kDosDate1980);
    if (m.data_descriptor) {
        put32(out, 0);
        put32(out, m.zip64 ? 0xffffffffu : 0);
        put32(out, m.zip64 ? 0xffffffffu : 0);
    } else {
        put32(out, crc);
        put32(out, m.zip64 ? 0xffffffffu : csize);
        put32(out, m.zip64 ? 0xffffffffu : usize);
    }
    put16(out, name.size());
    put16(out, extra.size());
    out += name;
    out += extra;
    return out;
}

inline std::string descriptor(const Member& m, const std::string& stored) {
    std::string out;
    if (m.descriptor_signature) out += "PK\x07\x08";
    put32(out, m.descriptor_crc ? *m.descriptor_crc : m.local_crc ? *m.local_crc : m.crc ? *m.crc : crc32_of(m.data));
    const uint64_t csize = m.descriptor_comp_size ? *m.descriptor_comp_size
                           : m.local_comp_size    ? *m.local_comp_size
                           : m.comp_size          ? *m.comp_size
                                                  : stored.size();
    const uint64_t usize = m.descriptor_uncomp_size ? *m.descriptor_uncomp_size
                           : m.local_uncomp_size    ? *m.local_uncomp_size
                           : m.uncomp_size          ? *m.uncomp_size
                                                    : m.data.size();
    if (m.descriptor_zip64.value_or(m.zip64)) {
        put64(out, csize);
        put64(out, usize);
    } else {
        put32(out, csize);
        put32(out, usize);
    }
    return out;
}

inline std::string central_record(const Member& m, const std::string& stored, uint64_t offset) {
    const uint32_t crc = m.crc ? *m.crc : crc32_of(m.data);
    const uint64_t csize = m.comp_size ? *m.comp_size : stored.size();
    const uint64_t usize = m.uncomp_size ? *m.uncomp_size : m.data.size();
    std::string extra;
    if (m.zip64 && m.central_zip64_extra) {
        put16(extra, 0x0001);
        put16(extra, 24);
        put64(extra, usize);
        put64(extra, csize);
        put64(extra, offset);
    }
    extra += m.central_extra;
    std::string out = "PK\x01\x02";
    put16(out, (3 << 8) | 45);  // made by: Unix, 4.5
    put16(out, version_of(m));
    put16(out, flags_of(m));
    put16(out, m.method);
    put16(out, 0);
    put16(out, kDosDate1980);
    put32(out, crc);
    put32(out, m.zip64 ? 0xffffffffu : csize);
    put32(out, m.zip64 ? 0xffffffffu : usize);
    put16(out, m.name.size());
    put16(out, extra.size());
    put16(out, 0);  // comment length
    put16(out, 0);  // disk number start
    put16(out, 0);  // internal attributes
    put32(out, m.external_attributes);
    put32(out, m.zip64 ? 0xffffffffu : offset);
    out += m.name;
    out += extra;
    return out;
}

}  // namespace detail

// The bytes a member's local record would have (header + stored data + descriptor), e.g. to quote it inside
// another member's data.
inline std::string local_record_bytes(const Member& m) {
    const std::string stored = m.stored_bytes();
    std::string out = detail::local_record(m, stored) + stored;
    if (m.data_descriptor) out += detail::descriptor(m, stored);
    return out;
}

inline std::string build(const Archive& a, Layout* layout = nullptr) {
    Layout lay;
    std::string out = a.prefix;
    std::vector<std::string> stored(a.members.size());
    for (size_t i = 0; i < a.members.size(); ++i) {
        const Member& m = a.members[i];
        stored[i] = m.stored_bytes();
        if (!m.write_local) {
            lay.local_offsets.push_back(SIZE_MAX);
            lay.data_offsets.push_back(SIZE_MAX);
            lay.data_sizes.push_back(0);
            continue;
        }
        lay.local_offsets.push_back(out.size());
        out += detail::local_record(m, stored[i]);
        lay.data_offsets.push_back(out.size());
        lay.data_sizes.push_back(stored[i].size());
        out += stored[i];
        if (m.data_descriptor) out += detail::descriptor(m, stored[i]);
    }
    const size_t cd_start = out.size();
    for (size_t i = 0; i < a.members.size(); ++i) {
        const Member& m = a.members[i];
        uint64_t offset = lay.local_offsets[i];
        if (m.share_local_of) offset = lay.local_offsets.at(*m.share_local_of);
        if (m.central_offset) offset = *m.central_offset;
        lay.central_offsets.push_back(out.size());
        out += detail::central_record(m, stored[i], offset);
    }
    const size_t cd_size = out.size() - cd_start;
    lay.cd_offset = cd_start;
    lay.cd_size = cd_size;
    const uint64_t n = a.members.size();
    if (a.zip64_eocd) {
        const size_t record_at = out.size();
        lay.eocd64_offset = record_at;
        out += "PK\x06\x06";
        put64(out, a.eocd64_record_size ? *a.eocd64_record_size : 44);
        put16(out, (3 << 8) | 45);
        put16(out, 45);
        put32(out, 0);  // this disk
        put32(out, 0);  // disk with the central directory
        put64(out, a.entries64 ? *a.entries64 : n);
        put64(out, a.entries64 ? *a.entries64 : n);
        put64(out, a.cd_size64 ? *a.cd_size64 : cd_size);
        put64(out, a.cd_offset64 ? *a.cd_offset64 : cd_start);
        out += "PK\x06\x07";
        put32(out, 0);
        put64(out, a.eocd64_offset ? *a.eocd64_offset : record_at);
        put32(out, 1);  // total disks
    }
    lay.eocd_offset = out.size();
    out += "PK\x05\x06";
    put16(out, 0);
    put16(out, 0);
    const uint64_t entries = a.entries ? *a.entries : a.zip64_eocd ? 0xffff : n;
    put16(out, entries);
    put16(out, entries);
    put32(out, a.cd_size ? *a.cd_size : a.zip64_eocd ? 0xffffffffu : cd_size);
    put32(out, a.cd_offset ? *a.cd_offset : a.zip64_eocd ? 0xffffffffu : cd_start);
    put16(out, a.comment_length ? *a.comment_length : a.comment.size());
    out += a.comment;
    if (layout != nullptr) *layout = lay;
    return out;
}

// ckpt's head copy field (id 0x6B63, for Member::central_extra): the local extra field's length, the length of
// the head it describes, and the bytes of it that it holds (the rest: spaces and a '\n').
constexpr uint16_t kHeadCopyId = 0x6B63;
inline std::string head_copy(uint16_t local_extra, uint32_t head_len, const std::string& kept) {
    std::string out;
    put16(out, kHeadCopyId);
    put16(out, 6 + kept.size());
    put16(out, local_extra);
    put32(out, head_len);
    return out + kept;
}

// Where each head copy field (its id) lies in an archive without zip64 end records or comment, as ckpt writes
// small ones, in central directory order.
inline std::vector<size_t> head_copies(const std::string& bytes) {
    const size_t end = bytes.size() - 22;
    if (get(bytes, end, 4) != 0x06054b50) throw std::runtime_error("head_copies: no end record at the end");
    std::vector<size_t> at;
    size_t p = get(bytes, end + 16, 4);
    for (uint64_t i = 0, n = get(bytes, end + 10, 2); i < n; ++i) {
        const size_t name = get(bytes, p + 28, 2), extra = get(bytes, p + 30, 2), comment = get(bytes, p + 32, 2);
        for (size_t f = p + 46 + name; f < p + 46 + name + extra; f += 4 + get(bytes, f + 2, 2))
            if (get(bytes, f, 2) == kHeadCopyId) at.push_back(f);
        p += 46 + name + extra + comment;
    }
    return at;
}

// Turns every head copy into a field readers ignore, as if another writer had made the file.
inline void without_head_copies(std::string& bytes) {
    for (size_t f : head_copies(bytes)) patch(bytes, f, 0x6B00, 2);
}

// ---------------------------------------------------------------------------------------------------- npy

// A .npy file of format major.minor whose header is `dict` (any text), padded with spaces and '\n' to a multiple
// of `align` bytes as numpy does, followed by `data`. The header length field is u16 for major 1, u32 otherwise.
inline std::string npy_raw(const std::string& dict, const std::string& data, unsigned major = 1, unsigned minor = 0,
                           size_t align = 64) {
    const size_t preamble = major == 1 ? 10 : 12;
    const size_t pad = align - (preamble + dict.size() + 1) % align;
    const size_t len = dict.size() + pad + 1;
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += static_cast<char>(minor);
    if (major == 1) put16(out, len);
    else put32(out, len);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out + data;
}

// numpy's dict text: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
inline std::string npy_dict(const std::string& descr, const std::string& shape, bool fortran = false) {
    return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
           ", }";
}

// A valid .npy: `descr` such as "<f4", `shape` as Python writes it, e.g. "(2, 3)" or "(4,)" or "()".
inline std::string npy_member(const std::string& descr, const std::string& shape, const std::string& data) {
    return npy_raw(npy_dict(descr, shape), data);
}

}  // namespace zipb
