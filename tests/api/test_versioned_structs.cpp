// SPDX-License-Identifier: Apache-2.0
// A caller built against an older header passes an older, shorter options struct: ckpt reads and writes only the
// bytes that version has. Each struct here ends where its version ends, right before a page that may be neither
// read nor written, so one byte too many ends the test with SIGSEGV.
#include "ckpt/ckpt.h"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

using ckpt::testing::TempDir;

namespace {

// Two pages, the second inaccessible; at(bytes) is where a struct of `bytes` bytes (rounded up to its alignment)
// ends at the first page's end.
class GuardedPage {
public:
    GuardedPage() : page_(static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {
        void* p = ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(p != MAP_FAILED);
        base_ = static_cast<char*>(p);
        REQUIRE(::mprotect(base_ + page_, page_, PROT_NONE) == 0);
    }
    ~GuardedPage() { ::munmap(base_, 2 * page_); }
    GuardedPage(const GuardedPage&) = delete;
    GuardedPage& operator=(const GuardedPage&) = delete;

    template <typename T>
    T* at(size_t bytes) {
        const size_t rounded = (bytes + alignof(T) - 1) / alignof(T) * alignof(T);
        std::memset(base_, 0x5a, page_);  // what an older caller has after its struct: not ckpt's to read
        return reinterpret_cast<T*>(base_ + page_ - rounded);
    }

private:
    size_t page_;
    char* base_ = nullptr;
};

struct Vars {
    ckpt_vars* v = nullptr;
    float data[4] = {1, 2, 3, 4};
    Vars() {
        REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
        const int64_t shape[1] = {4};
        REQUIRE(ckpt_vars_add(v, "w", CKPT_FLOAT32, 1, shape, data, CKPT_BORROW) == CKPT_OK);
    }
    ~Vars() { ckpt_vars_free(v); }
};

}  // namespace

TEST_CASE("ckpt_options of every older version: init, save and read touch only its bytes") {
    const size_t sizes[] = {offsetof(ckpt_options, storage), offsetof(ckpt_options, max_members),
                            offsetof(ckpt_options, flags), offsetof(ckpt_options, base),
                            offsetof(ckpt_options, format)};  // version 6: format and max_shard_bytes
    static_assert(sizeof sizes / sizeof sizes[0] == CKPT_OPTIONS_VERSION - 1, "a size per older version");
    TempDir tmp;
    Vars vars;
    GuardedPage guard;
    for (uint32_t version = 1; version < CKPT_OPTIONS_VERSION; ++version) {
        INFO("version " << version);
        auto* o = guard.at<ckpt_options>(sizes[version - 1]);
        REQUIRE(ckpt_options_init(o, version) == CKPT_OK);
        CHECK(o->version == version);
        o->compression = CKPT_DEFLATE;
        const std::string path = tmp.file("v" + std::to_string(version) + ".npz");
        INFO(ckpt_error_message());
        REQUIRE(ckpt_save(path.c_str(), vars.v, o) == CKPT_OK);
        ckpt_vars* back = nullptr;
        REQUIRE(ckpt_read(&back, path.c_str(), o) == CKPT_OK);
        CHECK(std::memcmp(ckpt_vars_data(back, 0), vars.data, sizeof vars.data) == 0);
        ckpt_vars_free(back);
    }
}

TEST_CASE("ckpt_manager_options of every older version: init and open touch only its bytes") {
    const size_t sizes[] = {offsetof(ckpt_manager_options, keep_best),
                            offsetof(ckpt_manager_options, max_staging_bytes), offsetof(ckpt_manager_options, comm),
                            offsetof(ckpt_manager_options, full_every)};
    static_assert(sizeof sizes / sizeof sizes[0] == CKPT_MANAGER_OPTIONS_VERSION - 1, "a size per older version");
    TempDir tmp;
    Vars vars;
    GuardedPage guard;
    for (uint32_t version = 1; version < CKPT_MANAGER_OPTIONS_VERSION; ++version) {
        INFO("version " << version);
        auto* o = guard.at<ckpt_manager_options>(sizes[version - 1]);
        REQUIRE(ckpt_manager_options_init(o, version) == CKPT_OK);
        CHECK(o->keep == 10);
        o->keep = 1;
        ckpt_manager* m = nullptr;
        const std::string dir = tmp.file("m" + std::to_string(version));
        INFO(ckpt_error_message());
        REQUIRE(ckpt_manager_open(&m, dir.c_str(), o) == CKPT_OK);
        CHECK(ckpt_manager_save(m, vars.v, 1) == CKPT_OK);
        CHECK(ckpt_manager_save(m, vars.v, 2) == CKPT_OK);
        CHECK(ckpt_manager_close(m) == CKPT_OK);
    }
}

TEST_CASE("ckpt_writer_options of version 1: init and new touch only its bytes") {
    static_assert(CKPT_WRITER_OPTIONS_VERSION == 2, "a size per older version");
    GuardedPage guard;
    auto* o = guard.at<ckpt_writer_options>(offsetof(ckpt_writer_options, after_save));
    REQUIRE(ckpt_writer_options_init(o, 1) == CKPT_OK);
    o->kind = CKPT_WRITER_THREAD;
    ckpt_writer* w = nullptr;
    INFO(ckpt_error_message());
    REQUIRE(ckpt_writer_new(&w, o) == CKPT_OK);
    ckpt_writer_free(w);
}

TEST_CASE("ckpt_storage_ops of every older version: ckpt_storage_new reads only its bytes") {
    const size_t sizes[] = {offsetof(ckpt_storage_ops, free_space), offsetof(ckpt_storage_ops, list_dirs),
                            offsetof(ckpt_storage_ops, list_incomplete), offsetof(ckpt_storage_ops, stat),
                            offsetof(ckpt_storage_ops, clone_range)};
    static_assert(sizeof sizes / sizeof sizes[0] == CKPT_STORAGE_OPS_VERSION - 1, "a size per older version");
    ckpt_storage_ops full;
    std::memset(&full, 0, sizeof full);
    full.make_dirs = [](void*, const char*) { return CKPT_EIO; };
    full.create = [](void*, const char*, void**) { return CKPT_EIO; };
    full.write = [](void*, void*, const void*, size_t) { return CKPT_EIO; };
    full.sync = [](void*, void*) { return CKPT_EIO; };
    full.close = [](void*, void*) { return CKPT_EIO; };
    full.rename = [](void*, const char*, const char*) { return CKPT_EIO; };
    full.remove = [](void*, const char*) { return CKPT_EIO; };
    full.list = [](void*, const char*, ckpt_list_entry_fn, void*) { return CKPT_EIO; };
    full.open_read = [](void*, const char*, void**, uint64_t*) { return CKPT_EIO; };
    full.read_at = [](void*, void*, uint64_t, void*, size_t, size_t*) { return CKPT_EIO; };
    full.close_read = [](void*, void*) {};
    GuardedPage guard;
    for (uint32_t version = 1; version < CKPT_STORAGE_OPS_VERSION; ++version) {
        INFO("version " << version);
        auto* ops = guard.at<ckpt_storage_ops>(sizes[version - 1]);
        std::memcpy(static_cast<void*>(ops), &full, sizes[version - 1]);
        ops->version = version;
        ckpt_storage* s = nullptr;
        INFO(ckpt_error_message());
        REQUIRE(ckpt_storage_new(&s, ops) == CKPT_OK);
        ckpt_file_info info;
        CHECK(ckpt_storage_stat(s, "x", &info) == CKPT_EIO);  // no stat callback: through list, which fails
        ckpt_storage_free(s);
    }
}
