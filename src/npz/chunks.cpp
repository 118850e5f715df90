// SPDX-License-Identifier: Apache-2.0
#include "npz/chunks.hpp"

#include "core/error.hpp"
#include "npz/crc32.hpp"

#include <cstring>

namespace ckpt::core {

namespace {

// Little-endian fields into a buffer sized beforehand (the byte loops compile to single stores).
class Out {
public:
    explicit Out(unsigned char* p) : p_(p) {}
    template <typename T>
    void put(T v) {
        for (size_t i = 0; i < sizeof(T); ++i) p_[i] = static_cast<unsigned char>(v >> (8 * i));
        p_ += sizeof(T);
    }
    void bytes(const void* data, size_t n) {
        if (n != 0) std::memcpy(p_, data, n);
        p_ += n;
    }

private:
    unsigned char* p_;
};

inline uint64_t le(const unsigned char* q, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= uint64_t{q[i]} << (8 * i);
    return v;
}

constexpr char kMagic[8] = {'C', 'K', 'P', 'T', 'C', 'H', 'N', 'K'};
constexpr uint32_t kVersion = 3;
constexpr size_t kFixedBytes = 8 + 4 + 4 + 8;
constexpr size_t kMemberFixedBytes = 2 + 4 + 4 + 8 + 8;
constexpr size_t kChunkSumBytes = 16 + 4;

// Reads little-endian fields from untrusted bytes.
class Cursor {
public:
    Cursor(const unsigned char* p, size_t n) : p_(p), n_(n) {}
    size_t left() const { return n_ - at_; }
    const unsigned char* take(size_t k, const char* what) {
        if (k > left()) fail(Code::format, "chunk table: {} runs past the table's end ({} bytes)", what, n_);
        const unsigned char* q = p_ + at_;
        at_ += k;
        return q;
    }
    uint64_t uint(size_t bytes, const char* what) { return le(take(bytes, what), bytes); }

private:
    const unsigned char* p_;
    size_t n_;
    size_t at_ = 0;
};

}  // namespace

ChunkSum chunk_sum(const void* data, size_t n, const ChunkSum* base) {
    ChunkSum sum;
    sum.hash = hash128(data, n);
    sum.crc = base != nullptr && base->hash == sum.hash ? base->crc : crc32(0, data, n);
    return sum;
}

uint32_t join_chunks(uint32_t head_crc, const std::vector<ChunkSum>& chunks, uint64_t data_bytes,
                     uint32_t chunk_bytes) {
    const Crc32Join whole(chunk_bytes);
    uint32_t crc = head_crc;
    for (size_t k = 0; k < chunks.size(); ++k) {
        const uint64_t n = std::min<uint64_t>(chunk_bytes, data_bytes - uint64_t{k} * chunk_bytes);
        crc = n == chunk_bytes ? whole(crc, chunks[k].crc) : Crc32Join(n)(crc, chunks[k].crc);
    }
    return crc;
}

std::vector<unsigned char> encode_chunk_table(const ChunkTable& table) {
    size_t size = kFixedBytes;
    for (const ChunkTable::Member& m : table.members)
        size += kMemberFixedBytes + m.name.size() + kChunkSumBytes * m.chunks.size();
    std::vector<unsigned char> bytes(size);
    Out out(bytes.data());
    out.bytes(kMagic, sizeof kMagic);
    out.put(kVersion);
    out.put(table.chunk_bytes);
    out.put(uint64_t{table.members.size()});
    for (const ChunkTable::Member& m : table.members) {
        out.put(static_cast<uint16_t>(m.name.size()));
        out.bytes(m.name.data(), m.name.size());
        out.put(m.crc);
        out.put(m.head_crc);
        out.put(m.data_bytes);
        out.put(uint64_t{m.chunks.size()});
        for (const ChunkSum& c : m.chunks) {
            out.put(c.hash.lo);
            out.put(c.hash.hi);
            out.put(c.crc);
        }
    }
    return bytes;
}

uint64_t chunk_table_bytes(const std::vector<std::pair<size_t, uint64_t>>& name_and_data_bytes, uint32_t chunk_bytes) {
    uint64_t bytes = kFixedBytes;
    for (const auto& [name, data] : name_and_data_bytes)
        bytes += kMemberFixedBytes + name + kChunkSumBytes * chunk_count(data, chunk_bytes);
    return bytes;
}

ChunkTable decode_chunk_table(const unsigned char* data, size_t n) {
    Cursor c(data, n);
    if (std::memcmp(c.take(sizeof kMagic, "the magic"), kMagic, sizeof kMagic) != 0)
        fail(Code::format, "chunk table: it does not begin with CKPTCHNK");
    const uint64_t version = c.uint(4, "the version");
    if (version != kVersion)
        fail(Code::format, "chunk table: version {} is not one this library reads ({})", version, kVersion);
    ChunkTable table;
    table.chunk_bytes = static_cast<uint32_t>(c.uint(4, "the chunk size"));
    if (table.chunk_bytes == 0 || table.chunk_bytes % kBlockAlignment != 0)
        fail(Code::format, "chunk table: chunk size {} is not a positive multiple of {}", table.chunk_bytes,
             kBlockAlignment);
    const uint64_t count = c.uint(8, "the member count");
    if (count > c.left() / kMemberFixedBytes)
        fail(Code::format, "chunk table: {} members cannot fit in its {} bytes", count, n);
    table.members.resize(static_cast<size_t>(count));
    for (ChunkTable::Member& m : table.members) {
        const size_t name_bytes = static_cast<size_t>(c.uint(2, "a member's name length"));
        const unsigned char* name = c.take(name_bytes, "a member's name");
        m.name.assign(reinterpret_cast<const char*>(name), name_bytes);
        m.crc = static_cast<uint32_t>(c.uint(4, "a member's CRC-32"));
        m.head_crc = static_cast<uint32_t>(c.uint(4, "a member's header CRC-32"));
        m.data_bytes = c.uint(8, "a member's size");
        const uint64_t chunks = c.uint(8, "a member's chunk count");
        if (chunks != chunk_count(m.data_bytes, table.chunk_bytes))
            fail(Code::format, "chunk table: member '{}' has {} chunks for {} bytes of {}-byte chunks", m.name, chunks,
                 m.data_bytes, table.chunk_bytes);
        if (chunks > c.left() / kChunkSumBytes)
            fail(Code::format, "chunk table: member '{}' has {} chunks, which run past the table's end", m.name,
                 chunks);
        m.chunks.resize(static_cast<size_t>(chunks));
        const unsigned char* q = c.take(static_cast<size_t>(chunks) * kChunkSumBytes, "the chunks");
        for (ChunkSum& s : m.chunks) {
            s.hash.lo = le(q, 8);
            s.hash.hi = le(q + 8, 8);
            s.crc = static_cast<uint32_t>(le(q + 16, 4));
            q += kChunkSumBytes;
        }
    }
    if (c.left() != 0) fail(Code::format, "chunk table: {} bytes follow its last member", c.left());
    return table;
}

}  // namespace ckpt::core
