// SPDX-License-Identifier: Apache-2.0
// ckpt_storage: the C face of ckpt::core::Storage, and the adapter that turns a C callback table into one.
#include "guard.hpp"
#include "versioned.hpp"
#include "storage/memory_storage.hpp"

#include <cstddef>
#include <cstring>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::capi::unknown_version;
using ckpt::core::Code;

namespace {

[[noreturn]] void fail_callback(int rc, const char* op, const std::string& path) {
    ckpt::capi::callback_failed(rc, fmt::format("{}: storage callback '{}'", path, op));
}

class CallbackInput;

class CallbackOutput final : public ckpt::core::OutputFile {
public:
    CallbackOutput(const ckpt_storage_ops& ops, void* file, std::string path)
        : ops_(ops), file_(file), path_(std::move(path)) {}
    ~CallbackOutput() override {
        if (file_ != nullptr) ops_.close(ops_.payload, file_);
    }
    void write(const void* data, size_t n) override {
        if (int rc = ops_.write(ops_.payload, file_, data, n)) fail_callback(rc, "write", path_);
    }
    void sync() override {
        if (int rc = ops_.sync(ops_.payload, file_)) fail_callback(rc, "sync", path_);
    }
    void close() override {
        void* file = file_;
        file_ = nullptr;
        if (int rc = ops_.close(ops_.payload, file)) fail_callback(rc, "close", path_);
    }
    uint64_t clone_from(ckpt::core::InputFile& source, uint64_t offset, uint64_t n, const void* data) override;
    bool may_share() const override { return ops_.clone_range != nullptr; }

private:
    const ckpt_storage_ops& ops_;
    void* file_;
    std::string path_;
};

class CallbackInput final : public ckpt::core::InputFile {
public:
    CallbackInput(const ckpt_storage_ops& ops, void* file, uint64_t size, std::string path)
        : ops_(ops), file_(file), size_(size), path_(std::move(path)) {}
    ~CallbackInput() override { ops_.close_read(ops_.payload, file_); }
    uint64_t size() const override { return size_; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        size_t got = 0;
        if (int rc = ops_.read_at(ops_.payload, file_, offset, dst, n, &got)) fail_callback(rc, "read_at", path_);
        if (got > n)
            ckpt::core::fail(Code::io, "{}: storage callback 'read_at' reported {} bytes for {}", path_, got, n);
        return got;
    }
    // The callback's handle, for clone_range on a file of the same table.
    void* handle(const ckpt_storage_ops& ops) const { return &ops == &ops_ ? file_ : nullptr; }

private:
    const ckpt_storage_ops& ops_;
    void* file_;
    uint64_t size_;
    std::string path_;
};

uint64_t CallbackOutput::clone_from(ckpt::core::InputFile& source, uint64_t offset, uint64_t n, const void* data) {
    const auto* from = dynamic_cast<const CallbackInput*>(&source);
    void* handle = from != nullptr ? from->handle(ops_) : nullptr;
    if (ops_.clone_range == nullptr || handle == nullptr) return OutputFile::clone_from(source, offset, n, data);
    uint64_t shared = 0;
    if (int rc = ops_.clone_range(ops_.payload, file_, handle, offset, n, data, &shared))
        fail_callback(rc, "clone_range", path_);
    if (shared > n)
        ckpt::core::fail(Code::io, "{}: storage callback 'clone_range' reported {} bytes shared of {}", path_, shared,
                         n);
    return shared;
}

class CallbackStorage final : public ckpt::core::Storage {
public:
    explicit CallbackStorage(const ckpt_storage_ops& ops) : ops_(ops) {}
    ~CallbackStorage() override {
        if (ops_.destroy != nullptr) ops_.destroy(ops_.payload);
    }

    void make_dirs(const std::string& dir) override {
        if (int rc = ops_.make_dirs(ops_.payload, dir.c_str())) fail_callback(rc, "make_dirs", dir);
    }
    std::unique_ptr<ckpt::core::OutputFile> create_temp(const std::string& target, std::string* temp_path) override {
        for (int attempt = 0;; ++attempt) {
            std::string temp = ckpt::core::join_path(ckpt::core::parent_dir(target),
                                                     ckpt::core::temp_name_for(ckpt::core::base_name(target)));
            void* file = nullptr;
            const int rc = ops_.create(ops_.payload, temp.c_str(), &file);
            if (rc == CKPT_EEXIST && attempt < 100) continue;
            if (rc != 0) fail_callback(rc, "create", temp);
            *temp_path = temp;
            return std::make_unique<CallbackOutput>(ops_, file, std::move(temp));
        }
    }
    std::unique_ptr<ckpt::core::OutputFile> open_append(const std::string& path) override {
        if (ops_.open_append == nullptr) ckpt::core::fail(Code::unsupported, "{}: this storage cannot append", path);
        void* file = nullptr;
        if (int rc = ops_.open_append(ops_.payload, path.c_str(), &file)) fail_callback(rc, "open_append", path);
        return std::make_unique<CallbackOutput>(ops_, file, path);
    }
    void rename(const std::string& from, const std::string& to) override {
        if (int rc = ops_.rename(ops_.payload, from.c_str(), to.c_str())) fail_callback(rc, "rename", to);
    }
    void sync_dir(const std::string& dir) override {
        if (ops_.sync_dir == nullptr) return;
        if (int rc = ops_.sync_dir(ops_.payload, dir.c_str())) fail_callback(rc, "sync_dir", dir);
    }
    void remove(const std::string& path) override {
        if (int rc = ops_.remove(ops_.payload, path.c_str())) fail_callback(rc, "remove", path);
    }
    std::vector<std::string> list(const std::string& dir) override { return names(ops_.list, "list", dir); }
    std::unique_ptr<ckpt::core::InputFile> open_read(const std::string& path) override {
        void* file = nullptr;
        uint64_t size = 0;
        if (int rc = ops_.open_read(ops_.payload, path.c_str(), &file, &size)) fail_callback(rc, "open_read", path);
        return std::make_unique<CallbackInput>(ops_, file, size, path);
    }
    std::optional<ckpt::core::FileInfo> stat(const std::string& path) override {
        if (ops_.stat == nullptr) return Storage::stat(path);
        ckpt_file_info info{0, CKPT_TIME_UNKNOWN, 0, 0};
        const int rc = ops_.stat(ops_.payload, path.c_str(), &info);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        if (rc != CKPT_OK) fail_callback(rc, "stat", path);
        return ckpt::core::FileInfo{
            info.is_dir != 0 ? 0 : info.size,
            info.modified_ns == CKPT_TIME_UNKNOWN ? std::nullopt : std::optional<int64_t>(info.modified_ns),
            info.is_dir != 0};
    }
    bool clones(const std::string&) override { return ops_.clone_range != nullptr; }
    std::optional<uint64_t> free_bytes(const std::string& dir) override {
        if (ops_.free_space == nullptr) return std::nullopt;
        uint64_t bytes = 0;
        const int rc = ops_.free_space(ops_.payload, dir.c_str(), &bytes);
        if (rc == CKPT_EUNSUPPORTED) return std::nullopt;
        if (rc != CKPT_OK) fail_callback(rc, "free_space", dir);
        return bytes;
    }

    std::vector<std::string> list_dirs(const std::string& dir) override {
        if (ops_.list_dirs == nullptr) return Storage::list_dirs(dir);
        return names(ops_.list_dirs, "list_dirs", dir);
    }
    bool renames_dirs() const override { return ops_.rename_dir != nullptr; }
    void rename_dir(const std::string& from, const std::string& to) override {
        if (ops_.rename_dir == nullptr) return Storage::rename_dir(from, to);
        if (int rc = ops_.rename_dir(ops_.payload, from.c_str(), to.c_str())) fail_callback(rc, "rename_dir", to);
    }
    void remove_tree(const std::string& dir) override {
        if (ops_.list_dirs == nullptr) return Storage::remove_tree(dir);
        for (const std::string& name : list_dirs(dir)) remove_tree(ckpt::core::join_path(dir, name));
        for (const std::string& name : list(dir)) remove(ckpt::core::join_path(dir, name));
        if (ops_.remove_dir == nullptr) return;
        if (int rc = ops_.remove_dir(ops_.payload, dir.c_str())) fail_callback(rc, "remove_dir", dir);
    }
    Entries list_entries(const std::string& dir) override {
        if (ops_.list_entries == nullptr) return Storage::list_entries(dir);
        Entries out;
        for (std::string& name : names(ops_.list_entries, "list_entries", dir)) {
            if (!name.empty() && name.back() == '/') {
                name.pop_back();
                out.dirs.push_back(std::move(name));
            } else {
                out.files.push_back(std::move(name));
            }
        }
        return out;
    }
    std::vector<std::string> list_incomplete(const std::string& dir) override {
        if (ops_.list_incomplete == nullptr) return {};
        return names(ops_.list_incomplete, "list_incomplete", dir);
    }
    void abort_incomplete(const std::string& path) override {
        if (ops_.abort_incomplete == nullptr) return;
        if (int rc = ops_.abort_incomplete(ops_.payload, path.c_str())) fail_callback(rc, "abort_incomplete", path);
    }

private:
    using ListFn = int (*)(void*, const char*, ckpt_list_entry_fn, void*);
    std::vector<std::string> names(ListFn fn, const char* what, const std::string& dir) {
        std::vector<std::string> out;
        const auto entry = [](const char* name, void* ctx) -> int {
            try {
                static_cast<std::vector<std::string>*>(ctx)->emplace_back(name);
                return CKPT_OK;
            } catch (...) {
                return CKPT_ENOMEM;
            }
        };
        if (int rc = fn(ops_.payload, dir.c_str(), entry, &out)) fail_callback(rc, what, dir);
        return out;
    }

    const ckpt_storage_ops ops_;
};

constexpr ckpt::capi::VersionedStruct<ckpt_storage_ops, 6> kStorageOps{
    {offsetof(ckpt_storage_ops, free_space), offsetof(ckpt_storage_ops, list_dirs),
     offsetof(ckpt_storage_ops, list_incomplete), offsetof(ckpt_storage_ops, stat),
     offsetof(ckpt_storage_ops, clone_range), sizeof(ckpt_storage_ops)}};
static_assert(kStorageOps.current == CKPT_STORAGE_OPS_VERSION && kStorageOps.consistent());

}  // namespace

namespace ckpt::capi {
std::shared_ptr<Storage> storage_of(const ckpt_storage* s) { return s != nullptr ? s->storage : posix_storage(); }
}  // namespace ckpt::capi

extern "C" {

CKPT_API int ckpt_storage_new(ckpt_storage** out, const ckpt_storage_ops* ops) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_storage_new", "out");
        require(ops, "ckpt_storage_new", "ops");
        if (!kStorageOps.known(ops->version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_storage_new", "ops", ops->version, kStorageOps.current));
        const ckpt_storage_ops copy = kStorageOps.upgrade(*ops, ckpt_storage_ops{});
        const std::pair<const void*, const char*> required[] = {
            {reinterpret_cast<const void*>(copy.make_dirs), "make_dirs"},
            {reinterpret_cast<const void*>(copy.create), "create"},
            {reinterpret_cast<const void*>(copy.write), "write"},
            {reinterpret_cast<const void*>(copy.sync), "sync"},
            {reinterpret_cast<const void*>(copy.close), "close"},
            {reinterpret_cast<const void*>(copy.rename), "rename"},
            {reinterpret_cast<const void*>(copy.remove), "remove"},
            {reinterpret_cast<const void*>(copy.list), "list"},
            {reinterpret_cast<const void*>(copy.open_read), "open_read"},
            {reinterpret_cast<const void*>(copy.read_at), "read_at"},
            {reinterpret_cast<const void*>(copy.close_read), "close_read"},
        };
        for (const auto& [fn, name] : required)
            if (fn == nullptr) ckpt::core::fail(Code::invalid, "ckpt_storage_new: callback '{}' is required", name);
        if (copy.list_dirs == nullptr && (copy.rename_dir != nullptr || copy.remove_dir != nullptr))
            ckpt::core::fail(Code::invalid,
                             "ckpt_storage_new: rename_dir and remove_dir need list_dirs (directories that "
                             "cannot be listed cannot hold sharded checkpoints)");
        *out = new ckpt_storage{std::make_shared<CallbackStorage>(copy)};
    });
}

CKPT_API int ckpt_storage_new_memory(ckpt_storage** out) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_storage_new_memory", "out");
        *out = new ckpt_storage{std::make_shared<ckpt::core::MemoryStorage>()};
    });
}

CKPT_API void ckpt_storage_free(ckpt_storage* storage) { delete storage; }

}
