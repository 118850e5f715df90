// SPDX-License-Identifier: Apache-2.0
#include "npz/chunks.hpp"

#include "core/error.hpp"
#include "npz/crc32.hpp"

#include <cstring>

namespace ckpt::core {

namespace {

// Odd 64-bit constants with no structure (the first bits of the fractional parts of sqrt(2), sqrt(3), ...).
constexpr uint64_t kKey[8] = {0x6a09e667f3bcc909, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
                              0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179};
constexpr uint64_t kStep = 0x9e3779b97f4a7c15;  // the golden ratio's bits: each block's key differs by it

inline uint64_t load64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// The 128-bit product of a and b, its halves xored: every bit of either input reaches the result.
inline uint64_t fold(uint64_t a, uint64_t b) {
    const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

// A bijective mixer: every input bit flips about half the output bits.
inline uint64_t avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccd;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53;
    return h ^ (h >> 33);
}

// 64-byte blocks, each block's index folded into its keys so that the same bytes elsewhere hash otherwise. Each pair
// of words meets in a product (m); each word is also summed on its own (s), so that a word which happens to cancel
// its key (a zero product) still counts. Eight independent accumulators, in registers, keep the multiplier busy.
struct Lanes {
    uint64_t m0 = kKey[4], m1 = kKey[5], m2 = kKey[6], m3 = kKey[7];
    uint64_t s0 = kKey[0], s1 = kKey[1], s2 = kKey[2], s3 = kKey[3];
};

inline void blocks(Lanes& l, const unsigned char* p, size_t count, uint64_t index) {
    uint64_t m0 = l.m0, m1 = l.m1, m2 = l.m2, m3 = l.m3, s0 = l.s0, s1 = l.s1, s2 = l.s2, s3 = l.s3;
    uint64_t t = (index + 1) * kStep;
    for (size_t i = 0; i < count; ++i, p += 64, t += kStep) {
        const uint64_t a0 = load64(p), b0 = load64(p + 8), a1 = load64(p + 16), b1 = load64(p + 24);
        const uint64_t a2 = load64(p + 32), b2 = load64(p + 40), a3 = load64(p + 48), b3 = load64(p + 56);
        m0 += fold(a0 ^ (kKey[0] + t), b0 ^ kKey[1]);
        m1 += fold(a1 ^ (kKey[2] + t), b1 ^ kKey[3]);
        m2 += fold(a2 ^ (kKey[4] + t), b2 ^ kKey[5]);
        m3 += fold(a3 ^ (kKey[6] + t), b3 ^ kKey[7]);
        s0 += a0 ^ rotl(b0, 29);
        s1 += a1 ^ rotl(b1, 29);
        s2 += a2 ^ rotl(b2, 29);
        s3 += a3 ^ rotl(b3, 29);
    }
    l = Lanes{m0, m1, m2, m3, s0, s1, s2, s3};
}

void put_u16(std::vector<unsigned char>& out, uint16_t v) {
    for (int i = 0; i < 2; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put_u32(std::vector<unsigned char>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put_u64(std::vector<unsigned char>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

constexpr char kMagic[8] = {'C', 'K', 'P', 'T', 'C', 'H', 'N', 'K'};
constexpr uint32_t kVersion = 2;
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
    uint64_t uint(size_t bytes, const char* what) {
        const unsigned char* q = take(bytes, what);
        uint64_t v = 0;
        for (size_t i = 0; i < bytes; ++i) v |= uint64_t{q[i]} << (8 * i);
        return v;
    }

private:
    const unsigned char* p_;
    size_t n_;
    size_t at_ = 0;
};

}  // namespace

Hash128 hash128(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    Lanes l;
    const size_t whole = n / 64;
    blocks(l, p, whole, 0);
    if (n % 64 != 0) {
        unsigned char last[64] = {};
        std::memcpy(last, p + 64 * whole, n % 64);
        blocks(l, last, 1, whole);
    }
    const uint64_t length = static_cast<uint64_t>(n);
    const uint64_t a0 = l.m0 ^ rotl(l.s0, 19), a1 = l.m1 ^ rotl(l.s1, 27), a2 = l.m2 ^ rotl(l.s2, 35),
                   a3 = l.m3 ^ rotl(l.s3, 43);
    Hash128 h;
    h.lo = avalanche(a0 + rotl(a1, 17) + rotl(a2, 31) + rotl(a3, 47) + length * kKey[0]);
    h.hi = avalanche(fold(a0 ^ kKey[1], a2 ^ kKey[2]) + fold(a1 ^ kKey[3], a3 ^ kKey[4]) + length);
    return h;
}

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
    std::vector<unsigned char> out(kMagic, kMagic + sizeof kMagic);
    put_u32(out, kVersion);
    put_u32(out, table.chunk_bytes);
    put_u64(out, table.members.size());
    for (const ChunkTable::Member& m : table.members) {
        put_u16(out, static_cast<uint16_t>(m.name.size()));
        out.insert(out.end(), m.name.begin(), m.name.end());
        put_u32(out, m.crc);
        put_u32(out, m.head_crc);
        put_u64(out, m.data_bytes);
        put_u64(out, m.chunks.size());
        for (const ChunkSum& c : m.chunks) {
            put_u64(out, c.hash.lo);
            put_u64(out, c.hash.hi);
            put_u32(out, c.crc);
        }
    }
    return out;
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
        for (ChunkSum& s : m.chunks) {
            s.hash.lo = c.uint(8, "a hash");
            s.hash.hi = c.uint(8, "a hash");
            s.crc = static_cast<uint32_t>(c.uint(4, "a chunk's CRC-32"));
        }
    }
    if (c.left() != 0) fail(Code::format, "chunk table: {} bytes follow its last member", c.left());
    return table;
}

}  // namespace ckpt::core
