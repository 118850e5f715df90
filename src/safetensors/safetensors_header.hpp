// SPDX-License-Identifier: Apache-2.0
// The safetensors header: pure functions between its JSON text and a checked list of tensors. No I/O.
//
// A safetensors file is an 8-byte little-endian length N, N bytes of UTF-8 JSON, then the data buffer. The JSON is
// an object: "__metadata__" (optional; a string -> string map, or null) and one entry per tensor,
// {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, the offsets counting from the buffer's start.
// Reading follows every rule of the reference reader (huggingface/safetensors, `SafeTensors::read_metadata` and
// `Metadata::validate`): N at most 100,000,000; JSON whitespace around the object; unknown fields of an entry ignored;
// shapes and offsets unsigned whole numbers; byte ranges, taken in offset order, starting at 0 and each starting where
// the last ended, each exactly the shape's product times the element size, the last ending at the file's end. It is
// stricter where the reference is lax: a name or key that appears twice, a name or key with NUL, a key of an entry
// given twice, a byte-order mark, and values ckpt cannot hold (a dimension above 2^63 - 1, more than 64 dimensions)
// are refused.
#pragma once

#include "core/dtype.hpp"
#include "core/metadata.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

constexpr size_t kSafetensorsLengthBytes = 8;                 // the little-endian header length before the JSON
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

// The safetensors name of a dtype ("F32", "BF16", "F8_E4M3", …), or nullptr for the types safetensors has none for
// (complex128, unicode, bytes, void).
const char* safetensors_dtype_name(DType d);
// The dtype of a safetensors name. nullopt for names ckpt does not know; Error(unsupported) for the sub-byte floats
// (F4, F6_E2M3, F6_E3M2), which safetensors names and ckpt has no type for.
std::optional<DType> safetensors_dtype(std::string_view name);

struct SafetensorsTensor {
    std::string name;
    DType dtype = DType::float32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // data_offsets: [begin, end) of the data buffer
    uint64_t end = 0;
};

struct SafetensorsHeader {
    std::vector<SafetensorsTensor> tensors;  // in the order the JSON lists them
    Metadata metadata;                       // "__metadata__"
};

// Parses and checks the header's JSON text, of a file whose data buffer (what follows the JSON) holds
// `buffer_bytes` bytes. Throws Error(format) with a message "safetensors header: …" naming the tensor and the problem,
// Error(unsupported) for a sub-byte float tensor. Memory: the tensors' names and shapes, bounded by the text's size.
SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t buffer_bytes);

// The header's bytes as ckpt writes them: the 8-byte length, then the JSON — "__metadata__" first when there is any,
// then the tensors in the order given, with the offsets given — padded with spaces so that the data buffer starts at
// a multiple of `alignment` (8, or a multiple of 8). Throws Error(invalid) for a dtype safetensors has no name for,
// or a header over kMaxSafetensorsHeaderBytes.
std::string format_safetensors_header(const std::vector<SafetensorsTensor>& tensors, const Metadata& metadata,
                                      uint64_t alignment = 8);

}  // namespace ckpt::core
