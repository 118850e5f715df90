// SPDX-License-Identifier: Apache-2.0
// ckpt/cpp/s3.hpp against a real S3 server: storages made of S3Options and of s3:// URLs, s3:// paths with the
// default storage, a manager's retention on a bucket, multipart uploads, and the errors of a missing bucket.
//
// Run under tests/s3/s3_env.py, which starts the server and exports AWS_ENDPOINT_URL, the credentials and
// CKPT_S3_TEST_BUCKET (a bucket that exists); cpp_test.sh builds it against the staged install, linking ckpt-s3.
#include <ckpt/ckpt.hpp>
#include <ckpt/cpp/s3.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0')
        throw std::runtime_error(std::string(name) + " is not set: run this program under tests/s3/s3_env.py");
    return v;
}

std::string bucket() { return env("CKPT_S3_TEST_BUCKET"); }

// A key prefix no other test (of this run or an earlier one on the same server) uses.
std::string unique(const std::string& name) {
    static std::atomic<int> next{0};
    return "cpp-" + std::to_string(getpid()) + "-" + std::to_string(next++) + "-" + name;
}

ckpt::Vars model(float scale) {
    ckpt::Vars vars;
    vars.add<float>("w", {0.5f * scale, -1.0f * scale, 2.0f * scale, 3.25f * scale, -4.0f, 0.001f}, {2, 3});
    vars.add<uint16_t>("emb", {1, 65535, 42});
    vars.add("step", int64_t{1200});
    vars.set_metadata("loss", "0.25");
    return vars;
}

void check_model(const ckpt::Vars& got, float scale) {
    CHECK(got.size() == 3);
    CHECK(got.shape("w") == ckpt::Shape{2, 3});
    CHECK(got.get<float>("w").to_vector() ==
          std::vector<float>{0.5f * scale, -1.0f * scale, 2.0f * scale, 3.25f * scale, -4.0f, 0.001f});
    CHECK(got.get<uint16_t>("emb").to_vector() == std::vector<uint16_t>{1, 65535, 42});
    CHECK(got.scalar<int64_t>("step") == 1200);
    CHECK(got.metadata("loss") == std::optional<std::string_view>("0.25"));
}

// The code and message of the ckpt::Error f throws.
ckpt::Error error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ckpt::Error& e) {
        return e;
    }
    FAIL("no ckpt::Error was thrown");
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("S3Options become the ckpt_s3_options of ckpt_s3.h, field by field", "[s3][options]") {
    ckpt::S3Options o;
    o.bucket = "b";
    o.prefix = "runs";
    o.endpoint_url = "http://127.0.0.1:1";
    o.region = "eu-west-3";
    o.access_key_id = "AK";
    o.secret_access_key = "SK";
    o.session_token = "TOK";
    o.profile = "p";
    o.part_size = 8u << 20;
    o.parallelism = 3;
    o.max_attempts = 2;
    o.connect_timeout = std::chrono::seconds(3);
    o.stall_timeout = std::chrono::milliseconds(1500);
    o.retry_window = std::chrono::seconds(12);
    o.addressing = ckpt::S3Addressing::virtual_host;
    const ckpt::detail::CS3Options c(o);
    const ckpt_s3_options& s = *c.get();
    CHECK(s.version == CKPT_S3_OPTIONS_VERSION);
    CHECK(std::string(s.bucket) == "b");
    CHECK(std::string(s.prefix) == "runs");
    CHECK(std::string(s.endpoint_url) == "http://127.0.0.1:1");
    CHECK(std::string(s.region) == "eu-west-3");
    CHECK(std::string(s.access_key_id) == "AK");
    CHECK(std::string(s.secret_access_key) == "SK");
    CHECK(std::string(s.session_token) == "TOK");
    CHECK(std::string(s.profile) == "p");
    CHECK(s.part_size == 8u << 20);
    CHECK(s.parallelism == 3);
    CHECK(s.max_attempts == 2);
    CHECK(s.connect_timeout_ms == 3000);
    CHECK(s.stall_timeout_ms == 1500);
    CHECK(s.retry_window_ms == 12000);
    CHECK(s.addressing == CKPT_S3_ADDRESSING_VIRTUAL);

    SECTION("what is unset is NULL or 0, for libckpt_s3 to resolve") {
        const ckpt::S3Options unset;
        const ckpt::detail::CS3Options d(unset);
        const ckpt_s3_options& u = *d.get();
        CHECK(u.endpoint_url == nullptr);
        CHECK(u.region == nullptr);
        CHECK(u.access_key_id == nullptr);
        CHECK(u.secret_access_key == nullptr);
        CHECK(u.session_token == nullptr);
        CHECK(u.profile == nullptr);
        CHECK(u.part_size == 0);
        CHECK(u.parallelism == 0);
        CHECK(u.max_attempts == 0);
        CHECK(u.connect_timeout_ms == 0);
        CHECK(u.stall_timeout_ms == 0);
        CHECK(u.retry_window_ms == 0);
        CHECK(u.addressing == CKPT_S3_ADDRESSING_AUTO);
    }
    SECTION("a zero, a negative or too long a duration is refused, naming the field") {
        ckpt::S3Options z;
        z.bucket = "bkt";
        z.parallelism = 0;
        ckpt::Error e = error_of([&] { ckpt::s3_storage(z); });
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) ==
              "ckpt::S3Options::parallelism is 0: give a positive value, or leave it unset for the default");
        z.parallelism.reset();
        z.stall_timeout = std::chrono::milliseconds(-5);
        e = error_of([&] { ckpt::s3_storage(z); });
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()).find("ckpt::S3Options::stall_timeout is -5 ms") == 0);
        z.stall_timeout = std::chrono::hours(24 * 50);
        CHECK(error_of([&] { ckpt::s3_storage(z); }).code() == CKPT_EINVAL);
    }
    SECTION("libckpt_s3's own checks come back as ckpt::Error") {
        ckpt::S3Options small;
        small.bucket = "bkt";
        small.part_size = 1u << 20;
        const ckpt::Error e = error_of([&] { ckpt::s3_storage(small); });
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()).find("part_size 1048576 is below S3's 5 MiB minimum part") != std::string::npos);
        CHECK(error_of([] { ckpt::s3_storage(ckpt::S3Options{}); }).code() == CKPT_EINVAL);  // no bucket
    }
}

TEST_CASE("A storage made of S3Options saves and restores under its prefix", "[s3]") {
    const std::string prefix = unique("options");
    ckpt::S3Options o;
    o.bucket = bucket();
    o.prefix = prefix;
    // Given in code rather than taken from the environment (which names the same server).
    o.endpoint_url = env("AWS_ENDPOINT_URL");
    o.access_key_id = env("AWS_ACCESS_KEY_ID");
    o.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    ckpt::Options n;
    n.storage = ckpt::s3_storage(o);

    ckpt::save("model.npz", model(1), n);
    check_model(ckpt::read("model.npz", n), 1);
    ckpt::Vars into = model(0);
    ckpt::restore("model.npz", into, n);
    check_model(into, 1);
    ckpt::Reader npz("model.npz", n);
    CHECK(npz.read<float>("w")[3] == 3.25f);

    // The object is at <prefix>/model.npz of the bucket: the default storage finds it by its URL.
    check_model(ckpt::read("s3://" + bucket() + "/" + prefix + "/model.npz"), 1);

    SECTION("a file that is not there is CKPT_ENOTFOUND naming its key") {
        const ckpt::Error e = error_of([&] { ckpt::read("absent.npz", n); });
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.what()).find(prefix + "/absent.npz") != std::string::npos);
    }
}

TEST_CASE("s3:// paths work with the default storage, and s3_storage_url splits a URL", "[s3][url]") {
    const std::string key = unique("url") + "/x.npz";
    const std::string url = "s3://" + bucket() + "/" + key;
    ckpt::save(url, model(2));
    check_model(ckpt::read(url), 2);
    ckpt::Vars into = model(0);
    ckpt::restore(url, into);
    check_model(into, 2);

    const auto [storage, path] = ckpt::s3_storage_url(url);
    CHECK(path == key);
    ckpt::Options n;
    n.storage = storage;
    check_model(ckpt::read(path, n), 2);

    CHECK(ckpt::s3_storage_url("s3://" + bucket()).key == "");
    CHECK(ckpt::s3_storage_url("s3://" + bucket() + "/").key == "");

    SECTION("options other than the bucket and prefix configure it") {
        ckpt::S3Options o;
        o.endpoint_url = env("AWS_ENDPOINT_URL");
        o.max_attempts = 1;
        const ckpt::S3Location at = ckpt::s3_storage_url(url, o);
        CHECK(at.key == key);
        n.storage = at.storage;
        check_model(ckpt::read(at.key, n), 2);
    }
    SECTION("a bucket or prefix in the options would be overridden by the URL: refused") {
        ckpt::S3Options o;
        o.prefix = "elsewhere";
        const ckpt::Error e = error_of([&] { ckpt::s3_storage_url(url, o); });
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()).find("leave S3Options::bucket and prefix empty") != std::string::npos);
    }
    SECTION("what is not an s3:// URL is CKPT_EINVAL naming it") {
        for (const char* bad : {"s3://", "s3:///key", "http://host/bucket/key", "bucket/key"}) {
            const ckpt::Error e = error_of([&] { ckpt::s3_storage_url(bad); });
            CHECK(e.code() == CKPT_EINVAL);
            CHECK(std::string(e.what()).find(bad) != std::string::npos);
        }
    }
}

TEST_CASE("A manager over s3:// keeps the newest checkpoints and resumes from the latest", "[s3][manager]") {
    const std::string logdir = "s3://" + bucket() + "/" + unique("manager");
    ckpt::ManagerOptions options;
    options.keep = 2;
    std::vector<float> w(4, 0.0f);
    int64_t step = 0;
    {
        ckpt::Manager manager(logdir, options);
        ckpt::Vars vars;
        vars.borrow("w", w, {2, 2});
        vars.borrow("step", step);
        CHECK_FALSE(manager.resume(vars).has_value());  // an empty prefix: nothing saved yet
        for (step = 1; step <= 4; ++step) {
            for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(step) + 0.25f * static_cast<float>(k);
            manager.save(vars, step);
        }
        CHECK(manager.list() == std::vector<int64_t>{3, 4});
        CHECK(ckpt::checkpoint_idx(manager.path(4)) == std::optional<int64_t>(4));
        manager.close();
    }
    // What retention removed is gone from the bucket, what it kept is there, for a reader that is not the manager.
    CHECK(error_of([&] { ckpt::read(logdir + "/ckpt/0000000002.npz"); }).code() == CKPT_ENOTFOUND);
    CHECK(ckpt::read(logdir + "/ckpt/0000000003.npz").scalar<int64_t>("step") == 3);

    // A new manager (a restarted job) lists the bucket and resumes from the newest.
    ckpt::Manager again(logdir, options);
    CHECK(again.list() == std::vector<int64_t>{3, 4});
    ckpt::Vars vars;
    vars.add_zeros<float>("w", {2, 2});
    vars.add("step", int64_t{0});
    CHECK(again.resume(vars) == std::optional<int64_t>(4));
    CHECK(vars.get<float>("w").to_vector() == std::vector<float>{4.0f, 4.25f, 4.5f, 4.75f});
    CHECK(vars.scalar<int64_t>("step") == 4);
}

TEST_CASE("An array larger than part_size goes up in parts and comes back bit for bit", "[s3][multipart]") {
    ckpt::S3Options o;
    o.bucket = bucket();
    o.prefix = unique("multipart");
    o.part_size = 5u << 20;  // S3's minimum part
    o.parallelism = 3;
    ckpt::Options n;
    n.storage = ckpt::s3_storage(o);

    // 12 MiB and a bit: three parts, the last one short, and reads split into ranges of 5 MiB.
    std::vector<uint32_t> big((12u << 20) / 4 + 1001);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint32_t>(i * 2654435761u);
    ckpt::Vars vars;
    vars.borrow("big", big);
    vars.add<float>("small", {1.5f, -2.5f});
    ckpt::save("big.npz", vars, n);

    const ckpt::Vars back = ckpt::read("big.npz", n);
    REQUIRE(back.shape("big") == ckpt::Shape{static_cast<int64_t>(big.size())});
    CHECK(back.get<uint32_t>("big").to_vector() == big);
    CHECK(back.get<float>("small").to_vector() == std::vector<float>{1.5f, -2.5f});
    ckpt::Reader npz("big.npz", n);
    CHECK(npz.read<uint32_t>("big") == big);
}

TEST_CASE("A bucket that does not exist is CKPT_ENOTFOUND naming it", "[s3][errors]") {
    const std::string missing = "ckpt-missing-" + std::to_string(getpid());

    SECTION("through S3Options") {
        ckpt::S3Options o;
        o.bucket = missing;
        o.max_attempts = 1;
        ckpt::Options n;
        n.storage = ckpt::s3_storage(o);  // nothing is sent yet
        ckpt::Error e = error_of([&] { ckpt::save("x.npz", model(1), n); });
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.what()).find(missing) != std::string::npos);
        e = error_of([&] { ckpt::read("x.npz", n); });
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.what()).find(missing) != std::string::npos);
    }
    SECTION("through an s3:// path") {
        const std::string url = "s3://" + missing + "/x.npz";
        const ckpt::Error e = error_of([&] { ckpt::read(url); });
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.what()).find(missing) != std::string::npos);
        CHECK(error_of([&] { ckpt::save(url, model(1)); }).code() == CKPT_ENOTFOUND);
    }
    SECTION("through a manager") {
        const ckpt::Error e = error_of([&] {
            ckpt::Manager manager("s3://" + missing + "/run", ckpt::ManagerOptions{});
            manager.save(model(1), 1);
        });
        CHECK(e.code() == CKPT_ENOTFOUND);
        CHECK(std::string(e.what()).find(missing) != std::string::npos);
    }
}

TEST_CASE("Options given in code win over the environment", "[s3][options]") {
    // The environment names the test server; an endpoint where nothing listens must be the one used, and a
    // single attempt made.
    ckpt::S3Options o;
    o.bucket = bucket();
    o.endpoint_url = "http://127.0.0.1:9";
    o.max_attempts = 1;
    o.connect_timeout = std::chrono::seconds(2);
    ckpt::Options n;
    n.storage = ckpt::s3_storage(o);
    const ckpt::Error e = error_of([&] { ckpt::save(unique("endpoint") + ".npz", model(1), n); });
    CHECK(e.code() == CKPT_EIO);
    CHECK(std::string(e.what()).find("Couldn't connect to server (gave up after 1 attempt in ") != std::string::npos);
}
