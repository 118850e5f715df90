// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/s3.hpp — ckpt::S3Options and storages over an S3 bucket: the C++ face of libckpt_s3 (ckpt/ckpt_s3.h).
 *
 * Part of the C++ binding, but the one part <ckpt/ckpt.hpp> does not include: it calls libckpt_s3, a library of
 * its own (built on libcurl), so a program that includes it links that library too — pkg-config ckpt-s3 (which
 * brings ckpt), or CMake's ckpt::s3 target:
 *
 *     #include <ckpt/ckpt.hpp>
 *     #include <ckpt/cpp/s3.hpp>
 *     c++ -std=c++17 app.cpp $(pkg-config --cflags --libs ckpt-s3)
 *
 * A program that only gives s3://bucket/key paths to ckpt::save, ckpt::read, ckpt::Manager and the rest, with no
 * storage of its own, needs neither this header nor the link: libckpt loads libckpt_s3 itself for such paths,
 * configured from the environment (AWS_ENDPOINT_URL, AWS_REGION, the AWS credentials and profile files). This
 * header is for choosing the configuration in code: the endpoint, credentials, part size, timeouts. */
#ifndef CKPT_CPP_S3_HPP
#define CKPT_CPP_S3_HPP

#include <ckpt/ckpt.hpp>
#include <ckpt/ckpt_s3.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

namespace ckpt {

// CKPT_S3_ADDRESSING_*: where the bucket goes in a request's URL.
enum class S3Addressing : uint32_t {
    automatic = CKPT_S3_ADDRESSING_AUTO,  // path-style for an explicit endpoint, virtual-host for AWS's own
    path = CKPT_S3_ADDRESSING_PATH,       // http(s)://endpoint/bucket/key
    virtual_host = CKPT_S3_ADDRESSING_VIRTUAL,  // http(s)://bucket.endpoint/key
};

// ckpt_s3_options. What is left unset (nullopt, or an empty string) comes from the environment and the AWS files
// as ckpt_s3.h lists, then from libckpt_s3's defaults. Numbers and durations that are set must be positive: 0,
// which the C struct reads as "unset", is refused rather than taken for "none" or "no limit".
struct S3Options {
    std::string bucket;  // required by s3_storage; s3_storage_url takes it from the URL
    std::string prefix;  // keys are "<prefix>/<path>"; "" = the bucket's root (s3_storage_url: from the URL)
    std::optional<std::string> endpoint_url;  // "http://127.0.0.1:9000", "https://storage.googleapis.com"
    std::optional<std::string> region;
    std::optional<std::string> access_key_id;  // with secret_access_key (and session_token), or none of the three
    std::optional<std::string> secret_access_key;
    std::optional<std::string> session_token;
    std::optional<std::string> profile;  // of ~/.aws/credentials and ~/.aws/config
    std::optional<uint64_t> part_size;    // bytes per part of a multipart upload and per ranged read; >= 5 MiB
    std::optional<uint32_t> parallelism;  // requests in flight per file
    std::optional<uint32_t> max_attempts;  // tries per request, the first included; 1 = no retries
    std::optional<std::chrono::milliseconds> connect_timeout;
    std::optional<std::chrono::milliseconds> stall_timeout;  // a request that moves no byte this long is retried
    std::optional<std::chrono::milliseconds> retry_window;   // how long a request is retried after transient
                                                             // failures, from its first try (default 60 s)
    S3Addressing addressing = S3Addressing::automatic;
};

namespace detail {

// The ckpt_s3_options of an S3Options, whose strings it points into: it lives no longer than the S3Options.
class CS3Options {
public:
    explicit CS3Options(const S3Options& o) {
        check(ckpt_s3_options_init(&c_, CKPT_S3_OPTIONS_VERSION));
        c_.bucket = o.bucket.c_str();
        c_.prefix = o.prefix.c_str();
        c_.endpoint_url = text(o.endpoint_url);
        c_.region = text(o.region);
        c_.access_key_id = text(o.access_key_id);
        c_.secret_access_key = text(o.secret_access_key);
        c_.session_token = text(o.session_token);
        c_.profile = text(o.profile);
        c_.part_size = positive(o.part_size, "part_size");
        c_.parallelism = positive(o.parallelism, "parallelism");
        c_.max_attempts = positive(o.max_attempts, "max_attempts");
        c_.connect_timeout_ms = milliseconds(o.connect_timeout, "connect_timeout");
        c_.stall_timeout_ms = milliseconds(o.stall_timeout, "stall_timeout");
        c_.retry_window_ms = milliseconds(o.retry_window, "retry_window");
        c_.addressing = static_cast<uint32_t>(o.addressing);
    }
    const ckpt_s3_options* get() const noexcept { return &c_; }

private:
    static const char* text(const std::optional<std::string>& s) noexcept { return s ? s->c_str() : nullptr; }

    template <typename T>
    static T positive(const std::optional<T>& v, const char* field) {
        if (!v) return 0;
        if (*v == 0)
            throw Error(CKPT_EINVAL, std::string("ckpt::S3Options::") + field +
                                         " is 0: give a positive value, or leave it unset for the default");
        return *v;
    }

    static uint32_t milliseconds(const std::optional<std::chrono::milliseconds>& d, const char* field) {
        if (!d) return 0;
        const auto ms = d->count();
        if (ms <= 0 || static_cast<uint64_t>(ms) > std::numeric_limits<uint32_t>::max())
            throw Error(CKPT_EINVAL, std::string("ckpt::S3Options::") + field + " is " + std::to_string(ms) +
                                         " ms: give 1 ms to 4294967295 ms, or leave it unset for the default");
        return static_cast<uint32_t>(ms);
    }

    ckpt_s3_options c_;
};

}  // namespace detail

// A storage over options.bucket (ckpt_storage_s3_new), to put in the `storage` of Options, ManagerOptions or
// WriterOptions; paths given with it are keys under options.prefix. Nothing is sent until it is used: a missing
// bucket or wrong credentials fail the first call that uses it (CKPT_ENOTFOUND, CKPT_EIO), naming the bucket and
// key. Throws Error(CKPT_EINVAL) for a missing bucket, an endpoint that is not an http(s) URL, a part size under
// 5 MiB, a number or duration out of range; CKPT_EFORMAT for an AWS file that cannot be parsed.
inline std::shared_ptr<Storage> s3_storage(const S3Options& options) {
    const detail::CS3Options c(options);
    ckpt_storage* s = nullptr;
    detail::check(ckpt_storage_s3_new(&s, c.get()));
    return Storage::adopt(s);
}

// What s3_storage_url makes of "s3://bucket/key": a storage over the bucket, and the key to give it as a path.
struct S3Location {
    std::shared_ptr<Storage> storage;
    std::string key;  // "runs/exp1" for "s3://bucket/runs/exp1"; "" for "s3://bucket" and "s3://bucket/"
};

// For "s3://bucket/key": a storage over the bucket, configured by options but for the bucket and prefix, which
// the URL gives (ckpt_storage_s3_new_url) — setting them here throws Error(CKPT_EINVAL) rather than letting the
// URL silently win. It is what libckpt makes of an s3:// path given with no storage, with a configuration of your
// own: `auto [storage, key] = ckpt::s3_storage_url("s3://bucket/runs/exp1", options);`, then a Manager(key) with
// ManagerOptions::storage = storage. Throws as s3_storage does, and Error(CKPT_EINVAL) for a URL that is not
// s3://<bucket>[/<key>].
inline S3Location s3_storage_url(const std::string& url, const S3Options& options = {}) {
    if (!options.bucket.empty() || !options.prefix.empty())
        throw Error(CKPT_EINVAL, url + ": ckpt::s3_storage_url takes the bucket and key from the URL; leave "
                                       "S3Options::bucket and prefix empty");
    const detail::CS3Options c(options);
    ckpt_storage* s = nullptr;
    const char* key = nullptr;
    detail::check(ckpt_storage_s3_new_url(&s, url.c_str(), c.get(), &key));
    S3Location location;
    location.storage = Storage::adopt(s);
    location.key = key;  // points into url
    return location;
}

}  // namespace ckpt

#endif  // CKPT_CPP_S3_HPP
