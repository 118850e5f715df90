/* SPDX-License-Identifier: Apache-2.0 */
/* Sharded saves over MPI (bench/run): run under mpirun with R ranks, it measures a collective ckpt_manager_save
 * and ckpt_manager_restore of CKPT_LATEST against raw I/O of the same bytes by the same R processes, and the
 * commit overhead rank 0's manager logs for each save.
 *
 * Usage: mpirun -np R bench_mpi MIB [--dir D] [--runs N] [--one-array]
 *   MIB of float32 state in total, whatever R (strong scaling): 7/8 of it in arrays of at most 4 MiB dealt out
 *   round-robin (each whole on one rank), 1/8 in one row-split array "emb" (1024 columns) whose rows the ranks
 *   share out evenly. Each rank holds about MIB/R. --one-array: all of it in "emb", so each rank saves one
 *   array (the layout sharded saves are for: one large tensor split by rows).
 * Per run, the two sides back to back (alternating which goes first), each between barriers, timed as the
 * slowest rank's wall time:
 *   save     ckpt_manager_save (returns once rank 0 has committed the step), against raw: each rank write()s its
 *            bytes to its own file in a fresh directory and fsyncs it, then rank 0 fsyncs the directory;
 *   restore  ckpt_manager_restore(CKPT_LATEST) into the same buffers, against read() of the raw files, with the
 *            files in the page cache (warm) and dropped from it first (cold: posix_fadvise DONTNEED).
 * Each save goes to a new step (keep = 0: the manager removes nothing); the step and raw directory of the run
 * before are removed before it, untimed, so both sides write new files.
 * commit: the milliseconds from the last shard durable to the step visible and durable, parsed from rank 0's
 * info message "Saved step ... the commit took X ms after the last shard was durable".
 * Output (rank 0): one "mpi ranks=R layout=mixed|one op=... who=... cache=... per_run=... seconds=..." line per
 * measure (seconds: the median of N runs after a warm-up; op=commit lists milliseconds); progress on stderr. */
#define _GNU_SOURCE
#include "bench_common.h"

#include <ckpt/ckpt_mpi.h>

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define COLS 1024 /* columns of "emb" */
#define MAX_ARRAY ((size_t)4 << 20)

static int g_rank, g_world;
static const char *g_layout = "mixed"; /* "one" with --one-array */

typedef struct {
    int count;         /* this rank's whole arrays */
    size_t each;       /* bytes of each */
    float **arrays;
    float *emb;        /* this rank's rows of "emb" */
    int64_t emb_begin, emb_rows, emb_global;
    uint64_t *first;   /* element of the whole state each array starts at (for the generator) */
    size_t bytes;      /* this rank's state bytes */
    ckpt_vars *vars;
} State;

/* one_array: the whole state in "emb", so each rank writes one array. */
static void build_state(State *s, size_t total, int one_array) {
    const size_t row = COLS * sizeof(float);
    const size_t emb_bytes = (one_array ? total : total / 8) / row * row;
    const size_t rest = total - emb_bytes;
    /* A multiple of 4 arrays, so that 1, 2 and 4 ranks hold the same number each. */
    int n = (int)((rest + MAX_ARRAY - 1) / MAX_ARRAY);
    n = one_array ? 0 : n < 4 ? 4 : (n + 3) / 4 * 4;
    s->each = n == 0 ? 0 : rest / (size_t)n / sizeof(float) * sizeof(float);
    s->emb_global = (int64_t)(emb_bytes / (COLS * sizeof(float)));
    const int64_t base = s->emb_global / g_world, extra = s->emb_global % g_world;
    s->emb_begin = g_rank * base + (g_rank < extra ? g_rank : extra);
    s->emb_rows = base + (g_rank < extra ? 1 : 0);

    check(ckpt_vars_new(&s->vars), "ckpt_vars_new");
    s->arrays = malloc(sizeof *s->arrays * (size_t)(n + 1));
    s->first = malloc(sizeof *s->first * (size_t)(n + 1));
    if (!s->arrays || !s->first) die("malloc");
    const size_t per = s->each / sizeof(float);
    const int64_t shape[1] = {(int64_t)per};
    s->count = 0;
    for (int i = g_rank; i < n; i += g_world) {
        float *a = alloc_like_numpy(s->each);
        if (!a) die("malloc");
        s->first[s->count] = (uint64_t)i * per;
        fill(a, per, s->first[s->count], 0);
        char name[32];
        snprintf(name, sizeof name, "layer%04d/w", i);
        check(ckpt_vars_add(s->vars, name, CKPT_FLOAT32, 1, shape, a, CKPT_BORROW), "ckpt_vars_add");
        s->arrays[s->count++] = a;
    }
    const size_t emb_n = (size_t)s->emb_rows * COLS;
    s->emb = alloc_like_numpy(emb_n * sizeof(float) + 1);
    if (!s->emb) die("malloc");
    s->first[s->count] = (uint64_t)n * per + (uint64_t)s->emb_begin * COLS;
    fill(s->emb, emb_n, s->first[s->count], 0);
    const int64_t emb_shape[2] = {s->emb_rows, COLS};
    check(ckpt_vars_add(s->vars, "emb", CKPT_FLOAT32, 2, emb_shape, s->emb, CKPT_BORROW), "ckpt_vars_add");
    check(ckpt_vars_set_rows(s->vars, (size_t)s->count, s->emb_begin, s->emb_global), "ckpt_vars_set_rows");
    s->bytes = s->each * (size_t)s->count + emb_n * sizeof(float);
}

/* ------------------------------------------------------------------------------------------------- raw I/O */

static void raw_dir(char *out, size_t cap, const char *dir, int run) {
    snprintf(out, cap, "%s/raw-%d", dir, run + 1);
}

static void raw_file(char *out, size_t cap, const char *dir, int run) {
    char d[4096];
    raw_dir(d, sizeof d, dir, run);
    snprintf(out, cap, "%s/rank-%05d.bin", d, g_rank);
}

/* Each rank's bytes to its own file of a fresh directory, fsync; then rank 0 fsyncs the directory: the same
 * durability as a shard and its step (without the manifest and the rename). */
static void raw_save_ranks(const State *s, const char *dir, int run) {
    char d[4096], path[4200];
    raw_dir(d, sizeof d, dir, run);
    if (g_rank == 0 && mkdir(d, 0755) != 0) die(d);
    MPI_Barrier(MPI_COMM_WORLD);
    raw_file(path, sizeof path, dir, run);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    for (int i = 0; i < s->count; i++) write_all(fd, s->arrays[i], s->each);
    write_all(fd, s->emb, (size_t)s->emb_rows * COLS * sizeof(float));
    if (fsync(fd) != 0 || close(fd) != 0) die("fsync");
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) fsync_dir(d);
}

static void raw_read_ranks(const State *s, const char *dir, int run) {
    char path[4200];
    raw_file(path, sizeof path, dir, run);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(path);
    for (int i = 0; i < s->count; i++) read_all(fd, s->arrays[i], s->each);
    read_all(fd, s->emb, (size_t)s->emb_rows * COLS * sizeof(float));
    close(fd);
}

/* ------------------------------------------------------------------------------------------------- helpers */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Rank 0 removes dir and what it holds (if it exists); every rank waits for it. */
static void remove_tree(const char *dir) {
    struct stat st;
    if (g_rank == 0 && stat(dir, &st) == 0 && nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) die(dir);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 drops every file of dir from the page cache; every rank waits for it. */
static void evict_dir(const char *dir) {
    if (g_rank == 0) {
        DIR *d = opendir(dir);
        if (!d) die(dir);
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            evict(path);
        }
        closedir(d);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The commit time of the latest save, from rank 0's log (NAN until one is logged). */
static double g_commit_ms = NAN;

static void on_log(int level, const char *message, void *payload) {
    (void)payload;
    const char *key = "the commit took ";
    const char *at = strstr(message, key);
    if (level == CKPT_LOG_INFO && at) g_commit_ms = strtod(at + strlen(key), NULL);
}

/* The check of the warm-up: the buffers zeroed, restored, and compared with the generator. */
static void verify_restore(const State *s, ckpt_manager *m) {
    for (int i = 0; i < s->count; i++) memset(s->arrays[i], 0, s->each);
    const size_t emb_n = (size_t)s->emb_rows * COLS;
    memset(s->emb, 0, emb_n * sizeof(float));
    check(ckpt_manager_restore(m, s->vars, CKPT_LATEST, NULL), "ckpt_manager_restore");
    float *expect = malloc(s->each > emb_n * sizeof(float) ? s->each : emb_n * sizeof(float) + 1);
    if (!expect) die("malloc");
    for (int i = 0; i <= s->count; i++) {
        const size_t n = i < s->count ? s->each / sizeof(float) : emb_n;
        fill(expect, n, s->first[i], 0);
        if (memcmp(expect, i < s->count ? s->arrays[i] : s->emb, n * sizeof(float)) != 0) {
            fprintf(stderr, "rank %d: array %d differs after restore\n", g_rank, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    free(expect);
}

typedef enum { SAVE_CKPT, SAVE_RAW, RESTORE_CKPT, READ_RAW, KINDS } Kind;
static const char *const kind_op[KINDS] = {"save", "save", "restore", "restore"};
static const char *const kind_who[KINDS] = {"ckpt", "raw", "ckpt", "raw"};

typedef struct {
    ckpt_manager *m;
    const State *s;
    const char *dir, *steps; /* the benchmark's directory; the manager's checkpoint directory */
} Bench;

/* One timed operation between barriers: the slowest rank's wall time, on every rank. */
static double timed(const Bench *b, Kind kind, int run) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    switch (kind) {
    case SAVE_CKPT: check(ckpt_manager_save(b->m, b->s->vars, run + 1), "ckpt_manager_save"); break;
    case SAVE_RAW: raw_save_ranks(b->s, b->dir, run); break;
    case RESTORE_CKPT: check(ckpt_manager_restore(b->m, b->s->vars, CKPT_LATEST, NULL), "ckpt_manager_restore"); break;
    case READ_RAW: raw_read_ranks(b->s, b->dir, run); break;
    default: break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double mine = now() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static void step_dir(char *out, size_t cap, const Bench *b, int run) {
    snprintf(out, cap, "%s/%010d", b->steps, run + 1);
}

static void print_runs(const char *op, const char *who, const char *cache, double *v, int runs, size_t total) {
    printf("mpi ranks=%d layout=%s op=%s who=%s cache=%s per_run=", g_world, g_layout, op, who, cache);
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? "," : "", v[r]);
    printf(" seconds=%.6f state_bytes=%zu runs=%d\n", median(v, runs), total, runs);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (argc < 2) {
        if (g_rank == 0) fprintf(stderr, "usage: mpirun -np R bench_mpi MIB [--dir D] [--runs N] [--one-array]\n");
        MPI_Finalize();
        return 2;
    }
    const size_t total_mib = (size_t)atol(argv[1]);
    const char *base = "/tmp";
    int runs = 6, one_array = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) base = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--one-array") == 0) one_array = 1;
        else {
            if (g_rank == 0) fprintf(stderr, "bench_mpi: unknown argument '%s'\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (runs < 1 || total_mib < 1) {
        if (g_rank == 0) fprintf(stderr, "bench_mpi: need at least 1 MiB and one run\n");
        MPI_Finalize();
        return 2;
    }

    State s;
    if (one_array) g_layout = "one";
    build_state(&s, total_mib << 20, one_array);
    unsigned long long mine = s.bytes, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    char dir[4096], steps[4200];
    snprintf(dir, sizeof dir, "%s/mpi-%d", base, g_world);
    snprintf(steps, sizeof steps, "%s/ckpt", dir);
    remove_tree(dir);
    if (g_rank == 0 && mkdir(dir, 0755) != 0) die(dir);
    MPI_Barrier(MPI_COMM_WORLD);

    ckpt_comm *comm = NULL;
    check(ckpt_mpi_comm_new(&comm, MPI_COMM_WORLD), "ckpt_mpi_comm_new");
    ckpt_manager_options o;
    check(ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION), "ckpt_manager_options_init");
    o.keep = 0;
    o.comm = comm;
    o.log = on_log;
    ckpt_manager *m = NULL;
    check(ckpt_manager_open(&m, dir, &o), "ckpt_manager_open");
    ckpt_comm_free(comm);

    const Bench b = {m, &s, dir, steps};
    double *t[KINDS][2], *commit = calloc((size_t)runs, sizeof *commit), *share = calloc((size_t)runs, sizeof *share);
    for (int k = 0; k < KINDS; k++)
        for (int c = 0; c < 2; c++)
            if (!(t[k][c] = calloc((size_t)runs, sizeof(double)))) die("calloc");
    if (!commit || !share) die("calloc");

    for (int r = -1; r < runs; r++) {
        if (g_rank == 0)
            fprintf(stderr, "  %d ranks, %zu MiB: ckpt and raw, %s\n", g_world, total_mib, r < 0 ? "warm-up" : "run");
        char old[4300];
        step_dir(old, sizeof old, &b, r - 1);
        remove_tree(old);
        raw_dir(old, sizeof old, dir, r - 1);
        remove_tree(old);
        /* Whichever goes second pays for the first one's writeback: alternate the order. */
        const int ckpt_first = (r + 2) % 2 == 0;
        double save_s = 0;
        g_commit_ms = NAN;
        for (int j = 0; j < 2; j++) {
            const Kind k = (j == 0) == ckpt_first ? SAVE_CKPT : SAVE_RAW;
            const double sec = timed(&b, k, r);
            if (k == SAVE_CKPT) save_s = sec;
            if (r >= 0) t[k][0][r] = sec;
        }
        if (r < 0) verify_restore(&s, m);
        char sd[4300], rd[4096];
        step_dir(sd, sizeof sd, &b, r);
        raw_dir(rd, sizeof rd, dir, r);
        for (int c = 0; c < 2; c++)
            for (int j = 0; j < 2; j++) {
                const Kind k = (j == 0) == ckpt_first ? RESTORE_CKPT : READ_RAW;
                if (c == 1) evict_dir(k == RESTORE_CKPT ? sd : rd);
                const double sec = timed(&b, k, r);
                if (r >= 0) t[k][c][r] = sec;
            }
        if (r >= 0 && g_rank == 0) {
            commit[r] = g_commit_ms;
            share[r] = g_commit_ms / 1000 / save_s;
        }
    }

    if (g_rank == 0) {
        const char *caches[2] = {"warm", "cold"};
        print_runs("save", "ckpt", "-", t[SAVE_CKPT][0], runs, total);
        print_runs("save", "raw", "-", t[SAVE_RAW][0], runs, total);
        for (int c = 0; c < 2; c++)
            for (int k = RESTORE_CKPT; k <= READ_RAW; k++) print_runs(kind_op[k], kind_who[k], caches[c], t[k][c], runs, total);
        printf("mpi ranks=%d layout=%s op=commit who=ckpt cache=- per_run=", g_world, g_layout);
        for (int r = 0; r < runs; r++) printf("%s%.3f", r ? "," : "", commit[r]);
        printf(" ms=%.3f share=%.6f runs=%d\n", median(commit, runs), median(share, runs), runs);
    }

    check(ckpt_manager_close(m), "ckpt_manager_close");
    remove_tree(dir);
    for (int k = 0; k < KINDS; k++)
        for (int c = 0; c < 2; c++) free(t[k][c]);
    free(commit);
    free(share);
    for (int i = 0; i < s.count; i++) free(s.arrays[i]);
    free(s.arrays);
    free(s.emb);
    free(s.first);
    ckpt_vars_free(s.vars);
    MPI_Finalize();
    return 0;
}
