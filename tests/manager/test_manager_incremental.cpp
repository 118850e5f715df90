// SPDX-License-Identifier: Apache-2.0
// The manager's incremental saves (docs/checkpoint-manager.md, "Incremental saves"): each save shares the chunks that
// did not change with the checkpoint before it, where the storage can share (MemoryStorage copies, which is enough to
// see what is reused; the XFS and btrfs tests of tests/format/test_chunks.cpp see the blocks shared), and every file
// stays whole.
#include "core/error.hpp"
#include "manager/checkpoint.hpp"
#include "npz/npz_reader.hpp"
#include "safetensors/safetensors_writer.hpp"
#include "storage/memory_storage.hpp"
#include "support/on_cloning_filesystems.hpp"
#include "support/stored.hpp"
#include "support/thread_comm.hpp"

#include <sys/statvfs.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Contains;

namespace {

constexpr size_t kFloats = 8 * kChunkBytes / 4;  // 8 chunks

// The lines of `log` that say what a save shared, or why it shared nothing; clears the log.
std::vector<std::string> sharing_lines(std::vector<std::string>& log) {
    std::vector<std::string> out;
    for (const std::string& line : log)
        if (line.find("shares") != std::string::npos || line.find("in full") != std::string::npos) out.push_back(line);
    log.clear();
    return out;
}

struct Run {
    std::shared_ptr<MemoryStorage> storage = std::make_shared<MemoryStorage>();
    std::vector<std::string> log;
    std::vector<float> w = std::vector<float>(kFloats, 1.0f);

    CheckpointManager::Options options() {
        CheckpointManager::Options o;
        o.storage = storage;
        o.keep = 2;
        o.log = [this](int, const std::string& message) { log.push_back(message); };
        return o;
    }
    VarCollection vars() {
        VarCollection v;
        v.add("w", Array::borrow(DType::float32, 4, {static_cast<int64_t>(kFloats)}, w.data()));
        return v;
    }
    std::vector<std::string> shares() { return sharing_lines(log); }
    float restored(CheckpointManager& m, int64_t index) {
        std::vector<float> into(kFloats);
        VarCollection v;
        v.add("w", Array::borrow(DType::float32, 4, {static_cast<int64_t>(kFloats)}, into.data()));
        m.restore(v, index);
        return into[kFloats - 1] + into[0];
    }
};

}  // namespace

TEST_CASE("a manager's save shares the unchanged chunks of the checkpoint before it, and every file is whole") {
    Run run;
    auto async = GENERATE(false, true);
    INFO((async ? "async" : "synchronous"));
    CheckpointManager::Options o = run.options();
    o.async = async;
    CheckpointManager m("/run", o);
    m.save(run.vars(), 0);
    m.wait();
    CHECK(run.shares().empty());  // nothing to share with
    run.w[0] = 2.0f;              // chunk 0 of 8
    m.save(run.vars(), 1);
    m.wait();
    CHECK_THAT(run.shares().at(0), Contains(fmt::format("Checkpoint 1 shares {} bytes of its", 7 * kChunkBytes)) &&
                                       Contains("with checkpoint 0"));
    run.w[kFloats - 1] = 3.0f;  // chunk 7
    m.save(run.vars(), 2);
    m.wait();
    CHECK_THAT(run.shares().at(0),
               Contains(fmt::format("Checkpoint 2 shares {} bytes", 7 * kChunkBytes)) && Contains("with checkpoint 1"));
    CHECK(m.list() == std::vector<int64_t>{1, 2});  // retention removed the base of checkpoint 1: 1 is whole
    CHECK(run.restored(m, 1) == 1.0f + 2.0f);
    CHECK(run.restored(m, 2) == 3.0f + 2.0f);
    NpzReader r = NpzReader::open(*run.storage, "/run/0000000002.npz", {});
    CHECK(r.chunk_table());
    CHECK(r.size() == 1);
}

TEST_CASE("a manager shares nothing with a checkpoint changed since it saved it, and says so") {
    Run run;
    CheckpointManager m("/run", run.options());
    m.save(run.vars(), 0);
    // Another program replaces checkpoint 0 (the same arrays, saved again: another size and time).
    CheckpointManager::Options other = run.options();
    other.incremental = false;
    {
        CheckpointManager elsewhere("/copy", other);
        elsewhere.save(run.vars(), 0);
    }
    run.storage->put("/run/0000000000.npz", ckpt::testing::stored(*run.storage, "/copy/0000000000.npz"));
    run.log.clear();
    m.save(run.vars(), 1);
    CHECK(run.shares() ==
          std::vector<std::string>{"Saving checkpoint 1 in full: checkpoint 0 changed since it was saved"});
    CHECK(run.restored(m, 1) == 2.0f);
}

TEST_CASE("a new manager takes the newest checkpoint on disk as its first save's base") {
    Run run;
    {
        CheckpointManager first("/run", run.options());
        first.save(run.vars(), 0);
        first.save(run.vars(), 1);
    }
    run.log.clear();
    CheckpointManager m("/run", run.options());
    m.save(run.vars(), 5);
    CHECK_THAT(run.shares().at(0),
               Contains(fmt::format("Checkpoint 5 shares {} bytes", 8 * kChunkBytes)) && Contains("with checkpoint 1"));
    SECTION("a checkpoint without chunk hashes serves as no base: the save is a full one, and says why") {
        CheckpointManager::Options o = run.options();
        o.incremental = false;
        {
            CheckpointManager plain("/plain", o);
            plain.save(run.vars(), 0);
        }
        CHECK_FALSE(NpzReader::open(*run.storage, "/plain/0000000000.npz", {}).chunk_table());
        CheckpointManager next("/plain", run.options());
        next.save(run.vars(), 1);
        CHECK_THAT(run.shares().at(0), Contains("Saving checkpoint 1 in full") && Contains("no chunk table"));
    }
}

TEST_CASE("full_every makes every K-th save a full one, and incremental off records no chunk hashes") {
    Run run;
    CheckpointManager::Options o = run.options();
    o.full_every = 3;
    CheckpointManager m("/run", o);
    std::vector<bool> shared;
    for (int64_t i = 0; i < 7; ++i) {
        m.save(run.vars(), i);
        shared.push_back(!run.shares().empty());
    }
    // Saves 3 and 6 of this manager (indices 2 and 5) are full; index 0 had nothing to share with.
    CHECK(shared == std::vector<bool>{false, true, false, true, true, false, true});

    CheckpointManager::Options bad = run.options();
    bad.full_every = -1;
    CHECK_THROWS_WITH(CheckpointManager("/bad", bad), Contains("/bad") && Contains("full_every -1 is negative"));
}

TEST_CASE("a manager on a storage that shares no blocks says once, at its first save, that its saves are full") {
    struct NoSharing : MemoryStorage {
        bool clones(const std::string&) override { return false; }
    };
    for (const bool incremental : {true, false}) {
        INFO((incremental ? "incremental" : "incremental off"));
        Run run;
        run.storage = std::make_shared<NoSharing>();
        CheckpointManager::Options o = run.options();
        o.incremental = incremental;
        CheckpointManager m("/run", o);
        CHECK(run.log.empty());  // opening says nothing
        for (int64_t i = 0; i < 3; ++i) m.save(run.vars(), i);
        const std::vector<std::string> lines = run.shares();
        if (!incremental) {
            CHECK(lines.empty());  // asked for full saves: nothing to explain
            continue;
        }
        REQUIRE(lines.size() == 1);
        CHECK_THAT(lines[0], Contains("Saving every checkpoint in full: the storage of /run cannot share blocks") &&
                                 Contains("XFS or btrfs"));
    }
}

TEST_CASE("saves that share nothing pause the hashing, longer each time, until sharing comes back") {
    Run run;
    CheckpointManager::Options o = run.options();
    o.keep = 100;
    CheckpointManager m("/run", o);
    std::vector<bool> hashed;
    std::vector<std::string> pauses;
    for (int64_t i = 0; i < 17; ++i) {
        if (i < 13)  // every weight trained; then frozen
            for (float& x : run.w) x += 1.0f;
        m.save(run.vars(), i);
        CHECK(run.restored(m, i) == run.w[kFloats - 1] + run.w[0]);
        hashed.push_back(
            ckpt::testing::stored(*run.storage, "/run/" + fmt::format("{:010d}.npz", i)).find("__ckpt_chunks__") !=
            std::string::npos);
        for (const std::string& line : run.log)
            if (line.find("sixteenth") != std::string::npos) pauses.push_back(line);
        run.log.clear();
    }
    // Index 1 shares nothing with 0: 1 save without hashes (2); 3 hashes with no base, 4 shares nothing: 2 saves
    // (5, 6); 7, 8: 4 saves (9 to 12); 13 hashes, and 14 on share again.
    CHECK(hashed == std::vector<bool>{true, true, false, true, true, false, false, true, true, false, false, false,
                                      false, true, true, true, true});
    REQUIRE(pauses.size() == 3);
    CHECK(
        pauses[0] ==
        "Checkpoint 1 shares less than a sixteenth of its arrays with its base: the next save records no chunk hashes");
    CHECK_THAT(pauses[1], Contains("Checkpoint 4 shares less") && Contains("the next 2 saves record no"));
    CHECK_THAT(pauses[2], Contains("Checkpoint 8 shares less") && Contains("the next 4 saves record no"));
}

TEST_CASE("deflated checkpoints are never incremental") {
    Run run;
    CheckpointManager::Options o = run.options();
    o.npz_write.deflate = true;
    CheckpointManager m("/run", o);
    m.save(run.vars(), 0);
    m.save(run.vars(), 1);
    CHECK(run.shares().empty());
    CHECK_FALSE(NpzReader::open(*run.storage, "/run/0000000001.npz", {}).chunk_table());
}

TEST_CASE("every rank of a sharded step shares its unchanged chunks with its own shard of the step before") {
    auto storage = std::make_shared<MemoryStorage>();
    auto async = GENERATE(false, true);
    INFO((async ? "async" : "synchronous"));
    std::mutex mutex;
    std::vector<std::string> log;
    ckpt::testing::run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        std::vector<float> w(kFloats, static_cast<float>(rank));
        CheckpointManager::Options o;
        o.storage = storage;
        o.comm = comm;
        o.async = async;
        o.log = [&](int, const std::string& message) {
            std::lock_guard<std::mutex> lock(mutex);
            log.push_back(message);
        };
        CheckpointManager m("/run", o);
        for (int64_t i = 0; i < 3; ++i) {
            w[static_cast<size_t>(i) * kChunkBytes / 4] += 1.0f;  // chunk i of rank's shard changes
            VarCollection v;
            v.add("w" + std::to_string(rank),
                  Array::borrow(DType::float32, 4, {static_cast<int64_t>(kFloats)}, w.data()));
            m.save(v, i);
        }
        m.wait();
        std::vector<float> into(kFloats);
        VarCollection back;
        back.add("w" + std::to_string(rank),
                 Array::borrow(DType::float32, 4, {static_cast<int64_t>(kFloats)}, into.data()));
        CHECK(m.restore(back, 2) == 2);
        CHECK(into == w);
        m.close();
    });
    std::vector<std::string> shares;
    for (const std::string& line : log)
        if (line.find(" shares ") != std::string::npos) shares.push_back(line);
    std::sort(shares.begin(), shares.end());
    CHECK(shares ==
          std::vector<std::string>{
              fmt::format("Rank 0's shard of step 1 shares {} bytes with /run/0000000000/shard-00000-of-00002.npz",
                          7 * kChunkBytes),
              fmt::format("Rank 0's shard of step 2 shares {} bytes with /run/0000000001/shard-00000-of-00002.npz",
                          7 * kChunkBytes),
              fmt::format("Rank 1's shard of step 1 shares {} bytes with /run/0000000000/shard-00001-of-00002.npz",
                          7 * kChunkBytes),
              fmt::format("Rank 1's shard of step 2 shares {} bytes with /run/0000000001/shard-00001-of-00002.npz",
                          7 * kChunkBytes)});
}

TEST_CASE("after a restart, each rank's first sharded save takes its shard of the newest step on disk") {
    auto storage = std::make_shared<MemoryStorage>();
    std::mutex mutex;
    std::vector<std::string> log;
    const auto session = [&](int64_t first, int64_t last, int world) {
        ckpt::testing::run_ranks(world, [&](int rank, std::shared_ptr<Comm> comm) {
            std::vector<float> w(kFloats, static_cast<float>(rank));
            CheckpointManager::Options o;
            o.storage = storage;
            o.comm = comm;
            o.log = [&](int, const std::string& message) {
                std::lock_guard<std::mutex> lock(mutex);
                log.push_back(message);
            };
            CheckpointManager m("/run", o);
            for (int64_t i = first; i <= last; ++i) {
                w[static_cast<size_t>(i) * kChunkBytes / 4] += 1.0f;  // chunk i of the rank's shard changes
                VarCollection v;
                v.add("w" + std::to_string(rank),
                      Array::borrow(DType::float32, 4, {static_cast<int64_t>(kFloats)}, w.data()));
                m.save(v, i);
            }
            m.close();
        });
    };
    const auto shares = [&] {
        std::vector<std::string> found;
        for (const std::string& line : log)
            if (line.find(" shares ") != std::string::npos || line.find("in full") != std::string::npos)
                found.push_back(line);
        std::sort(found.begin(), found.end());
        log.clear();
        return found;
    };
    session(0, 1, 2);
    shares();
    // A new process: its managers have committed nothing yet. Its state starts over, so chunks 0 and 1 differ from
    // step 1's too, besides chunk 2: 5 of 8 are shared.
    session(2, 2, 2);
    CHECK(shares() ==
          std::vector<std::string>{
              fmt::format("Rank 0's shard of step 2 shares {} bytes with /run/0000000001/shard-00000-of-00002.npz",
                          5 * kChunkBytes),
              fmt::format("Rank 1's shard of step 2 shares {} bytes with /run/0000000001/shard-00001-of-00002.npz",
                          5 * kChunkBytes)});
    session(3, 3, 3);  // another world size: no shard of that name in step 2, so full saves that say why
    const std::vector<std::string> three = shares();
    REQUIRE(three.size() == 3);
    for (const std::string& line : three) CHECK_THAT(line, Contains("in full") && Contains("0000000002/shard-"));
}

// ---------------------------------------------------------------------------------------- safetensors checkpoints

namespace {

// Three float32 tensors whose sizes are no multiple of a chunk, so that chunks straddle them: 480004 bytes of data,
// 29 whole chunks and a last one of 4868 bytes.
struct SafetensorsRun {
    std::shared_ptr<Storage> storage;
    std::vector<std::string> log;
    std::vector<float> a = std::vector<float>(40000, 1.0f), b = std::vector<float>(30001, 2.0f),
                       c = std::vector<float>(50000, 3.0f);

    explicit SafetensorsRun(std::shared_ptr<Storage> s = std::make_shared<MemoryStorage>()) : storage(std::move(s)) {}
    CheckpointManager::Options options() {
        CheckpointManager::Options o;
        o.storage = storage;
        o.keep = 2;
        o.format = Format::safetensors;
        o.log = [this](int, const std::string& message) { log.push_back(message); };
        return o;
    }
    VarCollection vars(std::vector<float>* into = nullptr) {
        VarCollection v;
        std::vector<float>* arrays[] = {&a, &b, &c};
        const char* names[] = {"a", "b", "c"};
        for (int i = 0; i < 3; ++i) {
            std::vector<float>& x = into != nullptr ? into[i] : *arrays[i];
            v.add(names[i], Array::borrow(DType::float32, 4, {static_cast<int64_t>(x.size())}, x.data()));
        }
        return v;
    }
    std::vector<std::string> shares() { return sharing_lines(log); }
    // Checkpoint `index` restored, compared with the arrays now; and where its data starts in the file.
    bool restores_as_now(CheckpointManager& m, int64_t index) {
        std::vector<float> into[] = {std::vector<float>(a.size()), std::vector<float>(b.size()),
                                     std::vector<float>(c.size())};
        VarCollection v = vars(into);
        m.restore(v, index);
        return into[0] == a && into[1] == b && into[2] == c;
    }
    uint64_t data_start(const std::string& path) {
        const std::unique_ptr<InputFile> file = storage->open_read(path);
        unsigned char length[8];
        REQUIRE(file->read_at(0, length, 8) == 8);
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = n << 8 | length[i];
        return 8 + n;
    }
};

constexpr uint64_t kWholeChunks = 480004 / kSafetensorsChunkBytes;  // 29

}  // namespace

TEST_CASE("a safetensors manager's save shares the chunks that did not change with the checkpoint it saved before") {
    SafetensorsRun run;
    auto async = GENERATE(false, true);
    INFO((async ? "async" : "synchronous"));
    CheckpointManager::Options o = run.options();
    o.async = async;
    CheckpointManager m("/run", o);
    m.save(run.vars(), 0);
    m.wait();
    CHECK(run.shares().empty());  // nothing on disk to share with
    run.b[0] = -1.0f;             // byte 160000 of the data: one chunk straddling "a" and "b" changes
    m.save(run.vars(), 1);
    m.wait();
    CHECK_THAT(run.shares().at(0), Contains(fmt::format("Checkpoint 1 shares {} bytes of its",
                                                        (kWholeChunks - 1) * kSafetensorsChunkBytes)) &&
                                       Contains("with checkpoint 0"));
    run.c.back() = -2.0f;  // the last chunk, never shared (it is not whole)
    run.a[0] = -3.0f;      // chunk 0
    m.save(run.vars(), 2);
    m.wait();
    CHECK_THAT(run.shares().at(0), Contains(fmt::format("Checkpoint 2 shares {} bytes of its",
                                                        (kWholeChunks - 1) * kSafetensorsChunkBytes)));
    CHECK(m.list() == std::vector<int64_t>{1, 2});  // retention removed checkpoint 1's base: 1 is whole
    CHECK(run.restores_as_now(m, 2));
    CHECK(run.data_start("/run/0000000002.safetensors") % 4096 == 0);
    run.a[0] = 1.0f;
    run.c.back() = 3.0f;
    CHECK(run.restores_as_now(m, 1));
}

TEST_CASE("a safetensors manager's first save, and a save after its base changed, are full ones that say why") {
    SafetensorsRun run;
    {
        CheckpointManager first("/run", run.options());
        first.save(run.vars(), 0);
    }
    run.log.clear();
    CheckpointManager m("/run", run.options());
    m.save(run.vars(), 1);  // the file on disk records no chunk hashes: only the manager that saved it knows them
    CHECK(run.shares() == std::vector<std::string>{"Saving checkpoint 1 in full: checkpoint 0 was not saved by this "
                                                   "manager (a safetensors file records no chunk hashes)"});
    m.save(run.vars(), 2);
    CHECK_THAT(run.shares().at(0), Contains("Checkpoint 2 shares") && Contains("with checkpoint 1"));
    // Another program replaces checkpoint 2: the same tensors, saved again.
    CheckpointManager::Options other = run.options();
    other.incremental = false;
    {
        CheckpointManager elsewhere("/copy", other);
        elsewhere.save(run.vars(), 2);
    }
    auto* memory = static_cast<MemoryStorage*>(run.storage.get());
    memory->put("/run/0000000002.safetensors", ckpt::testing::stored(*memory, "/copy/0000000002.safetensors"));
    run.log.clear();
    m.save(run.vars(), 3);
    CHECK(run.shares() ==
          std::vector<std::string>{"Saving checkpoint 3 in full: checkpoint 2 changed since it was saved"});
    CHECK(run.restores_as_now(m, 3));
}

TEST_CASE("on XFS and btrfs a safetensors manager's save shares its unchanged chunks' blocks with the one before") {
    ckpt::testing::on_cloning_filesystems([](const std::string& mount_point) -> std::string {
        // A frozen 64 MiB "backbone" and a trained 1 MiB "head".
        std::vector<float> backbone(size_t{16} << 20), head(size_t{256} << 10);
        for (size_t i = 0; i < backbone.size(); ++i) backbone[i] = static_cast<float>(i % 100003);
        VarCollection v;
        v.add("backbone", Array::borrow(DType::float32, 4, {static_cast<int64_t>(backbone.size())}, backbone.data()));
        v.add("head", Array::borrow(DType::float32, 4, {static_cast<int64_t>(head.size())}, head.data()));
        auto storage = posix_storage();
        std::vector<std::string> log;
        CheckpointManager::Options o;
        o.storage = storage;
        o.format = Format::safetensors;
        o.log = [&](int, const std::string& message) { log.push_back(message); };
        CheckpointManager m(mount_point, o);
        m.save(v, 0);
        for (float& x : head) x += 1.0f;
        struct statvfs before {};
        ::statvfs(mount_point.c_str(), &before);
        m.save(v, 1);
        m.wait();
        struct statvfs after {};
        ::statvfs(mount_point.c_str(), &after);
        const uint64_t frozen = backbone.size() * 4, changed = head.size() * 4;
        const std::string shared_line = fmt::format("Checkpoint 1 shares {:.1f} MiB", frozen / 1048576.0);
        if (std::none_of(log.begin(), log.end(), [&](const std::string& l) { return l.find(shared_line) == 0; }))
            return "FAIL: no log line '" + shared_line + "'";
        const uint64_t used = (before.f_bfree - after.f_bfree) * before.f_frsize;
        if (used > 2 * changed)
            return fmt::format("FAIL: the save took {} bytes of the disk for {} changed", used, changed);
        const std::string path = mount_point + "/0000000001.safetensors";
        const uint64_t extents = storage->shared_bytes(path).value_or(0);  // FIEMAP's shared extents
        if (extents < frozen - uint64_t{kSafetensorsChunkBytes})
            return fmt::format("FAIL: the filesystem reports {} bytes shared", extents);
        storage->remove(mount_point + "/0000000000.safetensors");  // retention: checkpoint 1 keeps its bytes
        VarCollection back = m.read(1).first;
        if (std::memcmp(back.array(0).data(), backbone.data(), frozen) != 0 ||
            std::memcmp(back.array(1).data(), head.data(), changed) != 0)
            return "FAIL: read back differs";
        return fmt::format("OK: {} KiB of the disk used for {} KiB changed", used >> 10, changed >> 10);
    });
}
