// SPDX-License-Identifier: Apache-2.0
// The writers through the C API: where a save lands, atomicity, order, the queue bound, how background errors
// come back, finalize, the copies background saves take, append mode, the storage option and the after_save callback.
//
// Catch2's assertions are not thread-safe: only the test's own thread asserts. Other threads (the writer's, and
// the ones a test starts to see whether a call blocks) only touch atomics and mutex-protected state.
#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ckpt::testing::message;
using ckpt::testing::read_file;
using ckpt::testing::write_file;
using namespace std::chrono_literals;

namespace {

using ckpt::testing::TempDir;

// Loops that shake out races in the hand-offs between the caller and the writer's thread.
constexpr int kRaceIterations = 50;
// Loops whose every iteration sleeps kBlockedFor to see that a call stays blocked.
constexpr int kBlockingIterations = 10;
// How long a blocked call is watched before the test lets it go. Only "did not return" is asserted: a correct
// writer never returns early, so a slow machine cannot make this flaky.
constexpr auto kBlockedFor = 30ms;
// Longer than anything here takes on a loaded machine under a sanitizer; a call that takes longer is hung.
constexpr auto kGenerous = 60s;

struct WriterFree {
    void operator()(ckpt_writer* w) const { ckpt_writer_free(w); }
};
struct VarsFree {
    void operator()(ckpt_vars* v) const { ckpt_vars_free(v); }
};
struct StorageFree {
    void operator()(ckpt_storage* s) const { ckpt_storage_free(s); }
};
using WriterPtr = std::unique_ptr<ckpt_writer, WriterFree>;
using VarsPtr = std::unique_ptr<ckpt_vars, VarsFree>;
using StoragePtr = std::unique_ptr<ckpt_storage, StorageFree>;

const char* kind_name(uint32_t kind) {
    switch (kind) {
        case CKPT_WRITER_SIMPLE: return "SIMPLE";
        case CKPT_WRITER_THREAD: return "THREAD";
        case CKPT_WRITER_QUEUE: return "QUEUE";
        default: return "?";
    }
}

// Makes dir the working directory until the scope ends (also when a REQUIRE fails inside it).
class InDirectory {
public:
    explicit InDirectory(const std::string& dir) : previous_(fs::current_path()) { fs::current_path(dir); }
    ~InDirectory() {
        std::error_code ec;
        fs::current_path(previous_, ec);
    }
    InDirectory(const InDirectory&) = delete;
    InDirectory& operator=(const InDirectory&) = delete;

private:
    fs::path previous_;
};

// Names in dir that look like the writers' temporaries (".<name>.tmp-XXXXXX").
std::vector<std::string> temporaries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (!name.empty() && name[0] == '.' && name.find(".tmp-") != std::string::npos) names.push_back(name);
    }
    return names;
}

// Bytes that differ at every offset a little, so a misplaced or missing chunk shows.
std::string pattern(size_t n, unsigned seed) {
    std::string s(n, '\0');
    uint32_t x = 2654435761u * (seed + 1);
    for (auto& c : s) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return s;
}

// A barrier a save passes through: the save counts its arrival and blocks until the test opens the gate.
class Gate {
public:
    void pass() {
        std::unique_lock<std::mutex> lock(mutex_);
        ++arrived_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return open_; });
    }
    // True once n saves have arrived; false if they did not within kGenerous.
    bool arrived(int n) {
        std::unique_lock<std::mutex> lock(mutex_);
        return changed_.wait_for(lock, kGenerous, [&] { return arrived_ >= n; });
    }
    void open() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = true;
        }
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    int arrived_ = 0;
    bool open_ = false;
};

// Opens a gate when the scope ends. Declared after the writer, so a failed REQUIRE releases the saves before the
// writer's destructor waits for them (rather than hanging).
class OpenOnExit {
public:
    explicit OpenOnExit(Gate& gate) : gate_(gate) {}
    ~OpenOnExit() { gate_.open(); }
    OpenOnExit(const OpenOnExit&) = delete;
    OpenOnExit& operator=(const OpenOnExit&) = delete;

private:
    Gate& gate_;
};

// What a save function does, as data: pass a gate, note its turn, write `bytes` (in two pieces), return `result`.
struct Job {
    explicit Job(std::string b = {}, int r = CKPT_OK) : bytes(std::move(b)), result(r) {}
    std::string bytes;
    int result;
    Gate* gate = nullptr;
    std::mutex* order_mutex = nullptr;
    std::vector<int>* order = nullptr;
    int index = 0;
    std::atomic<int> runs{0};
    std::thread::id ran_on;
};

int run_job(ckpt_sink* sink, void* payload) {
    Job& job = *static_cast<Job*>(payload);
    job.runs.fetch_add(1);
    job.ran_on = std::this_thread::get_id();
    if (job.gate != nullptr) job.gate->pass();
    if (job.order != nullptr) {
        std::lock_guard<std::mutex> lock(*job.order_mutex);
        job.order->push_back(job.index);
    }
    const size_t half = job.bytes.size() / 2;
    if (const int rc = ckpt_sink_write(sink, job.bytes.data(), half)) return rc;
    if (const int rc = ckpt_sink_write(sink, job.bytes.data() + half, job.bytes.size() - half)) return rc;
    return job.result;
}

int save(const WriterPtr& w, const char* filename, Job& job, uint32_t flags = 0) {
    return ckpt_writer_save(w.get(), nullptr, filename, run_job, &job, flags);
}

WriterPtr make_writer(uint32_t kind, const std::string& out_dir, uint32_t queue_depth = 0,
                      ckpt_storage* storage = nullptr) {
    ckpt_writer_options o;
    REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
    o.kind = kind;
    o.queue_depth = queue_depth;
    o.storage = storage;
    o.out_dir = out_dir.empty() ? nullptr : out_dir.c_str();
    ckpt_writer* w = nullptr;
    const int rc = ckpt_writer_new(&w, &o);
    INFO(message());
    REQUIRE(rc == CKPT_OK);
    REQUIRE(w != nullptr);
    return WriterPtr(w);
}

// Runs one ckpt call on a thread of its own, so that the test can watch whether it blocks.
class Background {
public:
    template <typename Call>
    explicit Background(Call call)
        : thread_([this, call] {
              const int rc = call();
              if (rc != CKPT_OK) message_ = ckpt_error_message();
              rc_ = rc;
              done_ = true;
          }) {}
    ~Background() {
        if (thread_.joinable()) thread_.join();
    }
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    bool returned() const { return done_; }
    // The call's result. A call still running after kGenerous has hung: the program aborts with a message rather
    // than hanging the test run.
    int result() {
        const auto deadline = std::chrono::steady_clock::now() + kGenerous;
        while (!done_ && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
        if (!done_) {
            std::fprintf(stderr, "a ckpt call made on another thread did not return within %lld s\n",
                         static_cast<long long>(std::chrono::seconds(kGenerous).count()));
            std::abort();
        }
        thread_.join();
        return rc_;
    }
    const std::string& error_message() const { return message_; }  // after result()

private:
    std::atomic<bool> done_{false};
    std::atomic<int> rc_{CKPT_ERROR};
    std::string message_;
    std::thread thread_;  // last: starts once the members above exist
};

// Arrays whose bytes make a bit-exact comparison mean something: NaN payloads, negative zero, infinities,
// subnormals, integer extremes, a 0-d scalar, an empty array, UTF-32 strings, a non-ASCII name.
struct Sample {
    std::vector<float> weights;          // float32 2x3
    std::vector<int64_t> step;           // int64 0-d
    std::vector<uint8_t> mask;           // bool 4
    std::vector<double> rotation;        // complex128 2 (4 doubles)
    std::vector<uint16_t> half;          // float16 3, raw bits
    std::vector<char32_t> labels;        // '<U3' 2
    std::vector<int32_t> empty;          // int32 0x4

    Sample() {
        uint32_t nan_bits = 0x7fc00123u;
        float nan;
        std::memcpy(&nan, &nan_bits, sizeof nan);
        weights = {nan, -0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                   std::numeric_limits<float>::max(), 1.5f};
        step = {std::numeric_limits<int64_t>::min() + 7};
        mask = {1, 0, 0, 1};
        rotation = {0.25, -1e300, std::numeric_limits<double>::lowest(), -0.0};
        half = {0x3c00, 0x7e01, 0x8001};
        labels = {U'a', U'\u00e9', U'\U0001F600', U'x', 0, 0};
    }
    // What training does to the arrays after a save returns.
    void overwrite() {
        std::memset(weights.data(), 0xA5, weights.size() * sizeof(float));
        std::memset(step.data(), 0xA5, step.size() * sizeof(int64_t));
        std::memset(mask.data(), 0xA5, mask.size());
        std::memset(rotation.data(), 0xA5, rotation.size() * sizeof(double));
        std::memset(half.data(), 0xA5, half.size() * sizeof(uint16_t));
        std::memset(labels.data(), 0xA5, labels.size() * sizeof(char32_t));
    }
    // Gives the memory back, so that a save still reading it would read freed memory (which ASan reports).
    void release() {
        std::vector<float>().swap(weights);
        std::vector<int64_t>().swap(step);
        std::vector<uint8_t>().swap(mask);
        std::vector<double>().swap(rotation);
        std::vector<uint16_t>().swap(half);
        std::vector<char32_t>().swap(labels);
    }
};

// A collection over a Sample: CKPT_COPY owns copies of its bytes, CKPT_BORROW points into it.
VarsPtr make_vars(Sample& s, uint32_t flags) {
    ckpt_vars* raw = nullptr;
    REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
    VarsPtr v(raw);
    const int64_t weights_shape[] = {2, 3};
    const int64_t mask_shape[] = {4};
    const int64_t rotation_shape[] = {2};
    const int64_t half_shape[] = {3};
    const int64_t labels_shape[] = {2};
    const int64_t empty_shape[] = {0, 4};
    REQUIRE(ckpt_vars_add(v.get(), "layer/w\u00e9ights", CKPT_FLOAT32, 2, weights_shape, s.weights.data(), flags) ==
            CKPT_OK);
    REQUIRE(ckpt_vars_add(v.get(), "step", CKPT_INT64, 0, nullptr, s.step.data(), flags) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v.get(), "mask", CKPT_BOOL, 1, mask_shape, s.mask.data(), flags) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v.get(), "rotation", CKPT_COMPLEX128, 1, rotation_shape, s.rotation.data(), flags) ==
            CKPT_OK);
    REQUIRE(ckpt_vars_add(v.get(), "half", CKPT_FLOAT16, 1, half_shape, s.half.data(), flags) == CKPT_OK);
    REQUIRE(ckpt_vars_add_strings(v.get(), "labels", CKPT_UNICODE, 12, 1, labels_shape, s.labels.data(), flags) ==
            CKPT_OK);
    REQUIRE(ckpt_vars_add(v.get(), "empty", CKPT_INT32, 2, empty_shape, s.empty.data(), flags) == CKPT_OK);
    return v;
}

VarsPtr read_npz(const std::string& path, ckpt_storage* storage = nullptr) {
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.storage = storage;
    ckpt_vars* raw = nullptr;
    const int rc = ckpt_read(&raw, path.c_str(), &o);
    INFO(path << ": " << message());
    REQUIRE(rc == CKPT_OK);
    return VarsPtr(raw);
}

// Same names in the same order, same dtypes, itemsizes, shapes and bytes.
void require_same(const ckpt_vars* expected, const ckpt_vars* actual) {
    REQUIRE(ckpt_vars_count(actual) == ckpt_vars_count(expected));
    for (size_t i = 0; i < ckpt_vars_count(expected); ++i) {
        INFO("array " << i << " '" << ckpt_vars_name(expected, i) << "'");
        REQUIRE(std::string(ckpt_vars_name(actual, i)) == ckpt_vars_name(expected, i));
        REQUIRE(ckpt_vars_dtype(actual, i) == ckpt_vars_dtype(expected, i));
        REQUIRE(ckpt_vars_itemsize(actual, i) == ckpt_vars_itemsize(expected, i));
        const uint32_t ndim = ckpt_vars_ndim(expected, i);
        REQUIRE(ckpt_vars_ndim(actual, i) == ndim);
        const std::vector<int64_t> shape(ckpt_vars_shape(expected, i), ckpt_vars_shape(expected, i) + ndim);
        REQUIRE(std::vector<int64_t>(ckpt_vars_shape(actual, i), ckpt_vars_shape(actual, i) + ndim) == shape);
        const size_t n = ckpt_vars_nbytes(expected, i);
        REQUIRE(ckpt_vars_nbytes(actual, i) == n);
        if (n > 0) REQUIRE(std::memcmp(ckpt_vars_data(actual, i), ckpt_vars_data(expected, i), n) == 0);
    }
}

// The npz bytes ckpt_save writes for a collection (made through a scratch file).
std::string npz_bytes(const ckpt_vars* vars) {
    TempDir scratch;
    const std::string path = scratch.file("scratch.npz");
    REQUIRE(ckpt_save(path.c_str(), vars, nullptr) == CKPT_OK);
    return read_file(path);
}

// A progress callback that holds a save in the middle of writing its arrays until the test opens the gate.
struct ProgressHold {
    Gate gate;
    std::atomic<bool> first{true};
};
void hold_on_first_progress(uint64_t, uint64_t, void* payload) {
    auto& hold = *static_cast<ProgressHold*>(payload);
    if (hold.first.exchange(false)) hold.gate.pass();
}

}  // namespace

// ------------------------------------------------------------------------------------------- where saves land

TEST_CASE("A save lands at out_dir/filename holding the bytes its function wrote, atomically", "[writer]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    TempDir dir, other;
    Job job(pattern(100000, 1));

    SECTION("with out_dir NULL the save goes to the writer's out_dir") {
        auto w = make_writer(kind, dir.str());
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("model.bin")) == job.bytes);
        CHECK(job.runs == 1);
        CHECK(temporaries(dir.str()).empty());
    }
    SECTION("an explicit out_dir wins over the writer's") {
        auto w = make_writer(kind, dir.str());
        REQUIRE(ckpt_writer_save(w.get(), other.str().c_str(), "model.bin", run_job, &job, 0) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(other.file("model.bin")) == job.bytes);
        CHECK_FALSE(fs::exists(dir.file("model.bin")));
        CHECK(temporaries(other.str()).empty());
    }
    SECTION("with no out_dir anywhere the save goes to the working directory") {
        {
            InDirectory cwd(dir.str());
            ckpt_writer_options o;
            REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
            o.kind = kind;
            ckpt_writer* raw = nullptr;
            REQUIRE(ckpt_writer_new(&raw, &o) == CKPT_OK);
            WriterPtr w(raw);
            REQUIRE(save(w, "model.bin", job) == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        }
        CHECK(read_file(dir.file("model.bin")) == job.bytes);
    }
    SECTION("the writer keeps its own copy of the options' out_dir") {
        std::string out_dir = dir.str();
        auto w = make_writer(kind, out_dir);
        out_dir.assign(out_dir.size(), 'x');  // the caller's string changes (and could be freed)
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("model.bin")) == job.bytes);
    }
    SECTION("a save replaces an existing file and leaves nothing else behind") {
        write_file(dir.file("model.bin"), "previous content");
        auto w = make_writer(kind, dir.str());
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("model.bin")) == job.bytes);
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(dir.str())) names.push_back(e.path().filename().string());
        CHECK(names == std::vector<std::string>{"model.bin"});
    }
    SECTION("a save function that writes nothing makes an empty file") {
        Job nothing;
        auto w = make_writer(kind, dir.str());
        REQUIRE(save(w, "empty.bin", nothing) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(fs::exists(dir.file("empty.bin")));
        CHECK(fs::file_size(dir.file("empty.bin")) == 0);
    }
}

TEST_CASE("A simple writer saves in the caller's thread; background writers save on another", "[writer]") {
    TempDir dir;
    SECTION("a simple writer's save has run and finished when the call returns") {
        Job job("bytes");
        auto w = make_writer(CKPT_WRITER_SIMPLE, dir.str());
        REQUIRE(save(w, "a.bin", job) == CKPT_OK);
        CHECK(job.runs == 1);
        CHECK(job.ran_on == std::this_thread::get_id());
        CHECK(read_file(dir.file("a.bin")) == "bytes");
    }
    SECTION("a background save returns while its function is still running") {
        const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        Gate gate;
        Job job("bytes");
        job.gate = &gate;
        auto w = make_writer(kind, dir.str());
        OpenOnExit release(gate);
        REQUIRE(save(w, "a.bin", job) == CKPT_OK);
        REQUIRE(gate.arrived(1));
        CHECK_FALSE(fs::exists(dir.file("a.bin")));
        gate.open();
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(job.ran_on != std::this_thread::get_id());
        CHECK(read_file(dir.file("a.bin")) == "bytes");
    }
}

TEST_CASE("A save into a missing directory fails with CKPT_ENOTFOUND", "[writer][errors]") {
    TempDir dir;
    const std::string missing = dir.file("no-such-dir");
    Job job("bytes");
    SECTION("a simple writer returns it from the save") {
        auto w = make_writer(CKPT_WRITER_SIMPLE, missing);
        CHECK(save(w, "a.bin", job) == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains(missing));
        CHECK(job.runs == 0);
    }
    SECTION("a background writer returns it from the next wait") {
        const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        auto w = make_writer(kind, missing);
        REQUIRE(save(w, "a.bin", job) == CKPT_OK);
        CHECK(ckpt_writer_wait(w.get()) == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains(missing));
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
    }
    CHECK_FALSE(fs::exists(missing));
}

// ------------------------------------------------------------------------------------------------ save_vars

TEST_CASE("ckpt_writer_save_vars writes an npz that ckpt_read reads back bit-exact", "[writer][vars]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    TempDir dir;
    Sample s;
    auto vars = make_vars(s, CKPT_COPY);
    auto w = make_writer(kind, dir.str());
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);

    SECTION("with default options (NULL)") {
        REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "vars.npz", vars.get(), nullptr, 0) == CKPT_OK);
    }
    SECTION("deflated") {
        o.compression = CKPT_DEFLATE;
        o.level = 9;
        REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "vars.npz", vars.get(), &o, 0) == CKPT_OK);
    }
    SECTION("in objax's layout") {
        o.layout = CKPT_LAYOUT_OBJAX;
        REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "vars.npz", vars.get(), &o, 0) == CKPT_OK);
    }
    SECTION("in the writer's storage even when the npz options name another") {
        ckpt_storage* memory = nullptr;
        REQUIRE(ckpt_storage_new_memory(&memory) == CKPT_OK);
        StoragePtr keep(memory);
        o.storage = memory;
        REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "vars.npz", vars.get(), &o, 0) == CKPT_OK);
    }
    REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
    auto back = read_npz(dir.file("vars.npz"));
    require_same(vars.get(), back.get());
    CHECK(temporaries(dir.str()).empty());
}

// ------------------------------------------------------------------------------------------------------ order

TEST_CASE("A queue writer runs saves in the order they were made", "[writer][queue][order]") {
    TempDir dir;
    constexpr int kSaves = 20;

    SECTION("twenty saves to one file leave the last one's content") {
        for (int it = 0; it < kRaceIterations; ++it) {
            std::vector<Job> jobs(kSaves);
            for (int i = 0; i < kSaves; ++i) jobs[i].bytes = "content " + std::to_string(i) + " " + pattern(64, i);
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 4);
            for (int i = 0; i < kSaves; ++i) REQUIRE(save(w, "same.bin", jobs[i]) == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            REQUIRE(read_file(dir.file("same.bin")) == jobs[kSaves - 1].bytes);
            REQUIRE(temporaries(dir.str()).empty());
        }
    }
    SECTION("twenty saves to different files all land, each with its own content") {
        for (int it = 0; it < kRaceIterations; ++it) {
            std::vector<Job> jobs(kSaves);
            for (int i = 0; i < kSaves; ++i) jobs[i].bytes = pattern(1000 + i, it * kSaves + i);
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 4);
            for (int i = 0; i < kSaves; ++i)
                REQUIRE(save(w, ("file-" + std::to_string(i)).c_str(), jobs[i]) == CKPT_OK);
            REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
            for (int i = 0; i < kSaves; ++i) REQUIRE(read_file(dir.file("file-" + std::to_string(i))) == jobs[i].bytes);
            REQUIRE(temporaries(dir.str()).empty());
        }
    }
    SECTION("save functions are called first in, first out") {
        std::vector<int> expected(kSaves);
        for (int i = 0; i < kSaves; ++i) expected[i] = i;
        for (int it = 0; it < kRaceIterations; ++it) {
            std::mutex order_mutex;
            std::vector<int> order;
            std::vector<Job> jobs(kSaves);
            for (int i = 0; i < kSaves; ++i) {
                jobs[i].order = &order;
                jobs[i].order_mutex = &order_mutex;
                jobs[i].index = i;
            }
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 4);
            for (int i = 0; i < kSaves; ++i)
                REQUIRE(save(w, ("fifo-" + std::to_string(i % 3)).c_str(), jobs[i]) == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            std::lock_guard<std::mutex> lock(order_mutex);
            REQUIRE(order == expected);
        }
    }
}

// ------------------------------------------------------------------------------------------ the queue's bound

TEST_CASE("A queue writer's save blocks while queue_depth saves are queued or running", "[writer][queue][block]") {
    TempDir dir;
    SECTION("with depth 2 the third save waits until the running one finishes") {
        for (int it = 0; it < kBlockingIterations; ++it) {
            Gate gate;
            Job running("A"), queued("B"), third("C");
            running.gate = &gate;
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 2);
            OpenOnExit release(gate);

            REQUIRE(save(w, "a.bin", running) == CKPT_OK);
            REQUIRE(gate.arrived(1));
            REQUIRE(save(w, "b.bin", queued) == CKPT_OK);  // two in flight: the bound, not past it
            Background blocked([&] { return save(w, "c.bin", third); });
            std::this_thread::sleep_for(kBlockedFor);
            CHECK_FALSE(blocked.returned());
            CHECK(queued.runs == 0);
            CHECK(third.runs == 0);

            gate.open();
            CHECK(blocked.result() == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            CHECK(read_file(dir.file("a.bin")) == "A");
            CHECK(read_file(dir.file("b.bin")) == "B");
            CHECK(read_file(dir.file("c.bin")) == "C");
        }
    }
    SECTION("with depth 0 (meaning 1) the second save waits for the first") {
        for (int it = 0; it < kBlockingIterations; ++it) {
            Gate gate;
            Job running("A"), second("B");
            running.gate = &gate;
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 0);
            OpenOnExit release(gate);

            REQUIRE(save(w, "a.bin", running) == CKPT_OK);
            REQUIRE(gate.arrived(1));
            Background blocked([&] { return save(w, "b.bin", second); });
            std::this_thread::sleep_for(kBlockedFor);
            CHECK_FALSE(blocked.returned());

            gate.open();
            CHECK(blocked.result() == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            CHECK(read_file(dir.file("b.bin")) == "B");
        }
    }
    SECTION("the saves of a full queue all complete when nothing blocks them") {
        for (int it = 0; it < kRaceIterations; ++it) {
            std::vector<Job> jobs(8);
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 2);
            for (int i = 0; i < 8; ++i) {
                jobs[i].bytes = std::to_string(i);
                REQUIRE(save(w, ("q" + std::to_string(i)).c_str(), jobs[i]) == CKPT_OK);
            }
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            for (int i = 0; i < 8; ++i) REQUIRE(jobs[i].runs == 1);
        }
    }
}

TEST_CASE("A thread writer's save waits for the previous save to finish", "[writer][thread][block]") {
    TempDir dir;
    for (int it = 0; it < kBlockingIterations; ++it) {
        Gate gate;
        Job first("first"), second("second");
        first.gate = &gate;
        auto w = make_writer(CKPT_WRITER_THREAD, dir.str(), 8);  // queue_depth does not apply to THREAD
        OpenOnExit release(gate);

        REQUIRE(save(w, "a.bin", first) == CKPT_OK);
        REQUIRE(gate.arrived(1));
        Background blocked([&] { return save(w, "b.bin", second); });
        std::this_thread::sleep_for(kBlockedFor);
        CHECK_FALSE(blocked.returned());
        CHECK(second.runs == 0);

        gate.open();
        CHECK(blocked.result() == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("a.bin")) == "first");
        CHECK(read_file(dir.file("b.bin")) == "second");
    }
}

// ---------------------------------------------------------------------------------------------- error delivery

TEST_CASE("A simple writer's save returns its own error, and the next call succeeds", "[writer][errors]") {
    TempDir dir;
    const std::string target = dir.file("model.bin");
    Job old_job("old content"), failing("partial new content", CKPT_EIO), later("later");
    auto w = make_writer(CKPT_WRITER_SIMPLE, dir.str());
    REQUIRE(save(w, "model.bin", old_job) == CKPT_OK);

    CHECK(save(w, "model.bin", failing) == CKPT_EIO);
    CHECK_THAT(message(), Contains(target));
    CHECK(read_file(target) == "old content");
    CHECK(temporaries(dir.str()).empty());
    CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
    CHECK(save(w, "later.bin", later) == CKPT_OK);
    CHECK(later.runs == 1);
    CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
}

TEST_CASE("A background save's error is returned by the next save, which is then not started",
          "[writer][errors]") {
    // Deterministic for THREAD and QUEUE of depth 1: the next save waits for the failed one to finish.
    const auto config = GENERATE(std::make_pair(CKPT_WRITER_THREAD, 0u), std::make_pair(CKPT_WRITER_QUEUE, 1u));
    INFO("kind " << kind_name(config.first) << ", queue_depth " << config.second);
    TempDir dir;
    const std::string target = dir.file("model.bin");
    for (int it = 0; it < kRaceIterations; ++it) {
        Job old_job("old content"), failing("partial new content", CKPT_EIO), next("next");
        auto w = make_writer(config.first, dir.str(), config.second);
        REQUIRE(save(w, "model.bin", old_job) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);

        REQUIRE(save(w, "model.bin", failing) == CKPT_OK);  // queued
        const int rc = save(w, "next.bin", next);
        const std::string reported = message();
        REQUIRE(rc == CKPT_EIO);
        CHECK_THAT(reported, Contains(target));
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);  // exactly once
        CHECK(failing.runs == 1);
        CHECK(next.runs == 0);
        CHECK_FALSE(fs::exists(dir.file("next.bin")));
        CHECK(read_file(target) == "old content");
        CHECK(temporaries(dir.str()).empty());
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
    }
}

TEST_CASE("A background save's error is returned once, by the next wait or finalize", "[writer][errors]") {
    const auto config = GENERATE(std::make_pair(CKPT_WRITER_THREAD, 0u), std::make_pair(CKPT_WRITER_QUEUE, 1u),
                                 std::make_pair(CKPT_WRITER_QUEUE, 4u));
    INFO("kind " << kind_name(config.first) << ", queue_depth " << config.second);
    TempDir dir;
    const std::string target = dir.file("model.bin");
    Job old_job("old content");
    auto w = make_writer(config.first, dir.str(), config.second);
    REQUIRE(save(w, "model.bin", old_job) == CKPT_OK);
    REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);

    SECTION("the next wait returns it, the wait after that CKPT_OK") {
        for (int it = 0; it < kRaceIterations; ++it) {
            Job failing("partial new content", CKPT_EIO);
            REQUIRE(save(w, "model.bin", failing) == CKPT_OK);
            CHECK(ckpt_writer_wait(w.get()) == CKPT_EIO);
            CHECK_THAT(message(), Contains(target));
            CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
            CHECK(failing.runs == 1);
            CHECK(read_file(target) == "old content");
            CHECK(temporaries(dir.str()).empty());
        }
    }
    SECTION("finalize returns it, a second finalize CKPT_OK") {
        Job failing("partial new content", CKPT_EIO);
        REQUIRE(save(w, "model.bin", failing) == CKPT_OK);
        Background finalize([&] { return ckpt_writer_finalize(w.get()); });
        CHECK(finalize.result() == CKPT_EIO);
        CHECK_THAT(finalize.error_message(), Contains(target));
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK(read_file(target) == "old content");
        CHECK(temporaries(dir.str()).empty());
    }
    SECTION("after the error was reported, saves work again") {
        Job failing("partial new content", CKPT_EIO), fixed("new content");
        REQUIRE(save(w, "model.bin", failing) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_EIO);
        REQUIRE(save(w, "model.bin", fixed) == CKPT_OK);
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(target) == "new content");
    }
}

TEST_CASE("Two background failures before a wait come back as one error that counts the other",
          "[writer][errors]") {
    TempDir dir;
    for (int it = 0; it < kRaceIterations; ++it) {
        Gate gate;
        Job held("held"), first("first", CKPT_EIO), second("second", CKPT_EIO), after("after");
        held.gate = &gate;
        auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 4);
        OpenOnExit release(gate);
        REQUIRE(save(w, "held.bin", held) == CKPT_OK);
        REQUIRE(gate.arrived(1));
        // Both failures are queued before either runs, so neither save call can see the other's error.
        REQUIRE(save(w, "first.bin", first) == CKPT_OK);
        REQUIRE(save(w, "second.bin", second) == CKPT_OK);
        gate.open();

        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_EIO);
        const std::string reported = message();
        CHECK_THAT(reported, Contains(dir.file("first.bin")));
        CHECK_THAT(reported, Contains("and 1 later"));
        CHECK_THAT(reported, Contains(dir.file("second.bin")));
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(first.runs == 1);
        CHECK(second.runs == 1);
        CHECK_FALSE(fs::exists(dir.file("first.bin")));
        CHECK_FALSE(fs::exists(dir.file("second.bin")));
        CHECK(read_file(dir.file("held.bin")) == "held");
        CHECK(temporaries(dir.str()).empty());
        REQUIRE(save(w, "after.bin", after) == CKPT_OK);
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("after.bin")) == "after");
    }
}

// --------------------------------------------------------------------------------------------------- finalize

TEST_CASE("Finalize waits, reports, stops the writer, and is idempotent", "[writer][finalize]") {
    TempDir dir;

    SECTION("finalize returns an error that happens while it waits, without hanging") {
        for (int it = 0; it < kBlockingIterations; ++it) {
            Gate gate;
            Job held("held"), failing("x", CKPT_EIO);
            held.gate = &gate;
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 4);
            OpenOnExit release(gate);
            REQUIRE(save(w, "held.bin", held) == CKPT_OK);
            REQUIRE(save(w, "failing.bin", failing) == CKPT_OK);
            REQUIRE(gate.arrived(1));
            Background finalize([&] { return ckpt_writer_finalize(w.get()); });
            std::this_thread::sleep_for(kBlockedFor);
            CHECK_FALSE(finalize.returned());  // it waits for the held save
            gate.open();
            CHECK(finalize.result() == CKPT_EIO);
            CHECK_THAT(finalize.error_message(), Contains(dir.file("failing.bin")));
            CHECK(read_file(dir.file("held.bin")) == "held");
            CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
        }
    }
    SECTION("a second finalize returns CKPT_OK") {
        const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        Job job("bytes");
        auto w = make_writer(kind, dir.str());
        REQUIRE(save(w, "a.bin", job) == CKPT_OK);
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("a.bin")) == "bytes");
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
    }
    SECTION("saves after finalize fail with CKPT_EINVAL and are not run") {
        const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        Job job("bytes");
        Sample s;
        auto vars = make_vars(s, CKPT_COPY);
        auto w = make_writer(kind, dir.str());
        REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK(save(w, "a.bin", job) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("finalized"));
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), nullptr, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("finalized"));
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(job.runs == 0);
        CHECK_FALSE(fs::exists(dir.file("a.bin")));
        CHECK_FALSE(fs::exists(dir.file("v.npz")));
    }
    SECTION("finalize completes every queued save first") {
        for (int it = 0; it < kRaceIterations; ++it) {
            std::vector<Job> jobs(6);
            auto w = make_writer(CKPT_WRITER_QUEUE, dir.str(), 6);
            for (int i = 0; i < 6; ++i) {
                jobs[i].bytes = pattern(5000, i);
                REQUIRE(save(w, ("f" + std::to_string(i)).c_str(), jobs[i]) == CKPT_OK);
            }
            REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
            for (int i = 0; i < 6; ++i) REQUIRE(read_file(dir.file("f" + std::to_string(i))) == jobs[i].bytes);
        }
    }
    SECTION("a writer freed without finalize completes its pending saves") {
        const auto config = GENERATE(std::make_pair(CKPT_WRITER_THREAD, 0u), std::make_pair(CKPT_WRITER_QUEUE, 4u));
        INFO("kind " << kind_name(config.first));
        for (int it = 0; it < kBlockingIterations; ++it) {
            const bool queue = config.first == CKPT_WRITER_QUEUE;
            Gate gate;
            std::vector<Job> jobs(queue ? 3 : 1);
            for (size_t i = 0; i < jobs.size(); ++i) jobs[i].bytes = "pending " + std::to_string(i);
            jobs[0].gate = &gate;
            Sample s;
            auto vars = make_vars(s, CKPT_BORROW);
            auto expected = make_vars(s, CKPT_COPY);
            auto w = make_writer(config.first, dir.str(), config.second);
            OpenOnExit release(gate);
            for (size_t i = 0; i < jobs.size(); ++i)
                REQUIRE(save(w, ("p" + std::to_string(i)).c_str(), jobs[i]) == CKPT_OK);
            REQUIRE(gate.arrived(1));
            if (queue) {
                // A copied collection is pending too: its copy must outlive the writer's handle.
                REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "p-vars.npz", vars.get(), nullptr, 0) == CKPT_OK);
                s.overwrite();
            }
            std::thread opener([&] {
                std::this_thread::sleep_for(kBlockedFor);
                gate.open();
            });
            w.reset();  // ckpt_writer_free, while the saves are held
            opener.join();
            for (size_t i = 0; i < jobs.size(); ++i) {
                CHECK(jobs[i].runs == 1);
                CHECK(read_file(dir.file("p" + std::to_string(i))) == jobs[i].bytes);
            }
            if (queue) {
                auto back = read_npz(dir.file("p-vars.npz"));
                require_same(expected.get(), back.get());
            }
        }
    }
    SECTION("a writer freed after a failure neither hangs nor leaves a temporary") {
        const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        Job failing("x", CKPT_EIO);
        auto w = make_writer(kind, dir.str());
        REQUIRE(save(w, "failing.bin", failing) == CKPT_OK);
        w.reset();
        CHECK(failing.runs == 1);
        CHECK(temporaries(dir.str()).empty());
    }
}

// ------------------------------------------------------------------------------------------ copies of the data

TEST_CASE("A background save_vars saves the values the arrays had when it returned", "[writer][vars][copy]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    const uint32_t ownership = GENERATE(CKPT_BORROW, CKPT_COPY);
    INFO("kind " << kind_name(kind) << ", arrays " << (ownership == CKPT_BORROW ? "borrowed" : "owned"));
    TempDir dir;

    SECTION("changed and freed while the save is writing them") {
        for (int it = 0; it < kRaceIterations; ++it) {
            Sample s;
            auto expected = make_vars(s, CKPT_COPY);
            auto vars = make_vars(s, ownership);
            ProgressHold hold;
            ckpt_options o;
            REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
            o.progress = hold_on_first_progress;
            o.progress_payload = &hold;
            auto w = make_writer(kind, dir.str());
            OpenOnExit release(hold.gate);

            REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), &o, 0) == CKPT_OK);
            REQUIRE(hold.gate.arrived(1));  // the first array is written, the rest are not
            for (size_t i = 0; i < ckpt_vars_count(vars.get()); ++i)
                if (ckpt_vars_nbytes(vars.get(), i) > 0)
                    std::memset(ckpt_vars_data(vars.get(), i), 0x5A, ckpt_vars_nbytes(vars.get(), i));
            s.overwrite();
            vars.reset();
            s.release();
            hold.gate.open();

            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            auto back = read_npz(dir.file("v.npz"));
            require_same(expected.get(), back.get());
        }
    }
    SECTION("changed and freed while the save waits in the queue") {
        if (kind == CKPT_WRITER_QUEUE) {
            for (int it = 0; it < kRaceIterations; ++it) {
                Gate gate;
                Job held("held");
                held.gate = &gate;
                Sample s;
                auto expected = make_vars(s, CKPT_COPY);
                auto vars = make_vars(s, ownership);
                auto w = make_writer(kind, dir.str(), 4);
                OpenOnExit release(gate);

                REQUIRE(save(w, "held.bin", held) == CKPT_OK);
                REQUIRE(gate.arrived(1));
                REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), nullptr, 0) == CKPT_OK);
                s.overwrite();
                vars.reset();
                s.release();
                gate.open();

                REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
                auto back = read_npz(dir.file("v.npz"));
                require_same(expected.get(), back.get());
            }
        }
    }
    SECTION("with CKPT_NO_COPY and the data left alone until wait, the file is right") {
        for (int it = 0; it < kRaceIterations; ++it) {
            Sample s;
            auto vars = make_vars(s, ownership);
            auto w = make_writer(kind, dir.str(), 2);
            REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), nullptr, CKPT_NO_COPY) == CKPT_OK);
            REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
            auto back = read_npz(dir.file("v.npz"));
            require_same(vars.get(), back.get());
        }
    }
}

TEST_CASE("Background copies never mix up the values of different saves", "[writer][vars][copy]") {
    // Background saves copy into buffers recycled from earlier saves; a buffer handed out again while an
    // earlier save still reads it would put one save's values into another's file.
    TempDir dir;

    SECTION("many small saves in flight, each of different values") {
        const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        constexpr int kSaves = 30;
        std::vector<float> weights(4096);
        const int64_t shape[] = {64, 64};
        ckpt_vars* raw = nullptr;
        REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
        VarsPtr vars(raw);
        REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 2, shape, weights.data(), CKPT_BORROW) == CKPT_OK);
        auto w = make_writer(kind, dir.str(), 3);
        for (int i = 0; i < kSaves; ++i) {
            std::fill(weights.begin(), weights.end(), static_cast<float>(i));
            REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, ("s" + std::to_string(i) + ".npz").c_str(), vars.get(),
                                          nullptr, 0) == CKPT_OK);
        }
        REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
        for (int i = 0; i < kSaves; ++i) {
            auto back = read_npz(dir.file("s" + std::to_string(i) + ".npz"));
            REQUIRE(ckpt_vars_nbytes(back.get(), 0) == weights.size() * sizeof(float));
            const float* got = static_cast<const float*>(ckpt_vars_data(back.get(), 0));
            INFO("save " << i);
            REQUIRE(std::all_of(got, got + weights.size(), [&](float v) { return v == static_cast<float>(i); }));
        }
    }
    SECTION("large stored saves (CRC-32 computed ahead on another thread) read back bit-exact") {
        const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        constexpr int kSaves = 3;
        constexpr size_t kWords = 5u << 20;  // 20 MiB over four arrays: above the size that starts a CRC thread
        std::vector<uint32_t> bits(kWords);
        const int64_t shape[] = {static_cast<int64_t>(kWords / 4)};
        ckpt_vars* raw = nullptr;
        REQUIRE(ckpt_vars_new(&raw) == CKPT_OK);
        VarsPtr vars(raw);
        for (int a = 0; a < 4; ++a)
            REQUIRE(ckpt_vars_add(vars.get(), ("part" + std::to_string(a)).c_str(), CKPT_UINT32, 1, shape,
                                  bits.data() + a * (kWords / 4), CKPT_BORROW) == CKPT_OK);
        auto w = make_writer(kind, dir.str(), 2);
        std::vector<VarsPtr> expected;
        for (int i = 0; i < kSaves; ++i) {
            for (size_t k = 0; k < kWords; ++k) bits[k] = static_cast<uint32_t>(k * 2654435761u) ^ (i << 28);
            ckpt_vars* copy = nullptr;
            REQUIRE(ckpt_vars_new(&copy) == CKPT_OK);
            expected.emplace_back(copy);
            for (int a = 0; a < 4; ++a)
                REQUIRE(ckpt_vars_add(copy, ("part" + std::to_string(a)).c_str(), CKPT_UINT32, 1, shape,
                                      bits.data() + a * (kWords / 4), CKPT_COPY) == CKPT_OK);
            REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, ("big" + std::to_string(i) + ".npz").c_str(),
                                          vars.get(), nullptr, 0) == CKPT_OK);
        }
        REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
        for (int i = 0; i < kSaves; ++i) {
            INFO("save " << i);
            auto back = read_npz(dir.file("big" + std::to_string(i) + ".npz"));
            require_same(expected[i].get(), back.get());
        }
    }
}

// ------------------------------------------------------------------------------------------------------ append

TEST_CASE("CKPT_APPEND saves append to the file in place", "[writer][append]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    TempDir dir;
    Job first("abc"), second("def");
    auto w = make_writer(kind, dir.str());

    SECTION("two appends follow the file's existing content") {
        write_file(dir.file("log.txt"), "head:");
        REQUIRE(save(w, "log.txt", first, CKPT_APPEND) == CKPT_OK);
        REQUIRE(save(w, "log.txt", second, CKPT_APPEND) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("log.txt")) == "head:abcdef");
    }
    SECTION("the first append creates a missing file") {
        REQUIRE(save(w, "log.txt", first, CKPT_APPEND) == CKPT_OK);
        REQUIRE(save(w, "log.txt", second, CKPT_APPEND) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("log.txt")) == "abcdef");
    }
    SECTION("an atomic save and an append, in that order") {
        REQUIRE(save(w, "log.txt", first) == CKPT_OK);
        REQUIRE(save(w, "log.txt", second, CKPT_APPEND) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("log.txt")) == "abcdef");
    }
    CHECK(temporaries(dir.str()).empty());
}

// ----------------------------------------------------------------------------------------------------- storage

TEST_CASE("A writer saves through the storage of its options", "[writer][storage]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    Sample s;
    auto vars = make_vars(s, CKPT_COPY);
    ckpt_storage* memory = nullptr;
    REQUIRE(ckpt_storage_new_memory(&memory) == CKPT_OK);
    StoragePtr storage(memory);
    // A name no test writes on disk: the memory storage must hold it, the working directory must not.
    const std::string name = "in-memory-" + std::to_string(::getpid()) + ".npz";

    SECTION("ckpt_read over the same storage reads what save_vars wrote") {
        auto w = make_writer(kind, "", 0, storage.get());
        REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, name.c_str(), vars.get(), nullptr, 0) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        auto back = read_npz(name, storage.get());
        require_same(vars.get(), back.get());
        CHECK_FALSE(fs::exists(name));
        ckpt_vars* on_disk = nullptr;
        CHECK(ckpt_read(&on_disk, name.c_str(), nullptr) == CKPT_ENOTFOUND);
        CHECK(on_disk == nullptr);
    }
    SECTION("a save function's bytes land in the storage") {
        Job job(npz_bytes(vars.get()));
        auto w = make_writer(kind, ".", 0, storage.get());
        REQUIRE(save(w, name.c_str(), job) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        auto back = read_npz(name, storage.get());
        require_same(vars.get(), back.get());
        CHECK_FALSE(fs::exists(name));
    }
    SECTION("a directory the storage lacks is CKPT_ENOTFOUND") {
        Job job("bytes");
        auto w = make_writer(kind, "missing", 0, storage.get());
        int rc = save(w, name.c_str(), job);
        if (kind != CKPT_WRITER_SIMPLE) {
            CHECK(rc == CKPT_OK);
            rc = ckpt_writer_wait(w.get());
        }
        CHECK(rc == CKPT_ENOTFOUND);
        CHECK_THAT(message(), Contains("missing/" + name));
    }
    SECTION("freeing the storage while a writer uses it is safe: the writer keeps its own reference") {
        for (int it = 0; it < (kind == CKPT_WRITER_SIMPLE ? 1 : kRaceIterations); ++it) {
            ckpt_storage* raw = nullptr;
            REQUIRE(ckpt_storage_new_memory(&raw) == CKPT_OK);
            Gate gate;
            Job held("held"), after("after");
            held.gate = &gate;
            auto w = make_writer(kind, "", 2, raw);
            OpenOnExit release(gate);
            if (kind != CKPT_WRITER_SIMPLE) {
                REQUIRE(save(w, "held.bin", held) == CKPT_OK);
                REQUIRE(gate.arrived(1));
            }
            ckpt_storage_free(raw);  // the caller's reference goes while a save is under way
            gate.open();
            CHECK(save(w, "after.bin", after) == CKPT_OK);
            CHECK(ckpt_writer_save_vars(w.get(), nullptr, "after.npz", vars.get(), nullptr, 0) == CKPT_OK);
            CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
            CHECK(after.runs == 1);
        }
    }
}

// ------------------------------------------------------------------------------------------------- after_save

namespace {

// What an after_save callback saw: the path it was given, on which thread, and what was at that path then.
struct AfterSave {
    struct Call {
        std::string path;
        std::thread::id thread;
        std::string content;
        size_t temporaries;
    };
    std::mutex mutex;
    std::vector<Call> calls;
    std::string dir;              // whose temporaries the callback counts ("" for none)
    int result = CKPT_OK;         // what the callback returns
    const char* words = nullptr;  // what it says with ckpt_error_set_message before failing
    std::vector<std::string>* journal = nullptr;  // a JournalStorage's, to note the call in
    std::mutex* journal_mutex = nullptr;
};

int record_after_save(const char* path, void* payload) {
    auto& after = *static_cast<AfterSave*>(payload);
    AfterSave::Call call{path, std::this_thread::get_id(), {}, 0};
    if (after.journal != nullptr) {
        std::lock_guard<std::mutex> lock(*after.journal_mutex);
        after.journal->push_back(std::string("after_save ") + path);
    } else {
        call.content = read_file(path);
        if (!after.dir.empty()) call.temporaries = temporaries(after.dir).size();
    }
    {
        std::lock_guard<std::mutex> lock(after.mutex);
        after.calls.push_back(std::move(call));
    }
    if (after.result != CKPT_OK && after.words != nullptr) ckpt_error_set_message(after.words);
    return after.result;
}

WriterPtr make_writer_after(uint32_t kind, const std::string& out_dir, AfterSave& after,
                            ckpt_storage* storage = nullptr) {
    ckpt_writer_options o;
    REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
    o.kind = kind;
    o.storage = storage;
    o.out_dir = out_dir.c_str();
    o.after_save = record_after_save;
    o.after_save_payload = &after;
    ckpt_writer* w = nullptr;
    const int rc = ckpt_writer_new(&w, &o);
    INFO(message());
    REQUIRE(rc == CKPT_OK);
    return WriterPtr(w);
}

// A storage in memory, through the C callback table, that notes every step of a save in a journal.
struct JournalStorage {
    std::mutex mutex;
    std::vector<std::string> journal;
    std::map<std::string, std::string> files;

    struct Open {
        std::string path;
    };
    void note(std::string event) {
        std::lock_guard<std::mutex> lock(mutex);
        journal.push_back(std::move(event));
    }
    static JournalStorage& of(void* payload) { return *static_cast<JournalStorage*>(payload); }

    static int make_dirs(void*, const char*) { return CKPT_OK; }
    static int create(void* payload, const char* path, void** file) {
        auto& s = of(payload);
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.files.count(path) != 0) return CKPT_EEXIST;
        s.files[path];
        *file = new Open{path};
        return CKPT_OK;
    }
    static int open_append(void* payload, const char* path, void** file) {
        auto& s = of(payload);
        std::lock_guard<std::mutex> lock(s.mutex);
        s.files[path];
        *file = new Open{path};
        return CKPT_OK;
    }
    static int write(void* payload, void* file, const void* data, size_t size) {
        auto& s = of(payload);
        std::lock_guard<std::mutex> lock(s.mutex);
        s.files[static_cast<Open*>(file)->path].append(static_cast<const char*>(data), size);
        return CKPT_OK;
    }
    static int sync(void* payload, void* file) {
        of(payload).note("sync " + static_cast<Open*>(file)->path);
        return CKPT_OK;
    }
    static int close(void* payload, void* file) {
        std::unique_ptr<Open> open(static_cast<Open*>(file));
        of(payload).note("close " + open->path);
        return CKPT_OK;
    }
    static int rename(void* payload, const char* from, const char* to) {
        auto& s = of(payload);
        std::lock_guard<std::mutex> lock(s.mutex);
        auto it = s.files.find(from);
        if (it == s.files.end()) return CKPT_ENOTFOUND;
        s.files[to] = std::move(it->second);
        s.files.erase(from);
        s.journal.push_back(std::string("rename ") + to);
        return CKPT_OK;
    }
    static int sync_dir(void* payload, const char* dir) {
        of(payload).note(std::string("sync_dir ") + dir);
        return CKPT_OK;
    }
    static int remove(void* payload, const char* path) {
        auto& s = of(payload);
        std::lock_guard<std::mutex> lock(s.mutex);
        return s.files.erase(path) != 0 ? CKPT_OK : CKPT_ENOTFOUND;
    }
    static int list(void*, const char*, ckpt_list_entry_fn, void*) { return CKPT_OK; }
    static int open_read(void*, const char*, void**, uint64_t*) { return CKPT_ENOTFOUND; }
    static int read_at(void*, void*, uint64_t, void*, size_t, size_t*) { return CKPT_EIO; }
    static void close_read(void*, void*) {}

    StoragePtr make() {
        ckpt_storage_ops ops;
        std::memset(&ops, 0, sizeof ops);
        ops.version = CKPT_STORAGE_OPS_VERSION;
        ops.payload = this;
        ops.make_dirs = make_dirs;
        ops.create = create;
        ops.open_append = open_append;
        ops.write = write;
        ops.sync = sync;
        ops.close = close;
        ops.rename = rename;
        ops.sync_dir = sync_dir;
        ops.remove = remove;
        ops.list = list;
        ops.open_read = open_read;
        ops.read_at = read_at;
        ops.close_read = close_read;
        ckpt_storage* raw = nullptr;
        REQUIRE(ckpt_storage_new(&raw, &ops) == CKPT_OK);
        return StoragePtr(raw);
    }
};

}  // namespace

TEST_CASE("after_save runs once per save, on the thread that saved, with the file complete under its name",
          "[writer][after_save]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    TempDir dir;
    AfterSave after;
    after.dir = dir.str();
    auto w = make_writer_after(kind, dir.str(), after);

    SECTION("ckpt_writer_save") {
        Job first(pattern(300000, 1)), second(pattern(1000, 2));
        write_file(dir.file("model.bin"), "previous content");
        REQUIRE(save(w, "model.bin", first) == CKPT_OK);
        REQUIRE(save(w, "other.bin", second) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);  // returns only after the callbacks ran
        std::lock_guard<std::mutex> lock(after.mutex);
        REQUIRE(after.calls.size() == 2);
        CHECK(after.calls[0].path == dir.file("model.bin"));
        CHECK(after.calls[0].content == first.bytes);  // the new file, not the previous content
        CHECK(after.calls[0].temporaries == 0);
        CHECK(after.calls[1].path == dir.file("other.bin"));
        CHECK(after.calls[1].content == second.bytes);
        CHECK(after.calls[1].temporaries == 0);
        for (const auto& call : after.calls) {
            if (kind == CKPT_WRITER_SIMPLE)
                CHECK(call.thread == std::this_thread::get_id());
            else
                CHECK(call.thread == first.ran_on);  // the writer's thread, which ran the save function
        }
        if (kind != CKPT_WRITER_SIMPLE) CHECK(first.ran_on != std::this_thread::get_id());
    }
    SECTION("ckpt_writer_save_vars, with an explicit out_dir") {
        TempDir other;
        Sample s;
        auto vars = make_vars(s, CKPT_COPY);
        REQUIRE(ckpt_writer_save_vars(w.get(), other.str().c_str(), "vars.npz", vars.get(), nullptr, 0) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        std::lock_guard<std::mutex> lock(after.mutex);
        REQUIRE(after.calls.size() == 1);
        CHECK(after.calls[0].path == other.file("vars.npz"));
        CHECK(after.calls[0].content == npz_bytes(vars.get()));
        CHECK(temporaries(other.str()).empty());
        if (kind == CKPT_WRITER_SIMPLE)
            CHECK(after.calls[0].thread == std::this_thread::get_id());
        else
            CHECK(after.calls[0].thread != std::this_thread::get_id());
    }
    SECTION("a CKPT_APPEND save, after its bytes are appended") {
        Job first("abc"), second("def");
        REQUIRE(save(w, "log.txt", first, CKPT_APPEND) == CKPT_OK);
        REQUIRE(save(w, "log.txt", second, CKPT_APPEND) == CKPT_OK);
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        std::lock_guard<std::mutex> lock(after.mutex);
        REQUIRE(after.calls.size() == 2);
        CHECK(after.calls[0].content == "abc");
        CHECK(after.calls[1].content == "abcdef");
    }
    REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
}

TEST_CASE("after_save runs after the rename and the directory's sync, never before", "[writer][after_save]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    JournalStorage journal;
    auto storage = journal.make();
    AfterSave after;
    after.journal = &journal.journal;
    after.journal_mutex = &journal.mutex;
    auto w = make_writer_after(kind, "run", after, storage.get());
    Sample s;
    auto vars = make_vars(s, CKPT_COPY);
    Job job("bytes"), appended("more");
    REQUIRE(save(w, "a.bin", job) == CKPT_OK);
    REQUIRE(ckpt_writer_save_vars(w.get(), nullptr, "b.npz", vars.get(), nullptr, 0) == CKPT_OK);
    REQUIRE(save(w, "a.bin", appended, CKPT_APPEND) == CKPT_OK);
    REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);

    std::lock_guard<std::mutex> lock(journal.mutex);
    // Temporary names are random: keep the events that name final paths, and the syncs and closes in between.
    std::vector<std::string> events;
    for (const std::string& e : journal.journal)
        if (e.find(".tmp-") == std::string::npos) events.push_back(e);
    const std::vector<std::string> expected = {
        "rename run/a.bin", "sync_dir run", "after_save run/a.bin",
        "rename run/b.npz", "sync_dir run", "after_save run/b.npz",
        "sync run/a.bin", "close run/a.bin", "after_save run/a.bin"};
    CHECK(events == expected);
    CHECK(journal.files["run/a.bin"] == "bytesmore");
}

TEST_CASE("A failing after_save is that save's error, reported once and naming the path; the file stays",
          "[writer][after_save][errors]") {
    TempDir dir;
    const std::string target = dir.file("model.bin");
    AfterSave after;
    after.result = CKPT_EIO;
    after.words = "bucket 'runs': quota exceeded";
    const std::string expected = target + ": the after_save callback failed: bucket 'runs': quota exceeded";

    SECTION("a simple writer's save returns it") {
        Job job("new content"), next("next");
        auto w = make_writer_after(CKPT_WRITER_SIMPLE, dir.str(), after);
        CHECK(save(w, "model.bin", job) == CKPT_EIO);
        CHECK(message() == expected);
        CHECK(read_file(target) == "new content");  // committed before the callback ran
        after.result = CKPT_OK;
        CHECK(save(w, "next.bin", next) == CKPT_OK);
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
    }
    SECTION("a background save's error comes back once, from the next wait") {
        const uint32_t kind = GENERATE(CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        Job job("new content");
        auto w = make_writer_after(kind, dir.str(), after);
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        CHECK(ckpt_writer_wait(w.get()) == CKPT_EIO);
        CHECK(message() == expected);
        CHECK(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(read_file(target) == "new content");
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
    }
    SECTION("a background save's error comes back from the next save, which is then not started") {
        Job job("new content"), next("next");
        auto w = make_writer_after(CKPT_WRITER_THREAD, dir.str(), after);
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        CHECK(save(w, "next.bin", next) == CKPT_EIO);
        CHECK(message() == expected + "; the save of " + dir.file("next.bin") + " was not started");
        CHECK(next.runs == 0);
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK_FALSE(fs::exists(dir.file("next.bin")));
    }
    SECTION("a positive result is CKPT_ERROR, and a callback that says nothing is named by its code") {
        after.result = 7;
        after.words = nullptr;
        Job job("new content");
        auto w = make_writer_after(CKPT_WRITER_QUEUE, dir.str(), after);
        REQUIRE(save(w, "model.bin", job) == CKPT_OK);
        CHECK(ckpt_writer_finalize(w.get()) == CKPT_ERROR);
        CHECK(message() == target + ": the after_save callback failed: " + ckpt_strerror(CKPT_ERROR) + " (7)");
    }
}

TEST_CASE("after_save is not called for a save that failed", "[writer][after_save][errors]") {
    const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
    INFO("kind " << kind_name(kind));
    TempDir dir;
    AfterSave after;
    Job failing("partial", CKPT_EIO), ok("ok");
    auto w = make_writer_after(kind, dir.str(), after);
    int rc = save(w, "model.bin", failing);
    if (kind != CKPT_WRITER_SIMPLE) {
        CHECK(rc == CKPT_OK);
        rc = ckpt_writer_wait(w.get());
    }
    CHECK(rc == CKPT_EIO);
    auto missing = make_writer_after(kind, dir.file("no-such-dir"), after);
    rc = save(missing, "model.bin", ok);
    if (kind != CKPT_WRITER_SIMPLE) rc = ckpt_writer_wait(missing.get());
    CHECK(rc == CKPT_ENOTFOUND);
    std::lock_guard<std::mutex> lock(after.mutex);
    CHECK(after.calls.empty());
}

TEST_CASE("A version-1 options struct is read only as far as version 1 goes", "[writer][after_save][args]") {
    // The struct ends where an unreadable page begins: reading a field of version 2 would crash the test.
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* pages = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(pages != MAP_FAILED);
    std::unique_ptr<void, std::function<void(void*)>> unmap(pages, [page](void* p) { ::munmap(p, 2 * page); });
    REQUIRE(::mprotect(static_cast<char*>(pages) + page, page, PROT_NONE) == 0);
    constexpr size_t kVersion1Size = offsetof(ckpt_writer_options, after_save);
    auto* v1 = reinterpret_cast<ckpt_writer_options*>(static_cast<char*>(pages) + page - kVersion1Size);
    REQUIRE(ckpt_writer_options_init(v1, 1) == CKPT_OK);
    TempDir dir;
    const std::string out_dir = dir.str();
    v1->kind = CKPT_WRITER_QUEUE;
    v1->out_dir = out_dir.c_str();
    ckpt_writer* raw = nullptr;
    REQUIRE(ckpt_writer_new(&raw, v1) == CKPT_OK);
    WriterPtr w(raw);
    Job job("bytes");
    REQUIRE(save(w, "a.bin", job) == CKPT_OK);
    REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
    CHECK(job.ran_on != std::this_thread::get_id());  // the kind of version 1 was read
    CHECK(read_file(dir.file("a.bin")) == "bytes");
}

// -------------------------------------------------------------------------------------------- invalid arguments

TEST_CASE("Writer functions refuse invalid arguments with CKPT_EINVAL and a message", "[writer][args]") {
    TempDir dir;
    Job job("bytes");
    Sample s;
    auto vars = make_vars(s, CKPT_COPY);

    SECTION("ckpt_writer_options_init fills the defaults of the current version and refuses unknown ones") {
        ckpt_writer_options o;
        std::memset(&o, 0xFF, sizeof o);
        REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
        CHECK(o.version == CKPT_WRITER_OPTIONS_VERSION);
        CHECK(o.kind == CKPT_WRITER_SIMPLE);
        CHECK(o.queue_depth == 0);
        CHECK(o.storage == nullptr);
        CHECK(o.out_dir == nullptr);
        CHECK(o.after_save == nullptr);
        CHECK(o.after_save_payload == nullptr);
        CHECK(ckpt_writer_options_init(nullptr, CKPT_WRITER_OPTIONS_VERSION) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("opts"));
        for (const uint32_t version : {0u, CKPT_WRITER_OPTIONS_VERSION + 1u}) {
            CHECK(ckpt_writer_options_init(&o, version) == CKPT_EINVAL);
            CHECK_THAT(message(), Contains("version " + std::to_string(version)));
        }
        const ckpt_writer_options from_macro = CKPT_WRITER_OPTIONS_INIT;
        CHECK(from_macro.version == CKPT_WRITER_OPTIONS_VERSION);
        CHECK(from_macro.kind == CKPT_WRITER_SIMPLE);
        CHECK(from_macro.queue_depth == 0);
        CHECK(from_macro.storage == nullptr);
        CHECK(from_macro.out_dir == nullptr);
        CHECK(from_macro.after_save == nullptr);
        CHECK(from_macro.after_save_payload == nullptr);
    }
    SECTION("ckpt_writer_options_init of version 1 writes only the fields version 1 has") {
        ckpt_writer_options o;
        std::memset(&o, 0xAB, sizeof o);
        REQUIRE(ckpt_writer_options_init(&o, 1) == CKPT_OK);
        CHECK(o.version == 1);
        CHECK(o.kind == CKPT_WRITER_SIMPLE);
        CHECK(o.out_dir == nullptr);
        const auto* tail = reinterpret_cast<const unsigned char*>(&o) + offsetof(ckpt_writer_options, after_save);
        const size_t tail_size = sizeof o - offsetof(ckpt_writer_options, after_save);
        CHECK(std::all_of(tail, tail + tail_size, [](unsigned char c) { return c == 0xAB; }));
    }
    SECTION("ckpt_writer_new refuses a NULL out, an unknown kind and an unknown options version") {
        ckpt_writer_options o;
        REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
        CHECK(ckpt_writer_new(nullptr, &o) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("out"));

        ckpt_writer* w = reinterpret_cast<ckpt_writer*>(&o);  // not NULL, so the reset to NULL is observable
        o.kind = 3;
        CHECK(ckpt_writer_new(&w, &o) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("kind 3"));
        CHECK(w == nullptr);

        for (const uint32_t version : {0u, CKPT_WRITER_OPTIONS_VERSION + 1u}) {
            INFO("version " << version);
            ckpt_writer_options bad;
            REQUIRE(ckpt_writer_options_init(&bad, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
            bad.version = version;
            w = reinterpret_cast<ckpt_writer*>(&o);
            CHECK(ckpt_writer_new(&w, &bad) == CKPT_EINVAL);
            CHECK_THAT(message(), Contains("version " + std::to_string(version)));
            CHECK(w == nullptr);
        }
    }
    SECTION("ckpt_writer_new with NULL options makes a simple writer into the working directory") {
        ckpt_writer* w = nullptr;
        REQUIRE(ckpt_writer_new(&w, nullptr) == CKPT_OK);
        WriterPtr owner(w);
        {
            InDirectory cwd(dir.str());
            REQUIRE(save(owner, "defaults.bin", job) == CKPT_OK);
        }
        CHECK(job.ran_on == std::this_thread::get_id());
        CHECK(read_file(dir.file("defaults.bin")) == "bytes");
    }
    SECTION("saves refuse NULL and empty arguments and unknown flags") {
        const uint32_t kind = GENERATE(CKPT_WRITER_SIMPLE, CKPT_WRITER_THREAD, CKPT_WRITER_QUEUE);
        INFO("kind " << kind_name(kind));
        auto w = make_writer(kind, dir.str());

        CHECK(ckpt_writer_save(nullptr, nullptr, "a.bin", run_job, &job, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save: w is NULL"));
        CHECK(ckpt_writer_save(w.get(), nullptr, nullptr, run_job, &job, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save: filename is NULL"));
        CHECK(ckpt_writer_save(w.get(), nullptr, "", run_job, &job, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save: filename is empty"));
        CHECK(ckpt_writer_save(w.get(), nullptr, "a.bin", nullptr, &job, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save: fn is NULL"));
        CHECK(ckpt_writer_save(w.get(), nullptr, "a.bin", run_job, &job, 0x80) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save: unknown flags"));
        CHECK(ckpt_writer_save(w.get(), nullptr, "a.bin", run_job, &job, CKPT_NO_COPY) == CKPT_EINVAL);

        CHECK(ckpt_writer_save_vars(nullptr, nullptr, "v.npz", vars.get(), nullptr, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save_vars: w is NULL"));
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, nullptr, vars.get(), nullptr, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save_vars: filename is NULL"));
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, "", vars.get(), nullptr, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save_vars: filename is empty"));
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", nullptr, nullptr, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save_vars: vars is NULL"));
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), nullptr, 0x80) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_save_vars: unknown flags"));
        ckpt_options bad;
        REQUIRE(ckpt_options_init(&bad, CKPT_OPTIONS_VERSION) == CKPT_OK);
        bad.version = 99;
        CHECK(ckpt_writer_save_vars(w.get(), nullptr, "v.npz", vars.get(), &bad, 0) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("version 99"));

        CHECK(ckpt_writer_wait(nullptr) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_wait: w is NULL"));
        CHECK(ckpt_writer_finalize(nullptr) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_writer_finalize: w is NULL"));
        CHECK(ckpt_sink_write(nullptr, "x", 1) == CKPT_EINVAL);
        CHECK_THAT(message(), Contains("ckpt_sink_write: sink is NULL"));
        ckpt_writer_free(nullptr);

        // None of the refused calls ran or queued anything, and the writer still works.
        REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
        CHECK(job.runs == 0);
        CHECK(fs::is_empty(dir.str()));
        REQUIRE(save(w, "a.bin", job) == CKPT_OK);
        REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
        CHECK(read_file(dir.file("a.bin")) == "bytes");
    }
}
