// SPDX-License-Identifier: Apache-2.0
// ckpt_writer and ckpt_sink: the C face of ckpt::core::Writer.
#include "guard.hpp"
#include "versioned.hpp"
#include "url_storage.hpp"
#include "npz/chunk_base.hpp"
#include "writer/snapshot_pool.hpp"
#include "writer/writer.hpp"

#include <cstddef>
#include <cstring>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::capi::unknown_version;
using ckpt::core::Code;

struct ckpt_writer {
    std::unique_ptr<ckpt::core::Writer> writer;
    std::shared_ptr<ckpt::core::SnapshotPool> snapshots;
    std::string out_dir;
    bool default_storage = true;  // made with a NULL storage: an s3:// path then names the storage of its save
    ckpt_after_save_fn after_save = nullptr;
    void* after_save_payload = nullptr;
};

struct ckpt_sink {
    ckpt::core::OutputFile* out;
    // The first write that failed: the save fails with it whatever the save function then returns, so a
    // function that ignores ckpt_sink_write's result cannot commit a truncated file.
    std::exception_ptr error;
};

namespace {

// Where a save goes: the path, the storage it names (null: the writer's own), and the path as the caller named it
// (an s3:// URL stays one), which the after_save callback is given.
struct Target {
    std::string path;
    std::shared_ptr<ckpt::core::Storage> elsewhere;
    std::string named;
    std::string url_prefix;  // "s3://bucket/" when the path named a bucket, else ""
};

constexpr ckpt::capi::VersionedStruct<ckpt_writer_options, 2> kWriterOptions{
    {offsetof(ckpt_writer_options, after_save), sizeof(ckpt_writer_options)}};
static_assert(kWriterOptions.current == CKPT_WRITER_OPTIONS_VERSION && kWriterOptions.consistent());
constexpr ckpt_writer_options kWriterDefaults = CKPT_WRITER_OPTIONS_INIT;

// What runs once a save is durable (the core writer's `after`, on the thread that ran the save): the writer's
// after_save callback, whose failure becomes the save's error. Null without a callback.
std::function<void()> after_save(const ckpt_writer* w, const std::string& named) {
    if (w->after_save == nullptr) return nullptr;
    return [fn = w->after_save, payload = w->after_save_payload, named] {
        const int rc = fn(named.c_str(), payload);
        if (rc != 0) ckpt::capi::callback_failed(rc, fmt::format("{}: the after_save callback", named));
    };
}

Target target(const ckpt_writer* w, const char* out_dir, const char* filename, const char* function) {
    require(w, function, "w");
    require(filename, function, "filename");
    if (*filename == '\0') ckpt::core::fail(Code::invalid, "{}: filename is empty", function);
    const std::string path = ckpt::core::join_path(out_dir != nullptr ? out_dir : w->out_dir, filename);
    if (!w->default_storage) return {path, nullptr, path, ""};
    ckpt::capi::Located at = ckpt::capi::locate(nullptr, path.c_str());
    if (at.path == path) return {path, nullptr, path, ""};  // the local filesystem: the writer's own storage
    return {std::move(at.path), std::move(at.storage), path, std::move(at.url_prefix)};
}

// Where a save's npz base is in the storage the save goes to, or "" when it is in another one (the save is then a
// full one, as ckpt_save's is). The base is a path as ckpt_save takes it, not one in out_dir: a writer's
// own storage takes it as given; a writer over the local filesystem shares with a local base, or, saving to an
// s3:// URL, with a base in the same bucket.
std::string base_path(const ckpt_writer* w, const Target& to, const char* base) {
    if (base == nullptr) return "";
    if (!w->default_storage) return base;
    if (std::strncmp(base, "s3://", 5) != 0) return to.url_prefix.empty() ? base : "";
    if (to.url_prefix.empty()) return "";
    ckpt::capi::Located from = ckpt::capi::locate(nullptr, base);
    return from.url_prefix == to.url_prefix ? std::move(from.path) : "";
}

}  // namespace

extern "C" {

CKPT_API int ckpt_writer_options_init(ckpt_writer_options* opts, uint32_t version) {
    return guard([&] {
        require(opts, "ckpt_writer_options_init", "opts");
        if (!kWriterOptions.known(version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_writer_options_init", "", version, kWriterOptions.current));
        kWriterOptions.init(opts, version, kWriterDefaults);
    });
}

CKPT_API int ckpt_writer_new(ckpt_writer** out, const ckpt_writer_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_writer_new", "out");
        if (opts != nullptr && !kWriterOptions.known(opts->version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_writer_new", "options", opts->version, kWriterOptions.current));
        const ckpt_writer_options o =
            opts != nullptr ? kWriterOptions.upgrade(*opts, kWriterDefaults) : kWriterDefaults;
        if (o.kind > CKPT_WRITER_QUEUE) ckpt::core::fail(Code::invalid, "ckpt_writer_new: unknown kind {}", o.kind);
        auto w = std::make_unique<ckpt_writer>();
        w->out_dir = o.out_dir != nullptr ? o.out_dir : ".";
        w->default_storage = o.storage == nullptr;
        w->after_save = o.after_save;
        w->after_save_payload = o.after_save_payload;
        w->snapshots = ckpt::core::SnapshotPool::create(o.kind == CKPT_WRITER_QUEUE ? o.queue_depth : 1);
        try {
            w->writer = std::make_unique<ckpt::core::Writer>(static_cast<ckpt::core::Writer::Kind>(o.kind),
                                                             o.queue_depth, ckpt::capi::storage_of(o.storage));
        } catch (const std::system_error& e) {
            ckpt::core::fail(Code::error, "ckpt_writer_new: cannot start the background thread: {}", e.what());
        }
        *out = w.release();
    });
}

CKPT_API int ckpt_writer_save(ckpt_writer* w, const char* out_dir, const char* filename, ckpt_save_fn fn,
                              void* payload, uint32_t flags) {
    return guard([&] {
        Target to = target(w, out_dir, filename, "ckpt_writer_save");
        require(reinterpret_cast<const void*>(fn), "ckpt_writer_save", "fn");
        if ((flags & ~CKPT_WRITER_APPEND) != 0)
            ckpt::core::fail(Code::invalid, "ckpt_writer_save: unknown flags {}", flags);
        w->writer->submit(
            to.path,
            [fn, payload](ckpt::core::OutputFile& out) {
                ckpt_sink sink{&out, nullptr};
                const int rc = fn(&sink, payload);
                if (sink.error) std::rethrow_exception(sink.error);
                if (rc != 0) ckpt::capi::callback_failed(rc, "the save function");
            },
            (flags & CKPT_WRITER_APPEND) != 0, after_save(w, to.named), std::move(to.elsewhere));
    });
}

CKPT_API int ckpt_writer_save_vars(ckpt_writer* w, const char* out_dir, const char* filename, const ckpt_vars* vars,
                                   const ckpt_options* npz, uint32_t flags) {
    return guard([&] {
        Target to = target(w, out_dir, filename, "ckpt_writer_save_vars");
        require(vars, "ckpt_writer_save_vars", "vars");
        if ((flags & ~CKPT_WRITER_NO_COPY) != 0)
            ckpt::core::fail(Code::invalid, "ckpt_writer_save_vars: unknown flags {}", flags);
        const ckpt_options o = ckpt::capi::checked_options(npz, "ckpt_writer_save_vars");
        const ckpt::core::ContainerWriteOptions options = ckpt::capi::write_options(o);
        if (options.max_shard_bytes > 0)
            ckpt::core::fail(Code::invalid,
                             "ckpt_writer_save_vars: a writer saves one file; max_shard_bytes is for "
                             "ckpt_save");
        const ckpt::core::Format format = ckpt::core::format_of_save(to.path, options);
        ckpt::core::check_save(to.path, format, vars->vc, options);  // refused now, not when the save runs
        std::string base =
            options.npz.chunk_hashes && format == ckpt::core::Format::npz ? base_path(w, to, o.base) : "";
        const bool borrow = w->writer->kind() == ckpt::core::Writer::Kind::simple || (flags & CKPT_WRITER_NO_COPY) != 0;
        std::shared_ptr<const ckpt::core::VarCollection> data = w->snapshots->for_save(vars->vc, borrow);
        // The base is opened when the save runs: a background writer's previous save is in place by then.
        ckpt::core::Storage& storage = to.elsewhere ? *to.elsewhere : w->writer->storage();
        w->writer->submit(
            to.path,
            [data, options, format, base = std::move(base), &storage,
             dir = ckpt::core::parent_dir(to.path)](ckpt::core::OutputFile& out) {
                std::unique_ptr<ckpt::core::ChunkBase> from;
                if (!base.empty() && storage.clones(dir)) {
                    std::string why_not;  // a base that cannot serve makes a full save
                    from = ckpt::core::ChunkBase::open(storage, base, &why_not);
                }
                ckpt::core::ContainerWriteOptions with = options;
                with.npz.base = from.get();
                ckpt::core::write_container(out, format, *data, with);
            },
            false, after_save(w, to.named), std::move(to.elsewhere));
    });
}

CKPT_API int ckpt_sink_write(ckpt_sink* sink, const void* data, size_t size) {
    return guard([&] {
        require(sink, "ckpt_sink_write", "sink");
        if (sink->error) std::rethrow_exception(sink->error);  // nothing more goes to a file that failed
        if (size > 0) require(data, "ckpt_sink_write", "data");
        try {
            sink->out->write(data, size);
        } catch (...) {
            sink->error = std::current_exception();
            throw;
        }
    });
}

CKPT_API int ckpt_writer_wait(ckpt_writer* w) {
    return guard([&] {
        require(w, "ckpt_writer_wait", "w");
        w->writer->wait();
    });
}

CKPT_API int ckpt_writer_finalize(ckpt_writer* w) {
    return guard([&] {
        require(w, "ckpt_writer_finalize", "w");
        w->writer->finalize();
    });
}

CKPT_API void ckpt_writer_free(ckpt_writer* w) { delete w; }

}
