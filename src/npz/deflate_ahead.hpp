// SPDX-License-Identifier: Apache-2.0
// Deflate for zip members, compressed ahead of the writer on every core.
//
// zlib compresses at 20-80 MB/s per core, so a deflated save of a large state is bound by one core while the
// others idle. DeflateAhead cuts each member's bytes into blocks of kBlockBytes and compresses blocks on worker
// threads, in order and a bounded distance ahead of the writer (as pigz does): every block after a member's
// first is primed with the 32 KiB of input before it (deflateSetDictionary), so matches reach across blocks and
// the ratio stays within a fraction of a percent of one serial stream; blocks end with a sync flush (byte
// aligned, not final) and the member's last with Z_FINISH, so their concatenation is one valid raw deflate
// stream that any inflater reads. The output depends only on the input and the level, never on the number of
// threads or their timing: a save is deterministic.
#pragma once

#include "core/array.hpp"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ckpt::core {

class DeflateAhead {
public:
    // size bytes at data, or, when source is set, bytes [0, size) of that source (data unused). A source is read
    // front to back, each byte once, a block at a time: the blocks' inputs are read in job order, one at a time
    // (by whichever worker compresses the block), and the 32 KiB before a block come from a copy of the previous
    // block's end.
    struct Piece {
        const void* data;
        size_t size;
        const ByteSource* source = nullptr;
    };
    // One compressed block of a member: the deflate bytes, and the CRC-32 and length of the input they encode.
    struct Block {
        std::vector<unsigned char> out;
        uint32_t crc = 0;
        uint64_t in_bytes = 0;
        bool last = false;  // the member's final block
    };

    static constexpr size_t kBlockBytes = size_t{1} << 20;

    // Compresses `members` (each the concatenation of its pieces, which must stay valid and unchanged until the
    // last block is taken or this is destroyed) at zlib `level` (1..9, or Z_DEFAULT_COMPRESSION), on `threads`
    // worker threads; with 0, each block is compressed by take() in the caller's thread.
    DeflateAhead(std::vector<std::vector<Piece>> members, int level, unsigned threads);
    ~DeflateAhead();
    DeflateAhead(const DeflateAhead&) = delete;
    DeflateAhead& operator=(const DeflateAhead&) = delete;

    // The next block, in order: all of member 0's blocks, then member 1's, … Throws what compressing it threw
    // (std::bad_alloc when zlib runs out of memory).
    Block take();

    // Threads worth using for `bytes` of input on this machine: none below a few blocks.
    static unsigned threads_for(uint64_t bytes);

    // An upper bound of the compressed size of a member of `bytes` bytes.
    static uint64_t bound(uint64_t bytes);

private:
    struct Job {
        size_t member;
        uint64_t start;  // offset of the block in the member's bytes
        uint64_t size;
        bool last;
    };
    struct Slot {
        bool done = false;
        Block block;
        std::exception_ptr error;
    };
    class Compressor;

    void work();
    void stop();
    Block compress(size_t j, Compressor& z);
    // Job j's input when its member has a source: the block's bytes, read in job order, and the dictionary.
    void read_in_turn(size_t j, std::vector<unsigned char>& dictionary, std::vector<unsigned char>& block);

    std::vector<std::vector<Piece>> members_;
    int level_;
    std::vector<Job> jobs_;
    size_t window_;  // blocks compressed but not yet taken, at most

    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<Slot> slots_;                   // by job; emptied when taken
    size_t next_job_ = 0;                       // the next job a worker starts
    size_t next_take_ = 0;                      // the next job take() returns
    bool stopping_ = false;
    bool sources_ = false;                      // some member has a source: jobs read their input in turn
    size_t turn_ = 0;                           // the job whose input is read next
    bool source_failed_ = false;                // a source threw: later blocks read nothing
    std::vector<unsigned char> tail_;           // the last kDictionaryBytes of input read in turn
    std::unique_ptr<Compressor> inline_;        // threads == 0
    std::vector<std::thread> workers_;
};

}  // namespace ckpt::core
