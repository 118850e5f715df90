// SPDX-License-Identifier: Apache-2.0
// ckpt diff A B: what differs between two checkpoints (files or sharded steps, in any pairing) — arrays only in one,
// dtype or shape changes, changed values (how many, and by how much, with --count), and metadata. Exit status as
// diff(1) and cmp(1) have it: 0 when equal, 1 when different, 2 for trouble (a file missing, unreadable, corrupt or not
// an npz; a usage error).
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
#include <optional>

namespace ckpt_tool {
namespace {

constexpr int kExitTrouble = 2;  // diff's status for every failure (the usage errors' status too)

struct DiffOptions {
    std::string a, b;
    bool json = false;
    bool count = false;         // count every differing element (else stop each array at its first difference)
    bool all_metadata = false;  // compare the manager's own "ckpt." keys too (not its metrics: those always)
    double atol = 0, rtol = 0;  // numbers equal when |a - b| <= atol + rtol * |b|; both 0: exact
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
    Input(const std::string& path, ckpt_options& opts) : path_(path) {
        if (!is_step_dir(path)) {
            npz_ = open_reader(path, &opts);
            return;
        }
        ckpt_step* raw = nullptr;
        const int rc = ckpt_step_open(&raw, path.c_str(), &opts);
        step_.reset(raw);
        if (rc != CKPT_OK) fail_ckpt(rc, path);
    }
    const std::string& path() const { return path_; }
    size_t count() const { return npz_ ? ckpt_reader_count(f()) : ckpt_step_count(s()); }
    const char* name(size_t i) const { return npz_ ? ckpt_reader_name(f(), i) : ckpt_step_name(s(), i); }
    uint64_t nbytes(size_t i) const { return npz_ ? ckpt_reader_nbytes(f(), i) : ckpt_step_nbytes(s(), i); }
    Side side(size_t i) const {
        const int64_t* shape = npz_ ? ckpt_reader_shape(f(), i) : ckpt_step_shape(s(), i);
        const uint32_t ndim = npz_ ? ckpt_reader_ndim(f(), i) : ckpt_step_ndim(s(), i);
        return {npz_ ? ckpt_reader_dtype(f(), i) : ckpt_step_dtype(s(), i),
                npz_ ? ckpt_reader_itemsize(f(), i) : ckpt_step_itemsize(s(), i),
                std::vector<int64_t>(shape, shape + ndim)};
    }
    // The whole array.
    int read(size_t i, void* dst, size_t n) {
        if (npz_) return ckpt_reader_read_into(f(), i, dst, n);
        const std::vector<int64_t> shape = side(i).shape;
        return ckpt_step_read_rows(s(), i, 0, shape.empty() ? 1 : shape[0], dst, n);
    }
    // Bytes [at, at + n): whole rows of a step's variable (the caller's pieces are whole rows).
    int read_range(size_t i, uint64_t at, void* dst, size_t n) {
        if (npz_) return ckpt_reader_read_range(f(), i, at, dst, n);
        const std::vector<int64_t> shape = side(i).shape;
        if (shape.empty()) return ckpt_step_read_rows(s(), i, 0, 1, dst, n);
        const uint64_t row = shape[0] == 0 ? 1 : nbytes(i) / static_cast<uint64_t>(shape[0]);
        return ckpt_step_read_rows(s(), i, static_cast<int64_t>(at / row), static_cast<int64_t>(n / row), dst, n);
    }
    size_t metadata_count() const { return npz_ ? ckpt_reader_metadata_count(f()) : ckpt_step_metadata_count(s()); }
    const char* metadata_key(size_t k) const {
        return npz_ ? ckpt_reader_metadata_key(f(), k) : ckpt_step_metadata_key(s(), k);
    }
    const char* metadata_value(size_t k) const {
        return npz_ ? ckpt_reader_metadata_value(f(), k) : ckpt_step_metadata_value(s(), k);
    }
    const char* metadata(const std::string& key) const {
        return npz_ ? ckpt_reader_metadata(f(), key.c_str()) : ckpt_step_metadata(s(), key.c_str());
    }

private:
    ckpt_reader* f() const { return npz_.get(); }
    ckpt_step* s() const { return step_.get(); }
    std::string path_;
    Reader npz_;
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
// in order with ckpt_reader_read_range (so a file's CRC-32 is checked at its last piece) or ckpt_step_read_rows, in
// bounded memory; a Fortran-order array, which is not read in ranges, is read whole. Without --count it stops after the
// first piece that differs
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

// What diff found, computed once and then written out as text or as JSON.
struct ArrayDiff {
    enum Status { equal, values_changed, dtype_changed, shape_changed, only_in_a, only_in_b };
    std::string name;
    Status status = equal;
    std::optional<Side> a, b;
    std::optional<uint64_t> elements;   // known when the values were compared (or began to be)
    std::optional<Comparison> counted;  // the comparison, unless it stopped at the first difference
};
struct MetadataDiff {
    std::string key;
    std::optional<std::string> a, b;  // absent on one side, or both there and different
};
struct FilesDiff {
    std::vector<ArrayDiff> arrays;       // A's arrays in order, then those only in B
    std::vector<MetadataDiff> metadata;  // A's keys in order, then those only in B
    std::vector<std::string> ignored;    // the manager's own keys that differ, left out
    size_t equal = 0, different = 0;     // arrays
    bool same() const { return different == 0 && metadata.empty(); }
};

const char* status_name(ArrayDiff::Status s) {
    switch (s) {
        case ArrayDiff::equal: return "equal";
        case ArrayDiff::values_changed: return "values_changed";
        case ArrayDiff::dtype_changed: return "dtype_changed";
        case ArrayDiff::shape_changed: return "shape_changed";
        case ArrayDiff::only_in_a: return "only_in_a";
        case ArrayDiff::only_in_b: return "only_in_b";
    }
    return "?";
}

// Every array of both files, compared where name, dtype and shape match.
void diff_arrays(Input& a, Input& b, const DiffOptions& o, Progress& progress, FilesDiff& out) {
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
    for (size_t i = 0; i < na; ++i) {
        ArrayDiff d;
        d.name = a.name(i);
        d.a = a.side(i);
        const auto it = in_b.find(d.name);
        if (it != in_b.end()) d.b = b.side(it->second);
        if (!d.b) {
            d.status = ArrayDiff::only_in_a;
        } else if (d.a->dtype != d.b->dtype || d.a->itemsize != d.b->itemsize) {
            d.status = ArrayDiff::dtype_changed;
        } else if (d.a->shape != d.b->shape) {
            d.status = ArrayDiff::shape_changed;
        } else {
            bool stopped = false;
            const Comparison c = compare_arrays(a, i, b, it->second, scratch_a, scratch_b, progress, o, stopped);
            if (stopped) {  // not counted: the counts stay unknown
                d.elements = a.nbytes(i) / std::max<size_t>(d.a->itemsize, 1);
                d.status = ArrayDiff::values_changed;
            } else {
                d.elements = c.elements;
                d.counted = c;
                d.status = c.differing == 0 ? ArrayDiff::equal : ArrayDiff::values_changed;
            }
        }
        ++(d.status == ArrayDiff::equal ? out.equal : out.different);
        out.arrays.push_back(std::move(d));
    }
    std::map<std::string, size_t> in_a;
    for (size_t i = 0; i < na; ++i) in_a.emplace(a.name(i), i);
    for (size_t j = 0; j < nb; ++j) {
        if (in_a.count(b.name(j)) != 0) continue;
        ArrayDiff d;
        d.name = b.name(j);
        d.status = ArrayDiff::only_in_b;
        d.b = b.side(j);
        ++out.different;
        out.arrays.push_back(std::move(d));
    }
}

// Metadata keys whose values differ or that one file lacks; the manager's own record is left out (and named)
// unless --all-metadata.
void diff_metadata(const Input& a, const Input& b, const DiffOptions& o, FilesDiff& out) {
    for (int pass = 0; pass < 2; ++pass) {
        const Input& first = pass == 0 ? a : b;
        const Input& other = pass == 0 ? b : a;
        for (size_t k = 0; k < first.metadata_count(); ++k) {
            const std::string key = first.metadata_key(k);
            const char* mine = first.metadata_value(k);
            const char* theirs = other.metadata(key);
            if (pass == 1 && theirs != nullptr) continue;  // compared in the first pass
            if (theirs != nullptr && std::string(mine) == theirs) continue;
            // The manager's record of a save (its index, its time): two saves of one state differ there only.
            if (!o.all_metadata && manager_key(key)) {
                out.ignored.push_back(key);
                continue;
            }
            MetadataDiff m;
            m.key = key;
            const char* va = pass == 0 ? mine : theirs;
            const char* vb = pass == 0 ? theirs : mine;
            if (va != nullptr) m.a = va;
            if (vb != nullptr) m.b = vb;
            out.metadata.push_back(std::move(m));
        }
    }
}

void print_diff_json(const DiffOptions& o, const FilesDiff& d) {
    Json arrays = Json::array();
    for (const ArrayDiff& x : d.arrays) {
        Json entry = array_entry(x.name);
        entry["status"] = status_name(x.status);
        entry["a"] = x.a ? side_json(*x.a) : Json(nullptr);
        entry["b"] = x.b ? side_json(*x.b) : Json(nullptr);
        if (x.elements) entry["elements"] = *x.elements;
        if (const auto& c = x.counted) {
            entry["differing"] = c->differing;
            entry["nan_mismatches"] = c->nan_mismatches;
            const bool have_max = c->numeric && c->any_numeric_difference;
            entry["max_abs_diff"] = have_max ? json_number(c->max_abs) : Json(nullptr);
            entry["max_rel_diff"] = have_max ? json_number(c->max_rel) : Json(nullptr);
            entry["max_abs_diff_index"] = have_max ? Json(unravel(c->max_abs_at, x.a->shape)) : Json(nullptr);
        }
        arrays.push_back(entry);
    }
    Json metadata = Json::array();
    for (const MetadataDiff& m : d.metadata) {
        Json j;
        j["key"] = m.key;
        j["status"] = !m.b ? "only_in_a" : !m.a ? "only_in_b" : "changed";
        j["a"] = m.a ? Json(*m.a) : Json(nullptr);
        j["b"] = m.b ? Json(*m.b) : Json(nullptr);
        metadata.push_back(j);
    }
    Json out;
    out["a"] = o.a;
    out["b"] = o.b;
    out["equal"] = d.same();
    out["arrays"] = arrays;
    out["metadata"] = metadata;
    out["metadata_ignored"] = d.ignored;
    print_json(out);
}

std::string array_line(const ArrayDiff& x) {
    const auto side_text = [](const Side& s) {
        return fmt::format("{} {}", dtype_label(s.dtype, s.itemsize), shape_text(s.shape));
    };
    switch (x.status) {
        case ArrayDiff::only_in_a: return fmt::format("only in A: {} {}", x.name, side_text(*x.a));
        case ArrayDiff::only_in_b: return fmt::format("only in B: {} {}", x.name, side_text(*x.b));
        case ArrayDiff::dtype_changed:
            return fmt::format(
                "{}: dtype {} -> {}{}", x.name, dtype_label(x.a->dtype, x.a->itemsize),
                dtype_label(x.b->dtype, x.b->itemsize),
                x.a->shape == x.b->shape ? "" : ", shape " + shape_text(x.a->shape) + " -> " + shape_text(x.b->shape));
        case ArrayDiff::shape_changed:
            return fmt::format("{}: shape {} -> {}", x.name, shape_text(x.a->shape), shape_text(x.b->shape));
        case ArrayDiff::equal: return "";
        case ArrayDiff::values_changed: break;
    }
    if (!x.counted)
        return fmt::format("{}: values differ (stopped at the first difference; --count counts them)", x.name);
    const Comparison& c = *x.counted;
    std::string line = fmt::format("{}: {} of {} element{} differ{}", x.name, c.differing, c.elements,
                                   c.elements == 1 ? "" : "s", c.differing == 1 ? "s" : "");
    if (c.numeric && c.any_numeric_difference)
        line += fmt::format(", max abs diff {} at {}, max rel diff {}", number_text(c.max_abs),
                            element_text(x.name, unravel(c.max_abs_at, x.a->shape)), number_text(c.max_rel));
    if (c.nan_mismatches != 0) line += fmt::format(", {} NaN where the other is not", c.nan_mismatches);
    return line;
}

void print_diff_text(const DiffOptions& o, const FilesDiff& d) {
    std::cout << fmt::format("A = {}\nB = {}\n", o.a, o.b);
    for (const ArrayDiff& x : d.arrays)
        if (x.status != ArrayDiff::equal) std::cout << array_line(x) << '\n';
    for (const MetadataDiff& m : d.metadata) {
        if (!m.b)
            std::cout << fmt::format("metadata only in A: {} = {}\n", m.key, *m.a);
        else if (!m.a)
            std::cout << fmt::format("metadata only in B: {} = {}\n", m.key, *m.b);
        else
            std::cout << fmt::format("metadata {}: {} -> {}\n", m.key, *m.a, *m.b);
    }
    if (!d.ignored.empty())
        std::cout << fmt::format(
            "not compared: {} (the checkpoint manager's record of the save; --all-metadata "
            "compares it)\n",
            fmt::join(d.ignored, ", "));
    if (d.same()) {
        std::cout << fmt::format("equal: {} array{} and the metadata\n", d.equal, d.equal == 1 ? "" : "s");
        return;
    }
    std::string parts;
    const size_t arrays = d.equal + d.different;
    if (d.different != 0) parts = fmt::format("{} of {} array{}", d.different, arrays, arrays == 1 ? "" : "s");
    if (!d.metadata.empty())
        parts += fmt::format("{}{} metadata key{}", parts.empty() ? "" : ", ", d.metadata.size(),
                             d.metadata.size() == 1 ? "" : "s");
    std::cout << "different: " << parts << '\n';
}

int compare_files(const DiffOptions& o) {
    Progress progress;
    ckpt_options opts = CKPT_OPTIONS_INIT;
    progress.attach(opts);
    Input a(o.a, opts), b(o.b, opts);
    FilesDiff d;
    diff_arrays(a, b, o, progress, d);
    diff_metadata(a, b, o, d);
    progress.clear();
    if (o.json)
        print_diff_json(o, d);
    else
        print_diff_text(o, d);
    return d.same() ? kExitOk : kExitDifferent;
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
    CLI::App* app = parent.add_subcommand("diff", "Compare two checkpoints: arrays by name and value, and metadata");
    app->footer(
        "Values are compared as numbers (bfloat16, float16 and float8 too): NaN equals NaN and 0 equals -0; "
        "with --atol/--rtol, a equals b when |a - b| <= atol + rtol * |b| (numpy.isclose). An array's "
        "comparison stops at its first difference unless --count is given, which counts the differing "
        "elements and gives the largest |b - a| (and where it is) and |b - a| / |a|. The checkpoint "
        "manager's own metadata keys (ckpt.saved_at, ckpt.index, ...) are not compared unless "
        "--all-metadata is given. Exit status 0 when equal, 1 when "
        "different, 2 for trouble (a file missing, unreadable, corrupt or not an npz; a usage error).");
    app->add_option("A", o->a, "the first file (.npz or safetensors) or sharded step")->required();
    app->add_option("B", o->b, "the second file (.npz or safetensors) or sharded step")->required();
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
    app->add_option("--atol", o->atol, "absolute tolerance for numbers (default 0: exact)")->check(kTolerance);
    app->add_option("--rtol", o->rtol, "relative tolerance for numbers, times |b| (default 0: exact)")
        ->check(kTolerance);
    return {app, [o] { return run_diff(*o); }};
}

}  // namespace ckpt_tool
