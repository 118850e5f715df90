/* SPDX-License-Identifier: Apache-2.0 */
/* A program written against ckpt.h before 0.11, when the functions of checkpoint files were named ckpt_npz_*: it
 * must still compile unchanged and get what the new names give. Every earlier name of ckpt.h's "Names before 0.11"
 * (functions, types and flags) is called here, on an .npz and on a safetensors file, and its result compared with
 * the function's new name. The library exports both names as one symbol (scripts/abi-check checks the addresses);
 * this checks what a program sees through them.
 *
 * C99 only, compiled with -pedantic. Prints "N passed, M failed"; exits non-zero if anything failed. */
#include "ckpt/ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed;
static int g_failed;

static void check(int ok, const char *what, int line) {
    if (ok) {
        ++g_passed;
    } else {
        ++g_failed;
        fprintf(stderr, "%s:%d: check failed: %s\n  last ckpt message: %s\n", __FILE__, line, what,
                ckpt_error_message());
    }
}
#define CHECK(cond) check((cond) != 0, #cond, __LINE__)

static int same_text(const char *a, const char *b) { return a != NULL && b != NULL && strcmp(a, b) == 0; }

/* Every accessor of array i, under both names. */
static void compare_array(ckpt_npz *old_handle, ckpt_reader *reader, size_t i) {
    size_t dims;
    CHECK(same_text(ckpt_npz_name(old_handle, i), ckpt_reader_name(reader, i)));
    CHECK(ckpt_npz_dtype(old_handle, i) == ckpt_reader_dtype(reader, i));
    CHECK(ckpt_npz_itemsize(old_handle, i) == ckpt_reader_itemsize(reader, i));
    CHECK(ckpt_npz_ndim(old_handle, i) == ckpt_reader_ndim(reader, i));
    for (dims = 0; dims < ckpt_reader_ndim(reader, i); ++dims)
        CHECK(ckpt_npz_shape(old_handle, i)[dims] == ckpt_reader_shape(reader, i)[dims]);
    CHECK(ckpt_npz_nbytes(old_handle, i) == ckpt_reader_nbytes(reader, i));
    CHECK(same_text(ckpt_npz_member_name(old_handle, i), ckpt_reader_member_name(reader, i)));
    CHECK(ckpt_npz_compression(old_handle, i) == ckpt_reader_compression(reader, i));
    CHECK(ckpt_npz_stored_bytes(old_handle, i) == ckpt_reader_stored_bytes(reader, i));
    CHECK(ckpt_npz_crc32(old_handle, i) == ckpt_reader_crc32(reader, i));
    CHECK(ckpt_npz_byte_order(old_handle, i) == ckpt_reader_byte_order(reader, i));
    CHECK(ckpt_npz_fortran_order(old_handle, i) == ckpt_reader_fortran_order(reader, i));
    CHECK(ckpt_npz_data_offset(old_handle, i) == ckpt_reader_data_offset(reader, i));
}

static void check_file(const char *path, const ckpt_vars *saved, uint32_t format) {
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    ckpt_npz *old_handle = NULL;
    ckpt_reader *reader = NULL;
    ckpt_vars *read = NULL;
    ckpt_vars *mapped = NULL;
    const void *data = NULL;
    float whole[6];
    float part[2];
    size_t at = 99;
    ckpt_vars *restored = NULL;
    const float zeros[6] = {0};
    const int64_t shape[2] = {2, 3};
    size_t i;

    CHECK(ckpt_npz_options_init(&opts, CKPT_NPZ_OPTIONS_VERSION) == CKPT_OK);
    CHECK(opts.version == CKPT_OPTIONS_VERSION);
    opts.flags = CKPT_NPZ_MAP_UNVERIFIED | CKPT_NPZ_MAP_WRITABLE;
    CHECK(ckpt_npz_save(path, saved, &opts) == CKPT_OK);

    CHECK(ckpt_npz_open(&old_handle, path, &opts) == CKPT_OK);
    CHECK(ckpt_reader_open(&reader, path, &opts) == CKPT_OK);
    if (old_handle == NULL || reader == NULL) return;
    CHECK(ckpt_npz_format(old_handle) == format && ckpt_reader_format(reader) == format);
    CHECK(ckpt_npz_layout(old_handle) == ckpt_reader_layout(reader));
    CHECK(ckpt_npz_file_size(old_handle) == ckpt_reader_file_size(reader) && ckpt_reader_file_size(reader) > 0);
    CHECK(ckpt_npz_count(old_handle) == 2 && ckpt_reader_count(reader) == 2);
    for (i = 0; i < ckpt_reader_count(reader); ++i) compare_array(old_handle, reader, i);
    CHECK(ckpt_npz_find(old_handle, "w", &at) == CKPT_OK);
    CHECK(same_text(ckpt_reader_name(reader, at), "w"));
    CHECK(ckpt_npz_read_into(old_handle, at, whole, sizeof whole) == CKPT_OK && whole[5] == 5.5f);
    CHECK(ckpt_npz_read_range(old_handle, at, 2 * sizeof(float), part, sizeof part) == CKPT_OK);
    CHECK(part[0] == 2.5f && part[1] == 3.5f);
    CHECK(ckpt_npz_map(old_handle, at, &data) == CKPT_OK && data != NULL && ((const float *)data)[1] == 1.5f);
    CHECK(ckpt_npz_metadata_count(old_handle) == ckpt_reader_metadata_count(reader));
    CHECK(same_text(ckpt_npz_metadata(old_handle, "note"), "kept"));
    CHECK(same_text(ckpt_npz_metadata_key(old_handle, 0), ckpt_reader_metadata_key(reader, 0)));
    CHECK(same_text(ckpt_npz_metadata_value(old_handle, 0), ckpt_reader_metadata_value(reader, 0)));
    CHECK(ckpt_npz_map_vars(old_handle, &mapped) == CKPT_OK && ckpt_vars_count(mapped) == 2);
    ckpt_vars_free(mapped);
    ckpt_npz_close(old_handle);
    ckpt_reader_close(reader);

    CHECK(ckpt_npz_read(&read, path, &opts) == CKPT_OK && ckpt_vars_count(read) == 2);
    ckpt_vars_free(read);

    /* A partial restore, by the flag's earlier name: "w" is filled, "missing" left alone. */
    CHECK(ckpt_vars_new(&restored) == CKPT_OK);
    CHECK(ckpt_vars_add(restored, "w", CKPT_FLOAT32, 2, shape, zeros, CKPT_VARS_COPY) == CKPT_OK);
    CHECK(ckpt_vars_add(restored, "missing", CKPT_FLOAT32, 2, shape, zeros, CKPT_VARS_COPY) == CKPT_OK);
    opts.flags = CKPT_NPZ_PARTIAL;
    CHECK(ckpt_npz_restore(path, restored, &opts) == CKPT_OK);
    CHECK(((const float *)ckpt_vars_data(restored, 0))[4] == 4.5f);
    CHECK(ckpt_vars_restored(restored, 0) == 1 && ckpt_vars_restored(restored, 1) == 0);
    ckpt_vars_free(restored);
}

static void check_memory(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char *bytes = NULL;
    long size;
    ckpt_vars *vars = NULL;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
        CHECK(!"the saved file reads back");
        if (f != NULL) fclose(f);
        return;
    }
    bytes = malloc((size_t)size);
    CHECK(bytes != NULL && fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    CHECK(ckpt_npz_read_memory(&vars, bytes, (size_t)size, NULL) == CKPT_OK && ckpt_vars_count(vars) == 2);
    ckpt_vars_free(vars);
    free(bytes);
}

int main(int argc, char **argv) {
    const float w[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
    const int32_t b[3] = {1, -2, 3};
    const int64_t w_shape[2] = {2, 3};
    const int64_t b_shape[1] = {3};
    char npz[4096];
    char st[4096];
    ckpt_vars *vars = NULL;
    const char *dir = argc > 1 ? argv[1] : ".";

    CHECK(ckpt_vars_new(&vars) == CKPT_OK);
    snprintf(npz, sizeof npz, "%s/earlier_names.npz", dir);
    snprintf(st, sizeof st, "%s/earlier_names.safetensors", dir);
    CHECK(ckpt_vars_add(vars, "w", CKPT_FLOAT32, 2, w_shape, w, CKPT_VARS_COPY) == CKPT_OK);
    CHECK(ckpt_vars_add(vars, "b", CKPT_INT32, 1, b_shape, b, CKPT_VARS_COPY) == CKPT_OK);
    CHECK(ckpt_vars_set_metadata(vars, "note", "kept") == CKPT_OK);
    check_file(npz, vars, CKPT_FORMAT_NPZ);
    check_file(st, vars, CKPT_FORMAT_SAFETENSORS);
    check_memory(npz);
    check_memory(st);
    /* The flags keep their values under both names. */
    CHECK(CKPT_NPZ_PARTIAL == CKPT_PARTIAL && CKPT_NPZ_MAP_UNVERIFIED == CKPT_MAP_UNVERIFIED);
    CHECK(CKPT_NPZ_MAP_WRITABLE == CKPT_MAP_WRITABLE && CKPT_NPZ_KEEP_MANAGER_KEYS == CKPT_KEEP_MANAGER_KEYS);
    ckpt_vars_free(vars);
    remove(npz);
    remove(st);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
