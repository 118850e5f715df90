// SPDX-License-Identifier: Apache-2.0
// libckpt_s3 against a real S3 server (s3rver, tests/s3/server.js) behind the fault proxy (tests/s3/fault_proxy.py),
// which also checks every request's SigV4 signature as S3 does: run under `s3_env.py --verify-sigv4`. Through the
// public C API only: saves and reads, s3:// paths, multipart uploads, the manager; faults at every kind of request,
// a server killed mid-save. Each test case works under a key prefix of its own.
#include "ckpt/ckpt.h"
#include "ckpt/ckpt_s3.h"

#include <catch2/catch.hpp>
#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') FAIL(std::string(name) + " is not set: run this test under tests/s3/s3_env.py --verify-sigv4");
    return v;
}

const std::string& bucket() {
    static const std::string b = env("CKPT_S3_TEST_BUCKET");
    return b;
}

// A key prefix no other test case uses.
std::string fresh_prefix(const char* what) {
    static std::atomic<int> n{0};
    static const std::string run = std::to_string(std::random_device{}() % 1000000);
    return std::string("t") + run + "-" + std::to_string(++n) + "-" + what;
}

size_t collect(char* data, size_t size, size_t count, void* out) {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
}

// An HTTP request from the test itself (to the proxy's and the runner's control endpoints, or to S3 signed with
// the test's credentials). Returns the status; the body goes to *body.
long http(const std::string& method, const std::string& url, const std::string& payload = "", std::string* body = nullptr,
          bool sign = false, std::vector<std::string> headers = {}) {
    CURL* h = curl_easy_init();
    REQUIRE(h != nullptr);
    std::string ignored;
    curl_slist* list = nullptr;
    // No "Expect:" to suppress 100-continue: libcurl before 8.3 signs that header and does not send it, which a
    // strict server (RGW, AWS, the proxy) refuses.
    if (sign) headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
    for (const std::string& line : headers) list = curl_slist_append(list, line.c_str());
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body != nullptr ? body : &ignored);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    if (!payload.empty() || method == "POST" || method == "PUT") {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload.data());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    }
    const std::string signing = "aws:amz:" + env("AWS_REGION") + ":s3";
    const std::string credentials = env("AWS_ACCESS_KEY_ID") + ":" + env("AWS_SECRET_ACCESS_KEY");
    if (sign) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, signing.c_str());
        curl_easy_setopt(h, CURLOPT_USERPWD, credentials.c_str());
    }
    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    INFO(method << " " << url << ": " << curl_easy_strerror(rc));
    REQUIRE(rc == CURLE_OK);
    return status;
}

std::string proxy() { return env("CKPT_S3_PROXY"); }

void add_fault(const json& rule) {
    std::string body;
    const long status = http("POST", proxy() + "/__ckpt_proxy/faults", rule.dump(), &body);
    INFO(body);
    REQUIRE(status == 200);
}

void clear_faults() {
    REQUIRE(http("POST", proxy() + "/__ckpt_proxy/clear") == 200);
    REQUIRE(http("POST", proxy() + "/__ckpt_proxy/log/clear") == 200);
}

json proxy_log() {
    std::string body;
    REQUIRE(http("GET", proxy() + "/__ckpt_proxy/log", "", &body) == 200);
    return json::parse(body);
}

// Requests of `kind` in the log (those whose path has `key_part`, when given), and how many of them a fault met.
struct Seen {
    int requests = 0;
    int faulted = 0;
};
Seen seen(const json& log, const std::string& kind, const std::string& key_part = "") {
    Seen s;
    for (const json& e : log) {
        if (e.value("kind", "") != kind) continue;
        if (!key_part.empty() && e.value("path", "").find(key_part) == std::string::npos) continue;
        ++s.requests;
        if (!e["fault"].is_null()) ++s.faulted;
    }
    return s;
}

// Multipart uploads the server still holds under `prefix`.
int uploads_in_progress(const std::string& prefix) {
    std::string body;
    REQUIRE(http("GET", env("AWS_ENDPOINT_URL") + "/" + bucket() + "?prefix=" + prefix + "&uploads=", "", &body, true) ==
            200);
    int n = 0;
    for (size_t at = 0; (at = body.find("<UploadId>", at)) != std::string::npos; ++at) ++n;
    return n;
}

// The S3 storage the tests use: 5 MiB parts (S3's smallest) so that multipart uploads happen at test sizes, four
// attempts per request, and a stall noticed after a second; `parallelism` 0 is the default.
struct Storage {
    ckpt_storage* s = nullptr;
    explicit Storage(uint32_t max_attempts = 4, const char* secret = nullptr, uint32_t parallelism = 0) {
        ckpt_s3_options o = CKPT_S3_OPTIONS_INIT;
        o.bucket = bucket().c_str();
        o.part_size = 5u << 20;
        o.parallelism = parallelism;
        o.max_attempts = max_attempts;
        o.stall_timeout_ms = 1000;
        o.secret_access_key = secret;
        const std::string key_id = env("AWS_ACCESS_KEY_ID");
        if (secret != nullptr) o.access_key_id = key_id.c_str();
        const int rc = ckpt_storage_s3_new(&s, &o);
        INFO(ckpt_error_message());
        REQUIRE(rc == CKPT_OK);
    }
    ~Storage() { ckpt_storage_free(s); }
    ckpt_options npz() const {
        ckpt_options o = CKPT_OPTIONS_INIT;
        o.storage = s;
        return o;
    }
};

struct Vars {
    ckpt_vars* v = nullptr;
    Vars() { REQUIRE(ckpt_vars_new(&v) == CKPT_OK); }
    ~Vars() { ckpt_vars_free(v); }
};

// A float64 array of n values that depend on `seed`.
std::vector<double> values(size_t n, double seed) {
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = seed + static_cast<double>(i) * 0.5;
    return x;
}

void add(Vars& vars, const char* name, const std::vector<double>& x) {
    const int64_t shape[1] = {static_cast<int64_t>(x.size())};
    REQUIRE(ckpt_vars_add(vars.v, name, CKPT_FLOAT64, 1, shape, x.data(), CKPT_COPY) == CKPT_OK);
}

// What a file holds under `name`, read through ckpt (every CRC checked).
std::vector<double> read(const std::string& path, const char* name, const ckpt_options* opts) {
    ckpt_vars* got = nullptr;
    const int rc = ckpt_read(&got, path.c_str(), opts);
    INFO(path << ": " << ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    size_t i = 0;
    REQUIRE(ckpt_vars_find(got, name, &i) == CKPT_OK);
    const size_t n = static_cast<size_t>(ckpt_vars_shape(got, i)[0]);
    std::vector<double> x(n);
    std::memcpy(x.data(), ckpt_vars_data(got, i), n * sizeof(double));
    ckpt_vars_free(got);
    return x;
}

int save(const std::string& path, const std::vector<double>& x, const ckpt_options* opts) {
    Vars vars;
    add(vars, "w", x);
    return ckpt_save(path.c_str(), vars.v, opts);
}

constexpr size_t kLarge = 1600000;  // 12.8 MB of float64: three 5 MiB parts

}  // namespace

TEST_CASE("files small and multipart round trip through a storage and through s3:// paths") {
    clear_faults();
    Storage s3;
    const ckpt_options opts = s3.npz();
    const std::string prefix = fresh_prefix("roundtrip");

    const std::vector<double> small = values(1000, 1), large = values(kLarge, 2);
    REQUIRE(save(prefix + "/small.npz", small, &opts) == CKPT_OK);
    REQUIRE(save(prefix + "/large.npz", large, &opts) == CKPT_OK);
    CHECK(read(prefix + "/small.npz", "w", &opts) == small);
    CHECK(read(prefix + "/large.npz", "w", &opts) == large);
    // The same objects by URL, with no storage given: libckpt loads libckpt_s3 itself.
    const std::string url = "s3://" + bucket() + "/" + prefix;
    CHECK(read(url + "/large.npz", "w", nullptr) == large);
    REQUIRE(save(url + "/by-url.npz", small, nullptr) == CKPT_OK);
    CHECK(read(prefix + "/by-url.npz", "w", &opts) == small);

    const json log = proxy_log();
    // The small files went up in one PUT each; the large one as a multipart upload of three parts.
    CHECK(seen(log, "put", "small.npz").requests == 1);
    CHECK(seen(log, "put", "large.npz").requests == 0);
    CHECK(seen(log, "initiate", "large.npz").requests == 1);
    CHECK(seen(log, "upload_part", "large.npz").requests == 3);
    CHECK(seen(log, "complete", "large.npz").requests == 1);
    // Nothing but the final objects: no temporary was ever an object, no upload is left open.
    for (const json& e : log) CHECK(e.value("path", "").find(".tmp-") == std::string::npos);
    CHECK(uploads_in_progress(prefix) == 0);
    // Every request passed the proxy's signature check (a failed one is answered 403 and fails the call).
    for (const json& e : log) CHECK(e.value("status", 0) < 400);
}

TEST_CASE("transient failures at every kind of request are retried and the data arrives intact") {
    clear_faults();
    Storage s3;
    const ckpt_options opts = s3.npz();
    const std::string prefix = fresh_prefix("transient");
    const std::vector<double> small = values(1000, 3), large = values(kLarge, 4);
    REQUIRE(save(prefix + "/small.npz", small, &opts) == CKPT_OK);
    REQUIRE(save(prefix + "/large.npz", large, &opts) == CKPT_OK);

    struct Case {
        const char* kind;
        json fault;
        const char* file;
        bool write;
    };
    const std::vector<Case> cases = {
        {"put", {{"action", "status"}, {"status", 503}, {"s3_code", "SlowDown"}}, "small.npz", true},
        {"put", {{"action", "reset"}, {"at", "body"}, {"bytes", 100}}, "small.npz", true},
        {"initiate", {{"action", "status"}, {"status", 500}, {"s3_code", "InternalError"}}, "large.npz", true},
        {"upload_part", {{"action", "status"}, {"status", 429}, {"s3_code", "SlowDown"}}, "large.npz", true},
        {"upload_part", {{"action", "reset"}, {"at", "body"}, {"bytes", 65536}}, "large.npz", true},
        {"upload_part", {{"action", "reset"}, {"at", "response"}}, "large.npz", true},
        {"upload_part", {{"action", "stall"}, {"ms", 5000}}, "large.npz", true},
        {"complete", {{"action", "status"}, {"status", 503}, {"s3_code", "SlowDown"}}, "large.npz", true},
        {"head", {{"action", "status"}, {"status", 503}, {"s3_code", "SlowDown"}}, "large.npz", false},
        {"get", {{"action", "status"}, {"status", 500}, {"s3_code", "InternalError"}}, "large.npz", false},
        {"get", {{"action", "reset"}, {"at", "request"}}, "large.npz", false},
        {"get", {{"action", "truncate"}, {"bytes", 1000}}, "large.npz", false},
        {"get", {{"action", "stall"}, {"ms", 5000}}, "large.npz", false},
    };
    for (const Case& c : cases) {
        SECTION(std::string(c.kind) + " " + c.fault.dump()) {
            clear_faults();
            json rule = c.fault;
            rule["kind"] = c.kind;
            rule["times"] = 2;
            add_fault(rule);
            const std::string path = prefix + "/" + c.file;
            const std::vector<double>& want = std::string(c.file) == "small.npz" ? small : large;
            if (c.write) {
                const int rc = save(path, want, &opts);
                INFO(ckpt_error_message());
                REQUIRE(rc == CKPT_OK);
            }
            CHECK(read(path, "w", &opts) == want);
            const Seen s = seen(proxy_log(), c.kind, c.file);
            CHECK(s.faulted == 2);
            CHECK(s.requests > s.faulted);  // and then it went through
            CHECK(uploads_in_progress(prefix) == 0);
        }
    }
}

TEST_CASE("listings and removals are retried too") {
    clear_faults();
    Storage s3;
    ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
    mo.keep = 1;
    mo.storage = s3.s;
    const std::string dir = fresh_prefix("retention");
    ckpt_manager* m = nullptr;
    REQUIRE(ckpt_manager_open(&m, dir.c_str(), &mo) == CKPT_OK);
    Vars vars;
    add(vars, "w", values(10, 0));
    REQUIRE(ckpt_manager_save(m, vars.v, 1) == CKPT_OK);
    clear_faults();
    add_fault({{"kind", "list"}, {"action", "status"}, {"status", 503}, {"s3_code", "SlowDown"}, {"times", 2}});
    add_fault({{"kind", "delete"}, {"action", "reset"}, {"at", "request"}, {"times", 1}});
    REQUIRE(ckpt_manager_save(m, vars.v, 2) == CKPT_OK);
    const json log = proxy_log();
    CHECK(seen(log, "list").faulted >= 1);
    CHECK(seen(log, "delete").faulted == 1);
    int64_t idx[4];
    size_t count = 0;
    REQUIRE(ckpt_manager_list(m, idx, 4, &count) == CKPT_OK);
    CHECK(count == 1);
    CHECK(idx[0] == 2);
    ckpt_manager_close(m);
}

TEST_CASE("a permanent failure fails the save at once, aborts its upload and leaves the old object") {
    clear_faults();
    Storage s3;
    const ckpt_options opts = s3.npz();
    const std::string prefix = fresh_prefix("permanent");
    const std::vector<double> old_small = values(1000, 5), old_large = values(kLarge, 6);
    REQUIRE(save(prefix + "/small.npz", old_small, &opts) == CKPT_OK);
    REQUIRE(save(prefix + "/large.npz", old_large, &opts) == CKPT_OK);

    for (const char* kind : {"put", "initiate", "upload_part", "complete"}) {
        SECTION(kind) {
            clear_faults();
            add_fault({{"kind", kind}, {"action", "status"}, {"status", 403}, {"s3_code", "AccessDenied"},
                       {"message", "Access Denied"}, {"times", -1}});
            const bool small = std::string(kind) == "put";
            const std::string key = prefix + (small ? "/small.npz" : "/large.npz");
            const int rc = save(key, values(small ? 1000 : kLarge, 99), &opts);
            CHECK(rc == CKPT_EIO);
            const std::string message = ckpt_error_message();
            INFO(message);
            CHECK(message.find("s3://" + bucket() + "/" + key) != std::string::npos);
            CHECK(message.find("HTTP 403 AccessDenied: Access Denied") != std::string::npos);
            CHECK(message.find("gave up") == std::string::npos);  // not retried
            const json log = proxy_log();
            // Refused once, never retried (parts in flight together may each be refused once).
            CHECK(seen(log, kind).faulted >= 1);
            CHECK(seen(log, kind).faulted <= 4);
            CHECK(seen(log, kind).requests == seen(log, kind).faulted);
            if (std::string(kind) == "upload_part" || std::string(kind) == "complete") {
                CHECK(seen(log, "abort").requests == 1);
            }
            clear_faults();
            CHECK(uploads_in_progress(prefix) == 0);
            CHECK(read(key, "w", &opts) == (small ? old_small : old_large));
        }
    }
}

TEST_CASE("retries give up after max_attempts, naming the failure and the attempts") {
    clear_faults();
    Storage s3(3);
    const ckpt_options opts = s3.npz();
    const std::string prefix = fresh_prefix("giveup");
    const std::vector<double> old_large = values(kLarge, 7);
    REQUIRE(save(prefix + "/large.npz", old_large, &opts) == CKPT_OK);
    clear_faults();
    add_fault({{"kind", "upload_part"}, {"action", "status"}, {"status", 503}, {"s3_code", "SlowDown"},
               {"message", "Please reduce your request rate."}, {"skip", 1}, {"times", -1}});
    CHECK(save(prefix + "/large.npz", values(kLarge, 8), &opts) == CKPT_EIO);
    const std::string message = ckpt_error_message();
    INFO(message);
    CHECK(message.find("HTTP 503 SlowDown: Please reduce your request rate. (gave up after 3 attempts in ") !=
          std::string::npos);
    CHECK(message.find("upload part") != std::string::npos);
    clear_faults();
    CHECK(uploads_in_progress(prefix) == 0);
    CHECK(read(prefix + "/large.npz", "w", &opts) == old_large);
}

TEST_CASE("wrong credentials fail at once with S3's code") {
    clear_faults();
    Storage wrong(4, "not-the-secret");
    const ckpt_options opts = wrong.npz();
    const std::string key = fresh_prefix("credentials") + "/x.npz";
    CHECK(save(key, values(10, 0), &opts) == CKPT_EIO);
    const std::string message = ckpt_error_message();
    INFO(message);
    CHECK(message.find("HTTP 403 SignatureDoesNotMatch") != std::string::npos);
    CHECK(seen(proxy_log(), "put").requests == 1);
}

TEST_CASE("a missing object or bucket is CKPT_ENOTFOUND naming it") {
    clear_faults();
    Storage s3;
    const ckpt_options opts = s3.npz();
    ckpt_vars* got = nullptr;
    const std::string key = fresh_prefix("missing") + "/nothing.npz";
    CHECK(ckpt_read(&got, key.c_str(), &opts) == CKPT_ENOTFOUND);
    CHECK(std::string(ckpt_error_message()).find("s3://" + bucket() + "/" + key) != std::string::npos);
    CHECK(std::string(ckpt_error_message()).find("HTTP 404 NoSuchKey") != std::string::npos);
    CHECK(ckpt_read(&got, "s3://no-such-bucket-here/x.npz", nullptr) == CKPT_ENOTFOUND);
    CHECK(std::string(ckpt_error_message()).find("s3://no-such-bucket-here/x.npz") != std::string::npos);
    CHECK(std::string(ckpt_error_message()).find("HTTP 404 NoSuchBucket") != std::string::npos);
    // The bucket itself is no object.
    CHECK(ckpt_read(&got, ("s3://" + bucket()).c_str(), nullptr) == CKPT_EINVAL);
    CHECK(std::string(ckpt_error_message()).find("is the bucket itself, not an object") != std::string::npos);
    CHECK(save("s3://no-such-bucket-here/x.npz", values(10, 0), nullptr) == CKPT_ENOTFOUND);
    CHECK(std::string(ckpt_error_message()).find("NoSuchBucket") != std::string::npos);
}

TEST_CASE("an object replaced while it is read fails the read instead of mixing versions") {
    clear_faults();
    Storage s3;
    const ckpt_options opts = s3.npz();
    const std::string key = fresh_prefix("replaced") + "/x.npz";
    REQUIRE(save(key, values(kLarge, 9), &opts) == CKPT_OK);
    ckpt_reader* npz = nullptr;
    REQUIRE(ckpt_reader_open(&npz, key.c_str(), &opts) == CKPT_OK);
    REQUIRE(save(key, values(kLarge, 10), &opts) == CKPT_OK);
    std::vector<double> x(kLarge);
    CHECK(ckpt_reader_read_into(npz, 0, x.data(), x.size() * sizeof(double)) == CKPT_EIO);
    const std::string message = ckpt_error_message();
    INFO(message);
    CHECK(message.find("HTTP 412") != std::string::npos);
    CHECK(message.find("changed while it was read") != std::string::npos);
    ckpt_reader_close(npz);
    CHECK(read(key, "w", &opts) == values(kLarge, 10));
}

TEST_CASE(
    "a file read in order has its next window fetched while it is read; a read ahead that fails is fetched again") {
    clear_faults();
    // One request at a time and two tries each: every GET below is counted, and two faults fail a read ahead.
    Storage s3(2, nullptr, 1);
    const ckpt_options opts = s3.npz();
    const std::string key = fresh_prefix("ahead") + "/x.npz";
    constexpr size_t kArrays = 48, kValues = 65536;  // 24 MiB in arrays of 512 KiB: five windows and a bit
    {
        Vars vars;
        for (size_t a = 0; a < kArrays; ++a) add(vars, ("a" + std::to_string(a)).c_str(), values(kValues, a));
        REQUIRE(ckpt_save(key.c_str(), vars.v, &opts) == CKPT_OK);
    }
    const auto gets = [&] { return seen(proxy_log(), "get", "x.npz").requests; };
    clear_faults();
    ckpt_reader* reader = nullptr;
    REQUIRE(ckpt_reader_open(&reader, key.c_str(), &opts) == CKPT_OK);
    // Opening: the window at the start (opening checks the file's first bytes) and the 2 MiB at the end. The first
    // arrays: that window, then the next one, read on from the first; then the one after that comes without a read
    // asking for it.
    std::vector<double> x(kValues);
    const auto read_array = [&](size_t a) {
        INFO("array " << a << ": " << ckpt_error_message());
        REQUIRE(ckpt_reader_read_into(reader, a, x.data(), x.size() * sizeof(double)) == CKPT_OK);
        CHECK(x == values(kValues, a));
    };
    CHECK(gets() == 2);
    for (size_t a = 0; a < 12; ++a) read_array(a);  // 6 MiB: into the second window
    CHECK(gets() >= 3);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (gets() < 4 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(gets() == 4);
    // The next read ahead fails twice (both its tries): the reader fetches that window itself, and reads on.
    add_fault({{"kind", "get"}, {"action", "status"}, {"status", 500}, {"s3_code", "InternalError"}, {"times", 2}});
    for (size_t a = 12; a < kArrays; ++a) read_array(a);
    ckpt_reader_close(reader);
    const json log = proxy_log();
    CHECK(seen(log, "get", "x.npz").faulted == 2);
    // The end window, five windows from the start (the last one ending with the file) each fetched once, and the
    // two tries of the read ahead that failed.
    CHECK(seen(log, "get", "x.npz").requests == 1 + 5 + 2);
}

TEST_CASE("a manager on s3:// keeps, lists, restores and falls back past a corrupt newest checkpoint") {
    clear_faults();
    const std::string logdir = "s3://" + bucket() + "/" + fresh_prefix("manager");
    ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
    mo.keep = 2;
    ckpt_manager* m = nullptr;
    {
        const int rc = ckpt_manager_open(&m, logdir.c_str(), &mo);
        INFO(ckpt_error_message());
        REQUIRE(rc == CKPT_OK);
    }
    for (int64_t step = 1; step <= 4; ++step) {
        Vars vars;
        add(vars, "w", values(5000, static_cast<double>(step)));
        REQUIRE(ckpt_manager_save(m, vars.v, step) == CKPT_OK);
    }
    int64_t idx[8];
    size_t count = 0;
    REQUIRE(ckpt_manager_list(m, idx, 8, &count) == CKPT_OK);
    REQUIRE(count == 2);
    CHECK(idx[0] == 3);
    CHECK(idx[1] == 4);
    // Retention deleted the objects themselves.
    std::string listing;
    // (a signed query is canonical: sorted, '/' encoded)
    const std::string prefix = logdir.substr(5 + bucket().size() + 1) + "%2Fckpt%2F";
    REQUIRE(http("GET", env("AWS_ENDPOINT_URL") + "/" + bucket() + "?list-type=2&prefix=" + prefix, "", &listing, true) ==
            200);
    CHECK(listing.find("0000000001.npz") == std::string::npos);
    CHECK(listing.find("0000000002.npz") == std::string::npos);
    CHECK(listing.find("0000000004.npz") != std::string::npos);

    Vars restored;
    add(restored, "w", values(5000, 0));
    int64_t got = -1;
    REQUIRE(ckpt_manager_restore(m, restored.v, CKPT_LATEST, &got) == CKPT_OK);
    CHECK(got == 4);

    // The newest object corrupted behind the manager's back: the restore moves to the one before.
    char path[512];
    REQUIRE(ckpt_manager_path(m, 4, path, sizeof path) == CKPT_OK);
    REQUIRE(std::string(path) == logdir + "/ckpt/0000000004.npz");  // a URL, as the logdir was
    const std::string key = std::string(path).substr(5 + bucket().size() + 1);
    REQUIRE(http("PUT", env("AWS_ENDPOINT_URL") + "/" + bucket() + "/" + key, "not an npz at all", nullptr, true) == 200);
    REQUIRE(ckpt_manager_restore(m, restored.v, CKPT_LATEST, &got) == CKPT_OK);
    CHECK(got == 3);
    CHECK(std::memcmp(ckpt_vars_data(restored.v, 0), values(5000, 3).data(), 5000 * sizeof(double)) == 0);
    REQUIRE(ckpt_manager_close(m) == CKPT_OK);
}

TEST_CASE("the server killed mid-save: the save fails and the previous checkpoint restores") {
    clear_faults();
    Storage s3(2);
    const ckpt_options opts = s3.npz();
    const std::string key = fresh_prefix("killed") + "/x.npz";
    const std::vector<double> old_large = values(kLarge, 11);
    REQUIRE(save(key, old_large, &opts) == CKPT_OK);
    // The second part waits long enough for the server to die under it.
    add_fault({{"kind", "upload_part"}, {"action", "stall"}, {"ms", 800}, {"skip", 1}, {"times", 1}});
    // Only the library runs on the other thread (Catch's assertions are for the test's own thread).
    Vars vars;
    add(vars, "w", values(kLarge, 12));
    int rc = CKPT_OK;
    std::thread saving([&] { rc = ckpt_save(key.c_str(), vars.v, &opts); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string control = env("CKPT_S3_SERVER_CONTROL");
    REQUIRE(http("POST", control + "/kill") == 200);
    saving.join();
    CHECK(rc == CKPT_EIO);
    REQUIRE(http("POST", control + "/start") == 200);
    clear_faults();
    CHECK(read(key, "w", &opts) == old_large);
}

TEST_CASE("a session token goes with every request, signed") {
    clear_faults();
    ckpt_s3_options o = CKPT_S3_OPTIONS_INIT;
    o.bucket = bucket().c_str();
    const std::string key_id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
    o.access_key_id = key_id.c_str();
    o.secret_access_key = secret.c_str();
    o.session_token = "FwoGZXIvYXdzEJr//////////wEaDOp+token=";
    ckpt_storage* s = nullptr;
    REQUIRE(ckpt_storage_s3_new(&s, &o) == CKPT_OK);
    ckpt_options opts = CKPT_OPTIONS_INIT;
    opts.storage = s;
    const std::string key = fresh_prefix("token") + "/x.npz";
    const int rc = save(key, values(100, 1), &opts);
    INFO(ckpt_error_message());
    CHECK(rc == CKPT_OK);  // the proxy refuses an x-amz-* header left out of the signature
    CHECK(read(key, "w", &opts) == values(100, 1));
    ckpt_storage_free(s);
}
