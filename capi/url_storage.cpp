// SPDX-License-Identifier: Apache-2.0
#include "url_storage.hpp"

#include "guard.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ckpt::capi {

namespace {

using S3FromUrl = int (*)(ckpt_storage**, const char*, const void*, const char**);

const std::string kLibrary = "libckpt_s3.so." + std::to_string(CKPT_VERSION_MAJOR);

struct S3Library {
    S3FromUrl from_url = nullptr;
    std::string searched;  // where it was looked for, and why it failed, for the message
};

const S3Library& s3_library() {
    static S3Library lib;
    static std::once_flag once;
    std::call_once(once, [] {
        // CKPT_S3_LIBRARY when set; then beside this libckpt (an installed prefix or a build tree); then wherever
        // the loader looks.
        const char* chosen = std::getenv("CKPT_S3_LIBRARY");
        std::string beside;
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(&ckpt_version_number), &info) != 0 && info.dli_fname != nullptr) {
            const std::string self = info.dli_fname;
            const size_t slash = self.rfind('/');
            if (slash != std::string::npos) beside = self.substr(0, slash + 1) + kLibrary;
        }
        for (const std::string& name : {std::string(chosen != nullptr ? chosen : ""), beside, std::string(kLibrary)}) {
            if (name.empty()) continue;
            void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (handle == nullptr) {
                const char* why = dlerror();
                lib.searched += (lib.searched.empty() ? "" : "; ") + std::string(why != nullptr ? why : name);
                continue;
            }
            lib.from_url = reinterpret_cast<S3FromUrl>(dlsym(handle, "ckpt_storage_s3_new_url"));
            if (lib.from_url != nullptr) return;  // kept loaded for the process's life
            lib.searched += (lib.searched.empty() ? "" : "; ") + name + " has no ckpt_storage_s3_new_url";
            dlclose(handle);
        }
    });
    return lib;
}

}  // namespace

Located locate(const ckpt_storage* storage, const char* path) {
    if (storage != nullptr || std::strncmp(path, "s3://", 5) != 0) return {storage_of(storage), path, ""};
    const S3Library& lib = s3_library();
    if (lib.from_url == nullptr)
        fail(Code::unsupported, "{}: s3:// paths need libckpt_s3, which could not be loaded ({})", path, lib.searched);
    ckpt_storage* s3 = nullptr;
    const char* key = nullptr;
    if (const int rc = lib.from_url(&s3, path, nullptr, &key); rc != CKPT_OK)
        fail(static_cast<Code>(rc), "{}", ckpt_error_message());
    std::string prefix(path, static_cast<size_t>(key - path));
    if (prefix.back() != '/') prefix += '/';  // "s3://bucket", the bucket's root
    Located located{s3->storage, key, std::move(prefix)};
    ckpt_storage_free(s3);
    return located;
}

}  // namespace ckpt::capi
