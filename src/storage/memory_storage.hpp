// SPDX-License-Identifier: Apache-2.0
// Storage held in memory: for tests, for FFI users who want checkpoints as bytes, and as the model the crash
// simulator builds on. Thread-safe. Directories exist once make_dirs created them ("" , "." and "/" always do).
#pragma once

#include "storage/storage.hpp"

#include <map>
#include <mutex>
#include <set>

namespace ckpt::core {

// An InputFile over bytes someone else owns (ckpt_read_memory).
class BytesInput final : public InputFile {
public:
    BytesInput(const void* data, size_t size) : data_(static_cast<const char*>(data)), size_(size) {}
    uint64_t size() const override { return size_; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override;
    bool concurrent_reads() const override { return true; }
    // The caller's bytes themselves (not owned: valid while they are), which are not ckpt's to write: a writable
    // (copy-on-write) mapping is refused with nullptr, and the caller decodes instead.
    std::unique_ptr<MappedFile> map(bool writable) override {
        return writable ? nullptr : std::make_unique<MappedFile>(data_, size_);
    }

private:
    const char* data_;
    size_t size_;
};

class MemoryStorage : public Storage {
public:
    void make_dirs(const std::string& dir) override;
    std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp_path) override;
    std::unique_ptr<OutputFile> open_append(const std::string& path) override;
    void rename(const std::string& from, const std::string& to) override;
    void sync_dir(const std::string& dir) override;
    void remove(const std::string& path) override;
    std::vector<std::string> list(const std::string& dir) override;
    std::unique_ptr<InputFile> open_read(const std::string& path) override;
    std::optional<FileInfo> stat(const std::string& path) override;
    std::unique_ptr<DirLock> lock(const std::string& dir) override;
    std::vector<std::string> list_dirs(const std::string& dir) override;
    void rename_dir(const std::string& from, const std::string& to) override;
    bool renames_dirs() const override { return true; }
    bool clones(const std::string&) override { return true; }  // by copying, so that reuse is tested in memory
    void remove_tree(const std::string& dir) override;

    // Creates or replaces a file (tests use it to plant files).
    void put(const std::string& path, std::string bytes);
    bool exists(const std::string& path) const;

private:
    class Output;
    void require_dir(const std::string& dir, const std::string& for_path) const;

    mutable std::mutex mutex_;
    std::set<std::string> dirs_{"", ".", "/"};
    std::map<std::string, std::shared_ptr<std::string>> files_;
    std::map<std::string, int64_t> modified_;  // of the files renamed into place, put or appended to
    std::shared_ptr<std::set<std::string>> locked_ = std::make_shared<std::set<std::string>>();
};

}  // namespace ckpt::core
