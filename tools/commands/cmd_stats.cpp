// SPDX-License-Identifier: Apache-2.0
// ckpt stats FILE [NAME...]: per array its minimum, maximum, mean and standard deviation over the finite elements,
// and how many are NaN, +inf, -inf and zero — what a look for diverged or dead weights needs. Arrays are read in
// pieces (ckpt_reader_read_range), so memory does not grow with their size; the CRC-32 of each is checked on the way.
#include "commands.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <new>

namespace ckpt_tool {
namespace {

struct StatsOptions {
    std::string file;
    std::vector<std::string> names;
    bool json = false;
};

// The statistics of one array, gathered piece by piece: counts, the extremes, and the mean and sum of squared
// deviations of the finite elements, pieces merged as Chan, Golub and LeVeque do (each piece's own in two passes,
// so a large offset costs no precision).
struct Stats {
    Kind kind = Kind::real;
    uint64_t elements = 0, finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
    double min = 0, max = 0;      // of the finite elements (reals)
    Real real_min, real_max;      // the same elements as their type holds them, to print them in its shortest form
    int64_t smin = 0, smax = 0;   // exact, for signed integers
    uint64_t umin = 0, umax = 0;  // exact, for booleans and unsigned integers
    double mean = 0, m2 = 0;

    void add_piece(const ArrayView& v) {
        const uint64_t n = v.count();
        elements += n;
        if (kind == Kind::complex || kind == Kind::text) return;
        uint64_t count = 0;
        double sum = 0;
        for (uint64_t i = 0; i < n; ++i) {
            const double x = real_at(v, i);
            if (std::isnan(x)) {
                ++nan;
                continue;
            }
            if (std::isinf(x)) {
                ++(x > 0 ? pos_inf : neg_inf);
                continue;
            }
            if (x == 0) ++zeros;
            if (kind == Kind::signed_integer) {
                const int64_t s = signed_item(v, i);
                smin = finite + count == 0 ? s : std::min(smin, s);
                smax = finite + count == 0 ? s : std::max(smax, s);
            } else if (kind != Kind::real) {
                const uint64_t u = unsigned_item(v, i);
                umin = finite + count == 0 ? u : std::min(umin, u);
                umax = finite + count == 0 ? u : std::max(umax, u);
            }
            const bool first = finite + count == 0;
            if (first || x < min) {
                min = x;
                if (kind == Kind::real) real_min = real_item(v, i);
            }
            if (first || x > max) {
                max = x;
                if (kind == Kind::real) real_max = real_item(v, i);
            }
            sum += x;
            ++count;
        }
        if (count == 0) return;
        const double piece_mean = sum / static_cast<double>(count);
        double piece_m2 = 0;
        for (uint64_t i = 0; i < n; ++i) {
            const double x = real_at(v, i);
            if (std::isfinite(x)) piece_m2 += (x - piece_mean) * (x - piece_mean);
        }
        const double na = static_cast<double>(finite), nb = static_cast<double>(count), total = na + nb;
        const double delta = piece_mean - mean;
        mean += delta * nb / total;
        m2 += piece_m2 + delta * delta * na * nb / total;
        finite += count;
    }
    bool numeric() const { return kind != Kind::complex && kind != Kind::text; }
    double std_dev() const { return finite == 0 ? 0 : std::sqrt(m2 / static_cast<double>(finite)); }
    Json extreme_json(bool maximum) const {
        if (!numeric() || finite == 0) return nullptr;
        if (kind == Kind::signed_integer) return maximum ? smax : smin;
        if (kind != Kind::real) return maximum ? umax : umin;
        return json_number(maximum ? max : min);
    }
    std::string extreme_text(bool maximum) const {
        if (!numeric() || finite == 0) return "-";
        if (kind == Kind::signed_integer) return fmt::format("{}", maximum ? smax : smin);
        if (kind == Kind::boolean) return (maximum ? umax : umin) != 0 ? "True" : "False";
        if (kind != Kind::real) return fmt::format("{}", maximum ? umax : umin);
        return shortest_repr(maximum ? real_max : real_min);  // as ckpt cat prints the element
    }
};

// Reads array i of `npz` in pieces of about kPieceBytes (whole items), in order, folding each into the statistics;
// a Fortran-order array, which is not read in ranges, is read whole. Throws a Failure naming the file.
Stats array_stats(ckpt_reader* npz, size_t i, const std::string& path, Scratch& scratch, Progress& progress) {
    Stats st;
    ArrayView v;
    v.dtype = ckpt_reader_dtype(npz, i);
    v.itemsize = ckpt_reader_itemsize(npz, i);
    st.kind = kind_of(v.dtype);
    const uint64_t n = ckpt_reader_nbytes(npz, i);
    const size_t item = std::max<size_t>(v.itemsize, 1);
    const size_t piece = std::max(kPieceBytes / item, size_t{1}) * item;
    const auto buffer = [&](size_t k) {
        try {
            return scratch.get(k);
        } catch (const std::bad_alloc&) {
            throw Failure(kExitInternal,
                          fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", path,
                                      ckpt_reader_name(npz, i), k),
                          CKPT_ENOMEM);
        }
    };
    uint64_t at = 0;
    do {  // to the last byte in order: the CRC-32 is checked at the last piece (an empty array: at once)
        const size_t k = static_cast<size_t>(std::min<uint64_t>(piece, n - at));
        unsigned char* dst = k == 0 ? nullptr : buffer(k);
        const int rc = ckpt_reader_read_range(npz, i, at, dst, k);
        if (rc == CKPT_EUNSUPPORTED && at == 0 && ckpt_reader_fortran_order(npz, i) != 0) {
            unsigned char* whole = buffer(static_cast<size_t>(n));
            const int read = ckpt_reader_read_into(npz, i, whole, static_cast<size_t>(n));
            if (read != CKPT_OK) fail_ckpt(read, path);
            v.data = whole;
            v.shape = {static_cast<int64_t>(n / item)};
            st.add_piece(v);
            progress.advance(n);
            return st;
        }
        if (rc != CKPT_OK) fail_ckpt(rc, path);
        v.data = dst;
        v.shape = {static_cast<int64_t>(k / item)};
        st.add_piece(v);
        progress.advance(k);
        at += k;
    } while (at < n);
    return st;
}

std::string count_text(uint64_t n) { return fmt::format("{}", n); }

int run_stats(const StatsOptions& o) {
    Progress progress;
    ckpt_options opts = CKPT_OPTIONS_INIT;
    const Reader npz = open_reader(o.file, &opts);
    ckpt_reader* raw = npz.get();
    const size_t count = ckpt_reader_count(raw);
    std::vector<size_t> chosen;
    for (const std::string& name : o.names) {
        size_t k = 0;
        while (k < count && name != ckpt_reader_name(raw, k)) ++k;
        if (k == count) {
            std::string names;
            for (size_t j = 0; j < count && j < 20; ++j)
                names += (j == 0 ? "" : ", ") + std::string(ckpt_reader_name(raw, j));
            throw Failure(kExitIo, fmt::format("{}: no array '{}' (the file has {})", o.file, name,
                                               count == 0 ? std::string("none") : names), CKPT_ENOTFOUND);
        }
        chosen.push_back(k);
    }
    if (o.names.empty())
        for (size_t k = 0; k < count; ++k) chosen.push_back(k);
    uint64_t total = 0;
    for (size_t k : chosen) total += ckpt_reader_nbytes(raw, k);
    progress.start("reading " + o.file, total);

    Scratch scratch;
    Json arrays = Json::array();
    Table table({"name", "dtype", "shape", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros"},
                {false, false, false, true, true, true, true, true, true, true, true});
    for (size_t k : chosen) {
        const Stats st = array_stats(raw, k, o.file, scratch, progress);
        const char* name = ckpt_reader_name(raw, k);
        const int64_t* shape = ckpt_reader_shape(raw, k);
        const std::vector<int64_t> dims(shape, shape + ckpt_reader_ndim(raw, k));
        const std::string dtype = dtype_label(ckpt_reader_dtype(raw, k), ckpt_reader_itemsize(raw, k));
        const bool have = st.numeric() && st.finite != 0;
        Json j;
        j["name"] = name;
        j["dtype"] = ckpt_dtype_name(ckpt_reader_dtype(raw, k));
        j["shape"] = dims;
        j["elements"] = st.elements;
        j["finite"] = st.numeric() ? Json(st.finite) : Json(nullptr);
        j["min"] = st.extreme_json(false);
        j["max"] = st.extreme_json(true);
        j["mean"] = have ? json_number(st.mean) : Json(nullptr);
        j["std"] = have ? json_number(st.std_dev()) : Json(nullptr);
        for (const auto& [key, value] : {std::pair<const char*, uint64_t>{"nan", st.nan}, {"pos_inf", st.pos_inf},
                                         {"neg_inf", st.neg_inf}, {"zeros", st.zeros}})
            j[key] = st.numeric() ? Json(value) : Json(nullptr);
        arrays.push_back(j);
        const auto counted = [&](uint64_t v) { return st.numeric() ? count_text(v) : std::string("-"); };
        table.add({name, dtype, shape_text(dims), st.extreme_text(false), st.extreme_text(true),
                   have ? fmt::format("{}", st.mean) : "-", have ? fmt::format("{}", st.std_dev()) : "-",
                   counted(st.nan), counted(st.pos_inf), counted(st.neg_inf), counted(st.zeros)});
    }
    progress.clear();
    if (o.json) {
        Json out;
        out["path"] = o.file;
        out["arrays"] = arrays;
        print_json(out);
    } else {
        std::cout << fmt::format("{}: {} array{}\n", o.file, chosen.size(), chosen.size() == 1 ? "" : "s");
        if (!chosen.empty()) std::cout << table.render();
    }
    return kExitOk;
}

}  // namespace

Command add_stats(CLI::App& parent) {
    auto o = std::make_shared<StatsOptions>();
    CLI::App* app = parent.add_subcommand(
        "stats", "Per array: min, max, mean and standard deviation of its finite values, and counts of NaN, +inf, "
                 "-inf and zeros");
    app->footer("Every array (or those named) is read a few MiB at a time, so memory does not grow with its size; "
                "its CRC-32 is checked on the way. min, max, mean and std (numpy's, ddof=0) are over the finite "
                "elements; NaN and infinities are counted instead. Complex, string and raw arrays get no "
                "statistics (-, null).");
    app->add_option("FILE", o->file, "the .npz or safetensors file")->required();
    app->add_option("NAME", o->names, "arrays to look at (default: all)");
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    return {app, [o] { return run_stats(*o); }};
}

}  // namespace ckpt_tool
