// SPDX-License-Identifier: Apache-2.0
// Storage: the POSIX and in-memory implementations, the atomic save sequence, and what a save or a restore
// does when the storage fails (FaultyStorage: every operation × every fault, transient and persistent) or
// the power goes (CrashStorage: a crash at every operation, then what the disk would hold).
#include "core/error.hpp"
#include "storage/memory_storage.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"
#include "support/files.hpp"
#include "support/in_child.hpp"
#include "support/crash_storage.hpp"
#include "support/faulty_storage.hpp"
#include "support/private_tmpfs.hpp"
#include "core/var_collection.hpp"
#include "support/stored.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using ckpt::testing::read_file;
using ckpt::testing::write_file;
using namespace ckpt::core;
using ckpt::testing::Crash;
using ckpt::testing::CrashStorage;
using ckpt::testing::Fault;
using ckpt::testing::FaultyStorage;
using ckpt::testing::Persistence;
using ckpt::testing::in_child;
using Catch::Matchers::Contains;

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Test data

uint64_t next_random(uint64_t& state) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

Array random_array(DType dtype, size_t itemsize, std::vector<int64_t> shape, uint64_t seed) {
    Array a = Array::allocate(dtype, itemsize, std::move(shape), true);
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    auto* p = static_cast<unsigned char*>(a.data());
    if (dtype == DType::unicode) {
        auto* units = static_cast<char32_t*>(a.data());
        for (size_t i = 0; i < a.nbytes() / 4; ++i) units[i] = U'a' + static_cast<char32_t>(next_random(state) % 26);
    } else {
        for (size_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<unsigned char>(next_random(state));
    }
    return a;
}

// A representative checkpoint: a 0-d step, an empty array, two small weights, strings, and one array just
// over the zip writer's 1 MiB buffer so that a save is several writes, not one.
VarCollection sample_vars(uint64_t seed, size_t big_bytes = (size_t{1} << 20) + 1000) {
    VarCollection v;
    v.add("step", random_array(DType::int64, 8, {}, seed));
    v.add("empty", random_array(DType::float32, 4, {0, 3}, seed + 1));
    v.add("dense/w", random_array(DType::float32, 4, {17, 31}, seed + 2));
    v.add("dense/b", random_array(DType::float64, 8, {31}, seed + 3));
    v.add("labels", random_array(DType::unicode, 20, {3}, seed + 4));
    v.add("embedding", random_array(DType::uint8, 1, {static_cast<int64_t>(big_bytes)}, seed + 5));
    return v;
}

// One variable as read back: everything that must survive a round trip, bit for bit.
struct Var {
    std::string name;
    DType dtype;
    size_t itemsize;
    std::vector<int64_t> shape;
    std::string bytes;
    bool operator==(const Var& o) const {
        return name == o.name && dtype == o.dtype && itemsize == o.itemsize && shape == o.shape && bytes == o.bytes;
    }
};
using Snapshot = std::vector<Var>;

Snapshot snapshot_of(const VarCollection& vars) {
    Snapshot s;
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        s.push_back(Var{vars.name(i), a.dtype(), a.itemsize(), a.shape(),
                        std::string(static_cast<const char*>(a.data()), a.nbytes())});
    }
    return s;
}

Snapshot read_back(Storage& storage, const std::string& path) {
    NpzReader r = NpzReader::open(storage, path, {});
    Snapshot s;
    for (size_t i = 0; i < r.size(); ++i) {
        const Array a = r.read(i);
        s.push_back(Var{r.entry(i).name, a.dtype(), a.itemsize(), a.shape(),
                        std::string(static_cast<const char*>(a.data()), a.nbytes())});
    }
    return s;
}

struct Config {
    const char* name;
    Layout layout;
    bool deflate;
    NpzWriteOptions options() const {
        NpzWriteOptions o;
        o.layout = layout;
        o.deflate = deflate;
        o.level = 1;  // fast: the matrix saves hundreds of times
        return o;
    }
};

const std::vector<Config>& configs() {
    static const std::vector<Config> all = {{"plain, stored", Layout::plain, false},
                                            {"plain, deflate", Layout::plain, true},
                                            {"objax, stored", Layout::objax, false},
                                            {"objax, deflate", Layout::objax, true}};
    return all;
}

// The bytes save_npz produces (deterministic: timestamps are fixed).
std::string encode(const VarCollection& vars, const Config& c) {
    MemoryStorage m;
    save_npz(m, "x.npz", vars, c.options());
    return ckpt::testing::stored(m, "x.npz");
}

std::vector<std::string> temps_in(Storage& storage, const std::string& dir) {
    std::vector<std::string> temps;
    for (const std::string& name : storage.list(dir))
        if (is_temp_name(name)) temps.push_back(name);
    return temps;
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------------------------
// The local filesystem

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/ckpt-test-storage-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::set<std::string> names_on_disk(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}


}  // namespace

// ===============================================================================================================
// Temporary names

TEST_CASE("temp_name_for makes hidden names that is_temp_name recognises and that never end in .npz") {
    const std::string t = temp_name_for("00000042.npz");
    CHECK(t.rfind(".00000042.npz.tmp-", 0) == 0);
    CHECK(t.size() == std::string(".00000042.npz.tmp-").size() + 6);
    CHECK(is_temp_name(t));
    CHECK_FALSE(contains(t.substr(t.size() - 4), ".npz"));
    CHECK(temp_name_for("a.npz") != temp_name_for("a.npz"));
}

TEST_CASE("is_temp_name rejects checkpoint names and near misses") {
    CHECK_FALSE(is_temp_name("00000042.npz"));
    CHECK_FALSE(is_temp_name(".00000042.npz"));
    CHECK_FALSE(is_temp_name(".a.npz.tmp-abc"));      // too few random characters
    CHECK_FALSE(is_temp_name(".a.npz.tmp-abc!23"));   // not from the alphabet
    CHECK_FALSE(is_temp_name("a.npz.tmp-abc123"));    // not hidden
    CHECK(is_temp_name(".a.npz.tmp-aZ0bY1"));
}

TEST_CASE("temp_name_for signs its names so that other programs' files of the same form are not taken for ckpt's") {
    for (const char* name : {"progress.txt", "a.npz", "0000000042.npz", "x"}) {
        const std::string t = temp_name_for(name);
        CHECK(is_signed_temp_name(t));
        CHECK(temp_target(t) == name);
        CHECK(is_ckpt_temp_name(t, false));
    }
    CHECK_FALSE(is_signed_temp_name(".notes.tmp-abcdef"));
    CHECK_FALSE(is_ckpt_temp_name(".notes.tmp-abcdef", false));
    CHECK(is_ckpt_temp_name(".a.npz.tmp-abcdef", true));  // an .npz's, as ckpt before 0.8 named them
    // Another name's signature does not carry over.
    const std::string t = temp_name_for("progress.txt");
    CHECK_FALSE(is_signed_temp_name(".progress.tx_" + t.substr(std::string(".progress.txt").size())));
}

// ===============================================================================================================
// PosixStorage

TEST_CASE("PosixStorage tells a live save's temporary from one whose writer is gone") {
    TempDir dir;
    auto storage = posix_storage();
    REQUIRE(storage->knows_temp_owners());
    std::string temp;
    auto file = storage->create_temp(dir / "progress.txt", &temp);
    CHECK(storage->temp_in_use(temp) == std::optional<bool>(true));
    file->write("abc", 3);
    file->close();
    CHECK(storage->temp_in_use(temp) == std::optional<bool>(true));  // closed but not yet renamed: still held
    file.reset();
    CHECK(storage->temp_in_use(temp) == std::optional<bool>(false));  // its writer is gone
    CHECK(storage->temp_in_use(dir / ".gone.tmp-abcdef") == std::optional<bool>(false));

    // The next save of the name removes the stale one, and keeps a live one's.
    std::string live_temp;
    auto live = storage->create_temp(dir / "progress.txt", &live_temp);
    write_atomically(*storage, dir / "progress.txt", [](OutputFile& f) { f.write("new", 3); });
    struct stat st;
    CHECK(::stat(temp.c_str(), &st) != 0);
    CHECK(::stat(live_temp.c_str(), &st) == 0);
    live.reset();
    CHECK(remove_stale_temporaries_of(*storage, dir / "progress.txt") == 1);
    CHECK(::stat(live_temp.c_str(), &st) != 0);
}

TEST_CASE("PosixStorage creates temporaries beside the target with distinct temp names") {
    TempDir dir;
    auto storage = posix_storage();
    std::string t1, t2;
    auto f1 = storage->create_temp(dir / "model.npz", &t1);
    auto f2 = storage->create_temp(dir / "model.npz", &t2);
    CHECK(t1 != t2);
    for (const std::string& t : {t1, t2}) {
        CHECK(parent_dir(t) == dir.path);
        CHECK(is_temp_name(base_name(t)));
        CHECK(base_name(t).rfind(".model.npz.tmp-", 0) == 0);
        CHECK_FALSE(contains(base_name(t).substr(base_name(t).size() - 4), ".npz"));
        struct stat st;
        REQUIRE(::stat(t.c_str(), &st) == 0);
        CHECK(S_ISREG(st.st_mode));
        CHECK(st.st_size == 0);
    }
    f1->write("abc", 3);
    f1->sync();
    f1->close();
    CHECK(read_file(t1) == "abc");
}

namespace ckpt::core {
size_t posix_pending_releases();  // posix_storage.cpp: releases of removed files' blocks still under way
}

TEST_CASE("PosixStorage: a large file saved over or removed leaves its name at once, and its space is free by free_bytes") {
    // Where the blocks are freed on a thread of their own (ext4, XFS, btrfs: see DeferredRelease), none of it shows.
    TempDir dir;
    auto storage = posix_storage();
    const std::string path = dir / "big.npz";
    const std::string old_bytes(24u << 20, 'a'), new_bytes(24u << 20, 'b');
    const auto save = [&](const std::string& bytes) {
        write_atomically(*storage, path, [&](OutputFile& out) { out.write(bytes.data(), bytes.size()); });
    };
    save(old_bytes);
    auto reader = storage->open_read(path);  // opened before the file is replaced: still reads the old bytes
    save(new_bytes);
    CHECK(read_file(path) == new_bytes);
    std::string got(8, '\0');
    REQUIRE(reader->read_at(old_bytes.size() - 8, &got[0], 8) == 8);
    CHECK(got == old_bytes.substr(0, 8));
    reader.reset();

    storage->remove(path);
    CHECK_FALSE(fs::exists(path));
    CHECK(storage->list(dir.path).empty());
    CHECK_THROWS_AS(storage->remove(path), Error);  // gone, not_found as before
    CHECK(storage->free_bytes(dir.path).has_value());
    CHECK(posix_pending_releases() == 0);  // free_bytes waited for every release: the space counts as free
}

TEST_CASE("PosixStorage::create_temp in a missing directory throws not_found") {
    TempDir dir;
    std::string temp;
    try {
        posix_storage()->create_temp(dir / "missing/model.npz", &temp);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
        CHECK_THAT(e.what(), Contains("missing"));
    }
}

TEST_CASE("PosixStorage::open_read refuses a symbolic link, even to a valid checkpoint") {
    TempDir dir;
    write_file(dir / "real.npz", encode(sample_vars(1, 10), configs()[0]));
    REQUIRE(::symlink((dir / "real.npz").c_str(), (dir / "link.npz").c_str()) == 0);
    try {
        posix_storage()->open_read(dir / "link.npz");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
        CHECK_THAT(e.what(), Contains("symbolic link"));
        CHECK_THAT(e.what(), Contains(dir / "link.npz"));
    }
    CHECK(posix_storage()->open_read(dir / "real.npz")->size() > 0);
}

TEST_CASE("PosixStorage::open_read refuses a dangling symbolic link as a link, not as missing") {
    TempDir dir;
    REQUIRE(::symlink((dir / "nowhere.npz").c_str(), (dir / "link.npz").c_str()) == 0);
    try {
        posix_storage()->open_read(dir / "link.npz");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
        CHECK_THAT(e.what(), Contains("symbolic link"));
    }
}

TEST_CASE("PosixStorage::open_read refuses a directory") {
    TempDir dir;
    fs::create_directory(dir / "sub.npz");
    try {
        posix_storage()->open_read(dir / "sub.npz");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
        CHECK_THAT(e.what(), Contains("not a regular file"));
    }
}

TEST_CASE("PosixStorage::open_read refuses a FIFO without blocking") {
    TempDir dir;
    REQUIRE(::mkfifo((dir / "fifo.npz").c_str(), 0600) == 0);
    const std::string path = dir / "fifo.npz";
    // A blocking open would wait forever for a writer: the child gets 2 s.
    const std::string result = in_child([&]() -> std::string {
        ::alarm(2);
        try {
            posix_storage()->open_read(path);
            return "FAIL: opened a FIFO";
        } catch (const Error& e) {
            if (e.code() != Code::invalid) return fmt::format("FAIL: code {} ({})", static_cast<int>(e.code()), e.what());
            return std::string("OK: ") + e.what();
        }
    });
    INFO(result);
    CHECK(result.rfind("OK", 0) == 0);
}

TEST_CASE("PosixStorage::open_read of a missing file throws not_found naming it") {
    TempDir dir;
    try {
        posix_storage()->open_read(dir / "none.npz");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
        CHECK_THAT(e.what(), Contains(dir / "none.npz"));
    }
}

TEST_CASE("PosixStorage reads what it wrote, at any offset") {
    TempDir dir;
    write_file(dir / "f", "0123456789");
    auto in = posix_storage()->open_read(dir / "f");
    REQUIRE(in->size() == 10);
    char buf[8] = {};
    CHECK(in->read_at(3, buf, 4) == 4);
    CHECK(std::string(buf, 4) == "3456");
    CHECK(in->read_at(8, buf, 8) == 2);  // short only at the end
    CHECK(std::string(buf, 2) == "89");
    CHECK(in->read_at(10, buf, 8) == 0);
    CHECK(in->read_at(1000, buf, 8) == 0);
}

TEST_CASE("PosixStorage's uncached reads return what plain reads do, where the file system has them and not") {
    std::string content(3 * 4096 + 100, '\0');
    for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 + i / 251);
    std::vector<std::string> dirs = {"/tmp"};  // ext4 or whatever /tmp is: RWF_DONTCACHE on Linux 6.14 and later
    if (::access("/dev/shm", W_OK) == 0) dirs.push_back("/dev/shm");  // tmpfs: EOPNOTSUPP, then plain reads
    for (const std::string& where : dirs) {
        INFO(where);
        char tmpl[64];
        std::snprintf(tmpl, sizeof tmpl, "%s/ckpt-test-uncached-XXXXXX", where.c_str());
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        const std::string path = std::string(tmpl) + "/f";
        write_file(path, content);
        auto in = posix_storage()->open_read(path);
        for (const size_t at : {size_t{0}, size_t{4000}, size_t{8192}, content.size() - 50}) {
            INFO("offset " << at);
            std::string got(300, '\0');
            const size_t n = in->read_uncached_at(at, &got[0], got.size());
            CHECK(n == std::min<size_t>(300, content.size() - at));  // short only at the end
            CHECK(got.substr(0, n) == content.substr(at, n));
            CHECK(in->read_at(at, &got[0], got.size()) == n);  // and the plain read still works after it
            CHECK(got.substr(0, n) == content.substr(at, n));
        }
        std::error_code ec;
        fs::remove_all(tmpl, ec);
    }
}

TEST_CASE("PosixStorage::list names the files of a directory, leaving out subdirectories, . and ..") {
    TempDir dir;
    write_file(dir / "a.npz", "a");
    write_file(dir / ".hidden", "h");
    fs::create_directory(dir / "sub");
    fs::create_directory(dir / "0000000099.npz");  // a directory with a checkpoint's name is not a checkpoint
    auto names = posix_storage()->list(dir.path);
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{".hidden", "a.npz"});
    CHECK(posix_storage()->list(dir / "sub").empty());
}

TEST_CASE("PosixStorage::list of a missing directory throws not_found; of a file, io") {
    TempDir dir;
    write_file(dir / "file", "x");
    try {
        posix_storage()->list(dir / "missing");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
    }
    try {
        posix_storage()->list(dir / "file");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::io);
        CHECK_THAT(e.what(), Contains("Not a directory"));
    }
}

TEST_CASE("PosixStorage::remove deletes a file; a missing one is not_found") {
    TempDir dir;
    write_file(dir / "a.npz", "a");
    posix_storage()->remove(dir / "a.npz");
    CHECK_FALSE(fs::exists(dir / "a.npz"));
    try {
        posix_storage()->remove(dir / "a.npz");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
        CHECK_THAT(e.what(), Contains(dir / "a.npz"));
    }
}

TEST_CASE("PosixStorage::make_dirs creates nested directories and accepts existing ones") {
    TempDir dir;
    auto storage = posix_storage();
    storage->make_dirs(dir / "a/b/c");
    CHECK(fs::is_directory(dir / "a/b/c"));
    storage->make_dirs(dir / "a/b/c");
    storage->make_dirs(dir / "a/b/d/");
    CHECK(fs::is_directory(dir / "a/b/d"));
    storage->make_dirs(dir.path);
}

TEST_CASE("PosixStorage::make_dirs through or onto a file throws io") {
    TempDir dir;
    write_file(dir / "file", "x");
    for (const std::string& target : {dir / "file", dir / "file/sub"}) {
        INFO(target);
        try {
            posix_storage()->make_dirs(target);
            FAIL("no error");
        } catch (const Error& e) {
            CHECK(e.code() == Code::io);
            CHECK_THAT(e.what(), Contains(dir / "file"));
        }
    }
}

TEST_CASE("PosixStorage::rename replaces the target") {
    TempDir dir;
    write_file(dir / "a", "new");
    write_file(dir / "b", "old");
    posix_storage()->rename(dir / "a", dir / "b");
    CHECK(read_file(dir / "b") == "new");
    CHECK_FALSE(fs::exists(dir / "a"));
    posix_storage()->sync_dir(dir.path);
}

TEST_CASE("PosixStorage::sync_dir of a missing directory throws io naming it") {
    TempDir dir;
    try {
        posix_storage()->sync_dir(dir / "missing");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::io);
        CHECK_THAT(e.what(), Contains(dir / "missing"));
    }
}

TEST_CASE("PosixStorage::open_append appends to an existing file and creates a missing one") {
    TempDir dir;
    write_file(dir / "log", "a");
    for (const char* s : {"b", "c"}) {
        auto f = posix_storage()->open_append(dir / "log");
        f->write(s, 1);
        f->sync();
        f->close();
    }
    CHECK(read_file(dir / "log") == "abc");
    auto f = posix_storage()->open_append(dir / "new");
    f->close();
    CHECK(fs::exists(dir / "new"));
}

// ===============================================================================================================
// write_atomically on the local filesystem

TEST_CASE("write_atomically replaces the target and leaves no temporary") {
    TempDir dir;
    write_file(dir / "model.npz", "old");
    write_atomically(*posix_storage(), dir / "model.npz", [](OutputFile& out) { out.write("new", 3); });
    CHECK(read_file(dir / "model.npz") == "new");
    CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
}

TEST_CASE("write_atomically creates a missing target") {
    TempDir dir;
    write_atomically(*posix_storage(), dir / "model.npz", [](OutputFile& out) { out.write("new", 3); });
    CHECK(read_file(dir / "model.npz") == "new");
    CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
}

TEST_CASE("write_atomically keeps the old target and removes the temporary when the body throws") {
    TempDir dir;
    write_file(dir / "model.npz", "old");
    SECTION("a std exception passes through unchanged") {
        CHECK_THROWS_MATCHES(write_atomically(*posix_storage(), dir / "model.npz",
                                              [](OutputFile& out) {
                                                  out.write("partial", 7);
                                                  throw std::runtime_error("body failed");
                                              }),
                             std::runtime_error, Catch::Matchers::Message("body failed"));
    }
    SECTION("a ckpt::core::Error keeps its code") {
        try {
            write_atomically(*posix_storage(), dir / "model.npz", [](OutputFile& out) {
                out.write("partial", 7);
                fail(Code::no_memory, "out of memory");
            });
            FAIL("no error");
        } catch (const Error& e) {
            CHECK(e.code() == Code::no_memory);
        }
    }
    CHECK(read_file(dir / "model.npz") == "old");
    CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
}

TEST_CASE("write_atomically onto a directory fails with io and leaves no temporary") {
    TempDir dir;
    fs::create_directory(dir / "model.npz");
    try {
        write_atomically(*posix_storage(), dir / "model.npz", [](OutputFile& out) { out.write("new", 3); });
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::io);
        CHECK_THAT(e.what(), Contains(dir / "model.npz"));
    }
    CHECK(fs::is_directory(dir / "model.npz"));
    CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
}

TEST_CASE("write_atomically into a missing directory throws not_found") {
    TempDir dir;
    try {
        write_atomically(*posix_storage(), dir / "missing/model.npz", [](OutputFile&) {});
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
    }
    CHECK(names_on_disk(dir.path).empty());
}

TEST_CASE("write_atomically refuses a path without a file name") {
    TempDir dir;
    bool called = false;
    try {
        write_atomically(*posix_storage(), dir.path + "/", [&](OutputFile&) { called = true; });
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
    }
    CHECK_FALSE(called);
    CHECK(names_on_disk(dir.path).empty());
}

TEST_CASE("save_npz to the local filesystem reads back bit-exactly in every layout and compression") {
    TempDir dir;
    const VarCollection vars = sample_vars(7, 4096);
    for (const Config& c : configs()) {
        INFO(c.name);
        save_npz(*posix_storage(), dir / "model.npz", vars, c.options());
        CHECK(read_file(dir / "model.npz") == encode(vars, c));
        CHECK(read_back(*posix_storage(), dir / "model.npz") == snapshot_of(vars));
        CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
    }
}

namespace {
// An OutputFile into a string that may or may not let the writer patch what it wrote.
class StringOutput final : public OutputFile {
public:
    explicit StringOutput(bool patchable) : patchable_(patchable) {}
    void write(const void* data, size_t n) override { bytes.append(static_cast<const char*>(data), n); }
    bool can_patch() const override { return patchable_; }
    void patch(uint64_t offset, const void* data, size_t n) override {
        if (!patchable_ || offset + n > bytes.size()) throw std::logic_error("StringOutput: a patch it cannot take");
        bytes.replace(offset, n, static_cast<const char*>(data), n);
        ++patches;
    }
    void sync() override {}
    void close() override {}
    std::string bytes;
    size_t patches = 0;

private:
    bool patchable_;
};

std::string written(const VarCollection& vars, bool patchable, size_t* patches = nullptr) {
    StringOutput out(patchable);
    write_npz(out, vars, NpzWriteOptions{});
    if (patches) *patches = out.patches;
    return out.bytes;
}
}  // namespace

TEST_CASE("a stored member's CRC-32 patched in after its data gives the bytes of one computed before it") {
    // Small members: their local headers are still in the writer's buffer when the CRC is known.
    const VarCollection small = sample_vars(3, 4096);
    size_t patches = 0;
    CHECK(written(small, true, &patches) == written(small, false));
    CHECK(patches == 0);
    // A member larger than the buffer: its header was written out, so the output is patched.
    const VarCollection larger = sample_vars(4);
    CHECK(written(larger, true, &patches) == written(larger, false));
    CHECK(patches >= 1);
    // One large array, its CRC computed on another thread while it is written; and into a real file.
    VarCollection one;
    one.add("w", random_array(DType::float32, 4, {int64_t{6} << 20}, 5));
    const std::string expected = written(one, false);
    CHECK(written(one, true) == expected);
    TempDir dir;
    save_npz(*posix_storage(), dir / "one.npz", one, NpzWriteOptions{});
    CHECK(read_file(dir / "one.npz") == expected);
    CHECK(read_back(*posix_storage(), dir / "one.npz") == snapshot_of(one));
}

TEST_CASE("a stored source is read once where the output can be patched, twice where it cannot") {
    const Array data = random_array(DType::uint8, 1, {int64_t{9} << 20}, 6);
    for (const bool patchable : {true, false}) {
        INFO((patchable ? "patchable" : "streaming") << " output");
        uint64_t read = 0;
        auto source = std::make_shared<const ByteSource>([&](uint64_t offset, void* dst, size_t n) {
            std::memcpy(dst, static_cast<const char*>(data.data()) + offset, n);
            read += n;
        });
        VarCollection from_source, in_memory;
        from_source.add("w", Array::from_source(DType::uint8, 1, data.shape(), source));
        in_memory.add("w", random_array(DType::uint8, 1, {int64_t{9} << 20}, 6));
        CHECK(written(from_source, patchable) == written(in_memory, false));
        CHECK(read == (patchable ? 1 : 2) * data.nbytes());
    }
}

// ===============================================================================================================
// MemoryStorage

TEST_CASE("MemoryStorage round-trips a file through create_temp and rename") {
    MemoryStorage m;
    m.make_dirs("run/a");
    std::string temp;
    auto out = m.create_temp("run/a/model.npz", &temp);
    CHECK(parent_dir(temp) == "run/a");
    CHECK(is_temp_name(base_name(temp)));
    out->write("hello", 5);
    out->sync();
    out->close();
    m.rename(temp, "run/a/model.npz");
    m.sync_dir("run/a");
    CHECK(ckpt::testing::stored(m, "run/a/model.npz") == "hello");
    CHECK_FALSE(m.exists(temp));
    auto in = m.open_read("run/a/model.npz");
    char buf[8];
    CHECK(in->size() == 5);
    CHECK(in->read_at(1, buf, 8) == 4);
    CHECK(std::string(buf, 4) == "ello");
}

TEST_CASE("MemoryStorage gives distinct temporaries and never a .npz name") {
    MemoryStorage m;
    std::set<std::string> temps;
    for (int i = 0; i < 50; ++i) {
        std::string t;
        m.create_temp("model.npz", &t);
        CHECK(is_temp_name(t));
        temps.insert(t);
    }
    CHECK(temps.size() == 50);
}

TEST_CASE("MemoryStorage needs make_dirs before files can be created in a directory") {
    MemoryStorage m;
    std::string temp;
    CHECK_THROWS_MATCHES(m.create_temp("run/model.npz", &temp), Error,
                         Catch::Matchers::Predicate<Error>([](const Error& e) { return e.code() == Code::not_found; }));
    CHECK_THROWS_AS(m.open_append("run/log"), Error);
    m.make_dirs("run");
    CHECK_NOTHROW(m.create_temp("run/model.npz", &temp));
    CHECK_NOTHROW(m.create_temp("top.npz", &temp));  // "." always exists
}

TEST_CASE("MemoryStorage::make_dirs over a file throws io") {
    MemoryStorage m;
    m.put("f", "x");
    try {
        m.make_dirs("f/sub");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::io);
    }
}

TEST_CASE("MemoryStorage missing files are not_found for remove, open_read, rename and contents") {
    MemoryStorage m;
    const auto not_found = [](const std::function<void()>& f) {
        try {
            f();
            return false;
        } catch (const Error& e) {
            return e.code() == Code::not_found;
        }
    };
    CHECK(not_found([&] { m.remove("nope"); }));
    CHECK(not_found([&] { m.open_read("nope"); }));
    CHECK(not_found([&] { m.rename("nope", "other"); }));
    CHECK(not_found([&] { m.list("nodir"); }));
}

TEST_CASE("MemoryStorage::open_read of a directory is invalid") {
    MemoryStorage m;
    m.make_dirs("run/sub");
    try {
        m.open_read("run/sub");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
    }
}

TEST_CASE("MemoryStorage::list names the files of one directory only, not its subdirectories") {
    MemoryStorage m;
    m.make_dirs("run/sub/deeper");
    m.put("run/a.npz", "a");
    m.put("run/sub/b.npz", "b");
    m.put("top.npz", "t");
    auto names = m.list("run");
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"a.npz"});
    names = m.list(".");
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"top.npz"});
}

TEST_CASE("MemoryStorage::rename replaces the target and refuses a directory") {
    MemoryStorage m;
    m.make_dirs("run/dir");
    m.put("run/a", "new");
    m.put("run/b", "old");
    m.rename("run/a", "run/b");
    CHECK(ckpt::testing::stored(m, "run/b") == "new");
    CHECK_FALSE(m.exists("run/a"));
    m.put("run/c", "c");
    CHECK_THROWS_AS(m.rename("run/c", "run/dir"), Error);
    CHECK(ckpt::testing::stored(m, "run/c") == "c");
}

TEST_CASE("MemoryStorage readers see a snapshot, not later writes") {
    MemoryStorage m;
    auto out = m.open_append("log");
    out->write("ab", 2);
    auto in = m.open_read("log");
    out->write("cd", 2);
    CHECK(in->size() == 2);
    CHECK(ckpt::testing::stored(m, "log") == "abcd");
}

TEST_CASE("write_atomically over MemoryStorage keeps the old target when the body throws") {
    MemoryStorage m;
    m.put("model.npz", "old");
    CHECK_THROWS_AS(write_atomically(m, "model.npz",
                                     [](OutputFile& out) {
                                         out.write("partial", 7);
                                         throw std::runtime_error("body failed");
                                     }),
                    std::runtime_error);
    CHECK(ckpt::testing::stored(m, "model.npz") == "old");
    CHECK(temps_in(m, ".").empty());
}

// ===============================================================================================================
// The test storages test themselves

TEST_CASE("FaultyStorage counts and logs every operation, and fails exactly the one asked for") {
    auto mem = std::make_shared<MemoryStorage>();
    FaultyStorage f(mem);
    write_atomically(f, "model.npz", [](OutputFile& out) { out.write("abc", 3); });
    const auto log = f.log();
    std::vector<std::string> names;
    for (const auto& op : log) names.push_back(op.name);
    CHECK(names == std::vector<std::string>{"create_temp", "write", "sync", "close", "rename", "sync_dir"});
    CHECK(f.faults_injected() == 0);

    FaultyStorage g(mem);
    g.fail_at(2, Fault::short_write, Persistence::transient);
    CHECK_THROWS_WITH(write_atomically(g, "model.npz", [](OutputFile& out) { out.write("abcdef", 6); }),
                      Contains("No space left on device") && Contains("short write, 3 of 6 bytes"));
    CHECK(g.faults_injected() == 1);
    CHECK(g.first_fault()->number == 2);
    CHECK(ckpt::testing::stored(*mem, "model.npz") == "abc");  // the old one
    CHECK(temps_in(*mem, ".").empty());           // the transient fault let the cleanup through
}

TEST_CASE("CrashStorage keeps only synced data under synced directory entries") {
    CrashStorage c;
    c.plant("run/model.npz", "old");
    SECTION("a complete atomic save is durable") {
        write_atomically(c, "run/model.npz", [](OutputFile& out) { out.write("new", 3); });
        CHECK(ckpt::testing::stored(*c.durable_view(), "run/model.npz") == "new");
        CHECK(c.durable_view()->list("run").size() == 1);
    }
    SECTION("a rename without a directory sync is undone") {
        std::string temp;
        auto out = c.create_temp("run/model.npz", &temp);
        out->write("new", 3);
        out->sync();
        out->close();
        c.rename(temp, "run/model.npz");
        CHECK(ckpt::testing::stored(*c.durable_view(), "run/model.npz") == "old");
        CHECK(ckpt::testing::stored(*c.durable_view(CrashStorage::Entries::as_written), "run/model.npz") == "new");
    }
    SECTION("a file renamed into place without a file sync comes back empty") {
        std::string temp;
        auto out = c.create_temp("run/model.npz", &temp);
        out->write("new", 3);
        out->close();
        c.rename(temp, "run/model.npz");
        c.sync_dir("run");
        CHECK(ckpt::testing::stored(*c.durable_view(), "run/model.npz").empty());
        CHECK(ckpt::testing::stored(*c.durable_view(CrashStorage::Entries::as_synced, CrashStorage::Unsynced::torn),
                                    "run/model.npz") == "n");
        CHECK(ckpt::testing::stored(*c.durable_view(CrashStorage::Entries::as_synced, CrashStorage::Unsynced::kept),
                                    "run/model.npz") == "new");
    }
    SECTION("a crash stops every later operation") {
        c.crash_at(2);
        std::string temp;
        auto out = c.create_temp("run/model.npz", &temp);
        CHECK_THROWS_AS(out->write("x", 1), Crash);
        CHECK_THROWS_AS(c.remove(temp), Crash);
        CHECK(c.crashed());
        CHECK(c.durable_view()->list("run") == std::vector<std::string>{"model.npz"});
    }
}

// ===============================================================================================================
// The fault matrix: every operation of a save × every fault × transient and persistent

TEST_CASE("a save that meets an I/O fault at any operation reports it and keeps the old or the new checkpoint") {
    const std::string dir = "ckpt/run";
    const std::string path = dir + "/model.npz";
    const std::string sibling = dir + "/00000001.npz";
    const VarCollection old_vars = sample_vars(1);
    const VarCollection new_vars = sample_vars(2);
    const Snapshot old_snap = snapshot_of(old_vars);
    const Snapshot new_snap = snapshot_of(new_vars);
    const Fault faults[] = {Fault::eio, Fault::enospc, Fault::short_write, Fault::failed_sync};
    const Persistence modes[] = {Persistence::transient, Persistence::persistent};

    size_t cases = 0, errors = 0, kept_old = 0, got_new = 0, temps_left = 0, silent = 0;
    std::vector<std::string> op_counts;
    for (const Config& c : configs()) {
        const std::string old_bytes = encode(old_vars, c);
        const std::string new_bytes = encode(new_vars, c);
        REQUIRE(old_bytes != new_bytes);
        const auto seeded = [&] {
            auto m = std::make_shared<MemoryStorage>();
            m->make_dirs(dir);
            m->put(path, old_bytes);
            m->put(sibling, "an older checkpoint");
            return m;
        };

        FaultyStorage clean(seeded());
        save_npz(clean, path, new_vars, c.options());
        const std::vector<ckpt::testing::Operation> ops = clean.log();
        REQUIRE(clean.base().list(dir).size() == 2);
        const uint64_t n = ops.size();
        size_t writes = 0;
        for (const auto& op : ops) writes += op.name == "write";
        REQUIRE(writes >= 2);  // the fault can hit a write in the middle of the file, not only the only one
        op_counts.push_back(fmt::format("{}: {} ops", c.name, n));

        for (uint64_t k = 1; k <= n; ++k) {
            const std::string& op = ops[k - 1].name;
            for (const Fault fault : faults) {
                // short_write is a write's fault and failed_sync a sync's; elsewhere they would be plain EIO.
                if (fault == Fault::short_write && op != "write") continue;
                if (fault == Fault::failed_sync && op != "sync" && op != "sync_dir") continue;
                for (const Persistence mode : modes) {
                    ++cases;
                    auto mem = seeded();
                    FaultyStorage f(mem);
                    f.fail_at(k, fault, mode);
                    INFO(fmt::format("{}; {} {} at {} of {}", c.name, ckpt::testing::persistence_name(mode),
                                     ckpt::testing::fault_name(fault), ckpt::testing::describe(ops[k - 1]), n));

                    std::optional<Error> error;
                    try {
                        save_npz(f, path, new_vars, c.options());
                    } catch (const Error& e) {
                        error = e;
                    }
                    INFO("operations of the faulted run:\n" << f.log_text());
                    CHECK(f.faults_injected() >= 1);
                    if (!error) {
                        ++silent;
                        FAIL_CHECK("the save reported success although operation #" << k << " failed");
                    } else {
                        ++errors;
                        INFO("error: " << error->what());
                        CHECK(error->code() == Code::io);
                        CHECK(contains(error->what(), path));
                        // The error reported is the first fault, not one from the cleanup after it.
                        CHECK(contains(error->what(), fmt::format("injected at operation #{})", k)));
                        CHECK(contains(error->what(), fault == Fault::enospc || fault == Fault::short_write
                                                          ? "No space left on device"
                                                          : "Input/output error"));
                    }

                    // A failed fsync is never retried on the same data.
                    if (fault == Fault::failed_sync && op == "sync") {
                        for (const auto& o : f.log())
                            if (o.number > k && o.name == "sync") CHECK(o.path != ops[k - 1].path);
                    }

                    // The target is exactly the old checkpoint or exactly the new one: the new one only when
                    // the fault came after the rename (at the directory sync).
                    const std::string target = ckpt::testing::stored(*mem, path);
                    const bool is_old = target == old_bytes;
                    const bool is_new = target == new_bytes;
                    CHECK((is_old || is_new));
                    CHECK(is_new == (op == "sync_dir"));
                    kept_old += is_old;
                    got_new += is_new;
                    const Snapshot back = read_back(*mem, path);
                    CHECK((back == (is_new ? new_snap : old_snap)));
                    CHECK(ckpt::testing::stored(*mem, sibling) == "an older checkpoint");

                    // No temporary remains, unless the fault also stopped its removal (persistent faults).
                    const auto temps = temps_in(*mem, dir);
                    bool remove_faulted = false;
                    for (const auto& o : f.log()) remove_faulted |= o.name == "remove" && o.faulted;
                    CHECK(temps.size() <= 1);
                    if (!temps.empty()) {
                        ++temps_left;
                        CHECK(remove_faulted);
                        CHECK(mode == Persistence::persistent);
                    }
                    CHECK(mem->list(dir).size() == 2 + temps.size());

                    // Once the disk is healthy again, the same save succeeds.
                    f.disarm();
                    save_npz(f, path, new_vars, c.options());
                    CHECK(ckpt::testing::stored(*mem, path) == new_bytes);
                    CHECK(temps_in(*mem, dir).size() == temps.size());
                }
            }
        }
    }
    std::string counts;
    for (const auto& s : op_counts) counts += (counts.empty() ? "" : ", ") + s;
    WARN(fmt::format("fault matrix: {} cases ({}; EIO/ENOSPC at every op, short write at every write, failed fsync "
                     "at every sync/sync_dir; each transient and persistent): {} errors reported, {} silent "
                     "successes, target old in {}, new in {} (fault at sync_dir), {} temporaries left where the "
                     "persistent fault also failed their removal",
                     cases, counts, errors, silent, kept_old, got_new, temps_left));
    CHECK(silent == 0);
}

// ===============================================================================================================
// Reading faults

TEST_CASE("a restore that meets EIO at any read reports Error(io) naming the file") {
    const std::string path = "ckpt/model.npz";
    const VarCollection vars = sample_vars(3, 100000);
    const Snapshot snap = snapshot_of(vars);
    size_t cases = 0;
    std::vector<std::string> op_counts;
    for (const Config& c : configs()) {
        auto mem = std::make_shared<MemoryStorage>();
        mem->make_dirs("ckpt");
        mem->put(path, encode(vars, c));
        FaultyStorage clean(mem);
        REQUIRE(read_back(clean, path) == snap);
        const auto ops = clean.log();
        op_counts.push_back(fmt::format("{}: {} ops", c.name, ops.size()));
        for (uint64_t k = 1; k <= ops.size(); ++k) {
            for (const Persistence mode : {Persistence::transient, Persistence::persistent}) {
                ++cases;
                FaultyStorage f(mem);
                f.fail_at(k, Fault::eio, mode);
                INFO(fmt::format("{}; {} EIO at {} of {}", c.name, ckpt::testing::persistence_name(mode),
                                 ckpt::testing::describe(ops[k - 1]), ops.size()));
                try {
                    read_back(f, path);
                    FAIL_CHECK("the restore succeeded although a read failed");
                } catch (const Error& e) {
                    INFO("error: " << e.what());
                    CHECK(e.code() == Code::io);
                    CHECK(contains(e.what(), path));
                    CHECK(contains(e.what(), fmt::format("injected at operation #{})", k)));
                }
            }
        }
    }
    std::string counts;
    for (const auto& s : op_counts) counts += (counts.empty() ? "" : ", ") + s;
    WARN(fmt::format("read faults: {} cases ({}; EIO at every open_read/read_at, transient and persistent)", cases,
                     counts));
}

TEST_CASE("an EIO while reading a member's data is reported as io with the storage's message, not as format") {
    // The smallest case of the matrix above: one stored array; the read of its data fails. (Its npy header was
    // read with its local header when the file was opened.)
    auto mem = std::make_shared<MemoryStorage>();
    VarCollection vars;
    vars.add("x", random_array(DType::float32, 4, {16}, 11));
    save_npz(*mem, "model.npz", vars, configs()[0].options());
    uint64_t last_data_read = 0;
    {
        FaultyStorage clean(mem);
        NpzReader reader = NpzReader::open(clean, "model.npz", {});
        const uint64_t opened = clean.operations();
        reader.read(0);
        for (const auto& op : clean.log())
            if (op.number > opened && op.name == "read_at") last_data_read = op.number;
        REQUIRE(last_data_read > opened);
    }
    FaultyStorage f(mem);
    NpzReader reader = NpzReader::open(f, "model.npz", {});
    f.fail_at(last_data_read, Fault::eio, Persistence::transient);
    try {
        reader.read(0);
        FAIL("no error");
    } catch (const Error& e) {
        INFO("error: " << e.what());
        CHECK(f.faults_injected() == 1);
        CHECK(e.code() == Code::io);
        CHECK_THAT(e.what(), Contains("model.npz") && Contains("Input/output error"));
    }
}

// ===============================================================================================================
// Crash simulation: a power loss at every operation of a save

TEST_CASE("a crash at any operation of a save leaves the old or the complete new checkpoint, never a partial one") {
    const std::string dir = "ckpt/run";
    const std::string path = dir + "/model.npz";
    const std::string sibling = dir + "/00000001.npz";
    const VarCollection old_vars = sample_vars(4);
    const VarCollection new_vars = sample_vars(5);
    const Snapshot old_snap = snapshot_of(old_vars);
    const Snapshot new_snap = snapshot_of(new_vars);
    using Entries = CrashStorage::Entries;
    using Unsynced = CrashStorage::Unsynced;

    size_t points = 0, states = 0, olds = 0, news = 0, temps_left = 0;
    std::vector<std::string> op_counts;
    for (const Config& c : configs()) {
        const std::string old_bytes = encode(old_vars, c);
        const std::string new_bytes = encode(new_vars, c);
        const auto seeded = [&](CrashStorage& s) {
            s.plant(path, old_bytes);
            s.plant(sibling, "an older checkpoint");
        };
        CrashStorage clean;
        seeded(clean);
        save_npz(clean, path, new_vars, c.options());
        const uint64_t n = clean.operations();
        op_counts.push_back(fmt::format("{}: {} ops", c.name, n));

        // k = n + 1: the crash comes after save_npz returned.
        for (uint64_t k = 1; k <= n + 1; ++k) {
            ++points;
            CrashStorage s;
            seeded(s);
            s.crash_at(k);
            bool returned = false;
            try {
                save_npz(s, path, new_vars, c.options());
                returned = true;
            } catch (const Crash&) {
            }
            INFO(fmt::format("{}; crash at operation #{} of {}", c.name, k, n) << "\n" << s.log_text());
            CHECK(returned == (k > n));
            for (const Entries entries : {Entries::as_synced, Entries::as_written}) {
                for (const Unsynced unsynced : {Unsynced::dropped, Unsynced::torn, Unsynced::kept}) {
                    ++states;
                    INFO("entries " << (entries == Entries::as_synced ? "as synced" : "as written") << ", unsynced data "
                                    << (unsynced == Unsynced::dropped ? "dropped"
                                                                      : unsynced == Unsynced::torn ? "torn" : "kept"));
                    const auto view = s.durable_view(entries, unsynced);
                    REQUIRE(view->exists(path));
                    const std::string target = ckpt::testing::stored(*view, path);
                    const bool is_old = target == old_bytes;
                    const bool is_new = target == new_bytes;
                    CHECK((is_old || is_new));
                    olds += is_old;
                    news += is_new;
                    if (is_old || is_new) CHECK((read_back(*view, path) == (is_new ? new_snap : old_snap)));
                    // A save that returned is durable: it survives losing everything not synced.
                    if (returned) CHECK(is_new);
                    CHECK(ckpt::testing::stored(*view, sibling) == "an older checkpoint");
                    for (const std::string& name : view->list(dir)) {
                        INFO(name);
                        CHECK((name == "model.npz" || name == "00000001.npz" || is_temp_name(name)));
                        temps_left += is_temp_name(name);
                    }
                }
            }
        }
    }
    std::string counts;
    for (const auto& s : op_counts) counts += (counts.empty() ? "" : ", ") + s;
    WARN(fmt::format("crash simulation: {} crash points ({}, each + 1 after the save returned), {} power-loss states "
                     "(directory entries as synced / as written x unsynced data dropped / torn / kept): target old in "
                     "{}, complete new in {}, partial in {}; {} states hold a leftover temporary",
                     points, counts, states, olds, news, states - olds - news, temps_left));
}

TEST_CASE("a crash right after a save returned keeps the new checkpoint: the directory was synced") {
    CrashStorage s;
    const VarCollection old_vars = sample_vars(6, 100);
    const VarCollection new_vars = sample_vars(7, 100);
    s.plant("ckpt/model.npz", encode(old_vars, configs()[0]));
    save_npz(s, "ckpt/model.npz", new_vars, configs()[0].options());
    s.crash_at(s.operations() + 1);
    CHECK_THROWS_AS(s.list("ckpt"), Crash);
    const auto view = s.durable_view(CrashStorage::Entries::as_synced, CrashStorage::Unsynced::dropped);
    CHECK(read_back(*view, "ckpt/model.npz") == snapshot_of(new_vars));
    CHECK(view->list("ckpt") == std::vector<std::string>{"model.npz"});
}

// ===============================================================================================================
// Real disk-full and file-size-limit errors from the kernel

namespace {

// In the child: saves a small checkpoint to `dir`, then one with a 1 MiB array that the filesystem cannot hold,
// and checks the error, the old file and the directory.
std::string save_until_full(const std::string& dir, const std::function<void()>& after_first_save,
                            const std::string& expected_reason) {
    const std::string path = dir + "/model.npz";
    const Config& c = configs()[0];
    const VarCollection small = sample_vars(8, 1000);
    save_npz(*posix_storage(), path, small, c.options());
    const std::string old_bytes = read_file(path);
    after_first_save();

    VarCollection big = sample_vars(9, 1000);
    big.add("huge", random_array(DType::float32, 4, {262144}, 10));  // 1 MiB
    std::string message;
    try {
        save_npz(*posix_storage(), path, big, c.options());
        return "FAIL: the save succeeded";
    } catch (const Error& e) {
        message = e.what();
        if (e.code() != Code::io) return fmt::format("FAIL: code {}: {}", static_cast<int>(e.code()), message);
    }
    if (!contains(message, path)) return "FAIL: the message does not name the path: " + message;
    if (!contains(message, expected_reason)) return "FAIL: the message does not say '" + expected_reason + "': " + message;
    if (read_file(path) != old_bytes) return "FAIL: the previous checkpoint changed";
    if (!(read_back(*posix_storage(), path) == snapshot_of(small))) return "FAIL: the previous checkpoint reads differently";
    if (names_on_disk(dir) != std::set<std::string>{"model.npz"}) {
        std::string names;
        for (const auto& n : names_on_disk(dir)) names += " " + n;
        return "FAIL: the directory holds" + names;
    }
    return "OK: " + message;
}

}  // namespace

// Hidden ([.]): run by its own ctest (test_storage_tmpfs), which reports it skipped where no tmpfs can be mounted,
// instead of a pass that tested nothing.
TEST_CASE("a save to a full filesystem (64 KiB tmpfs) fails with io naming the path and keeps the old file",
          "[.][tmpfs]") {
    TempDir dir;
    const std::string mount_point = dir.path;
    const std::string result = in_child([&]() -> std::string {
        const std::string why_not = ckpt::testing::mount_private_tmpfs(mount_point, "64k");
        if (!why_not.empty()) return "skipped: no small filesystem to fill: " + why_not;
        return save_until_full(mount_point, [] {}, "No space left on device");
    });
    if (result.rfind("skipped", 0) == 0) {
        WARN(result);
        return;
    }
    INFO(result);
    CHECK(result.rfind("OK", 0) == 0);
}

TEST_CASE("a save cut short by RLIMIT_FSIZE (a real short write, then EFBIG) fails cleanly and keeps the old file") {
    TempDir dir;
    const std::string result = in_child([&]() -> std::string {
        if (::signal(SIGXFSZ, SIG_IGN) == SIG_ERR) return std::string("SKIP: signal: ") + std::strerror(errno);
        return save_until_full(
            dir.path,
            [] {
                const rlimit limit{256 * 1024, 256 * 1024};
                if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
                    throw std::runtime_error(std::string("setrlimit: ") + std::strerror(errno));
            },
            "File too large");
    });
    if (result.rfind("SKIP", 0) == 0) {
        WARN(result);
        return;
    }
    INFO(result);
    CHECK(result.rfind("OK", 0) == 0);
    // Seen from outside the child too.
    CHECK(names_on_disk(dir.path) == std::set<std::string>{"model.npz"});
    CHECK(read_back(*posix_storage(), dir / "model.npz") == snapshot_of(sample_vars(8, 1000)));
}
