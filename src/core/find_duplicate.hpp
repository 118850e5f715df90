// Finding two equal names among many, for the readers' "no duplicate names" checks. Sorting the names themselves
// compared them with memcmp some n log n times — half the time of opening a file of 8192 small arrays; hashing
// them into a std::unordered_set allocated a node per name. This sorts (hash, index) pairs instead and compares
// names only where hashes meet.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

// Indices (earlier, later) of two equal names among name_of(0) … name_of(n - 1), or nothing if all differ.
template <typename NameOf>
std::optional<std::pair<size_t, size_t>> find_duplicate(size_t n, const NameOf& name_of) {
    std::vector<std::pair<size_t, size_t>> keys(n);  // (hash, index)
    for (size_t i = 0; i < n; ++i) keys[i] = {std::hash<std::string_view>()(name_of(i)), i};
    std::sort(keys.begin(), keys.end());
    for (size_t i = 1; i < n; ++i) {
        for (size_t j = i; j-- > 0 && keys[j].first == keys[i].first;)
            if (std::string_view(name_of(keys[j].second)) == std::string_view(name_of(keys[i].second)))
                return std::make_pair(keys[j].second, keys[i].second);
    }
    return std::nullopt;
}

}  // namespace ckpt
