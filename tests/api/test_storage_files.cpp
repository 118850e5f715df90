// SPDX-License-Identifier: Apache-2.0
// Files of a storage through the C API (ckpt_storage_stat, _list, _remove, ckpt_file_*): on the local filesystem,
// in memory, and over callback tables with and without a stat callback.
#include "ckpt/ckpt.h"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using ckpt::testing::TempDir;

namespace {

struct StorageHandle {
    ckpt_storage* s = nullptr;
    ~StorageHandle() { ckpt_storage_free(s); }
};

std::vector<std::string> listing(ckpt_storage* storage, const std::string& dir) {
    std::vector<std::string> names;
    const int rc = ckpt_storage_list(
        storage, dir.c_str(),
        [](const char* name, void* ctx) {
            static_cast<std::vector<std::string>*>(ctx)->emplace_back(name);
            return CKPT_OK;
        },
        &names);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    return names;
}

std::string read_all(ckpt_storage* storage, const std::string& path) {
    ckpt_file* f = nullptr;
    uint64_t size = 0;
    const int rc = ckpt_file_open(&f, storage, path.c_str(), &size);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    std::string out(size + 10, '\0');
    size_t got = 0;
    REQUIRE(ckpt_file_read(f, 0, &out[0], out.size(), &got) == CKPT_OK);
    CHECK(got == size);  // short: the end
    size_t none = 7;
    REQUIRE(ckpt_file_read(f, size, &out[0], 4, &none) == CKPT_OK);
    CHECK(none == 0);
    ckpt_file_close(f);
    out.resize(got);
    return out;
}

// Saves bytes as a file through a writer, as a program puts them into any storage (the writer makes the directory).
void put(ckpt_storage* storage, const std::string& path, const std::string& bytes) {
    ckpt_writer_options o;
    REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
    o.storage = storage;
    ckpt_writer* w = nullptr;
    REQUIRE(ckpt_writer_new(&w, &o) == CKPT_OK);
    const size_t slash = path.rfind('/');
    const int rc = ckpt_writer_save(
        w, path.substr(0, slash).c_str(), path.substr(slash + 1).c_str(),
        [](ckpt_sink* sink, void* p) {
            const auto* b = static_cast<const std::string*>(p);
            return ckpt_sink_write(sink, b->data(), b->size());
        },
        const_cast<std::string*>(&bytes), 0);
    INFO(ckpt_error_message());
    CHECK(rc == CKPT_OK);
    CHECK(ckpt_writer_finalize(w) == CKPT_OK);
    ckpt_writer_free(w);
}

// What every storage must do: stat, list (sorted, directories with '/'), read, remove.
void check_files(ckpt_storage* storage, const std::string& root) {
    const std::string a = root + "/a.bin", sub = root + "/sub", b = sub + "/b.bin";
    put(storage, a, "hello");
    put(storage, b, std::string(70000, 'x'));

    ckpt_file_info info;
    REQUIRE(ckpt_storage_stat(storage, a.c_str(), &info) == CKPT_OK);
    CHECK(info.size == 5);
    CHECK(info.is_dir == 0);
    REQUIRE(ckpt_storage_stat(storage, sub.c_str(), &info) == CKPT_OK);
    CHECK(info.is_dir == 1);
    CHECK(info.size == 0);
    REQUIRE(ckpt_storage_stat(storage, (root + "/nothing").c_str(), &info) == CKPT_ENOTFOUND);
    CHECK_THAT(ckpt_error_message(), Catch::Contains(root + "/nothing") && Catch::Contains("no such file"));

    CHECK(listing(storage, root) == std::vector<std::string>{"a.bin", "sub/"});
    CHECK(listing(storage, sub) == std::vector<std::string>{"b.bin"});
    CHECK(read_all(storage, a) == "hello");
    CHECK(read_all(storage, b) == std::string(70000, 'x'));

    ckpt_file* f = nullptr;
    CHECK(ckpt_file_open(&f, storage, (root + "/gone").c_str(), nullptr) == CKPT_ENOTFOUND);
    CHECK(f == nullptr);
    CHECK_THAT(ckpt_error_message(), Catch::Contains(root + "/gone"));

    CHECK(ckpt_storage_remove(storage, sub.c_str(), 0) == CKPT_EEXIST);
    CHECK_THAT(ckpt_error_message(), Catch::Contains(sub) && Catch::Contains("not empty"));
    CHECK(ckpt_storage_remove(storage, sub.c_str(), 4) == CKPT_EINVAL);
    REQUIRE(ckpt_storage_remove(storage, sub.c_str(), CKPT_STORAGE_REMOVE_RECURSIVE) == CKPT_OK);
    CHECK(ckpt_storage_stat(storage, b.c_str(), &info) == CKPT_ENOTFOUND);
    REQUIRE(ckpt_storage_remove(storage, a.c_str(), 0) == CKPT_OK);
    CHECK(ckpt_storage_remove(storage, a.c_str(), 0) == CKPT_ENOTFOUND);
    CHECK(listing(storage, root).empty());
}

// A storage of files in a map, through callbacks; `with_stat` adds the version-5 stat callback, which reports
// every file as modified at kModified.
constexpr int64_t kModified = 1234567890123456789;
struct MapStorage {
    std::map<std::string, std::string> files;
    bool stat_fails = false;

    static MapStorage& of(void* p) { return *static_cast<MapStorage*>(p); }
    ckpt_storage* make(bool with_stat) {
        ckpt_storage_ops ops;
        std::memset(&ops, 0, sizeof ops);
        ops.version = with_stat ? 5 : 4;
        ops.payload = this;
        ops.make_dirs = [](void*, const char*) { return CKPT_OK; };
        ops.create = [](void*, const char* path, void** file) {
            *file = new std::pair<std::string, std::string>(path, "");
            return CKPT_OK;
        };
        ops.write = [](void*, void* file, const void* data, size_t n) {
            static_cast<std::pair<std::string, std::string>*>(file)->second.append(static_cast<const char*>(data), n);
            return CKPT_OK;
        };
        ops.sync = [](void*, void*) { return CKPT_OK; };
        ops.close = [](void* p, void* file) {
            auto* f = static_cast<std::pair<std::string, std::string>*>(file);
            of(p).files[f->first] = f->second;
            delete f;
            return CKPT_OK;
        };
        ops.rename = [](void* p, const char* from, const char* to) {
            auto& files = of(p).files;
            if (!files.count(from)) return CKPT_ENOTFOUND;
            files[to] = files[from];
            files.erase(from);
            return CKPT_OK;
        };
        ops.remove = [](void* p, const char* path) { return of(p).files.erase(path) ? CKPT_OK : CKPT_ENOTFOUND; };
        ops.list = [](void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
            return of(p).names(dir, false, entry, ctx);
        };
        ops.list_dirs = [](void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
            return of(p).names(dir, true, entry, ctx);
        };
        ops.open_read = [](void* p, const char* path, void** file, uint64_t* size) {
            auto it = of(p).files.find(path);
            if (it == of(p).files.end()) return CKPT_ENOTFOUND;
            *file = new std::string(it->second);
            *size = it->second.size();
            return CKPT_OK;
        };
        ops.read_at = [](void*, void* file, uint64_t offset, void* dst, size_t n, size_t* got) {
            const std::string& s = *static_cast<std::string*>(file);
            *got = offset >= s.size() ? 0 : std::min<size_t>(n, s.size() - offset);
            if (*got > 0) std::memcpy(dst, s.data() + offset, *got);
            return CKPT_OK;
        };
        ops.close_read = [](void*, void* file) { delete static_cast<std::string*>(file); };
        if (with_stat)
            ops.stat = [](void* p, const char* path, ckpt_file_info* info) {
                if (of(p).stat_fails) {
                    ckpt_error_set_message("the medium is offline");
                    return CKPT_EIO;
                }
                auto it = of(p).files.find(path);
                if (it != of(p).files.end()) {
                    *info = ckpt_file_info{it->second.size(), kModified, 0, 0};
                    return CKPT_OK;
                }
                const std::string prefix = std::string(path) + "/";
                for (const auto& f : of(p).files)
                    if (f.first.compare(0, prefix.size(), prefix) == 0) {
                        *info = ckpt_file_info{0, CKPT_TIME_UNKNOWN, 1, 0};
                        return CKPT_OK;
                    }
                return CKPT_ENOTFOUND;
            };
        ckpt_storage* s = nullptr;
        REQUIRE(ckpt_storage_new(&s, &ops) == CKPT_OK);
        return s;
    }
    // The files (dirs false) or the subdirectories (dirs true) directly in dir: directories are prefixes here.
    int names(const std::string& dir, bool dirs, ckpt_list_entry_fn entry, void* ctx) const {
        std::vector<std::string> out;
        const std::string prefix = dir.empty() || dir == "." ? "" : dir + "/";
        for (const auto& f : files) {
            if (f.first.compare(0, prefix.size(), prefix) != 0) continue;
            const std::string rest = f.first.substr(prefix.size());
            const size_t slash = rest.find('/');
            if (dirs != (slash != std::string::npos)) continue;
            const std::string name = rest.substr(0, slash);
            if (out.empty() || out.back() != name) out.push_back(name);
        }
        for (const std::string& n : out)
            if (int rc = entry(n.c_str(), ctx)) return rc;
        return CKPT_OK;
    }
};

}  // namespace

TEST_CASE("files of the local filesystem: stat with the file's own time, list, read, remove") {
    TempDir dir;
    REQUIRE(ckpt_storage_make_dirs(nullptr, dir.file("sub/deeper").c_str()) == CKPT_OK);
    REQUIRE(ckpt_storage_remove(nullptr, dir.file("sub/deeper").c_str(), 0) == CKPT_OK);  // an empty directory
    check_files(nullptr, dir.path());

    // stat reports the file system's modification time, to the nanosecond.
    const std::string f = dir.file("old.bin");
    std::ofstream(f) << "x";
    const struct timespec times[2] = {{1000000000, 5}, {1500000000, 123456789}};
    REQUIRE(::utimensat(AT_FDCWD, f.c_str(), times, 0) == 0);
    ckpt_file_info info;
    REQUIRE(ckpt_storage_stat(nullptr, f.c_str(), &info) == CKPT_OK);
    CHECK(info.modified_ns == 1500000000123456789);
    CHECK(listing(nullptr, dir.path()) == std::vector<std::string>{"old.bin"});
    CHECK(ckpt_storage_list(
              nullptr, dir.file("missing").c_str(), [](const char*, void*) { return 0; }, nullptr) == CKPT_ENOTFOUND);

    // A file in the way of a directory.
    CHECK(ckpt_storage_make_dirs(nullptr, dir.file("old.bin/x").c_str()) != CKPT_OK);
    CHECK_THAT(ckpt_error_message(), Catch::Contains("old.bin"));

    // A directory is not a file to read.
    ckpt_file* file = nullptr;
    CHECK(ckpt_file_open(&file, nullptr, dir.path().c_str(), nullptr) != CKPT_OK);
    CHECK(file == nullptr);

    // A file written, not cloned, shares nothing (where the filesystem can tell: tmpfs has no FIEMAP); XFS and
    // btrfs, where incremental saves share, are in test_chunks and the tool's tests.
    uint64_t shared = 1;
    const int rc = ckpt_storage_shared_bytes(nullptr, f.c_str(), &shared);
    CHECK((rc == CKPT_OK || rc == CKPT_EUNSUPPORTED));
    if (rc == CKPT_OK) CHECK(shared == 0);
    CHECK(ckpt_storage_shared_bytes(nullptr, dir.file("missing.npz").c_str(), &shared) == CKPT_ENOTFOUND);
    CHECK_THAT(ckpt_error_message(), Catch::Contains("missing.npz"));
}

TEST_CASE("files of the memory storage: stat says when a file was saved") {
    StorageHandle memory;
    REQUIRE(ckpt_storage_new_memory(&memory.s) == CKPT_OK);
    struct timeval before;
    ::gettimeofday(&before, nullptr);
    // Its directories must be made before files go in.
    REQUIRE(ckpt_storage_make_dirs(memory.s, "run/sub") == CKPT_OK);
    REQUIRE(ckpt_storage_make_dirs(memory.s, "run/sub") == CKPT_OK);  // there already
    check_files(memory.s, "run");
    put(memory.s, "run/c.bin", "c");  // run is still there: only run/sub went
    ckpt_file_info info;
    REQUIRE(ckpt_storage_stat(memory.s, "run/c.bin", &info) == CKPT_OK);
    CHECK(info.modified_ns >= static_cast<int64_t>(before.tv_sec) * 1000000000);
    uint64_t shared = 0;
    CHECK(ckpt_storage_shared_bytes(memory.s, "run/c.bin", &shared) == CKPT_EUNSUPPORTED);
    CHECK_THAT(ckpt_error_message(), Catch::Contains("run/c.bin") && Catch::Contains("cannot tell"));
}

TEST_CASE("files of a callback storage, with and without a stat callback") {
    MapStorage map;
    SECTION("version 4: no stat callback, ckpt opens the file and lists the parent") {
        StorageHandle s;
        s.s = map.make(false);
        check_files(s.s, "run");
        put(s.s, "run/c.bin", "abc");
        ckpt_file_info info;
        REQUIRE(ckpt_storage_stat(s.s, "run/c.bin", &info) == CKPT_OK);
        CHECK(info.size == 3);
        CHECK(info.modified_ns == CKPT_TIME_UNKNOWN);
    }
    SECTION("version 5: the stat callback answers") {
        StorageHandle s;
        s.s = map.make(true);
        check_files(s.s, "run");
        put(s.s, "run/c.bin", "abc");
        ckpt_file_info info;
        REQUIRE(ckpt_storage_stat(s.s, "run/c.bin", &info) == CKPT_OK);
        CHECK(info.modified_ns == kModified);
        map.stat_fails = true;
        CHECK(ckpt_storage_stat(s.s, "run/c.bin", &info) == CKPT_EIO);
        CHECK_THAT(ckpt_error_message(), Catch::Contains("run/c.bin") && Catch::Contains("'stat'") &&
                                             Catch::Contains("the medium is offline"));
    }
}

TEST_CASE("files of a storage: NULL arguments are refused") {
    ckpt_file_info info;
    CHECK(ckpt_storage_stat(nullptr, nullptr, &info) == CKPT_EINVAL);
    CHECK(ckpt_storage_stat(nullptr, ".", nullptr) == CKPT_EINVAL);
    CHECK(ckpt_storage_list(
              nullptr, nullptr, [](const char*, void*) { return 0; }, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_storage_list(nullptr, ".", nullptr, nullptr) == CKPT_EINVAL);
    CHECK(ckpt_storage_remove(nullptr, nullptr, 0) == CKPT_EINVAL);
    CHECK(ckpt_storage_make_dirs(nullptr, nullptr) == CKPT_EINVAL);
    uint64_t shared = 0;
    CHECK(ckpt_storage_shared_bytes(nullptr, nullptr, &shared) == CKPT_EINVAL);
    CHECK(ckpt_storage_shared_bytes(nullptr, ".", nullptr) == CKPT_EINVAL);
    CHECK(ckpt_file_open(nullptr, nullptr, "x", nullptr) == CKPT_EINVAL);
    size_t got = 1;
    CHECK(ckpt_file_read(nullptr, 0, nullptr, 0, &got) == CKPT_EINVAL);
    CHECK(got == 0);
    ckpt_file_close(nullptr);
}

TEST_CASE("ckpt_storage_list stops when the callback says so, with its code") {
    TempDir dir;
    std::ofstream(dir.file("a")) << "a";
    std::ofstream(dir.file("b")) << "b";
    int calls = 0;
    CHECK(ckpt_storage_list(
              nullptr, dir.path().c_str(),
              [](const char*, void* ctx) {
                  ++*static_cast<int*>(ctx);
                  return 42;
              },
              &calls) == 42);
    CHECK(calls == 1);
}
