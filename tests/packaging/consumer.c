/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program outside the ckpt tree, built against an installed ckpt (through pkg-config or find_package):
 * the headers compile as C99, the library loads, and a save/read round trip works.
 *
 *     consumer <path.npz>
 */
#include <ckpt/ckpt.h>

#include <stdio.h>
#include <string.h>

static int fail(int rc, const char *what) {
    fprintf(stderr, "consumer: %s: %s: %s\n", what, ckpt_strerror(rc), ckpt_error_message());
    return 1;
}

int main(int argc, char **argv) {
    static const float values[3] = {1.5f, -2.25f, 1e-3f};
    const int64_t shape[1] = {3};
    ckpt_vars *vars = NULL, *loaded = NULL;
    size_t index = 0;
    const float *read_back;
    int rc, status = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: consumer <path.npz>\n");
        return 2;
    }
    if (ckpt_version_number() != CKPT_VERSION_NUMBER) {
        fprintf(stderr, "consumer: headers are version %d, library is %u (%s)\n", CKPT_VERSION_NUMBER,
                (unsigned)ckpt_version_number(), ckpt_version_string());
        return 1;
    }
    if (strcmp(ckpt_version_string(), CKPT_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: headers say %s, library says %s\n", CKPT_VERSION_STRING, ckpt_version_string());
        return 1;
    }

    if ((rc = ckpt_vars_new(&vars)) != CKPT_OK) return fail(rc, "ckpt_vars_new");
    if ((rc = ckpt_vars_add(vars, "x", CKPT_FLOAT32, 1, shape, values, CKPT_COPY)) != CKPT_OK) {
        fail(rc, "ckpt_vars_add");
        goto done;
    }
    if ((rc = ckpt_save(argv[1], vars, NULL)) != CKPT_OK) {
        fail(rc, "ckpt_save");
        goto done;
    }
    if ((rc = ckpt_read(&loaded, argv[1], NULL)) != CKPT_OK) {
        fail(rc, "ckpt_read");
        goto done;
    }
    if ((rc = ckpt_vars_find(loaded, "x", &index)) != CKPT_OK) {
        fail(rc, "ckpt_vars_find(x)");
        goto done;
    }
    read_back = (const float *)ckpt_vars_data(loaded, index);
    if (ckpt_vars_count(loaded) != 1 || ckpt_vars_dtype(loaded, index) != CKPT_FLOAT32 ||
        ckpt_vars_ndim(loaded, index) != 1 || ckpt_vars_shape(loaded, index)[0] != 3 ||
        ckpt_vars_nbytes(loaded, index) != sizeof values || read_back == NULL ||
        memcmp(read_back, values, sizeof values) != 0) {
        fprintf(stderr, "consumer: the array read back differs from the one saved\n");
        goto done;
    }
    printf("consumer: ckpt %s, round trip of %s ok\n", ckpt_version_string(), argv[1]);
    status = 0;

done:
    ckpt_vars_free(loaded);
    ckpt_vars_free(vars);
    return status;
}
