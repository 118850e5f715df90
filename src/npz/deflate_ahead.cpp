// SPDX-License-Identifier: Apache-2.0
#include "npz/deflate_ahead.hpp"

#include "npz/crc32.hpp"
#include "core/cores.hpp"
#include "core/error.hpp"
#include "npz/zlib_memory.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <new>
#include <system_error>

namespace ckpt::core {

namespace {

constexpr size_t kDictionaryBytes = 32768;  // deflate's window
constexpr unsigned kMaxThreads = 8;

}  // namespace

// One zlib deflate state, reset for each block rather than created for it: creating one clears some 256 KiB.
class DeflateAhead::Compressor {
public:
    explicit Compressor(int level) {
        zs.zalloc = zlib_alloc;
        zs.zfree = zlib_free;
        const int rc = deflateInit2(&zs, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        if (rc == Z_MEM_ERROR) throw std::bad_alloc();
        if (rc != Z_OK) fail(Code::error, "zlib deflateInit2 failed ({})", rc);
    }
    ~Compressor() { deflateEnd(&zs); }
    Compressor(const Compressor&) = delete;
    Compressor& operator=(const Compressor&) = delete;
    z_stream zs{};
};

uint64_t DeflateAhead::bound(uint64_t bytes) {
    // zlib's deflateBound for these parameters per block, plus a sync flush marker per block.
    const uint64_t blocks = bytes / kBlockBytes + 1;
    return bytes + (bytes >> 12) + (bytes >> 14) + (bytes >> 25) + 32 * blocks;
}

unsigned DeflateAhead::threads_for(uint64_t bytes) {
    if (bytes < 2 * kBlockBytes) return 0;
    const unsigned cores = ckpt::core::cores();
    if (cores == 1) return 0;
    return static_cast<unsigned>(std::min<uint64_t>({cores, kMaxThreads, bytes / kBlockBytes}));
}

DeflateAhead::DeflateAhead(std::vector<std::vector<Piece>> members, int level, unsigned threads)
    : members_(std::move(members)), level_(level), window_(4 * size_t{std::max(threads, 1u)} + 2) {
    for (size_t m = 0; m < members_.size(); ++m) {
        uint64_t size = 0;
        for (const Piece& p : members_[m]) {
            size += p.size;
            if (p.source != nullptr) sources_ = true;
        }
        uint64_t start = 0;
        do {
            const uint64_t n = std::min<uint64_t>(size - start, kBlockBytes);
            jobs_.push_back({m, start, n, start + n == size});
            start += n;
        } while (start < size);
    }
    slots_.resize(jobs_.size());
    if (threads == 0) {
        inline_ = std::make_unique<Compressor>(level_);
        return;
    }
    try {
        for (unsigned t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
        // No more threads to be had: those that started share the blocks; with none, take() compresses them.
        if (workers_.empty()) inline_ = std::make_unique<Compressor>(level_);
    } catch (...) {
        stop();  // out of memory: the workers that did start must end before this object does
        throw;
    }
}

DeflateAhead::~DeflateAhead() { stop(); }

void DeflateAhead::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    for (auto& w : workers_)
        if (w.joinable()) w.join();
    workers_.clear();
}

void DeflateAhead::work() {
    std::unique_ptr<Compressor> z;
    std::exception_ptr no_compressor;
    try {
        z = std::make_unique<Compressor>(level_);
    } catch (...) {
        no_compressor = std::current_exception();  // reported by the first block this worker takes
    }
    for (;;) {
        size_t j;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            changed_.wait(lock, [&] {
                return stopping_ || next_job_ == jobs_.size() || next_job_ < next_take_ + window_;
            });
            if (stopping_ || next_job_ == jobs_.size()) return;
            j = next_job_++;
        }
        Slot done;
        try {
            if (!z) std::rethrow_exception(no_compressor);
            done.block = compress(j, *z);
        } catch (...) {
            done.error = std::current_exception();
        }
        done.done = true;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            slots_[j] = std::move(done);
        }
        changed_.notify_all();
    }
}

DeflateAhead::Block DeflateAhead::take() {
    if (next_take_ >= jobs_.size()) throw std::logic_error("DeflateAhead::take: no blocks left");
    if (inline_) return compress(next_take_++, *inline_);
    Slot slot;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return slots_[next_take_].done; });
        slot = std::move(slots_[next_take_]);
        slots_[next_take_] = Slot();
        ++next_take_;
    }
    changed_.notify_all();  // a worker may start another block
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.block);
}

void DeflateAhead::read_in_turn(size_t j, std::vector<unsigned char>& dictionary, std::vector<unsigned char>& block) {
    const Job& job = jobs_[j];
    {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || turn_ == j; });
        if (stopping_) throw std::runtime_error("DeflateAhead: stopped");
    }
    // Whatever happens, the next job gets its turn.
    struct Pass {
        DeflateAhead& d;
        size_t next;
        ~Pass() {
            {
                std::lock_guard<std::mutex> lock(d.mutex_);
                d.turn_ = next;
            }
            d.changed_.notify_all();
        }
    } pass{*this, j + 1};
    if (source_failed_) throw std::runtime_error("DeflateAhead: an earlier block's source failed");
    if (job.start == 0) tail_.clear();
    dictionary = tail_;
    block.resize(static_cast<size_t>(job.size));
    uint64_t at = 0, from = job.start, n = job.size;
    size_t filled = 0;
    for (const Piece& p : members_[job.member]) {
        if (n == 0) break;
        if (from < at + p.size) {
            const uint64_t skip = from - at;
            const size_t k = static_cast<size_t>(std::min<uint64_t>(p.size - skip, n));
            try {
                if (p.source != nullptr)
                    (*p.source)(skip, block.data() + filled, k);
                else
                    std::memcpy(block.data() + filled, static_cast<const unsigned char*>(p.data) + skip, k);
            } catch (...) {
                source_failed_ = true;
                throw;
            }
            filled += k;
            from += k;
            n -= k;
        }
        at += p.size;
    }
    tail_.insert(tail_.end(), block.begin(), block.end());
    if (tail_.size() > kDictionaryBytes) tail_.erase(tail_.begin(), tail_.end() - kDictionaryBytes);
}

DeflateAhead::Block DeflateAhead::compress(size_t j, Compressor& z) {
    const Job& job = jobs_[j];
    std::vector<unsigned char> in_dictionary, in_block;  // the input read from a source, when there is one
    if (sources_) read_in_turn(j, in_dictionary, in_block);
    const std::vector<Piece> from_memory{{in_dictionary.data(), in_dictionary.size()}, {in_block.data(), in_block.size()}};
    // With sources, the member's bytes [job.start - dictionary, job.start + size) as read in turn.
    const uint64_t base = job.start - in_dictionary.size();
    const std::vector<Piece>& pieces = sources_ ? from_memory : members_[job.member];
    // Calls f(pointer, length) for each contiguous run of the member's bytes [from, from + n).
    const auto for_range = [&](uint64_t from, uint64_t n, auto&& f) {
        if (sources_) from -= base;
        uint64_t at = 0;
        for (const Piece& p : pieces) {
            if (n == 0) break;
            if (from < at + p.size) {
                const uint64_t skip = from - at;
                const uint64_t k = std::min<uint64_t>(p.size - skip, n);
                f(static_cast<const unsigned char*>(p.data) + skip, static_cast<size_t>(k));
                from += k;
                n -= k;
            }
            at += p.size;
        }
    };

    z_stream& zs = z.zs;
    if (deflateReset(&zs) != Z_OK) fail(Code::error, "zlib deflateReset failed");
    if (job.start > 0) {
        std::vector<unsigned char> dictionary;
        const uint64_t n = std::min<uint64_t>(job.start, kDictionaryBytes);
        dictionary.reserve(static_cast<size_t>(n));
        for_range(job.start - n, n, [&](const unsigned char* p, size_t k) { dictionary.insert(dictionary.end(), p, p + k); });
        if (deflateSetDictionary(&zs, dictionary.data(), static_cast<uInt>(dictionary.size())) != Z_OK)
            fail(Code::error, "zlib deflateSetDictionary failed");
    }

    Block b;
    b.in_bytes = job.size;
    b.last = job.last;
    b.out.resize(static_cast<size_t>(bound(job.size)));
    size_t produced = 0;
    const auto run = [&](int flush) {
        for (;;) {
            if (produced == b.out.size()) b.out.resize(b.out.size() * 2);
            zs.next_out = b.out.data() + produced;
            zs.avail_out = static_cast<uInt>(std::min<size_t>(b.out.size() - produced, UINT_MAX));
            const uInt room = zs.avail_out;
            const int rc = deflate(&zs, flush);
            produced += room - zs.avail_out;
            if (rc == Z_STREAM_ERROR) fail(Code::error, "zlib deflate failed");
            if (rc == Z_MEM_ERROR) throw std::bad_alloc();
            // Done when zlib took all input and, flushing, had output room left over (or ended the stream).
            if (flush == Z_FINISH ? rc == Z_STREAM_END : (zs.avail_in == 0 && zs.avail_out != 0)) return;
        }
    };
    for_range(job.start, job.size, [&](const unsigned char* p, size_t k) {
        b.crc = crc32(b.crc, p, k);
        zs.next_in = const_cast<unsigned char*>(p);
        zs.avail_in = static_cast<uInt>(k);  // a block is at most kBlockBytes
        run(Z_NO_FLUSH);
    });
    zs.next_in = nullptr;
    zs.avail_in = 0;
    run(job.last ? Z_FINISH : Z_SYNC_FLUSH);
    b.out.resize(produced);
    return b;
}

}  // namespace ckpt::core
