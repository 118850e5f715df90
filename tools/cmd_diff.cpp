// ckpt diff A B: what differs between two checkpoints — arrays only in one, dtype or shape changes, changed
// values (how many, and by how much), and metadata. Exit status 0 when equal, 1 when different.
#include "commands.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <new>

namespace ckpt_tool {
namespace {

struct DiffOptions {
    std::string a, b;
    bool json = false;
};

struct Side {
    uint32_t dtype;
    size_t itemsize;
    std::vector<int64_t> shape;
};

Side side_of(ckpt_npz* f, size_t i) {
    const int64_t* shape = ckpt_npz_shape(f, i);
    return {ckpt_npz_dtype(f, i), ckpt_npz_itemsize(f, i), std::vector<int64_t>(shape, shape + ckpt_npz_ndim(f, i))};
}

Json side_json(const Side& s) {
    Json j;
    j["dtype"] = ckpt_dtype_name(s.dtype);
    j["itemsize"] = s.itemsize;
    j["shape"] = s.shape;
    return j;
}

// An entry of the "arrays" list with every key in its place; what does not apply stays null.
Json array_entry(const std::string& name) {
    Json j;
    j["name"] = name;
    j["status"] = nullptr;
    j["a"] = nullptr;
    j["b"] = nullptr;
    j["elements"] = nullptr;
    j["differing"] = nullptr;
    j["nan_mismatches"] = nullptr;
    j["max_abs_diff"] = nullptr;
    j["max_rel_diff"] = nullptr;
    return j;
}

std::string number_text(double v) {
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    return fmt::format("{}", v);
}

// Reads array i of f into scratch; throws a Failure naming the file and array.
ArrayView read_array(ckpt_npz* f, const std::string& path, size_t i, Scratch& scratch, Progress& progress) {
    ArrayView view;
    const Side s = side_of(f, i);
    view.dtype = s.dtype;
    view.itemsize = s.itemsize;
    view.shape = s.shape;
    const size_t n = ckpt_npz_nbytes(f, i);
    unsigned char* dst;
    try {
        dst = scratch.get(n);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal, fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", path,
                                                 ckpt_npz_name(f, i), n));
    }
    view.data = dst;
    const int rc = ckpt_npz_read_into(f, i, dst, n);
    if (rc != CKPT_OK) fail_ckpt(rc, path);
    progress.add_base(n);
    return view;
}

int run_diff(const DiffOptions& o) {
    Progress progress;
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(opts);
    const Npz a = open_npz(o.a, &opts), b = open_npz(o.b, &opts);
    ckpt_npz *fa = a.get(), *fb = b.get();
    const size_t na = ckpt_npz_count(fa), nb = ckpt_npz_count(fb);
    std::map<std::string, size_t> in_b;
    for (size_t j = 0; j < nb; ++j) in_b.emplace(ckpt_npz_name(fb, j), j);

    // Bytes to read: both sides of every pair that needs its values compared.
    uint64_t total = 0;
    for (size_t i = 0; i < na; ++i) {
        const auto it = in_b.find(ckpt_npz_name(fa, i));
        if (it == in_b.end()) continue;
        const Side sa = side_of(fa, i), sb = side_of(fb, it->second);
        if (sa.dtype == sb.dtype && sa.itemsize == sb.itemsize && sa.shape == sb.shape)
            total += ckpt_npz_nbytes(fa, i) + ckpt_npz_nbytes(fb, it->second);
    }
    progress.start("comparing " + o.a + " and " + o.b, total);

    Scratch scratch_a, scratch_b;
    Json arrays = Json::array();
    std::vector<std::string> lines;
    size_t equal = 0, different = 0;
    for (size_t i = 0; i < na; ++i) {
        const std::string name = ckpt_npz_name(fa, i);
        const Side sa = side_of(fa, i);
        Json entry = array_entry(name);
        const auto it = in_b.find(name);
        if (it == in_b.end()) {
            entry["status"] = "only_in_a";
            entry["a"] = side_json(sa);
            entry["b"] = nullptr;
            lines.push_back(fmt::format("only in A: {} {} {}", name, dtype_label(sa.dtype, sa.itemsize),
                                        shape_text(sa.shape)));
            ++different;
            arrays.push_back(entry);
            continue;
        }
        const size_t j = it->second;
        const Side sb = side_of(fb, j);
        entry["a"] = side_json(sa);
        entry["b"] = side_json(sb);
        if (sa.dtype != sb.dtype || sa.itemsize != sb.itemsize) {
            entry["status"] = "dtype_changed";
            lines.push_back(fmt::format("{}: dtype {} -> {}{}", name, dtype_label(sa.dtype, sa.itemsize),
                                        dtype_label(sb.dtype, sb.itemsize),
                                        sa.shape == sb.shape ? "" : ", shape " + shape_text(sa.shape) + " -> " +
                                                                        shape_text(sb.shape)));
            ++different;
            arrays.push_back(entry);
            continue;
        }
        if (sa.shape != sb.shape) {
            entry["status"] = "shape_changed";
            lines.push_back(fmt::format("{}: shape {} -> {}", name, shape_text(sa.shape), shape_text(sb.shape)));
            ++different;
            arrays.push_back(entry);
            continue;
        }
        const ArrayView va = read_array(fa, o.a, i, scratch_a, progress);
        const ArrayView vb = read_array(fb, o.b, j, scratch_b, progress);
        const Comparison c = compare(va, vb);
        entry["elements"] = c.elements;
        entry["differing"] = c.differing;
        entry["nan_mismatches"] = c.nan_mismatches;
        const bool have_max = c.numeric && c.any_numeric_difference;
        entry["max_abs_diff"] = have_max ? json_number(c.max_abs) : Json(nullptr);
        entry["max_rel_diff"] = have_max ? json_number(c.max_rel) : Json(nullptr);
        if (c.differing == 0) {
            entry["status"] = "equal";
            ++equal;
        } else {
            entry["status"] = "values_changed";
            ++different;
            std::string line = fmt::format("{}: {} of {} element{} differ{}", name, c.differing, c.elements,
                                           c.elements == 1 ? "" : "s", c.differing == 1 ? "s" : "");
            if (have_max)
                line += fmt::format(", max abs diff {}, max rel diff {}", number_text(c.max_abs), number_text(c.max_rel));
            if (c.nan_mismatches != 0) line += fmt::format(", {} NaN where the other is not", c.nan_mismatches);
            lines.push_back(line);
        }
        arrays.push_back(entry);
    }
    std::map<std::string, size_t> in_a;
    for (size_t i = 0; i < na; ++i) in_a.emplace(ckpt_npz_name(fa, i), i);
    for (size_t j = 0; j < nb; ++j) {
        const std::string name = ckpt_npz_name(fb, j);
        if (in_a.count(name) != 0) continue;
        const Side sb = side_of(fb, j);
        Json entry = array_entry(name);
        entry["status"] = "only_in_b";
        entry["a"] = nullptr;
        entry["b"] = side_json(sb);
        arrays.push_back(entry);
        lines.push_back(fmt::format("only in B: {} {} {}", name, dtype_label(sb.dtype, sb.itemsize), shape_text(sb.shape)));
        ++different;
    }

    Json metadata = Json::array();
    const auto value_in = [](ckpt_npz* f, const std::string& key) -> const char* {
        return ckpt_npz_metadata(f, key.c_str());
    };
    for (int pass = 0; pass < 2; ++pass) {
        ckpt_npz* first = pass == 0 ? fa : fb;
        ckpt_npz* other = pass == 0 ? fb : fa;
        for (size_t k = 0; k < ckpt_npz_metadata_count(first); ++k) {
            const std::string key = ckpt_npz_metadata_key(first, k);
            const char* mine = ckpt_npz_metadata_value(first, k);
            const char* theirs = value_in(other, key);
            if (pass == 1 && theirs != nullptr) continue;  // compared in the first pass
            if (theirs != nullptr && std::string(mine) == theirs) continue;
            Json m;
            m["key"] = key;
            m["status"] = theirs == nullptr ? (pass == 0 ? "only_in_a" : "only_in_b") : "changed";
            const char* va = pass == 0 ? mine : theirs;
            const char* vb = pass == 0 ? theirs : mine;
            m["a"] = va != nullptr ? Json(va) : Json(nullptr);
            m["b"] = vb != nullptr ? Json(vb) : Json(nullptr);
            metadata.push_back(m);
            if (theirs == nullptr)
                lines.push_back(fmt::format("metadata only in {}: {} = {}", pass == 0 ? "A" : "B", key, mine));
            else
                lines.push_back(fmt::format("metadata {}: {} -> {}", key, va, vb));
        }
    }
    progress.clear();
    const bool same = different == 0 && metadata.empty();

    if (o.json) {
        Json out;
        out["a"] = o.a;
        out["b"] = o.b;
        out["equal"] = same;
        out["arrays"] = arrays;
        out["metadata"] = metadata;
        print_json(out);
    } else {
        std::cout << fmt::format("A = {}\nB = {}\n", o.a, o.b);
        for (const std::string& line : lines) std::cout << line << '\n';
        if (same) {
            std::cout << fmt::format("equal: {} array{} and the metadata\n", equal, equal == 1 ? "" : "s");
        } else {
            std::string parts;
            if (different != 0)
                parts = fmt::format("{} of {} array{}", different, equal + different, equal + different == 1 ? "" : "s");
            if (!metadata.empty())
                parts += fmt::format("{}{} metadata key{}", parts.empty() ? "" : ", ", metadata.size(),
                                     metadata.size() == 1 ? "" : "s");
            std::cout << "different: " << parts << '\n';
        }
    }
    return same ? kExitOk : kExitDifferent;
}

}  // namespace

Command add_diff(CLI::App& parent) {
    auto o = std::make_shared<DiffOptions>();
    CLI::App* app = parent.add_subcommand(
        "diff", "Compare two checkpoints: arrays by name and value, and metadata");
    app->footer("Values are compared as numbers (bfloat16, float16 and float8 too): NaN equals NaN and 0 equals -0. "
                "For changed arrays: how many elements differ, the largest |b - a| and |b - a| / |a|. Exit status 0 "
                "when equal, 1 when different.");
    app->add_option("A", o->a, "the first .npz file")->required();
    app->add_option("B", o->b, "the second .npz file")->required();
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    return {app, [o] { return run_diff(*o); }};
}

}  // namespace ckpt_tool
