#include "failure.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace ckpt_tool {

int exit_code_for(int ckpt_code) {
    switch (ckpt_code) {
        case CKPT_OK:
            return kExitOk;
        case CKPT_EFORMAT:
        case CKPT_EUNSUPPORTED:
            return kExitDifferent;
        case CKPT_ENOTFOUND:
        case CKPT_EIO:
        case CKPT_EBUSY:
        case CKPT_EEXIST:
            return kExitIo;
        default:
            return kExitInternal;
    }
}

std::string ckpt_message(int rc, const std::string& path) {
    std::string message = ckpt_error_message();
    if (message.empty()) message = ckpt_strerror(rc);
    if (message.compare(0, path.size() + 2, path + ": ") != 0) message = path + ": " + message;
    return message;
}

void fail_ckpt(int rc, const std::string& path) { throw Failure(exit_code_for(rc), ckpt_message(rc, path)); }

void fail_errno(int err, const std::string& path, const std::string& what) {
    throw Failure(err == ENOMEM ? kExitInternal : kExitIo, path + ": " + what + ": " + std::strerror(err));
}

std::string without_path(const std::string& full, const std::string& path) {
    if (full.compare(0, path.size() + 2, path + ": ") == 0) return full.substr(path.size() + 2);
    return full;
}

int open_exit_code(int ckpt_code) { return ckpt_code == CKPT_EINVAL ? kExitIo : exit_code_for(ckpt_code); }

Npz open_npz(const std::string& path, const ckpt_npz_options* opts) {
    ckpt_npz* npz = nullptr;
    const int rc = ckpt_npz_open(&npz, path.c_str(), opts);
    if (rc != CKPT_OK) {
        struct stat st{};
        if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            throw Failure(kExitIo, path + ": is a directory (ckpt ls and ckpt verify take a checkpoint directory)");
        throw Failure(open_exit_code(rc), ckpt_message(rc, path));
    }
    return Npz(npz);
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
