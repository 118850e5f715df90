// SPDX-License-Identifier: Apache-2.0
// The configuration of an S3 storage: a ckpt_s3_options, completed from the environment and the AWS shared files
// as the AWS command-line tools and SDKs complete theirs (the table in ckpt/ckpt_s3.h), checked, and resolved into
// the values the HTTP layer uses. Nothing here does I/O but reading those two files.
#pragma once

#include "ckpt/ckpt_s3.h"

#include <cstdint>
#include <functional>
#include <string>

namespace ckpt::s3 {

inline constexpr uint64_t kDefaultPartSize = uint64_t{16} << 20;
inline constexpr uint64_t kMinPartSize = uint64_t{5} << 20;   // S3 refuses smaller parts (but the last)
inline constexpr uint64_t kMaxPartSize = uint64_t{5} << 30;   // and larger ones

struct Config {
    std::string bucket;
    std::string prefix;    // no leading, trailing or doubled '/'; "" = the bucket's root
    std::string endpoint;  // scheme://host[:port][/path], no trailing '/': "http://127.0.0.1:9000"
    std::string region;
    std::string profile;   // the profile the files were read for, to name it when its credentials are refused
    std::string access_key_id, secret_access_key, session_token;  // empty key id = unsigned requests
    uint64_t part_size = kDefaultPartSize;
    unsigned parallelism = 4;
    unsigned max_attempts = 0;     // 0: as many as the retry window allows
    long retry_window_ms = 60000;  // how long a request is retried after a transient failure, from its first try
    long connect_timeout_ms = 10000;
    long stall_timeout_ms = 30000;
    bool path_style = true;

    // The URL of the bucket: "http://127.0.0.1:9000/b" path-style, "https://b.s3.eu-west-1.amazonaws.com"
    // virtual-host. Virtual-host over https with a bucket whose name has a '.' fails the check of AWS's wildcard
    // certificate: such a bucket needs CKPT_S3_ADDRESSING_PATH (AUTO does not switch by itself).
    std::string bucket_url() const;
    // bucket_url() + "/" + the key URI-encoded as SigV4 requires (each byte outside A-Z a-z 0-9 - . _ ~ as %XX
    // uppercase, '/' kept), so that the path sent is the canonical URI that is signed.
    std::string object_url(const std::string& key) const;
    // The key of a ckpt path: prefix + "/" + path, "" and "." meaning the prefix itself, with empty and "."
    // segments dropped (no leading, trailing or doubled '/'). ".." is kept: to S3 it is a name like any other.
    std::string key_of(const std::string& path) const;
};

// Thrown by resolve_config.
struct ConfigError {
    int code;             // CKPT_EINVAL, or CKPT_EFORMAT for an AWS file that cannot be parsed
    std::string message;  // names the field, variable or file (with its line) and the problem
};

// Resolves `opts`: each field that is NULL, "" or 0 takes its value from the environment, then from the profile
// in the AWS files, then from its default (ckpt/ckpt_s3.h). `getenv` returns nullptr for an unset variable; an
// empty variable counts as unset. The files are AWS_SHARED_CREDENTIALS_FILE (default $HOME/.aws/credentials) and
// AWS_CONFIG_FILE (default $HOME/.aws/config), a leading "~/" meaning $HOME; a file that does not exist is no error,
// and without HOME there are no default files. A profile's setting is taken from the credentials file before the
// config file, its credentials as a set (key id, secret and token from the same file).
Config resolve_config(const ckpt_s3_options& opts, const std::function<const char*(const char*)>& getenv);

// Percent-encodes every byte outside A-Z a-z 0-9 - . _ ~ as %XX (uppercase hex), and '/' too unless keep_slash:
// keys in paths keep their '/', query values do not.
std::string uri_encode(const std::string& s, bool keep_slash);

// Whether this library knows the options struct of `version` (1 to CKPT_S3_OPTIONS_VERSION).
bool known_options_version(uint32_t version);

// Fills *opts with CKPT_S3_OPTIONS_INIT: every field unset, so that every value comes from its usual source.
void options_init(ckpt_s3_options* opts);

}  // namespace ckpt::s3
