// SPDX-License-Identifier: Apache-2.0
// The manager's policies through the C API: what every save records in the file's metadata, metrics and the best
// checkpoint, retention policies that combine (checked against a model of the policy written here), times through
// an injected clock, best and latest together across a restart, crash safety with a corrupt newest file, when to
// save, and callers of version 1 of ckpt_manager_options.
//
// The binary links the library's objects directly (not the shared library) to reach the one internal hook it
// needs: ckpt::capi::set_manager_clock, so that time moves forward without sleeping.
#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include "manager_clock.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"
#include "guard.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using ckpt::testing::message;
using ckpt::testing::TempDir;

using ManagerPtr = ckpt::testing::Manager;
using VarsPtr = ckpt::testing::Vars;
using NpzPtr = ckpt::testing::Reader;

constexpr int64_t kSecond = 1000000000;
constexpr int64_t kStart = 1700000000 * kSecond;  // 2023-11-14T22:13:20Z

// The managers' clock for one test: starts at kStart and moves only when told.
class FakeClock {
public:
    FakeClock() {
        ckpt::capi::set_manager_clock([this] { return now_; });
    }
    ~FakeClock() { ckpt::capi::set_manager_clock(nullptr); }
    void advance(int64_t ns) { now_ += ns; }
    int64_t now() const { return now_; }

private:
    int64_t now_ = kStart;
};

ckpt_manager_options options() {
    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    return o;
}

ManagerPtr open_manager(const std::string& logdir, const ckpt_manager_options* o) {
    ckpt_manager* m = nullptr;
    const int rc = ckpt_manager_open(&m, logdir.c_str(), o);
    INFO(message());
    REQUIRE(rc == CKPT_OK);
    return ManagerPtr(m);
}

VarsPtr make_vars(int64_t step) {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    REQUIRE(ckpt_vars_add(v, "step", CKPT_INT64, 0, nullptr, &step, CKPT_COPY) == CKPT_OK);
    return vars;
}

void save_metric(ckpt_manager* m, int64_t idx, const char* name, std::optional<double> value) {
    VarsPtr v = make_vars(idx);
    const char* names[1] = {name};
    const double values[1] = {value.value_or(0)};
    const int rc = ckpt_manager_save_metrics(m, v.get(), idx, names, values, value ? 1 : 0);
    INFO("saving " << idx << ": " << message());
    REQUIRE(rc == CKPT_OK);
}

std::vector<int64_t> list_of(ckpt_manager* m) {
    std::vector<int64_t> out(4096);
    size_t n = 0;
    REQUIRE(ckpt_manager_list(m, out.data(), out.size(), &n) == CKPT_OK);
    out.resize(n);
    return out;
}

std::map<std::string, std::string> file_metadata(const std::string& path) {
    ckpt_reader* npz = nullptr;
    const int rc = ckpt_reader_open(&npz, path.c_str(), nullptr);
    INFO(path << ": " << message());
    REQUIRE(rc == CKPT_OK);
    NpzPtr owner(npz);
    std::map<std::string, std::string> out;
    for (size_t i = 0; i < ckpt_reader_metadata_count(npz); ++i)
        out[ckpt_reader_metadata_key(npz, i)] = ckpt_reader_metadata_value(npz, i);
    return out;
}

std::string path_of(ckpt_manager* m, int64_t idx) {
    char buf[4096];
    REQUIRE(ckpt_manager_path(m, idx, buf, sizeof buf) == CKPT_OK);
    return buf;
}

int64_t restore_latest(ckpt_manager* m) {
    VarsPtr v = make_vars(-1);
    int64_t idx = -100;
    const int rc = ckpt_manager_restore(m, v.get(), CKPT_LATEST, &idx);
    INFO(message());
    REQUIRE(rc == CKPT_OK);
    CHECK(*static_cast<const int64_t*>(ckpt_vars_data(v.get(), 0)) == idx);  // each checkpoint holds its index
    return idx;
}

// --------------------------------------------------------------------------------- the model of retention
// A checkpoint survives a save when any policy keeps it: the newest `keep` by index (keep <= 0: everything),
// multiples of keep_every, the keep_best best by the metric (NaN and missing never count; a tie goes to the higher
// index), those saved within the last keep_seconds, the newest, and the one just written.
struct ModelCheckpoint {
    std::optional<double> metric;
    int64_t saved_at;
};
struct Model {
    int32_t keep = 10;
    int64_t keep_every = 0;
    int32_t keep_best = 0;
    bool best_max = false;
    int64_t keep_seconds = 0;
    std::map<int64_t, ModelCheckpoint> files;

    void save(int64_t idx, std::optional<double> metric, int64_t now) {
        files[idx] = {metric, now};
        if (keep <= 0) return;
        std::set<int64_t> kept{idx, files.rbegin()->first};
        int32_t n = 0;
        for (auto it = files.rbegin(); it != files.rend() && n < keep; ++it, ++n) kept.insert(it->first);
        std::vector<std::pair<double, int64_t>> ranked;
        for (const auto& [i, f] : files) {
            if (keep_every > 0 && i % keep_every == 0) kept.insert(i);
            if (keep_seconds > 0 && f.saved_at >= now - keep_seconds * kSecond) kept.insert(i);
            if (f.metric && !std::isnan(*f.metric)) ranked.emplace_back(*f.metric, i);
        }
        std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
            if (a.first != b.first) return best_max ? a.first > b.first : a.first < b.first;
            return a.second > b.second;
        });
        for (size_t k = 0; k < ranked.size() && k < static_cast<size_t>(std::max(keep_best, 0)); ++k)
            kept.insert(ranked[k].second);
        for (auto it = files.begin(); it != files.end();) it = kept.count(it->first) ? std::next(it) : files.erase(it);
    }
    std::vector<int64_t> indices() const {
        std::vector<int64_t> out;
        for (const auto& [i, f] : files) out.push_back(i);
        return out;
    }
    std::optional<int64_t> best() const {
        std::optional<std::pair<double, int64_t>> b;
        for (const auto& [i, f] : files) {
            if (!f.metric || std::isnan(*f.metric)) continue;
            const bool better = !b || (best_max ? *f.metric > b->first : *f.metric < b->first) || *f.metric == b->first;
            if (better) b = std::make_pair(*f.metric, i);  // ascending indices: a tie moves to the higher one
        }
        if (!b) return std::nullopt;
        return b->second;
    }
};

}  // namespace

// ============================================================================================ recorded metadata

TEST_CASE("Every save records index, time and version in the file's metadata", "[policies][metadata]") {
    TempDir logdir;
    FakeClock clock;
    clock.advance(123456789);
    const bool async = GENERATE(false, true);
    ckpt_manager_options o = options();
    if (async) o.flags = CKPT_MANAGER_ASYNC;
    ManagerPtr m = open_manager(logdir.str(), &o);
    VarsPtr v = make_vars(42);
    REQUIRE(ckpt_manager_save(m.get(), v.get(), 42) == CKPT_OK);
    REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);
    const auto md = file_metadata(path_of(m.get(), 42));
    CHECK(md.at("ckpt.index") == "42");
    CHECK(md.at("ckpt.saved_at_ns") == std::to_string(kStart + 123456789));
    CHECK(md.at("ckpt.saved_at") == "2023-11-14T22:13:20.123456789Z");
    CHECK(md.at("ckpt.version") == ckpt_version_string());
    CHECK(md.size() == 4);
}

TEST_CASE("A save leaves the caller's metadata as it was, keeps the user's keys and drops stale ckpt. keys",
          "[policies][metadata]") {
    TempDir logdir;
    const bool async = GENERATE(false, true);
    ckpt_manager_options o = options();
    if (async) o.flags = CKPT_MANAGER_ASYNC;
    ManagerPtr m = open_manager(logdir.str(), &o);
    VarsPtr v = make_vars(7);
    REQUIRE(ckpt_vars_set_metadata(v.get(), "note", "lr 0.1") == CKPT_OK);
    // What a collection restored from an earlier checkpoint carries: the manager owns these keys.
    REQUIRE(ckpt_vars_set_metadata(v.get(), "ckpt.metric.loss", "0.5") == CKPT_OK);
    REQUIRE(ckpt_vars_set_metadata(v.get(), "ckpt.index", "3") == CKPT_OK);
    const char* names[1] = {"acc"};
    const double values[1] = {0.75};
    REQUIRE(ckpt_manager_save_metrics(m.get(), v.get(), 7, names, values, 1) == CKPT_OK);
    REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);

    CHECK(ckpt_vars_metadata_count(v.get()) == 3);
    CHECK(std::string(ckpt_vars_metadata(v.get(), "ckpt.index")) == "3");
    const auto md = file_metadata(path_of(m.get(), 7));
    CHECK(md.at("note") == "lr 0.1");
    CHECK(md.at("ckpt.index") == "7");
    CHECK(md.at("ckpt.metric.acc") == "0.75");
    CHECK(md.count("ckpt.metric.loss") == 0);
}

// ===================================================================================================== metrics

TEST_CASE("Metrics read back as the same doubles, from the metadata alone", "[policies][metrics]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    const std::vector<double> samples = {0.1,
                                         -0.0,
                                         1.0 / 3.0,
                                         1e-300,
                                         std::numeric_limits<double>::denorm_min(),
                                         std::numeric_limits<double>::max(),
                                         -std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::quiet_NaN()};
    std::vector<std::string> name_text;
    for (size_t i = 0; i < samples.size(); ++i) name_text.push_back("m" + std::to_string(i));
    std::vector<const char*> names;
    for (const auto& n : name_text) names.push_back(n.c_str());
    VarsPtr v = make_vars(1);
    REQUIRE(ckpt_manager_save_metrics(m.get(), v.get(), 1, names.data(), samples.data(), samples.size()) == CKPT_OK);
    for (size_t i = 0; i < samples.size(); ++i) {
        double out = 12345;
        REQUIRE(ckpt_manager_metric(m.get(), 1, names[i], &out) == CKPT_OK);
        if (std::isnan(samples[i])) {
            CHECK(std::isnan(out));
        } else {
            CHECK(std::memcmp(&out, &samples[i], sizeof out) == 0);  // bit-exact, -0.0 included
        }
    }
    CHECK(file_metadata(path_of(m.get(), 1)).at("ckpt.metric.m0") == "0.1");
}

TEST_CASE("A metric that is absent, or of a checkpoint that does not exist, is CKPT_ENOTFOUND", "[policies][metrics]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    VarsPtr v = make_vars(1);
    REQUIRE(ckpt_manager_save(m.get(), v.get(), 1) == CKPT_OK);
    double out = 7;
    CHECK(ckpt_manager_metric(m.get(), 1, "loss", &out) == CKPT_ENOTFOUND);
    CHECK(ckpt_manager_metric(m.get(), 2, "loss", &out) == CKPT_ENOTFOUND);
    CHECK(out == 7);
    CHECK(ckpt_manager_metric(m.get(), -1, "loss", &out) == CKPT_EINVAL);
    CHECK(ckpt_manager_metric(m.get(), 1, nullptr, &out) == CKPT_EINVAL);
    CHECK(ckpt_manager_metric(m.get(), 1, "loss", nullptr) == CKPT_EINVAL);
    CHECK(ckpt_manager_metric(nullptr, 1, "loss", &out) == CKPT_EINVAL);
}

TEST_CASE("A metric value that is not a number is CKPT_EFORMAT", "[policies][metrics]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    VarsPtr v = make_vars(1);
    REQUIRE(ckpt_vars_set_metadata(v.get(), "ckpt.metric.loss", "low") == CKPT_OK);
    // Not through the manager, and not through ckpt_save either, which leaves "ckpt." keys out.
    ckpt::core::NpzWriteOptions forged;
    forged.manager_keys = true;
    ckpt::core::save_npz(*ckpt::core::posix_storage(), path_of(m.get(), 1), v->vc, forged);
    double out = 0;
    CHECK(ckpt_manager_metric(m.get(), 1, "loss", &out) == CKPT_EFORMAT);
    CHECK_THAT(message(), Catch::Matchers::Contains("low"));
}

TEST_CASE("ckpt_save leaves a collection's ckpt. keys out; a manager save replaces them", "[policies][metrics]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    VarsPtr v = make_vars(1);
    const char* name = "loss";
    const double loss = 0.5;
    REQUIRE(ckpt_manager_save_metrics(m.get(), v.get(), 1, &name, &loss, 1) == CKPT_OK);
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_manager_read(m.get(), 1, &raw, nullptr) == CKPT_OK);
    VarsPtr restored(raw);
    REQUIRE(std::string(ckpt_vars_metadata(restored.get(), "ckpt.index")) == "1");
    REQUIRE(ckpt_vars_set_metadata(restored.get(), "note", "mine") == CKPT_OK);

    REQUIRE(ckpt_manager_save(m.get(), restored.get(), 5) == CKPT_OK);
    REQUIRE(ckpt_manager_read(m.get(), 5, &raw, nullptr) == CKPT_OK);
    VarsPtr five(raw);
    CHECK(std::string(ckpt_vars_metadata(five.get(), "ckpt.index")) == "5");
    CHECK(ckpt_vars_metadata(five.get(), "ckpt.metric.loss") == nullptr);
    CHECK(std::string(ckpt_vars_metadata(five.get(), "note")) == "mine");

    const std::string model = logdir.file("model.npz");
    REQUIRE(ckpt_save(model.c_str(), restored.get(), nullptr) == CKPT_OK);
    REQUIRE(ckpt_read(&raw, model.c_str(), nullptr) == CKPT_OK);
    VarsPtr plain(raw);
    REQUIRE(ckpt_vars_metadata_count(plain.get()) == 1);
    CHECK(std::string(ckpt_vars_metadata_key(plain.get(), 0)) == "note");
    CHECK(std::string(ckpt_vars_metadata(restored.get(), "ckpt.index")) == "1");  // the collection is unchanged

    // A copy of the checkpoint (ckpt convert) keeps what the manager recorded of it.
    const std::string copy = logdir.file("copy.npz");
    ckpt_options keep = CKPT_OPTIONS_INIT;
    keep.flags = CKPT_KEEP_MANAGER_KEYS;
    REQUIRE(ckpt_save(copy.c_str(), restored.get(), &keep) == CKPT_OK);
    REQUIRE(ckpt_read(&raw, copy.c_str(), nullptr) == CKPT_OK);
    VarsPtr kept(raw);
    CHECK(ckpt_vars_metadata_count(kept.get()) == ckpt_vars_metadata_count(restored.get()));
    CHECK(std::string(ckpt_vars_metadata(kept.get(), "ckpt.index")) == "1");
    CHECK(std::string(ckpt_vars_metadata(kept.get(), "ckpt.metric.loss")) == "0.5");
}

TEST_CASE("ckpt_manager_save_metrics refuses bad metric names, and saves nothing then", "[policies][metrics]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    VarsPtr v = make_vars(1);
    const double values[2] = {1, 2};
    const char* twice[2] = {"loss", "loss"};
    const char* empty[1] = {""};
    const char* null_name[1] = {nullptr};
    const char* bad_utf8[1] = {"\xff"};
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, twice, values, 2) == CKPT_EINVAL);
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, empty, values, 1) == CKPT_EINVAL);
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, null_name, values, 1) == CKPT_EINVAL);
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, bad_utf8, values, 1) == CKPT_EINVAL);
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, nullptr, values, 1) == CKPT_EINVAL);
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, twice, nullptr, 1) == CKPT_EINVAL);
    CHECK(list_of(m.get()).empty());
    CHECK(ckpt_manager_save_metrics(m.get(), v.get(), 1, nullptr, nullptr, 0) == CKPT_OK);
}

TEST_CASE("ckpt_manager_best picks by best_mode; ties go to the newer; NaN and missing never win", "[policies][best]") {
    TempDir logdir;
    const uint32_t mode = GENERATE(CKPT_BEST_MIN, CKPT_BEST_MAX);
    ckpt_manager_options o = options();
    o.keep = 0;
    o.best_metric = "loss";
    o.best_mode = mode;
    ManagerPtr m = open_manager(logdir.str(), &o);
    int64_t best = -1;
    CHECK(ckpt_manager_best(m.get(), &best) == CKPT_ENOTFOUND);
    save_metric(m.get(), 1, "loss", std::nullopt);
    save_metric(m.get(), 2, "loss", std::numeric_limits<double>::quiet_NaN());
    CHECK(ckpt_manager_best(m.get(), &best) == CKPT_ENOTFOUND);
    save_metric(m.get(), 3, "loss", 2.0);
    save_metric(m.get(), 4, "loss", 1.0);
    save_metric(m.get(), 5, "loss", 3.0);
    save_metric(m.get(), 6, "loss", 1.0);
    save_metric(m.get(), 7, "other", 0.0);
    REQUIRE(ckpt_manager_best(m.get(), &best) == CKPT_OK);
    CHECK(best == (mode == CKPT_BEST_MIN ? 6 : 5));
}

TEST_CASE("ckpt_manager_best without a best_metric is CKPT_EINVAL", "[policies][best]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    int64_t best = -1;
    CHECK(ckpt_manager_best(m.get(), &best) == CKPT_EINVAL);
    CHECK(ckpt_manager_best(m.get(), nullptr) == CKPT_EINVAL);
}

// =================================================================================================== retention

TEST_CASE("Retention sequences match the model of the combined policies", "[policies][retention]") {
    const uint32_t mode = GENERATE(CKPT_BEST_MIN, CKPT_BEST_MAX);
    const int32_t keep = GENERATE(1, 2, 3);
    const int32_t keep_best = GENERATE(0, 1, 2, 3);
    const int64_t keep_seconds = GENERATE(int64_t{0}, int64_t{5});
    const bool async = GENERATE(false, true);
    INFO("mode " << mode << " keep " << keep << " keep_best " << keep_best << " keep_seconds " << keep_seconds
                 << (async ? " async" : ""));
    TempDir logdir;
    FakeClock clock;
    ckpt_manager_options o = options();
    o.keep = keep;
    o.keep_best = keep_best;
    o.best_metric = "loss";
    o.best_mode = mode;
    o.keep_seconds = keep_seconds;
    o.keep_every = 7;
    if (async) o.flags = CKPT_MANAGER_ASYNC;
    ManagerPtr m = open_manager(logdir.str(), &o);
    Model model;
    model.keep = keep;
    model.keep_best = keep_best;
    model.best_max = mode == CKPT_BEST_MAX;
    model.keep_seconds = keep_seconds;
    model.keep_every = 7;

    std::mt19937 random(1234u + static_cast<unsigned>(keep * 100 + keep_best * 10));
    // Few distinct values, so that ties are common; NaN and missing metrics among them.
    const std::vector<std::optional<double>> values = {1.0, 2.0, 3.0, 2.0, std::numeric_limits<double>::quiet_NaN(),
                                                       std::nullopt, -1.0};
    int64_t idx = 0;
    for (int n = 0; n < 40; ++n) {
        idx += 1 + static_cast<int64_t>(random() % 3);
        if (random() % 8 == 0 && idx > 5) idx -= 5;  // now and then an index lower than the newest
        clock.advance(static_cast<int64_t>(random() % 4) * kSecond);
        const std::optional<double> value = values[random() % values.size()];
        save_metric(m.get(), idx, "loss", value);
        model.save(idx, value, clock.now());
        REQUIRE(ckpt_manager_wait(m.get()) == CKPT_OK);
        INFO("after saving " << idx);
        REQUIRE(list_of(m.get()) == model.indices());
    }
    int64_t best = -1;
    const std::optional<int64_t> expected = model.best();
    REQUIRE(expected.has_value());
    REQUIRE(ckpt_manager_best(m.get(), &best) == CKPT_OK);
    CHECK(best == *expected);
}

TEST_CASE("keep_seconds keeps what was saved within the window by the recorded time, not the file's mtime",
          "[policies][retention][time]") {
    TempDir logdir;
    FakeClock clock;
    ckpt_manager_options o = options();
    o.keep = 1;
    o.keep_seconds = 60;
    ManagerPtr m = open_manager(logdir.str(), &o);
    save_metric(m.get(), 1, "loss", std::nullopt);  // t = 0
    clock.advance(30 * kSecond);
    save_metric(m.get(), 2, "loss", std::nullopt);  // t = 30
    clock.advance(30 * kSecond);
    save_metric(m.get(), 3, "loss", std::nullopt);  // t = 60: 1 is exactly 60 s old, still inside
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2, 3});
    clock.advance(1);
    save_metric(m.get(), 4, "loss", std::nullopt);  // 1 is now older than the window
    CHECK(list_of(m.get()) == std::vector<int64_t>{2, 3, 4});
    clock.advance(3600 * kSecond);
    save_metric(m.get(), 5, "loss", std::nullopt);
    CHECK(list_of(m.get()) == std::vector<int64_t>{5});

    SECTION("a file without a recorded time is not kept by the window") {
        VarsPtr v = make_vars(6);
        REQUIRE(ckpt_save(path_of(m.get(), 6).c_str(), v.get(), nullptr) == CKPT_OK);  // fresh mtime, no time
        save_metric(m.get(), 7, "loss", std::nullopt);
        CHECK(list_of(m.get()) == std::vector<int64_t>{5, 7});
    }
}

TEST_CASE("keep <= 0 keeps everything, whatever the other policies say", "[policies][retention]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    o.keep = 0;
    o.keep_best = 1;
    o.best_metric = "loss";
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (int64_t i = 1; i <= 5; ++i) save_metric(m.get(), i, "loss", static_cast<double>(i));
    CHECK(list_of(m.get()) == std::vector<int64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("Best and latest are kept together across a restart of the manager", "[policies][retention][restart]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    o.keep = 1;
    o.keep_best = 2;
    o.best_metric = "loss";
    {
        ManagerPtr m = open_manager(logdir.str(), &o);
        save_metric(m.get(), 10, "loss", 0.5);
        save_metric(m.get(), 20, "loss", 0.2);
        save_metric(m.get(), 30, "loss", 0.9);
        save_metric(m.get(), 40, "loss", 0.8);
        CHECK(list_of(m.get()) == std::vector<int64_t>{10, 20, 40});
    }
    ManagerPtr m = open_manager(logdir.str(), &o);  // remembers nothing: the files say what is best
    int64_t best = -1;
    REQUIRE(ckpt_manager_best(m.get(), &best) == CKPT_OK);
    CHECK(best == 20);
    CHECK(restore_latest(m.get()) == 40);  // the latest is not among the best, and resuming still works
    save_metric(m.get(), 50, "loss", 0.7);
    CHECK(list_of(m.get()) == std::vector<int64_t>{10, 20, 50});
    save_metric(m.get(), 60, "loss", 0.1);
    CHECK(list_of(m.get()) == std::vector<int64_t>{20, 60});
    CHECK(restore_latest(m.get()) == 60);
    double loss = 0;
    REQUIRE(ckpt_manager_metric(m.get(), 20, "loss", &loss) == CKPT_OK);
    CHECK(loss == 0.2);
}

TEST_CASE("Retention never deletes the last restorable checkpoint, even when the newest file is corrupt",
          "[policies][retention][crash]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    o.keep = 1;
    o.keep_best = 1;
    o.best_metric = "loss";
    o.keep_seconds = 3600;
    std::string newest;
    {
        ManagerPtr m = open_manager(logdir.str(), &o);
        save_metric(m.get(), 1, "loss", 0.1);
        save_metric(m.get(), 2, "loss", 0.5);
        save_metric(m.get(), 3, "loss", 0.9);
        newest = path_of(m.get(), 3);
    }
    fs::resize_file(newest, fs::file_size(newest) / 2);  // a torn newest checkpoint
    ManagerPtr m = open_manager(logdir.str(), &o);
    CHECK(restore_latest(m.get()) == 2);
    // The trainer resumes from 2 and saves again: the corrupt newest stays (never deleted: it is the newest), and
    // the one just written is restorable.
    save_metric(m.get(), 2, "loss", 0.4);
    const std::vector<int64_t> left = list_of(m.get());
    CHECK(std::find(left.begin(), left.end(), 2) != left.end());
    CHECK(std::find(left.begin(), left.end(), 3) != left.end());
    CHECK(restore_latest(m.get()) == 2);

    SECTION("a save that is neither best nor recent by any record is kept, and restorable, all the same") {
        FakeClock clock;
        clock.advance(std::numeric_limits<int64_t>::max() / 2);
        m.reset();
        ManagerPtr again = open_manager(logdir.str(), &o);
        save_metric(again.get(), 1, "loss", std::nullopt);  // neither best nor recent by any file's record
        CHECK(restore_latest(again.get()) >= 1);
        const std::vector<int64_t> now_left = list_of(again.get());
        CHECK(std::find(now_left.begin(), now_left.end(), 1) != now_left.end());
    }
}

// ================================================================================================ when to save

TEST_CASE("should_save follows save_every_steps", "[policies][should_save]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    o.save_every_steps = 100;
    ManagerPtr m = open_manager(logdir.str(), &o);
    CHECK(ckpt_manager_should_save(m.get(), 0) == 1);
    CHECK(ckpt_manager_should_save(m.get(), 1) == 0);
    CHECK(ckpt_manager_should_save(m.get(), 99) == 0);
    CHECK(ckpt_manager_should_save(m.get(), 100) == 1);
    CHECK(ckpt_manager_should_save(m.get(), 100) == 1);  // asking does not change the answer
    CHECK(ckpt_manager_should_save(m.get(), 250) == 0);
    CHECK(ckpt_manager_should_save(m.get(), 300) == 1);
    CHECK(ckpt_manager_should_save(m.get(), -1) == CKPT_EINVAL);
    CHECK(ckpt_manager_should_save(nullptr, 1) == CKPT_EINVAL);
}

TEST_CASE("Without any setting should_save is 0 until a save is requested", "[policies][should_save]") {
    TempDir logdir;
    ManagerPtr m = open_manager(logdir.str(), nullptr);
    for (int64_t step = 0; step < 1000; step += 37) CHECK(ckpt_manager_should_save(m.get(), step) == 0);
}

TEST_CASE("request_save makes exactly the next should_save return 1", "[policies][should_save]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    o.save_every_steps = 10;
    ManagerPtr m = open_manager(logdir.str(), &o);
    CHECK(ckpt_manager_should_save(m.get(), 3) == 0);
    ckpt_manager_request_save(m.get());
    ckpt_manager_request_save(m.get());  // requests do not add up
    CHECK(ckpt_manager_should_save(m.get(), 3) == 1);
    CHECK(ckpt_manager_should_save(m.get(), 3) == 0);
    ckpt_manager_request_save(m.get());
    CHECK(ckpt_manager_should_save(m.get(), 10) == 1);  // due anyway: the request is consumed too
    CHECK(ckpt_manager_should_save(m.get(), 11) == 0);
    ckpt_manager_request_save(nullptr);  // ignored
}

TEST_CASE("should_save follows save_every_seconds from opening and from each save", "[policies][should_save][time]") {
    TempDir logdir;
    FakeClock clock;
    ckpt_manager_options o = options();
    o.save_every_seconds = 60;
    ManagerPtr m = open_manager(logdir.str(), &o);
    CHECK(ckpt_manager_should_save(m.get(), 1) == 0);
    clock.advance(59 * kSecond);
    CHECK(ckpt_manager_should_save(m.get(), 2) == 0);
    clock.advance(kSecond);
    CHECK(ckpt_manager_should_save(m.get(), 3) == 1);
    CHECK(ckpt_manager_should_save(m.get(), 3) == 1);  // until a save happens
    save_metric(m.get(), 3, "loss", std::nullopt);
    CHECK(ckpt_manager_should_save(m.get(), 4) == 0);
    clock.advance(61 * kSecond);
    CHECK(ckpt_manager_should_save(m.get(), 5) == 1);
    clock.advance(-3600 * kSecond);  // a clock that went back never makes it due
    CHECK(ckpt_manager_should_save(m.get(), 6) == 0);
}

TEST_CASE("A read-only manager has no use for should_save", "[policies][should_save]") {
    TempDir logdir;
    { ManagerPtr m = open_manager(logdir.str(), nullptr); }
    ckpt_manager_options o = options();
    o.flags = CKPT_MANAGER_READ_ONLY;
    ManagerPtr m = open_manager(logdir.str(), &o);
    CHECK(ckpt_manager_should_save(m.get(), 1) == CKPT_EINVAL);
}

// ===================================================================================================== options

TEST_CASE("ckpt_manager_options_init fills the defaults, and writes only version 1's bytes for version 1",
          "[policies][options]") {
    ckpt_manager_options o;
    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION) == CKPT_OK);
    CHECK(o.version == 5);
    CHECK(o.full_every == 0);
    CHECK(o.max_staging_bytes == 0);
    CHECK(o.comm == nullptr);
    CHECK(o.keep == 10);
    CHECK(o.keep_best == 0);
    CHECK(o.best_metric == nullptr);
    CHECK(o.best_mode == CKPT_BEST_MIN);
    CHECK(o.keep_seconds == 0);
    CHECK(o.save_every_steps == 0);
    CHECK(o.save_every_seconds == 0);
    const ckpt_manager_options init = CKPT_MANAGER_OPTIONS_INIT;
    CHECK(std::memcmp(&init.keep_best, &o.keep_best, sizeof o - offsetof(ckpt_manager_options, keep_best)) == 0);

    std::memset(&o, 0xAB, sizeof o);
    REQUIRE(ckpt_manager_options_init(&o, 1) == CKPT_OK);
    CHECK(o.version == 1);
    CHECK(o.keep == 10);
    const unsigned char* tail = reinterpret_cast<const unsigned char*>(&o) + offsetof(ckpt_manager_options, keep_best);
    CHECK(std::all_of(tail, tail + (sizeof o - offsetof(ckpt_manager_options, keep_best)),
                      [](unsigned char c) { return c == 0xAB; }));
}

TEST_CASE("Version-1 options are accepted, and nothing past their end is read", "[policies][options]") {
    TempDir logdir;
    // A caller built against version 1 owns only that many bytes: what follows is whatever memory holds.
    ckpt_manager_options o;
    std::memset(&o, 0xFF, sizeof o);
    REQUIRE(ckpt_manager_options_init(&o, 1) == CKPT_OK);
    o.keep = 2;
    ManagerPtr m = open_manager(logdir.str(), &o);
    for (int64_t i = 1; i <= 4; ++i) save_metric(m.get(), i, "loss", static_cast<double>(i));
    CHECK(list_of(m.get()) == std::vector<int64_t>{3, 4});
    CHECK(ckpt_manager_should_save(m.get(), 5) == 0);  // save_every_* of version 2 are off
    double loss = 0;
    REQUIRE(ckpt_manager_metric(m.get(), 4, "loss", &loss) == CKPT_OK);  // every save still records
    CHECK(loss == 4.0);
}

TEST_CASE("Invalid policy options are CKPT_EINVAL", "[policies][options]") {
    TempDir logdir;
    ckpt_manager_options o = options();
    SECTION("keep_best without best_metric") { o.keep_best = 1; }
    SECTION("an empty best_metric") { o.best_metric = ""; }
    SECTION("a best_metric that is not UTF-8") { o.best_metric = "\xc3"; }
    SECTION("an unknown best_mode") { o.best_mode = 2; }
    SECTION("negative keep_seconds") { o.keep_seconds = -1; }
    SECTION("negative save_every_steps") { o.save_every_steps = -1; }
    SECTION("negative save_every_seconds") { o.save_every_seconds = -1; }
    SECTION("negative full_every") { o.full_every = -1; }
    SECTION("version 6") { o.version = 6; }
    ckpt_manager* m = reinterpret_cast<ckpt_manager*>(&o);
    CHECK(ckpt_manager_open(&m, logdir.str().c_str(), &o) == CKPT_EINVAL);
    CHECK(m == nullptr);
}
