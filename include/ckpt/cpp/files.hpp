// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/files.hpp — ckpt::Files and ckpt::File: any file of a storage, listed, stat'ed, read and removed
 * (ckpt_storage_stat, _list, _make_dirs, _remove, ckpt_file_*).
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_FILES_HPP
#define CKPT_CPP_FILES_HPP

#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/storage.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

// What is at a path of a storage.
struct FileInfo {
    uint64_t size = 0;  // bytes; 0 for a directory
    // When it last changed, where the storage knows (a local file's mtime, an S3 object's Last-Modified).
    std::optional<std::chrono::system_clock::time_point> modified;
    bool is_dir = false;  // a directory (on an object store: a prefix that keys go under)
};

// A file of a storage opened for reading (ckpt_file_open): any file, not only checkpoints. One thread at a time.
class File {
public:
    File(File&& other) noexcept : file_(other.file_), size_(other.size_) { other.file_ = nullptr; }
    File& operator=(File&& other) noexcept {
        std::swap(file_, other.file_);
        std::swap(size_, other.size_);
        return *this;
    }
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    ~File() { ckpt_file_close(file_); }

    uint64_t size() const noexcept { return size_; }
    // Reads up to n bytes at offset into dst and returns how many: fewer than n only at the end of the file.
    size_t read_at(uint64_t offset, void* dst, size_t n) {
        size_t got = 0;
        detail::check(ckpt_file_read(file_, offset, dst, n, &got));
        return got;
    }
    // The whole file's bytes.
    std::string read_all() {
        std::string bytes(static_cast<size_t>(size_), '\0');
        bytes.resize(read_at(0, &bytes[0], bytes.size()));
        return bytes;
    }

private:
    friend class Files;
    File(ckpt_file* file, uint64_t size) noexcept : file_(file), size_(size) {}
    ckpt_file* file_;
    uint64_t size_;
};

// The files of a storage, for a program's own bookkeeping beside ckpt's saves (listing a run's directory, removing
// what it no longer wants). Storage nullptr means the local filesystem, or the S3 storage that "s3://bucket/key"
// paths name. Errors are ckpt::Error with the C API's codes (CKPT_ENOTFOUND for a missing path).
class Files {
public:
    explicit Files(const std::shared_ptr<Storage>& storage = nullptr)
        : storage_(storage), ref_(std::make_unique<detail::StorageRef>(storage)) {}

    // What is at path; std::nullopt when nothing is.
    std::optional<FileInfo> stat(const std::string& path) const {
        ckpt_file_info info{};
        const int rc = ckpt_storage_stat(ref_->get(), path.c_str(), &info);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        detail::check(rc);
        FileInfo out;
        out.size = info.size;
        out.is_dir = info.is_dir != 0;
        if (info.modified_ns != CKPT_TIME_UNKNOWN)
            out.modified =
                std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::chrono::nanoseconds(info.modified_ns)));
        return out;
    }
    // How many bytes of the file at path have blocks it shares with other files (what incremental saves leave on
    // XFS or btrfs); nullopt where the storage cannot tell (S3, memory, a filesystem without FIEMAP).
    std::optional<uint64_t> shared_bytes(const std::string& path) const {
        uint64_t shared = 0;
        const int rc = ckpt_storage_shared_bytes(ref_->get(), path.c_str(), &shared);
        if (rc == CKPT_EUNSUPPORTED) return std::nullopt;
        detail::check(rc);
        return shared;
    }
    // The names in dir, sorted; a subdirectory's ends in '/'.
    std::vector<std::string> list(const std::string& dir) const {
        std::vector<std::string> names;
        detail::check(ckpt_storage_list(
            ref_->get(), dir.c_str(),
            [](const char* name, void* ctx) noexcept -> int {
                try {
                    static_cast<std::vector<std::string>*>(ctx)->emplace_back(name);
                    return CKPT_OK;
                } catch (...) {
                    return CKPT_ENOMEM;
                }
            },
            &names));
        return names;
    }
    // Creates dir and its missing parents (nothing on an object store).
    void make_dirs(const std::string& dir) const { detail::check(ckpt_storage_make_dirs(ref_->get(), dir.c_str())); }
    // Removes the file at path, or the directory: an empty one, or with `recursive` everything in it.
    void remove(const std::string& path, bool recursive = false) const {
        detail::check(ckpt_storage_remove(ref_->get(), path.c_str(), recursive ? CKPT_STORAGE_REMOVE_RECURSIVE : 0u));
    }
    // Opens the file at path for reading.
    File open(const std::string& path) const {
        ckpt_file* file = nullptr;
        uint64_t size = 0;
        detail::check(ckpt_file_open(&file, ref_->get(), path.c_str(), &size));
        return File(file, size);
    }

private:
    std::shared_ptr<Storage> storage_;  // kept: ref_ only borrows a storage of the library's own (Storage::memory)
    std::unique_ptr<detail::StorageRef> ref_;
};

}  // namespace ckpt

#endif  // CKPT_CPP_FILES_HPP
