// SPDX-License-Identifier: Apache-2.0
// What the C++ binding's tests share: temporary directories, reading and writing whole files, and MapStorage — a ckpt::Storage
// written the way a user writes one (files in a std::map behind a mutex), with switches that make it fail.
#pragma once

#include <ckpt/ckpt.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test {

// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ckpt-cpp-test.XXXXXX";
        if (mkdtemp(&pattern[0]) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string path(const std::string& name = "") const { return name.empty() ? path_ : path_ + "/" + name; }

private:
    std::string path_;
};

// The code of the ckpt::Error f throws; CKPT_OK when it throws none.
inline int code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ckpt::Error& e) {
        return e.code();
    }
    return CKPT_OK;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

// Flips one bit of the first occurrence of `needle` in the file (an array's data, found by its bytes).
inline void corrupt(const std::string& path, const std::string& needle) {
    std::string bytes = read_file(path);
    const size_t at = bytes.find(needle);
    if (at == std::string::npos) throw std::runtime_error("the data to corrupt is not in " + path);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
    write_file(path, bytes);
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Files whose names are not the checkpoint's own (temporaries left behind, say).
inline std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
    return names;
}

// Files and directories in memory. Thread-safe: writers and managers call it from their background threads.
class MapStorage final : public ckpt::Storage {
public:
    struct Counters {
        std::atomic<int> creates{0}, writes{0}, syncs{0}, closes{0}, renames{0}, removes{0}, lists{0}, reads{0};
        std::atomic<int> dir_renames{0};
    };

    // While set, write() throws this message as std::runtime_error (CKPT_EIO for ckpt).
    void fail_writes(const std::string& message) {
        std::lock_guard<std::mutex> lock(mutex_);
        fail_writes_ = message;
    }
    void heal() {
        std::lock_guard<std::mutex> lock(mutex_);
        fail_writes_.clear();
    }
    // What free_space reports (nullopt, the default: the medium cannot tell); a non-empty message makes it throw.
    void report_free_space(std::optional<uint64_t> bytes, const std::string& fail = "") {
        std::lock_guard<std::mutex> lock(mutex_);
        free_ = bytes;
        fail_free_ = fail;
    }
    // The directories free_space was asked about, in order.
    std::vector<std::string> free_space_asked() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return free_asked_;
    }
    bool exists(const std::string& path) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return files_.count(path) != 0;
    }
    std::string contents(const std::string& path) const {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = files_.find(path);
        if (it == files_.end()) throw std::runtime_error("no file " + path);
        return *it->second;
    }
    std::vector<std::string> paths() const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::string> out;
        for (const auto& f : files_) out.push_back(f.first);
        return out;
    }
    const Counters& counters() const { return counters_; }
    // Set to true when the storage is destroyed (the test keeps the flag alive).
    void on_destroy(std::shared_ptr<std::atomic<bool>> flag) { destroyed_ = std::move(flag); }
    ~MapStorage() override {
        if (destroyed_) *destroyed_ = true;
    }

    void make_dirs(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string prefix;
        for (size_t i = 0; i <= dir.size(); ++i) {
            if (i == dir.size() || dir[i] == '/') {
                prefix = dir.substr(0, i);
                if (!prefix.empty()) dirs_.insert(prefix);
            }
        }
    }
    std::unique_ptr<OutputFile> create(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.creates;
        if (files_.count(path) != 0) throw ckpt::Error(CKPT_EEXIST, path + " exists");
        if (!has_dir(parent(path))) throw ckpt::Error(CKPT_ENOTFOUND, "no directory " + parent(path));
        auto data = std::make_shared<std::string>();
        files_[path] = data;
        return std::make_unique<File>(*this, data);
    }
    std::unique_ptr<OutputFile> open_append(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!has_dir(parent(path))) throw ckpt::Error(CKPT_ENOTFOUND, "no directory " + parent(path));
        auto& data = files_[path];
        if (!data) data = std::make_shared<std::string>();
        return std::make_unique<File>(*this, data);
    }
    void rename(const std::string& from, const std::string& to) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.renames;
        auto it = files_.find(from);
        if (it == files_.end()) throw ckpt::Error(CKPT_ENOTFOUND, "no file " + from);
        files_[to] = it->second;
        files_.erase(from);
    }
    void remove(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.removes;
        if (files_.erase(path) == 0) throw ckpt::Error(CKPT_ENOTFOUND, "no file " + path);
    }
    std::vector<std::string> list(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.lists;
        if (!has_dir(dir)) throw ckpt::Error(CKPT_ENOTFOUND, "no directory " + dir);
        std::vector<std::string> names;
        for (const auto& f : files_)
            if (parent(f.first) == (dir.empty() ? std::string(".") : dir)) names.push_back(base(f.first));
        return names;
    }
    std::unique_ptr<InputFile> open_read(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.reads;
        auto it = files_.find(path);
        if (it == files_.end()) throw ckpt::Error(CKPT_ENOTFOUND, "no file " + path);
        return std::make_unique<Reader>(*it->second);  // a snapshot: later writes do not show through
    }
    // Which directory methods ckpt may call (none by default: files only).
    void set_directories(Directories d) { directories_ = d; }
    Directories directories() const override { return directories_; }
    std::vector<std::string> list_dirs(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!has_dir(dir)) throw ckpt::Error(CKPT_ENOTFOUND, "no directory " + dir);
        std::vector<std::string> names;
        for (const std::string& d : dirs_)
            if (parent(d) == (dir.empty() ? std::string(".") : dir)) names.push_back(base(d));
        return names;
    }
    void remove_dir(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& f : files_)
            if (parent(f.first) == dir) throw ckpt::Error(CKPT_EIO, dir + ": not empty");
        if (dirs_.erase(dir) == 0) throw ckpt::Error(CKPT_ENOTFOUND, "no directory " + dir);
    }
    void rename_dir(const std::string& from, const std::string& to) override {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counters_.dir_renames;
        if (dirs_.count(to) != 0) throw ckpt::Error(CKPT_EIO, to + " exists");
        const auto moved = [&](const std::string& p) {
            return p == from ? to : p.compare(0, from.size() + 1, from + "/") == 0 ? to + p.substr(from.size()) : p;
        };
        std::set<std::string> dirs;
        for (const std::string& d : dirs_) dirs.insert(moved(d));
        std::map<std::string, std::shared_ptr<std::string>> files;
        for (const auto& f : files_) files[moved(f.first)] = f.second;
        dirs_.swap(dirs);
        files_.swap(files);
    }
    std::optional<uint64_t> free_space(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        free_asked_.push_back(dir);
        if (!fail_free_.empty()) throw std::runtime_error(fail_free_);
        return free_;
    }

private:
    class File final : public OutputFile {
    public:
        File(MapStorage& owner, std::shared_ptr<std::string> data) : owner_(owner), data_(std::move(data)) {}
        void write(const void* data, size_t size) override {
            std::lock_guard<std::mutex> lock(owner_.mutex_);
            ++owner_.counters_.writes;
            if (!owner_.fail_writes_.empty()) throw std::runtime_error(owner_.fail_writes_);
            data_->append(static_cast<const char*>(data), size);
        }
        void sync() override { ++owner_.counters_.syncs; }
        void close() override { ++owner_.counters_.closes; }

    private:
        MapStorage& owner_;
        std::shared_ptr<std::string> data_;
    };
    class Reader final : public InputFile {
    public:
        explicit Reader(std::string data) : data_(std::move(data)) {}
        uint64_t size() const override { return data_.size(); }
        size_t read_at(uint64_t offset, void* dst, size_t size) override {
            if (offset >= data_.size()) return 0;
            const size_t n = std::min<size_t>(size, data_.size() - offset);
            std::memcpy(dst, data_.data() + offset, n);
            return n;
        }

    private:
        std::string data_;
    };

    static std::string parent(const std::string& path) {
        const size_t slash = path.rfind('/');
        return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
    }
    static std::string base(const std::string& path) {
        const size_t slash = path.rfind('/');
        return slash == std::string::npos ? path : path.substr(slash + 1);
    }
    bool has_dir(const std::string& dir) const { return dir.empty() || dir == "." || dirs_.count(dir) != 0; }

    mutable std::mutex mutex_;
    std::atomic<Directories> directories_{Directories::none};
    std::map<std::string, std::shared_ptr<std::string>> files_;
    std::set<std::string> dirs_;
    std::string fail_writes_;
    std::optional<uint64_t> free_;
    std::string fail_free_;
    std::vector<std::string> free_asked_;
    Counters counters_;
    std::shared_ptr<std::atomic<bool>> destroyed_;
};

// How many times needle occurs in text (not overlapping).
inline size_t occurrences(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
    return n;
}

}  // namespace test
