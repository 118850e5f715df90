// SPDX-License-Identifier: Apache-2.0
#include "guard.hpp"
#include "versioned.hpp"
#include "url_storage.hpp"
#include "storage/memory_storage.hpp"
#include "container/container.hpp"
#include "npz/npz_writer.hpp"

#include <cstddef>
#include <cstring>
#include <memory>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::capi::unknown_version;
using ckpt::core::Code;
using ckpt::core::Layout;

namespace {

constexpr uint32_t kKnownFlags =
    CKPT_PARTIAL | CKPT_MAP_UNVERIFIED | CKPT_MAP_WRITABLE | CKPT_KEEP_MANAGER_KEYS | CKPT_NPZ_CHUNK_HASHES;

constexpr ckpt::capi::VersionedStruct<ckpt_options, 6> kOptions{
    {offsetof(ckpt_options, storage), offsetof(ckpt_options, max_members), offsetof(ckpt_options, flags),
     offsetof(ckpt_options, base), offsetof(ckpt_options, format), sizeof(ckpt_options)}};
static_assert(kOptions.current == CKPT_OPTIONS_VERSION && kOptions.consistent());
constexpr ckpt_options kOptionsDefaults = CKPT_OPTIONS_INIT;

bool in_range(const ckpt_reader* reader, size_t i) { return reader != nullptr && i < reader->file->size(); }

// Array i of an open file, or Error(not_found).
ckpt::core::ArrayInfo existing(const ckpt_reader* reader, size_t i) {
    if (!in_range(reader, i))
        ckpt::core::fail(Code::not_found, "{}: no array #{} (the file has {})", reader->file->label(), i,
                         reader->file->size());
    return reader->file->array(i);
}

}  // namespace

namespace ckpt::capi {

ckpt_options checked_options(const ckpt_options* opts, const char* function) {
    if (opts == nullptr) return kOptionsDefaults;
    if (!kOptions.known(opts->version))
        ckpt::core::fail(Code::invalid, "{}",
                         unknown_version(function, "ckpt_options", opts->version, kOptions.current));
    const ckpt_options o = kOptions.upgrade(*opts, kOptionsDefaults);
    if (o.layout > CKPT_LAYOUT_OBJAX) ckpt::core::fail(Code::invalid, "{}: unknown layout {}", function, o.layout);
    if (o.compression > CKPT_DEFLATE)
        ckpt::core::fail(Code::invalid, "{}: unknown compression {}", function, o.compression);
    if (o.level < 0 || o.level > 9)
        ckpt::core::fail(Code::invalid, "{}: deflate level {} is not in 0..9", function, o.level);
    if (o.max_header_bytes > SIZE_MAX) ckpt::core::fail(Code::invalid, "{}: max_header_bytes is too large", function);
    if ((o.flags & ~kKnownFlags) != 0) ckpt::core::fail(Code::invalid, "{}: unknown flags {:#x}", function, o.flags);
    if (o.format > CKPT_FORMAT_SAFETENSORS)
        ckpt::core::fail(Code::invalid, "{}: unknown format {}", function, o.format);
    return o;
}

ckpt::core::ContainerWriteOptions write_options(const ckpt_options& o) {
    ckpt::core::ContainerWriteOptions options;
    options.format = static_cast<ckpt::core::Format>(o.format);
    ckpt::core::NpzWriteOptions& w = options.npz;
    w.layout = static_cast<Layout>(o.layout);
    w.deflate = o.compression == CKPT_DEFLATE;
    w.level = o.level;
    w.progress.fn = o.progress;
    w.progress.payload = o.progress_payload;
    w.manager_keys = (o.flags & CKPT_KEEP_MANAGER_KEYS) != 0;
    w.chunk_hashes = !w.deflate && ((o.flags & CKPT_NPZ_CHUNK_HASHES) != 0 || o.base != nullptr);
    options.max_shard_bytes = o.max_shard_bytes;
    return options;
}

ckpt::core::ContainerReadOptions read_options(const ckpt_options& o, bool reads_all) {
    ckpt::core::ContainerReadOptions options;
    options.format = static_cast<ckpt::core::Format>(o.format);
    options.verify_views = (o.flags & CKPT_MAP_UNVERIFIED) == 0;
    options.writable_views = (o.flags & CKPT_MAP_WRITABLE) != 0;
    ckpt::core::NpzReadOptions& r = options.npz;
    r.read_ahead = reads_all;
    r.layout = static_cast<Layout>(o.layout);
    r.max_header_bytes =
        o.max_header_bytes != 0 ? static_cast<size_t>(o.max_header_bytes) : ckpt::core::kDefaultMaxHeaderBytes;
    if (o.max_members != 0) r.max_members = o.max_members;
    if (o.max_total_bytes != 0) r.max_total_bytes = o.max_total_bytes;
    r.progress.fn = o.progress;
    r.progress.payload = o.progress_payload;
    return options;
}

// Adapts the C renamer (caller's buffer, snprintf-style retry when it needs more room) to the core's.
ckpt::core::Renamer renamer(const ckpt_options& o) {
    if (o.rename == nullptr) return {};
    return [fn = o.rename, payload = o.rename_payload](const std::string& name) {
        std::string buf(256, '\0');
        for (int attempt = 0; attempt < 2; ++attempt) {
            const int r = fn(name.c_str(), &buf[0], buf.size(), payload);
            if (r < 0) {
                const std::string own = take_callback_message();
                throw ckpt::core::CallerError(static_cast<Code>(r),
                                              own.empty() ? fmt::format("the renamer refused '{}' (code {})", name, r)
                                                          : fmt::format("the renamer refused '{}': {}", name, own));
            }
            if (r == 0) return name;
            if (static_cast<size_t>(r) <= buf.size()) return buf.substr(0, static_cast<size_t>(r));
            buf.assign(static_cast<size_t>(r), '\0');
        }
        throw ckpt::core::CallerError(Code::buffer_small,
                                      fmt::format("the renamer asked twice for a larger buffer for '{}'", name));
    };
}

}  // namespace ckpt::capi

using ckpt::capi::checked_options;
using ckpt::capi::read_options;
using ckpt::capi::renamer;

extern "C" {

CKPT_API int ckpt_options_init(ckpt_options* opts, uint32_t version) {
    return guard([&] {
        require(opts, "ckpt_options_init", "opts");
        if (!kOptions.known(version))
            ckpt::core::fail(Code::invalid, "{}", unknown_version("ckpt_options_init", "", version, kOptions.current));
        kOptions.init(opts, version, kOptionsDefaults);
    });
}

CKPT_API int ckpt_save(const char* path, const ckpt_vars* vars, const ckpt_options* opts) {
    return guard([&] {
        require(path, "ckpt_save", "path");
        require(vars, "ckpt_save", "vars");
        const ckpt_options o = checked_options(opts, "ckpt_save");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        ckpt::core::ContainerWriteOptions w = ckpt::capi::write_options(o);
        std::unique_ptr<ckpt::core::ChunkBase> base;
        // Only where the file could share with it: the same storage (two s3:// URLs of one bucket are), one that
        // shares blocks or copies on its side.
        if (o.base != nullptr && w.npz.chunk_hashes &&
            ckpt::core::format_of_save(at.path, w) == ckpt::core::Format::npz &&
            at.storage->clones(ckpt::core::parent_dir(at.path))) {
            const ckpt::capi::Located from = ckpt::capi::locate(o.storage, o.base);
            std::string why_not;  // a base that cannot serve makes a full save
            if (from.storage == at.storage || (!from.url_prefix.empty() && from.url_prefix == at.url_prefix))
                base = ckpt::core::ChunkBase::open(*at.storage, from.path, &why_not);
        }
        w.npz.base = base.get();
        ckpt::core::save_container(*at.storage, at.path, vars->vc, w);
    });
}

CKPT_API int ckpt_read(ckpt_vars** out, const char* path, const ckpt_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_read", "out");
        require(path, "ckpt_read", "path");
        const ckpt_options o = checked_options(opts, "ckpt_read");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        *out = new ckpt_vars{ckpt::core::open_container(*at.storage, at.path, read_options(o, true))->read_all()};
    });
}

CKPT_API int ckpt_read_memory(ckpt_vars** out, const void* bytes, size_t size, const ckpt_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_read_memory", "out");
        if (size > 0) require(bytes, "ckpt_read_memory", "bytes");
        const ckpt_options o = checked_options(opts, "ckpt_read_memory");
        *out = new ckpt_vars{ckpt::core::open_container(std::make_unique<ckpt::core::BytesInput>(bytes, size),
                                                        "<memory>", read_options(o))
                                 ->read_all()};
    });
}

CKPT_API int ckpt_restore(const char* path, ckpt_vars* vars, const ckpt_options* opts) {
    return guard([&] {
        require(path, "ckpt_restore", "path");
        require(vars, "ckpt_restore", "vars");
        const ckpt_options o = checked_options(opts, "ckpt_restore");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        const auto file = ckpt::core::open_container(*at.storage, at.path, read_options(o, true));
        ckpt::core::restore_container(*file, vars->vc, renamer(o), (o.flags & CKPT_PARTIAL) != 0);
    });
}

CKPT_API int ckpt_reader_open(ckpt_reader** out, const char* path, const ckpt_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_reader_open", "out");
        require(path, "ckpt_reader_open", "path");
        const ckpt_options o = checked_options(opts, "ckpt_reader_open");
        ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        std::shared_ptr<ckpt::core::Storage> storage = std::move(at.storage);
        auto file = ckpt::core::open_container(*storage, at.path, read_options(o));
        *out = new ckpt_reader{std::move(storage), std::move(file)};
    });
}

CKPT_API void ckpt_reader_close(ckpt_reader* reader) { delete reader; }

CKPT_API size_t ckpt_reader_count(const ckpt_reader* reader) { return reader != nullptr ? reader->file->size() : 0; }

CKPT_API const char* ckpt_reader_name(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->array(i).name.c_str() : nullptr;
}
CKPT_API int ckpt_reader_find(const ckpt_reader* reader, const char* name, size_t* out_index) {
    return guard([&] {
        require(reader, "ckpt_reader_find", "reader");
        require(name, "ckpt_reader_find", "name");
        require(out_index, "ckpt_reader_find", "out_index");
        const std::optional<size_t> i = reader->file->find(name);
        if (!i) ckpt::core::fail(Code::not_found, "{}: no array '{}'", reader->file->label(), name);
        *out_index = *i;
    });
}

CKPT_API uint32_t ckpt_reader_dtype(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? static_cast<uint32_t>(reader->file->array(i).dtype) : 0;
}
CKPT_API size_t ckpt_reader_itemsize(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->array(i).itemsize : 0;
}
CKPT_API uint32_t ckpt_reader_ndim(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? static_cast<uint32_t>(reader->file->array(i).shape.size()) : 0;
}
CKPT_API const int64_t* ckpt_reader_shape(const ckpt_reader* reader, size_t i) {
    if (!in_range(reader, i)) return nullptr;
    const std::vector<int64_t>& shape = reader->file->array(i).shape;
    return shape.empty() ? ckpt::capi::kNoDims : shape.data();
}
CKPT_API size_t ckpt_reader_nbytes(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->array(i).nbytes : 0;
}

CKPT_API int ckpt_reader_read_into(ckpt_reader* reader, size_t i, void* dst, size_t dst_size) {
    return guard([&] {
        require(reader, "ckpt_reader_read_into", "reader");
        const ckpt::core::ArrayInfo a = existing(reader, i);
        if (dst_size < a.nbytes)
            ckpt::core::fail(Code::buffer_small, "{}: array '{}' needs {} bytes; the buffer has {}",
                             reader->file->label(), a.name, a.nbytes, dst_size);
        if (a.nbytes > 0) require(dst, "ckpt_reader_read_into", "dst");
        reader->file->read_into(i, dst);
    });
}

CKPT_API int ckpt_reader_read_range(ckpt_reader* reader, size_t i, uint64_t offset, void* dst, size_t size) {
    return guard([&] {
        require(reader, "ckpt_reader_read_range", "reader");
        existing(reader, i);
        if (size > 0) require(dst, "ckpt_reader_read_range", "dst");
        reader->file->read_range(i, offset, dst, size);
    });
}
}

extern "C" {

CKPT_API const char* ckpt_reader_metadata(const ckpt_reader* reader, const char* key) {
    return reader != nullptr ? ckpt::capi::metadata_value(reader->file->metadata(), key) : nullptr;
}
CKPT_API size_t ckpt_reader_metadata_count(const ckpt_reader* reader) {
    return reader != nullptr ? reader->file->metadata().size() : 0;
}
CKPT_API const char* ckpt_reader_metadata_key(const ckpt_reader* reader, size_t i) {
    return reader != nullptr ? ckpt::capi::metadata_key(reader->file->metadata(), i) : nullptr;
}
CKPT_API const char* ckpt_reader_metadata_value(const ckpt_reader* reader, size_t i) {
    return reader != nullptr ? ckpt::capi::metadata_value_at(reader->file->metadata(), i) : nullptr;
}
}

extern "C" {

CKPT_API const char* ckpt_reader_member_name(const ckpt_reader* reader, size_t i) {
    // A view into the container's own string, which ends in NUL: the member or tensor name as the file holds it.
    return in_range(reader, i) ? reader->file->placement(i).member.data() : nullptr;
}
CKPT_API uint32_t ckpt_reader_compression(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) && reader->file->placement(i).deflated ? CKPT_DEFLATE : CKPT_STORE;
}
CKPT_API uint64_t ckpt_reader_stored_bytes(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->placement(i).stored_bytes : 0;
}
CKPT_API uint32_t ckpt_reader_crc32(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->placement(i).crc32.value_or(0) : 0;
}
CKPT_API uint64_t ckpt_reader_data_offset(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->placement(i).data_offset : 0;
}
CKPT_API int ckpt_reader_byte_order(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) ? reader->file->placement(i).byte_order : 0;
}
CKPT_API int ckpt_reader_fortran_order(const ckpt_reader* reader, size_t i) {
    return in_range(reader, i) && reader->file->placement(i).fortran_order ? 1 : 0;
}
CKPT_API uint64_t ckpt_reader_file_size(const ckpt_reader* reader) {
    return reader == nullptr ? 0 : reader->file->file_size();
}
CKPT_API uint32_t ckpt_reader_layout(const ckpt_reader* reader) {
    return reader == nullptr ? 0 : reader->file->layout() == Layout::objax ? CKPT_LAYOUT_OBJAX : CKPT_LAYOUT_PLAIN;
}
CKPT_API uint32_t ckpt_reader_format(const ckpt_reader* reader) {
    return reader == nullptr ? 0 : static_cast<uint32_t>(reader->file->format());
}
}

extern "C" {

CKPT_API int ckpt_reader_map(ckpt_reader* reader, size_t i, const void** out_data) {
    if (out_data != nullptr) *out_data = nullptr;
    return guard([&] {
        require(reader, "ckpt_reader_map", "reader");
        require(out_data, "ckpt_reader_map", "out_data");
        existing(reader, i);
        *out_data = reader->file->view(i);
    });
}

CKPT_API int ckpt_reader_map_vars(ckpt_reader* reader, ckpt_vars** out) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(reader, "ckpt_reader_map_vars", "reader");
        require(out, "ckpt_reader_map_vars", "out");
        ckpt::core::VarCollection vars;
        for (size_t i = 0; i < reader->file->size(); ++i) {
            const ckpt::core::ArrayInfo a = reader->file->array(i);
            // Writable only under CKPT_MAP_WRITABLE (documented): the collection's arrays are mutable by type.
            void* data = const_cast<void*>(reader->file->view(i));
            vars.add(a.name, ckpt::core::Array::borrow(a.dtype, a.itemsize, a.shape, data));
        }
        vars.metadata() = reader->file->metadata();
        *out = new ckpt_vars{std::move(vars)};
    });
}
}

// The functions under their names before 0.11 (ckpt.h, "Names before 0.11"): second symbols of the same functions.
#define CKPT_EARLIER_NAME(earlier, name) extern "C" CKPT_API decltype(name) earlier __attribute__((alias(#name)));
CKPT_EARLIER_NAME(ckpt_npz_options_init, ckpt_options_init)
CKPT_EARLIER_NAME(ckpt_npz_save, ckpt_save)
CKPT_EARLIER_NAME(ckpt_npz_read, ckpt_read)
CKPT_EARLIER_NAME(ckpt_npz_read_memory, ckpt_read_memory)
CKPT_EARLIER_NAME(ckpt_npz_restore, ckpt_restore)
CKPT_EARLIER_NAME(ckpt_npz_open, ckpt_reader_open)
CKPT_EARLIER_NAME(ckpt_npz_close, ckpt_reader_close)
CKPT_EARLIER_NAME(ckpt_npz_count, ckpt_reader_count)
CKPT_EARLIER_NAME(ckpt_npz_name, ckpt_reader_name)
CKPT_EARLIER_NAME(ckpt_npz_find, ckpt_reader_find)
CKPT_EARLIER_NAME(ckpt_npz_dtype, ckpt_reader_dtype)
CKPT_EARLIER_NAME(ckpt_npz_itemsize, ckpt_reader_itemsize)
CKPT_EARLIER_NAME(ckpt_npz_ndim, ckpt_reader_ndim)
CKPT_EARLIER_NAME(ckpt_npz_shape, ckpt_reader_shape)
CKPT_EARLIER_NAME(ckpt_npz_nbytes, ckpt_reader_nbytes)
CKPT_EARLIER_NAME(ckpt_npz_read_into, ckpt_reader_read_into)
CKPT_EARLIER_NAME(ckpt_npz_read_range, ckpt_reader_read_range)
CKPT_EARLIER_NAME(ckpt_npz_member_name, ckpt_reader_member_name)
CKPT_EARLIER_NAME(ckpt_npz_compression, ckpt_reader_compression)
CKPT_EARLIER_NAME(ckpt_npz_stored_bytes, ckpt_reader_stored_bytes)
CKPT_EARLIER_NAME(ckpt_npz_crc32, ckpt_reader_crc32)
CKPT_EARLIER_NAME(ckpt_npz_data_offset, ckpt_reader_data_offset)
CKPT_EARLIER_NAME(ckpt_npz_byte_order, ckpt_reader_byte_order)
CKPT_EARLIER_NAME(ckpt_npz_fortran_order, ckpt_reader_fortran_order)
CKPT_EARLIER_NAME(ckpt_npz_file_size, ckpt_reader_file_size)
CKPT_EARLIER_NAME(ckpt_npz_layout, ckpt_reader_layout)
CKPT_EARLIER_NAME(ckpt_npz_format, ckpt_reader_format)
CKPT_EARLIER_NAME(ckpt_npz_metadata, ckpt_reader_metadata)
CKPT_EARLIER_NAME(ckpt_npz_metadata_count, ckpt_reader_metadata_count)
CKPT_EARLIER_NAME(ckpt_npz_metadata_key, ckpt_reader_metadata_key)
CKPT_EARLIER_NAME(ckpt_npz_metadata_value, ckpt_reader_metadata_value)
CKPT_EARLIER_NAME(ckpt_npz_map, ckpt_reader_map)
CKPT_EARLIER_NAME(ckpt_npz_map_vars, ckpt_reader_map_vars)
