// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/options.hpp — ckpt::Options and the C ckpt_options made of them, with their renamer and progress
 * callbacks. Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_OPTIONS_HPP
#define CKPT_CPP_OPTIONS_HPP

#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/storage.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>

namespace ckpt {

// --------------------------------------------------------------------------------------------------- npz options

// CKPT_LAYOUT_*: how arrays are named inside the file.
enum class Layout : uint32_t {
    automatic = CKPT_LAYOUT_AUTO,  // reading: detect; writing: plain
    plain = CKPT_LAYOUT_PLAIN,     // "<name>.npy" per variable, as np.savez(**vars)
    objax = CKPT_LAYOUT_OBJAX,     // "names.npy" + "0.npy", "1.npy", … as objax.io
};
enum class Compression : uint32_t {
    store = CKPT_STORE,
    deflate = CKPT_DEFLATE,
};
// CKPT_FORMAT_*: the file format.
enum class Format : uint32_t {
    automatic = CKPT_FORMAT_AUTO,           // saving: safetensors for a path ending in ".safetensors", else .npz;
                                            // reading: either, told by the content
    npz = CKPT_FORMAT_NPZ,                  // a zip of .npy members, as numpy.savez writes
    safetensors = CKPT_FORMAT_SAFETENSORS,  // an 8-byte length, a JSON header, the tensors' bytes
};

// ckpt_options. Zero values keep ckpt's defaults.
struct Options {
    Layout layout = Layout::automatic;
    Compression compression = Compression::store;  // writing only
    int32_t level = 0;                             // deflate level 1..9; 0 = zlib's default
    // Restores: the name to look each on-disk name up by (objax's renamer); return the argument to keep it.
    // Throw Error(code) to abort the restore with that code. Called from the restoring thread.
    std::function<std::string(const std::string& name_on_disk)> rename;
    uint64_t max_header_bytes = 0;  // npy header limit per member; 0 = 10000
    // Bytes of array data done out of the total, never decreasing. Called from a thread doing the work (a large
    // read uses several), never from two at once; it must not throw (what it throws is ignored).
    std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
    // Where files are read and written; null = the local filesystem. Managers and writers have their own
    // `storage` option and refuse a different one here (ckpt.h: the C struct's field is ignored there).
    std::shared_ptr<Storage> storage;
    uint64_t max_members = 0;      // zip members per file; 0 = 16777216
    uint64_t max_total_bytes = 0;  // array bytes per file, all arrays together; 0 = no limit
    // Restores (CKPT_PARTIAL): a variable the file does not have is left untouched instead of failing the
    // restore; Vars::restored tells which were filled. One found with another dtype or shape still fails it.
    bool partial = false;
    // Opening: Reader::map skips the CRC-32 check of mapped arrays (CKPT_MAP_UNVERIFIED), trading integrity for
    // latency — for files verified already.
    bool map_unverified = false;
    // Opening: the mapping is copy-on-write (CKPT_MAP_WRITABLE), so the arrays of Reader::map_vars may be written.
    bool map_writable = false;
    // Saves (CKPT_NPZ_CHUNK_HASHES): the hashes of each stored array's 16 KiB chunks go into one more member,
    // "__ckpt_chunks__.npy" (numpy lists it, ckpt's readers hide it), so that a later save can take the file as its
    // base. A deflated save records none.
    bool chunk_hashes = false;
    // ckpt::save: an earlier file, a path in the same storage, whose unchanged chunks this save shares (clones, where
    // the filesystem can: XFS, btrfs) instead of writing them; implies chunk_hashes. The file's bytes are those of a
    // full save with chunk hashes: a base that cannot serve (missing, or without chunk hashes) makes a full save,
    // never an error. "" = none.
    std::string base;
    // What saves write and reads require. A safetensors file has no layouts and no compression, and holds no
    // complex128, string, bytes or void arrays: such a save fails (Error, CKPT_EUNSUPPORTED) before anything is
    // written.
    Format format = Format::automatic;
    // ckpt::save of a safetensors path "DIR/model.safetensors": Hugging Face's sharded layout with at most this many
    // bytes of tensors per shard ("model-00001-of-0000N.safetensors" … and "model.safetensors.index.json", or the
    // one file when everything fits); 0 = one file. Every read takes the index (or the folder) as one checkpoint.
    uint64_t max_shard_bytes = 0;
};

namespace detail {

// What C options point to for the callbacks: copies of the functions, alive as long as the C side may call them.
struct NpzCallbacks {
    std::function<std::string(const std::string&)> rename;
    std::function<void(uint64_t, uint64_t)> progress;
    // The renamer's result for a name whose new name did not fit the buffer: the library asks again with a
    // larger one, and the user's function runs once per name.
    std::string pending_name, pending_result;
    bool pending = false;

    explicit NpzCallbacks(const Options& o) : rename(o.rename), progress(o.progress) {}

    static int rename_fn(const char* name, char* buf, size_t size, void* payload) noexcept {
        auto& cb = *static_cast<NpzCallbacks*>(payload);
        try {
            if (!(cb.pending && cb.pending_name == name)) {
                cb.pending = false;
                cb.pending_result = cb.rename(std::string(name));
                cb.pending_name = name;
            }
            cb.pending = false;
            const std::string& result = cb.pending_result;
            if (result == name) return 0;
            if (result.empty())
                throw Error(CKPT_EINVAL, std::string("the renamer gave an empty name for '") + name + "'");
            if (result.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
                throw Error(CKPT_EINVAL, "the renamer gave a name too long for ckpt");
            if (result.size() > size) {
                cb.pending = true;
                return static_cast<int>(result.size());
            }
            std::memcpy(buf, result.data(), result.size());
            return static_cast<int>(result.size());
        } catch (...) {
            cb.pending = false;
            const Thrown thrown = current_exception(CKPT_ERROR);
            ckpt_error_set_message(thrown.text);  // the library's message then says what the renamer threw
            return thrown.code;
        }
    }
    static void progress_fn(uint64_t done, uint64_t total, void* payload) noexcept {
        try {
            static_cast<NpzCallbacks*>(payload)->progress(done, total);
        } catch (...) {
            // A progress report cannot fail the work it reports on.
        }
    }
};

// ckpt_options for one use, from Options: callbacks pointed at `cb` (which must outlive the C users of the
// struct), the base pointed at o.base (which must outlive them too), and the storage held by `storage` unless the
// caller says the struct's storage is ignored.
struct CNpzOptions {
    ckpt_options c;
    StorageRef storage;

    CNpzOptions(const Options& o, NpzCallbacks* cb, bool with_storage)
        : storage(with_storage ? o.storage : std::shared_ptr<Storage>()) {
        check(ckpt_options_init(&c, CKPT_OPTIONS_VERSION));
        c.layout = static_cast<uint32_t>(o.layout);
        c.compression = static_cast<uint32_t>(o.compression);
        c.level = o.level;
        c.max_header_bytes = o.max_header_bytes;
        c.max_members = o.max_members;
        c.max_total_bytes = o.max_total_bytes;
        c.flags = o.partial ? CKPT_PARTIAL : 0u;
        if (o.map_unverified) c.flags |= CKPT_MAP_UNVERIFIED;
        if (o.map_writable) c.flags |= CKPT_MAP_WRITABLE;
        if (o.chunk_hashes) c.flags |= CKPT_NPZ_CHUNK_HASHES;
        c.base = o.base.empty() ? nullptr : o.base.c_str();
        c.format = static_cast<uint32_t>(o.format);
        c.max_shard_bytes = o.max_shard_bytes;
        c.storage = storage.get();
        if (cb != nullptr && cb->rename) {
            c.rename = &NpzCallbacks::rename_fn;
            c.rename_payload = cb;
        }
        if (cb != nullptr && cb->progress) {
            c.progress = &NpzCallbacks::progress_fn;
            c.progress_payload = cb;
        }
    }
};

// Managers and writers take the storage from their own options (ckpt.h ignores the npz struct's there): a
// different one in the npz options would silently not be used.
inline void refuse_npz_storage(const Options& npz, const std::shared_ptr<Storage>& storage, const char* where) {
    if (npz.storage && npz.storage != storage)
        throw Error(CKPT_EINVAL,
                    std::string(where) + ": the npz options name a storage; give it as the storage option");
}

}  // namespace detail

// Options under its name before 0.11, when ckpt wrote .npz files only.
using NpzOptions = Options;

}  // namespace ckpt

#endif  // CKPT_CPP_OPTIONS_HPP
