// SPDX-License-Identifier: Apache-2.0
// Files of a storage: stat, list, remove and read any file, for programs' own filesystem objects (a writer's `fs`).
#include "guard.hpp"
#include "url_storage.hpp"

#include <algorithm>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::core::Code;

struct ckpt_file {
    std::shared_ptr<ckpt::core::Storage> storage;  // kept alive as long as the file
    std::unique_ptr<ckpt::core::InputFile> input;
};

namespace {

// The path as the user gave it, for messages: an s3:// URL stays one.
std::string shown(const ckpt::capi::Located& at) { return at.url_prefix + at.path; }

}  // namespace

extern "C" {

CKPT_API int ckpt_storage_stat(ckpt_storage* storage, const char* path, ckpt_file_info* info) {
    return guard([&] {
        require(path, "ckpt_storage_stat", "path");
        require(info, "ckpt_storage_stat", "info");
        const ckpt::capi::Located at = ckpt::capi::locate(storage, path);
        const std::optional<ckpt::core::FileInfo> found = at.storage->stat(at.path);
        if (!found) ckpt::core::fail(Code::not_found, "{}: no such file or directory", shown(at));
        *info = ckpt_file_info{found->size, found->modified_ns.value_or(CKPT_TIME_UNKNOWN), found->is_dir ? 1u : 0u, 0};
    });
}

CKPT_API int ckpt_storage_shared_bytes(ckpt_storage* storage, const char* path, uint64_t* shared) {
    return guard([&] {
        require(path, "ckpt_storage_shared_bytes", "path");
        require(shared, "ckpt_storage_shared_bytes", "shared");
        const ckpt::capi::Located at = ckpt::capi::locate(storage, path);
        const std::optional<uint64_t> found = at.storage->shared_bytes(at.path);
        if (!found) {
            if (!at.storage->stat(at.path)) ckpt::core::fail(Code::not_found, "{}: no such file", shown(at));
            ckpt::core::fail(Code::unsupported, "{}: this storage cannot tell which bytes files share", shown(at));
        }
        *shared = *found;
    });
}

CKPT_API int ckpt_storage_list(ckpt_storage* storage, const char* dir, ckpt_list_entry_fn entry, void* ctx) {
    int stopped = CKPT_OK;
    const int rc = guard([&] {
        require(dir, "ckpt_storage_list", "dir");
        require(reinterpret_cast<const void*>(entry), "ckpt_storage_list", "entry");
        const ckpt::capi::Located at = ckpt::capi::locate(storage, dir);
        ckpt::core::Storage::Entries entries = at.storage->list_entries(at.path);
        std::vector<std::string> names = std::move(entries.files);
        for (std::string& d : entries.dirs) names.push_back(d + '/');
        std::sort(names.begin(), names.end());
        for (const std::string& name : names)
            if ((stopped = entry(name.c_str(), ctx)) != CKPT_OK) return;
    });
    return rc != CKPT_OK ? rc : stopped;
}

CKPT_API int ckpt_storage_make_dirs(ckpt_storage* storage, const char* dir) {
    return guard([&] {
        require(dir, "ckpt_storage_make_dirs", "dir");
        const ckpt::capi::Located at = ckpt::capi::locate(storage, dir);
        at.storage->make_dirs(at.path);
    });
}

CKPT_API int ckpt_storage_remove(ckpt_storage* storage, const char* path, uint32_t flags) {
    return guard([&] {
        require(path, "ckpt_storage_remove", "path");
        if ((flags & ~CKPT_STORAGE_REMOVE_RECURSIVE) != 0)
            ckpt::core::fail(Code::invalid, "ckpt_storage_remove: unknown flags {:#x}", flags);
        const ckpt::capi::Located at = ckpt::capi::locate(storage, path);
        const std::optional<ckpt::core::FileInfo> found = at.storage->stat(at.path);
        if (!found) ckpt::core::fail(Code::not_found, "{}: no such file or directory", shown(at));
        if (!found->is_dir) return at.storage->remove(at.path);
        if ((flags & CKPT_STORAGE_REMOVE_RECURSIVE) == 0) {
            const ckpt::core::Storage::Entries entries = at.storage->list_entries(at.path);
            if (!entries.files.empty() || !entries.dirs.empty())
                ckpt::core::fail(Code::exists,
                                 "{}: the directory is not empty (CKPT_STORAGE_REMOVE_RECURSIVE removes it "
                                 "with everything in it)",
                                 shown(at));
        }
        at.storage->remove_tree(at.path);
    });
}

CKPT_API int ckpt_file_open(ckpt_file** out, ckpt_storage* storage, const char* path, uint64_t* size) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_file_open", "out");
        require(path, "ckpt_file_open", "path");
        ckpt::capi::Located at = ckpt::capi::locate(storage, path);
        auto file = std::make_unique<ckpt_file>();
        file->input = at.storage->open_read(at.path);
        file->storage = std::move(at.storage);
        if (size != nullptr) *size = file->input->size();
        *out = file.release();
    });
}

CKPT_API int ckpt_file_read(ckpt_file* file, uint64_t offset, void* dst, size_t size, size_t* got) {
    if (got != nullptr) *got = 0;
    return guard([&] {
        require(file, "ckpt_file_read", "file");
        require(got, "ckpt_file_read", "got");
        if (size > 0) require(dst, "ckpt_file_read", "dst");
        *got = file->input->read_at(offset, dst, size);  // short only at the end of the file
    });
}

CKPT_API void ckpt_file_close(ckpt_file* file) { delete file; }

}  // extern "C"
