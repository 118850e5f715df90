// SPDX-License-Identifier: Apache-2.0
// How the tool writes things for people: sizes, shapes, times and aligned tables.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace ckpt_tool {

// "512 B", "1.5 KiB", "12.3 MiB", "2.0 GiB" (binary units, one decimal); exact "1234567" with exact_bytes.
std::string human_size(uint64_t bytes, bool exact_bytes);
// numpy's tuple notation: "()", "(3,)", "(2, 3)".
std::string shape_text(const std::vector<int64_t>& shape);
// "2024-05-01 12:00:00" in the local time zone.
std::string local_time(std::time_t t);
// "2024-05-01T12:00:00Z".
std::string utc_time(std::time_t t);

// Columns separated by two spaces, each as wide as its widest cell; numeric columns aligned right. The last
// column is never padded.
class Table {
public:
    explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned = {});
    void add(std::vector<std::string> row);
    std::string render() const;
    bool empty() const { return rows_.size() <= 1; }

private:
    std::vector<std::vector<std::string>> rows_;
    std::vector<bool> right_;
};

// Display width of UTF-8 text (code points; enough for names and metadata).
size_t text_width(const std::string& s);
// UTF-8 text no wider than `width` code points: as it is when it fits, else cut on a code point boundary with
// `mark` (counted in the width) in place of what is cut — its end ("a long va..."), or with keep_end its start
// ("...ers.11.mlp.weight", where the end of a name says most).
std::string shorten(const std::string& text, size_t width, const std::string& mark, bool keep_end = false);

}  // namespace ckpt_tool
