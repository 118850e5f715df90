// SPDX-License-Identifier: Apache-2.0
// ckpt_step: one sharded checkpoint step, read by one process (the C face of ckpt::core::ShardedStep).
#include "sharded/sharded_step.hpp"
#include "guard.hpp"
#include "url_storage.hpp"

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::core::Code;

struct ckpt_step {
    std::shared_ptr<ckpt::core::Storage> storage;  // outlives the step read through it
    std::unique_ptr<ckpt::core::ShardedStep> step;
};

namespace {

const ckpt::core::ManifestVariable* at(const ckpt_step* s, size_t i) {
    if (s == nullptr || i >= s->step->manifest().variables.size()) return nullptr;
    return &s->step->manifest().variables[i];
}

}  // namespace

extern "C" {

CKPT_API int ckpt_step_open(ckpt_step** out, const char* dir, const ckpt_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_step_open", "out");
        require(dir, "ckpt_step_open", "dir");
        const ckpt_options o = ckpt::capi::checked_options(opts, "ckpt_step_open");
        auto handle = std::make_unique<ckpt_step>();
        ckpt::capi::Located at = ckpt::capi::locate(o.storage, dir);
        handle->storage = std::move(at.storage);
        handle->step =
            std::make_unique<ckpt::core::ShardedStep>(*handle->storage, at.path, ckpt::capi::read_options(o).npz);
        *out = handle.release();
    });
}

CKPT_API void ckpt_step_close(ckpt_step* step) { delete step; }

CKPT_API int64_t ckpt_step_index(const ckpt_step* step) { return step != nullptr ? step->step->manifest().step : -1; }

CKPT_API int32_t ckpt_step_world_size(const ckpt_step* step) {
    return step != nullptr ? static_cast<int32_t>(step->step->manifest().world_size) : 0;
}

CKPT_API const char* ckpt_step_shard(const ckpt_step* step, int32_t rank) {
    if (step == nullptr || rank < 0) return nullptr;
    const std::vector<std::string>& names = step->step->shard_names();
    return static_cast<size_t>(rank) < names.size() ? names[static_cast<size_t>(rank)].c_str() : nullptr;
}

CKPT_API size_t ckpt_step_count(const ckpt_step* step) {
    return step != nullptr ? step->step->manifest().variables.size() : 0;
}

CKPT_API const char* ckpt_step_name(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? v->name.c_str() : nullptr;
}

CKPT_API uint32_t ckpt_step_dtype(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? static_cast<uint32_t>(v->dtype) : 0;
}

CKPT_API size_t ckpt_step_itemsize(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? v->itemsize : 0;
}

CKPT_API uint32_t ckpt_step_ndim(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? static_cast<uint32_t>(v->shape.size()) : 0;
}

CKPT_API const int64_t* ckpt_step_shape(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    if (v == nullptr) return nullptr;
    return v->shape.empty() ? ckpt::capi::kNoDims : v->shape.data();
}

CKPT_API size_t ckpt_step_nbytes(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? ckpt::core::checked_nbytes(v->shape.data(), v->shape.size(), v->itemsize).value_or(0) : 0;
}

CKPT_API size_t ckpt_step_pieces(const ckpt_step* step, size_t i) {
    const auto* v = at(step, i);
    return v != nullptr ? v->pieces.size() : 0;
}

CKPT_API int ckpt_step_read_rows(ckpt_step* step, size_t i, int64_t first, int64_t count, void* dst, size_t dst_size) {
    return guard([&] {
        require(step, "ckpt_step_read_rows", "step");
        const auto* v = at(step, i);
        if (v == nullptr) ckpt::core::fail(Code::not_found, "ckpt_step_read_rows: variable {} is out of range", i);
        const int64_t rows = v->shape.empty() ? 1 : v->shape[0];
        if (first < 0 || count < 0 || first > rows || count > rows - first || (v->shape.empty() && count != 1))
            ckpt::core::fail(Code::invalid, "ckpt_step_read_rows: rows [{}, {} + {}) are not rows of '{}' ({} rows)",
                             first, first, count, v->name, rows);
        const size_t whole = *ckpt::core::checked_nbytes(v->shape.data(), v->shape.size(), v->itemsize);
        const size_t need = rows == 0 ? 0 : whole / static_cast<size_t>(rows) * static_cast<size_t>(count);
        if (dst_size < need)
            ckpt::core::fail(Code::buffer_small, "ckpt_step_read_rows: '{}' needs {} bytes, dst_size is {}", v->name,
                             need, dst_size);
        if (need > 0) require(dst, "ckpt_step_read_rows", "dst");
        step->step->read_rows(*v, first, count, dst);
    });
}

CKPT_API const char* ckpt_step_metadata(const ckpt_step* step, const char* key) {
    return step != nullptr ? ckpt::capi::metadata_value(step->step->manifest().metadata, key) : nullptr;
}

CKPT_API size_t ckpt_step_metadata_count(const ckpt_step* step) {
    return step != nullptr ? step->step->manifest().metadata.size() : 0;
}

CKPT_API const char* ckpt_step_metadata_key(const ckpt_step* step, size_t i) {
    return step != nullptr ? ckpt::capi::metadata_key(step->step->manifest().metadata, i) : nullptr;
}

CKPT_API const char* ckpt_step_metadata_value(const ckpt_step* step, size_t i) {
    return step != nullptr ? ckpt::capi::metadata_value_at(step->step->manifest().metadata, i) : nullptr;
}

}
