// SPDX-License-Identifier: Apache-2.0
// The metadata of a collection: string key/values a checkpoint carries (step, time, loss, notes). How a file holds
// them is npz/metadata.hpp's.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ckpt::core {

// The variable name reserved for a file's metadata member (the member is kMetadataName + ".npy"): no collection
// holds a variable of that name.
constexpr std::string_view kMetadataName = "__ckpt_metadata__";
// The same for the chunk table member (npz/chunks.hpp).
constexpr std::string_view kChunkTableName = "__ckpt_chunks__";

// String key/values in insertion order; keys unique, non-empty, and like values valid UTF-8 without NUL.
class Metadata {
public:
    // Adds or replaces (in place). Throws Error(invalid) for a bad key or value.
    void set(std::string key, std::string value);
    // Removes key if present.
    void remove(std::string_view key);
    // The value of key, or nullptr.
    const std::string* find(std::string_view key) const;
    size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    const std::string& key(size_t i) const { return entries_[i].first; }
    const std::string& value(size_t i) const { return entries_[i].second; }

private:
    std::vector<std::pair<std::string, std::string>> entries_;
    std::unordered_map<std::string, size_t> index_;
};

// The key/values a save writes of a collection's `all`: every one when `manager_keys` (a checkpoint manager's own
// save), else all but the "ckpt."-prefixed ones — the manager's index, time and metrics, which a collection restored
// from an earlier checkpoint carries and which must never be written again as if they described a new file.
Metadata written_metadata(const Metadata& all, bool manager_keys);

// Why `key` cannot be a metadata key ("is empty", "contains NUL", "is not valid UTF-8"), or nullptr.
const char* metadata_key_problem(std::string_view key);

}  // namespace ckpt::core
