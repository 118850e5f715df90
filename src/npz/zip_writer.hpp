// SPDX-License-Identifier: Apache-2.0
// A sequential zip writer: local header, data, (data descriptor), …, central directory, end records — written
// front to back, so it can stream into any Storage (an object store, a pipe); the one write behind it, a stored
// member's CRC-32 into its local header, only where the output can be patched.
//
// ckpt writes zips itself rather than through libzip because libzip's writer (1.7.3) needs a seekable output —
// it rewrites every local header after the data — and compresses members one after another with no way to run
// them in parallel or align their data. (Reading: see zip_reader.hpp.)
//
// Stored members' local headers carry the real CRC and sizes like numpy's (a data descriptor would give up
// numpy-identical members). Where the output can be patched (a local file), a CRC not known in time is filled in
// after the data, which is then read once, as it is written; elsewhere it is computed before the first byte (a
// source is then read once for the CRC and again to write it). Their data starts at a multiple of 64 bytes in the
// file (padding in an extra field, id 0xD935 as Android's zipalign writes it, which zip readers skip): with numpy's
// 64-byte-aligned npy headers, every array's first byte is 64-byte aligned, so a memory-mapped file holds SIMD-ready
// arrays.
// Deflated members come from DeflateAhead (compressed on several threads) and end with a data descriptor
// (general purpose bit 3), as Python's zipfile writes to unseekable files. zip64 fields appear only where a
// size, offset or count needs them.
#pragma once

#include "npz/chunks.hpp"
#include "npz/deflate_ahead.hpp"
#include "storage/storage.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ckpt::core {

class ZipWriter {
public:
    using Piece = DeflateAhead::Piece;
    static constexpr uint64_t kAlignment = 64;  // of stored members' data in the file

    // Calls f for the bytes of p in order, in runs: pointers into p's memory, or for a source, a buffer it was read
    // into (4 MiB at a time, so a source's bytes never need to be in memory at once).
    static void for_each_run(const Piece& p, const std::function<void(const void*, size_t)>& f);
    // CRC-32 of the concatenated pieces (a source's read once for it).
    static uint32_t crc_of(const std::vector<Piece>& pieces);
    // Called after bytes [offset, offset + n) of a member (uncompressed) were written, for progress reports.
    using OnBytes = std::function<void(uint64_t offset, uint64_t n)>;

    explicit ZipWriter(OutputFile& out);

    // When a stored member's CRC-32 is known. before_data: in time for its local header (from `crc`, or a pass over
    // the pieces before they are written). after_data, for outputs that can_patch(): once its data is written (from
    // `crc`, called then, or computed as the data is written, so the pieces are read once), then patched into the
    // local header, which until then holds 0. The file's bytes come out the same either way.
    enum class CrcWhen { before_data, after_data };
    // A stored member holding the concatenation of `pieces`, its CRC-32 from `crc` when given (computed elsewhere,
    // e.g. on another thread), at the time `when` says. Its central directory entry copies the first `head` bytes
    // (which must lie in the first piece), trailing spaces and '\n' left out, with the length of the local extra
    // field (zip_format.hpp, kHeadCopyExtraId); 0 copies nothing.
    void add_stored(const std::string& name, const std::vector<Piece>& pieces, const OnBytes& on_bytes,
                    const std::function<uint32_t()>& crc = nullptr, size_t head = 0,
                    CrcWhen when = CrcWhen::before_data);
    // A deflated member of `size` bytes whose blocks come next from `source`.
    void add_deflated(const std::string& name, uint64_t size, DeflateAhead& source, const OnBytes& on_bytes);
    // A stored member whose second piece is an array hashed in chunks (chunks.hpp): that piece starts at a multiple
    // of kBlockAlignment in the file, its chunks' hashes go into `hashes`, and each full chunk whose hash equals the
    // base's at the same index is offered to the output as a run to share with the base's file
    // (OutputFile::clone_from), which writes what it cannot share. The file's bytes come out the same either way.
    struct Chunking {
        uint32_t chunk_bytes = kChunkBytes;
        InputFile* base = nullptr;                         // the earlier file, or none
        uint64_t base_offset = 0;                          // where the base's copy of the array begins in it
        const std::vector<ChunkSum>* base_sums = nullptr;  // its chunks' hashes and CRC-32s
        std::vector<ChunkSum> sums;                        // out: this member's (where hash_of is set, only the
                                                           // hashes compared with the base's; the rest are 0)
        uint64_t shared = 0;                               // out: bytes shared rather than written
        // Where set, the hash of chunk k comes from here (threads that compute the sums ahead, and keep them) instead
        // of being computed as the chunk is written, and only for chunks compared with the base's: hash_of(k, true)
        // waits for it, hash_of(k, false) gives nullopt if it is not computed yet.
        std::function<std::optional<Hash128>(size_t k, bool wait)> hash_of;
    };
    // add_stored with chunking (nullptr: as above); returns the member's CRC-32.
    uint32_t add_stored(const std::string& name, const std::vector<Piece>& pieces, const OnBytes& on_bytes,
                        const std::function<uint32_t()>& crc, size_t head, CrcWhen when, Chunking* chunking);
    // Writes the central directory and end records and flushes everything to the output; returns the archive's size.
    uint64_t finish();

private:
    struct Entry {
        std::string name;
        uint64_t offset;
        uint64_t compressed;
        uint64_t size;
        uint32_t crc;
        uint16_t method;
        uint16_t flags;
        std::vector<unsigned char> head_copy;  // the head copy field's value, or empty
    };
    Entry start_entry(const std::string& name, uint64_t size, uint16_t method) const;
    void put(const void* data, size_t n);
    // Overwrites bytes the archive already holds: in the buffer if they are still there, else in the output.
    void patch(uint64_t offset, const void* data, size_t n);
    void flush();
    // Writes the bytes of a chunked array piece (see Chunking), continuing the CRC in `running` when crc_here.
    void put_chunked(const Piece& piece, Chunking& chunking, bool crc_here, uint32_t& running, const OnBytes& on_bytes,
                     uint64_t& at);

    OutputFile& out_;
    std::vector<unsigned char> buf_;
    uint64_t offset_ = 0;  // bytes of the archive produced so far
    std::vector<Entry> entries_;
};

}  // namespace ckpt::core
