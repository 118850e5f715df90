// SPDX-License-Identifier: Apache-2.0
// Storage: where checkpoints live — the `fs` of pytorch-pfn-extras' writers. Everything ckpt writes or reads
// goes through this interface, so a test can inject faults and crashes, and a user can plug in an object
// store or HDFS through the C callback table. Paths are '/'-separated UTF-8 strings; the implementation
// decides what they mean.
//
// Writes are sequential (no seeking; a storage that can may let a writer patch bytes it wrote), so a storage can
// stream to a network service. Every method either completes or throws ckpt::core::Error (usually Code::io, with the
// path and the system's reason in the message).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

class InputFile;

// A file being written, front to back.
class OutputFile {
public:
    virtual ~OutputFile() = default;  // closes without syncing if close() was not called; never throws
    virtual void write(const void* data, size_t n) = 0;
    virtual void sync() = 0;   // durable once this returns; a failed sync is never retried on the same data
    virtual void close() = 0;  // checked: a failure here is a failed write
    // Whether patch() works: true for a new local file; false for an upload whose bytes may be gone already, a file
    // opened for appending, and storages that only stream (the default).
    virtual bool can_patch() const { return false; }
    // Overwrites bytes [offset, offset + n) of those written so far with `data` (offsets from this file's first
    // byte). The zip writer fills in a stored member's CRC-32 in its local header once the data is written, so it
    // reads the data once, as it writes it. Throws std::logic_error where can_patch() is false.
    virtual void patch(uint64_t offset, const void* data, size_t n);
    // Appends n bytes, `data`, which are also bytes [offset, offset + n) of `source` (a file of the same storage),
    // for a save that reuses the unchanged parts of an earlier file: shares what it can of them with `source`
    // instead of writing them (FICLONERANGE, a reflink; an object store's server-side copy) and writes the rest.
    // offset, n and the bytes written so far are multiples of 4096. Returns how many bytes were shared; the default
    // shares none (writes them all). Throws as write() does.
    virtual uint64_t clone_from(InputFile& source, uint64_t offset, uint64_t n, const void* data);
    // Whether clone_from may still share anything: false where it only writes (the default; a file whose
    // filesystem refused a clone), so that a writer keeps its own buffering instead of offering runs.
    virtual bool may_share() const { return false; }
};

// A read-only view of a whole file's bytes, valid as long as this object (see InputFile::map).
class MappedFile {
public:
    MappedFile(const void* data, uint64_t size) : data_(data), size_(size) {}
    virtual ~MappedFile() = default;  // unmaps
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    const void* data() const { return data_; }
    uint64_t size() const { return size_; }

private:
    const void* data_;
    uint64_t size_;
};

// A file being read at any offset.
class InputFile {
public:
    virtual ~InputFile() = default;
    virtual uint64_t size() const = 0;
    // Reads up to n bytes at offset; returns fewer only at the end of the file.
    virtual size_t read_at(uint64_t offset, void* dst, size_t n) = 0;
    // True if read_at may be called from several threads at once (then large reads use them).
    virtual bool concurrent_reads() const { return false; }
    // As read_at, for a small read of file structure (a local header) amid array data that may later be read as
    // one stream: what the storage had to fetch for it need not stay cached. On Linux, pages that such reads leave
    // cached through a cold file break the kernel's readahead of the streams over them into small requests.
    virtual size_t read_uncached_at(uint64_t offset, void* dst, size_t n) { return read_at(offset, dst, n); }
    // Whether bytes [offset, offset + n) are in memory already (the page cache), so that reading them would not
    // wait for the device. Storages that cannot tell say true.
    virtual bool cached(uint64_t offset, uint64_t n) {
        (void)offset;
        (void)n;
        return true;
    }
    // The file's size() bytes mapped read-only and private, pages coming in as they are touched; nullptr when the
    // storage or file cannot be mapped (the caller then reads). `writable`: copy-on-write instead of read-only (a page
    // written is copied into private memory; the file never changes). The view may outlive this object. A file that
    // shrank since it was opened throws Error(io): its missing pages would fault (SIGBUS) when touched.
    virtual std::unique_ptr<MappedFile> map(bool /*writable*/) { return nullptr; }
};

// What Storage::stat tells of a path.
struct FileInfo {
    uint64_t size = 0;                   // bytes; 0 for a directory
    std::optional<int64_t> modified_ns;  // last modification, nanoseconds since the Unix epoch, where the storage knows
    bool is_dir = false;                 // a directory (on an object store, a prefix that keys go under)
};

// Held while a manager owns a directory; released by destruction.
class DirLock {
public:
    virtual ~DirLock() = default;
};

class Storage {
public:
    virtual ~Storage() = default;
    // Takes the exclusive lock of `dir` for one checkpoint manager: throws Error(busy) — naming the holder where it
    // can — when another holds it. Storages without locking return nullptr (no lock is taken).
    virtual std::unique_ptr<DirLock> lock(const std::string& dir) {
        (void)dir;
        return nullptr;
    }
    // Creates `dir` and its missing parents; succeeds if it exists.
    virtual void make_dirs(const std::string& dir) = 0;
    // Creates a new, empty file in the directory of `target`, with a name that no other writer can be using
    // and that never ends in ".npz" (".<name>.tmp-XXXXXX"). Returns it; its path goes to *temp_path.
    virtual std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp_path) = 0;
    // Opens `path` for appending, creating it if it is missing (not atomic: pfn-extras' append mode).
    virtual std::unique_ptr<OutputFile> open_append(const std::string& path) = 0;
    // Replaces `to` with `from` atomically.
    virtual void rename(const std::string& from, const std::string& to) = 0;
    // Makes the renames and creations in `dir` durable.
    virtual void sync_dir(const std::string& dir) = 0;
    // Removes a file; throws Error(not_found) if it is missing.
    virtual void remove(const std::string& path) = 0;
    // Names (not paths) of the files in `dir` — subdirectories are left out — in no particular order; throws
    // Error(not_found) if `dir` is missing.
    virtual std::vector<std::string> list(const std::string& dir) = 0;
    // Opens a regular file for reading; throws Error(not_found) if it is missing.
    virtual std::unique_ptr<InputFile> open_read(const std::string& path) = 0;
    // What is at `path` (a file or a directory), nullopt when nothing is. By default: a file open_read opens (its
    // age unknown), else a directory its parent's list_entries names.
    virtual std::optional<FileInfo> stat(const std::string& path);
    // Throws Error(busy), as lock() does, when another holds the lock of `dir`; takes nothing and writes nothing (a
    // dry run of a cleanup, which must work in a directory it cannot write). Storages without locking return.
    virtual void check_unlocked(const std::string& dir) { (void)dir; }
    // Whether the save that created the temporary file `temp_path` (through create_temp) is still writing it: true
    // while its writer — of this process or another — holds it open, false once that writer is gone (or the file
    // is), nullopt where the storage cannot tell (the default). A POSIX temporary carries an flock for its life.
    virtual std::optional<bool> temp_in_use(const std::string& temp_path) {
        (void)temp_path;
        return std::nullopt;
    }
    // Whether temp_in_use can tell at all (so a save need not list its directory for nothing).
    virtual bool knows_temp_owners() const { return false; }
    // Bytes a new file in `dir` may still take (the file system's space available to this user), or nullopt
    // when the storage cannot tell.
    virtual std::optional<uint64_t> free_bytes(const std::string& dir) {
        (void)dir;
        return std::nullopt;
    }
    // Whether files in `dir` can share blocks with one another (OutputFile::clone_from): a filesystem that clones,
    // or a storage that copies on its side. A save against a base asks, so that where nothing can be shared it
    // neither hashes nor opens the base. False by default.
    virtual bool clones(const std::string& dir) {
        (void)dir;
        return false;
    }
    // Bytes of the file at `path` whose blocks are shared with other files (a filesystem that clones holds them once
    // for all: what incremental saves leave), or nullopt where the storage cannot tell (the default). Throws
    // Error(not_found) if the file is missing.
    virtual std::optional<uint64_t> shared_bytes(const std::string& path) {
        (void)path;
        return std::nullopt;
    }

    // Directory operations, for sharded checkpoints (one directory per step). Storages without them throw
    // Error(unsupported), which makes sharded saves fail and listings show files only.
    // Names (not paths) of the subdirectories of `dir`; Error(not_found) if `dir` is missing.
    virtual std::vector<std::string> list_dirs(const std::string& dir);
    // Renames directory `from` to `to`, which must not exist, atomically.
    virtual void rename_dir(const std::string& from, const std::string& to);
    // Whether rename_dir works: false (the default, as rename_dir's) for storages that list and remove directories
    // but cannot rename them (object stores, where directories are prefixes of names); sharded saves there commit
    // by writing the manifest last (sharded_step.hpp).
    virtual bool renames_dirs() const { return false; }
    // Removes directory `dir` with everything in it; Error(not_found) if it is missing.
    virtual void remove_tree(const std::string& dir);
    // The names of the files and of the subdirectories of `dir` (no subdirectories for a storage without them),
    // in one listing where the storage can (an object store's is one request): list() and list_dirs() by default.
    struct Entries {
        std::vector<std::string> files, dirs;
    };
    virtual Entries list_entries(const std::string& dir);

    // Writes that interrupted saves left unfinished with no file to show for them (an object store's incomplete
    // multipart uploads); none on a file system. Paths relative to `dir`, at any depth, of the files that have one
    // that no live save of this storage owns.
    virtual std::vector<std::string> list_incomplete(const std::string& dir) {
        (void)dir;
        return {};
    }
    // Abandons those of the file at `path`; the file itself stays.
    virtual void abort_incomplete(const std::string& path) { (void)path; }
};

// The directory part of a path ("." when there is none) and the name part.
std::string parent_dir(const std::string& path);
std::string base_name(const std::string& path);
// "<dir>/<name>", or just name when dir is "" or ".".
std::string join_path(const std::string& dir, const std::string& name);
// Whether a name or path ends with `suffix` (".npz", ".index.json").
inline bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
// ".<name>.tmp-" + 6 characters from [A-Za-z0-9]: 4 random ones and 2 that sign the name (a hash of the name and
// the 4), so that ckpt's own temporaries can be told from other programs' files named in the same fashion.
std::string temp_name_for(const std::string& name);
// True for names of the form temp_name_for makes (so a manager can clean up after a crash), signed or not (ckpt
// before 0.x did not sign them).
bool is_temp_name(const std::string& name);
// True for names temp_name_for made: of that form, with the signature that matches the name.
bool is_signed_temp_name(const std::string& name);
// The name a temporary stands in for: ".x.npz.tmp-AbC123" -> "x.npz". `temp` must be a temp name.
std::string temp_target(const std::string& temp);
// Whether `name` is the temporary of an interrupted ckpt save: a signed temporary of any file, or one of an .npz file
// or a checkpoint (`npz_or_checkpoint` says whether its target is one), signed or not.
bool is_ckpt_temp_name(const std::string& name, bool npz_or_checkpoint);

// Removes the temporaries that interrupted saves of `path` left beside it (".<name of path>.tmp-XXXXXX", ckpt's
// own) whose writer is gone, as storage.temp_in_use tells; those it cannot tell about stay. Never throws: the
// save that calls it has succeeded already. Returns how many it removed.
size_t remove_stale_temporaries_of(Storage& storage, const std::string& path);

// The whole of a small file that is read at once (a manifest, an index): its bytes. Throws Error(format)
// "<path>: <what>: …" for a file over max_bytes or one shorter than its size, and what open_read throws.
std::string read_small_file(Storage& storage, const std::string& path, uint64_t max_bytes, const char* what);
// The same for a file already open, named `path` in messages.
std::string read_small_file(InputFile& file, const std::string& path, uint64_t max_bytes, const char* what);

// The default: the local filesystem through POSIX calls.
std::shared_ptr<Storage> posix_storage();

// The atomic save sequence over any storage: write `body` into a temporary beside `path`, sync, close, rename
// onto `path`, sync the directory. On any failure the temporary is removed and `path` is left as it was.
void write_atomically(Storage& storage, const std::string& path, const std::function<void(OutputFile&)>& body);

}  // namespace ckpt::core
