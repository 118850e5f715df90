// SPDX-License-Identifier: Apache-2.0
#include "storage.hpp"

#include "http.hpp"
#include "listing.hpp"
#include "sigv4.hpp"
#include "xml.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

namespace ckpt::s3 {

namespace {

constexpr std::string_view kTempMarker = ".tmp-";
constexpr uint64_t kMinPart = uint64_t{5} << 20;  // S3's smallest part but the last
constexpr size_t kTempRandomChars = 6;  // ckpt's temporaries: ".<name>.tmp-XXXXXX" beside <name>

// The file a temporary stands for: "dir/.x.npz.tmp-AbC123" -> "dir/x.npz"; the path itself for other names.
std::string target_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    const size_t start = slash == std::string::npos ? 0 : slash + 1;
    const std::string name = path.substr(start);
    const size_t min = 1 + 1 + kTempMarker.size() + kTempRandomChars;
    if (name.size() < min || name[0] != '.') return path;
    const size_t marker = name.size() - kTempRandomChars - kTempMarker.size();
    if (name.compare(marker, kTempMarker.size(), kTempMarker) != 0) return path;
    return path.substr(0, start) + name.substr(1, marker - 1);
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

class Store;

// Bytes [at, at + size) of an object, in a buffer kept for the next window (not zeroed: fetched over at once).
struct Window {
    std::unique_ptr<char[]> bytes;
    size_t size = 0, capacity = 0;
    uint64_t at = 0;

    bool holds(uint64_t offset) const { return offset >= at && offset < at + size; }
    void resize(size_t n) {
        if (n > capacity) {
            bytes.reset(new char[n]);
            capacity = n;
        }
        size = n;
    }
};

// An object being read, pinned to the version it opened. ckpt reads a file's structure in small pieces (the end
// record, the directory, local headers between arrays) and arrays one after the other: a read smaller than a part
// fetches a part-sized window of the object around it, which serves the reads that follow, so a file of many
// members costs a few large GETs, not one per member.
struct Reading {
    std::string key;
    std::string etag;
    uint64_t size = 0;
    Window window;  // what small reads are served from
    Window tail;    // the file's end (its directory), kept apart so that reading it does not drop the window
    // A reader going on through the object has the window after this one fetched meanwhile, on a thread of its
    // own, so that ranges are in flight while it reads. Joined before `ahead` is used, and at close.
    Window ahead;
    std::thread fetching;

    ~Reading() { wait_ahead(); }
    void wait_ahead() {
        if (fetching.joinable()) fetching.join();
    }
};

// A part of an upload waiting for a worker: bytes to send, or a range of an existing object to copy on the server
// (UploadPartCopy).
struct Part {
    unsigned number = 0;
    std::string bytes;
    std::string source, source_etag;  // the key and version of the object to copy from, for a copy
    uint64_t offset = 0, size = 0;    // the range to copy
};

// A file being written: straight to its final key, in one PUT at the commit or as a multipart upload whose parts
// go up in the background while ckpt writes the next ones.
class Upload {
public:
    Upload(Store& store, std::string path, std::string key);
    ~Upload() { stop_workers(true); }

    void write(const char* data, size_t n);
    void sync();       // every byte is uploaded (as parts) or held for the commit's PUT
    void finish();     // close: no more writes; waits for the parts in flight
    void commit();     // makes the object visible under its key
    void abort();      // leaves nothing behind (aborts the multipart upload)
    // Appends n bytes, `data`, which are bytes [offset, offset + n) of `source` too: as a part the server copies
    // from the source (UploadPartCopy) where it can, else written. Returns how many were copied.
    uint64_t clone_from(const Reading& source, uint64_t offset, uint64_t n, const char* data);

    const std::string key;
    const std::string path;

private:
    void send_part(bool last);
    void queue_part(Part part);
    void copy_part(const Part& part, std::string* etag);
    void begin();
    void worker();
    void stop_workers(bool discard);  // discard: parts not yet sent are dropped
    void wait_idle(std::unique_lock<std::mutex>& lock);
    void rethrow_locked();

    Store& store_;
    std::string buffer_;        // the part being filled
    std::string upload_id_;     // once the multipart upload has begun
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Part> queue_;    // parts waiting for a worker
    unsigned in_flight_ = 0;    // queued or being sent
    unsigned parts_ = 0;        // numbered so far
    std::vector<std::string> etags_;
    std::optional<RequestError> error_;
    std::vector<std::thread> workers_;
    bool stopping_ = false;
};

class Store {
public:
    explicit Store(Config config) : client(std::move(config)) {}
    ~Store() {
        // A file created and never renamed or removed (its program gave up): abort it, so no parts stay billed.
        for (auto& [path, upload] : pending_) {
            try {
                upload->abort();
            } catch (...) {
            }
        }
    }

    Upload* create(const std::string& path) {
        auto upload = std::make_unique<Upload>(*this, path, client.config().key_of(target_of(path)));
        if (upload->key.empty())
            throw RequestError{CKPT_EINVAL, client.describe("") + " is the bucket itself, not an object"};
        std::lock_guard<std::mutex> lock(mutex_);
        if (pending_.count(path) != 0) throw RequestError{CKPT_EEXIST, path + " is being written already"};
        Upload* u = upload.get();
        pending_.emplace(path, std::move(upload));
        return u;
    }

    // The upload of `path`, no longer pending (nullptr if there is none).
    std::unique_ptr<Upload> take(const std::string& path) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = pending_.find(path);
        if (it == pending_.end()) return nullptr;
        std::unique_ptr<Upload> u = std::move(it->second);
        pending_.erase(it);
        return u;
    }

    // The multipart uploads this storage's saves have begun and not yet completed or aborted: what
    // list_incomplete and abort_incomplete leave alone.
    void own(const std::string& upload_id) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_ids_.insert(upload_id);
    }
    void disown(const std::string& upload_id) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_ids_.erase(upload_id);
    }
    bool owns(const std::string& upload_id) {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_ids_.count(upload_id) != 0;
    }

    Client client;
    // Whether the server copies parts (UploadPartCopy): unknown until a save first asks it to.
    enum class Copies { unknown, yes, no };
    std::atomic<Copies> copies{Copies::unknown};

private:
    std::mutex mutex_;
    std::map<std::string, std::unique_ptr<Upload>> pending_;  // by ckpt's path of the file, until rename/remove
    std::set<std::string> live_ids_;
};

Upload::Upload(Store& store, std::string path_, std::string key_) : key(std::move(key_)), path(std::move(path_)), store_(store) {}

void Upload::rethrow_locked() {
    if (error_) throw *error_;
}

void Upload::begin() {
    Request r;
    r.method = "POST";
    r.key = key;
    r.query = "uploads=";
    const Response response = store_.client.perform(r, "start multipart upload of");
    std::string id, why;
    for_each_leaf(
        response.body,
        [&](const std::string& p, std::string& text) {
            if (p == "InitiateMultipartUploadResult/UploadId") id = std::move(text);
        },
        &why);
    if (id.empty())
        throw RequestError{CKPT_EIO, "start multipart upload of " + store_.client.describe(key) +
                                         ": the answer names no upload id" + (why.empty() ? "" : " (" + why + ")")};
    upload_id_ = id;
    store_.own(id);
    const unsigned n = std::max(1u, store_.client.config().parallelism);
    for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { worker(); });
}

void Upload::worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        Part part = std::move(queue_.front());
        queue_.pop_front();
        const unsigned number = part.number;
        const bool skip = error_.has_value();  // the upload is lost anyway
        lock.unlock();
        std::optional<RequestError> failed;
        std::string etag;
        if (!skip) {
            try {
                if (!part.source.empty()) {
                    copy_part(part, &etag);
                } else {
                    Request r;
                    r.method = "PUT";
                    r.key = key;
                    r.query = "partNumber=" + std::to_string(number) + "&uploadId=" + uri_encode(upload_id_, false);
                    r.body = part.bytes.data();
                    r.body_size = part.bytes.size();
                    const std::string what = "upload part " + std::to_string(number) + " of";
                    etag = store_.client.perform(r, what.c_str()).etag;
                    if (etag.empty())
                        failed = RequestError{CKPT_EIO,
                                              what + " " + store_.client.describe(key) + ": the answer has no ETag"};
                }
            } catch (const RequestError& e) {
                failed = e;
            } catch (const std::bad_alloc&) {
                failed = RequestError{CKPT_ENOMEM, "out of memory"};
            }
        }
        part.bytes = std::string();
        lock.lock();
        if (failed && !error_) error_ = std::move(failed);
        if (!failed && !skip) {
            if (etags_.size() < number) etags_.resize(number);
            etags_[number - 1] = std::move(etag);
        }
        --in_flight_;
        changed_.notify_all();
    }
}

void Upload::wait_idle(std::unique_lock<std::mutex>& lock) {
    changed_.wait(lock, [this] { return in_flight_ == 0; });
}

void Upload::stop_workers(bool discard) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        if (discard) {
            in_flight_ -= static_cast<unsigned>(queue_.size());
            queue_.clear();
        }
    }
    changed_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

void Upload::send_part(bool last) {
    Part part;
    part.bytes = std::move(buffer_);
    buffer_ = std::string();
    queue_part(std::move(part));
    if (!last) buffer_.reserve(store_.client.config().part_size);
}

void Upload::queue_part(Part part) {
    if (upload_id_.empty()) begin();
    std::unique_lock<std::mutex> lock(mutex_);
    rethrow_locked();
    if (parts_ == 10000)
        throw RequestError{CKPT_EIO, "upload " + store_.client.describe(key) +
                                         ": more than S3's 10000 parts; use a larger part_size"};
    // Bounded memory: at most `parallelism` parts in flight besides the one being filled.
    const unsigned limit = std::max(1u, store_.client.config().parallelism);
    changed_.wait(lock, [&] { return in_flight_ < limit || error_.has_value(); });
    rethrow_locked();
    part.number = ++parts_;
    queue_.push_back(std::move(part));
    ++in_flight_;
    changed_.notify_all();
}

// UploadPartCopy: the server copies the part from the source object, as it was when it was opened (If-Match).
void Upload::copy_part(const Part& part, std::string* etag) {
    const Config& config = store_.client.config();
    Request r;
    r.method = "PUT";
    r.key = key;
    r.query = "partNumber=" + std::to_string(part.number) + "&uploadId=" + uri_encode(upload_id_, false);
    r.headers.push_back("x-amz-copy-source: " + uri_encode(config.bucket + "/" + part.source, true));
    r.headers.push_back("x-amz-copy-source-range: bytes=" + std::to_string(part.offset) + "-" +
                        std::to_string(part.offset + part.size - 1));
    if (!part.source_etag.empty()) r.headers.push_back("x-amz-copy-source-if-match: " + part.source_etag);
    const std::string what = "copy part " + std::to_string(part.number) + " of";
    const Response response = store_.client.perform(r, what.c_str());
    std::string why;
    for_each_leaf(
        response.body,
        [&](const std::string& p, std::string& text) {
            if (p == "CopyPartResult/ETag") *etag = std::move(text);
        },
        &why);
    if (etag->empty())
        throw RequestError{CKPT_EIO, what + " " + store_.client.describe(key) + ": the answer names no ETag" +
                                         (why.empty() ? "" : " (" + why + ")")};
}

uint64_t Upload::clone_from(const Reading& source, uint64_t offset, uint64_t n, const char* data) {
    // Bytes buffered before the run go first, as a part of at least S3's minimum: topped up with the run's first
    // bytes where they are fewer. The rest is copied if it makes a part of the minimum size too.
    const uint64_t top_up = buffer_.empty() || buffer_.size() >= kMinPart ? 0 : kMinPart - buffer_.size();
    if (store_.copies == Store::Copies::no || n < top_up + kMinPart) {
        write(data, static_cast<size_t>(n));
        return 0;
    }
    if (parts_ + 2 > 10000) {  // a copy and the buffered part before it
        write(data, static_cast<size_t>(n));
        return 0;
    }
    Part copy;
    copy.source = source.key;
    copy.source_etag = source.etag;
    copy.offset = offset + top_up;
    copy.size = n - top_up;
    std::string etag;
    if (store_.copies == Store::Copies::unknown) {
        // The first copy this storage asks for is made here, so that where the server does not copy parts the bytes
        // are written instead. Numbered after the buffered part, as it will be.
        if (upload_id_.empty()) begin();
        copy.number = parts_ + (buffer_.empty() ? 1 : 2);
        try {
            copy_part(copy, &etag);
        } catch (const RequestError& e) {
            if (e.code != CKPT_EUNSUPPORTED) throw;
            store_.copies = Store::Copies::no;  // a part uploaded under its number later replaces whatever it made
            write(data, static_cast<size_t>(n));
            return 0;
        }
        store_.copies = Store::Copies::yes;
    }
    if (!buffer_.empty()) {
        buffer_.append(data, static_cast<size_t>(top_up));
        send_part(false);
    }
    if (etag.empty()) {
        queue_part(std::move(copy));
    } else {
        std::lock_guard<std::mutex> lock(mutex_);
        rethrow_locked();
        ++parts_;
        if (etags_.size() < parts_) etags_.resize(parts_);
        etags_[parts_ - 1] = std::move(etag);
    }
    return n - top_up;
}

void Upload::write(const char* data, size_t n) {
    const size_t part = store_.client.config().part_size;
    while (n > 0) {
        // A full part goes only when more bytes follow: a file of exactly part_size bytes is still one PUT.
        if (buffer_.size() == part) send_part(false);
        const size_t take = std::min(n, part - buffer_.size());
        buffer_.append(data, take);
        data += take;
        n -= take;
    }
}

void Upload::sync() {
    if (!upload_id_.empty() && !buffer_.empty()) send_part(true);
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock);
    rethrow_locked();
}

void Upload::finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock);
    rethrow_locked();
}

void Upload::commit() {
    if (upload_id_.empty()) {
        Request r;
        r.method = "PUT";
        r.key = key;
        r.body = buffer_.data();
        r.body_size = buffer_.size();
        store_.client.perform(r, "PUT");
        return;
    }
    sync();
    stop_workers(false);
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags_.size(); ++i)
        body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + xml_escape(etags_[i]) +
                "</ETag></Part>";
    body += "</CompleteMultipartUpload>";
    Request r;
    r.method = "POST";
    r.key = key;
    r.query = "uploadId=" + uri_encode(upload_id_, false);
    r.headers.push_back("Content-Type: application/xml");
    r.body = body.data();
    r.body_size = body.size();
    store_.client.perform(r, "complete multipart upload of");
    store_.disown(upload_id_);
}

void Upload::abort() {
    stop_workers(true);
    if (upload_id_.empty()) return;
    Request r;
    r.method = "DELETE";
    r.key = key;
    r.query = "uploadId=" + uri_encode(upload_id_, false);
    r.not_found_is_error = false;  // already gone
    store_.client.perform(r, "abort multipart upload of");
    store_.disown(upload_id_);
    upload_id_.clear();
}

constexpr size_t kMinPiece = size_t{1} << 20;    // a window's ranges in parallel, none smaller than this
constexpr size_t kBackWindow = size_t{2} << 20;  // the end of a file: its directory, for most checkpoints

void get_range(Client& client, const Reading& f, uint64_t offset, void* dst, size_t n) {
    Request r;
    r.key = f.key;
    if (!f.etag.empty()) r.headers.push_back("If-Match: " + f.etag);
    r.dst = dst;
    r.range_offset = offset;
    r.range_size = n;
    client.perform(r, "GET");
}

// Runs f, mapping what it throws to a CKPT_* code with its message for the ckpt call that made the callback.
template <typename F>
int callback(F&& f) noexcept {
    try {
        f();
        return CKPT_OK;
    } catch (const RequestError& e) {
        ckpt_error_set_message(e.message.c_str());
        return e.code;
    } catch (const std::bad_alloc&) {
        return CKPT_ENOMEM;
    } catch (const std::exception& e) {
        ckpt_error_set_message(e.what());
        return CKPT_ERROR;
    } catch (...) {
        return CKPT_ERROR;
    }
}

Store& store_of(void* payload) { return *static_cast<Store*>(payload); }

int op_make_dirs(void*, const char*) { return CKPT_OK; }  // directories are prefixes of keys

int op_create(void* payload, const char* path, void** file) {
    return callback([&] { *file = store_of(payload).create(path); });
}

int op_write(void*, void* file, const void* data, size_t size) {
    return callback([&] { static_cast<Upload*>(file)->write(static_cast<const char*>(data), size); });
}

int op_sync(void*, void* file) {
    return callback([&] { static_cast<Upload*>(file)->sync(); });
}

int op_close(void*, void* file) {
    return callback([&] { static_cast<Upload*>(file)->finish(); });
}

int op_rename(void* payload, const char* from, const char* to) {
    return callback([&] {
        Store& s = store_of(payload);
        std::unique_ptr<Upload> upload = s.take(from);
        const std::string to_key = s.client.config().key_of(to);
        if (upload && upload->key == to_key) {
            try {
                upload->commit();
            } catch (...) {
                try {
                    upload->abort();
                } catch (...) {
                }
                throw;
            }
            return;
        }
        if (upload) {
            upload->abort();
            throw RequestError{CKPT_EUNSUPPORTED, "rename " + std::string(from) + " to " + to +
                                                      ": an upload in progress can only be committed under the name it "
                                                      "stands for (" + upload->key + ")"};
        }
        // ckpt renames only the temporaries it created; an object has no rename on S3 (a copy is not atomic).
        throw RequestError{CKPT_EUNSUPPORTED, "rename " + std::string(from) + " to " + to +
                                                  ": S3 renames nothing; only a file being written is committed"};
    });
}

int op_remove(void* payload, const char* path) {
    return callback([&] {
        Store& s = store_of(payload);
        if (std::unique_ptr<Upload> upload = s.take(path)) {
            upload->abort();
            return;
        }
        Request r;
        r.method = "DELETE";
        r.key = s.client.config().key_of(path);
        s.client.perform(r, "DELETE");
    });
}

int op_list(void* payload, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
    std::vector<std::string> names;
    const int rc = callback([&] { list(store_of(payload).client, dir, &names, nullptr); });
    if (rc != CKPT_OK) return rc;
    for (const std::string& n : names)
        if (const int stop = entry(n.c_str(), ctx); stop != 0) return stop;
    return CKPT_OK;
}

int op_list_dirs(void* payload, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
    std::vector<std::string> names;
    const int rc = callback([&] { list(store_of(payload).client, dir, nullptr, &names); });
    if (rc != CKPT_OK) return rc;
    for (const std::string& n : names)
        if (const int stop = entry(n.c_str(), ctx); stop != 0) return stop;
    return CKPT_OK;
}

// The incomplete uploads under `prefix` but those this storage's own saves have under way.
std::vector<IncompleteUpload> stale_uploads(Store& store, const std::string& prefix) {
    std::vector<IncompleteUpload> found = incomplete_uploads(store.client, prefix);
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const IncompleteUpload& u) { return store.owns(u.upload_id); }),
                found.end());
    return found;
}

int op_list_incomplete(void* payload, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
    std::vector<std::string> names;
    const int rc = callback([&] {
        Store& store = store_of(payload);
        std::string prefix = store.client.config().key_of(dir);
        if (!prefix.empty()) prefix += '/';
        for (const IncompleteUpload& u : stale_uploads(store, prefix)) {
            std::string name = u.key.substr(prefix.size());
            if (!name.empty() && (names.empty() || names.back() != name)) names.push_back(std::move(name));
        }
    });
    if (rc != CKPT_OK) return rc;
    for (const std::string& n : names)
        if (const int stop = entry(n.c_str(), ctx); stop != 0) return stop;
    return CKPT_OK;
}

int op_abort_incomplete(void* payload, const char* path) {
    return callback([&] {
        Store& store = store_of(payload);
        const std::string key = store.client.config().key_of(path);
        if (key.empty()) throw RequestError{CKPT_EINVAL, store.client.describe("") + " is the bucket itself, not an object"};
        for (const IncompleteUpload& u : stale_uploads(store, key)) {
            if (u.key != key) continue;  // a longer key with this one as its prefix
            Request r;
            r.method = "DELETE";
            r.key = key;
            r.query = "uploadId=" + uri_encode(u.upload_id, false);
            r.not_found_is_error = false;  // gone meanwhile
            store.client.perform(r, "abort multipart upload of");
        }
    });
}

int op_list_entries(void* payload, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
    std::vector<std::string> files, dirs;
    const int rc = callback([&] {
        list(store_of(payload).client, dir, &files, &dirs);
        for (std::string& d : dirs) files.push_back(d + "/");
    });
    if (rc != CKPT_OK) return rc;
    for (const std::string& n : files)
        if (const int stop = entry(n.c_str(), ctx); stop != 0) return stop;
    return CKPT_OK;
}

int op_open_read(void* payload, const char* path, void** file, uint64_t* size) {
    return callback([&] {
        Client& client = store_of(payload).client;
        Request r;
        r.method = "HEAD";
        r.key = client.config().key_of(path);
        if (r.key.empty())
            throw RequestError{CKPT_EINVAL, client.describe("") + " is the bucket itself, not an object"};
        r.not_found_is_error = false;
        const Response response = client.perform(r, "HEAD");
        if (response.status == 404) {
            // A HEAD's answer has no body to say what is missing: a GET's says NoSuchKey or NoSuchBucket.
            Request get;
            get.key = r.key;
            get.headers.push_back("Range: bytes=0-0");
            client.perform(get, "GET");
            throw RequestError{CKPT_EIO, "HEAD " + client.describe(r.key) +
                                             ": HTTP 404, yet the object is there (it was being replaced)"};
        }
        auto f = std::make_unique<Reading>();
        f->key = r.key;
        f->etag = response.etag;
        f->size = response.content_length;
        *size = f->size;
        *file = f.release();
    });
}

int op_stat(void* payload, const char* path, ckpt_file_info* info) {
    return callback([&] {
        Client& client = store_of(payload).client;
        const std::string key = client.config().key_of(path);
        *info = ckpt_file_info{0, CKPT_TIME_UNKNOWN, 1, 0};
        if (key.empty()) return;  // the bucket's root
        Request r;
        r.method = "HEAD";
        r.key = key;
        r.not_found_is_error = false;
        const Response response = client.perform(r, "HEAD");
        if (response.status != 404) {
            info->is_dir = 0;
            info->size = response.content_length;
            info->modified_ns = http_date_ns(response.last_modified).value_or(CKPT_TIME_UNKNOWN);
        } else if (!any_key_under(client, key + "/")) {
            throw RequestError{CKPT_ENOTFOUND, client.describe(key) + ": no such object or prefix"};
        }
    });
}

// Fetches bytes [offset, offset + n) into dst in ranges of `piece` bytes, up to `parallelism` at a time, the
// calling thread taking its share.
void fetch(Client& client, const Reading& f, uint64_t offset, char* dst, size_t n, size_t piece) {
    const size_t pieces = (n + piece - 1) / piece;
    const unsigned threads = static_cast<unsigned>(std::min<size_t>(pieces, std::max(1u, client.config().parallelism)));
    if (threads <= 1) return get_range(client, f, offset, dst, n);
    std::atomic<size_t> next{0};
    std::mutex m;
    std::optional<RequestError> failed;
    auto run = [&] {
        for (size_t i; (i = next.fetch_add(1)) < pieces;) {
            {
                std::lock_guard<std::mutex> lock(m);
                if (failed) return;
            }
            const size_t at = i * piece;
            try {
                get_range(client, f, offset + at, dst + at, std::min(piece, n - at));
            } catch (const RequestError& e) {
                std::lock_guard<std::mutex> lock(m);
                if (!failed) failed = e;
            } catch (const std::bad_alloc&) {
                std::lock_guard<std::mutex> lock(m);
                if (!failed) failed = RequestError{CKPT_ENOMEM, "out of memory"};
            }
        }
    };
    std::vector<std::thread> helpers;
    try {
        for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(run);
    } catch (...) {
        // fewer threads: the ones started and this one read it all
    }
    run();
    for (std::thread& t : helpers) t.join();
    if (failed) throw *failed;
}

// Fetches `span` bytes at `at` into w, in ranges of at least kMinPiece bytes, up to `parallelism` at a time.
void fetch_window(Client& client, const Reading& f, uint64_t at, size_t span, Window& w) {
    const size_t parallel = std::max(1u, client.config().parallelism);
    w.resize(span);
    w.at = at;
    try {
        fetch(client, f, at, w.bytes.get(), span, std::max(kMinPiece, (span + parallel - 1) / parallel));
    } catch (...) {
        w.size = 0;  // holds nothing
        throw;
    }
}

// Fetches the window that holds the bytes from offset on of a read of n bytes, and returns it: for a read that
// reaches the file's end (opening reads the end record first, then the directory before it), the tail, kBackWindow
// bytes ending with it, so that opening a large file does not fetch array data it will read again; elsewhere
// part_size bytes from the read on (restores read on). A reader that has gone on from one window to the next has
// the one after (part_size bytes, or what is left of the file) fetched on a thread while it reads this one, which
// serves its reads that reach the file's end too (a read elsewhere, such as one array of a file, fetches nothing
// ahead). When that fetch failed, the window is fetched again here, which retries or says why.
const Window& fill_window(Client& client, Reading& f, uint64_t offset, size_t n) {
    const size_t part = static_cast<size_t>(client.config().part_size);
    const uint64_t end = f.window.at + f.window.size;
    const bool going_on = f.window.size != 0 && offset >= end && offset - end < part;
    f.wait_ahead();
    if (f.ahead.holds(offset)) {
        std::swap(f.window, f.ahead);
    } else if (offset + n == f.size) {
        const uint64_t span = std::min<uint64_t>(f.size, std::max<uint64_t>(n, kBackWindow));
        fetch_window(client, f, f.size - span, static_cast<size_t>(span), f.tail);
        return f.tail;
    } else {
        const uint64_t span = std::min<uint64_t>(f.size, part);
        fetch_window(client, f, std::min(offset, f.size - span), static_cast<size_t>(span), f.window);
        if (!going_on) return f.window;
    }
    f.ahead.size = 0;
    const uint64_t next = f.window.at + f.window.size;
    if (next >= f.size) return f.window;
    const size_t span = static_cast<size_t>(std::min<uint64_t>(part, f.size - next));
    try {
        f.ahead.resize(span);  // allocated here: a thread that cannot allocate has nothing to report with
        f.fetching = std::thread([&client, &f, next, span] {
            try {
                fetch_window(client, f, next, span, f.ahead);
            } catch (...) {
                // It holds nothing: the reader fetches that window itself, and hears why it fails.
            }
        });
    } catch (const std::exception&) {
        f.ahead.size = 0;  // no memory or no thread for it: the next window is fetched when it is read
    }
    return f.window;
}

int op_read_at(void* payload, void* file, uint64_t offset, void* dst, size_t size, size_t* got) {
    return callback([&] {
        Client& client = store_of(payload).client;
        Reading& f = *static_cast<Reading*>(file);
        *got = 0;
        if (offset >= f.size) return;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(size, f.size - offset));
        const size_t part = static_cast<size_t>(client.config().part_size);
        if (n >= part) {
            // A large read: straight into place, its ranges in parallel.
            fetch(client, f, offset, static_cast<char*>(dst), n, part);
        } else {
            // From the window; a read that goes on past its end takes the rest from the next one.
            for (size_t done = 0; done < n;) {
                const uint64_t at = offset + done;
                const Window& w = f.tail.holds(at)     ? f.tail
                                  : f.window.holds(at) ? f.window
                                                       : fill_window(client, f, at, n - done);
                const size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, w.at + w.size - at));
                std::memcpy(static_cast<char*>(dst) + done, w.bytes.get() + (at - w.at), k);
                done += k;
            }
        }
        *got = n;
    });
}

void op_close_read(void*, void* file) { delete static_cast<Reading*>(file); }

int op_clone_range(void*, void* file, void* source, uint64_t offset, uint64_t size, const void* data,
                   uint64_t* shared) {
    return callback([&] {
        *shared = static_cast<Upload*>(file)->clone_from(*static_cast<const Reading*>(source), offset, size,
                                                         static_cast<const char*>(data));
    });
}

void op_destroy(void* payload) { delete static_cast<Store*>(payload); }

}  // namespace

ckpt_storage* new_storage(Config config) {
    auto store = std::make_unique<Store>(std::move(config));
    ckpt_storage_ops ops{};
    ops.version = CKPT_STORAGE_OPS_VERSION;
    ops.payload = store.get();
    ops.make_dirs = op_make_dirs;
    ops.create = op_create;
    ops.write = op_write;
    ops.sync = op_sync;
    ops.close = op_close;
    ops.rename = op_rename;
    ops.remove = op_remove;
    ops.list = op_list;
    ops.open_read = op_open_read;
    ops.read_at = op_read_at;
    ops.close_read = op_close_read;
    ops.destroy = op_destroy;
    ops.list_dirs = op_list_dirs;
    ops.list_incomplete = op_list_incomplete;
    ops.abort_incomplete = op_abort_incomplete;
    ops.list_entries = op_list_entries;
    ops.stat = op_stat;
    ops.clone_range = op_clone_range;
    ckpt_storage* out = nullptr;
    const int rc = ckpt_storage_new(&out, &ops);
    if (rc != CKPT_OK) throw RequestError{rc, ckpt_error_message()};
    store.release();  // the storage owns it now: op_destroy deletes it
    return out;
}

}  // namespace ckpt::s3
