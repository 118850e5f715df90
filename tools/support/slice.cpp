// SPDX-License-Identifier: Apache-2.0
#include "slice.hpp"

#include "failure.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace ckpt_tool {
namespace {

// One comma-separated part of the index, as written.
struct Part {
    enum Kind { integer, slice, ellipsis } kind = integer;
    int64_t value = 0;                         // integer
    std::optional<int64_t> start, stop, step;  // slice
};

[[noreturn]] void not_an_index(const std::string& index, const std::string& why) {
    throw Failure(kExitUsage, fmt::format("'[{}]' is not an index: {}", index, why), CKPT_EINVAL);
}

std::string trimmed(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::optional<int64_t> parse_integer(const std::string& text, const std::string& index) {
    const std::string t = trimmed(text);
    if (t.empty()) return std::nullopt;
    size_t i = t[0] == '-' || t[0] == '+' ? 1 : 0;
    if (i == t.size()) not_an_index(index, fmt::format("'{}' is not an integer", t));
    int64_t v = 0;
    for (; i < t.size(); ++i) {
        if (t[i] < '0' || t[i] > '9') not_an_index(index, fmt::format("'{}' is not an integer", t));
        const int d = t[i] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - d) / 10)
            not_an_index(index, fmt::format("'{}' is too large", t));
        v = v * 10 + d;
    }
    return t[0] == '-' ? -v : v;
}

std::vector<Part> parse_parts(const std::string& index) {
    std::vector<Part> parts;
    if (trimmed(index).empty()) not_an_index(index, "it is empty");
    size_t from = 0;
    for (;;) {
        const size_t comma = index.find(',', from);
        const std::string text =
            trimmed(index.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
        Part p;
        if (text == "...") {
            p.kind = Part::ellipsis;
        } else if (text.find(':') != std::string::npos) {
            p.kind = Part::slice;
            const size_t c1 = text.find(':');
            const size_t c2 = text.find(':', c1 + 1);
            if (c2 != std::string::npos && text.find(':', c2 + 1) != std::string::npos)
                not_an_index(index, fmt::format("'{}' has more than two ':'", text));
            p.start = parse_integer(text.substr(0, c1), index);
            p.stop =
                parse_integer(text.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1), index);
            if (c2 != std::string::npos) p.step = parse_integer(text.substr(c2 + 1), index);
            if (p.step && *p.step == 0) throw Failure(kExitUsage, "slice step cannot be zero", CKPT_EINVAL);
        } else {
            const std::optional<int64_t> v = parse_integer(text, index);
            if (!v) {
                // "w[1,]" is numpy's w[1]; an empty part anywhere else is no index.
                if (comma == std::string::npos && !parts.empty()) break;
                not_an_index(index, "an index between commas is missing");
            }
            p.value = *v;
        }
        parts.push_back(p);
        if (comma == std::string::npos) break;
        from = comma + 1;
    }
    return parts;
}

// Python's slice.indices(n), then the number of positions.
AxisPick resolve_slice(const Part& p, int64_t n) {
    AxisPick a;
    a.step = p.step.value_or(1);
    const auto clamp = [&](std::optional<int64_t> v, int64_t if_none) -> int64_t {
        if (!v) return if_none;
        int64_t x = *v;
        if (x < 0) x += n;
        if (a.step > 0) return x < 0 ? 0 : x > n ? n : x;
        return x < 0 ? -1 : x > n - 1 ? n - 1 : x;
    };
    a.start = clamp(p.start, a.step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(p.stop, a.step > 0 ? n : -1);
    if (a.step > 0)
        a.count = stop > a.start ? (stop - a.start + a.step - 1) / a.step : 0;
    else
        a.count = a.start > stop ? (a.start - stop - a.step - 1) / -a.step : 0;
    return a;
}

// Copies the selection along axes [axis, ...) of the item block `at` bytes into the whole array; `a.data` holds
// the array from byte `loaded` on.
void copy_picks(const ArrayView& a, uint64_t loaded, const std::vector<AxisPick>& picks,
                const std::vector<uint64_t>& strides, size_t axis, uint64_t at, unsigned char*& dst) {
    if (axis == picks.size()) {
        std::memcpy(dst, a.data + (at - loaded), a.itemsize);
        dst += a.itemsize;
        return;
    }
    const AxisPick& p = picks[axis];
    const int64_t count = p.single ? 1 : p.count;
    for (int64_t k = 0; k < count; ++k) {
        const uint64_t position = static_cast<uint64_t>(p.start + k * p.step);
        copy_picks(a, loaded, picks, strides, axis + 1, at + position * strides[axis], dst);
    }
}

}  // namespace

std::optional<IndexedName> split_index(const std::string& text) {
    if (text.empty() || text.back() != ']') return std::nullopt;
    const size_t open = text.find('[');
    if (open == std::string::npos || open == 0) return std::nullopt;
    return IndexedName{text.substr(0, open), text.substr(open + 1, text.size() - open - 2)};
}

std::vector<AxisPick> resolve_index(const std::string& index, const std::vector<int64_t>& shape) {
    std::vector<Part> parts = parse_parts(index);
    size_t ellipses = 0, indexed = 0;
    for (const Part& p : parts) (p.kind == Part::ellipsis ? ellipses : indexed) += 1;
    if (ellipses > 1) throw Failure(kExitUsage, "an index can only have a single ellipsis ('...')", CKPT_EINVAL);
    if (indexed > shape.size())
        throw Failure(kExitIo,
                      fmt::format("too many indices for array: array is {}-dimensional, but {} were indexed",
                                  shape.size(), indexed),
                      CKPT_EINVAL);
    // The ellipsis, or the end, stands for full slices of the axes not indexed.
    std::vector<Part> full;
    for (const Part& p : parts) {
        if (p.kind != Part::ellipsis) {
            full.push_back(p);
            continue;
        }
        for (size_t k = 0; k < shape.size() - indexed; ++k) full.push_back(Part{Part::slice, 0, {}, {}, {}});
    }
    while (full.size() < shape.size()) full.push_back(Part{Part::slice, 0, {}, {}, {}});

    std::vector<AxisPick> picks;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
        const Part& p = full[axis];
        const int64_t n = shape[axis];
        if (p.kind == Part::slice) {
            picks.push_back(resolve_slice(p, n));
            continue;
        }
        if (p.value >= n || p.value < -n)
            throw Failure(kExitIo, fmt::format("index {} is out of bounds for axis {} with size {}", p.value, axis, n),
                          CKPT_EINVAL);
        AxisPick a;
        a.single = true;
        a.start = p.value < 0 ? p.value + n : p.value;
        a.count = 1;
        picks.push_back(a);
    }
    return picks;
}

void rows_needed(const std::vector<AxisPick>& picks, const std::vector<int64_t>& shape, int64_t& first, int64_t& last) {
    if (shape.empty()) {
        first = 0;
        last = 1;
        return;
    }
    for (const AxisPick& p : picks)
        if (p.count == 0) {
            first = last = 0;
            return;
        }
    const AxisPick& p = picks[0];
    const int64_t end = p.start + (p.count - 1) * p.step;  // the last position picked
    first = std::min(p.start, end);
    last = std::max(p.start, end) + 1;
}

ArrayView gather(const ArrayView& a, int64_t first_row, const std::vector<AxisPick>& picks,
                 std::vector<unsigned char>& out) {
    ArrayView r;
    r.dtype = a.dtype;
    r.itemsize = a.itemsize;
    uint64_t items = 1;
    for (const AxisPick& p : picks) {
        if (!p.single) r.shape.push_back(p.count);
        items *= static_cast<uint64_t>(p.single ? 1 : p.count);
    }
    out.resize(static_cast<size_t>(items * a.itemsize));
    r.data = out.data();
    if (items == 0) return r;
    std::vector<uint64_t> strides(picks.size());  // bytes between positions of each axis
    uint64_t stride = a.itemsize;
    for (size_t axis = picks.size(); axis-- > 0;) {
        strides[axis] = stride;
        stride *= static_cast<uint64_t>(a.shape[axis]);
    }
    const uint64_t loaded = picks.empty() ? 0 : static_cast<uint64_t>(first_row) * strides[0];
    unsigned char* dst = out.data();
    copy_picks(a, loaded, picks, strides, 0, 0, dst);
    return r;
}

}  // namespace ckpt_tool
