// SPDX-License-Identifier: Apache-2.0
#include "core/decimal_index.hpp"

#include <fmt/format.h>

namespace ckpt::core {

std::string padded_index(int64_t index, size_t width) { return fmt::format("{:0{}}", index, width); }

std::optional<int64_t> parse_padded_index(std::string_view digits, size_t width) {
    constexpr size_t kMaxDigits = 19;  // INT64_MAX has 19 digits, and 19 nines fit in a uint64_t
    if (width == 0 || digits.size() < width || digits.size() > kMaxDigits) return std::nullopt;
    if (digits.size() > width && digits[0] == '0') return std::nullopt;
    uint64_t value = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    if (value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(value);
}

}  // namespace ckpt::core
