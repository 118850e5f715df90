// SPDX-License-Identifier: Apache-2.0
// How NpzReader::read_entries divides the reads of many arrays among threads, before any byte is read: large stored
// arrays in parts (so one huge array is read by several threads), small ones that lie close together in the file in
// batches (one read for many), and the batches in contiguous shares of the file, one per thread (so the kernel's
// readahead sees one sequential stream per thread). Pure arithmetic, tested alone (tests/format/test_read_plan.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ckpt::core {

// One array to read, as the plan sees it.
struct ArrayRead {
    uint64_t data_offset = 0;  // where its data starts in the file
    uint64_t nbytes = 0;
    bool stored = false;      // not deflated: its bytes can be read in ranges
    bool transposed = false;  // Fortran order of more than one dimension: read whole, then transposed
};

struct ReadLimits {
    uint64_t parallel_min_bytes = uint64_t{4} << 20;  // less than this in all stays on one thread
    unsigned max_threads = 4;                         // copying and CRCs scale up to about the memory bandwidth
    uint64_t part_bytes = uint64_t{32} << 20;         // stored arrays larger than this are read in parts of this size
    uint64_t batch_bytes = uint64_t{256} << 10;       // a batch of small arrays spans at most this many bytes ...
    uint64_t batch_gap_bytes = 4096;                  // ... with at most this much between one's data and the next's
};

struct ReadPlan {
    // A whole array (read_into), or a range of a large stored array's data, read straight into its place.
    struct Part {
        size_t read;  // index into the reads
        uint64_t from, size;
        bool whole;
        bool batchable;  // a whole stored array in C order, small enough to be read with its neighbours
    };
    struct Batch {
        size_t begin, end;  // positions in `order`
        uint64_t bytes;     // of array data
    };
    struct Share {
        size_t begin, end;  // batches
    };
    std::vector<Part> parts;       // by read, a split array's parts in order
    std::vector<size_t> order;     // parts in file order
    std::vector<uint64_t> offset;  // where each part's bytes start in the file
    std::vector<Batch> batches;    // consecutive runs of `order`, covering it
    std::vector<Share> shares;     // one per thread, consecutive runs of `batches`, covering them
    uint64_t total = 0;            // bytes of array data
};

// The plan for `reads` on up to `cores` threads; `concurrent`: the file can be read from several threads at once.
ReadPlan plan_reads(const std::vector<ArrayRead>& reads, bool concurrent, unsigned cores,
                    const ReadLimits& limits = {});

}  // namespace ckpt::core
