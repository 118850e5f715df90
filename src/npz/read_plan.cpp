// SPDX-License-Identifier: Apache-2.0
#include "npz/read_plan.hpp"

#include <algorithm>

namespace ckpt::core {

ReadPlan plan_reads(const std::vector<ArrayRead>& reads, bool concurrent, unsigned cores, const ReadLimits& limits) {
    ReadPlan plan;
    for (const ArrayRead& r : reads) plan.total += r.nbytes;
    concurrent = concurrent && plan.total >= limits.parallel_min_bytes;
    for (size_t k = 0; k < reads.size(); ++k) {
        const ArrayRead& r = reads[k];
        if (!(concurrent && r.nbytes > limits.part_bytes && r.stored && !r.transposed)) {
            plan.parts.push_back({k, 0, r.nbytes, true, r.stored && !r.transposed && r.nbytes <= limits.batch_bytes});
            continue;
        }
        for (uint64_t from = 0; from < r.nbytes; from += limits.part_bytes)
            plan.parts.push_back({k, from, std::min<uint64_t>(limits.part_bytes, r.nbytes - from), false, false});
    }
    const unsigned threads =
        concurrent && plan.parts.size() > 1 ? std::max(1u, std::min(cores, limits.max_threads)) : 1;

    // Parts in file order, by where their bytes start.
    const size_t n = plan.parts.size();
    plan.order.resize(n);
    plan.offset.resize(n);
    for (size_t p = 0; p < n; ++p) {
        plan.order[p] = p;
        plan.offset[p] = reads[plan.parts[p].read].data_offset + plan.parts[p].from;
    }
    const auto by_offset = [&](size_t a, size_t b) { return plan.offset[a] < plan.offset[b]; };
    if (!std::is_sorted(plan.order.begin(), plan.order.end(), by_offset))
        std::sort(plan.order.begin(), plan.order.end(), by_offset);

    // Small arrays that follow each other closely in the file (ckpt writes each member's local header, npy header
    // and data back to back) are read as one batch.
    for (size_t i = 0; i < n; ++i) {
        const size_t p = plan.order[i];
        if (!plan.batches.empty()) {
            ReadPlan::Batch& last = plan.batches.back();
            const size_t q = plan.order[i - 1];
            const uint64_t q_end = plan.offset[q] + plan.parts[q].size;
            const uint64_t first = plan.offset[plan.order[last.begin]];
            const uint64_t at = plan.offset[p];
            if (plan.parts[p].batchable && plan.parts[q].batchable && at >= q_end &&
                at - q_end <= limits.batch_gap_bytes && at + plan.parts[p].size - first <= limits.batch_bytes) {
                last.end = i + 1;
                last.bytes += plan.parts[p].size;
                continue;
            }
        }
        plan.batches.push_back({i, i + 1, plan.parts[p].size});
    }

    // Each thread's share: contiguous batches of about total / threads bytes, in file order.
    plan.shares.resize(threads);
    uint64_t before = 0;  // bytes of the batches before batch i
    size_t i = 0;
    for (unsigned t = 0; t < threads; ++t) {
        plan.shares[t].begin = i;
        for (; i < plan.batches.size() && before < plan.total / threads * (t + 1); ++i) before += plan.batches[i].bytes;
        plan.shares[t].end = t + 1 == threads ? plan.batches.size() : i;
    }
    return plan;
}

}  // namespace ckpt::core
