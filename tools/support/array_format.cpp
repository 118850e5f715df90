// SPDX-License-Identifier: Apache-2.0
#include "array_format.hpp"

#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <memory>
#include <vector>

namespace ckpt_tool {
namespace {

constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 75;
constexpr int kPrecision = 8;  // numpy's default: at most 8 digits after the point

// One real component of the shown elements (the reals, or the real or imaginary parts of complex numbers),
// formatted as numpy's FloatingFormat does in its default 'maxprec' mode.
class FloatColumn {
public:
    // `each` calls its argument with every shown value; it is called a few times (the values are not stored, so
    // --full on a large array needs no memory beyond the array).
    using Values = std::function<void(const std::function<void(const Real&)>&)>;

    FloatColumn(const Values& each, bool sign) : sign_(sign) {
        double max_val = 0, min_val = INFINITY;
        each([&](const Real& r) {
            if (!std::isfinite(r.value) || r.value == 0) return;
            max_val = std::max(max_val, std::fabs(r.value));
            min_val = std::min(min_val, std::fabs(r.value));
        });
        sci_ = max_val > 0 && (max_val >= 1e8 || min_val < 0.0001 || max_val / min_val > 1000.0);
        if (sci_) {
            each([&](const Real& r) {
                if (std::isfinite(r.value) && precision_ < kPrecision)
                    precision_ = std::max(precision_, digits_needed(r));
            });
            // numpy writes every exponent with as many digits as the longest needs (1e+000 beside 1e+300).
            each([&](const Real& r) {
                if (!std::isfinite(r.value)) return;
                const std::string e = render(r.value, precision_);
                exp_digits_ = std::max(exp_digits_, e.size() - e.find('e') - 2);
            });
        }
        each([&](const Real& r) {
            const std::string s = text(r);
            const size_t point = s.find('.');
            if (sci_ || point == std::string::npos) {
                other_ = std::max(other_, s.size());
            } else {
                left_ = std::max(left_, point);
                right_ = std::max(right_, s.size() - point);
            }
        });
        width_ = std::max(other_, left_ + right_);
    }

    // r written in the column's notation and padded to its width.
    std::string operator()(const Real& r) const {
        std::string s = text(r);
        const size_t point = s.find('.');
        if (!sci_ && point != std::string::npos) {
            s.insert(0, left_ - point, ' ');
            s.append(right_ - (s.size() - left_), ' ');
        }
        if (s.size() < width_) s.insert(0, width_ - s.size(), ' ');
        return s;
    }

private:
    // The fewest digits after the point (at most kPrecision) with which r reads back, in this notation.
    int digits_needed(const Real& r) const {
        for (int p = 0; p < kPrecision; ++p)
            if (reads_back(r, render(r.value, p))) return p;
        return kPrecision;
    }

    std::string render(double v, int digits) const {
        return sci_ ? fmt::format("{:.{}e}", v, digits) : fmt::format("{:.{}f}", v, digits);
    }

    std::string text(const Real& r) const {
        std::string s;
        if (std::isnan(r.value)) {
            s = "nan";
        } else if (std::isinf(r.value)) {
            s = r.value < 0 ? "-inf" : "inf";
        } else if (sci_) {
            s = render(r.value, precision_);
            const size_t e = s.find('e');
            if (s.size() - e - 2 < exp_digits_) s.insert(e + 2, exp_digits_ - (s.size() - e - 2), '0');
            if (precision_ == 0) s.insert(s.find('e'), ".");
        } else {
            const int digits = digits_needed(r);
            s = render(r.value, digits);
            if (digits == kPrecision) {  // not exact at this precision: numpy drops the trailing zeros
                while (s.back() == '0') s.pop_back();
            }
            if (s.find('.') == std::string::npos) s += ".";
        }
        if (sign_ && s[0] != '-') s.insert(0, "+");
        return s;
    }

    bool sign_;
    bool sci_ = false;
    int precision_ = 0;
    size_t exp_digits_ = 2;
    size_t left_ = 0, right_ = 0, other_ = 0, width_ = 0;
};

class Writer {
public:
    Writer(const ArrayView& a, bool summarise, const std::function<void(const std::string&)>& out,
           const std::function<void(uint64_t)>& written)
        : a_(a), summarise_(summarise), out_(out), written_(written) {
        stride_.assign(a.shape.size(), 1);
        for (size_t k = a.shape.size(); k-- > 1;) stride_[k - 1] = stride_[k] * static_cast<uint64_t>(a.shape[k]);
    }

    void write() {
        const Kind kind = kind_of(a_.dtype);
        // The values of one real component of the shown elements: the reals, or a part of the complex numbers.
        const auto component = [&](int part) -> FloatColumn::Values {
            return [this, part](const std::function<void(const Real&)>& f) {
                visit(0, 0, [&](uint64_t i) {
                    if (part == 0 && kind_of(a_.dtype) == Kind::real) return f(real_item(a_, i));
                    Real re, im;
                    complex_item(a_, i, re, im);
                    f(part == 0 ? re : im);
                });
            };
        };
        if (kind == Kind::real || kind == Kind::complex) column_a_ = std::make_unique<FloatColumn>(component(0), false);
        if (kind == Kind::complex) column_b_ = std::make_unique<FloatColumn>(component(1), true);
        if (kind == Kind::boolean || kind == Kind::signed_integer || kind == Kind::unsigned_integer)
            visit(0, 0, [&](uint64_t i) { width_ = std::max(width_, integer_text(a_, i).size()); });
        if (kind == Kind::boolean) width_ = 5;  // numpy pads True to False's width in every array but a 0-d one
        render(0, 0);
        flush_spaces();
        out_("\n");
    }

private:
    std::string cell(uint64_t i) const {
        switch (kind_of(a_.dtype)) {
            case Kind::real: return (*column_a_)(real_item(a_, i));
            case Kind::complex: {
                Real re, im;
                complex_item(a_, i, re, im);
                std::string imag = (*column_b_)(im);
                // numpy puts the j right after the digits, before the padding.
                const size_t end = imag.find_last_not_of(' ') + 1;
                return (*column_a_)(re) + imag.substr(0, end) + "j" + imag.substr(end);
            }
            case Kind::text: return text_repr(a_, i);
            default: {
                std::string s = integer_text(a_, i);
                return std::string(width_ - s.size(), ' ') + s;
            }
        }
    }

    // The indices shown along an axis of n items: all, or the first and last kEdgeItems around a -1 (the "...").
    std::vector<int64_t> shown(int64_t n) const {
        std::vector<int64_t> at;
        const bool cut = summarise_ && n > 2 * kEdgeItems;
        for (int64_t k = 0; k < n; ++k) {
            if (cut && k == kEdgeItems) {
                at.push_back(-1);
                k = n - kEdgeItems - 1;
                continue;
            }
            at.push_back(k);
        }
        return at;
    }

    template <typename F>
    void visit(size_t axis, uint64_t offset, const F& leaf) {
        for (int64_t k : shown(a_.shape[axis])) {
            if (k < 0) continue;
            const uint64_t at = offset + static_cast<uint64_t>(k) * stride_[axis];
            if (axis + 1 == a_.shape.size()) {
                leaf(at);
            } else {
                visit(axis + 1, at, leaf);
            }
        }
    }

    // Text goes out at once, except trailing spaces: numpy drops those where a line wraps.
    void put(const std::string& s) {
        const size_t end = s.find_last_not_of(' ');
        if (end == std::string::npos) {
            pending_spaces_ += s.size();
        } else {
            flush_spaces();
            out_(s.substr(0, end + 1));
            pending_spaces_ = s.size() - end - 1;
        }
        column_ += text_width(s);
    }
    void flush_spaces() {
        if (pending_spaces_ != 0) out_(std::string(pending_spaces_, ' '));
        pending_spaces_ = 0;
    }
    void newline(size_t lines, size_t indent) {
        pending_spaces_ = 0;
        out_(std::string(lines, '\n'));
        column_ = 0;
        put(std::string(indent, ' '));
    }

    void render(size_t axis, uint64_t offset) {
        put("[");
        const std::vector<int64_t> at = shown(a_.shape[axis]);
        const bool innermost = axis + 1 == a_.shape.size();
        for (size_t p = 0; p < at.size(); ++p) {
            if (innermost) {
                const std::string word = at[p] < 0 ? "..." : cell(offset + static_cast<uint64_t>(at[p]));
                if (written_ && ++cells_ % kReportEvery == 0) written_(cells_);
                // numpy wraps before a word that would pass 75 characters less one per open bracket.
                if (p > 0) {
                    if (column_ + 1 + text_width(word) > kLineWidth - a_.shape.size()) {
                        newline(1, axis + 1);
                    } else {
                        put(" ");
                    }
                }
                put(word);
                continue;
            }
            // numpy separates rows by a newline, 2-d blocks by a blank line, and so on.
            if (p > 0) newline(a_.shape.size() - axis - 1, axis + 1);
            if (at[p] < 0) {
                put("...");
            } else {
                render(axis + 1, offset + static_cast<uint64_t>(at[p]) * stride_[axis]);
            }
        }
        put("]");
    }

    const ArrayView& a_;
    bool summarise_;
    const std::function<void(const std::string&)>& out_;
    const std::function<void(uint64_t)>& written_;
    static constexpr uint64_t kReportEvery = 4096;
    uint64_t cells_ = 0;
    std::vector<uint64_t> stride_;
    std::unique_ptr<FloatColumn> column_a_, column_b_;
    size_t width_ = 0;
    size_t column_ = 0;
    size_t pending_spaces_ = 0;
};

}  // namespace

void write_array(const ArrayView& a, bool summarise, const std::function<void(const std::string&)>& out,
                 const std::function<void(uint64_t)>& written) {
    if (a.shape.empty()) {
        out(format_scalar(a, 0) + "\n");
        return;
    }
    if (a.count() == 0) {
        out("[]\n");
        return;
    }
    Writer(a, summarise, out, written).write();
}

}  // namespace ckpt_tool
