/* SPDX-License-Identifier: Apache-2.0 */
/* What the C benchmarks share: a clock, error checks, medians, the bench data, memory for it, page cache eviction
 * and the raw durable write they are measured against. Header-only: each benchmark is one translation unit, which
 * defines _GNU_SOURCE before including it (posix_fadvise, MADV_HUGEPAGE). */
#pragma once

#include <ckpt/ckpt.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* The bench data, element k of the whole state (arrays in order): float32 of random sign, a bell-shaped exponent
 * over seven octaves (magnitudes ~0.002 to ~0.25, like trained weights) and 16 mantissa bits, so deflate finds
 * about as much to squeeze as in real float32 weights kept at reduced precision. bench_numpy.py computes the same
 * bits with numpy; keep the two in step. */
static uint32_t float_bits(uint64_t k) {
    uint64_t h = (k + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    const uint32_t exponent = 118 + (uint32_t)((h >> 56) & 3) + (uint32_t)((h >> 58) & 3);
    return ((uint32_t)(h >> 32) & 0x80000000u) | exponent << 23 | ((uint32_t)h & 0x7FFF80u);
}

/* n elements of the state from element `first` on: float32, or with bf16 their upper halves (bfloat16 bits). */
static void fill(void *dst, size_t n, uint64_t first, int bf16) {
    for (size_t j = 0; j < n; j++) {
        const uint32_t bits = float_bits(first + j);
        if (bf16) ((uint16_t *)dst)[j] = (uint16_t)(bits >> 16);
        else memcpy((char *)dst + j * 4, &bits, sizeof bits);
    }
}

/* Drops a file's pages from the page cache (it is clean: every save fsyncs), so the next read comes from the disk.
 * Only this file, unlike /proc/sys/vm/drop_caches, and no root needed. */
static void evict(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(path);
    if (fdatasync(fd) != 0) die("fdatasync");
    if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) die("posix_fadvise");
    close(fd);
}

/* Memory for an array. numpy madvises arrays of 4 MiB and more to transparent huge pages, and copies into huge
 * pages run three times faster on this machine than into 4 KiB pages (read() of 512 MiB from the page cache:
 * 0.09 s against 0.28 s), so large arrays here are 2 MiB-aligned and madvised too: both sides of the comparison
 * get the same kind of memory. */
static float *alloc_like_numpy(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < ((size_t)4 << 20)) return (float *)malloc(bytes);
    void *p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (p) (void)madvise(p, bytes, MADV_HUGEPAGE);
    return (float *)p;
}

/* write() of all n bytes at p to fd (as many calls as it takes). */
static void write_all(int fd, const void *p, size_t n) {
    for (const char *c = (const char *)p; n > 0;) {
        ssize_t w = write(fd, c, n);
        if (w < 0) die("write");
        c += w;
        n -= (size_t)w;
    }
}

/* read() of exactly n bytes from fd into p; a short file is an error. */
static void read_all(int fd, void *p, size_t n) {
    for (char *c = (char *)p; n > 0;) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) die("read");
        c += r;
        n -= (size_t)r;
    }
}

/* fsync of a directory: what makes the names of the files just created in it durable. */
static void fsync_dir(const char *dir) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) die("directory fsync");
    close(dfd);
}

/* write() of every array to "<path>.tmp", fsync, close, rename to path, fsync of dir: the floor for a durable
 * save of the same bytes. */
static void raw_save(const char *dir, const char *path, float *const *arrays, int count, size_t each) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die(tmp);
    for (int i = 0; i < count; i++) write_all(fd, arrays[i], each);
    if (fsync(fd) != 0 || close(fd) != 0) die("fsync");
    if (rename(tmp, path) != 0) die("rename");
    fsync_dir(dir);
}
