// ckpt cat FILE NAME: one array's values, summarised as numpy prints large arrays (the first and last 3 along
// each axis), every value with --full, or as JSON.
#include "array_format.hpp"
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
    write_array(a, !o.full && a.count() > kSummaryThreshold, [&out](const std::string& piece) { out << piece; });
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
