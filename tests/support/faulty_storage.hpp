// SPDX-License-Identifier: Apache-2.0
// FaultyStorage: a Storage decorator that numbers every operation and makes operation #k fail — once
// (transient) or from k on (persistent) — the "rigged to fail after N operations" VFS of SQLite's test suite.
//
// Counted operations, numbered from 1 in call order: every Storage method, each OutputFile write / patch / sync /
// close and each InputFile read_at (not size(), which cannot fail). A test first runs a scenario without faults to
// learn how many operations it takes (operations()), then reruns it with fail_at(k, …) for every k; the log
// says what operation #k was, so a failure can name it.
//
// What a faulted operation does, by fault:
//   eio          throws Error(io, "…: Input/output error"); the underlying operation does not run.
//   enospc       throws Error(io, "…: No space left on device"); the underlying operation does not run.
//   short_write  a write passes the first half of its bytes to the underlying file, then throws as enospc
//                (what a filling disk does); any other operation fails as eio.
//   failed_sync  a sync or sync_dir throws Error(io, "…: fsync failed: Input/output error") without syncing
//                (on a real disk the data may or may not be there); any other operation fails as eio.
// A faulted close still closes the underlying file (close(2) releases the descriptor even when it fails).
#pragma once

#include "core/error.hpp"
#include "storage/storage.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ckpt::testing {

using namespace ckpt::core;

enum class Fault { eio, enospc, short_write, failed_sync };
enum class Persistence { transient, persistent };

inline const char* fault_name(Fault f) {
    switch (f) {
        case Fault::eio:
            return "EIO";
        case Fault::enospc:
            return "ENOSPC";
        case Fault::short_write:
            return "short write";
        case Fault::failed_sync:
            return "failed fsync";
    }
    return "?";
}

inline const char* persistence_name(Persistence p) { return p == Persistence::transient ? "transient" : "persistent"; }

// One counted call.
struct Operation {
    uint64_t number = 0;  // from 1
    std::string name;     // "create_temp", "write", "sync", "close", "rename", "sync_dir", "read_at", …
    std::string path;     // the file or directory it concerns (rename: "from -> to")
    bool faulted = false;
};

inline std::string describe(const Operation& op) {
    return fmt::format("#{} {} {}{}", op.number, op.name, op.path, op.faulted ? " (faulted)" : "");
}

class FaultyStorage final : public Storage {
public:
    explicit FaultyStorage(std::shared_ptr<Storage> base) : base_(std::move(base)) {}

    // Arms the fault: operation #k fails (transient), or #k and every later one (persistent).
    void fail_at(uint64_t k, Fault fault, Persistence persistence) {
        std::lock_guard<std::mutex> lock(mutex_);
        fail_at_ = k;
        fault_ = fault;
        persistence_ = persistence;
    }
    // No more faults; counting goes on.
    void disarm() {
        std::lock_guard<std::mutex> lock(mutex_);
        fail_at_ = 0;
    }

    uint64_t operations() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return log_.size();
    }
    uint64_t faults_injected() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return injected_;
    }
    // The operation that failed first, if any did.
    std::optional<Operation> first_fault() const {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Operation& op : log_)
            if (op.faulted) return op;
        return std::nullopt;
    }
    std::vector<Operation> log() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return log_;
    }
    // One operation per line, for a failure message.
    std::string log_text() const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string s;
        for (const Operation& op : log_) s += describe(op) + "\n";
        return s;
    }
    Storage& base() { return *base_; }

    void make_dirs(const std::string& dir) override {
        if (begin("make_dirs", dir)) throw_fault("make_dirs", dir);
        base_->make_dirs(dir);
    }

    std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp_path) override {
        if (begin("create_temp", target)) throw_fault("create_temp", target);
        auto file = base_->create_temp(target, temp_path);
        return std::make_unique<Output>(*this, std::move(file), *temp_path);
    }

    std::unique_ptr<OutputFile> open_append(const std::string& path) override {
        if (begin("open_append", path)) throw_fault("open_append", path);
        return std::make_unique<Output>(*this, base_->open_append(path), path);
    }

    void rename(const std::string& from, const std::string& to) override {
        if (begin("rename", from + " -> " + to)) throw_fault("rename", to);
        base_->rename(from, to);
    }

    void sync_dir(const std::string& dir) override {
        if (begin("sync_dir", dir)) throw_fault("sync_dir", dir);
        base_->sync_dir(dir);
    }

    void remove(const std::string& path) override {
        if (begin("remove", path)) throw_fault("remove", path);
        base_->remove(path);
    }

    std::vector<std::string> list(const std::string& dir) override {
        if (begin("list", dir)) throw_fault("list", dir);
        return base_->list(dir);
    }

    std::unique_ptr<InputFile> open_read(const std::string& path) override {
        if (begin("open_read", path)) throw_fault("open_read", path);
        return std::make_unique<Input>(*this, base_->open_read(path), path);
    }

private:
    class Output final : public OutputFile {
    public:
        Output(FaultyStorage& owner, std::unique_ptr<OutputFile> base, std::string path)
            : owner_(owner), base_(std::move(base)), path_(std::move(path)) {}

        void write(const void* data, size_t n) override {
            if (owner_.begin("write", path_)) {
                if (owner_.current_fault() == Fault::short_write) {
                    const size_t part = n / 2;
                    if (part > 0) base_->write(data, part);
                    fail_errno(ENOSPC, fmt::format("{}: short write, {} of {} bytes ({})", path_, part, n,
                                                   owner_.injected_label()));
                }
                owner_.throw_fault("write", path_);
            }
            base_->write(data, n);
        }

        bool can_patch() const override { return base_->can_patch(); }

        void patch(uint64_t offset, const void* data, size_t n) override {
            if (owner_.begin("patch", path_)) owner_.throw_fault("patch", path_);
            base_->patch(offset, data, n);
        }

        void sync() override {
            if (owner_.begin("sync", path_)) owner_.throw_fault("sync", path_);
            base_->sync();
        }

        void close() override {
            if (owner_.begin("close", path_)) {
                try {
                    base_->close();
                } catch (...) {
                    // Reporting the injected fault instead.
                }
                owner_.throw_fault("close", path_);
            }
            base_->close();
        }

    private:
        FaultyStorage& owner_;
        std::unique_ptr<OutputFile> base_;
        std::string path_;
    };

    class Input final : public InputFile {
    public:
        Input(FaultyStorage& owner, std::unique_ptr<InputFile> base, std::string path)
            : owner_(owner), base_(std::move(base)), path_(std::move(path)) {}
        uint64_t size() const override { return base_->size(); }
        size_t read_at(uint64_t offset, void* dst, size_t n) override {
            if (owner_.begin("read_at", path_)) owner_.throw_fault("read_at", path_);
            return base_->read_at(offset, dst, n);
        }

    private:
        FaultyStorage& owner_;
        std::unique_ptr<InputFile> base_;
        std::string path_;
    };

    // Counts and logs one operation; true when it must fail.
    bool begin(const char* name, const std::string& path) {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t number = log_.size() + 1;
        const bool fails = fail_at_ != 0 && (number == fail_at_ || (persistence_ == Persistence::persistent &&
                                                                   number > fail_at_));
        log_.push_back(Operation{number, name, path, fails});
        if (fails) {
            ++injected_;
            last_faulted_ = number;
        }
        return fails;
    }

    Fault current_fault() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return fault_;
    }

    std::string injected_label() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return fmt::format("{} {} injected at operation #{}", persistence_name(persistence_), fault_name(fault_),
                           last_faulted_);
    }

    [[noreturn]] void throw_fault(const char* op, const std::string& path) const {
        const std::string label = injected_label();
        const bool is_sync = std::string(op) == "sync" || std::string(op) == "sync_dir";
        switch (current_fault()) {
            case Fault::enospc:
                fail_errno(ENOSPC, fmt::format("{}: {} failed ({})", path, op, label));
            case Fault::failed_sync:
                if (is_sync) fail_errno(EIO, fmt::format("{}: fsync failed ({})", path, label));
                [[fallthrough]];
            case Fault::eio:
            case Fault::short_write:
                break;
        }
        fail_errno(EIO, fmt::format("{}: {} failed ({})", path, op, label));
    }

    std::shared_ptr<Storage> base_;
    mutable std::mutex mutex_;
    std::vector<Operation> log_;
    uint64_t fail_at_ = 0;  // 0: disarmed
    Fault fault_ = Fault::eio;
    Persistence persistence_ = Persistence::transient;
    uint64_t injected_ = 0;
    uint64_t last_faulted_ = 0;
};

}  // namespace ckpt::testing
