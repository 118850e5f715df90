// SPDX-License-Identifier: Apache-2.0
// ZipReader: a strict reader of zip archives from any InputFile, trusting nothing in them.
//
// ckpt reads zips itself rather than through libzip, whose public API (1.7.3) neither gives a member's data
// offset nor lets a caller see the central directory before it rejects or rewrites things: it accepted an archive
// whose members overlap (a polyglot numpy refuses), silently turned a NUL in a member name into a space, rejected
// duplicate names without saying which, and reported hostile offsets as I/O errors. This reader validates the
// whole directory first — end records, zip64 records, every central header, every local header and data
// descriptor, member ranges that must not overlap each other or the directory, unique names — and then streams
// members straight into the caller's buffers, checking CRC-32 and exact sizes. A member with a head copy (what ckpt
// writes for stored members; zip_format.hpp) is the exception: its local header is checked when its data is
// first read (check_local), against the copy, so opening reads only the end of the file.
#pragma once

#include "storage/storage.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

class ReadAhead;

// Archives with this many local headers or npy headers to check at opening, or more (from storages that allow
// concurrent reads), have them checked on several threads: below it, starting a thread costs more than it saves.
constexpr size_t kParallelOpenMembers = 1024;
// How many threads check an archive of this many members from `file`.
unsigned open_threads(size_t members, const InputFile& file);

class ZipReader {
public:
    struct Member {
        std::string name;
        uint16_t method = 0;  // 0 stored, 8 deflate
        uint16_t flags = 0;
        uint32_t crc = 0;
        uint64_t compressed = 0;
        uint64_t size = 0;
        uint64_t local_offset = 0;
        uint64_t data_offset = 0;  // first byte of the member's (compressed) data in the file
        std::string head;          // stored members: their first bytes (up to 192), read with the local header
        // With ckpt's head copy in the central directory (zip_format.hpp): data_offset and head come from it, and
        // the local header is checked when the data is first read (check_local), not at opening.
        bool deferred = false;
        uint16_t local_extra = 0;  // the local extra field's length, as the copy says
        uint32_t head_len = 0;     // how many of the data's first bytes the copy describes
        uint32_t copy_len = 0;     // how many of them it holds (the rest: spaces and a '\n')
        size_t copy_at = 0;        // where they are in the central directory
    };

    // Reads and validates the directory. Throws Error(format) — naming `label` and, where there is one, the
    // member — or Error(unsupported) for encryption and compression methods other than stored and deflate.
    // `max_members` bounds the directory's size before anything is allocated for it.
    // `read_ahead`: the caller will read every member's data (a restore). Where the file's first bytes are not in
    // memory yet, they are read ahead on a thread while the directory is checked (ReadAhead).
    ZipReader(InputFile& file, std::string label, uint64_t max_members, bool read_ahead = false);
    ~ZipReader();
    ZipReader(const ZipReader&) = delete;
    ZipReader& operator=(const ZipReader&) = delete;

    const std::vector<Member>& members() const { return members_; }
    // Member `index`'s first bytes, as read with its local header or as its head copy gives them (built in
    // `scratch`): for a stored member, at least its npy header where the read or the copy reached that far.
    std::string_view head(size_t index, std::string& scratch) const;
    // Frees the members' heads once they have served.
    void drop_heads();
    // Checks member `index`'s local header, and that its data begins as the head copy says, unless it was checked
    // already or opening checked it (a member without a head copy). Every read of a member's data comes after
    // this; thread-safe. Throws Error(format), naming the member, for an inconsistent header; Error(io).
    void check_local(size_t index) const;
    // The same from bytes [at, at + n) of the file that the caller has read (reading them itself if the local
    // header and head do not lie within them).
    void check_local(size_t index, const unsigned char* bytes, uint64_t at, size_t n) const;
    // Reads n bytes at `offset` of stored member `index` straight into dst and returns their CRC-32 (to be combined
    // and checked with check_crc: this is for reading parts of one member on several threads), or 0 without
    // computing it when !with_crc (a range of rows, which no CRC covers). Throws Error(format) if the member ends
    // first.
    uint32_t read_stored(size_t index, uint64_t offset, void* dst, size_t n, bool with_crc = true) const;
    // Throws Error(format) — a CRC-32 mismatch — unless `crc` is member `index`'s CRC-32.
    void check_crc(size_t index, uint32_t crc) const;
    const std::string& label() const { return label_; }

    // Reads one member's uncompressed bytes front to back; finish() checks that all were read and the CRC-32.
    class Stream {
    public:
        Stream(const ZipReader& zip, size_t index);
        ~Stream();
        Stream(const Stream&) = delete;
        Stream& operator=(const Stream&) = delete;
        // Reads up to n bytes; fewer only at the end of the member. Throws Error(format) for corrupt data.
        size_t read(void* dst, size_t n);
        // Reads exactly n bytes, or throws Error(format) ("ends after …").
        void read_exact(void* dst, size_t n);
        // At the start of a stored member: counts its first n bytes as read without reading them, given their
        // CRC-32 (the caller read them before, e.g. in the member's head).
        void skip_prefix(size_t n, uint32_t crc);
        // Throws Error(format) unless every byte was read and the CRC-32 matches.
        void finish();

    private:
        struct Inflater;
        void refill();  // gives zlib the next chunk of compressed data when it has used up the last
        const ZipReader& zip_;
        const Member& m_;
        uint64_t out_ = 0;  // uncompressed bytes delivered
        uint32_t crc_ = 0;
        std::unique_ptr<Inflater> inflater_;
    };

private:
    // A local header's fixed fields.
    struct LocalHeader {
        bool signature;
        uint16_t flags, method;
        uint32_t crc;
        uint64_t compressed, size;
        uint16_t name_len, extra_len;
        static LocalHeader parse(const unsigned char* p);  // 30 bytes
    };
    // Throws Error(format) unless local header h, followed by its name and extra field at `variable`, agrees with
    // member m's central directory entry.
    void check_agrees(const Member& m, LocalHeader h, const unsigned char* variable) const;
    void check_deferred(size_t index, const unsigned char* local_header) const;
    std::string where(const Member& m) const;
    void read_exact_at(uint64_t offset, void* dst, size_t n, const char* what, bool uncached = false) const;

    InputFile& file_;
    std::string label_;
    std::vector<Member> members_;
    std::unique_ptr<unsigned char[]> cd_;  // the central directory, which holds the head copies
    std::unique_ptr<std::atomic<bool>[]> local_checked_;  // by member: deferred ones, once checked
    // Last, so destroyed first: its reading stops and is waited for before anything else goes (it reads only
    // file_, which outlives this).
    std::unique_ptr<ReadAhead> read_ahead_;
};

}  // namespace ckpt::core
