// SPDX-License-Identifier: Apache-2.0
// Finding two equal names among many, for the readers' "no duplicate names" checks. Sorting the names themselves
// compared them with memcmp some n log n times — half the time of opening a file of 8192 small arrays; hashing
// them into a std::unordered_set allocated a node per name; sorting (hash, index) pairs was still a tenth of it.
// This puts indices into one open-addressing table of twice as many slots, and compares names only where hashes
// meet. Slots come from each hash mixed with a seed drawn once per process, so names whose hashes differ cannot
// be chosen to share slots. std::hash is not keyed, though, so a hostile file can hold many different names with
// one hash: once comparisons of equal hashes outnumber the names, the names are sorted instead (n log n).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

// find_duplicate by sorting the names: n log n comparisons whatever they hash to.
template <typename NameOf>
std::optional<std::pair<size_t, size_t>> find_duplicate_by_sorting(size_t n, const NameOf& name_of) {
    std::vector<size_t> by_name(n);
    for (size_t i = 0; i < n; ++i) by_name[i] = i;
    const auto name = [&](size_t i) { return std::string_view(name_of(i)); };
    std::sort(by_name.begin(), by_name.end(), [&](size_t a, size_t b) { return name(a) != name(b) ? name(a) < name(b) : a < b; });
    std::optional<std::pair<size_t, size_t>> first;  // the pair whose later name comes first
    for (size_t k = 1; k < n; ++k) {
        if (name(by_name[k]) != name(by_name[k - 1])) continue;
        if (!first || by_name[k] < first->second) first = std::make_pair(by_name[k - 1], by_name[k]);
    }
    return first;
}

// Indices (earlier, later) of two equal names among name_of(0) … name_of(n - 1) — the later one the first name
// that repeats an earlier one — or nothing if all differ.
template <typename NameOf>
std::optional<std::pair<size_t, size_t>> find_duplicate(size_t n, const NameOf& name_of) {
    size_t slots = 16;
    while (slots < 2 * n) slots *= 2;
    constexpr size_t kEmpty = SIZE_MAX;
    std::vector<size_t> table(slots, kEmpty);
    std::vector<size_t> hashes(n);
    static const uint64_t seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    const auto slot_of = [&](uint64_t x) {  // splitmix64's finalizer
        x ^= seed;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
        return static_cast<size_t>(x ^ (x >> 31)) & (slots - 1);
    };
    size_t compared = 0;
    for (size_t i = 0; i < n; ++i) {
        const std::string_view name(name_of(i));
        const size_t h = std::hash<std::string_view>()(name);
        hashes[i] = h;
        for (size_t s = slot_of(h);; s = (s + 1) & (slots - 1)) {
            const size_t j = table[s];
            if (j == kEmpty) {
                table[s] = i;
                break;
            }
            if (hashes[j] != h) continue;
            if (std::string_view(name_of(j)) == name) return std::make_pair(j, i);
            if (++compared > n) return find_duplicate_by_sorting(n, name_of);
        }
    }
    return std::nullopt;
}

}  // namespace ckpt::core
