// SPDX-License-Identifier: Apache-2.0
#include "core/var_collection.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace ckpt::core {

void VarCollection::add(std::string name, Array array) {
    if (name.empty()) fail(Code::invalid, "variable name is empty");
    if (name.find('\0') != std::string::npos) fail(Code::invalid, "variable name contains NUL");
    if (!valid_utf8(name)) fail(Code::invalid, "variable name is not valid UTF-8");
    if (name == kMetadataName) fail(Code::invalid, "'{}' is reserved for the file's metadata member", kMetadataName);
    if (name == kChunkTableName)
        fail(Code::invalid, "'{}' is reserved for the file's chunk table member", kChunkTableName);
    if (index_.count(name)) fail(Code::exists, "variable '{}' is already in the collection", name);
    // Room first, so a failed insert below cannot leave the two out of step; grown geometrically, because
    // reserving one more each time made adding n variables cost n^2.
    if (entries_.size() == entries_.capacity()) entries_.reserve(2 * entries_.size() + 8);
    index_.emplace(name, entries_.size());
    entries_.push_back(Entry{std::move(name), std::move(array), false, std::nullopt});
}

void VarCollection::set_rows(size_t i, std::optional<RowSplit> rows) {
    if (rows) {
        const std::vector<int64_t>& shape = entries_.at(i).array.shape();
        if (shape.empty()) fail(Code::invalid, "variable '{}' is a scalar: it has no rows to split", name(i));
        if (rows->begin < 0 || rows->global_rows < 0 || rows->begin > rows->global_rows ||
            shape[0] > rows->global_rows - rows->begin)
            fail(Code::invalid, "variable '{}': rows [{}, {} + {}) are not within [0, {})", name(i), rows->begin,
                 rows->begin, shape[0], rows->global_rows);
    }
    entries_.at(i).rows = rows;
}

std::optional<size_t> VarCollection::find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    if (it == index_.end()) return std::nullopt;
    return it->second;
}

void VarCollection::check_restorable(const std::string& what) const {
    for (const Entry& e : entries_)
        if (e.array.source() != nullptr)
            throw CallerError(Code::invalid, fmt::format("{}: variable '{}' is a source (ckpt_vars_add_source), which "
                                                         "nothing can be restored into", what, e.name));
}

}  // namespace ckpt::core
