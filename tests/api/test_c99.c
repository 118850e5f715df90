/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C API from plain C99: the header compiles as C with -pedantic, and the core flow works without any C++
 * on the caller's side: options, collections, save, read, restore with a renamer, lazy access, error codes
 * and messages. Prints "N passed, M failed" and exits nonzero if anything failed.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, unlink, rmdir */

#include <ckpt/ckpt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed = 0;
static int failed = 0;

#define CHECK(cond)                                                                                     \
    do {                                                                                                \
        if (cond) {                                                                                     \
            ++passed;                                                                                   \
        } else {                                                                                        \
            ++failed;                                                                                   \
            fprintf(stderr, "%s:%d: FAILED: %s\n  last ckpt message: %s\n", __FILE__, __LINE__, #cond, \
                    ckpt_error_message());                                                              \
        }                                                                                               \
    } while (0)

#define CHECK_RC(call, expected)                                                                          \
    do {                                                                                                  \
        int rc_ = (call);                                                                                 \
        if (rc_ == (expected)) {                                                                          \
            ++passed;                                                                                     \
        } else {                                                                                          \
            ++failed;                                                                                     \
            fprintf(stderr, "%s:%d: FAILED: %s returned %d (%s), expected %d\n  message: %s\n", __FILE__, \
                    __LINE__, #call, rc_, ckpt_strerror(rc_), (int)(expected), ckpt_error_message());     \
        }                                                                                                 \
    } while (0)

#define CHECK_MESSAGE_HAS(text) CHECK(strstr(ckpt_error_message(), (text)) != NULL)

static char dir[4096];
static char path_plain[4200], path_objax[4200], path_prefixed[4200], path_missing[4200];

static void join(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

static void cleanup(void) {
    unlink(path_plain);
    unlink(path_objax);
    unlink(path_prefixed);
    rmdir(dir);
}

/* Strips "net." from names on disk; payload counts the calls. Returns the code in *payload when negative. */
struct rename_state {
    int calls;
    int fail_with;
};

static int strip_net(const char *name, char *buf, size_t buf_size, void *payload) {
    struct rename_state *state = (struct rename_state *)payload;
    size_t len;
    state->calls++;
    if (state->fail_with < 0) return state->fail_with;
    if (strncmp(name, "net.", 4) != 0) return 0;
    len = strlen(name + 4);
    if (len > buf_size) return (int)len;
    memcpy(buf, name + 4, len);
    return (int)len;
}

struct progress_state {
    unsigned long long last_done, last_total;
    int calls, decreasing;
};

static void on_progress(uint64_t done, uint64_t total, void *payload) {
    struct progress_state *p = (struct progress_state *)payload;
    if (done < p->last_done) p->decreasing = 1;
    p->last_done = done;
    p->last_total = total;
    p->calls++;
}

static int same_bytes(const ckpt_vars *a, size_t i, const ckpt_vars *b, size_t j) {
    size_t n = ckpt_vars_nbytes(a, i);
    if (n != ckpt_vars_nbytes(b, j)) return 0;
    return n == 0 || memcmp(ckpt_vars_data(a, i), ckpt_vars_data(b, j), n) == 0;
}

static int same_collection(const ckpt_vars *a, const ckpt_vars *b) {
    size_t i, k;
    if (ckpt_vars_count(a) != ckpt_vars_count(b)) return 0;
    for (i = 0; i < ckpt_vars_count(a); ++i) {
        if (strcmp(ckpt_vars_name(a, i), ckpt_vars_name(b, i)) != 0) return 0;
        if (ckpt_vars_dtype(a, i) != ckpt_vars_dtype(b, i)) return 0;
        if (ckpt_vars_itemsize(a, i) != ckpt_vars_itemsize(b, i)) return 0;
        if (ckpt_vars_ndim(a, i) != ckpt_vars_ndim(b, i)) return 0;
        for (k = 0; k < ckpt_vars_ndim(a, i); ++k)
            if (ckpt_vars_shape(a, i)[k] != ckpt_vars_shape(b, i)[k]) return 0;
        if (!same_bytes(a, i, b, i)) return 0;
    }
    return 1;
}

static void test_version_and_codes(void) {
    char expected[64];
    CHECK(ckpt_version_number() == (uint32_t)CKPT_VERSION_NUMBER);
    CHECK(strcmp(ckpt_version_string(), CKPT_VERSION_STRING) == 0);
    snprintf(expected, sizeof expected, "%d.%d.%d", CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR, CKPT_VERSION_PATCH);
    CHECK(strcmp(ckpt_version_string(), expected) == 0);
    CHECK(strcmp(ckpt_strerror(CKPT_EINVAL), "invalid argument") == 0);
    CHECK(strcmp(ckpt_strerror(-999), "unknown error code") == 0);
    CHECK(strcmp(ckpt_strerror(CKPT_EMISMATCH), "unknown error code") != 0);
    CHECK(ckpt_dtype_size(CKPT_FLOAT32) == 4);
    CHECK(ckpt_dtype_size(CKPT_COMPLEX128) == 16);
    CHECK(ckpt_dtype_size(CKPT_UNICODE) == 0);
    CHECK(strcmp(ckpt_dtype_name(CKPT_BOOL), "bool") == 0);
    CHECK(strcmp(ckpt_dtype_name(CKPT_BYTES), "bytes") == 0);
    CHECK(ckpt_dtype_name(0) == NULL);
    CHECK(strcmp(ckpt_dtype_name(CKPT_BFLOAT16), "bfloat16") == 0);
    CHECK(strcmp(ckpt_dtype_name(CKPT_FLOAT8_E8M0FNU), "float8_e8m0fnu") == 0);
    CHECK(ckpt_dtype_size(CKPT_BFLOAT16) == 2);
    CHECK(ckpt_dtype_size(CKPT_FLOAT8_E4M3FN) == 1);
    CHECK(ckpt_dtype_size(CKPT_VOID) == 0);
    CHECK(ckpt_dtype_name(24) == NULL);
}

static void test_options(void) {
    /* Compiled with -Wextra -Werror: the macro must spell out every field (-Wmissing-field-initializers). */
    ckpt_options from_macro = CKPT_OPTIONS_INIT;
    ckpt_options from_function;
    CHECK_RC(ckpt_options_init(&from_function, CKPT_OPTIONS_VERSION), CKPT_OK);
    CHECK(from_macro.version == CKPT_OPTIONS_VERSION);
    CHECK(from_function.version == CKPT_OPTIONS_VERSION);
    CHECK(from_macro.layout == CKPT_LAYOUT_AUTO && from_function.layout == CKPT_LAYOUT_AUTO);
    CHECK(from_macro.compression == CKPT_STORE && from_function.compression == CKPT_STORE);
    CHECK(from_macro.rename == NULL && from_function.rename == NULL);
    CHECK(from_macro.progress == NULL && from_function.progress == NULL);
    CHECK_RC(ckpt_options_init(&from_function, 0), CKPT_EINVAL);
    CHECK_RC(ckpt_options_init(&from_function, CKPT_OPTIONS_VERSION + 1), CKPT_EINVAL);
    CHECK_RC(ckpt_options_init(NULL, CKPT_OPTIONS_VERSION), CKPT_EINVAL);
}

static void test_core_flow(void) {
    static const float weights[6] = {0.5f, -1.0f, 2.0f, 3.5f, -4.25f, 1e-3f};
    static const uint32_t text[4] = {'h', 'i', 0x1F600u, 0}; /* '<U2': "hi", "\U0001F600" */
    static const char raw[6] = {'a', 'b', 'c', 'x', '\0', '\0'};
    const int64_t shape23[2] = {2, 3};
    const int64_t shape2[1] = {2};
    int64_t step = 1234;
    ckpt_options opts;
    ckpt_vars *vars = NULL, *back = NULL, *prefixed = NULL, *target = NULL;
    ckpt_reader *npz = NULL;
    size_t index = 0, i;
    struct rename_state renames = {0, 0};
    struct progress_state progress = {0, 0, 0, 0};
    float restored_w[6] = {0};
    int64_t restored_step = 0;
    unsigned char buf[64];

    /* A collection: owned, borrowed, unicode and bytes arrays. */
    CHECK_RC(ckpt_vars_new(&vars), CKPT_OK);
    CHECK_RC(ckpt_vars_add(vars, "dense/w", CKPT_FLOAT32, 2, shape23, weights, CKPT_COPY), CKPT_OK);
    CHECK_RC(ckpt_vars_add(vars, "step", CKPT_INT64, 0, NULL, &step, CKPT_BORROW), CKPT_OK);
    CHECK_RC(ckpt_vars_add_strings(vars, "labels", CKPT_UNICODE, 8, 1, shape2, text, CKPT_COPY), CKPT_OK);
    CHECK_RC(ckpt_vars_add_strings(vars, "tags", CKPT_BYTES, 3, 1, shape2, raw, CKPT_COPY), CKPT_OK);
    CHECK(ckpt_vars_count(vars) == 4);
    CHECK(ckpt_vars_data(vars, 1) == (void *)&step);
    CHECK(ckpt_vars_data(vars, 0) != (const void *)weights);
    CHECK(ckpt_vars_nbytes(vars, 0) == 24);
    CHECK(ckpt_vars_shape(vars, 1) != NULL);
    CHECK_RC(ckpt_vars_find(vars, "labels", &index), CKPT_OK);
    CHECK(index == 2);
    CHECK_RC(ckpt_vars_find(vars, "absent", &index), CKPT_ENOTFOUND);

    /* Errors: exact codes and messages that name the variable. */
    CHECK_RC(ckpt_vars_add(vars, "step", CKPT_INT64, 0, NULL, &step, CKPT_COPY), CKPT_EEXIST);
    CHECK_MESSAGE_HAS("step");
    CHECK_RC(ckpt_vars_add(vars, "neg", CKPT_FLOAT32, 1, (const int64_t[]){-1}, NULL, CKPT_COPY), CKPT_EINVAL);
    CHECK_MESSAGE_HAS("neg");
    CHECK_RC(ckpt_vars_add(vars, "", CKPT_FLOAT32, 0, NULL, NULL, CKPT_COPY), CKPT_EINVAL);
    CHECK_RC(ckpt_vars_add(vars, "s", CKPT_UNICODE, 0, NULL, NULL, CKPT_COPY), CKPT_EINVAL);
    CHECK_RC(ckpt_vars_add_strings(vars, "odd_unicode", CKPT_UNICODE, 6, 0, NULL, NULL, CKPT_COPY), CKPT_EINVAL);
    CHECK_MESSAGE_HAS("odd_unicode");
    CHECK_RC(ckpt_vars_add(vars, "b", CKPT_FLOAT32, 1, shape2, NULL, CKPT_BORROW), CKPT_EINVAL);
    CHECK_MESSAGE_HAS("'b'");
    CHECK(ckpt_vars_count(vars) == 4);

    /* Save (plain, stored) with progress, read back. */
    CHECK_RC(ckpt_options_init(&opts, CKPT_OPTIONS_VERSION), CKPT_OK);
    opts.progress = on_progress;
    opts.progress_payload = &progress;
    CHECK_RC(ckpt_save(path_plain, vars, &opts), CKPT_OK);
    CHECK(progress.calls > 0 && !progress.decreasing);
    CHECK(progress.last_done == 24 + 8 + 16 + 6 && progress.last_total == 24 + 8 + 16 + 6);
    CHECK_RC(ckpt_read(&back, path_plain, NULL), CKPT_OK);
    CHECK(back != NULL && same_collection(vars, back));
    ckpt_vars_free(back);
    back = NULL;

    /* Save (objax, deflate), read back with layout detection. */
    CHECK_RC(ckpt_options_init(&opts, CKPT_OPTIONS_VERSION), CKPT_OK);
    opts.layout = CKPT_LAYOUT_OBJAX;
    opts.compression = CKPT_DEFLATE;
    opts.level = 6;
    CHECK_RC(ckpt_save(path_objax, vars, &opts), CKPT_OK);
    CHECK_RC(ckpt_read(&back, path_objax, NULL), CKPT_OK);
    CHECK(back != NULL && same_collection(vars, back));
    ckpt_vars_free(back);
    back = NULL;

    /* Restore with a renamer: the file holds "net.w" and "net.step"; the collection asks for "w" and "step". */
    CHECK_RC(ckpt_vars_new(&prefixed), CKPT_OK);
    CHECK_RC(ckpt_vars_add(prefixed, "net.w", CKPT_FLOAT32, 2, shape23, weights, CKPT_COPY), CKPT_OK);
    CHECK_RC(ckpt_vars_add(prefixed, "net.step", CKPT_INT64, 0, NULL, &step, CKPT_COPY), CKPT_OK);
    CHECK_RC(ckpt_vars_add(prefixed, "unrelated", CKPT_UINT8, 0, NULL, NULL, CKPT_COPY), CKPT_OK);
    CHECK_RC(ckpt_save(path_prefixed, prefixed, NULL), CKPT_OK);
    CHECK_RC(ckpt_vars_new(&target), CKPT_OK);
    CHECK_RC(ckpt_vars_add(target, "w", CKPT_FLOAT32, 2, shape23, restored_w, CKPT_BORROW), CKPT_OK);
    CHECK_RC(ckpt_vars_add(target, "step", CKPT_INT64, 0, NULL, &restored_step, CKPT_BORROW), CKPT_OK);

    CHECK_RC(ckpt_restore(path_prefixed, target, NULL), CKPT_EMISMATCH);
    CHECK_MESSAGE_HAS("'w'");
    CHECK_MESSAGE_HAS("'net.w'");
    CHECK(restored_step == 0);

    CHECK_RC(ckpt_options_init(&opts, CKPT_OPTIONS_VERSION), CKPT_OK);
    opts.rename = strip_net;
    opts.rename_payload = &renames;
    renames.fail_with = CKPT_EBUSY;
    CHECK_RC(ckpt_restore(path_prefixed, target, &opts), CKPT_EBUSY);
    CHECK(restored_step == 0);
    renames.fail_with = 0;
    renames.calls = 0;
    CHECK_RC(ckpt_restore(path_prefixed, target, &opts), CKPT_OK);
    CHECK(renames.calls == 3);
    CHECK(restored_step == 1234);
    CHECK(memcmp(restored_w, weights, sizeof weights) == 0);

    /* Lazy access. */
    CHECK_RC(ckpt_reader_open(&npz, path_objax, NULL), CKPT_OK);
    CHECK(ckpt_reader_count(npz) == 4);
    for (i = 0; i < ckpt_reader_count(npz) && i < 4; ++i) {
        CHECK(strcmp(ckpt_reader_name(npz, i), ckpt_vars_name(vars, i)) == 0);
        CHECK(ckpt_reader_dtype(npz, i) == ckpt_vars_dtype(vars, i));
        CHECK(ckpt_reader_itemsize(npz, i) == ckpt_vars_itemsize(vars, i));
        CHECK(ckpt_reader_ndim(npz, i) == ckpt_vars_ndim(vars, i));
        CHECK(ckpt_reader_shape(npz, i) != NULL);
        CHECK(ckpt_reader_nbytes(npz, i) == ckpt_vars_nbytes(vars, i));
        memset(buf, 0xEE, sizeof buf);
        CHECK_RC(ckpt_reader_read_into(npz, i, buf, sizeof buf), CKPT_OK);
        CHECK(memcmp(buf, ckpt_vars_data(vars, i), ckpt_vars_nbytes(vars, i)) == 0);
    }
    CHECK_RC(ckpt_reader_read_into(npz, 0, buf, 23), CKPT_EBUFS);
    CHECK_MESSAGE_HAS("dense/w");
    CHECK_RC(ckpt_reader_read_into(npz, 4, buf, sizeof buf), CKPT_ENOTFOUND);
    CHECK_RC(ckpt_reader_read_into(npz, 0, NULL, sizeof buf), CKPT_EINVAL);
    CHECK(ckpt_reader_name(npz, 4) == NULL);
    ckpt_reader_close(npz);
    ckpt_reader_close(NULL);

    /* A missing file: CKPT_ENOTFOUND naming the path, *out NULL. */
    back = (ckpt_vars *)&renames;
    CHECK_RC(ckpt_read(&back, path_missing, NULL), CKPT_ENOTFOUND);
    CHECK(back == NULL);
    CHECK_MESSAGE_HAS(path_missing);
    npz = (ckpt_reader *)&renames;
    CHECK_RC(ckpt_reader_open(&npz, path_missing, NULL), CKPT_ENOTFOUND);
    CHECK(npz == NULL);

    ckpt_vars_free(target);
    ckpt_vars_free(prefixed);
    ckpt_vars_free(vars);
    ckpt_vars_free(NULL);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ckpt-test-c99-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("test_c99: mkdtemp");
        return 1;
    }
    join(path_plain, sizeof path_plain, "plain.npz");
    join(path_objax, sizeof path_objax, "objax.npz");
    join(path_prefixed, sizeof path_prefixed, "prefixed.npz");
    join(path_missing, sizeof path_missing, "missing.npz");

    test_version_and_codes();
    test_options();
    test_core_flow();

    cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
