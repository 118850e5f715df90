// SPDX-License-Identifier: Apache-2.0
// numpy's basic indexing for `ckpt cat FILE 'w[0:4, :]'`: integers (negative from the end), slices start:stop:step
// (each part optional, negative steps too) and one `...`, with numpy's rules and its IndexError messages.
#pragma once

#include "values.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckpt_tool {

// "w[0:4, :]" -> name "w", index "0:4, :" (the text between the outer brackets). None when `text` does not end
// in ']' or has no '['.
struct IndexedName {
    std::string name;
    std::string index;
};
std::optional<IndexedName> split_index(const std::string& text);

// One axis of the selection, resolved against the array's shape: a single position (the axis is dropped) or the
// positions start, start + step, ... (count of them).
struct AxisPick {
    bool single = false;
    int64_t start = 0;
    int64_t step = 1;
    int64_t count = 0;
};

// Resolves `index` against `shape` as numpy does; throws Failure (exit status 3) with numpy's words for an index out
// of bounds or too many indices, and (exit status 2) for text that is no index.
std::vector<AxisPick> resolve_index(const std::string& index, const std::vector<int64_t>& shape);

// The rows [first, last) of axis 0 that the picks read (none of a 0-d array: [0, 1)); first == last when the
// selection is empty.
void rows_needed(const std::vector<AxisPick>& picks, const std::vector<int64_t>& shape, int64_t& first, int64_t& last);

// Copies the selected items of `a` — whose data holds rows [first_row, ...) of axis 0 only — into `out`, and
// returns the view of the result (its shape without the single axes), pointing into `out`.
ArrayView gather(const ArrayView& a, int64_t first_row, const std::vector<AxisPick>& picks,
                 std::vector<unsigned char>& out);

}  // namespace ckpt_tool
