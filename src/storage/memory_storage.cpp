// SPDX-License-Identifier: Apache-2.0
#include "storage/memory_storage.hpp"

#include "core/error.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>

namespace ckpt::core {

size_t BytesInput::read_at(uint64_t offset, void* dst, size_t n) {
    if (offset >= size_) return 0;
    const size_t k = std::min<uint64_t>(n, size_ - offset);
    std::memcpy(dst, data_ + offset, k);
    return k;
}

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

class StringInput final : public InputFile {
public:
    explicit StringInput(std::shared_ptr<const std::string> bytes) : bytes_(std::move(bytes)) {}
    uint64_t size() const override { return bytes_->size(); }
    bool concurrent_reads() const override { return true; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        return BytesInput(bytes_->data(), bytes_->size()).read_at(offset, dst, n);
    }

private:
    std::shared_ptr<const std::string> bytes_;  // a snapshot: later writes to the path do not show through
};
}  // namespace

class MemoryStorage::Output final : public OutputFile {
public:
    // `patchable`: a new file (an appended one's offsets would not start at the writer's first byte).
    Output(MemoryStorage& owner, std::shared_ptr<std::string> bytes, bool patchable)
        : owner_(owner), bytes_(std::move(bytes)), patchable_(patchable) {}
    void write(const void* data, size_t n) override {
        std::lock_guard<std::mutex> lock(owner_.mutex_);
        bytes_->append(static_cast<const char*>(data), n);
    }
    bool can_patch() const override { return patchable_; }
    void patch(uint64_t offset, const void* data, size_t n) override {
        if (!patchable_) OutputFile::patch(offset, data, n);
        std::lock_guard<std::mutex> lock(owner_.mutex_);
        if (offset > bytes_->size() || n > bytes_->size() - offset)
            throw std::logic_error("MemoryStorage: patch past the bytes written");
        bytes_->replace(static_cast<size_t>(offset), n, static_cast<const char*>(data), n);
    }
    // Memory shares nothing: a clone is a copy, so that the reuse of chunks is exercised where files are bytes.
    // (from the source's bytes, not `data`).
    bool may_share() const override { return true; }
    uint64_t clone_from(InputFile& source, uint64_t offset, uint64_t n, const void*) override {
        std::string bytes(static_cast<size_t>(n), '\0');
        if (source.read_at(offset, &bytes[0], bytes.size()) != bytes.size())
            fail(Code::io, "clone of bytes [{}, {}) past the source's end", offset, offset + n);
        write(bytes.data(), bytes.size());
        return n;
    }
    void sync() override {}
    void close() override {}

private:
    MemoryStorage& owner_;
    std::shared_ptr<std::string> bytes_;
    bool patchable_;
};

void MemoryStorage::require_dir(const std::string& dir, const std::string& for_path) const {
    if (!dirs_.count(dir)) fail(Code::not_found, "{}: directory {} does not exist", for_path, dir);
}

void MemoryStorage::make_dirs(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
        const std::string prefix = dir.substr(0, end);
        if (files_.count(prefix)) fail(Code::io, "{}: exists and is not a directory", prefix);
        dirs_.insert(prefix);
        if (end == std::string::npos) break;
    }
}

std::unique_ptr<OutputFile> MemoryStorage::create_temp(const std::string& target, std::string* temp_path) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string dir = parent_dir(target);
    require_dir(dir, target);
    std::string temp;
    do temp = join_path(dir, temp_name_for(base_name(target)));
    while (files_.count(temp));
    auto bytes = std::make_shared<std::string>();
    auto out = std::make_unique<Output>(*this, bytes, true);
    *temp_path = temp;
    files_[temp] = std::move(bytes);  // last: when an allocation fails, no temporary is left behind
    return out;
}

std::unique_ptr<OutputFile> MemoryStorage::open_append(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    require_dir(parent_dir(path), path);
    auto& bytes = files_[path];
    if (!bytes) bytes = std::make_shared<std::string>();
    modified_[path] = now_ns();
    return std::make_unique<Output>(*this, bytes, false);
}

void MemoryStorage::rename(const std::string& from, const std::string& to) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = files_.find(from);
    if (it == files_.end()) fail(Code::not_found, "{}: rename from {}: no such file", to, from);
    require_dir(parent_dir(to), to);
    if (dirs_.count(to)) fail(Code::io, "{}: rename from {}: target is a directory", to, from);
    auto bytes = it->second;
    files_.erase(it);
    modified_.erase(from);
    files_[to] = std::move(bytes);
    modified_[to] = now_ns();
}

void MemoryStorage::sync_dir(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    require_dir(dir, dir);
}

void MemoryStorage::remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (files_.erase(path) == 0) fail(Code::not_found, "{}: no such file", path);
    modified_.erase(path);
}

std::vector<std::string> MemoryStorage::list(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    require_dir(dir, dir);
    std::vector<std::string> names;
    for (const auto& [path, bytes] : files_)
        if (parent_dir(path) == dir) names.push_back(base_name(path));
    return names;
}

std::unique_ptr<InputFile> MemoryStorage::open_read(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = files_.find(path);
    if (it == files_.end()) {
        if (dirs_.count(path)) fail(Code::invalid, "{}: not a regular file", path);
        fail(Code::not_found, "{}: no such file", path);
    }
    return std::make_unique<StringInput>(std::make_shared<const std::string>(*it->second));
}

std::optional<FileInfo> MemoryStorage::stat(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dirs_.count(path)) return FileInfo{0, std::nullopt, true};
    auto it = files_.find(path);
    if (it == files_.end()) return std::nullopt;
    auto when = modified_.find(path);
    return FileInfo{it->second->size(), when != modified_.end() ? std::optional<int64_t>(when->second) : std::nullopt,
                    false};
}

namespace {
class MemoryDirLock final : public DirLock {
public:
    MemoryDirLock(std::mutex& mutex, std::shared_ptr<std::set<std::string>> locked, std::string dir)
        : mutex_(mutex), locked_(std::move(locked)), dir_(std::move(dir)) {}
    ~MemoryDirLock() override {
        std::lock_guard<std::mutex> lock(mutex_);
        locked_->erase(dir_);
    }

private:
    std::mutex& mutex_;
    std::shared_ptr<std::set<std::string>> locked_;
    std::string dir_;
};
}  // namespace

std::unique_ptr<DirLock> MemoryStorage::lock(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    require_dir(dir, dir);
    if (!locked_->insert(dir).second) fail(Code::busy, "{}: locked by another checkpoint manager", dir);
    return std::make_unique<MemoryDirLock>(mutex_, locked_, dir);
}

namespace {
// True when path is below dir ("a/b/c" is below "a/b" and "a").
bool below(const std::string& path, const std::string& dir) {
    return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}
}  // namespace

std::vector<std::string> MemoryStorage::list_dirs(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    require_dir(dir, dir);
    std::vector<std::string> names;
    for (const std::string& d : dirs_)
        if (d != dir && !d.empty() && d != "." && d != "/" && parent_dir(d) == dir) names.push_back(base_name(d));
    return names;
}

void MemoryStorage::rename_dir(const std::string& from, const std::string& to) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!dirs_.count(from)) fail(Code::not_found, "{}: rename from {}: no such directory", to, from);
    require_dir(parent_dir(to), to);
    if (dirs_.count(to) || files_.count(to)) fail(Code::io, "{}: rename from {}: the target exists", to, from);
    std::set<std::string> dirs;
    for (const std::string& d : dirs_) dirs.insert(d == from ? to : below(d, from) ? to + d.substr(from.size()) : d);
    std::map<std::string, std::shared_ptr<std::string>> files;
    for (const auto& [path, bytes] : files_) files[below(path, from) ? to + path.substr(from.size()) : path] = bytes;
    std::map<std::string, int64_t> modified;
    for (const auto& [path, t] : modified_) modified[below(path, from) ? to + path.substr(from.size()) : path] = t;
    dirs_.swap(dirs);
    files_.swap(files);
    modified_.swap(modified);
}

void MemoryStorage::remove_tree(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!dirs_.count(dir)) fail(Code::not_found, "{}: no such directory", dir);
    for (auto it = dirs_.begin(); it != dirs_.end();) it = *it == dir || below(*it, dir) ? dirs_.erase(it) : std::next(it);
    for (auto it = files_.begin(); it != files_.end();) it = below(it->first, dir) ? files_.erase(it) : std::next(it);
    for (auto it = modified_.begin(); it != modified_.end();)
        it = below(it->first, dir) ? modified_.erase(it) : std::next(it);
}

void MemoryStorage::put(const std::string& path, std::string bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    files_[path] = std::make_shared<std::string>(std::move(bytes));
    modified_[path] = now_ns();
}

bool MemoryStorage::exists(const std::string& path) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return files_.count(path) != 0;
}

}  // namespace ckpt::core
