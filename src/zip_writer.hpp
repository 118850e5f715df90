// A sequential zip writer: local header, data, (data descriptor), …, central directory, end records — written
// front to back, never seeking, so it can stream into any Storage (an object store, a pipe).
//
// ckpt writes zips itself rather than through libzip because libzip's writer (1.7.3) needs a seekable output —
// it rewrites every local header after the data — and compresses members one after another with no way to run
// them in parallel or align their data. (Reading: see zip_reader.hpp.)
//
// Stored members get their CRC-32 computed before they are written, so their local headers carry the real
// CRC and sizes like numpy's; deflated members stream through zlib and end with a data descriptor (general
// purpose bit 3), as Python's zipfile writes to unseekable files. zip64 fields appear only where a size,
// offset or count needs them.
#pragma once

#include "storage.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ckpt {

class ZipWriter {
public:
    struct Piece {
        const void* data;
        size_t size;
    };
    // CRC-32 of the concatenated pieces.
    static uint32_t crc_of(const std::vector<Piece>& pieces);
    // Called with the number of bytes of a piece just written (uncompressed), for progress reports.
    using OnPieceBytes = std::function<void(size_t piece_index, uint64_t bytes)>;

    explicit ZipWriter(OutputFile& out);

    // A member holding the concatenation of `pieces`, stored (level < 0) or deflated at `level` (0 = zlib's
    // default, 1..9). A stored member's CRC-32 comes from `crc` when given (computed ahead, e.g. on another
    // thread), otherwise from a pass over the pieces before they are written.
    void add(const std::string& name, const std::vector<Piece>& pieces, int level, const OnPieceBytes& on_bytes,
             const std::function<uint32_t()>& crc = nullptr);
    // Writes the central directory and end records and flushes everything to the output.
    void finish();

private:
    struct Entry {
        std::string name;
        uint64_t offset;
        uint64_t compressed;
        uint64_t size;
        uint32_t crc;
        uint16_t method;
        uint16_t flags;
    };
    void add_stored(Entry& e, const std::vector<Piece>& pieces, const OnPieceBytes& on_bytes,
                    const std::function<uint32_t()>& crc);
    void add_deflated(Entry& e, const std::vector<Piece>& pieces, int level, const OnPieceBytes& on_bytes);
    void put(const void* data, size_t n);
    void flush();

    OutputFile& out_;
    std::vector<unsigned char> buf_;
    uint64_t offset_ = 0;  // bytes of the archive produced so far
    std::vector<Entry> entries_;
};

}  // namespace ckpt
