/* SPDX-License-Identifier: Apache-2.0 */
/* A storage written in C through ckpt_storage_ops, as an FFI user would plug one in: a table of files in memory
 * (path -> malloc'd bytes) behind a pthread mutex. The program checks that ckpt saves and reads checkpoints
 * through it bit-exact, directly and from a background writer; that a failing write callback fails the save with
 * its code and a message naming the operation and the path, keeps the previous file and removes the temporary
 * through the remove callback; and that the destroy callback runs exactly once, when the last user is gone.
 *
 * C99 only, compiled with -pedantic. Prints "N passed, M failed"; exits non-zero if anything failed. */
#include "ckpt/ckpt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------ checks */

/* Checks run on the threads a test starts, too. */
static pthread_mutex_t g_check_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_passed;
static int g_failed;

static void check(int ok, const char *what, const char *file, int line) {
    pthread_mutex_lock(&g_check_mutex);
    if (ok) {
        ++g_passed;
    } else {
        ++g_failed;
        fprintf(stderr, "%s:%d: check failed: %s\n  last ckpt message: %s\n", file, line, what,
                ckpt_error_message());
    }
    pthread_mutex_unlock(&g_check_mutex);
}
#define CHECK(cond) check((cond) != 0, #cond, __FILE__, __LINE__)

static int contains(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

/* ------------------------------------------------------------------------------------- the storage, in C */

typedef struct mem_file {
    char *path;
    unsigned char *data;
    size_t size;
    size_t cap;
    struct mem_file *next;
} mem_file;

typedef struct mem_dir {
    char *path;
    struct mem_dir *next;
} mem_dir;

typedef struct mem_store {
    pthread_mutex_t mutex;
    mem_file *files;
    mem_dir *dirs;
    int fail_write; /* while set, the write callback fails with CKPT_EIO */
    /* How clone_range shares: 0 all of each range (copied from the source's bytes), 1 its second half (the first
     * written from data), 2 claims one byte more than it was given. */
    int clone_mode;
    int clones;              /* clone_range calls */
    uint64_t cloned, shared; /* bytes offered to clone_range, bytes it reported shared */
    /* How often each callback ran. */
    int creates, appends, writes, syncs, closes, renames, dir_syncs, removes, lists, read_opens, read_closes;
    int dir_removes;
    int destroyed;
    char last_removed[512];
} mem_store;

/* A file opened for reading: a snapshot of its bytes, so later writes to the path do not show through. */
typedef struct mem_reader {
    unsigned char *data;
    size_t size;
} mem_reader;

static char *copy_string(const char *s) {
    const size_t n = strlen(s) + 1;
    char *p = (char *)malloc(n);
    if (p != NULL) memcpy(p, s, n);
    return p;
}

/* The directory part of path into buf: "." when there is no slash, "/" for "/name". */
static void parent_of(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    size_t n;
    if (slash == NULL) {
        snprintf(buf, size, ".");
        return;
    }
    n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= size) n = size - 1;
    memcpy(buf, path, n);
    buf[n] = '\0';
}

static const char *name_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* Callers hold the mutex. */
static int dir_exists(const mem_store *st, const char *dir) {
    const mem_dir *d;
    if (strcmp(dir, "") == 0 || strcmp(dir, ".") == 0 || strcmp(dir, "/") == 0) return 1;
    for (d = st->dirs; d != NULL; d = d->next)
        if (strcmp(d->path, dir) == 0) return 1;
    return 0;
}

static mem_file *find_file(const mem_store *st, const char *path) {
    mem_file *f;
    for (f = st->files; f != NULL; f = f->next)
        if (strcmp(f->path, path) == 0) return f;
    return NULL;
}

static int parent_exists(const mem_store *st, const char *path) {
    char dir[512];
    parent_of(path, dir, sizeof dir);
    return dir_exists(st, dir);
}

static mem_file *add_file(mem_store *st, const char *path) {
    mem_file *f = (mem_file *)calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    f->path = copy_string(path);
    if (f->path == NULL) {
        free(f);
        return NULL;
    }
    f->next = st->files;
    st->files = f;
    return f;
}

static void free_file(mem_file *f) {
    free(f->path);
    free(f->data);
    free(f);
}

static int unlink_file(mem_store *st, const char *path) {
    mem_file **link;
    for (link = &st->files; *link != NULL; link = &(*link)->next) {
        if (strcmp((*link)->path, path) == 0) {
            mem_file *f = *link;
            *link = f->next;
            free_file(f);
            return 1;
        }
    }
    return 0;
}

static int add_dir(mem_store *st, const char *dir) {
    mem_dir *d;
    if (dir_exists(st, dir)) return CKPT_OK;
    d = (mem_dir *)calloc(1, sizeof *d);
    if (d == NULL) return CKPT_ENOMEM;
    d->path = copy_string(dir);
    if (d->path == NULL) {
        free(d);
        return CKPT_ENOMEM;
    }
    d->next = st->dirs;
    st->dirs = d;
    return CKPT_OK;
}

static int cb_make_dirs(void *payload, const char *dir) {
    mem_store *st = (mem_store *)payload;
    char prefix[512];
    size_t i, n = strlen(dir);
    int rc = CKPT_OK;
    if (n >= sizeof prefix) return CKPT_EINVAL;
    pthread_mutex_lock(&st->mutex);
    for (i = 1; i <= n && rc == CKPT_OK; ++i) {
        if (i == n || dir[i] == '/') {
            memcpy(prefix, dir, i);
            prefix[i] = '\0';
            rc = find_file(st, prefix) != NULL ? CKPT_EIO : add_dir(st, prefix);
        }
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_create(void *payload, const char *path, void **file) {
    mem_store *st = (mem_store *)payload;
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->creates;
    if (find_file(st, path) != NULL || dir_exists(st, path)) {
        rc = CKPT_EEXIST;
    } else if (!parent_exists(st, path)) {
        rc = CKPT_ENOTFOUND;
    } else {
        mem_file *f = add_file(st, path);
        if (f == NULL) rc = CKPT_ENOMEM;
        *file = f;
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_open_append(void *payload, const char *path, void **file) {
    mem_store *st = (mem_store *)payload;
    mem_file *f;
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->appends;
    f = find_file(st, path);
    if (f == NULL) {
        if (!parent_exists(st, path)) {
            rc = CKPT_ENOTFOUND;
        } else {
            f = add_file(st, path);
            if (f == NULL) rc = CKPT_ENOMEM;
        }
    }
    *file = f;
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_write(void *payload, void *file, const void *data, size_t size) {
    mem_store *st = (mem_store *)payload;
    mem_file *f = (mem_file *)file;
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->writes;
    if (st->fail_write) {
        rc = CKPT_EIO;
    } else if (size > 0) {
        if (f->size + size > f->cap) {
            size_t cap = f->cap > 0 ? f->cap : 256;
            unsigned char *grown;
            while (cap < f->size + size) cap *= 2;
            grown = (unsigned char *)realloc(f->data, cap);
            if (grown == NULL) {
                pthread_mutex_unlock(&st->mutex);
                return CKPT_ENOMEM;
            }
            f->data = grown;
            f->cap = cap;
        }
        memcpy(f->data + f->size, data, size);
        f->size += size;
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_sync(void *payload, void *file) {
    mem_store *st = (mem_store *)payload;
    (void)file;
    pthread_mutex_lock(&st->mutex);
    ++st->syncs;
    pthread_mutex_unlock(&st->mutex);
    return CKPT_OK;
}

static int cb_close(void *payload, void *file) {
    mem_store *st = (mem_store *)payload;
    (void)file;
    pthread_mutex_lock(&st->mutex);
    ++st->closes;
    pthread_mutex_unlock(&st->mutex);
    return CKPT_OK;
}

static int cb_rename(void *payload, const char *from, const char *to) {
    mem_store *st = (mem_store *)payload;
    mem_file *f;
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->renames;
    f = find_file(st, from);
    if (f == NULL || !parent_exists(st, to)) {
        rc = CKPT_ENOTFOUND;
    } else if (strcmp(from, to) != 0) {
        char *path = copy_string(to);
        if (path == NULL) {
            rc = CKPT_ENOMEM;
        } else {
            unlink_file(st, to);
            free(f->path);
            f->path = path;
        }
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_sync_dir(void *payload, const char *dir) {
    mem_store *st = (mem_store *)payload;
    int rc;
    pthread_mutex_lock(&st->mutex);
    ++st->dir_syncs;
    rc = dir_exists(st, dir) ? CKPT_OK : CKPT_ENOTFOUND;
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_remove(void *payload, const char *path) {
    mem_store *st = (mem_store *)payload;
    int rc;
    pthread_mutex_lock(&st->mutex);
    ++st->removes;
    snprintf(st->last_removed, sizeof st->last_removed, "%s", path);
    rc = unlink_file(st, path) ? CKPT_OK : CKPT_ENOTFOUND;
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_list(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx) {
    mem_store *st = (mem_store *)payload;
    const mem_file *f;
    char parent[512];
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->lists;
    if (!dir_exists(st, dir)) rc = CKPT_ENOTFOUND;
    for (f = st->files; f != NULL && rc == CKPT_OK; f = f->next) {
        parent_of(f->path, parent, sizeof parent);
        if (strcmp(parent, dir) == 0) rc = entry(name_of(f->path), ctx);
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_open_read(void *payload, const char *path, void **file, uint64_t *size) {
    mem_store *st = (mem_store *)payload;
    const mem_file *f;
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    f = find_file(st, path);
    if (f == NULL) {
        rc = CKPT_ENOTFOUND;
    } else {
        mem_reader *r = (mem_reader *)calloc(1, sizeof *r);
        if (r != NULL && f->size > 0) r->data = (unsigned char *)malloc(f->size);
        if (r == NULL || (f->size > 0 && r->data == NULL)) {
            free(r);
            rc = CKPT_ENOMEM;
        } else {
            if (f->size > 0) memcpy(r->data, f->data, f->size);
            r->size = f->size;
            *file = r;
            *size = r->size;
            ++st->read_opens;
        }
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_read_at(void *payload, void *file, uint64_t offset, void *dst, size_t size, size_t *got) {
    const mem_reader *r = (const mem_reader *)file;
    size_t n = 0;
    (void)payload;
    if (offset < r->size) {
        n = r->size - (size_t)offset;
        if (n > size) n = size;
        memcpy(dst, r->data + offset, n);
    }
    *got = n;
    return CKPT_OK;
}

static void cb_close_read(void *payload, void *file) {
    mem_store *st = (mem_store *)payload;
    mem_reader *r = (mem_reader *)file;
    free(r->data);
    free(r);
    pthread_mutex_lock(&st->mutex);
    ++st->read_closes;
    pthread_mutex_unlock(&st->mutex);
}

/* Appends bytes of a file being written, under the mutex. */
static int append_locked(mem_file *f, const unsigned char *data, size_t size) {
    if (f->size + size > f->cap) {
        size_t cap = f->cap > 0 ? f->cap : 256;
        unsigned char *grown;
        while (cap < f->size + size) cap *= 2;
        grown = (unsigned char *)realloc(f->data, cap);
        if (grown == NULL) return CKPT_ENOMEM;
        f->data = grown;
        f->cap = cap;
    }
    if (size > 0) memcpy(f->data + f->size, data, size);
    f->size += size;
    return CKPT_OK;
}

/* Shares as a copy from the source's bytes (not from data), so that a range ckpt got wrong shows in the file. */
static int cb_clone_range(void *payload, void *file, void *source, uint64_t offset, uint64_t size, const void *data,
                          uint64_t *shared) {
    mem_store *st = (mem_store *)payload;
    mem_file *f = (mem_file *)file;
    const mem_reader *r = (const mem_reader *)source;
    const uint64_t written = st->clone_mode == 1 ? size / 2 : 0;
    int rc;
    if (offset > r->size || size > r->size - offset) return CKPT_EIO;
    pthread_mutex_lock(&st->mutex);
    ++st->clones;
    st->cloned += size;
    rc = append_locked(f, (const unsigned char *)data, (size_t)written);
    if (rc == CKPT_OK) rc = append_locked(f, r->data + offset + written, (size_t)(size - written));
    *shared = st->clone_mode == 2 ? size + 1 : size - written;
    st->shared += *shared;
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static void cb_destroy(void *payload) {
    mem_store *st = (mem_store *)payload;
    pthread_mutex_lock(&st->mutex);
    ++st->destroyed;
    pthread_mutex_unlock(&st->mutex);
}

static void store_init(mem_store *st) {
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mutex, NULL);
}

static void store_clear(mem_store *st) {
    while (st->files != NULL) {
        mem_file *f = st->files;
        st->files = f->next;
        free_file(f);
    }
    while (st->dirs != NULL) {
        mem_dir *d = st->dirs;
        st->dirs = d->next;
        free(d->path);
        free(d);
    }
    pthread_mutex_destroy(&st->mutex);
}

static ckpt_storage_ops store_ops(mem_store *st) {
    ckpt_storage_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.version = CKPT_STORAGE_OPS_VERSION;
    ops.payload = st;
    ops.make_dirs = cb_make_dirs;
    ops.create = cb_create;
    ops.open_append = cb_open_append;
    ops.write = cb_write;
    ops.sync = cb_sync;
    ops.close = cb_close;
    ops.rename = cb_rename;
    ops.sync_dir = cb_sync_dir;
    ops.remove = cb_remove;
    ops.list = cb_list;
    ops.open_read = cb_open_read;
    ops.read_at = cb_read_at;
    ops.close_read = cb_close_read;
    ops.destroy = cb_destroy;
    return ops;
}

static ckpt_storage *store_storage(mem_store *st) {
    const ckpt_storage_ops ops = store_ops(st);
    ckpt_storage *storage = NULL;
    const int rc = ckpt_storage_new(&storage, &ops);
    CHECK(rc == CKPT_OK);
    if (rc != CKPT_OK) {
        fprintf(stderr, "cannot go on without a storage\n");
        exit(1);
    }
    return storage;
}

/* Reads of the store from the test's thread, under the mutex the callbacks use. */
static int counter(mem_store *st, const int *field) {
    int v;
    pthread_mutex_lock(&st->mutex);
    v = *field;
    pthread_mutex_unlock(&st->mutex);
    return v;
}

/* A malloc'd copy of a file's bytes (*size set), or NULL when there is no such file. */
static unsigned char *store_bytes(mem_store *st, const char *path, size_t *size) {
    unsigned char *copy = NULL;
    const mem_file *f;
    pthread_mutex_lock(&st->mutex);
    f = find_file(st, path);
    if (f != NULL) {
        copy = (unsigned char *)malloc(f->size + 1);
        if (copy != NULL && f->size > 0) memcpy(copy, f->data, f->size);
        *size = f->size;
    }
    pthread_mutex_unlock(&st->mutex);
    return copy;
}

static int store_has(mem_store *st, const char *path) {
    int has;
    pthread_mutex_lock(&st->mutex);
    has = find_file(st, path) != NULL;
    pthread_mutex_unlock(&st->mutex);
    return has;
}

/* Files whose name looks like a ckpt temporary (".<name>.tmp-XXXXXX"). */
static int store_temporaries(mem_store *st) {
    const mem_file *f;
    int n = 0;
    pthread_mutex_lock(&st->mutex);
    for (f = st->files; f != NULL; f = f->next)
        if (name_of(f->path)[0] == '.' && contains(f->path, ".tmp-")) ++n;
    pthread_mutex_unlock(&st->mutex);
    return n;
}

static void store_set_fail_write(mem_store *st, int fail) {
    pthread_mutex_lock(&st->mutex);
    st->fail_write = fail;
    pthread_mutex_unlock(&st->mutex);
}

/* --------------------------------------------------------------------------------------- checkpoint data */

/* Values that make a bit-exact comparison mean something: a NaN with a payload, negative zero, extremes. */
typedef struct sample {
    uint32_t weights[6]; /* float32 2x3, as raw bits */
    int64_t step;        /* int64 0-d */
    uint8_t mask[3];     /* bool 3 */
    uint64_t moments[4]; /* complex128 2, as raw bits */
    uint32_t names[6];   /* '<U3' 2, UTF-32 */
} sample;

static void sample_fill(sample *s, unsigned seed) {
    static const uint32_t weights[6] = {0x7fc00123u, 0x80000000u, 0x7f800000u, 0x00000001u, 0x7f7fffffu, 0x3fc00000u};
    int i;
    for (i = 0; i < 6; ++i) s->weights[i] = weights[i] ^ (seed & 0xffu);
    s->step = (int64_t)seed * 1000003 - 9000000000000000000LL;
    s->mask[0] = 1;
    s->mask[1] = (uint8_t)(seed & 1u);
    s->mask[2] = 0;
    s->moments[0] = 0x7ff8000000000badULL;
    s->moments[1] = 0x8000000000000000ULL;
    s->moments[2] = 0x0000000000000001ULL + seed;
    s->moments[3] = 0xffefffffffffffffULL;
    s->names[0] = 'a';
    s->names[1] = 0xe9;
    s->names[2] = 0x1f600;
    s->names[3] = 'x' + (seed % 3);
    s->names[4] = 0;
    s->names[5] = 0;
}

/* A collection that owns copies of the sample's bytes. */
static ckpt_vars *sample_vars(const sample *s) {
    static const int64_t weights_shape[2] = {2, 3};
    static const int64_t mask_shape[1] = {3};
    static const int64_t moments_shape[1] = {2};
    static const int64_t names_shape[1] = {2};
    static const int64_t empty_shape[2] = {0, 5};
    ckpt_vars *v = NULL;
    int ok = ckpt_vars_new(&v) == CKPT_OK;
    ok = ok && ckpt_vars_add(v, "layer/weights", CKPT_FLOAT32, 2, weights_shape, s->weights, CKPT_COPY) == CKPT_OK;
    ok = ok && ckpt_vars_add(v, "step", CKPT_INT64, 0, NULL, &s->step, CKPT_COPY) == CKPT_OK;
    ok = ok && ckpt_vars_add(v, "mask", CKPT_BOOL, 1, mask_shape, s->mask, CKPT_COPY) == CKPT_OK;
    ok = ok && ckpt_vars_add(v, "moments", CKPT_COMPLEX128, 1, moments_shape, s->moments, CKPT_COPY) == CKPT_OK;
    ok = ok && ckpt_vars_add_strings(v, "names", CKPT_UNICODE, 12, 1, names_shape, s->names, CKPT_COPY) == CKPT_OK;
    ok = ok && ckpt_vars_add(v, "empty", CKPT_UINT8, 2, empty_shape, NULL, CKPT_COPY) == CKPT_OK;
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "cannot go on without the sample collection\n");
        exit(1);
    }
    return v;
}

/* 1 when both collections hold the same names in the same order with the same dtypes, shapes and bytes. */
static int same_vars(const ckpt_vars *a, const ckpt_vars *b) {
    size_t i, n = ckpt_vars_count(a);
    if (a == NULL || b == NULL || ckpt_vars_count(b) != n) return 0;
    for (i = 0; i < n; ++i) {
        const uint32_t ndim = ckpt_vars_ndim(a, i);
        const size_t nbytes = ckpt_vars_nbytes(a, i);
        if (strcmp(ckpt_vars_name(a, i), ckpt_vars_name(b, i)) != 0) return 0;
        if (ckpt_vars_dtype(a, i) != ckpt_vars_dtype(b, i)) return 0;
        if (ckpt_vars_itemsize(a, i) != ckpt_vars_itemsize(b, i)) return 0;
        if (ckpt_vars_ndim(b, i) != ndim) return 0;
        if (ndim > 0 && memcmp(ckpt_vars_shape(a, i), ckpt_vars_shape(b, i), ndim * sizeof(int64_t)) != 0) return 0;
        if (ckpt_vars_nbytes(b, i) != nbytes) return 0;
        if (nbytes > 0 && memcmp(ckpt_vars_data(a, i), ckpt_vars_data(b, i), nbytes) != 0) return 0;
    }
    return 1;
}

/* One array of 17 MiB: above the size at which stored saves compute CRC-32s on a second thread. */
static ckpt_vars *big_vars(unsigned seed) {
    const size_t n = (size_t)17 << 20;
    const int64_t shape[1] = {(int64_t)n};
    ckpt_vars *v = NULL;
    unsigned char *data = (unsigned char *)malloc(n);
    size_t i;
    int ok = data != NULL && ckpt_vars_new(&v) == CKPT_OK;
    for (i = 0; ok && i < n; ++i) data[i] = (unsigned char)((i * 2654435761u) >> 13) ^ (unsigned char)seed;
    ok = ok && ckpt_vars_add(v, "big", CKPT_UINT8, 1, shape, data, CKPT_COPY) == CKPT_OK;
    free(data);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "cannot go on without the big collection\n");
        exit(1);
    }
    return v;
}

static ckpt_options npz_options(ckpt_storage *storage) {
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.storage = storage;
    return o;
}

/* 1 when the npz at path (read through storage) equals expected. */
static int reads_back(ckpt_storage *storage, const char *path, const ckpt_vars *expected) {
    const ckpt_options o = npz_options(storage);
    ckpt_vars *back = NULL;
    int same;
    if (ckpt_read(&back, path, &o) != CKPT_OK) {
        fprintf(stderr, "reading %s: %s\n", path, ckpt_error_message());
        return 0;
    }
    same = same_vars(expected, back);
    ckpt_vars_free(back);
    return same;
}

static ckpt_writer *queue_writer(ckpt_storage *storage, const char *out_dir, uint32_t depth) {
    ckpt_writer_options o;
    ckpt_writer *w = NULL;
    CHECK(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
    o.kind = CKPT_WRITER_QUEUE;
    o.queue_depth = depth;
    o.storage = storage;
    o.out_dir = out_dir;
    CHECK(ckpt_writer_new(&w, &o) == CKPT_OK);
    if (w == NULL) {
        fprintf(stderr, "cannot go on without a writer\n");
        exit(1);
    }
    return w;
}

/* A save function writing a NUL-terminated string in two pieces, and passing on the sink's errors. */
static int write_text(ckpt_sink *sink, void *payload) {
    const char *text = (const char *)payload;
    const size_t n = strlen(text), half = n / 2;
    int rc = ckpt_sink_write(sink, text, half);
    if (rc != CKPT_OK) return rc;
    return ckpt_sink_write(sink, text + half, n - half);
}

/* A careless save function: it ignores what ckpt_sink_write returns. */
static int write_text_ignoring_errors(ckpt_sink *sink, void *payload) {
    const char *text = (const char *)payload;
    (void)ckpt_sink_write(sink, text, strlen(text));
    return CKPT_OK;
}

static int store_file_is(mem_store *st, const char *path, const char *text) {
    size_t size = 0;
    unsigned char *bytes = store_bytes(st, path, &size);
    const int same = bytes != NULL && size == strlen(text) && memcmp(bytes, text, size) == 0;
    free(bytes);
    return same;
}

/* ------------------------------------------------------------------------------------------------- tests */

static void test_npz_round_trip_through_c_storage(void) {
    mem_store st;
    ckpt_storage *storage;
    ckpt_vars *vars;
    ckpt_options o;
    sample s;
    ckpt_vars *on_disk = NULL;

    store_init(&st);
    storage = store_storage(&st);
    CHECK(cb_make_dirs(&st, "run/ckpt") == CKPT_OK);
    sample_fill(&s, 1);
    vars = sample_vars(&s);

    o = npz_options(storage);
    CHECK(ckpt_save("run/ckpt/stored.npz", vars, &o) == CKPT_OK);
    CHECK(reads_back(storage, "run/ckpt/stored.npz", vars));

    o.compression = CKPT_DEFLATE;
    CHECK(ckpt_save("run/ckpt/deflated.npz", vars, &o) == CKPT_OK);
    CHECK(reads_back(storage, "run/ckpt/deflated.npz", vars));

    o.compression = CKPT_STORE;
    o.layout = CKPT_LAYOUT_OBJAX;
    CHECK(ckpt_save("run/ckpt/objax.npz", vars, &o) == CKPT_OK);
    CHECK(reads_back(storage, "run/ckpt/objax.npz", vars));

    /* The files live in the C table, not on the local filesystem; nothing temporary is left. */
    CHECK(store_has(&st, "run/ckpt/stored.npz"));
    CHECK(ckpt_read(&on_disk, "run/ckpt/stored.npz", NULL) == CKPT_ENOTFOUND);
    CHECK(on_disk == NULL);
    CHECK(store_temporaries(&st) == 0);
    /* The atomic sequence ran through the callbacks: each file created, synced, closed once, renamed,
     * and its directory synced; every file opened for reading was released. */
    CHECK(counter(&st, &st.creates) == 3);
    CHECK(counter(&st, &st.syncs) == 3);
    CHECK(counter(&st, &st.closes) == 3);
    CHECK(counter(&st, &st.renames) == 3);
    CHECK(counter(&st, &st.dir_syncs) == 3);
    CHECK(counter(&st, &st.removes) == 0);
    CHECK(counter(&st, &st.read_opens) == counter(&st, &st.read_closes));

    /* A save into a directory the storage does not have fails with the callback's code. */
    o.layout = CKPT_LAYOUT_AUTO;
    CHECK(ckpt_save("nowhere/model.npz", vars, &o) == CKPT_ENOTFOUND);
    CHECK(contains(ckpt_error_message(), "nowhere"));

    ckpt_vars_free(vars);
    ckpt_storage_free(storage);
    CHECK(st.destroyed == 1);
    store_clear(&st);
}

static void test_queue_writer_round_trip_through_c_storage(void) {
    enum { kSaves = 6 };
    mem_store st;
    ckpt_storage *storage;
    ckpt_writer *w;
    ckpt_vars *expected[kSaves];
    char path[64];
    sample s;
    int i;
    static const char raw_text[] = "raw bytes from a save function";

    store_init(&st);
    storage = store_storage(&st);
    CHECK(cb_make_dirs(&st, "ckpts") == CKPT_OK);
    w = queue_writer(storage, "ckpts", 2);

    for (i = 0; i < kSaves; ++i) {
        ckpt_vars *live;
        sample_fill(&s, (unsigned)i + 10);
        live = sample_vars(&s);
        expected[i] = sample_vars(&s);
        snprintf(path, sizeof path, "step-%d.npz", i);
        CHECK(ckpt_writer_save_vars(w, NULL, path, live, NULL, 0) == CKPT_OK);
        /* The background save took a copy: training may change and free its arrays at once. */
        memset(ckpt_vars_data(live, 0), 0xEE, ckpt_vars_nbytes(live, 0));
        ckpt_vars_free(live);
    }
    {
        ckpt_vars *big = big_vars(3);
        CHECK(ckpt_writer_save_vars(w, NULL, "big.npz", big, NULL, 0) == CKPT_OK);
        CHECK(ckpt_writer_wait(w) == CKPT_OK);
        CHECK(reads_back(storage, "ckpts/big.npz", big));
        ckpt_vars_free(big);
    }
    CHECK(ckpt_writer_save(w, NULL, "raw.bin", write_text, (void *)raw_text, 0) == CKPT_OK);
    CHECK(ckpt_writer_save(w, NULL, "log.txt", write_text, (void *)"first;", CKPT_APPEND) == CKPT_OK);
    CHECK(ckpt_writer_save(w, NULL, "log.txt", write_text, (void *)"second;", CKPT_APPEND) == CKPT_OK);
    CHECK(ckpt_writer_wait(w) == CKPT_OK);

    for (i = 0; i < kSaves; ++i) {
        snprintf(path, sizeof path, "ckpts/step-%d.npz", i);
        CHECK(reads_back(storage, path, expected[i]));
        ckpt_vars_free(expected[i]);
    }
    CHECK(store_file_is(&st, "ckpts/raw.bin", raw_text));
    CHECK(store_file_is(&st, "ckpts/log.txt", "first;second;"));
    CHECK(counter(&st, &st.appends) == 2);
    CHECK(store_temporaries(&st) == 0);
    CHECK(counter(&st, &st.creates) + counter(&st, &st.appends) == counter(&st, &st.closes));

    CHECK(ckpt_writer_finalize(w) == CKPT_OK);
    ckpt_writer_free(w);
    ckpt_storage_free(storage);
    CHECK(st.destroyed == 1);
    store_clear(&st);
}

typedef struct concurrent_saver {
    ckpt_storage *storage;
    const char *dir;
    int failures;
} concurrent_saver;

static void *save_many(void *arg) {
    concurrent_saver *c = (concurrent_saver *)arg;
    ckpt_writer_options o;
    ckpt_writer *w = NULL;
    sample s;
    char name[32];
    int i;
    if (ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) != CKPT_OK) {
        c->failures = 1000;
        return NULL;
    }
    o.kind = CKPT_WRITER_QUEUE;
    o.queue_depth = 3;
    o.storage = c->storage;
    o.out_dir = c->dir;
    if (ckpt_writer_new(&w, &o) != CKPT_OK) {
        c->failures = 1000;
        return NULL;
    }
    for (i = 0; i < 10; ++i) {
        ckpt_vars *v;
        sample_fill(&s, (unsigned)i);
        v = sample_vars(&s);
        snprintf(name, sizeof name, "%d.npz", i);
        if (ckpt_writer_save_vars(w, NULL, name, v, NULL, 0) != CKPT_OK) ++c->failures;
        ckpt_vars_free(v);
    }
    if (ckpt_writer_finalize(w) != CKPT_OK) ++c->failures;
    ckpt_writer_free(w);
    return NULL;
}

static void test_writers_on_two_threads_share_one_c_storage(void) {
    mem_store st;
    ckpt_storage *storage;
    concurrent_saver a, b;
    pthread_t ta, tb;
    sample s;
    char path[32];
    int i;

    store_init(&st);
    storage = store_storage(&st);
    CHECK(cb_make_dirs(&st, "a") == CKPT_OK);
    CHECK(cb_make_dirs(&st, "b") == CKPT_OK);
    a.storage = storage;
    a.dir = "a";
    a.failures = 0;
    b = a;
    b.dir = "b";
    CHECK(pthread_create(&ta, NULL, save_many, &a) == 0);
    CHECK(pthread_create(&tb, NULL, save_many, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.failures == 0);
    CHECK(b.failures == 0);
    for (i = 0; i < 10; ++i) {
        ckpt_vars *expected;
        sample_fill(&s, (unsigned)i);
        expected = sample_vars(&s);
        snprintf(path, sizeof path, "a/%d.npz", i);
        CHECK(reads_back(storage, path, expected));
        snprintf(path, sizeof path, "b/%d.npz", i);
        CHECK(reads_back(storage, path, expected));
        ckpt_vars_free(expected);
    }
    CHECK(store_temporaries(&st) == 0);
    ckpt_storage_free(storage);
    CHECK(st.destroyed == 1);
    store_clear(&st);
}

static void test_failing_write_callback(void) {
    mem_store st;
    ckpt_storage *storage;
    ckpt_writer *w;
    ckpt_vars *v1, *v2;
    ckpt_options o;
    sample s;
    size_t before_size = 0, after_size = 0;
    unsigned char *before, *after;
    int removes;

    store_init(&st);
    storage = store_storage(&st);
    CHECK(cb_make_dirs(&st, "ck") == CKPT_OK);
    sample_fill(&s, 1);
    v1 = sample_vars(&s);
    sample_fill(&s, 2);
    v2 = sample_vars(&s);
    o = npz_options(storage);
    CHECK(ckpt_save("ck/model.npz", v1, &o) == CKPT_OK);
    before = store_bytes(&st, "ck/model.npz", &before_size);
    CHECK(before != NULL);

    /* ckpt_save. */
    store_set_fail_write(&st, 1);
    removes = counter(&st, &st.removes);
    CHECK(ckpt_save("ck/model.npz", v2, &o) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "'write'"));
    CHECK(contains(ckpt_error_message(), "ck/model.npz"));
    after = store_bytes(&st, "ck/model.npz", &after_size);
    CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
    free(after);
    CHECK(counter(&st, &st.removes) == removes + 1);
    CHECK(strncmp(st.last_removed, "ck/.model.npz.tmp-", strlen("ck/.model.npz.tmp-")) == 0);
    CHECK(store_temporaries(&st) == 0);
    CHECK(counter(&st, &st.creates) == counter(&st, &st.closes));
    CHECK(reads_back(storage, "ck/model.npz", v1));

    /* A queue writer's save_vars: queued, then the error comes back from wait, once. */
    w = queue_writer(storage, "ck", 2);
    removes = counter(&st, &st.removes);
    CHECK(ckpt_writer_save_vars(w, NULL, "model.npz", v2, NULL, 0) == CKPT_OK);
    CHECK(ckpt_writer_wait(w) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "'write'"));
    CHECK(contains(ckpt_error_message(), "ck/model.npz"));
    CHECK(ckpt_writer_wait(w) == CKPT_OK);
    after = store_bytes(&st, "ck/model.npz", &after_size);
    CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
    free(after);
    CHECK(counter(&st, &st.removes) == removes + 1);
    CHECK(store_temporaries(&st) == 0);

    /* A queue writer's save whose function passes on ckpt_sink_write's CKPT_EIO: the storage contract says the
     * failing call's message names the operation and the path, as it does for the two saves above. */
    removes = counter(&st, &st.removes);
    CHECK(ckpt_writer_save(w, NULL, "model.npz", write_text, (void *)"new bytes", 0) == CKPT_OK);
    CHECK(ckpt_writer_wait(w) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "ck/model.npz"));
    CHECK(contains(ckpt_error_message(), "'write'"));
    after = store_bytes(&st, "ck/model.npz", &after_size);
    CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
    free(after);
    CHECK(counter(&st, &st.removes) == removes + 1);
    CHECK(store_temporaries(&st) == 0);

    /* The same, with a save function that ignores the sink's error and returns CKPT_OK: the storage failed, so
     * the save must not commit a file missing the bytes that were refused (a silent corruption). */
    removes = counter(&st, &st.removes);
    CHECK(ckpt_writer_save(w, NULL, "model.npz", write_text_ignoring_errors, (void *)"new bytes", 0) == CKPT_OK);
    CHECK(ckpt_writer_wait(w) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "'write'"));
    after = store_bytes(&st, "ck/model.npz", &after_size);
    CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
    free(after);
    CHECK(counter(&st, &st.removes) == removes + 1);
    CHECK(store_temporaries(&st) == 0);

    /* A save large enough to compute its CRC-32s on a second thread fails just the same, without hanging. */
    store_set_fail_write(&st, 0);
    CHECK(ckpt_save("ck/model.npz", v1, &o) == CKPT_OK); /* in case the careless save above replaced it */
    store_set_fail_write(&st, 1);
    {
        ckpt_vars *big = big_vars(7);
        removes = counter(&st, &st.removes);
        CHECK(ckpt_save("ck/model.npz", big, &o) == CKPT_EIO);
        CHECK(contains(ckpt_error_message(), "'write'"));
        CHECK(ckpt_writer_save_vars(w, NULL, "model.npz", big, NULL, 0) == CKPT_OK);
        CHECK(ckpt_writer_wait(w) == CKPT_EIO);
        CHECK(contains(ckpt_error_message(), "'write'"));
        CHECK(counter(&st, &st.removes) == removes + 2);
        CHECK(store_temporaries(&st) == 0);
        CHECK(reads_back(storage, "ck/model.npz", v1));
        ckpt_vars_free(big);
    }

    /* Once the medium works again, so do saves. */
    store_set_fail_write(&st, 0);
    CHECK(ckpt_writer_save_vars(w, NULL, "model.npz", v2, NULL, 0) == CKPT_OK);
    CHECK(ckpt_writer_finalize(w) == CKPT_OK);
    CHECK(reads_back(storage, "ck/model.npz", v2));
    ckpt_writer_free(w);

    free(before);
    ckpt_vars_free(v1);
    ckpt_vars_free(v2);
    ckpt_storage_free(storage);
    CHECK(st.destroyed == 1);
    store_clear(&st);
}

/* free_space: what the store says is free, or a code (CKPT_EUNSUPPORTED: cannot tell). */
typedef struct space {
    int rc;
    uint64_t bytes;
    int calls;
} space;
static space g_space;
static int cb_free_space(void *payload, const char *dir, uint64_t *bytes) {
    (void)payload;
    (void)dir;
    ++g_space.calls;
    *bytes = g_space.bytes;
    return g_space.rc;
}

/* The manager asks a callback storage how much space is free before each save, and refuses a save that cannot fit;
 * a storage that cannot tell (no callback, CKPT_EUNSUPPORTED, a version-1 table) is not checked. */
static void test_free_space_callback(void) {
    mem_store st;
    ckpt_storage_ops ops;
    ckpt_storage *storage = NULL;
    ckpt_manager_options o;
    ckpt_manager *m = NULL;
    ckpt_vars *v;
    sample s;
    int64_t latest = -1;

    store_init(&st);
    ops = store_ops(&st);
    ops.free_space = cb_free_space;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_OK);
    ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
    o.storage = storage;
    CHECK(ckpt_manager_open(&m, "/run", &o) == CKPT_OK);
    sample_fill(&s, 1);
    v = sample_vars(&s);

    g_space.rc = CKPT_OK;
    g_space.bytes = 1u << 20;
    CHECK(ckpt_manager_save(m, v, 1) == CKPT_OK);
    CHECK(g_space.calls >= 1);

    g_space.bytes = 100;
    CHECK(ckpt_manager_save(m, v, 2) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "not enough space for checkpoint 2"));
    CHECK(contains(ckpt_error_message(), "and 100 bytes is free"));
    CHECK(!store_has(&st, "/run/ckpt/0000000002.npz"));
    CHECK(store_temporaries(&st) == 0);
    CHECK(ckpt_manager_latest(m, &latest) == CKPT_OK && latest == 1);

    g_space.rc = CKPT_EUNSUPPORTED; /* cannot tell: no check */
    CHECK(ckpt_manager_save(m, v, 3) == CKPT_OK);

    g_space.rc = CKPT_EIO; /* the callback's own failure fails the save, named */
    CHECK(ckpt_manager_save(m, v, 4) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "free_space"));
    CHECK(!store_has(&st, "/run/ckpt/0000000004.npz"));
    CHECK(ckpt_manager_close(m) == CKPT_OK);
    ckpt_storage_free(storage);

    /* A version-1 table ends before free_space: whatever follows is not called. */
    storage = NULL;
    ops.version = 1;
    g_space.calls = 0;
    g_space.rc = CKPT_OK;
    g_space.bytes = 0;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_OK);
    o.storage = storage;
    CHECK(ckpt_manager_open(&m, "/run", &o) == CKPT_OK);
    CHECK(ckpt_manager_save(m, v, 5) == CKPT_OK);
    CHECK(g_space.calls == 0);
    CHECK(ckpt_manager_close(m) == CKPT_OK);
    ckpt_storage_free(storage);
    ckpt_vars_free(v);
    store_clear(&st);
}

static void test_destroy_runs_once_when_the_last_user_goes(void) {
    mem_store st;
    ckpt_storage *storage;
    ckpt_writer *queue, *simple;
    ckpt_writer_options o = CKPT_WRITER_OPTIONS_INIT;
    ckpt_reader *npz = NULL;
    ckpt_vars *v;
    ckpt_options npz_o;
    sample s;

    /* No other user: the storage goes with the caller's reference. */
    store_init(&st);
    storage = store_storage(&st);
    CHECK(st.destroyed == 0);
    ckpt_storage_free(storage);
    CHECK(st.destroyed == 1);
    store_clear(&st);

    /* Two writers and an open file: the storage outlives the caller's reference until the last of them goes. */
    store_init(&st);
    storage = store_storage(&st);
    sample_fill(&s, 3);
    v = sample_vars(&s);
    npz_o = npz_options(storage);
    CHECK(ckpt_save("model.npz", v, &npz_o) == CKPT_OK);
    CHECK(ckpt_reader_open(&npz, "model.npz", &npz_o) == CKPT_OK);
    queue = queue_writer(storage, NULL, 1);
    o.kind = CKPT_WRITER_SIMPLE;
    o.storage = storage;
    CHECK(ckpt_writer_new(&simple, &o) == CKPT_OK);

    ckpt_storage_free(storage);
    CHECK(counter(&st, &st.destroyed) == 0);
    /* Both writers still save through it. */
    CHECK(ckpt_writer_save_vars(queue, NULL, "queued.npz", v, NULL, 0) == CKPT_OK);
    CHECK(ckpt_writer_save_vars(simple, NULL, "simple.npz", v, NULL, 0) == CKPT_OK);
    CHECK(ckpt_writer_finalize(queue) == CKPT_OK);
    CHECK(store_has(&st, "queued.npz"));
    CHECK(store_has(&st, "simple.npz"));

    ckpt_writer_free(queue);
    CHECK(counter(&st, &st.destroyed) == 0);
    ckpt_writer_free(simple);
    CHECK(counter(&st, &st.destroyed) == 0);
    CHECK(ckpt_reader_count(npz) == ckpt_vars_count(v));
    ckpt_reader_close(npz);
    CHECK(counter(&st, &st.destroyed) == 1);
    ckpt_vars_free(v);
    store_clear(&st);
}

/* Directories as an object store has them: listed and removed with their files, never renamed. */
static int cb_list_dirs(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx) {
    mem_store *st = (mem_store *)payload;
    const mem_dir *d;
    char parent[512];
    int rc = CKPT_OK;
    pthread_mutex_lock(&st->mutex);
    ++st->lists;
    if (!dir_exists(st, dir)) rc = CKPT_ENOTFOUND;
    for (d = st->dirs; d != NULL && rc == CKPT_OK; d = d->next) {
        parent_of(d->path, parent, sizeof parent);
        if (strcmp(parent, dir) == 0 && strcmp(d->path, dir) != 0) rc = entry(name_of(d->path), ctx);
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

static int cb_remove_dir(void *payload, const char *dir) {
    mem_store *st = (mem_store *)payload;
    mem_dir **link;
    const mem_file *f;
    char parent[512];
    int rc = CKPT_ENOTFOUND;
    pthread_mutex_lock(&st->mutex);
    ++st->dir_removes;
    for (f = st->files; f != NULL; f = f->next) {
        parent_of(f->path, parent, sizeof parent);
        if (strcmp(parent, dir) == 0) rc = CKPT_EIO; /* not empty: ckpt must remove the files first */
    }
    for (link = &st->dirs; *link != NULL && rc == CKPT_ENOTFOUND; link = &(*link)->next) {
        if (strcmp((*link)->path, dir) == 0) {
            mem_dir *d = *link;
            *link = d->next;
            free(d->path);
            free(d);
            rc = CKPT_OK;
            break;
        }
    }
    pthread_mutex_unlock(&st->mutex);
    return rc;
}

/* A communicator of one rank: every collective is the identity. */
static int one_rank(void *payload, int32_t *out) {
    (void)payload;
    *out = 0;
    return CKPT_OK;
}
static int one_size(void *payload, int32_t *out) {
    (void)payload;
    *out = 1;
    return CKPT_OK;
}
static int one_barrier(void *payload) {
    (void)payload;
    return CKPT_OK;
}
static int one_reduce(void *payload, int64_t *value, uint32_t op) {
    (void)payload, (void)value, (void)op;
    return CKPT_OK;
}
static int one_broadcast(void *payload, void *buf, size_t size, int32_t root) {
    (void)payload, (void)buf, (void)size, (void)root;
    return CKPT_OK;
}
static int one_gather(void *payload, const void *send, size_t size, void *recv) {
    (void)payload;
    if (size > 0) memcpy(recv, send, size);
    return CKPT_OK;
}

/* A storage that lists directories but cannot rename them (rename_dir NULL) holds sharded steps committed by the
 * manifest written last: shards go straight into the step's directory, a directory without a manifest is no
 * checkpoint, and the next manager that opens removes it through remove_dir after its files. */
static void test_sharded_steps_on_a_storage_without_directory_renames(void) {
    mem_store st;
    ckpt_storage_ops ops;
    ckpt_storage *storage = NULL;
    ckpt_comm_ops cops;
    ckpt_comm *comm = NULL;
    ckpt_manager_options o;
    ckpt_manager *m = NULL;
    ckpt_vars *v, *back = NULL;
    sample s;
    int64_t latest = -1, got = -1, indices[4];
    size_t count = 0;
    mem_file *f;

    store_init(&st);
    ops = store_ops(&st);
    ops.list_dirs = cb_list_dirs;
    ops.remove_dir = cb_remove_dir;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_OK);
    memset(&cops, 0, sizeof cops);
    cops.version = CKPT_COMM_OPS_VERSION;
    cops.rank = one_rank;
    cops.size = one_size;
    cops.barrier = one_barrier;
    cops.all_reduce_i64 = one_reduce;
    cops.broadcast = one_broadcast;
    cops.all_gather = one_gather;
    CHECK(ckpt_comm_new(&comm, &cops) == CKPT_OK);
    ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
    o.storage = storage;
    o.comm = comm;
    o.keep = 0;
    CHECK(ckpt_manager_open(&m, "/bucket", &o) == CKPT_OK);
    sample_fill(&s, 3);
    v = sample_vars(&s);
    CHECK(ckpt_manager_save(m, v, 1) == CKPT_OK);
    CHECK(ckpt_manager_save(m, v, 2) == CKPT_OK);
    CHECK(ckpt_manager_save(m, v, 2) == CKPT_OK); /* replaced in place */
    CHECK(store_has(&st, "/bucket/ckpt/0000000002/manifest.json"));
    CHECK(store_has(&st, "/bucket/ckpt/0000000002/shard-00000-of-00001.npz"));
    CHECK(store_temporaries(&st) == 0);
    CHECK(ckpt_manager_close(m) == CKPT_OK);

    /* A save cut short: a shard, no manifest. */
    pthread_mutex_lock(&st.mutex);
    CHECK(add_dir(&st, "/bucket/ckpt/0000000003") == CKPT_OK);
    f = add_file(&st, "/bucket/ckpt/0000000003/shard-00000-of-00001.npz");
    pthread_mutex_unlock(&st.mutex);
    CHECK(f != NULL);
    o.comm = NULL; /* a single process reads sharded steps too */
    o.flags = CKPT_MANAGER_READ_ONLY;
    CHECK(ckpt_manager_open(&m, "/bucket", &o) == CKPT_OK);
    CHECK(ckpt_manager_list(m, indices, 4, &count) == CKPT_OK && count == 2 && indices[1] == 2);
    CHECK(ckpt_manager_close(m) == CKPT_OK);
    CHECK(store_has(&st, "/bucket/ckpt/0000000003/shard-00000-of-00001.npz")); /* a reader removes nothing */
    o.flags = 0;
    CHECK(ckpt_manager_open(&m, "/bucket", &o) == CKPT_OK);
    CHECK(store_has(&st, "/bucket/ckpt/0000000003/shard-00000-of-00001.npz")); /* opening removes nothing */
    CHECK(ckpt_manager_save(m, v, 2) == CKPT_OK); /* the first save does */
    CHECK(!store_has(&st, "/bucket/ckpt/0000000003/shard-00000-of-00001.npz"));
    pthread_mutex_lock(&st.mutex);
    CHECK(!dir_exists(&st, "/bucket/ckpt/0000000003"));
    pthread_mutex_unlock(&st.mutex);
    CHECK(st.dir_removes >= 1);
    CHECK(ckpt_manager_latest(m, &latest) == CKPT_OK && latest == 2);
    CHECK(ckpt_manager_read(m, CKPT_LATEST, &back, &got) == CKPT_OK && got == 2);
    CHECK(back != NULL && same_vars(v, back));
    CHECK(ckpt_manager_close(m) == CKPT_OK);

    ckpt_vars_free(back);
    ckpt_vars_free(v);
    ckpt_comm_free(comm);
    ckpt_storage_free(storage);
    store_clear(&st);
}

static void test_storage_new_refuses_bad_tables(void) {
    mem_store st;
    ckpt_storage_ops ops;
    ckpt_storage *storage;

    store_init(&st);
    ops = store_ops(&st);
    storage = (ckpt_storage *)&ops; /* not NULL, so the reset to NULL is observable */
    CHECK(ckpt_storage_new(NULL, &ops) == CKPT_EINVAL);
    CHECK(ckpt_storage_new(&storage, NULL) == CKPT_EINVAL);
    CHECK(storage == NULL);

    ops.version = CKPT_STORAGE_OPS_VERSION + 1;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_EINVAL);
    {
        char expected[64];
        snprintf(expected, sizeof expected, "ops version %d is not supported (1..%d)", CKPT_STORAGE_OPS_VERSION + 1,
                 CKPT_STORAGE_OPS_VERSION);
        CHECK(contains(ckpt_error_message(), expected));
    }

    ops = store_ops(&st);
    ops.write = NULL;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_EINVAL);
    CHECK(contains(ckpt_error_message(), "'write'"));
    CHECK(storage == NULL);

    ops = store_ops(&st);
    ops.rename_dir = (int (*)(void *, const char *, const char *))cb_rename;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_EINVAL);
    CHECK(contains(ckpt_error_message(), "rename_dir and remove_dir need list_dirs"));
    CHECK(storage == NULL);

    /* The optional callbacks may be missing; an append save then fails instead of crashing. */
    ops = store_ops(&st);
    ops.open_append = NULL;
    ops.sync_dir = NULL;
    ops.destroy = NULL;
    CHECK(ckpt_storage_new(&storage, &ops) == CKPT_OK);
    if (storage != NULL) {
        ckpt_writer_options o;
        ckpt_writer *w = NULL;
        CHECK(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
        o.storage = storage;
        CHECK(ckpt_writer_new(&w, &o) == CKPT_OK);
        CHECK(ckpt_writer_save(w, NULL, "plain.bin", write_text, (void *)"plain", 0) == CKPT_OK);
        CHECK(store_file_is(&st, "plain.bin", "plain"));
        CHECK(ckpt_writer_save(w, NULL, "log.txt", write_text, (void *)"x", CKPT_APPEND) < 0);
        CHECK(!store_has(&st, "log.txt"));
        ckpt_writer_free(w);
        ckpt_storage_free(storage);
    }
    CHECK(st.destroyed == 0); /* no table was kept that had a destroy callback */
    store_clear(&st);
}

/* A save against a base offers clone_range the runs of unchanged 16 KiB chunks of a large array, with the bytes
 * themselves: the file comes out the same whether the callback shares all of a run, part of it, or (a table
 * without the callback) nothing; a callback that claims more than it was given fails the save. */
static void test_clone_range_gets_the_unchanged_runs_of_a_save_against_a_base(void) {
    enum { n = 1 << 18 }; /* 1 MiB of float32: 64 chunks */
    const int64_t shape[1] = {n};
    const uint64_t chunk = 16384;
    mem_store st;
    ckpt_storage_ops ops;
    ckpt_storage *storage = NULL, *plain;
    ckpt_vars *v = NULL;
    ckpt_options o;
    float *w = (float *)malloc(n * sizeof *w);
    unsigned char *full, *got;
    size_t i, full_size = 0, size = 0;
    int mode, opens;

    store_init(&st);
    ops = store_ops(&st);
    ops.clone_range = cb_clone_range;
    CHECK(w != NULL && ckpt_storage_new(&storage, &ops) == CKPT_OK);
    if (w == NULL || storage == NULL) exit(1);
    CHECK(cb_make_dirs(&st, "ck") == CKPT_OK);
    for (i = 0; i < n; ++i) w[i] = (float)i;
    CHECK(ckpt_vars_new(&v) == CKPT_OK);
    CHECK(ckpt_vars_add(v, "w", CKPT_FLOAT32, 1, shape, w, CKPT_VARS_BORROW) == CKPT_OK);
    o = npz_options(storage);
    o.flags = CKPT_NPZ_CHUNK_HASHES;
    CHECK(ckpt_save("ck/a.npz", v, &o) == CKPT_OK);
    w[10 * 4096 + 7] = -1.0f; /* in chunk 10 */
    CHECK(ckpt_save("ck/full.npz", v, &o) == CKPT_OK);
    CHECK(st.clones == 0); /* neither had a base */
    full = store_bytes(&st, "ck/full.npz", &full_size);
    CHECK(full != NULL);

    o.base = "ck/a.npz";
    for (mode = 0; mode < 2; ++mode) {
        st.clone_mode = mode;
        st.clones = 0;
        st.cloned = st.shared = 0;
        CHECK(ckpt_save("ck/b.npz", v, &o) == CKPT_OK);
        got = store_bytes(&st, "ck/b.npz", &size);
        CHECK(got != NULL && full != NULL && size == full_size && memcmp(got, full, size) == 0);
        free(got);
        CHECK(reads_back(storage, "ck/b.npz", v));
        CHECK(st.clones == 2); /* chunks 0-9, and 11-63 */
        CHECK(st.cloned == 63 * chunk);
        CHECK(st.shared == (mode == 0 ? 63 * chunk : 63 * chunk / 2));
    }

    st.clone_mode = 2;
    CHECK(ckpt_save("ck/c.npz", v, &o) == CKPT_EIO);
    CHECK(contains(ckpt_error_message(), "clone_range") && contains(ckpt_error_message(), "ck/"));
    CHECK(!store_has(&st, "ck/c.npz"));
    CHECK(store_temporaries(&st) == 0);

    /* Without the callback: the base is not even opened, and the file is the same. */
    plain = store_storage(&st);
    o.storage = plain;
    opens = counter(&st, &st.read_opens);
    CHECK(ckpt_save("ck/d.npz", v, &o) == CKPT_OK);
    CHECK(counter(&st, &st.read_opens) == opens);
    got = store_bytes(&st, "ck/d.npz", &size);
    CHECK(got != NULL && full != NULL && size == full_size && memcmp(got, full, size) == 0);
    free(got);

    free(full);
    ckpt_vars_free(v);
    free(w);
    ckpt_storage_free(plain);
    ckpt_storage_free(storage);
    store_clear(&st);
}

/* A writer's save_vars against a base: the base is opened when the save runs, so a queued save shares with the
 * save queued before it; the file is the one a full save writes. */
static void test_a_queued_writer_save_shares_with_the_save_before_it(void) {
    enum { n = 1 << 18 }; /* 1 MiB of float32: 64 chunks */
    const int64_t shape[1] = {n};
    mem_store st;
    ckpt_storage_ops ops;
    ckpt_storage *storage = NULL;
    ckpt_writer *w;
    ckpt_vars *v = NULL;
    ckpt_options o;
    float *data = (float *)malloc(n * sizeof *data);
    unsigned char *full, *got;
    size_t i, full_size = 0, size = 0;

    store_init(&st);
    ops = store_ops(&st);
    ops.clone_range = cb_clone_range;
    CHECK(data != NULL && ckpt_storage_new(&storage, &ops) == CKPT_OK);
    if (data == NULL || storage == NULL) exit(1);
    CHECK(cb_make_dirs(&st, "run") == CKPT_OK);
    for (i = 0; i < n; ++i) data[i] = (float)i;
    CHECK(ckpt_vars_new(&v) == CKPT_OK);
    CHECK(ckpt_vars_add(v, "w", CKPT_FLOAT32, 1, shape, data, CKPT_VARS_BORROW) == CKPT_OK);
    o = npz_options(NULL);
    o.flags = CKPT_NPZ_CHUNK_HASHES;
    w = queue_writer(storage, "run", 2);
    CHECK(ckpt_writer_save_vars(w, NULL, "1.npz", v, &o, 0) == CKPT_OK);
    data[10 * 4096 + 7] = -1.0f; /* in chunk 10; the writer copied the array */
    o.base = "run/1.npz";        /* a path in the storage, as ckpt_save takes it */
    CHECK(ckpt_writer_save_vars(w, NULL, "2.npz", v, &o, 0) == CKPT_OK);
    CHECK(ckpt_writer_wait(w) == CKPT_OK);
    CHECK(st.clones == 2); /* chunks 0-9, and 11-63 */
    CHECK(st.cloned == 63 * 16384);

    o.base = NULL; /* the same state saved in full */
    CHECK(ckpt_writer_save_vars(w, NULL, "full.npz", v, &o, 0) == CKPT_OK);
    o.base = "1.npz"; /* not in the storage's root: a base that cannot serve, and a full save */
    CHECK(ckpt_writer_save_vars(w, NULL, "3.npz", v, &o, 0) == CKPT_OK);
    CHECK(ckpt_writer_finalize(w) == CKPT_OK);
    CHECK(st.clones == 2);
    full = store_bytes(&st, "run/full.npz", &full_size);
    got = store_bytes(&st, "run/2.npz", &size);
    CHECK(got != NULL && full != NULL && size == full_size && memcmp(got, full, size) == 0);
    free(got);
    got = store_bytes(&st, "run/3.npz", &size);
    CHECK(got != NULL && full != NULL && size == full_size && memcmp(got, full, size) == 0);
    free(got);
    CHECK(reads_back(storage, "run/2.npz", v));

    free(full);
    ckpt_writer_free(w);
    ckpt_vars_free(v);
    free(data);
    ckpt_storage_free(storage);
    store_clear(&st);
}

int main(void) {
    test_npz_round_trip_through_c_storage();
    test_queue_writer_round_trip_through_c_storage();
    test_writers_on_two_threads_share_one_c_storage();
    test_failing_write_callback();
    test_destroy_runs_once_when_the_last_user_goes();
    test_storage_new_refuses_bad_tables();
    test_free_space_callback();
    test_sharded_steps_on_a_storage_without_directory_renames();
    test_clone_range_gets_the_unchanged_runs_of_a_save_against_a_base();
    test_a_queued_writer_save_shares_with_the_save_before_it();
    pthread_mutex_lock(&g_check_mutex);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    pthread_mutex_unlock(&g_check_mutex);
    return g_failed == 0 ? 0 : 1;
}
