// SPDX-License-Identifier: Apache-2.0
#include "http.hpp"

#include "sigv4.hpp"
#include "xml.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <thread>

namespace ckpt::s3 {

namespace {

constexpr size_t kMaxDocumentBytes = size_t{64} << 20;  // S3's XML answers are far smaller

CURLcode global_init() {
    static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    return rc;
}

// One attempt's state, shared with libcurl's callbacks.
struct Transfer {
    const Request* request;
    size_t sent = 0;          // of the request body
    size_t received = 0;      // of a ranged GET into dst
    bool overflow = false;    // the server sent more than was asked
    Response response;
};

size_t read_body(char* buffer, size_t size, size_t count, void* data) {
    auto* t = static_cast<Transfer*>(data);
    const size_t n = std::min(size * count, t->request->body_size - t->sent);
    if (n == 0) return 0;
    std::memcpy(buffer, static_cast<const char*>(t->request->body) + t->sent, n);
    t->sent += n;
    return n;
}

// Where libcurl restarts the body when it resends a request on a new connection.
int seek_body(void* data, curl_off_t offset, int origin) {
    auto* t = static_cast<Transfer*>(data);
    if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->request->body_size) return CURL_SEEKFUNC_FAIL;
    t->sent = static_cast<size_t>(offset);
    return CURL_SEEKFUNC_OK;
}

size_t write_body(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    const Request& r = *t->request;
    // A ranged GET's bytes go to dst, but only those of a successful answer: an error's XML goes to body.
    if (r.dst != nullptr && t->response.status / 100 == 2) {
        if (n > r.range_size - t->received) {
            t->overflow = true;
            return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
        }
        std::memcpy(static_cast<char*>(r.dst) + t->received, data, n);
        t->received += n;
        return n;
    }
    if (t->response.body.size() + n > kMaxDocumentBytes) {
        t->overflow = true;
        return 0;
    }
    t->response.body.append(data, n);
    return n;
}

size_t read_header(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    std::string_view line(data, n);
    if (line.rfind("HTTP/", 0) == 0) {
        // A new response (after a 100 Continue): its status decides where the body goes.
        const size_t space = line.find(' ');
        t->response.status = space == std::string_view::npos ? 0 : std::atol(std::string(line.substr(space + 1, 3)).c_str());
        t->response.etag.clear();
        t->response.last_modified.clear();
        return n;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
    if (name == "etag") t->response.etag = std::string(value);
    if (name == "last-modified") t->response.last_modified = std::string(value);
    return n;
}

bool transient_curl_error(CURLcode rc) {
    switch (rc) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_SEND_FAIL_REWIND:
        case CURLE_PARTIAL_FILE:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_HTTP3:
            return true;
        default:
            return false;
    }
}

// What S3 asks clients to retry: server errors and throttling, by status or by error code.
bool transient_status(long status, const std::string& code) {
    if (status == 500 || status == 502 || status == 503 || status == 504 || status == 429) return true;
    return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" || code == "ServiceUnavailable" ||
           code == "Throttling" || code == "ThrottlingException" || code == "RequestTimeTooSkewed";
}

// Full jitter: a uniform delay in [0, min(cap, base * 2^attempt)], and no later than `until`. A cap of 2 s keeps a
// request retrying about once a second while a gateway restarts, so the save goes on soon after it is back.
void back_off(unsigned attempt, std::chrono::steady_clock::time_point until) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const double base_ms = 50, cap_ms = 2000;
    const double ceiling = std::min(cap_ms, base_ms * static_cast<double>(uint64_t{1} << std::min(attempt, 20u)));
    std::uniform_real_distribution<double> delay(0, ceiling);
    const auto wake =
        std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(delay(rng) * 1000));
    std::this_thread::sleep_until(std::min(wake, until));
}

}  // namespace

std::string Client::refusal_hint(const std::string& code) const {
    const std::string used = "key id '" + config_.access_key_id + "'" +
                             (config_.profile.empty() ? "" : " (profile '" + config_.profile + "')") + ", region '" +
                             config_.region + "', endpoint " + config_.endpoint;
    if (config_.access_key_id.empty())
        return " (the request was not signed: no credentials were found; set AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY, or a profile, for endpoint " + config_.endpoint + ")";
    if (code == "SignatureDoesNotMatch")
        return " (signed with " + used + "; likely causes: a wrong secret access key, a proxy that changes the "
               "request's headers or path, or a clock far from the server's)";
    if (code == "InvalidAccessKeyId") return " (this endpoint does not know the " + used + ")";
    if (code == "RequestTimeTooSkewed") return " (this machine's clock is more than 15 minutes off the server's)";
    if (code.empty())  // a HEAD's answer has no body to name the cause
        return " (signed with " + used + "; a wrong secret access key, or credentials not allowed this request)";
    return " (" + used + ": the credentials are not allowed this request on this bucket and key)";
}

Client::Client(Config config) : config_(std::move(config)) {
    if (global_init() != CURLE_OK) throw RequestError{CKPT_ERROR, "libcurl could not be initialised"};
}

Client::~Client() {
    for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* Client::take_handle() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!idle_.empty()) {
            void* h = idle_.back();
            idle_.pop_back();
            return h;
        }
    }
    CURL* h = curl_easy_init();
    if (h == nullptr) throw std::bad_alloc();
    return h;
}

void Client::give_back(void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
        idle_.push_back(handle);
    } catch (...) {
        curl_easy_cleanup(static_cast<CURL*>(handle));
    }
}

std::string Client::describe(const std::string& key) const {
    return key.empty() ? "s3://" + config_.bucket : "s3://" + config_.bucket + "/" + key;
}

Response Client::perform(const Request& r, const char* what) {
    const std::string base = r.key.empty() ? config_.bucket_url() : config_.object_url(r.key);
    const std::string query = canonical_query(r.query);
    const std::string url = query.empty() ? base : base + "?" + query;
    const std::string subject = std::string(what) + " " + describe(r.key);

    // What is signed is what is sent: the host and path of the URL, the query in its canonical order, and every
    // header below; only those that libcurl adds itself (Content-Length, Accept, ...) are left out, as S3 allows.
    SigningRequest signing;
    const size_t authority = base.find("://") + 3;
    const size_t slash = base.find('/', authority);
    signing.method = r.method;
    signing.path = slash == std::string::npos ? "/" : base.substr(slash);
    signing.query = query;
    signing.region = config_.region;
    signing.access_key_id = config_.access_key_id;
    signing.secret_access_key = config_.secret_access_key;
    auto& sent = signing.headers;
    sent.emplace_back("Host", base.substr(authority, slash - authority));
    for (const std::string& h : r.headers) {
        const size_t colon = h.find(':');
        const size_t value = h.find_first_not_of(' ', colon + 1);
        sent.emplace_back(h.substr(0, colon), value == std::string::npos ? "" : h.substr(value));
    }
    sent.emplace_back("x-amz-content-sha256", signing.payload_hash);
    if (!config_.session_token.empty()) sent.emplace_back("x-amz-security-token", config_.session_token);
    if (r.dst != nullptr)
        sent.emplace_back("Range", "bytes=" + std::to_string(r.range_offset) + "-" +
                                       std::to_string(r.range_offset + r.range_size - 1));
    const bool signs = !config_.access_key_id.empty();
    if (signs) sent.emplace_back("x-amz-date", "");

    // Transient failures are retried until the retry window since the first try is over, or max_attempts were made.
    const auto started = std::chrono::steady_clock::now();
    const auto window_ends = started + std::chrono::milliseconds(std::max(0L, config_.retry_window_ms));
    for (unsigned attempt = 1;; ++attempt) {
        // Signed again for each attempt: a retry after a long backoff carries its own time.
        std::vector<std::string> lines;
        if (signs) {
            signing.amz_date = amz_date(std::time(nullptr));
            sent.back().second = signing.amz_date;
        }
        for (const auto& [name, value] : sent) lines.push_back(name + ": " + value);
        if (signs) lines.push_back("Authorization: " + authorization(signing));
        lines.emplace_back("Expect:");  // no 100-continue round trip before every part; not signed, not sent
        struct curl_slist* headers = nullptr;
        for (const std::string& line : lines) {
            struct curl_slist* more = curl_slist_append(headers, line.c_str());
            if (more == nullptr) {
                curl_slist_free_all(headers);
                throw std::bad_alloc();
            }
            headers = more;
        }
        std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);

        CURL* h = static_cast<CURL*>(take_handle());
        curl_easy_reset(h);
        Transfer t;
        t.request = &r;
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, header_list.get());
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, config_.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, std::max(1L, (config_.stall_timeout_ms + 999) / 1000));
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, read_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
        const std::string_view method = r.method;
        if (method == "HEAD") {
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        } else if (method == "PUT") {
            curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(h, CURLOPT_READFUNCTION, read_body);
            curl_easy_setopt(h, CURLOPT_READDATA, &t);
            curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_body);
            curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body_size));
        } else if (method == "POST") {
            curl_easy_setopt(h, CURLOPT_POST, 1L);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body != nullptr ? static_cast<const char*>(r.body) : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body_size));
        } else if (method != "GET") {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method);
        }

        const CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_off_t length = -1;
        curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        give_back(h);

        std::string why;
        bool transient = false;
        if (t.overflow) {
            why = r.dst != nullptr ? "the server sent more bytes than the range asked for"
                                   : "the server's answer is larger than any S3 document";
        } else if (rc != CURLE_OK) {
            why = curl_easy_strerror(rc);
            transient = transient_curl_error(rc);
        } else {
            t.response.status = status;
            ErrorDocument error;
            // S3 may answer 200 and still report an error in the body (CompleteMultipartUpload does).
            if (status / 100 != 2 || (r.dst == nullptr && t.response.body.find("<Error>") != std::string::npos))
                error = parse_error(t.response.body);
            if (status / 100 == 2 && error.code.empty()) {
                if (r.dst != nullptr && t.received != r.range_size) {
                    why = "the server sent " + std::to_string(t.received) + " of the " + std::to_string(r.range_size) +
                          " bytes asked for";
                    transient = true;
                } else {
                    t.response.content_length = length > 0 ? static_cast<uint64_t>(length) : 0;
                    return std::move(t.response);
                }
            } else if (status == 404 && !r.not_found_is_error) {
                return std::move(t.response);
            } else {
                why = "HTTP " + std::to_string(status);
                if (!error.code.empty()) why += " " + error.code;
                // A HEAD's answer has no body to say which: the object, or the bucket itself.
                else if (status == 404) why += " (no such object, or no such bucket)";
                if (!error.message.empty()) why += ": " + error.message;
                transient = transient_status(status, error.code);
                if (status == 404) throw RequestError{CKPT_ENOTFOUND, subject + ": " + why};
                if (status == 412) why += " (the object changed while it was read)";
                if (status == 403) why += refusal_hint(error.code);
                if (status == 501 || error.code == "NotImplemented")
                    throw RequestError{CKPT_EUNSUPPORTED, subject + ": " + why + " (this S3 server does not implement " +
                                                              "the request; AWS, Ceph's RGW and MinIO do)"};
            }
        }
        const bool out_of_tries = config_.max_attempts != 0 && attempt >= config_.max_attempts;
        if (!transient || out_of_tries || std::chrono::steady_clock::now() >= window_ends) {
            if (transient) {
                const double seconds =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
                char took[32];
                std::snprintf(took, sizeof took, "%.1f", seconds);
                why += " (gave up after " + std::to_string(attempt) + (attempt == 1 ? " attempt" : " attempts") +
                       " in " + took + " s)";
            }
            throw RequestError{CKPT_EIO, subject + ": " + why};
        }
        back_off(attempt, window_ends);
    }
}

}  // namespace ckpt::s3
