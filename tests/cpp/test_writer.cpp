// SPDX-License-Identifier: Apache-2.0
// ckpt::Writer and ckpt::Sink: save functions as C++ callables, in the caller's thread and in the background; what
// they throw fails the save (never crossing into C) and is reported with its code; background errors are thrown by
// wait and finalize, exactly once; after_save runs once each save is in place, and what it throws is that save's error.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <new>
#include <thread>

using test::MapStorage;
using test::TempDir;

namespace {

ckpt::WriterOptions in_dir(const TempDir& dir, ckpt::WriterKind kind, uint32_t depth = 0) {
    ckpt::WriterOptions o;
    o.kind = kind;
    o.queue_depth = depth;
    o.out_dir = dir.path();
    return o;
}

// Counts how many copies of itself are alive, to see that a background save's payload is released.
struct Tracked {
    std::shared_ptr<std::atomic<int>> alive;
    explicit Tracked(std::shared_ptr<std::atomic<int>> a) : alive(std::move(a)) { ++*alive; }
    Tracked(const Tracked& o) : alive(o.alive) { ++*alive; }
    Tracked(Tracked&& o) noexcept : alive(o.alive) { ++*alive; }
    Tracked& operator=(const Tracked&) = delete;
    ~Tracked() { --*alive; }
};

}  // namespace

TEST_CASE("A save function writes the file through the Sink: strings, ranges and raw bytes", "[writer]") {
    TempDir dir;
    const auto kind = GENERATE(ckpt::WriterKind::simple, ckpt::WriterKind::thread, ckpt::WriterKind::queue);
    ckpt::Writer writer(in_dir(dir, kind, 3));
    REQUIRE(writer.kind() == kind);
    const std::vector<uint16_t> numbers = {1, 2, 0xffff};
    for (int i = 0; i < 3; ++i) {
        writer.save("f" + std::to_string(i) + ".bin", [numbers, i](ckpt::Sink& sink) {
            sink.write("head:");
            sink.write(std::string(1, static_cast<char>('0' + i)));
            sink.write(numbers);
            const char tail[] = {'!', '\0'};
            sink.write(tail, sizeof tail);
        });
    }
    writer.wait();
    for (int i = 0; i < 3; ++i) {
        const std::string expected =
            "head:" + std::string(1, static_cast<char>('0' + i)) + test::bytes_of(numbers) + std::string("!\0", 2);
        CHECK(test::read_file(dir.path("f" + std::to_string(i) + ".bin")) == expected);
    }
    writer.finalize();
}

TEST_CASE("A save function that throws fails the save with the exception's code and leaves the target alone",
          "[writer][errors]") {
    TempDir dir;
    ckpt::Writer writer(in_dir(dir, ckpt::WriterKind::simple));
    writer.save("model.bin", [](ckpt::Sink& sink) { sink.write("the good one"); });

    SECTION("ckpt::Error keeps its code, and the library's message says its message") {
        try {
            writer.save("model.bin", [](ckpt::Sink& sink) {
                sink.write("half of a new");
                throw ckpt::Error(CKPT_EIO, "the disk is on fire");
            });
            FAIL("a throwing save function did not fail the save");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EIO);
            const std::string library = ckpt_error_message();
            CHECK_THAT(library, Catch::Contains("model.bin") && Catch::EndsWith("save function failed: the disk is on fire"));
            CHECK(std::string(e.what()) == library);
        }
    }
    SECTION("any other exception is CKPT_ERROR") {
        try {
            writer.save("model.bin", [](ckpt::Sink&) { throw std::runtime_error("serializer broke"); });
            FAIL("a throwing save function did not fail the save");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ERROR);
            CHECK_THAT(e.what(), Catch::EndsWith(": serializer broke"));
        }
    }
    SECTION("std::bad_alloc is CKPT_ENOMEM, and exceptions of no std type are caught too") {
        try {
            writer.save("model.bin", [](ckpt::Sink&) { throw std::bad_alloc(); });
            FAIL("a throwing save function did not fail the save");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ENOMEM);
        }
        try {
            writer.save("model.bin", [](ckpt::Sink&) { throw 42; });
            FAIL("a throwing save function did not fail the save");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_ERROR);
        }
    }
    SECTION("a sink write that failed fails the save with the storage's error, even if the function goes on") {
        auto storage = std::make_shared<MapStorage>();
        ckpt::Writer on_map({ckpt::WriterKind::simple, 0, storage, std::nullopt});
        on_map.save("m.bin", [](ckpt::Sink& s) { s.write("old"); });
        storage->fail_writes("no space left");
        bool second_write_failed = false;
        try {
            on_map.save("m.bin", [&](ckpt::Sink& s) {
                try {
                    s.write("new");
                } catch (const ckpt::Error&) {
                }
                try {
                    s.write("more");
                } catch (const ckpt::Error& e) {
                    second_write_failed = e.code() == CKPT_EIO;
                }
            });
            FAIL("a save whose sink failed did not fail");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EIO);
            CHECK_THAT(e.what(), Catch::Contains("storage callback 'write'") && Catch::EndsWith(": no space left"));
        }
        CHECK(second_write_failed);
        CHECK(storage->contents("m.bin") == "old");
    }
    CHECK(test::read_file(dir.path("model.bin")) == "the good one");
    CHECK(test::files_in(dir.path()) == std::vector<std::string>{"model.bin"});  // no temporary left behind
}

TEST_CASE("A background save's error is thrown by the next wait or finalize, exactly once", "[writer][errors]") {
    TempDir dir;
    const auto kind = GENERATE(ckpt::WriterKind::thread, ckpt::WriterKind::queue);
    ckpt::Writer writer(in_dir(dir, kind, 2));

    writer.save("a.bin", [](ckpt::Sink&) { throw ckpt::Error(CKPT_EIO, "lost the network"); });  // queued: no error yet
    try {
        writer.wait();
        FAIL("wait did not report the failed background save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("a.bin") && Catch::EndsWith(": lost the network"));
    }
    CHECK_NOTHROW(writer.wait());  // reported once
    CHECK_FALSE(std::filesystem::exists(dir.path("a.bin")));

    writer.save("b.bin", [](ckpt::Sink& s) { s.write("b"); });
    writer.save("c.bin", [](ckpt::Sink&) { throw std::runtime_error("c broke"); });
    try {
        writer.finalize();
        FAIL("finalize did not report the failed background save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ERROR);
        CHECK_THAT(e.what(), Catch::Contains("c.bin") && Catch::EndsWith(": c broke"));
    }
    CHECK(test::read_file(dir.path("b.bin")) == "b");
    CHECK_NOTHROW(writer.finalize());
    try {
        writer.save("d.bin", [](ckpt::Sink&) {});
        FAIL("a save after finalize did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
    }
}

TEST_CASE("A background save's error is thrown by the next save, which is then not started", "[writer][errors]") {
    TempDir dir;
    auto storage = std::make_shared<MapStorage>();
    ckpt::Writer writer({ckpt::WriterKind::thread, 0, storage, std::nullopt});
    storage->fail_writes("quota");
    writer.save("x.bin", [](ckpt::Sink& s) { s.write("x"); });
    try {
        writer.save("y.bin", [](ckpt::Sink& s) { s.write("y"); });  // a thread writer first waits for x.bin
        FAIL("the next save did not report the failed one");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains(".x.bin.tmp-") && Catch::Contains("storage callback 'write' failed: quota;") &&
                                 Catch::EndsWith("y.bin was not started"));
    }
    storage->heal();
    writer.wait();
    CHECK_FALSE(storage->exists("y.bin"));
    CHECK_FALSE(storage->exists("x.bin"));
}

TEST_CASE("A background save owns its function until it has run, then releases it", "[writer]") {
    TempDir dir;
    auto alive = std::make_shared<std::atomic<int>>(0);
    {
        ckpt::Writer writer(in_dir(dir, ckpt::WriterKind::queue, 2));
        for (int i = 0; i < 6; ++i) {
            Tracked token(alive);
            std::vector<float> snapshot(1000, static_cast<float>(i));
            writer.save("s" + std::to_string(i) + ".bin", [token, snapshot](ckpt::Sink& s) { s.write(snapshot); });
            CHECK(*alive <= 3);  // the token here, and the payloads of at most two saves in flight
        }
        writer.wait();
        CHECK(*alive == 0);
        std::vector<float> expected(1000, 5.0f);
        CHECK(test::read_file(dir.path("s5.bin")) == test::bytes_of(expected));
    }
    CHECK(*alive == 0);
}

TEST_CASE("save_vars snapshots the arrays for background saves, unless told not to", "[writer]") {
    TempDir dir;
    std::vector<float> w = {1, 2, 3};
    ckpt::Vars vars;
    vars.borrow("w", w);
    ckpt::Writer writer(in_dir(dir, ckpt::WriterKind::queue, 2));
    std::atomic<uint64_t> reported{0};
    ckpt::Options npz;
    npz.layout = ckpt::Layout::objax;
    npz.progress = [&](uint64_t done, uint64_t) { reported = done; };
    writer.save_vars("v1.npz", vars, npz);
    std::fill(w.begin(), w.end(), -1.0f);  // training goes on at once
    writer.wait();
    CHECK(reported == 12);
    CHECK(ckpt::read(dir.path("v1.npz")).get<float>("w").to_vector() == std::vector<float>{1, 2, 3});

    ckpt::SaveOptions no_copy;
    no_copy.no_copy = true;
    no_copy.out_dir = dir.path();
    writer.save_vars("v2.npz", vars, {}, no_copy);
    writer.wait();  // the promise: unchanged until here
    CHECK(ckpt::read(dir.path("v2.npz")).get<float>("w").to_vector() == std::vector<float>{-1, -1, -1});

    ckpt::SaveOptions append;
    append.append = true;
    try {
        writer.save_vars("v3.npz", vars, {}, append);
        FAIL("an appending save_vars did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) == ckpt_error_message());
    }
}

TEST_CASE("A writer on a Storage subclass saves in the background through it", "[writer][storage]") {
    auto storage = std::make_shared<MapStorage>();
    storage->make_dirs("out");
    ckpt::Writer writer({ckpt::WriterKind::queue, 4, storage, std::string("out")});
    ckpt::Vars vars;
    vars.add<int32_t>("x", {5, 6});
    for (int i = 0; i < 5; ++i) writer.save_vars("v" + std::to_string(i) + ".npz", vars);
    writer.save("raw.bin", [](ckpt::Sink& s) { s.write("raw"); });
    writer.finalize();
    CHECK(storage->contents("out/raw.bin") == "raw");
    CHECK(ckpt::read_memory(storage->contents("out/v4.npz")).get<int32_t>("x").to_vector() == std::vector<int32_t>{5, 6});
    CHECK(storage->paths().size() == 6);

    // The storage's own words reach the error of a background save of arrays, whose writes ran on the writer's
    // thread.
    storage->fail_writes("bucket gone");
    ckpt::Writer background({ckpt::WriterKind::queue, 2, storage, std::string("out")});
    background.save_vars("lost.npz", vars);
    try {
        background.wait();
        FAIL("a background save_vars on a failing storage did not fail");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("lost.npz") && Catch::EndsWith("failed: bucket gone"));
    }
    storage->heal();

    ckpt::Writer failing({ckpt::WriterKind::queue, 2, storage, std::string("missing-dir")});
    failing.save("a.bin", [](ckpt::Sink& s) { s.write("a"); });
    try {
        failing.wait();
        FAIL("a save into a missing directory did not fail");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK_THAT(e.what(), Catch::Contains("a.bin"));
    }
}

TEST_CASE("What a save function throws is said once in the error, in the foreground and the background",
          "[writer][errors]") {
    TempDir dir;
    const auto kind = GENERATE(ckpt::WriterKind::simple, ckpt::WriterKind::thread, ckpt::WriterKind::queue);
    ckpt::Writer writer(in_dir(dir, kind, 2));
    try {
        writer.save("model.bin", [](ckpt::Sink& s) {
            s.write("half");
            throw std::runtime_error("the serializer met a NaN");
        });
        writer.wait();
        FAIL("a throwing save function did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ERROR);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("model.bin") && Catch::Contains("save function failed"));
        CHECK(test::occurrences(e.what(), "the serializer met a NaN") == 1);
    }
}

TEST_CASE("after_save is called with the path once the file is in place, on the thread that saved", "[writer]") {
    TempDir dir;
    const auto kind = GENERATE(ckpt::WriterKind::simple, ckpt::WriterKind::thread, ckpt::WriterKind::queue);
    struct Seen {
        std::string path, content;
        std::thread::id thread;
    };
    std::mutex mutex;
    std::vector<Seen> seen;
    auto options = in_dir(dir, kind, 2);
    options.after_save = [&](const std::string& path) {
        Seen s{path, test::read_file(path), std::this_thread::get_id()};
        std::lock_guard<std::mutex> lock(mutex);
        seen.push_back(std::move(s));
    };
    ckpt::Writer moved(options);
    ckpt::Writer writer(std::move(moved));  // the function goes with the writer
    writer.save("a.bin", [](ckpt::Sink& s) { s.write("first"); });
    ckpt::Vars vars;
    vars.add("w", std::vector<float>{1.5f, -2.0f});
    writer.save_vars("v.npz", vars);
    writer.wait();
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].path == dir.path("a.bin"));
    CHECK(seen[0].content == "first");
    CHECK(seen[1].path == dir.path("v.npz"));
    CHECK(seen[1].content == test::read_file(dir.path("v.npz")));
    CHECK(ckpt::read(dir.path("v.npz")).get<float>("w").to_vector() == std::vector<float>{1.5f, -2.0f});
    for (const Seen& s : seen) {
        if (kind == ckpt::WriterKind::simple)
            CHECK(s.thread == std::this_thread::get_id());
        else
            CHECK(s.thread != std::this_thread::get_id());
    }
}

TEST_CASE("What after_save throws is that save's error, thrown once; the file stays", "[writer][errors]") {
    TempDir dir;
    const auto kind = GENERATE(ckpt::WriterKind::simple, ckpt::WriterKind::thread, ckpt::WriterKind::queue);
    auto options = in_dir(dir, kind, 2);
    int calls = 0;
    options.after_save = [&](const std::string&) {
        if (++calls == 1) throw ckpt::Error(CKPT_EIO, "cannot remove old snapshots");
    };
    ckpt::Writer writer(options);
    try {
        writer.save("a.bin", [](ckpt::Sink& s) { s.write("a"); });
        writer.wait();
        FAIL("a throwing after_save did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()) ==
              dir.path("a.bin") + ": the after_save callback failed: cannot remove old snapshots");
    }
    CHECK(test::read_file(dir.path("a.bin")) == "a");
    writer.save("b.bin", [](ckpt::Sink& s) { s.write("b"); });
    CHECK_NOTHROW(writer.finalize());  // reported once
    CHECK(calls == 2);
    CHECK(test::read_file(dir.path("b.bin")) == "b");
}
