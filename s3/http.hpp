// SPDX-License-Identifier: Apache-2.0
// S3 requests over libcurl: signed with SigV4 (sigv4.hpp: what is signed is what is sent), connections reused,
// transient failures retried with exponential backoff and full jitter, every failure told as "<what>: <why>" naming
// the bucket, key, HTTP status and S3 error code.
#pragma once

#include "config.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ckpt::s3 {

// A failed request: a CKPT_* code (CKPT_EIO, CKPT_ENOTFOUND) and the message for ckpt_error_set_message.
struct RequestError {
    int code;
    std::string message;
};

struct Request {
    const char* method = "GET";
    std::string key;                     // "" = the bucket itself
    std::string query;                   // "a=1&b=2", names and values URI-encoded (sent sorted); "" for none
    std::vector<std::string> headers;    // "Name: value"
    const void* body = nullptr;          // PUT/POST body
    size_t body_size = 0;
    // A GET of a byte range straight into memory: `range_size` bytes at `range_offset` into `dst` (the response
    // must hold exactly them). Otherwise the response body is kept in Response::body.
    void* dst = nullptr;
    uint64_t range_offset = 0;
    size_t range_size = 0;
    bool not_found_is_error = true;      // false: a 404 is returned to the caller (status 404), not thrown
};

struct Response {
    long status = 0;
    std::string body;
    std::string etag;                    // the ETag header, quotes included
    std::string last_modified;           // the Last-Modified header
    uint64_t content_length = 0;
};

class Client {
public:
    explicit Client(Config config);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    const Config& config() const { return config_; }
    // Performs the request, retrying transient failures; throws RequestError. `what` names the operation for
    // messages: "PUT", "upload part 3 of", ...
    Response perform(const Request& request, const char* what);
    // "s3://bucket/key" (or the bucket alone) for messages.
    std::string describe(const std::string& key) const;

private:
    // What a 403 with S3 error `code` says to the user: the credentials, region and endpoint used, and what to check.
    std::string refusal_hint(const std::string& code) const;
    void* take_handle();
    void give_back(void* handle);

    Config config_;
    std::mutex mutex_;
    std::vector<void*> idle_;            // CURL easy handles (their connections stay open)
};

}  // namespace ckpt::s3
