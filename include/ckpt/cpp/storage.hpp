// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/storage.hpp — ckpt::Storage, the C++ face of ckpt_storage_ops, and the callback table over it.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_STORAGE_HPP
#define CKPT_CPP_STORAGE_HPP

#include <ckpt/cpp/error.hpp>
#include <ckpt/sys/storage.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ckpt {

// ------------------------------------------------------------------------------------------------------- storage

namespace detail {
class StorageRef;
class NativeStorage;
}  // namespace detail

// Where files live: a C++ face of ckpt_storage_ops. Subclass it and override the methods to keep checkpoints in an
// object store, HDFS, memory or behind an encryption layer; pass it as std::shared_ptr<Storage> in the options'
// `storage` fields. ckpt reaches it through the callback table (ckpt_storage_new); every callback catches what
// the method throws and hands ckpt a code: an Error's own code, CKPT_ENOMEM for std::bad_alloc, and CKPT_EIO for
// any other exception, and its what() as the callback's message (ckpt_error_set_message): the Error of the call that
// failed says "<path>: storage callback '<method>' failed: <what()>", whichever thread the method ran on. Throw
// Error(CKPT_ENOTFOUND) for a missing file or directory and Error(CKPT_EEXIST) from create when the path exists: ckpt
// relies on both (create's is an answer, not a failure: ckpt tries another temporary name and drops the message).
//
// Methods may run on a writer's or manager's background thread, concurrently with calls from other threads, so they
// must be thread-safe for different files. The storage lives as long as anything uses it: each user (a Reader, a
// Manager, a Writer, a running save) holds a reference to it.
class Storage {
public:
    // A file being written, as create and open_append return it. ckpt writes it front to back, syncs it, then
    // calls close() exactly once — also after a failure, when the result is ignored — and destroys it.
    class OutputFile {
    public:
        virtual ~OutputFile() = default;
        // Appends size bytes.
        virtual void write(const void* data, size_t size) = 0;
        // Makes the bytes durable. A failed sync is never retried: ckpt discards the file.
        virtual void sync() = 0;
        // Releases the file (commit an upload here); the destructor then runs.
        virtual void close() {}
    };
    // A file opened for reading. ckpt reads it at arbitrary offsets, from one thread at a time, and destroys it to
    // close it (close_read).
    class InputFile {
    public:
        virtual ~InputFile() = default;
        // The file's size in bytes.
        virtual uint64_t size() const = 0;
        // Reads up to size bytes at offset into dst and returns how many; fewer than size only at the end.
        virtual size_t read_at(uint64_t offset, void* dst, size_t size) = 0;
    };

    virtual ~Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    // The storage ckpt keeps in this process's memory (ckpt_storage_new_memory): thread-safe, for tests and for
    // programs that want checkpoint bytes without a filesystem. Make directories before files go in them ("" and
    // "." exist). It is used through ckpt's calls; its methods here throw Error(CKPT_EUNSUPPORTED).
    static std::shared_ptr<Storage> memory();
    // Takes over the caller's reference to a storage made through the C API (ckpt_storage_new, _new_memory); as
    // memory(), it is used through ckpt's calls only.
    static std::shared_ptr<Storage> adopt(ckpt_storage* storage);

    // The operations of ckpt_storage_ops, by the same names. Paths are those ckpt chooses ("dir/name").
    // Creates dir and its missing parents; nothing to do if it exists.
    virtual void make_dirs(const std::string& dir) = 0;
    // Creates a new empty file; Error(CKPT_EEXIST) if anything is at path.
    virtual std::unique_ptr<OutputFile> create(const std::string& path) = 0;
    // Opens path for appending, creating it if missing (Writer saves with SaveOptions::append only). By default
    // appending is unsupported (CKPT_EUNSUPPORTED).
    virtual std::unique_ptr<OutputFile> open_append(const std::string& path);
    // Replaces `to` with `from` atomically.
    virtual void rename(const std::string& from, const std::string& to) = 0;
    // Makes renames and creations in dir durable; by default nothing (a medium without directories).
    virtual void sync_dir(const std::string& dir);
    // Removes a file.
    virtual void remove(const std::string& path) = 0;
    // The names (not paths) of the files in dir, subdirectories left out.
    virtual std::vector<std::string> list(const std::string& dir) = 0;
    // Opens a file for reading.
    virtual std::unique_ptr<InputFile> open_read(const std::string& path) = 0;
    // The bytes a new file in dir may still take, for a Manager's disk check before each save (a save needing
    // more fails with CKPT_EIO, naming both) and its low-space warning; nullopt (the default) when the medium
    // cannot tell: no check is made.
    virtual std::optional<uint64_t> free_space(const std::string& dir);

    // Directories, for sharded checkpoints (a directory of shards and a manifest per step; ckpt_storage_ops
    // version 3). What directories() returns, once, when the storage is handed to ckpt, says which of the three
    // methods below ckpt calls:
    //   none       (the default) files only: sharded saves fail with CKPT_EUNSUPPORTED
    //   prefixes   listed and removed, never renamed (an object store): the manifest written last commits a step
    //   renamable  also renamed atomically: a step's staging directory is renamed into place
    enum class Directories { none, prefixes, renamable };
    virtual Directories directories() const { return Directories::none; }
    // The names (not paths) of the subdirectories of dir.
    virtual std::vector<std::string> list_dirs(const std::string& dir);
    // Removes the empty directory dir; by default nothing (directories that are only prefixes of names).
    virtual void remove_dir(const std::string& dir);
    // Renames directory `from` to `to` (which does not exist) atomically; called for Directories::renamable only.
    virtual void rename_dir(const std::string& from, const std::string& to);

protected:
    Storage() noexcept = default;

private:
    friend class detail::StorageRef;
    friend class detail::NativeStorage;
    ckpt_storage* native_ = nullptr;  // a storage of the library's own (memory, adopted): the caller's reference
};

inline std::unique_ptr<Storage::OutputFile> Storage::open_append(const std::string& path) {
    throw Error(CKPT_EUNSUPPORTED, path + ": this storage cannot append");
}
inline void Storage::sync_dir(const std::string&) {}
inline std::optional<uint64_t> Storage::free_space(const std::string&) { return std::nullopt; }
inline std::vector<std::string> Storage::list_dirs(const std::string& dir) {
    throw Error(CKPT_EUNSUPPORTED, dir + ": this storage has no directories");
}
inline void Storage::remove_dir(const std::string&) {}
inline void Storage::rename_dir(const std::string& from, const std::string& to) {
    throw Error(CKPT_EUNSUPPORTED, to + ": this storage cannot rename directories (from " + from + ")");
}

namespace detail {

// A storage of the library's own. The C++ methods have nothing to call: ckpt.h gives no access to a storage's
// operations, only to the storage as a whole.
class NativeStorage final : public Storage {
public:
    explicit NativeStorage(ckpt_storage* s) noexcept { native_ = s; }
    ~NativeStorage() override { ckpt_storage_free(native_); }

    void make_dirs(const std::string&) override { unsupported(); }
    std::unique_ptr<OutputFile> create(const std::string&) override { unsupported(); }
    std::unique_ptr<OutputFile> open_append(const std::string&) override { unsupported(); }
    void rename(const std::string&, const std::string&) override { unsupported(); }
    void sync_dir(const std::string&) override { unsupported(); }
    void remove(const std::string&) override { unsupported(); }
    std::vector<std::string> list(const std::string&) override { unsupported(); }
    std::unique_ptr<InputFile> open_read(const std::string&) override { unsupported(); }

private:
    [[noreturn]] static void unsupported() {
        throw Error(CKPT_EUNSUPPORTED, "ckpt::Storage: this storage is used through ckpt's calls only");
    }
};

// The callback table over a C++ Storage. The payload holds the storage: its destroy callback deletes the payload,
// so the storage lives exactly as long as the library uses it. Files travel as the OutputFile and InputFile
// objects themselves.
struct StorageCallbacks {
    using Payload = std::shared_ptr<Storage>;
    static Storage& self(void* p) noexcept { return **static_cast<Payload*>(p); }

    // Runs a method for the library: CKPT_OK, or the code of what it threw, whose text the library then puts in
    // its error ("<path>: storage callback 'write' failed: <text>").
    template <typename F>
    static int run(F&& f) noexcept {
        try {
            f();
            return CKPT_OK;
        } catch (...) {
            return current_exception_code(CKPT_EIO);
        }
    }

    static int make_dirs(void* p, const char* dir) noexcept {
        return run([&] { self(p).make_dirs(dir); });
    }
    static int create(void* p, const char* path, void** file) noexcept {
        const int rc = run([&] { *file = checked(self(p).create(path), "create").release(); });
        // An existing path is an answer (ckpt then tries another temporary name), not a failure to explain.
        if (rc == CKPT_EEXIST) ckpt_error_set_message(nullptr);
        return rc;
    }
    static int open_append(void* p, const char* path, void** file) noexcept {
        return run([&] { *file = checked(self(p).open_append(path), "open_append").release(); });
    }
    static Storage::OutputFile& output(void* file) noexcept { return *static_cast<Storage::OutputFile*>(file); }
    static int write(void*, void* file, const void* data, size_t size) noexcept {
        return run([&] { output(file).write(data, size); });
    }
    static int sync(void*, void* file) noexcept {
        return run([&] { output(file).sync(); });
    }
    static int close(void*, void* file) noexcept {
        std::unique_ptr<Storage::OutputFile> out(&output(file));
        return run([&] { out->close(); });
    }
    static int rename(void* p, const char* from, const char* to) noexcept {
        return run([&] { self(p).rename(from, to); });
    }
    static int sync_dir(void* p, const char* dir) noexcept {
        return run([&] { self(p).sync_dir(dir); });
    }
    static int remove(void* p, const char* path) noexcept {
        return run([&] { self(p).remove(path); });
    }
    static int names(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx,
                     std::vector<std::string> (Storage::*method)(const std::string&)) noexcept {
        int rc = CKPT_OK;
        const int thrown = run([&] {
            for (const std::string& name : (self(p).*method)(dir)) {
                rc = entry(name.c_str(), ctx);
                if (rc != 0) return;
            }
        });
        return thrown != CKPT_OK ? thrown : rc;
    }
    static int list(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) noexcept {
        return names(p, dir, entry, ctx, &Storage::list);
    }
    static int list_dirs(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) noexcept {
        return names(p, dir, entry, ctx, &Storage::list_dirs);
    }
    static int remove_dir(void* p, const char* dir) noexcept {
        return run([&] { self(p).remove_dir(dir); });
    }
    static int rename_dir(void* p, const char* from, const char* to) noexcept {
        return run([&] { self(p).rename_dir(from, to); });
    }
    static int open_read(void* p, const char* path, void** file, uint64_t* size) noexcept {
        return run([&] {
            std::unique_ptr<Storage::InputFile> in = checked(self(p).open_read(path), "open_read");
            *size = in->size();
            *file = in.release();
        });
    }
    static int read_at(void*, void* file, uint64_t offset, void* dst, size_t size, size_t* got) noexcept {
        return run([&] { *got = static_cast<Storage::InputFile*>(file)->read_at(offset, dst, size); });
    }
    static void close_read(void*, void* file) noexcept { delete static_cast<Storage::InputFile*>(file); }
    static int free_space(void* p, const char* dir, uint64_t* bytes) noexcept {
        std::optional<uint64_t> free;
        const int rc = run([&] { free = self(p).free_space(dir); });
        if (rc != CKPT_OK) return rc;
        if (!free) return CKPT_EUNSUPPORTED;
        *bytes = *free;
        return CKPT_OK;
    }
    static void destroy(void* p) noexcept { delete static_cast<Payload*>(p); }

    template <typename P>
    static P checked(P file, const char* op) {
        if (!file) throw Error(CKPT_ERROR, std::string("ckpt::Storage::") + op + " returned no file");
        return file;
    }
};

// A ckpt_storage for one use (an options struct): the library's own one, borrowed, or a new callback table over a
// C++ Storage, whose reference this holds until the user of the options has taken its own.
class StorageRef {
public:
    StorageRef() noexcept = default;
    explicit StorageRef(const std::shared_ptr<Storage>& storage) {
        if (!storage) return;
        if (storage->native_ != nullptr) {
            ptr_ = storage->native_;
            return;
        }
        ckpt_storage_ops ops;
        std::memset(&ops, 0, sizeof ops);
        ops.version = CKPT_STORAGE_OPS_VERSION;
        auto payload = std::make_unique<StorageCallbacks::Payload>(storage);
        ops.payload = payload.get();
        ops.make_dirs = &StorageCallbacks::make_dirs;
        ops.create = &StorageCallbacks::create;
        ops.open_append = &StorageCallbacks::open_append;
        ops.write = &StorageCallbacks::write;
        ops.sync = &StorageCallbacks::sync;
        ops.close = &StorageCallbacks::close;
        ops.rename = &StorageCallbacks::rename;
        ops.sync_dir = &StorageCallbacks::sync_dir;
        ops.remove = &StorageCallbacks::remove;
        ops.list = &StorageCallbacks::list;
        ops.open_read = &StorageCallbacks::open_read;
        ops.read_at = &StorageCallbacks::read_at;
        ops.close_read = &StorageCallbacks::close_read;
        ops.destroy = &StorageCallbacks::destroy;
        ops.free_space = &StorageCallbacks::free_space;
        const Storage::Directories dirs = storage->directories();
        if (dirs != Storage::Directories::none) {
            ops.list_dirs = &StorageCallbacks::list_dirs;
            ops.remove_dir = &StorageCallbacks::remove_dir;
        }
        if (dirs == Storage::Directories::renamable) ops.rename_dir = &StorageCallbacks::rename_dir;
        check(ckpt_storage_new(&ptr_, &ops));
        payload.release();  // the storage's destroy callback deletes it now
        owned_ = true;
    }
    ~StorageRef() {
        if (owned_) ckpt_storage_free(ptr_);
    }
    StorageRef(const StorageRef&) = delete;
    StorageRef& operator=(const StorageRef&) = delete;
    ckpt_storage* get() const noexcept { return ptr_; }

private:
    ckpt_storage* ptr_ = nullptr;
    bool owned_ = false;
};

}  // namespace detail

inline std::shared_ptr<Storage> Storage::adopt(ckpt_storage* storage) {
    if (storage == nullptr) throw Error(CKPT_EINVAL, "ckpt::Storage::adopt: storage is NULL");
    try {
        return std::make_shared<detail::NativeStorage>(storage);
    } catch (...) {
        ckpt_storage_free(storage);
        throw;
    }
}

inline std::shared_ptr<Storage> Storage::memory() {
    ckpt_storage* s = nullptr;
    detail::check(ckpt_storage_new_memory(&s));
    return adopt(s);
}

}  // namespace ckpt

#endif  // CKPT_CPP_STORAGE_HPP
