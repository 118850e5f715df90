/* SPDX-License-Identifier: Apache-2.0 */
/*
 * save_load: the README's demo.
 *
 * Builds the variables of a small MLP (two dense layers, a step counter and the class labels), saves them to an
 * .npz that numpy.load opens, reads the file back, checks that every byte survived, and prints what is inside.
 *
 *     save_load [path]        (default: model.npz)
 */
#include <ckpt/ckpt.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Prints the failure of a ckpt call and passes its code on. */
static int check(int rc, const char *what) {
    if (rc != CKPT_OK) {
        fprintf(stderr, "save_load: %s failed: %s: %s\n", what, ckpt_strerror(rc), ckpt_error_message());
    }
    return rc;
}

/* "(4, 8)", "(8,)" or "()" as numpy prints shapes. */
static void format_shape(char *buf, size_t size, uint32_t ndim, const int64_t *shape) {
    size_t used = 0;
    uint32_t d;
    used += (size_t)snprintf(buf, size, "(");
    for (d = 0; d < ndim && used < size; ++d) {
        used += (size_t)snprintf(buf + used, size - used, d == 0 ? "%" PRId64 : ", %" PRId64, shape[d]);
    }
    if (used < size) {
        snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
    }
}

/* Stores an ASCII string as one numpy '<U' item: `width` UTF-32 code units, zero-padded. */
static void put_label(uint32_t *item, size_t width, const char *text) {
    size_t k, length = strlen(text);
    for (k = 0; k < width; ++k) {
        item[k] = k < length ? (uint32_t)(unsigned char)text[k] : 0u;
    }
}

/* Same dtype, itemsize, shape and bytes as array i of `expected`? Prints the first difference. */
static int same_array(const ckpt_vars *expected, size_t i, const ckpt_vars *actual) {
    const char *name = ckpt_vars_name(expected, i);
    size_t j;
    uint32_t ndim;
    size_t nbytes;
    if (ckpt_vars_find(actual, name, &j) != CKPT_OK) {
        fprintf(stderr, "save_load: '%s' is missing from the file\n", name);
        return 0;
    }
    ndim = ckpt_vars_ndim(expected, i);
    nbytes = ckpt_vars_nbytes(expected, i);
    if (ckpt_vars_dtype(actual, j) != ckpt_vars_dtype(expected, i) ||
        ckpt_vars_itemsize(actual, j) != ckpt_vars_itemsize(expected, i) || ckpt_vars_ndim(actual, j) != ndim ||
        memcmp(ckpt_vars_shape(actual, j), ckpt_vars_shape(expected, i), ndim * sizeof(int64_t)) != 0) {
        fprintf(stderr, "save_load: '%s' came back with another dtype or shape\n", name);
        return 0;
    }
    if (ckpt_vars_nbytes(actual, j) != nbytes ||
        (nbytes > 0 && memcmp(ckpt_vars_data(actual, j), ckpt_vars_data(expected, i), nbytes) != 0)) {
        fprintf(stderr, "save_load: the bytes of '%s' differ\n", name);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "model.npz";

    /* A 4 -> 8 -> 2 MLP. */
    float dense1_w[4 * 8], dense1_b[8], dense2_w[8 * 2], dense2_b[2];
    const int64_t dense1_w_shape[2] = {4, 8}, dense1_b_shape[1] = {8};
    const int64_t dense2_w_shape[2] = {8, 2}, dense2_b_shape[1] = {2};
    const int64_t step = 1000;
    enum { kLabelWidth = 8 }; /* numpy dtype '<U8' */
    uint32_t labels[2][kLabelWidth];
    const int64_t labels_shape[1] = {2};

    ckpt_vars *model = NULL, *loaded = NULL;
    size_t i, total = 0;
    int status = 1;

    for (i = 0; i < 4 * 8; ++i) dense1_w[i] = (float)((int)(i * 37 % 17) - 8) / 16.0f;
    for (i = 0; i < 8; ++i) dense1_b[i] = 0.01f * (float)i;
    for (i = 0; i < 8 * 2; ++i) dense2_w[i] = (float)((int)(i * 11 % 13) - 6) / 8.0f;
    dense2_b[0] = 0.5f;
    dense2_b[1] = -0.5f;
    put_label(labels[0], kLabelWidth, "negative");
    put_label(labels[1], kLabelWidth, "positive");

    printf("ckpt %s\n", ckpt_version_string());

    if (check(ckpt_vars_new(&model), "ckpt_vars_new") != CKPT_OK) goto done;
    /* CKPT_VARS_COPY: the collection keeps its own copy, so the arrays above could change right after. */
    if (check(ckpt_vars_add(model, "dense1/w", CKPT_FLOAT32, 2, dense1_w_shape, dense1_w, CKPT_VARS_COPY),
              "ckpt_vars_add(dense1/w)") != CKPT_OK ||
        check(ckpt_vars_add(model, "dense1/b", CKPT_FLOAT32, 1, dense1_b_shape, dense1_b, CKPT_VARS_COPY),
              "ckpt_vars_add(dense1/b)") != CKPT_OK ||
        check(ckpt_vars_add(model, "dense2/w", CKPT_FLOAT32, 2, dense2_w_shape, dense2_w, CKPT_VARS_COPY),
              "ckpt_vars_add(dense2/w)") != CKPT_OK ||
        check(ckpt_vars_add(model, "dense2/b", CKPT_FLOAT32, 1, dense2_b_shape, dense2_b, CKPT_VARS_COPY),
              "ckpt_vars_add(dense2/b)") != CKPT_OK ||
        check(ckpt_vars_add(model, "step", CKPT_INT64, 0, NULL, &step, CKPT_VARS_COPY), "ckpt_vars_add(step)") !=
            CKPT_OK ||
        check(ckpt_vars_add_strings(model, "labels", CKPT_UNICODE, sizeof labels[0], 1, labels_shape, labels,
                                    CKPT_VARS_COPY),
              "ckpt_vars_add_strings(labels)") != CKPT_OK) {
        goto done;
    }

    /* Atomic and durable: `path` holds either the previous file or the complete new one. */
    if (check(ckpt_save(path, model, NULL), "ckpt_save") != CKPT_OK) goto done;
    printf("saved %zu variables to %s\n", ckpt_vars_count(model), path);

    if (check(ckpt_read(&loaded, path, NULL), "ckpt_read") != CKPT_OK) goto done;
    if (ckpt_vars_count(loaded) != ckpt_vars_count(model)) {
        fprintf(stderr, "save_load: wrote %zu variables, read %zu\n", ckpt_vars_count(model),
                ckpt_vars_count(loaded));
        goto done;
    }

    printf("\n%-10s %-10s %-8s %6s\n", "name", "dtype", "shape", "bytes");
    for (i = 0; i < ckpt_vars_count(loaded); ++i) {
        char shape[64], dtype[32];
        uint32_t code = ckpt_vars_dtype(loaded, i);
        const char *dtype_name = ckpt_dtype_name(code);
        if (code == CKPT_UNICODE) {
            snprintf(dtype, sizeof dtype, "<U%zu", ckpt_vars_itemsize(loaded, i) / 4);
        } else if (code == CKPT_BYTES) {
            snprintf(dtype, sizeof dtype, "|S%zu", ckpt_vars_itemsize(loaded, i));
        } else {
            snprintf(dtype, sizeof dtype, "%s", dtype_name != NULL ? dtype_name : "?");
        }
        format_shape(shape, sizeof shape, ckpt_vars_ndim(loaded, i), ckpt_vars_shape(loaded, i));
        printf("%-10s %-10s %-8s %6zu\n", ckpt_vars_name(loaded, i), dtype, shape, ckpt_vars_nbytes(loaded, i));
        total += ckpt_vars_nbytes(loaded, i);
    }
    printf("%-10s %-10s %-8s %6zu\n\n", "total", "", "", total);

    for (i = 0; i < ckpt_vars_count(model); ++i) {
        if (!same_array(model, i, loaded)) goto done;
    }
    printf("read back %s: every variable matches, byte for byte\n", path);
    status = 0;

done:
    ckpt_vars_free(loaded);
    ckpt_vars_free(model);
    return status;
}
