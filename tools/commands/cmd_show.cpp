// SPDX-License-Identifier: Apache-2.0
// ckpt show FILE: how a file holds its arrays — layout, then per array its type, shape, byte order and memory order,
// sizes, compression, CRC-32 and where its data starts — and the file's metadata. Reads no array data.
#include "commands.hpp"
#include "sharded_step.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

namespace ckpt_tool {
namespace {

struct ShowOptions {
    std::string file;
    bool json = false;
    bool bytes = false;
    std::optional<std::string> hist;  // --hist NAME
};

constexpr uint64_t kMaxAlignment = 4096;

// The largest power of two dividing the offset, up to 4096: what a memory mapping of the file can rely on.
uint64_t alignment_of(uint64_t offset) {
    if (offset == 0) return kMaxAlignment;
    const uint64_t lowest = offset & (~offset + 1);
    return lowest < kMaxAlignment ? lowest : kMaxAlignment;
}

const char* layout_name(uint32_t layout) {
    return layout == CKPT_LAYOUT_OBJAX ? "objax" : layout == CKPT_LAYOUT_PLAIN ? "plain" : "unknown";
}

const char* compression_name(uint32_t c) { return c == CKPT_DEFLATE ? "deflated" : "stored"; }

// The byte order of the data in its member, in words ('<' little, '>' big, '|' none: single-byte items).
const char* endian_name(int byte_order) { return byte_order == '<' ? "little" : byte_order == '>' ? "big" : "-"; }

// The rows of a terminal histogram: eighth blocks stacked this many characters high.
constexpr int kHistRows = 8;

// `ckpt show --hist NAME`: the array's 64-bin histogram (as ckpt report draws it) in Unicode block characters,
// heights on a log scale, for a terminal over ssh.
int show_histogram(const ShowOptions& o) {
    const Reader npz = open_reader(o.file);
    ckpt_reader* f = npz.get();
    const size_t i = array_index(f, *o.hist, o.file);
    const uint32_t dtype = ckpt_reader_dtype(f, i);
    const int64_t* dims = ckpt_reader_shape(f, i);
    const std::vector<int64_t> shape(dims, dims + ckpt_reader_ndim(f, i));
    if (!has_statistics(dtype))
        throw Failure(kExitUsage,
                      fmt::format("{}: array '{}' is {}: a histogram needs numbers (booleans, integers or "
                                  "reals)",
                                  o.file, *o.hist, ckpt_dtype_name(dtype)),
                      CKPT_EUNSUPPORTED);
    Progress progress;
    progress.start("reading " + o.file, 2 * static_cast<uint64_t>(ckpt_reader_nbytes(f, i)));
    const Stats st = array_stats(f, i, o.file, progress);
    std::optional<Histogram> h;
    if (st.finite != 0) h = array_histogram(f, i, o.file, st, progress);
    progress.clear();
    if (o.json) {
        Json out = {{"path", o.file}, {"name", *o.hist}, {"dtype", ckpt_dtype_name(dtype)}, {"shape", shape}};
        out.update(st.to_json());
        out["histogram"] = h ? h->to_json() : Json(nullptr);
        print_json(out);
        return kExitOk;
    }
    std::cout << fmt::format("{}: '{}' {} {}, {} element{}", o.file, *o.hist,
                             dtype_label(dtype, ckpt_reader_itemsize(f, i)), shape_text(shape), st.elements,
                             st.elements == 1 ? "" : "s");
    if (st.nan != 0) std::cout << fmt::format(", {} NaN", st.nan);
    if (st.pos_inf + st.neg_inf != 0) std::cout << fmt::format(", {} \u00b1Inf", st.pos_inf + st.neg_inf);
    std::cout << '\n';
    if (!h) {
        std::cout << "no finite elements: nothing to draw\n";
        return kExitOk;
    }
    uint64_t top = 0;
    for (uint64_t c : h->counts()) top = std::max(top, c);
    // A bin's height in eighths of a row: log(1 + count) of log(1 + the largest), at least one eighth when not empty.
    std::vector<int> level;
    for (uint64_t c : h->counts()) {
        const double f = std::log1p(static_cast<double>(c)) / std::log1p(static_cast<double>(top));
        level.push_back(c == 0 ? 0 : std::max(1, static_cast<int>(std::lround(f * kHistRows * 8))));
    }
    static const char* const kEighths[] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                           "\u2585", "\u2586", "\u2587", "\u2588"};
    const std::string top_label = fmt::format("{}", top);
    const size_t margin = std::max<size_t>(top_label.size(), 1) + 1;
    std::cout << fmt::format("count (log scale), {} bins\n", Histogram::kBins);
    for (int row = kHistRows - 1; row >= 0; --row) {
        const std::string label = row == kHistRows - 1 ? top_label : row == 0 ? "1" : "";
        std::cout << std::string(margin - 1 - label.size(), ' ') << label << (label.empty() ? " \u2502" : " \u2524");
        for (int l : level) std::cout << kEighths[std::clamp(l - row * 8, 0, 8)];
        std::cout << '\n';
    }
    std::cout << std::string(margin, ' ') << "\u2514";
    for (int k = 0; k < Histogram::kBins; ++k) std::cout << "\u2500";
    const std::string lo = st.extreme_text(false), hi = st.extreme_text(true);
    const size_t gap = Histogram::kBins + 1 > lo.size() + hi.size() ? Histogram::kBins + 1 - lo.size() - hi.size() : 1;
    std::cout << '\n' << std::string(margin + 1, ' ') << lo << std::string(gap, ' ') << hi << '\n';
    return kExitOk;
}

int run_show(const ShowOptions& o) {
    if (o.hist) return show_histogram(o);
    if (is_step_dir(o.file)) return show_step(o.file, o.json, o.bytes);
    const Reader npz = open_reader(o.file);
    ckpt_reader* f = npz.get();
    const std::optional<uint64_t> size = ckpt_reader_file_size(f);
    const size_t count = ckpt_reader_count(f);
    const uint32_t layout = ckpt_reader_layout(f);
    const bool safetensors = ckpt_reader_format(f) == CKPT_FORMAT_SAFETENSORS;  // no layouts, no CRCs
    const std::optional<uint64_t> shared = shared_bytes_of(o.file);

    if (o.json) {
        Json out;
        out["path"] = o.file;
        out["bytes"] = size ? Json(*size) : Json(nullptr);
        out["format"] = safetensors ? "safetensors" : "npz";
        out["layout"] = layout_name(layout);
        out["shared_bytes"] = shared ? Json(*shared) : Json(nullptr);
        Json arrays = Json::array();
        for (size_t i = 0; i < count; ++i) {
            const bool stored = ckpt_reader_compression(f, i) == CKPT_STORE;
            const uint64_t offset = ckpt_reader_data_offset(f, i);
            const int64_t* shape = ckpt_reader_shape(f, i);
            Json a;
            a["name"] = ckpt_reader_name(f, i);
            a["member"] = ckpt_reader_member_name(f, i);
            a["dtype"] = ckpt_dtype_name(ckpt_reader_dtype(f, i));
            a["itemsize"] = ckpt_reader_itemsize(f, i);
            a["shape"] = std::vector<int64_t>(shape, shape + ckpt_reader_ndim(f, i));
            a["byte_order"] = std::string(1, static_cast<char>(ckpt_reader_byte_order(f, i)));
            a["fortran_order"] = ckpt_reader_fortran_order(f, i) == 1;
            a["bytes"] = ckpt_reader_nbytes(f, i);
            a["stored_bytes"] = ckpt_reader_stored_bytes(f, i);
            a["compression"] = compression_name(ckpt_reader_compression(f, i));
            a["crc32"] = safetensors ? Json(nullptr) : Json(ckpt_reader_crc32(f, i));
            a["data_offset"] = stored ? Json(offset) : Json(nullptr);
            a["alignment"] = stored ? Json(alignment_of(offset)) : Json(nullptr);
            arrays.push_back(a);
        }
        out["arrays"] = arrays;
        Json meta = Json::object();
        for (size_t k = 0; k < ckpt_reader_metadata_count(f); ++k)
            meta[ckpt_reader_metadata_key(f, k)] = ckpt_reader_metadata_value(f, k);
        out["metadata"] = meta;
        print_json(out);
        return kExitOk;
    }

    std::cout << fmt::format("{}: {}{}, {} array{}\n", o.file, size ? human_size(*size, o.bytes) + ", " : "",
                             safetensors ? std::string("safetensors") : fmt::format("{} layout", layout_name(layout)),
                             count, count == 1 ? "" : "s");
    if (shared && *shared > 0)
        std::cout << fmt::format("shared: {}{} with other files (blocks the filesystem holds once for all of them)\n",
                                 human_size(*shared, o.bytes),
                                 size ? fmt::format(" of its {}", human_size(*size, o.bytes)) : "");
    const bool objax = layout == CKPT_LAYOUT_OBJAX;
    std::vector<std::string> header = {"name",   "dtype",       "shape", "endian", "order", "bytes",
                                       "stored", "compression", "crc32", "offset", "align"};
    std::vector<bool> right = {false, false, false, false, false, true, true, false, false, true, true};
    if (objax) {  // the member names (0.npy, 1.npy, ...) differ from the variable names only in this layout
        header.insert(header.begin() + 1, "member");
        right.insert(right.begin() + 1, false);
    }
    Table table(header, right);
    for (size_t i = 0; i < count; ++i) {
        const bool stored = ckpt_reader_compression(f, i) == CKPT_STORE;
        const uint64_t offset = ckpt_reader_data_offset(f, i);
        const int64_t* shape = ckpt_reader_shape(f, i);
        std::vector<std::string> row = {
            ckpt_reader_name(f, i),
            dtype_label(ckpt_reader_dtype(f, i), ckpt_reader_itemsize(f, i)),
            shape_text(std::vector<int64_t>(shape, shape + ckpt_reader_ndim(f, i))),
            endian_name(ckpt_reader_byte_order(f, i)),
            ckpt_reader_fortran_order(f, i) == 1 ? "Fortran" : "C",
            human_size(ckpt_reader_nbytes(f, i), o.bytes),
            human_size(ckpt_reader_stored_bytes(f, i), o.bytes),
            compression_name(ckpt_reader_compression(f, i)),
            safetensors ? "-" : fmt::format("{:08x}", ckpt_reader_crc32(f, i)),
            stored ? fmt::format("{}", offset) : "-",
            stored ? fmt::format("{}", alignment_of(offset)) : "-",
        };
        if (objax) row.insert(row.begin() + 1, ckpt_reader_member_name(f, i));
        table.add(row);
    }
    if (count > 0) std::cout << table.render();
    const size_t meta = ckpt_reader_metadata_count(f);
    if (meta == 0) {
        std::cout << "metadata: none\n";
    } else {
        std::cout << "metadata:\n";
        for (size_t k = 0; k < meta; ++k)
            std::cout << "  " << ckpt_reader_metadata_key(f, k) << " = " << ckpt_reader_metadata_value(f, k) << '\n';
    }
    return kExitOk;
}

}  // namespace

Command add_show(CLI::App& parent) {
    auto o = std::make_shared<ShowOptions>();
    CLI::App* app = parent.add_subcommand(
        "show",
        "Show a file's format or layout, arrays (dtype, shape, byte and memory order, sizes, compression, CRC-32, "
        "offset) and metadata");
    app->footer(
        "Reads the zip directory and every npy header (a safetensors file's header), no array data. The alignment of a "
        "stored array is the "
        "largest power of two (up to 4096) that divides its data offset.");
    app->add_option("FILE", o->file, "a .npz or safetensors file, or a sharded step's directory")->required();
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    app->add_flag("--bytes", o->bytes, "sizes in bytes");
    app->add_option("--hist", o->hist,
                    "draw the array NAME's histogram instead (64 bins from its min to its max, counts on a log "
                    "scale), reading it in pieces")
        ->option_text("NAME");
    return {app, [o] { return run_show(*o); }};
}

}  // namespace ckpt_tool
