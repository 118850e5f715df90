// ckpt cat FILE NAME: one array's values, summarised as numpy prints large arrays (the first and last 3 along
// each axis), every value with --full, or as JSON.
#include "commands.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <new>

namespace ckpt_tool {
namespace {

struct CatOptions {
    std::string file, name;
    bool full = false;
    bool json = false;
};

// numpy's defaults: arrays of more than 1000 elements are summarised to 3 items at each end of every axis, and
// lines wrap at 75 characters.
constexpr uint64_t kSummaryThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 75;

// Output through one growing buffer, written out in large pieces.
class Out {
public:
    ~Out() { flush(); }
    Out& operator<<(const std::string& s) {
        buf_ += s;
        if (buf_.size() >= (size_t{1} << 16)) flush();
        return *this;
    }
    void flush() {
        std::cout << buf_;
        buf_.clear();
    }

private:
    std::string buf_;
};

class Printer {
public:
    Printer(const ArrayView& a, bool summarise) : a_(a), summarise_(summarise) {
        stride_.assign(a.shape.size(), 1);
        for (size_t k = a.shape.size(); k-- > 1;) stride_[k - 1] = stride_[k] * static_cast<uint64_t>(a.shape[k]);
    }

    void print(Out& out) {
        if (a_.shape.empty()) {
            out << format_element(a_, 0) << "\n";
            return;
        }
        if (a_.count() == 0) {
            out << "[]\n";
            return;
        }
        visit(0, 0, [&](uint64_t i) { width_ = std::max(width_, text_width(format_element(a_, i))); });
        column_ = 0;
        render(0, 0, out);
        out << "\n";
    }

private:
    // The indices shown along an axis of n items: all, or the first and last kEdgeItems around a -1 (the "...").
    std::vector<int64_t> shown(int64_t n) const {
        std::vector<int64_t> at;
        if (summarise_ && n > 2 * kEdgeItems) {
            for (int64_t k = 0; k < kEdgeItems; ++k) at.push_back(k);
            at.push_back(-1);
            for (int64_t k = n - kEdgeItems; k < n; ++k) at.push_back(k);
        } else {
            for (int64_t k = 0; k < n; ++k) at.push_back(k);
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

    void put(Out& out, const std::string& s) {
        out << s;
        column_ += text_width(s);
    }
    void newline(Out& out, size_t lines, size_t indent) {
        out << std::string(lines, '\n') + std::string(indent, ' ');
        column_ = indent;
    }

    void render(size_t axis, uint64_t offset, Out& out) {
        put(out, "[");
        const std::vector<int64_t> at = shown(a_.shape[axis]);
        const bool innermost = axis + 1 == a_.shape.size();
        for (size_t p = 0; p < at.size(); ++p) {
            if (innermost) {
                std::string cell = "...";
                if (at[p] >= 0) {
                    cell = format_element(a_, offset + static_cast<uint64_t>(at[p]));
                    cell.insert(0, width_ - text_width(cell), ' ');
                }
                // Wrap before a cell that would pass the line width (room kept for the closing brackets).
                if (p > 0 && column_ + 1 + text_width(cell) + (axis + 1) > kLineWidth) {
                    newline(out, 1, axis + 1);
                } else if (p > 0) {
                    put(out, " ");
                }
                put(out, cell);
                continue;
            }
            // numpy separates rows by a newline, 2-d blocks by a blank line, and so on.
            if (p > 0) newline(out, a_.shape.size() - axis - 1, axis + 1);
            if (at[p] < 0) {
                put(out, "...");
            } else {
                render(axis + 1, offset + static_cast<uint64_t>(at[p]) * stride_[axis], out);
            }
        }
        put(out, "]");
    }

    const ArrayView& a_;
    bool summarise_;
    std::vector<uint64_t> stride_;
    size_t width_ = 0;
    size_t column_ = 0;
};

void json_values(const ArrayView& a, size_t axis, uint64_t offset, uint64_t stride, Out& out) {
    if (a.shape.empty()) {
        out << json_element(a, 0).dump();
        return;
    }
    const uint64_t inner = a.shape[axis] == 0 ? 0 : stride / static_cast<uint64_t>(a.shape[axis]);
    out << "[";
    for (int64_t k = 0; k < a.shape[axis]; ++k) {
        if (k > 0) out << ",";
        const uint64_t at = offset + static_cast<uint64_t>(k) * inner;
        if (axis + 1 == a.shape.size()) {
            out << json_element(a, at).dump();
        } else {
            json_values(a, axis + 1, at, inner, out);
        }
    }
    out << "]";
}

int run_cat(const CatOptions& o) {
    Progress progress;
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(opts);
    const Npz npz = open_npz(o.file, &opts);
    ckpt_npz* f = npz.get();
    const size_t count = ckpt_npz_count(f);
    size_t i = 0;
    while (i < count && o.name != ckpt_npz_name(f, i)) ++i;
    if (i == count) {
        std::string names;
        for (size_t k = 0; k < count && k < 20; ++k) names += (k == 0 ? "" : ", ") + std::string(ckpt_npz_name(f, k));
        if (count > 20) names += ", ...";
        throw Failure(kExitIo, fmt::format("{}: no array '{}' (the file has {})", o.file, o.name,
                                           count == 0 ? std::string("none") : names));
    }
    ArrayView a;
    a.dtype = ckpt_npz_dtype(f, i);
    a.itemsize = ckpt_npz_itemsize(f, i);
    const int64_t* shape = ckpt_npz_shape(f, i);
    a.shape.assign(shape, shape + ckpt_npz_ndim(f, i));
    const size_t n = ckpt_npz_nbytes(f, i);
    Scratch scratch;
    unsigned char* dst;
    try {
        dst = scratch.get(n);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal, fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", o.file,
                                                 o.name, n));
    }
    progress.start("reading " + o.name, n);
    const int rc = ckpt_npz_read_into(f, i, dst, n);
    progress.clear();
    if (rc != CKPT_OK) fail_ckpt(rc, o.file);
    a.data = dst;

    Out out;
    if (o.json) {
        Json head;
        head["name"] = o.name;
        head["dtype"] = ckpt_dtype_name(a.dtype);
        head["itemsize"] = a.itemsize;
        head["shape"] = a.shape;
        std::string text = head.dump(-1, ' ', false, Json::error_handler_t::replace);
        text.pop_back();  // the closing brace: the values follow
        out << text << ",\"values\":";
        json_values(a, 0, 0, a.count(), out);
        out << "}\n";
        return kExitOk;
    }
    Printer(a, !o.full && a.count() > kSummaryThreshold).print(out);
    return kExitOk;
}

}  // namespace

Command add_cat(CLI::App& parent) {
    auto o = std::make_shared<CatOptions>();
    CLI::App* app = parent.add_subcommand(
        "cat", "Print one array's values");
    app->footer("Arrays of more than 1000 elements are summarised as numpy prints them: the first and last 3 along "
                "each axis. bfloat16, float16 and float8 values are shown as numbers.");
    app->add_option("FILE", o->file, "a .npz file")->required();
    app->add_option("NAME", o->name, "the array's name (as `ckpt show` lists it)")->required();
    app->add_flag("--full", o->full, "every value, however many");
    app->add_flag("--json", o->json,
                  "{\"name\", \"dtype\", \"itemsize\", \"shape\", \"values\"}: every value, as nested lists (docs/cli.md)");
    return {app, [o] { return run_cat(*o); }};
}

}  // namespace ckpt_tool
