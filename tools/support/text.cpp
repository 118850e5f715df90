// SPDX-License-Identifier: Apache-2.0
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ckpt_tool {

std::string human_size(uint64_t bytes, bool exact_bytes) {
    if (exact_bytes) return fmt::format("{}", bytes);
    if (bytes < 1024) return fmt::format("{} B", bytes);
    static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = static_cast<double>(bytes) / 1024;
    size_t unit = 0;
    // Move up while the value would print as 1024.0 or more in this unit.
    while (value >= 1023.95 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024;
        ++unit;
    }
    return fmt::format("{:.1f} {}", value, units[unit]);
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string out = "(";
    for (size_t k = 0; k < shape.size(); ++k) {
        if (k > 0) out += ", ";
        out += fmt::format("{}", shape[k]);
    }
    if (shape.size() == 1) out += ",";
    return out + ")";
}

std::string local_time(std::time_t t) {
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

std::string utc_time(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

size_t text_width(const std::string& s) {
    size_t width = 0;
    for (unsigned char ch : s)
        if ((ch & 0xC0) != 0x80) ++width;
    return width;
}

std::string shorten(const std::string& text, size_t width, const std::string& mark, bool keep_end) {
    if (text_width(text) <= width) return text;
    const size_t keep = width > text_width(mark) ? width - text_width(mark) : 0;
    const auto continuation = [&](size_t at) { return (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80; };
    size_t cut = keep_end ? text.size() : 0;
    for (size_t k = 0; k < keep; ++k) {
        if (keep_end) {
            do --cut;
            while (cut > 0 && continuation(cut));
        } else {
            do ++cut;
            while (cut < text.size() && continuation(cut));
        }
    }
    return keep_end ? mark + text.substr(cut) : text.substr(0, cut) + mark;
}

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned) : right_(std::move(right_aligned)) {
    right_.resize(header.size(), false);
    rows_.push_back(std::move(header));
}

void Table::add(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
}

std::string Table::render() const {
    const size_t columns = rows_.front().size();
    std::vector<size_t> width(columns, 0);
    for (const auto& row : rows_)
        for (size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], text_width(row[c]));
    std::string out;
    for (const auto& row : rows_) {
        std::string line;
        for (size_t c = 0; c < columns; ++c) {
            const size_t pad = width[c] - text_width(row[c]);
            if (c > 0) line += "  ";
            if (right_[c]) line.append(pad, ' ');
            line += row[c];
            if (!right_[c] && c + 1 < columns) line.append(pad, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

}  // namespace ckpt_tool
