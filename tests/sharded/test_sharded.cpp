// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoints between the threads of one process (ThreadComm): the save protocol, its failures, restores
// with agreement and with another world size, and the single-process reader. tests/sharded/mpi_sharded.cpp runs the
// same protocol between MPI processes.
#include "core/error.hpp"
#include "sharded/manifest.hpp"
#include "manager/checkpoint.hpp"
#include "support/temp_dir.hpp"
#include "storage/memory_storage.hpp"
#include "support/thread_comm.hpp"
#include "support/stored.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

using namespace ckpt::core;
using ckpt::testing::run_ranks;
using ckpt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kRows = 10, kCols = 3;

// The value of element (row, col) of the global "emb" at step s: every piece is checkable on its own.
float emb_value(int64_t step, int64_t row, int64_t col) { return static_cast<float>(step * 1000 + row * 10 + col); }

// Rows [begin, end) of a world of `world` ranks: as even as possible, the first ranks one more.
std::pair<int64_t, int64_t> rows_of(int rank, int world) {
    const int64_t base = kRows / world, extra = kRows % world;
    const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
    return {begin, begin + base + (rank < extra ? 1 : 0)};
}

// Rank r's state at step s: its own whole variable "own_<r>", its rows of "emb", and on rank 0 a scalar "step".
struct State {
    std::vector<float> emb;
    std::vector<int32_t> own;
    int64_t step = 0;
    VarCollection vars;

    State(int rank, int world, int64_t s) {
        const auto [b, e] = rows_of(rank, world);
        for (int64_t row = b; row < e; ++row)
            for (int64_t c = 0; c < kCols; ++c) emb.push_back(emb_value(s, row, c));
        own = {rank, static_cast<int32_t>(s), 7};
        step = s;
        vars.add("emb", Array::borrow(DType::float32, 4, {e - b, kCols}, emb.data()));
        vars.set_rows(0, RowSplit{b, kRows});
        vars.add("own_" + std::to_string(rank), Array::borrow(DType::int32, 4, {3}, own.data()));
        if (rank == 0) vars.add("step", Array::borrow(DType::int64, 8, {}, &step));
    }
    void clear() {
        std::fill(emb.begin(), emb.end(), -1.0f);
        std::fill(own.begin(), own.end(), -1);
        step = -1;
    }
    bool holds(int rank, int world, int64_t s) const {
        const State want(rank, world, s);
        return emb == want.emb && own == want.own && (rank != 0 || step == s);
    }
};

CheckpointManager::Options sharded(std::shared_ptr<Comm> comm, std::shared_ptr<Storage> storage = nullptr) {
    CheckpointManager::Options o;
    o.comm = std::move(comm);
    o.keep = 0;
    if (storage) o.storage = std::move(storage);
    return o;
}

// The outcome of one rank's call, compared on the main thread (Catch2 asserts only there).
struct Outcome {
    int code = 0;
    std::string message;
    int64_t restored = -1;
    bool exact = false;
};

template <typename Body>
Outcome outcome_of(Body&& body) {
    Outcome o;
    try {
        body(o);
    } catch (const Error& e) {
        o.code = static_cast<int>(e.code());
        o.message = e.what();
    }
    return o;
}

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

void save_steps(const std::string& dir, int world, std::initializer_list<int64_t> steps) {
    run_ranks(world, [&](int rank, std::shared_ptr<Comm> comm) {
        CheckpointManager m(dir, sharded(comm));
        for (int64_t s : steps) {
            State state(rank, world, s);
            m.save(state.vars, s, {{"loss", 0.5}});
        }
    });
}

// Restores the latest step on `world` ranks; one outcome per rank.
std::vector<Outcome> restore_on(const std::string& dir, int world) {
    std::vector<Outcome> out(static_cast<size_t>(world));
    run_ranks(world, [&](int rank, std::shared_ptr<Comm> comm) {
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
            CheckpointManager m(dir, sharded(comm));
            State state(rank, world, 0);
            state.clear();
            o.restored = m.restore(state.vars, std::nullopt);
            o.exact = state.holds(rank, world, o.restored);
        });
    });
    return out;
}

// Every rank succeeded with step `step` and found its arrays exact.
void check_all_exact(const std::vector<Outcome>& out, int64_t step) {
    for (size_t r = 0; r < out.size(); ++r) {
        INFO("rank " << r);
        CHECK(out[r].code == 0);
        CHECK(out[r].message.empty());
        CHECK(out[r].restored == step);
        CHECK(out[r].exact);
    }
}

// Fails the creation of one rank's shard, as a full disk would.
class FailingShard final : public Storage {
public:
    // Fails the creation of `shard` after letting `spared` of them through.
    FailingShard(std::shared_ptr<Storage> inner, std::string shard, int spared = 0)
        : inner_(std::move(inner)), shard_(std::move(shard)), spared_(spared) {}
    std::unique_ptr<DirLock> lock(const std::string& d) override { return inner_->lock(d); }
    void make_dirs(const std::string& d) override { inner_->make_dirs(d); }
    std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp) override {
        if (base_name(target) == shard_ && spared_-- <= 0)
            fail(Code::io, "{}: cannot create a temporary file: No space left on device", target);
        return inner_->create_temp(target, temp);
    }
    std::unique_ptr<OutputFile> open_append(const std::string& p) override { return inner_->open_append(p); }
    void rename(const std::string& a, const std::string& b) override { inner_->rename(a, b); }
    void sync_dir(const std::string& d) override { inner_->sync_dir(d); }
    void remove(const std::string& p) override { inner_->remove(p); }
    std::vector<std::string> list(const std::string& d) override { return inner_->list(d); }
    std::unique_ptr<InputFile> open_read(const std::string& p) override { return inner_->open_read(p); }
    std::vector<std::string> list_dirs(const std::string& d) override { return inner_->list_dirs(d); }
    void rename_dir(const std::string& a, const std::string& b) override { inner_->rename_dir(a, b); }
    void remove_tree(const std::string& d) override { inner_->remove_tree(d); }
    bool renames_dirs() const override { return inner_->renames_dirs(); }
    std::optional<uint64_t> free_bytes(const std::string& d) override { return free_ ? free_ : inner_->free_bytes(d); }
    // What free_bytes reports from now on (as a nearly full disk would).
    void report_free(uint64_t bytes) { free_ = bytes; }

private:
    std::shared_ptr<Storage> inner_;
    std::string shard_;
    std::atomic<int> spared_;
    std::optional<uint64_t> free_;
};

// An object store: directories are listed and removed but never renamed (and a rename would fail the test).
class NoDirRenames final : public MemoryStorage {
public:
    bool renames_dirs() const override { return false; }
    void rename_dir(const std::string& from, const std::string& to) override {
        fail(Code::unsupported, "{}: rename_dir from {} on a storage that cannot rename directories", to, from);
    }
};

}  // namespace

TEST_CASE("A sharded save on 4 ranks commits one step directory that restores bit-exact on 4 ranks") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 4, {42});
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock", "0000000042"});
    CHECK(names_in(dir + "/0000000042") ==
          std::vector<std::string>{"manifest.json", "shard-00000-of-00004.npz", "shard-00001-of-00004.npz",
                                   "shard-00002-of-00004.npz", "shard-00003-of-00004.npz"});
    // Each shard is an ordinary npz holding only its rank's variables.
    NpzReader shard = NpzReader::open(*posix_storage(), dir + "/0000000042/shard-00002-of-00004.npz", {});
    REQUIRE(shard.size() == 2);
    CHECK(shard.entry(0).name == "emb");
    CHECK(shard.entry(0).header.shape == std::vector<int64_t>{2, kCols});
    CHECK(shard.entry(1).name == "own_2");

    check_all_exact(restore_on(dir, 4), 42);
}

TEST_CASE("The manifest records the step, the world size, the metadata and where every variable is") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 2, {7});
    std::ifstream in(dir + "/0000000007/manifest.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Manifest m = manifest_from_json(text, "manifest.json");
    CHECK(m.step == 7);
    CHECK(m.world_size == 2);
    REQUIRE(m.metadata.find("ckpt.metric.loss") != nullptr);
    CHECK(*m.metadata.find("ckpt.metric.loss") == "0.5");
    CHECK(*m.metadata.find("ckpt.index") == "7");
    const ManifestVariable* emb = m.find("emb");
    REQUIRE(emb != nullptr);
    CHECK(emb->shape == std::vector<int64_t>{kRows, kCols});
    REQUIRE(emb->pieces.size() == 2);
    CHECK(emb->pieces[0].shard == 0);
    CHECK(emb->pieces[0].row_end == 5);
    CHECK(emb->pieces[1].row_begin == 5);
    REQUIRE(m.find("own_1") != nullptr);
    CHECK(m.find("own_1")->shard == 1);
    CHECK(m.find("step")->shard == 0);
}

TEST_CASE("When one rank fails, no rank commits, the staging directory goes, and every rank gets the same error") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 4, {1});
    std::vector<Outcome> out(4);
    run_ranks(4, [&](int rank, std::shared_ptr<Comm> comm) {
        auto storage = rank == 2 ? std::make_shared<FailingShard>(posix_storage(), "shard-00002-of-00004.npz")
                                 : posix_storage();
        CheckpointManager m(dir, sharded(comm, storage));
        State state(rank, 4, 2);
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome&) { m.save(state.vars, 2); });
    });
    for (const Outcome& o : out) {
        CHECK(o.code == static_cast<int>(Code::io));
        CHECK(o.message == out[0].message);
    }
    CHECK(out[0].message.find("sharded save of step 2 failed on 1 rank: rank 2 of 4: ") != std::string::npos);
    CHECK(out[0].message.find("No space left on device") != std::string::npos);
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock", "0000000001"});
    for (const Outcome& o : restore_on(dir, 4)) CHECK(o.restored == 1);
}

TEST_CASE("A step saved by 4 ranks restores on 2, and one saved by 2 on 4, row splits read from every shard") {
    TempDir tmp;
    SECTION("4 to 2") {
        save_steps(tmp.file("a"), 4, {3});
        // Ranks restore what they own now: the whole variables of the old ranks are found by name in any shard.
        std::vector<Outcome> out(2);
        run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
            out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
                CheckpointManager m(tmp.file("a"), sharded(comm));
                State state(rank, 2, 0);
                state.clear();
                std::vector<int32_t> other(3, -1);  // rank r also takes over old rank r + 2's variable
                state.vars.add("own_" + std::to_string(rank + 2), Array::borrow(DType::int32, 4, {3}, other.data()));
                o.restored = m.restore(state.vars, std::nullopt);
                const State want(rank, 2, 3);
                o.exact = state.emb == want.emb &&
                          state.own == std::vector<int32_t>{rank, 3, 7} &&
                          other == std::vector<int32_t>{rank + 2, 3, 7};
            });
        });
        check_all_exact(out, 3);
    }
    SECTION("2 to 4") {
        save_steps(tmp.file("b"), 2, {5});
        std::vector<Outcome> out(4);
        run_ranks(4, [&](int rank, std::shared_ptr<Comm> comm) {
            out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
                CheckpointManager m(tmp.file("b"), sharded(comm));
                std::vector<float> emb;
                const auto [b, e] = rows_of(rank, 4);
                emb.assign(static_cast<size_t>((e - b) * kCols), -1.0f);
                VarCollection vars;
                vars.add("emb", Array::borrow(DType::float32, 4, {e - b, kCols}, emb.data()));
                vars.set_rows(0, RowSplit{b, kRows});
                o.restored = m.restore(vars, std::nullopt);
                o.exact = emb == State(rank, 4, 5).emb;
            });
        });
        check_all_exact(out, 5);
    }
}

TEST_CASE("A corrupt shard of the newest step moves every rank to the same older step") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 4, {10, 20});
    SECTION("a truncated shard") {
        fs::resize_file(dir + "/0000000020/shard-00003-of-00004.npz", 100);
    }
    SECTION("a missing shard") {
        fs::remove(dir + "/0000000020/shard-00001-of-00004.npz");
    }
    SECTION("a flipped byte in a whole variable (its CRC)") {
        NpzReader r = NpzReader::open(*posix_storage(), dir + "/0000000020/shard-00001-of-00004.npz", {});
        const uint64_t at = r.member(1).data_offset + r.entry(1).header.data_offset;  // own_1's first data byte
        std::fstream f(dir + "/0000000020/shard-00001-of-00004.npz", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(at));
        f.put('\x55');
    }
    check_all_exact(restore_on(dir, 4), 10);
}

TEST_CASE("A variable that matches no saved one fails the restore on every rank with the same mismatch") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 2, {1, 2});
    std::vector<Outcome> out(2);
    run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome&) {
            CheckpointManager m(dir, sharded(comm));
            State state(rank, 2, 0);
            std::vector<float> extra(2);
            if (rank == 1) state.vars.add("absent", Array::borrow(DType::float32, 4, {2}, extra.data()));
            m.restore(state.vars, std::nullopt);
        });
    });
    for (const Outcome& o : out) {
        CHECK(o.code == static_cast<int>(Code::mismatch));
        CHECK(o.message == out[0].message);
    }
    CHECK(out[0].message.find("rank 1 of 2: ") != std::string::npos);
    CHECK(out[0].message.find("missing from the step: 'absent'") != std::string::npos);
}

TEST_CASE("One process reads a sharded step whole, and lists it beside file checkpoints") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 4, {30});
    {
        CheckpointManager::Options o;
        o.keep = 0;
        CheckpointManager m(dir, o);
        std::vector<float> w{1, 2};
        VarCollection file_vars;
        file_vars.add("w", Array::borrow(DType::float32, 4, {2}, w.data()));
        m.save(file_vars, 31);
        CHECK(m.list() == std::vector<int64_t>{30, 31});
        CHECK(m.path(30) == dir + "/0000000030");
        CHECK(m.path(31) == dir + "/0000000031.npz");
        auto [vars, index] = m.read(30);
        CHECK(index == 30);
        const auto i = vars.find("emb");
        REQUIRE(i);
        REQUIRE(vars.array(*i).shape() == std::vector<int64_t>{kRows, kCols});
        const float* emb = static_cast<const float*>(vars.array(*i).data());
        bool exact = true;
        for (int64_t r = 0; r < kRows; ++r)
            for (int64_t c = 0; c < kCols; ++c) exact = exact && emb[r * kCols + c] == emb_value(30, r, c);
        CHECK(exact);
        CHECK(vars.find("own_3"));
        CHECK(*m.metric(30, "loss") == 0.5);
    }
}

TEST_CASE("Retention removes old step directories, and opening removes stale staging directories") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    fs::create_directories(dir + "/.0000000009.tmp-abcDEF");
    fs::create_directories(dir + "/0000000008");  // no manifest: never a checkpoint, and removed
    run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        auto o = sharded(comm);
        o.keep = 2;
        CheckpointManager m(dir, o);
        for (int64_t s : {1, 2, 3}) {
            State state(rank, 2, s);
            m.save(state.vars, s);
        }
    });
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock", "0000000002", "0000000003"});
}

TEST_CASE("The manifest parser refuses what is not a manifest, naming the problem") {
    const auto error_of = [](const std::string& text) {
        try {
            manifest_from_json(text, "m.json");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string head = R"({"format":"ckpt-sharded","version":1,"step":1,"world_size":2,)"
                             R"("shards":["shard-00000-of-00002.npz","shard-00001-of-00002.npz"],"metadata":{},)";
    CHECK(error_of("[") .find("m.json: manifest: not JSON") == 0);
    CHECK(error_of(std::string(100, '[')).find("nested deeper than") != std::string::npos);
    CHECK(error_of(head + R"("variables":[{"name":"a","dtype":"float32","itemsize":4,"shape":[2],"shard":2}]})")
              .find("shard is 2, outside [0, 1]") != std::string::npos);
    CHECK(error_of(head + R"("variables":[{"name":"a","dtype":"float32","itemsize":4,"shape":[4],)"
                          R"("pieces":[{"shard":0,"rows":[0,2]},{"shard":1,"rows":[3,4]}]}]})")
              .find("do not tile") != std::string::npos);
    CHECK(error_of(head + R"("variables":[{"name":"a","dtype":"float33","itemsize":4,"shape":[2],"shard":0}]})")
              .find("unknown dtype 'float33'") != std::string::npos);
    CHECK(error_of(head + R"("variables":[]})") == "no error");
}

TEST_CASE("The in-memory storage holds sharded steps: saved, replaced, restored, retained, cleaned up") {
    auto storage = std::make_shared<MemoryStorage>();
    storage->make_dirs("run/ckpt/.0000000005.tmp-abcDEF");  // a stale staging directory
    storage->put("run/ckpt/.0000000005.tmp-abcDEF/shard-00000-of-00002.npz", "partial");
    std::vector<Outcome> out(2);
    run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
            auto options = sharded(comm, storage);
            options.keep = 2;
            CheckpointManager m("run/ckpt", options);
            for (int64_t s : {1, 2, 3}) {
                State state(rank, 2, s);
                m.save(state.vars, s);
            }
            State again(rank, 2, 22);
            m.save(again.vars, 2);  // replaces step 2
            State state(rank, 2, 0);
            state.clear();
            m.restore(state.vars, 2);
            const bool replaced = state.holds(rank, 2, 22);
            state.clear();
            o.restored = m.restore(state.vars, std::nullopt);
            o.exact = replaced && state.holds(rank, 2, 3) && m.list() == std::vector<int64_t>{2, 3};
        });
    });
    check_all_exact(out, 3);
    auto dirs = storage->list_dirs("run/ckpt");
    std::sort(dirs.begin(), dirs.end());
    CHECK(dirs == std::vector<std::string>{"0000000002", "0000000003"});
    CHECK(storage->exists("run/ckpt/0000000003/manifest.json"));
}

TEST_CASE("A rank whose own arguments are bad fails the save on every rank instead of leaving them waiting") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    std::vector<Outcome> out(3);
    run_ranks(3, [&](int rank, std::shared_ptr<Comm> comm) {
        CheckpointManager m(dir, sharded(comm));
        State state(rank, 3, 1);
        const Metrics metrics = rank == 1 ? Metrics{{"", 1.0}} : Metrics{{"loss", 1.0}};
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome&) { m.save(state.vars, 1, metrics); });
    });
    for (const Outcome& o : out) {
        CHECK(o.code == static_cast<int>(Code::invalid));
        CHECK(o.message == out[0].message);
    }
    CHECK(out[0].message.find("failed on 1 rank: rank 1 of 3: ") != std::string::npos);
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock"});
}

TEST_CASE("Where directories cannot be renamed, the manifest written last commits a step") {
    auto storage = std::make_shared<NoDirRenames>();
    const std::string dir = "bucket/run/ckpt";
    const auto dirs_in = [&] {
        auto names = storage->list_dirs(dir);
        std::sort(names.begin(), names.end());
        return names;
    };
    std::vector<Outcome> out(2);
    run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
            CheckpointManager m(dir, sharded(comm, storage));
            for (int64_t s : {1, 2}) {
                State state(rank, 2, s);
                m.save(state.vars, s);
            }
            State again(rank, 2, 22);
            m.save(again.vars, 2);  // replaces step 2 in place
            State state(rank, 2, 0);
            state.clear();
            o.restored = m.restore(state.vars, std::nullopt);
            o.exact = state.holds(rank, 2, 22) && m.list() == std::vector<int64_t>{1, 2};
        });
    });
    check_all_exact(out, 2);
    CHECK(dirs_in() == std::vector<std::string>{"0000000001", "0000000002"});
    auto files = storage->list(dir + "/0000000002");
    std::sort(files.begin(), files.end());
    CHECK(files == std::vector<std::string>{"manifest.json", "shard-00000-of-00002.npz", "shard-00001-of-00002.npz"});

    SECTION("a rank that fails leaves no step directory, and every rank gets the same error") {
        run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
            std::shared_ptr<Storage> mine = storage;
            if (rank == 1) mine = std::make_shared<FailingShard>(storage, "shard-00001-of-00002.npz");
            CheckpointManager m(dir, sharded(comm, mine));
            State state(rank, 2, 3);
            out[static_cast<size_t>(rank)] = outcome_of([&](Outcome&) { m.save(state.vars, 3); });
        });
        for (const Outcome& o : out) {
            CHECK(o.code == static_cast<int>(Code::io));
            CHECK(o.message == out[0].message);
        }
        CHECK(out[0].message.find("sharded save of step 3 failed on 1 rank: rank 1 of 2: ") != std::string::npos);
        CHECK(dirs_in() == std::vector<std::string>{"0000000001", "0000000002"});
    }
    SECTION("shards without a manifest are no checkpoint; the next manager's first save removes them") {
        storage->make_dirs(dir + "/0000000003");
        storage->put(dir + "/0000000003/shard-00000-of-00002.npz",
                     ckpt::testing::stored(*storage, dir + "/0000000002/shard-00000-of-00002.npz"));
        CheckpointManager::Options ro;
        ro.storage = storage;
        ro.read_only = true;
        CHECK(CheckpointManager(dir, ro).list() == std::vector<int64_t>{1, 2});
        CHECK(dirs_in().size() == 3);  // a reader removes nothing
        size_t after_restore = 0;
        run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
            out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
                CheckpointManager m(dir, sharded(comm, storage));
                State state(rank, 2, 0);
                state.clear();
                o.restored = m.restore(state.vars, std::nullopt);
                o.exact = state.holds(rank, 2, 22);
                comm->barrier();
                if (rank == 0) after_restore = dirs_in().size();  // restoring removed nothing
                m.save(state.vars, 4);
            });
        });
        check_all_exact(out, 2);
        CHECK(after_restore == 3);
        CHECK(dirs_in() == std::vector<std::string>{"0000000001", "0000000002", "0000000004"});
    }
    SECTION("retention removes a step's manifest and its shards") {
        run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
            auto o = sharded(comm, storage);
            o.keep = 1;
            CheckpointManager m(dir, o);
            State state(rank, 2, 4);
            m.save(state.vars, 4);
        });
        CHECK(dirs_in() == std::vector<std::string>{"0000000004"});
    }
}

TEST_CASE("A rank whose shard will not fit in the free space fails the save on every rank before writing it") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 2, {1});
    std::vector<Outcome> out(2);
    run_ranks(2, [&](int rank, std::shared_ptr<Comm> comm) {
        auto storage = std::make_shared<FailingShard>(posix_storage(), "none");
        if (rank == 1) storage->report_free(100);
        CheckpointManager m(dir, sharded(comm, storage));
        State state(rank, 2, 2);
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome&) { m.save(state.vars, 2); });
    });
    INFO(out[0].message);
    for (const Outcome& o : out) {
        CHECK(o.code == static_cast<int>(Code::io));
        CHECK(o.message == out[0].message);
    }
    CHECK(out[0].message.find("failed on 1 rank: rank 1 of 2: " + dir + "/.0000000002.tmp-") != std::string::npos);
    CHECK(out[0].message.find("/shard-00001-of-00002.npz: not enough space for this rank's shard of checkpoint 2: it "
                              "needs up to ") != std::string::npos);
    CHECK(out[0].message.find("and 100 bytes is free") != std::string::npos);
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock", "0000000001"});
}

TEST_CASE("An asynchronous sharded save commits at the next collective call, and a failed write reaches every rank") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    std::vector<Outcome> out(3);
    std::vector<std::vector<int64_t>> listed(3);
    run_ranks(3, [&](int rank, std::shared_ptr<Comm> comm) {
        out[static_cast<size_t>(rank)] = outcome_of([&](Outcome& o) {
            auto storage = std::make_shared<FailingShard>(posix_storage(), rank == 2 ? "shard-00002-of-00003.npz" : "none", 1);
            auto options = sharded(comm, storage);
            options.async = true;
            CheckpointManager m(dir, options);
            State one(rank, 3, 1);
            m.save(one.vars, 1);
            one.clear();  // the save copied the arrays: changing them now changes nothing on disk
            listed[static_cast<size_t>(rank)] = m.list();  // not yet committed
            State two(rank, 3, 2);
            try {
                m.save(two.vars, 2);  // commits step 1, starts step 2 (whose shard fails on rank 2)
                m.wait();             // commits step 2: fails on every rank
            } catch (const Error& e) {
                o.code = static_cast<int>(e.code());
                o.message = e.what();
            }
            State back(rank, 3, 0);
            back.clear();
            o.restored = m.restore(back.vars, std::nullopt);
            o.exact = back.holds(rank, 3, 1);
        });
    });
    INFO(out[0].message);
    for (size_t r = 0; r < out.size(); ++r) {
        CHECK(listed[r].empty());
        CHECK(out[r].code == static_cast<int>(Code::io));
        CHECK(out[r].message == out[0].message);
        CHECK(out[r].restored == 1);
        CHECK(out[r].exact);
    }
    CHECK(out[0].message.find("sharded save of step 2 failed on 1 rank: rank 2 of 3: ") != std::string::npos);
    CHECK(names_in(dir) == std::vector<std::string>{".ckpt.lock", "0000000001"});

    SECTION("closing commits the last step") {
        run_ranks(3, [&](int rank, std::shared_ptr<Comm> comm) {
            auto options = sharded(comm);
            options.async = true;
            CheckpointManager m(dir, options);
            State three(rank, 3, 3);
            m.save(three.vars, 3);
            m.close();
        });
        check_all_exact(restore_on(dir, 3), 3);
    }
}

TEST_CASE("One process falls back past a step whose shard is missing, as the ranks of a sharded restore do") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    save_steps(dir, 2, {1, 2});
    fs::remove(dir + "/0000000002/shard-00001-of-00002.npz");
    CheckpointManager::Options o;
    o.keep = 0;
    CheckpointManager m(dir, o);
    auto [vars, index] = m.read(std::nullopt);
    CHECK(index == 1);
    CHECK(vars.find("own_1"));
    try {
        m.read(2);  // asked for by index: no fallback
        FAIL("a step with a missing shard was read");
    } catch (const Error& e) {
        CHECK(e.code() == Code::not_found);
        CHECK_THAT(e.what(), Catch::Contains("shard-00001-of-00002.npz"));
    }
}
