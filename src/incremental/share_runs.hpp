// SPDX-License-Identifier: Apache-2.0
// The clone-or-write step of every incremental save, .npz and safetensors alike: the chunks of a file being written
// arrive in order, each found equal to the same bytes of an earlier file (shared: cloned from it, a reflink or a
// server-side copy) or not (written), and go out as runs — chunks of one kind that follow each other in memory, and
// in the earlier file when shared, leave as one clone or one write. Which chunks are equal is the format's to say
// (an .npz member's chunk table, a safetensors file's region); this only gathers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ckpt::core {

class ShareRuns {
public:
    // share(data, from, n): the n bytes at data are the earlier file's bytes [from, from + n); write(data, n).
    using Share = std::function<void(const char* data, uint64_t from, uint64_t n)>;
    using Write = std::function<void(const char* data, size_t n)>;

    // A run to write goes out once it holds max_write bytes (in steps of max_write at most).
    ShareRuns(Share share, Write write, size_t max_write)
        : share_(std::move(share)), write_(std::move(write)), max_write_(max_write) {}

    // The next chunk equals the earlier file's bytes at `from`.
    void shared(const char* data, size_t n, uint64_t from) {
        flush_write();
        if (cloning_n_ > 0 && (cloning_ + cloning_n_ != data || cloning_from_ + cloning_n_ != from)) flush_clone();
        if (cloning_n_ == 0) {
            cloning_ = data;
            cloning_from_ = from;
        }
        cloning_n_ += n;
    }
    // The next chunk is written.
    void written(const char* data, size_t n) {
        flush_clone();
        if (writing_n_ > 0 && writing_ + writing_n_ != data) flush_write();
        if (writing_n_ == 0) writing_ = data;
        writing_n_ += n;
        if (writing_n_ >= max_write_) flush_write();
    }
    // Sends both runs out: before the bytes they point into change or go.
    void flush() {
        flush_clone();
        flush_write();
    }

private:
    void flush_clone() {
        if (cloning_n_ == 0) return;
        share_(cloning_, cloning_from_, cloning_n_);
        cloning_n_ = 0;
    }
    void flush_write() {
        if (writing_n_ == 0) return;
        write_(writing_, writing_n_);
        writing_n_ = 0;
    }

    Share share_;
    Write write_;
    size_t max_write_;
    const char* cloning_ = nullptr;  // the run to share: its bytes, where it starts in the earlier file, its length
    uint64_t cloning_from_ = 0;
    uint64_t cloning_n_ = 0;
    const char* writing_ = nullptr;  // the run to write
    size_t writing_n_ = 0;
};

}  // namespace ckpt::core
