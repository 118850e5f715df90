// SPDX-License-Identifier: Apache-2.0
// What each manager operation asks of its storage, counted (FaultyStorage's log, with no fault armed): one listing
// of the directory per operation, and retention that reads no checkpoint's metadata twice. On an object store each
// listing is a request, and each metadata read several.
#include "core/error.hpp"
#include "manager/checkpoint.hpp"
#include "support/faulty_storage.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace ckpt::core;
using ckpt::testing::FaultyStorage;
using ckpt::testing::TempDir;

namespace {

// Counts the operations named `name` on `path` since the last call.
class Requests {
public:
    explicit Requests(FaultyStorage& storage) : storage_(storage) {}
    // Listings of `dir` itself since the last call to since().
    size_t listings(const std::string& dir) const { return count("list", dir); }
    size_t opens() const { return count("open_read", ""); }
    void since() { seen_ = storage_.operations(); }

private:
    size_t count(const std::string& name, const std::string& path) const {
        size_t n = 0;
        const std::vector<ckpt::testing::Operation> log = storage_.log();
        for (size_t i = seen_; i < log.size(); ++i)
            if (log[i].name == name && (path.empty() || log[i].path == path)) ++n;
        return n;
    }
    FaultyStorage& storage_;
    uint64_t seen_ = 0;
};

VarCollection state(float value) {
    VarCollection vars;
    std::vector<float> w(16, value);
    vars.add("w", Array::copy_of(DType::float32, 4, {16}, w.data()));
    return vars;
}

}  // namespace

TEST_CASE("Each manager operation lists the directory once, and retention reads each checkpoint at most once") {
    TempDir tmp;
    const std::string dir = tmp.file("ckpt");
    auto storage = std::make_shared<FaultyStorage>(posix_storage());
    Requests requests(*storage);
    CheckpointManager::Options o;
    o.storage = storage;
    o.keep = 2;
    o.keep_best = 2;
    o.keep_seconds = 3600;  // every save keeps everything recent: retention reads every checkpoint's time
    o.best_metric = "loss";
    auto async = GENERATE(false, true);
    o.async = async;
    INFO((async ? "async" : "synchronous"));

    requests.since();
    CheckpointManager m(dir, o);
    CHECK(requests.listings(dir) <= 1);

    m.save(state(0), 0, {{"loss", 10}});  // the first save also looks for stale temporaries
    m.wait();
    for (int64_t i = 1; i <= 6; ++i) {
        requests.since();
        m.save(state(static_cast<float>(i)), i, {{"loss", 10.0 - static_cast<double>(i % 3)}});
        m.wait();
        CHECK(requests.listings(dir) == 1);
        CHECK(requests.opens() == 0);  // every checkpoint's metric and time are known from its own save
    }

    requests.since();
    CHECK(m.list().size() == 7);
    CHECK(requests.listings(dir) == 1);

    requests.since();
    VarCollection into = state(-1);
    CHECK(m.restore(into, std::nullopt) == 6);
    CHECK(requests.listings(dir) == 1);
    CHECK(requests.opens() == 1);

    requests.since();
    CHECK(m.read(std::nullopt).second == 6);
    CHECK(requests.listings(dir) == 1);

    requests.since();
    CHECK(m.metric(5, "loss") == std::optional<double>(8));
    CHECK(requests.listings(dir) == 1);
    CHECK(requests.opens() == 1);

    requests.since();
    CHECK(m.best() == std::optional<int64_t>(5));  // loss 8 at 2 and 5: a tie goes to the higher index
    CHECK(requests.listings(dir) == 1);
    CHECK(requests.opens() == 0);

    requests.since();
    CHECK(m.path(3) == dir + "/0000000003.npz");
    CHECK(requests.listings(dir) == 1);
    m.close();

    // Opened read-only: listing the directory is also how it finds the directory is there.
    CheckpointManager::Options ro = o;
    ro.read_only = true;
    ro.async = false;
    requests.since();
    CheckpointManager reader(dir, ro);
    CHECK(requests.listings(dir) == 1);
    // Not owning the directory, it cannot know that nobody replaced a checkpoint since: it reads every one.
    requests.since();
    CHECK(reader.best() == std::optional<int64_t>(5));
    CHECK(requests.listings(dir) == 1);
    CHECK(requests.opens() == 7);
}
