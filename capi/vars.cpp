// SPDX-License-Identifier: Apache-2.0
#include "guard.hpp"
#include "core/utf8.hpp"

#include <memory>
#include <vector>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::core::Array;
using ckpt::core::Code;
using ckpt::core::DType;

namespace {

const Array* at(const ckpt_vars* vars, size_t i) {
    return vars != nullptr && i < vars->vc.size() ? &vars->vc.array(i) : nullptr;
}

int add(const char* function, ckpt_vars* vars, const char* name, uint32_t dtype, bool strings, size_t itemsize,
        uint32_t ndim, const int64_t* shape, const void* data, uint32_t flags) {
    return guard([&] {
        require(vars, function, "vars");
        require(name, function, "name");
        try {
            if (!ckpt::core::is_dtype(dtype) || ckpt::core::has_array_itemsize(static_cast<DType>(dtype)) != strings)
                ckpt::core::fail(Code::invalid, "dtype {} is not {}", dtype,
                                 strings ? "CKPT_UNICODE, CKPT_BYTES or CKPT_VOID"
                                         : "a numeric dtype (strings and void: ckpt_vars_add_strings)");
            const DType d = static_cast<DType>(dtype);
            if (flags != CKPT_VARS_COPY && flags != CKPT_VARS_BORROW)
                ckpt::core::fail(Code::invalid, "unknown flags {}", flags);
            if (ndim > ckpt::core::kMaxDims)
                ckpt::core::fail(Code::invalid, "{} dimensions; the limit is {}", ndim, ckpt::core::kMaxDims);
            if (ndim > 0 && shape == nullptr) ckpt::core::fail(Code::invalid, "shape is NULL with {} dimensions", ndim);
            std::vector<int64_t> dims(shape, shape + ndim);
            const size_t size = strings ? itemsize : ckpt::core::numeric_size(d);
            Array a = flags == CKPT_VARS_BORROW ? Array::borrow(d, size, std::move(dims), const_cast<void*>(data))
                                                : Array::copy_of(d, size, std::move(dims), data);
            vars->vc.add(name, std::move(a));
        } catch (const ckpt::core::Error& e) {
            ckpt::core::rethrow_with_context(e,
                                             fmt::format("{}: variable '{}'", function, ckpt::core::printable(name)));
        }
    });
}

// Makes the source of variable `name` from the caller's callback: a failure becomes the Error of a failed callback,
// with the message the callback left on the thread it ran on.
std::shared_ptr<const ckpt::core::ByteSource> source_of(const std::string& name, ckpt_source_fn fn, void* payload) {
    return std::make_shared<const ckpt::core::ByteSource>([name, fn, payload](uint64_t offset, void* dst, size_t size) {
        ckpt::capi::forget_callback_message();
        const int rc = fn(payload, offset, dst, size);
        if (rc != CKPT_OK)
            ckpt::capi::callback_failed(rc, fmt::format("variable '{}': the source (bytes {} to {})",
                                                        ckpt::core::printable(name), offset, offset + size));
    });
}

}  // namespace

extern "C" {

CKPT_API int ckpt_vars_add_source(ckpt_vars* vars, const char* name, uint32_t dtype, size_t itemsize, uint32_t ndim,
                                  const int64_t* shape, ckpt_source_fn fn, void* payload) {
    return guard([&] {
        require(vars, "ckpt_vars_add_source", "vars");
        require(name, "ckpt_vars_add_source", "name");
        require(reinterpret_cast<const void*>(fn), "ckpt_vars_add_source", "fn");
        try {
            if (!ckpt::core::is_dtype(dtype)) ckpt::core::fail(Code::invalid, "dtype {} is not a dtype", dtype);
            const DType d = static_cast<DType>(dtype);
            if (ndim > ckpt::core::kMaxDims)
                ckpt::core::fail(Code::invalid, "{} dimensions; the limit is {}", ndim, ckpt::core::kMaxDims);
            if (ndim > 0 && shape == nullptr) ckpt::core::fail(Code::invalid, "shape is NULL with {} dimensions", ndim);
            const size_t size =
                ckpt::core::has_array_itemsize(d) || itemsize != 0 ? itemsize : ckpt::core::numeric_size(d);
            vars->vc.add(name, Array::from_source(d, size, std::vector<int64_t>(shape, shape + ndim),
                                                  source_of(name, fn, payload)));
        } catch (const ckpt::core::Error& e) {
            ckpt::core::rethrow_with_context(
                e, fmt::format("ckpt_vars_add_source: variable '{}'", ckpt::core::printable(name)));
        }
    });
}

CKPT_API int ckpt_vars_is_source(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr && a->source() != nullptr ? 1 : 0;
}

CKPT_API int ckpt_vars_new(ckpt_vars** out) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_vars_new", "out");
        *out = new ckpt_vars();
    });
}

CKPT_API void ckpt_vars_free(ckpt_vars* vars) { delete vars; }

CKPT_API int ckpt_vars_add(ckpt_vars* vars, const char* name, uint32_t dtype, uint32_t ndim, const int64_t* shape,
                           const void* data, uint32_t flags) {
    return add("ckpt_vars_add", vars, name, dtype, false, 0, ndim, shape, data, flags);
}

CKPT_API int ckpt_vars_add_strings(ckpt_vars* vars, const char* name, uint32_t dtype, size_t itemsize, uint32_t ndim,
                                   const int64_t* shape, const void* data, uint32_t flags) {
    return add("ckpt_vars_add_strings", vars, name, dtype, true, itemsize, ndim, shape, data, flags);
}

CKPT_API size_t ckpt_vars_count(const ckpt_vars* vars) { return vars != nullptr ? vars->vc.size() : 0; }

CKPT_API const char* ckpt_vars_name(const ckpt_vars* vars, size_t i) {
    return at(vars, i) != nullptr ? vars->vc.name(i).c_str() : nullptr;
}

CKPT_API int ckpt_vars_find(const ckpt_vars* vars, const char* name, size_t* out_index) {
    return guard([&] {
        require(vars, "ckpt_vars_find", "vars");
        require(name, "ckpt_vars_find", "name");
        require(out_index, "ckpt_vars_find", "out_index");
        auto i = vars->vc.find(name);
        if (!i) ckpt::core::fail(Code::not_found, "ckpt_vars_find: no variable '{}'", name);
        *out_index = *i;
    });
}

CKPT_API uint32_t ckpt_vars_dtype(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr ? static_cast<uint32_t>(a->dtype()) : 0;
}
CKPT_API size_t ckpt_vars_itemsize(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr ? a->itemsize() : 0;
}
CKPT_API uint32_t ckpt_vars_ndim(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr ? static_cast<uint32_t>(a->shape().size()) : 0;
}
CKPT_API const int64_t* ckpt_vars_shape(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    if (a == nullptr) return nullptr;
    return a->shape().empty() ? ckpt::capi::kNoDims : a->shape().data();
}
CKPT_API size_t ckpt_vars_nbytes(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr ? a->nbytes() : 0;
}
CKPT_API void* ckpt_vars_data(const ckpt_vars* vars, size_t i) {
    const Array* a = at(vars, i);
    return a != nullptr ? a->data() : nullptr;
}

CKPT_API int ckpt_vars_set_rows(ckpt_vars* vars, size_t i, int64_t row_begin, int64_t global_rows) {
    return guard([&] {
        require(vars, "ckpt_vars_set_rows", "vars");
        if (i >= vars->vc.size())
            ckpt::core::fail(Code::not_found, "ckpt_vars_set_rows: index {} is out of range ({} arrays)", i,
                             vars->vc.size());
        if (global_rows < -1)
            ckpt::core::fail(Code::invalid, "ckpt_vars_set_rows: global_rows {} is below -1", global_rows);
        if (global_rows == -1)
            vars->vc.set_rows(i, std::nullopt);
        else
            vars->vc.set_rows(i, ckpt::core::RowSplit{row_begin, global_rows});
    });
}

CKPT_API int ckpt_vars_rows(const ckpt_vars* vars, size_t i, int64_t* row_begin, int64_t* global_rows) {
    if (row_begin != nullptr) *row_begin = -1;
    if (global_rows != nullptr) *global_rows = -1;
    return guard([&] {
        require(vars, "ckpt_vars_rows", "vars");
        if (i >= vars->vc.size())
            ckpt::core::fail(Code::not_found, "ckpt_vars_rows: index {} is out of range ({} arrays)", i,
                             vars->vc.size());
        const auto& rows = vars->vc.rows(i);
        if (!rows) ckpt::core::fail(Code::not_found, "ckpt_vars_rows: '{}' is not a row split", vars->vc.name(i));
        if (row_begin != nullptr) *row_begin = rows->begin;
        if (global_rows != nullptr) *global_rows = rows->global_rows;
    });
}

CKPT_API int ckpt_vars_restored(const ckpt_vars* vars, size_t i) {
    return vars != nullptr && i < vars->vc.size() && vars->vc.restored(i) ? 1 : 0;
}

}

extern "C" {

CKPT_API int ckpt_vars_set_metadata(ckpt_vars* vars, const char* key, const char* value) {
    return guard([&] {
        require(vars, "ckpt_vars_set_metadata", "vars");
        require(key, "ckpt_vars_set_metadata", "key");
        try {
            if (value == nullptr)
                vars->vc.metadata().remove(key);
            else
                vars->vc.metadata().set(key, value);
        } catch (const ckpt::core::Error& e) {
            ckpt::core::rethrow_with_context(
                e, fmt::format("ckpt_vars_set_metadata: key '{}'", ckpt::core::printable(key)));
        }
    });
}

CKPT_API const char* ckpt_vars_metadata(const ckpt_vars* vars, const char* key) {
    return vars != nullptr ? ckpt::capi::metadata_value(vars->vc.metadata(), key) : nullptr;
}
CKPT_API size_t ckpt_vars_metadata_count(const ckpt_vars* vars) {
    return vars != nullptr ? vars->vc.metadata().size() : 0;
}
CKPT_API const char* ckpt_vars_metadata_key(const ckpt_vars* vars, size_t i) {
    return vars != nullptr ? ckpt::capi::metadata_key(vars->vc.metadata(), i) : nullptr;
}
CKPT_API const char* ckpt_vars_metadata_value(const ckpt_vars* vars, size_t i) {
    return vars != nullptr ? ckpt::capi::metadata_value_at(vars->vc.metadata(), i) : nullptr;
}

}
