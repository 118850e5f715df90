// SPDX-License-Identifier: Apache-2.0
// ckpt::Comm, ckpt::CommHandle, row splits, a manager with a communicator, and ckpt::Step.
#include "support.hpp"

#include <catch2/catch.hpp>

using test::TempDir;

namespace {

// A world of one rank.
class Solo final : public ckpt::Comm {
public:
    int32_t rank() const override { return 0; }
    int32_t size() const override { return 1; }
    void barrier() override {}
    int64_t all_reduce(int64_t value, uint32_t) override { return value; }
    void broadcast(void*, size_t, int32_t) override {}
    void all_gather(const void* send, size_t size, void* recv) override { std::memcpy(recv, send, size); }
};

class Broken final : public ckpt::Comm {
public:
    int32_t rank() const override { throw ckpt::Error(CKPT_EIO, "no network"); }
    int32_t size() const override { return 2; }
    void barrier() override {}
    int64_t all_reduce(int64_t value, uint32_t) override { return value; }
    void broadcast(void*, size_t, int32_t) override {}
    void all_gather(const void*, size_t, void*) override {}
};

}  // namespace

TEST_CASE("A CommHandle reports what its Comm says, and a Comm that throws fails it with the code", "[comm]") {
    const ckpt::CommHandle comm(std::make_shared<Solo>());
    CHECK(comm.rank() == 0);
    CHECK(comm.size() == 1);
    try {
        ckpt::CommHandle broken(std::make_shared<Broken>());
        FAIL("no error");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()).find("communicator callback 'rank' failed") != std::string::npos);
    }
}

TEST_CASE("A manager with a communicator saves a sharded step that ckpt::Step reads", "[comm][manager]") {
    TempDir dir;
    std::vector<float> emb{0, 1, 2, 3, 4, 5};
    {
        ckpt::ManagerOptions o;
        o.comm = ckpt::CommHandle(std::make_shared<Solo>());
        ckpt::Manager m(dir.path(), o);
        ckpt::Vars vars;
        vars.add("emb", emb.data(), ckpt::Shape{3, 2});
        vars.set_rows(0, 0, 3);
        CHECK(vars.rows(0) == std::make_pair(int64_t{0}, int64_t{3}));
        vars.clear_rows(0);
        CHECK(!vars.rows(0));
        vars.set_rows(0, 0, 3);
        m.save(vars, 9);
    }
    ckpt::Step step(dir.path() + "/ckpt/0000000009");
    CHECK(step.index() == 9);
    CHECK(step.world_size() == 1);
    CHECK(step.shard(0) == "shard-00000-of-00001.npz");
    REQUIRE(step.size() == 1);
    CHECK(step.name(0) == "emb");
    CHECK(step.dtype(0) == ckpt::Dtype::float32);
    CHECK(step.itemsize(0) == 4);
    CHECK(step.shape(0) == ckpt::Shape{3, 2});
    CHECK(step.nbytes(0) == 24);
    CHECK(step.pieces(0) == 1);
    std::vector<float> rows(4);
    step.read_rows(0, 1, 2, rows.data(), rows.size() * sizeof(float));
    CHECK(rows == std::vector<float>{2, 3, 4, 5});
    CHECK(step.metadata("ckpt.index") == std::optional<std::string_view>("9"));
    CHECK(!step.metadata_items().empty());
}

TEST_CASE("A Storage subclass holds sharded steps: renamed into place, or committed by the manifest written last",
          "[comm][storage]") {
    const bool renamable = GENERATE(false, true);
    auto storage = std::make_shared<test::MapStorage>();
    storage->set_directories(renamable ? ckpt::Storage::Directories::renamable : ckpt::Storage::Directories::prefixes);
    std::vector<float> emb{0, 1, 2, 3, 4, 5};
    ckpt::ManagerOptions o;
    o.storage = storage;
    o.comm = ckpt::CommHandle(std::make_shared<Solo>());
    {
        ckpt::Manager m("bucket", o);
        ckpt::Vars vars;
        vars.borrow("emb", emb.data(), ckpt::Shape{3, 2});
        m.save(vars, 4);
        emb[0] = 40;
        m.save(vars, 4);  // replaced
    }
    CHECK(storage->exists("bucket/ckpt/0000000004/manifest.json"));
    CHECK(storage->exists("bucket/ckpt/0000000004/shard-00000-of-00001.npz"));
    CHECK(storage->counters().dir_renames.load() == (renamable ? 3 : 0));  // two commits, one step set aside
    std::vector<float> back(6, -1);
    ckpt::Vars vars;
    vars.borrow("emb", back.data(), ckpt::Shape{3, 2});
    ckpt::Manager m("bucket", o);
    CHECK(m.restore(vars) == 4);
    CHECK(back == emb);
}

TEST_CASE("A sharded save on a Storage without directories fails, saying so", "[comm][storage]") {
    std::vector<float> emb{0, 1};
    ckpt::ManagerOptions o;
    o.storage = std::make_shared<test::MapStorage>();
    o.comm = ckpt::CommHandle(std::make_shared<Solo>());
    ckpt::Manager m("bucket", o);
    ckpt::Vars vars;
    vars.add("emb", emb.data(), ckpt::Shape{2});
    try {
        m.save(vars, 1);
        FAIL("no error");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EUNSUPPORTED);
        CHECK_THAT(e.what(), Catch::Contains("cannot list directories (sharded checkpoints need it)"));
    }
}

TEST_CASE("What a Comm method throws is said once in the error", "[comm][errors]") {
    try {
        ckpt::CommHandle broken(std::make_shared<Broken>());
        FAIL("a Comm whose rank throws did not fail");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::EndsWith("communicator callback 'rank' failed: no network"));
        CHECK(test::occurrences(e.what(), "no network") == 1);
    }
}
