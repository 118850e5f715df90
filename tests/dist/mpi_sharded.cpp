// One step of the MPI tests of sharded checkpoints (mpi_test.sh runs the sequence), through the public C API and
// libckpt_mpi only. Every rank checks its own result and the job's exit status says whether all agreed:
//
//   mpi_sharded save DIR STEP...            every rank saves its state at each STEP
//   mpi_sharded fail DIR STEP RANK          RANK's save fails (a file size limit: EFBIG); every rank must get the
//                                           same CKPT_EIO naming RANK, and nothing may be committed or left
//   mpi_sharded restore DIR STEP SAVED_WORLD  the latest step must be STEP, bit-exact on every rank, whatever the
//                                           world size that saved it (SAVED_WORLD)
//   mpi_sharded read DIR STEP SAVED_WORLD   one process, no MPI: reads step STEP whole and checks it
#include "ckpt/ckpt_mpi.h"

#include <sys/resource.h>

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

ckpt_manager* open_manager(const char* dir, ckpt_comm* comm) {
    ckpt_manager_options o;
    ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
    o.keep = 0;
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

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s save|fail|restore|read DIR ARGS...\n", argv[0]);
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
    ckpt_comm_free(comm);
    int all = good ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Finalize();
    return all ? 0 : 1;
}
