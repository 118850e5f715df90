// SPDX-License-Identifier: Apache-2.0
// Files: restores into the caller's own containers, the errors of missing, corrupt and mismatched files, lazy
// access through ckpt::Reader, reading from memory, renamers and progress.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

#include <array>
#include <cstring>

using test::TempDir;

namespace {

// What a training program keeps: its own arrays, borrowed by the collection.
struct Model {
    std::vector<float> w = {0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 0.001f};
    std::array<int32_t, 3> counts{{1, 2, 3}};
    double grid[2][2] = {{1, 2}, {3, 4}};
    int64_t step = 42;

    void borrow_into(ckpt::Vars& vars) {
        vars.borrow("w", w, {2, 3});
        vars.borrow("counts", counts);
        vars.borrow("grid", grid);
        vars.borrow("step", step);
    }
    void clear() {
        std::fill(w.begin(), w.end(), 0.0f);
        counts = {};
        std::memset(grid, 0, sizeof grid);
        step = 0;
    }
};


}  // namespace

TEST_CASE("A restore writes straight into the borrowed containers", "[npz][borrow]") {
    TempDir dir;
    Model model;
    ckpt::Vars vars;
    model.borrow_into(vars);
    CHECK(vars.shape("grid") == ckpt::Shape{2, 2});
    CHECK(vars.data(vars.index("w")) == model.w.data());  // borrowed, not copied
    ckpt::save(dir.path("m.npz"), vars);

    const Model saved = model;
    model.clear();
    CHECK(vars.get<float>("w")[0] == 0.0f);  // the collection sees the caller's bytes
    ckpt::restore(dir.path("m.npz"), vars);
    CHECK(model.w == saved.w);
    CHECK(model.counts == saved.counts);
    CHECK(std::memcmp(model.grid, saved.grid, sizeof model.grid) == 0);
    CHECK(model.step == 42);

    SECTION("a collection of copies is restored in place too, and read back through views") {
        ckpt::Vars copies;
        copies.add_zeros<float>("w", {2, 3});
        copies.add_zeros<int64_t>("step", {});
        ckpt::restore(dir.path("m.npz"), copies);  // extra arrays in the file are ignored
        CHECK(copies.get<float>("w").to_vector() == saved.w);
        CHECK(copies.scalar<int64_t>("step") == 42);
    }
#if defined(CKPT_HPP_HAS_SPAN)
    SECTION("a std::span borrows what it views (C++20)") {
        std::vector<float> storage(6, 0.0f);
        std::span<float> view(storage);
        ckpt::Vars spans;
        spans.borrow("w", view, {2, 3});
        ckpt::restore(dir.path("m.npz"), spans);
        CHECK(storage == saved.w);
        const std::span<const float> got = spans.get<float>("w");
        CHECK(got.data() == storage.data());
    }
#endif
}

TEST_CASE("A missing file is CKPT_ENOTFOUND with ckpt's message", "[npz][errors]") {
    TempDir dir;
    const std::string path = dir.path("absent.npz");
    try {
        ckpt::read(path);
        FAIL("reading a missing file did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.code_name()) == ckpt_strerror(CKPT_ENOTFOUND));
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains(path));
    }
    ckpt::Vars vars;
    vars.add_zeros<float>("w", {2});
    CHECK(test::code_of([&] { ckpt::restore(path, vars); }) == CKPT_ENOTFOUND);
    CHECK(test::code_of([&] { ckpt::Reader npz(path); }) == CKPT_ENOTFOUND);
}

TEST_CASE("A file with a flipped byte in an array's data is CKPT_EFORMAT naming the member", "[npz][errors]") {
    TempDir dir;
    const std::vector<float> w = {1.5f, 2.5f, 3.5f, 4.5f};
    ckpt::Vars vars;
    vars.add("w", w);
    ckpt::save(dir.path("c.npz"), vars);
    test::corrupt(dir.path("c.npz"), test::bytes_of(w));
    try {
        ckpt::read(dir.path("c.npz"));
        FAIL("reading a corrupt file did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("c.npz") && Catch::Contains("w.npy") && Catch::Contains("CRC"));
    }
    // Opening reads only the headers; the data's CRC is checked when it is read.
    ckpt::Reader npz(dir.path("c.npz"));
    std::vector<float> dst(4);
    CHECK(test::code_of([&] { npz.read_into("w", dst); }) == CKPT_EFORMAT);
}

TEST_CASE("A restore that does not fit is CKPT_EMISMATCH listing every missing variable, and changes nothing",
          "[npz][errors]") {
    TempDir dir;
    ckpt::Vars saved;
    saved.add<float>("w", {1, 2});
    saved.add<int64_t>("extra", {7});
    ckpt::save(dir.path("f.npz"), saved);

    std::vector<float> w = {9, 9};
    std::vector<float> b = {8};
    int64_t step = 5;
    ckpt::Vars vars;
    vars.borrow("w", w);
    vars.borrow("bias", b);
    vars.borrow("step", step);
    try {
        ckpt::restore(dir.path("f.npz"), vars);
        FAIL("a restore with missing variables did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("bias") && Catch::Contains("step") && Catch::Contains("extra"));
    }
    CHECK(w == std::vector<float>{9, 9});  // headers are checked before any byte is written

    ckpt::Vars wrong_shape;
    std::vector<float> w3(3);
    wrong_shape.borrow("w", w3);
    CHECK(test::code_of([&] { ckpt::restore(dir.path("f.npz"), wrong_shape); }) == CKPT_EMISMATCH);
}

TEST_CASE("ckpt::Reader reads one array at a time, as its type, with the file's metadata", "[npz]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add<double>("a", {1, 2, 3, 4, 5, 6}, {3, 2});
    vars.add("flag", true);
    vars.add("bf", std::vector<ckpt::bfloat16>{{0x3f80}, {0x0001}});
    vars.set_metadata("step", "12");
    vars.set_metadata("who", "me");
    ckpt::Options objax;
    objax.layout = ckpt::Layout::objax;
    ckpt::save(dir.path("n.npz"), vars, objax);

    ckpt::Reader npz(dir.path("n.npz"));
    REQUIRE(npz);
    CHECK(npz.size() == 3);  // names.npy and the metadata member are not arrays
    CHECK(npz.names() == std::vector<std::string>{"a", "flag", "bf"});
    CHECK(npz.name(2) == "bf");
    CHECK(npz.dtype(0) == ckpt::Dtype::float64);
    CHECK(npz.itemsize(0) == 8);
    CHECK(npz.ndim(0) == 2);
    CHECK(npz.shape(0) == ckpt::Shape{3, 2});
    CHECK(npz.shape(1) == ckpt::Shape{});
    CHECK(npz.nbytes(0) == 48);
    CHECK(npz.dtype(2) == ckpt::Dtype::bfloat16);
    CHECK(npz.metadata("step") == std::optional<std::string_view>("12"));
    CHECK_FALSE(npz.metadata("nope").has_value());
    CHECK(npz.metadata_count() == 2);
    CHECK(npz.metadata_key(1) == "who");
    CHECK(npz.metadata_value(1) == "me");
    using Items = std::vector<std::pair<std::string, std::string>>;
    CHECK(npz.metadata_items() == Items{{"step", "12"}, {"who", "me"}});

    CHECK(npz.read<double>("a") == std::vector<double>{1, 2, 3, 4, 5, 6});
    CHECK(npz.read<ckpt::bfloat16>("bf") == std::vector<ckpt::bfloat16>{{0x3f80}, {0x0001}});
    bool flag[1] = {false};
    npz.read_into("flag", flag);
    CHECK(flag[0]);
    std::array<double, 6> raw{};
    npz.read_into(0, raw.data(), sizeof raw);
    CHECK(raw[5] == 6);
    std::array<double, 2> mid{};
    npz.read_range("a", 3, mid);  // items 3 and 4, flat
    CHECK(mid == std::array<double, 2>{4, 5});
    std::array<double, 6> pieces{};
    for (size_t k = 0; k < 6; k += 3) npz.read_range(0, k * sizeof(double), pieces.data() + k, 3 * sizeof(double));
    CHECK(pieces == std::array<double, 6>{1, 2, 3, 4, 5, 6});
    CHECK(test::code_of([&] { npz.read_range("a", 5, mid); }) == CKPT_EINVAL);
    std::array<float, 2> wrong{};
    CHECK(test::code_of([&] { npz.read_range("a", 0, wrong); }) == CKPT_EMISMATCH);

    try {
        npz.read<float>("a");
        FAIL("read<float> of a float64 array did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
        CHECK(std::string(e.what()) == "ckpt::Reader: 'a' is float64, not float32");
    }
    std::array<double, 5> small{};
    try {
        npz.read_into("a", small);
        FAIL("reading 6 items into 5 did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EBUFS);
        CHECK(std::string(e.what()) == ckpt_error_message());
    }
    CHECK(test::code_of([&] { npz.index("nope"); }) == CKPT_ENOTFOUND);
    CHECK(test::code_of([&] { npz.shape(3); }) == CKPT_ENOTFOUND);

    npz.close();
    CHECK_FALSE(npz);
    CHECK(npz.size() == 0);
    CHECK(test::code_of([&] { npz.read<double>("a"); }) == CKPT_EINVAL);
}

TEST_CASE("A file held in memory is read from its bytes", "[npz]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add<uint8_t>("u", {1, 2, 3});
    vars.set_metadata("k", "v");
    ckpt::save(dir.path("mem.npz"), vars);
    const std::string bytes = test::read_file(dir.path("mem.npz"));

    const ckpt::Vars back = ckpt::read_memory(bytes);
    CHECK(back.get<uint8_t>("u").to_vector() == std::vector<uint8_t>{1, 2, 3});
    CHECK(back.metadata("k") == std::optional<std::string_view>("v"));
    const std::vector<std::byte> as_bytes(reinterpret_cast<const std::byte*>(bytes.data()),
                                          reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    CHECK(ckpt::read_memory(as_bytes).size() == 1);
    try {
        ckpt::read_memory(bytes.data(), bytes.size() / 2);
        FAIL("half a file did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        CHECK_THAT(e.what(), Catch::Contains("<memory>"));
    }
}

TEST_CASE("Deflate makes compressible arrays smaller and reads back the same", "[npz]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add("zeros", std::vector<int64_t>(100000, 0));
    ckpt::save(dir.path("s.npz"), vars);
    ckpt::Options deflate;
    deflate.compression = ckpt::Compression::deflate;
    deflate.level = 9;
    ckpt::save(dir.path("d.npz"), vars, deflate);
    CHECK(test::read_file(dir.path("d.npz")).size() * 20 < test::read_file(dir.path("s.npz")).size());
    CHECK(ckpt::read(dir.path("d.npz")).get<int64_t>("zeros").to_vector() == std::vector<int64_t>(100000, 0));

    deflate.level = 10;
    CHECK(test::code_of([&] { ckpt::save(dir.path("bad.npz"), vars, deflate); }) == CKPT_EINVAL);
}

TEST_CASE("A renamer maps the names on disk, once per name, and aborts with what it throws", "[npz][rename]") {
    TempDir dir;
    const std::string long_name(300, 'x');  // longer than the library's first buffer
    ckpt::Vars saved;
    saved.add<float>("old/w", {1, 2});
    saved.add<float>("b", {3});
    ckpt::save(dir.path("r.npz"), saved);

    ckpt::Vars vars;
    vars.add_zeros<float>("new/w", {2});
    vars.add_zeros<float>(long_name, {1});
    std::map<std::string, int> calls;
    ckpt::Options options;
    options.rename = [&](const std::string& name) {
        ++calls[name];
        if (name == "old/w") return std::string("new/w");
        if (name == "b") return long_name;
        return name;
    };
    ckpt::restore(dir.path("r.npz"), vars, options);
    CHECK(vars.get<float>("new/w").to_vector() == std::vector<float>{1, 2});
    CHECK(vars.get<float>(long_name)[0] == 3);
    CHECK(calls == std::map<std::string, int>{{"old/w", 1}, {"b", 1}});

    options.rename = [](const std::string& name) -> std::string {
        if (name == "b") throw ckpt::Error(CKPT_EIO, "the name service is down");
        return name;
    };
    try {
        ckpt::restore(dir.path("r.npz"), vars, options);
        FAIL("a throwing renamer did not abort the restore");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::StartsWith(ckpt_error_message()) && Catch::EndsWith(": the name service is down"));
    }
    options.rename = [](const std::string&) -> std::string { throw std::runtime_error("no names today"); };
    try {
        ckpt::restore(dir.path("r.npz"), vars, options);
        FAIL("a renamer throwing std::runtime_error did not abort the restore");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ERROR);
        CHECK_THAT(e.what(), Catch::EndsWith(": no names today"));
    }
    // The next failure says nothing of the renamer's.
    ckpt::Vars empty_name;
    empty_name.add_zeros<float>("w", {2});
    try {
        ckpt::restore(dir.path("absent.npz"), empty_name);
        FAIL("a missing file did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(std::string(e.what()) == ckpt_error_message());
    }
}

TEST_CASE("Progress is reported up to the total, never decreasing, for saves and reads", "[npz][progress]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add("a", std::vector<float>(1000, 1.0f));
    vars.add("b", std::vector<int8_t>(24, 2));
    std::vector<std::pair<uint64_t, uint64_t>> reports;
    ckpt::Options options;
    options.progress = [&](uint64_t done, uint64_t total) { reports.emplace_back(done, total); };
    ckpt::save(dir.path("p.npz"), vars, options);
    REQUIRE_FALSE(reports.empty());
    CHECK(reports.back() == std::make_pair(uint64_t{4024}, uint64_t{4024}));
    for (size_t k = 1; k < reports.size(); ++k) CHECK(reports[k].first >= reports[k - 1].first);

    reports.clear();
    CHECK(ckpt::read(dir.path("p.npz"), options).size() == 2);
    REQUIRE_FALSE(reports.empty());
    CHECK(reports.back().first == reports.back().second);

    // A throwing progress function cannot fail the work.
    options.progress = [](uint64_t, uint64_t) { throw std::runtime_error("ignored"); };
    CHECK_NOTHROW(ckpt::save(dir.path("p.npz"), vars, options));
}

TEST_CASE("ckpt::Reader tells how the file holds each array: member, compression, bytes, CRC-32, offset", "[npz]") {
    TempDir dir;
    ckpt::Vars vars;
    std::vector<float> w(64);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    vars.add("w", w, ckpt::Shape{64});
    for (const ckpt::Compression compression : {ckpt::Compression::store, ckpt::Compression::deflate}) {
        ckpt::Options options;
        options.layout = ckpt::Layout::objax;
        options.compression = compression;
        ckpt::save(dir.path("m.npz"), vars, options);
        ckpt::Reader npz(dir.path("m.npz"));
        CHECK(npz.layout() == ckpt::Layout::objax);
        CHECK(npz.member_name(0) == "0.npy");
        CHECK(npz.compression(0) == compression);
        CHECK(npz.crc32(0) != 0);
        if (compression == ckpt::Compression::store) {
            CHECK(npz.stored_bytes(0) == 128 + 256);  // numpy's 128-byte npy header, then the data
            CHECK(npz.data_offset(0) % 64 == 0);
            std::ifstream in(dir.path("m.npz"), std::ios::binary);
            in.seekg(static_cast<std::streamoff>(npz.data_offset(0)));
            std::vector<float> at(64);
            in.read(reinterpret_cast<char*>(at.data()), 256);
            CHECK(at == w);  // the array's bytes are at the offset
        } else {
            CHECK(npz.stored_bytes(0) < 128 + 256);
            CHECK(npz.data_offset(0) == 0);
        }
        CHECK(npz.byte_order(0) == '<');
        CHECK(npz.file_size() == std::filesystem::file_size(dir.path("m.npz")));
        CHECK_FALSE(npz.fortran_order(0));
        CHECK_THROWS_AS(npz.member_name(1), ckpt::Error);
    }
}

TEST_CASE("Reader::map gives typed views without a copy, checked as reads are", "[npz][map]") {
    TempDir dir;
    Model model;
    ckpt::Vars vars;
    model.borrow_into(vars);
    ckpt::save(dir.path("m.npz"), vars);

    ckpt::Reader npz(dir.path("m.npz"));
    const ckpt::ArrayView<const float> w = npz.map<float>("w");
    CHECK(w.to_vector() == model.w);
    CHECK(npz.map<int64_t>("step")[0] == 42);
    CHECK(npz.map_bytes(npz.index("w")).data() == reinterpret_cast<const unsigned char*>(w.data()));
    CHECK(npz.map_bytes(npz.index("grid")).size() == sizeof model.grid);
    try {
        npz.map<double>("w");
        FAIL("a view of the wrong type did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EMISMATCH);
    }

    // A flipped byte: the first view fails its CRC-32, unless the file was opened to skip the check.
    const uint64_t at = npz.data_offset(npz.index("w"));
    npz.close();
    {
        std::fstream f(dir.path("m.npz"), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(at));
        f.put('\x7f');
    }
    ckpt::Reader corrupt(dir.path("m.npz"));
    try {
        corrupt.map<float>("w");
        FAIL("a corrupt array mapped");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        CHECK_THAT(e.what(), Catch::Contains("CRC-32 mismatch"));
    }
    ckpt::Options unverified;
    unverified.map_unverified = true;
    CHECK(ckpt::Reader(dir.path("m.npz"), unverified).map_bytes(0)[0] == 0x7f);
}

TEST_CASE("Reader::map_vars restores every array without a copy, copy-on-write when opened so", "[npz][map]") {
    TempDir dir;
    Model model;
    ckpt::Vars vars;
    model.borrow_into(vars);
    vars.set_metadata("epoch", "3");
    ckpt::save(dir.path("m.npz"), vars);
    const std::string before = test::read_file(dir.path("m.npz"));

    ckpt::Options writable;
    writable.map_writable = true;
    ckpt::Reader npz(dir.path("m.npz"), writable);
    ckpt::Vars mapped = npz.map_vars();
    REQUIRE(mapped.size() == vars.size());
    CHECK(mapped.get<float>("w").to_vector() == model.w);
    CHECK(mapped.get<float>("w").data() == npz.map<float>("w").data());  // the file's views themselves
    CHECK(mapped.metadata("epoch") == std::optional<std::string_view>("3"));
    mapped.get<float>("w")[0] = -123.0f;  // copy-on-write: this process sees it, the file does not
    CHECK(npz.map<float>("w")[0] == -123.0f);
    CHECK(test::read_file(dir.path("m.npz")) == before);
}

TEST_CASE("What a renamer throws is said once in the error, for files and managers", "[npz][rename][errors]") {
    TempDir dir;
    ckpt::Vars saved;
    saved.add<float>("w", {1, 2});
    ckpt::Options options;
    options.rename = [](const std::string& name) -> std::string {
        throw ckpt::Error(CKPT_EIO, "the name service for '" + name + "' is down");
    };
    ckpt::Vars vars;
    vars.add_zeros<float>("w", {2});

    ckpt::save(dir.path("r.npz"), saved);
    try {
        ckpt::restore(dir.path("r.npz"), vars, options);
        FAIL("a throwing renamer did not abort the restore");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(test::occurrences(e.what(), "the name service for 'w' is down") == 1);
    }

    ckpt::ManagerOptions m;
    m.npz.rename = options.rename;
    ckpt::Manager manager(dir.path("run"), m);
    manager.save(saved, 1);
    try {
        manager.restore(vars);
        FAIL("a throwing renamer did not abort the manager's restore");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("the renamer refused 'w'"));
        CHECK(test::occurrences(e.what(), "the name service for 'w' is down") == 1);
    }
}

TEST_CASE("Reader tells the byte order and memory order numpy wrote an array in", "[npz][info]") {
    TempDir dir;
    const std::string path = dir.path("o.npz");
    const std::string command = "/usr/bin/python3 -c \"import sys, numpy as np; c = np.arange(6.0).reshape(2, 3); "
                                "np.savez(sys.argv[1], big=np.asfortranarray(c.astype('>f8')), flags=np.ones(2, bool))\" " +
                                path + " 2>/dev/null";
    // numpy is a test dependency (scripts/deps test): without it this fails rather than passing untested.
    INFO("wrote " << path << " with numpy at /usr/bin/python3");
    REQUIRE(std::system(command.c_str()) == 0);
    ckpt::Reader npz(path);
    const size_t big = npz.find("big").value(), flags = npz.find("flags").value();
    CHECK(npz.byte_order(big) == '>');
    CHECK(npz.fortran_order(big));
    CHECK(npz.byte_order(flags) == '|');
    CHECK_FALSE(npz.fortran_order(flags));
}

namespace {

// A model of 16 chunks of 64 KiB whose training step changed one element.
ckpt::Vars chunked_model(int64_t step) {
    std::vector<float> w(256 * 1024);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    w[1000] = static_cast<float>(step);
    ckpt::Vars vars;
    vars.add("w", w);
    vars.add("step", step);
    return vars;
}

}  // namespace

TEST_CASE("Chunk hashes are one more member, which ckpt's readers hide", "[npz][incremental]") {
    TempDir dir;
    ckpt::Options options;
    options.chunk_hashes = true;
    ckpt::save(dir.path("a.npz"), chunked_model(1), options);
    CHECK(test::read_file(dir.path("a.npz")).find("__ckpt_chunks__.npy") != std::string::npos);
    CHECK(ckpt::Reader(dir.path("a.npz")).names() == std::vector<std::string>{"w", "step"});
    CHECK(ckpt::read(dir.path("a.npz")).size() == 2);
    ckpt::save(dir.path("plain.npz"), chunked_model(1));
    CHECK(test::read_file(dir.path("plain.npz")).find("__ckpt_chunks__") == std::string::npos);
}

TEST_CASE("A save against a base is the bytes of a full save with chunk hashes", "[npz][incremental]") {
    TempDir dir;
    std::shared_ptr<ckpt::Storage> storage;
    std::string at;
    SECTION("on disk, whose filesystem may refuse clones: the save then writes") { at = dir.path() + "/"; }
    SECTION("in memory, which clones by copying") { storage = ckpt::Storage::memory(); }
    ckpt::Options full;
    full.storage = storage;
    full.chunk_hashes = true;
    ckpt::Options incremental;
    incremental.storage = storage;
    incremental.base = at + "1.npz";
    ckpt::save(at + "1.npz", chunked_model(1), full);
    ckpt::save(at + "2.npz", chunked_model(2), incremental);
    ckpt::save(at + "full.npz", chunked_model(2), full);
    const ckpt::Files files(storage);
    const bool same = files.open(at + "2.npz").read_all() == files.open(at + "full.npz").read_all();
    CHECK(same);
    const ckpt::Vars back = ckpt::read(at + "2.npz", full);
    CHECK(back.get<float>("w")[1000] == 2.0f);
    CHECK(back.get<float>("w")[1001] == 1001.0f);
    CHECK(back.scalar<int64_t>("step") == 2);
}

TEST_CASE("A writer's save_vars against the save queued before it is the bytes of a full save",
          "[npz][incremental][writer]") {
    TempDir dir;
    ckpt::WriterOptions queue;
    queue.kind = ckpt::WriterKind::queue;
    queue.queue_depth = 2;
    queue.out_dir = dir.path();
    ckpt::Writer writer(queue);
    ckpt::Options hashed;
    hashed.chunk_hashes = true;
    ckpt::Options incremental;
    incremental.base = dir.path("1.npz");  // opened when the save runs, after the save queued before it
    writer.save_vars("1.npz", chunked_model(1), hashed);
    writer.save_vars("2.npz", chunked_model(2), incremental);
    writer.wait();
    ckpt::save(dir.path("full.npz"), chunked_model(2), hashed);
    const bool same = test::read_file(dir.path("2.npz")) == test::read_file(dir.path("full.npz"));
    CHECK(same);
    CHECK(ckpt::read(dir.path("2.npz")).get<float>("w")[1000] == 2.0f);
}

TEST_CASE("A base that cannot serve makes a full save", "[npz][incremental]") {
    TempDir dir;
    ckpt::save(dir.path("plain.npz"), chunked_model(1));
    ckpt::Options hashed;
    hashed.chunk_hashes = true;
    ckpt::save(dir.path("full.npz"), chunked_model(2), hashed);
    for (const char* base : {"missing.npz", "plain.npz"}) {
        INFO(base);
        ckpt::Options against;
        against.base = dir.path(base);
        ckpt::save(dir.path("b.npz"), chunked_model(2), against);
        const bool same = test::read_file(dir.path("b.npz")) == test::read_file(dir.path("full.npz"));
        CHECK(same);
    }
}

TEST_CASE("A safetensors file goes through the same calls: saved by its name, read by its content",
          "[npz][safetensors]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add<float>("w", {1, 2, 3, 4, 5, 6}, {2, 3});
    vars.add("bf", std::vector<ckpt::bfloat16>{{0x3f80}, {0x7fc1}});
    vars.set_metadata("format", "pt");
    ckpt::save(dir.path("m.safetensors"), vars);
    ckpt::Reader st(dir.path("m.safetensors"));
    CHECK(st.format() == ckpt::Format::safetensors);
    CHECK(st.names() == std::vector<std::string>{"w", "bf"});
    CHECK(st.read<float>("w") == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(st.read<ckpt::bfloat16>("bf") == std::vector<ckpt::bfloat16>{{0x3f80}, {0x7fc1}});
    CHECK(st.metadata("format") == std::optional<std::string_view>("pt"));

    ckpt::Options as_npz;
    as_npz.format = ckpt::Format::npz;
    ckpt::save(dir.path("m2.safetensors"), vars, as_npz);  // the option wins over the name
    CHECK(ckpt::Reader(dir.path("m2.safetensors")).format() == ckpt::Format::npz);
    CHECK(test::code_of([&] { ckpt::Reader(dir.path("m.safetensors"), as_npz); }) == CKPT_EFORMAT);

    ckpt::Vars wide;
    wide.add<double>("z", {1, 2});
    wide.add("c", std::vector<std::complex<double>>{{1, 2}});
    CHECK(test::code_of([&] { ckpt::save(dir.path("bad.safetensors"), wide); }) == CKPT_EUNSUPPORTED);
}

TEST_CASE("A sharded safetensors save is read back as one checkpoint", "[npz][safetensors]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add("w", std::vector<float>(100, 1.5f));
    vars.add("n", std::vector<int64_t>(100, 7));
    ckpt::Options sharded;
    sharded.max_shard_bytes = 512;
    ckpt::save(dir.path("model.safetensors"), vars, sharded);
    ckpt::Reader index(dir.path("model.safetensors.index.json"));
    CHECK(index.format() == ckpt::Format::safetensors);
    CHECK(index.size() == 2);
    CHECK(index.read<int64_t>("n") == std::vector<int64_t>(100, 7));
    CHECK(index.read<float>("w") == std::vector<float>(100, 1.5f));
}
