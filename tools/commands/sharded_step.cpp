// SPDX-License-Identifier: Apache-2.0
#include "sharded_step.hpp"

#include "checkpoint_dir.hpp"
#include "location.hpp"
#include "text.hpp"
#include "values.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <vector>

namespace ckpt_tool {

namespace {

std::vector<int64_t> shape_of(const ckpt_step* s, size_t i) {
    const int64_t* p = ckpt_step_shape(s, i);
    return std::vector<int64_t>(p, p + ckpt_step_ndim(s, i));
}

int64_t rows_of(const ckpt_step* s, size_t i) {
    const std::vector<int64_t> shape = shape_of(s, i);
    return shape.empty() ? 1 : shape[0];
}

}  // namespace

Verdict verify_step(const std::string& path, Progress& progress, Scratch& scratch) {
    Verdict v;
    v.path = path;
    ckpt_step* raw = nullptr;
    const int rc = ckpt_step_open(&raw, path.c_str(), nullptr);
    if (rc != CKPT_OK) {
        set_failure(v, rc, true);
        return v;
    }
    const Step step(raw);
    v.opened = true;
    v.arrays = ckpt_step_count(raw);
    // First every variable through the manifest, a few MiB of rows at a time: each shard must hold the pieces the
    // manifest records, as it records them. Rows read in parts are not CRC-checked...
    const auto row_bytes = [&](size_t i) -> size_t {
        const int64_t rows = rows_of(raw, i);
        return rows == 0 ? std::max<size_t>(ckpt_step_itemsize(raw, i), 1) : ckpt_step_nbytes(raw, i) / rows;
    };
    verify_arrays(
        v,
        {[&](size_t i) { return ckpt_step_nbytes(raw, i); }, [&](size_t i) { return ckpt_step_name(raw, i); },
         [&](size_t i, void* dst, size_t n) { return ckpt_step_read_rows(raw, i, 0, rows_of(raw, i), dst, n); },
         [&](size_t i, uint64_t at, void* dst, size_t n) {
             const size_t row = row_bytes(i);
             const int64_t first = static_cast<int64_t>(at / row), count = static_cast<int64_t>(n / row);
             return ckpt_step_read_rows(raw, i, ckpt_step_ndim(raw, i) == 0 ? 0 : first,
                                        ckpt_step_ndim(raw, i) == 0 ? 1 : count, dst, n);
         },
         row_bytes},
        progress, scratch);
    if (v.verdict != "ok") return v;
    // ... so then every shard as the file it is, read in order in pieces: every CRC-32 checked, in bounded memory.
    for (int32_t rank = 0; rank < ckpt_step_world_size(raw); ++rank) {
        const Verdict shard = verify_file(join_path(path, ckpt_step_shard(raw, rank)), progress, scratch);
        if (shard.verdict == "ok") continue;
        v.verdict = shard.verdict;
        v.error = shard.error;
        v.exit_code = shard.exit_code;
        v.rc = shard.rc;
        return v;
    }
    return v;
}

int show_step(const std::string& path, bool json, bool bytes) {
    ckpt_step* raw = nullptr;
    const int rc = ckpt_step_open(&raw, path.c_str(), nullptr);
    if (rc != CKPT_OK) fail_ckpt(rc, path);
    const Step step(raw);
    const size_t count = ckpt_step_count(raw);
    const std::optional<uint64_t> size = step_bytes(path);
    std::vector<std::string> shards;
    for (int32_t r = 0; r < ckpt_step_world_size(raw); ++r) shards.emplace_back(ckpt_step_shard(raw, r));
    if (json) {
        Json out;
        out["path"] = path;
        out["bytes"] = size ? Json(*size) : Json(nullptr);
        out["layout"] = "sharded";
        out["step"] = ckpt_step_index(raw);
        out["world_size"] = ckpt_step_world_size(raw);
        out["shards"] = shards;
        Json arrays = Json::array();
        for (size_t i = 0; i < count; ++i) {
            Json a;
            a["name"] = ckpt_step_name(raw, i);
            a["dtype"] = ckpt_dtype_name(ckpt_step_dtype(raw, i));
            a["itemsize"] = ckpt_step_itemsize(raw, i);
            a["shape"] = shape_of(raw, i);
            a["bytes"] = ckpt_step_nbytes(raw, i);
            a["pieces"] = ckpt_step_pieces(raw, i);
            arrays.push_back(a);
        }
        out["arrays"] = arrays;
        Json meta = Json::object();
        for (size_t k = 0; k < ckpt_step_metadata_count(raw); ++k)
            meta[ckpt_step_metadata_key(raw, k)] = ckpt_step_metadata_value(raw, k);
        out["metadata"] = meta;
        print_json(out);
        return kExitOk;
    }
    std::cout << fmt::format("{}: {}sharded step {} of {} rank{}, {} variable{}\n", path,
                             size ? human_size(*size, bytes) + ", " : "", ckpt_step_index(raw), shards.size(),
                             shards.size() == 1 ? "" : "s", count, count == 1 ? "" : "s");
    Table table({"name", "dtype", "shape", "bytes", "shards"}, {false, false, false, true, false});
    for (size_t i = 0; i < count; ++i) {
        const size_t pieces = ckpt_step_pieces(raw, i);
        table.add({ckpt_step_name(raw, i), dtype_label(ckpt_step_dtype(raw, i), ckpt_step_itemsize(raw, i)),
                   shape_text(shape_of(raw, i)), human_size(ckpt_step_nbytes(raw, i), bytes),
                   pieces == 0 ? std::string("whole") : fmt::format("rows in {}", pieces)});
    }
    if (count > 0) std::cout << table.render();
    const size_t meta = ckpt_step_metadata_count(raw);
    if (meta == 0) {
        std::cout << "metadata: none\n";
    } else {
        std::cout << "metadata:\n";
        for (size_t k = 0; k < meta; ++k)
            std::cout << "  " << ckpt_step_metadata_key(raw, k) << " = " << ckpt_step_metadata_value(raw, k) << '\n';
    }
    return kExitOk;
}

}  // namespace ckpt_tool
