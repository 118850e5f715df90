// SPDX-License-Identifier: Apache-2.0
// Partial restores (Options::partial, Vars::restored), the manager's staging budget (max_staging_bytes) and its
// disk check through a Storage subclass's free_space.
#include "support.hpp"

#include <catch2/catch.hpp>

using test::MapStorage;
using test::TempDir;

namespace {

ckpt::Vars old_model() {
    ckpt::Vars v;
    v.add<float>("w", {0, 1, 2, 3, 4, 5}, {2, 3});
    v.add<double>("b", {1.5, 2.5});
    return v;
}

// The old model plus a variable the old file lacks, each holding values no restore would write.
ckpt::Vars grown_model() {
    ckpt::Vars v;
    v.add<float>("w", {-1, -1, -1, -1, -1, -1}, {2, 3});
    v.add<double>("b", {-1, -1});
    v.add<int32_t>("extra", {7, 7, 7, 7});
    return v;
}

ckpt::Options partial() {
    ckpt::Options o;
    o.partial = true;
    return o;
}

}  // namespace

TEST_CASE("A partial restore fills what the file has and leaves the rest", "[partial]") {
    TempDir dir;
    ckpt::save(dir.path("old.npz"), old_model());
    ckpt::Vars target = grown_model();
    CHECK_FALSE(target.restored(0));  // before any restore
    ckpt::restore(dir.path("old.npz"), target, partial());
    CHECK(target.get<float>("w").to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
    CHECK(target.get<double>("b").to_vector() == std::vector<double>{1.5, 2.5});
    CHECK(target.get<int32_t>("extra").to_vector() == std::vector<int32_t>{7, 7, 7, 7});
    CHECK(target.restored(0));
    CHECK(target.restored("b"));
    CHECK_FALSE(target.restored("extra"));
    CHECK(test::code_of([&] { (void)target.restored(3); }) == CKPT_ENOTFOUND);
}

TEST_CASE("Restores stay strict by default; a partial one still fails on another shape", "[partial][errors]") {
    TempDir dir;
    ckpt::save(dir.path("old.npz"), old_model());
    ckpt::Vars target = grown_model();
    try {
        ckpt::restore(dir.path("old.npz"), target);
        FAIL("a restore missing a variable did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
        CHECK_THAT(e.what(), Catch::Contains("old.npz: cannot restore; missing from the file: 'extra'"));
    }
    CHECK(target.get<float>("w")[0] == -1.0f);
    CHECK_FALSE(target.restored("w"));

    ckpt::Vars reshaped;
    reshaped.add_zeros<float>("w", {3, 2});
    reshaped.add_zeros<double>("extra", {1});
    try {
        ckpt::restore(dir.path("old.npz"), reshaped, partial());
        FAIL("a partial restore of another shape did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
        CHECK_THAT(e.what(), Catch::Contains("'w' is float32 (3, 2) in the collection but float32 (2, 3) in the file"));
        CHECK_THAT(e.what(), !Catch::Contains("missing"));
    }
}

TEST_CASE("A partial manager resumes a grown model from an older checkpoint", "[partial][manager]") {
    TempDir dir;
    {
        ckpt::Manager m(dir.path());
        m.save(old_model(), 3);
        ckpt::Vars strict = grown_model();
        CHECK(test::code_of([&] { m.restore(strict); }) == CKPT_EMISMATCH);
    }
    ckpt::ManagerOptions options;
    options.npz.partial = true;
    ckpt::Manager m(dir.path(), options);
    ckpt::Vars target = grown_model();
    CHECK(m.restore(target) == 3);
    CHECK(target.get<double>("b").to_vector() == std::vector<double>{1.5, 2.5});
    CHECK(target.get<int32_t>("extra").to_vector() == std::vector<int32_t>{7, 7, 7, 7});
    CHECK(target.restored("w"));
    CHECK_FALSE(target.restored("extra"));
}

TEST_CASE("Async saves round-trip under staging budgets smaller and larger than them", "[manager][async]") {
    for (const uint64_t budget : {uint64_t{64}, uint64_t{1} << 20}) {
        TempDir dir;
        ckpt::ManagerOptions options;
        options.async = true;
        options.max_staging_bytes = budget;
        options.keep = 3;
        ckpt::Manager m(dir.path(), options);
        std::vector<double> w(10000);  // 80 kB
        int64_t step = 0;
        ckpt::Vars vars;
        vars.borrow("w", w);
        vars.borrow("step", step);
        for (step = 1; step <= 3; ++step) {
            for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<double>(k) + static_cast<double>(step);
            m.save(vars, step);
        }
        // Copied, or already written: changing the arrays now changes no save.
        std::fill(w.begin(), w.end(), -1.0);
        m.wait();
        for (int64_t s = 1; s <= 3; ++s) {
            auto [back, idx] = m.read(s);
            CHECK(idx == s);
            CHECK(back.get<int64_t>("step")[0] == s);
            const std::vector<double> got = back.get<double>("w").to_vector();
            CHECK(got[0] == static_cast<double>(s));
            CHECK(got[9999] == 9999.0 + static_cast<double>(s));
        }
    }
}

TEST_CASE("A storage reporting too little space fails the save and keeps the previous checkpoint",
          "[storage][manager][errors]") {
    auto storage = std::make_shared<MapStorage>();
    ckpt::ManagerOptions options;
    options.storage = storage;
    ckpt::Manager m("run", options);
    m.save(old_model(), 1);  // nullopt: the medium cannot tell, no check
    storage->report_free_space(100);
    try {
        m.save(old_model(), 2);
        FAIL("a save larger than the free space did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("run/ckpt/0000000002.npz: not enough space for checkpoint 2: it needs up to") &&
                                 Catch::EndsWith("and 100 bytes is free"));
    }
    CHECK(storage->free_space_asked().back() == "run/ckpt");
    CHECK(m.list() == std::vector<int64_t>{1});
    CHECK(storage->paths() == std::vector<std::string>{"run/ckpt/0000000001.npz"});
    ckpt::Vars into;
    into.add_zeros<float>("w", {2, 3});
    into.add_zeros<double>("b", {2});
    CHECK(m.restore(into) == 1);
    CHECK(into.get<float>("w")[5] == 5.0f);

    storage->report_free_space(std::nullopt, "statfs failed");
    try {
        m.save(old_model(), 3);
        FAIL("a failing free_space did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("storage callback 'free_space'") && Catch::EndsWith(": statfs failed"));
    }
    CHECK(m.list() == std::vector<int64_t>{1});
}

TEST_CASE("A storage with room saves, and one running low warns in the log", "[storage][manager]") {
    auto storage = std::make_shared<MapStorage>();
    storage->report_free_space(uint64_t{1} << 40);
    std::mutex mutex;
    std::vector<std::string> warnings;
    ckpt::ManagerOptions options;
    options.storage = storage;
    options.keep = 5;
    options.log = [&](ckpt::LogLevel level, std::string_view line) {
        std::lock_guard<std::mutex> lock(mutex);
        if (level == ckpt::LogLevel::warning) warnings.emplace_back(line);
    };
    ckpt::Manager m("run", options);
    m.save(old_model(), 1);
    CHECK(warnings.empty());
    storage->report_free_space(3000);  // room for this save, not for the four more keep = 5 will accumulate
    m.save(old_model(), 2);
    CHECK(m.list() == std::vector<int64_t>{1, 2});
    m.close();
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::StartsWith("run/ckpt: 3000 bytes free, less than the"));
}
