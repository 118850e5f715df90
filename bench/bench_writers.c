/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmarks of saving, as ratios measured in one run (never pass/fail):
 *  - how long a background save blocks the caller, against a memcpy of the same bytes;
 *  - synchronous save throughput, against raw write() + fsync + rename + directory fsync of the same bytes.
 * Usage: bench_writers [dir] [total MiB] [arrays] [runs]   (defaults: /tmp 512 64 5) */
#define _GNU_SOURCE
#include "bench_common.h"

#include <ckpt/ckpt.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    const size_t total_mib = argc > 2 ? (size_t)atol(argv[2]) : 512;
    const int count = argc > 3 ? atoi(argv[3]) : 64;
    const int runs = argc > 4 ? atoi(argv[4]) : 5;
    const size_t each = total_mib * 1024 * 1024 / (size_t)count;
    const int64_t shape[1] = {(int64_t)(each / sizeof(float))};

    float **arrays = malloc(sizeof *arrays * (size_t)count);
    float **copies = malloc(sizeof *copies * (size_t)count);
    ckpt_vars *vars;
    check(ckpt_vars_new(&vars), "ckpt_vars_new");
    for (int i = 0; i < count; i++) {
        arrays[i] = malloc(each);
        copies[i] = malloc(each);
        for (size_t k = 0; k < each / sizeof(float); k++) arrays[i][k] = (float)(k * 0.5 + i);
        memset(copies[i], 1, each); /* prefault: memcpy then measures copying, not page faults */
        char name[32];
        snprintf(name, sizeof name, "layer%03d/w", i);
        check(ckpt_vars_add(vars, name, CKPT_FLOAT32, 1, shape, arrays[i], CKPT_BORROW), "ckpt_vars_add");
    }

    char ckpt_path[4096], raw_path[4096];
    snprintf(ckpt_path, sizeof ckpt_path, "%s/bench_ckpt.npz", dir);
    snprintf(raw_path, sizeof raw_path, "%s/bench_raw.bin", dir);

    ckpt_writer_options wo = CKPT_WRITER_OPTIONS_INIT;
    wo.kind = CKPT_WRITER_THREAD;
    wo.out_dir = dir;
    ckpt_writer *bg;
    check(ckpt_writer_new(&bg, &wo), "ckpt_writer_new");

    double *t_memcpy = calloc((size_t)runs, sizeof(double)), *t_block = calloc((size_t)runs, sizeof(double));
    double *t_bg_total = calloc((size_t)runs, sizeof(double)), *t_sync = calloc((size_t)runs, sizeof(double));
    double *t_raw = calloc((size_t)runs, sizeof(double));
    for (int r = -1; r < runs; r++) { /* run -1 warms up caches and the page cache */
        double t0 = now();
        for (int i = 0; i < count; i++) memcpy(copies[i], arrays[i], each);
        double t1 = now();
        check(ckpt_writer_save_vars(bg, NULL, "bench_bg.npz", vars, NULL, 0), "ckpt_writer_save_vars");
        double t2 = now();
        check(ckpt_writer_wait(bg), "ckpt_writer_wait");
        double t3 = now();
        /* The disk remembers: whichever save runs second pays for the first one's writeback. Alternate. */
        double sync_s = 0, raw_s = 0;
        for (int k = 0; k < 2; k++) {
            double a = now();
            if ((k == 0) == (r % 2 == 0)) {
                check(ckpt_save(ckpt_path, vars, NULL), "ckpt_save");
                sync_s = now() - a;
            } else {
                raw_save(dir, raw_path, arrays, count, each);
                raw_s = now() - a;
            }
        }
        if (r >= 0) {
            t_memcpy[r] = t1 - t0;
            t_block[r] = t2 - t1;
            t_bg_total[r] = t3 - t1;
            t_sync[r] = sync_s;
            t_raw[r] = raw_s;
        }
    }
    const double mib = (double)each * count / (1024.0 * 1024.0);
    const double m_memcpy = median(t_memcpy, runs), m_block = median(t_block, runs);
    const double m_bg = median(t_bg_total, runs), m_sync = median(t_sync, runs), m_raw = median(t_raw, runs);
    printf("state: %.0f MiB in %d float32 arrays; directory %s; median of %d runs after a warm-up\n\n", mib, count,
           dir, runs);
    printf("| measure | seconds | MiB/s | ratio |\n|---|---|---|---|\n");
    printf("| memcpy of the state (prefaulted) | %.3f | %.0f | 1.00 |\n", m_memcpy, mib / m_memcpy);
    printf("| background save: caller blocked | %.3f | %.0f | %.2f x memcpy (goal <= 1.5) |\n", m_block,
           mib / m_block, m_block / m_memcpy);
    printf("| background save: until durable | %.3f | %.0f | |\n", m_bg, mib / m_bg);
    printf("| raw write+fsync+rename+dir fsync | %.3f | %.0f | 1.00 |\n", m_raw, mib / m_raw);
    printf("| ckpt_save (synchronous) | %.3f | %.0f | %.2f x raw throughput (goal >= 0.8) |\n", m_sync, mib / m_sync,
           m_raw / m_sync);

    check(ckpt_writer_finalize(bg), "ckpt_writer_finalize");
    ckpt_writer_free(bg);
    ckpt_vars_free(vars);
    unlink(ckpt_path);
    unlink(raw_path);
    char bg_path[4096];
    snprintf(bg_path, sizeof bg_path, "%s/bench_bg.npz", dir);
    unlink(bg_path);
    for (int i = 0; i < count; i++) {
        free(arrays[i]);
        free(copies[i]);
    }
    free(arrays); free(copies); free(t_memcpy); free(t_block); free(t_bg_total); free(t_sync); free(t_raw);
    return 0;
}
