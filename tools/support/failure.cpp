// SPDX-License-Identifier: Apache-2.0
#include "failure.hpp"

#include "checkpoint_dir.hpp"
#include "location.hpp"

#include <cerrno>
#include <cstring>
#include <new>

namespace ckpt_tool {
namespace {

// libckpt's words when it cannot load libckpt_s3 for an s3:// path (capi/url_storage.cpp).
constexpr char kNoS3Library[] = "s3:// paths need libckpt_s3";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "s3://bucket/key" -> "s3://bucket/" and "key" ("s3://bucket" -> "s3://bucket/" and "").
std::pair<std::string, std::string> split_url(const std::string& url) {
    const size_t slash = url.find('/', 5);
    if (slash == std::string::npos) return {url + "/", ""};
    return {url.substr(0, slash + 1), url.substr(slash + 1)};
}

// The library's message about `url`, with the URL where it names the URL's key.
std::string url_message(std::string message, const std::string& url) {
    const auto [root, key] = split_url(url);
    if (!key.empty() && starts_with(message, key) &&
        (key.back() == '/' || message.size() == key.size() || message[key.size()] == ':' || message[key.size()] == '/'))
        message = root + message;
    return message;
}

}  // namespace

int exit_code_for(int ckpt_code) {
    switch (ckpt_code) {
        case CKPT_OK: return kExitOk;
        case CKPT_EFORMAT:
        case CKPT_EUNSUPPORTED: return kExitDifferent;
        case CKPT_ENOTFOUND:
        case CKPT_EIO:
        case CKPT_EBUSY:
        case CKPT_EEXIST: return kExitIo;
        default: return kExitInternal;
    }
}

int code_for_exit(int exit_code) {
    switch (exit_code) {
        case kExitOk: return CKPT_OK;
        case kExitDifferent: return CKPT_EFORMAT;
        case kExitUsage: return CKPT_EINVAL;
        case kExitIo: return CKPT_EIO;
        default: return CKPT_ERROR;
    }
}

const char* code_name(int ckpt_code) {
    switch (ckpt_code) {
        case CKPT_OK: return "CKPT_OK";
        case CKPT_EINVAL: return "CKPT_EINVAL";
        case CKPT_ENOTFOUND: return "CKPT_ENOTFOUND";
        case CKPT_EFORMAT: return "CKPT_EFORMAT";
        case CKPT_EIO: return "CKPT_EIO";
        case CKPT_ENOMEM: return "CKPT_ENOMEM";
        case CKPT_EMISMATCH: return "CKPT_EMISMATCH";
        case CKPT_EUNSUPPORTED: return "CKPT_EUNSUPPORTED";
        case CKPT_EBUSY: return "CKPT_EBUSY";
        case CKPT_EEXIST: return "CKPT_EEXIST";
        case CKPT_EBUFS: return "CKPT_EBUFS";
        default: return "CKPT_ERROR";
    }
}

bool needs_s3_library(const std::string& message) { return message.find(kNoS3Library) != std::string::npos; }

int exit_code_of(int ckpt_code, const std::string& message) {
    if (ckpt_code == CKPT_EUNSUPPORTED && needs_s3_library(message)) return kExitInternal;
    return exit_code_for(ckpt_code);
}

std::string ckpt_message(int rc, const std::string& path) {
    std::string message = ckpt_error_message();
    if (message.empty()) message = ckpt_strerror(rc);
    if (is_url(path)) {
        message = url_message(std::move(message), path);
        // A message that starts with a URL this one is under (libckpt_s3 not loaded for the log directory, say)
        // is about this path too.
        const std::string named = message.substr(0, message.find(": "));
        if (named.size() < message.size() && is_url(named) &&
            (path == named || starts_with(path, named.back() == '/' ? named : named + "/")))
            return message;
    }
    if (!starts_with(message, path + ": ")) message = path + ": " + message;
    return message;
}

void fail_ckpt(int rc, const std::string& path) {
    const std::string message = ckpt_message(rc, path);
    throw Failure(exit_code_of(rc, message), message, rc);
}

void fail_errno(int err, const std::string& path, const std::string& what) {
    throw Failure(err == ENOMEM ? kExitInternal : kExitIo, path + ": " + what + ": " + std::strerror(err),
                  err == ENOMEM   ? CKPT_ENOMEM
                  : err == ENOENT ? CKPT_ENOTFOUND
                                  : CKPT_EIO);
}

std::string without_path(const std::string& full, const std::string& path) {
    if (starts_with(full, path + ": ")) return full.substr(path.size() + 2);
    return full;
}

int open_exit_code(int ckpt_code, const std::string& message) {
    return ckpt_code == CKPT_EINVAL ? kExitIo : exit_code_of(ckpt_code, message);
}

namespace {

// The Failure of ckpt_reader_open's `rc` for `path`, made right after the call: a directory gets a hint at ls and
// verify.
[[noreturn]] void fail_open(int rc, const std::string& path) {
    const std::string message = ckpt_message(rc, path);
    // On S3 only a missing object can be a directory: a prefix of other keys.
    const bool directory = is_url(path) ? rc == CKPT_ENOTFOUND && path_kind(path, true) != PathKind::file
                                        : path_kind(path) != PathKind::file;
    if (directory)
        throw Failure(kExitIo, path + ": is a directory (ckpt ls and ckpt verify take a checkpoint directory)",
                      CKPT_EINVAL);
    throw Failure(open_exit_code(rc, message), message, rc);
}

}  // namespace

Reader open_reader(const std::string& path, const ckpt_options* opts) {
    ckpt_reader* npz = nullptr;
    const int rc = ckpt_reader_open(&npz, path.c_str(), opts);
    if (rc != CKPT_OK) fail_open(rc, path);
    return Reader(npz);
}

unsigned char* Scratch::get(size_t size) {
    if (size > size_) {
        bytes_.reset();
        bytes_.reset(new unsigned char[size]);  // default-initialised: no pass over the memory before the read
        size_ = size;
    }
    return bytes_.get();
}

}  // namespace ckpt_tool
