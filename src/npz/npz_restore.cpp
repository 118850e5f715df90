// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_restore.hpp"

#include "core/entry_index.hpp"
#include "core/error.hpp"
#include "core/find_duplicate.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ckpt {

namespace {
std::string describe(DType dtype, size_t itemsize, const std::vector<int64_t>& shape) {
    const std::string type = has_array_itemsize(dtype) ? fmt::format("{}{}", dtype_name(dtype), itemsize)
                                                    : std::string(dtype_name(dtype));
    return fmt::format("{} ({})", type, fmt::join(shape, ", "));
}

std::string quoted_list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out;
}

}  // namespace

void restore_npz(NpzReader& reader, VarCollection& vars, const Renamer& rename, bool partial) {
    vars.check_restorable(reader.label());
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, false);
    // Names after renaming.
    std::vector<std::string> new_names;
    if (rename) {
        new_names.reserve(reader.size());
        for (size_t i = 0; i < reader.size(); ++i) new_names.push_back(rename(reader.entry(i).name));
    }
    const auto renamed = [&](size_t i) -> const std::string& { return rename ? new_names[i] : reader.entry(i).name; };
    EntryIndex on_disk(reader.size(), renamed);
    // Names on disk are unique (the reader checks); the renamer's may not be.
    if (rename) {
        if (const auto d = find_duplicate(reader.size(), renamed))
            throw CallerError(Code::invalid, fmt::format("{}: the renamer maps both '{}' and '{}' to '{}'", reader.label(),
                                                         reader.entry(d->first).name, reader.entry(d->second).name,
                                                         renamed(d->second)));
    }

    constexpr size_t kAbsent = SIZE_MAX;
    std::vector<size_t> source(vars.size(), kAbsent);
    std::vector<bool> used(reader.size(), false);
    std::vector<std::string> missing, differ;
    for (size_t v = 0; v < vars.size(); ++v) {
        const std::optional<size_t> at = on_disk.find(vars.name(v));
        if (!at) {
            if (!partial) missing.push_back(vars.name(v));
            continue;
        }
        const Array& a = vars.array(v);
        const NpyHeader& h = reader.entry(*at).header;
        used[*at] = true;
        source[v] = *at;
        // A void member's bytes were saved without their type: any variable of that item size may take them.
        const bool same_type = a.dtype() == h.dtype || (h.dtype == DType::void_ && !has_array_itemsize(a.dtype()));
        if (!same_type || a.itemsize() != h.itemsize || a.shape() != h.shape) {
            differ.push_back(fmt::format("'{}' is {} in the collection but {} in the file", vars.name(v),
                                         describe(a.dtype(), a.itemsize(), a.shape()),
                                         describe(h.dtype, h.itemsize, h.shape)));
        }
    }
    if (!missing.empty() || !differ.empty()) {
        std::vector<std::string> unused;
        for (size_t i = 0; i < reader.size(); ++i)
            if (!used[i]) unused.push_back(renamed(i));
        std::string msg = fmt::format("{}: cannot restore", reader.label());
        if (!missing.empty()) msg += fmt::format("; missing from the file: {}", quoted_list(missing));
        if (!differ.empty()) msg += fmt::format("; dtype or shape differ: {}", fmt::join(differ, "; "));
        if (!unused.empty()) msg += fmt::format("; unused names in the file: {}", quoted_list(unused));
        throw Error(Code::mismatch, msg);
    }

    std::vector<NpzReader::Job> jobs;
    jobs.reserve(vars.size());
    for (size_t v = 0; v < vars.size(); ++v)
        if (source[v] != kAbsent) jobs.push_back({source[v], vars.array(v).data()});
    // Copied before the arrays are read, then moved in: running out of memory leaves the metadata as it was
    // (a copy assignment could stop halfway through the keys).
    Metadata metadata = reader.metadata();
    reader.read_entries(jobs);
    vars.metadata() = std::move(metadata);
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, source[v] != kAbsent);
}

}  // namespace ckpt
