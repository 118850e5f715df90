// SPDX-License-Identifier: Apache-2.0
// Incremental saves through the C API: ckpt_save with CKPT_NPZ_CHUNK_HASHES and a base, and the manager's
// CKPT_MANAGER_FULL_SAVES and full_every (version 5 of both option structs).
#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"

#include <ckpt/ckpt.h>

#include <cstdint>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using ckpt::testing::message;
using ckpt::testing::TempDir;

namespace {

constexpr size_t kFloats = 65536;  // 256 KiB: 16 chunks

ckpt::testing::Vars state(std::vector<float>& w) {
    ckpt::testing::Vars v = ckpt::testing::new_vars();
    const int64_t shape[] = {static_cast<int64_t>(w.size())};
    REQUIRE(ckpt_vars_add(v.get(), "w", CKPT_FLOAT32, 1, shape, w.data(), CKPT_VARS_BORROW) == CKPT_OK);
    return v;
}

std::vector<std::string> keys(const std::string& path) {
    std::vector<std::string> out;
    // numpy's view of the file: every member, the chunk table included
    const std::string listing = ckpt::testing::read_file(path);
    for (const char* name : {"w.npy", "__ckpt_chunks__.npy"})
        if (listing.find(name) != std::string::npos) out.push_back(name);
    return out;
}

}  // namespace

TEST_CASE("ckpt_save with a base writes the file a full save writes; a base that cannot serve makes a full save") {
    TempDir dir;
    std::vector<float> w(kFloats, 1.0f);
    ckpt::testing::Vars v = state(w);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    CHECK(o.base == nullptr);
    o.flags = CKPT_NPZ_CHUNK_HASHES;
    const std::string a = dir.file("a.npz"), b = dir.file("b.npz"), full = dir.file("full.npz");
    REQUIRE(ckpt_save(a.c_str(), v.get(), &o) == CKPT_OK);
    CHECK(keys(a) == std::vector<std::string>{"w.npy", "__ckpt_chunks__.npy"});
    ckpt::testing::Reader back = ckpt::testing::open_file(a);
    CHECK(ckpt_reader_count(back.get()) == 1);  // ckpt's reader sets the table aside

    w[3] = 5.0f;
    o.base = a.c_str();
    o.flags = 0;  // a base implies chunk hashes
    REQUIRE(ckpt_save(b.c_str(), v.get(), &o) == CKPT_OK);
    o.base = nullptr;
    o.flags = CKPT_NPZ_CHUNK_HASHES;
    REQUIRE(ckpt_save(full.c_str(), v.get(), &o) == CKPT_OK);
    CHECK(ckpt::testing::read_file(b) == ckpt::testing::read_file(full));

    SECTION("a base that is missing, or holds no chunk table") {
        for (const std::string& base : {dir.file("missing.npz"), dir.file("plain.npz")}) {
            ckpt_options plain;
            REQUIRE(ckpt_options_init(&plain, CKPT_OPTIONS_VERSION) == CKPT_OK);
            REQUIRE(ckpt_save(dir.file("plain.npz").c_str(), v.get(), &plain) == CKPT_OK);
            o.base = base.c_str();
            REQUIRE(ckpt_save(b.c_str(), v.get(), &o) == CKPT_OK);
            CHECK(ckpt::testing::read_file(b) == ckpt::testing::read_file(full));
        }
    }
    SECTION("deflated saves record no chunk hashes") {
        o.compression = CKPT_DEFLATE;
        o.base = a.c_str();
        REQUIRE(ckpt_save(b.c_str(), v.get(), &o) == CKPT_OK);
        CHECK(keys(b) == std::vector<std::string>{"w.npy"});
    }
    SECTION("an unknown flag is refused") {
        o.flags = 32;
        CHECK(ckpt_save(b.c_str(), v.get(), &o) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("unknown flags"));
    }
}

TEST_CASE("a manager over a storage that shares saves incrementally unless CKPT_MANAGER_FULL_SAVES") {
    ckpt_storage* storage = nullptr;
    REQUIRE(ckpt_storage_new_memory(&storage) == CKPT_OK);
    std::vector<std::string> log;
    const auto run = [&](uint32_t flags, int64_t full_every) {
        ckpt_manager_options o;
        REQUIRE(ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION) == CKPT_OK);
        o.storage = storage;
        o.flags = flags;
        o.full_every = full_every;
        o.log = [](int, const char* line, void* payload) {
            static_cast<std::vector<std::string>*>(payload)->push_back(line);
        };
        o.log_payload = &log;
        const std::string dir = "/run" + std::to_string(flags) + "-" + std::to_string(full_every);
        ckpt_manager* raw = nullptr;
        INFO(message());
        REQUIRE(ckpt_manager_open(&raw, dir.c_str(), &o) == CKPT_OK);
        ckpt::testing::Manager m(raw);
        std::vector<float> w(kFloats, 1.0f);
        ckpt::testing::Vars v = state(w);
        size_t shared = 0;
        for (int64_t i = 0; i < 4; ++i) {
            log.clear();
            w[0] = static_cast<float>(i);
            REQUIRE(ckpt_manager_save(m.get(), v.get(), i) == CKPT_OK);
            for (const std::string& line : log) shared += line.find(" shares ") != std::string::npos;
        }
        std::vector<float> into(kFloats);
        ckpt::testing::Vars r = state(into);
        int64_t at = -1;
        REQUIRE(ckpt_manager_restore(m.get(), r.get(), CKPT_LATEST, &at) == CKPT_OK);
        CHECK(at == 3);
        CHECK(into[0] == 3.0f);
        CHECK(into[kFloats - 1] == 1.0f);
        return shared;
    };
    CHECK(run(0, 0) == 3);
    CHECK(run(0, 2) == 1);  // the 2nd and 4th saves are full, and the 1st has no base: only the 3rd shares
    CHECK(run(CKPT_MANAGER_FULL_SAVES, 0) == 0);
    ckpt_storage_free(storage);
}
