// SPDX-License-Identifier: Apache-2.0
// The one seam between ckpt's formats and everything that opens, reads, restores or saves a checkpoint file: a
// Container is an open file of named arrays and string metadata, whatever its format, and save_container writes
// one. Two formats implement it: .npz (npz/) and safetensors (safetensors/). A file's format is told by its content
// (open_container), a new file's by its name or the caller (save_container); nothing above this layer names a format's
// reader or writer.
#pragma once

#include "core/metadata.hpp"
#include "core/restore_match.hpp"
#include "core/var_collection.hpp"
#include "incremental/chunk_stream.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

// Values equal CKPT_FORMAT_* of ckpt.h.
enum class Format : uint32_t {
    automatic = 0,  // reading: by content; writing: by the path's name (format_for_path)
    npz = 1,
    safetensors = 2,
};

// "npz", "safetensors".
const char* format_name(Format f);
// A file name's ending for a format: ".npz", ".safetensors" (format_for_path's reverse; automatic: ".npz").
std::string_view format_suffix(Format f);
// The format a new file's name asks for: safetensors for a name ending in ".safetensors", npz for any other.
Format format_for_path(const std::string& path);

// What every format tells of one stored array. The references live as long as the container.
struct ArrayInfo {
    const std::string& name;
    DType dtype;
    size_t itemsize;
    const std::vector<int64_t>& shape;
    size_t nbytes;  // in memory: the shape's product times itemsize
};

// Where and how an array lies in its file, for inspection (ckpt show) and for programs that do their own I/O.
struct Placement {
    std::string_view member;        // the zip member (npz); the tensor's name (safetensors)
    bool deflated = false;          // compressed in the file
    uint64_t stored_bytes = 0;      // bytes it takes in the file
    std::optional<uint32_t> crc32;  // of its member (npz); safetensors has no checksum
    uint64_t data_offset = 0;       // where its data starts in the file; 0 when it cannot be read in place (deflated)
    char byte_order = '|';          // '<', '>' or '|' (no order: one-byte items)
    bool fortran_order = false;
};

class Container {
public:
    struct Job {
        size_t entry;
        void* dst;
    };

    virtual ~Container() = default;
    virtual Format format() const = 0;
    virtual const std::string& label() const = 0;  // the path, or "<memory>", for messages
    virtual size_t size() const = 0;
    virtual ArrayInfo array(size_t i) const = 0;
    // The entry named `name`, or nullopt, in O(log n) whatever a hostile file's names hash to.
    virtual std::optional<size_t> find(std::string_view name) const = 0;
    virtual const Metadata& metadata() const = 0;
    // The bytes of the file as it was opened (of every shard, for an index).
    virtual uint64_t file_size() const = 0;
    virtual Placement placement(size_t i) const = 0;
    // npz: the layout the file was read in; safetensors: plain (each array under its own name).
    virtual Layout layout() const { return Layout::plain; }

    // Reads entry i's data (array(i).nbytes bytes) into dst, in native byte order and C order; an npz member's CRC-32
    // is verified. Throws Error(format) for corrupt data, Error(io).
    virtual void read_into(size_t i, void* dst) = 0;
    // Reads several entries, each into its own destination, with progress against the sum of their sizes (on several
    // threads where the format and file allow). After a failure, the error is that of the first failing job in
    // `jobs` order, and other destinations may have been written.
    virtual void read_entries(const std::vector<Job>& jobs) = 0;
    // Bytes [offset, offset + size) of entry i's data as read_into delivers them, in bounded memory. Throws
    // Error(invalid) for offsets or sizes that are not multiples of the itemsize or reach past the end, and the
    // errors of read_into (an npz member's CRC-32 is checked when ranges in order reach its end: npz_range.hpp).
    virtual void read_range(size_t i, uint64_t offset, void* dst, size_t size) = 0;
    // Entry i's bytes without a copy where the file holds them as they are used (a private mapping of the file);
    // decoded once into memory this container owns otherwise (deflated, byte-swapped, Fortran order, or not
    // aligned for its type). The same pointer at every call, valid as long as the container. Throws as read_into.
    virtual const void* view(size_t i) = 0;

    // Every entry into a new collection, in entry order, with the file's metadata.
    VarCollection read_all();
};

struct ContainerReadOptions {
    // For npz files; max_members, max_total_bytes and progress apply to safetensors files too.
    NpzReadOptions npz;
    Format format = Format::automatic;  // a format other than automatic refuses a file of the other (Error(format))
    bool verify_views = true;           // npz: a mapped view's CRC-32 is checked at its first view
    bool writable_views = false;        // views are copy-on-write instead of read-only
};

// Opens `path` in `storage`, telling the format by the file's first bytes (looks_like_safetensors). A path ending in
// ".index.json" is Hugging Face's sharded layout, read as one checkpoint (hf_index_container.hpp); so is a folder
// holding "model.safetensors.index.json" — or that folder's "model.safetensors", which transformers reads first.
// Throws Error(not_found) (no file), Error(invalid) (not a regular file), and each format's errors.
std::unique_ptr<Container> open_container(Storage& storage, const std::string& path,
                                          const ContainerReadOptions& options);
// The same for a file already open, named `label` in messages.
std::unique_ptr<Container> open_container(std::unique_ptr<InputFile> file, std::string label,
                                          const ContainerReadOptions& options);

struct ContainerWriteOptions {
    Format format = Format::automatic;  // automatic: format_for_path
    // For npz files; progress, before_write, manager_keys and shared_bytes apply to safetensors files too. Options
    // safetensors has no use for (deflate, the objax layout) are refused for it (Error(invalid)).
    NpzWriteOptions npz;
    // Incremental safetensors saves (the manager's; SafetensorsWriteOptions): the data's chunk hashes are recorded
    // in safetensors_record, and the chunks equal to safetensors_base's shared with its file.
    RegionChunks* safetensors_record = nullptr;
    RegionBase safetensors_base;
    // safetensors: Hugging Face's sharded layout, with at most this many bytes of tensors per shard (hf_save.hpp);
    // 0 = one file.
    uint64_t max_shard_bytes = 0;
};

// The format a save with `options` to `path` writes (never automatic).
Format format_of_save(const std::string& path, const ContainerWriteOptions& options);
// Refuses, before anything is written, a save that `format` cannot make: Error(invalid) for options it has no use
// for, Error(unsupported) naming the array for a dtype it cannot hold; messages start with `path`.
void check_save(const std::string& path, Format format, const VarCollection& vars,
                const ContainerWriteOptions& options);
// Writes the whole file for `vars` into `out` in `format` (not automatic; check_save first); returns its size.
// Throws Error: invalid, io, no_memory.
uint64_t write_container(OutputFile& out, Format format, const VarCollection& vars,
                         const ContainerWriteOptions& options);
// Saves `vars` to `path` atomically and durably (write_atomically) in the format of `options`, checked first.
// Throws the errors of check_save and write_container, and Error(not_found) for a missing directory.
void save_container(Storage& storage, const std::string& path, const VarCollection& vars,
                    const ContainerWriteOptions& options);

// Restores an existing collection in place from `file`, with the rules of core/restore_match.hpp (objax's
// load_var_collection): every variable is checked against the file before any data is written, so Error(mismatch) —
// listing every missing or differing variable and every unused name on disk — leaves `vars` unchanged. Then each
// variable's data is read straight into its buffer, and the collection's metadata replaced with the file's.
// `partial`: a variable the file lacks is left untouched instead of failing; vars.restored(i) tells which were filled.
void restore_container(Container& file, VarCollection& vars, const Renamer& rename, bool partial = false);

}  // namespace ckpt::core
