// SPDX-License-Identifier: Apache-2.0
#include "core/restore_match.hpp"

#include "core/entry_index.hpp"
#include "core/error.hpp"
#include "core/find_duplicate.hpp"

#include <fmt/ranges.h>

namespace ckpt::core {

namespace {

std::string describe(DType dtype, size_t itemsize, const std::vector<int64_t>& shape) {
    const std::string type =
        has_array_itemsize(dtype) ? fmt::format("{}{}", dtype_name(dtype), itemsize) : std::string(dtype_name(dtype));
    return fmt::format("{} ({})", type, fmt::join(shape, ", "));
}

std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out;
}

}  // namespace

std::vector<std::optional<size_t>> match_stored(const VarCollection& vars, size_t count,
                                                const std::function<StoredArray(size_t)>& stored,
                                                const RestoreMatch& how) {
    std::vector<std::string> new_names;
    if (how.rename) {
        new_names.reserve(count);
        for (size_t i = 0; i < count; ++i) new_names.push_back(how.rename(stored(i).name));
    }
    const auto renamed = [&](size_t i) -> const std::string& { return how.rename ? new_names[i] : stored(i).name; };
    // Names on disk are unique (the readers check); the renamer's may not be.
    if (how.rename) {
        if (const auto d = find_duplicate(count, renamed))
            throw CallerError(Code::invalid,
                              fmt::format("{}: the renamer maps both '{}' and '{}' to '{}'", how.label,
                                          stored(d->first).name, stored(d->second).name, renamed(d->second)));
    }
    EntryIndex on_disk(count, renamed);

    std::vector<std::optional<size_t>> source(vars.size());
    std::vector<bool> used(count, false);
    std::vector<std::string> missing, differ;
    for (size_t v = 0; v < vars.size(); ++v) {
        const std::optional<size_t> at = on_disk.find(vars.name(v));
        if (!at) {
            if (!how.partial) missing.push_back(vars.name(v));
            continue;
        }
        used[*at] = true;
        source[v] = at;
        const Array& a = vars.array(v);
        std::vector<int64_t> want = a.shape();
        if (const auto& rows = vars.rows(v); rows && how.global_rows) want[0] = rows->global_rows;
        const StoredArray s = stored(*at);
        // A void array's bytes were saved without their type: any variable of that item size may take them.
        const bool same_type = a.dtype() == s.dtype || (s.dtype == DType::void_ && !has_array_itemsize(a.dtype()));
        if (!same_type || a.itemsize() != s.itemsize || want != s.shape) {
            differ.push_back(fmt::format("'{}' is {} in the collection but {} in the {}", vars.name(v),
                                         describe(a.dtype(), a.itemsize(), want),
                                         describe(s.dtype, s.itemsize, s.shape), how.where));
        }
    }
    if (missing.empty() && differ.empty()) return source;
    std::vector<std::string> unused;
    for (size_t i = 0; i < count; ++i)
        if (!used[i]) unused.push_back(renamed(i));
    std::string msg = fmt::format("{}: cannot restore", how.label);
    if (!missing.empty()) msg += fmt::format("; missing from the {}: {}", how.where, quoted_list(missing));
    if (!differ.empty()) msg += fmt::format("; dtype or shape differ: {}", fmt::join(differ, "; "));
    if (!unused.empty()) msg += fmt::format("; unused names in the {}: {}", how.where, quoted_list(unused));
    throw Error(Code::mismatch, msg);
}

}  // namespace ckpt::core
