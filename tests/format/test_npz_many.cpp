// SPDX-License-Identifier: Apache-2.0
// Archives of many small members: opening checks their npy headers — and, without ckpt's head copies in the
// central directory, their local headers — on several threads once there are kParallelOpenMembers of them (and
// the storage reads concurrently), and restores read runs of neighbouring small arrays in batches, checking the
// local headers that opening left to them. Every result and every error must be the same as a single thread reading member by member
// gives: the same bytes are read here through an InputFile that allows concurrent reads and through one that
// does not (which keeps opening on one thread), above and below the threshold.
#include "core/error.hpp"
#include "core/find_duplicate.hpp"
#include "npz/npz_reader.hpp"
#include "container/npz_container.hpp"
#include "npz/npz_writer.hpp"
#include "npz/zip_reader.hpp"
#include "storage/memory_storage.hpp"
#include "support/counting_array.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"
#include "core/var_collection.hpp"
#include "support/stored.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <string>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Contains;

namespace {

using ckpt::testing::counting_array;

// n small arrays of varied types and sizes (some empty), as ckpt saves them.
VarCollection many(size_t n) {
    VarCollection vars;
    for (size_t i = 0; i < n; ++i) {
        const int64_t len = static_cast<int64_t>(i % 97);
        if (i % 3 == 0) vars.add("f" + std::to_string(i), counting_array(DType::float32, 4, {len, 2}, static_cast<uint32_t>(i)));
        else if (i % 3 == 1) vars.add("b" + std::to_string(i), counting_array(DType::uint8, 1, {len}, static_cast<uint32_t>(i)));
        else vars.add("d" + std::to_string(i), counting_array(DType::float64, 8, {len}, static_cast<uint32_t>(i)));
    }
    return vars;
}

std::string save_to_string(const VarCollection& vars) {
    MemoryStorage mem;
    save_npz(mem, "x.npz", vars, {});
    return ckpt::testing::stored(mem, "x.npz");
}

// Bytes in memory, read one call at a time: opening stays on one thread.
class SerialInput final : public InputFile {
public:
    explicit SerialInput(const std::string& bytes) : in_(bytes.data(), bytes.size()) {}
    uint64_t size() const override { return in_.size(); }
    size_t read_at(uint64_t offset, void* dst, size_t n) override { return in_.read_at(offset, dst, n); }

private:
    BytesInput in_;
};

NpzReader open_bytes(const std::string& bytes, bool concurrent) {
    std::unique_ptr<InputFile> in;
    if (concurrent) in = std::make_unique<BytesInput>(bytes.data(), bytes.size());
    else in = std::make_unique<SerialInput>(bytes);
    return NpzReader(std::move(in), "x.npz", {});
}

// Opens and reads everything (jobs in reverse order, so batches are not in jobs order); the error, or "".
std::string outcome(const std::string& bytes, bool concurrent, const VarCollection* expect = nullptr) {
    try {
        NpzReader reader = open_bytes(bytes, concurrent);
        std::vector<std::vector<char>> out(reader.size());
        std::vector<NpzReader::Job> jobs;
        for (size_t i = reader.size(); i-- > 0;) {
            out[i].resize(reader.entry(i).header.nbytes);
            jobs.push_back({i, out[i].data()});
        }
        reader.read_entries(jobs);
        if (expect != nullptr) {
            REQUIRE(reader.size() == expect->size());
            for (size_t i = 0; i < reader.size(); ++i) {
                INFO(expect->name(i));
                CHECK(reader.entry(i).name == expect->name(i));
                const Array& a = expect->array(i);
                CHECK((a.nbytes() == 0 || std::memcmp(a.data(), out[i].data(), a.nbytes()) == 0));
            }
        }
        return "";
    } catch (const Error& e) {
        CHECK(e.code() == Code::format);
        return e.what();
    }
}

// Where member i's local header, npy header and array data start.
struct Offsets {
    std::vector<uint64_t> local, npy, array;
};
Offsets offsets_of(const std::string& bytes) {
    NpzReader reader = open_bytes(bytes, false);
    Offsets o;
    for (size_t i = 0; i < reader.size(); ++i) {
        o.local.push_back(reader.member(i).local_offset);
        o.npy.push_back(reader.member(i).data_offset);
        o.array.push_back(reader.member(i).data_offset + reader.entry(i).header.data_offset);
    }
    return o;
}

}  // namespace

TEST_CASE("many small arrays read back exactly, opened on one thread or several") {
    for (const size_t n : {kParallelOpenMembers - 1, kParallelOpenMembers, 3 * kParallelOpenMembers + 7}) {
        INFO(n << " members");
        const VarCollection vars = many(n);
        const std::string bytes = save_to_string(vars);
        CHECK(outcome(bytes, true, &vars).empty());
        CHECK(outcome(bytes, false, &vars).empty());
    }
}

TEST_CASE("from the local filesystem, many small arrays read back exactly") {
    ckpt::testing::TempDir dir;
    auto posix = posix_storage();
    const VarCollection vars = many(2 * kParallelOpenMembers);
    save_npz(*posix, dir.file("many.npz"), vars, {});
    NpzReader reader = NpzReader::open(*posix, dir.file("many.npz"), {});
    const VarCollection back = reader.read_all();
    REQUIRE(back.size() == vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
        INFO(vars.name(i));
        CHECK(back.name(i) == vars.name(i));
        CHECK(back.array(i).shape() == vars.array(i).shape());
        CHECK((vars.array(i).nbytes() == 0 ||
               std::memcmp(vars.array(i).data(), back.array(i).data(), vars.array(i).nbytes()) == 0));
    }
}

TEST_CASE("a corrupt member amid many gives the same error on one thread or several") {
    for (const size_t n : {kParallelOpenMembers - 1, 2 * kParallelOpenMembers + 1}) {
        const VarCollection vars = many(n);
        const std::string clean = save_to_string(vars);
        const Offsets at = offsets_of(clean);
        // Members in the first and in the last share of the threads, and one in the middle.
        const size_t first = 5, middle = n / 2 + 1, last = n - 3;
        REQUIRE(vars.array(middle).nbytes() > 0);
        REQUIRE(vars.array(last).nbytes() > 0);
        const auto same_everywhere = [&](const std::string& bytes, const std::string& member, const std::string& what) {
            INFO(n << " members, " << what);
            const std::string one = outcome(bytes, false), several = outcome(bytes, true);
            CHECK_THAT(several, Contains("x.npz: member '" + member + ".npy'") && Contains(what));
            CHECK(one == several);
        };

        SECTION("a flipped data byte: a CRC error") {
            std::string bytes = clean;
            bytes[at.array[middle] + 1] ^= 0x20;
            same_everywhere(bytes, vars.name(middle), "CRC-32 mismatch");
        }
        SECTION("two flipped data bytes: the first job's error (jobs run last member first)") {
            std::string bytes = clean;
            bytes[at.array[middle] + 1] ^= 0x20;
            bytes[at.array[last]] ^= 0x01;
            same_everywhere(bytes, vars.name(last), "CRC-32 mismatch");
        }
        SECTION("a local header whose CRC disagrees with the central directory") {
            std::string bytes = clean;
            zipb::patch(bytes, at.local[middle] + 14, zipb::get(bytes, at.local[middle] + 14, 4) ^ 1, 4);
            same_everywhere(bytes, vars.name(middle), "local header disagrees with the central directory (CRC or sizes)");
        }
        SECTION("two bad local headers: reading finds the first job's; opening, without head copies, the first member's") {
            std::string bytes = clean;
            zipb::patch(bytes, at.local[last] + 14, zipb::get(bytes, at.local[last] + 14, 4) ^ 1, 4);
            bytes[at.local[middle] + 30] ^= 0x01;  // a letter of its name
            same_everywhere(bytes, vars.name(last), "local header disagrees with the central directory (CRC or sizes)");
            zipb::without_head_copies(bytes);
            same_everywhere(bytes, vars.name(middle), "its local header names it differently");
        }
        SECTION("a broken npy header, and a bad local header later: the local header's error comes first") {
            std::string bytes = clean;
            const size_t magic = at.npy[first];
            REQUIRE(bytes.compare(magic, 6, "\x93NUMPY") == 0);
            bytes[magic + 1] = 'X';
            std::string one = outcome(bytes, false);
            CHECK_THAT(one, Contains("member '" + vars.name(first) + ".npy'"));
            CHECK(one == outcome(bytes, true));
            zipb::patch(bytes, at.local[last] + 14, zipb::get(bytes, at.local[last] + 14, 4) ^ 1, 4);
            same_everywhere(bytes, vars.name(last), "local header disagrees");
        }
    }
}

namespace {

// The bytes of a file that is cut short after it was opened: reads past `limit` find nothing.
class ShrinkingInput final : public InputFile {
public:
    explicit ShrinkingInput(const std::string& bytes) : bytes_(bytes) {}
    uint64_t size() const override { return bytes_.size(); }
    bool concurrent_reads() const override { return true; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        const uint64_t end = std::min<uint64_t>(limit, bytes_.size());
        if (offset >= end) return 0;
        n = static_cast<size_t>(std::min<uint64_t>(n, end - offset));
        std::memcpy(dst, bytes_.data() + offset, n);
        return n;
    }
    uint64_t limit = UINT64_MAX;

private:
    const std::string& bytes_;
};

}  // namespace

TEST_CASE("a file cut short after opening: a batch read says which array's data ends where") {
    const VarCollection vars = many(300);
    const std::string bytes = save_to_string(vars);
    const Offsets at = offsets_of(bytes);
    const size_t cut_in = 200;  // an array of 200 % 97 = 6 float64
    auto owned = std::make_unique<ShrinkingInput>(bytes);
    ShrinkingInput& in = *owned;
    NpzReader reader(std::move(owned), "x.npz", {});
    in.limit = at.array[cut_in] + 20;
    std::vector<std::vector<char>> out(reader.size());
    std::vector<NpzReader::Job> jobs;
    for (size_t i = 0; i < reader.size(); ++i) {
        out[i].resize(reader.entry(i).header.nbytes);
        jobs.push_back({i, out[i].data()});
    }
    try {
        reader.read_entries(jobs);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::format);
        CHECK_THAT(e.what(), Contains("member '" + vars.name(cut_in) + ".npy'") && Contains("data ends after 20 of 48 bytes"));
    }
    // The arrays before the cut were read.
    for (size_t i = 0; i < cut_in; ++i) {
        INFO(vars.name(i));
        CHECK((vars.array(i).nbytes() == 0 || std::memcmp(vars.array(i).data(), out[i].data(), vars.array(i).nbytes()) == 0));
    }
}

namespace {

// Bytes in memory that are never cached, so the storage says (after `pause`, to let the calling thread finish
// first). Once recording, reads are recorded by thread and take 2 ms each, so that other threads start before
// the calling one is done.
class ColdInput final : public InputFile {
public:
    ColdInput(const std::string& bytes, std::chrono::milliseconds pause) : in_(bytes.data(), bytes.size()), pause_(pause) {}
    uint64_t size() const override { return in_.size(); }
    bool concurrent_reads() const override { return true; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        if (recording) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                readers.insert(std::this_thread::get_id());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return in_.read_at(offset, dst, n);
    }
    bool cached(uint64_t, uint64_t) override {
        std::this_thread::sleep_for(pause_);
        ++asked;
        return false;
    }
    std::atomic<bool> recording{false};
    std::atomic<int> asked{0};
    std::set<std::thread::id> readers;

private:
    BytesInput in_;
    std::chrono::milliseconds pause_;
    std::mutex mutex_;
};

}  // namespace

TEST_CASE("from a cold cache, only the calling thread reads small arrays, whenever the others find out") {
    VarCollection vars;  // 8 MiB in 1024 arrays: enough for several threads, in 32 batches
    for (int i = 0; i < 1024; ++i)
        vars.add("w" + std::to_string(i), counting_array(DType::float32, 4, {2048}, static_cast<uint32_t>(i)));
    const std::string bytes = save_to_string(vars);
    for (const auto pause : {std::chrono::milliseconds(0), std::chrono::milliseconds(200)}) {
        INFO("cached() answers after " << pause.count() << " ms");
        auto owned = std::make_unique<ColdInput>(bytes, pause);
        ColdInput& in = *owned;
        NpzReader reader(std::move(owned), "x.npz", {});
        std::vector<std::vector<char>> out(reader.size());
        std::vector<NpzReader::Job> jobs;
        for (size_t i = 0; i < reader.size(); ++i) {
            out[i].resize(reader.entry(i).header.nbytes);
            jobs.push_back({i, out[i].data()});
        }
        in.recording = true;
        reader.read_entries(jobs);
        if (std::thread::hardware_concurrency() > 1) CHECK(in.asked > 0);
        CHECK(in.readers == std::set<std::thread::id>{std::this_thread::get_id()});
        for (size_t i = 0; i < vars.size(); ++i) {
            INFO(vars.name(i));
            CHECK(std::memcmp(vars.array(i).data(), out[i].data(), vars.array(i).nbytes()) == 0);
        }
    }
}

TEST_CASE("duplicate names are found by hashing and by sorting alike: the first name that repeats an earlier one") {
    std::vector<std::string> names;
    for (int i = 0; i < 5000; ++i) names.push_back("layer" + std::to_string(i) + "/w");
    const auto name_of = [&](size_t i) -> const std::string& { return names[i]; };
    CHECK(!find_duplicate(names.size(), name_of));
    CHECK(!find_duplicate_by_sorting(names.size(), name_of));
    names[4000] = names[10];  // a later repeat first in name order
    names[3000] = names[2999];
    const auto want = std::make_pair(size_t{2999}, size_t{3000});
    CHECK(find_duplicate(names.size(), name_of) == want);
    CHECK(find_duplicate_by_sorting(names.size(), name_of) == want);
    names[7] = names[3];
    CHECK(find_duplicate(names.size(), name_of) == std::make_pair(size_t{3}, size_t{7}));
    CHECK(find_duplicate_by_sorting(names.size(), name_of) == std::make_pair(size_t{3}, size_t{7}));
}

TEST_CASE("from a cold cache, large arrays amid small ones are still read on several threads") {
    if (std::thread::hardware_concurrency() < 2) return;
    VarCollection vars;  // 16 MiB: large arrays, each followed by a pair of small ones (a norm's scale and bias)
    for (int i = 0; i < 16; ++i) {
        vars.add("w" + std::to_string(i), counting_array(DType::float32, 4, {1 << 18}, static_cast<uint32_t>(i)));
        vars.add("s" + std::to_string(i), counting_array(DType::float32, 4, {64}, static_cast<uint32_t>(100 + i)));
        vars.add("b" + std::to_string(i), counting_array(DType::float32, 4, {64}, static_cast<uint32_t>(200 + i)));
    }
    const std::string bytes = save_to_string(vars);
    auto owned = std::make_unique<ColdInput>(bytes, std::chrono::milliseconds(0));
    ColdInput& in = *owned;
    NpzReader reader(std::move(owned), "x.npz", {});
    std::vector<std::vector<char>> out(reader.size());
    std::vector<NpzReader::Job> jobs;
    for (size_t i = 0; i < reader.size(); ++i) {
        out[i].resize(reader.entry(i).header.nbytes);
        jobs.push_back({i, out[i].data()});
    }
    in.recording = true;
    reader.read_entries(jobs);
    CHECK(in.asked > 0);
    CHECK(in.readers.size() > 1);
    for (size_t i = 0; i < vars.size(); ++i) {
        INFO(vars.name(i));
        CHECK(std::memcmp(vars.array(i).data(), out[i].data(), vars.array(i).nbytes()) == 0);
    }
}

TEST_CASE("restoring many arrays in place finds each one whatever the collection's order") {
    const VarCollection saved = many(2 * kParallelOpenMembers);
    const std::string bytes = save_to_string(saved);
    // In the file's order (each found at once), reversed, and every other one (looked up by name).
    for (const int order : {0, 1, 2}) {
        INFO("order " << order);
        VarCollection vars;
        std::vector<size_t> from;
        for (size_t k = 0; k < saved.size(); ++k) {
            const size_t i = order == 1 ? saved.size() - 1 - k : k;
            if (order == 2 && i % 2 == 1) continue;
            const Array& a = saved.array(i);
            vars.add(saved.name(i), Array::allocate(a.dtype(), a.itemsize(), a.shape(), true));
            from.push_back(i);
        }
        NpzContainer file(open_bytes(bytes, true), true, false);
        restore_container(file, vars, nullptr);
        for (size_t v = 0; v < vars.size(); ++v) {
            const Array& a = saved.array(from[v]);
            INFO(vars.name(v));
            CHECK((a.nbytes() == 0 || std::memcmp(a.data(), vars.array(v).data(), a.nbytes()) == 0));
        }
    }
}

TEST_CASE("a renamer that maps two names on disk to one: the first such pair in the file is named") {
    VarCollection saved;
    for (int i = 0; i < 6; ++i) saved.add("a" + std::to_string(i), counting_array(DType::int32, 4, {3}, static_cast<uint32_t>(i)));
    const std::string bytes = save_to_string(saved);
    // a1 and a3 both become "x", a2 and a4 both "y": a3 is the first name that meets an earlier one.
    const Renamer rename = [](const std::string& name) -> std::string {
        if (name == "a1" || name == "a3") return "x";
        if (name == "a2" || name == "a4") return "y";
        return name;
    };
    NpzContainer file(open_bytes(bytes, true), true, false);
    VarCollection vars;
    vars.add("a0", counting_array(DType::int32, 4, {3}, 9));
    try {
        restore_container(file, vars, rename);
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Code::invalid);
        CHECK_THAT(e.what(), Contains("x.npz: the renamer maps both 'a1' and 'a3' to 'x'"));
    }
    // Renamed without clashes, the names are found through the renamer.
    const Renamer upper = [](const std::string& name) -> std::string { return "A" + name.substr(1); };
    VarCollection renamed;
    renamed.add("A4", counting_array(DType::int32, 4, {3}, 0));
    renamed.add("A2", counting_array(DType::int32, 4, {3}, 0));
    NpzContainer again(open_bytes(bytes, true), true, false);
    restore_container(again, renamed, upper);
    CHECK(std::memcmp(renamed.array(0).data(), saved.array(4).data(), 12) == 0);
    CHECK(std::memcmp(renamed.array(1).data(), saved.array(2).data(), 12) == 0);
}
