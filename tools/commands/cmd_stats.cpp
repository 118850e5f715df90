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

std::string count_text(uint64_t n) { return fmt::format("{}", n); }

int run_stats(const StatsOptions& o) {
    Progress progress;
    ckpt_options opts = CKPT_OPTIONS_INIT;
    const Reader npz = open_reader(o.file, &opts);
    ckpt_reader* raw = npz.get();
    const size_t count = ckpt_reader_count(raw);
    std::vector<size_t> chosen;
    for (const std::string& name : o.names) chosen.push_back(array_index(raw, name, o.file));
    if (o.names.empty())
        for (size_t k = 0; k < count; ++k) chosen.push_back(k);
    uint64_t total = 0;
    for (size_t k : chosen) total += ckpt_reader_nbytes(raw, k);
    progress.start("reading " + o.file, total);

    Json arrays = Json::array();
    Table table({"name", "dtype", "shape", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros"},
                {false, false, false, true, true, true, true, true, true, true, true});
    for (size_t k : chosen) {
        const Stats st = array_stats(raw, k, o.file, progress);
        const char* name = ckpt_reader_name(raw, k);
        const int64_t* shape = ckpt_reader_shape(raw, k);
        const std::vector<int64_t> dims(shape, shape + ckpt_reader_ndim(raw, k));
        const std::string dtype = dtype_label(ckpt_reader_dtype(raw, k), ckpt_reader_itemsize(raw, k));
        const bool have = st.numeric() && st.finite != 0;
        Json j = {{"name", name}, {"dtype", ckpt_dtype_name(ckpt_reader_dtype(raw, k))}, {"shape", dims}};
        j.update(st.to_json());
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
        "stats",
        "Per array: min, max, mean and standard deviation of its finite values, and counts of NaN, +inf, "
        "-inf and zeros");
    app->footer(
        "Every array (or those named) is read a few MiB at a time, so memory does not grow with its size; "
        "its CRC-32 is checked on the way. min, max, mean and std (numpy's, ddof=0) are over the finite "
        "elements; NaN and infinities are counted instead. Complex, string and raw arrays get no "
        "statistics (-, null).");
    app->add_option("FILE", o->file, "the .npz or safetensors file")->required();
    app->add_option("NAME", o->names, "arrays to look at (default: all)");
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    return {app, [o] { return run_stats(*o); }};
}

}  // namespace ckpt_tool
