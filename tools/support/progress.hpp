// SPDX-License-Identifier: Apache-2.0
// A progress bar on stderr for work that lasts: drawn only when stderr is a terminal, and only once the command
// has run for a second (CKPT_PROGRESS_AFTER_MS sets another delay, 0 for at once), so quick commands and
// pipelines never see it.
#pragma once

#include <ckpt/ckpt.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ckpt_tool {

class Progress {
public:
    Progress();
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    // A new stretch of work: `label` (a file name) and its total bytes; 0 takes the library's totals.
    void start(std::string label, uint64_t total);
    // The bytes of earlier reads within this stretch, added to what the library reports for the current one.
    void add_base(uint64_t bytes) { base_ += bytes; }
    // Bytes the program read itself (in pieces, which the library does not report): counted and shown.
    void advance(uint64_t bytes) {
        base_ += bytes;
        update(0, total_);
    }
    // Sends the library's progress reports for reads and saves with `opts` here.
    void attach(ckpt_options& opts);
    // Reports `done` of the stretch's total (work the program does itself, such as writing values out).
    void reach(uint64_t done) { update(done, total_); }
    // Removes the bar from the terminal (before writing to stdout); the next report draws it again.
    void clear();

private:
    static void report(uint64_t done, uint64_t total, void* self);
    void update(uint64_t done, uint64_t total);
    void draw(uint64_t done, uint64_t total);

    bool enabled_ = false;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point begun_, last_draw_;
    std::chrono::milliseconds delay_{1000};
    std::string label_;
    uint64_t total_ = 0;
    uint64_t base_ = 0;
};

}  // namespace ckpt_tool
