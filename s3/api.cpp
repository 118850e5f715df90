// SPDX-License-Identifier: Apache-2.0
// The C functions of ckpt_s3.h.
#include "ckpt/ckpt_s3.h"
#include "ckpt/sys/errors.h"

#include "config.hpp"
#include "http.hpp"
#include "storage.hpp"
#include "versioned.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

// Runs body, which returns a CKPT_* code; what it throws becomes the thread's ckpt error.
template <typename Body>
int guarded(Body&& body) noexcept {
    try {
        return body();
    } catch (const ckpt::s3::ConfigError& e) {
        return ckpt_error_set(e.code, e.message.c_str());
    } catch (const ckpt::s3::RequestError& e) {
        return ckpt_error_set(e.code, e.message.c_str());
    } catch (const std::bad_alloc&) {
        return ckpt_error_set(CKPT_ENOMEM, "out of memory");
    } catch (const std::exception& e) {
        return ckpt_error_set(CKPT_ERROR, e.what());
    } catch (...) {
        return ckpt_error_set(CKPT_ERROR, "unexpected internal failure");
    }
}

const char* environment(const char* name) { return std::getenv(name); }

constexpr ckpt::capi::VersionedStruct<ckpt_s3_options, 2> kS3Options{
    {offsetof(ckpt_s3_options, retry_window_ms), sizeof(ckpt_s3_options)}};
static_assert(kS3Options.current == CKPT_S3_OPTIONS_VERSION && kS3Options.consistent());
constexpr ckpt_s3_options kS3Defaults = CKPT_S3_OPTIONS_INIT;

int unknown_version(const char* function, const char* what, uint32_t version) {
    return ckpt_error_set(CKPT_EINVAL,
                          ckpt::capi::unknown_version(function, what, version, kS3Options.current).c_str());
}

}  // namespace

extern "C" {

CKPT_S3_API int ckpt_s3_options_init(ckpt_s3_options* opts, uint32_t version) {
    if (opts == nullptr) return ckpt_error_set(CKPT_EINVAL, "ckpt_s3_options_init: opts is NULL");
    if (!kS3Options.known(version)) return unknown_version("ckpt_s3_options_init", "", version);
    kS3Options.init(opts, version, kS3Defaults);
    return CKPT_OK;
}

CKPT_S3_API int ckpt_storage_s3_new(ckpt_storage** out, const ckpt_s3_options* opts) {
    if (out != nullptr) *out = nullptr;
    if (out == nullptr) return ckpt_error_set(CKPT_EINVAL, "ckpt_storage_s3_new: out is NULL");
    if (opts == nullptr) return ckpt_error_set(CKPT_EINVAL, "ckpt_storage_s3_new: opts is NULL (a bucket is needed)");
    if (!kS3Options.known(opts->version)) return unknown_version("ckpt_storage_s3_new", "options", opts->version);
    return guarded([&] {
        *out = ckpt::s3::new_storage(ckpt::s3::resolve_config(kS3Options.upgrade(*opts, kS3Defaults), environment));
        return CKPT_OK;
    });
}

CKPT_S3_API int ckpt_storage_s3_new_url(ckpt_storage** out, const char* url, const ckpt_s3_options* opts,
                                        const char** path) {
    if (out != nullptr) *out = nullptr;
    if (out == nullptr || url == nullptr || path == nullptr)
        return ckpt_error_set(CKPT_EINVAL, "ckpt_storage_s3_new_url: out, url and path must not be NULL");
    return guarded([&] {
        constexpr std::string_view kScheme = "s3://";
        const std::string_view u(url);
        if (u.substr(0, kScheme.size()) != kScheme || u.size() == kScheme.size() || u[kScheme.size()] == '/')
            return ckpt_error_set(CKPT_EINVAL, (std::string(url) + ": not an s3://<bucket>[/<key>] URL").c_str());
        const size_t slash = u.find('/', kScheme.size());
        const std::string bucket(u.substr(kScheme.size(), slash == std::string_view::npos ? std::string_view::npos
                                                                                           : slash - kScheme.size()));
        if (opts != nullptr && !kS3Options.known(opts->version))
            return unknown_version("ckpt_storage_s3_new_url", "options", opts->version);
        ckpt_s3_options o = opts != nullptr ? kS3Options.upgrade(*opts, kS3Defaults) : kS3Defaults;
        o.bucket = bucket.c_str();
        o.prefix = nullptr;
        *out = ckpt::s3::new_storage(ckpt::s3::resolve_config(o, environment));
        *path = slash == std::string_view::npos ? url + u.size() : url + slash + 1;
        return CKPT_OK;
    });
}

}  // extern "C"
