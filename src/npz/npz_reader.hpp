// SPDX-License-Identifier: Apache-2.0
// Reading .npz files as numpy and objax write them, treating every byte as untrusted. Opening reads the zip
// directory (ZipReader: the central directory is authoritative, so streamed members with data descriptors and
// zip64 extras read fine) and every member's npy header; array data is read on demand, straight into the
// destination, with its CRC-32 verified.
#pragma once

#include "core/array.hpp"
#include "core/name_lookup.hpp"
#include "npz/chunks.hpp"
#include "npz/metadata.hpp"
#include "npy/npy.hpp"
#include "npz/npz.hpp"
#include "storage/storage.hpp"
#include "core/var_collection.hpp"
#include "npz/zip_reader.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

// zip64 allows 2^64 members; no real checkpoint has more than a few hundred thousand.
constexpr uint64_t kDefaultMaxMembers = uint64_t{1} << 24;

struct NpzReadOptions {
    Layout layout = Layout::automatic;
    size_t max_header_bytes = kDefaultMaxHeaderBytes;
    uint64_t max_members = kDefaultMaxMembers;
    uint64_t max_total_bytes = UINT64_MAX;  // array bytes of the whole file
    Progress progress;
    bool read_ahead = false;  // every member's data will be read (a restore): see ZipReader
};

class NpzReader {
public:
    struct Entry {
        std::string name;     // variable name: member name without ".npy", or the objax name
        std::string member;   // zip member name, for messages
        size_t index = 0;     // position in the zip directory
        uint64_t size = 0;    // member bytes (npy header + data)
        uint32_t npy_crc = 0; // stored members: CRC-32 of the npy preamble and header (header.data_offset bytes)
        NpyHeader header;
        bool other = false;   // not an npy array (no ".npy" suffix, no npy magic): skipped, as numpy gives it as bytes
    };

    // Reads `file`, named `label` in messages (a path, or "<memory>"): the zip directory and every npy header,
    // all validated (on several threads from kParallelOpenMembers members on, with the same errors; local headers
    // with head copies when their data is read, see ZipReader). Throws Error: io, format (not a zip, malformed
    // member), unsupported, no_memory.
    NpzReader(std::unique_ptr<InputFile> file, std::string label, NpzReadOptions options);
    // Opens `path` in `storage`; adds not_found (no file) and invalid (not a regular file) to the errors above.
    static NpzReader open(Storage& storage, const std::string& path, NpzReadOptions options);

    NpzReader(NpzReader&&) noexcept;
    NpzReader& operator=(NpzReader&&) noexcept;
    ~NpzReader();

    const std::string& label() const { return zip_->label(); }
    size_t size() const { return entries_.size(); }
    const Entry& entry(size_t i) const { return entries_[i]; }
    // The zip member holding entry i, and the layout the file was read in (plain or objax).
    const ZipReader::Member& member(size_t i) const { return zip_->members()[entries_[i].index]; }
    Layout layout() const { return layout_; }
    // The file and its zip directory (for views into the file: npz_views.hpp).
    InputFile& file() const { return *file_; }
    const ZipReader& zip() const { return *zip_; }
    // The user's key/values from the metadata member (empty without one).
    const Metadata& metadata() const { return metadata_; }
    // The entry named `name`, or nullopt: a binary search of the names, sorted on the first call (n log n
    // comparisons, whatever a hostile file's names hash to). Safe to call from several threads at once.
    std::optional<size_t> find(std::string_view name) const;

    // The chunk table the file holds (chunks.hpp), nullopt without one; read and checked at each call. Throws
    // Error(format) naming the file and the member for a malformed table, and the errors of read_into.
    std::optional<ChunkTable> chunk_table();

    // Reads entry i's data into dst (entry(i).header.nbytes bytes), in native byte order and C order,
    // verifying the CRC-32, with progress against its size (a large one on several threads, as read_entries).
    // Throws Error(format) for corrupt data, Error(io).
    void read_into(size_t i, void* dst);
    // Reads entry i into a new owned array.
    Array read(size_t i);
    // Reads rows [first, first + count) of entry i along dimension 0 into dst, for restoring a slice of an array.
    // All rows: read_into (CRC verified). Some rows of a stored, C-order member: a ranged read of exactly their
    // bytes, whose CRC cannot be checked (it covers the whole member; `ckpt verify` checks it). Otherwise
    // (deflated, Fortran order) the whole entry is read and verified, and the rows copied.
    // Throws Error(invalid) for rows outside the array, and the errors of read_into.
    void read_rows(size_t i, int64_t first, int64_t count, void* dst);
    // Reads several entries, each into its own destination (as read_into), reporting progress against the sum of
    // their sizes. Large reads from a file that allows it are shared among threads, and small stored arrays
    // that lie close together are read in batches; if reads fail, the error is that of the first failing job in
    // `jobs` order, and destinations of other jobs may have been written.
    struct Job {
        size_t entry;
        void* dst;
    };
    void read_entries(const std::vector<Job>& jobs);
    // Reads every entry into a new collection, in entry order, with the file's metadata.
    VarCollection read_all();

private:
    using OnBytes = std::function<void(uint64_t)>;
    void read_into(size_t i, void* dst, const OnBytes& on_bytes);
    void read_entry(const Entry& e, void* dst, const OnBytes& on_bytes);
    void scan();
    // Drops the entries that are not npy arrays; a file with no other entries is not an npz (Error format).
    void skip_other_members();
    MetadataRecord take_metadata();
    void take_chunks();  // sets the chunk table member aside
    void detect_layout();
    void apply_dtypes(const std::vector<std::pair<std::string, DType>>& dtypes);
    std::string where(const Entry& e) const;

    std::unique_ptr<InputFile> file_;
    std::unique_ptr<ZipReader> zip_;
    NpzReadOptions options_;
    std::vector<Entry> entries_;
    NameLookup names_;  // for find()
    Layout layout_ = Layout::plain;
    Metadata metadata_;
    std::string metadata_member_;  // for messages
    std::unique_ptr<Entry> chunks_;  // the chunk table member, if any
};

}  // namespace ckpt::core
