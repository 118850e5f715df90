// SPDX-License-Identifier: Apache-2.0
#include "npz/zip_reader.hpp"

#include "core/cores.hpp"
#include "core/error.hpp"
#include "core/find_duplicate.hpp"
#include "core/in_order_shares.hpp"
#include "core/utf8.hpp"
#include "npz/zip_format.hpp"
#include "storage/read_ahead.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

namespace ckpt::core {

namespace {

using namespace zip;

constexpr size_t kMaxComment = 0xFFFF;
// Opening reads local headers that lie close together this many bytes at a time.
constexpr size_t kWindowBytes = size_t{256} << 10;
// Opening reads each local header with room for an extra field this long and this many bytes of data after it.
constexpr size_t kExtraSlack = 96;
constexpr size_t kHeadBytes = 192;
// Threads that check the local headers of a large archive (kParallelOpenMembers): at most this many.
constexpr unsigned kMaxOpenThreads = 4;
// How much of a file that is not in memory a restore reads ahead while opening checks the directory: about what
// the disk reads meanwhile. A cold W2 restore (8192 arrays of 8 KiB) ran at 0.82x a raw read() without it, 0.89x
// reading 2 or 4 MiB ahead and 0.90x reading 8 MiB; restores of large arrays did not move (bench_npz W1, W5).
constexpr uint64_t kReadAheadBytes = uint64_t{8} << 20;
// A data descriptor with its signature and 8-byte (zip64) sizes.
constexpr size_t kLongestDescriptor = 24;

// Bounds-checked little-endian reads from a byte range.
class Cursor {
public:
    Cursor(const unsigned char* p, size_t n) : p_(p), n_(n) {}
    bool has(size_t k) const { return n_ - pos_ >= k; }
    uint16_t u16() { return static_cast<uint16_t>(get(2)); }
    uint32_t u32() { return static_cast<uint32_t>(get(4)); }
    uint64_t u64() { return get(8); }
    const unsigned char* take(size_t k) {
        const unsigned char* at = p_ + pos_;
        pos_ += k;
        return at;
    }
    size_t pos() const { return pos_; }

private:
    uint64_t get(int bytes) {
        uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
        pos_ += bytes;
        return v;
    }
    const unsigned char* p_;
    size_t n_;
    size_t pos_ = 0;
};

uint32_t le32(const unsigned char* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

// Where the zip64 extra field of a header holds the values that the header's 32-bit fields mark as 0xFFFFFFFF.
struct Zip64Fields {
    bool size, compressed, offset;
};

// Replaces the marked fields with the zip64 extra field's values. Returns false if a marked field has no value.
bool apply_zip64_extra(const unsigned char* extra, size_t n, Zip64Fields need, uint64_t& size, uint64_t& compressed,
                       uint64_t* offset, bool& malformed) {
    malformed = false;
    Cursor c(extra, n);
    while (c.has(4)) {
        const uint16_t id = c.u16();
        const uint16_t len = c.u16();
        if (!c.has(len)) {
            malformed = true;
            return false;
        }
        Cursor field(c.take(len), len);
        if (id != kZip64ExtraId) continue;
        if (need.size) {
            if (!field.has(8)) return false;
            size = field.u64();
        }
        if (need.compressed) {
            if (!field.has(8)) return false;
            compressed = field.u64();
        }
        if (need.offset && offset != nullptr) {
            if (!field.has(8)) return false;
            *offset = field.u64();
        }
        return true;
    }
    if (c.pos() != n) malformed = true;  // trailing bytes too short to be a field
    return !need.size && !need.compressed && !(need.offset && offset != nullptr);
}

// The field with this id in an extra field (its bytes, `len` of them), or nullptr if there is none; `malformed`
// is set, and nullptr returned, if the fields do not add up to the whole extra field.
const unsigned char* find_extra_field(const unsigned char* extra, size_t n, uint16_t wanted, size_t& len, bool& malformed) {
    Cursor c(extra, n);
    const unsigned char* found = nullptr;
    size_t found_len = 0;
    while (c.has(4)) {
        const uint16_t id = c.u16();
        const uint16_t field_len = c.u16();
        if (!c.has(field_len)) break;
        const unsigned char* field = c.take(field_len);
        if (id == wanted && found == nullptr) {
            found = field;
            found_len = field_len;
        }
    }
    malformed = c.pos() != n;
    len = malformed ? 0 : found_len;
    return malformed ? nullptr : found;
}

// What a data descriptor says: CRC-32, then the compressed and uncompressed sizes.
struct Descriptor {
    uint32_t crc = 0;
    uint64_t compressed = 0, size = 0;
    size_t bytes = 0;  // its length in the file
};

// Reads the descriptor at p (n bytes available) with or without its signature, with 8-byte (zip64) or 4-byte
// sizes. False if n bytes cannot hold that form.
bool parse_descriptor(const unsigned char* p, size_t n, bool signature, bool zip64, Descriptor& d) {
    const size_t bytes = (signature ? 4 : 0) + 4 + (zip64 ? 16 : 8);
    if (n < bytes) return false;
    Cursor c(p, n);
    if (signature) c.u32();
    d.crc = c.u32();
    d.compressed = zip64 ? c.u64() : c.u32();
    d.size = zip64 ? c.u64() : c.u32();
    d.bytes = bytes;
    return true;
}

}  // namespace

ZipReader::LocalHeader ZipReader::LocalHeader::parse(const unsigned char* p) {
    Cursor l(p, kLocalHeaderBytes);
    LocalHeader h;
    h.signature = l.u32() == kLocalHeaderSig;
    l.u16();  // needed
    h.flags = l.u16();
    h.method = l.u16();
    l.u32();  // time and date
    h.crc = l.u32();
    h.compressed = l.u32();
    h.size = l.u32();
    h.name_len = l.u16();
    h.extra_len = l.u16();
    return h;
}

void ZipReader::check_agrees(const Member& m, LocalHeader h, const unsigned char* variable) const {
    const auto here = [&] { return where(m); };
    if (h.name_len != m.name.size() || std::memcmp(variable, m.name.data(), h.name_len) != 0)
        fail(Code::format, "{}: bad zip entry: its local header names it differently (inconsistent headers)", here());
    if (h.method != m.method || ((h.flags ^ m.flags) & (kFlagDataDescriptor | kFlagEncrypted)) != 0)
        fail(Code::format, "{}: bad zip entry: local header disagrees with the central directory (method or flags)", here());
    if (!(h.flags & kFlagDataDescriptor)) {
        // Without a data descriptor the local header carries the real CRC and sizes (zip64: in its extra).
        const Zip64Fields local_need{h.size == kMax32, h.compressed == kMax32, false};
        bool malformed;
        if (!apply_zip64_extra(variable + h.name_len, h.extra_len, local_need, h.size, h.compressed, nullptr, malformed) ||
            malformed)
            fail(Code::format, "{}: bad zip entry: the local zip64 extra field is {}", here(), malformed ? "malformed" : "missing");
        if (h.crc != m.crc || h.size != m.size || h.compressed != m.compressed)
            fail(Code::format, "{}: bad zip entry: local header disagrees with the central directory (CRC or sizes)", here());
    } else {
        // Streamed: the local header holds zeros (0xffffffff with a zip64 extra) or already the real values;
        // anything else is a second, different account of the member (libzip refuses it too).
        const auto plausible = [](uint64_t local, uint64_t real) { return local == 0 || local == kMax32 || local == real; };
        if ((h.crc != 0 && h.crc != m.crc) || !plausible(h.size, m.size) || !plausible(h.compressed, m.compressed))
            fail(Code::format, "{}: bad zip entry: a streamed member's local header disagrees with the central directory "
                 "(CRC or sizes neither zero nor the real ones)", here());
    }
}

std::string_view ZipReader::head(size_t index, std::string& scratch) const {
    const Member& m = members_.at(index);
    if (!m.deferred) return m.head;
    scratch.assign(reinterpret_cast<const char*>(cd_.get() + m.copy_at), m.copy_len);
    if (m.copy_len < m.head_len) {
        scratch.append(m.head_len - m.copy_len - 1, ' ');
        scratch.push_back('\n');
    }
    return scratch;
}

void ZipReader::check_local(size_t index) const {
    const Member& m = members_.at(index);
    if (!m.deferred || local_checked_[index].load(std::memory_order_acquire)) return;
    // Read cached: the member's data, which starts in the same page, is read next. Usually a few hundred bytes.
    const size_t n = static_cast<size_t>(m.data_offset - m.local_offset) + m.head_len;
    unsigned char small[512];
    std::vector<unsigned char> large(n > sizeof small ? n : 0);
    unsigned char* bytes = n > sizeof small ? large.data() : small;
    read_exact_at(m.local_offset, bytes, n, "a local header");
    check_deferred(index, bytes);
}

void ZipReader::check_local(size_t index, const unsigned char* bytes, uint64_t at, size_t n) const {
    const Member& m = members_.at(index);
    if (!m.deferred || local_checked_[index].load(std::memory_order_acquire)) return;
    if (m.local_offset < at || m.data_offset + m.head_len - at > n) return check_local(index);
    check_deferred(index, bytes + (m.local_offset - at));
}

void ZipReader::check_deferred(size_t index, const unsigned char* lh) const {
    const Member& m = members_[index];
    const auto here = [&] { return where(m); };
    const LocalHeader h = LocalHeader::parse(lh);
    if (!h.signature) fail(Code::format, "{}: bad zip entry: no local header at offset {}", here(), m.local_offset);
    if (h.name_len == m.name.size() && h.extra_len != m.local_extra)
        fail(Code::format, "{}: bad zip entry: its local extra field is {} bytes, the central directory's head copy says {} "
             "(inconsistent headers)", here(), h.extra_len, m.local_extra);
    check_agrees(m, h, lh + kLocalHeaderBytes);
    const unsigned char* data = lh + (m.data_offset - m.local_offset);
    bool same = std::memcmp(data, cd_.get() + m.copy_at, m.copy_len) == 0;
    if (m.copy_len < m.head_len) {
        for (size_t k = m.copy_len; k + 1 < m.head_len; ++k) same = same && data[k] == ' ';
        same = same && data[m.head_len - 1] == '\n';
    }
    if (!same)
        fail(Code::format, "{}: bad zip entry: its first {} bytes differ from the central directory's head copy of them "
             "(inconsistent headers)", here(), m.head_len);
    local_checked_[index].store(true, std::memory_order_release);
}

unsigned open_threads(size_t members, const InputFile& file) {
    if (members < kParallelOpenMembers || !file.concurrent_reads()) return 1;
    return std::min(cores(), kMaxOpenThreads);
}

std::string ZipReader::where(const Member& m) const { return fmt::format("{}: member '{}'", label_, printable(m.name)); }

void ZipReader::read_exact_at(uint64_t offset, void* dst, size_t n, const char* what, bool uncached) const {
    // Nothing to read (an empty central directory, a local header without name or extra) may come with a null
    // dst — an empty vector's data() — and memcpy to null is undefined even for 0 bytes.
    if (n == 0) return;
    if ((uncached ? file_.read_uncached_at(offset, dst, n) : file_.read_at(offset, dst, n)) != n)
        fail(Code::format, "{}: not a valid npz (zip) file: {} at offset {} runs past the end of the file", label_, what, offset);
}

ZipReader::~ZipReader() = default;

ZipReader::ZipReader(InputFile& file, std::string label, uint64_t max_members, bool read_ahead)
    : file_(file), label_(std::move(label)) {
    const uint64_t file_size = file_.size();
    if (file_size == 0) fail(Code::format, "{}: empty file, not a valid npz (zip) file", label_);
    if (file_size < kEndBytes)
        fail(Code::format, "{}: not a valid npz (zip) file: {} bytes is too short", label_, file_size);

    // The end record is the last 22 bytes, unless a comment follows it; numpy writes none, but zips may.
    const size_t tail_size = static_cast<size_t>(std::min<uint64_t>(file_size, kEndBytes + kMaxComment));
    std::vector<unsigned char> tail(tail_size);
    read_exact_at(file_size - tail_size, tail.data(), tail_size, "the end of the archive");
    size_t end_at = tail_size;  // position of the end record within `tail`
    for (size_t i = tail_size - kEndBytes + 1; i-- > 0;) {
        if (le32(&tail[i]) == kEndSig && i + kEndBytes + (tail[i + 20] | tail[i + 21] << 8) == tail_size) {
            end_at = i;
            break;
        }
    }
    if (end_at == tail_size) {
        // A zip starts with a local header (or, empty, with its end record): a file that starts otherwise is no
        // zip at all — a torch.save file of the legacy format is a pickle — rather than a damaged one.
        unsigned char start[4];
        read_exact_at(0, start, sizeof start, "the start of the archive");
        if (le32(start) != kLocalHeaderSig && le32(start) != kEndSig)
            fail(Code::format, "{}: not an npz checkpoint: not a zip file (no end of central directory record, and "
                 "it does not start as a zip does)", label_);
        fail(Code::format, "{}: not a valid npz (zip) file: no end of central directory record", label_);
    }
    const uint64_t end_offset = file_size - tail_size + end_at;
    Cursor end(&tail[end_at], kEndBytes);
    end.u32();
    const uint16_t disk = end.u16(), cd_disk = end.u16();
    uint64_t entries_here = end.u16(), entries = end.u16();
    uint64_t cd_size = end.u32(), cd_offset = end.u32();
    if (disk != 0 || cd_disk != 0) fail(Code::unsupported, "{}: multi-disk archives are not supported", label_);

    // zip64: a locator just before the end record points at the zip64 end record, whose values replace the
    // 16- and 32-bit ones.
    uint64_t cd_end = end_offset;  // where the central directory must end
    const bool marked = entries == kMax16 || entries_here == kMax16 || cd_size == kMax32 || cd_offset == kMax32;
    bool has_locator = false;
    unsigned char locator[kZip64LocatorBytes];
    if (end_offset >= kZip64LocatorBytes) {
        if (end_at >= kZip64LocatorBytes)  // in the end of the file read above
            std::memcpy(locator, &tail[end_at - kZip64LocatorBytes], sizeof locator);
        else
            read_exact_at(end_offset - kZip64LocatorBytes, locator, sizeof locator, "the zip64 locator");
        has_locator = le32(locator) == kZip64LocatorSig;
    }
    if (marked && !has_locator)
        fail(Code::format, "{}: not a valid npz (zip) file: the end record needs zip64 values but there is no zip64 locator", label_);
    if (has_locator) {
        Cursor loc(locator, sizeof locator);
        loc.u32();
        const uint32_t loc_disk = loc.u32();
        const uint64_t zip64_end = loc.u64();
        const uint32_t disks = loc.u32();
        if (loc_disk != 0 || disks != 1) fail(Code::unsupported, "{}: multi-disk archives are not supported", label_);
        if (zip64_end > end_offset - kZip64LocatorBytes || end_offset - kZip64LocatorBytes - zip64_end < kZip64EndBytes)
            fail(Code::format, "{}: not a valid npz (zip) file: the zip64 locator points outside the archive ({})", label_, zip64_end);
        unsigned char rec[kZip64EndBytes];
        read_exact_at(zip64_end, rec, sizeof rec, "the zip64 end record");
        Cursor z(rec, sizeof rec);
        if (z.u32() != kZip64EndSig) fail(Code::format, "{}: not a valid npz (zip) file: no zip64 end record where the locator points", label_);
        const uint64_t record_size = z.u64();
        z.u16();  // made by
        z.u16();  // needed
        const uint32_t z_disk = z.u32(), z_cd_disk = z.u32();
        if (z_disk != 0 || z_cd_disk != 0) fail(Code::unsupported, "{}: multi-disk archives are not supported", label_);
        entries_here = z.u64();
        entries = z.u64();
        cd_size = z.u64();
        cd_offset = z.u64();
        // The record may carry an extensible data sector, but must end where the locator starts.
        if (record_size < kZip64EndBytes - 12 || record_size + 12 != end_offset - kZip64LocatorBytes - zip64_end)
            fail(Code::format, "{}: not a valid npz (zip) file: the zip64 end record's size ({}) does not reach the locator", label_, record_size);
        cd_end = zip64_end;
    }
    if (entries != entries_here) fail(Code::format, "{}: not a valid npz (zip) file: the end record counts {} and {} members", label_, entries_here, entries);
    // The directory must end exactly where the end records begin: nothing hides between them, and nothing
    // before the first member (no polyglot prefix).
    if (cd_offset > cd_end || cd_size != cd_end - cd_offset)
        fail(Code::format, "{}: not a valid npz (zip) file: the central directory ({} bytes at offset {}) does not end at the end record ({})",
             label_, cd_size, cd_offset, cd_end);
    if (entries > max_members)
        fail(Code::format, "{}: the zip directory lists {} members, more than the limit of {} (max_members)", label_, entries, max_members);
    if (entries > cd_size / kCentralHeaderBytes)
        fail(Code::format, "{}: not a valid npz (zip) file: {} members cannot fit in a {}-byte central directory", label_, entries, cd_size);

    // Not zeroed first: it is read over at once (1 MiB for 8192 members, where zeroing was 14% of opening); from
    // the end of the file read above when it lies there (any small file).
    cd_.reset(new unsigned char[static_cast<size_t>(cd_size)]);
    const unsigned char* cd = cd_.get();
    if (cd_offset >= file_size - tail_size)
        std::copy_n(&tail[static_cast<size_t>(cd_offset - (file_size - tail_size))], static_cast<size_t>(cd_size), cd_.get());
    else
        read_exact_at(cd_offset, cd_.get(), static_cast<size_t>(cd_size), "the central directory");
    if (const uint64_t ahead = std::min<uint64_t>(cd_offset, kReadAheadBytes);
        read_ahead && ahead > 0 && file_.concurrent_reads() && !file_.cached(0, ahead)) {
        try {
            read_ahead_ = std::make_unique<ReadAhead>(file_, ahead);
        } catch (const std::exception&) {
            // No thread (or memory for one): the restore reads without it.
        }
    }
    Cursor c(cd, static_cast<size_t>(cd_size));
    members_.reserve(static_cast<size_t>(entries));
    for (uint64_t i = 0; i < entries; ++i) {
        if (!c.has(kCentralHeaderBytes) || c.u32() != kCentralHeaderSig)
            fail(Code::format, "{}: not a valid npz (zip) file: central directory entry #{} is malformed", label_, i);
        Member m;
        c.u16();  // made by
        c.u16();  // needed
        m.flags = c.u16();
        m.method = c.u16();
        c.u32();  // time and date
        m.crc = c.u32();
        m.compressed = c.u32();
        m.size = c.u32();
        const uint16_t name_len = c.u16(), extra_len = c.u16(), comment_len = c.u16();
        const uint16_t start_disk = c.u16();
        c.u16();  // internal attributes
        c.u32();  // external attributes
        m.local_offset = c.u32();
        if (!c.has(size_t{name_len} + extra_len + comment_len))
            fail(Code::format, "{}: not a valid npz (zip) file: central directory entry #{} runs past the directory", label_, i);
        m.name.assign(reinterpret_cast<const char*>(c.take(name_len)), name_len);
        const unsigned char* extra = c.take(extra_len);
        c.take(comment_len);
        // Formatted only when something fails: most archives have many members and no failures.
        const auto here = [&] { return where(m); };

        if (m.name.empty()) fail(Code::format, "{}: bad zip entry: empty member name", here());
        if (m.name.find('\0') != std::string::npos) fail(Code::format, "{}: bad zip entry: member name contains NUL", here());
        if (!valid_utf8(m.name)) fail(Code::format, "{}: bad zip entry: member name is not valid UTF-8", here());
        if (start_disk != 0 && start_disk != kMax16) fail(Code::unsupported, "{}: multi-disk archives are not supported", here());
        if (m.flags & (kFlagEncrypted | kFlagStrongEncryption))
            fail(Code::unsupported, "{}: encrypted members are not supported", here());
        if (m.method != 0 && m.method != 8)
            fail(Code::unsupported, "{}: compression method {} is not supported (only stored and deflate)", here(), m.method);
        bool malformed;
        const Zip64Fields need{m.size == kMax32, m.compressed == kMax32, m.local_offset == kMax32};
        if (!apply_zip64_extra(extra, extra_len, need, m.size, m.compressed, &m.local_offset, malformed) || malformed)
            fail(Code::format, "{}: bad zip entry: the zip64 extra field is {}", here(), malformed ? "malformed" : "missing");
        size_t copy_len;
        if (const unsigned char* copy = find_extra_field(extra, extra_len, kHeadCopyExtraId, copy_len, malformed)) {
            if (copy_len < kHeadCopyFixedBytes)
                fail(Code::format, "{}: bad zip entry: ckpt's head copy field is {} bytes, too short", here(), copy_len);
            if (m.method != kMethodStore || (m.flags & kFlagDataDescriptor))
                fail(Code::format, "{}: bad zip entry: ckpt's head copy field is on a member that is not stored", here());
            Cursor f(copy, copy_len);
            m.local_extra = f.u16();
            m.head_len = f.u32();
            m.copy_len = static_cast<uint32_t>(copy_len - kHeadCopyFixedBytes);
            m.copy_at = static_cast<size_t>(copy - cd) + kHeadCopyFixedBytes;
            if (m.copy_len > m.head_len || m.head_len - m.copy_len > kHeadCopyMaxPadding || m.head_len > m.size)
                fail(Code::format, "{}: bad zip entry: ckpt's head copy holds {} of the first {} bytes of a {}-byte member",
                     here(), m.copy_len, m.head_len, m.size);
            m.deferred = true;
        }
        members_.push_back(std::move(m));
    }
    if (c.pos() != cd_size) fail(Code::format, "{}: not a valid npz (zip) file: {} stray bytes after the central directory", label_, cd_size - c.pos());
    local_checked_ = std::make_unique<std::atomic<bool>[]>(members_.size());
    // Names must be unique; of two equal ones, the later in the directory is reported.
    if (const auto d = find_duplicate(members_.size(), [&](size_t i) -> const std::string& { return members_[i].name; }))
        fail(Code::format, "{}: bad zip entry: duplicate member name", where(members_[d->second]));

    // Local headers lie one per member through the file. Where the next one is near, one read of kWindowBytes
    // brings it and many after it: for many small members, a few large sequential reads instead of one small
    // read per member — which, from a cold page cache, would each wait for the disk. A lone one, amid a large
    // member's data, is read uncached: pages left cached there would slow the later stream over them.
    // Large archives are checked on several threads, each through a contiguous share of the members with a
    // window of its own (for_each_in_order_shares: the error is the one a single thread would report).
    struct Window {
        std::vector<unsigned char> bytes;  // the file's bytes [at, at + bytes.size())
        uint64_t at = 0;
        std::vector<unsigned char> scratch;  // a local header with its name and extra field
    };
    // Returns the file's bytes [offset, offset + n), from the end of the file read above for the end record where
    // it holds them (the last member's data descriptor, just before the directory; all of a small file), else from
    // the window, refilled if need be; `next` is where the next structure to be read starts.
    const uint64_t tail_at = file_size - tail_size;
    const auto fetch = [&](Window& w, uint64_t offset, size_t n, uint64_t next) -> const unsigned char* {
        if (offset >= tail_at && offset - tail_at + n <= tail.size()) return &tail[static_cast<size_t>(offset - tail_at)];
        if (offset < w.at || offset - w.at + n > w.bytes.size()) {
            const bool lone = next <= offset || next - offset >= kWindowBytes / 2;
            w.bytes.resize(lone ? n : std::max(n, static_cast<size_t>(std::min<uint64_t>(kWindowBytes, cd_offset - offset))));
            w.at = offset;
            read_exact_at(offset, w.bytes.data(), w.bytes.size(), "a local header", lone);
        }
        return &w.bytes[static_cast<size_t>(offset - w.at)];
    };
    // How much of a local header is read: see below.
    const auto local_want = [&](const Member& m) {
        return static_cast<size_t>(
            std::min<uint64_t>(cd_offset - m.local_offset, kLocalHeaderBytes + m.name.size() + kExtraSlack + kHeadBytes));
    };
    const auto next_offset = [&](size_t index) {
        return index + 1 < members_.size() ? members_[index + 1].local_offset : cd_offset;
    };
    // One past the last byte of each member's record: its data, and its data descriptor if it has one.
    std::vector<uint64_t> record_end(members_.size());

    const auto check_local = [&](Window& w, size_t index) {
        Member& m = members_[index];
        // Formatted only when something fails: most archives have many members and no failures.
        const auto here = [&] { return where(m); };
        if (m.method == 0 && m.compressed != m.size)
            fail(Code::format, "{}: bad zip entry: stored member declares {} bytes but occupies {}", here(), m.size, m.compressed);
        // Deflate cannot expand data more than 1032:1; a larger claim is a bomb or a lie.
        if (m.method == 8 && m.size / 1032 > m.compressed)
            fail(Code::format, "{}: declares {} bytes from {} compressed, more than deflate can produce", here(), m.size,
                 m.compressed);
        if (m.local_offset > cd_offset || cd_offset - m.local_offset < kLocalHeaderBytes)
            fail(Code::format, "{}: bad zip entry: local header offset {} is outside the member area", here(), m.local_offset);
        if (m.deferred) {
            // The central directory says where the data starts and what it begins with: the local header is
            // checked against both when the data is first read (check_local), in the same pass over the file.
            m.data_offset = m.local_offset + kLocalHeaderBytes + m.name.size() + m.local_extra;
            if (m.data_offset > cd_offset || m.compressed > cd_offset - m.data_offset)
                fail(Code::format, "{}: bad zip entry: data ({} bytes at offset {}) runs into the central directory", here(),
                     m.compressed, m.data_offset);
            record_end[index] = m.data_offset + m.compressed;
            return;
        }
        // One read takes the local header, its name and extra field (when they are no longer than usual) and the
        // first bytes of the data: for a stored npy member those hold its npy header, which the npz reader would
        // otherwise fetch with reads of its own — per member, that is most of the time of opening many small ones.
        const size_t want = local_want(m);
        std::vector<unsigned char>& lh = w.scratch;
        const unsigned char* local = fetch(w, m.local_offset, want, next_offset(index));
        lh.assign(local, local + want);
        const LocalHeader h = LocalHeader::parse(lh.data());
        if (!h.signature) fail(Code::format, "{}: bad zip entry: no local header at offset {}", here(), m.local_offset);
        const uint16_t flags = h.flags, name_len = h.name_len, extra_len = h.extra_len;
        const uint64_t variable_at = m.local_offset + kLocalHeaderBytes;
        if (cd_offset - variable_at < uint64_t{name_len} + extra_len)
            fail(Code::format, "{}: bad zip entry: local header runs into the central directory", here());
        const size_t variable_len = size_t{name_len} + extra_len;
        if (kLocalHeaderBytes + variable_len > want) {  // an unusually long extra field: read it on its own
            lh.resize(kLocalHeaderBytes + variable_len);
            read_exact_at(variable_at, lh.data() + kLocalHeaderBytes, variable_len, "a local header");
        }
        const unsigned char* variable = lh.data() + kLocalHeaderBytes;
        check_agrees(m, h, variable);
        if (m.method == kMethodStore && kLocalHeaderBytes + variable_len < lh.size()) {
            const size_t head = std::min<size_t>(lh.size() - kLocalHeaderBytes - variable_len, kHeadBytes);
            m.head.assign(reinterpret_cast<const char*>(variable + variable_len),
                          static_cast<size_t>(std::min<uint64_t>(head, m.size)));
        }
        m.data_offset = variable_at + name_len + extra_len;
        if (m.compressed > cd_offset - m.data_offset)
            fail(Code::format, "{}: bad zip entry: data ({} bytes at offset {}) runs into the central directory", here(), m.compressed,
                 m.data_offset);
        record_end[index] = m.data_offset + m.compressed;
        if (flags & kFlagDataDescriptor) {
            // The central directory is what ckpt reads by, but a descriptor that disagrees with it means one of
            // the two is corrupt, and nothing says which.
            bool malformed;
            size_t zip64_len;
            const bool zip64 = find_extra_field(variable + name_len, extra_len, kZip64ExtraId, zip64_len, malformed) != nullptr;
            if (malformed) fail(Code::format, "{}: bad zip entry: the local extra field is malformed", here());
            const uint64_t at = record_end[index];
            const size_t n = static_cast<size_t>(std::min<uint64_t>(kLongestDescriptor, cd_offset - at));
            // The next local header usually follows the descriptor at once: one read takes both, so that a
            // descriptor costs no read of its own.
            size_t span = n;
            uint64_t after = next_offset(index);
            if (after > at && after - at <= kLongestDescriptor && after < cd_offset) {
                span = std::max(n, static_cast<size_t>(after - at) + local_want(members_[index + 1]));
                after = next_offset(index + 1);
            }
            const unsigned char* p = fetch(w, at, span, after);
            // Its signature (PK\7\8) is optional, so a CRC-32 can look like one. Its sizes are 8 bytes wide when
            // the local header has a zip64 extra field (APPNOTE 4.3.9.2: Python's zipfile for numpy, ckpt), but
            // Go's archive/zip writes them 8 bytes wide without one where they need it. Whichever form agrees
            // with the central directory is the one; if none does, the error quotes the form the header implies.
            const bool signature = n >= 4 && le32(p) == kDataDescriptorSig;
            const auto agrees = [&](const Descriptor& d) {
                return d.crc == m.crc && d.compressed == m.compressed && d.size == m.size;
            };
            Descriptor d, candidate;
            bool found = false, quoted = false;
            for (const bool wide : {zip64, !zip64}) {
                for (const bool with_signature : {true, false}) {
                    if ((with_signature && !signature) || !parse_descriptor(p, n, with_signature, wide, candidate)) continue;
                    if (agrees(candidate)) {
                        d = candidate;
                        found = true;
                        break;
                    }
                    if (!quoted && wide == zip64) d = candidate;
                    quoted = quoted || wide == zip64;
                }
                if (found) break;
            }
            if (!found && !quoted)
                fail(Code::format, "{}: bad zip entry: its data descriptor (at offset {}) runs into the central directory", here(), at);
            if (!found) {
                std::string what;
                const auto differs = [&](const char* field, const std::string& there, const std::string& directory) {
                    what += fmt::format("{}{} {} (the central directory says {})", what.empty() ? "" : ", ", field, there, directory);
                };
                if (d.crc != m.crc) differs("CRC-32", fmt::format("{:08x}", d.crc), fmt::format("{:08x}", m.crc));
                if (d.compressed != m.compressed) differs("compressed size", std::to_string(d.compressed), std::to_string(m.compressed));
                if (d.size != m.size) differs("uncompressed size", std::to_string(d.size), std::to_string(m.size));
                fail(Code::format, "{}: bad zip entry: its data descriptor disagrees with the central directory: {}", here(), what);
            }
            record_end[index] = at + d.bytes;
        }
    };
    // Threads only for the members whose local headers are read here: the others' checks are arithmetic.
    const size_t to_read = static_cast<size_t>(std::count_if(members_.begin(), members_.end(), [](const Member& m) { return !m.deferred; }));
    for_each_in_order_shares<Window>(members_.size(), open_threads(to_read, file_), check_local);

    // Members must not overlap: overlapping members are how zip bombs multiply their output, and how one file
    // shows different contents to different readers.
    std::vector<size_t> by_offset(members_.size());
    for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
    const auto earlier = [&](size_t a, size_t b) { return members_[a].local_offset < members_[b].local_offset; };
    if (!std::is_sorted(by_offset.begin(), by_offset.end(), earlier))  // the directory usually lists them in file order
        std::sort(by_offset.begin(), by_offset.end(), earlier);
    if (!by_offset.empty() && members_[by_offset.front()].local_offset != 0)
        fail(Code::format, "{}: not a valid npz (zip) file: {} unexplained bytes before the first member", label_,
             members_[by_offset.front()].local_offset);
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const Member& a = members_[by_offset[i - 1]];
        const Member& b = members_[by_offset[i]];
        if (b.local_offset < a.data_offset + a.compressed)
            fail(Code::format, "{}: not a valid npz (zip) file: members '{}' and '{}' overlap (possible zip bomb)", label_, a.name, b.name);
        if (b.local_offset < record_end[by_offset[i - 1]])
            fail(Code::format, "{}: bad zip entry: its data descriptor runs into member '{}'", where(a), b.name);
    }
}

}  // namespace ckpt::core
