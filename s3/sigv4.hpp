// SPDX-License-Identifier: Apache-2.0
// AWS Signature Version 4 for S3, computed here rather than by libcurl: libcurl before 8.3 signs a header that an
// application set empty to suppress it (`Expect:`) but does not send it, and its canonical query and path differ
// between versions, so a strict server (AWS, Ceph's RGW) refused every request. Here every header that is signed is
// one the request sends, exactly as signed. Written from AWS's published algorithm; HMAC-SHA256 and SHA-256 are
// OpenSSL's.
#pragma once

#include <cstddef>
#include <ctime>
#include <optional>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

namespace ckpt::s3 {

// The payload hash S3 accepts in place of the body's SHA-256 (the body is then not covered by the signature; ckpt's
// CRCs check it, and TCP and TLS carry it).
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct SigningRequest {
    std::string method;       // "GET", "PUT", ...
    std::string path;         // the path as sent, already URI-encoded: "/bucket/a%20b/c.npz"
    std::string query;        // the query as sent: "a=1&b=2" (canonical_query's output), "" for none
    // Every header the request sends that is to be signed, host included ("host", "127.0.0.1:9000"); names in any
    // case. Headers that the transport adds by itself (Content-Length, Expect, User-Agent, Accept) are not signed.
    std::vector<std::pair<std::string, std::string>> headers;
    std::string payload_hash = kUnsignedPayload;  // the x-amz-content-sha256 value, which must be among headers
    std::string amz_date;     // "20130524T000000Z", the x-amz-date value, which must be among headers
    std::string region;
    std::string access_key_id;
    std::string secret_access_key;
};

// The query's pairs ("name=value", "&"-separated, already URI-encoded) sorted by name then value, each with its
// '=' ("uploads" becomes "uploads="): the form that is signed, and so the form to send.
std::string canonical_query(const std::string& query);

// "YYYYMMDDTHHMMSSZ" of a time (UTC).
std::string amz_date(std::time_t when);

// The time an HTTP-date in IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT", what S3 sends as Last-Modified)
// names, in nanoseconds since the Unix epoch; nullopt for anything else.
std::optional<int64_t> http_date_ns(std::string_view text);

// Lowercase hex SHA-256 of bytes.
std::string sha256_hex(const void* data, size_t size);

// SigV4's canonical request of `r`, its string to sign, and the Authorization header's value
// ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...").
std::string canonical_request(const SigningRequest& r);
std::string string_to_sign(const SigningRequest& r);
std::string authorization(const SigningRequest& r);

}  // namespace ckpt::s3
