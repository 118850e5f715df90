/* What the C benchmarks share: a clock, error checks, medians and the raw durable write they are measured
 * against. Header-only: each benchmark is one translation unit. */
#pragma once

#include <ckpt/ckpt.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void check(int rc, const char *what) {
    if (rc != CKPT_OK) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, ckpt_strerror(rc), ckpt_error_message());
        exit(1);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* write() of every array to "<path>.tmp", fsync, close, rename to path, fsync of dir: the floor for a durable
 * save of the same bytes. */
static void raw_save(const char *dir, const char *path, float *const *arrays, int count, size_t each) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(tmp);
    for (int i = 0; i < count; i++) {
        const char *p = (const char *)arrays[i];
        for (size_t left = each; left > 0;) {
            ssize_t w = write(fd, p, left);
            if (w < 0) die("write");
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0) die("fsync");
    if (rename(tmp, path) != 0) die("rename");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) die("directory fsync");
    close(dfd);
}
