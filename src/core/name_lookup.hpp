// SPDX-License-Identifier: Apache-2.0
// NameLookup: which of a file's n named entries has a given name, for the readers' find(). The names' hashes are
// sorted with their entries at the first lookup, and a lookup is a binary search over the hashes and a comparison of
// the names that share one. Sorting the names themselves compared them with memcmp n log n times — a tenth of
// opening a Hugging Face index of a thousand tensors, whose names share long prefixes ("model.layers.12.…").
// Thread-safe: the first lookups of several threads build it once. Movable with the reader that holds it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

class NameLookup {
public:
    // The entry among name_of(0) … name_of(n - 1) (names that all differ; n the same on every call) named `name`.
    template <typename NameOf>
    std::optional<size_t> find(size_t n, std::string_view name, const NameOf& name_of) const {
        std::call_once(built_->once, [&] {
            built_->keys.resize(n);
            for (size_t i = 0; i < n; ++i) built_->keys[i] = {hash(name_of(i)), i};
            std::sort(built_->keys.begin(), built_->keys.end());
        });
        const std::vector<std::pair<size_t, size_t>>& keys = built_->keys;
        const size_t h = hash(name);
        for (auto it = std::lower_bound(keys.begin(), keys.end(), std::make_pair(h, size_t{0}));
             it != keys.end() && it->first == h; ++it)
            if (std::string_view(name_of(it->second)) == name) return it->second;
        return std::nullopt;
    }

private:
    static size_t hash(std::string_view name) { return std::hash<std::string_view>()(name); }
    struct Built {
        std::once_flag once;
        std::vector<std::pair<size_t, size_t>> keys;  // (hash of the name, entry), sorted
    };
    std::unique_ptr<Built> built_ = std::make_unique<Built>();
};

}  // namespace ckpt::core
