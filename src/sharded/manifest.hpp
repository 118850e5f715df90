// SPDX-License-Identifier: Apache-2.0
// The manifest of a sharded checkpoint: <dir>/<step %010d>/manifest.json, written by rank 0 once every shard is
// durable, and the commit point of the step (a step directory without a valid manifest is never a checkpoint).
//
//   {"format": "ckpt-sharded", "version": 1, "step": 42, "world_size": 4,
//    "shards": ["shard-00000-of-00004.npz", ...],
//    "metadata": {"ckpt.index": "42", "ckpt.saved_at": "...", "ckpt.metric.loss": "0.25", ...},
//    "variables": [
//      {"name": "bias", "dtype": "float32", "itemsize": 4, "shape": [8], "shard": 0},
//      {"name": "emb", "dtype": "float32", "itemsize": 4, "shape": [10, 4],
//       "pieces": [{"shard": 0, "rows": [0, 3]}, {"shard": 1, "rows": [3, 10]}]}]}
//
// A whole variable lives in one shard; a row-split one has the global shape, and its pieces (the rows [r0, r1) of
// dimension 0 that each shard holds, under the variable's name) tile [0, shape[0]) exactly, in order.
// The file is untrusted input: its size is bounded, nesting is bounded while parsing, and every field is checked.
#pragma once

#include "core/dtype.hpp"
#include "npz/metadata.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

constexpr std::string_view kManifestName = "manifest.json";
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// "shard-00003-of-00008.npz"
std::string shard_name(int64_t rank, int64_t world_size);

struct ManifestPiece {
    int64_t shard = 0;
    int64_t row_begin = 0, row_end = 0;
};

struct ManifestVariable {
    std::string name;
    DType dtype = DType::float32;
    size_t itemsize = 0;
    std::vector<int64_t> shape;         // the global shape for a row-split variable
    int64_t shard = -1;                 // a whole variable's shard; -1 for a row-split one
    std::vector<ManifestPiece> pieces;  // a row-split variable's pieces, ascending
    bool split() const { return shard < 0; }
};

struct Manifest {
    int64_t step = 0;
    int64_t world_size = 1;
    Metadata metadata;
    std::vector<ManifestVariable> variables;
    const ManifestVariable* find(std::string_view name) const;
};

std::string manifest_to_json(const Manifest& m);
// Parses and checks a manifest's text; `label` (its path) starts every message. Throws Error(format) for text
// that is not a valid manifest, Error(unsupported) for a newer version.
Manifest manifest_from_json(std::string_view json, const std::string& label);

}  // namespace ckpt::core
