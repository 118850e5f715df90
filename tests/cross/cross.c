/* SPDX-License-Identifier: Apache-2.0 */
/* The C side of the cross-language checkpoint (tests/cross/README.md): write, check, manager-save, manager-resume. */
#include <ckpt/ckpt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float kW[6] = {0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 0.001f};
static const int64_t kStep = 42;
static const uint16_t kBf16[4] = {0x3f80, 0xc000, 0x7f80, 0x0001};
static const uint8_t kF8[3] = {0x38, 0xb8, 0x7e};
static const char kNote[] = "\xc3\xa9t\xc3\xa9 \xe2\x88\x82"; /* "été ∂" */

static const int64_t kWShape[2] = {2, 3}, kBf16Shape[1] = {4}, kF8Shape[1] = {3}, kEmptyShape[2] = {0, 2};

static int fail_call(const char *what, int rc) {
    fprintf(stderr, "cross_c: %s failed: %d (%s): %s\n", what, rc, ckpt_strerror(rc), ckpt_error_message());
    exit(1);
}
#define CALL(expr)                                 \
    do {                                           \
        int rc_ = (expr);                          \
        if (rc_ != CKPT_OK) fail_call(#expr, rc_); \
    } while (0)

static void differ(const char *what) {
    fprintf(stderr, "cross_c: %s differs\n", what);
    exit(1);
}

/* The checkpoint's variables: copies of the values when `data` is non-zero, zero-filled otherwise. */
static ckpt_vars *make_vars(int data) {
    ckpt_vars *v = NULL;
    CALL(ckpt_vars_new(&v));
    CALL(ckpt_vars_add(v, "w", CKPT_FLOAT32, 2, kWShape, data ? kW : NULL, CKPT_COPY));
    CALL(ckpt_vars_add(v, "step", CKPT_INT64, 0, NULL, data ? &kStep : NULL, CKPT_COPY));
    CALL(ckpt_vars_add(v, "bf16", CKPT_BFLOAT16, 1, kBf16Shape, data ? kBf16 : NULL, CKPT_COPY));
    CALL(ckpt_vars_add(v, "f8", CKPT_FLOAT8_E4M3FN, 1, kF8Shape, data ? kF8 : NULL, CKPT_COPY));
    CALL(ckpt_vars_add(v, "empty", CKPT_INT32, 2, kEmptyShape, NULL, CKPT_COPY));
    if (data) {
        CALL(ckpt_vars_set_metadata(v, "writer", "c"));
        CALL(ckpt_vars_set_metadata(v, "note", kNote));
    }
    return v;
}

static void expect_array(const ckpt_vars *v, const char *name, uint32_t dtype, uint32_t ndim, const int64_t *shape,
                         const void *values, size_t nbytes) {
    size_t i;
    if (ckpt_vars_find(v, name, &i) != CKPT_OK) differ(name);
    if (ckpt_vars_dtype(v, i) != dtype || ckpt_vars_ndim(v, i) != ndim) differ(name);
    if (ndim > 0 && memcmp(ckpt_vars_shape(v, i), shape, ndim * sizeof(int64_t)) != 0) differ(name);
    if (ckpt_vars_nbytes(v, i) != nbytes) differ(name);
    if (nbytes > 0 && memcmp(ckpt_vars_data(v, i), values, nbytes) != 0) differ(name);
}

/* Checks names in order, values bit for bit and the note; prints "ok <writer>". */
static void check(const ckpt_vars *v) {
    static const char *const names[] = {"w", "step", "bf16", "f8", "empty"};
    size_t k;
    const char *writer = ckpt_vars_metadata(v, "writer");
    const char *note = ckpt_vars_metadata(v, "note");
    if (ckpt_vars_count(v) != 5) differ("the number of variables");
    for (k = 0; k < 5; ++k)
        if (strcmp(ckpt_vars_name(v, k), names[k]) != 0) differ("the order of the variables");
    expect_array(v, "w", CKPT_FLOAT32, 2, kWShape, kW, sizeof kW);
    expect_array(v, "step", CKPT_INT64, 0, NULL, &kStep, sizeof kStep);
    expect_array(v, "bf16", CKPT_BFLOAT16, 1, kBf16Shape, kBf16, sizeof kBf16);
    expect_array(v, "f8", CKPT_FLOAT8_E4M3FN, 1, kF8Shape, kF8, sizeof kF8);
    expect_array(v, "empty", CKPT_INT32, 2, kEmptyShape, NULL, 0);
    if (note == NULL || strcmp(note, kNote) != 0) differ("metadata 'note'");
    if (writer == NULL) differ("metadata 'writer'");
    printf("ok %s\n", writer);
}

static ckpt_manager *open_manager(const char *logdir) {
    ckpt_manager_options o = CKPT_MANAGER_OPTIONS_INIT;
    ckpt_manager *m = NULL;
    o.keep = 3;
    CALL(ckpt_manager_open(&m, logdir, &o));
    return m;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (argc == 4 && strcmp(cmd, "write") == 0) {
        ckpt_options o = CKPT_OPTIONS_INIT;
        ckpt_vars *v = make_vars(1);
        if (strcmp(argv[3], "plain") == 0) {
            o.layout = CKPT_LAYOUT_PLAIN;
        } else if (strcmp(argv[3], "objax") == 0) {
            o.layout = CKPT_LAYOUT_OBJAX;
        } else {
            fprintf(stderr, "cross_c: layout must be plain or objax\n");
            return 2;
        }
        CALL(ckpt_save(argv[2], v, &o));
        ckpt_vars_free(v);
        return 0;
    }
    if (argc == 3 && strcmp(cmd, "check") == 0) {
        ckpt_vars *v = NULL;
        CALL(ckpt_read(&v, argv[2], NULL));
        check(v);
        ckpt_vars_free(v);
        return 0;
    }
    if (argc == 4 && (strcmp(cmd, "manager-save") == 0 || strcmp(cmd, "manager-resume") == 0)) {
        const int64_t idx = strtoll(argv[3], NULL, 10);
        ckpt_manager *m = open_manager(argv[2]);
        if (strcmp(cmd, "manager-save") == 0) {
            ckpt_vars *v = make_vars(1);
            CALL(ckpt_vars_set_metadata(v, "step", argv[3]));
            CALL(ckpt_manager_save(m, v, idx));
            ckpt_vars_free(v);
        } else {
            ckpt_vars *v = make_vars(0);
            const char *step;
            int64_t restored = -1;
            CALL(ckpt_manager_restore(m, v, CKPT_LATEST, &restored));
            if (restored != idx) differ("the index restored");
            step = ckpt_vars_metadata(v, "step");
            if (step == NULL || strcmp(step, argv[3]) != 0) differ("metadata 'step'");
            check(v);
            ckpt_vars_free(v);
        }
        CALL(ckpt_manager_close(m));
        return 0;
    }
    fprintf(stderr, "usage: cross_c write PATH plain|objax | check PATH | manager-save LOGDIR IDX | "
                    "manager-resume LOGDIR IDX\n");
    return 2;
}
