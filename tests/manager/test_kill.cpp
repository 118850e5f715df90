// SPDX-License-Identifier: Apache-2.0
// The kill -9 loop (RocksDB's blackbox crash test; /work/shared/RELIABILITY_FACTS.md section 5), through the C API.
//
// A child process opens a checkpoint manager (keep = 3) and saves k = 1, 2, … with contents gen(seed, k); after
// each save is durable (ckpt_manager_save returned OK, and with CKPT_MANAGER_ASYNC ckpt_manager_wait too) it writes
// "k\n" to a pipe. The parent lets it run for a random number of reports (sometimes none), waits a random delay of
// 0 to 2x the time one save takes, kills it with SIGKILL and reads the reports that were still in the pipe. Then, in
// the parent, a fresh manager opens the directory and
//  - restoring CKPT_LATEST gives the last acknowledged save s or the one after the last report (done but not yet
//    reported), whose content is gen(seed, s) bit for bit; with no acknowledgement, CKPT_ENOTFOUND or that one;
//  - the newest checkpoint on disk is the one restored (kill -9 keeps the page cache, so no file may be corrupt and
//    no fallback may be needed), and every checkpoint on disk holds gen(seed, its index);
//  - the newest `keep` acknowledged checkpoints are all still there (less the oldest of them once the save under
//    way has landed and retention may have removed it);
//  - at most keep + 1 checkpoints exist (retention interrupted after the new file landed leaves one extra);
//  - no temporary is left once the new manager has saved (its first save removes them; opening and restoring
//    change nothing): the only dot file is then ".ckpt.lock".
//
// On a full disk (the hidden test case tagged [enospc]) the log directories go to a small filesystem, and before
// each save the child resizes a filler file beside the checkpoint directory so that the free space is anywhere
// from nothing to two checkpoints: about half the saves run out of space, each at a random offset. A save must
// then fail with CKPT_EIO naming the checkpoint's path and "No space left on device" (or, refused before writing,
// "not enough space for checkpoint k"); the child reports "failed k"
// and goes on with k + 1, as training would. The parent also checks that no failed save is ever on disk or
// restored, and finally frees the space and saves once more, which must succeed. Kills land in failing saves too.
//
// Every trial has its own seed (printed with any failure); the seed fixes the contents, the number of reports
// waited for, the delay, the mode (odd seeds run the manager with CKPT_MANAGER_ASYNC), the policies (every save
// records a "loss"; seeds with bit 1 set also keep the best checkpoint by it, which must survive too, and
// ckpt_manager_best must name it) and the free space.
//
//     CKPT_KILL_TRIALS=300 build/tests/test_kill    a longer campaign (default 50 trials)
//     CKPT_KILL_SEED=1234 CKPT_KILL_TRIALS=1 …      one trial again (timing aside)
//     CKPT_KILL_DIR=/dev/shm …                      where the log directories go (default $TMPDIR or /tmp)
//     build/tests/test_kill '[enospc]'              the full-disk campaign (default 20 trials) on an 8 MiB tmpfs
//                                                   it mounts in a private mount namespace (skipped where not
//                                                   permitted), or on CKPT_KILL_DIR, which must then be a
//                                                   filesystem of 6 to 64 MiB (scripts/crash-campaign mounts one)
//
// Each campaign ends with a line "test_kill: totals filesystem=… trials=… acked=… failed=… unrestorable=… wrong=…
// leftover_temporaries=… other_failures=… seconds=…" for scripts to read.
//
// The child uses nothing but the C API and system calls (no Catch2: its assertions belong to the parent), and ends
// only by SIGKILL, or _exit when a call fails unexpectedly (the message then comes through the pipe).
#include "ckpt/ckpt.h"
#include "support/private_image.hpp"
#include "support/private_tmpfs.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int32_t kKeep = 3;
constexpr int kDefaultTrials = 50;
constexpr int kDefaultFullDiskTrials = 20;
constexpr uint64_t kDefaultSeed = 20240601;
constexpr int64_t kRows = 512, kCols = 512;  // "w": 1 MiB of float32
constexpr uint64_t kCheckpointBytes = kRows * kCols * 4 + 4096;  // "w" plus the small arrays and zip overhead
constexpr int kMaxReportsWaited = 6;         // the parent waits for 0..6 reports
constexpr int64_t kChildMaxSaves = 100000;   // a child the parent lost stops by itself
constexpr int kAckTimeoutMs = 60000;         // no report for this long: the child hangs
constexpr const char* kFullDiskReason = "No space left on device";
constexpr const char* kNoRoomReason = "not enough space for checkpoint";  // refused before writing
// The full-disk campaign's filesystem: room for keep + 1 checkpoints and some to spare, yet small enough for a
// filler file to use up cheaply.
constexpr const char* kTmpfsSize = "8m";
constexpr uint64_t kMinFullDiskFs = (kKeep + 3) * kCheckpointBytes, kMaxFullDiskFs = uint64_t{64} << 20;

uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Seeds whose second bit is set run the manager with policies on too: keep_best = 1 by "loss", which every save
// records (loss_of), so retention also keeps the best checkpoint, and the parent checks that it does.
bool with_policies(uint64_t seed) { return (seed & 2u) != 0; }
double loss_of(uint64_t seed, int64_t k) {
    uint64_t x = seed * 1000003u + static_cast<uint64_t>(k);
    return static_cast<double>(splitmix64(x) % 64);  // ties happen: the higher index wins them
}
constexpr const char* kMetric = "loss";
ckpt_manager_options trial_options(uint64_t seed) {
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.keep = kKeep;
    if (with_policies(seed)) {
        opts.keep_best = 1;
        opts.best_metric = kMetric;
    }
    return opts;
}
int save_step(ckpt_manager* manager, const ckpt_vars* vars, uint64_t seed, int64_t k) {
    const double loss = loss_of(seed, k);
    return ckpt_manager_save_metrics(manager, vars, k, &kMetric, &loss, 1);
}

// The arrays of one checkpoint, and a collection that borrows them.
struct Content {
    std::vector<float> w = std::vector<float>(static_cast<size_t>(kRows * kCols));
    int64_t step = 0;
    double m[3][5] = {};
    uint8_t tag[37] = {};
    uint64_t seed = 0;
    ckpt_vars* vars = nullptr;

    Content() = default;
    Content(const Content&) = delete;
    Content& operator=(const Content&) = delete;
    ~Content() { ckpt_vars_free(vars); }

    // Builds `vars` over the arrays above (once; refills change the bytes in place). Returns a CKPT_* code.
    int make_vars() {
        static const int64_t w_shape[2] = {kRows, kCols};
        static const int64_t m_shape[2] = {3, 5};
        static const int64_t tag_shape[1] = {37};
        int rc = ckpt_vars_new(&vars);
        if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "w", CKPT_FLOAT32, 2, w_shape, w.data(), CKPT_BORROW);
        if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW);
        if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "m", CKPT_FLOAT64, 2, m_shape, m, CKPT_BORROW);
        if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "tag", CKPT_UINT8, 1, tag_shape, tag, CKPT_BORROW);
        if (rc == CKPT_OK) rc = ckpt_vars_add(vars, "seed", CKPT_UINT64, 0, nullptr, &seed, CKPT_BORROW);
        return rc;
    }

    // gen(seed, k): every byte depends on both — but for the first half of "w", the same for every k of a seed (a
    // frozen part, which incremental saves share with the checkpoint before), so a checkpoint holding another
    // step's data shows.
    void fill(uint64_t s, int64_t k) {
        uint64_t frozen = s * 0xD1B54A32D192ED03ull;
        for (size_t i = 0; i < w.size() / 2; ++i)
            w[i] = static_cast<float>(static_cast<int64_t>(splitmix64(frozen) >> 40) - (1 << 23)) / 4096.0f;
        uint64_t x = s * 0xD1B54A32D192ED03ull ^ static_cast<uint64_t>(k) * 0x8CB92BA72F3D8DD7ull;
        for (size_t i = w.size() / 2; i < w.size(); ++i)
            w[i] = static_cast<float>(static_cast<int64_t>(splitmix64(x) >> 40) - (1 << 23)) / 4096.0f;
        step = k;
        for (auto& row : m)
            for (double& d : row) d = static_cast<double>(static_cast<int64_t>(splitmix64(x) >> 11)) * 0x1p-40;
        for (uint8_t& b : tag) b = static_cast<uint8_t>(splitmix64(x));
        seed = s;
    }
};

std::string filler_path(const std::string& logdir) { return logdir + "/filler"; }

// ------------------------------------------------------------------------------------------------- the child

void write_all(int fd, const char* data, size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) ::_exit(4);  // the parent is gone
        data += n;
        size -= static_cast<size_t>(n);
    }
}

[[noreturn]] void child_fail_text(int fd, const char* what, const char* text) {
    char line[1024];
    const int n = std::snprintf(line, sizeof line, "error %s: %s\n", what, text);
    write_all(fd, line, n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof line - 1));
    ::_exit(3);
}

[[noreturn]] void child_fail(int fd, const char* what, int rc) {
    const std::string text = std::string(ckpt_strerror(rc)) + ": " + ckpt_error_message();
    child_fail_text(fd, what, text.c_str());
}

// Disk pressure for the full-disk mode: before each save, the filler file grows or shrinks so that the free space
// is uniform in [0, 2 checkpoints). Below one checkpoint the save runs out of space at that offset into its
// temporary. Nothing else writes while it resizes (with CKPT_MANAGER_ASYNC the child waits for each save).
class Filler {
public:
    Filler(const std::string& logdir, uint64_t seed, int report_fd)
        : rng_(seed ^ 0x5EEDF111E5ull), report_fd_(report_fd) {
        fd_ = ::open(filler_path(logdir).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd_ < 0) fail("open");
    }

    void squeeze() {
        struct statvfs fs;
        if (::fstatvfs(fd_, &fs) != 0) fail("fstatvfs");
        const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
        const uint64_t target = std::uniform_int_distribution<uint64_t>(0, 2 * kCheckpointBytes - 1)(rng_);
        const uint64_t size = size_ + free_bytes > target ? size_ + free_bytes - target : 0;
        if (size < size_) {
            if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("ftruncate");
        } else if (size > size_) {
            // Allocates (a sparse ftruncate would not use up space). Pages round the free space down a little.
            const int rc = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
            if (rc != 0 && rc != ENOSPC) fail("posix_fallocate", rc);
        }
        struct stat st;
        if (::fstat(fd_, &st) != 0) fail("fstat");
        size_ = static_cast<uint64_t>(st.st_size);
    }

private:
    [[noreturn]] void fail(const char* what, int err = errno) {
        const std::string text = std::string("filler: ") + what;
        child_fail_text(report_fd_, text.c_str(), std::strerror(err));
    }

    std::mt19937_64 rng_;
    int report_fd_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

// True for what a save must report on a full disk: CKPT_EIO, naming the checkpoint's path and ENOSPC or the
// manager's refusal.
bool is_clean_full_disk_error(ckpt_manager* manager, int64_t k, int rc) {
    if (rc != CKPT_EIO) return false;
    const std::string message = ckpt_error_message();  // copied: the calls below may replace it
    char path[4096];
    return ckpt_manager_path(manager, k, path, sizeof path) == CKPT_OK && message.find(path) != std::string::npos &&
           (message.find(kFullDiskReason) != std::string::npos || message.find(kNoRoomReason) != std::string::npos);
}

[[noreturn]] void run_child(const std::string& logdir, uint64_t seed, bool async, bool full_disk, int fd) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) ::_exit(5);
    Content content;
    int rc = content.make_vars();
    if (rc != CKPT_OK) child_fail(fd, "ckpt_vars_add", rc);
    ckpt_manager_options opts = trial_options(seed);
    opts.flags = async ? CKPT_MANAGER_ASYNC : 0u;
    ckpt_manager* manager = nullptr;
    rc = ckpt_manager_open(&manager, logdir.c_str(), &opts);
    if (rc != CKPT_OK) child_fail(fd, "ckpt_manager_open", rc);
    std::unique_ptr<Filler> filler;
    if (full_disk) filler = std::make_unique<Filler>(logdir, seed, fd);
    for (int64_t k = 1; k <= kChildMaxSaves; ++k) {
        if (filler) filler->squeeze();
        content.fill(seed, k);
        const char* what = "ckpt_manager_save";
        rc = save_step(manager, content.vars, seed, k);
        if (rc == CKPT_OK && async) {
            what = "ckpt_manager_wait";
            rc = ckpt_manager_wait(manager);  // only then is the save durable
        }
        char report[64];
        int n = 0;
        if (rc == CKPT_OK) {
            n = std::snprintf(report, sizeof report, "%" PRId64 "\n", k);
        } else if (full_disk && is_clean_full_disk_error(manager, k, rc)) {
            n = std::snprintf(report, sizeof report, "failed %" PRId64 "\n", k);  // training goes on
        } else {
            child_fail(fd, what, rc);
        }
        write_all(fd, report, static_cast<size_t>(n));  // < PIPE_BUF: one atomic write
    }
    ::_exit(6);
}

// ------------------------------------------------------------------------------------------------ the parent

struct Stats {
    int trials = 0;
    int async_trials = 0;
    int64_t acked_saves = 0;       // acknowledgements received, over all trials
    int64_t failed_saves = 0;      // saves that failed cleanly on a full disk
    int64_t acked_after_failure = 0;  // acknowledgements that came after a failed save in the same trial
    int zero_ack_trials = 0;       // killed before the first acknowledgement
    int not_found = 0;             // of those, nothing to restore
    int restored_unacked = 0;      // restored the save after the last report: done but not yet reported
    int kills_after_failure = 0;   // the last report before the kill was a failure: killed on a full disk
    int temporaries_at_kill = 0;   // kills that left a temporary behind (before the new manager opened)
    int keep_plus_one = 0;         // kills that left keep + 1 checkpoints (retention interrupted)
    // Failures:
    int child_errors = 0;          // the child reported a failed call, or did not die of SIGKILL
    int unrestorable = 0;          // restore(LATEST) failed with something other than an allowed ENOTFOUND
    int out_of_range = 0;          // restored neither the last acknowledged save nor the one under way
    int wrong_contents = 0;        // a checkpoint on disk (restored or not) differs from gen(seed, idx)
    int fallbacks = 0;             // the newest checkpoint on disk was not the one restored
    int too_many_files = 0;        // more than keep + 1 checkpoints, or a file the manager did not make
    int failed_on_disk = 0;        // a checkpoint whose save failed, or one never started, is on disk
    int lost_acked = 0;            // one of the newest `keep` acknowledged checkpoints is missing
    int leftover_temporaries = 0;  // a dot file other than .ckpt.lock after the new manager's first save
    int resume_failures = 0;       // full disk: once space was freed, a new save or its restore failed

    int other_failures() const {
        return child_errors + out_of_range + fallbacks + too_many_files + failed_on_disk + lost_acked +
               resume_failures;
    }
};

// What the child reported: "k" for a durable save, "failed k" for a clean full-disk failure, k = 1, 2, …
struct Reports {
    int64_t last = 0;        // the last k reported either way
    int64_t last_acked = 0;  // the last k acknowledged
    std::vector<int64_t> acked, failed;
    int64_t acked_after_failure = 0;
};

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return names;  // not made yet: the child died before its manager opened
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

void remove_tree(const std::string& logdir) {
    const std::string dir = logdir + "/ckpt";
    for (const std::string& name : list_dir(dir)) ::unlink((dir + "/" + name).c_str());
    ::rmdir(dir.c_str());
    ::unlink(filler_path(logdir).c_str());
    ::rmdir(logdir.c_str());
}

// "" if `actual` holds exactly the arrays of `expected`, bit for bit; else the first difference.
std::string compare(const ckpt_vars* expected, const ckpt_vars* actual) {
    if (ckpt_vars_count(actual) != ckpt_vars_count(expected))
        return "holds " + std::to_string(ckpt_vars_count(actual)) + " arrays, not " +
               std::to_string(ckpt_vars_count(expected));
    for (size_t i = 0; i < ckpt_vars_count(expected); ++i) {
        const std::string name = ckpt_vars_name(expected, i);
        if (name != ckpt_vars_name(actual, i)) return "array " + std::to_string(i) + " is '" +
                                                      ckpt_vars_name(actual, i) + "', not '" + name + "'";
        const uint32_t ndim = ckpt_vars_ndim(expected, i);
        if (ckpt_vars_dtype(actual, i) != ckpt_vars_dtype(expected, i) || ckpt_vars_ndim(actual, i) != ndim ||
            !std::equal(ckpt_vars_shape(expected, i), ckpt_vars_shape(expected, i) + ndim, ckpt_vars_shape(actual, i)))
            return "'" + name + "' has another dtype or shape";
        const size_t nbytes = ckpt_vars_nbytes(expected, i);
        if (ckpt_vars_nbytes(actual, i) != nbytes ||
            std::memcmp(ckpt_vars_data(actual, i), ckpt_vars_data(expected, i), nbytes) != 0)
            return "the bytes of '" + name + "' differ";
    }
    return "";
}

struct LogLines {
    static void log(int level, const char* message, void* payload) {
        static_cast<LogLines*>(payload)->lines.push_back((level == CKPT_LOG_WARNING ? "warning: " : "info: ") +
                                                         std::string(message));
    }
    std::string text() const {
        std::string all;
        for (const std::string& line : lines) all += line + "\n";
        return all;
    }
    std::vector<std::string> lines;
};

// The filesystem holding `dir`, by name where known: the campaign's figures are per filesystem.
std::string filesystem_name(const std::string& dir) {
    struct statfs fs;
    if (::statfs(dir.c_str(), &fs) != 0) return "unknown";
    switch (static_cast<unsigned long>(fs.f_type)) {
        case 0xEF53ul: return "ext4";  // also ext2/ext3
        case 0x01021994ul: return "tmpfs";
        case 0x58465342ul: return "xfs";
        case 0x9123683Eul: return "btrfs";
        case 0x2FC12FC1ul: return "zfs";
        case 0x794C7630ul: return "overlayfs";
        case 0x6969ul: return "nfs";
        default: {
            char hex[32];
            std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(fs.f_type));
            return hex;
        }
    }
}

// The mean time of one save of gen(seed, k) (sync manager, keep = 3) in a directory like the trials'.
double calibrate_save_us(const std::string& base) {
    std::string logdir = base + "/ckpt-kill-calibrate-XXXXXX";
    REQUIRE(::mkdtemp(&logdir[0]) != nullptr);
    Content content;
    REQUIRE(content.make_vars() == CKPT_OK);
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.keep = kKeep;
    ckpt_manager* manager = nullptr;
    REQUIRE(ckpt_manager_open(&manager, logdir.c_str(), &opts) == CKPT_OK);
    constexpr int kSaves = 8;
    const auto start = std::chrono::steady_clock::now();
    for (int k = 1; k <= kSaves; ++k) {
        content.fill(kDefaultSeed, k);
        const int rc = ckpt_manager_save(manager, content.vars, k);
        INFO("calibration save " << k << " in " << logdir << ": " << ckpt_strerror(rc) << ": "
                                 << (rc == CKPT_OK ? "" : ckpt_error_message()));
        REQUIRE(rc == CKPT_OK);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    REQUIRE(ckpt_manager_close(manager) == CKPT_OK);
    remove_tree(logdir);
    return std::chrono::duration<double, std::micro>(elapsed).count() / kSaves;
}

// Reads the child's report lines from fd into `reports` (checking they count 1, 2, …) and error lines into
// `errors`, until `want` reports arrived, or (want < 0) the end of the pipe. False on a timeout or a premature end.
bool read_reports(int fd, std::string& pending, Reports& reports, int want, std::string& errors) {
    while (want < 0 || reports.last < want) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, kAckTimeoutMs);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            errors += "no report for " + std::to_string(kAckTimeoutMs) + " ms; ";
            return false;
        }
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return want < 0;  // the end of the pipe: the child is gone
        pending.append(buf, static_cast<size_t>(n));
        size_t eol;
        while ((eol = pending.find('\n')) != std::string::npos) {
            const std::string line = pending.substr(0, eol);
            pending.erase(0, eol + 1);
            const bool failed = line.rfind("failed ", 0) == 0;
            const std::string number = failed ? line.substr(7) : line;
            char* end = nullptr;
            const long long k = std::strtoll(number.c_str(), &end, 10);
            if (number.empty() || end == nullptr || *end != '\0' || k != reports.last + 1) {
                errors += "child: '" + line + "'; ";
                continue;
            }
            reports.last = k;
            if (failed) {
                reports.failed.push_back(k);
            } else {
                reports.acked.push_back(k);
                reports.last_acked = k;
                if (!reports.failed.empty()) ++reports.acked_after_failure;
            }
        }
    }
    return true;
}

// Full disk, after the checks: the operator frees space, and training resumes with the next index. The save must
// succeed and be what restore(LATEST) returns.
void resume_after_freeing_space(ckpt_manager* manager, const std::string& logdir, uint64_t seed, int64_t next,
                                Stats& stats) {
    ::unlink(filler_path(logdir).c_str());
    Content content;
    REQUIRE(content.make_vars() == CKPT_OK);
    content.fill(seed, next);
    const int rc = save_step(manager, content.vars, seed, next);
    INFO("save " << next << " after freeing space: " << ckpt_strerror(rc) << ": "
                 << (rc == CKPT_OK ? "" : ckpt_error_message()));
    ckpt_vars* restored = nullptr;
    int64_t s = -1;
    const int read_rc = rc == CKPT_OK ? ckpt_manager_read(manager, CKPT_LATEST, &restored, &s) : rc;
    INFO("then restore(LATEST): " << ckpt_strerror(read_rc) << "; index " << s);
    const bool ok = rc == CKPT_OK && read_rc == CKPT_OK && s == next && compare(content.vars, restored).empty();
    if (!ok) ++stats.resume_failures;
    CHECK(ok);
    ckpt_vars_free(restored);
}

void run_trial(const std::string& base, uint64_t seed, double save_us, bool full_disk, Stats& stats) {
    std::mt19937_64 rng(seed);
    const bool async = (seed & 1u) != 0;
    // Sometimes no report at all (a kill during the first save, or before the manager opened).
    const int want = std::uniform_int_distribution<int>(0, 4)(rng) == 0
                         ? 0
                         : std::uniform_int_distribution<int>(1, kMaxReportsWaited)(rng);
    const double delay_us = std::uniform_real_distribution<double>(0.0, 2.0 * save_us)(rng);

    std::ostringstream where;
    where << "trial seed " << seed << (async ? " (async)" : " (sync)") << (full_disk ? " on a full disk" : "")
          << ", waited for " << want << " reports, then " << static_cast<int64_t>(delay_us)
          << " us; rerun: CKPT_KILL_SEED=" << seed << " CKPT_KILL_TRIALS=1";
    INFO(where.str());

    std::string logdir = base + "/ckpt-kill-XXXXXX";
    REQUIRE(::mkdtemp(&logdir[0]) != nullptr);
    const std::string dir = logdir + "/ckpt";
    INFO("log directory " << logdir << " (removed after the trial, unless a REQUIRE stops it)");

    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        run_child(logdir, seed, async, full_disk, fds[1]);
    }
    ::close(fds[1]);

    std::string pending, errors;
    Reports reports;
    const bool got = read_reports(fds[0], pending, reports, want, errors);
    if (got) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay_us));
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    // Reports written before the kill are still in the pipe.
    read_reports(fds[0], pending, reports, -1, errors);
    ::close(fds[0]);

    const int64_t last_acked = reports.last_acked;
    const int64_t under_way = reports.last + 1;  // the save the kill may have interrupted, or let finish unreported
    const std::set<int64_t> acked(reports.acked.begin(), reports.acked.end());
    const std::set<int64_t> failed(reports.failed.begin(), reports.failed.end());
    ++stats.trials;
    if (async) ++stats.async_trials;
    stats.acked_saves += static_cast<int64_t>(reports.acked.size());
    stats.failed_saves += static_cast<int64_t>(reports.failed.size());
    stats.acked_after_failure += reports.acked_after_failure;
    if (last_acked == 0) ++stats.zero_ack_trials;
    if (!reports.failed.empty() && reports.failed.back() == reports.last) ++stats.kills_after_failure;
    INFO("acknowledged: " << reports.acked.size() << " (the last " << last_acked << "); failed: "
                          << reports.failed.size() << "; reports up to " << reports.last);
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (!got || !errors.empty() || !killed) ++stats.child_errors;
    CHECK(errors == "");
    CHECK(got);
    CHECK(killed);

    // What the kill left, before a manager cleans up.
    std::vector<std::string> at_kill = list_dir(dir);
    int checkpoints_at_kill = 0;
    bool temporary_at_kill = false;
    for (const std::string& name : at_kill) {
        if (ckpt_checkpoint_idx(name.c_str()) >= 0) ++checkpoints_at_kill;
        if (name.find(".tmp-") != std::string::npos) temporary_at_kill = true;
    }
    if (temporary_at_kill) ++stats.temporaries_at_kill;
    if (checkpoints_at_kill == kKeep + 1) ++stats.keep_plus_one;

    LogLines log;
    ckpt_manager_options opts = trial_options(seed);
    opts.log = &LogLines::log;
    opts.log_payload = &log;
    ckpt_manager* manager = nullptr;
    const int open_rc = ckpt_manager_open(&manager, logdir.c_str(), &opts);
    INFO("ckpt_manager_open: " << ckpt_strerror(open_rc) << ": " << (open_rc == CKPT_OK ? "" : ckpt_error_message()));
    REQUIRE(open_rc == CKPT_OK);

    // At most keep + 1 checkpoints, and nothing but them, the lock and temporaries (which the first save removes).
    std::vector<std::string> names = list_dir(dir);
    {
        std::string listing;
        for (const std::string& name : names) listing += name + " ";
        INFO("left by the kill: " << at_kill.size() << " entries; after opening: " << listing);
        int checkpoints = 0;
        bool temporary = false, stranger = false;
        for (const std::string& name : names) {
            if (ckpt_checkpoint_idx(name.c_str()) >= 0)
                ++checkpoints;
            else if (!name.empty() && name[0] == '.' && name != ".ckpt.lock")
                temporary = true;
            else if (name != ".ckpt.lock")
                stranger = true;
        }
        (void)temporary;
        const int most = kKeep + 1 + (with_policies(seed) ? 1 : 0);  // the best may be one more
        if (checkpoints > most || stranger) ++stats.too_many_files;
        CHECK_FALSE(stranger);
        CHECK(checkpoints <= most);
    }

    // Restore the latest.
    ckpt_vars* restored = nullptr;
    int64_t s = -1;
    const int rc = ckpt_manager_read(manager, CKPT_LATEST, &restored, &s);
    INFO("restore(LATEST): " << ckpt_strerror(rc) << ": " << (rc == CKPT_OK ? "" : ckpt_error_message())
                             << "; restored index " << s << "; log:\n"
                             << log.text());
    Content expected;
    REQUIRE(expected.make_vars() == CKPT_OK);
    if (rc == CKPT_ENOTFOUND && last_acked == 0) {
        ++stats.not_found;
    } else if (rc != CKPT_OK) {
        ++stats.unrestorable;
        CHECK(rc == CKPT_OK);
    } else {
        // The last acknowledged save, or the one under way; a failed save never.
        const bool in_range = s >= 1 && (s == last_acked || s == under_way);
        if (!in_range) ++stats.out_of_range;
        CHECK(in_range);
        if (s == under_way) ++stats.restored_unacked;
        expected.fill(seed, s);
        const std::string diff = compare(expected.vars, restored);
        if (!diff.empty()) ++stats.wrong_contents;
        CHECK(diff == "");
        // kill -9 keeps the page cache: the newest checkpoint is complete, no fallback needed.
        int64_t latest = -1;
        CHECK(ckpt_manager_latest(manager, &latest) == CKPT_OK);
        if (latest != s) ++stats.fallbacks;
        CHECK(latest == s);
    }
    ckpt_vars_free(restored);

    // Every checkpoint on disk is complete, holds its own step's contents, and was acknowledged or under way.
    int64_t indices[16];
    size_t count = 0;
    const int list_rc = ckpt_manager_list(manager, indices, 16, &count);
    CHECK(list_rc == CKPT_OK);
    if (list_rc != CKPT_OK) count = 0;
    bool stray = false;
    for (size_t i = 0; i < count; ++i) {
        ckpt_vars* held = nullptr;
        int64_t got_idx = -1;
        const int read_rc = ckpt_manager_read(manager, indices[i], &held, &got_idx);
        INFO("checkpoint " << indices[i] << ": " << ckpt_strerror(read_rc) << ": "
                           << (read_rc == CKPT_OK ? "" : ckpt_error_message()));
        std::string diff = "unreadable";
        if (read_rc == CKPT_OK) {
            expected.fill(seed, indices[i]);
            diff = compare(expected.vars, held);
        }
        if (!diff.empty() && indices[i] != s) ++stats.wrong_contents;  // s was counted above
        CHECK(diff == "");
        const bool known = acked.count(indices[i]) == 1 || indices[i] == under_way;
        if (!known) stray = true;
        CHECK(known);
        ckpt_vars_free(held);
    }
    if (stray) ++stats.failed_on_disk;

    // The previous checkpoints are intact: the newest `keep` acknowledged saves are all on disk, but for the oldest
    // of them once the save under way has landed (its retention may have removed that one).
    {
        const std::set<int64_t> on_disk(indices, indices + count);
        const bool newer_landed = on_disk.count(under_way) == 1;
        const size_t expected_kept =
            std::min(reports.acked.size(), static_cast<size_t>(newer_landed ? kKeep - 1 : kKeep));
        bool lost = false;
        for (size_t i = reports.acked.size() - expected_kept; i < reports.acked.size(); ++i) {
            const bool present = on_disk.count(reports.acked[i]) == 1;
            INFO("acknowledged checkpoint " << reports.acked[i] << " is " << (present ? "" : "not ") << "on disk");
            if (!present) lost = true;
            CHECK(present);
        }
        // With keep_best, the best acknowledged checkpoint stays too, unless the save under way landed and is at
        // least as good (a tie goes to the higher index); and ckpt_manager_best names the best on disk.
        if (with_policies(seed) && !reports.acked.empty()) {
            int64_t best = reports.acked.front();
            for (int64_t k : reports.acked)
                if (loss_of(seed, k) <= loss_of(seed, best)) best = k;
            const bool replaced = newer_landed && loss_of(seed, under_way) <= loss_of(seed, best);
            INFO("best acknowledged checkpoint " << best << " (loss " << loss_of(seed, best) << ")"
                                                 << (replaced ? ", replaced by the one under way" : ""));
            if (!replaced && on_disk.count(best) == 0) lost = true;
            CHECK((replaced || on_disk.count(best) == 1));
            int64_t best_on_disk = -1;
            for (int64_t k : on_disk)
                if (best_on_disk < 0 || loss_of(seed, k) <= loss_of(seed, best_on_disk)) best_on_disk = k;
            int64_t reported = -1;
            CHECK(ckpt_manager_best(manager, &reported) == CKPT_OK);
            CHECK(reported == best_on_disk);
        }
        if (lost) ++stats.lost_acked;
    }

    int64_t next = under_way + 1;
    if (count > 0) next = std::max(next, indices[count - 1] + 1);
    if (full_disk) {
        resume_after_freeing_space(manager, logdir, seed, next, stats);
    } else {
        Content content;
        REQUIRE(content.make_vars() == CKPT_OK);
        content.fill(seed, next);
        const int save_rc = save_step(manager, content.vars, seed, next);
        INFO("save " << next << " after the restore: " << ckpt_strerror(save_rc) << ": "
                     << (save_rc == CKPT_OK ? "" : ckpt_error_message()));
        CHECK(save_rc == CKPT_OK);
    }
    // The first save removed every temporary the kill left.
    {
        bool temporary = false;
        std::string listing;
        for (const std::string& name : list_dir(dir)) {
            listing += name + " ";
            if (!name.empty() && name[0] == '.' && name != ".ckpt.lock") temporary = true;
        }
        INFO("after the new manager's first save: " << listing);
        if (temporary) ++stats.leftover_temporaries;
        CHECK_FALSE(temporary);
    }

    CHECK(ckpt_manager_close(manager) == CKPT_OK);
    remove_tree(logdir);
}

void run_campaign(const std::string& base, int default_trials, bool full_disk) {
    const int trials = std::stoi(env_or("CKPT_KILL_TRIALS", std::to_string(default_trials)));
    const uint64_t first_seed = std::stoull(env_or("CKPT_KILL_SEED", std::to_string(kDefaultSeed)));
    REQUIRE(trials >= 0);
    const std::string filesystem = filesystem_name(base);

    const double save_us = calibrate_save_us(base);
    std::printf("test_kill: %d trials in %s (%s%s), seeds %" PRIu64 "…; one save takes %.0f us, kills come 0 to "
                "%.0f us after the report waited for\n",
                trials, base.c_str(), filesystem.c_str(), full_disk ? ", full disk" : "", first_seed, save_us,
                2 * save_us);
    std::fflush(stdout);

    Stats stats;
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < trials; ++t)
        run_trial(base, first_seed + static_cast<uint64_t>(t), save_us, full_disk, stats);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::printf("test_kill: %d trials (%d async) in %.1f s, %" PRId64 " acknowledged saves, %" PRId64 " failed on a "
                "full disk (%" PRId64 " acknowledgements came after a failure, %d kills after a failure); %d kills "
                "before the first acknowledgement (%d with nothing to restore), %d restored a save done but not "
                "yet reported, %d kills left a temporary, %d left keep + 1 checkpoints\n"
                "test_kill: failures: %d child errors, %d unrestorable, %d restored index out of range, %d wrong "
                "contents, %d fallbacks past a corrupt newest, %d too many files, %d failed or unknown saves on "
                "disk, %d lost acknowledged checkpoints, %d leftover temporaries, %d failed resumes\n"
                "test_kill: totals filesystem=%s trials=%d acked=%" PRId64 " failed=%" PRId64 " unrestorable=%d "
                "wrong=%d leftover_temporaries=%d other_failures=%d seconds=%.1f\n",
                stats.trials, stats.async_trials, seconds, stats.acked_saves, stats.failed_saves,
                stats.acked_after_failure, stats.kills_after_failure, stats.zero_ack_trials, stats.not_found,
                stats.restored_unacked, stats.temporaries_at_kill, stats.keep_plus_one, stats.child_errors,
                stats.unrestorable, stats.out_of_range, stats.wrong_contents, stats.fallbacks, stats.too_many_files,
                stats.failed_on_disk, stats.lost_acked, stats.leftover_temporaries, stats.resume_failures,
                filesystem.c_str(), stats.trials, stats.acked_saves, stats.failed_saves, stats.unrestorable,
                stats.wrong_contents, stats.leftover_temporaries, stats.other_failures(), seconds);
    std::fflush(stdout);

    // A full-disk campaign that never ran out of space, or never saved again afterwards, tested nothing.
    if (full_disk && trials >= 10) {
        CHECK(stats.failed_saves > 0);
        CHECK(stats.acked_after_failure > 0);
    }
}

// A small tmpfs for this process alone (mount_private_tmpfs), on a new directory; unmounted and removed by the
// destructor.
class PrivateTmpfs {
public:
    PrivateTmpfs() {
        path_ = env_or("TMPDIR", "/tmp") + "/ckpt-kill-tmpfs-XXXXXX";
        if (::mkdtemp(&path_[0]) == nullptr) {
            skipped_ = std::string("mkdtemp: ") + std::strerror(errno);
            path_.clear();
            return;
        }
        skipped_ = ckpt::testing::mount_private_tmpfs(path_, kTmpfsSize);
        mounted_ = skipped_.empty();
    }
    ~PrivateTmpfs() {
        if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
        if (!path_.empty()) ::rmdir(path_.c_str());
    }
    PrivateTmpfs(const PrivateTmpfs&) = delete;
    PrivateTmpfs& operator=(const PrivateTmpfs&) = delete;

    const std::string& path() const { return path_; }
    // Why there is no tmpfs; "" when mounted.
    const std::string& skipped() const { return skipped_; }

private:
    std::string path_;
    std::string skipped_;
    bool mounted_ = false;
};

}  // namespace

TEST_CASE("kill -9 at a random moment never loses an acknowledged save nor leaves a wrong one", "[kill]") {
    run_campaign(env_or("CKPT_KILL_DIR", env_or("TMPDIR", "/tmp")), kDefaultTrials, false);
}

// On XFS with reflink, where a manager's saves are incremental (the frozen half of "w" shared with the checkpoint
// before): the same campaign, on an image this process mounts in a private mount namespace (skipped where it cannot).
TEST_CASE("kill -9 during incremental saves on XFS never loses an acknowledged save nor leaves a wrong one",
          "[.][xfs]") {
    const std::string base = env_or("TMPDIR", "/tmp") + "/ckpt-kill-xfs-" + std::to_string(::getpid());
    REQUIRE(::mkdir(base.c_str(), 0700) == 0);
    const std::string mount_point = base + "/mnt";
    REQUIRE(::mkdir(mount_point.c_str(), 0700) == 0);
    const std::string why_not = ckpt::testing::mount_private_image(base + "/xfs.img", mount_point, "xfs", "512m");
    if (why_not.empty()) {
        run_campaign(mount_point, kDefaultTrials, false);
        // The campaign's saves were incremental: a manager here logs what its second save shared.
        std::vector<std::string> log;
        ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
        o.log = [](int, const char* line, void* payload) {
            static_cast<std::vector<std::string>*>(payload)->push_back(line);
        };
        o.log_payload = &log;
        ckpt_manager* m = nullptr;
        REQUIRE(ckpt_manager_open(&m, (mount_point + "/shares").c_str(), &o) == CKPT_OK);
        Content c;
        REQUIRE(c.make_vars() == CKPT_OK);
        for (int64_t k = 1; k <= 2; ++k) {
            c.fill(7, k);
            REQUIRE(save_step(m, c.vars, 7, k) == CKPT_OK);
        }
        ckpt_manager_close(m);
        CHECK(std::count_if(log.begin(), log.end(), [](const std::string& line) {
                  return line.find("Checkpoint 2 shares 524288 bytes") != std::string::npos;
              }) == 1);
        ::umount2(mount_point.c_str(), MNT_DETACH);
    }
    ::unlink((base + "/xfs.img").c_str());
    ::rmdir(mount_point.c_str());
    ::rmdir(base.c_str());
    if (!why_not.empty()) WARN("skipped: no XFS image: " << why_not);
}

TEST_CASE("on a full disk a save fails cleanly, keeps the previous checkpoints, and later saves succeed; also "
          "under kill -9",
          "[.][enospc]") {
    std::string base = env_or("CKPT_KILL_DIR", "");
    std::unique_ptr<PrivateTmpfs> tmpfs;
    if (base.empty()) {
        tmpfs = std::make_unique<PrivateTmpfs>();
        if (!tmpfs->skipped().empty()) {
            WARN("skipped: no small filesystem to fill: " << tmpfs->skipped());
            return;
        }
        base = tmpfs->path();
    }
    struct statvfs fs;
    REQUIRE(::statvfs(base.c_str(), &fs) == 0);
    const uint64_t size = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    INFO(base << " holds " << size << " bytes; the full-disk campaign needs a filesystem of " << kMinFullDiskFs
              << " to " << kMaxFullDiskFs << " bytes (e.g. mount -t tmpfs -o size=" << kTmpfsSize << ")");
    REQUIRE(size >= kMinFullDiskFs);
    REQUIRE(size <= kMaxFullDiskFs);
    run_campaign(base, kDefaultFullDiskTrials, true);
}
