// SPDX-License-Identifier: Apache-2.0
// The plan of a parallel read (npz/read_plan.hpp), alone: parts, batches and shares for files laid out as ckpt
// writes them and as others may.
#include "npz/read_plan.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace ckpt::core;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Arrays of the given sizes back to back, each after `gap` bytes of headers.
std::vector<ArrayRead> back_to_back(const std::vector<uint64_t>& sizes, uint64_t gap = 128) {
    std::vector<ArrayRead> out;
    uint64_t at = 0;
    for (uint64_t n : sizes) {
        at += gap;
        out.push_back({at, n, true, false});
        at += n;
    }
    return out;
}

// Every part's bytes are covered once: the parts of each read tile its data, in order.
void check_covers(const std::vector<ArrayRead>& reads, const ReadPlan& plan) {
    std::vector<uint64_t> next(reads.size(), 0);
    for (const ReadPlan::Part& p : plan.parts) {
        REQUIRE(p.read < reads.size());
        CHECK(p.from == next[p.read]);
        next[p.read] += p.size;
    }
    for (size_t k = 0; k < reads.size(); ++k) CHECK(next[k] == reads[k].nbytes);
    // The batches cover `order` in runs, the shares cover the batches in runs.
    size_t at = 0;
    for (const ReadPlan::Batch& b : plan.batches) {
        CHECK(b.begin == at);
        CHECK(b.end > b.begin);
        at = b.end;
    }
    CHECK(at == plan.order.size());
    at = 0;
    for (const ReadPlan::Share& s : plan.shares) {
        CHECK(s.begin == at);
        at = s.end;
    }
    CHECK(at == plan.batches.size());
    for (size_t i = 1; i < plan.order.size(); ++i) CHECK(plan.offset[plan.order[i - 1]] <= plan.offset[plan.order[i]]);
}

}  // namespace

TEST_CASE("Small arrays close together are read in batches of at most batch_bytes, on one thread") {
    const auto reads = back_to_back(std::vector<uint64_t>(100, 10000));
    const ReadPlan plan = plan_reads(reads, true, 4);
    check_covers(reads, plan);
    CHECK(plan.parts.size() == 100);
    CHECK(plan.shares.size() == 1);  // 1 MB in all: less than parallel_min_bytes
    // 256 KiB holds 25 arrays of 10000 bytes with their 128-byte gaps (25 * 10128 + 10000 > 262144 from the 26th).
    REQUIRE(plan.batches.size() == 4);
    CHECK(plan.batches[0].end - plan.batches[0].begin == 25);
    CHECK(plan.batches[0].bytes == 250000);
}

TEST_CASE("A gap larger than batch_gap_bytes, a deflated or a transposed array ends a batch") {
    std::vector<ArrayRead> reads = back_to_back({100, 100, 100, 100, 100});
    reads[2].data_offset += 5000;  // far from the one before
    for (size_t k = 3; k < reads.size(); ++k) reads[k].data_offset += 5000;
    reads[3].stored = false;
    const ReadPlan plan = plan_reads(reads, false, 1);
    check_covers(reads, plan);
    // [0, 1] [2] [3: deflated] [4]
    REQUIRE(plan.batches.size() == 4);
    CHECK(plan.batches[0].end - plan.batches[0].begin == 2);
    CHECK_FALSE(plan.parts[3].batchable);
    std::vector<ArrayRead> t = back_to_back({100, 100});
    t[1].transposed = true;
    CHECK(plan_reads(t, false, 1).batches.size() == 2);
}

TEST_CASE("A large stored array is split into parts for several threads, each with a contiguous share") {
    const auto reads = back_to_back({100 * kMiB, 1000, 8 * kMiB});
    const ReadPlan plan = plan_reads(reads, true, 2);
    check_covers(reads, plan);
    // 100 MiB in parts of 32 MiB (4 parts), the small one whole, the 8 MiB one whole (not above part_bytes).
    CHECK(plan.parts.size() == 6);
    CHECK_FALSE(plan.parts[0].whole);
    CHECK(plan.parts[3].size == 4 * kMiB);
    REQUIRE(plan.shares.size() == 2);
    // About half the bytes each: the first share ends once it holds at least half.
    uint64_t first = 0;
    for (size_t b = plan.shares[0].begin; b < plan.shares[0].end; ++b) first += plan.batches[b].bytes;
    CHECK(first >= plan.total / 2);
    CHECK(first < plan.total / 2 + 32 * kMiB);
}

TEST_CASE("Without concurrent reads, or below parallel_min_bytes, nothing is split and one thread reads all") {
    const auto reads = back_to_back({100 * kMiB});
    for (const bool concurrent : {false, true}) {
        ReadLimits limits;
        if (concurrent) limits.parallel_min_bytes = 200 * kMiB;
        const ReadPlan plan = plan_reads(reads, concurrent, 4, limits);
        check_covers(reads, plan);
        CHECK(plan.parts.size() == 1);
        CHECK(plan.parts[0].whole);
        CHECK(plan.shares.size() == 1);
    }
}

TEST_CASE("Arrays listed out of file order are read in file order, and an empty list plans nothing") {
    std::vector<ArrayRead> reads = back_to_back({100, 200, 300});
    std::swap(reads[0], reads[2]);
    const ReadPlan plan = plan_reads(reads, false, 1);
    check_covers(reads, plan);
    CHECK(plan.order == std::vector<size_t>{2, 1, 0});
    CHECK(plan.batches.size() == 1);  // still close together in the file
    const ReadPlan none = plan_reads({}, true, 4);
    CHECK(none.parts.empty());
    CHECK(none.batches.empty());
    CHECK(none.shares.size() == 1);
}
