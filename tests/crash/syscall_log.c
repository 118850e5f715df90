// SPDX-License-Identifier: Apache-2.0
/* syscall_log.so: an LD_PRELOAD library that records the file-system calls a process makes under one directory, for
 * crash_states.py to build every state a power cut may leave (tests/crash/README.md).
 *
 *   CKPT_SYSCALL_ROOT=/abs/dir CKPT_SYSCALL_LOG=/abs/log LD_PRELOAD=syscall_log.so program ...
 *
 * Recorded, in the order they returned (one lock around each call and its record): opens for writing, creating, or
 * of a directory; write, pwrite, writev, pwritev; ftruncate, fallocate; FICLONERANGE and copy_file_range (as writes
 * of the bytes they put, read back after the call: a cloned range persists as data do); fsync, fdatasync,
 * sync_file_range; rename, renameat, renameat2, unlink, unlinkat, mkdir, mkdirat, rmdir, link, linkat; close. Calls
 * that fail are recorded with their errno and change nothing. A program marks a moment ("save 3 is durable") by
 * calling ckpt_syscall_mark(text), looked up with dlsym so that it runs without this library too.
 *
 * Record format, one per line, paths absolute and %-escaped (space, %, newline): `open FD CREATED TRUNC DIR PATH`,
 * `write FD OFFSET N` followed by the N bytes written, `truncate FD LENGTH`, `sync FD`, `srange FD`, `rename FROM TO`,
 * `unlink PATH`, `mkdir PATH`, `rmdir PATH`, `link FROM TO`, `close FD`, `mark TEXT`, `fail CALL ERRNO`, and
 * `cloned FD N` before the write record of a clone (to count them).
 *
 * CKPT_SYSCALL_FAULT makes the process a faulty one, for the tests that show the checker catches each fault:
 *   no-file-sync       fsync/fdatasync of a regular file does nothing (and is not recorded)
 *   no-dir-sync        fsync of a directory does nothing
 *   no-mkdir-sync      the first directory sync after a mkdir, of the new directory's parent, does nothing
 *   unlink-before-sync a directory's fsync is held back until just after the next unlink in that directory: a
 *                      retention that removes an old checkpoint before the new one's name is durable
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int log_fd = -1;
static char root[4096];
static size_t root_len;
static char* fd_path[MAX_FDS];  // the watched descriptors' paths
static int fd_is_dir[MAX_FDS];
static const char* fault = "";
static char pending_dir_sync[4096];  // unlink-before-sync: the directory whose sync waits for an unlink
static int mkdir_parent_owed;        // no-mkdir-sync: a mkdir happened; its parent's next sync is dropped
static char mkdir_parent[4096];

#define REAL(name) static __typeof__(name)* real_##name
REAL(open);
REAL(openat);
REAL(write);
REAL(pwrite);
REAL(writev);
REAL(pwritev);
REAL(ftruncate);
REAL(fallocate);
REAL(ioctl);
REAL(copy_file_range);
REAL(fsync);
REAL(fdatasync);
REAL(sync_file_range);
REAL(rename);
REAL(renameat);
REAL(renameat2);
REAL(unlink);
REAL(unlinkat);
REAL(mkdir);
REAL(mkdirat);
REAL(rmdir);
REAL(link);
REAL(linkat);
REAL(close);
REAL(pread);

#define RESOLVE(name) real_##name = (__typeof__(name)*)dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void start(void) {
    RESOLVE(open);
    RESOLVE(openat);
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(writev);
    RESOLVE(pwritev);
    RESOLVE(ftruncate);
    RESOLVE(fallocate);
    RESOLVE(ioctl);
    RESOLVE(copy_file_range);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(sync_file_range);
    RESOLVE(rename);
    RESOLVE(renameat);
    RESOLVE(renameat2);
    RESOLVE(unlink);
    RESOLVE(unlinkat);
    RESOLVE(mkdir);
    RESOLVE(mkdirat);
    RESOLVE(rmdir);
    RESOLVE(link);
    RESOLVE(linkat);
    RESOLVE(close);
    RESOLVE(pread);
    const char* r = getenv("CKPT_SYSCALL_ROOT");
    const char* l = getenv("CKPT_SYSCALL_LOG");
    const char* f = getenv("CKPT_SYSCALL_FAULT");
    if (f != NULL) fault = f;
    if (r == NULL || l == NULL || r[0] != '/' || strlen(r) >= sizeof root - 1) return;
    strcpy(root, r);
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = '\0';
    log_fd = real_open(l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void put(const void* data, size_t n) {
    const char* p = data;
    while (n > 0) {
        const ssize_t w = real_write(log_fd, p, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) continue;
            abort();  // a log with a hole would judge states that never were
        }
        p += w;
        n -= (size_t)w;
    }
}

static void put_text(const char* s) { put(s, strlen(s)); }

static void put_path(const char* path) {
    char buf[3 * 4096 + 1];
    size_t o = 0;
    for (const char* p = path; *p != '\0' && o + 4 < sizeof buf; ++p) {
        if (*p == ' ' || *p == '%' || *p == '\n') {
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%%%02X", (unsigned char)*p);
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = '\0';
    put_text(buf);
}

static void record(const char* format, ...) {
    char line[256];
    va_list ap;
    va_start(ap, format);
    vsnprintf(line, sizeof line, format, ap);
    va_end(ap);
    put_text(line);
}

// The absolute, normalized form of `path` (relative to dirfd), or 0 when it cannot be formed.
static int absolute(int dirfd, const char* path, char* out, size_t size) {
    char joined[8192];
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else {
        char base[4096];
        if (dirfd == AT_FDCWD) {
            if (getcwd(base, sizeof base) == NULL) return 0;
        } else if (dirfd >= 0 && dirfd < MAX_FDS && fd_path[dirfd] != NULL) {
            snprintf(base, sizeof base, "%s", fd_path[dirfd]);
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            const ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = '\0';
        }
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    }
    // Drop empty and "." components, fold "..".
    size_t o = 0;
    const char* p = joined;
    while (*p != '\0') {
        while (*p == '/') ++p;
        const char* end = strchr(p, '/');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.')) {
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/') --o;
            if (o > 0) --o;
        } else {
            if (o + n + 2 >= size) return 0;
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0) out[o++] = '/';
    out[o] = '\0';
    return 1;
}

static int watched(const char* abs) {
    return log_fd >= 0 && strncmp(abs, root, root_len) == 0 && (abs[root_len] == '/' || abs[root_len] == '\0');
}

static int fd_watched(int fd) { return log_fd >= 0 && fd >= 0 && fd < MAX_FDS && fd_path[fd] != NULL; }

static void parent_of(const char* path, char* out, size_t size) {
    snprintf(out, size, "%s", path);
    char* slash = strrchr(out, '/');
    if (slash == out)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
}

static int do_open(int dirfd, const char* path, int flags, mode_t mode) {
    char abs[4096];
    const int known = absolute(dirfd, path, abs, sizeof abs) && watched(abs);
    pthread_mutex_lock(&lock);
    struct stat before;
    const int existed = known && lstat(abs, &before) == 0;
    const int fd = real_openat(dirfd, path, flags, mode);
    const int err = errno;
    if (known && fd >= 0 && fd < MAX_FDS) {
        struct stat st;
        const int is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        if (is_dir || (flags & O_ACCMODE) != O_RDONLY || (flags & O_CREAT)) {
            free(fd_path[fd]);
            fd_path[fd] = strdup(abs);
            fd_is_dir[fd] = is_dir;
            record("open %d %d %d %d ", fd, !existed, (flags & O_TRUNC) != 0, is_dir);
            put_path(abs);
            put_text("\n");
        }
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return fd;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) __attribute__((alias("open")));
int openat(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) __attribute__((alias("openat")));
int __open_2(const char* path, int flags) { return do_open(AT_FDCWD, path, flags, 0); }
int __open64_2(const char* path, int flags) __attribute__((alias("__open_2")));
int __openat_2(int dirfd, const char* path, int flags) { return do_open(dirfd, path, flags, 0); }
int __openat64_2(int dirfd, const char* path, int flags) __attribute__((alias("__openat_2")));
int creat(const char* path, mode_t mode) { return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode); }
int creat64(const char* path, mode_t mode) __attribute__((alias("creat")));

// The bytes [offset, offset + n) of fd as they are now, recorded as a write (read through a descriptor of its own:
// fd may be open for writing only).
static void record_range(int fd, off_t offset, size_t n) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    const int in = real_open(self, O_RDONLY | O_CLOEXEC);
    if (in < 0) abort();  // a log with a hole would judge states that never were
    record("write %d %lld %zu\n", fd, (long long)offset, n);
    char buf[65536];
    while (n > 0) {
        const size_t want = n < sizeof buf ? n : sizeof buf;
        const ssize_t r = real_pread(in, buf, want, offset);
        if (r <= 0) abort();
        put(buf, (size_t)r);
        offset += r;
        n -= (size_t)r;
    }
    real_close(in);
}

static void record_fail(const char* call, int err) { record("fail %s %d\n", call, err); }

// Where the next write() of fd lands: its offset, or its end for O_APPEND.
static off_t write_offset(int fd) {
    if (fcntl(fd, F_GETFL) & O_APPEND) {
        struct stat st;
        return fstat(fd, &st) == 0 ? st.st_size : -1;
    }
    return lseek(fd, 0, SEEK_CUR);
}

ssize_t write(int fd, const void* data, size_t n) {
    if (!fd_watched(fd)) return real_write(fd, data, n);
    pthread_mutex_lock(&lock);
    const off_t at = write_offset(fd);
    const ssize_t w = real_write(fd, data, n);
    const int err = errno;
    if (w > 0) {
        record("write %d %lld %zd\n", fd, (long long)at, w);
        put(data, (size_t)w);
    } else if (w < 0) {
        record_fail("write", err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return w;
}

ssize_t pwrite(int fd, const void* data, size_t n, off_t offset) {
    if (!fd_watched(fd)) return real_pwrite(fd, data, n, offset);
    pthread_mutex_lock(&lock);
    const ssize_t w = real_pwrite(fd, data, n, offset);
    const int err = errno;
    if (w > 0) {
        record("write %d %lld %zd\n", fd, (long long)offset, w);
        put(data, (size_t)w);
    } else if (w < 0) {
        record_fail("pwrite", err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return w;
}
ssize_t pwrite64(int fd, const void* data, size_t n, off_t offset) __attribute__((alias("pwrite")));

ssize_t writev(int fd, const struct iovec* iov, int count) {
    if (!fd_watched(fd)) return real_writev(fd, iov, count);
    pthread_mutex_lock(&lock);
    const off_t at = write_offset(fd);
    const ssize_t w = real_writev(fd, iov, count);
    const int err = errno;
    if (w > 0) record_range(fd, at, (size_t)w);
    if (w < 0) record_fail("writev", err);
    pthread_mutex_unlock(&lock);
    errno = err;
    return w;
}

ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) {
    if (!fd_watched(fd)) return real_pwritev(fd, iov, count, offset);
    pthread_mutex_lock(&lock);
    const ssize_t w = real_pwritev(fd, iov, count, offset);
    const int err = errno;
    if (w > 0) record_range(fd, offset, (size_t)w);
    if (w < 0) record_fail("pwritev", err);
    pthread_mutex_unlock(&lock);
    errno = err;
    return w;
}
ssize_t pwritev64(int fd, const struct iovec* iov, int count, off_t offset) __attribute__((alias("pwritev")));

int ftruncate(int fd, off_t length) {
    if (!fd_watched(fd)) return real_ftruncate(fd, length);
    pthread_mutex_lock(&lock);
    const int rc = real_ftruncate(fd, length);
    const int err = errno;
    if (rc == 0)
        record("truncate %d %lld\n", fd, (long long)length);
    else
        record_fail("ftruncate", err);
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}
int ftruncate64(int fd, off_t length) __attribute__((alias("ftruncate")));

int fallocate(int fd, int mode, off_t offset, off_t length) {
    if (!fd_watched(fd)) return real_fallocate(fd, mode, offset, length);
    pthread_mutex_lock(&lock);
    struct stat st;
    const off_t size = fstat(fd, &st) == 0 ? st.st_size : 0;
    const int rc = real_fallocate(fd, mode, offset, length);
    const int err = errno;
    // Only the size a plain fallocate grows the file to is content (zeros); space reserved is not.
    if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && offset + length > size)
        record("truncate %d %lld\n", fd, (long long)(offset + length));
    if (rc != 0) record_fail("fallocate", err);
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}
int fallocate64(int fd, int mode, off_t offset, off_t length) __attribute__((alias("fallocate")));

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if (!fd_watched(fd) || request != FICLONERANGE) return real_ioctl(fd, request, arg);
    pthread_mutex_lock(&lock);
    const struct file_clone_range* range = arg;
    const int rc = real_ioctl(fd, request, arg);
    const int err = errno;
    if (rc == 0) {
        size_t n = range->src_length;
        if (n == 0) {  // to the end of the source
            struct stat st;
            n = fstat((int)range->src_fd, &st) == 0 ? (size_t)(st.st_size - (off_t)range->src_offset) : 0;
        }
        record("cloned %d %zu\n", fd, n);
        record_range(fd, (off_t)range->dest_offset, n);
    } else {
        record_fail("ioctl-ficlonerange", err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
    if (!fd_watched(out)) return real_copy_file_range(in, in_off, out, out_off, n, flags);
    pthread_mutex_lock(&lock);
    const off_t at = out_off != NULL ? *out_off : lseek(out, 0, SEEK_CUR);
    const ssize_t w = real_copy_file_range(in, in_off, out, out_off, n, flags);
    const int err = errno;
    if (w > 0) record_range(out, at, (size_t)w);
    if (w < 0) record_fail("copy_file_range", err);
    pthread_mutex_unlock(&lock);
    errno = err;
    return w;
}

// A sync of a watched descriptor, or of one the fault drops or holds back.
static int do_sync(int fd, int (*real)(int)) {
    if (!fd_watched(fd)) return real(fd);
    pthread_mutex_lock(&lock);
    int skip = 0;
    if (fd_is_dir[fd]) {
        if (strcmp(fault, "no-dir-sync") == 0) skip = 1;
        if (strcmp(fault, "no-mkdir-sync") == 0 && mkdir_parent_owed && strcmp(fd_path[fd], mkdir_parent) == 0) {
            mkdir_parent_owed = 0;
            skip = 1;
        }
        if (strcmp(fault, "unlink-before-sync") == 0) {
            snprintf(pending_dir_sync, sizeof pending_dir_sync, "%s", fd_path[fd]);
            skip = 1;
        }
    } else if (strcmp(fault, "no-file-sync") == 0) {
        skip = 1;
    }
    int rc = 0, err = 0;
    if (!skip) {
        rc = real(fd);
        err = errno;
        if (rc == 0)
            record("sync %d\n", fd);
        else
            record_fail("fsync", err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

int fsync(int fd) { return do_sync(fd, real_fsync); }
int fdatasync(int fd) { return do_sync(fd, real_fdatasync); }

int sync_file_range(int fd, off_t offset, off_t n, unsigned flags) {
    if (!fd_watched(fd)) return real_sync_file_range(fd, offset, n, flags);
    pthread_mutex_lock(&lock);
    const int rc = real_sync_file_range(fd, offset, n, flags);
    const int err = errno;
    if (rc == 0) record("srange %d\n", fd);
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

// A call on two paths (rename, link): run under the lock and recorded when either path is watched.
static int two_paths(const char* op, int d1, const char* p1, int d2, const char* p2, int (*call)(void*), void* ctx) {
    char a1[4096], a2[4096];
    const int known =
        absolute(d1, p1, a1, sizeof a1) && absolute(d2, p2, a2, sizeof a2) && (watched(a1) || watched(a2));
    pthread_mutex_lock(&lock);
    const int rc = call(ctx);
    const int err = errno;
    if (known && rc == 0) {
        record("%s ", op);
        put_path(a1);
        put_text(" ");
        put_path(a2);
        put_text("\n");
    } else if (known) {
        record_fail(op, err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

static void flush_held_sync(const char* unlinked) {
    // unlink-before-sync: the held directory sync happens now, after the unlink in that directory.
    char parent[4096];
    parent_of(unlinked, parent, sizeof parent);
    if (pending_dir_sync[0] == '\0' || strcmp(parent, pending_dir_sync) != 0) return;
    const int fd = real_open(pending_dir_sync, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    if (real_fsync(fd) == 0) {
        record("open %d 0 0 1 ", fd);
        put_path(pending_dir_sync);
        record("\nsync %d\nclose %d\n", fd, fd);
    }
    real_close(fd);
    pending_dir_sync[0] = '\0';
}

static int one_path(const char* op, int dirfd, const char* path, int (*call)(void*), void* ctx) {
    char abs[4096];
    const int known = absolute(dirfd, path, abs, sizeof abs) && watched(abs);
    pthread_mutex_lock(&lock);
    const int rc = call(ctx);
    const int err = errno;
    if (known && rc == 0) {
        record("%s ", op);
        put_path(abs);
        put_text("\n");
        if (strcmp(op, "mkdir") == 0) {
            mkdir_parent_owed = 1;
            parent_of(abs, mkdir_parent, sizeof mkdir_parent);
        }
        if (strcmp(op, "unlink") == 0) flush_held_sync(abs);
    } else if (known) {
        record_fail(op, err);
    }
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

struct args {
    int d1, d2;
    const char *p1, *p2;
    unsigned flags;
    mode_t mode;
};

static int call_renameat2(void* c) {
    const struct args* a = c;
    return a->flags ? real_renameat2(a->d1, a->p1, a->d2, a->p2, a->flags) : real_renameat(a->d1, a->p1, a->d2, a->p2);
}
int rename(const char* from, const char* to) {
    struct args a = {AT_FDCWD, AT_FDCWD, from, to, 0, 0};
    return two_paths("rename", AT_FDCWD, from, AT_FDCWD, to, call_renameat2, &a);
}
int renameat(int d1, const char* from, int d2, const char* to) {
    struct args a = {d1, d2, from, to, 0, 0};
    return two_paths("rename", d1, from, d2, to, call_renameat2, &a);
}
int renameat2(int d1, const char* from, int d2, const char* to, unsigned flags) {
    struct args a = {d1, d2, from, to, flags, 0};
    return two_paths("rename", d1, from, d2, to, call_renameat2, &a);
}

static int call_linkat(void* c) {
    const struct args* a = c;
    return real_linkat(a->d1, a->p1, a->d2, a->p2, (int)a->flags);
}
int link(const char* from, const char* to) {
    struct args a = {AT_FDCWD, AT_FDCWD, from, to, 0, 0};
    return two_paths("link", AT_FDCWD, from, AT_FDCWD, to, call_linkat, &a);
}
int linkat(int d1, const char* from, int d2, const char* to, int flags) {
    struct args a = {d1, d2, from, to, (unsigned)flags, 0};
    return two_paths("link", d1, from, d2, to, call_linkat, &a);
}

static int call_unlinkat(void* c) {
    const struct args* a = c;
    return real_unlinkat(a->d1, a->p1, (int)a->flags);
}
int unlink(const char* path) {
    struct args a = {AT_FDCWD, 0, path, NULL, 0, 0};
    return one_path("unlink", AT_FDCWD, path, call_unlinkat, &a);
}
int rmdir(const char* path) {
    struct args a = {AT_FDCWD, 0, path, NULL, AT_REMOVEDIR, 0};
    return one_path("rmdir", AT_FDCWD, path, call_unlinkat, &a);
}
int unlinkat(int dirfd, const char* path, int flags) {
    struct args a = {dirfd, 0, path, NULL, (unsigned)flags, 0};
    return one_path(flags & AT_REMOVEDIR ? "rmdir" : "unlink", dirfd, path, call_unlinkat, &a);
}

static int call_mkdirat(void* c) {
    const struct args* a = c;
    return real_mkdirat(a->d1, a->p1, a->mode);
}
int mkdir(const char* path, mode_t mode) {
    struct args a = {AT_FDCWD, 0, path, NULL, 0, mode};
    return one_path("mkdir", AT_FDCWD, path, call_mkdirat, &a);
}
int mkdirat(int dirfd, const char* path, mode_t mode) {
    struct args a = {dirfd, 0, path, NULL, 0, mode};
    return one_path("mkdir", dirfd, path, call_mkdirat, &a);
}

int close(int fd) {
    if (!fd_watched(fd)) return real_close(fd);
    pthread_mutex_lock(&lock);
    record("close %d\n", fd);
    free(fd_path[fd]);
    fd_path[fd] = NULL;
    const int rc = real_close(fd);
    const int err = errno;
    pthread_mutex_unlock(&lock);
    errno = err;
    return rc;
}

// Marks a moment of the program in the log (a save reported durable, a retention promised).
void ckpt_syscall_mark(const char* text) {
    if (log_fd < 0) return;
    pthread_mutex_lock(&lock);
    put_text("mark ");
    put_path(text);
    put_text("\n");
    pthread_mutex_unlock(&lock);
}
