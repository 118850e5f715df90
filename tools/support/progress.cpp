// SPDX-License-Identifier: Apache-2.0
#include "progress.hpp"

#include "text.hpp"

#include <fmt/format.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstdio>

namespace ckpt_tool {
namespace {

constexpr std::chrono::milliseconds kRedraw{100};

size_t terminal_columns() {
    winsize ws{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

void write_stderr(const std::string& s) {
    // One write per frame, so a frame is never torn by other output; a failed write only loses the frame.
    size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::write(STDERR_FILENO, s.data() + done, s.size() - done);
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}

}  // namespace

Progress::Progress() : begun_(std::chrono::steady_clock::now()) {
    enabled_ = ::isatty(STDERR_FILENO) == 1;
    if (const char* after = std::getenv("CKPT_PROGRESS_AFTER_MS"); after != nullptr && *after != '\0') {
        char* end = nullptr;
        const long ms = std::strtol(after, &end, 10);
        if (*end == '\0' && ms >= 0) delay_ = std::chrono::milliseconds(ms);
    }
}

Progress::~Progress() { clear(); }

void Progress::start(std::string label, uint64_t total) {
    label_ = std::move(label);
    total_ = total;
    base_ = 0;
}

void Progress::attach(ckpt_options& opts) {
    opts.progress = &Progress::report;
    opts.progress_payload = this;
}

void Progress::report(uint64_t done, uint64_t total, void* self) { static_cast<Progress*>(self)->update(done, total); }

void Progress::update(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - begun_ < delay_) return;
    const uint64_t whole = total_ != 0 ? total_ : total;
    const uint64_t at = total_ != 0 ? base_ + done : done;
    // Redraw at most ten times a second, but always show the end of a stretch.
    if (drawn_ && now - last_draw_ < kRedraw && at < whole) return;
    last_draw_ = now;
    draw(at, whole);
}

void Progress::draw(uint64_t done, uint64_t total) {
    if (done > total) done = total;
    const double fraction = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    const std::string counts =
        fmt::format(" {:3.0f}% {} / {}", fraction * 100, human_size(done, false), human_size(total, false));
    const size_t columns = terminal_columns() - 1;  // never the last column: some terminals wrap there
    std::string label = label_;
    const size_t bar_min = 10;
    if (label.size() + counts.size() + bar_min + 3 > columns) {
        const size_t keep = columns > counts.size() + bar_min + 6 ? columns - counts.size() - bar_min - 6 : 0;
        label = keep > 0 && label.size() > keep ? "..." + label.substr(label.size() - keep) : label.substr(0, keep);
    }
    const size_t bar = columns > label.size() + counts.size() + 3 ? columns - label.size() - counts.size() - 3 : 0;
    const size_t filled = static_cast<size_t>(fraction * static_cast<double>(bar));
    std::string frame =
        "\r" + label + " [" + std::string(filled, '#') + std::string(bar - filled, '.') + "]" + counts + "\x1b[K";
    write_stderr(frame);
    drawn_ = true;
}

void Progress::clear() {
    if (!drawn_) return;
    write_stderr("\r\x1b[K");
    drawn_ = false;
}

}  // namespace ckpt_tool
