// SPDX-License-Identifier: Apache-2.0
// One step of the MPI tests of sharded checkpoints (mpi_test.sh runs the sequence), through the public C API and
// libckpt_mpi only. Every rank checks its own result and the job's exit status says whether all agreed:
//
//   mpi_sharded save DIR STEP...            every rank saves its state at each STEP
//   mpi_sharded fail DIR STEP RANK          RANK's save fails (a file size limit: EFBIG); every rank must get the
//                                           same CKPT_EIO naming RANK, and nothing may be committed or left
//   mpi_sharded restore DIR STEP SAVED_WORLD  the latest step must be STEP, bit-exact on every rank, whatever the
//                                           world size that saved it (SAVED_WORLD)
//   mpi_sharded read DIR STEP SAVED_WORLD   one process, no MPI: reads step STEP whole and checks it
//
// The SIGKILL-one-rank campaign (scripts/mpi-kill-campaign kills one rank of `loop` and runs `resume`):
//   mpi_sharded loop DIR FIRST ACKS PIDS    every rank writes its pid to PIDS/rank-R, then the ranks save steps
//                                           FIRST, FIRST+1, ... (a few MiB per rank, keep = 2) until killed; after
//                                           each save returns CKPT_OK rank 0 appends "STEP MS" to ACKS and fsyncs it
//   mpi_sharded resume DIR FIRST ACKS SAVED_WORLD  a fresh job: opening must remove the staging directories left
//                                           behind, and CKPT_LATEST must restore the last acknowledged step or the
//                                           one after it (nothing, or FIRST, when nothing was acknowledged), the
//                                           same on every rank, bit-exact; rank 0 prints one line "mpi_sharded:
//                                           resume ... result=ok|FAILED" for the driver, which also counts the
//                                           numbered step directories without a manifest (unmanifested=N)
#include "ckpt/ckpt_mpi.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

namespace {

constexpr int64_t kRows = 10, kCols = 3;
int g_rank = 0;

float emb_value(int64_t step, int64_t row, int64_t col) { return static_cast<float>(step * 1000 + row * 10 + col); }
int32_t own_value(int owner, int64_t step, int k) { return k == 0 ? owner : k == 1 ? static_cast<int32_t>(step) : 7; }

void rows_of(int rank, int world, int64_t* begin, int64_t* end) {
    const int64_t base = kRows / world, extra = kRows % world;
    *begin = rank * base + (rank < extra ? rank : extra);
    *end = *begin + base + (rank < extra ? 1 : 0);
}

bool ok(bool condition, const char* what) {
    if (!condition) std::fprintf(stderr, "rank %d: FAILED: %s (%s)\n", g_rank, what, ckpt_error_message());
    return condition;
}

ckpt_manager* open_manager(const char* dir, ckpt_comm* comm, int32_t keep = 0) {
    ckpt_manager_options o;
    ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
    o.keep = keep;
    o.comm = comm;
    ckpt_manager* m = nullptr;
    const int rc = ckpt_manager_open(&m, dir, &o);
    if (rc != CKPT_OK) {
        std::fprintf(stderr, "rank %d: ckpt_manager_open: %s\n", g_rank, ckpt_error_message());
        std::exit(1);
    }
    return m;
}

// Rank r's state at `step`: rows of "emb", its own "own_<r>", and on rank 0 the scalar "step".
struct State {
    std::vector<float> emb;
    std::vector<int32_t> own{0, 0, 0};
    int64_t step = 0;
    std::vector<unsigned char> big;  // large enough to pass a file size limit
    ckpt_vars* vars = nullptr;

    State(int rank, int world, int64_t s, bool with_big = false) {
        int64_t b, e;
        rows_of(rank, world, &b, &e);
        for (int64_t r = b; r < e; ++r)
            for (int64_t c = 0; c < kCols; ++c) emb.push_back(emb_value(s, r, c));
        for (int k = 0; k < 3; ++k) own[k] = own_value(rank, s, k);
        step = s;
        ckpt_vars_new(&vars);
        const int64_t shape[2] = {e - b, kCols};
        ckpt_vars_add(vars, "emb", CKPT_FLOAT32, 2, shape, emb.data(), CKPT_BORROW);
        ckpt_vars_set_rows(vars, 0, b, kRows);
        const std::string name = "own_" + std::to_string(rank);
        const int64_t three = 3;
        ckpt_vars_add(vars, name.c_str(), CKPT_INT32, 1, &three, own.data(), CKPT_BORROW);
        if (rank == 0) ckpt_vars_add(vars, "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW);
        if (with_big) {
            big.assign(1 << 16, 1);
            const int64_t n = static_cast<int64_t>(big.size());
            ckpt_vars_add(vars, "big", CKPT_UINT8, 1, &n, big.data(), CKPT_BORROW);
        }
    }
    ~State() { ckpt_vars_free(vars); }
};

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
        closedir(d);
    }
    return out;
}

bool run_save(ckpt_manager* m, int rank, int world, const std::vector<int64_t>& steps) {
    bool good = true;
    for (int64_t s : steps) {
        State state(rank, world, s);
        const char* names[] = {"loss"};
        const double values[] = {1.0 / static_cast<double>(s + 1)};
        good = ok(ckpt_manager_save_metrics(m, state.vars, s, names, values, 1) == CKPT_OK, "save") && good;
    }
    return good;
}

bool run_fail(ckpt_manager* m, const std::string& dir, int rank, int world, int64_t step, int failing) {
    if (rank == failing) {
        std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead of killing
        rlimit limit{4096, 4096};
        setrlimit(RLIMIT_FSIZE, &limit);
    }
    State state(rank, world, step, true);
    const int rc = ckpt_manager_save(m, state.vars, step);
    std::string message = ckpt_error_message();
    bool good = ok(rc == CKPT_EIO, "the failed save returns CKPT_EIO on every rank");
    // Rank 0's message, on every rank, to compare with its own.
    uint64_t n = message.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    std::string first(n, '\0');
    if (rank == 0) first = message;
    MPI_Bcast(&first[0], static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
    good = ok(message == first, "every rank gets the same message") && good;
    const std::string names_rank = "rank " + std::to_string(failing) + " of " + std::to_string(world) + ": ";
    good = ok(message.find(names_rank) != std::string::npos, "the message names the failing rank") && good;
    good = ok(message.find("File too large") != std::string::npos, "the message carries the rank's error") && good;
    if (rank == 0) {
        char step_dir[32];
        std::snprintf(step_dir, sizeof step_dir, "%010lld", static_cast<long long>(step));
        for (const std::string& e : entries(dir + "/ckpt")) {
            good = ok(e != step_dir, "nothing is committed") && good;
            good = ok(e.find(".tmp-") == std::string::npos, "no staging directory is left") && good;
        }
    }
    return good;
}

bool run_restore(ckpt_manager* m, int rank, int world, int64_t want, int saved_world) {
    int64_t b, e;
    rows_of(rank, world, &b, &e);
    std::vector<float> emb(static_cast<size_t>((e - b) * kCols), -1.0f);
    int64_t step = -1;
    std::vector<std::vector<int32_t>> own;
    ckpt_vars* vars = nullptr;
    ckpt_vars_new(&vars);
    const int64_t shape[2] = {e - b, kCols};
    ckpt_vars_add(vars, "emb", CKPT_FLOAT32, 2, shape, emb.data(), CKPT_BORROW);
    ckpt_vars_set_rows(vars, 0, b, kRows);
    ckpt_vars_add(vars, "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW);  // every rank reads rank 0's scalar
    std::vector<int> owners;
    for (int q = rank; q < saved_world; q += world) owners.push_back(q);  // the old ranks' variables this rank takes
    own.assign(owners.size(), std::vector<int32_t>(3, -1));
    for (size_t k = 0; k < owners.size(); ++k) {
        const std::string name = "own_" + std::to_string(owners[k]);
        const int64_t three = 3;
        ckpt_vars_add(vars, name.c_str(), CKPT_INT32, 1, &three, own[k].data(), CKPT_BORROW);
    }
    int64_t restored = -1;
    bool good = ok(ckpt_manager_restore(m, vars, CKPT_LATEST, &restored) == CKPT_OK, "restore");
    good = ok(restored == want, "the expected step is restored") && good;
    for (int64_t r = b; r < e; ++r)
        for (int64_t c = 0; c < kCols; ++c)
            good = ok(emb[static_cast<size_t>((r - b) * kCols + c)] == emb_value(want, r, c), "emb rows bit-exact") && good;
    good = ok(step == want, "the scalar saved by rank 0") && good;
    for (size_t k = 0; k < owners.size(); ++k)
        for (int i = 0; i < 3; ++i) good = ok(own[k][i] == own_value(owners[k], want, i), "whole variables") && good;
    ckpt_vars_free(vars);
    return good;
}

bool run_read(const char* dir, int64_t want, int saved_world) {
    ckpt_manager_options o;
    ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
    o.flags = CKPT_MANAGER_READ_ONLY;
    ckpt_manager* m = nullptr;
    if (!ok(ckpt_manager_open(&m, dir, &o) == CKPT_OK, "open read-only")) return false;
    ckpt_vars* vars = nullptr;
    int64_t got = -1;
    bool good = ok(ckpt_manager_read(m, want, &vars, &got) == CKPT_OK, "read a sharded step in one process");
    size_t i = 0;
    good = good && ok(ckpt_vars_find(vars, "emb", &i) == CKPT_OK, "emb is there");
    if (good) {
        const int64_t* shape = ckpt_vars_shape(vars, i);
        good = ok(shape[0] == kRows && shape[1] == kCols, "emb has its global shape");
        const float* emb = static_cast<const float*>(ckpt_vars_data(vars, i));
        for (int64_t r = 0; r < kRows; ++r)
            for (int64_t c = 0; c < kCols; ++c) good = ok(emb[r * kCols + c] == emb_value(want, r, c), "emb") && good;
        good = ok(ckpt_vars_count(vars) == static_cast<size_t>(saved_world) + 2, "every variable") && good;
    }
    double loss = 0;
    good = ok(ckpt_manager_metric(m, want, "loss", &loss) == CKPT_OK && loss == 1.0 / static_cast<double>(want + 1),
              "the step's metric") && good;
    ckpt_vars_free(vars);
    ckpt_manager_close(m);
    return good;
}

// ------------------------------------------------------------------------------- the SIGKILL-one-rank campaign

constexpr int64_t kBigRows = 4096, kBigCols = 256;  // "emb": 4 MiB of float32 split across the ranks
constexpr int64_t kOwnCount = int64_t{1} << 18;     // "own_<r>": 2 MiB of int64, whole, on each rank
constexpr int32_t kLoopKeep = 2;                    // retention runs (and can be killed) after every commit
constexpr int64_t kLoopMaxSteps = 100000;           // a loop its driver lost stops by itself

uint64_t mix(uint64_t z) {  // splitmix64's finalizer: every value depends on every bit of its coordinates
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
float big_emb(int64_t step, int64_t row, int64_t col) {
    return static_cast<float>(mix(static_cast<uint64_t>((step * kBigRows + row) * kBigCols + col)) >> 40);  // exact
}
int64_t big_own(int owner, int64_t step, int64_t k) {
    return static_cast<int64_t>(mix(static_cast<uint64_t>(step) << 40 ^ static_cast<uint64_t>(owner) << 32 ^
                                    static_cast<uint64_t>(k)));
}

// The campaign's state of one rank at a step (a restore fills it instead): its rows of "emb", the whole variables
// of the old ranks it owns ("own_<q>"), and the scalar "step" (saved by rank 0, read by every rank).
struct BigState {
    int64_t row_begin = 0, row_end = 0, step = -1;
    std::vector<float> emb;
    std::vector<int> owners;
    std::vector<std::vector<int64_t>> own;
    ckpt_vars* vars = nullptr;

    BigState(int rank, int world, const std::vector<int>& owned, bool with_step) : owners(owned) {
        const int64_t base = kBigRows / world, extra = kBigRows % world;
        row_begin = rank * base + std::min<int64_t>(rank, extra);
        row_end = row_begin + base + (rank < extra ? 1 : 0);
        emb.assign(static_cast<size_t>((row_end - row_begin) * kBigCols), -1.0f);
        own.assign(owners.size(), std::vector<int64_t>(static_cast<size_t>(kOwnCount), -1));
        ckpt_vars_new(&vars);
        const int64_t shape[2] = {row_end - row_begin, kBigCols};
        ckpt_vars_add(vars, "emb", CKPT_FLOAT32, 2, shape, emb.data(), CKPT_BORROW);
        ckpt_vars_set_rows(vars, 0, row_begin, kBigRows);
        for (size_t k = 0; k < owners.size(); ++k) {
            const std::string name = "own_" + std::to_string(owners[k]);
            ckpt_vars_add(vars, name.c_str(), CKPT_INT64, 1, &kOwnCount, own[k].data(), CKPT_BORROW);
        }
        if (with_step) ckpt_vars_add(vars, "step", CKPT_INT64, 0, nullptr, &step, CKPT_BORROW);
    }
    ~BigState() { ckpt_vars_free(vars); }

    void fill(int64_t s) {
        for (int64_t r = row_begin; r < row_end; ++r)
            for (int64_t c = 0; c < kBigCols; ++c) emb[static_cast<size_t>((r - row_begin) * kBigCols + c)] = big_emb(s, r, c);
        for (size_t k = 0; k < owners.size(); ++k)
            for (int64_t i = 0; i < kOwnCount; ++i) own[k][static_cast<size_t>(i)] = big_own(owners[k], s, i);
        step = s;
    }
    bool holds(int64_t s) const {  // bit for bit what fill(s) wrote
        for (int64_t r = row_begin; r < row_end; ++r)
            for (int64_t c = 0; c < kBigCols; ++c) {
                const float want = big_emb(s, r, c);
                if (std::memcmp(&emb[static_cast<size_t>((r - row_begin) * kBigCols + c)], &want, sizeof want) != 0)
                    return false;
            }
        for (size_t k = 0; k < owners.size(); ++k)
            for (int64_t i = 0; i < kOwnCount; ++i)
                if (own[k][static_cast<size_t>(i)] != big_own(owners[k], s, i)) return false;
        return step == s;
    }
};

bool write_file(const std::string& path, const std::string& text, int flags) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (fd < 0) return false;
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    return ::close(fd) == 0 && written;
}

bool run_loop(const std::string& dir, ckpt_comm* comm, int rank, int world, int64_t first, const std::string& acks,
              const std::string& pids) {
    // The pid file appears whole (renamed into place), so the driver never reads half a number.
    const std::string pid_file = pids + "/rank-" + std::to_string(rank);
    if (!ok(write_file(pid_file + ".tmp", std::to_string(::getpid()) + "\n", O_TRUNC) &&
                ::rename((pid_file + ".tmp").c_str(), pid_file.c_str()) == 0,
            "write the pid file"))
        return false;
    ckpt_manager* m = open_manager(dir.c_str(), comm, kLoopKeep);
    BigState state(rank, world, {rank}, rank == 0);
    bool good = true;
    for (int64_t s = first; good && s < first + kLoopMaxSteps; ++s) {
        state.fill(s);
        const auto start = std::chrono::steady_clock::now();
        good = ok(ckpt_manager_save(m, state.vars, s) == CKPT_OK, "save");
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        // What a trainer takes as "saved": the step, durable in a file of its own once the save returned.
        char line[64];
        std::snprintf(line, sizeof line, "%lld %.1f\n", static_cast<long long>(s), ms);
        if (good && rank == 0) good = ok(write_file(acks, line, O_APPEND), "append to the acknowledgement file");
    }
    return ok(ckpt_manager_close(m) == CKPT_OK, "close") && good;
}

// Rank 0's census of the checkpoint directory: staging (or set-aside) directories, numbered step directories, and
// numbered ones without a manifest. A save never leaves one of those (the rename that numbers a step is its
// commit), but retention interrupted while it removes an old step can: listings skip it, and the driver counts it.
struct Census {
    int staging = 0, steps = 0, unmanifested = 0;
};
Census census(const std::string& ckpt_dir) {
    Census c;
    for (const std::string& e : entries(ckpt_dir)) {
        if (e.find(".tmp-") != std::string::npos) ++c.staging;
        if (e.empty() || e.find_first_not_of("0123456789") != std::string::npos) continue;
        struct stat st;
        if (::stat((ckpt_dir + "/" + e).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        ++c.steps;
        if (::stat((ckpt_dir + "/" + e + "/manifest.json").c_str(), &st) != 0) ++c.unmanifested;
    }
    return c;
}

// The last step in the acknowledgement file, or first - 1 when there is none; *count: how many lines.
int64_t last_acknowledged(const std::string& acks, int64_t first, int* count) {
    int64_t last = first - 1;
    *count = 0;
    if (FILE* f = std::fopen(acks.c_str(), "r")) {
        long long s = 0;
        double ms = 0;
        while (std::fscanf(f, "%lld %lf", &s, &ms) == 2) {
            last = s;
            ++*count;
        }
        std::fclose(f);
    }
    return last;
}

bool run_resume(const std::string& dir, ckpt_comm* comm, int rank, int world, int64_t first, const std::string& acks,
                int saved_world) {
    const std::string ckpt_dir = dir + "/ckpt";
    Census before, opened, after;
    if (rank == 0) before = census(ckpt_dir);
    ckpt_manager* m = open_manager(dir.c_str(), comm, kLoopKeep);
    if (rank == 0) opened = census(ckpt_dir);
    bool good = ok(opened.staging == before.staging, "opening removes nothing (the first save cleans up)");
    int acked_saves = 0;
    const int64_t acked = last_acknowledged(acks, first, &acked_saves);

    std::vector<int> owners;  // the loop's ranks' whole variables this rank takes over
    for (int q = rank; q < saved_world; q += world) owners.push_back(q);
    BigState state(rank, world, owners, true);
    int64_t restored = -1;
    const int rc = ckpt_manager_restore(m, state.vars, CKPT_LATEST, &restored);
    const char* outcome = "wrong";
    if (rc == CKPT_ENOTFOUND && acked_saves == 0) {
        outcome = "nothing";  // killed before the first commit
    } else if (ok(rc == CKPT_OK, "restore")) {
        good = ok(restored == acked || restored == acked + 1, "the last acknowledged step, or the one after it") && good;
        good = ok(state.holds(restored), "every variable bit-exact") && good;
        outcome = restored == acked ? "acked" : restored == acked + 1 ? "next" : "wrong";
    } else {
        good = false;
    }
    // The first save takes the directory and removes every staging directory the kill left.
    const int64_t next = (restored >= 0 ? restored : first - 1) + 1;
    ckpt_vars* probe = nullptr;  // one whole variable per rank: a small step of its own
    const std::string probe_name = "resume_probe_" + std::to_string(rank);
    const int64_t probe_value = next;
    good = ok(ckpt_vars_new(&probe) == CKPT_OK &&
                  ckpt_vars_add(probe, probe_name.c_str(), CKPT_INT64, 0, nullptr, &probe_value, CKPT_COPY) == CKPT_OK,
              "the probe collection") && good;
    good = ok(ckpt_manager_save(m, probe, next) == CKPT_OK, "the first save after the resume") && good;
    ckpt_vars_free(probe);
    if (rank == 0) after = census(ckpt_dir);
    good = ok(after.staging == 0, "the first save removes every staging directory") && good;
    int64_t lo = restored, hi = restored;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    good = ok(lo == hi, "every rank restored the same step") && good;
    good = ok(ckpt_manager_close(m) == CKPT_OK, "close") && good;
    int all = good ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("mpi_sharded: resume world=%d acked_saves=%d acked=%lld restored=%lld outcome=%s "
                    "staging_before=%d staging_after=%d steps_on_disk=%d unmanifested=%d result=%s\n",
                    world, acked_saves, static_cast<long long>(acked), static_cast<long long>(restored), outcome,
                    before.staging, after.staging, after.steps, after.unmanifested, all ? "ok" : "FAILED");
    std::fflush(stdout);
    return good;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s save|fail|restore|read|loop|resume DIR ARGS...\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];
    const std::string dir = argv[2];
    if (mode == "read") return run_read(argv[2], std::atoll(argv[3]), argc > 4 ? std::atoi(argv[4]) : 1) ? 0 : 1;

    MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    g_rank = rank;
    ckpt_comm* comm = nullptr;
    if (ckpt_mpi_comm_new(&comm, MPI_COMM_WORLD) != CKPT_OK) {
        std::fprintf(stderr, "ckpt_mpi_comm_new failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    bool good = ok(ckpt_comm_rank(comm) == rank && ckpt_comm_size(comm) == world, "the communicator's rank and size");
    if (mode == "loop" || mode == "resume") {
        if (argc != 6) {
            std::fprintf(stderr, "usage: %s loop DIR FIRST ACKS PIDS | resume DIR FIRST ACKS SAVED_WORLD\n", argv[0]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        const int64_t first = std::atoll(argv[3]);
        good = (mode == "loop" ? run_loop(dir, comm, rank, world, first, argv[4], argv[5])
                               : run_resume(dir, comm, rank, world, first, argv[4], std::atoi(argv[5]))) && good;
    } else {
        ckpt_manager* m = open_manager(dir.c_str(), comm);
        if (mode == "save") {
            std::vector<int64_t> steps;
            for (int k = 3; k < argc; ++k) steps.push_back(std::atoll(argv[k]));
            good = run_save(m, rank, world, steps) && good;
        } else if (mode == "fail") {
            good = run_fail(m, dir, rank, world, std::atoll(argv[3]), std::atoi(argv[4])) && good;
        } else if (mode == "restore") {
            good = run_restore(m, rank, world, std::atoll(argv[3]), std::atoi(argv[4])) && good;
        } else {
            std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
            good = false;
        }
        good = ok(ckpt_manager_close(m) == CKPT_OK, "close") && good;
    }
    ckpt_comm_free(comm);
    int all = good ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Finalize();
    return all ? 0 : 1;
}
