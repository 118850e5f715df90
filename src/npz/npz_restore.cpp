#include "npz/npz_restore.hpp"

#include "core/error.hpp"

#include <fmt/ranges.h>

#include <cstdint>
#include <string_view>
#include <unordered_map>
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
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, false);
    // Names after renaming (views of the reader's names, or of `new_names`) -> entry.
    std::vector<std::string> new_names;
    if (rename) {
        new_names.reserve(reader.size());
        for (size_t i = 0; i < reader.size(); ++i) new_names.push_back(rename(reader.entry(i).name));
    }
    const auto renamed = [&](size_t i) -> const std::string& { return rename ? new_names[i] : reader.entry(i).name; };
    std::unordered_map<std::string_view, size_t> on_disk;
    on_disk.reserve(reader.size());
    for (size_t i = 0; i < reader.size(); ++i) {
        auto [it, fresh] = on_disk.emplace(renamed(i), i);
        if (!fresh)
            throw CallerError(Code::invalid, fmt::format("{}: the renamer maps both '{}' and '{}' to '{}'",
                                                         reader.label(), reader.entry(it->second).name,
                                                         reader.entry(i).name, renamed(i)));
    }

    constexpr size_t kAbsent = SIZE_MAX;
    std::vector<size_t> source(vars.size(), kAbsent);
    std::vector<bool> used(reader.size(), false);
    std::vector<std::string> missing, differ;
    for (size_t v = 0; v < vars.size(); ++v) {
        auto it = on_disk.find(vars.name(v));
        if (it == on_disk.end()) {
            if (!partial) missing.push_back(vars.name(v));
            continue;
        }
        const Array& a = vars.array(v);
        const NpyHeader& h = reader.entry(it->second).header;
        used[it->second] = true;
        source[v] = it->second;
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
