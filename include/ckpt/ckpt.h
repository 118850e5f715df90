/*
 * ckpt — machine-learning training checkpoints as NumPy .npz files, behind a stable C ABI.
 *
 * This header is the API reference. Conventions that hold for every function below:
 *
 *  - Every fallible function returns CKPT_OK (0) or a negative CKPT_E* code. On failure,
 *    ckpt_error_message() returns a message for the calling thread naming the file, the member and the problem.
 *  - Handles are opaque. A constructor takes its out-parameter first and sets it to NULL on failure; the
 *    matching _free/_close accepts NULL. Results returned through `**out` belong to the caller.
 *    Pointers returned by getters are borrowed: they live as long as the handle they came from, until it is
 *    modified or freed.
 *  - A handle is used by one thread at a time; different handles may be used from different threads.
 *  - Strings are UTF-8 and NUL-terminated. Enumerated values travel as uint32_t.
 *  - Option structs start with `version`; initialise them with the _OPTIONS_INIT macro or the _options_init()
 *    function. Passing NULL for options means the defaults. Fields are only ever appended.
 *  - Any function documented to return CKPT_ENOMEM may do so; CKPT_ERROR means an unexpected internal failure.
 */
#ifndef CKPT_CKPT_H
#define CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>

/* CKPT_VERSION_MAJOR, CKPT_VERSION_MINOR, CKPT_VERSION_PATCH and CKPT_VERSION_STRING come from the generated
 * ckpt/version.h (CMake project(VERSION) is their single source). */
#include "ckpt/version.h"

#if defined(CKPT_BUILDING_LIBRARY)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------ version */

/* MAJOR*10000 + MINOR*100 + PATCH of the headers compiled against. */
#define CKPT_VERSION_NUMBER (CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH)

/* CKPT_VERSION_NUMBER of the library loaded at run time (may differ from the headers'). */
CKPT_API uint32_t ckpt_version_number(void);
/* "MAJOR.MINOR.PATCH" of the library loaded at run time; static storage. */
CKPT_API const char *ckpt_version_string(void);

/* ------------------------------------------------------------------------------------------- status codes */
/* Fixed forever; new codes are only appended. */
#define CKPT_OK 0
#define CKPT_ERROR -1       /* unexpected internal failure */
#define CKPT_EINVAL -2      /* invalid argument */
#define CKPT_ENOTFOUND -3   /* no such variable, file or checkpoint */
#define CKPT_EFORMAT -4     /* malformed or corrupt file: zip structure, npy header, sizes, CRC */
#define CKPT_EIO -5         /* the storage failed; the message carries the OS error */
#define CKPT_ENOMEM -6      /* out of memory */
#define CKPT_EMISMATCH -7   /* restore: variables missing, or dtype/shape differ */
#define CKPT_EUNSUPPORTED -8 /* valid NumPy content ckpt does not handle (object, structured dtypes) */
#define CKPT_EBUSY -9       /* checkpoint directory locked by another manager */
#define CKPT_EEXIST -10     /* name already present */
#define CKPT_EBUFS -11      /* caller's buffer too small */

/* Static text naming a code ("invalid argument"); "unknown error code" for values that are not codes. */
CKPT_API const char *ckpt_strerror(int code);
/* The calling thread's last failure in detail, e.g.
 * "model.npz: member 'w.npy': npy header: shape holds a negative dimension". "" if no call has failed on this
 * thread. Successful calls leave it unchanged (like errno). Valid until the thread's next failing ckpt call. */
CKPT_API const char *ckpt_error_message(void);

/* ------------------------------------------------------------------------------------------------- dtypes */
/* Fixed values. Data is always in native byte order and C (row-major) order in memory. */
#define CKPT_BOOL 1        /* numpy '|b1', one byte 0 or 1 */
#define CKPT_INT8 2
#define CKPT_INT16 3
#define CKPT_INT32 4
#define CKPT_INT64 5
#define CKPT_UINT8 6
#define CKPT_UINT16 7
#define CKPT_UINT32 8
#define CKPT_UINT64 9
#define CKPT_FLOAT16 10    /* IEEE binary16, raw bits */
#define CKPT_FLOAT32 11
#define CKPT_FLOAT64 12
#define CKPT_COMPLEX64 13  /* two float32: real, imaginary */
#define CKPT_COMPLEX128 14 /* two float64 */
#define CKPT_UNICODE 15    /* numpy '<U<n>': n UTF-32 code units per item, zero-padded; itemsize = 4n */
#define CKPT_BYTES 16      /* numpy '|S<n>': n bytes per item, zero-padded */

/* Bytes per item of a numeric dtype; 0 for CKPT_UNICODE and CKPT_BYTES (their itemsize is per array) and for
 * values that are not dtypes. */
CKPT_API size_t ckpt_dtype_size(uint32_t dtype);
/* "bool", "int8", …, "float32", …, "complex128", "unicode", "bytes"; NULL if `dtype` is not a dtype. */
CKPT_API const char *ckpt_dtype_name(uint32_t dtype);

/* ------------------------------------------------------------------------------------ variable collections */
/* An ordered collection of named n-dimensional arrays. Names are unique, non-empty UTF-8; insertion order is
 * the save order. */
typedef struct ckpt_vars ckpt_vars;

#define CKPT_COPY 0u   /* ckpt_vars_add copies the caller's bytes */
#define CKPT_BORROW 1u /* ckpt_vars_add keeps the caller's pointer; the bytes must outlive every use of the
                          collection, and restores write into them */

/* Creates an empty collection. Returns CKPT_OK, CKPT_EINVAL (out is NULL), CKPT_ENOMEM. */
CKPT_API int ckpt_vars_new(ckpt_vars **out);
/* Frees the collection and every copy it owns; borrowed bytes are left alone. NULL is fine. */
CKPT_API void ckpt_vars_free(ckpt_vars *vars);

/* Appends a numeric array `name` of `dtype` (CKPT_BOOL … CKPT_COMPLEX128) with `ndim` dimensions (0 for a
 * scalar; at most 64) of sizes `shape[0..ndim)` (each >= 0; `shape` may be NULL when ndim is 0). `data` holds the
 * product of the shape times ckpt_dtype_size(dtype) bytes in native byte order and C order.
 * flags: CKPT_COPY copies the bytes (data may be NULL: the array is then zero-filled, ready to be restored
 * into); CKPT_BORROW keeps the pointer (data must not be NULL unless the array is empty).
 * Returns CKPT_OK; CKPT_EINVAL (NULL vars or name, empty name, unknown dtype or flags, a string dtype, ndim > 64,
 * negative dimension, byte size overflow, NULL data with CKPT_BORROW); CKPT_EEXIST (the name is taken);
 * CKPT_ENOMEM. */
CKPT_API int ckpt_vars_add(ckpt_vars *vars, const char *name, uint32_t dtype, uint32_t ndim,
                           const int64_t *shape, const void *data, uint32_t flags);
/* As ckpt_vars_add for CKPT_UNICODE or CKPT_BYTES arrays of fixed-width items of `itemsize` bytes (>= 1; a
 * multiple of 4 for CKPT_UNICODE). Returns the codes of ckpt_vars_add, and CKPT_EINVAL for a numeric dtype or a
 * bad itemsize. */
CKPT_API int ckpt_vars_add_strings(ckpt_vars *vars, const char *name, uint32_t dtype, size_t itemsize,
                                   uint32_t ndim, const int64_t *shape, const void *data, uint32_t flags);

/* Number of arrays; 0 for NULL. */
CKPT_API size_t ckpt_vars_count(const ckpt_vars *vars);
/* Name of array i (borrowed); NULL if i is out of range. */
CKPT_API const char *ckpt_vars_name(const ckpt_vars *vars, size_t i);
/* Sets *out_index to the position of `name`. Returns CKPT_OK, CKPT_ENOTFOUND, CKPT_EINVAL (NULL argument). */
CKPT_API int ckpt_vars_find(const ckpt_vars *vars, const char *name, size_t *out_index);
/* Accessors of array i. Out of range gives 0 (dtype, itemsize, ndim, nbytes) or NULL (shape, data). */
CKPT_API uint32_t ckpt_vars_dtype(const ckpt_vars *vars, size_t i);
CKPT_API size_t ckpt_vars_itemsize(const ckpt_vars *vars, size_t i);
CKPT_API uint32_t ckpt_vars_ndim(const ckpt_vars *vars, size_t i);
/* ndim sizes (borrowed); a valid non-NULL pointer even when ndim is 0. */
CKPT_API const int64_t *ckpt_vars_shape(const ckpt_vars *vars, size_t i);
/* Product of the shape times the itemsize. */
CKPT_API size_t ckpt_vars_nbytes(const ckpt_vars *vars, size_t i);
/* The array's bytes, C order, native byte order: the collection's copy, or the caller's borrowed pointer.
 * Writable: restores fill it. May be NULL when nbytes is 0. */
CKPT_API void *ckpt_vars_data(const ckpt_vars *vars, size_t i);

/* ------------------------------------------------------------------------------------------------ npz files */
#define CKPT_LAYOUT_AUTO 0u  /* reading: detect; writing: plain */
#define CKPT_LAYOUT_PLAIN 1u /* "<name>.npy" per variable, as np.savez(**vars) */
#define CKPT_LAYOUT_OBJAX 2u /* "names.npy" ('<U' array) + "0.npy", "1.npy", ... as objax.io */
#define CKPT_STORE 0u
#define CKPT_DEFLATE 1u

/* Renamer, applied by restores to each variable name found on disk before it is matched against the
 * collection (objax's `renamer`). Write the new name (UTF-8, no NUL needed) into buf and return its length;
 * return 0 to keep the name; return a negative CKPT_* code to abort the restore with that code. A length larger
 * than buf_size is an error (CKPT_EBUFS). */
typedef int (*ckpt_rename_fn)(const char *name_on_disk, char *buf, size_t buf_size, void *payload);
/* Progress of a save or read: bytes of array data done so far out of the total. Called from the thread doing
 * the work. */
typedef void (*ckpt_progress_fn)(uint64_t done_bytes, uint64_t total_bytes, void *payload);

typedef struct ckpt_npz_options {
    uint32_t version;          /* CKPT_NPZ_OPTIONS_VERSION */
    uint32_t layout;           /* CKPT_LAYOUT_*; default AUTO */
    uint32_t compression;      /* CKPT_STORE (default) or CKPT_DEFLATE; writing only */
    int32_t level;             /* deflate level 1..9; 0 = zlib's default */
    ckpt_rename_fn rename;     /* restore: applied to each name on disk; NULL keeps names */
    void *rename_payload;
    uint64_t max_header_bytes; /* npy header limit per member; 0 = 10000 (numpy's own limit) */
    ckpt_progress_fn progress; /* NULL: no progress reports */
    void *progress_payload;
} ckpt_npz_options;
#define CKPT_NPZ_OPTIONS_VERSION 1
#define CKPT_NPZ_OPTIONS_INIT {CKPT_NPZ_OPTIONS_VERSION}

/* Fills *opts with the defaults of struct version `version` (pass CKPT_NPZ_OPTIONS_VERSION).
 * Returns CKPT_OK, CKPT_EINVAL (NULL opts, or a version this library does not know). */
CKPT_API int ckpt_npz_options_init(ckpt_npz_options *opts, uint32_t version);

/* Saves `vars` to `path` as an .npz that numpy.load reads, atomically and durably: the bytes go to a temporary
 * file beside `path` (".<name>.tmp-XXXXXX"), which is fsynced, renamed over `path`, and the directory fsynced.
 * On any failure `path` keeps its previous content (or stays absent) and the temporary file is removed.
 * Arrays are written in collection order; an empty collection writes a valid empty archive.
 * Returns CKPT_OK; CKPT_EINVAL (NULL argument, bad options, a name that cannot be a member name: containing NUL
 * or, for the plain layout, empty); CKPT_EIO (the message names the path and the OS error); CKPT_ENOMEM. */
CKPT_API int ckpt_npz_save(const char *path, const ckpt_vars *vars, const ckpt_npz_options *opts);

/* Reads every array of the .npz at `path` into a new collection (*out, owned by the caller), in member order,
 * detecting the layout unless opts->layout says otherwise. Members are verified fully: zip structure,
 * npy headers, exact sizes and CRC-32. Big-endian and Fortran-order data is converted to native C order.
 * Returns CKPT_OK; CKPT_EINVAL; CKPT_ENOTFOUND (no file at path); CKPT_EIO; CKPT_EFORMAT (malformed or corrupt);
 * CKPT_EUNSUPPORTED (object, structured or other dtypes ckpt does not handle); CKPT_ENOMEM. */
CKPT_API int ckpt_npz_read(ckpt_vars **out, const char *path, const ckpt_npz_options *opts);
/* As ckpt_npz_read for an .npz held in memory (`bytes` is not retained). Messages name the file "<memory>". */
CKPT_API int ckpt_npz_read_memory(ckpt_vars **out, const void *bytes, size_t size, const ckpt_npz_options *opts);

/* Restores the arrays of an existing collection from the .npz at `path`, in place (objax's
 * load_var_collection): each variable of `vars` must be found on disk, after opts->rename is applied to the
 * names on disk, with the same dtype, itemsize and shape; arrays on disk that no variable asks for are ignored.
 * Every header is checked before any data is written, so CKPT_EMISMATCH leaves `vars` unchanged; its message
 * lists every missing variable and every on-disk name that went unused. A file found corrupt while its data is
 * read (CKPT_EFORMAT, CKPT_EIO) may leave the variables read so far updated.
 * Returns the codes of ckpt_npz_read, plus CKPT_EMISMATCH, CKPT_EBUFS (renamer overflow) and any negative code a
 * renamer returned. */
CKPT_API int ckpt_npz_restore(const char *path, ckpt_vars *vars, const ckpt_npz_options *opts);

/* Lazy access to one file's arrays, for partial loads and inspection. Opening reads the zip directory and every
 * npy header (all validated); array data is read only by ckpt_npz_read_into. */
typedef struct ckpt_npz ckpt_npz;
/* Opens `path`. Returns the codes of ckpt_npz_read. */
CKPT_API int ckpt_npz_open(ckpt_npz **out, const char *path, const ckpt_npz_options *opts);
/* Closes the file. NULL is fine. */
CKPT_API void ckpt_npz_close(ckpt_npz *npz);
/* Number of arrays (for the objax layout, not counting "names.npy"). */
CKPT_API size_t ckpt_npz_count(const ckpt_npz *npz);
/* Variable name of array i: the member name without ".npy", or the objax name (borrowed); NULL if out of range. */
CKPT_API const char *ckpt_npz_name(const ckpt_npz *npz, size_t i);
/* Accessors of array i, as the ckpt_vars ones; out of range gives 0 or NULL. */
CKPT_API uint32_t ckpt_npz_dtype(const ckpt_npz *npz, size_t i);
CKPT_API size_t ckpt_npz_itemsize(const ckpt_npz *npz, size_t i);
CKPT_API uint32_t ckpt_npz_ndim(const ckpt_npz *npz, size_t i);
CKPT_API const int64_t *ckpt_npz_shape(const ckpt_npz *npz, size_t i);
CKPT_API size_t ckpt_npz_nbytes(const ckpt_npz *npz, size_t i);
/* Reads array i into dst (native byte order, C order), verifying its CRC-32. dst_size must be at least
 * ckpt_npz_nbytes(npz, i). On CKPT_EFORMAT or CKPT_EIO the contents of dst are unspecified.
 * Returns CKPT_OK; CKPT_EINVAL (NULL npz, NULL dst with a non-empty array); CKPT_ENOTFOUND (i out of range);
 * CKPT_EBUFS (dst_size too small); CKPT_EFORMAT (corrupt data, CRC mismatch); CKPT_EIO; CKPT_ENOMEM. */
CKPT_API int ckpt_npz_read_into(ckpt_npz *npz, size_t i, void *dst, size_t dst_size);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_CKPT_H */
