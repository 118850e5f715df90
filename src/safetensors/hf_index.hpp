// SPDX-License-Identifier: Apache-2.0
// Hugging Face's sharded layout: shards "model-00001-of-00003.safetensors" … beside "model.safetensors.index.json",
// {"metadata": {"total_size": <bytes of every tensor>}, "weight_map": {tensor: shard file}}. Pure functions between
// the index's JSON and a checked record, the shards' names, and how a collection is split into shards. No I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

constexpr std::string_view kIndexSuffix = ".index.json";  // "model.safetensors" + this
// An index is read whole: no index of a real model comes near this (100,000 tensors take about 8 MB).
constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;
// The "metadata" key of the index that ties it to the shards of one save (and each shard's "__metadata__" too), so
// that shards of two saves are never read as one checkpoint.
constexpr std::string_view kSaveIdKey = "ckpt.save_id";

struct HfIndex {
    std::optional<uint64_t> total_size;                           // "metadata": {"total_size": …}
    std::optional<std::string> save_id;                           // "metadata": {"ckpt.save_id": …} (ckpt's saves)
    std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> shard file name, in the text's order
};

// Parses and checks an index's JSON text. Throws Error(format) with "index: …" naming the problem: not a JSON
// object, a "weight_map" that is missing or not an object of strings, a tensor named twice or with NUL, a shard name
// that is not a plain file name in the index's folder (safe_shard_name). Unknown keys are ignored, as are other
// "metadata" entries (mlx writes the files' sizes as total_size: a mismatch is not an error).
HfIndex parse_hf_index(std::string_view json);
// The JSON text of an index as transformers writes it: keys sorted, indented by 2, a final newline.
std::string format_hf_index(const HfIndex& index);

// Why `name` cannot be a shard's file name, or nullptr: it must be a file of the index's own folder — not empty, no
// "/" or "\\", not "." or "..", no control characters (what @huggingface/hub's assertSafeShardFilename refuses).
const char* shard_name_problem(std::string_view name);

// "model.safetensors" -> "model-00002-of-00005.safetensors" (k counting from 1, both numbers 5 digits at least).
std::string shard_file_name(std::string_view single_name, size_t k, size_t count);

// Shards of a collection saved with at most `max_bytes` per shard: huggingface_hub's greedy split, in the
// collection's order — a tensor goes into the current shard while it fits, else starts a new one, and a tensor
// larger than max_bytes has a shard of its own. Returns each tensor's shard (0-based), and the shard count in *count.
std::vector<size_t> split_into_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_bytes, size_t* count);

}  // namespace ckpt::core
