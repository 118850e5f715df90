// SPDX-License-Identifier: Apache-2.0
// ckpt cat FILE NAME: one array's values, summarised as numpy prints large arrays (the first and last 3 along
// each axis), every value with --full, or as JSON.
#include "array_format.hpp"
#include "commands.hpp"
#include "sharded_step.hpp"
#include "text.hpp"

#include <fmt/format.h>

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
                  fmt::format("{}: no array '{}' (the {} has {})", o.file, o.name, is_step_dir(o.file) ? "step" : "file",
                              count == 0 ? std::string("none") : names),
                  CKPT_ENOTFOUND);
}

unsigned char* buffer_for(const CatOptions& o, Scratch& scratch, size_t n) {
    try {
        return scratch.get(n);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal, fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", o.file,
                                                 o.name, n), CKPT_ENOMEM);
    }
}

int run_cat(const CatOptions& o) {
    Progress progress;
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(opts);
    Scratch scratch;
    ArrayView a;
    Npz npz;
    Step step;
    if (is_step_dir(o.file)) {
        // A variable of a sharded step: its rows gathered from the shards that hold them.
        ckpt_step* raw = nullptr;
        const int rc = ckpt_step_open(&raw, o.file.c_str(), &opts);
        step.reset(raw);
        if (rc != CKPT_OK) fail_ckpt(rc, o.file);
        const size_t count = ckpt_step_count(raw);
        size_t i = 0;
        while (i < count && o.name != ckpt_step_name(raw, i)) ++i;
        if (i == count) no_such_array(o, count, [&](size_t k) { return ckpt_step_name(raw, k); });
        a.dtype = ckpt_step_dtype(raw, i);
        a.itemsize = ckpt_step_itemsize(raw, i);
        const int64_t* shape = ckpt_step_shape(raw, i);
        a.shape.assign(shape, shape + ckpt_step_ndim(raw, i));
        const size_t n = ckpt_step_nbytes(raw, i);
        unsigned char* dst = buffer_for(o, scratch, n);
        progress.start("reading " + o.name, n);
        const int read = ckpt_step_read_rows(raw, i, 0, a.shape.empty() ? 1 : a.shape[0], dst, n);
        progress.clear();
        if (read != CKPT_OK) fail_ckpt(read, o.file);
        a.data = dst;
    } else {
        npz = open_npz(o.file, &opts);
        ckpt_npz* f = npz.get();
        const size_t count = ckpt_npz_count(f);
        size_t i = 0;
        while (i < count && o.name != ckpt_npz_name(f, i)) ++i;
        if (i == count) no_such_array(o, count, [&](size_t k) { return ckpt_npz_name(f, k); });
        a.dtype = ckpt_npz_dtype(f, i);
        a.itemsize = ckpt_npz_itemsize(f, i);
        const int64_t* shape = ckpt_npz_shape(f, i);
        a.shape.assign(shape, shape + ckpt_npz_ndim(f, i));
        const size_t n = ckpt_npz_nbytes(f, i);
        unsigned char* dst = buffer_for(o, scratch, n);
        progress.start("reading " + o.name, n);
        const int rc = ckpt_npz_read_into(f, i, dst, n);
        progress.clear();
        if (rc != CKPT_OK) fail_ckpt(rc, o.file);
        a.data = dst;
    }

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
    const bool summarise = !o.full && a.count() > kSummaryThreshold;
    // Writing every value of a large array takes a while: a bar on stderr says how far, unless stdout is the
    // terminal too (the bar would be torn by the values).
    std::function<void(uint64_t)> written;
    if (!summarise && ::isatty(STDOUT_FILENO) == 0) {
        progress.start("writing " + o.name, a.count() * a.itemsize);
        written = [&](uint64_t elements) { progress.reach(elements * a.itemsize); };
    }
    write_array(a, summarise, [&out](const std::string& piece) { out << piece; }, written);
    progress.clear();
    return kExitOk;
}

}  // namespace

Command add_cat(CLI::App& parent) {
    auto o = std::make_shared<CatOptions>();
    CLI::App* app = parent.add_subcommand(
        "cat", "Print one array's values");
    app->footer("Arrays of more than 1000 elements are summarised as numpy prints them: the first and last 3 along "
                "each axis. bfloat16, float16 and float8 values are shown as numbers.");
    app->add_option("FILE", o->file, "a .npz file, or a sharded step's directory")->required();
    app->add_option("NAME", o->name, "the array's name (as `ckpt show` lists it)")->required();
    app->add_flag("--full", o->full, "every value, however many");
    app->add_flag("--json", o->json,
                  "every value as JSON, in nested lists: {\"name\", \"dtype\", \"itemsize\", \"shape\", \"values\"} "
                  "(docs/cli.md)");
    return {app, [o] { return run_cat(*o); }};
}

}  // namespace ckpt_tool
