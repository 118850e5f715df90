// SPDX-License-Identifier: Apache-2.0
#include "manager/checkpoint_policy.hpp"

#include "ckpt/version.h"
#include "core/error.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <set>

namespace ckpt::core {

namespace {

template <typename T>
std::optional<T> parse_number(std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
    return value;
}

bool reserved(const std::string& key) { return key.compare(0, kReservedPrefix.size(), kReservedPrefix) == 0; }

}  // namespace

std::string format_metric(double value) {
    if (std::isnan(value)) return "nan";
    char buf[64];
    const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, value);
    if (ec != std::errc()) fail(Code::error, "formatting metric value failed");
    return std::string(buf, ptr);
}

std::optional<double> parse_metric(std::string_view text) { return parse_number<double>(text); }

std::string format_utc(int64_t unix_ns) {
    int64_t seconds = unix_ns / 1000000000;
    int64_t nanos = unix_ns % 1000000000;
    if (nanos < 0) {
        nanos += 1000000000;
        seconds -= 1;
    }
    const std::time_t t = static_cast<std::time_t>(seconds);
    std::tm tm{};
    if (gmtime_r(&t, &tm) == nullptr) fail(Code::error, "time {} ns is out of range", unix_ns);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                       tm.tm_hour, tm.tm_min, tm.tm_sec, nanos);
}

Metadata saved_metadata(const Metadata& user, int64_t index, int64_t unix_ns, const Metrics& metrics) {
    Metadata out;
    for (size_t i = 0; i < user.size(); ++i)
        if (!reserved(user.key(i))) out.set(user.key(i), user.value(i));
    out.set(std::string(kIndexKey), std::to_string(index));
    out.set(std::string(kSavedAtKey), format_utc(unix_ns));
    out.set(std::string(kSavedAtNsKey), std::to_string(unix_ns));
    out.set(std::string(kVersionKey), CKPT_VERSION_STRING);
    for (const auto& [name, value] : metrics) {
        if (name.empty()) fail(Code::invalid, "a metric name is empty");
        std::string key = std::string(kMetricPrefix) + name;
        if (out.find(key) != nullptr) fail(Code::invalid, "metric '{}' is given twice", name);
        out.set(std::move(key), format_metric(value));  // checks the name is UTF-8 without NUL
    }
    return out;
}

CheckpointFacts checkpoint_facts(int64_t index, const Metadata& metadata, const std::string& best_metric) {
    CheckpointFacts facts;
    facts.index = index;
    if (!best_metric.empty()) {
        if (const std::string* v = metadata.find(std::string(kMetricPrefix) + best_metric)) {
            facts.metric = parse_metric(*v);
            if (facts.metric && std::isnan(*facts.metric)) facts.metric.reset();
        }
    }
    if (const std::string* v = metadata.find(kSavedAtNsKey)) facts.saved_at_ns = parse_number<int64_t>(*v);
    return facts;
}

std::optional<int64_t> best_checkpoint(const std::vector<CheckpointFacts>& facts, bool best_max) {
    const CheckpointFacts* best = nullptr;
    for (const CheckpointFacts& f : facts) {
        if (!f.metric) continue;
        if (best == nullptr || better(*f.metric, *best->metric, best_max) ||
            (*f.metric == *best->metric && f.index > best->index))
            best = &f;
    }
    if (best == nullptr) return std::nullopt;
    return best->index;
}

std::vector<int64_t> checkpoints_to_delete(const std::vector<CheckpointFacts>& facts, const RetentionPolicy& policy,
                                           int64_t just_saved, int64_t now_ns) {
    if (policy.keep <= 0 || facts.empty()) return {};
    std::set<int64_t> kept{just_saved, facts.back().index};
    const size_t keep = static_cast<size_t>(policy.keep);
    for (size_t k = facts.size() > keep ? facts.size() - keep : 0; k < facts.size(); ++k) kept.insert(facts[k].index);
    if (policy.keep_every > 0)
        for (const CheckpointFacts& f : facts)
            if (f.index % policy.keep_every == 0) kept.insert(f.index);
    if (policy.keep_best > 0) {
        std::vector<const CheckpointFacts*> ranked;
        for (const CheckpointFacts& f : facts)
            if (f.metric) ranked.push_back(&f);
        std::sort(ranked.begin(), ranked.end(), [&](const CheckpointFacts* a, const CheckpointFacts* b) {
            if (*a->metric != *b->metric) return better(*a->metric, *b->metric, policy.best_max);
            return a->index > b->index;  // a tie goes to the newer checkpoint
        });
        const size_t n = std::min(ranked.size(), static_cast<size_t>(policy.keep_best));
        for (size_t k = 0; k < n; ++k) kept.insert(ranked[k]->index);
    }
    if (policy.keep_seconds > 0) {
        // now - keep_seconds, saturating: a window reaching before INT64_MIN keeps every recorded time.
        const int64_t window_ns =
            policy.keep_seconds > INT64_MAX / 1000000000 ? INT64_MAX : policy.keep_seconds * 1000000000;
        const int64_t cutoff = now_ns < INT64_MIN + window_ns ? INT64_MIN : now_ns - window_ns;
        for (const CheckpointFacts& f : facts)
            if (f.saved_at_ns && *f.saved_at_ns >= cutoff) kept.insert(f.index);
    }
    std::vector<int64_t> doomed;
    for (const CheckpointFacts& f : facts)
        if (kept.count(f.index) == 0) doomed.push_back(f.index);
    return doomed;
}

}  // namespace ckpt::core
