// SPDX-License-Identifier: Apache-2.0
#include "core/metadata.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace ckpt::core {

const char* metadata_key_problem(std::string_view key) {
    if (key.empty()) return "is empty";
    if (key.find('\0') != std::string_view::npos) return "contains NUL";
    if (!valid_utf8(key)) return "is not valid UTF-8";
    return nullptr;
}

Metadata written_metadata(const Metadata& all, bool manager_keys) {
    if (manager_keys) return all;
    Metadata saved;
    for (size_t i = 0; i < all.size(); ++i)
        if (all.key(i).compare(0, 5, "ckpt.") != 0) saved.set(all.key(i), all.value(i));
    return saved;
}

void Metadata::set(std::string key, std::string value) {
    if (const char* problem = metadata_key_problem(key)) fail(Code::invalid, "metadata key {}", problem);
    if (value.find('\0') != std::string::npos || !valid_utf8(value))
        fail(Code::invalid, "the metadata value of '{}' is not valid UTF-8 without NUL", key);
    if (const auto it = index_.find(key); it != index_.end()) {
        entries_[it->second].second = std::move(value);
        return;
    }
    if (entries_.size() == entries_.capacity()) entries_.reserve(2 * entries_.size() + 8);  // so emplace cannot throw
    index_.emplace(key, entries_.size());
    entries_.emplace_back(std::move(key), std::move(value));
}

void Metadata::remove(std::string_view key) {
    const auto it = index_.find(std::string(key));
    if (it == index_.end()) return;
    const size_t at = it->second;
    index_.erase(it);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(at));
    for (auto& [k, i] : index_)
        if (i > at) --i;
}

const std::string* Metadata::find(std::string_view key) const {
    const auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &entries_[it->second].second;
}

}  // namespace ckpt::core
