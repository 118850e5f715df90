// SPDX-License-Identifier: Apache-2.0
// Allocation failure at every allocation of a save and of a restore (RELIABILITY_FACTS.md section 2, SQLite's
// malloc loop). For each operation the test first counts the allocations K it makes with nothing failing, then
// runs it K times more with allocation N = 1..K failing — once transiently (only the Nth fails) and once
// persistently (the Nth and every later one fail, so error paths run out of memory too) — and finally once more
// with nothing failing. Every failing run must return CKPT_ENOMEM with a message, crash nothing, leak nothing
// (operator new allocations and file descriptors are counted; LSan checks malloc under `scripts/test
// --sanitize`), and leave the state intact: a failed save keeps the previous file and leaves no temporary, a
// restore that fails before writing data leaves the collection as it was.
//
// The binary replaces the global operator new/delete (every variant). Replacing them in the executable also
// replaces them for libckpt.so, which imports them from libstdc++ by dynamic symbol lookup; the first test checks
// that this is so rather than assuming it. zlib allocates through ckpt's zalloc hooks where ckpt installs them
// (inflate); deflate's own allocations use malloc and are not injected here.
//
// Catch2 allocates, so nothing asserts while injection is armed: operations only store codes, and the checks
// run after disarming.
#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <vector>

// ------------------------------------------------------------------------------------------ allocation hooks

namespace inject {

enum class Mode { transient, persistent };

std::atomic<bool> g_armed{false};
std::atomic<uint64_t> g_seen{0};     // allocations requested while armed
std::atomic<uint64_t> g_fail_at{0};  // 1-based index of the allocation that fails; 0: none
std::atomic<bool> g_persistent{false};
std::atomic<uint64_t> g_failed{0};   // allocations refused since arming
std::atomic<int64_t> g_live{0};      // operator new blocks not yet deleted, armed or not

// Thread creation refused with EAGAIN while set (see the pthread_create below).
std::atomic<bool> g_refuse_threads{false};

bool should_fail() {
    if (!g_armed.load(std::memory_order_acquire)) return false;
    const uint64_t k = g_seen.fetch_add(1) + 1;
    const uint64_t at = g_fail_at.load();
    if (at == 0 || k < at || (k > at && !g_persistent.load())) return false;
    g_failed.fetch_add(1);
    return true;
}

void* allocate_nothrow(size_t n, size_t align) noexcept {
    if (should_fail()) return nullptr;
    void* p = nullptr;
    if (align <= alignof(std::max_align_t)) {
        p = std::malloc(n != 0 ? n : 1);
    } else if (posix_memalign(&p, align, n != 0 ? n : 1) != 0) {
        p = nullptr;
    }
    if (p != nullptr) g_live.fetch_add(1);
    return p;
}

void* allocate(size_t n, size_t align) {
    void* p = allocate_nothrow(n, align);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

void release(void* p) noexcept {
    if (p == nullptr) return;
    g_live.fetch_sub(1);
    std::free(p);
}

void arm(uint64_t fail_at, Mode mode) {
    g_seen.store(0);
    g_failed.store(0);
    g_persistent.store(mode == Mode::persistent);
    g_fail_at.store(fail_at);
    g_armed.store(true, std::memory_order_release);
}

// Stops injecting; returns the number of allocations seen while armed.
uint64_t disarm() {
    g_armed.store(false, std::memory_order_release);
    g_fail_at.store(0);
    return g_seen.load();
}

}  // namespace inject

void* operator new(std::size_t n) { return inject::allocate(n, 0); }
void* operator new[](std::size_t n) { return inject::allocate(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return inject::allocate_nothrow(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return inject::allocate_nothrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return inject::allocate(n, static_cast<size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return inject::allocate(n, static_cast<size_t>(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return inject::allocate_nothrow(n, static_cast<size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return inject::allocate_nothrow(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { inject::release(p); }
void operator delete[](void* p) noexcept { inject::release(p); }
void operator delete(void* p, std::size_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::size_t) noexcept { inject::release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { inject::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { inject::release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { inject::release(p); }

// Thread creation that fails as it does when the process is out of threads or stack memory. Defined in the
// executable, it comes first in symbol lookup for libstdc++'s std::thread too; the real one (or a sanitizer's
// interceptor of it) is the next definition.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
    using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
    static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
    if (inject::g_refuse_threads.load() || real == nullptr) return EAGAIN;
    return real(thread, attr, start, arg);
}

// ------------------------------------------------------------------------------------------------- helpers

namespace {

using ckpt::testing::read_file;
using ckpt::testing::TempDir;
using ckpt::testing::write_file;
using inject::Mode;

struct VarsFree {
    void operator()(ckpt_vars* v) const { ckpt_vars_free(v); }
};
using VarsPtr = std::unique_ptr<ckpt_vars, VarsFree>;
struct StorageFree {
    void operator()(ckpt_storage* s) const { ckpt_storage_free(s); }
};
using StoragePtr = std::unique_ptr<ckpt_storage, StorageFree>;

// Open file descriptors of the process (opendir/readdir use malloc, not operator new).
int open_fds() {
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    int n = 0;
    while (const dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return n - 1;  // the directory stream's own descriptor
}

// What a checkpoint file holds, without the time a manager recorded in it (which differs from one save to the
// next): each array's name, dtype, shape and bytes, and the metadata but for ckpt.saved_at and ckpt.saved_at_ns.
// "<unreadable>" when the file does not read.
std::string checkpoint_content(const std::string& path) {
    ckpt_vars* v = nullptr;
    if (ckpt_read(&v, path.c_str(), nullptr) != CKPT_OK) return "<unreadable>";
    std::string out;
    for (size_t i = 0; i < ckpt_vars_count(v); ++i) {
        out += ckpt_vars_name(v, i);
        out += ' ' + std::to_string(ckpt_vars_dtype(v, i)) + ' ';
        for (uint32_t d = 0; d < ckpt_vars_ndim(v, i); ++d) out += std::to_string(ckpt_vars_shape(v, i)[d]) + ',';
        out.append(static_cast<const char*>(ckpt_vars_data(v, i)), ckpt_vars_nbytes(v, i));
        out += '\n';
    }
    for (size_t i = 0; i < ckpt_vars_metadata_count(v); ++i) {
        const std::string key = ckpt_vars_metadata_key(v, i);
        if (key != "ckpt.saved_at" && key != "ckpt.saved_at_ns") out += key + '=' + ckpt_vars_metadata_value(v, i) + '\n';
    }
    ckpt_vars_free(v);
    return out;
}

// A small collection: a float32 matrix, an int64 vector, a '<U' strings array and a bool scalar. `seed` changes
// every value so two collections' files differ.
VarsPtr make_vars(int seed) {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    float w[12];
    for (int i = 0; i < 12; ++i) w[i] = static_cast<float>(seed * 100 + i) / 4;
    int64_t b[5];
    for (int i = 0; i < 5; ++i) b[i] = seed * 1000 + i;
    char32_t labels[3][6] = {};
    const char32_t* words[] = {U"alpha", U"b\u00e9ta", U"gamma"};
    for (int i = 0; i < 3; ++i) {
        std::u32string s = words[i];
        s[0] = static_cast<char32_t>(s[0] + static_cast<char32_t>(seed % 3));
        std::copy(s.begin(), s.end(), labels[i]);
    }
    const bool flag = seed % 2 == 1;
    const int64_t w_shape[] = {3, 4}, b_shape[] = {5}, l_shape[] = {3};
    REQUIRE(ckpt_vars_add(v, "layer/w", CKPT_FLOAT32, 2, w_shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "layer/b", CKPT_INT64, 1, b_shape, b, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(v, "labels", CKPT_UNICODE, sizeof labels[0], 1, l_shape, labels, CKPT_COPY) ==
            CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "flag", CKPT_BOOL, 0, nullptr, &flag, CKPT_COPY) == CKPT_OK);
    // A bfloat16 array and user metadata: every operation below also writes or reads the metadata member.
    const uint16_t bf[2] = {static_cast<uint16_t>(0x3f80 + seed), 0xc000};
    const int64_t bf_shape[] = {2};
    REQUIRE(ckpt_vars_add(v, "layer/bf", CKPT_BFLOAT16, 1, bf_shape, bf, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(v, "step", std::to_string(seed).c_str()) == CKPT_OK);
    return vars;
}

// The same variables as make_vars, zero-filled: a collection to restore into.
VarsPtr make_zero_vars() {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    const int64_t w_shape[] = {3, 4}, b_shape[] = {5}, l_shape[] = {3};
    REQUIRE(ckpt_vars_add(v, "layer/w", CKPT_FLOAT32, 2, w_shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "layer/b", CKPT_INT64, 1, b_shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(v, "labels", CKPT_UNICODE, 24, 1, l_shape, nullptr, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "flag", CKPT_BOOL, 0, nullptr, nullptr, CKPT_COPY) == CKPT_OK);
    const int64_t bf_shape[] = {2};
    REQUIRE(ckpt_vars_add(v, "layer/bf", CKPT_BFLOAT16, 1, bf_shape, nullptr, CKPT_COPY) == CKPT_OK);
    // A restore replaces the metadata with the file's; with the same key already there, in its place (no new
    // allocation to count as a leak, and the same allocations in every run).
    REQUIRE(ckpt_vars_set_metadata(v, "step", "0") == CKPT_OK);
    return vars;
}

std::string bytes_of(const ckpt_vars* v, size_t i) {
    return std::string(static_cast<const char*>(ckpt_vars_data(v, i)), ckpt_vars_nbytes(v, i));
}

// Allocates nothing, so operations may compare while injection is armed.
bool same_vars(const ckpt_vars* a, const ckpt_vars* b) {
    if (ckpt_vars_count(a) != ckpt_vars_count(b)) return false;
    for (size_t i = 0; i < ckpt_vars_count(a); ++i) {
        const size_t n = ckpt_vars_nbytes(a, i);
        if (std::strcmp(ckpt_vars_name(a, i), ckpt_vars_name(b, i)) != 0 ||
            ckpt_vars_dtype(a, i) != ckpt_vars_dtype(b, i) || n != ckpt_vars_nbytes(b, i) ||
            (n > 0 && std::memcmp(ckpt_vars_data(a, i), ckpt_vars_data(b, i), n) != 0))
            return false;
    }
    return true;
}

ckpt_options npz_options(uint32_t layout, uint32_t compression, ckpt_storage* storage = nullptr) {
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.layout = layout;
    o.compression = compression;
    o.storage = storage;
    return o;
}

const char* describe(uint32_t layout, uint32_t compression) {
    if (layout == CKPT_LAYOUT_OBJAX) return compression == CKPT_DEFLATE ? "objax, deflate" : "objax, stored";
    return compression == CKPT_DEFLATE ? "plain, deflate" : "plain, stored";
}

// Leaves a long message in the calling thread's error buffer, so that later failures reuse its heap block
// instead of growing it (a first long message would otherwise look like a leak of one allocation).
void prime_error_message() {
    ckpt_vars* out = nullptr;
    ckpt_read(&out, "/nonexistent/directory/of/a/path/long/enough/to/need/the/heap.npz", nullptr);
}

// What a sweep checks, beyond CKPT_ENOMEM, a message, and no leak of memory or descriptors.
struct Sweep {
    std::function<void()> reset;                  // puts the state back before each run (not armed)
    std::function<int()> op;                      // the operation, armed; returns its CKPT_* code
    std::function<void(int rc, uint64_t n)> verify;  // checks the state after each run (n = 0: nothing failed)
    // Codes besides CKPT_ENOMEM a failing run may return (CKPT_OK where ckpt recovers from the failure).
    std::function<bool(int rc)> also_allowed = [](int) { return false; };
    // Whether a successful run leaves the live allocation count as it was (false when the operation's result
    // stays in memory, as a file in a memory storage).
    bool live_neutral_on_success = true;
};

struct SweepResult {
    uint64_t allocations = 0;  // K
    uint64_t recovered = 0;    // failing runs that returned CKPT_OK
};

SweepResult sweep(const Sweep& s) {
    prime_error_message();
    SweepResult result;

    const auto run = [&](uint64_t fail_at, Mode mode, uint64_t& seen, uint64_t& failed) {
        s.reset();
        const int64_t live0 = inject::g_live.load();
        const int fds0 = open_fds();
        inject::arm(fail_at, mode);
        const int rc = s.op();
        seen = inject::disarm();
        failed = inject::g_failed.load();
        const int64_t live1 = inject::g_live.load();
        const int fds1 = open_fds();
        INFO("the operation returned " << rc << " (" << ckpt_strerror(rc) << "): " << ckpt_error_message());
        if (rc != CKPT_OK || s.live_neutral_on_success) CHECK(live1 == live0);
        CHECK(fds1 == fds0);
        return rc;
    };

    uint64_t seen = 0, failed = 0;
    {
        INFO("counting run, nothing failing");
        const int rc = run(0, Mode::transient, seen, failed);
        REQUIRE(rc == CKPT_OK);
        s.verify(rc, 0);
    }
    result.allocations = seen;
    REQUIRE(result.allocations > 0);

    for (Mode mode : {Mode::transient, Mode::persistent}) {
        for (uint64_t n = 1; n <= result.allocations; ++n) {
            INFO((mode == Mode::transient ? "transient" : "persistent") << " failure of allocation " << n << " of "
                                                                          << result.allocations);
            const int rc = run(n, mode, seen, failed);
            INFO("returned " << rc << " (" << ckpt_strerror(rc) << "): " << ckpt_error_message());
            REQUIRE(failed >= 1);  // the runs are deterministic up to the failure
            if (rc == CKPT_OK) {
                REQUIRE(s.also_allowed(rc));
                ++result.recovered;
            } else {
                REQUIRE((rc == CKPT_ENOMEM || s.also_allowed(rc)));
                REQUIRE(std::strlen(ckpt_error_message()) > 0);
            }
            s.verify(rc, n);
        }
    }

    {
        INFO("final run, nothing failing");
        const int rc = run(0, Mode::transient, seen, failed);
        REQUIRE(rc == CKPT_OK);
        s.verify(rc, 0);
    }
    return result;
}

TempDir& temp() {
    static TempDir dir;
    return dir;
}

// A fresh directory under the test's temporary directory.
std::string fresh_dir(const std::string& name) {
    const std::string dir = temp().file(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

// The bytes of `vars` saved with the given options (through a throwaway file).
std::string saved_bytes(const ckpt_vars* vars, uint32_t layout, uint32_t compression) {
    const std::string path = temp().file("saved_bytes.npz");
    const ckpt_options o = npz_options(layout, compression);
    REQUIRE(ckpt_save(path.c_str(), vars, &o) == CKPT_OK);
    std::string bytes = read_file(path);
    std::filesystem::remove(path);
    return bytes;
}

const uint32_t kLayouts[] = {CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX};
const uint32_t kCompressions[] = {CKPT_STORE, CKPT_DEFLATE};

}  // namespace

// ---------------------------------------------------------------------------------------------------- tests

TEST_CASE("operator new replaced in the executable serves libckpt.so") {
    VarsPtr vars = make_vars(1);
    const std::string path = temp().file("interposition.npz");
    inject::arm(0, Mode::transient);
    const int rc = ckpt_save(path.c_str(), vars.get(), nullptr);
    const uint64_t seen = inject::disarm();
    REQUIRE(rc == CKPT_OK);
    INFO("allocations during ckpt_save: " << seen);
    CHECK(seen > 10);  // member names, npy headers, the zip writer's buffer, the path of the temporary, ...

    // And a failure injected there reaches the library: the very first allocation of a save fails it.
    inject::arm(1, Mode::transient);
    const int failing = ckpt_save(path.c_str(), vars.get(), nullptr);
    inject::disarm();
    CHECK(failing == CKPT_ENOMEM);
}

TEST_CASE("allocation failure in ckpt_save to a file") {
    for (uint32_t layout : kLayouts) {
        for (uint32_t compression : kCompressions) {
            DYNAMIC_SECTION(describe(layout, compression)) {
                const std::string dir = fresh_dir("save");
                const std::string path = dir + "/model.npz";
                VarsPtr old_vars = make_vars(1), new_vars = make_vars(2);
                const std::string previous = saved_bytes(old_vars.get(), layout, compression);
                const std::string next = saved_bytes(new_vars.get(), layout, compression);
                REQUIRE(previous != next);
                const ckpt_options o = npz_options(layout, compression);

                Sweep s;
                s.reset = [&] { write_file(path, previous); };
                s.op = [&] { return ckpt_save(path.c_str(), new_vars.get(), &o); };
                s.verify = [&](int rc, uint64_t) {
                    CHECK(TempDir::list(dir) == std::vector<std::string>{"model.npz"});  // no temporary left
                    CHECK(read_file(path) == (rc == CKPT_OK ? next : previous));
                };
                // Once the file is renamed into place and its directory synced, the removal of stale temporaries of
                // its name (the listing of the directory) is best effort, as a manager's retention is: out of memory
                // there, the save has still succeeded — with the new content, which verify checks.
                s.also_allowed = [](int rc) { return rc == CKPT_OK; };
                const SweepResult r = sweep(s);
                std::printf("ckpt_save to a file (%s): K = %llu, %llu failing runs succeeded (cleanup)\n",
                            describe(layout, compression), static_cast<unsigned long long>(r.allocations),
                            static_cast<unsigned long long>(r.recovered));
                CHECK(r.recovered < 8);  // only the cleanup's few allocations, after the commit
            }
        }
    }
}

TEST_CASE("allocation failure in ckpt_save to a memory storage") {
    for (uint32_t layout : kLayouts) {
        for (uint32_t compression : kCompressions) {
            DYNAMIC_SECTION(describe(layout, compression)) {
                VarsPtr old_vars = make_vars(1), new_vars = make_vars(2);
                StoragePtr storage;
                const std::string path = "0000000007.npz";  // a checkpoint's name: a manager finds its temporaries

                Sweep s;
                s.reset = [&] {
                    ckpt_storage* m = nullptr;
                    REQUIRE(ckpt_storage_new_memory(&m) == CKPT_OK);
                    storage.reset(m);
                    const ckpt_options o = npz_options(layout, compression, m);
                    REQUIRE(ckpt_save(path.c_str(), old_vars.get(), &o) == CKPT_OK);
                };
                s.op = [&] {
                    const ckpt_options o = npz_options(layout, compression, storage.get());
                    return ckpt_save(path.c_str(), new_vars.get(), &o);
                };
                s.verify = [&](int rc, uint64_t) {
                    const ckpt_options o = npz_options(CKPT_LAYOUT_AUTO, CKPT_STORE, storage.get());
                    ckpt_vars* back = nullptr;
                    REQUIRE(ckpt_read(&back, path.c_str(), &o) == CKPT_OK);
                    VarsPtr got(back);
                    CHECK(same_vars(got.get(), rc == CKPT_OK ? new_vars.get() : old_vars.get()));
                    // A manager opened on the directory removes (and reports) temporaries of checkpoints.
                    int stale = 0;
                    ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
                    mo.subdir = "";
                    mo.storage = storage.get();
                    mo.log = [](int level, const char* message, void* payload) {
                        if (level == CKPT_LOG_WARNING && std::strstr(message, "temporary") != nullptr)
                            ++*static_cast<int*>(payload);
                    };
                    mo.log_payload = &stale;
                    ckpt_manager* m = nullptr;
                    REQUIRE(ckpt_manager_open(&m, ".", &mo) == CKPT_OK);
                    REQUIRE(ckpt_manager_close(m) == CKPT_OK);
                    CHECK(stale == 0);
                };
                s.live_neutral_on_success = false;  // the storage now holds the new file's bytes
                const SweepResult r = sweep(s);
                storage.reset();
                std::printf("ckpt_save to a memory storage (%s): K = %llu\n", describe(layout, compression),
                            static_cast<unsigned long long>(r.allocations));
            }
        }
    }
}

TEST_CASE("allocation failure in ckpt_read, ckpt_read_memory and ckpt_reader_open + ckpt_reader_read_into") {
    for (uint32_t layout : kLayouts) {
        for (uint32_t compression : kCompressions) {
            DYNAMIC_SECTION(describe(layout, compression)) {
                VarsPtr vars = make_vars(3);
                const std::string path = temp().file("read.npz");
                const std::string bytes = saved_bytes(vars.get(), layout, compression);
                write_file(path, bytes);
                ckpt_vars* out = nullptr;

                Sweep read;
                read.reset = [&] { out = nullptr; };
                read.op = [&] {
                    const int rc = ckpt_read(&out, path.c_str(), nullptr);
                    ckpt_vars* got = out;
                    if (rc == CKPT_OK && !same_vars(got, vars.get())) return CKPT_ERROR - 100;
                    ckpt_vars_free(got);
                    return rc;
                };
                read.verify = [&](int rc, uint64_t) {
                    if (rc != CKPT_OK) CHECK(out == nullptr);  // set to NULL on failure
                };
                const SweepResult r1 = sweep(read);

                Sweep memory = read;
                memory.op = [&] {
                    const int rc = ckpt_read_memory(&out, bytes.data(), bytes.size(), nullptr);
                    ckpt_vars* got = out;
                    if (rc == CKPT_OK && !same_vars(got, vars.get())) return CKPT_ERROR - 100;
                    ckpt_vars_free(got);
                    return rc;
                };
                const SweepResult r2 = sweep(memory);

                // Buffers for ckpt_reader_read_into, allocated before arming.
                std::vector<std::vector<char>> buffers;
                for (size_t i = 0; i < ckpt_vars_count(vars.get()); ++i)
                    buffers.emplace_back(ckpt_vars_nbytes(vars.get(), i));
                Sweep lazy;
                lazy.reset = [] {};
                lazy.op = [&] {
                    ckpt_reader* npz = nullptr;
                    int rc = ckpt_reader_open(&npz, path.c_str(), nullptr);
                    if (rc != CKPT_OK) return npz == nullptr ? rc : CKPT_ERROR - 101;
                    for (size_t i = 0; rc == CKPT_OK && i < ckpt_reader_count(npz); ++i)
                        rc = ckpt_reader_read_into(npz, i, buffers[i].data(), buffers[i].size());
                    ckpt_reader_close(npz);
                    return rc;
                };
                lazy.verify = [&](int rc, uint64_t) {
                    if (rc != CKPT_OK) return;  // dst contents are unspecified after a failure
                    for (size_t i = 0; i < buffers.size(); ++i)
                        CHECK(std::string(buffers[i].begin(), buffers[i].end()) == bytes_of(vars.get(), i));
                };
                const SweepResult r3 = sweep(lazy);
                std::printf(
                    "reads (%s): ckpt_read K = %llu, ckpt_read_memory K = %llu, "
                    "ckpt_reader_open + ckpt_reader_read_into K = %llu\n",
                    describe(layout, compression), static_cast<unsigned long long>(r1.allocations),
                    static_cast<unsigned long long>(r2.allocations), static_cast<unsigned long long>(r3.allocations));
            }
        }
    }
}

namespace {
// The allocation count when the renamer last ran: restore_npz renames every name on disk before it checks the
// collection and writes any data, so a failure up to this point must leave the collection untouched.
std::atomic<uint64_t> g_renamed_at{0};
int keep_name(const char*, char*, size_t, void*) {
    g_renamed_at.store(inject::g_seen.load());
    return 0;
}
}  // namespace

TEST_CASE("allocation failure in ckpt_restore") {
    for (uint32_t layout : kLayouts) {
        for (uint32_t compression : kCompressions) {
            DYNAMIC_SECTION(describe(layout, compression)) {
                VarsPtr source = make_vars(4), zeros = make_zero_vars();
                const std::string path = temp().file("restore.npz");
                write_file(path, saved_bytes(source.get(), layout, compression));
                VarsPtr target = make_zero_vars();
                ckpt_options o = npz_options(CKPT_LAYOUT_AUTO, CKPT_STORE);
                o.rename = keep_name;
                uint64_t checked_by = 0;  // g_renamed_at of the counting run

                Sweep s;
                s.reset = [&] {
                    for (size_t i = 0; i < ckpt_vars_count(target.get()); ++i)
                        std::memset(ckpt_vars_data(target.get(), i), 0, ckpt_vars_nbytes(target.get(), i));
                    g_renamed_at.store(0);
                };
                s.op = [&] { return ckpt_restore(path.c_str(), target.get(), &o); };
                s.verify = [&](int rc, uint64_t n) {
                    if (n == 0) checked_by = g_renamed_at.load();
                    // Variables are restored in collection order, each completely: the ones before the failure are
                    // new, the rest as they were — and all as they were when the failure came before the data.
                    const size_t count = ckpt_vars_count(target.get());
                    size_t restored = 0;
                    while (restored < count && bytes_of(target.get(), restored) == bytes_of(source.get(), restored))
                        ++restored;
                    for (size_t i = restored; i < count; ++i) {
                        INFO("variable " << i << " (" << ckpt_vars_name(target.get(), i) << ")");
                        CHECK(bytes_of(target.get(), i) == bytes_of(zeros.get(), i));
                    }
                    if (rc == CKPT_OK) CHECK(restored == count);
                    if (n != 0 && n <= checked_by) CHECK(restored == 0);
                };
                const SweepResult r = sweep(s);
                std::printf("ckpt_restore (%s): K = %llu, of which %llu before any data is written\n",
                            describe(layout, compression), static_cast<unsigned long long>(r.allocations),
                            static_cast<unsigned long long>(checked_by));
            }
        }
    }
}

TEST_CASE("allocation failure in ckpt_vars_add") {
    VarsPtr base = make_vars(5);
    ckpt_vars* target = nullptr;
    const float data[6] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[] = {2, 3};
    const char32_t strings_data[2][3] = {{U'a', U'b', 0}, {U'c', 0, 0}};
    const int64_t string_shape[] = {2};

    // Adding to an existing collection: on failure the collection is as it was.
    const auto add_sweep = [&](bool strings) {
        const char* name = strings ? "a fairly long variable name/labels" : "a fairly long variable name/weights";
        Sweep s;
        s.reset = [&] {
            REQUIRE(ckpt_vars_new(&target) == CKPT_OK);
            REQUIRE(ckpt_vars_add(target, "first", CKPT_FLOAT32, 2, shape, data, CKPT_COPY) == CKPT_OK);
        };
        s.op = [&, strings, name] {
            return strings ? ckpt_vars_add_strings(target, name, CKPT_UNICODE, 12, 1, string_shape, strings_data, CKPT_COPY)
                           : ckpt_vars_add(target, name, CKPT_FLOAT32, 2, shape, data, CKPT_COPY);
        };
        s.verify = [&, name](int rc, uint64_t) {
            size_t index = 0;
            if (rc == CKPT_OK) {
                CHECK(ckpt_vars_count(target) == 2);
                CHECK(ckpt_vars_find(target, name, &index) == CKPT_OK);
                CHECK(index == 1);
            } else {
                CHECK(ckpt_vars_count(target) == 1);
                CHECK(ckpt_vars_find(target, name, &index) == CKPT_ENOTFOUND);
            }
            CHECK(ckpt_vars_find(target, "first", &index) == CKPT_OK);
            CHECK(index == 0);
            CHECK(std::memcmp(ckpt_vars_data(target, 0), data, sizeof data) == 0);
            ckpt_vars_free(target);
            target = nullptr;
        };
        s.live_neutral_on_success = false;  // the collection holds the new array until verify frees it
        return sweep(s);
    };
    const SweepResult r = add_sweep(false);
    const SweepResult r_strings = add_sweep(true);

    // A whole collection built from nothing: ckpt_vars_new and every add, then freed.
    Sweep whole;
    whole.reset = [] {};
    whole.op = [&] {
        ckpt_vars* v = nullptr;
        int rc = ckpt_vars_new(&v);
        if (rc != CKPT_OK) return v == nullptr ? rc : CKPT_ERROR - 101;
        for (size_t i = 0; rc == CKPT_OK && i < ckpt_vars_count(base.get()); ++i) {
            const uint32_t dtype = ckpt_vars_dtype(base.get(), i);
            rc = dtype == CKPT_UNICODE
                     ? ckpt_vars_add_strings(v, ckpt_vars_name(base.get(), i), dtype, ckpt_vars_itemsize(base.get(), i),
                                             ckpt_vars_ndim(base.get(), i), ckpt_vars_shape(base.get(), i),
                                             ckpt_vars_data(base.get(), i), CKPT_COPY)
                     : ckpt_vars_add(v, ckpt_vars_name(base.get(), i), dtype, ckpt_vars_ndim(base.get(), i),
                                     ckpt_vars_shape(base.get(), i), ckpt_vars_data(base.get(), i), CKPT_COPY);
        }
        if (rc == CKPT_OK && !same_vars(v, base.get())) rc = CKPT_ERROR - 100;
        ckpt_vars_free(v);
        return rc;
    };
    whole.verify = [](int, uint64_t) {};
    const SweepResult r2 = sweep(whole);
    std::printf("ckpt_vars_add into a collection: K = %llu; ckpt_vars_add_strings: K = %llu; "
                "ckpt_vars_new + 4 adds: K = %llu\n",
                static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r_strings.allocations),
                static_cast<unsigned long long>(r2.allocations));
}

namespace {

struct ManagerFixture {
    std::string logdir;
    std::string dir;  // logdir/ckpt
    std::vector<std::string> previous;  // bytes of checkpoints 1 and 2
    VarsPtr one = make_vars(1), two = make_vars(2), three = make_vars(3);

    explicit ManagerFixture(const std::string& name) : logdir(fresh_dir(name)), dir(logdir + "/ckpt") {}
    std::string file(int64_t i) const {
        char name[32];
        std::snprintf(name, sizeof name, "/%010lld.npz", static_cast<long long>(i));
        return dir + name;
    }
    ckpt_manager_options options(uint32_t flags) const {
        ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
        o.keep = 2;
        o.flags = flags;
        return o;
    }
    // Checkpoints 1 and 2, nothing else (but the lock file once a manager has opened the directory).
    void reset() {
        std::filesystem::create_directories(dir);
        for (const auto& name : TempDir::list(dir))
            if (name != ".ckpt.lock") std::filesystem::remove(dir + "/" + name);
        if (previous.empty()) {
            ckpt_manager* m = nullptr;
            const ckpt_manager_options o = options(0);
            REQUIRE(ckpt_manager_open(&m, logdir.c_str(), &o) == CKPT_OK);
            REQUIRE(ckpt_manager_save(m, one.get(), 1) == CKPT_OK);
            REQUIRE(ckpt_manager_save(m, two.get(), 2) == CKPT_OK);
            REQUIRE(ckpt_manager_close(m) == CKPT_OK);
            previous = {read_file(file(1)), read_file(file(2))};
        } else {
            write_file(file(1), previous[0]);
            write_file(file(2), previous[1]);
        }
    }
    std::vector<std::string> files() const {
        std::vector<std::string> names;
        for (const auto& name : TempDir::list(dir))
            if (name != ".ckpt.lock") names.push_back(name);
        return names;
    }
};

}  // namespace

TEST_CASE("allocation failure in ckpt_manager_open + ckpt_manager_save + ckpt_manager_close, keep = 2") {
    for (uint32_t flags : {0u, static_cast<uint32_t>(CKPT_MANAGER_ASYNC)}) {
        DYNAMIC_SECTION((flags ? "async" : "sync")) {
            ManagerFixture f("manager_save");
            std::string saved;  // what checkpoint 3 holds as a save writes it (its recorded time aside)
            int saves_ok = 0;

            Sweep s;
            s.reset = [&] {
                f.reset();
                saves_ok = 0;
            };
            s.op = [&] {
                ckpt_manager* m = nullptr;
                const ckpt_manager_options o = f.options(flags);
                int rc = ckpt_manager_open(&m, f.logdir.c_str(), &o);
                if (rc != CKPT_OK) return m == nullptr ? rc : CKPT_ERROR - 101;
                rc = ckpt_manager_save(m, f.three.get(), 3);
                if (rc == CKPT_OK) ++saves_ok;
                const int closed = ckpt_manager_close(m);  // reports an async save's error
                return rc != CKPT_OK ? rc : closed;
            };
            s.verify = [&](int rc, uint64_t n) {
                const std::vector<std::string> files = f.files();
                if (n == 0 && saved.empty()) saved = checkpoint_content(f.file(3));
                const bool committed = std::find(files.begin(), files.end(), "0000000003.npz") != files.end();
                if (rc == CKPT_OK) {
                    // Retention removed checkpoint 1 — unless it ran out of memory, which leaves 1 for a later save.
                    CHECK(committed);
                    CHECK((files == std::vector<std::string>{"0000000002.npz", "0000000003.npz"} ||
                           files == std::vector<std::string>{"0000000001.npz", "0000000002.npz", "0000000003.npz"}));
                } else {
                    // No temporary left; the earlier checkpoints intact; 3 absent, or complete when only the
                    // directory sync after its rename failed.
                    CHECK((files == std::vector<std::string>{"0000000001.npz", "0000000002.npz"} ||
                           files == std::vector<std::string>{"0000000001.npz", "0000000002.npz", "0000000003.npz"}));
                    CHECK(read_file(f.file(1)) == f.previous[0]);
                    CHECK(read_file(f.file(2)) == f.previous[1]);
                }
                if (committed) CHECK(checkpoint_content(f.file(3)) == saved);
                if (read_file(f.file(2)) != f.previous[1]) FAIL("checkpoint 2 changed");
            };
            // Retention runs once the new checkpoint is durable and is best effort: when it runs out of memory the
            // save still succeeded, and the next save's retention removes what this one left. (Async saves also
            // return their copy's buffers to a pool, which frees a buffer it cannot record.)
            s.also_allowed = [&](int rc) { return rc == CKPT_OK; };
            const SweepResult r = sweep(s);
            std::printf("manager open + save + close (%s): K = %llu, %llu failing runs succeeded (retention, buffer pool)\n",
                        flags ? "async" : "sync", static_cast<unsigned long long>(r.allocations),
                        static_cast<unsigned long long>(r.recovered));
        }
    }
}

TEST_CASE("allocation failure in ckpt_manager_open + ckpt_manager_restore + ckpt_manager_close") {
    ManagerFixture f("manager_restore");
    f.reset();
    VarsPtr target = make_zero_vars(), zeros = make_zero_vars();
    int64_t restored_idx = -1;
    // A restore replaces the collection's metadata with the file's (every manager save records its index and
    // time): give the target that metadata once, so that a restore replaces it with as many allocations as it frees.
    REQUIRE(ckpt_restore(f.file(2).c_str(), target.get(), nullptr) == CKPT_OK);

    Sweep s;
    s.reset = [&] {
        for (size_t i = 0; i < ckpt_vars_count(target.get()); ++i)
            std::memset(ckpt_vars_data(target.get(), i), 0, ckpt_vars_nbytes(target.get(), i));
        restored_idx = -1;
    };
    s.op = [&] {
        ckpt_manager* m = nullptr;
        const ckpt_manager_options o = f.options(0);
        int rc = ckpt_manager_open(&m, f.logdir.c_str(), &o);
        if (rc != CKPT_OK) return m == nullptr ? rc : CKPT_ERROR - 101;
        rc = ckpt_manager_restore(m, target.get(), CKPT_LATEST, &restored_idx);
        const int closed = ckpt_manager_close(m);
        return rc != CKPT_OK ? rc : closed;
    };
    s.verify = [&](int rc, uint64_t) {
        CHECK(f.files() == std::vector<std::string>{"0000000001.npz", "0000000002.npz"});
        if (rc == CKPT_OK) {
            CHECK(restored_idx == 2);  // never fell back to 1 because memory ran out
            CHECK(same_vars(target.get(), f.two.get()));
            return;
        }
        const size_t count = ckpt_vars_count(target.get());
        size_t restored = 0;
        while (restored < count && bytes_of(target.get(), restored) == bytes_of(f.two.get(), restored)) ++restored;
        for (size_t i = restored; i < count; ++i) CHECK(bytes_of(target.get(), i) == bytes_of(zeros.get(), i));
    };
    const SweepResult r = sweep(s);

    ckpt_vars* out = nullptr;
    Sweep read;
    read.reset = [&] { out = nullptr; };
    read.op = [&] {
        ckpt_manager* m = nullptr;
        const ckpt_manager_options o = f.options(0);
        int rc = ckpt_manager_open(&m, f.logdir.c_str(), &o);
        if (rc != CKPT_OK) return m == nullptr ? rc : CKPT_ERROR - 101;
        rc = ckpt_manager_read(m, CKPT_LATEST, &out, &restored_idx);
        if (rc == CKPT_OK && (restored_idx != 2 || !same_vars(out, f.two.get()))) rc = CKPT_ERROR - 100;
        ckpt_vars_free(out);
        const int closed = ckpt_manager_close(m);
        return rc != CKPT_OK ? rc : closed;
    };
    read.verify = [&](int, uint64_t) { CHECK(f.files() == std::vector<std::string>{"0000000001.npz", "0000000002.npz"}); };
    const SweepResult r2 = sweep(read);
    std::printf("manager open + restore(LATEST) + close: K = %llu; open + read(LATEST) + close: K = %llu\n",
                static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r2.allocations));
}

TEST_CASE("allocation failure in background writer saves") {
    for (uint32_t kind : {CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE}) {
        for (uint32_t compression : kCompressions) {
            DYNAMIC_SECTION((kind == CKPT_WRITER_THREAD ? "thread" : "queue") << ", " << describe(CKPT_LAYOUT_PLAIN, compression)) {
                const std::string dir = fresh_dir("writer");
                const std::string path = dir + "/model.npz";
                VarsPtr old_vars = make_vars(1), new_vars = make_vars(2);
                const std::string previous = saved_bytes(old_vars.get(), CKPT_LAYOUT_PLAIN, compression);
                const std::string next = saved_bytes(new_vars.get(), CKPT_LAYOUT_PLAIN, compression);
                const ckpt_options o = npz_options(CKPT_LAYOUT_PLAIN, compression);
                int codes[5];  // new, save_vars, wait, finalize, a second wait
                int failures = 0;

                Sweep s;
                s.reset = [&] {
                    write_file(path, previous);
                    std::fill(std::begin(codes), std::end(codes), CKPT_OK);
                };
                s.op = [&] {
                    ckpt_writer_options wo = CKPT_WRITER_OPTIONS_INIT;
                    wo.kind = kind;
                    wo.queue_depth = 2;
                    wo.out_dir = dir.c_str();
                    ckpt_writer* w = nullptr;
                    codes[0] = ckpt_writer_new(&w, &wo);
                    if (codes[0] != CKPT_OK) return w == nullptr ? codes[0] : CKPT_ERROR - 101;
                    codes[1] = ckpt_writer_save_vars(w, nullptr, "model.npz", new_vars.get(), &o, 0);
                    codes[2] = ckpt_writer_wait(w);
                    codes[3] = ckpt_writer_finalize(w);
                    codes[4] = ckpt_writer_wait(w);
                    ckpt_writer_free(w);
                    for (int c : codes)
                        if (c != CKPT_OK) return c;
                    return CKPT_OK;
                };
                s.verify = [&](int rc, uint64_t) {
                    // Exactly one call reports the failure, whichever thread it happened on.
                    failures = 0;
                    for (int c : codes) failures += c != CKPT_OK;
                    CHECK(failures == (rc == CKPT_OK ? 0 : 1));
                    CHECK(TempDir::list(dir) == std::vector<std::string>{"model.npz"});
                    CHECK(read_file(path) == (rc == CKPT_OK ? next : previous));
                };
                // After the save, the copy's buffers go back to the writer's pool for the next save; a buffer the
                // pool cannot record for lack of memory is freed instead, and nothing has failed.
                s.also_allowed = [](int rc) { return rc == CKPT_OK; };
                const SweepResult r = sweep(s);
                std::printf("writer (%s, %s): new + save_vars + wait + finalize + free: K = %llu, %llu failing runs "
                            "succeeded (buffer pool)\n",
                            kind == CKPT_WRITER_THREAD ? "thread" : "queue", describe(CKPT_LAYOUT_PLAIN, compression),
                            static_cast<unsigned long long>(r.allocations),
                            static_cast<unsigned long long>(r.recovered));
            }
        }
    }
}

TEST_CASE("a thread that cannot be started fails the call cleanly") {
    const std::string dir = fresh_dir("threads");
    prime_error_message();
    const int64_t live0 = inject::g_live.load();
    const int fds0 = open_fds();
    inject::g_refuse_threads.store(true);

    ckpt_writer_options wo = CKPT_WRITER_OPTIONS_INIT;
    wo.kind = CKPT_WRITER_QUEUE;
    ckpt_writer* w = nullptr;
    const int writer_rc = ckpt_writer_new(&w, &wo);
    const std::string writer_message = ckpt_error_message();

    ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
    mo.flags = CKPT_MANAGER_ASYNC;
    ckpt_manager* m = nullptr;
    const int manager_rc = ckpt_manager_open(&m, dir.c_str(), &mo);
    const std::string manager_message = ckpt_error_message();

    inject::g_refuse_threads.store(false);
    CHECK(inject::g_live.load() <= live0 + 2);  // the two messages kept above
    CHECK(open_fds() == fds0);                   // the manager's lock file is closed again

    // ckpt_writer_new documents CKPT_ERROR for "no thread could be started".
    CHECK(writer_rc == CKPT_ERROR);
    CHECK(w == nullptr);
    CHECK_THAT(writer_message, Catch::Matchers::Contains("thread"));
    CHECK(manager_rc == CKPT_ERROR);
    CHECK(m == nullptr);
    CHECK_THAT(manager_message, Catch::Matchers::Contains("thread"));

    // Nothing is left locked: the directory opens now.
    REQUIRE(ckpt_manager_open(&m, dir.c_str(), &mo) == CKPT_OK);
    REQUIRE(ckpt_manager_close(m) == CKPT_OK);
}
