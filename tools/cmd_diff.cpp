// SPDX-License-Identifier: Apache-2.0
// ckpt diff A B: what differs between two checkpoints (files or sharded steps, in any pairing) — arrays only in one, dtype or shape changes, changed
// values (how many, and by how much, with --count), and metadata. Exit status as diff(1) and cmp(1) have it:
// 0 when equal, 1 when different, 2 for trouble (a file missing, unreadable, corrupt or not an npz; a usage error).
#include "commands.hpp"
#include "sharded_step.hpp"
#include "text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <new>

namespace ckpt_tool {
namespace {

constexpr int kExitTrouble = 2;  // diff's status for every failure (the usage errors' status too)

struct DiffOptions {
    std::string a, b;
    bool json = false;
    bool count = false;            // count every differing element (else stop each array at its first difference)
    bool all_metadata = false;     // compare the manager's own "ckpt." keys too (not its metrics: those always)
    double atol = 0, rtol = 0;     // numbers equal when |a - b| <= atol + rtol * |b|; both 0: exact
};

// Whether x and y are the same number: NaN equals NaN, 0 equals -0 (compare()'s rule).
bool same_number(double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); }

void account(Comparison& c, double abs_diff, double magnitude, uint64_t at) {
    const double rel = abs_diff == 0 ? 0 : magnitude == 0 ? HUGE_VAL : abs_diff / magnitude;
    if (!c.any_numeric_difference || abs_diff > c.max_abs) c.max_abs_at = at;
    c.max_abs = c.any_numeric_difference ? std::max(c.max_abs, abs_diff) : abs_diff;
    c.max_rel = c.any_numeric_difference ? std::max(c.max_rel, rel) : rel;
    c.any_numeric_difference = true;
}

// compare() with numpy.isclose's rule for numbers: x (A's) and y (B's) are equal when |x - y| <= atol + rtol * |y|,
// every numeric dtype converted to double (complex: the modulus). NaN equals NaN; an infinity equals only itself.
// Strings and raw bytes are compared exactly. Without tolerances, compare() itself.
Comparison compare_within(const ArrayView& a, const ArrayView& b, const DiffOptions& o) {
    const Kind kind = kind_of(a.dtype);
    if ((o.atol == 0 && o.rtol == 0) || kind == Kind::text) return compare(a, b);
    Comparison c;
    c.elements = a.count();
    c.numeric = true;
    for (uint64_t i = 0; i < c.elements; ++i) {
        std::complex<double> x, y;
        if (kind == Kind::complex) {
            Real xr, xi, yr, yi;
            complex_item(a, i, xr, xi);
            complex_item(b, i, yr, yi);
            x = {xr.value, xi.value};
            y = {yr.value, yi.value};
        } else {
            x = real_at(a, i);
            y = real_at(b, i);
        }
        if (same_number(x.real(), y.real()) && same_number(x.imag(), y.imag())) continue;
        const bool nan = std::isnan(x.real()) || std::isnan(x.imag()) || std::isnan(y.real()) || std::isnan(y.imag());
        const bool inf = std::isinf(x.real()) || std::isinf(x.imag()) || std::isinf(y.real()) || std::isinf(y.imag());
        const double d = nan || inf ? HUGE_VAL : std::abs(y - x);
        if (!nan && !inf && d <= o.atol + o.rtol * std::abs(y)) continue;
        ++c.differing;
        if (nan)
            ++c.nan_mismatches;
        else
            account(c, d, std::abs(x), i);
    }
    return c;
}

struct Side {
    uint32_t dtype;
    size_t itemsize;
    std::vector<int64_t> shape;
};

// One side of the comparison: a .npz file, or a sharded step (its variables gathered from the shards).
class Input {
public:
    Input(const std::string& path, ckpt_npz_options& opts) : path_(path) {
        if (!is_step_dir(path)) {
            npz_ = open_npz(path, &opts);
            return;
        }
        ckpt_step* raw = nullptr;
        const int rc = ckpt_step_open(&raw, path.c_str(), &opts);
        step_.reset(raw);
        if (rc != CKPT_OK) fail_ckpt(rc, path);
    }
    const std::string& path() const { return path_; }
    size_t count() const { return npz_ ? ckpt_npz_count(f()) : ckpt_step_count(s()); }
    const char* name(size_t i) const { return npz_ ? ckpt_npz_name(f(), i) : ckpt_step_name(s(), i); }
    uint64_t nbytes(size_t i) const { return npz_ ? ckpt_npz_nbytes(f(), i) : ckpt_step_nbytes(s(), i); }
    Side side(size_t i) const {
        const int64_t* shape = npz_ ? ckpt_npz_shape(f(), i) : ckpt_step_shape(s(), i);
        const uint32_t ndim = npz_ ? ckpt_npz_ndim(f(), i) : ckpt_step_ndim(s(), i);
        return {npz_ ? ckpt_npz_dtype(f(), i) : ckpt_step_dtype(s(), i),
                npz_ ? ckpt_npz_itemsize(f(), i) : ckpt_step_itemsize(s(), i),
                std::vector<int64_t>(shape, shape + ndim)};
    }
    // The whole array.
    int read(size_t i, void* dst, size_t n) {
        if (npz_) return ckpt_npz_read_into(f(), i, dst, n);
        const std::vector<int64_t> shape = side(i).shape;
        return ckpt_step_read_rows(s(), i, 0, shape.empty() ? 1 : shape[0], dst, n);
    }
    // Bytes [at, at + n): whole rows of a step's variable (the caller's pieces are whole rows).
    int read_range(size_t i, uint64_t at, void* dst, size_t n) {
        if (npz_) return ckpt_npz_read_range(f(), i, at, dst, n);
        const std::vector<int64_t> shape = side(i).shape;
        if (shape.empty()) return ckpt_step_read_rows(s(), i, 0, 1, dst, n);
        const uint64_t row = shape[0] == 0 ? 1 : nbytes(i) / static_cast<uint64_t>(shape[0]);
        return ckpt_step_read_rows(s(), i, static_cast<int64_t>(at / row), static_cast<int64_t>(n / row), dst, n);
    }
    size_t metadata_count() const { return npz_ ? ckpt_npz_metadata_count(f()) : ckpt_step_metadata_count(s()); }
    const char* metadata_key(size_t k) const {
        return npz_ ? ckpt_npz_metadata_key(f(), k) : ckpt_step_metadata_key(s(), k);
    }
    const char* metadata_value(size_t k) const {
        return npz_ ? ckpt_npz_metadata_value(f(), k) : ckpt_step_metadata_value(s(), k);
    }
    const char* metadata(const std::string& key) const {
        return npz_ ? ckpt_npz_metadata(f(), key.c_str()) : ckpt_step_metadata(s(), key.c_str());
    }

private:
    ckpt_npz* f() const { return npz_.get(); }
    ckpt_step* s() const { return step_.get(); }
    std::string path_;
    Npz npz_;
    Step step_;
};

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
    j["max_abs_diff_index"] = nullptr;
    return j;
}

// The manager's own record of a save (its index, its time, ...) that diff leaves out unless --all-metadata: two saves
// of one state differ there only. Its metrics (ckpt.metric.*) are the user's numbers and are compared.
bool manager_key(const std::string& key) { return key.rfind("ckpt.", 0) == 0 && key.rfind("ckpt.metric.", 0) != 0; }

// The position of element `flat` (C order) of an array of `shape`, one index per axis.
std::vector<int64_t> unravel(uint64_t flat, const std::vector<int64_t>& shape) {
    std::vector<int64_t> index(shape.size());
    for (size_t k = shape.size(); k-- > 0;) {
        const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(shape[k], 1));
        index[k] = static_cast<int64_t>(flat % n);
        flat /= n;
    }
    return index;
}

// "w[3, 7]" as numpy indexes it ("w[()]" for a 0-d array).
std::string element_text(const std::string& name, const std::vector<int64_t>& index) {
    if (index.empty()) return name + "[()]";
    return fmt::format("{}[{}]", name, fmt::join(index, ", "));
}

std::string number_text(double v) {
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    return fmt::format("{}", v);
}

// Reads array i of `in` into scratch; throws a Failure naming the file and array.
ArrayView read_array(Input& in, size_t i, Scratch& scratch, Progress& progress) {
    ArrayView view;
    const Side s = in.side(i);
    view.dtype = s.dtype;
    view.itemsize = s.itemsize;
    view.shape = s.shape;
    const size_t n = in.nbytes(i);
    unsigned char* dst;
    try {
        dst = scratch.get(n);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal, fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", in.path(),
                                                 in.name(i), n));
    }
    view.data = dst;
    const int rc = in.read(i, dst, n);
    if (rc != CKPT_OK) fail_ckpt(rc, in.path());
    progress.add_base(n);
    return view;
}

// Adds the comparison of a piece that starts at element `first` of its array.
void merge(Comparison& into, const Comparison& piece, uint64_t first) {
    into.elements += piece.elements;
    into.differing += piece.differing;
    into.nan_mismatches += piece.nan_mismatches;
    into.numeric = piece.numeric;
    if (piece.any_numeric_difference) {
        if (!into.any_numeric_difference || piece.max_abs > into.max_abs) into.max_abs_at = first + piece.max_abs_at;
        into.max_abs = into.any_numeric_difference ? std::max(into.max_abs, piece.max_abs) : piece.max_abs;
        into.max_rel = into.any_numeric_difference ? std::max(into.max_rel, piece.max_rel) : piece.max_rel;
        into.any_numeric_difference = true;
    }
}

// Compares array i of a with array j of b (same dtype and shape) in pieces of about kPieceBytes of whole rows read
// in order with ckpt_npz_read_range (so a file's CRC-32 is checked at its last piece) or ckpt_step_read_rows, in
// bounded memory; a Fortran-order array, which is not read in ranges, is read whole. Without --count it stops after the first piece that differs
// (`stopped`; the counts then cover only the pieces read). Throws a Failure naming the file for a read that fails.
Comparison compare_arrays(Input& a, size_t i, Input& b, size_t j, Scratch& scratch_a, Scratch& scratch_b,
                          Progress& progress, const DiffOptions& o, bool& stopped) {
    stopped = false;
    const Side s = a.side(i);
    const uint64_t n = a.nbytes(i);
    const size_t item = std::max<size_t>(s.itemsize, 1);
    const uint64_t rows = s.shape.empty() || s.shape[0] == 0 ? 1 : static_cast<uint64_t>(s.shape[0]);
    const size_t row = std::max<size_t>(static_cast<size_t>(n / rows), item);
    const size_t piece = std::max(kPieceBytes / row, size_t{1}) * row;
    Comparison c;
    for (uint64_t at = 0; n > 0 && at < n; at += piece) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(piece, n - at));
        unsigned char* da = scratch_a.get(k);
        unsigned char* db = scratch_b.get(k);
        const int ra = a.read_range(i, at, da, k);
        const int rb = ra == CKPT_OK ? b.read_range(j, at, db, k) : CKPT_OK;
        if (at == 0 && (ra == CKPT_EUNSUPPORTED || rb == CKPT_EUNSUPPORTED)) break;  // Fortran order: whole, below
        if (ra != CKPT_OK) fail_ckpt(ra, a.path());
        if (rb != CKPT_OK) fail_ckpt(rb, b.path());
        progress.advance(2 * k);
        ArrayView va, vb;
        va.dtype = vb.dtype = s.dtype;
        va.itemsize = vb.itemsize = s.itemsize;
        va.shape = vb.shape = {static_cast<int64_t>(k / item)};
        va.data = da;
        vb.data = db;
        merge(c, compare_within(va, vb, o), at / item);
        if (at + k == n) return c;
        if (!o.count && c.differing != 0) {
            stopped = true;
            return c;
        }
    }
    const ArrayView va = read_array(a, i, scratch_a, progress);
    const ArrayView vb = read_array(b, j, scratch_b, progress);
    return compare_within(va, vb, o);
}

int compare_files(const DiffOptions& o) {
    Progress progress;
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(opts);
    Input a(o.a, opts), b(o.b, opts);
    const size_t na = a.count(), nb = b.count();
    std::map<std::string, size_t> in_b;
    for (size_t j = 0; j < nb; ++j) in_b.emplace(b.name(j), j);

    // Bytes to read: both sides of every pair that needs its values compared.
    uint64_t total = 0;
    for (size_t i = 0; i < na; ++i) {
        const auto it = in_b.find(a.name(i));
        if (it == in_b.end()) continue;
        const Side sa = a.side(i), sb = b.side(it->second);
        if (sa.dtype == sb.dtype && sa.itemsize == sb.itemsize && sa.shape == sb.shape)
            total += a.nbytes(i) + b.nbytes(it->second);
    }
    progress.start("comparing " + o.a + " and " + o.b, total);

    Scratch scratch_a, scratch_b;
    Json arrays = Json::array();
    std::vector<std::string> lines;
    size_t equal = 0, different = 0;
    for (size_t i = 0; i < na; ++i) {
        const std::string name = a.name(i);
        const Side sa = a.side(i);
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
        const Side sb = b.side(j);
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
        bool stopped = false;
        const Comparison c = compare_arrays(a, i, b, j, scratch_a, scratch_b, progress, o, stopped);
        entry["elements"] = a.nbytes(i) / std::max<size_t>(sa.itemsize, 1);
        if (stopped) {  // not counted: the counts stay null
            entry["status"] = "values_changed";
            ++different;
            lines.push_back(fmt::format("{}: values differ (stopped at the first difference; --count counts them)",
                                        name));
            arrays.push_back(entry);
            continue;
        }
        entry["elements"] = c.elements;
        entry["differing"] = c.differing;
        entry["nan_mismatches"] = c.nan_mismatches;
        const bool have_max = c.numeric && c.any_numeric_difference;
        entry["max_abs_diff"] = have_max ? json_number(c.max_abs) : Json(nullptr);
        entry["max_rel_diff"] = have_max ? json_number(c.max_rel) : Json(nullptr);
        const std::vector<int64_t> where = unravel(c.max_abs_at, sa.shape);
        entry["max_abs_diff_index"] = have_max ? Json(where) : Json(nullptr);
        if (c.differing == 0) {
            entry["status"] = "equal";
            ++equal;
        } else {
            entry["status"] = "values_changed";
            ++different;
            std::string line = fmt::format("{}: {} of {} element{} differ{}", name, c.differing, c.elements,
                                           c.elements == 1 ? "" : "s", c.differing == 1 ? "s" : "");
            if (have_max)
                line += fmt::format(", max abs diff {} at {}, max rel diff {}", number_text(c.max_abs),
                                    element_text(name, where), number_text(c.max_rel));
            if (c.nan_mismatches != 0) line += fmt::format(", {} NaN where the other is not", c.nan_mismatches);
            lines.push_back(line);
        }
        arrays.push_back(entry);
    }
    std::map<std::string, size_t> in_a;
    for (size_t i = 0; i < na; ++i) in_a.emplace(a.name(i), i);
    for (size_t j = 0; j < nb; ++j) {
        const std::string name = b.name(j);
        if (in_a.count(name) != 0) continue;
        const Side sb = b.side(j);
        Json entry = array_entry(name);
        entry["status"] = "only_in_b";
        entry["a"] = nullptr;
        entry["b"] = side_json(sb);
        arrays.push_back(entry);
        lines.push_back(fmt::format("only in B: {} {} {}", name, dtype_label(sb.dtype, sb.itemsize), shape_text(sb.shape)));
        ++different;
    }

    Json metadata = Json::array();
    std::vector<std::string> ignored;  // the manager's own keys that differ, left out
    for (int pass = 0; pass < 2; ++pass) {
        const Input& first = pass == 0 ? a : b;
        const Input& other = pass == 0 ? b : a;
        for (size_t k = 0; k < first.metadata_count(); ++k) {
            const std::string key = first.metadata_key(k);
            const char* mine = first.metadata_value(k);
            const char* theirs = other.metadata(key);
            if (pass == 1 && theirs != nullptr) continue;  // compared in the first pass
            if (theirs != nullptr && std::string(mine) == theirs) continue;
            if (!o.all_metadata && manager_key(key)) {
                ignored.push_back(key);
                continue;
            }
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
        out["metadata_ignored"] = ignored;
        print_json(out);
    } else {
        std::cout << fmt::format("A = {}\nB = {}\n", o.a, o.b);
        for (const std::string& line : lines) std::cout << line << '\n';
        if (!ignored.empty())
            std::cout << fmt::format("not compared: {} (the checkpoint manager's record of the save; --all-metadata "
                                     "compares it)\n", fmt::join(ignored, ", "));
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

// diff's exit status is diff(1)'s and cmp(1)'s: every failure (a file missing, unreadable, corrupt or not an npz,
// or out of memory) is trouble, 2, with the library's code kept for --json's error document.
int run_diff(const DiffOptions& o) {
    try {
        return compare_files(o);
    } catch (const Failure& f) {
        throw Failure(kExitTrouble, f.what(), f.code());
    } catch (const std::bad_alloc&) {
        throw Failure(kExitTrouble, "out of memory", CKPT_ENOMEM);
    } catch (const std::exception& e) {
        throw Failure(kExitTrouble, e.what(), CKPT_ERROR);
    }
}

}  // namespace

Command add_diff(CLI::App& parent) {
    auto o = std::make_shared<DiffOptions>();
    CLI::App* app = parent.add_subcommand(
        "diff", "Compare two checkpoints: arrays by name and value, and metadata");
    app->footer("Values are compared as numbers (bfloat16, float16 and float8 too): NaN equals NaN and 0 equals -0; "
                "with --atol/--rtol, a equals b when |a - b| <= atol + rtol * |b| (numpy.isclose). An array's "
                "comparison stops at its first difference unless --count is given, which counts the differing "
                "elements and gives the largest |b - a| (and where it is) and |b - a| / |a|. The checkpoint "
                "manager's own metadata keys (ckpt.saved_at, ckpt.index, ...) are not compared unless "
                "--all-metadata is given. Exit status 0 when equal, 1 when "
                "different, 2 for trouble (a file missing, unreadable, corrupt or not an npz; a usage error).");
    app->add_option("A", o->a, "the first .npz file")->required();
    app->add_option("B", o->b, "the second .npz file")->required();
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    app->add_flag("--count", o->count, "count every differing element (default: stop each array at its first)");
    app->add_flag("--all-metadata", o->all_metadata,
                  "also compare the checkpoint manager's own keys (ckpt.saved_at, ckpt.index, ...), which differ "
                  "between two saves of the same state; its metrics (ckpt.metric.*) are always compared");
    const CLI::Validator kTolerance(
        [](const std::string& text) {
            char* end = nullptr;
            const double v = std::strtod(text.c_str(), &end);
            return end != text.c_str() && *end == '\0' && v >= 0 ? std::string() : "must be a number >= 0, not " + text;
        },
        "X>=0");
    app->add_option("--atol", o->atol, "absolute tolerance for numbers (default 0: exact)")
        ->check(kTolerance);
    app->add_option("--rtol", o->rtol, "relative tolerance for numbers, times |b| (default 0: exact)")
        ->check(kTolerance);
    return {app, [o] { return run_diff(*o); }};
}

}  // namespace ckpt_tool
