/* SPDX-License-Identifier: Apache-2.0 */
/* safetensors through ckpt against the floor of the same work done by hand, in one run (docs/performance.md,
 * "safetensors"):
 *   save   ckpt_save of a .safetensors path      vs write() of the same bytes + fsync + rename + directory fsync
 *   load   ckpt_read (new arrays), warm cache     vs read() of the same bytes into new arrays
 *   map    open + ckpt_reader_map of one tensor + a byte of each of its pages, warm   vs ckpt_read of all of them
 *   index  ckpt_reader_open of an index of 1000 tensors over 8 shards (every header checked)
 *                                                      vs open() + read() of the index and of each shard's header
 * Usage: bench_safetensors NAME MIB ARRAYS [--dir D] [--runs N]
 *   MIB of float32 state in ARRAYS tensors of equal size (the index: 1000 tensors of the same MIB over 8 shards).
 * Output: one "result workload=NAME op=OP ckpt_s=.. floor_s=.. speed=.." line per measure: the medians of N runs of
 * each side after a warm-up, and the median of the runs' ratios floor/ckpt (> 1: ckpt is faster than its floor);
 * progress on stderr. */
#define _GNU_SOURCE
#include "bench_common.h"

#include <ckpt/ckpt.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *dir;
    int count;
    size_t each;
    float **arrays;
    ckpt_vars *vars;
} State;

typedef enum { SAVE_CKPT, SAVE_RAW, LOAD_CKPT, LOAD_RAW, MAP_ONE, OPEN_INDEX, READ_HEADERS } Kind;

typedef struct {
    const State *s;
    const char *path;     /* the file (or index) the operation works on */
    const char *raw_path; /* the raw file of the same bytes */
    int shards;           /* READ_HEADERS: the index's shards */
    char shard_fmt[4200]; /* READ_HEADERS: printf pattern of a shard's path, by number and count */
} Work;

/* A load gives every array at once: all are held until the end, as a loaded collection holds them (freeing each at
 * once would let malloc hand the next read memory that is already faulted in). */
static void load_raw(const Work *w) {
    int fd = open(w->raw_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(w->raw_path);
    float **arrays = calloc((size_t)w->s->count, sizeof *arrays);
    if (!arrays) die("calloc");
    for (int i = 0; i < w->s->count; i++) {
        arrays[i] = alloc_like_numpy(w->s->each);
        if (!arrays[i]) die("alloc");
        read_all(fd, arrays[i], w->s->each);
    }
    close(fd);
    for (int i = 0; i < w->s->count; i++) free(arrays[i]);
    free(arrays);
}

static void load_ckpt(const Work *w) {
    ckpt_vars *out = NULL;
    check(ckpt_read(&out, w->path, NULL), "ckpt_read");
    ckpt_vars_free(out);
}

static volatile unsigned char sink;

static void map_one(const Work *w) {
    ckpt_reader *npz = NULL;
    check(ckpt_reader_open(&npz, w->path, NULL), "ckpt_reader_open");
    size_t i = 0;
    check(ckpt_reader_find(npz, "t0007", &i), "ckpt_reader_find");
    const void *p = NULL;
    check(ckpt_reader_map(npz, i, &p), "ckpt_reader_map");
    const size_t n = ckpt_reader_nbytes(npz, i);
    unsigned char acc = 0;
    for (size_t at = 0; at < n; at += 4096) acc ^= ((const unsigned char *)p)[at];
    sink = acc;
    ckpt_reader_close(npz);
}

static void open_index(const Work *w) {
    ckpt_reader *npz = NULL;
    check(ckpt_reader_open(&npz, w->path, NULL), "ckpt_reader_open (index)");
    ckpt_reader_close(npz);
}

/* The floor of opening an index: read the index, and each shard's length and JSON header, without checking them. */
static void read_headers(const Work *w) {
    int fd = open(w->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(w->path);
    char buf[1 << 16];
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
    for (int k = 1; k <= w->shards; k++) {
        char shard[4300];
        snprintf(shard, sizeof shard, w->shard_fmt, k, w->shards);
        fd = open(shard, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die(shard);
        uint64_t n = 0;
        read_all(fd, &n, sizeof n);
        char *header = malloc(n);
        if (!header) die("malloc");
        read_all(fd, header, n);
        free(header);
        close(fd);
    }
}

static void run(const Work *w, Kind kind) {
    const State *s = w->s;
    switch (kind) {
        case SAVE_CKPT: check(ckpt_save(w->path, s->vars, NULL), "ckpt_save"); break;
        case SAVE_RAW: raw_save(s->dir, w->raw_path, s->arrays, s->count, s->each); break;
        case LOAD_CKPT: load_ckpt(w); break;
        case LOAD_RAW: load_raw(w); break;
        case MAP_ONE: map_one(w); break;
        case OPEN_INDEX: open_index(w); break;
        case READ_HEADERS: read_headers(w); break;
    }
}

/* ckpt's operation and its floor, run back to back `runs` times after one unmeasured run of each (the page cache
 * warm, the files in place), alternating which goes first so that a slow minute of a shared machine slows both:
 * their median seconds, and the median of the runs' own ratios floor/ckpt (docs/performance.md's method). */
typedef struct {
    double ckpt_s, floor_s, speed;
} Pair;

static Pair measure(const Work *w, Kind ckpt, const Work *floor_work, Kind floor, int runs) {
    double *a = malloc(sizeof *a * (size_t)runs), *b = malloc(sizeof *b * (size_t)runs),
           *ratio = malloc(sizeof *ratio * (size_t)runs);
    if (!a || !b || !ratio) die("malloc");
    run(w, ckpt);
    run(floor_work, floor);
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 2; k++) {
            const int ckpt_turn = (r + k) % 2 == 0;
            const double t0 = now();
            run(ckpt_turn ? w : floor_work, ckpt_turn ? ckpt : floor);
            (ckpt_turn ? a : b)[r] = now() - t0;
        }
        ratio[r] = b[r] / a[r];
    }
    const Pair p = {median(a, runs), median(b, runs), median(ratio, runs)};
    free(a);
    free(b);
    free(ratio);
    return p;
}

static void report(const char *name, const char *op, const char *what, Pair p) {
    printf("result workload=%s op=%s what=\"%s\" ckpt_s=%.6f floor_s=%.6f speed=%.3f\n", name, op, what, p.ckpt_s,
           p.floor_s, p.speed);
    fflush(stdout);
}

/* `count` float32 tensors "t0000", "t0001", … of `each` bytes, borrowed from arrays of the bench data. */
static State make_state(const char *dir, int count, size_t each) {
    State s = {dir, count, each, calloc((size_t)count, sizeof(float *)), NULL};
    if (!s.arrays) die("calloc");
    check(ckpt_vars_new(&s.vars), "ckpt_vars_new");
    for (int i = 0; i < count; i++) {
        s.arrays[i] = alloc_like_numpy(each);
        if (!s.arrays[i]) die("alloc");
        fill(s.arrays[i], each / 4, (uint64_t)i * (each / 4), 0);
        char name[16];
        snprintf(name, sizeof name, "t%04d", i);
        const int64_t shape[1] = {(int64_t)(each / 4)};
        check(ckpt_vars_add(s.vars, name, CKPT_FLOAT32, 1, shape, s.arrays[i], CKPT_BORROW), "ckpt_vars_add");
    }
    return s;
}

static void free_state(State *s) {
    for (int i = 0; i < s->count; i++) free(s->arrays[i]);
    free(s->arrays);
    ckpt_vars_free(s->vars);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_safetensors NAME MIB ARRAYS [--dir D] [--runs N]\n");
        return 2;
    }
    const char *name = argv[1];
    const size_t total = (size_t)atol(argv[2]) * 1024 * 1024;
    const int count = atoi(argv[3]);
    const char *dir = "/tmp";
    int runs = 5;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "bench_safetensors: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    const size_t each = total / (size_t)(count > 0 ? count : 1) / 4 * 4;
    if (count < 8 || each == 0 || runs < 1) {
        fprintf(stderr, "bench_safetensors: need at least 8 arrays of at least one float, and one run\n");
        return 2;
    }
    State s = make_state(dir, count, each);
    char path[4096], raw_path[4096];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    snprintf(raw_path, sizeof raw_path, "%s/%s-raw.bin", dir, name);
    Work w = {&s, path, raw_path, 0, ""};

    fprintf(stderr, "save: %d tensors of %zu bytes\n", count, each);
    report(name, "save", "ckpt_save vs write + fsync + rename + dir fsync", measure(&w, SAVE_CKPT, &w, SAVE_RAW, runs));
    fprintf(stderr, "load (warm)\n");
    report(name, "load", "ckpt_read vs read() into new arrays, warm", measure(&w, LOAD_CKPT, &w, LOAD_RAW, runs));
    fprintf(stderr, "map one tensor\n");
    report(name, "map", "open + ckpt_reader_map of 1 tensor, pages touched vs ckpt_read of all",
           measure(&w, MAP_ONE, &w, LOAD_CKPT, runs));
    free_state(&s);
    unlink(path);
    unlink(raw_path);

    /* An index of 1000 tensors over 8 shards. */
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/%s-sharded", dir, name);
    if (mkdir(folder, 0755) != 0 && access(folder, F_OK) != 0) die(folder);
    State many = make_state(dir, 1000, total / 1000 / 4 * 4 > 0 ? total / 1000 / 4 * 4 : 4);
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.max_shard_bytes = (uint64_t)many.count * many.each / 8;
    snprintf(path, sizeof path, "%s/model.safetensors", folder);
    check(ckpt_save(path, many.vars, &o), "ckpt_save (sharded)");
    Work index = {&many, "", "", 0, ""};
    char index_path[4200];
    snprintf(index_path, sizeof index_path, "%s.index.json", path);
    index.path = index_path;
    for (index.shards = 1; index.shards < 100; index.shards++) {
        char probe[4300];
        snprintf(probe, sizeof probe, "%s/model-%05d-of-%05d.safetensors", folder, 1, index.shards);
        if (access(probe, F_OK) == 0) break;
    }
    snprintf(index.shard_fmt, sizeof index.shard_fmt, "%s/model-%%05d-of-%%05d.safetensors", folder);
    fprintf(stderr, "open an index of 1000 tensors over %d shards\n", index.shards);
    char what[128];
    snprintf(what, sizeof what, "ckpt_reader_open of an index, 1000 tensors in %d shards vs reading the headers",
             index.shards);
    report(name, "index", what, measure(&index, OPEN_INDEX, &index, READ_HEADERS, runs));
    for (int k = 1; k <= index.shards; k++) {
        char shard[4300];
        snprintf(shard, sizeof shard, index.shard_fmt, k, index.shards);
        unlink(shard);
    }
    unlink(index_path);
    rmdir(folder);
    free_state(&many);
    return 0;
}
