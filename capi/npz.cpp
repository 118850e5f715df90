// SPDX-License-Identifier: Apache-2.0
#include "guard.hpp"
#include "versioned.hpp"
#include "url_storage.hpp"
#include "storage/memory_storage.hpp"
#include "npz/npz_restore.hpp"
#include "npz/npz_writer.hpp"
#include "npz/zip_format.hpp"

#include <cstddef>
#include <cstring>
#include <memory>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::capi::unknown_version;
using ckpt::core::Code;
using ckpt::core::Layout;

namespace {

constexpr uint32_t kKnownNpzFlags = CKPT_NPZ_PARTIAL | CKPT_NPZ_MAP_UNVERIFIED | CKPT_NPZ_MAP_WRITABLE |
                                    CKPT_NPZ_KEEP_MANAGER_KEYS | CKPT_NPZ_CHUNK_HASHES;

constexpr ckpt::capi::VersionedStruct<ckpt_npz_options, 5> kNpzOptions{
    {offsetof(ckpt_npz_options, storage), offsetof(ckpt_npz_options, max_members), offsetof(ckpt_npz_options, flags),
     offsetof(ckpt_npz_options, base), sizeof(ckpt_npz_options)}};
static_assert(kNpzOptions.current == CKPT_NPZ_OPTIONS_VERSION && kNpzOptions.consistent());
constexpr ckpt_npz_options kNpzDefaults = CKPT_NPZ_OPTIONS_INIT;

ckpt_vars* read_all(ckpt::core::NpzReader& reader) { return new ckpt_vars{reader.read_all()}; }

const ckpt::core::NpzReader::Entry* at(const ckpt_npz* npz, size_t i) {
    return npz != nullptr && i < npz->reader.size() ? &npz->reader.entry(i) : nullptr;
}

// Entry i of an open file, or Error(not_found).
const ckpt::core::NpzReader::Entry& existing(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    if (e == nullptr)
        ckpt::core::fail(Code::not_found, "{}: no array #{} (the file has {})", npz->reader.label(), i,
                         npz->reader.size());
    return *e;
}

}  // namespace

namespace ckpt::capi {

ckpt_npz_options checked_npz_options(const ckpt_npz_options* opts, const char* function) {
    if (opts == nullptr) return kNpzDefaults;
    if (!kNpzOptions.known(opts->version))
        ckpt::core::fail(Code::invalid, "{}",
                         unknown_version(function, "ckpt_npz_options", opts->version, kNpzOptions.current));
    const ckpt_npz_options o = kNpzOptions.upgrade(*opts, kNpzDefaults);
    if (o.layout > CKPT_LAYOUT_OBJAX) ckpt::core::fail(Code::invalid, "{}: unknown layout {}", function, o.layout);
    if (o.compression > CKPT_DEFLATE)
        ckpt::core::fail(Code::invalid, "{}: unknown compression {}", function, o.compression);
    if (o.level < 0 || o.level > 9)
        ckpt::core::fail(Code::invalid, "{}: deflate level {} is not in 0..9", function, o.level);
    if (o.max_header_bytes > SIZE_MAX) ckpt::core::fail(Code::invalid, "{}: max_header_bytes is too large", function);
    if ((o.flags & ~kKnownNpzFlags) != 0) ckpt::core::fail(Code::invalid, "{}: unknown flags {:#x}", function, o.flags);
    return o;
}

ckpt::core::NpzWriteOptions write_options(const ckpt_npz_options& o) {
    ckpt::core::NpzWriteOptions w;
    w.layout = static_cast<Layout>(o.layout);
    w.deflate = o.compression == CKPT_DEFLATE;
    w.level = o.level;
    w.progress.fn = o.progress;
    w.progress.payload = o.progress_payload;
    w.manager_keys = (o.flags & CKPT_NPZ_KEEP_MANAGER_KEYS) != 0;
    w.chunk_hashes = !w.deflate && ((o.flags & CKPT_NPZ_CHUNK_HASHES) != 0 || o.base != nullptr);
    return w;
}

ckpt::core::NpzReadOptions read_options(const ckpt_npz_options& o, bool reads_all) {
    ckpt::core::NpzReadOptions r;
    r.read_ahead = reads_all;
    r.layout = static_cast<Layout>(o.layout);
    r.max_header_bytes =
        o.max_header_bytes != 0 ? static_cast<size_t>(o.max_header_bytes) : ckpt::core::kDefaultMaxHeaderBytes;
    if (o.max_members != 0) r.max_members = o.max_members;
    if (o.max_total_bytes != 0) r.max_total_bytes = o.max_total_bytes;
    r.progress.fn = o.progress;
    r.progress.payload = o.progress_payload;
    return r;
}

// Adapts the C renamer (caller's buffer, snprintf-style retry when it needs more room) to the core's.
ckpt::core::Renamer renamer(const ckpt_npz_options& o) {
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

using ckpt::capi::checked_npz_options;
using ckpt::capi::read_options;
using ckpt::capi::renamer;

extern "C" {

CKPT_API int ckpt_npz_options_init(ckpt_npz_options* opts, uint32_t version) {
    return guard([&] {
        require(opts, "ckpt_npz_options_init", "opts");
        if (!kNpzOptions.known(version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_npz_options_init", "", version, kNpzOptions.current));
        kNpzOptions.init(opts, version, kNpzDefaults);
    });
}

CKPT_API int ckpt_npz_save(const char* path, const ckpt_vars* vars, const ckpt_npz_options* opts) {
    return guard([&] {
        require(path, "ckpt_npz_save", "path");
        require(vars, "ckpt_npz_save", "vars");
        const ckpt_npz_options o = checked_npz_options(opts, "ckpt_npz_save");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        ckpt::core::NpzWriteOptions w = ckpt::capi::write_options(o);
        std::unique_ptr<ckpt::core::ChunkBase> base;
        // Only where the file could share with it: the same storage (two s3:// URLs of one bucket are), one that
        // shares blocks or copies on its side.
        if (o.base != nullptr && w.chunk_hashes && at.storage->clones(ckpt::core::parent_dir(at.path))) {
            const ckpt::capi::Located from = ckpt::capi::locate(o.storage, o.base);
            std::string why_not;  // a base that cannot serve makes a full save
            if (from.storage == at.storage || (!from.url_prefix.empty() && from.url_prefix == at.url_prefix))
                base = ckpt::core::ChunkBase::open(*at.storage, from.path, &why_not);
        }
        w.base = base.get();
        ckpt::core::save_npz(*at.storage, at.path, vars->vc, w);
    });
}

CKPT_API int ckpt_npz_read(ckpt_vars** out, const char* path, const ckpt_npz_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_npz_read", "out");
        require(path, "ckpt_npz_read", "path");
        const ckpt_npz_options o = checked_npz_options(opts, "ckpt_npz_read");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        auto reader = ckpt::core::NpzReader::open(*at.storage, at.path, read_options(o, true));
        *out = read_all(reader);
    });
}

CKPT_API int ckpt_npz_read_memory(ckpt_vars** out, const void* bytes, size_t size, const ckpt_npz_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_npz_read_memory", "out");
        if (size > 0) require(bytes, "ckpt_npz_read_memory", "bytes");
        const ckpt_npz_options o = checked_npz_options(opts, "ckpt_npz_read_memory");
        ckpt::core::NpzReader reader(std::make_unique<ckpt::core::BytesInput>(bytes, size), "<memory>",
                                     read_options(o));
        *out = read_all(reader);
    });
}

CKPT_API int ckpt_npz_restore(const char* path, ckpt_vars* vars, const ckpt_npz_options* opts) {
    return guard([&] {
        require(path, "ckpt_npz_restore", "path");
        require(vars, "ckpt_npz_restore", "vars");
        const ckpt_npz_options o = checked_npz_options(opts, "ckpt_npz_restore");
        const ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        auto reader = ckpt::core::NpzReader::open(*at.storage, at.path, read_options(o, true));
        ckpt::core::restore_npz(reader, vars->vc, renamer(o), (o.flags & CKPT_NPZ_PARTIAL) != 0);
    });
}

CKPT_API int ckpt_npz_open(ckpt_npz** out, const char* path, const ckpt_npz_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_npz_open", "out");
        require(path, "ckpt_npz_open", "path");
        const ckpt_npz_options o = checked_npz_options(opts, "ckpt_npz_open");
        ckpt::capi::Located at = ckpt::capi::locate(o.storage, path);
        std::shared_ptr<ckpt::core::Storage> storage = std::move(at.storage);
        auto reader = ckpt::core::NpzReader::open(*storage, at.path, read_options(o));
        *out = new ckpt_npz{
            std::move(storage), std::move(reader),
            ckpt::core::NpzViews((o.flags & CKPT_NPZ_MAP_UNVERIFIED) == 0, (o.flags & CKPT_NPZ_MAP_WRITABLE) != 0),
            ckpt::core::NpzRanges{}};
    });
}

CKPT_API void ckpt_npz_close(ckpt_npz* npz) { delete npz; }

CKPT_API size_t ckpt_npz_count(const ckpt_npz* npz) { return npz != nullptr ? npz->reader.size() : 0; }

CKPT_API const char* ckpt_npz_name(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? e->name.c_str() : nullptr;
}
CKPT_API int ckpt_npz_find(const ckpt_npz* npz, const char* name, size_t* out_index) {
    return guard([&] {
        require(npz, "ckpt_npz_find", "npz");
        require(name, "ckpt_npz_find", "name");
        require(out_index, "ckpt_npz_find", "out_index");
        const std::optional<size_t> i = npz->reader.find(name);
        if (!i) ckpt::core::fail(Code::not_found, "{}: no array '{}'", npz->reader.label(), name);
        *out_index = *i;
    });
}

CKPT_API uint32_t ckpt_npz_dtype(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? static_cast<uint32_t>(e->header.dtype) : 0;
}
CKPT_API size_t ckpt_npz_itemsize(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? e->header.itemsize : 0;
}
CKPT_API uint32_t ckpt_npz_ndim(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? static_cast<uint32_t>(e->header.shape.size()) : 0;
}
CKPT_API const int64_t* ckpt_npz_shape(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    if (e == nullptr) return nullptr;
    return e->header.shape.empty() ? ckpt::capi::kNoDims : e->header.shape.data();
}
CKPT_API size_t ckpt_npz_nbytes(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? e->header.nbytes : 0;
}

CKPT_API int ckpt_npz_read_into(ckpt_npz* npz, size_t i, void* dst, size_t dst_size) {
    return guard([&] {
        require(npz, "ckpt_npz_read_into", "npz");
        const auto* e = &existing(npz, i);
        if (dst_size < e->header.nbytes)
            ckpt::core::fail(Code::buffer_small, "{}: array '{}' needs {} bytes; the buffer has {}",
                             npz->reader.label(), e->name, e->header.nbytes, dst_size);
        if (e->header.nbytes > 0) require(dst, "ckpt_npz_read_into", "dst");
        npz->reader.read_into(i, dst);
    });
}

CKPT_API int ckpt_npz_read_range(ckpt_npz* npz, size_t i, uint64_t offset, void* dst, size_t size) {
    return guard([&] {
        require(npz, "ckpt_npz_read_range", "npz");
        existing(npz, i);
        if (size > 0) require(dst, "ckpt_npz_read_range", "dst");
        npz->ranges.read(npz->reader, i, offset, dst, size);
    });
}

}

extern "C" {

CKPT_API const char* ckpt_npz_metadata(const ckpt_npz* npz, const char* key) {
    return npz != nullptr ? ckpt::capi::metadata_value(npz->reader.metadata(), key) : nullptr;
}
CKPT_API size_t ckpt_npz_metadata_count(const ckpt_npz* npz) {
    return npz != nullptr ? npz->reader.metadata().size() : 0;
}
CKPT_API const char* ckpt_npz_metadata_key(const ckpt_npz* npz, size_t i) {
    return npz != nullptr ? ckpt::capi::metadata_key(npz->reader.metadata(), i) : nullptr;
}
CKPT_API const char* ckpt_npz_metadata_value(const ckpt_npz* npz, size_t i) {
    return npz != nullptr ? ckpt::capi::metadata_value_at(npz->reader.metadata(), i) : nullptr;
}

}

extern "C" {

CKPT_API const char* ckpt_npz_member_name(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr ? e->member.c_str() : nullptr;
}
CKPT_API uint32_t ckpt_npz_compression(const ckpt_npz* npz, size_t i) {
    return at(npz, i) != nullptr && npz->reader.member(i).method == ckpt::core::zip::kMethodDeflate ? CKPT_DEFLATE
                                                                                                    : CKPT_STORE;
}
CKPT_API uint64_t ckpt_npz_stored_bytes(const ckpt_npz* npz, size_t i) {
    return at(npz, i) != nullptr ? npz->reader.member(i).compressed : 0;
}
CKPT_API uint32_t ckpt_npz_crc32(const ckpt_npz* npz, size_t i) {
    return at(npz, i) != nullptr ? npz->reader.member(i).crc : 0;
}
CKPT_API uint64_t ckpt_npz_data_offset(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    if (e == nullptr || npz->reader.member(i).method != ckpt::core::zip::kMethodStore) return 0;
    return npz->reader.member(i).data_offset + e->header.data_offset;
}
CKPT_API int ckpt_npz_byte_order(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    if (e == nullptr) return 0;
    if (ckpt::core::swap_unit(e->header.dtype) <= 1) return '|';
    constexpr bool little_host = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    return e->header.foreign_order == little_host ? '>' : '<';
}
CKPT_API int ckpt_npz_fortran_order(const ckpt_npz* npz, size_t i) {
    const auto* e = at(npz, i);
    return e != nullptr && e->header.fortran_order ? 1 : 0;
}
CKPT_API uint64_t ckpt_npz_file_size(const ckpt_npz* npz) { return npz == nullptr ? 0 : npz->reader.file().size(); }
CKPT_API uint32_t ckpt_npz_layout(const ckpt_npz* npz) {
    return npz == nullptr ? 0 : npz->reader.layout() == Layout::objax ? CKPT_LAYOUT_OBJAX : CKPT_LAYOUT_PLAIN;
}

}

extern "C" {

CKPT_API int ckpt_npz_map(ckpt_npz* npz, size_t i, const void** out_data) {
    if (out_data != nullptr) *out_data = nullptr;
    return guard([&] {
        require(npz, "ckpt_npz_map", "npz");
        require(out_data, "ckpt_npz_map", "out_data");
        existing(npz, i);
        *out_data = npz->views.view(npz->reader, i);
    });
}

CKPT_API int ckpt_npz_map_vars(ckpt_npz* npz, ckpt_vars** out) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(npz, "ckpt_npz_map_vars", "npz");
        require(out, "ckpt_npz_map_vars", "out");
        ckpt::core::VarCollection vars;
        for (size_t i = 0; i < npz->reader.size(); ++i) {
            const ckpt::core::NpzReader::Entry& e = npz->reader.entry(i);
            // Writable only under CKPT_NPZ_MAP_WRITABLE (documented): the collection's arrays are mutable by type.
            void* data = const_cast<void*>(npz->views.view(npz->reader, i));
            vars.add(e.name, ckpt::core::Array::borrow(e.header.dtype, e.header.itemsize, e.header.shape, data));
        }
        vars.metadata() = npz->reader.metadata();
        *out = new ckpt_vars{std::move(vars)};
    });
}

}
