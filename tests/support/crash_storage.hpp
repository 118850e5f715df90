// SPDX-License-Identifier: Apache-2.0
// CrashStorage: an in-memory filesystem that remembers what a power loss would keep, after SQLite's test6.c
// and RocksDB's FaultInjectionTestFS (DropUnsyncedFileData, DeleteFilesCreatedAfterLastDirSync).
//
// Per file (an inode, shared by the names that point at it) it keeps the bytes written and the bytes as of its
// last sync; per directory, the entries as of its last sync_dir. A create, rename or remove changes the live
// entries at once but becomes durable only when its directory is synced. Directories themselves are durable
// as soon as make_dirs returns: the model is about checkpoint files, not about creating the tree.
//
// crash_at(k) makes operation #k — and every operation after it, as after a real crash nothing more reaches
// the disk — throw Crash instead of running. Operations are counted like FaultyStorage's: every Storage method,
// each OutputFile write / sync / close and each InputFile read_at. durable_view() then builds the files a
// reboot would find, as a MemoryStorage.
#pragma once

#include "core/error.hpp"
#include "storage/memory_storage.hpp"
#include "storage/storage.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ckpt::testing {

using namespace ckpt::core;

// Not a ckpt::core::Error: nothing in the library may mistake a crash for an error it can handle.
struct Crash : std::exception {
    const char* what() const noexcept override { return "simulated crash (power loss)"; }
};

class CrashStorage final : public Storage {
public:
    // Which directory entries survive.
    enum class Entries {
        as_synced,   // those of each directory's last sync_dir: later creates, renames and removes are undone
        as_written,  // the live ones, as if the metadata had reached the disk just before the crash
    };
    // What survives of the bytes written to a file after its last sync.
    enum class Unsynced {
        dropped,  // nothing: the file holds its last-synced bytes (empty if never synced)
        torn,     // the first half of them
        kept,     // all of them, as if writeback had run just before the crash
    };

    // Makes `dir` and `path` exist durably with `bytes`, synced (a checkpoint from an earlier, finished save).
    void plant(const std::string& path, const std::string& bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        add_dirs(parent_dir(path));
        auto inode = std::make_shared<Inode>();
        inode->written = inode->synced = bytes;
        live_[path] = inode;
        durable_[path] = inode;
    }

    // Operation #k and all later ones throw Crash. 0 disarms.
    void crash_at(uint64_t k) {
        std::lock_guard<std::mutex> lock(mutex_);
        crash_at_ = k;
    }
    bool crashed() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return crashed_;
    }
    uint64_t operations() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return log_.size();
    }
    // "#k name path" per operation, one a line.
    std::string log_text() const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string s;
        for (size_t i = 0; i < log_.size(); ++i) s += fmt::format("#{} {}\n", i + 1, log_[i]);
        return s;
    }

    // What a reboot after the crash (or now, if none happened) would find.
    std::unique_ptr<MemoryStorage> durable_view(Entries entries = Entries::as_synced,
                                                Unsynced unsynced = Unsynced::dropped) const {
        std::lock_guard<std::mutex> lock(mutex_);
        auto view = std::make_unique<MemoryStorage>();
        for (const std::string& d : dirs_) view->make_dirs(d);
        const auto& names = entries == Entries::as_synced ? durable_ : live_;
        for (const auto& [path, inode] : names) {
            std::string bytes = inode->synced;
            if (unsynced != Unsynced::dropped && inode->written.size() > inode->synced.size()) {
                // Files are written front to back, so the synced bytes are a prefix of the written ones.
                const size_t tail = inode->written.size() - inode->synced.size();
                bytes = inode->written.substr(0, inode->synced.size() + (unsynced == Unsynced::kept ? tail : tail / 2));
            }
            view->put(path, std::move(bytes));
        }
        return view;
    }

    void make_dirs(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("make_dirs", dir);
        for (const auto& [path, inode] : live_)
            if (path == dir || dir.rfind(path + "/", 0) == 0) fail(Code::io, "{}: exists and is not a directory", path);
        add_dirs(dir);
    }

    std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp_path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("create_temp", target);
        const std::string dir = parent_dir(target);
        require_dir(dir, target);
        std::string temp;
        do temp = join_path(dir, temp_name_for(base_name(target)));
        while (live_.count(temp));
        auto inode = std::make_shared<Inode>();
        live_[temp] = inode;
        *temp_path = temp;
        return std::make_unique<Output>(*this, inode, temp);
    }

    std::unique_ptr<OutputFile> open_append(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("open_append", path);
        require_dir(parent_dir(path), path);
        auto& inode = live_[path];
        if (!inode) inode = std::make_shared<Inode>();
        return std::make_unique<Output>(*this, inode, path);
    }

    void rename(const std::string& from, const std::string& to) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("rename", from + " -> " + to);
        auto it = live_.find(from);
        if (it == live_.end()) fail(Code::not_found, "{}: rename from {}: no such file", to, from);
        require_dir(parent_dir(to), to);
        if (dirs_.count(to)) fail(Code::io, "{}: rename from {}: target is a directory", to, from);
        auto inode = it->second;
        live_.erase(it);
        live_[to] = std::move(inode);
    }

    void sync_dir(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("sync_dir", dir);
        require_dir(dir, dir);
        for (auto it = durable_.begin(); it != durable_.end();)
            it = parent_dir(it->first) == dir ? durable_.erase(it) : std::next(it);
        for (const auto& [path, inode] : live_)
            if (parent_dir(path) == dir) durable_[path] = inode;
    }

    void remove(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("remove", path);
        if (live_.erase(path) == 0) fail(Code::not_found, "{}: no such file", path);
    }

    std::vector<std::string> list(const std::string& dir) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("list", dir);
        require_dir(dir, dir);
        std::vector<std::string> names;
        for (const auto& [path, inode] : live_)
            if (parent_dir(path) == dir) names.push_back(base_name(path));
        for (const std::string& d : dirs_)
            if (d != dir && parent_dir(d) == dir) names.push_back(base_name(d));
        return names;
    }

    std::unique_ptr<InputFile> open_read(const std::string& path) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tick("open_read", path);
        auto it = live_.find(path);
        if (it == live_.end()) {
            if (dirs_.count(path)) fail(Code::invalid, "{}: not a regular file", path);
            fail(Code::not_found, "{}: no such file", path);
        }
        return std::make_unique<Input>(*this, it->second->written, path);
    }

private:
    struct Inode {
        std::string written;
        std::string synced;
    };

    class Output final : public OutputFile {
    public:
        Output(CrashStorage& owner, std::shared_ptr<Inode> inode, std::string path)
            : owner_(owner), inode_(std::move(inode)), path_(std::move(path)) {}
        void write(const void* data, size_t n) override {
            std::lock_guard<std::mutex> lock(owner_.mutex_);
            owner_.tick("write", path_);
            inode_->written.append(static_cast<const char*>(data), n);
        }
        void sync() override {
            std::lock_guard<std::mutex> lock(owner_.mutex_);
            owner_.tick("sync", path_);
            inode_->synced = inode_->written;
        }
        void close() override {
            std::lock_guard<std::mutex> lock(owner_.mutex_);
            owner_.tick("close", path_);
        }

    private:
        CrashStorage& owner_;
        std::shared_ptr<Inode> inode_;
        std::string path_;
    };

    class Input final : public InputFile {
    public:
        Input(CrashStorage& owner, std::string bytes, std::string path)
            : owner_(owner), bytes_(std::move(bytes)), path_(std::move(path)) {}
        uint64_t size() const override { return bytes_.size(); }
        size_t read_at(uint64_t offset, void* dst, size_t n) override {
            {
                std::lock_guard<std::mutex> lock(owner_.mutex_);
                owner_.tick("read_at", path_);
            }
            return BytesInput(bytes_.data(), bytes_.size()).read_at(offset, dst, n);
        }

    private:
        CrashStorage& owner_;
        std::string bytes_;  // a snapshot, as MemoryStorage gives
        std::string path_;
    };

    // Counts one operation (the caller holds mutex_); throws Crash from the crash point on.
    void tick(const char* name, const std::string& path) {
        log_.push_back(fmt::format("{} {}", name, path));
        if (crash_at_ != 0 && log_.size() >= crash_at_) {
            crashed_ = true;
            throw Crash();
        }
    }

    void add_dirs(const std::string& dir) {
        for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
            dirs_.insert(dir.substr(0, end));
            if (end == std::string::npos) break;
        }
    }

    void require_dir(const std::string& dir, const std::string& for_path) const {
        if (!dirs_.count(dir)) fail(Code::not_found, "{}: directory {} does not exist", for_path, dir);
    }

    mutable std::mutex mutex_;
    std::set<std::string> dirs_{".", "/"};
    std::map<std::string, std::shared_ptr<Inode>> live_;
    std::map<std::string, std::shared_ptr<Inode>> durable_;
    std::vector<std::string> log_;
    uint64_t crash_at_ = 0;
    bool crashed_ = false;
};

}  // namespace ckpt::testing
