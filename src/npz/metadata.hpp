// SPDX-License-Identifier: Apache-2.0
// What a checkpoint says about itself: the user's key/values (step, time, loss, notes) and the real dtype of each
// array whose npy descr cannot say it (bfloat16 and float8 are written as raw bytes). Both travel as the JSON text of
// one extra member, __ckpt_metadata__.npy, a 0-d '<U' array that numpy.load shows as one more array:
//
//   {"format": 1, "dtypes": {"w": "bfloat16"}, "metadata": {"step": "100"}}
//
// "dtypes" names arrays as numpy.load's keys do: by member name without ".npy" (the variable name in the plain
// layout, the index in objax's), so a numpy user looks each key up directly and every layout reads the same.
// Every object is flat and every value a string, so the text is read by a SAX handler that refuses anything else
// the moment it appears: nesting never goes past two levels, whatever the file holds.
#pragma once

#include "core/dtype.hpp"
#include "core/metadata.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ckpt::core {

constexpr int64_t kMetadataFormat = 1;
// The metadata member's data (UTF-32 text) may hold at most this many bytes: 16 Mi characters.
constexpr uint64_t kMaxMetadataBytes = uint64_t{64} << 20;

// The content of a metadata member.
struct MetadataRecord {
    std::vector<std::pair<std::string, DType>> dtypes;  // member name without ".npy" -> the array's real dtype
    Metadata user;
};

// The JSON text of a record (UTF-8, compact, keys in order).
std::string metadata_to_json(const MetadataRecord& record);
// Parses and checks the JSON text of a metadata member. Throws Error(format) — "metadata: …" naming the problem —
// for text that is not JSON or not the documented shape (an unknown dtype name, a variable named twice, a
// non-string value, nesting), Error(unsupported) for a format newer than this library reads.
MetadataRecord metadata_from_json(std::string_view json);

}  // namespace ckpt::core
