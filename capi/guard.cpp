#include "guard.hpp"

namespace {
thread_local std::string t_message;
thread_local bool t_message_lost = false;  // set when storing the message itself ran out of memory
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

[[noreturn]] void callback_failed(int rc, const std::string& what) {
    const Code code = rc < 0 ? static_cast<Code>(rc) : Code::error;
    fail(code, "{} failed: {} ({})", what, ckpt_strerror(static_cast<int>(code)), rc);
}

}  // namespace ckpt::capi

extern "C" {

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
