// The kill -9 loop (RocksDB's blackbox crash test; /work/shared/RELIABILITY_FACTS.md section 5), through the C API.
//
// A child process opens a checkpoint manager (keep = 3) and saves k = 1, 2, … with contents gen(seed, k); after
// each save is durable (ckpt_manager_save returned OK, and with CKPT_MANAGER_ASYNC ckpt_manager_wait too) it writes
// "k\n" to a pipe. The parent lets it run for a random number of acknowledgements (sometimes none), waits a random
// delay of 0 to 2x the time one save takes, kills it with SIGKILL and reads the acknowledgements that were still in
// the pipe. Then, in the parent, a fresh manager opens the directory and
//  - restoring CKPT_LATEST gives the last acknowledged save s or the one after it (done but not yet acknowledged),
//    whose content is gen(seed, s) bit for bit; with no acknowledgement, CKPT_ENOTFOUND or s == 1;
//  - the newest checkpoint on disk is the one restored (kill -9 keeps the page cache, so no file may be corrupt and
//    no fallback may be needed), and every checkpoint on disk holds gen(seed, its index);
//  - at most keep + 1 checkpoints exist (retention interrupted after the new file landed leaves one extra);
//  - no temporary is left (opening removes them): the only dot file is ".ckpt.lock".
//
// Every trial has its own seed (printed with any failure); the seed fixes the contents, the number of
// acknowledgements waited for, the delay and the mode (odd seeds run the manager with CKPT_MANAGER_ASYNC).
//
//     CKPT_KILL_TRIALS=300 build/tests/test_kill    a longer campaign (default 50 trials)
//     CKPT_KILL_SEED=1234 CKPT_KILL_TRIALS=1 …      one trial again (timing aside)
//     CKPT_KILL_DIR=/dev/shm …                      where the log directories go (default $TMPDIR or /tmp)
//
// The child uses nothing but the C API and write(2) (no Catch2: its assertions belong to the parent), and ends
// only by SIGKILL, or _exit when a call fails (the message then comes through the pipe).
#include "ckpt/ckpt.h"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int32_t kKeep = 3;
constexpr int kDefaultTrials = 50;
constexpr uint64_t kDefaultSeed = 20240601;
constexpr int64_t kRows = 512, kCols = 512;  // "w": 1 MiB of float32
constexpr int kMaxAcksWaited = 6;            // the parent waits for 0..6 acknowledgements
constexpr int64_t kChildMaxSaves = 100000;   // a child the parent lost stops by itself
constexpr int kAckTimeoutMs = 60000;         // no acknowledgement for this long: the child hangs

uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
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

    // gen(seed, k): every byte depends on both, so a checkpoint holding another step's data shows.
    void fill(uint64_t s, int64_t k) {
        uint64_t x = s * 0xD1B54A32D192ED03ull ^ static_cast<uint64_t>(k) * 0x8CB92BA72F3D8DD7ull;
        for (float& f : w) f = static_cast<float>(static_cast<int64_t>(splitmix64(x) >> 40) - (1 << 23)) / 4096.0f;
        step = k;
        for (auto& row : m)
            for (double& d : row) d = static_cast<double>(static_cast<int64_t>(splitmix64(x) >> 11)) * 0x1p-40;
        for (uint8_t& b : tag) b = static_cast<uint8_t>(splitmix64(x));
        seed = s;
    }
};

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

[[noreturn]] void child_fail(int fd, const char* what, int rc) {
    char line[1024];
    const int n = std::snprintf(line, sizeof line, "error %s: %s: %s\n", what, ckpt_strerror(rc), ckpt_error_message());
    write_all(fd, line, n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof line - 1));
    ::_exit(3);
}

[[noreturn]] void run_child(const std::string& logdir, uint64_t seed, bool async, int fd) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) ::_exit(5);
    Content content;
    int rc = content.make_vars();
    if (rc != CKPT_OK) child_fail(fd, "ckpt_vars_add", rc);
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.keep = kKeep;
    opts.flags = async ? CKPT_MANAGER_ASYNC : 0u;
    ckpt_manager* manager = nullptr;
    rc = ckpt_manager_open(&manager, logdir.c_str(), &opts);
    if (rc != CKPT_OK) child_fail(fd, "ckpt_manager_open", rc);
    for (int64_t k = 1; k <= kChildMaxSaves; ++k) {
        content.fill(seed, k);
        rc = ckpt_manager_save(manager, content.vars, k);
        if (rc != CKPT_OK) child_fail(fd, "ckpt_manager_save", rc);
        if (async) {
            rc = ckpt_manager_wait(manager);  // only then is the save durable
            if (rc != CKPT_OK) child_fail(fd, "ckpt_manager_wait", rc);
        }
        char ack[32];
        const int n = std::snprintf(ack, sizeof ack, "%" PRId64 "\n", k);
        write_all(fd, ack, static_cast<size_t>(n));  // < PIPE_BUF: one atomic write
    }
    ::_exit(6);
}

// ------------------------------------------------------------------------------------------------ the parent

struct Stats {
    int trials = 0;
    int async_trials = 0;
    int64_t acked_saves = 0;       // acknowledgements received, over all trials
    int zero_ack_trials = 0;       // killed before the first acknowledgement
    int not_found = 0;             // of those, nothing to restore
    int restored_unacked = 0;      // restored last_acked + 1: a save done but not yet acknowledged
    int temporaries_at_kill = 0;   // kills that left a temporary behind (before the new manager opened)
    int keep_plus_one = 0;         // kills that left keep + 1 checkpoints (retention interrupted)
    // Failures:
    int child_errors = 0;          // the child reported a failed call, or did not die of SIGKILL
    int unrestorable = 0;          // restore(LATEST) failed with something other than an allowed ENOTFOUND
    int out_of_range = 0;          // restored index outside [last_acked, last_acked + 1]
    int wrong_contents = 0;        // a checkpoint on disk (restored or not) differs from gen(seed, idx)
    int fallbacks = 0;             // the newest checkpoint on disk was not the one restored
    int too_many_files = 0;        // more than keep + 1 checkpoints, or a file the manager did not make
    int leftover_temporaries = 0;  // a dot file other than .ckpt.lock after the new manager opened
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
    std::vector<std::string> lines;
    static void log(int level, const char* message, void* payload) {
        static_cast<LogLines*>(payload)->lines.push_back((level == CKPT_LOG_WARNING ? "warning: " : "info: ") +
                                                         std::string(message));
    }
};

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
        REQUIRE(ckpt_manager_save(manager, content.vars, k) == CKPT_OK);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    REQUIRE(ckpt_manager_close(manager) == CKPT_OK);
    remove_tree(logdir);
    return std::chrono::duration<double, std::micro>(elapsed).count() / kSaves;
}

// Reads "k\n" lines from fd into `acks` (checking they count 1, 2, …) and child error lines into `errors`, until
// `want` acknowledgements arrived, or (want < 0) the end of the pipe. False on a timeout or a premature end.
bool read_acks(int fd, std::string& pending, int64_t& last_acked, int want, std::string& errors) {
    while (want < 0 || last_acked < want) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, kAckTimeoutMs);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            errors += "no acknowledgement for " + std::to_string(kAckTimeoutMs) + " ms; ";
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
            char* end = nullptr;
            const long long k = std::strtoll(line.c_str(), &end, 10);
            if (!line.empty() && end != nullptr && *end == '\0' && k == last_acked + 1) {
                last_acked = k;
            } else {
                errors += "child: '" + line + "'; ";
            }
        }
    }
    return true;
}

void run_trial(const std::string& base, uint64_t seed, double save_us, Stats& stats) {
    std::mt19937_64 rng(seed);
    const bool async = (seed & 1u) != 0;
    // Sometimes no acknowledgement at all (a kill during the first save, or before the manager opened).
    const int want = std::uniform_int_distribution<int>(0, 4)(rng) == 0
                         ? 0
                         : std::uniform_int_distribution<int>(1, kMaxAcksWaited)(rng);
    const double delay_us = std::uniform_real_distribution<double>(0.0, 2.0 * save_us)(rng);

    std::ostringstream where;
    where << "trial seed " << seed << (async ? " (async)" : " (sync)") << ", waited for " << want
          << " acks, then " << static_cast<int64_t>(delay_us) << " us; rerun: CKPT_KILL_SEED=" << seed
          << " CKPT_KILL_TRIALS=1";
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
        run_child(logdir, seed, async, fds[1]);
    }
    ::close(fds[1]);

    std::string pending, errors;
    int64_t last_acked = 0;
    const bool got = read_acks(fds[0], pending, last_acked, want, errors);
    if (got) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay_us));
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    // Acknowledgements written before the kill are still in the pipe.
    read_acks(fds[0], pending, last_acked, -1, errors);
    ::close(fds[0]);

    ++stats.trials;
    if (async) ++stats.async_trials;
    stats.acked_saves += last_acked;
    if (last_acked == 0) ++stats.zero_ack_trials;
    INFO("acknowledged: " << last_acked);
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
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.keep = kKeep;
    opts.log = &LogLines::log;
    opts.log_payload = &log;
    ckpt_manager* manager = nullptr;
    const int open_rc = ckpt_manager_open(&manager, logdir.c_str(), &opts);
    INFO("ckpt_manager_open: " << ckpt_strerror(open_rc) << ": " << (open_rc == CKPT_OK ? "" : ckpt_error_message()));
    REQUIRE(open_rc == CKPT_OK);

    // No temporaries left, at most keep + 1 checkpoints, nothing else.
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
        if (temporary) ++stats.leftover_temporaries;
        if (checkpoints > kKeep + 1 || stranger) ++stats.too_many_files;
        CHECK_FALSE(temporary);
        CHECK_FALSE(stranger);
        CHECK(checkpoints <= kKeep + 1);
    }

    // Restore the latest.
    ckpt_vars* restored = nullptr;
    int64_t s = -1;
    const int rc = ckpt_manager_read(manager, CKPT_LATEST, &restored, &s);
    std::string log_text;
    for (const std::string& line : log.lines) log_text += line + "\n";
    INFO("restore(LATEST): " << ckpt_strerror(rc) << ": " << (rc == CKPT_OK ? "" : ckpt_error_message())
                             << "; restored index " << s << "; log:\n"
                             << log_text);
    Content expected;
    REQUIRE(expected.make_vars() == CKPT_OK);
    if (rc == CKPT_ENOTFOUND && last_acked == 0) {
        ++stats.not_found;
    } else if (rc != CKPT_OK) {
        ++stats.unrestorable;
        CHECK(rc == CKPT_OK);
    } else {
        const bool in_range = last_acked <= s && s <= last_acked + 1 && s >= 1;
        if (!in_range) ++stats.out_of_range;
        CHECK(in_range);
        if (s == last_acked + 1) ++stats.restored_unacked;
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

    // Every checkpoint on disk is complete and holds its own step's contents.
    int64_t indices[16];
    size_t count = 0;
    const int list_rc = ckpt_manager_list(manager, indices, 16, &count);
    CHECK(list_rc == CKPT_OK);
    for (size_t i = 0; list_rc == CKPT_OK && i < count; ++i) {
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
        CHECK(indices[i] <= last_acked + 1);
        ckpt_vars_free(held);
    }

    CHECK(ckpt_manager_close(manager) == CKPT_OK);
    remove_tree(logdir);
}

}  // namespace

TEST_CASE("kill -9 at a random moment never loses an acknowledged save nor leaves a wrong one", "[kill]") {
    const int trials = std::stoi(env_or("CKPT_KILL_TRIALS", std::to_string(kDefaultTrials)));
    const uint64_t first_seed = std::stoull(env_or("CKPT_KILL_SEED", std::to_string(kDefaultSeed)));
    const std::string base = env_or("CKPT_KILL_DIR", env_or("TMPDIR", "/tmp"));
    REQUIRE(trials >= 0);

    const double save_us = calibrate_save_us(base);
    std::printf("test_kill: %d trials in %s, seeds %" PRIu64 "…; one save takes %.0f us, kills come 0 to %.0f us "
                "after the acknowledgement waited for\n",
                trials, base.c_str(), first_seed, save_us, 2 * save_us);
    std::fflush(stdout);

    Stats stats;
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < trials; ++t) run_trial(base, first_seed + static_cast<uint64_t>(t), save_us, stats);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::printf("test_kill: %d trials (%d async) in %.1f s, %" PRId64 " acknowledged saves; %d kills before the "
                "first acknowledgement (%d with nothing to restore), %d restored a save done but not yet "
                "acknowledged, %d kills left a temporary, %d left keep + 1 checkpoints\n"
                "test_kill: failures: %d child errors, %d unrestorable, %d restored index out of range, %d wrong "
                "contents, %d fallbacks past a corrupt newest, %d too many files, %d leftover temporaries\n",
                stats.trials, stats.async_trials, seconds, stats.acked_saves, stats.zero_ack_trials, stats.not_found,
                stats.restored_unacked, stats.temporaries_at_kill, stats.keep_plus_one, stats.child_errors,
                stats.unrestorable, stats.out_of_range, stats.wrong_contents, stats.fallbacks, stats.too_many_files,
                stats.leftover_temporaries);
    std::fflush(stdout);
}
