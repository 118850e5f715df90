// SPDX-License-Identifier: Apache-2.0
// The S3 storage's configuration: ckpt_s3_options completed from the environment and the AWS shared files in the
// order of the table in ckpt/ckpt_s3.h, the files read as the AWS tools read them, every mistake refused with a
// message that says where it is, and the URLs and keys built from the result.
#include "config.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using ckpt::s3::Config;
using ckpt::s3::ConfigError;
using ckpt::s3::resolve_config;
using ckpt::s3::uri_encode;
using Catch::Matchers::Contains;

namespace {

// A HOME of its own with its .aws files, and the environment that the resolver sees: HOME and what a test sets.
class Env {
public:
    Env() {
        std::filesystem::create_directories(dir_.file(".aws"));
        vars["HOME"] = dir_.path();
    }
    std::string path(const std::string& name) const { return dir_.file(name); }
    std::string credentials_path() const { return path(".aws/credentials"); }
    std::string config_path() const { return path(".aws/config"); }
    void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
    void credentials(const std::string& text) const { write(".aws/credentials", text); }
    void config(const std::string& text) const { write(".aws/config", text); }

    Config resolve(const ckpt_s3_options& opts) const {
        return resolve_config(opts, [this](const char* name) -> const char* {
            auto it = vars.find(name);
            return it == vars.end() ? nullptr : it->second.c_str();
        });
    }

    std::map<std::string, std::string> vars;

private:
    ckpt::testing::TempDir dir_;
};

ckpt_s3_options options(const char* bucket = "bucket") {
    ckpt_s3_options o = CKPT_S3_OPTIONS_INIT;
    o.bucket = bucket;
    return o;
}

// What resolving `opts` fails with: the code and the message.
ConfigError error_of(const Env& env, const ckpt_s3_options& opts) {
    try {
        const Config c = env.resolve(opts);
        FAIL("resolved without an error (endpoint " << c.endpoint << ", region " << c.region << ")");
    } catch (const ConfigError& e) {
        return e;
    }
    return {};
}

void require_error(const Env& env, const ckpt_s3_options& opts, int code, const std::string& message) {
    const ConfigError e = error_of(env, opts);
    CHECK(e.message == message);
    CHECK(e.code == code);
}

}  // namespace

// ---- Defaults and the options themselves ---------------------------------------------------------------------------

TEST_CASE("With nothing set anywhere, a bucket is AWS's in us-east-1, virtual-host, unsigned, with the defaults") {
    Env env;
    const Config c = env.resolve(options());
    CHECK(c.bucket == "bucket");
    CHECK(c.prefix == "");
    CHECK(c.region == "us-east-1");
    CHECK(c.endpoint == "https://s3.us-east-1.amazonaws.com");
    CHECK_FALSE(c.path_style);
    CHECK(c.bucket_url() == "https://bucket.s3.us-east-1.amazonaws.com");
    CHECK(c.profile == "default");
    CHECK(c.access_key_id == "");
    CHECK(c.secret_access_key == "");
    CHECK(c.session_token == "");
    CHECK(c.part_size == 16u << 20);
    CHECK(c.parallelism == 4);
    CHECK(c.max_attempts == 0);  // as many as the retry window allows
    CHECK(c.retry_window_ms == 60000);
    CHECK(c.connect_timeout_ms == 10000);
    CHECK(c.stall_timeout_ms == 30000);
}

TEST_CASE("options_init leaves every field unset, and versions 1 and 2 are known") {
    ckpt_s3_options o;
    o.bucket = "x";
    o.part_size = 7;
    o.addressing = 2;
    ckpt::s3::options_init(&o);
    CHECK(o.version == CKPT_S3_OPTIONS_VERSION);
    CHECK(o.bucket == nullptr);
    CHECK(o.profile == nullptr);
    CHECK(o.part_size == 0);
    CHECK(o.addressing == CKPT_S3_ADDRESSING_AUTO);
    CHECK_FALSE(ckpt::s3::known_options_version(0));
    CHECK(ckpt::s3::known_options_version(1));
    CHECK(ckpt::s3::known_options_version(2));
    CHECK(o.retry_window_ms == 0);
    CHECK_FALSE(ckpt::s3::known_options_version(CKPT_S3_OPTIONS_VERSION + 1));
}

TEST_CASE("An options version this library does not know is CKPT_EINVAL") {
    Env env;
    ckpt_s3_options o = options();
    o.version = 0;
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.version 0 is not one this library knows (1 to 2)");
    o.version = 3;
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.version 3 is not one this library knows (1 to 2)");
}

TEST_CASE("A missing or empty bucket is CKPT_EINVAL") {
    Env env;
    const std::string message = "ckpt_s3_options.bucket is not set: the storage needs a bucket";
    require_error(env, options(nullptr), CKPT_EINVAL, message);
    require_error(env, options(""), CKPT_EINVAL, message);
}

TEST_CASE("A bucket name that S3 refuses is CKPT_EINVAL naming it") {
    Env env;
    const std::vector<std::string> refused = {"ab",      std::string(64, 'a'), "My-Bucket", "my_bucket",  "-bucket",
                                              "bucket-", ".bucket",            "bucket.",   "my..bucket", "my bucket",
                                              "b\xc3\xbc" "cket"};
    for (const std::string& bad : refused) {
        INFO(bad);
        require_error(env, options(bad.c_str()), CKPT_EINVAL,
                      "bucket name '" + bad +
                          "' is not one S3 accepts: 3 to 63 characters of a-z, 0-9, '.' and '-', beginning and "
                          "ending with a letter or digit, no '..'");
    }
    const std::vector<std::string> accepted = {"abc", std::string(63, 'z'), "my.bucket-1", "1bucket", "a-b.c-d"};
    for (const std::string& good : accepted) {
        INFO(good);
        CHECK(env.resolve(options(good.c_str())).bucket == good);
    }
}

TEST_CASE("The prefix loses its leading, trailing and doubled '/'") {
    Env env;
    ckpt_s3_options o = options();
    for (auto [given, kept] : std::map<std::string, std::string>{
             {"", ""}, {"/", ""}, {"//", ""}, {"run", "run"}, {"/run/", "run"}, {"a//b///c/", "a/b/c"},
             {"./a/./b", "a/b"}}) {
        INFO(given);
        o.prefix = given.c_str();
        CHECK(env.resolve(o).prefix == kept);
    }
    o.prefix = nullptr;
    CHECK(env.resolve(o).prefix == "");
}

TEST_CASE("Part size, parallelism and timeouts: 0 is the default, and a part outside S3's limits is CKPT_EINVAL") {
    Env env;
    ckpt_s3_options o = options();
    o.part_size = 5u << 20;
    o.parallelism = 9;
    o.connect_timeout_ms = 250;
    o.stall_timeout_ms = 1500;
    Config c = env.resolve(o);
    CHECK(c.part_size == 5u << 20);
    CHECK(c.parallelism == 9);
    CHECK(c.connect_timeout_ms == 250);
    CHECK(c.stall_timeout_ms == 1500);

    o.part_size = uint64_t{5} << 30;
    CHECK(env.resolve(o).part_size == uint64_t{5} << 30);

    o.part_size = 1048576;
    require_error(env, o, CKPT_EINVAL, "part_size 1048576 is below S3's 5 MiB minimum part");
    o.part_size = (5u << 20) - 1;
    require_error(env, o, CKPT_EINVAL, "part_size 5242879 is below S3's 5 MiB minimum part");
    o.part_size = (uint64_t{5} << 30) + 1;
    require_error(env, o, CKPT_EINVAL, "part_size 5368709121 is above S3's 5 GiB maximum part");
}

// ---- Keys and URLs ----------------------------------------------------------------------------------------------

TEST_CASE("key_of puts a path under the prefix, without leading, trailing or doubled '/'") {
    Config c;
    c.prefix = "run/1";
    CHECK(c.key_of("") == "run/1");
    CHECK(c.key_of(".") == "run/1");
    CHECK(c.key_of("./") == "run/1");
    CHECK(c.key_of("ckpt/0000000001.npz") == "run/1/ckpt/0000000001.npz");
    CHECK(c.key_of("./ckpt/x.npz") == "run/1/ckpt/x.npz");
    CHECK(c.key_of("././x") == "run/1/x");
    CHECK(c.key_of("/x") == "run/1/x");
    CHECK(c.key_of("a//b/") == "run/1/a/b");
    CHECK(c.key_of("a/./b") == "run/1/a/b");
    CHECK(c.key_of("../x") == "run/1/../x");  // a name like any other to S3: it cannot leave the prefix
    c.prefix = "";
    CHECK(c.key_of("") == "");
    CHECK(c.key_of(".") == "");
    CHECK(c.key_of("./a.npz") == "a.npz");
    CHECK(c.key_of("dir/") == "dir");
}

TEST_CASE("uri_encode percent-encodes every byte but the unreserved ones, in uppercase hex") {
    CHECK(uri_encode("AZaz09-._~", false) == "AZaz09-._~");
    CHECK(uri_encode("a/b c", true) == "a/b%20c");
    CHECK(uri_encode("a/b c", false) == "a%2Fb%20c");
    CHECK(uri_encode("%+=&?#:@!*'()$,;", false) == "%25%2B%3D%26%3F%23%3A%40%21%2A%27%28%29%24%2C%3B");
    CHECK(uri_encode("\xc3\xbc\xff", false) == "%C3%BC%FF");
    CHECK(uri_encode(std::string("a\0b", 3), false) == "a%00b");
    for (int b = 0; b < 256; ++b) {
        const char c = static_cast<char>(b);
        const bool unreserved = std::isalnum(b) || c == '-' || c == '.' || c == '_' || c == '~';
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", b);
        INFO(b);
        CHECK(uri_encode(std::string(1, c), false) == (unreserved ? std::string(1, c) : std::string(hex)));
    }
}

TEST_CASE("object_url encodes the key as SigV4's canonical URI, '/' kept") {
    Config c;
    c.bucket = "b";
    c.endpoint = "http://127.0.0.1:9000";
    c.path_style = true;
    CHECK(c.object_url("a b/\xc3\xbc+.npz") == "http://127.0.0.1:9000/b/a%20b/%C3%BC%2B.npz");
    CHECK(c.object_url("run/1/ckpt/0000000001.npz") == "http://127.0.0.1:9000/b/run/1/ckpt/0000000001.npz");
    CHECK(c.object_url("") == "http://127.0.0.1:9000/b/");
}

TEST_CASE("Addressing: AUTO is virtual-host for AWS's endpoint and path-style for an explicit one; PATH and VIRTUAL "
          "force it") {
    Env env;
    ckpt_s3_options o = options("my-bucket");
    o.region = "eu-west-1";

    SECTION("AUTO on AWS's own endpoint") {
        const Config c = env.resolve(o);
        CHECK(c.endpoint == "https://s3.eu-west-1.amazonaws.com");
        CHECK_FALSE(c.path_style);
        CHECK(c.bucket_url() == "https://my-bucket.s3.eu-west-1.amazonaws.com");
        CHECK(c.object_url("k/x y") == "https://my-bucket.s3.eu-west-1.amazonaws.com/k/x%20y");
    }
    SECTION("AUTO with an explicit endpoint, from the options or from anywhere else") {
        o.endpoint_url = "http://127.0.0.1:9000/";
        Config c = env.resolve(o);
        CHECK(c.path_style);
        CHECK(c.bucket_url() == "http://127.0.0.1:9000/my-bucket");
        CHECK(c.object_url("k") == "http://127.0.0.1:9000/my-bucket/k");
        o.endpoint_url = nullptr;
        env.vars["AWS_ENDPOINT_URL"] = "https://s3.eu-west-1.amazonaws.com";
        c = env.resolve(o);
        CHECK(c.path_style);
        CHECK(c.bucket_url() == "https://s3.eu-west-1.amazonaws.com/my-bucket");
    }
    SECTION("an endpoint with a path keeps it, before the bucket path-style and after the host virtual-host") {
        o.endpoint_url = "http://store.local:9000/s3/";
        CHECK(env.resolve(o).bucket_url() == "http://store.local:9000/s3/my-bucket");
        o.addressing = CKPT_S3_ADDRESSING_VIRTUAL;
        CHECK(env.resolve(o).bucket_url() == "http://my-bucket.store.local:9000/s3");
        CHECK(env.resolve(o).object_url("a") == "http://my-bucket.store.local:9000/s3/a");
    }
    SECTION("PATH on AWS's endpoint") {
        o.addressing = CKPT_S3_ADDRESSING_PATH;
        const Config c = env.resolve(o);
        CHECK(c.path_style);
        CHECK(c.bucket_url() == "https://s3.eu-west-1.amazonaws.com/my-bucket");
    }
    SECTION("VIRTUAL keeps a bucket with a '.' virtual-host, as asked") {
        o.addressing = CKPT_S3_ADDRESSING_VIRTUAL;
        o.bucket = "my.bucket";
        CHECK(env.resolve(o).bucket_url() == "https://my.bucket.s3.eu-west-1.amazonaws.com");
    }
    SECTION("another value is CKPT_EINVAL") {
        o.addressing = 3;
        require_error(env, o, CKPT_EINVAL,
                      "ckpt_s3_options.addressing 3 is not CKPT_S3_ADDRESSING_AUTO, _PATH or _VIRTUAL");
    }
}

TEST_CASE("AWS's endpoint for a China region is under amazonaws.com.cn") {
    Env env;
    ckpt_s3_options o = options();
    o.region = "cn-north-1";
    CHECK(env.resolve(o).endpoint == "https://s3.cn-north-1.amazonaws.com.cn");
}

// ---- Where each value comes from ------------------------------------------------------------------------------------

TEST_CASE("The endpoint: the option, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's s3 sub-section, the "
          "[services] section it names, its endpoint_url, then AWS's") {
    Env env;
    env.config(R"([default]
services = local
endpoint_url = http://profile-global:1
s3 =
  endpoint_url = http://profile-s3:2

[services local]
s3 =
  endpoint_url = http://services-s3:3
dynamodb =
  endpoint_url = http://services-dynamodb:4
)");
    env.vars["AWS_ENDPOINT_URL"] = "http://env-global:5";
    env.vars["AWS_ENDPOINT_URL_S3"] = "http://env-s3:6";
    ckpt_s3_options o = options();
    o.endpoint_url = "http://option:7";
    CHECK(env.resolve(o).endpoint == "http://option:7");
    o.endpoint_url = nullptr;
    CHECK(env.resolve(o).endpoint == "http://env-s3:6");
    env.vars.erase("AWS_ENDPOINT_URL_S3");
    CHECK(env.resolve(o).endpoint == "http://env-global:5");
    env.vars.erase("AWS_ENDPOINT_URL");
    CHECK(env.resolve(o).endpoint == "http://profile-s3:2");
    env.config(R"([default]
services = local
endpoint_url = http://profile-global:1
[services local]
s3 =
  endpoint_url = http://services-s3:3
)");
    CHECK(env.resolve(o).endpoint == "http://services-s3:3");
    env.config(R"([default]
services = local
endpoint_url = http://profile-global:1
[services local]
dynamodb =
  endpoint_url = http://services-dynamodb:4
)");
    CHECK(env.resolve(o).endpoint == "http://profile-global:1");
    env.config("[default]\nservices = missing\n");
    CHECK(env.resolve(o).endpoint == "https://s3.us-east-1.amazonaws.com");
}

TEST_CASE("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS, or the profile's ignore_configured_endpoint_urls, leaves all "
          "endpoints but the option's aside") {
    Env env;
    env.config("[default]\nendpoint_url = http://profile:1\n");
    env.vars["AWS_ENDPOINT_URL_S3"] = "http://env:2";
    env.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "TRUE";
    ckpt_s3_options o = options();
    Config c = env.resolve(o);
    CHECK(c.endpoint == "https://s3.us-east-1.amazonaws.com");
    CHECK_FALSE(c.path_style);
    o.endpoint_url = "http://option:3";
    CHECK(env.resolve(o).endpoint == "http://option:3");

    o.endpoint_url = nullptr;
    env.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "false";
    CHECK(env.resolve(o).endpoint == "http://env:2");
    env.vars.erase("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    env.config("[default]\nendpoint_url = http://profile:1\nignore_configured_endpoint_urls = true\n");
    CHECK(env.resolve(o).endpoint == "https://s3.us-east-1.amazonaws.com");
    // The variable, when set, wins over the profile's setting, as for every other setting.
    env.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "false";
    CHECK(env.resolve(o).endpoint == "http://env:2");
}

TEST_CASE("An endpoint loses its trailing '/' and has its scheme in lowercase") {
    Env env;
    ckpt_s3_options o = options();
    o.endpoint_url = "HTTP://Store:9000///";
    CHECK(env.resolve(o).endpoint == "http://Store:9000");
    o.endpoint_url = "https://store/base/";
    CHECK(env.resolve(o).endpoint == "https://store/base");
}

TEST_CASE("An endpoint that is not an http(s) URL is CKPT_EINVAL naming where it came from") {
    Env env;
    ckpt_s3_options o = options();
    o.endpoint_url = "ftp://store";
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.endpoint_url 'ftp://store' is not an http:// or https:// URL");
    o.endpoint_url = "http://";
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.endpoint_url 'http://' has no host");
    o.endpoint_url = "http:///path";
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.endpoint_url 'http:///path' has no host");
    o.endpoint_url = "http://store/?x=1";
    require_error(env, o, CKPT_EINVAL,
                  "ckpt_s3_options.endpoint_url 'http://store/?x=1' has a space, control character, query or fragment");
    o.endpoint_url = "http://st ore";
    require_error(env, o, CKPT_EINVAL,
                  "ckpt_s3_options.endpoint_url 'http://st ore' has a space, control character, query or fragment");
    o.endpoint_url = nullptr;
    env.vars["AWS_ENDPOINT_URL_S3"] = "localhost:9000";
    require_error(env, o, CKPT_EINVAL, "AWS_ENDPOINT_URL_S3 'localhost:9000' is not an http:// or https:// URL");
    env.vars.erase("AWS_ENDPOINT_URL_S3");
    env.config("[default]\ns3 =\n  endpoint_url = s3://store\n");
    require_error(env, o, CKPT_EINVAL,
                  "s3.endpoint_url of profile 'default' in " + env.config_path() +
                      " 's3://store' is not an http:// or https:// URL");
    env.config("[default]\nservices = x\n[services x]\ns3 =\n  endpoint_url = store\n");
    require_error(env, o, CKPT_EINVAL,
                  "s3.endpoint_url of [services x] in " + env.config_path() +
                      " 'store' is not an http:// or https:// URL");
}

TEST_CASE("The region: the option, AWS_REGION, AWS_DEFAULT_REGION, the profile's, then us-east-1") {
    Env env;
    env.config("[default]\nregion = eu-central-1\n");
    env.vars["AWS_DEFAULT_REGION"] = "eu-west-2";
    env.vars["AWS_REGION"] = "eu-west-1";
    ckpt_s3_options o = options();
    o.region = "ap-south-1";
    CHECK(env.resolve(o).region == "ap-south-1");
    o.region = "";  // an empty string is unset, as NULL
    CHECK(env.resolve(o).region == "eu-west-1");
    env.vars["AWS_REGION"] = "";  // and so is an empty variable
    CHECK(env.resolve(o).region == "eu-west-2");
    env.vars.erase("AWS_DEFAULT_REGION");
    const Config c = env.resolve(o);
    CHECK(c.region == "eu-central-1");
    CHECK(c.endpoint == "https://s3.eu-central-1.amazonaws.com");
    env.config("[default]\n");
    CHECK(env.resolve(o).region == "us-east-1");
}

TEST_CASE("A region that cannot be a host name's part is CKPT_EINVAL naming where it came from") {
    Env env;
    ckpt_s3_options o = options();
    o.region = "eu west";
    require_error(env, o, CKPT_EINVAL,
                  "ckpt_s3_options.region 'eu west' is not a region name (letters, digits, '-' and '_')");
    o.region = nullptr;
    env.vars["AWS_REGION"] = "eu/west";
    require_error(env, o, CKPT_EINVAL, "AWS_REGION 'eu/west' is not a region name (letters, digits, '-' and '_')");
    env.vars.erase("AWS_REGION");
    env.config("[default]\nregion = x.y\n");
    require_error(env, o, CKPT_EINVAL,
                  "region of profile 'default' in " + env.config_path() +
                      " 'x.y' is not a region name (letters, digits, '-' and '_')");
    o.region = "minio_local-1";  // stores of one's own have regions of their own
    CHECK(env.resolve(o).region == "minio_local-1");
}

TEST_CASE("max_attempts: the option, AWS_MAX_ATTEMPTS, the profile's, then no limit but the retry window") {
    Env env;
    env.config("[default]\nmax_attempts = 3\n");
    env.vars["AWS_MAX_ATTEMPTS"] = "7";
    ckpt_s3_options o = options();
    o.max_attempts = 1;
    CHECK(env.resolve(o).max_attempts == 1);
    o.max_attempts = 0;
    CHECK(env.resolve(o).max_attempts == 7);
    env.vars.erase("AWS_MAX_ATTEMPTS");
    CHECK(env.resolve(o).max_attempts == 3);
    env.config("[default]\n");
    CHECK(env.resolve(o).max_attempts == 0);
    env.vars["AWS_MAX_ATTEMPTS"] = "4294967295";
    CHECK(env.resolve(o).max_attempts == 4294967295u);
}

TEST_CASE("retry_window_ms: the option, CKPT_S3_RETRY_SECONDS, then 60 s") {
    Env env;
    ckpt_s3_options o = options();
    CHECK(env.resolve(o).retry_window_ms == 60000);
    env.vars["CKPT_S3_RETRY_SECONDS"] = "5";
    CHECK(env.resolve(o).retry_window_ms == 5000);
    env.vars["CKPT_S3_RETRY_SECONDS"] = "999999999";  // a day at most
    CHECK(env.resolve(o).retry_window_ms == 86400000);
    o.retry_window_ms = 250;
    CHECK(env.resolve(o).retry_window_ms == 250);
    o.retry_window_ms = 0;
    for (const char* bad : {"0", "-1", "1.5", "soon"}) {
        INFO(bad);
        env.vars["CKPT_S3_RETRY_SECONDS"] = bad;
        require_error(env, o, CKPT_EINVAL,
                      std::string("CKPT_S3_RETRY_SECONDS '") + bad + "' is not a positive integer");
    }
}

TEST_CASE("A max_attempts that is not a positive integer is CKPT_EINVAL naming the variable or the profile") {
    Env env;
    ckpt_s3_options o = options();
    for (const char* bad : {"0", "-1", "+3", "3.5", "three", "3 ", "4294967296", "99999999999"}) {
        INFO(bad);
        env.vars["AWS_MAX_ATTEMPTS"] = bad;
        require_error(env, o, CKPT_EINVAL, std::string("AWS_MAX_ATTEMPTS '") + bad + "' is not a positive integer");
    }
    env.vars.erase("AWS_MAX_ATTEMPTS");
    env.config("[profile ci]\nmax_attempts = many\n");
    env.vars["AWS_PROFILE"] = "ci";
    require_error(env, o, CKPT_EINVAL,
                  "max_attempts of profile 'ci' in " + env.config_path() + " 'many' is not a positive integer");
}

// ---- Credentials ------------------------------------------------------------------------------------------------

TEST_CASE("Credentials in the options win over the environment's and the files'") {
    Env env;
    env.credentials("[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
    env.vars["AWS_ACCESS_KEY_ID"] = "ENVKEY";
    env.vars["AWS_SECRET_ACCESS_KEY"] = "envsecret";
    env.vars["AWS_SESSION_TOKEN"] = "envtoken";
    ckpt_s3_options o = options();
    o.access_key_id = "OPTKEY";
    o.secret_access_key = "optsecret";
    Config c = env.resolve(o);
    CHECK(c.access_key_id == "OPTKEY");
    CHECK(c.secret_access_key == "optsecret");
    CHECK(c.session_token == "");  // never the environment's token with the options' keys
    o.session_token = "opttoken";
    c = env.resolve(o);
    CHECK(c.session_token == "opttoken");
}

TEST_CASE("Half of the credentials in the options is CKPT_EINVAL naming what is missing") {
    Env env;
    env.vars["AWS_ACCESS_KEY_ID"] = "ENVKEY";
    env.vars["AWS_SECRET_ACCESS_KEY"] = "envsecret";
    ckpt_s3_options o = options();
    o.access_key_id = "OPTKEY";
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.access_key_id is set but secret_access_key is not");
    o.access_key_id = nullptr;
    o.secret_access_key = "optsecret";
    require_error(env, o, CKPT_EINVAL, "ckpt_s3_options.secret_access_key is set but access_key_id is not");
    o.secret_access_key = nullptr;
    o.session_token = "opttoken";
    require_error(env, o, CKPT_EINVAL,
                  "ckpt_s3_options.session_token is set but access_key_id and secret_access_key are not");
}

TEST_CASE("The environment's credentials count when both the key and the secret are set") {
    Env env;
    env.credentials("[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
    env.vars["AWS_ACCESS_KEY_ID"] = "ENVKEY";
    env.vars["AWS_SECRET_ACCESS_KEY"] = "envsecret";
    env.vars["AWS_SESSION_TOKEN"] = "envtoken";
    Config c = env.resolve(options());
    CHECK(c.access_key_id == "ENVKEY");
    CHECK(c.secret_access_key == "envsecret");
    CHECK(c.session_token == "envtoken");
    env.vars.erase("AWS_SESSION_TOKEN");
    CHECK(env.resolve(options()).session_token == "");

    SECTION("the key alone does not") {
        env.vars.erase("AWS_SECRET_ACCESS_KEY");
        c = env.resolve(options());
        CHECK(c.access_key_id == "FILEKEY");
        CHECK(c.secret_access_key == "filesecret");
    }
    SECTION("nor the secret alone") {
        env.vars.erase("AWS_ACCESS_KEY_ID");
        c = env.resolve(options());
        CHECK(c.access_key_id == "FILEKEY");
        CHECK(c.secret_access_key == "filesecret");
    }
}

TEST_CASE("A profile's credentials come from the credentials file, else the config file, as one set") {
    Env env;
    env.config(
        "[default]\naws_access_key_id = CONFKEY\naws_secret_access_key = confsecret\naws_session_token = conftoken\n");
    Config c = env.resolve(options());
    CHECK(c.access_key_id == "CONFKEY");
    CHECK(c.secret_access_key == "confsecret");
    CHECK(c.session_token == "conftoken");

    env.credentials("[default]\naws_access_key_id = CREDKEY\naws_secret_access_key = credsecret\n");
    c = env.resolve(options());
    CHECK(c.access_key_id == "CREDKEY");
    CHECK(c.secret_access_key == "credsecret");
    CHECK(c.session_token == "");  // the config file's token belongs to the config file's keys
}

TEST_CASE("A profile with a key but no secret, or a secret but no key, is CKPT_EINVAL naming the profile and file") {
    Env env;
    env.credentials("[default]\naws_access_key_id = CREDKEY\n");
    env.config("[default]\naws_access_key_id = CONFKEY\naws_secret_access_key = confsecret\n");
    require_error(env, options(), CKPT_EINVAL,
                  "profile 'default' in " + env.credentials_path() +
                      " has aws_access_key_id but no aws_secret_access_key");
    env.credentials("[default]\n");
    env.config("[profile dev]\naws_secret_access_key = confsecret\n");
    env.vars["AWS_PROFILE"] = "dev";
    require_error(env, options(), CKPT_EINVAL,
                  "profile 'dev' in " + env.config_path() + " has aws_secret_access_key but no aws_access_key_id");
}

// ---- Profiles and files -----------------------------------------------------------------------------------------

TEST_CASE("The profile: the option, AWS_PROFILE, then default") {
    Env env;
    env.credentials(R"([default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = defaultsecret
[dev]
aws_access_key_id = DEVKEY
aws_secret_access_key = devsecret
)");
    env.config(R"([default]
region = eu-west-1
[profile dev]
region = eu-west-2
[profile prod]
region = eu-west-3
)");
    ckpt_s3_options o = options();
    Config c = env.resolve(o);
    CHECK(c.profile == "default");
    CHECK(c.region == "eu-west-1");
    CHECK(c.access_key_id == "DEFAULTKEY");

    env.vars["AWS_PROFILE"] = "dev";
    c = env.resolve(o);
    CHECK(c.profile == "dev");
    CHECK(c.region == "eu-west-2");
    CHECK(c.access_key_id == "DEVKEY");

    o.profile = "prod";  // in the config file only: no credentials, so unsigned
    c = env.resolve(o);
    CHECK(c.profile == "prod");
    CHECK(c.region == "eu-west-3");
    CHECK(c.access_key_id == "");
}

TEST_CASE("A profile named but in neither file is CKPT_EINVAL naming it and both files; default need not exist") {
    Env env;
    env.credentials("[dev]\n");
    env.config("[profile dev]\n");
    ckpt_s3_options o = options();
    o.profile = "staging";
    require_error(env, o, CKPT_EINVAL,
                  "profile 'staging' (from ckpt_s3_options.profile) is in neither " + env.credentials_path() +
                      " nor " + env.config_path());
    o.profile = nullptr;
    env.vars["AWS_PROFILE"] = "Dev";  // names are case-sensitive
    require_error(env, o, CKPT_EINVAL,
                  "profile 'Dev' (from AWS_PROFILE) is in neither " + env.credentials_path() + " nor " +
                      env.config_path());
    env.vars["AWS_PROFILE"] = "default";
    CHECK(env.resolve(o).profile == "default");
    env.vars.erase("AWS_PROFILE");
    CHECK(env.resolve(o).profile == "default");
}

TEST_CASE("In the config file a profile is [profile name] and [default]; in the credentials file it is [name]") {
    Env env;
    ckpt_s3_options o = options();
    o.profile = "dev";
    env.config("[dev]\nregion = eu-west-1\n");  // the config file's [dev] is no profile
    env.credentials("[profile dev]\naws_access_key_id = K\naws_secret_access_key = S\n");  // nor this, here
    require_error(env, o, CKPT_EINVAL,
                  "profile 'dev' (from ckpt_s3_options.profile) is in neither " + env.credentials_path() + " nor " +
                      env.config_path());

    SECTION("[profile default] is the default profile too, and wins over [default]") {
        o.profile = nullptr;
        env.config("[default]\nregion = eu-west-1\nmax_attempts = 2\n[profile default]\nregion = eu-west-2\n");
        const Config c = env.resolve(o);
        CHECK(c.region == "eu-west-2");
        CHECK(c.max_attempts == 2);
    }
    SECTION("a setting in the credentials file wins over the config file's") {
        o.profile = nullptr;
        env.credentials("[default]\nregion = ap-east-1\n");
        env.config("[default]\nregion = eu-west-1\nmax_attempts = 2\n");
        const Config c = env.resolve(o);
        CHECK(c.region == "ap-east-1");
        CHECK(c.max_attempts == 2);
    }
    SECTION("two sections of one profile are one, the later setting winning") {
        o.profile = nullptr;
        env.config("[default]\nregion = eu-west-1\nmax_attempts = 2\n[profile x]\n[default]\nregion = eu-west-2\n");
        const Config c = env.resolve(o);
        CHECK(c.region == "eu-west-2");
        CHECK(c.max_attempts == 2);
    }
}

TEST_CASE("AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE name the files, '~/' meaning HOME") {
    Env env;
    env.credentials("[default]\naws_access_key_id = HOMEKEY\naws_secret_access_key = s\n");
    env.config("[default]\nregion = eu-west-1\n");
    env.write("creds", "[default]\naws_access_key_id = MOVEDKEY\naws_secret_access_key = s\n");
    env.write("conf", "[default]\nregion = eu-west-2\n");
    env.vars["AWS_SHARED_CREDENTIALS_FILE"] = env.path("creds");
    env.vars["AWS_CONFIG_FILE"] = "~/conf";
    Config c = env.resolve(options());
    CHECK(c.access_key_id == "MOVEDKEY");
    CHECK(c.region == "eu-west-2");

    env.vars["AWS_PROFILE"] = "none";
    require_error(env, options(), CKPT_EINVAL,
                  "profile 'none' (from AWS_PROFILE) is in neither " + env.path("creds") + " nor " + env.path("conf"));
}

TEST_CASE("Files that are not there are no error; a directory in a file's place is CKPT_EINVAL") {
    Env env;
    env.vars["AWS_CONFIG_FILE"] = env.path("no/such/config");
    env.vars["AWS_SHARED_CREDENTIALS_FILE"] = env.path("missing");
    CHECK(env.resolve(options()).region == "us-east-1");
    env.vars["AWS_CONFIG_FILE"] = "/dev/null";  // the usual way to say "no config file"
    CHECK(env.resolve(options()).region == "us-east-1");
    env.vars["AWS_CONFIG_FILE"] = env.path(".aws");
    require_error(env, options(), CKPT_EINVAL, "the AWS file " + env.path(".aws") + " is a directory");
}

TEST_CASE("Without HOME there are no default files") {
    Env env;
    env.vars.erase("HOME");
    env.credentials("[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
    CHECK(env.resolve(options()).access_key_id == "");
    ckpt_s3_options o = options();
    o.profile = "dev";
    require_error(env, o, CKPT_EINVAL,
                  "profile 'dev' (from ckpt_s3_options.profile) is in neither no credentials file (HOME is not set) "
                  "nor no config file (HOME is not set)");
    env.vars["AWS_CONFIG_FILE"] = env.config_path();
    env.config("[profile dev]\nregion = eu-west-1\n");
    CHECK(env.resolve(o).region == "eu-west-1");
}

// ---- File syntax ------------------------------------------------------------------------------------------------

TEST_CASE("Comments, blank lines, spacing, key case and CRLF are read as the AWS tools read them") {
    Env env;
    env.config("# a comment\r\n"
               "; another\r\n"
               "\r\n"
               "[ profile   dev ]   # the profile's comment\r\n"
               "   # an indented comment\r\n"
               "Region=eu-west-1 ; why this region\r\n"
               "\r\n"
               "MAX_ATTEMPTS   =   \t 3\r\n"
               "endpoint_url = http://store:9000/#not-a-comment\r\n");
    env.vars["AWS_PROFILE"] = "dev";
    ckpt_s3_options o = options();
    const ConfigError e = error_of(env, o);  // '#' without whitespace before it is part of the value
    CHECK(e.message == "endpoint_url of profile 'dev' in " + env.config_path() +
                           " 'http://store:9000/#not-a-comment' has a space, control character, query or fragment");
    o.endpoint_url = "http://option:1";
    const Config c = env.resolve(o);
    CHECK(c.region == "eu-west-1");
    CHECK(c.max_attempts == 3);
}

TEST_CASE("A byte-order mark at the start of a file is no part of its first line") {
    Env env;
    env.config("\xEF\xBB\xBF[default]\nregion = eu-west-1\n");
    CHECK(env.resolve(options()).region == "eu-west-1");
}

TEST_CASE("The indented lines under 's3 =' are the s3 sub-section's settings; the next unindented line is the "
          "profile's again") {
    Env env;
    env.config(R"([default]
s3 =
  endpoint_url = http://store:9000   # MinIO
	# a comment in the sub-section

  addressing_style = path
region = eu-west-1
dynamodb =
  endpoint_url = http://dynamo:8000
  region = ignored
)");
    Config c = env.resolve(options());
    CHECK(c.endpoint == "http://store:9000");
    CHECK(c.path_style);
    CHECK(c.region == "eu-west-1");  // not dynamodb's region

    env.config("[default]\ndynamodb =\n  endpoint_url = http://dynamo:8000\n");  // another service's endpoint
    c = env.resolve(options());
    CHECK(c.endpoint == "https://s3.us-east-1.amazonaws.com");
}

TEST_CASE("An indented line under a setting with a value continues that value") {
    Env env;
    env.credentials("[default]\naws_access_key_id = AKIA\n  MORE\naws_secret_access_key = s\n");
    CHECK(env.resolve(options()).access_key_id == "AKIA\nMORE");
    env.credentials("[default]\n  aws_access_key_id = K\naws_secret_access_key = s\n");  // no setting to continue
    CHECK(env.resolve(options()).access_key_id == "K");
}

TEST_CASE("A malformed line is CKPT_EFORMAT naming the file and the line") {
    Env env;
    const std::string conf = env.config_path(), creds = env.credentials_path();
    auto config_error = [&](const std::string& text, const std::string& message) {
        env.config(text);
        INFO(text);
        require_error(env, options(), CKPT_EFORMAT, conf + message);
    };
    config_error("# the usual\n[default]\naws_access_key_id = K\n\n[profile dev]\n; eu\nregion eu-west-1\n",
                 ":7: expected 'key = value', got 'region eu-west-1'");
    config_error("[profile dev\nregion = x\n", ":1: expected ']' to end the section header '[profile dev'");
    config_error("[default] region = x\n", ":1: unexpected 'region = x' after the section header");
    config_error("[ ]\n", ":1: the section header '[ ]' has no name");
    config_error("region = eu-west-1\n[default]\n", ":1: 'region = eu-west-1' comes before any [section]");
    config_error("[default]\n = eu-west-1\n", ":2: expected 'key = value', got '= eu-west-1'");
    config_error("[default]\ns3 =\n  endpoint_url http://x\n",
                 ":3: expected 'key = value' under 's3 =', got 'endpoint_url http://x'");
    // A file is read whole: a mistake in a profile not used is still one.
    config_error("[default]\n[profile other]\nbroken\n", ":3: expected 'key = value', got 'broken'");

    env.config("");
    env.credentials("[default]\naws_secret_access_key = S\naws_access_key_id AKIAEXAMPLE\n");
    require_error(env, options(), CKPT_EFORMAT,
                  creds + ":3: expected 'key = value', got 'aws_access_key_id AKIAEXAMPLE'");
}

TEST_CASE("An error about a malformed line never shows a secret") {
    Env env;
    env.credentials("[default]\naws_access_key_id = K\naws_secret_access_key wJalrXUtnFEMI/K7MDENG\n");
    ConfigError e = error_of(env, options());
    CHECK(e.code == CKPT_EFORMAT);
    CHECK(e.message == env.credentials_path() +
                           ":3: expected 'key = value', got 'aws_secret_access_key ... (value not shown)'");
    env.credentials("[default]\nAWS_SESSION_TOKEN: FQoGZXIvYXdzEJr\n");
    e = error_of(env, options());
    CHECK(e.message ==
          env.credentials_path() + ":2: expected 'key = value', got 'aws_session_token ... (value not shown)'");
    env.credentials("[default]\naws_session_token =\n  FQoGZXIvYXdzEJr\n");
    e = error_of(env, options());
    CHECK(e.message == env.credentials_path() +
                           ":3: expected 'key = value' under 'aws_session_token =', got '(value not shown)'");
    CHECK_THAT(e.message, !Contains("FQoG"));
}
