// SPDX-License-Identifier: Apache-2.0
// Malformed and hostile .npz input through the public C API (ARCHITECTURE.md, "Untrusted input";
// RELIABILITY_FACTS.md section 4). Every case must return the exact status code (CKPT_EFORMAT, or
// CKPT_EUNSUPPORTED for valid numpy content ckpt does not handle), leave a message naming the file (or
// "<memory>"), the member and the problem, never crash, and never allocate more than the input justifies.
//
// Each input is read three ways: ckpt_read_memory, ckpt_read on a file, and ckpt_reader_open followed by
// ckpt_reader_read_into of every array (errors in array data only show at that point).
//
// The binary replaces the global operator new/delete (every variant) with a probe that records the largest
// single request and refuses (std::bad_alloc) any request above a cap: 256 MiB always, tighter where a case says
// so. libzip's own malloc is not seen by the probe; CTest therefore also runs this binary under a 2 GiB
// address-space limit (test_malformed_memlimit).
#include "ckpt/ckpt.h"
#include "support/files.hpp"
#include "support/zip_builder.hpp"

#include <catch2/catch.hpp>

#include "support/temp_dir.hpp"

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <vector>

// ------------------------------------------------------------------------------------------ allocation probe

namespace probe {

constexpr size_t kDefaultCap = size_t{256} << 20;
std::atomic<size_t> g_largest{0};
std::atomic<size_t> g_cap{kDefaultCap};
std::atomic<size_t> g_refused{0};

void* allocate(size_t n, size_t align) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
    if (n > g_cap.load(std::memory_order_relaxed)) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        throw std::bad_alloc();
    }
    void* p = nullptr;
    if (align <= alignof(std::max_align_t)) {
        p = std::malloc(n != 0 ? n : 1);
    } else if (posix_memalign(&p, align, n != 0 ? n : 1) != 0) {
        p = nullptr;
    }
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

void* allocate_nothrow(size_t n, size_t align) noexcept {
    try {
        return allocate(n, align);
    } catch (...) {
        return nullptr;
    }
}

// Scope in which the largest request is measured from zero and requests above `cap` are refused.
class Window {
public:
    explicit Window(size_t cap = kDefaultCap) {
        g_largest.store(0);
        g_refused.store(0);
        g_cap.store(cap);
    }
    ~Window() { g_cap.store(kDefaultCap); }
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;
    size_t largest() const { return g_largest.load(); }
    size_t refused() const { return g_refused.load(); }
};

}  // namespace probe

void* operator new(std::size_t n) { return probe::allocate(n, 0); }
void* operator new[](std::size_t n) { return probe::allocate(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return probe::allocate_nothrow(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return probe::allocate_nothrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return probe::allocate(n, static_cast<size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return probe::allocate(n, static_cast<size_t>(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return probe::allocate_nothrow(n, static_cast<size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return probe::allocate_nothrow(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

// ------------------------------------------------------------------------------------------------- helpers

namespace {

using ckpt::testing::read_file;
using ckpt::testing::TempDir;
using ckpt::testing::write_file;

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// What a failing case may allocate in one request: every malformed input here is a few KiB, so nothing the
// library allocates for it should come near this.
constexpr size_t kSmallBound = size_t{1} << 20;
// The cap armed around the bomb, huge-shape and lying-size cases: a request above it is refused.
constexpr size_t kBombCap = size_t{64} << 20;

struct VarsDeleter {
    void operator()(ckpt_vars* v) const { ckpt_vars_free(v); }
};
using VarsPtr = std::unique_ptr<ckpt_vars, VarsDeleter>;


TempDir& temp() {
    static TempDir dir;
    return dir;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string hex(uint64_t v) {
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
}

// One way of reading an input and what came of it.
struct Run {
    const char* via = "";
    int rc = CKPT_OK;
    std::string message;
    size_t largest = 0;  // largest operator new request during the call
    size_t refused = 0;  // requests the probe refused
};

Run run_memory(const std::string& bytes, const ckpt_options* opts, size_t cap, VarsPtr* keep = nullptr) {
    Run r;
    r.via = "ckpt_read_memory";
    ckpt_vars* out = nullptr;
    {
        probe::Window w(cap);
        r.rc = ckpt_read_memory(&out, bytes.empty() ? nullptr : bytes.data(), bytes.size(), opts);
        r.largest = w.largest();
        r.refused = w.refused();
    }
    if (r.rc != CKPT_OK) r.message = ckpt_error_message();
    if (keep != nullptr) keep->reset(out);
    else ckpt_vars_free(out);
    return r;
}

Run run_read_file(const std::string& path, const ckpt_options* opts, size_t cap, VarsPtr* keep = nullptr) {
    Run r;
    r.via = "ckpt_read";
    ckpt_vars* out = nullptr;
    {
        probe::Window w(cap);
        r.rc = ckpt_read(&out, path.c_str(), opts);
        r.largest = w.largest();
        r.refused = w.refused();
    }
    if (r.rc != CKPT_OK) r.message = ckpt_error_message();
    if (keep != nullptr) keep->reset(out);
    else ckpt_vars_free(out);
    return r;
}

// ckpt_reader_open, then ckpt_reader_read_into of every array — or, with `map`, ckpt_reader_map of every array and a
// read of each view's every byte (a view reaching past the file would fault or trip the sanitizers); the first failure
// is the result. Destination buffers come from malloc, which the probe does not see; decoded views are the library's.
Run run_open_file(const std::string& path, const ckpt_options* opts, size_t cap, bool map = false) {
    Run r;
    r.via = map ? "ckpt_reader_open + ckpt_reader_map" : "ckpt_reader_open + ckpt_reader_read_into";
    ckpt_reader* npz = nullptr;
    probe::Window w(cap);
    r.rc = ckpt_reader_open(&npz, path.c_str(), opts);
    for (size_t i = 0; r.rc == CKPT_OK && i < ckpt_reader_count(npz); ++i) {
        const size_t n = ckpt_reader_nbytes(npz, i);
        if (n > cap) {  // open accepted an array larger than the case allows: report it as a failure
            r.rc = CKPT_ERROR;
            r.message =
                "test: ckpt_reader_open accepted array #" + std::to_string(i) + " of " + std::to_string(n) + " bytes";
            break;
        }
        if (map) {
            const void* p = nullptr;
            r.rc = ckpt_reader_map(npz, i, &p);
            volatile unsigned char last = 0;
            for (size_t k = 0; r.rc == CKPT_OK && k < n; ++k) last = static_cast<const unsigned char*>(p)[k];
            (void)last;
            continue;
        }
        void* dst = std::malloc(n != 0 ? n : 1);
        r.rc = ckpt_reader_read_into(npz, i, dst, n);
        std::free(dst);
    }
    r.largest = w.largest();
    r.refused = w.refused();
    if (r.rc != CKPT_OK && r.message.empty()) r.message = ckpt_error_message();
    ckpt_reader_close(npz);
    return r;
}

// Checks one run of a case that must fail with `code` and a message holding `label` and every phrase.
void check_failed(const Run& r, int code, const std::string& label, const std::vector<std::string>& phrases,
                  size_t bound) {
    INFO("via " << r.via << ": rc " << r.rc << " (" << ckpt_strerror(r.rc) << "), message \"" << r.message
                << "\", largest allocation " << r.largest);
    CHECK(r.rc == code);
    CHECK(r.rc != CKPT_ENOMEM);
    CHECK(r.refused == 0);
    CHECK(r.largest <= bound);
    CHECK_THAT(r.message, StartsWith(label));
    for (const std::string& p : phrases) CHECK_THAT(r.message, Contains(p));
}

// The case `bytes` must fail with `code` whichever way it is read; the file is written as `file_name` in the
// temporary directory. Every allocation request must stay within `bound`; requests above `cap` are refused.
void expect_failure(const std::string& file_name, const std::string& bytes, int code,
                    const std::vector<std::string>& phrases, const ckpt_options* opts = nullptr,
                    size_t bound = kSmallBound, size_t cap = probe::kDefaultCap) {
    check_failed(run_memory(bytes, opts, cap), code, "<memory>", phrases, bound);
    const std::string path = temp().file(file_name);
    write_file(path, bytes);
    check_failed(run_read_file(path, opts, cap), code, path, phrases, bound);
    check_failed(run_open_file(path, opts, cap), code, path, phrases, bound);
    check_failed(run_open_file(path, opts, cap, true), code, path, phrases, bound);
}

// The case must read successfully every way; returns what ckpt_read_memory read.
VarsPtr expect_ok(const std::string& file_name, const std::string& bytes, const ckpt_options* opts = nullptr) {
    VarsPtr vars;
    const Run m = run_memory(bytes, opts, probe::kDefaultCap, &vars);
    INFO("ckpt_read_memory: " << m.message);
    REQUIRE(m.rc == CKPT_OK);
    const std::string path = temp().file(file_name);
    write_file(path, bytes);
    VarsPtr from_file;
    const Run f = run_read_file(path, opts, probe::kDefaultCap, &from_file);
    INFO("ckpt_read: " << f.message);
    REQUIRE(f.rc == CKPT_OK);
    const Run o = run_open_file(path, opts, probe::kDefaultCap);
    INFO("ckpt_reader_open: " << o.message);
    REQUIRE(o.rc == CKPT_OK);
    const Run v = run_open_file(path, opts, probe::kDefaultCap, true);
    INFO("ckpt_reader_map: " << v.message);
    REQUIRE(v.rc == CKPT_OK);
    return vars;
}

// Whether two collections hold the same names, dtypes, shapes and bytes, in the same order.
bool same_values(const ckpt_vars* a, const ckpt_vars* b) {
    if (ckpt_vars_count(a) != ckpt_vars_count(b)) return false;
    for (size_t i = 0; i < ckpt_vars_count(a); ++i) {
        if (std::strcmp(ckpt_vars_name(a, i), ckpt_vars_name(b, i)) != 0 ||
            ckpt_vars_dtype(a, i) != ckpt_vars_dtype(b, i) || ckpt_vars_itemsize(a, i) != ckpt_vars_itemsize(b, i) ||
            ckpt_vars_ndim(a, i) != ckpt_vars_ndim(b, i) || ckpt_vars_nbytes(a, i) != ckpt_vars_nbytes(b, i))
            return false;
        for (uint32_t d = 0; d < ckpt_vars_ndim(a, i); ++d)
            if (ckpt_vars_shape(a, i)[d] != ckpt_vars_shape(b, i)[d]) return false;
        const size_t n = ckpt_vars_nbytes(a, i);
        if (n != 0 && std::memcmp(ckpt_vars_data(a, i), ckpt_vars_data(b, i), n) != 0) return false;
    }
    return true;
}

// ----------------------------------------------------------------------------------------------- fixtures

ckpt_options default_options() {
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    return o;
}

const std::vector<float> kW = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 65504.0f};
const std::vector<int64_t> kB = {-1, 0, int64_t{1} << 40};

// The collection every valid fixture holds: w float32 (2, 3), b int64 (3,), flag bool (), e uint8 (0,).
VarsPtr fixture_vars() {
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    const int64_t w_shape[] = {2, 3}, b_shape[] = {3}, e_shape[] = {0};
    const uint8_t flag = 1;
    REQUIRE(ckpt_vars_add(v, "w", CKPT_FLOAT32, 2, w_shape, kW.data(), CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "b", CKPT_INT64, 1, b_shape, kB.data(), CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "flag", CKPT_BOOL, 0, nullptr, &flag, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "e", CKPT_UINT8, 1, e_shape, nullptr, CKPT_COPY) == CKPT_OK);
    return vars;
}

// What numpy writes, made by the test builder: zip64 extras on every member and a zip64 end record; here also
// a data descriptor on the deflated member. Holds w and b.
const std::string& numpy_style_fixture();

// The fixture saved by ckpt_save (stored or deflated), as bytes.
const std::string& saved_fixture(bool deflate) {
    static std::string cache[2];
    std::string& bytes = cache[deflate ? 1 : 0];
    if (bytes.empty()) {
        VarsPtr vars = fixture_vars();
        ckpt_options o = default_options();
        o.compression = deflate ? CKPT_DEFLATE : CKPT_STORE;
        const std::string path = temp().file(deflate ? "fixture-deflate.npz" : "fixture-stored.npz");
        REQUIRE(ckpt_save(path.c_str(), vars.get(), &o) == CKPT_OK);
        bytes = read_file(path);
        REQUIRE(!bytes.empty());
    }
    return bytes;
}

// The fixture with a bfloat16 array and user metadata: a metadata member after the arrays.
const std::string& saved_fixture_with_metadata() {
    static std::string bytes;
    if (bytes.empty()) {
        VarsPtr vars = fixture_vars();
        const uint16_t bf16[3] = {0x3f80, 0xc000, 0x7f80};
        const int64_t shape[] = {3};
        REQUIRE(ckpt_vars_add(vars.get(), "bf", CKPT_BFLOAT16, 1, shape, bf16, CKPT_COPY) == CKPT_OK);
        REQUIRE(ckpt_vars_set_metadata(vars.get(), "step", "1200") == CKPT_OK);
        const std::string path = temp().file("fixture-metadata.npz");
        REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
        bytes = read_file(path);
        REQUIRE(bytes.find("__ckpt_metadata__.npy") != std::string::npos);
    }
    return bytes;
}

std::string npy_w() { return zipb::npy_member("<f4", "(2, 3)", raw_bytes(kW)); }
std::string npy_b() { return zipb::npy_member("<i8", "(3,)", raw_bytes(kB)); }

// The small valid files that the truncation and byte-flip cases damage.
struct Fixture {
    const char* name;
    const std::string* bytes;
};
std::vector<Fixture> small_fixtures() {
    return {{"ckpt_save stored", &saved_fixture(false)},
            {"ckpt_save deflate", &saved_fixture(true)},
            {"ckpt_save with a metadata member", &saved_fixture_with_metadata()},
            {"numpy-style zip64 with a data descriptor", &numpy_style_fixture()}};
}

zipb::Member member(const std::string& name, const std::string& data, uint16_t method = zipb::kStored) {
    zipb::Member m;
    m.name = name;
    m.data = data;
    m.method = method;
    return m;
}

std::string archive(std::vector<zipb::Member> members, bool zip64_eocd = false, zipb::Layout* layout = nullptr) {
    zipb::Archive a;
    a.members = std::move(members);
    a.zip64_eocd = zip64_eocd;
    return zipb::build(a, layout);
}

// An archive whose only member is "w.npy" holding `npy`.
std::string with_npy(const std::string& npy, uint16_t method = zipb::kStored) {
    return archive({member("w.npy", npy, method)});
}

const std::string kW_member = "member 'w.npy'";

const std::string& numpy_style_fixture() {
    static const std::string bytes = [] {
        zipb::Member w = member("w.npy", npy_w(), zipb::kDeflated);
        w.zip64 = true;
        w.data_descriptor = true;
        zipb::Member b = member("b.npy", npy_b());
        b.zip64 = true;
        return archive({w, b}, true);
    }();
    return bytes;
}

}  // namespace

// --------------------------------------------------------------------------------- the probe and the builder

TEST_CASE("the allocation probe sees and can refuse the library's allocations", "[malformed][probe]") {
    const size_t n = size_t{4} << 20;
    const std::vector<float> big(n / sizeof(float), 0.5f);
    const int64_t shape[] = {static_cast<int64_t>(big.size())};
    ckpt_vars* v = nullptr;
    REQUIRE(ckpt_vars_new(&v) == CKPT_OK);
    VarsPtr vars(v);
    {
        probe::Window w;
        REQUIRE(ckpt_vars_add(v, "big", CKPT_FLOAT32, 1, shape, big.data(), CKPT_COPY) == CKPT_OK);
        CHECK(w.largest() >= n);
    }
    {
        probe::Window w(n / 2);
        CHECK(ckpt_vars_add(v, "big2", CKPT_FLOAT32, 1, shape, big.data(), CKPT_COPY) == CKPT_ENOMEM);
        CHECK(w.refused() > 0);
    }
    const std::string path = temp().file("probe.npz");
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    const std::string bytes = read_file(path);
    const Run ok = run_memory(bytes, nullptr, probe::kDefaultCap);
    CHECK(ok.rc == CKPT_OK);
    CHECK(ok.largest >= n);
    const Run capped = run_memory(bytes, nullptr, n / 2);
    CHECK(capped.rc == CKPT_ENOMEM);
    CHECK(capped.refused > 0);
}

namespace {
// The first variable is "w", read back exactly.
void check_w(const VarsPtr& vars) {
    REQUIRE(ckpt_vars_count(vars.get()) >= 1);
    CHECK(std::string(ckpt_vars_name(vars.get(), 0)) == "w");
    CHECK(ckpt_vars_dtype(vars.get(), 0) == CKPT_FLOAT32);
    REQUIRE(ckpt_vars_nbytes(vars.get(), 0) == kW.size() * sizeof(float));
    CHECK(std::memcmp(ckpt_vars_data(vars.get(), 0), kW.data(), kW.size() * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("valid archives from the test builder read back (positive controls)", "[malformed][builder]") {
    SECTION("stored") { check_w(expect_ok("ok-stored.npz", with_npy(npy_w()))); }
    SECTION("deflate") { check_w(expect_ok("ok-deflate.npz", with_npy(npy_w(), zipb::kDeflated))); }
    SECTION("zip64 extras and zip64 end record, as numpy writes") {
        zipb::Member w = member("w.npy", npy_w(), zipb::kDeflated);
        w.zip64 = true;
        zipb::Member b = member("b.npy", npy_b());
        b.zip64 = true;
        check_w(expect_ok("ok-zip64.npz", archive({w, b}, true)));
    }
    SECTION("data descriptors (streamed members)") {
        zipb::Member w = member("w.npy", npy_w(), zipb::kDeflated);
        w.data_descriptor = true;
        zipb::Member b = member("b.npy", npy_b(), zipb::kDeflated);
        b.data_descriptor = true;
        b.descriptor_signature = false;
        check_w(expect_ok("ok-descriptor.npz", archive({w, b})));
    }
    SECTION("the fixtures ckpt_save wrote") {
        const VarsPtr want = fixture_vars();
        for (bool deflate : {false, true}) {
            const VarsPtr got = expect_ok(deflate ? "ok-fixture-d.npz" : "ok-fixture-s.npz", saved_fixture(deflate));
            CHECK(same_values(got.get(), want.get()));
        }
    }
}

// ------------------------------------------------------------------------------------------ not zip at all

TEST_CASE("empty input", "[malformed]") {
    expect_failure("empty.npz", "", CKPT_EFORMAT, {"empty"});
}

TEST_CASE("random bytes", "[malformed]") {
    for (uint32_t seed : {1u, 2u, 3u, 42u, 1234u, 99991u}) {
        std::mt19937 rng(seed);
        const size_t size = 1 + rng() % 4096;
        std::string bytes(size, '\0');
        for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
        INFO("seed " << seed << ", " << size << " bytes");
        expect_failure("random-" + std::to_string(seed) + ".npz", bytes, CKPT_EFORMAT, {"zip"});
    }
}

TEST_CASE("random bytes ending in a plausible end-of-central-directory record", "[malformed]") {
    for (uint32_t seed : {5u, 6u, 7u, 8u}) {
        std::mt19937 rng(seed);
        const size_t size = 64 + rng() % 2048;
        std::string bytes(size, '\0');
        for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
        zipb::Archive a;  // an empty archive's EOCD, then lie that the central directory is the random bytes
        a.entries = 1 + rng() % 4;
        a.cd_size = size;
        a.cd_offset = 0;
        bytes += zipb::build(a);
        INFO("seed " << seed);
        expect_failure("random-eocd-" + std::to_string(seed) + ".npz", bytes, CKPT_EFORMAT, {"zip"});
    }
}

TEST_CASE("a text file that is not a zip", "[malformed]") {
    expect_failure("notes.txt", "name,value\nw,1.5\nb,-1\n# not a zip archive, just text\n", CKPT_EFORMAT,
                   {"not an npz checkpoint: not a zip file"});
}

TEST_CASE("a pickle, as torch.save writes in its legacy format, is not an npz checkpoint", "[malformed]") {
    // The start of such a file: protocol 2, then the long integer torch's magic number is.
    static const char start[] = "\x80\x02\x8a\x0a" "l\xfc\x9c" "F\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.";
    const std::string pickle(start, sizeof start - 1);
    expect_failure("model.pt", pickle + std::string(200, '\0'), CKPT_EFORMAT,
                   {"not an npz checkpoint", "not a zip file"});
}

TEST_CASE("a truncated zip is damaged, not another kind of file", "[malformed]") {
    const std::string full = with_npy(npy_w());
    expect_failure("cut.npz", full.substr(0, full.size() - 10), CKPT_EFORMAT, {"not a valid npz (zip) file"});
}

TEST_CASE("members that are not npy arrays", "[malformed][zip]") {
    SECTION("a README.txt beside the arrays is skipped, as numpy gives it as bytes, stored or deflated") {
        for (uint16_t method : {zipb::kStored, zipb::kDeflated}) {
            const VarsPtr got = expect_ok("readme.npz", archive({member("README.txt", "trained on CIFAR\n", method),
                                                                 member("w.npy", npy_w()), member("x", "")}));
            check_w(got);
            CHECK(ckpt_vars_count(got.get()) == 1);
        }
    }
    SECTION("a zip of only other members (as torch.save writes) is not an npz checkpoint") {
        expect_failure("model.pt", archive({member("archive/data.pkl", "\x80\x02}q\x00.", zipb::kStored),
                                            member("archive/byteorder", "little"), member("archive/version", "3\n"),
                                            member("archive/data/0", std::string(16, '\0'))}),
                       CKPT_EFORMAT, {"not an npz checkpoint", "none of its 4 members is an npy array",
                                      "'archive/data.pkl'", "..."});
    }
    SECTION("a member named .npy must still be an npy array") {
        expect_failure("named.npz", archive({member("README.txt", "hi"), member("w.npy", "not an array")}),
                       CKPT_EFORMAT, {kW_member, "magic"});
    }
}

// ------------------------------------------------------------------------------------------------- truncation

TEST_CASE("truncation of a valid multi-member npz at every offset", "[malformed][truncation]") {
    int k = 0;
    for (const Fixture& fx : small_fixtures()) {
        const std::string& full = *fx.bytes;
        INFO(fx.name << " fixture of " << full.size() << " bytes");
        REQUIRE(run_memory(full, nullptr, probe::kDefaultCap).rc == CKPT_OK);
        for (size_t n = 0; n < full.size(); ++n) {
            const Run r = run_memory(full.substr(0, n), nullptr, probe::kDefaultCap);
            INFO("cut at " << n << ": rc " << r.rc << ", message \"" << r.message << "\"");
            CHECK(r.rc == CKPT_EFORMAT);
            CHECK_THAT(r.message, StartsWith("<memory>"));
            CHECK(r.largest <= kSmallBound);
        }
        // Files too, at a stride that still lands in every structure (headers are >= 30 bytes).
        const std::string path = temp().file("cut-" + std::to_string(k++) + ".npz");
        for (size_t n = 0; n < full.size(); n += 7) {
            write_file(path, full.substr(0, n));
            const Run f = run_read_file(path, nullptr, probe::kDefaultCap);
            INFO("file cut at " << n << ": rc " << f.rc << ", message \"" << f.message << "\"");
            CHECK(f.rc == CKPT_EFORMAT);
            CHECK_THAT(f.message, StartsWith(path));
            const Run o = run_open_file(path, nullptr, probe::kDefaultCap);
            INFO("open cut at " << n << ": rc " << o.rc << ", message \"" << o.message << "\"");
            CHECK(o.rc == CKPT_EFORMAT);
        }
    }
}

// ---------------------------------------------------------------------------------------------- byte flips

TEST_CASE("every single-byte flip of a small valid file", "[malformed][flips]") {
    for (const Fixture& fx : small_fixtures()) {
        const std::string& full = *fx.bytes;
        VarsPtr want;
        REQUIRE(run_memory(full, nullptr, probe::kDefaultCap, &want).rc == CKPT_OK);
        size_t ok = 0, failed = 0;
        for (size_t at = 0; at < full.size(); ++at) {
            for (unsigned char mask : {0x01, 0x80, 0xff}) {
                std::string bytes = full;
                bytes[at] = static_cast<char>(static_cast<unsigned char>(bytes[at]) ^ mask);
                VarsPtr got;
                const Run r = run_memory(bytes, nullptr, probe::kDefaultCap, &got);
                INFO(fx.name << " fixture, byte " << at << " ^ " << hex(mask) << ": rc "
                                                      << r.rc << ", message \"" << r.message << "\"");
                if (r.rc == CKPT_OK) {
                    ++ok;
                    CHECK(same_values(got.get(), want.get()));  // never OK with different values
                } else {
                    ++failed;
                    CHECK((r.rc == CKPT_EFORMAT || r.rc == CKPT_EUNSUPPORTED));
                    CHECK_THAT(r.message, StartsWith("<memory>"));
                    CHECK(r.largest <= kSmallBound);
                }
            }
        }
        INFO(ok << " flips read fine, " << failed << " were refused");
        CHECK(failed > 0);
    }
}

TEST_CASE("a CRC mismatch is caught", "[malformed][crc]") {
    SECTION("a flipped data byte of a stored member written by ckpt_save") {
        zipb::Layout lay;
        std::string bytes = archive({member("w.npy", npy_w())}, false, &lay);
        bytes[lay.data_offsets[0] + lay.data_sizes[0] - 1] ^= 0x40;  // the last byte of w's data
        expect_failure("crc-flip.npz", bytes, CKPT_EFORMAT, {kW_member, "CRC"});
    }
    SECTION("a flipped data byte in the fixture saved by ckpt_save (stored)") {
        std::string bytes = saved_fixture(false);
        const std::string needle("\x93NUMPY", 6);  // the first member is w; its data follows its 128-byte header
        const size_t npy_at = bytes.find(needle);
        REQUIRE(npy_at != std::string::npos);
        const size_t data_at = npy_at + 10 + zipb::get(bytes, npy_at + 8, 2);
        REQUIRE(std::memcmp(&bytes[data_at], kW.data(), sizeof(float)) == 0);
        bytes[data_at + 2] ^= 0x01;
        expect_failure("crc-fixture.npz", bytes, CKPT_EFORMAT, {kW_member, "CRC"});
    }
    SECTION("deflate member whose central and local CRC both lie") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kDeflated);
        m.crc = zipb::crc32_of(m.data) ^ 0x00010000u;
        expect_failure("crc-deflate.npz", archive({m}), CKPT_EFORMAT, {kW_member, "CRC"});
    }
    SECTION("data descriptor and central directory that agree on a wrong CRC") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kDeflated);
        m.data_descriptor = true;
        m.crc = zipb::crc32_of(m.data) + 1;
        expect_failure("crc-descriptor.npz", archive({m}), CKPT_EFORMAT, {kW_member, "CRC"});
    }
}

// ---------------------------------------------------------------------------------------- data descriptors

namespace {

// The four ways a data descriptor can be written: with or without its PK\7\8 signature, with 4-byte sizes or,
// after a local zip64 extra field, 8-byte ones.
struct DescriptorForm {
    const char* name;
    bool signature;
    bool zip64;
};
const DescriptorForm kDescriptorForms[] = {{"signature, 4-byte sizes", true, false},
                                           {"no signature, 4-byte sizes", false, false},
                                           {"signature, zip64 sizes", true, true},
                                           {"no signature, zip64 sizes", false, true}};

zipb::Member streamed(const std::string& name, const std::string& data, uint16_t method, const DescriptorForm& form) {
    zipb::Member m = member(name, data, method);
    m.data_descriptor = true;
    m.descriptor_signature = form.signature;
    m.zip64 = form.zip64;
    return m;
}

std::string file_name_of(const char* what, const DescriptorForm& form) {
    return std::string(what) + "-" + (form.signature ? "sig" : "nosig") + (form.zip64 ? "-zip64" : "") + ".npz";
}

std::string hex8(uint32_t v) {
    std::ostringstream s;
    s << std::hex << std::setw(8) << std::setfill('0') << v;
    return s.str();
}

// `data` followed by four bytes that make its CRC-32 `target`. CRC-32 is affine in the message bits: each of the
// 32 appended bits flips a fixed set of CRC bits, so the four bytes solve a 32x32 linear system over GF(2).
std::string with_crc(const std::string& data, uint32_t target) {
    const uint32_t base = zipb::crc32_of(data + std::string(4, '\0'));
    uint32_t rows[32] = {};  // rows[i] bit j: appended bit j flips CRC bit i
    uint32_t rhs = base ^ target;
    for (int j = 0; j < 32; ++j) {
        std::string tail(4, '\0');
        tail[j / 8] = static_cast<char>(1u << (j % 8));
        const uint32_t flips = zipb::crc32_of(data + tail) ^ base;
        for (int i = 0; i < 32; ++i)
            if (flips >> i & 1u) rows[i] |= 1u << j;
    }
    for (int col = 0; col < 32; ++col) {
        int pivot = col;
        while (pivot < 32 && !(rows[pivot] >> col & 1u)) ++pivot;
        REQUIRE(pivot < 32);
        std::swap(rows[col], rows[pivot]);
        const uint32_t bit_col = rhs >> col & 1u, bit_pivot = rhs >> pivot & 1u;
        rhs = (rhs & ~((1u << col) | (1u << pivot))) | (bit_col << pivot) | (bit_pivot << col);
        for (int r = 0; r < 32; ++r) {
            if (r != col && (rows[r] >> col & 1u)) {
                rows[r] ^= rows[col];
                rhs ^= (rhs >> col & 1u) << r;
            }
        }
    }
    std::string out = data;
    for (int k = 0; k < 4; ++k) out += static_cast<char>(rhs >> (8 * k) & 0xffu);
    REQUIRE(zipb::crc32_of(out) == target);
    return out;
}

}  // namespace

TEST_CASE("a data descriptor that disagrees with the central directory is refused", "[malformed][zip][descriptor]") {
    // The central directory alone would read correctly: the descriptor's lie is the only fault.
    const std::string data = npy_w();
    const uint32_t crc = zipb::crc32_of(data);
    const uint64_t deflated = zipb::raw_deflate(data).size();
    const std::string disagrees = "its data descriptor disagrees with the central directory: ";
    SECTION("a wrong CRC-32") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            zipb::Member m = streamed("w.npy", data, zipb::kDeflated, form);
            m.descriptor_crc = crc ^ 0x00800000u;
            expect_failure(file_name_of("descriptor-crc", form), archive({m}), CKPT_EFORMAT,
                           {kW_member, disagrees + "CRC-32 " + hex8(crc ^ 0x00800000u) +
                                           " (the central directory says " + hex8(crc) + ")"});
        }
    }
    SECTION("a wrong compressed size") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            zipb::Member m = streamed("w.npy", data, zipb::kDeflated, form);
            m.descriptor_comp_size = deflated + 1;
            expect_failure(file_name_of("descriptor-csize", form), archive({m}), CKPT_EFORMAT,
                           {kW_member, disagrees + "compressed size " + std::to_string(deflated + 1) +
                                           " (the central directory says " + std::to_string(deflated) + ")"});
        }
    }
    SECTION("a wrong uncompressed size") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            zipb::Member m = streamed("w.npy", data, zipb::kDeflated, form);
            m.descriptor_uncomp_size = data.size() - 1;
            expect_failure(file_name_of("descriptor-usize", form), archive({m}), CKPT_EFORMAT,
                           {kW_member, disagrees + "uncompressed size " + std::to_string(data.size() - 1) +
                                           " (the central directory says " + std::to_string(data.size()) + ")"});
        }
    }
    SECTION("a stored member's wrong sizes, each named") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            zipb::Member m = streamed("w.npy", data, zipb::kStored, form);
            m.descriptor_comp_size = m.descriptor_uncomp_size = uint64_t{7};
            const std::string n = std::to_string(data.size());
            expect_failure(file_name_of("descriptor-stored", form), archive({m}), CKPT_EFORMAT,
                           {kW_member, disagrees + "compressed size 7 (the central directory says " + n +
                                           "), uncompressed size 7 (the central directory says " + n + ")"});
        }
    }
    SECTION("a descriptor of the second member, the first being right") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            zipb::Member b = streamed("b.npy", npy_b(), zipb::kDeflated, form);
            zipb::Member w = streamed("w.npy", data, zipb::kDeflated, form);
            w.descriptor_crc = crc + 1;
            expect_failure(file_name_of("descriptor-second", form), archive({b, w}), CKPT_EFORMAT,
                           {kW_member, disagrees + "CRC-32 " + hex8(crc + 1)});
        }
    }
    SECTION("a flipped CRC-32 byte in a descriptor ckpt_save wrote") {
        std::string bytes = saved_fixture(true);
        const size_t at = bytes.find("PK\x07\x08");  // the first member, w, has the first descriptor
        REQUIRE(at != std::string::npos);
        bytes[at + 4] ^= 0x01;
        expect_failure("descriptor-fixture.npz", bytes, CKPT_EFORMAT, {kW_member, disagrees + "CRC-32 "});
    }
    SECTION("a missing descriptor of the last member: it would run into the central directory") {
        zipb::Member m = streamed("w.npy", data, zipb::kDeflated, kDescriptorForms[0]);
        zipb::Layout lay;
        std::string bytes = archive({m}, false, &lay);
        const size_t descriptor_at = lay.data_offsets[0] + lay.data_sizes[0];
        bytes.erase(descriptor_at, 16);  // and move the directory back to where it now is
        zipb::patch(bytes, bytes.size() - 22 + 16, descriptor_at, 4);
        expect_failure("descriptor-missing-last.npz", bytes, CKPT_EFORMAT,
                       {kW_member, "its data descriptor (at offset " + std::to_string(descriptor_at) +
                                       ") runs into the central directory"});
    }
    SECTION("a missing descriptor before the next member: its local header is no descriptor") {
        zipb::Member w = streamed("w.npy", data, zipb::kDeflated, kDescriptorForms[0]);
        zipb::Member b = member("b.npy", npy_b());
        zipb::Layout lay;
        std::string bytes = archive({w, b}, false, &lay);
        const size_t descriptor_at = lay.data_offsets[0] + lay.data_sizes[0];
        bytes.erase(descriptor_at, 16);
        zipb::patch(bytes, lay.central_offsets[1] - 16 + 42, descriptor_at, 4);  // b's local header offset
        zipb::patch(bytes, bytes.size() - 22 + 16, lay.cd_offset - 16, 4);
        expect_failure("descriptor-missing-middle.npz", bytes, CKPT_EFORMAT,
                       {kW_member, disagrees + "CRC-32 " + hex8(0x04034b50)});
    }
}

TEST_CASE("a streamed member's local header holds zeros or the real CRC and sizes, nothing else",
          "[malformed][zip][descriptor]") {
    // The first member's local header starts the file: CRC-32 at byte 14, sizes at 18 and 22.
    const std::string streamed_w = archive({streamed("w.npy", npy_w(), zipb::kDeflated, kDescriptorForms[0]),
                                            member("b.npy", npy_b())});
    const uint32_t crc = zipb::crc32_of(npy_w());
    SECTION("the real values are accepted") {
        std::string bytes = streamed_w;
        zipb::patch(bytes, 14, crc, 4);
        zipb::patch(bytes, 22, npy_w().size(), 4);
        expect_ok("streamed-real-local-values.npz", bytes);
    }
    for (const auto& [at, what] : std::vector<std::pair<size_t, const char*>>{
             {14, "CRC-32"}, {18, "compressed size"}, {22, "uncompressed size"}}) {
        DYNAMIC_SECTION("a different " << what) {
            std::string bytes = streamed_w;
            zipb::patch(bytes, at, 0x1234, 4);
            expect_failure("streamed-wrong-local.npz", bytes, CKPT_EFORMAT,
                           {kW_member, "a streamed member's local header disagrees with the central directory"});
        }
    }
}

TEST_CASE("a data descriptor that agrees with the central directory reads, in every form", "[malformed][zip][descriptor]") {
    const auto check = [](const VarsPtr& vars) {
        REQUIRE(ckpt_vars_count(vars.get()) == 2);
        CHECK(std::string(ckpt_vars_name(vars.get(), 0)) == "w");
        REQUIRE(ckpt_vars_nbytes(vars.get(), 0) == kW.size() * sizeof(float));
        CHECK(std::memcmp(ckpt_vars_data(vars.get(), 0), kW.data(), kW.size() * sizeof(float)) == 0);
        CHECK(std::string(ckpt_vars_name(vars.get(), 1)) == "b");
        REQUIRE(ckpt_vars_nbytes(vars.get(), 1) == kB.size() * sizeof(int64_t));
        CHECK(std::memcmp(ckpt_vars_data(vars.get(), 1), kB.data(), kB.size() * sizeof(int64_t)) == 0);
    };
    SECTION("deflated members") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            check(expect_ok(file_name_of("ok-descriptor-deflated", form),
                            archive({streamed("w.npy", npy_w(), zipb::kDeflated, form),
                                     streamed("b.npy", npy_b(), zipb::kDeflated, form)}, form.zip64)));
        }
    }
    SECTION("stored members") {
        for (const DescriptorForm& form : kDescriptorForms) {
            INFO(form.name);
            check(expect_ok(file_name_of("ok-descriptor-stored", form),
                            archive({streamed("w.npy", npy_w(), zipb::kStored, form),
                                     streamed("b.npy", npy_b(), zipb::kStored, form)}, form.zip64)));
        }
    }
    SECTION("8-byte sizes without a local zip64 extra field, as Go's archive/zip writes past 4 GiB") {
        for (const bool signature : {true, false}) {
            INFO("signature " << signature);
            zipb::Member w = streamed("w.npy", npy_w(), zipb::kDeflated, kDescriptorForms[signature ? 0 : 1]);
            zipb::Member b = streamed("b.npy", npy_b(), zipb::kStored, kDescriptorForms[signature ? 0 : 1]);
            w.descriptor_zip64 = b.descriptor_zip64 = true;
            check(expect_ok(std::string("ok-descriptor-go") + (signature ? "-sig" : "") + ".npz", archive({w, b})));
        }
    }
    SECTION("no signature and a CRC-32 that reads as the signature") {
        // A uint8 array whose last four bytes make the member's CRC-32 0x08074b50, "PK\7\8" on disk.
        const std::string npy = with_crc(zipb::npy_member("|u1", "(8,)", "ckpt"), 0x08074b50u);
        for (const uint16_t method : {zipb::kStored, zipb::kDeflated}) {
            INFO("method " << method);
            zipb::Member m = streamed("x.npy", npy, method, kDescriptorForms[1]);
            const VarsPtr vars = expect_ok("ok-descriptor-crc-like-signature.npz", archive({m, member("y.npy", npy_b())}));
            REQUIRE(ckpt_vars_count(vars.get()) == 2);
            REQUIRE(ckpt_vars_nbytes(vars.get(), 0) == 8);
            CHECK(std::memcmp(ckpt_vars_data(vars.get(), 0), npy.data() + npy.size() - 8, 8) == 0);
        }
    }
}

// ------------------------------------------------------------------------------------------------ npy layer

TEST_CASE("malformed npy headers", "[malformed][npy]") {
    const std::string w_data = raw_bytes(kW);
    const std::string good = zipb::npy_dict("<f4", "(2, 3)");

    SECTION("bad magic") {
        std::string npy = npy_w();
        npy[5] = 'Z';  // \x93NUMPZ
        expect_failure("bad-magic.npz", with_npy(npy), CKPT_EFORMAT, {kW_member, "magic"});
    }
    SECTION("member that is not npy at all") {
        expect_failure("not-npy.npz", with_npy("just some text, no magic here at all\n"), CKPT_EFORMAT,
                       {kW_member, "magic"});
    }
    SECTION("version 4.0") {
        expect_failure("version-4-0.npz", with_npy(zipb::npy_raw(good, w_data, 4, 0)), CKPT_EFORMAT,
                       {kW_member, "version 4.0"});
    }
    SECTION("version 1.1") {
        expect_failure("version-1-1.npz", with_npy(zipb::npy_raw(good, w_data, 1, 1)), CKPT_EFORMAT,
                       {kW_member, "version 1.1"});
    }
    SECTION("header longer than the limit; the same file reads with max_header_bytes raised") {
        const std::string bytes = with_npy(zipb::npy_raw(good + std::string(10100, ' '), w_data));
        expect_failure("long-header.npz", bytes, CKPT_EFORMAT, {kW_member, "exceeds the limit of 10000"});
        ckpt_options o = default_options();
        o.max_header_bytes = 20000;
        const VarsPtr vars = expect_ok("long-header-raised.npz", bytes, &o);
        REQUIRE(ckpt_vars_nbytes(vars.get(), 0) == w_data.size());
        CHECK(std::memcmp(ckpt_vars_data(vars.get(), 0), kW.data(), w_data.size()) == 0);
    }
    SECTION("format 2.0 header length of 4 GiB in a tiny member, default and raised limit") {
        std::string npy = zipb::npy_raw(good, w_data, 2, 0);
        zipb::patch(npy, 8, 0xffffffffu, 4);
        expect_failure("huge-header-len.npz", with_npy(npy), CKPT_EFORMAT, {kW_member, "exceeds the limit"},
                       nullptr, kSmallBound, kBombCap);
        ckpt_options o = default_options();
        o.max_header_bytes = uint64_t{1} << 40;  // the caller allows it; the member still cannot hold it
        expect_failure("huge-header-len-raised.npz", with_npy(npy), CKPT_EFORMAT, {kW_member, "truncated"}, &o,
                       kSmallBound, kBombCap);
    }
    SECTION("header not a dict") {
        expect_failure("not-dict.npz", with_npy(zipb::npy_raw("['<f4', False, (2, 3)]", w_data)), CKPT_EFORMAT,
                       {kW_member, "not a dict"});
    }
    SECTION("missing key") {
        expect_failure("missing-key.npz", with_npy(zipb::npy_raw("{'descr': '<f4', 'fortran_order': False, }", w_data)),
                       CKPT_EFORMAT, {kW_member, "missing key 'shape'"});
    }
    SECTION("extra key") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }";
        expect_failure("extra-key.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "unexpected key 'extra'"});
    }
    SECTION("duplicate key") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,), }";
        expect_failure("dup-key.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "'shape' appears twice"});
    }
    SECTION("shape as a list") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }";
        expect_failure("shape-list.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "'shape' must be a tuple"});
    }
    SECTION("fortran_order as an int") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }";
        expect_failure("fortran-int.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "'fortran_order' must be True or False"});
    }
    SECTION("a function call: __import__('os') as the descr") {
        const std::string dict = "{'descr': __import__('os').system('false'), 'fortran_order': False, 'shape': (2, 3), }";
        expect_failure("call-descr.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "expected a quoted string as 'descr'"});
    }
    SECTION("a function call: __import__('os') as the shape") {
        const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': __import__('os'), }";
        expect_failure("call-shape.npz", with_npy(zipb::npy_raw(dict, w_data)), CKPT_EFORMAT,
                       {kW_member, "'shape' must be a tuple"});
    }
    SECTION("a function call: __import__('os') as the whole header") {
        expect_failure("call-header.npz", with_npy(zipb::npy_raw("__import__('os').system('false')", w_data)),
                       CKPT_EFORMAT, {kW_member, "not a dict"});
    }
    SECTION("negative shape") {
        expect_failure("negative-shape.npz", with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(-1, 3)"), w_data)),
                       CKPT_EFORMAT, {kW_member, "negative dimension"});
    }
    SECTION("more dimensions than ckpt allows (65)") {
        std::string shape = "(";
        for (int i = 0; i < 65; ++i) shape += "1, ";
        shape += ")";
        expect_failure("ndim-65.npz", with_npy(zipb::npy_raw(zipb::npy_dict("<f4", shape), raw_bytes(kW).substr(0, 4))),
                       CKPT_EFORMAT, {kW_member, "more than 64 dimensions"});
    }
    SECTION("a descr nested deeply (no unbounded recursion)") {
        auto nested = [](size_t depth) {
            return "{'descr': " + std::string(depth, '[') + std::string(depth, ']') +
                   ", 'fortran_order': False, 'shape': (6,), }";
        };
        expect_failure("deep-descr.npz", with_npy(zipb::npy_raw(nested(4000), raw_bytes(kW))), CKPT_EFORMAT,
                       {kW_member, "nested more than"});
        ckpt_options o = default_options();  // 400000 levels in a format 2.0 header the caller allows
        o.max_header_bytes = size_t{1} << 20;
        expect_failure("deep-descr-raised.npz", with_npy(zipb::npy_raw(nested(400000), raw_bytes(kW), 2, 0)),
                       CKPT_EFORMAT, {kW_member, "nested more than"}, &o, 2 * kSmallBound);
    }
    SECTION("float dimension") {
        expect_failure("float-shape.npz", with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(2.0, 3)"), w_data)),
                       CKPT_EFORMAT, {kW_member, "malformed integer"});
    }
}

TEST_CASE("shapes whose byte size overflows or that the member cannot hold", "[malformed][npy][memory]") {
    const std::string w_data = raw_bytes(kW);
    SECTION("product of dimensions above 2^63") {
        // 2^62 * 4 items overflows int64 before the item size is even applied.
        expect_failure("overflow-product.npz",
                       with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(4611686018427387904, 4)"), w_data)),
                       CKPT_EFORMAT, {kW_member, "overflows the byte size"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("items fit in int64 but bytes do not") {
        expect_failure("overflow-bytes.npz",
                       with_npy(zipb::npy_raw(zipb::npy_dict("<f8", "(2305843009213693952,)"), w_data)),
                       CKPT_EFORMAT, {kW_member, "overflows the byte size"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("one dimension beyond int64") {
        expect_failure("overflow-dim.npz",
                       with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(99999999999999999999,)"), w_data)),
                       CKPT_EFORMAT, {kW_member, "overflows int64"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("a huge shape that does not overflow (4 TiB) over 24 bytes of data") {
        expect_failure("huge-shape.npz",
                       with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(1099511627776,)"), w_data)), CKPT_EFORMAT,
                       {kW_member, "npy header describes"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("a huge shape in a deflate member (rejected before any allocation)") {
        expect_failure("huge-shape-deflate.npz",
                       with_npy(zipb::npy_raw(zipb::npy_dict("<f4", "(1099511627776,)"), w_data), zipb::kDeflated),
                       CKPT_EFORMAT, {kW_member, "npy header describes"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("data shorter than the shape says") {
        expect_failure("data-short.npz", with_npy(zipb::npy_member("<f4", "(2, 3)", w_data.substr(0, 20))),
                       CKPT_EFORMAT, {kW_member, "npy header describes"});
    }
    SECTION("data longer than the shape says") {
        expect_failure("data-long.npz", with_npy(zipb::npy_member("<f4", "(2, 3)", w_data + "abcd")), CKPT_EFORMAT,
                       {kW_member, "npy header describes"});
    }
}

TEST_CASE("valid numpy dtypes ckpt does not handle", "[malformed][npy][unsupported]") {
    SECTION("object dtype '|O'") {
        const std::string pickled = "\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01K\x02e.";
        expect_failure("object.npz", with_npy(zipb::npy_raw(zipb::npy_dict("|O", "(2,)"), pickled)),
                       CKPT_EUNSUPPORTED, {kW_member, "object"});
    }
    SECTION("structured dtype") {
        const std::string dict = "{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }";
        expect_failure("structured.npz", with_npy(zipb::npy_raw(dict, std::string(24, '\0'))), CKPT_EUNSUPPORTED,
                       {kW_member, "structured"});
    }
}

TEST_CASE("objax layout: a malformed names table", "[malformed][npy][objax]") {
    // objax writes names.npy ('<U<n>', one row per variable) and 0.npy, 1.npy, ...
    auto objax = [](const std::u32string& table, size_t chars) {
        const std::string bytes(reinterpret_cast<const char*>(table.data()), table.size() * sizeof(char32_t));
        const std::string names = zipb::npy_member("<U" + std::to_string(chars), "(2,)", bytes);
        return archive({member("names.npy", names), member("0.npy", npy_w()), member("1.npy", npy_b())});
    };
    SECTION("control: a valid objax file") {
        const VarsPtr vars = expect_ok("objax-ok.npz", objax(std::u32string(U"wb") , 1));
        REQUIRE(ckpt_vars_count(vars.get()) == 2);
        CHECK(std::string(ckpt_vars_name(vars.get(), 0)) == "w");
        CHECK(std::string(ckpt_vars_name(vars.get(), 1)) == "b");
    }
    SECTION("the same name twice") {
        expect_failure("objax-dup.npz", objax(U"aa", 1), CKPT_EFORMAT, {"member 'names.npy'", "appears twice"});
    }
    SECTION("an empty name") {
        expect_failure("objax-empty.npz", objax(std::u32string(U"a\0", 2), 1), CKPT_EFORMAT,
                       {"member 'names.npy'", "is empty"});
    }
    SECTION("a name that is not valid unicode (a lone surrogate)") {
        expect_failure("objax-surrogate.npz", objax(std::u32string{U'a', char32_t(0xD800)}, 1), CKPT_EFORMAT,
                       {"member 'names.npy'", "not valid unicode"});
    }
}

// ------------------------------------------------------------------------------------------------ zip layer

TEST_CASE("member names", "[malformed][zip]") {
    SECTION("duplicate member names") {
        expect_failure("dup-names.npz", archive({member("w.npy", npy_w()), member("w.npy", npy_w())}), CKPT_EFORMAT,
                       {kW_member, "duplicate"});
    }
    SECTION("'x' and 'x.npy' both present") {
        expect_failure("x-and-x-npy.npz", archive({member("x.npy", npy_w()), member("x", npy_w())}), CKPT_EFORMAT,
                       {"member 'x'", "variable 'x' also stored as member 'x.npy'"});
    }
    SECTION("member name with an embedded NUL: refused, or read as numpy reads it") {
        // Python's zipfile (so numpy) cuts names at the first NUL ("a trick used by viruses"), so numpy reads
        // "w.npy\0.exe" as variable "w". ckpt must either refuse the name or agree with numpy.
        VarsPtr got;
        const Run r = run_memory(archive({member(std::string("w.npy\0.exe", 10), npy_w())}), nullptr,
                                 probe::kDefaultCap, &got);
        INFO("rc " << r.rc << ", message \"" << r.message << "\"");
        if (r.rc == CKPT_OK) {
            REQUIRE(ckpt_vars_count(got.get()) == 1);
            CHECK(std::string(ckpt_vars_name(got.get(), 0)) == "w");
        } else {
            CHECK(r.rc == CKPT_EFORMAT);
            // The whole message reaches C: the NUL is shown escaped, not where the string ends.
            CHECK_THAT(r.message, StartsWith("<memory>") && Contains("w.npy\\x00.exe"));
        }
    }
    SECTION("local header name differs from the central directory's") {
        zipb::Member m = member("w.npy", npy_w());
        m.local_name = "v.npy";
        expect_failure("local-name.npz", archive({m}), CKPT_EFORMAT, {"inconsistent"});
    }
}

TEST_CASE("compression and encryption", "[malformed][zip][unsupported]") {
    SECTION("bzip2 (method 12)") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kBzip2);
        m.compressed = std::string("BZh91AY&SY", 10) + std::string(40, '\x5a');
        expect_failure("bzip2.npz", archive({m}), CKPT_EUNSUPPORTED, {kW_member, "compression method 12"});
    }
    SECTION("an undefined method (77)") {
        zipb::Member m = member("w.npy", npy_w(), 77);
        expect_failure("method-77.npz", archive({m}), CKPT_EUNSUPPORTED, {kW_member, "compression method 77"});
    }
    SECTION("encrypted flag set") {
        zipb::Member m = member("w.npy", npy_w());
        m.flags = zipb::kFlagEncrypted;
        expect_failure("encrypted.npz", archive({m}), CKPT_EUNSUPPORTED, {kW_member, "encrypted"});
    }
}

TEST_CASE("deflate bombs and lying sizes (bounded memory)", "[malformed][zip][memory]") {
    SECTION("declares a small size but inflates to 16 MiB") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kDeflated);
        m.compressed = zipb::raw_deflate(npy_w() + std::string(size_t{16} << 20, '\0'), 9);
        INFO("compressed " << m.compressed->size() << " bytes");
        // Open reads only the header; the lie shows when the data is read.
        expect_failure("bomb-small-declared.npz", archive({m}), CKPT_EFORMAT, {kW_member, "longer"}, nullptr,
                       kSmallBound, kBombCap);
    }
    SECTION("declares 1 TB from a few compressed bytes") {
        zipb::Member m = member("w.npy", zipb::npy_raw(zipb::npy_dict("|u1", "(999999999872,)"), ""), zipb::kDeflated);
        m.zip64 = true;
        m.uncomp_size = uint64_t{1000000000000};
        INFO("compressed " << m.stored_bytes().size() << " bytes");
        expect_failure("bomb-1tb.npz", archive({m}, true), CKPT_EFORMAT, {kW_member, "more than deflate can produce"},
                       nullptr, kSmallBound, kBombCap);
    }
    SECTION("declares 4 GiB - 2 without zip64 from a few compressed bytes") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kDeflated);
        m.uncomp_size = 0xfffffffeu;
        expect_failure("bomb-4g.npz", archive({m}), CKPT_EFORMAT, {kW_member, "more than deflate can produce"},
                       nullptr, kSmallBound, kBombCap);
    }
    SECTION("declares a size within deflate's 1032:1 but the stream ends early") {
        // A header for N bytes of uint8 and a stream that holds the header and far fewer bytes. Memory for the
        // declared size may be allocated (deflate could produce it), but no more than 1032 times the input.
        std::string compressed;
        uint64_t declared = 0;
        for (uint64_t n = 4u << 20;; n -= n / 8) {
            const std::string head = zipb::npy_raw(zipb::npy_dict("|u1", "(" + std::to_string(n) + ",)"), "");
            compressed = zipb::raw_deflate(head + std::string(1000, '\0'), 9);
            declared = head.size() + n;
            if (declared / 1032 <= compressed.size()) break;
        }
        zipb::Member m = member("w.npy", "", zipb::kDeflated);
        m.compressed = compressed;
        m.uncomp_size = declared;
        const std::string bytes = archive({m});
        INFO(bytes.size() << "-byte archive declaring " << declared << " bytes");
        expect_failure("bomb-ratio.npz", bytes, CKPT_EFORMAT, {kW_member}, nullptr, 1032 * bytes.size(), kBombCap);
    }
    SECTION("a stored member claiming 1 TiB (zip64), larger than the file") {
        zipb::Member m = member("w.npy", npy_w());
        m.zip64 = true;
        m.comp_size = m.uncomp_size = uint64_t{1} << 40;
        expect_failure("stored-1tib.npz", archive({m}, true), CKPT_EFORMAT, {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("a stored member claiming 2 GiB (no zip64), larger than the file") {
        zipb::Member m = member("w.npy", npy_w());
        m.comp_size = m.uncomp_size = 0x7fffffffu;
        expect_failure("stored-2gib.npz", archive({m}), CKPT_EFORMAT, {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("a stored member whose sizes lie only in the central directory (larger than the file)") {
        zipb::Member m = member("w.npy", npy_w());
        m.comp_size = m.uncomp_size = 1u << 30;
        m.local_comp_size = m.local_uncomp_size = m.data.size();
        expect_failure("stored-central-lie.npz", archive({m}), CKPT_EFORMAT, {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("a stored member whose compressed and uncompressed sizes differ") {
        zipb::Member m = member("w.npy", npy_w());
        m.uncomp_size = m.data.size() * 1000;
        expect_failure("stored-sizes-differ.npz", archive({m}), CKPT_EFORMAT, {kW_member, "stored member declares"},
                       nullptr, kSmallBound, kBombCap);
    }
    SECTION("a data descriptor member whose central sizes are 1000x the data") {
        zipb::Member m = member("w.npy", npy_w(), zipb::kDeflated);
        m.data_descriptor = true;
        m.uncomp_size = m.data.size() * 1000;
        expect_failure("descriptor-lie.npz", archive({m}), CKPT_EFORMAT, {kW_member}, nullptr, kSmallBound, kBombCap);
    }
}

TEST_CASE("overlapping members", "[malformed][zip][overlap]") {
    SECTION("two central entries pointing at the same local data (names differ)") {
        zipb::Member a = member("a.npy", npy_w());
        zipb::Member b = member("b.npy", npy_w());
        b.write_local = false;
        b.share_local_of = 0;
        expect_failure("overlap-same-local.npz", archive({a, b}), CKPT_EFORMAT, {"zip"});
    }
    SECTION("two central entries pointing at the same local data (same name)") {
        zipb::Member a = member("w.npy", npy_w());
        zipb::Member b = member("w.npy", npy_w());
        b.write_local = false;
        b.share_local_of = 0;
        expect_failure("overlap-same-name.npz", archive({a, b}), CKPT_EFORMAT, {"zip"});
    }
    SECTION("one member's data quotes another member's whole local record") {
        // Fifield's "quoted overlap": a.npy is a uint8 array whose bytes are b.npy's local header and data, and
        // the central directory lists both. Every header is consistent; only the ranges overlap.
        zipb::Member b = member("b.npy", npy_b());
        const std::string quoted = zipb::local_record_bytes(b);
        const std::string a_head =
            zipb::npy_raw(zipb::npy_dict("|u1", "(" + std::to_string(quoted.size()) + ",)"), "");
        zipb::Member a = member("a.npy", a_head + quoted);
        b.write_local = false;
        b.central_offset = 30 + a.name.size() + a_head.size();
        const std::string bytes = archive({a, b});
        expect_failure("overlap-quoted.npz", bytes, CKPT_EFORMAT, {"overlap"});
    }
}

TEST_CASE("end-of-central-directory records that lie", "[malformed][zip][eocd]") {
    const std::vector<zipb::Member> two = {member("w.npy", npy_w()), member("b.npy", npy_b())};
    auto zip64 = [&](auto&& lie) {
        zipb::Archive a;
        a.members = two;
        a.zip64_eocd = true;
        lie(a);
        return zipb::build(a);
    };
    auto plain = [&](auto&& lie) {
        zipb::Archive a;
        a.members = two;
        lie(a);
        return zipb::build(a);
    };
    SECTION("control: the honest zip64 archive reads") {
        expect_ok("eocd64-honest.npz", zip64([](zipb::Archive&) {}));
    }
    SECTION("zip64 EOCD claiming 2^32 entries") {
        expect_failure("eocd64-2p32.npz", zip64([](zipb::Archive& a) { a.entries64 = uint64_t{1} << 32; }),
                       CKPT_EFORMAT, {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("zip64 EOCD claiming 2^64-1 entries") {
        expect_failure("eocd64-max.npz", zip64([](zipb::Archive& a) { a.entries64 = UINT64_MAX; }), CKPT_EFORMAT,
                       {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("zip64 EOCD counting one entry too few") {
        expect_failure("eocd64-fewer.npz", zip64([](zipb::Archive& a) { a.entries64 = 1; }), CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 EOCD counting one entry too many") {
        expect_failure("eocd64-more.npz", zip64([](zipb::Archive& a) { a.entries64 = 3; }), CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 EOCD central directory offset off by one") {
        zipb::Layout lay;
        zipb::Archive honest;
        honest.members = two;
        honest.zip64_eocd = true;
        zipb::build(honest, &lay);
        expect_failure("eocd64-offset-1.npz", zip64([&](zipb::Archive& a) { a.cd_offset64 = lay.cd_offset + 1; }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 EOCD central directory size of 2^40") {
        expect_failure("eocd64-size.npz", zip64([](zipb::Archive& a) { a.cd_size64 = uint64_t{1} << 40; }),
                       CKPT_EFORMAT, {"zip"}, nullptr, kSmallBound, kBombCap);
    }
    SECTION("zip64 EOCD central directory offset above 2^63") {
        expect_failure("eocd64-offset-2p63.npz",
                       zip64([](zipb::Archive& a) { a.cd_offset64 = (uint64_t{1} << 63) + 16; }), CKPT_EFORMAT,
                       {"zip"});
    }
    SECTION("zip64 EOCD offset + size wrapping around 2^64") {
        expect_failure("eocd64-wrap.npz", zip64([](zipb::Archive& a) {
                           a.cd_offset64 = 16;
                           a.cd_size64 = UINT64_MAX - 8;
                       }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 locator pointing above 2^63") {
        expect_failure("eocd64-locator-2p63.npz",
                       zip64([](zipb::Archive& a) { a.eocd64_offset = (uint64_t{1} << 63) + 16; }), CKPT_EFORMAT,
                       {"zip"});
    }
    SECTION("zip64 locator pointing past itself") {
        expect_failure("eocd64-locator-past.npz", zip64([](zipb::Archive& a) { a.eocd64_offset = 1u << 20; }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 locator pointing at the start of the file") {
        expect_failure("eocd64-locator-zero.npz", zip64([](zipb::Archive& a) { a.eocd64_offset = 0; }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 EOCD record size field lying: refused, or read with the right values") {
        // The field only says how long the record is; libzip 1.7.3 ignores it (its ZIP_CHECKCONS test of it reads
        // the archive flags, not the open flags). Reading the right arrays anyway is acceptable.
        const VarsPtr want = expect_ok("eocd64-honest.npz", zip64([](zipb::Archive&) {}));
        VarsPtr got;
        const Run r = run_memory(zip64([](zipb::Archive& a) { a.eocd64_record_size = uint64_t{1} << 62; }), nullptr,
                                 probe::kDefaultCap, &got);
        INFO("rc " << r.rc << ", message \"" << r.message << "\"");
        if (r.rc == CKPT_OK) {
            CHECK(same_values(got.get(), want.get()));
        } else {
            CHECK(r.rc == CKPT_EFORMAT);
            CHECK_THAT(r.message, StartsWith("<memory>"));
        }
    }
    SECTION("EOCD claiming 65535 entries") {
        expect_failure("eocd-65535.npz", plain([](zipb::Archive& a) { a.entries = 0xffff; }), CKPT_EFORMAT, {"zip"});
    }
    SECTION("EOCD claiming no entries over a non-empty central directory") {
        expect_failure("eocd-0.npz", plain([](zipb::Archive& a) { a.entries = 0; }), CKPT_EFORMAT, {"zip"});
    }
    SECTION("EOCD central directory offset off by one") {
        zipb::Layout lay;
        zipb::Archive honest;
        honest.members = two;
        zipb::build(honest, &lay);
        expect_failure("eocd-offset-1.npz", plain([&](zipb::Archive& a) { a.cd_offset = lay.cd_offset - 1; }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("EOCD central directory offset 0xfffffff0") {
        expect_failure("eocd-offset-max.npz", plain([](zipb::Archive& a) { a.cd_offset = 0xfffffff0u; }),
                       CKPT_EFORMAT, {"zip"});
    }
    SECTION("EOCD comment length past the end of the file") {
        expect_failure("eocd-comment.npz", plain([](zipb::Archive& a) { a.comment_length = 1000; }), CKPT_EFORMAT,
                       {"zip"});
    }
    SECTION("central entry offset beyond the file") {
        zipb::Archive a;
        a.members = two;
        a.members[1].central_offset = 0x7ffffff0u;
        expect_failure("central-offset.npz", zipb::build(a), CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 markers (0xffffffff) without the zip64 extra field, local header") {
        zipb::Archive a;
        a.members = two;
        a.members[0].zip64 = true;
        a.members[0].local_zip64_extra = false;
        a.zip64_eocd = true;
        expect_failure("zip64-no-local-extra.npz", zipb::build(a), CKPT_EFORMAT, {"zip"});
    }
    SECTION("zip64 markers (0xffffffff) without the zip64 extra field, central directory") {
        zipb::Archive a;
        a.members = two;
        a.members[1].zip64 = true;
        a.members[1].central_zip64_extra = false;
        a.zip64_eocd = true;
        expect_failure("zip64-no-central-extra.npz", zipb::build(a), CKPT_EFORMAT, {"zip"});
    }
    SECTION("central entry zip64 offset above 2^63") {
        zipb::Archive a;
        a.members = two;
        a.members[1].zip64 = true;
        a.members[1].central_offset = (uint64_t{1} << 63) + 64;
        a.zip64_eocd = true;
        expect_failure("central-offset-2p63.npz", zipb::build(a), CKPT_EFORMAT, {"zip"});
    }
}

// ------------------------------------------------------------------------------------------ head copies

// ckpt's head copy (docs/format.md): the central directory entry of a stored member holds the local extra
// field's length and the npy header, so opening reads only the central directory and the local header is
// checked when the data is read. A copy that lies must fail there, naming the member, whichever way it is read.
TEST_CASE("a head copy in the central directory that lies", "[malformed][zip][head-copy]") {
    const std::string npy = npy_w();
    const size_t header = npy.size() - raw_bytes(kW).size();
    const std::string text = npy.substr(0, header);
    const size_t kept = text.find_last_not_of(" \n") + 1;  // the copy leaves the padding out
    const auto copied = [&](const std::string& copy) {
        zipb::Member w = member("w.npy", npy);
        w.central_extra = copy;
        return archive({w, member("b.npy", npy_b())});
    };
    SECTION("positive controls: the padding left out, or not") {
        check_w(expect_ok("copy-ok.npz", copied(zipb::head_copy(0, static_cast<uint32_t>(header), text.substr(0, kept)))));
        check_w(expect_ok("copy-whole.npz", copied(zipb::head_copy(0, static_cast<uint32_t>(header), text))));
    }
    SECTION("another shape of the same size than the local npy header's") {
        std::string other = text.substr(0, kept);
        const size_t at = other.find("(2, 3)");
        REQUIRE(at != std::string::npos);
        other.replace(at, 6, "(3, 2)");
        expect_failure("copy-shape.npz", copied(zipb::head_copy(0, static_cast<uint32_t>(header), other)), CKPT_EFORMAT,
                       {kW_member, "differ from the central directory's head copy of them"});
    }
    SECTION("a local extra field of another length") {
        // Longer: w's data would overlap b's local header, which opening sees.
        expect_failure("copy-extra.npz", copied(zipb::head_copy(4, static_cast<uint32_t>(header), text.substr(0, kept))),
                       CKPT_EFORMAT, {"members 'w.npy' and 'b.npy' overlap"});
        // Shorter (the local header has a 20-byte zip64 extra field): reading sees it.
        zipb::Member w = member("w.npy", npy);
        w.zip64 = true;
        w.central_extra = zipb::head_copy(16, static_cast<uint32_t>(header), text.substr(0, kept));
        expect_failure("copy-extra-zip64.npz", archive({w}), CKPT_EFORMAT,
                       {kW_member, "its local extra field is 20 bytes, the central directory's head copy says 16"});
    }
    SECTION("data that would run into the central directory") {
        expect_failure("copy-far.npz", copied(zipb::head_copy(0xFFFF, static_cast<uint32_t>(header), text.substr(0, kept))),
                       CKPT_EFORMAT, {kW_member, "runs into the central directory"});
    }
    SECTION("more padding than a header has, more bytes than the head, a head longer than the member") {
        for (const auto& [bad, what] : std::vector<std::pair<std::string, std::string>>{
                 {zipb::head_copy(0, static_cast<uint32_t>(kept + 100), text.substr(0, kept)), "padding"},
                 {zipb::head_copy(0, 4, text.substr(0, kept)), "bytes"},
                 {zipb::head_copy(0, static_cast<uint32_t>(npy.size() + 1), text + std::string(npy.size() + 1 - header, 'x')), "member"}}) {
            INFO(what);
            expect_failure("copy-lengths.npz", copied(bad), CKPT_EFORMAT, {kW_member, "ckpt's head copy holds"});
        }
    }
    SECTION("too short to hold its lengths") {
        std::string bad = zipb::head_copy(0, 0, "");
        bad = bad.substr(0, 2) + std::string("\x03\x00", 2) + bad.substr(4, 3);
        expect_failure("copy-short.npz", copied(bad), CKPT_EFORMAT, {kW_member, "too short"});
    }
    SECTION("on a deflated member") {
        zipb::Member w = member("w.npy", npy, zipb::kDeflated);
        w.central_extra = zipb::head_copy(0, static_cast<uint32_t>(header), text.substr(0, kept));
        expect_failure("copy-deflated.npz", archive({w}), CKPT_EFORMAT, {kW_member, "not stored"});
    }
}
