// SPDX-License-Identifier: Apache-2.0
#include "guard.hpp"

namespace {
thread_local std::string t_message;
thread_local bool t_message_lost = false;  // set when storing the message itself ran out of memory
thread_local std::string t_callback_message;  // ckpt_error_set_message's, until a callback failure takes it
}  // namespace

namespace ckpt::capi {

void set_error(const char* message) noexcept {
    try {
        t_message.assign(message);
        t_message_lost = false;
    } catch (...) {
        t_message_lost = true;
    }
}

void forget_callback_message() noexcept {
    if (!t_callback_message.empty()) t_callback_message.clear();
}

std::string take_callback_message() {
    std::string own;
    own.swap(t_callback_message);
    return own;
}

[[noreturn]] void callback_failed(int rc, const std::string& what) {
    const Code code = rc < 0 ? static_cast<Code>(rc) : Code::error;
    const std::string own = take_callback_message();
    if (!own.empty()) fail(code, "{} failed: {}", what, own);
    fail(code, "{} failed: {} ({})", what, ckpt_strerror(static_cast<int>(code)), rc);
}

}  // namespace ckpt::capi

extern "C" {

CKPT_API void ckpt_error_set_message(const char* message) {
    try {
        if (message == nullptr)
            t_callback_message.clear();
        else
            t_callback_message.assign(message);
    } catch (...) {
        t_callback_message.clear();  // out of memory: the failure is still reported, by its code
    }
}

CKPT_API int ckpt_error_set(int code, const char* message) {
    ckpt::capi::set_error(message != nullptr ? message : "");
    return code;
}

CKPT_API const char* ckpt_error_message(void) { return t_message_lost ? "out of memory" : t_message.c_str(); }

CKPT_API const char* ckpt_strerror(int code) {
    switch (code) {
        case CKPT_OK: return "success";
        case CKPT_ERROR: return "unexpected internal failure";
        case CKPT_EINVAL: return "invalid argument";
        case CKPT_ENOTFOUND: return "not found";
        case CKPT_EFORMAT: return "malformed or corrupt file";
        case CKPT_EIO: return "storage failure";
        case CKPT_ENOMEM: return "out of memory";
        case CKPT_EMISMATCH: return "variables missing or dtype/shape differ";
        case CKPT_EUNSUPPORTED: return "unsupported content";
        case CKPT_EBUSY: return "checkpoint directory is locked";
        case CKPT_EEXIST: return "name already present";
        case CKPT_EBUFS: return "buffer too small";
        default: return "unknown error code";
    }
}

}
