// SPDX-License-Identifier: Apache-2.0
// What the checkpoint manager records about each checkpoint in its metadata, and which checkpoints retention keeps.
//
// Every manager save writes these keys into the file's metadata member (and drops any other key starting with
// "ckpt.", which a collection restored from an earlier checkpoint carries):
//
//   ckpt.index         the checkpoint's index, decimal
//   ckpt.saved_at      the time of the save, UTC, ISO 8601: "2024-05-01T12:34:56.123456789Z"
//   ckpt.saved_at_ns   the same time in nanoseconds since the Unix epoch, decimal
//   ckpt.version       the version of ckpt that wrote the file, "0.4.0"
//   ckpt.metric.<name> a metric of the save, the shortest decimal that reads back as the same double
//                      ("0.25", "1e-07", "nan", "inf", "-inf")
//
// Retention reads them back from the files, so what it keeps does not depend on what one manager remembers: a
// restarted trainer keeps the same best checkpoints.
#pragma once

#include "npz/metadata.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::core {

constexpr std::string_view kReservedPrefix = "ckpt.";
constexpr std::string_view kIndexKey = "ckpt.index";
constexpr std::string_view kSavedAtKey = "ckpt.saved_at";
constexpr std::string_view kSavedAtNsKey = "ckpt.saved_at_ns";
constexpr std::string_view kVersionKey = "ckpt.version";
constexpr std::string_view kMetricPrefix = "ckpt.metric.";

using Metrics = std::vector<std::pair<std::string, double>>;

// The shortest decimal text that parses back to exactly `value` (std::to_chars), "nan", "inf" or "-inf".
std::string format_metric(double value);
// Parses what format_metric writes (and any other decimal or exponent form); nullopt for anything else.
std::optional<double> parse_metric(std::string_view text);
// "2024-05-01T12:34:56.123456789Z" for nanoseconds since the Unix epoch (UTC).
std::string format_utc(int64_t unix_ns);

// `user` without its "ckpt."-prefixed keys, plus the manager's keys for a save of `index` at `unix_ns` with
// `metrics`. Throws Error(invalid) for an empty or invalid metric name or one given twice.
Metadata saved_metadata(const Metadata& user, int64_t index, int64_t unix_ns, const Metrics& metrics);

// What retention needs to know of one checkpoint: nullopt for what its metadata does not record (or when the
// file could not be read).
struct CheckpointFacts {
    int64_t index = 0;
    std::optional<double> metric;       // the value of the best metric; NaN counts as absent
    std::optional<int64_t> saved_at_ns;
};
CheckpointFacts checkpoint_facts(int64_t index, const Metadata& metadata, const std::string& best_metric);

struct RetentionPolicy {
    int32_t keep = 10;          // newest kept; <= 0 keeps every checkpoint
    int64_t keep_every = 0;     // multiples kept; 0 = off
    int32_t keep_best = 0;      // the best N by the metric; <= 0 = off
    bool best_max = false;      // higher is better
    int64_t keep_seconds = 0;   // saved within the last S seconds; 0 = off
    bool needs_facts() const { return keep > 0 && (keep_best > 0 || keep_seconds > 0); }
};

// Whether a is a better value of the best metric than b under the policy's mode (neither NaN).
inline bool better(double a, double b, bool best_max) { return best_max ? a > b : a < b; }

// The best checkpoint among `facts` (NaN and absent metrics never are); ties go to the higher index.
std::optional<int64_t> best_checkpoint(const std::vector<CheckpointFacts>& facts, bool best_max);

// Which of `facts` (ascending by index) to delete: a checkpoint is kept when any policy keeps it; the newest and
// `just_saved` are always kept. Returns indices, ascending.
std::vector<int64_t> checkpoints_to_delete(const std::vector<CheckpointFacts>& facts, const RetentionPolicy& policy,
                                           int64_t just_saved, int64_t now_ns);

}  // namespace ckpt::core
