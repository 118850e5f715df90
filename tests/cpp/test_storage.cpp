// SPDX-License-Identifier: Apache-2.0
// ckpt::Storage: a C++ subclass plugged in through the callback table and used by files, managers and writers;
// what its methods throw becomes the failing call's code and message; it lives as long as anything uses it.
#include "support.hpp"

#include <catch2/catch.hpp>

using test::MapStorage;

namespace {

ckpt::Vars small_model(float scale = 1.0f) {
    ckpt::Vars vars;
    vars.add<float>("w", {1 * scale, 2 * scale, 3 * scale, 4 * scale}, {2, 2});
    vars.add("step", int64_t{3});
    return vars;
}

}  // namespace

TEST_CASE("Files are saved into and read from a Storage subclass", "[storage]") {
    auto storage = std::make_shared<MapStorage>();
    storage->make_dirs("runs/a");
    ckpt::Options options;
    options.storage = storage;
    ckpt::save("runs/a/model.npz", small_model(), options);

    CHECK(storage->paths() == std::vector<std::string>{"runs/a/model.npz"});  // the temporary was renamed away
    CHECK(storage->counters().creates == 1);
    CHECK(storage->counters().syncs == 1);
    CHECK(storage->counters().closes == 1);
    CHECK(storage->counters().renames == 1);

    const ckpt::Vars back = ckpt::read("runs/a/model.npz", options);
    CHECK(back.get<float>("w").to_vector() == std::vector<float>{1, 2, 3, 4});
    ckpt::Vars into = small_model(0);
    ckpt::restore("runs/a/model.npz", into, options);
    CHECK(into.get<float>("w")[3] == 4);
    ckpt::Reader npz("runs/a/model.npz", options);
    CHECK(npz.read<int64_t>("step") == std::vector<int64_t>{3});

    // Its bytes are an ordinary .npz: the same arrays read from memory.
    CHECK(ckpt::read_memory(storage->contents("runs/a/model.npz")).get<float>("w")[0] == 1);

    try {
        ckpt::read("runs/a/absent.npz", options);
        FAIL("a missing file in the storage did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_ENOTFOUND);  // the code the storage threw
        CHECK(std::string(e.what()) == ckpt_error_message());
    }
}

TEST_CASE("What a storage method throws fails the call with its code and message, leaving the target alone",
          "[storage][errors]") {
    auto storage = std::make_shared<MapStorage>();
    ckpt::Options options;
    options.storage = storage;
    ckpt::save("model.npz", small_model(1), options);
    const std::string before = storage->contents("model.npz");

    storage->fail_writes("the bucket is over its quota");
    try {
        ckpt::save("model.npz", small_model(2), options);
        FAIL("a failing storage did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);  // a std::runtime_error from a storage is an I/O failure
        const std::string library = ckpt_error_message();
        CHECK_THAT(library, Catch::EndsWith("storage callback 'write' failed: the bucket is over its quota"));
        CHECK(std::string(e.what()) == library);
    }
    CHECK(storage->contents("model.npz") == before);
    CHECK(storage->paths() == std::vector<std::string>{"model.npz"});  // the temporary was removed

    storage->heal();
    ckpt::save("model.npz", small_model(2), options);
    CHECK(ckpt::read("model.npz", options).get<float>("w")[0] == 2);
}

TEST_CASE("Appending saves reach open_append; a storage without it refuses them", "[storage][errors]") {
    auto storage = std::make_shared<MapStorage>();
    ckpt::Writer appender({ckpt::WriterKind::simple, 0, storage, std::nullopt});
    ckpt::SaveOptions append;
    append.append = true;
    appender.save("log.txt", [](ckpt::Sink& s) { s.write("one\n"); }, append);
    appender.save("log.txt", [](ckpt::Sink& s) { s.write("two\n"); }, append);
    CHECK(storage->contents("log.txt") == "one\ntwo\n");

    class Minimal final : public ckpt::Storage {
    public:
        void make_dirs(const std::string&) override {}
        std::unique_ptr<OutputFile> create(const std::string&) override { throw ckpt::Error(CKPT_EIO, "read-only"); }
        void rename(const std::string&, const std::string&) override {}
        void remove(const std::string&) override {}
        std::vector<std::string> list(const std::string&) override { return {}; }
        std::unique_ptr<InputFile> open_read(const std::string& p) override { throw ckpt::Error(CKPT_ENOTFOUND, p); }
    };
    ckpt::Writer writer({ckpt::WriterKind::simple, 0, std::make_shared<Minimal>(), std::nullopt});
    try {
        writer.save("log.txt", [](ckpt::Sink& s) { s.write("x"); }, append);
        FAIL("appending to a storage without open_append did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EUNSUPPORTED);
        CHECK_THAT(e.what(), Catch::Contains("cannot append"));
    }
    try {
        writer.save("file.bin", [](ckpt::Sink& s) { s.write("x"); });
        FAIL("a storage whose create throws did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK_THAT(e.what(), Catch::Contains("storage callback 'create'") && Catch::EndsWith(": read-only"));
    }
}

TEST_CASE("A manager keeps its checkpoints in a Storage subclass", "[storage][manager]") {
    auto storage = std::make_shared<MapStorage>();
    auto destroyed = std::make_shared<std::atomic<bool>>(false);
    storage->on_destroy(destroyed);
    std::weak_ptr<MapStorage> weak = storage;
    {
        ckpt::ManagerOptions options;
        options.keep = 2;
        options.storage = storage;
        ckpt::Manager manager("logs", options);
        storage.reset();  // the manager keeps it alive
        for (int64_t i = 1; i <= 4; ++i) manager.save(small_model(static_cast<float>(i)), i * 10);
        CHECK(manager.list() == std::vector<int64_t>{30, 40});
        CHECK(manager.path(40) == "logs/ckpt/0000000040.npz");

        auto locked = weak.lock();
        REQUIRE(locked);
        CHECK(locked->exists("logs/ckpt/0000000040.npz"));
        CHECK_FALSE(locked->exists("logs/ckpt/0000000010.npz"));  // retention removed it through the storage
        locked.reset();

        ckpt::Vars vars = small_model(0);
        CHECK(manager.restore(vars) == 40);
        CHECK(vars.get<float>("w")[0] == 4);
        auto [read, idx] = manager.read(30);
        CHECK(idx == 30);
        CHECK(read.get<float>("w")[0] == 3);
        CHECK_FALSE(*destroyed);
    }
    CHECK(*destroyed);  // released with its last user
}

TEST_CASE("ckpt's memory storage holds files for managers, writers and files alike", "[storage][memory]") {
    std::shared_ptr<ckpt::Storage> memory = ckpt::Storage::memory();
    ckpt::Options options;
    options.storage = memory;
    ckpt::save("model.npz", small_model(5), options);
    CHECK(ckpt::read("model.npz", options).get<float>("w")[0] == 5);

    ckpt::ManagerOptions m;
    m.storage = memory;
    ckpt::Manager manager("run", m);
    manager.save(small_model(6), 1);

    // A second manager on the same directory of the same memory storage takes it over at its first save; the
    // first one's saves are then refused.
    {
        ckpt::Manager second("run", m);
        second.save(small_model(6), 2);
        try {
            manager.save(small_model(6), 3);
            FAIL("a manager whose directory was taken over saved");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EBUSY);
        }
    }

    ckpt::Writer writer({ckpt::WriterKind::queue, 2, memory, std::string("run/ckpt")});
    writer.save_vars("extra.npz", small_model(7));
    writer.wait();
    options.storage = memory;
    CHECK(ckpt::read("run/ckpt/extra.npz", options).get<float>("w")[0] == 7);
    CHECK(manager.list() == std::vector<int64_t>{1, 2});  // extra.npz is not a checkpoint name

    // Its C++ methods have nothing to reach: only ckpt's calls use it.
    try {
        memory->make_dirs("x");
        FAIL("a method of the memory storage did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EUNSUPPORTED);
    }
}

TEST_CASE("ckpt::Files lists, stats, reads and removes the files of any storage", "[storage][files]") {
    test::TempDir dir;
    auto map = std::make_shared<MapStorage>();
    map->set_directories(ckpt::Storage::Directories::renamable);
    for (const std::shared_ptr<ckpt::Storage>& storage :
         {std::shared_ptr<ckpt::Storage>(), ckpt::Storage::memory(), std::shared_ptr<ckpt::Storage>(map)}) {
        const std::string root = storage ? std::string("run") : dir.path() + "/run";
        const ckpt::Files files(storage);
        files.make_dirs(root + "/sub");
        ckpt::Options options;
        options.storage = storage;
        ckpt::save(root + "/a.npz", small_model(2), options);
        ckpt::save(root + "/sub/b.npz", small_model(3), options);

        CHECK(files.list(root) == std::vector<std::string>{"a.npz", "sub/"});
        const std::optional<ckpt::FileInfo> a = files.stat(root + "/a.npz");
        REQUIRE(a);
        CHECK(!a->is_dir);
        CHECK(a->size > 100);
        if (storage != map) {  // the C++ storage has no stat callback: its files' times are unknown
            REQUIRE(a->modified);
            CHECK(std::chrono::system_clock::now() - *a->modified < std::chrono::minutes(5));
        }
        CHECK(files.stat(root + "/sub")->is_dir);
        CHECK(!files.stat(root + "/missing"));
        // A file written whole shares nothing; memory and callback storages cannot tell (nor can tmpfs).
        const std::optional<uint64_t> shared = files.shared_bytes(root + "/a.npz");
        if (storage) CHECK(!shared);
        if (shared) CHECK(*shared == 0);
        CHECK_THROWS_AS(files.shared_bytes(root + "/missing"), ckpt::Error);

        ckpt::File f = files.open(root + "/a.npz");
        CHECK(f.size() == a->size);
        const std::string bytes = f.read_all();
        CHECK(bytes.size() == a->size);
        CHECK(bytes.compare(0, 2, "PK") == 0);
        char tail[8];
        CHECK(f.read_at(a->size - 3, tail, sizeof tail) == 3);  // short at the end

        CHECK(test::code_of([&] { files.open(root + "/missing"); }) == CKPT_ENOTFOUND);
        CHECK(test::code_of([&] { files.remove(root + "/sub"); }) == CKPT_EEXIST);
        files.remove(root + "/sub", true);
        files.remove(root + "/a.npz");
        CHECK(files.list(root).empty());
    }
}

TEST_CASE("Managers and writers refuse a storage given in their npz options instead of their own", "[storage]") {
    ckpt::ManagerOptions m;
    m.npz.storage = ckpt::Storage::memory();
    try {
        ckpt::Manager manager("nowhere", m);
        FAIL("a manager with a storage in its npz options did not throw");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK_THAT(e.what(), Catch::Contains("give it as the storage option"));
    }
    ckpt::Writer writer({ckpt::WriterKind::simple, 0, ckpt::Storage::memory(), std::nullopt});
    ckpt::Options npz;
    npz.storage = ckpt::Storage::memory();
    CHECK_THROWS_AS(writer.save_vars("a.npz", small_model(), npz), ckpt::Error);
}

TEST_CASE("A C storage is adopted and used through ckpt's calls", "[storage]") {
    ckpt_storage* raw = nullptr;
    REQUIRE(ckpt_storage_new_memory(&raw) == CKPT_OK);
    std::shared_ptr<ckpt::Storage> adopted = ckpt::Storage::adopt(raw);
    ckpt::Options options;
    options.storage = adopted;
    ckpt::save("a.npz", small_model(9), options);
    CHECK(ckpt::read("a.npz", options).get<float>("w")[0] == 9);
    CHECK_THROWS_AS(ckpt::Storage::adopt(nullptr), ckpt::Error);
}

TEST_CASE("What a storage method throws is said once in the error, whichever thread the method ran on",
          "[storage][errors]") {
    const auto kind = GENERATE(ckpt::WriterKind::simple, ckpt::WriterKind::thread);
    auto storage = std::make_shared<MapStorage>();
    ckpt::Writer writer({kind, 0, storage, std::nullopt});
    storage->fail_writes("bucket 7 is over its quota");
    try {
        writer.save_vars("model.npz", small_model());
        writer.wait();
        FAIL("a failing storage did not fail the save");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EIO);
        CHECK(std::string(e.what()) == ckpt_error_message());
        CHECK_THAT(e.what(), Catch::Contains("model.npz") && Catch::Contains("storage callback 'write' failed"));
        CHECK(test::occurrences(e.what(), "bucket 7 is over its quota") == 1);
    }
}
