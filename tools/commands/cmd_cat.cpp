// SPDX-License-Identifier: Apache-2.0
// ckpt cat FILE NAME[INDEX]: one array's values, or those numpy's basic indexing selects, summarised as numpy
// prints large arrays (the first and last 3 along each axis), every value with --full, or as JSON.
#include "array_format.hpp"
#include "commands.hpp"
#include "sharded_step.hpp"
#include "slice.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <cstring>

#include <unistd.h>

#include <algorithm>
#include <functional>
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

[[noreturn]] void no_such_array(const CatOptions& o, size_t count, const std::function<const char*(size_t)>& name);

// The array NAME asks for, and the index after it ("w[0:4, :]"), if any. A name that is an array's, brackets and
// all, is that array.
struct Wanted {
    size_t i = 0;
    std::string name;
    std::optional<std::string> index;
};

Wanted find_array(const CatOptions& o, size_t count, const std::function<const char*(size_t)>& name) {
    for (size_t i = 0; i < count; ++i)
        if (o.name == name(i)) return {i, o.name, std::nullopt};
    if (const std::optional<IndexedName> split = split_index(o.name))
        for (size_t i = 0; i < count; ++i)
            if (split->name == name(i)) return {i, split->name, split->index};
    // An array's name followed by an index that is not closed ("w[1,", "w[0:2"): a malformed index, a usage error
    // as any other text that is no index, not an unknown array.
    const size_t open = o.name.find('[');
    if (open != std::string::npos && open > 0 && !split_index(o.name))
        for (size_t i = 0; i < count; ++i)
            if (o.name.compare(0, open, name(i)) == 0 && std::strlen(name(i)) == open)
                throw Failure(
                    kExitUsage,
                    fmt::format("'{}' is not an index: the ']' that closes it is missing", o.name.substr(open)),
                    CKPT_EINVAL);
    no_such_array(o, count, name);
}

// The picks of the index (all of the array without one) and the rows of axis 0 they read.
struct Plan {
    std::vector<AxisPick> picks;
    int64_t first = 0, last = 0;
};

Plan plan_for(const Wanted& w, const std::vector<int64_t>& shape) {
    Plan p;
    p.picks = resolve_index(w.index.value_or("..."), shape);
    rows_needed(p.picks, shape, p.first, p.last);
    return p;
}

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

// The names an unknown one is told among.
[[noreturn]] void no_such_array(const CatOptions& o, size_t count, const std::function<const char*(size_t)>& name) {
    std::string names;
    for (size_t k = 0; k < count && k < 20; ++k) names += (k == 0 ? "" : ", ") + std::string(name(k));
    if (count > 20) names += ", ...";
    throw Failure(kExitIo,
                  fmt::format("{}: no array '{}' (the {} has {})", o.file, o.name,
                              is_step_dir(o.file) ? "step" : "file", count == 0 ? std::string("none") : names),
                  CKPT_ENOTFOUND);
}

unsigned char* buffer_for(const CatOptions& o, Scratch& scratch, size_t n) {
    try {
        return scratch.get(n);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal,
                      fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", o.file, o.name, n),
                      CKPT_ENOMEM);
    }
}

int run_cat(const CatOptions& o) {
    Progress progress;
    ckpt_options opts = CKPT_OPTIONS_INIT;
    progress.attach(opts);
    Scratch scratch;
    ArrayView a;
    Plan plan;
    std::string name;                  // the array's
    std::optional<std::string> index;  // and the index NAME gave it, if any
    Reader npz;
    Step step;
    if (is_step_dir(o.file)) {
        // A variable of a sharded step: its rows gathered from the shards that hold them.
        ckpt_step* raw = nullptr;
        const int rc = ckpt_step_open(&raw, o.file.c_str(), &opts);
        step.reset(raw);
        if (rc != CKPT_OK) fail_ckpt(rc, o.file);
        const size_t count = ckpt_step_count(raw);
        const Wanted w = find_array(o, count, [&](size_t k) { return ckpt_step_name(raw, k); });
        const size_t i = w.i;
        name = w.name;
        index = w.index;
        a.dtype = ckpt_step_dtype(raw, i);
        a.itemsize = ckpt_step_itemsize(raw, i);
        const int64_t* shape = ckpt_step_shape(raw, i);
        a.shape.assign(shape, shape + ckpt_step_ndim(raw, i));
        plan = plan_for(w, a.shape);
        const uint64_t rows = a.shape.empty() ? 1 : static_cast<uint64_t>(a.shape[0]);
        const size_t row_bytes = rows == 0 ? 0 : ckpt_step_nbytes(raw, i) / rows;
        const size_t n = static_cast<size_t>(plan.last - plan.first) * row_bytes;
        unsigned char* dst = buffer_for(o, scratch, n);
        progress.start("reading " + o.name, n);
        const int read = n == 0 ? CKPT_OK : ckpt_step_read_rows(raw, i, plan.first, plan.last - plan.first, dst, n);
        progress.clear();
        if (read != CKPT_OK) fail_ckpt(read, o.file);
        a.data = dst;
    } else {
        npz = open_reader(o.file, &opts);
        ckpt_reader* f = npz.get();
        const Wanted w = find_array(o, ckpt_reader_count(f), [&](size_t k) { return ckpt_reader_name(f, k); });
        const size_t i = w.i;
        name = w.name;
        index = w.index;
        a.dtype = ckpt_reader_dtype(f, i);
        a.itemsize = ckpt_reader_itemsize(f, i);
        const int64_t* shape = ckpt_reader_shape(f, i);
        a.shape.assign(shape, shape + ckpt_reader_ndim(f, i));
        plan = plan_for(w, a.shape);
        // Only the rows the index reads, unless the array lies in Fortran order (which ranged reads do not take).
        if (ckpt_reader_fortran_order(f, i) == 1 && a.shape.size() > 1) {
            plan.first = 0;
            plan.last = a.shape[0];
        }
        const uint64_t rows = a.shape.empty() ? 1 : static_cast<uint64_t>(a.shape[0]);
        const size_t row_bytes = rows == 0 ? 0 : ckpt_reader_nbytes(f, i) / rows;
        const size_t n = static_cast<size_t>(plan.last - plan.first) * row_bytes;
        unsigned char* dst = buffer_for(o, scratch, n);
        progress.start("reading " + o.name, n);
        const int rc = n == ckpt_reader_nbytes(f, i) ? ckpt_reader_read_into(f, i, dst, n)
                       : n == 0                      ? CKPT_OK
                                : ckpt_reader_read_range(f, i, static_cast<uint64_t>(plan.first) * row_bytes, dst, n);
        progress.clear();
        if (rc != CKPT_OK) fail_ckpt(rc, o.file);
        a.data = dst;
    }
    std::vector<unsigned char> picked;
    if (index) a = gather(a, plan.first, plan.picks, picked);

    Out out;
    if (o.json) {
        Json head;
        head["name"] = name;
        if (index) head["index"] = "[" + *index + "]";
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
    const bool summarise = !o.full && a.count() > kSummaryThreshold;
    // Writing every value of a large array takes a while: a bar on stderr says how far, unless stdout is the
    // terminal too (the bar would be torn by the values).
    std::function<void(uint64_t)> written;
    if (!summarise && ::isatty(STDOUT_FILENO) == 0) {
        progress.start("writing " + o.name, a.count() * a.itemsize);
        written = [&](uint64_t elements) { progress.reach(elements * a.itemsize); };
    }
    write_array(
        a, summarise, [&out](const std::string& piece) { out << piece; }, written);
    progress.clear();
    return kExitOk;
}

}  // namespace

Command add_cat(CLI::App& parent) {
    auto o = std::make_shared<CatOptions>();
    CLI::App* app = parent.add_subcommand("cat", "Print one array's values");
    app->footer(
        "Arrays of more than 1000 elements are summarised as numpy prints them: the first and last 3 along "
        "each axis. bfloat16, float16 and float8 values are shown as numbers. With an index, only the rows "
        "it selects are read (all of a Fortran-order array), and what is printed is what numpy prints of "
        "w[index].");
    app->add_option("FILE", o->file, "a .npz or safetensors file, or a sharded step's directory")->required();
    app->add_option("NAME", o->name,
                    "the array's name (as `ckpt show` lists it), with an index if wanted: 'w[0:4, :]', 'w[-1]', "
                    "'w[..., ::2]' select as numpy's basic indexing does")
        ->required();
    app->add_flag("--full", o->full, "every value, however many");
    app->add_flag("--json", o->json,
                  "every value as JSON, in nested lists: {\"name\", \"dtype\", \"itemsize\", \"shape\", \"values\"} "
                  "(docs/cli.md)");
    return {app, [o] { return run_cat(*o); }};
}

}  // namespace ckpt_tool
