// SPDX-License-Identifier: Apache-2.0
// ckpt::Manager: numbered checkpoints, retention, resuming from the latest good one past corrupt files, the
// directory lock, background saves and their errors.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <mutex>
#include <thread>
#include <unistd.h>

using test::MapStorage;
using test::TempDir;

namespace {

struct Trainer {
    std::vector<float> w = std::vector<float>(4, 0.0f);
    int64_t step = 0;
    ckpt::Vars vars;
    Trainer() {
        vars.borrow("w", w, {2, 2});
        vars.borrow("step", step);
    }
    void train_to(int64_t s) {
        step = s;
        for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(s) + 0.25f * static_cast<float>(k);
    }
};

struct Log {
    std::mutex mutex;
    std::vector<std::pair<ckpt::LogLevel, std::string>> lines;
    std::function<void(ckpt::LogLevel, std::string_view)> sink() {
        return [this](ckpt::LogLevel level, std::string_view line) {
            std::lock_guard<std::mutex> lock(mutex);
            lines.emplace_back(level, std::string(line));
        };
    }
    bool has(ckpt::LogLevel level, const std::string& text) {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& l : lines)
            if (l.first == level && l.second.find(text) != std::string::npos) return true;
        return false;
    }
};

// Saves steps 1 to 5 of a model of 16 chunks of 64 KiB, each changing one element, through a manager in memory;
// restores the latest, and returns the checkpoints whose saves the log says shared chunks with an earlier one.
std::vector<int64_t> sharing_saves(ckpt::ManagerOptions options) {
    Log log;
    options.storage = ckpt::Storage::memory();
    options.log = log.sink();
    ckpt::Manager manager("run", options);
    std::vector<float> w(256 * 1024);
    int64_t step = 0;
    ckpt::Vars vars;
    vars.borrow("w", w);
    vars.borrow("step", step);
    for (step = 1; step <= 5; ++step) {
        for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
        w[1000] = static_cast<float>(step);
        manager.save(vars, step);
    }
    std::fill(w.begin(), w.end(), 0.0f);
    CHECK(manager.restore(vars) == 5);
    CHECK(step == 5);
    CHECK(w[1000] == 5.0f);
    CHECK(w[1001] == 1001.0f);
    manager.close();
    std::vector<int64_t> shared;
    for (const auto& line : log.lines)
        if (line.second.find(" shares ") != std::string::npos)
            shared.push_back(std::stoll(line.second.substr(std::strlen("Checkpoint "))));
    return shared;
}

}  // namespace

TEST_CASE("A training loop saves, keeps the newest, and resumes from the latest checkpoint", "[manager]") {
    TempDir dir;
    Log log;
    ckpt::ManagerOptions options;
    options.keep = 2;
    options.keep_every = 100;
    options.log = log.sink();
    {
        ckpt::Manager manager(dir.path(), options);
        Trainer t;
        CHECK_FALSE(manager.resume(t.vars).has_value());  // nothing saved yet: start from scratch
        CHECK(log.has(ckpt::LogLevel::info, "No checkpoints found"));
        CHECK_FALSE(manager.latest_index().has_value());
        CHECK(manager.list().empty());
        try {
            manager.restore(t.vars);
            FAIL("restore with no checkpoint did not throw");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ENOTFOUND);
            CHECK(std::string(e.what()) == ckpt_error_message());
        }
        for (int64_t s : {50, 100, 150, 200, 250}) {
            t.train_to(s);
            t.vars.set_metadata("step", std::to_string(s));
            manager.save(t.vars, s);
        }
        CHECK(manager.list() == std::vector<int64_t>{100, 200, 250});  // newest two, and multiples of 100
        CHECK(manager.latest_index() == std::optional<int64_t>(250));
        CHECK(manager.path(250) == dir.path("ckpt/0000000250.npz"));
        CHECK(ckpt::checkpoint_idx(manager.path(250)) == std::optional<int64_t>(250));
        manager.close();
        CHECK_FALSE(manager);
    }
    // A new process, as after a restart.
    ckpt::Manager manager(dir.path(), options);
    Trainer t;
    CHECK(manager.resume(t.vars) == std::optional<int64_t>(250));
    CHECK(t.step == 250);
    CHECK(t.w[3] == 250.75f);
    CHECK(t.vars.metadata("step") == std::optional<std::string_view>("250"));
    CHECK(log.has(ckpt::LogLevel::info, "Resuming from"));
    CHECK(manager.restore(t.vars, 100) == 100);
    CHECK(t.step == 100);
    auto [vars, idx] = manager.read();
    CHECK(idx == 250);
    CHECK(vars.scalar<int64_t>("step") == 250);
    CHECK(manager.read(200).vars.get<float>("w")[0] == 200.0f);
    try {
        manager.restore(t.vars, 150);  // deleted by retention
        FAIL("restoring a deleted checkpoint did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ENOTFOUND);
    }
}

TEST_CASE("Resuming skips a corrupt newest checkpoint, logging it, unless fallback is off", "[manager][errors]") {
    TempDir dir;
    Log log;
    ckpt::ManagerOptions options;
    options.log = log.sink();
    Trainer t;
    {
        ckpt::Manager manager(dir.path(), options);
        t.train_to(1);
        manager.save(t.vars, 1);
        t.train_to(2);
        manager.save(t.vars, 2);
    }
    test::corrupt(dir.path("ckpt/0000000002.npz"), test::bytes_of(t.w));

    ckpt::Manager manager(dir.path(), options);
    Trainer back;
    CHECK(manager.restore(back.vars) == 1);
    CHECK(back.step == 1);
    CHECK(log.has(ckpt::LogLevel::warning, "0000000002.npz"));
    try {
        manager.restore(back.vars, 2);  // a given index never falls back
        FAIL("restoring the corrupt checkpoint did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        CHECK_THAT(e.what(), Catch::Contains("0000000002.npz"));
    }
    manager.close();

    options.fallback = false;
    ckpt::Manager strict(dir.path(), options);
    try {
        strict.restore(back.vars);
        FAIL("a corrupt newest checkpoint without fallback did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
    }
}

TEST_CASE("Opening a manager and resuming lists the directory once and opens the newest checkpoint once", "[manager]") {
    auto storage = std::make_shared<MapStorage>();
    storage->report_free_space(uint64_t{1} << 40);
    ckpt::ManagerOptions options;
    options.storage = storage;
    options.keep = 5;
    Trainer t;
    {
        ckpt::Manager manager("run", options);
        for (int64_t s = 1; s <= 3; ++s) {
            t.train_to(s);
            manager.save(t.vars, s);
        }
    }
    storage->report_free_space(3000);  // room for one more checkpoint, not for the three more keep = 5 accumulates
    Log log;
    options.log = log.sink();
    const int lists = storage->counters().lists, reads = storage->counters().reads;
    ckpt::Manager manager("run", options);
    CHECK(storage->counters().lists == lists);  // opening reads nothing: it makes the directory
    CHECK(storage->counters().reads == reads);
    CHECK_FALSE(log.has(ckpt::LogLevel::warning, "free"));
    Trainer back;
    CHECK(manager.restore(back.vars) == 3);
    CHECK(manager.path(3) == "run/ckpt/0000000003.npz");  // the checkpoint just restored: no listing
    CHECK(storage->counters().lists == lists + 1);
    CHECK(storage->counters().reads == reads + 1);
    CHECK(back.step == 3);
    CHECK(back.w == t.w);
    // The free space is judged at the first restore, at the size of the checkpoint it read.
    CHECK(log.has(ckpt::LogLevel::warning, "run/ckpt: 3000 bytes free, less than the"));
    CHECK(log.has(ckpt::LogLevel::warning, "3 more checkpoint(s)"));
    CHECK(manager.path(2) == "run/ckpt/0000000002.npz");  // another index is found by listing
    CHECK(storage->counters().lists == lists + 2);
}

TEST_CASE("A restore into a collection that does not fit is CKPT_EMISMATCH naming the missing variables",
          "[manager][errors]") {
    TempDir dir;
    ckpt::Manager manager(dir.path());
    Trainer t;
    t.train_to(3);
    manager.save(t.vars, 3);
    ckpt::Vars other;
    other.add_zeros<float>("w", {2, 2});
    other.add_zeros<float>("momentum", {2, 2});
    try {
        manager.restore(other);
        FAIL("a mismatched restore did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("momentum") && Catch::Contains("step"));
    }
    CHECK(other.get<float>("w")[0] == 0.0f);
}

TEST_CASE("A newer manager of the directory takes it over at its first save; the older one's saves are CKPT_EBUSY",
          "[manager][errors]") {
    TempDir dir;
    Trainer t;
    t.train_to(1);
    ckpt::Manager first(dir.path());
    first.save(t.vars, 1);
    ckpt::Manager second(dir.path());  // opening locks nothing
    second.save(t.vars, 2);
    try {
        first.save(t.vars, 3);
        FAIL("the older manager saved after the takeover");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EBUSY);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("another checkpoint manager of this process took the directory over"));
    }
    first.close();
    CHECK_NOTHROW(second.save(t.vars, 4));
}

TEST_CASE("Options reach the manager: subdir, layout, no directory creation", "[manager]") {
    TempDir dir;
    ckpt::ManagerOptions options;
    options.subdir = "";
    options.npz.layout = ckpt::Layout::objax;
    ckpt::Manager manager(dir.path(), options);
    Trainer t;
    manager.save(t.vars, 7);
    CHECK(manager.path(7) == dir.path("0000000007.npz"));
    ckpt::Options plain;
    plain.layout = ckpt::Layout::plain;
    CHECK(ckpt::read(manager.path(7), plain).names() == std::vector<std::string>{"names", "0", "1"});

    ckpt::ManagerOptions no_dir;
    no_dir.make_dir = false;
    try {
        ckpt::Manager missing(dir.path("absent"), no_dir);
        FAIL("a missing directory with make_dir off did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ENOTFOUND);
    }
    CHECK_THROWS_MATCHES(manager.save(t.vars, -5), ckpt::Error,
                         Catch::Predicate<ckpt::Error>([](const ckpt::Error& e) { return e.code() == CKPT_EINVAL; }));
}

TEST_CASE("Async saves copy the arrays at once and report their errors at wait and close", "[manager][async]") {
    auto storage = std::make_shared<MapStorage>();
    ckpt::ManagerOptions options;
    options.async = true;
    options.queue_depth = 2;
    options.storage = storage;
    ckpt::Manager manager("run", options);
    Trainer t;
    t.train_to(1);
    manager.save(t.vars, 1);
    t.train_to(99);  // changes nothing already saved
    manager.wait();
    Trainer back;
    CHECK(manager.restore(back.vars) == 1);
    CHECK(back.w[0] == 1.0f);

    storage->fail_writes("the object store said no");
    manager.save(t.vars, 2);
    try {
        manager.wait();
        FAIL("wait did not report the failed background save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        const std::string library = ckpt_error_message();
        CHECK_THAT(library, Catch::Contains("0000000002.npz") && Catch::EndsWith("failed: the object store said no"));
        CHECK(std::string(e.what()) == library);
    }
    CHECK_NOTHROW(manager.wait());

    manager.save(t.vars, 3);
    try {
        manager.close();
        FAIL("close did not report the failed background save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("0000000003.npz") && Catch::EndsWith(": the object store said no"));
    }
    CHECK_FALSE(manager);  // closed all the same
    storage->heal();
    ckpt::Manager again("run", options);
    CHECK(again.list() == std::vector<int64_t>{1});
}

TEST_CASE("Managers in different threads work on their own directories", "[manager][threads]") {
    TempDir dir;
    std::vector<std::thread> threads;
    std::vector<std::string> outcome(4);
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            try {
                ckpt::Manager manager(dir.path("run" + std::to_string(k)));
                Trainer t;
                for (int64_t s = 1; s <= 3; ++s) {
                    t.train_to(s * 10 + k);
                    manager.save(t.vars, s);
                }
                Trainer back;
                const int64_t idx = manager.restore(back.vars);
                outcome[k] = "restored " + std::to_string(idx) + " at step " + std::to_string(back.step);
            } catch (const ckpt::Error& e) {
                outcome[k] = e.what();
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int k = 0; k < 4; ++k) CHECK(outcome[k] == "restored 3 at step " + std::to_string(30 + k));
}

TEST_CASE("checkpoint_idx is objax's, strict about names", "[manager]") {
    CHECK(ckpt::checkpoint_idx("runs/ckpt/0000000042.npz") == std::optional<int64_t>(42));
    CHECK(ckpt::checkpoint_idx("12345678901.npz") == std::optional<int64_t>(12345678901));
    CHECK_FALSE(ckpt::checkpoint_idx("42.npz").has_value());
    CHECK_FALSE(ckpt::checkpoint_idx("0000000042.npy").has_value());
}

TEST_CASE("A read-only manager reads a directory another manager holds, and cannot save", "[manager]") {
    TempDir dir;
    ckpt::Manager owner(dir.path());
    Trainer t;
    owner.save(t.vars, 7);
    ckpt::ManagerOptions options;
    options.read_only = true;
    ckpt::Manager reader(dir.path(), options);  // no CKPT_EBUSY: no lock taken
    CHECK(reader.list() == std::vector<int64_t>{7});
    try {
        reader.save(t.vars, 8);
        FAIL("a read-only manager saved");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK_THAT(e.what(), Catch::Matchers::Contains("read-only"));
    }
}

TEST_CASE("Metrics are recorded; the best and the latest are kept together across a restart", "[manager][policies]") {
    TempDir dir;
    ckpt::ManagerOptions options;
    options.keep = 1;
    options.keep_best = 2;
    options.best_metric = "loss";
    {
        ckpt::Manager manager(dir.path(), options);
        CHECK_FALSE(manager.best().has_value());
        Trainer t;
        for (auto [step, loss] : std::vector<std::pair<int64_t, double>>{{10, 0.5}, {20, 0.2}, {30, 0.9}, {40, 0.8}}) {
            t.train_to(step);
            manager.save(t.vars, step, {{"loss", loss}, {"acc", 1 - loss}});
        }
        t.train_to(45);
        manager.save(t.vars, 45, {{"loss", std::numeric_limits<double>::quiet_NaN()}});  // never the best
        CHECK(manager.list() == std::vector<int64_t>{10, 20, 45});
        CHECK(manager.metric(20, "loss") == 0.2);
        CHECK_FALSE(manager.metric(20, "missing").has_value());
        CHECK_THROWS_AS(manager.metric(30, "loss"), ckpt::Error);
        CHECK(t.vars.metadata("ckpt.index") == std::nullopt);  // the caller's collection is left as it was
        CHECK(manager.read(20).vars.metadata("ckpt.metric.loss") == std::optional<std::string_view>("0.2"));
    }
    ckpt::Manager manager(dir.path(), options);
    CHECK(manager.best() == std::optional<int64_t>(20));
    Trainer t;
    CHECK(manager.resume(t.vars) == std::optional<int64_t>(45));
    options.best_mode = ckpt::BestMode::max;
    options.keep_best = 0;
    options.read_only = true;
    ckpt::Manager reader(dir.path(), options);
    CHECK(reader.best() == std::optional<int64_t>(10));
}

TEST_CASE("should_save follows save_every_steps and request_save", "[manager][policies]") {
    TempDir dir;
    ckpt::ManagerOptions options;
    options.save_every_steps = 10;
    ckpt::Manager manager(dir.path(), options);
    std::vector<int64_t> due;
    for (int64_t s = 1; s <= 30; ++s)
        if (manager.should_save(s)) due.push_back(s);
    CHECK(due == std::vector<int64_t>{10, 20, 30});
    manager.request_save();
    CHECK(manager.should_save(3));
    CHECK_FALSE(manager.should_save(3));
    CHECK_THROWS_AS(manager.should_save(-1), ckpt::Error);
}

TEST_CASE("clean removes what interrupted saves left; a dry run only finds it", "[manager][clean]") {
    TempDir dir;
    ckpt::Manager m(dir.path());
    Trainer t;
    m.save(t.vars, 1);
    const std::string ckpt_dir = dir.path("ckpt");
    const std::string file = ckpt_dir + "/.0000000002.npz.tmp-AbC123";
    std::ofstream(file) << "half a save";
    std::filesystem::create_directory(ckpt_dir + "/0000000003");  // a step without its manifest
    std::ofstream(ckpt_dir + "/notes.txt") << "mine";
    const std::vector<ckpt::StaleTemporary> expected{{ckpt_dir + "/0000000003", true}, {file, false}};
    CHECK(m.clean(true) == expected);
    CHECK(std::filesystem::exists(file));
    CHECK(m.clean() == expected);
    CHECK_FALSE(std::filesystem::exists(file));
    CHECK_FALSE(std::filesystem::exists(ckpt_dir + "/0000000003"));
    CHECK(m.clean().empty());
    CHECK(std::filesystem::exists(ckpt_dir + "/notes.txt"));
    CHECK(m.list() == std::vector<int64_t>{1});
}

TEST_CASE("Saves share unchanged chunks with the previous checkpoint unless incremental is off",
          "[manager][incremental]") {
    CHECK(sharing_saves({}) == std::vector<int64_t>{2, 3, 4, 5});
    ckpt::ManagerOptions full;
    full.incremental = false;
    CHECK(sharing_saves(full).empty());
}

TEST_CASE("full_every makes every full_every-th save share nothing; a negative one is CKPT_EINVAL",
          "[manager][incremental]") {
    ckpt::ManagerOptions options;
    options.full_every = 2;
    CHECK(sharing_saves(options) == std::vector<int64_t>{3, 5});
    TempDir dir;
    options.full_every = -1;
    try {
        ckpt::Manager bad(dir.path(), options);
        FAIL("a negative full_every did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK_THAT(e.what(), Catch::Contains("full_every"));
    }
}
