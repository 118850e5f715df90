// SPDX-License-Identifier: Apache-2.0
// The npz reader's fast paths: npy headers taken from the bytes read with each local header (or read on their
// own when longer), large stored arrays read in parts on several threads with their CRC-32 combined, the
// 64-byte alignment of stored members that the writer promises, and deflated members' data descriptors checked
// without reads of their own.
#include "core/error.hpp"
#include "storage/memory_storage.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "support/counting_array.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"
#include "core/var_collection.hpp"
#include "npz/zip_reader.hpp"
#include "storage/read_ahead.hpp"
#include "support/stored.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Contains;

namespace {

using ckpt::testing::counting_array;

std::string save_to_string(const VarCollection& vars, NpzWriteOptions options = {}) {
    MemoryStorage mem;
    save_npz(mem, "x.npz", vars, options);
    return ckpt::testing::stored(mem, "x.npz");
}

NpzReader reader_of(const std::string& bytes, NpzReadOptions options = {}) {
    return NpzReader(std::make_unique<BytesInput>(bytes.data(), bytes.size()), "x.npz", options);
}

bool same_bytes(const Array& a, const void* b) { return a.nbytes() == 0 || std::memcmp(a.data(), b, a.nbytes()) == 0; }

}  // namespace

TEST_CASE("a large stored array is read in parts, on several threads, bit-exactly and with progress") {
    VarCollection vars;
    vars.add("small", counting_array(DType::int32, 4, {1000}, 1));
    vars.add("big", counting_array(DType::float32, 4, {int64_t{83} << 18}, 2));  // 83 MiB: three parts
    vars.add("after", counting_array(DType::uint8, 1, {5 << 20}, 3));
    const std::string bytes = save_to_string(vars);

    std::mutex mutex;
    std::vector<uint64_t> seen;
    NpzReadOptions options;
    options.progress.fn = [](uint64_t done, uint64_t total, void* payload) {
        auto* log = static_cast<std::pair<std::mutex*, std::vector<uint64_t>*>*>(payload);
        std::lock_guard<std::mutex> lock(*log->first);
        log->second->push_back(done);
        CHECK(total == (uint64_t{83} << 20) + (5 << 20) + 4000);
    };
    std::pair<std::mutex*, std::vector<uint64_t>*> log{&mutex, &seen};
    options.progress.payload = &log;

    NpzReader reader = reader_of(bytes, options);
    const VarCollection back = reader.read_all();
    REQUIRE(back.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
        INFO(vars.name(i));
        CHECK(back.name(i) == vars.name(i));
        CHECK(back.array(i).shape() == vars.array(i).shape());
        CHECK(same_bytes(vars.array(i), back.array(i).data()));
    }
    REQUIRE_FALSE(seen.empty());
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(seen.back() == (uint64_t{83} << 20) + (5 << 20) + 4000);
}

TEST_CASE("a corrupt byte in any part of a large array is a CRC error naming the member") {
    VarCollection vars;
    vars.add("big", counting_array(DType::float32, 4, {int64_t{20} << 20}, 4));  // 80 MiB
    const std::string clean = save_to_string(vars);
    for (const double where : {0.1, 0.5, 0.99}) {
        std::string bytes = clean;
        bytes[static_cast<size_t>(static_cast<double>(bytes.size()) * where)] ^= 0x40;
        INFO("corrupt byte at " << where << " of the file");
        try {
            reader_of(bytes).read_all();
            FAIL("no error");
        } catch (const Error& e) {
            CHECK(e.code() == Code::format);
            CHECK_THAT(e.what(), Contains("x.npz") && Contains("member 'big.npy'") && Contains("CRC-32 mismatch"));
        }
    }
}

TEST_CASE("a large big-endian array is byteswapped part by part") {
    const size_t n = size_t{9} << 20;  // 72 MiB of float64
    std::string data(n * 8, '\0');
    for (size_t i = 0; i < n; ++i) {
        const uint64_t v = i * 0x9E3779B97F4A7C15ull;
        for (int b = 0; b < 8; ++b) data[i * 8 + b] = static_cast<char>(v >> (8 * (7 - b)));  // big-endian
    }
    zipb::Archive archive;
    zipb::Member member;
    member.name = "x.npy";
    member.data = zipb::npy_member(">u8", "(" + std::to_string(n) + ",)", data);
    archive.members.push_back(member);
    const std::string bytes = zipb::build(archive);
    const VarCollection back = reader_of(bytes).read_all();
    REQUIRE(back.size() == 1);
    const auto* values = static_cast<const uint64_t*>(back.array(0).data());
    bool all = true;
    for (size_t i = 0; i < n; ++i) all = all && values[i] == i * 0x9E3779B97F4A7C15ull;
    CHECK(all);
}

TEST_CASE("an npy header longer than what is read with the local header is read on its own, and CRC-checked") {
    // 40 dimensions make a header of some 300 bytes.
    std::vector<int64_t> shape(40, 1);
    shape[0] = 3;
    VarCollection vars;
    vars.add("deep", counting_array(DType::int16, 2, shape, 5));
    std::string bytes = save_to_string(vars);
    {
        NpzReader reader = reader_of(bytes);
        REQUIRE(reader.entry(0).header.data_offset > 192);  // more than the head read at opening
        std::vector<char> out(6);
        reader.read_into(0, out.data());
        CHECK(same_bytes(vars.array(0), out.data()));
    }
    // Flipping a space of the header's padding changes nothing a parser sees, but the head copy in the central
    // directory no longer matches — and without one, the CRC must notice.
    const size_t pad = bytes.find("), }") + 5;
    REQUIRE(bytes[pad] == ' ');
    bytes[pad] = '\t';
    std::vector<char> out(6);
    CHECK_THROWS_WITH(reader_of(bytes).read_into(0, out.data()),
                      Contains("member 'deep.npy'") && Contains("differ from the central directory's head copy of them"));
    zipb::without_head_copies(bytes);
    CHECK_THROWS_WITH(reader_of(bytes).read_into(0, out.data()), Contains("CRC-32 mismatch"));
}

TEST_CASE("a flipped padding byte of a short npy header is caught by the CRC too") {
    VarCollection vars;
    vars.add("w", counting_array(DType::float32, 4, {16}, 6));
    std::string bytes = save_to_string(vars);
    const size_t pad = bytes.find("), }") + 5;
    REQUIRE(bytes[pad] == ' ');
    bytes[pad] = '\t';
    std::vector<char> out(64);
    CHECK_THROWS_WITH(reader_of(bytes).read_into(0, out.data()), Contains("differ from the central directory's head copy"));
    zipb::without_head_copies(bytes);
    CHECK_THROWS_WITH(reader_of(bytes).read_into(0, out.data()), Contains("CRC-32 mismatch"));
}

TEST_CASE("every stored array's data starts at a multiple of 64 bytes in the file") {
    VarCollection vars;
    for (int i = 0; i < 40; ++i) {
        const std::string name = std::string(static_cast<size_t>(i % 7 + 1), 'a') + std::to_string(i);
        vars.add(name, counting_array(DType::uint8, 1, {i * 13}, static_cast<uint32_t>(i)));
    }
    for (const Layout layout : {Layout::plain, Layout::objax}) {
        NpzWriteOptions options;
        options.layout = layout;
        const std::string bytes = save_to_string(vars, options);
        BytesInput input(bytes.data(), bytes.size());
        const ZipReader zip(input, "x.npz", 1000);
        NpzReader reader = reader_of(bytes);
        for (size_t i = 0; i < reader.size(); ++i) {
            const auto& e = reader.entry(i);
            INFO(e.member);
            CHECK((zip.members()[e.index].data_offset + e.header.data_offset) % 64 == 0);
        }
    }
}

TEST_CASE("jobs in any order are read into place, and of two corrupt arrays the first job's is reported") {
    VarCollection vars;
    for (int i = 0; i < 12; ++i) vars.add("a" + std::to_string(i), counting_array(DType::float32, 4, {int64_t{1} << 19}, 50 + i));
    const std::string clean = save_to_string(vars);  // 12 arrays of 2 MiB: shared among threads
    NpzReader reader = reader_of(clean);
    std::vector<std::vector<char>> out(vars.size());
    std::vector<NpzReader::Job> jobs;
    for (size_t i = vars.size(); i-- > 0;) {  // last array first: the opposite of file order
        out[i].resize(vars.array(i).nbytes());
        jobs.push_back({i, out[i].data()});
    }
    reader.read_entries(jobs);
    for (size_t i = 0; i < vars.size(); ++i) {
        INFO(vars.name(i));
        CHECK(same_bytes(vars.array(i), out[i].data()));
    }

    // Corrupt a1 (near the start of the file) and a9 (near its end): a9 comes first in the jobs.
    std::string bytes = clean;
    BytesInput in(clean.data(), clean.size());
    const ZipReader zip(in, "x.npz", 100);
    for (const size_t i : {size_t{1}, size_t{9}}) {
        const size_t at = zip.members()[reader.entry(i).index].data_offset + 1000 + i;
        bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    }
    for (int round = 0; round < 10; ++round) {
        try {
            reader_of(bytes).read_entries(jobs);
            FAIL("no error");
        } catch (const Error& e) {
            CHECK(e.code() == Code::format);
            CHECK_THAT(e.what(), Contains("member 'a9.npy'") && Contains("CRC-32 mismatch"));
        }
    }
}

namespace {

// Counts the reads an InputFile gets.
class CountingInput final : public InputFile {
public:
    explicit CountingInput(const std::string& bytes) : in_(bytes.data(), bytes.size()) {}
    uint64_t size() const override { return in_.size(); }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        ++reads;
        return in_.read_at(offset, dst, n);
    }
    size_t read_uncached_at(uint64_t offset, void* dst, size_t n) override {
        ++reads;
        return in_.read_at(offset, dst, n);
    }
    int reads = 0;

private:
    BytesInput in_;
};

// Reads to open the file ckpt saves, stored or deflated; `copies`: with the head copies ckpt writes for stored
// members (deflated ones have none).
int reads_to_open(const VarCollection& vars, bool deflate, bool copies = false) {
    NpzWriteOptions options;
    options.deflate = deflate;
    std::string bytes = save_to_string(vars, options);
    if (!copies) zipb::without_head_copies(bytes);
    if (deflate) REQUIRE(zipb::get(bytes, 6, 2) & zipb::kFlagDataDescriptor);  // the first member is streamed
    CountingInput in(bytes);
    const ZipReader zip(in, "x.npz", kDefaultMaxMembers);
    REQUIRE(zip.members().size() == vars.size());
    return in.reads;
}

}  // namespace

TEST_CASE("opening checks deflated members' data descriptors with no more reads than stored members need") {
    SECTION("large members: each descriptor comes with the local header after it") {
        VarCollection vars;  // pseudo-random bytes: deflate keeps them large, so each local header is read alone
        for (int i = 0; i < 4; ++i) vars.add("a" + std::to_string(i), counting_array(DType::uint8, 1, {1 << 20}, 50 + i));
        CHECK(reads_to_open(vars, true) == reads_to_open(vars, false));
    }
    SECTION("many small members: descriptors and headers come in the same few large reads") {
        VarCollection vars;
        for (int i = 0; i < 2000; ++i) vars.add("s" + std::to_string(i), counting_array(DType::int32, 4, {i % 50}, 60 + i));
        CHECK(reads_to_open(vars, true) <= reads_to_open(vars, false));
    }
}

TEST_CASE("opening a stored file ckpt wrote reads only its end: the head copies describe every member") {
    VarCollection few, lots;
    for (int i = 0; i < 4; ++i) few.add("a" + std::to_string(i), counting_array(DType::uint8, 1, {1 << 20}, 50 + i));
    for (int i = 0; i < 2000; ++i) lots.add("s" + std::to_string(i), counting_array(DType::int32, 4, {i % 50}, 60 + i));
    // The end of the file (end records, zip64 locator), then the directory unless that end already held it.
    CHECK(reads_to_open(few, false, true) == 1);
    CHECK(reads_to_open(lots, false, true) == 2);
    CHECK(reads_to_open(lots, false, false) > reads_to_open(lots, false, true));
}

TEST_CASE("from the local filesystem, a large restore reads in parts on several threads") {
    ckpt::testing::TempDir dir;
    auto posix = posix_storage();
    VarCollection vars;
    for (int i = 0; i < 3; ++i) vars.add("a" + std::to_string(i), counting_array(DType::float32, 4, {int64_t{5} << 20}, 20 + i));
    vars.add("huge", counting_array(DType::int64, 8, {int64_t{9} << 20}, 30));  // 72 MiB: three parts
    for (int i = 0; i < 300; ++i) vars.add("small" + std::to_string(i), counting_array(DType::uint8, 1, {i}, 40 + i));
    save_npz(*posix, dir.file("big.npz"), vars, {});

    NpzReader reader = NpzReader::open(*posix, dir.file("big.npz"), {});
    const VarCollection back = reader.read_all();
    REQUIRE(back.size() == vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
        INFO(vars.name(i));
        CHECK(same_bytes(vars.array(i), back.array(i).data()));
    }
    // One array alone, through read_into: the large one is read in parts too.
    std::vector<char> huge(static_cast<size_t>(vars.array(3).nbytes()));
    reader.read_into(3, huge.data());
    CHECK(same_bytes(vars.array(3), huge.data()));
}

namespace {

// A file that says none of it is in memory, so that a restore's reader reads its first bytes ahead (ZipReader's
// ReadAhead), and that records every read. `fail_ahead`: the read-ahead's reads (1 MiB at a multiple of 1 MiB)
// throw; `slow_ahead`: they take 50 ms each.
class UncachedInput final : public InputFile {
public:
    UncachedInput(const std::string& bytes, bool fail_ahead = false, bool slow_ahead = false)
        : in_(bytes.data(), bytes.size()), fail_ahead_(fail_ahead), slow_ahead_(slow_ahead) {}
    uint64_t size() const override { return in_.size(); }
    bool concurrent_reads() const override { return true; }
    bool cached(uint64_t, uint64_t) override { return false; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        const bool ahead = n == kMiB && offset % kMiB == 0;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (ahead) {
                ++ahead_reads_;
                changed_.notify_all();
            } else {
                changed_.wait_for(lock, std::chrono::seconds(10), [&] { return ahead_reads_ >= hold_until_; });
            }
        }
        if (ahead && slow_ahead_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (ahead && fail_ahead_) throw Error(Code::io, "x.npz: read failed (injected)");
        return in_.read_at(offset, dst, n);
    }
    int ahead_reads() {
        std::lock_guard<std::mutex> lock(mutex_);
        return ahead_reads_;
    }
    // From now on, other reads wait (up to 10 s) until the read ahead has made `reads` reads: what a test then
    // counts does not depend on which thread ran first.
    void hold_until(int reads) {
        std::lock_guard<std::mutex> lock(mutex_);
        hold_until_ = reads;
    }
    static constexpr size_t kMiB = ReadAhead::kStep;  // 1 MiB

private:
    BytesInput in_;
    bool fail_ahead_, slow_ahead_;
    std::mutex mutex_;
    std::condition_variable changed_;
    int ahead_reads_ = 0, hold_until_ = 0;
};

VarCollection many_small_arrays(int count) {
    VarCollection vars;  // 2048 arrays of 8 KiB: 16 MiB of data, past the 8 MiB read ahead
    for (int i = 0; i < count; ++i) vars.add("layer" + std::to_string(i), counting_array(DType::float32, 4, {2048}, 70 + i));
    return vars;
}

void check_same(const VarCollection& vars, const VarCollection& back) {
    REQUIRE(back.size() == vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
        INFO(vars.name(i));
        CHECK(same_bytes(vars.array(i), back.array(i).data()));
    }
}

}  // namespace

TEST_CASE("a restore reads the first 8 MiB of a file not in memory ahead while opening; other readers do not") {
    const VarCollection vars = many_small_arrays(2048);
    const std::string bytes = save_to_string(vars);
    NpzReadOptions restore;
    restore.read_ahead = true;
    {
        auto file = std::make_unique<UncachedInput>(bytes);
        UncachedInput& in = *file;
        NpzReader reader(std::move(file), "x.npz", restore);
        in.hold_until(8);
        check_same(vars, reader.read_all());
        CHECK(in.ahead_reads() == 8);  // 1 MiB at 0, 1 MiB, ... 7 MiB, and no more
    }
    {
        auto file = std::make_unique<UncachedInput>(bytes);
        UncachedInput& in = *file;
        NpzReader reader(std::move(file), "x.npz", {});  // no restore: a listing, a view, a range
        check_same(vars, reader.read_all());
        CHECK(in.ahead_reads() == 0);
    }
}

TEST_CASE("a read ahead that fails is left to the restore's own reads, which succeed") {
    const VarCollection vars = many_small_arrays(2048);
    const std::string bytes = save_to_string(vars);
    NpzReadOptions restore;
    restore.read_ahead = true;
    auto file = std::make_unique<UncachedInput>(bytes, true);
    UncachedInput& in = *file;
    NpzReader reader(std::move(file), "x.npz", restore);
    in.hold_until(1);
    check_same(vars, reader.read_all());
    CHECK(in.ahead_reads() == 1);  // it stopped at its first failure
}

TEST_CASE("an open that fails while reading ahead stops the read ahead and reports the directory's fault") {
    const VarCollection vars = many_small_arrays(2048);
    std::string bytes = save_to_string(vars);
    // The end record's directory offset, then a broken signature on the directory's second entry (the first one
    // is parsed too, after the read ahead has started).
    const size_t end = bytes.size() - 22;
    uint32_t cd_offset = 0;
    std::memcpy(&cd_offset, &bytes[end + 16], 4);
    size_t second = cd_offset + 46;
    uint16_t lengths[3];
    std::memcpy(lengths, &bytes[cd_offset + 28], sizeof lengths);
    second += size_t{lengths[0]} + lengths[1] + lengths[2];
    REQUIRE(bytes.compare(second, 4, "PK\1\2") == 0);
    bytes[second + 3] = '\7';
    UncachedInput in(bytes, false, true);
    try {
        const ZipReader zip(in, "x.npz", kDefaultMaxMembers, true);
        FAIL("opened");
    } catch (const Error& e) {
        CHECK(e.code() == Code::format);
        CHECK_THAT(e.what(), Contains("x.npz: not a valid npz (zip) file: central directory entry #1 is malformed"));
    }
    // The read ahead (started before the directory is parsed, perhaps not yet reading when the open failed) was
    // stopped at its next step and joined: not run through its 8 reads of 50 ms each, nor left reading a file
    // that is gone.
    CHECK(in.ahead_reads() < 8);
}

TEST_CASE("from a file evicted from the page cache, a restore reads ahead and restores every value") {
    // Not /dev/shm (TempDir's choice where it can): a tmpfs file is always in memory.
    std::string pattern = "/var/tmp/ckpt-test-XXXXXX";
    REQUIRE(::mkdtemp(&pattern[0]) != nullptr);
    const std::string path = pattern + "/cold.npz";
    auto posix = posix_storage();
    const VarCollection vars = many_small_arrays(2048);
    save_npz(*posix, path, vars, {});
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // saved with fsync: clean pages, which this drops
    ::close(fd);
    NpzReadOptions restore;
    restore.read_ahead = true;
    NpzReader reader = NpzReader::open(*posix, path, restore);
    check_same(vars, reader.read_all());
    ::unlink(path.c_str());
    ::rmdir(pattern.c_str());
}
