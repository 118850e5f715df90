/* SPDX-License-Identifier: Apache-2.0 */
/* One workload of bench/run, ckpt's side: ckpt_save and ckpt_restore against the limits of the machine,
 * raw write() + fsync + rename + directory fsync of the same bytes, and raw read() into the same buffers.
 * bench/bench_numpy.py measures numpy on the same data; bench/report.py puts the two side by side.
 *
 * Usage: bench_npz NAME MIB ARRAYS [--dir D] [--runs N] [--deflate L1,L2,...] [--no-cold] [--bf16]
 *   NAME labels the output; MIB of float32 state in ARRAYS arrays of equal size; --deflate saves once per level
 *   (CKPT_DEFLATE) instead of stored; --no-cold skips the restores from a cold page cache; --bf16 makes the state
 *   CKPT_BFLOAT16 (element k the upper half of the float32 element k), as bench_peers.py --bf16 makes torch's.
 *   Stored files are also opened and mapped (ckpt_reader_map) beside warm read()s of the raw file (op=map).
 * Output: one "result key=value ..." line per measure (medians of N runs after a warm-up); progress on stderr. */
#define _GNU_SOURCE
#include "bench_common.h"

#include <ckpt/ckpt.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_LEVELS 4

/* CPU time of every thread of the process: CPU / wall tells how many cores an operation kept busy. */
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Peak RSS above the state, in bytes: the process's highest RSS during an operation (writing 5 to clear_refs
 * resets VmHWM to the current RSS) minus its RSS once the state was built. Memory that an earlier operation left
 * resident therefore counts too. -1 where the kernel does not offer it. */
static long long state_kib = -1;

static long long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    const size_t len = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':') v = atoll(line + len + 1);
    fclose(f);
    return v;
}

static int peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    const int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static long long peak_above_state(int reset_ok) {
    return reset_ok && state_kib >= 0 ? (status_kib("VmHWM") - state_kib) * 1024 : -1;
}

typedef struct {
    const char *dir;
    int count;
    size_t each;
    float **arrays;
    ckpt_vars *vars;
    int bf16; /* the arrays hold bfloat16 bits, not float32 */
} State;

static void raw_read(const State *s, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(path);
    for (int i = 0; i < s->count; i++) read_all(fd, s->arrays[i], s->each);
    close(fd);
}

/* One measure: the median time over the runs, the highest peak RSS, the median CPU/wall. */
typedef struct {
    char op[16], who[16], what[64], cache[8];
    const char *path;
    double *seconds, *cores;
    long long rss_above;
} Measure;

static Measure measure_new(const char *op, const char *who, const char *what, const char *cache, const char *path,
                           int runs) {
    Measure m;
    snprintf(m.op, sizeof m.op, "%s", op);
    snprintf(m.who, sizeof m.who, "%s", who);
    snprintf(m.what, sizeof m.what, "%s", what);
    snprintf(m.cache, sizeof m.cache, "%s", cache);
    m.path = path;
    m.seconds = calloc((size_t)runs, sizeof(double));
    m.cores = calloc((size_t)runs, sizeof(double));
    m.rss_above = -1;
    return m;
}

static void measure_free(Measure *m) {
    free(m->seconds);
    free(m->cores);
}

typedef enum { SAVE_CKPT, SAVE_RAW, RESTORE_CKPT, READ_RAW } Kind;

static void run_one(const State *s, Measure *m, Kind kind, const ckpt_options *opts, int run) {
    if (strcmp(m->cache, "cold") == 0) evict(m->path);
    const int reset_ok = peak_reset();
    const double c0 = cpu_seconds(), t0 = now();
    switch (kind) {
        case SAVE_CKPT: check(ckpt_save(m->path, s->vars, opts), "ckpt_save"); break;
        case SAVE_RAW: raw_save(s->dir, m->path, s->arrays, s->count, s->each); break;
        case RESTORE_CKPT: check(ckpt_restore(m->path, s->vars, NULL), "ckpt_restore"); break;
        case READ_RAW: raw_read(s, m->path); break;
    }
    const double wall = now() - t0, cpu = cpu_seconds() - c0;
    const long long above = peak_above_state(reset_ok);
    if (run < 0) return; /* the warm-up */
    m->seconds[run] = wall;
    m->cores[run] = cpu / wall;
    if (above > m->rss_above) m->rss_above = above;
}

static long long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f || fseeko(f, 0, SEEK_END) != 0) die(path);
    long long n = (long long)ftello(f);
    fclose(f);
    return n;
}

/* per_run lists the runs' seconds in run order: report.py pairs ckpt's and raw's runs, which ran back to back. */
static void report(const char *name, const State *s, Measure *m, int runs) {
    printf("result workload=%s op=%s who=%s what=\"%s\" cache=%s per_run=", name, m->op, m->who, m->what, m->cache);
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? "," : "", m->seconds[r]);
    printf(" seconds=%.6f cores=%.2f rss_above=%lld state_bytes=%zu file_bytes=%lld arrays=%d runs=%d\n",
           median(m->seconds, runs), median(m->cores, runs), m->rss_above, s->each * (size_t)s->count,
           file_size(m->path), s->count, runs);
}

/* Restores overwrite the state with what it already holds, so the warm-up checks once that they really did:
 * the arrays are zeroed first and compared with the generator afterwards. */
static void verify_restore(const State *s, const char *path) {
    for (int i = 0; i < s->count; i++) memset(s->arrays[i], 0, s->each);
    check(ckpt_restore(path, s->vars, NULL), "ckpt_restore");
    float *expect = malloc(s->each);
    if (!expect) die("malloc");
    const size_t n = s->each / (s->bf16 ? 2 : sizeof(float));
    for (int i = 0; i < s->count; i++) {
        fill(expect, n, (uint64_t)i * n, s->bf16);
        if (memcmp(expect, s->arrays[i], s->each) != 0) {
            fprintf(stderr, "%s: array %d differs after restore\n", path, i);
            exit(1);
        }
    }
    free(expect);
}

/* ---------------------------------------------------------------------------------------------- mapped views */

/* What a consumer of the views pays: open, ckpt_reader_map of every array, then (touch) one byte of each page of
 * each view — every page faulted in — and close. flags: the open options' flags (CKPT_MAP_UNVERIFIED). */
static void map_all(const char *path, uint32_t flags, int touch) {
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.flags = flags;
    ckpt_reader *npz = NULL;
    check(ckpt_reader_open(&npz, path, &o), "ckpt_reader_open");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned sum = 0;
    for (size_t i = 0; i < ckpt_reader_count(npz); i++) {
        const void *p = NULL;
        check(ckpt_reader_map(npz, i, &p), "ckpt_reader_map");
        const size_t n = ckpt_reader_nbytes(npz, i);
        for (size_t k = 0; touch && k < n; k += page) sum += ((const volatile unsigned char *)p)[k];
    }
    ckpt_reader_close(npz);
    if (sum == 1u) fputc(' ', stderr); /* keeps the reads */
}

/* The mapped rows: each measured back to back with a warm read() of the raw file (alternating which goes first),
 * whose times go out as raw_per_run so that report.py pairs them as it pairs numpy's. */
static void bench_map(const char *name, const State *s, const char *ckpt_path, const char *raw_path, int runs) {
    struct {
        const char *what;
        uint32_t flags;
        int touch;
    } kinds[] = {
        {"open + ckpt_reader_map every array + one byte per page", 0, 1},
        {"the same, CRC skipped (CKPT_MAP_UNVERIFIED)", CKPT_MAP_UNVERIFIED, 1},
        {"open + ckpt_reader_map every array, CRC skipped, nothing touched", CKPT_MAP_UNVERIFIED, 0},
    };
    enum { KINDS = sizeof kinds / sizeof kinds[0] };
    double *t = calloc((size_t)runs * KINDS, sizeof *t), *raw = calloc((size_t)runs * KINDS, sizeof *raw);
    double *cores = calloc((size_t)runs, sizeof *cores);
    if (!t || !raw || !cores) die("calloc");
    for (int k = 0; k < (int)KINDS; k++) {
        long long rss = -1;
        for (int r = -1; r < runs; r++) {
            for (int j = 0; j < 2; j++) {
                if ((j == 0) == ((r + 2) % 2 == 0)) {
                    const int reset_ok = peak_reset();
                    const double c0 = cpu_seconds(), t0 = now();
                    map_all(ckpt_path, kinds[k].flags, kinds[k].touch);
                    const double wall = now() - t0;
                    const long long above = peak_above_state(reset_ok);
                    if (r < 0) continue;
                    t[k * runs + r] = wall;
                    cores[r] = (cpu_seconds() - c0) / wall;
                    if (above > rss) rss = above;
                } else {
                    const double t0 = now();
                    raw_read(s, raw_path);
                    if (r >= 0) raw[k * runs + r] = now() - t0;
                }
            }
        }
        printf("result workload=%s op=map who=ckpt what=\"%s\" cache=warm per_run=", name, kinds[k].what);
        for (int r = 0; r < runs; r++) printf("%s%.6f", r ? "," : "", t[k * runs + r]);
        printf(" raw_per_run=");
        for (int r = 0; r < runs; r++) printf("%s%.6f", r ? "," : "", raw[k * runs + r]);
        printf(" seconds=%.6f cores=%.2f rss_above=%lld state_bytes=%zu file_bytes=%lld arrays=%d runs=%d\n",
               median(&t[k * runs], runs), median(cores, runs), rss, s->each * (size_t)s->count,
               file_size(ckpt_path), s->count, runs);
    }
    free(t);
    free(raw);
    free(cores);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_npz NAME MIB ARRAYS [--dir D] [--runs N] [--deflate L,...] [--no-cold] [--bf16]\n");
        return 2;
    }
    const char *name = argv[1];
    const size_t total = (size_t)atol(argv[2]) * 1024 * 1024;
    State s = {"/tmp", atoi(argv[3]), 0, NULL, NULL};
    int runs = 5, cold = 1, nlevels = 0, levels[MAX_LEVELS];
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) s.dir = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-cold") == 0) cold = 0;
        else if (strcmp(argv[i], "--bf16") == 0) s.bf16 = 1;
        else if (strcmp(argv[i], "--deflate") == 0 && i + 1 < argc) {
            for (char *p = argv[++i]; *p && nlevels < MAX_LEVELS; p += *p == ',')
                levels[nlevels++] = (int)strtol(p, &p, 10);
        } else {
            fprintf(stderr, "bench_npz: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (s.count < 1 || runs < 1 || total / (size_t)s.count < sizeof(float)) {
        fprintf(stderr, "bench_npz: need at least one array of at least one float, and one run\n");
        return 2;
    }
    /* Whole 32-bit words in each array, also in bfloat16: the checksum adds the state's 32-bit words. */
    s.each = total / (size_t)s.count / sizeof(float) * sizeof(float);
    const size_t n = s.each / (s.bf16 ? 2 : sizeof(float));
    const int64_t shape[1] = {(int64_t)n};

    /* The state: generated, so resident before anything is measured. */
    s.arrays = malloc(sizeof *s.arrays * (size_t)s.count);
    check(ckpt_vars_new(&s.vars), "ckpt_vars_new");
    uint64_t checksum = 0;
    for (int i = 0; i < s.count; i++) {
        if (!(s.arrays[i] = alloc_like_numpy(s.each))) die("malloc");
        fill(s.arrays[i], n, (uint64_t)i * n, s.bf16);
        for (size_t k = 0; k < s.each / 4; k++) {
            uint32_t w;
            memcpy(&w, &s.arrays[i][k], sizeof w);
            checksum += w;
        }
        char vname[32];
        snprintf(vname, sizeof vname, "layer%04d/w", i);
        check(ckpt_vars_add(s.vars, vname, s.bf16 ? CKPT_BFLOAT16 : CKPT_FLOAT32, 1, shape, s.arrays[i], CKPT_BORROW),
              "ckpt_vars_add");
    }
    state_kib = status_kib("VmRSS");
    /* bench/run compares this with bench_numpy's: both sides must measure the same bytes. */
    printf("data workload=%s checksum=%" PRIu64 "\n", name, checksum);

    char raw_path[4096], ckpt_path[MAX_LEVELS + 1][4096];
    snprintf(raw_path, sizeof raw_path, "%s/%s-raw.bin", s.dir, name);
    ckpt_options opts[MAX_LEVELS + 1];
    Measure saves[MAX_LEVELS + 1];
    const int nsaves = nlevels ? nlevels : 1;
    for (int l = 0; l < nsaves; l++) {
        char what[64];
        ckpt_options o = CKPT_OPTIONS_INIT;
        if (nlevels) {
            o.compression = CKPT_DEFLATE;
            o.level = levels[l];
            snprintf(what, sizeof what, "ckpt_save (deflate level %d)", levels[l]);
            snprintf(ckpt_path[l], sizeof ckpt_path[l], "%s/%s-ckpt-l%d.npz", s.dir, name, levels[l]);
        } else {
            snprintf(what, sizeof what, "ckpt_save");
            snprintf(ckpt_path[l], sizeof ckpt_path[l], "%s/%s-ckpt.npz", s.dir, name);
        }
        opts[l] = o;
        saves[l] = measure_new("save", "ckpt", what, "-", ckpt_path[l], runs);
    }
    Measure raw_save_m = measure_new("save", "raw", "write() + fsync + rename + dir fsync", "-", raw_path, runs);

    /* Restores read the first save's file. */
    const char *caches[2] = {"warm", "cold"};
    Measure restores[2], reads[2];
    for (int c = 0; c < 2; c++) {
        restores[c] =
            measure_new("restore", "ckpt", "ckpt_restore (CKPT_BORROW buffers)", caches[c], ckpt_path[0], runs);
        reads[c] = measure_new("restore", "raw", "read() into the same buffers", caches[c], raw_path, runs);
    }

    for (int r = -1; r < runs; r++) {
        fprintf(stderr, "  %s: ckpt and raw, %s\n", name, r < 0 ? "warm-up" : "run");
        /* Whichever goes second pays for the first one's writeback, and caches warm up: alternate the order. */
        const int ckpt_first = (r + 2) % 2 == 0;
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == ckpt_first)
                for (int l = 0; l < nsaves; l++) run_one(&s, &saves[l], SAVE_CKPT, &opts[l], r);
            else
                run_one(&s, &raw_save_m, SAVE_RAW, NULL, r);
        }
        if (r < 0) verify_restore(&s, ckpt_path[0]);
        for (int c = 0; c < 1 + cold; c++)
            for (int k = 0; k < 2; k++) {
                if ((k == 0) == ckpt_first) run_one(&s, &restores[c], RESTORE_CKPT, NULL, r);
                else run_one(&s, &reads[c], READ_RAW, NULL, r);
            }
    }

    if (!nlevels) {
        fprintf(stderr, "  %s: mapped views and raw\n", name);
        bench_map(name, &s, ckpt_path[0], raw_path, runs);
    }

    for (int l = 0; l < nsaves; l++) report(name, &s, &saves[l], runs);
    report(name, &s, &raw_save_m, runs);
    for (int c = 0; c < 1 + cold; c++) {
        report(name, &s, &restores[c], runs);
        report(name, &s, &reads[c], runs);
    }

    for (int l = 0; l < nsaves; l++) measure_free(&saves[l]);
    measure_free(&raw_save_m);
    for (int c = 0; c < 2; c++) {
        measure_free(&restores[c]);
        measure_free(&reads[c]);
    }
    for (int l = 0; l < nsaves; l++) unlink(ckpt_path[l]);
    unlink(raw_path);
    ckpt_vars_free(s.vars);
    for (int i = 0; i < s.count; i++) free(s.arrays[i]);
    free(s.arrays);
    return 0;
}
