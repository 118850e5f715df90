// SPDX-License-Identifier: Apache-2.0
// EntryIndex: which of n named entries has a given name, for restores that look up every variable of a
// collection among the stored arrays (core/restore_match).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

// Which entry holds each name: names hashed into a sorted array (no allocation per name), with a
// guess tried first — a collection restored from the file it was saved to lists its variables in the file's
// order, so for it the entry after the last one found is the one, and nothing needs hashing.
template <typename NameOf>
class EntryIndex {
public:
    EntryIndex(size_t n, NameOf name_of) : n_(n), name_of_(name_of) {}

    std::optional<size_t> find(const std::string& name) {
        if (next_ < n_ && name_of_(next_) == name) return next_++;
        build();
        const size_t h = std::hash<std::string_view>()(name);
        for (auto it = std::lower_bound(keys_.begin(), keys_.end(), std::make_pair(h, size_t{0}));
             it != keys_.end() && it->first == h; ++it) {
            if (name_of_(it->second) == name) {
                next_ = it->second + 1;
                return it->second;
            }
        }
        return std::nullopt;
    }

private:
    void build() {
        if (built_) return;
        keys_.resize(n_);
        for (size_t i = 0; i < n_; ++i) keys_[i] = {std::hash<std::string_view>()(name_of_(i)), i};
        std::sort(keys_.begin(), keys_.end());
        built_ = true;
    }
    size_t n_;
    NameOf name_of_;
    std::vector<std::pair<size_t, size_t>> keys_;  // (hash of the name, entry), sorted
    bool built_ = false;
    size_t next_ = 0;  // the guess
};
}  // namespace ckpt::core
