// SPDX-License-Identifier: Apache-2.0
// The checkpoint manager through the C API: where checkpoints land and how they are named, which ones retention
// keeps, restore of the latest with fallback past corrupt files, both npz layouts, the directory lock (also across
// processes), stale temporaries, errors of background saves, logging and argument checks.
//
// Catch2's assertions are not thread-safe: only the test's own thread asserts. Log callbacks (which may run on a
// background save's thread) and the storage callbacks only touch mutex-protected state.
#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/in_child.hpp"
#include "support/temp_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ckpt::testing::message;
using ckpt::testing::read_file;
using ckpt::testing::write_file;

namespace {

using ckpt::testing::TempDir;

using ManagerPtr = ckpt::testing::Manager;
using VarsPtr = ckpt::testing::Vars;

// Names in dir, sorted (no "." and "..").
std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// Records what a manager logs; the callback may run on a background save's thread. Not the line a manager's first
// save logs where the storage shares no blocks (TempDir's tmpfs): it says what the file system is, not what a test
// here does (tests/manager/test_manager_incremental.cpp holds it).
class LogRecorder {
public:
    static void callback(int level, const char* text, void* payload) {
        auto* self = static_cast<LogRecorder*>(payload);
        if (std::string_view(text).rfind("Saving every checkpoint in full: ", 0) == 0) return;
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->entries_.emplace_back(level, text);
    }
    void attach(ckpt_manager_options& o) {
        o.log = &LogRecorder::callback;
        o.log_payload = this;
    }
    std::vector<std::string> at(int level) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::string> out;
        for (const auto& [l, text] : entries_)
            if (l == level) out.push_back(text);
        return out;
    }
    std::string all() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string out;
        for (const auto& [l, text] : entries_) out += (l == CKPT_LOG_INFO ? "INFO " : "WARNING ") + text + "\n";
        return out;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.clear();
    }

private:
    std::mutex mutex_;
    std::vector<std::pair<int, std::string>> entries_;
};

ckpt_manager_options default_options() {
    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    return o;
}

ManagerPtr open_manager(const std::string& logdir, const ckpt_manager_options* opts = nullptr) {
    ckpt_manager* m = nullptr;
    const int rc = ckpt_manager_open(&m, logdir.c_str(), opts);
    INFO(message());
    REQUIRE(rc == CKPT_OK);
    REQUIRE(m != nullptr);
    return ManagerPtr(m);
}

// The checkpoint most tests save: "w" float32[2,3] = seed*100 + i + 0.25 and "step" int64 = seed.
// (seed % 100000 keeps the arithmetic far from overflow for indices up to INT64_MAX.)
float w_value(int64_t seed, int i) { return static_cast<float>((seed % 100000) * 100 + i) + 0.25f; }

VarsPtr make_vars(int64_t seed) {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    float w[6];
    for (int i = 0; i < 6; ++i) w[i] = w_value(seed, i);
    const int64_t shape[2] = {2, 3};
    REQUIRE(ckpt_vars_add(v, "w", CKPT_FLOAT32, 2, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "step", CKPT_INT64, 0, nullptr, &seed, CKPT_COPY) == CKPT_OK);
    return vars;
}

// The bytes make_vars(seed) writes for "w": found in a checkpoint file to corrupt its data.
std::string w_bytes(int64_t seed) {
    float w[6];
    for (int i = 0; i < 6; ++i) w[i] = w_value(seed, i);
    return std::string(reinterpret_cast<const char*>(w), sizeof w);
}

// A zero-filled collection shaped like make_vars(), ready to be restored into.
VarsPtr zeros_vars() {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    const int64_t shape[2] = {2, 3};
    REQUIRE(ckpt_vars_add(v, "w", CKPT_FLOAT32, 2, shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "step", CKPT_INT64, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    return vars;
}

int64_t step_of(const ckpt_vars* v) {
    size_t i = 0;
    REQUIRE(ckpt_vars_find(v, "step", &i) == CKPT_OK);
    REQUIRE(ckpt_vars_dtype(v, i) == CKPT_INT64);
    int64_t step = 0;
    std::memcpy(&step, ckpt_vars_data(v, i), sizeof step);
    return step;
}

// True if "w" holds exactly what make_vars(seed) put there.
bool w_is(const ckpt_vars* v, int64_t seed) {
    size_t i = 0;
    if (ckpt_vars_find(v, "w", &i) != CKPT_OK || ckpt_vars_nbytes(v, i) != 6 * sizeof(float)) return false;
    return std::memcmp(ckpt_vars_data(v, i), w_bytes(seed).data(), 6 * sizeof(float)) == 0;
}

void save(ckpt_manager* m, int64_t idx) {
    VarsPtr v = make_vars(idx);
    const int rc = ckpt_manager_save(m, v.get(), idx);
    INFO("saving " << idx << ": " << message());
    REQUIRE(rc == CKPT_OK);
}

void save_all(ckpt_manager* m, std::initializer_list<int64_t> indices) {
    for (int64_t i : indices) save(m, i);
}

std::vector<int64_t> list_of(ckpt_manager* m) {
    size_t n = 0;
    const int rc = ckpt_manager_list(m, nullptr, 0, &n);
    INFO(message());
    REQUIRE((rc == CKPT_OK || rc == CKPT_EBUFS));
    std::vector<int64_t> out(n);
    if (n > 0) REQUIRE(ckpt_manager_list(m, out.data(), out.size(), &n) == CKPT_OK);
    REQUIRE(n == out.size());
    return out;
}

std::string path_of(ckpt_manager* m, int64_t idx) {
    char buf[4096];
    REQUIRE(ckpt_manager_path(m, idx, buf, sizeof buf) == CKPT_OK);
    return buf;
}

// Restores LATEST (or idx) into a fresh zeros_vars(); returns the code, the restored index and the step read.
struct Restored {
    int rc;
    int64_t idx;
    int64_t step;
    bool w_matches_step;
};
Restored restore(ckpt_manager* m, int64_t idx = CKPT_LATEST) {
    VarsPtr v = zeros_vars();
    int64_t restored = -100;
    const int rc = ckpt_manager_restore(m, v.get(), idx, &restored);
    const int64_t step = step_of(v.get());
    return {rc, restored, step, w_is(v.get(), step)};
}

// ------------------------------------------------------------------------------------------------ corruption

// A child process whose manager holds `logdir` (it saved checkpoint 1, which took the lock) until kill().
class LockHolder {
public:
    explicit LockHolder(const std::string& logdir) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        REQUIRE(::pipe(hold_) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::close(ready[0]);
            ::close(hold_[1]);
            ckpt_manager* m = nullptr;
            char rc = static_cast<char>(ckpt_manager_open(&m, logdir.c_str(), nullptr));
            if (rc == CKPT_OK) {
                VarsPtr v = make_vars(1);
                rc = static_cast<char>(ckpt_manager_save(m, v.get(), 1));  // takes the lock
            }
            if (::write(ready[1], &rc, 1) != 1) ::_exit(2);
            char byte;
            while (::read(hold_[0], &byte, 1) < 0) {
            }  // holds the lock until killed
            ::_exit(0);
        }
        ::close(ready[1]);
        ::close(hold_[0]);
        char child_rc = 1;
        REQUIRE(::read(ready[0], &child_rc, 1) == 1);
        ::close(ready[0]);
        REQUIRE(child_rc == CKPT_OK);
    }
    ~LockHolder() {
        if (pid_ > 0) kill();
    }
    LockHolder(const LockHolder&) = delete;
    LockHolder& operator=(const LockHolder&) = delete;
    pid_t pid() const { return pid_; }
    // SIGKILLs the holder and reaps it; returns its wait status.
    int kill() {
        REQUIRE(::kill(pid_, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(pid_, &status, 0) == pid_);
        ::close(hold_[1]);
        pid_ = -1;
        return status;
    }

private:
    int hold_[2];
    pid_t pid_ = -1;
};

void truncate_file(const std::string& path) {
    const auto size = fs::file_size(path);
    fs::resize_file(path, size / 2);
}

void flip_data_byte(const std::string& path, int64_t seed) {
    std::string bytes = read_file(path);
    const std::string data = w_bytes(seed);
    const auto at = bytes.find(data);
    REQUIRE(at != std::string::npos);
    REQUIRE(bytes.find(data, at + 1) == std::string::npos);
    bytes[at + 9] = static_cast<char>(bytes[at + 9] ^ 0x10);
    write_file(path, bytes);
}

void replace_with_non_zip(const std::string& path) { write_file(path, "this is not a zip archive, just some text\n"); }

// --------------------------------------------------------------------------------------- a storage in memory

// A ckpt_storage over a std::map, written against ckpt_storage_ops as an FFI user would; `fail_writes` makes
// every write fail with CKPT_EIO (only writes to paths containing `fail_only`, when that is set: set it before the
// saves it is meant for start).
class MapStorage {
public:
    std::atomic<bool> fail_writes{false};
    std::string fail_only;

    // A storage handle for this map (the map must outlive every manager using it).
    ckpt_storage* make() {
        ckpt_storage_ops ops;
        std::memset(&ops, 0, sizeof ops);
        ops.version = CKPT_STORAGE_OPS_VERSION;
        ops.payload = this;
        ops.make_dirs = &MapStorage::make_dirs;
        ops.create = &MapStorage::create;
        ops.write = &MapStorage::write;
        ops.sync = [](void*, void*) { return CKPT_OK; };
        ops.close = [](void*, void* file) {
            delete static_cast<std::string*>(file);
            return CKPT_OK;
        };
        ops.rename = &MapStorage::rename;
        ops.remove = &MapStorage::remove;
        ops.list = &MapStorage::list;
        ops.open_read = &MapStorage::open_read;
        ops.read_at = &MapStorage::read_at;
        ops.close_read = [](void*, void* file) { delete static_cast<std::string*>(file); };
        ckpt_storage* s = nullptr;
        REQUIRE(ckpt_storage_new(&s, &ops) == CKPT_OK);
        return s;
    }

    // Names of the files directly in dir, sorted.
    std::vector<std::string> files_in(const std::string& dir) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::string> out;
        for (const auto& [path, bytes] : files_)
            if (parent_of(path) == dir) out.push_back(path.substr(dir.empty() ? 0 : dir.size() + 1));
        return out;
    }

private:
    static MapStorage& self(void* p) { return *static_cast<MapStorage*>(p); }
    static std::string parent_of(const std::string& path) {
        const auto slash = path.rfind('/');
        return slash == std::string::npos ? std::string() : path.substr(0, slash);
    }

    static int make_dirs(void* p, const char* dir) {
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        std::string d = dir;
        for (size_t slash = d.find('/'); slash != std::string::npos; slash = d.find('/', slash + 1))
            self(p).dirs_.insert(d.substr(0, slash));
        self(p).dirs_.insert(d);
        return CKPT_OK;
    }
    static int create(void* p, const char* path, void** file) {
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        if (self(p).dirs_.count(parent_of(path)) == 0) return CKPT_ENOTFOUND;
        if (self(p).files_.count(path) != 0) return CKPT_EEXIST;
        self(p).files_[path];
        *file = new std::string(path);
        return CKPT_OK;
    }
    static int write(void* p, void* file, const void* data, size_t size) {
        const std::string& path = *static_cast<std::string*>(file);
        if (self(p).fail_writes && path.find(self(p).fail_only) != std::string::npos) return CKPT_EIO;
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        self(p).files_[path].append(static_cast<const char*>(data), size);
        return CKPT_OK;
    }
    static int rename(void* p, const char* from, const char* to) {
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        auto it = self(p).files_.find(from);
        if (it == self(p).files_.end()) return CKPT_ENOTFOUND;
        std::string bytes = std::move(it->second);
        self(p).files_.erase(it);
        self(p).files_[to] = std::move(bytes);
        return CKPT_OK;
    }
    static int remove(void* p, const char* path) {
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        return self(p).files_.erase(path) == 1 ? CKPT_OK : CKPT_ENOTFOUND;
    }
    static int list(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
        std::vector<std::string> names;
        {
            std::lock_guard<std::mutex> lock(self(p).mutex_);
            if (self(p).dirs_.count(dir) == 0) return CKPT_ENOTFOUND;
        }
        names = self(p).files_in(dir);
        for (const auto& n : names)
            if (int rc = entry(n.c_str(), ctx)) return rc;
        return CKPT_OK;
    }
    static int open_read(void* p, const char* path, void** file, uint64_t* size) {
        std::lock_guard<std::mutex> lock(self(p).mutex_);
        auto it = self(p).files_.find(path);
        if (it == self(p).files_.end()) return CKPT_ENOTFOUND;
        auto* copy = new std::string(it->second);
        *file = copy;
        *size = copy->size();
        return CKPT_OK;
    }
    static int read_at(void*, void* file, uint64_t offset, void* dst, size_t size, size_t* got) {
        const std::string& bytes = *static_cast<std::string*>(file);
        *got = 0;
        if (offset >= bytes.size()) return CKPT_OK;
        *got = std::min<size_t>(size, bytes.size() - static_cast<size_t>(offset));
        std::memcpy(dst, bytes.data() + offset, *got);
        return CKPT_OK;
    }

    std::mutex mutex_;
    std::set<std::string> dirs_{"", "."};
    std::map<std::string, std::string> files_;
};

// Redirects file descriptor 2 into a file until stop() (or the end of the scope).
class StderrCapture {
public:
    explicit StderrCapture(std::string file) : file_(std::move(file)) {
        std::fflush(stderr);
        saved_ = ::dup(2);
        const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (saved_ < 0 || fd < 0) throw std::runtime_error("cannot capture stderr");
        ::dup2(fd, 2);
        ::close(fd);
    }
    ~StderrCapture() { stop(); }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

    std::string stop() {
        if (saved_ >= 0) {
            std::fflush(stderr);
            ::dup2(saved_, 2);
            ::close(saved_);
            saved_ = -1;
        }
        return read_file(file_);
    }

private:
    std::string file_;
    int saved_ = -1;
};

// One array of every numeric dtype, with the bit patterns that a lossy path would change.
struct Sample {
    std::string name;
    uint32_t dtype;
    std::vector<int64_t> shape;
    std::string bytes;
};

template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
    std::string out(values.size() * sizeof(T), '\0');
    std::memcpy(&out[0], values.begin(), out.size());
    return out;
}

std::vector<Sample> dtype_samples() {
    using i64 = std::numeric_limits<int64_t>;
    return {
        {"bool", CKPT_BOOL, {4}, bytes_of<uint8_t>({1, 0, 0, 1})},
        {"int8", CKPT_INT8, {4}, bytes_of<int8_t>({-128, 127, 0, -1})},
        {"int16", CKPT_INT16, {2}, bytes_of<int16_t>({-32768, 32767})},
        {"int32", CKPT_INT32, {3}, bytes_of<int32_t>({std::numeric_limits<int32_t>::min(), -7, 2147483647})},
        {"int64", CKPT_INT64, {2}, bytes_of<int64_t>({i64::min(), i64::max()})},
        {"uint8", CKPT_UINT8, {2, 2}, bytes_of<uint8_t>({0, 255, 0x5A, 0xA5})},
        {"uint16", CKPT_UINT16, {2}, bytes_of<uint16_t>({0, 65535})},
        {"uint32", CKPT_UINT32, {2}, bytes_of<uint32_t>({0, 0xFFFFFFFFu})},
        {"uint64", CKPT_UINT64, {2}, bytes_of<uint64_t>({0, 0xFFFFFFFFFFFFFFFFull})},
        {"float16", CKPT_FLOAT16, {4}, bytes_of<uint16_t>({0x7E01, 0xFC02, 0x8000, 0x0001})},
        {"float32", CKPT_FLOAT32, {1, 4}, bytes_of<uint32_t>({0x7FC00001u, 0xFFA5A5A5u, 0x80000000u, 0x00000001u})},
        {"float64", CKPT_FLOAT64, {3}, bytes_of<uint64_t>({0x7FF8000000000001ull, 0x8000000000000000ull, 1ull})},
        {"complex64", CKPT_COMPLEX64, {2}, bytes_of<uint32_t>({0x3F800000u, 0x7FC00002u, 0x80000000u, 0xBF800000u})},
        {"complex128", CKPT_COMPLEX128, {1}, bytes_of<uint64_t>({0xFFF0DEADBEEF0001ull, 0x0000000000000001ull})},
        {"scalar", CKPT_FLOAT64, {}, bytes_of<double>({-0.0})},
        {"empty", CKPT_INT32, {0, 3}, std::string()},
        {"cube", CKPT_INT16, {2, 1, 2}, bytes_of<int16_t>({1, -2, 3, -4})},
    };
}

VarsPtr vars_of(const std::vector<Sample>& samples, bool with_data) {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    for (const Sample& s : samples) {
        const void* data = with_data && !s.bytes.empty() ? s.bytes.data() : nullptr;
        REQUIRE(ckpt_vars_add(v, s.name.c_str(), s.dtype, static_cast<uint32_t>(s.shape.size()), s.shape.data(), data,
                              CKPT_COPY) == CKPT_OK);
    }
    return vars;
}

void require_samples(const ckpt_vars* v, const std::vector<Sample>& samples) {
    REQUIRE(ckpt_vars_count(v) == samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
        const Sample& s = samples[i];
        INFO("array " << s.name);
        CHECK(ckpt_vars_name(v, i) == s.name);
        CHECK(ckpt_vars_dtype(v, i) == s.dtype);
        REQUIRE(ckpt_vars_ndim(v, i) == s.shape.size());
        CHECK(std::vector<int64_t>(ckpt_vars_shape(v, i), ckpt_vars_shape(v, i) + s.shape.size()) == s.shape);
        REQUIRE(ckpt_vars_nbytes(v, i) == s.bytes.size());
        if (!s.bytes.empty()) CHECK(std::memcmp(ckpt_vars_data(v, i), s.bytes.data(), s.bytes.size()) == 0);
    }
}

}  // namespace

// ====================================================================================================== layout

TEST_CASE("Checkpoints are files <logdir>/ckpt/%010d.npz by default", "[manager][layout]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save(m.get(), 7);
    const std::string expected = logdir.file("ckpt/0000000007.npz");
    CHECK(fs::is_regular_file(expected));
    CHECK(path_of(m.get(), 7) == expected);
    CHECK(entries(logdir.file("ckpt")) == std::vector<std::string>{".ckpt.lock", "0000000007.npz"});

    ckpt_vars* read = nullptr;
    REQUIRE(ckpt_read(&read, expected.c_str(), nullptr) == CKPT_OK);
    VarsPtr owned(read);
    CHECK(step_of(read) == 7);
    CHECK(w_is(read, 7));
}

TEST_CASE("An empty subdir puts the checkpoints in the logdir itself", "[manager][layout]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.subdir = "";
    ManagerPtr m = open_manager(logdir.str(), &o);
    save(m.get(), 3);
    CHECK(path_of(m.get(), 3) == logdir.file("0000000003.npz"));
    CHECK(entries(logdir.str()) == std::vector<std::string>{".ckpt.lock", "0000000003.npz"});
    CHECK(list_of(m.get()) == std::vector<int64_t>{3});
}

TEST_CASE("A custom subdir puts the checkpoints there", "[manager][layout]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    std::string subdir = "runs/first";
    o.subdir = subdir.c_str();
    ManagerPtr m = open_manager(logdir.str(), &o);
    subdir = "overwritten";  // the manager keeps its own copy
    save(m.get(), 11);
    CHECK(fs::is_regular_file(logdir.file("runs/first/0000000011.npz")));
    CHECK(path_of(m.get(), 11) == logdir.file("runs/first/0000000011.npz"));
    CHECK_FALSE(fs::exists(logdir.file("ckpt")));
    CHECK_FALSE(fs::exists(logdir.file("overwritten")));
}

TEST_CASE("Indices wider than ten digits are saved, listed and restored", "[manager][layout]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 0;
    ManagerPtr m = open_manager(logdir.str(), &o);
    const int64_t wide = 12345678901;
    const int64_t max = std::numeric_limits<int64_t>::max();
    save_all(m.get(), {max, wide, 42});

    CHECK(fs::is_regular_file(logdir.file("ckpt/12345678901.npz")));
    CHECK(fs::is_regular_file(logdir.file("ckpt/9223372036854775807.npz")));
    CHECK(list_of(m.get()) == std::vector<int64_t>{42, wide, max});

    const Restored latest = restore(m.get());
    CHECK(latest.rc == CKPT_OK);
    CHECK(latest.idx == max);
    CHECK(latest.step == max);

    const Restored specific = restore(m.get(), wide);
    CHECK(specific.rc == CKPT_OK);
    CHECK(specific.idx == wide);
    CHECK(specific.step == wide);
    CHECK(specific.w_matches_step);
}

TEST_CASE("ckpt_manager_path writes the path a checkpoint index has", "[manager][layout]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    CHECK(path_of(m.get(), 0) == logdir.file("ckpt/0000000000.npz"));
    CHECK(path_of(m.get(), 42) == logdir.file("ckpt/0000000042.npz"));
    CHECK(path_of(m.get(), 9999999999) == logdir.file("ckpt/9999999999.npz"));
    CHECK(path_of(m.get(), 12345678901) == logdir.file("ckpt/12345678901.npz"));
    CHECK_FALSE(fs::exists(logdir.file("ckpt/0000000042.npz")));  // only a name: nothing is created
}

TEST_CASE("ckpt_checkpoint_idx accepts exactly the names of checkpoints", "[manager][layout]") {
    SECTION("a ten-digit name is its number") {
        CHECK(ckpt_checkpoint_idx("0000000042.npz") == 42);
        CHECK(ckpt_checkpoint_idx("0000000000.npz") == 0);
        CHECK(ckpt_checkpoint_idx("9999999999.npz") == 9999999999);
    }
    SECTION("a directory in front of the name is ignored") {
        CHECK(ckpt_checkpoint_idx("dir/0000000042.npz") == 42);
        CHECK(ckpt_checkpoint_idx("/abs/logdir/ckpt/0000000042.npz") == 42);
    }
    SECTION("wider names without leading zeros are their number, up to INT64_MAX") {
        CHECK(ckpt_checkpoint_idx("12345678901.npz") == 12345678901);
        CHECK(ckpt_checkpoint_idx("9223372036854775807.npz") == std::numeric_limits<int64_t>::max());
    }
    SECTION("fewer than ten digits is not a checkpoint") {
        CHECK(ckpt_checkpoint_idx("42.npz") == -1);
        CHECK(ckpt_checkpoint_idx("000000042.npz") == -1);
    }
    SECTION("a leading zero beyond the ten-digit padding is not a checkpoint") {
        CHECK(ckpt_checkpoint_idx("00000000042.npz") == -1);
        CHECK(ckpt_checkpoint_idx("012345678901.npz") == -1);
    }
    SECTION("temporaries and other suffixes are not checkpoints") {
        CHECK(ckpt_checkpoint_idx("0000000042.npz.tmp-abc") == -1);
        CHECK(ckpt_checkpoint_idx(".0000000042.npz.tmp-AbC123") == -1);
        CHECK(ckpt_checkpoint_idx("0000000042.npy") == -1);
        CHECK(ckpt_checkpoint_idx("0000000042.NPZ") == -1);
        CHECK(ckpt_checkpoint_idx("0000000042") == -1);
        CHECK(ckpt_checkpoint_idx("0000000042.npz/") == -1);
    }
    SECTION("anything but digits before .npz is not a checkpoint") {
        CHECK(ckpt_checkpoint_idx("x0000000042.npz") == -1);
        CHECK(ckpt_checkpoint_idx("000000004x.npz") == -1);
        CHECK(ckpt_checkpoint_idx("-000000042.npz") == -1);
        CHECK(ckpt_checkpoint_idx("+000000042.npz") == -1);
        CHECK(ckpt_checkpoint_idx(" 0000000042.npz") == -1);
        CHECK(ckpt_checkpoint_idx(".npz") == -1);
        CHECK(ckpt_checkpoint_idx("") == -1);
    }
    SECTION("numbers beyond INT64_MAX are not checkpoints") {
        CHECK(ckpt_checkpoint_idx("9223372036854775808.npz") == -1);
        CHECK(ckpt_checkpoint_idx("18446744073709551615.npz") == -1);
        CHECK(ckpt_checkpoint_idx("18446744073709551616.npz") == -1);
        CHECK(ckpt_checkpoint_idx("99999999999999999999999999.npz") == -1);
    }
    SECTION("NULL is not a checkpoint") { CHECK(ckpt_checkpoint_idx(nullptr) == -1); }
}

TEST_CASE("Listing ignores every file that is not a checkpoint", "[manager][layout]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 0;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {3, 5});
    const std::string dir = logdir.file("ckpt");

    SECTION("junk and temporary names are ignored") {
        for (const char* junk : {"README", "42.npz", "00000000042.npz", "x0000000042.npz", "0000000042.npz.tmp-abc",
                                 ".0000000042.npz.tmp-AbC123", "0000000042.NPZ", "0000000042.npy", ".npz"})
            write_file(dir + "/" + junk, "junk");
        CHECK(list_of(m.get()) == std::vector<int64_t>{3, 5});
        int64_t latest = -1;
        REQUIRE(ckpt_manager_latest(m.get(), &latest) == CKPT_OK);
        CHECK(latest == 5);
    }
    SECTION("a subdirectory is ignored") {
        fs::create_directory(dir + "/notes");
        write_file(dir + "/notes/0000000099.npz", "not in the checkpoint directory");
        CHECK(list_of(m.get()) == std::vector<int64_t>{3, 5});
    }
    SECTION("a subdirectory named like a checkpoint is not listed") {
        fs::create_directory(dir + "/0000000099.npz");
        CHECK(list_of(m.get()) == std::vector<int64_t>{3, 5});
    }
    SECTION("a subdirectory named like a checkpoint does not stop restoring the latest") {
        fs::create_directory(dir + "/0000000099.npz");
        const Restored r = restore(m.get());
        INFO(message());
        CHECK(r.rc == CKPT_OK);
        CHECK(r.idx == 5);
        CHECK(r.step == 5);
    }
}

TEST_CASE("Listing sorts indices as numbers, not as strings", "[manager][layout]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 0;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {100, 10000000000, 9, 10});
    CHECK(list_of(m.get()) == std::vector<int64_t>{9, 10, 100, 10000000000});
    int64_t latest = -1;
    REQUIRE(ckpt_manager_latest(m.get(), &latest) == CKPT_OK);
    CHECK(latest == 10000000000);
}

// =================================================================================================== retention

TEST_CASE("keep=3 keeps the newest three checkpoints by number", "[manager][retention]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 3;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2, 3});
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2, 3});
    save_all(m.get(), {4, 5, 6});
    CHECK(list_of(m.get()) == std::vector<int64_t>{4, 5, 6});
    CHECK(entries(logdir.file("ckpt")) ==
          std::vector<std::string>{".ckpt.lock", "0000000004.npz", "0000000005.npz", "0000000006.npz"});
}

TEST_CASE("The default keeps the newest ten checkpoints", "[manager][retention]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    for (int64_t i = 1; i <= 12; ++i) save(m.get(), i);
    CHECK(list_of(m.get()) == std::vector<int64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST_CASE("keep <= 0 keeps every checkpoint", "[manager][retention]") {
    const int32_t keep = GENERATE(0, -1, std::numeric_limits<int32_t>::min());
    INFO("keep = " << keep);
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = keep;
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (int64_t i = 1; i <= 12; ++i) save(m.get(), i);
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST_CASE("keep_every also keeps the multiples of keep_every", "[manager][retention]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 2;
    o.keep_every = 5;
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (int64_t i = 1; i <= 12; ++i) save(m.get(), i);
    CHECK(list_of(m.get()) == std::vector<int64_t>{5, 10, 11, 12});
}

TEST_CASE("Saving an index lower than the existing ones keeps the newest by number and the one just written",
          "[manager][retention]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 3;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {10, 20, 30});
    save(m.get(), 5);
    CHECK(list_of(m.get()) == std::vector<int64_t>{5, 10, 20, 30});

    const Restored just_written = restore(m.get(), 5);
    CHECK(just_written.rc == CKPT_OK);
    CHECK(just_written.step == 5);
    const Restored latest = restore(m.get());
    CHECK(latest.idx == 30);

    SECTION("the next save removes it like any older checkpoint") {
        save(m.get(), 40);
        CHECK(list_of(m.get()) == std::vector<int64_t>{20, 30, 40});
    }
}

TEST_CASE("An 11-digit index is newer than every 10-digit one for retention", "[manager][retention]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 2;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {9999999998, 9999999999, 10000000000});
    CHECK(list_of(m.get()) == std::vector<int64_t>{9999999999, 10000000000});
    save(m.get(), 10000000001);
    CHECK(list_of(m.get()) == std::vector<int64_t>{10000000000, 10000000001});
    CHECK(entries(logdir.file("ckpt")) == std::vector<std::string>{".ckpt.lock", "10000000000.npz", "10000000001.npz"});
}

TEST_CASE("Saving an existing index replaces it with the new values and leaves no temporary", "[manager][retention]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save(m.get(), 7);
    VarsPtr other = make_vars(8);
    REQUIRE(ckpt_manager_save(m.get(), other.get(), 7) == CKPT_OK);

    CHECK(list_of(m.get()) == std::vector<int64_t>{7});
    const Restored r = restore(m.get(), 7);
    CHECK(r.rc == CKPT_OK);
    CHECK(r.step == 8);
    CHECK(r.w_matches_step);
    CHECK(entries(logdir.file("ckpt")) == std::vector<std::string>{".ckpt.lock", "0000000007.npz"});
}

TEST_CASE("Asynchronous saves keep the same checkpoints as synchronous ones", "[manager][retention][async]") {
    TempDir sync_dir, async_dir;
    ckpt_manager_options o = default_options();
    o.keep = 3;
    o.keep_every = 4;
    ManagerPtr sync = open_manager(sync_dir.str(), &o);
    o.flags = CKPT_MANAGER_ASYNC;
    o.queue_depth = 2;
    ManagerPtr async = open_manager(async_dir.str(), &o);
    for (int64_t i = 1; i <= 12; ++i) {
        save(sync.get(), i);
        save(async.get(), i);
    }
    REQUIRE(ckpt_manager_wait(async.get()) == CKPT_OK);

    const std::vector<int64_t> expected{4, 8, 10, 11, 12};
    CHECK(list_of(sync.get()) == expected);
    CHECK(list_of(async.get()) == expected);
    CHECK(entries(async_dir.file("ckpt")) == entries(sync_dir.file("ckpt")));
    for (int64_t i : expected) {
        const Restored r = restore(async.get(), i);
        CHECK(r.rc == CKPT_OK);
        CHECK(r.step == i);
        CHECK(r.w_matches_step);
    }
}

TEST_CASE("Retention never deletes files that are not checkpoints", "[manager][retention]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 1;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save(m.get(), 1);  // the first save's cleanup of stale temporaries is done
    const std::string dir = logdir.file("ckpt");
    const std::vector<std::string> junk{"README", "42.npz", "00000000001.npz", "x0000000001.npz",
                                        "0000000001.npz.tmp-abc", ".0000000001.npz.tmp-AbC123", "notes.txt"};
    for (const auto& name : junk) write_file(dir + "/" + name, "keep me: " + name);
    fs::create_directory(dir + "/sub");

    for (int64_t i = 2; i <= 5; ++i) save(m.get(), i);

    CHECK(list_of(m.get()) == std::vector<int64_t>{5});
    for (const auto& name : junk) {
        INFO(name);
        CHECK(read_file(dir + "/" + name) == "keep me: " + name);
    }
    CHECK(fs::is_directory(dir + "/sub"));
}

TEST_CASE("An asynchronous save copies the arrays before it returns", "[manager][async]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_ASYNC;
    ManagerPtr m = open_manager(logdir.str(), &o);
    int64_t step = 1;
    float w[6];
    for (int i = 0; i < 6; ++i) w[i] = w_value(1, i);
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
    VarsPtr v(raw);
    const int64_t shape[2] = {2, 3};
    REQUIRE(ckpt_vars_add(raw, "w", CKPT_FLOAT32, 2, shape, w, CKPT_BORROW) == CKPT_OK);
    REQUIRE(ckpt_vars_add(raw, "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW) == CKPT_OK);

    REQUIRE(ckpt_manager_save(m.get(), raw, 1) == CKPT_OK);
    step = 666;  // training goes on at once
    std::fill(std::begin(w), std::end(w), -1.0f);
    REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);

    const Restored r = restore(m.get());
    CHECK(r.idx == 1);
    CHECK(r.step == 1);
    CHECK(r.w_matches_step);
}

TEST_CASE("Restore waits for the asynchronous saves made before it", "[manager][async]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_ASYNC;
    o.queue_depth = 3;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2, 3});
    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 3);
    CHECK(r.step == 3);
}

// ===================================================================================================== restore

TEST_CASE("A checkpoint round-trips bit-exact in every numeric dtype", "[manager][restore]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    const std::vector<Sample> samples = dtype_samples();
    VarsPtr original = vars_of(samples, true);
    REQUIRE(ckpt_manager_save(m.get(), original.get(), 3) == CKPT_OK);

    SECTION("restore fills an existing collection and reports the index") {
        VarsPtr target = vars_of(samples, false);
        int64_t restored = -100;
        REQUIRE(ckpt_manager_restore(m.get(), target.get(), CKPT_LATEST, &restored) == CKPT_OK);
        CHECK(restored == 3);
        require_samples(target.get(), samples);
    }
    SECTION("restored_idx may be NULL") {
        VarsPtr target = vars_of(samples, false);
        REQUIRE(ckpt_manager_restore(m.get(), target.get(), 3, nullptr) == CKPT_OK);
        require_samples(target.get(), samples);
    }
    SECTION("read returns the same arrays in the same order") {
        ckpt_vars* read = nullptr;
        int64_t restored = -100;
        REQUIRE(ckpt_manager_read(m.get(), CKPT_LATEST, &read, &restored) == CKPT_OK);
        VarsPtr owned(read);
        CHECK(restored == 3);
        require_samples(read, samples);
    }
}

TEST_CASE("Restore of a specific index uses that checkpoint", "[manager][restore]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save_all(m.get(), {1, 2, 3});
    const Restored r = restore(m.get(), 2);
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 2);
    CHECK(r.step == 2);
    CHECK(r.w_matches_step);
}

TEST_CASE("Restore of an index that has no checkpoint is CKPT_ENOTFOUND", "[manager][restore]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save_all(m.get(), {1, 3});
    VarsPtr v = zeros_vars();
    CHECK(ckpt_manager_restore(m.get(), v.get(), 2, nullptr) == CKPT_ENOTFOUND);
    CHECK_THAT(message(), Contains("0000000002.npz"));
    ckpt_vars* read = reinterpret_cast<ckpt_vars*>(&v);  // any non-NULL value: must come back NULL
    CHECK(ckpt_manager_read(m.get(), 2, &read, nullptr) == CKPT_ENOTFOUND);
    CHECK(read == nullptr);
}

TEST_CASE("Restore of the latest with no checkpoints is CKPT_ENOTFOUND and logs 'No checkpoints found'",
          "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    write_file(logdir.file("ckpt/README"), "not a checkpoint");

    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_ENOTFOUND);
    CHECK(r.step == 0);  // nothing was written into the collection
    const auto infos = log.at(CKPT_LOG_INFO);
    REQUIRE(infos.size() == 1);
    CHECK_THAT(infos[0], Contains("No checkpoints found"));
    CHECK(log.at(CKPT_LOG_WARNING).empty());

    ckpt_vars* read = nullptr;
    CHECK(ckpt_manager_read(m.get(), CKPT_LATEST, &read, nullptr) == CKPT_ENOTFOUND);
    CHECK(read == nullptr);
    int64_t latest = -100;
    CHECK(ckpt_manager_latest(m.get(), &latest) == CKPT_ENOTFOUND);
}

TEST_CASE("A successful restore logs 'Resuming from <path>'", "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});
    REQUIRE(restore(m.get()).rc == CKPT_OK);
    const auto infos = log.at(CKPT_LOG_INFO);
    REQUIRE(infos.size() == 1);
    CHECK_THAT(infos[0], Contains("Resuming from " + path_of(m.get(), 2)));
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

TEST_CASE("A corrupt newest checkpoint is skipped for the previous one, with a warning naming it",
          "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});
    const std::string newest = path_of(m.get(), 2);

    SECTION("a truncated file") { truncate_file(newest); }
    SECTION("one flipped data byte (CRC-32)") { flip_data_byte(newest, 2); }
    SECTION("a file that is not a zip archive") { replace_with_non_zip(newest); }

    const Restored r = restore(m.get());
    INFO(log.all());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 1);
    CHECK(r.step == 1);
    CHECK(r.w_matches_step);
    const auto warnings = log.at(CKPT_LOG_WARNING);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains(newest));
    const auto infos = log.at(CKPT_LOG_INFO);
    REQUIRE(infos.size() == 1);
    CHECK_THAT(infos[0], Contains("Resuming from " + path_of(m.get(), 1)));

    // Not validated: the newest file on disk is still the newest index.
    int64_t latest = -1;
    REQUIRE(ckpt_manager_latest(m.get(), &latest) == CKPT_OK);
    CHECK(latest == 2);
}

TEST_CASE("ckpt_manager_read falls back past a corrupt newest checkpoint too", "[manager][restore]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save_all(m.get(), {1, 2});
    flip_data_byte(path_of(m.get(), 2), 2);
    ckpt_vars* read = nullptr;
    int64_t restored = -100;
    REQUIRE(ckpt_manager_read(m.get(), CKPT_LATEST, &read, &restored) == CKPT_OK);
    VarsPtr owned(read);
    CHECK(restored == 1);
    CHECK(step_of(read) == 1);
    CHECK(w_is(read, 1));
}

TEST_CASE("With the two newest corrupt the third is restored and two warnings are logged", "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2, 3, 4});
    truncate_file(path_of(m.get(), 4));
    flip_data_byte(path_of(m.get(), 3), 3);

    const Restored r = restore(m.get());
    INFO(log.all());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 2);
    CHECK(r.step == 2);
    CHECK(r.w_matches_step);
    const auto warnings = log.at(CKPT_LOG_WARNING);
    REQUIRE(warnings.size() == 2);
    CHECK_THAT(warnings[0], Contains(path_of(m.get(), 4)));
    CHECK_THAT(warnings[1], Contains(path_of(m.get(), 3)));
}

TEST_CASE("With every checkpoint corrupt restore is CKPT_EFORMAT", "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2, 3});
    truncate_file(path_of(m.get(), 3));
    flip_data_byte(path_of(m.get(), 2), 2);
    replace_with_non_zip(path_of(m.get(), 1));

    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains(path_of(m.get(), 3)));
    CHECK(log.at(CKPT_LOG_WARNING).size() == 3);
    CHECK(log.at(CKPT_LOG_INFO).empty());

    ckpt_vars* read = nullptr;
    CHECK(ckpt_manager_read(m.get(), CKPT_LATEST, &read, nullptr) == CKPT_EFORMAT);
    CHECK(read == nullptr);
}

TEST_CASE("NO_FALLBACK makes a corrupt newest checkpoint CKPT_EFORMAT", "[manager][restore]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_NO_FALLBACK;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});

    SECTION("a truncated file") { truncate_file(path_of(m.get(), 2)); }
    SECTION("one flipped data byte (CRC-32)") { flip_data_byte(path_of(m.get(), 2), 2); }
    SECTION("a file that is not a zip archive") { replace_with_non_zip(path_of(m.get(), 2)); }

    int64_t restored = -100;
    VarsPtr v = zeros_vars();
    CHECK(ckpt_manager_restore(m.get(), v.get(), CKPT_LATEST, &restored) == CKPT_EFORMAT);
    CHECK_THAT(message(), Contains(path_of(m.get(), 2)));
    CHECK(restored == -100);
}

TEST_CASE("A corrupt checkpoint asked for by index is CKPT_EFORMAT, without fallback", "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});
    flip_data_byte(path_of(m.get(), 2), 2);

    const Restored r = restore(m.get(), 2);
    CHECK(r.rc == CKPT_EFORMAT);
    CHECK(r.idx == -100);
    CHECK_THAT(message(), Contains(path_of(m.get(), 2)));
    CHECK(log.at(CKPT_LOG_INFO).empty());
}

TEST_CASE("A dtype or shape mismatch is CKPT_EMISMATCH and is not retried on older checkpoints",
          "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save(m.get(), 1);  // "w" float32[2,3]

    // Checkpoint 2's "w" differs from checkpoint 1's; the collection asks for checkpoint 1's kind of "w", so an
    // implementation that retried older checkpoints would succeed with checkpoint 1.
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
    VarsPtr newer(raw);
    const int64_t step = 2;
    REQUIRE(ckpt_vars_add(raw, "step", CKPT_INT64, 0, nullptr, &step, CKPT_COPY) == CKPT_OK);
    SECTION("a different dtype") {
        const int64_t shape[2] = {2, 3};
        REQUIRE(ckpt_vars_add(raw, "w", CKPT_FLOAT64, 2, shape, nullptr, CKPT_COPY) == CKPT_OK);
    }
    SECTION("a different shape") {
        const int64_t shape[2] = {3, 2};
        REQUIRE(ckpt_vars_add(raw, "w", CKPT_FLOAT32, 2, shape, nullptr, CKPT_COPY) == CKPT_OK);
    }
    SECTION("a missing variable") {}
    REQUIRE(ckpt_manager_save(m.get(), raw, 2) == CKPT_OK);

    VarsPtr v = zeros_vars();
    int64_t restored = -100;
    CHECK(ckpt_manager_restore(m.get(), v.get(), CKPT_LATEST, &restored) == CKPT_EMISMATCH);
    CHECK_THAT(message(), Contains("'w'"));
    CHECK_THAT(message(), Contains(path_of(m.get(), 2)));
    CHECK(restored == -100);
    CHECK(step_of(v.get()) == 0);  // CKPT_EMISMATCH leaves the collection unchanged
    INFO(log.all());
    CHECK(log.at(CKPT_LOG_WARNING).empty());
    CHECK(log.at(CKPT_LOG_INFO).empty());
}

TEST_CASE("ckpt_manager_read returns a whole checkpoint as a new collection", "[manager][restore]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    save_all(m.get(), {1, 2});

    SECTION("the latest") {
        ckpt_vars* read = nullptr;
        int64_t restored = -100;
        REQUIRE(ckpt_manager_read(m.get(), CKPT_LATEST, &read, &restored) == CKPT_OK);
        VarsPtr owned(read);
        CHECK(restored == 2);
        REQUIRE(ckpt_vars_count(read) == 2);
        CHECK(ckpt_vars_name(read, 0) == std::string("w"));
        CHECK(ckpt_vars_name(read, 1) == std::string("step"));
        CHECK(step_of(read) == 2);
        CHECK(w_is(read, 2));
    }
    SECTION("a specific index, restored_idx NULL") {
        ckpt_vars* read = nullptr;
        REQUIRE(ckpt_manager_read(m.get(), 1, &read, nullptr) == CKPT_OK);
        VarsPtr owned(read);
        CHECK(step_of(read) == 1);
        CHECK(w_is(read, 1));
    }
}

namespace {
// Strips "net." from names on disk; the manager must pass the npz options' renamer to its restores.
int strip_net(const char* name, char* buf, size_t size, void* payload) {
    ++*static_cast<int*>(payload);
    if (std::strncmp(name, "net.", 4) != 0) return 0;
    const size_t n = std::strlen(name) - 4;
    if (n <= size) std::memcpy(buf, name + 4, n);
    return static_cast<int>(n);
}
}  // namespace

TEST_CASE("The renamer of the npz options applies to restores", "[manager][restore]") {
    TempDir logdir;
    int calls = 0;
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.rename = &strip_net;
    npz.rename_payload = &calls;
    ckpt_manager_options o = default_options();
    o.npz = &npz;
    ManagerPtr m = open_manager(logdir.str(), &o);

    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
    VarsPtr on_disk(raw);
    float w[6];
    for (int i = 0; i < 6; ++i) w[i] = w_value(4, i);
    const int64_t shape[2] = {2, 3};
    const int64_t step = 4;
    REQUIRE(ckpt_vars_add(raw, "net.w", CKPT_FLOAT32, 2, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(raw, "net.step", CKPT_INT64, 0, nullptr, &step, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_manager_save(m.get(), raw, 4) == CKPT_OK);

    const Restored r = restore(m.get());
    INFO(message());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 4);
    CHECK(r.step == 4);
    CHECK(r.w_matches_step);
    CHECK(calls >= 2);
}

namespace {
struct Refusal {
    int code;
    int calls = 0;
};
// Refuses every name with the payload's code ("return a negative CKPT_* code to abort the restore with that code").
int refuse(const char*, char*, size_t, void* payload) {
    auto* r = static_cast<Refusal*>(payload);
    ++r->calls;
    return r->code;
}
// Maps every name on disk to the same name: a renamer that cannot be right for any checkpoint.
int collapse(const char*, char* buf, size_t size, void*) {
    if (size >= 1) buf[0] = 'w';
    return 1;
}
}  // namespace

TEST_CASE("A renamer that aborts ends the restore with its code, without trying older checkpoints",
          "[manager][restore]") {
    const int code = GENERATE(CKPT_EINVAL, CKPT_EIO, CKPT_ERROR, CKPT_EEXIST);
    INFO("the renamer returns " << code << " (" << ckpt_strerror(code) << ")");
    TempDir logdir;
    LogRecorder log;
    Refusal refusal{code};
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.rename = &refuse;
    npz.rename_payload = &refusal;
    ckpt_manager_options o = default_options();
    o.npz = &npz;
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});

    const Restored r = restore(m.get());
    INFO(log.all());
    CHECK(r.rc == code);
    CHECK(r.idx == -100);
    CHECK(refusal.calls == 1);  // the first name of the newest checkpoint, and nothing after it
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

TEST_CASE("A renamer that maps two names to one is CKPT_EINVAL, not a corrupt checkpoint", "[manager][restore]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.rename = &collapse;
    ckpt_manager_options o = default_options();
    o.npz = &npz;
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {1, 2});

    const Restored r = restore(m.get());
    INFO(log.all());
    CHECK(r.rc == CKPT_EINVAL);
    CHECK_THAT(message(), Contains(path_of(m.get(), 2)));
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

// ===================================================================================================== layouts

TEST_CASE("With layout CKPT_LAYOUT_OBJAX the manager writes names.npy and numbered members",
          "[manager][layouts]") {
    TempDir logdir;
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.layout = CKPT_LAYOUT_OBJAX;
    ckpt_manager_options o = default_options();
    o.npz = &npz;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save(m.get(), 5);

    // Read member by member: the file holds "names", "0", "1".
    ckpt_options plain = CKPT_OPTIONS_INIT;
    plain.layout = CKPT_LAYOUT_PLAIN;
    ckpt_vars* members = nullptr;
    REQUIRE(ckpt_read(&members, path_of(m.get(), 5).c_str(), &plain) == CKPT_OK);
    VarsPtr owned(members);
    REQUIRE(ckpt_vars_count(members) == 3);
    CHECK(ckpt_vars_name(members, 0) == std::string("names"));
    CHECK(ckpt_vars_dtype(members, 0) == CKPT_UNICODE);
    CHECK(ckpt_vars_name(members, 1) == std::string("0"));
    CHECK(ckpt_vars_name(members, 2) == std::string("1"));

    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 5);
    CHECK(r.step == 5);
    CHECK(r.w_matches_step);
}

TEST_CASE("A manager with default options reads checkpoints of either layout", "[manager][layouts]") {
    TempDir logdir;
    {
        ckpt_options npz = CKPT_OPTIONS_INIT;
        npz.layout = CKPT_LAYOUT_OBJAX;
        ckpt_manager_options o = default_options();
        o.npz = &npz;
        ManagerPtr objax = open_manager(logdir.str(), &o);
        save(objax.get(), 1);
    }
    ManagerPtr m = open_manager(logdir.str());
    save(m.get(), 2);

    ckpt_options plain = CKPT_OPTIONS_INIT;
    plain.layout = CKPT_LAYOUT_PLAIN;
    ckpt_vars* members = nullptr;
    REQUIRE(ckpt_read(&members, path_of(m.get(), 2).c_str(), &plain) == CKPT_OK);
    VarsPtr owned(members);
    REQUIRE(ckpt_vars_count(members) == 2);
    CHECK(ckpt_vars_name(members, 0) == std::string("w"));  // the default writes the plain layout

    for (int64_t i : {1, 2}) {
        INFO("checkpoint " << i);
        const Restored r = restore(m.get(), i);
        CHECK(r.rc == CKPT_OK);
        CHECK(r.step == i);
        CHECK(r.w_matches_step);
    }
}

TEST_CASE("A manager writing the objax layout still reads plain checkpoints", "[manager][layouts]") {
    // A run resumed with the objax layout switched on must not take the plain checkpoints it finds for corrupt
    // ones: that would silently resume from an older objax-layout checkpoint (or find none at all).
    TempDir logdir;
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.layout = CKPT_LAYOUT_OBJAX;
    ckpt_manager_options o = default_options();
    o.npz = &npz;
    LogRecorder log;
    log.attach(o);
    {
        ManagerPtr objax = open_manager(logdir.str(), &o);
        save(objax.get(), 1);
    }
    {
        ManagerPtr plain = open_manager(logdir.str());
        save(plain.get(), 2);
    }
    ManagerPtr m = open_manager(logdir.str(), &o);
    const Restored r = restore(m.get());
    INFO(log.all());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 2);
    CHECK(r.step == 2);
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

// ===================================================================================================== locking

// What a manager in a forked child process gets when it saves checkpoint `idx` into `logdir`: "OK" or the code and
// message.
std::string save_in_child(const std::string& logdir, int64_t idx) {
    return ckpt::testing::in_child([&]() -> std::string {
        ckpt_manager* m = nullptr;
        int rc = ckpt_manager_open(&m, logdir.c_str(), nullptr);
        if (rc == CKPT_OK) {
            VarsPtr v = make_vars(idx);
            rc = ckpt_manager_save(m, v.get(), idx);
        }
        const std::string out = rc == CKPT_OK ? "OK" : std::to_string(rc) + " " + message();
        ckpt_manager_close(m);
        return out;
    });
}

TEST_CASE("Opening, listing and restoring take no lock and change nothing in the directory", "[manager][lock]") {
    TempDir logdir;
    { ManagerPtr writer = open_manager(logdir.str()); save_all(writer.get(), {1, 2}); }
    const std::string dir = logdir.file("ckpt");
    fs::remove(dir + "/.ckpt.lock");
    write_file(dir + "/.0000000003.npz.tmp-AbC123", "another process's save under way");
    const std::vector<std::string> before = entries(dir);

    ManagerPtr m = open_manager(logdir.str());
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2});
    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 2);
    CHECK(entries(dir) == before);  // no ".ckpt.lock", the temporary still there
    CHECK(save_in_child(logdir.str(), 4) == "OK");  // nothing held: another process saves
}

TEST_CASE("A manager restores while another process holds the directory, and is CKPT_EBUSY at its first save",
          "[manager][lock]") {
    TempDir logdir;
    { ManagerPtr create = open_manager(logdir.str()); }  // the directory exists before the child races for it
    LockHolder holder(logdir.str());
    const pid_t child = holder.pid();

    ManagerPtr m = open_manager(logdir.str());  // no CKPT_EBUSY: opening locks nothing
    const Restored r = restore(m.get());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 1);
    CHECK(r.step == 1);
    VarsPtr two = make_vars(2);
    CHECK(ckpt_manager_save(m.get(), two.get(), 2) == CKPT_EBUSY);
    CHECK_THAT(message(), Contains("locked by another checkpoint manager") &&
                              Contains("pid " + std::to_string(child)));
    CHECK(list_of(m.get()) == std::vector<int64_t>{1});  // the refused save wrote nothing

    const int status = holder.kill();
    CHECK(WIFSIGNALED(status));

    save(m.get(), 2);  // the holder died: the next save takes the lock
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2});
    CHECK_THAT(save_in_child(logdir.str(), 3), Contains(std::to_string(CKPT_EBUSY)) &&
                                                   Contains("pid " + std::to_string(::getpid())));
}

TEST_CASE("A second manager of this process takes the directory over at its first save, with a warning",
          "[manager][lock]") {
    TempDir logdir;
    LogRecorder old_log, new_log;
    ckpt_manager_options o = default_options();
    o.keep = 0;
    old_log.attach(o);
    ManagerPtr first = open_manager(logdir.str(), &o);
    save(first.get(), 1);
    new_log.attach(o);
    ManagerPtr second = open_manager(logdir.str(), &o);  // a notebook cell run again while `first` lives
    CHECK(new_log.at(CKPT_LOG_WARNING).empty());
    save(second.get(), 2);
    INFO(new_log.all());
    REQUIRE(new_log.at(CKPT_LOG_WARNING).size() == 1);
    CHECK_THAT(new_log.at(CKPT_LOG_WARNING)[0],
               Contains(logdir.file("ckpt")) && Contains("took the directory over from another checkpoint manager "
                                                         "of this process"));
    CHECK(list_of(second.get()) == std::vector<int64_t>{1, 2});
    CHECK(old_log.at(CKPT_LOG_WARNING).empty());
}

TEST_CASE("A manager whose directory was taken over is CKPT_EBUSY at its next save, and still restores",
          "[manager][lock]") {
    TempDir logdir;
    ManagerPtr first = open_manager(logdir.str());
    save(first.get(), 1);
    ManagerPtr second = open_manager(logdir.str());
    save(second.get(), 2);

    VarsPtr three = make_vars(3);
    CHECK(ckpt_manager_save(first.get(), three.get(), 3) == CKPT_EBUSY);
    CHECK_THAT(message(), Contains(logdir.file("ckpt")) &&
                              Contains("another checkpoint manager of this process took the directory over"));
    CHECK(ckpt_manager_save_metrics(first.get(), three.get(), 3, nullptr, nullptr, 0) == CKPT_EBUSY);
    CHECK(list_of(second.get()) == std::vector<int64_t>{1, 2});
    const Restored r = restore(first.get());
    CHECK(r.rc == CKPT_OK);
    CHECK(r.idx == 2);
    save(second.get(), 3);  // the new owner goes on
}

TEST_CASE("Closing a manager whose directory was taken over leaves the lock with the newer one", "[manager][lock]") {
    TempDir logdir;
    ManagerPtr first = open_manager(logdir.str());
    save(first.get(), 1);
    ManagerPtr second = open_manager(logdir.str());
    save(second.get(), 2);

    REQUIRE(ckpt_manager_close(first.release()) == CKPT_OK);
    CHECK_THAT(save_in_child(logdir.str(), 3), Contains(std::to_string(CKPT_EBUSY)) &&
                                                   Contains("pid " + std::to_string(::getpid())));
    save(second.get(), 4);
    REQUIRE(ckpt_manager_close(second.release()) == CKPT_OK);
    CHECK(save_in_child(logdir.str(), 5) == "OK");
}

TEST_CASE("A manager takes over from one that took over, and the lock is per directory", "[manager][lock]") {
    TempDir logdir;
    ManagerPtr a = open_manager(logdir.str());
    save(a.get(), 1);
    ckpt_manager_options o = default_options();
    o.subdir = "other";
    ManagerPtr other = open_manager(logdir.str(), &o);
    save(other.get(), 1);  // another subdir of the same logdir: its own lock, no takeover
    ManagerPtr b = open_manager(logdir.str());
    save(b.get(), 2);
    ManagerPtr c = open_manager(logdir.str());
    save(c.get(), 3);
    VarsPtr v = make_vars(9);
    CHECK(ckpt_manager_save(a.get(), v.get(), 9) == CKPT_EBUSY);
    CHECK(ckpt_manager_save(b.get(), v.get(), 9) == CKPT_EBUSY);
    save(other.get(), 2);
    REQUIRE(ckpt_manager_close(b.release()) == CKPT_OK);
    REQUIRE(ckpt_manager_close(c.release()) == CKPT_OK);
    REQUIRE(ckpt_manager_close(a.release()) == CKPT_OK);
    CHECK(save_in_child(logdir.str(), 4) == "OK");  // the last owner's close released it
}

// ========================================================================================= stale temporaries

TEST_CASE("The first save removes stale temporaries of checkpoints with a warning; opening leaves them", "[manager][stale]") {
    TempDir logdir;
    const std::string dir = logdir.file("ckpt");
    fs::create_directories(dir);
    const std::vector<std::string> stale{".0000000005.npz.tmp-AbC123", ".12345678901.npz.tmp-zZ09yY"};
    for (const auto& name : stale) write_file(dir + "/" + name, "half a checkpoint");
    write_file(dir + "/0000000004.npz", "");  // a checkpoint's name; not a temporary: left alone

    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (const auto& name : stale) CHECK(fs::exists(dir + "/" + name));  // another process may be writing them
    CHECK(log.at(CKPT_LOG_WARNING).empty());

    save(m.get(), 5);
    for (const auto& name : stale) CHECK_FALSE(fs::exists(dir + "/" + name));
    CHECK(fs::exists(dir + "/0000000004.npz"));
    const auto warnings = log.at(CKPT_LOG_WARNING);
    INFO(log.all());
    REQUIRE(warnings.size() == 2);
    for (const auto& name : stale) {
        const bool named = std::any_of(warnings.begin(), warnings.end(), [&](const std::string& w) {
            return w.find(dir + "/" + name) != std::string::npos;
        });
        CHECK(named);
    }
}

TEST_CASE("The first save leaves every file that is not a stale checkpoint temporary alone", "[manager][stale]") {
    TempDir logdir;
    const std::string dir = logdir.file("ckpt");
    fs::create_directories(dir);
    const std::vector<std::string> others{".notes.tmp-abcdef", "foo.npz.tmp-abcdef", "README",
                                          "0000000005.npz.tmp-abcdef", ".0000000005.npz.tmp-abc",
                                          ".0000000005.npz.tmp-abc!ef", ".42.npz.tmp-abcdef",
                                          ".00000000042.npz.tmp-abcdef", ".0000000005.npz"};
    for (const auto& name : others) write_file(dir + "/" + name, "mine: " + name);

    LogRecorder log;
    ckpt_manager_options o = default_options();
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    save(m.get(), 1);

    for (const auto& name : others) {
        INFO(name);
        CHECK(read_file(dir + "/" + name) == "mine: " + name);
    }
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

// ================================================================================================= directories

TEST_CASE("NO_MAKEDIR on a missing directory is CKPT_ENOTFOUND", "[manager][makedir]") {
    TempDir base;
    const std::string logdir = base.file("missing");
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_NO_MAKEDIR;
    ckpt_manager* m = reinterpret_cast<ckpt_manager*>(&o);  // must come back NULL
    CHECK(ckpt_manager_open(&m, logdir.c_str(), &o) == CKPT_ENOTFOUND);
    CHECK(m == nullptr);
    CHECK_FALSE(fs::exists(logdir));

    SECTION("an existing logdir without its checkpoint subdirectory is missing too") {
        fs::create_directory(logdir);
        CHECK(ckpt_manager_open(&m, logdir.c_str(), &o) == CKPT_ENOTFOUND);
        CHECK(m == nullptr);
        CHECK_FALSE(fs::exists(logdir + "/ckpt"));
    }
    SECTION("an existing checkpoint directory opens") {
        fs::create_directories(logdir + "/ckpt");
        ManagerPtr opened = open_manager(logdir, &o);
        save(opened.get(), 1);
        CHECK(fs::is_regular_file(logdir + "/ckpt/0000000001.npz"));
    }
}

TEST_CASE("Without NO_MAKEDIR the directory and its parents are created", "[manager][makedir]") {
    TempDir base;
    const std::string logdir = base.file("a/b/c");
    ManagerPtr m = open_manager(logdir);
    CHECK(fs::is_directory(logdir + "/ckpt"));
    save(m.get(), 1);
    CHECK(fs::is_regular_file(logdir + "/ckpt/0000000001.npz"));
}

// ================================================================================================ async errors

TEST_CASE("A failed asynchronous save is reported once and leaves the previous checkpoint", "[manager][async]") {
    MapStorage map;
    ckpt_storage* storage = map.make();
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_ASYNC;
    o.storage = storage;
    ManagerPtr m = open_manager("run", &o);
    ckpt_storage_free(storage);  // the manager keeps its own reference
    save(m.get(), 1);
    REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);
    const auto only_the_first_survives = [&] {
        CHECK(map.files_in("run/ckpt") == std::vector<std::string>{"0000000001.npz"});  // no temporary left
        if (!m) return;
        CHECK(list_of(m.get()) == std::vector<int64_t>{1});
        const Restored r = restore(m.get());
        CHECK(r.rc == CKPT_OK);
        CHECK(r.idx == 1);
        CHECK(r.step == 1);
        CHECK(r.w_matches_step);
    };

    SECTION("save returns CKPT_OK and wait returns the error, once") {
        map.fail_writes = true;
        CHECK(ckpt_manager_save(m.get(), make_vars(2).get(), 2) == CKPT_OK);  // queued
        CHECK(ckpt_manager_wait(m.get()) == CKPT_EIO);
        CHECK_THAT(message(), Contains("0000000002.npz"));
        CHECK(ckpt_manager_wait(m.get()) == CKPT_OK);
        map.fail_writes = false;
        only_the_first_survives();
    }
    SECTION("the next save returns the error and is not started") {
        map.fail_only = "0000000002.npz";  // checkpoint 3 would be written fine if it were started
        map.fail_writes = true;
        CHECK(ckpt_manager_save(m.get(), make_vars(2).get(), 2) == CKPT_OK);  // queued
        // queue_depth 1: this save waits for the failed one, then reports it instead of starting.
        CHECK(ckpt_manager_save(m.get(), make_vars(3).get(), 3) == CKPT_EIO);
        CHECK_THAT(message(), Contains("0000000002.npz"));
        CHECK(ckpt_manager_wait(m.get()) == CKPT_OK);
        only_the_first_survives();
    }
    SECTION("close returns the error nobody waited for") {
        map.fail_writes = true;
        CHECK(ckpt_manager_save(m.get(), make_vars(2).get(), 2) == CKPT_OK);  // queued
        CHECK(ckpt_manager_close(m.release()) == CKPT_EIO);
        CHECK_THAT(message(), Contains("0000000002.npz"));
        only_the_first_survives();
    }
}

TEST_CASE("A failed synchronous save returns its error and leaves the previous checkpoint", "[manager][async]") {
    MapStorage map;
    ckpt_storage* storage = map.make();
    ckpt_manager_options o = default_options();
    o.storage = storage;
    ManagerPtr m = open_manager("run", &o);
    ckpt_storage_free(storage);
    save(m.get(), 1);
    map.fail_writes = true;
    CHECK(ckpt_manager_save(m.get(), make_vars(2).get(), 2) == CKPT_EIO);
    CHECK_THAT(message(), Contains("0000000002.npz"));
    map.fail_writes = false;
    CHECK(ckpt_manager_wait(m.get()) == CKPT_OK);
    CHECK(list_of(m.get()) == std::vector<int64_t>{1});
    CHECK(map.files_in("run/ckpt") == std::vector<std::string>{"0000000001.npz"});
}

// ===================================================================================================== logging

TEST_CASE("VERBOSE without a log callback writes the messages to stderr", "[manager][log]") {
    TempDir logdir;
    const std::string dir = logdir.file("ckpt");
    fs::create_directories(dir);
    write_file(dir + "/.0000000001.npz.tmp-AbC123", "stale");
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_VERBOSE;

    std::string captured;
    int empty_rc = 0, rc = 0;
    std::string resumed_path;
    {
        StderrCapture capture(logdir.file("stderr.txt"));
        ckpt_manager* m = nullptr;
        if (ckpt_manager_open(&m, logdir.str().c_str(), &o) == CKPT_OK) {
            VarsPtr v = zeros_vars();
            empty_rc = ckpt_manager_restore(m, v.get(), CKPT_LATEST, nullptr);
            VarsPtr one = make_vars(1);
            ckpt_manager_save(m, one.get(), 1);
            rc = ckpt_manager_restore(m, v.get(), CKPT_LATEST, nullptr);
            char buf[4096];
            ckpt_manager_path(m, 1, buf, sizeof buf);
            resumed_path = buf;
        }
        ckpt_manager_close(m);
        captured = capture.stop();
    }
    INFO("stderr: " << captured);
    CHECK(empty_rc == CKPT_ENOTFOUND);
    CHECK(rc == CKPT_OK);
    CHECK_THAT(captured, Contains(dir + "/.0000000001.npz.tmp-AbC123"));
    CHECK_THAT(captured, Contains("No checkpoints found"));
    CHECK_THAT(captured, Contains("Resuming from " + resumed_path));
}

TEST_CASE("Without VERBOSE and without a log callback nothing is written to stderr", "[manager][log]") {
    TempDir logdir;
    fs::create_directories(logdir.file("ckpt"));
    write_file(logdir.file("ckpt/.0000000001.npz.tmp-AbC123"), "stale");
    std::string captured;
    {
        StderrCapture capture(logdir.file("stderr.txt"));
        ckpt_manager* m = nullptr;
        if (ckpt_manager_open(&m, logdir.str().c_str(), nullptr) == CKPT_OK) {
            VarsPtr v = zeros_vars();
            ckpt_manager_restore(m, v.get(), CKPT_LATEST, nullptr);
            VarsPtr one = make_vars(1);
            ckpt_manager_save(m, one.get(), 1);  // removes the stale temporary, which would be logged
        }
        ckpt_manager_close(m);
        captured = capture.stop();
    }
    CHECK(captured.empty());
    CHECK_FALSE(fs::exists(logdir.file("ckpt/.0000000001.npz.tmp-AbC123")));
}

TEST_CASE("A log callback receives retention's messages from an asynchronous save without a race",
          "[manager][log][async]") {
    TempDir logdir;
    LogRecorder log;
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_ASYNC;
    o.queue_depth = 2;
    o.keep = 1;
    log.attach(o);
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (int64_t i = 1; i <= 6; ++i) save(m.get(), i);
    REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);
    CHECK(list_of(m.get()) == std::vector<int64_t>{6});
    CHECK(log.at(CKPT_LOG_WARNING).empty());
}

// =========================================================================================== argument errors

TEST_CASE("ckpt_manager_options_init fills the defaults", "[manager][args]") {
    ckpt_manager_options o;
    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION) == CKPT_OK);
    const ckpt_manager_options expected = CKPT_MANAGER_OPTIONS_INIT;
    CHECK(o.version == expected.version);
    CHECK(o.keep == 10);
    CHECK(o.keep_every == 0);
    CHECK(o.flags == 0);
    CHECK(o.queue_depth == 0);
    CHECK(o.subdir == nullptr);
    CHECK(o.npz == nullptr);
    CHECK(o.log == nullptr);
    CHECK(o.log_payload == nullptr);
    CHECK(o.storage == nullptr);

    CHECK(ckpt_manager_options_init(nullptr, CKPT_MANAGER_OPTIONS_VERSION) == CKPT_EINVAL);
    CHECK(ckpt_manager_options_init(&o, 0) == CKPT_EINVAL);
    CHECK(ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION + 1) == CKPT_EINVAL);
}

TEST_CASE("Invalid arguments are CKPT_EINVAL", "[manager][args]") {
    TempDir logdir;
    VarsPtr v = make_vars(1);

    SECTION("open: NULL out or logdir") {
        CHECK(ckpt_manager_open(nullptr, logdir.str().c_str(), nullptr) == CKPT_EINVAL);
        ckpt_manager* m = reinterpret_cast<ckpt_manager*>(&v);
        CHECK(ckpt_manager_open(&m, nullptr, nullptr) == CKPT_EINVAL);
        CHECK(m == nullptr);
    }
    SECTION("open: an unknown options version") {
        for (uint32_t version : std::initializer_list<uint32_t>{0u, CKPT_MANAGER_OPTIONS_VERSION + 1u, 0xFFFFFFFFu}) {
            ckpt_manager_options o = default_options();
            o.version = version;
            ckpt_manager* m = reinterpret_cast<ckpt_manager*>(&v);
            CHECK(ckpt_manager_open(&m, logdir.str().c_str(), &o) == CKPT_EINVAL);
            CHECK(m == nullptr);
        }
        CHECK_FALSE(fs::exists(logdir.file("ckpt")));
    }
    SECTION("open: unknown flags") {
        for (uint32_t flags : std::initializer_list<uint32_t>{64u, 0x80000000u, CKPT_MANAGER_ASYNC | 128u}) {
            ckpt_manager_options o = default_options();
            o.flags = flags;
            ckpt_manager* m = reinterpret_cast<ckpt_manager*>(&v);
            CHECK(ckpt_manager_open(&m, logdir.str().c_str(), &o) == CKPT_EINVAL);
            CHECK(m == nullptr);
        }
    }
    SECTION("open: bad npz options") {
        ckpt_options npz = CKPT_OPTIONS_INIT;
        ckpt_manager_options o = default_options();
        o.npz = &npz;
        SECTION("version") { npz.version = 99; }
        SECTION("layout") { npz.layout = 7; }
        ckpt_manager* m = nullptr;
        CHECK(ckpt_manager_open(&m, logdir.str().c_str(), &o) == CKPT_EINVAL);
        CHECK(m == nullptr);
    }

    ManagerPtr m = open_manager(logdir.str());
    save(m.get(), 1);
    SECTION("save: NULL manager or vars, negative index") {
        CHECK(ckpt_manager_save(nullptr, v.get(), 0) == CKPT_EINVAL);
        CHECK(ckpt_manager_save(m.get(), nullptr, 0) == CKPT_EINVAL);
        CHECK(ckpt_manager_save(m.get(), v.get(), -1) == CKPT_EINVAL);
        CHECK(ckpt_manager_save(m.get(), v.get(), std::numeric_limits<int64_t>::min()) == CKPT_EINVAL);
        CHECK(list_of(m.get()) == std::vector<int64_t>{1});
    }
    SECTION("restore: NULL manager or vars, an index that is neither >= 0 nor CKPT_LATEST") {
        VarsPtr target = zeros_vars();
        CHECK(ckpt_manager_restore(nullptr, target.get(), CKPT_LATEST, nullptr) == CKPT_EINVAL);
        CHECK(ckpt_manager_restore(m.get(), nullptr, CKPT_LATEST, nullptr) == CKPT_EINVAL);
        int64_t restored = -100;
        CHECK(ckpt_manager_restore(m.get(), target.get(), -2, &restored) == CKPT_EINVAL);
        CHECK(ckpt_manager_restore(m.get(), target.get(), std::numeric_limits<int64_t>::min(), &restored) ==
              CKPT_EINVAL);
        CHECK(restored == -100);
        CHECK(step_of(target.get()) == 0);
    }
    SECTION("read: NULL manager or out, index -2") {
        ckpt_vars* out = reinterpret_cast<ckpt_vars*>(&v);
        CHECK(ckpt_manager_read(nullptr, CKPT_LATEST, &out, nullptr) == CKPT_EINVAL);
        CHECK(out == nullptr);
        CHECK(ckpt_manager_read(m.get(), CKPT_LATEST, nullptr, nullptr) == CKPT_EINVAL);
        out = reinterpret_cast<ckpt_vars*>(&v);
        CHECK(ckpt_manager_read(m.get(), -2, &out, nullptr) == CKPT_EINVAL);
        CHECK(out == nullptr);
    }
    SECTION("latest, list, path: NULL arguments") {
        int64_t idx = 0;
        size_t count = 0;
        char buf[64];
        CHECK(ckpt_manager_latest(nullptr, &idx) == CKPT_EINVAL);
        CHECK(ckpt_manager_latest(m.get(), nullptr) == CKPT_EINVAL);
        CHECK(ckpt_manager_list(nullptr, nullptr, 0, &count) == CKPT_EINVAL);
        CHECK(ckpt_manager_list(m.get(), nullptr, 0, nullptr) == CKPT_EINVAL);
        CHECK(ckpt_manager_list(m.get(), nullptr, 4, &count) == CKPT_EINVAL);
        CHECK(ckpt_manager_path(nullptr, 1, buf, sizeof buf) == CKPT_EINVAL);
        CHECK(ckpt_manager_path(m.get(), 1, nullptr, 0) == CKPT_EINVAL);
        CHECK(ckpt_manager_path(m.get(), -1, buf, sizeof buf) == CKPT_EINVAL);
    }
}

TEST_CASE("ckpt_manager_list with a buffer smaller than the count is CKPT_EBUFS and reports the count",
          "[manager][args]") {
    TempDir logdir;
    ckpt_manager_options o = default_options();
    o.keep = 0;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_all(m.get(), {30, 10, 20});

    size_t count = 0;
    CHECK(ckpt_manager_list(m.get(), nullptr, 0, &count) == CKPT_EBUFS);
    CHECK(count == 3);

    int64_t two[2] = {-1, -1};
    count = 0;
    CHECK(ckpt_manager_list(m.get(), two, 2, &count) == CKPT_EBUFS);
    CHECK(count == 3);
    CHECK(two[0] == 10);
    CHECK(two[1] == 20);

    int64_t four[4] = {-1, -1, -1, -1};
    CHECK(ckpt_manager_list(m.get(), four, 4, &count) == CKPT_OK);
    CHECK(count == 3);
    CHECK(std::vector<int64_t>(four, four + 3) == std::vector<int64_t>{10, 20, 30});
    CHECK(four[3] == -1);

    SECTION("an empty directory lists nothing with cap 0") {
        TempDir empty;
        ManagerPtr e = open_manager(empty.str());
        count = 99;
        CHECK(ckpt_manager_list(e.get(), nullptr, 0, &count) == CKPT_OK);
        CHECK(count == 0);
    }
}

TEST_CASE("ckpt_manager_path with a buffer too small is CKPT_EBUFS", "[manager][args]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    const std::string path = logdir.file("ckpt/0000000001.npz");
    std::vector<char> buf(path.size() + 1, 'x');
    CHECK(ckpt_manager_path(m.get(), 1, buf.data(), 4) == CKPT_EBUFS);
    CHECK(ckpt_manager_path(m.get(), 1, buf.data(), path.size()) == CKPT_EBUFS);  // no room for the NUL
    REQUIRE(ckpt_manager_path(m.get(), 1, buf.data(), path.size() + 1) == CKPT_OK);  // exactly enough
    CHECK(std::string(buf.data()) == path);
}

TEST_CASE("ckpt_manager_close accepts NULL", "[manager][args]") { CHECK(ckpt_manager_close(nullptr) == CKPT_OK); }

TEST_CASE("ckpt_manager_close of an idle manager returns CKPT_OK and unlocks", "[manager][args]") {
    TempDir logdir;
    ckpt_manager* m = nullptr;
    REQUIRE(ckpt_manager_open(&m, logdir.str().c_str(), nullptr) == CKPT_OK);
    CHECK(ckpt_manager_close(m) == CKPT_OK);
    ManagerPtr again = open_manager(logdir.str());
    CHECK(again != nullptr);
}

TEST_CASE("a read-only manager opens a directory another manager holds and changes nothing", "[manager][read_only]") {
    TempDir dir;
    ManagerPtr writer = open_manager(dir.path());
    for (int64_t i : {1, 2}) REQUIRE(ckpt_manager_save(writer.get(), make_vars(i).get(), i) == CKPT_OK);
    const std::string ckdir = dir.path() + "/ckpt";
    write_file(ckdir + "/.0000000003.npz.tmp-AbCdEf", "an interrupted save's leftovers");
    const std::vector<std::string> before = entries(ckdir);

    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_READ_ONLY;
    ManagerPtr reader = open_manager(dir.path(), &o);  // no CKPT_EBUSY: it takes no lock
    int64_t latest = -1;
    REQUIRE(ckpt_manager_latest(reader.get(), &latest) == CKPT_OK);
    CHECK(latest == 2);
    VarsPtr into = make_vars(0);
    int64_t restored = -1;
    REQUIRE(ckpt_manager_restore(reader.get(), into.get(), CKPT_LATEST, &restored) == CKPT_OK);
    CHECK(restored == 2);
    CHECK(static_cast<const float*>(ckpt_vars_data(into.get(), 0))[0] == w_value(2, 0));
    CHECK(ckpt_manager_save(reader.get(), make_vars(9).get(), 9) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("read-only"));

    // The writer goes on saving while the reader looks; the reader sees the new checkpoint.
    REQUIRE(ckpt_manager_save(writer.get(), make_vars(4).get(), 4) == CKPT_OK);
    REQUIRE(ckpt_manager_latest(reader.get(), &latest) == CKPT_OK);
    CHECK(latest == 4);
    CHECK(ckpt_manager_close(reader.release()) == CKPT_OK);
    std::vector<std::string> after = entries(ckdir);
    after.erase(std::remove(after.begin(), after.end(), "0000000004.npz"), after.end());
    CHECK(after == before);  // the stale temporary is still there: only the owner cleans up

    SECTION("a missing directory is not created") {
        ManagerPtr none;
        ckpt_manager* m = nullptr;
        CHECK(ckpt_manager_open(&m, (dir.path() + "/nothing").c_str(), &o) == CKPT_ENOTFOUND);
        CHECK(m == nullptr);
        CHECK(!fs::exists(dir.path() + "/nothing"));
    }
    SECTION("read-only with background saves is refused") {
        ckpt_manager_options both = default_options();
        both.flags = CKPT_MANAGER_READ_ONLY | CKPT_MANAGER_ASYNC;
        ckpt_manager* m = nullptr;
        CHECK(ckpt_manager_open(&m, dir.path().c_str(), &both) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt: a read-only manager makes no saves, so asynchronous saves have no use"));
    }
}

// ============================================================================================== ckpt_manager_clean

namespace {

struct Cleaned {
    std::vector<std::pair<std::string, int>> items;  // path, is_dir
    static void record(const char* path, int is_dir, void* self) {
        static_cast<Cleaned*>(self)->items.emplace_back(path, is_dir);
    }
    std::vector<std::pair<std::string, int>> sorted() const {
        auto s = items;
        std::sort(s.begin(), s.end());
        return s;
    }
};

}  // namespace

TEST_CASE("ckpt_manager_clean removes what interrupted saves left, reports each, and touches nothing else",
          "[manager][stale][clean]") {
    TempDir logdir;
    const std::string dir = logdir.file("ckpt");
    ManagerPtr m = open_manager(logdir.str());
    save(m.get(), 3);
    const std::vector<std::string> stale_files{".0000000005.npz.tmp-AbC123", ".model.npz.tmp-zZ09yY"};
    for (const auto& name : stale_files) write_file(dir + "/" + name, "half a save");
    fs::create_directories(dir + "/.0000000007.tmp-xYz123");  // a sharded save's staging directory
    write_file(dir + "/.0000000007.tmp-xYz123/shard-00000-of-00002.npz", "a shard");
    fs::create_directories(dir + "/0000000008");  // a step without its manifest
    const std::vector<std::string> others{".notes.tmp-abcdef", "foo.npz.tmp-abcdef", "README", ".0000000005.npz.tmp-abc",
                                          ".model.npz.tmp-abc!ef", ".0000000005.npz"};
    for (const auto& name : others) write_file(dir + "/" + name, "mine: " + name);
    const std::vector<std::pair<std::string, int>> expected{{dir + "/.0000000005.npz.tmp-AbC123", 0},
                                                            {dir + "/.0000000007.tmp-xYz123", 1},
                                                            {dir + "/.model.npz.tmp-zZ09yY", 0},
                                                            {dir + "/0000000008", 1}};

    Cleaned dry;
    size_t count = 99;
    REQUIRE(ckpt_manager_clean(m.get(), CKPT_CLEAN_DRY_RUN, &Cleaned::record, &dry, &count) == CKPT_OK);
    CHECK(count == 4);
    CHECK(dry.sorted() == expected);
    for (const auto& name : stale_files) CHECK(fs::exists(dir + "/" + name));  // a dry run removes nothing
    CHECK(fs::exists(dir + "/0000000008"));

    Cleaned done;
    REQUIRE(ckpt_manager_clean(m.get(), 0, &Cleaned::record, &done, &count) == CKPT_OK);
    CHECK(count == 4);
    CHECK(done.sorted() == expected);
    for (const auto& [path, is_dir] : expected) CHECK_FALSE(fs::exists(path));
    for (const auto& name : others) {
        INFO(name);
        CHECK(read_file(dir + "/" + name) == "mine: " + name);
    }
    CHECK(list_of(m.get()) == std::vector<int64_t>{3});  // the checkpoint stays

    REQUIRE(ckpt_manager_clean(m.get(), 0, nullptr, nullptr, &count) == CKPT_OK);  // nothing left; no callback needed
    CHECK(count == 0);
}

TEST_CASE("ckpt_manager_clean refuses while another process's manager holds the directory", "[manager][clean][lock]") {
    TempDir logdir;
    const std::string dir = logdir.file("ckpt");
    { ManagerPtr create = open_manager(logdir.str()); }
    LockHolder holder(logdir.str());
    const pid_t child = holder.pid();

    // What the holder may be writing right now.
    write_file(dir + "/.0000000002.npz.tmp-AbC123", "being written");
    ManagerPtr m = open_manager(logdir.str());
    size_t count = 7;
    CHECK(ckpt_manager_clean(m.get(), 0, nullptr, nullptr, &count) == CKPT_EBUSY);
    CHECK_THAT(message(), Contains("pid " + std::to_string(child)));
    CHECK(ckpt_manager_clean(m.get(), CKPT_CLEAN_DRY_RUN, nullptr, nullptr, &count) == CKPT_EBUSY);
    CHECK(fs::exists(dir + "/.0000000002.npz.tmp-AbC123"));

    holder.kill();
    REQUIRE(ckpt_manager_clean(m.get(), 0, nullptr, nullptr, &count) == CKPT_OK);  // the holder died
    CHECK(count == 1);
    CHECK_FALSE(fs::exists(dir + "/.0000000002.npz.tmp-AbC123"));
}

TEST_CASE("ckpt_manager_clean's argument errors", "[manager][clean]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str());
    CHECK(ckpt_manager_clean(nullptr, 0, nullptr, nullptr, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_manager_clean(m.get(), 2, nullptr, nullptr, nullptr) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("unknown flags"));
    ckpt_manager_options o = default_options();
    o.flags = CKPT_MANAGER_READ_ONLY;
    ManagerPtr reader = open_manager(logdir.str(), &o);
    CHECK(ckpt_manager_clean(reader.get(), 0, nullptr, nullptr, nullptr) == CKPT_EINVAL);
    CHECK_THAT(message(), Contains("read-only"));
}
