// Finding two equal names among many, for the readers' "no duplicate names" checks. Sorting the names themselves
// compared them with memcmp some n log n times — half the time of opening a file of 8192 small arrays; hashing
// them into a std::unordered_set allocated a node per name; sorting (hash, index) pairs was still a tenth of it.
// This puts indices into one open-addressing table of twice as many slots, and compares names only where hashes
// meet. Slots come from each hash mixed with a seed drawn once per process, so that names chosen to share slots
// (easy to find for an unkeyed hash) cannot make a hostile file's check quadratic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

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
            if (hashes[j] == h && std::string_view(name_of(j)) == name) return std::make_pair(j, i);
        }
    }
    return std::nullopt;
}

}  // namespace ckpt
