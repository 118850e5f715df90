/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt — machine-learning training checkpoints as NumPy .npz files, behind a stable C ABI.
 *
 * This header is the API reference. Conventions that hold for every function below:
 *
 *  - Every fallible function returns CKPT_OK (0) or a negative CKPT_E* code. On failure,
 *    ckpt_error_message() returns a message for the calling thread naming the file, the member and the problem.
 *  - Handles are opaque. A constructor takes its out-parameter first and sets it to NULL on failure; the
 *    matching _free/_close accepts NULL. `_close` ends a handle over something opened — a file (ckpt_reader,
 *    ckpt_file), a sharded step (ckpt_step), a checkpoint directory (ckpt_manager, whose close returns the error
 *    of its last background save); `_free` releases an object of memory, or the caller's reference to a shared
 *    one (ckpt_vars, ckpt_storage, ckpt_comm, ckpt_writer). Either way the handle is gone afterwards. Results
 *    returned through `**out` belong to the caller. Pointers returned by getters are borrowed: they live as long
 *    as the handle they came from, until it is modified or freed.
 *  - Flags and enumerated values are named after the functions or options they go to (CKPT_WRITER_APPEND for
 *    ckpt_writer_save); the few older names without that prefix stay as aliases.
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
/* Marks a declaration of a function under its name before 0.11 ("Names before 0.11" below): the same function as
 * the one named, exported under both names. */
#define CKPT_SAME_AS(name)

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------ version */

/* MAJOR*10000 + MINOR*100 + PATCH of the headers compiled against. */
#define CKPT_VERSION_NUMBER (CKPT_VERSION_MAJOR * 10000 + CKPT_VERSION_MINOR * 100 + CKPT_VERSION_PATCH)

/* CKPT_VERSION_NUMBER of the library loaded at run time (may differ from the headers'). Since 0.6. */
CKPT_API uint32_t ckpt_version_number(void);
/* "MAJOR.MINOR.PATCH" of the library loaded at run time; static storage. Since 0.6. */
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

/* Static text naming a code ("invalid argument"); "unknown error code" for values that are not codes. Since 0.6. */
CKPT_API const char *ckpt_strerror(int code);
/* The calling thread's last failure in detail, e.g.
 * "model.npz: member 'w.npy': npy header: shape holds a negative dimension". "" if no call has failed on this
 * thread. Successful calls leave it unchanged (like errno). Valid until the thread's next failing ckpt call.
 * Since 0.6. */
CKPT_API const char *ckpt_error_message(void);
/* For callbacks (storage, communicator, save function, renamer, source): called just before a callback returns a
 * negative code, it gives the failure its own words. The ckpt call that made the callback then fails with a message
 * that names the callback and says `message` ("ckpt/x.npz: the save function failed: ValueError: disk quota"), where it
 * would otherwise only name the code; for a background save that call is the later one that reports it. The message
 * (copied) belongs to the calling thread and to the next callback failure on it: that failure takes it, and every ckpt
 * call starts by forgetting one left unused. NULL forgets it. Never fails (out of memory, the message is dropped and
 * the code alone is reported). Since 0.6. */
CKPT_API void ckpt_error_set_message(const char *message);

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
/* Types numpy has no descr for, as ml_dtypes, JAX and torch lay them out (raw bits, one item per 2 or 1 bytes).
 * Their members are ordinary .npy files numpy loads without ml_dtypes: raw bytes '<V2' for bfloat16 (exactly what
 * np.save writes for an ml_dtypes bfloat16 array) and '<V1' for the float8 types; the real type is recorded in the
 * file's metadata member (docs/format.md shows how to view the arrays as typed ones in numpy, JAX and torch). */
#define CKPT_BFLOAT16 17        /* ml_dtypes/torch bfloat16: 1 sign, 8 exponent, 7 mantissa bits, raw bits */
#define CKPT_FLOAT8_E4M3FN 18   /* ml_dtypes float8_e4m3fn (safetensors F8_E4M3, torch float8_e4m3fn) */
#define CKPT_FLOAT8_E5M2 19     /* ml_dtypes float8_e5m2 (safetensors F8_E5M2, torch float8_e5m2) */
#define CKPT_FLOAT8_E4M3FNUZ 20 /* ml_dtypes float8_e4m3fnuz */
#define CKPT_FLOAT8_E5M2FNUZ 21 /* ml_dtypes float8_e5m2fnuz */
#define CKPT_FLOAT8_E8M0FNU 22  /* ml_dtypes float8_e8m0fnu (safetensors F8_E8M0): a power-of-two scale */
#define CKPT_VOID 23            /* numpy '|V<n>': n raw bytes per item; itemsize per array, as CKPT_BYTES */

/* Bytes per item of a fixed-size dtype; 0 for CKPT_UNICODE, CKPT_BYTES and CKPT_VOID (their itemsize is per array)
 * and for values that are not dtypes. Since 0.6. */
CKPT_API size_t ckpt_dtype_size(uint32_t dtype);
/* "bool", "int8", …, "float32", …, "complex128", "unicode", "bytes", then ml_dtypes' spelling: "bfloat16",
 * "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"; "void". NULL if
 * `dtype` is not a dtype. Since 0.6. */
CKPT_API const char *ckpt_dtype_name(uint32_t dtype);

/* ------------------------------------------------------------------------------------ variable collections */
/* An ordered collection of named n-dimensional arrays, and string metadata about them. Names are unique,
 * non-empty UTF-8 other than "__ckpt_metadata__" (the name of the file's metadata member); insertion order is the
 * save order. */
typedef struct ckpt_vars ckpt_vars;

/* ckpt_vars_add's flags: CKPT_VARS_COPY copies the caller's bytes; CKPT_VARS_BORROW keeps the caller's pointer (the
 * bytes must outlive every use of the collection, and restores write into them). */
#define CKPT_VARS_COPY 0u
#define CKPT_VARS_BORROW 1u
#define CKPT_COPY CKPT_VARS_COPY /* the names before 0.8, kept */
#define CKPT_BORROW CKPT_VARS_BORROW

/* Creates an empty collection. Returns CKPT_OK, CKPT_EINVAL (out is NULL), CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_vars_new(ckpt_vars **out);
/* Frees the collection and every copy it owns; borrowed bytes are left alone. NULL is fine. Since 0.6. */
CKPT_API void ckpt_vars_free(ckpt_vars *vars);

/* Appends a numeric array `name` of `dtype` (CKPT_BOOL … CKPT_COMPLEX128, CKPT_BFLOAT16 … CKPT_FLOAT8_E8M0FNU)
 * with `ndim` dimensions (0 for a
 * scalar; at most 64) of sizes `shape[0..ndim)` (each >= 0; `shape` may be NULL when ndim is 0). `data` holds the
 * product of the shape times ckpt_dtype_size(dtype) bytes in native byte order and C order.
 * flags: CKPT_VARS_COPY copies the bytes (data may be NULL: the array is then zero-filled, ready to be restored
 * into); CKPT_VARS_BORROW keeps the pointer (data must not be NULL unless the array is empty).
 * Returns CKPT_OK; CKPT_EINVAL (NULL vars or name, empty name or "__ckpt_metadata__", unknown dtype or flags, a
 * string or void dtype, ndim > 64, negative dimension, byte size overflow, NULL data with CKPT_VARS_BORROW);
 * CKPT_EEXIST (the name is taken); CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_vars_add(ckpt_vars *vars, const char *name, uint32_t dtype, uint32_t ndim,
                           const int64_t *shape, const void *data, uint32_t flags);
/* As ckpt_vars_add for CKPT_UNICODE, CKPT_BYTES or CKPT_VOID arrays of fixed-width items of `itemsize` bytes
 * (>= 1; a multiple of 4 for CKPT_UNICODE). Returns the codes of ckpt_vars_add, and CKPT_EINVAL for a numeric dtype
 * or a bad itemsize. Since 0.6. */
CKPT_API int ckpt_vars_add_strings(ckpt_vars *vars, const char *name, uint32_t dtype, size_t itemsize,
                                   uint32_t ndim, const int64_t *shape, const void *data, uint32_t flags);

/* Lazy arrays, for saves of data that is not in memory (a file being converted, a memory-mapped or remote array):
 * a source fills dst with bytes [offset, offset + size) of the array (native byte order, C order) and returns
 * CKPT_OK, or a negative CKPT_* code to fail the save (call ckpt_error_set_message first to say why). */
typedef int (*ckpt_source_fn)(void *payload, uint64_t offset, void *dst, size_t size);
/* Appends an array `name` of `dtype` and `shape` (as ckpt_vars_add; itemsize as ckpt_vars_add_strings for
 * CKPT_UNICODE, CKPT_BYTES and CKPT_VOID, else 0 or ckpt_dtype_size(dtype)) whose bytes the collection does not
 * hold: every save of the collection pulls them from fn(payload, ...) while it writes, a few MiB per call, so a save
 * of any size needs bounded memory. A range may be asked for more than once and in any order; calls never overlap
 * within one save but may come from other threads; payload must stay valid while the collection may be saved. A
 * source failing with rc fails the save with rc (positive: CKPT_ERROR) and a message naming the variable; the
 * target keeps its content. ckpt_vars_data gives NULL for a source array, and a restore into a collection holding
 * one is CKPT_EINVAL. Details: docs/guide.md, section 10.
 * Returns CKPT_OK; CKPT_EINVAL (NULL vars, name or fn, and what ckpt_vars_add and ckpt_vars_add_strings refuse);
 * CKPT_EEXIST (the name is taken); CKPT_ENOMEM. Since 0.7. */
CKPT_API int ckpt_vars_add_source(ckpt_vars *vars, const char *name, uint32_t dtype, size_t itemsize, uint32_t ndim,
                                  const int64_t *shape, ckpt_source_fn fn, void *payload);
/* 1 if array i was added by ckpt_vars_add_source, 0 otherwise (also out of range and for NULL vars). Since 0.7. */
CKPT_API int ckpt_vars_is_source(const ckpt_vars *vars, size_t i);

/* Number of arrays; 0 for NULL. Since 0.6. */
CKPT_API size_t ckpt_vars_count(const ckpt_vars *vars);
/* Name of array i (borrowed); NULL if i is out of range. Since 0.6. */
CKPT_API const char *ckpt_vars_name(const ckpt_vars *vars, size_t i);
/* Sets *out_index to the position of `name`. Returns CKPT_OK, CKPT_ENOTFOUND, CKPT_EINVAL (NULL argument).
 * Since 0.6. */
CKPT_API int ckpt_vars_find(const ckpt_vars *vars, const char *name, size_t *out_index);
/* Accessors of array i. Out of range gives 0 (dtype, itemsize, ndim, nbytes) or NULL (shape, data). Since 0.6. */
CKPT_API uint32_t ckpt_vars_dtype(const ckpt_vars *vars, size_t i);
CKPT_API size_t ckpt_vars_itemsize(const ckpt_vars *vars, size_t i);
CKPT_API uint32_t ckpt_vars_ndim(const ckpt_vars *vars, size_t i);
/* ndim sizes (borrowed); a valid non-NULL pointer even when ndim is 0. Since 0.6. */
CKPT_API const int64_t *ckpt_vars_shape(const ckpt_vars *vars, size_t i);
/* Product of the shape times the itemsize. Since 0.6. */
CKPT_API size_t ckpt_vars_nbytes(const ckpt_vars *vars, size_t i);
/* The array's bytes, C order, native byte order: the collection's copy, or the caller's borrowed pointer.
 * Writable: restores fill it. May be NULL when nbytes is 0; NULL for a source (ckpt_vars_add_source). Since 0.6. */
CKPT_API void *ckpt_vars_data(const ckpt_vars *vars, size_t i);
/* 1 if the latest restore into the collection (ckpt_restore, ckpt_manager_restore) filled variable i, 0 if it
 * did not: one not in the file under CKPT_PARTIAL, every variable after a failed restore, and every variable
 * before any restore. A variable added after the restore reads 0. Out of range (or NULL vars): 0. Since 0.6. */
CKPT_API int ckpt_vars_restored(const ckpt_vars *vars, size_t i);

/* Row-split variables, for sharded checkpoints (docs/distributed.md): marks array i as rows
 * [row_begin, row_begin + shape[0]) of a global array of global_rows rows along dimension 0, the other dimensions
 * being the array's own (the FSDP/ZeRO case). A sharded save records each rank's piece; a restore fills the
 * array with exactly those rows of the saved global array, from whichever shards hold them, whatever the world
 * size that saved it. global_rows -1 makes the array whole again (row_begin is then ignored). Non-sharded saves
 * ignore the marking (a file holds the array as it is), and so do restores from a file checkpoint: the array must
 * then have the file's shape, or the restore fails with CKPT_EMISMATCH.
 * Returns CKPT_OK; CKPT_EINVAL (NULL vars, a 0-d array, rows outside [0, global_rows), global_rows < -1);
 * CKPT_ENOTFOUND (i out of range). Since 0.6. */
CKPT_API int ckpt_vars_set_rows(ckpt_vars *vars, size_t i, int64_t row_begin, int64_t global_rows);
/* The row split of array i: sets *row_begin and *global_rows (either may be NULL). Returns CKPT_OK; CKPT_ENOTFOUND
 * (i out of range, or the array is whole: both are then set to -1); CKPT_EINVAL (NULL vars). Since 0.6. */
CKPT_API int ckpt_vars_rows(const ckpt_vars *vars, size_t i, int64_t *row_begin, int64_t *global_rows);

/* The collection's metadata: string key/values about the checkpoint (step, time, loss, notes), saved with it in
 * the file's metadata member and read back with it (ckpt_read and ckpt_manager_read fill a new collection's;
 * a successful restore replaces the collection's with the file's). Keys are non-empty; keys and values are UTF-8;
 * insertion order is kept, and replacing a value keeps its key's place. Keys beginning "ckpt." are the checkpoint
 * manager's (the index, time, version and metrics a manager save records): a collection may hold them (a restore
 * brings them in) but they are never written as such: a manager save replaces them with its own, and every other
 * save (ckpt_save, ckpt_writer_save_vars, the bindings' saves) leaves them out. */
/* Sets key to value (both copied), replacing any value it had; a NULL value removes the key (CKPT_OK if it was
 * absent). Returns CKPT_OK; CKPT_EINVAL (NULL vars or key, empty key, key or value not valid UTF-8); CKPT_ENOMEM.
 * Since 0.6. */
CKPT_API int ckpt_vars_set_metadata(ckpt_vars *vars, const char *key, const char *value);
/* The value of key (borrowed, until the key is set or removed or the collection freed); NULL if absent or for a
 * NULL argument. Since 0.6. */
CKPT_API const char *ckpt_vars_metadata(const ckpt_vars *vars, const char *key);
/* Number of metadata keys; 0 for NULL. Since 0.6. */
CKPT_API size_t ckpt_vars_metadata_count(const ckpt_vars *vars);
/* Key i and its value, in insertion order (borrowed); NULL if i is out of range. Since 0.6. */
CKPT_API const char *ckpt_vars_metadata_key(const ckpt_vars *vars, size_t i);
CKPT_API const char *ckpt_vars_metadata_value(const ckpt_vars *vars, size_t i);

/* --------------------------------------------------------------------------------------- checkpoint files */
/* Saves, reads and restores of one checkpoint file, and lazy access to it (ckpt_reader): an .npz, a safetensors
 * file, or a Hugging Face index of safetensors shards, told apart by their content. Before 0.11 these functions
 * were named ckpt_npz_* (from the time ckpt wrote .npz only); the old names stay exported as the same functions
 * ("Names before 0.11", at the end of this part). "Since" below is when a function came, under either name. */
#define CKPT_LAYOUT_AUTO 0u  /* reading: detect; writing: plain */
#define CKPT_LAYOUT_PLAIN 1u /* "<name>.npy" per variable, as np.savez(**vars) */
#define CKPT_LAYOUT_OBJAX 2u /* "names.npy" ('<U' array) + "0.npy", "1.npy", ... as objax.io */
#define CKPT_STORE 0u
#define CKPT_DEFLATE 1u

/* Renamer, applied by restores to each variable name found on disk before it is matched against the
 * collection (objax's `renamer`). Write the new name (UTF-8, no NUL needed) into buf and return its length;
 * return 0 to keep the name; return a negative CKPT_* code to abort the restore with that code. If the new name
 * does not fit, return the length it needs (> buf_size): the renamer is called once more with a buffer that
 * large; needing more again aborts with CKPT_EBUFS. */
typedef int (*ckpt_rename_fn)(const char *name_on_disk, char *buf, size_t buf_size, void *payload);
/* Progress of a save or read: bytes of array data done so far out of the total, never decreasing. Called from
 * a thread doing the work (a large read uses several), never from two at once. */
typedef void (*ckpt_progress_fn)(uint64_t done_bytes, uint64_t total_bytes, void *payload);

typedef struct ckpt_storage ckpt_storage; /* see "storage" below */

typedef struct ckpt_options {
    uint32_t version;          /* CKPT_OPTIONS_VERSION */
    uint32_t layout;           /* CKPT_LAYOUT_*; default AUTO */
    uint32_t compression;      /* CKPT_STORE (default) or CKPT_DEFLATE; writing only */
    int32_t level;             /* deflate level 1..9; 0 = zlib's default */
    ckpt_rename_fn rename;     /* restore: applied to each name on disk; NULL keeps names */
    void *rename_payload;
    uint64_t max_header_bytes; /* npy header limit per member; 0 = 10000 (numpy's own limit) */
    ckpt_progress_fn progress; /* NULL: no progress reports */
    void *progress_payload;
    /* version 2 */
    ckpt_storage *storage;     /* where files are read and written; NULL = the local filesystem (POSIX) */
    /* version 3: limits on what reading accepts, beyond what the file's own size allows (a file over a limit is
     * CKPT_EFORMAT, the message naming the limit). */
    uint64_t max_members;      /* zip members per file; 0 = 16777216 */
    uint64_t max_total_bytes;  /* array bytes per file, all arrays together; 0 = no limit */
    /* version 4 */
    uint32_t flags; /* CKPT_PARTIAL, CKPT_MAP_*, CKPT_KEEP_MANAGER_KEYS, CKPT_NPZ_CHUNK_HASHES */
    /* version 5: for ckpt_save, an earlier file (a path in the same storage) whose unchanged chunks this save
     * shares instead of writing them (implies CKPT_NPZ_CHUNK_HASHES; stored saves only). A base without a chunk
     * table, or whose table does not describe its members, is not used: the save is then a full one. NULL = none */
    const char *base;
    /* version 6: the file format (CKPT_FORMAT_*). Saves: CKPT_FORMAT_AUTO (the default) writes safetensors for a
     * path whose name ends in ".safetensors" and .npz for any other. Reads: CKPT_FORMAT_AUTO tells the format by the
     * file's first bytes; another value refuses a file of the other format (CKPT_EFORMAT). Since 0.10. */
    uint32_t format;
    /* version 6: ckpt_save of a safetensors path "DIR/model.safetensors": Hugging Face's sharded layout, with at
     * most this many bytes of tensors per shard — "DIR/model-00001-of-0000N.safetensors" … and
     * "DIR/model.safetensors.index.json", or "DIR/model.safetensors" alone when everything fits one shard
     * (docs/format.md, "Sharded safetensors"). 0 = one file. Since 0.10. */
    uint64_t max_shard_bytes;
} ckpt_options;
/* File formats: the opts->format of ckpt_options, and what ckpt_reader_format tells of an open file. */
#define CKPT_FORMAT_AUTO 0u
#define CKPT_FORMAT_NPZ 1u         /* a zip of .npy members, as numpy.savez writes */
#define CKPT_FORMAT_SAFETENSORS 2u /* an 8-byte length, a JSON header, the tensors' bytes (docs/format.md) */
/* Restores (ckpt_restore, ckpt_manager_restore): a variable the file does not have is left untouched instead
 * of failing the restore; ckpt_vars_restored tells which were filled. A variable found with another dtype or
 * shape still fails the restore (CKPT_EMISMATCH). */
#define CKPT_PARTIAL 1u
/* ckpt_reader_open: ckpt_reader_map skips the CRC-32 check of mapped members, trading integrity for latency (see
 * there). */
#define CKPT_MAP_UNVERIFIED 2u
/* ckpt_reader_open: the mapping of ckpt_reader_map is copy-on-write (mmap PROT_READ | PROT_WRITE, MAP_PRIVATE) instead
 * of read-only, so the caller may write into the arrays it gives (the pages written are copied into the process's
 * memory; the file never changes) — to train from mapped weights, say. */
#define CKPT_MAP_WRITABLE 4u
/* Saves (ckpt_save, the writers): the collection's "ckpt."-prefixed metadata keys — what a checkpoint manager
 * recorded of a checkpoint: its index, time, version, metrics — are written too. Without it a save leaves them out,
 * so keys a restore brought in never describe another file; with it, a copy of a checkpoint (ckpt convert) keeps
 * what its manager recorded, for ls, retention and best-by-metric. The manager's own saves ignore it. */
#define CKPT_KEEP_MANAGER_KEYS 8u
/* Saves (ckpt_save): each stored array of 64 KiB or more starts on a 4096-byte boundary of the file and the
 * hashes of its 16 KiB chunks go into one more member, "__ckpt_chunks__.npy" (docs/format.md, "Chunk hashes"), so that
 * a later save can share the chunks that did not change (the base field, a manager's incremental saves). Since 0.9. */
#define CKPT_NPZ_CHUNK_HASHES 16u
#define CKPT_OPTIONS_VERSION 6
/* Every field spelled out, so -Wmissing-field-initializers stays quiet. */
/* clang-format off */
#define CKPT_OPTIONS_INIT {CKPT_OPTIONS_VERSION, 0, 0, 0, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, 0, NULL, 0, 0}
/* clang-format on */

/* Fills *opts with the defaults of struct version `version` (pass CKPT_OPTIONS_VERSION), writing only the
 * fields that version has. Returns CKPT_OK, CKPT_EINVAL (NULL opts, or a version this library does not know).
 * Since 0.6. */
CKPT_API int ckpt_options_init(ckpt_options *opts, uint32_t version);

/* Saves `vars` to `path` as an .npz that numpy.load reads, atomically and durably: a temporary file beside `path`
 * (".<name>.tmp-XXXXXX") is written, fsynced and renamed over `path`, and the directory fsynced; stale temporaries
 * of killed saves of `path` are then removed (docs/storage-and-writers.md, "The atomic save"). On any failure `path`
 * keeps its previous content — except when only the final directory fsync fails (CKPT_EIO; the new file is in place
 * but may not survive a power loss). Arrays go in collection order. Metadata, and types numpy cannot name (bfloat16,
 * float8), go into one more member, "__ckpt_metadata__.npy" (docs/format.md); otherwise every member is what
 * np.savez writes. Metadata keys beginning "ckpt." are left out unless opts->flags has CKPT_KEEP_MANAGER_KEYS.
 * A path ending in ".safetensors" (or opts->format CKPT_FORMAT_SAFETENSORS) is saved as safetensors instead, with
 * the same atomic sequence: the metadata becomes the header's "__metadata__" map, each array is little-endian and
 * aligned to its element size; complex128, string, bytes and void arrays are refused before anything is written
 * (CKPT_EUNSUPPORTED), and so are deflate and the objax layout (CKPT_EINVAL); a base is not used (a full save).
 * Returns CKPT_OK; CKPT_EINVAL (NULL argument, bad options, a name that cannot be a member name: containing NUL
 * or, for the plain layout, empty); CKPT_EUNSUPPORTED (a dtype the format cannot hold); CKPT_ENOTFOUND (no such
 * directory); CKPT_EIO (the message names the path and the OS error); CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_save(const char *path, const ckpt_vars *vars, const ckpt_options *opts);

/* Reads every array of the .npz or safetensors file at `path` into a new collection (*out, owned by the caller), in
 * member order (a safetensors file's: its header's), with the file's metadata. The format is told by the content
 * (docs/format.md, "Telling the formats apart"); a path ending in ".index.json", or a folder holding
 * "model.safetensors" or "model.safetensors.index.json", is Hugging Face's sharded layout read as one checkpoint (its
 * shards' tensors, checked to be each in the shard the index names, and every shard's listed); a safetensors file is
 * checked by every rule of the reference reader and more (docs/format.md, "safetensors"). For .npz, the layout is
 * detected unless opts->layout says otherwise. Members are verified fully: zip structure, npy headers, exact sizes and
 * CRC-32. Big-endian and Fortran-order data is converted to native C order. Types: what the metadata member records
 * decides; without a record, raw bytes '|V2' or
 * '<V2' read as CKPT_BFLOAT16 (as jax.numpy.load assumes), other '|V<n>' as CKPT_VOID, '<f1' as CKPT_FLOAT8_E5M2
 * (ml_dtypes' np.save), and ml_dtypes names ('bfloat16', 'float8_e4m3fn', …) as those types. A malformed metadata
 * member (not JSON of the documented shape, an unknown dtype name, a dtype for an array that is not there or of another
 * size) is CKPT_EFORMAT. Returns CKPT_OK; CKPT_EINVAL; CKPT_ENOTFOUND (no file at path); CKPT_EIO; CKPT_EFORMAT
 * (malformed or corrupt); CKPT_EUNSUPPORTED (object, structured or other dtypes ckpt does not handle); CKPT_ENOMEM.
 * Since 0.6. */
CKPT_API int ckpt_read(ckpt_vars **out, const char *path, const ckpt_options *opts);
/* As ckpt_read for a file held in memory (`bytes` is not retained). Messages name the file "<memory>".
 * Since 0.6. */
CKPT_API int ckpt_read_memory(ckpt_vars **out, const void *bytes, size_t size, const ckpt_options *opts);

/* Restores the arrays of an existing collection from the .npz or safetensors file at `path`, in place (objax's
 * load_var_collection): each variable of `vars` must be found on disk, after opts->rename is applied to the
 * names on disk, with the same dtype, itemsize and shape — or as a CKPT_VOID array (raw bytes whose type was never
 * recorded) of the same item size and shape; arrays on disk that no variable asks for are ignored. On success the
 * collection's metadata is replaced by the file's.
 * Every header is checked before any data is written, so CKPT_EMISMATCH leaves `vars` unchanged; its message
 * lists every missing variable and every on-disk name that went unused. A file found corrupt while its data is
 * read (CKPT_EFORMAT, CKPT_EIO) may leave the variables read so far updated.
 * Returns the codes of ckpt_read, plus CKPT_EMISMATCH, CKPT_EBUFS (renamer overflow) and any negative code a
 * renamer returned. Since 0.6. */
CKPT_API int ckpt_restore(const char *path, ckpt_vars *vars, const ckpt_options *opts);

/* Lazy access to one file's arrays, for partial loads and inspection. Opening reads the zip directory and every
 * npy header (all validated); array data is read only by ckpt_reader_read_into. In a file ckpt wrote, the zip
 * directory holds a copy of every stored member's npy header (docs/format.md, "head copy"), so opening reads only
 * the end of the file, and each member's local header is checked against it when the member's data is first read
 * (a disagreement is then CKPT_EFORMAT from that read). A safetensors file is the same handle: opening reads its
 * length and JSON header, and every function below works on it (ckpt_reader_format tells which it is). */
typedef struct ckpt_reader ckpt_reader;
/* Opens `path` (and reads its metadata). Returns the codes of ckpt_read. Since 0.6. */
CKPT_API int ckpt_reader_open(ckpt_reader **out, const char *path, const ckpt_options *opts);
/* Closes the file. NULL is fine. Since 0.6. */
CKPT_API void ckpt_reader_close(ckpt_reader *reader);
/* Number of arrays (not counting the metadata member, nor "names.npy" of the objax layout). Since 0.6. */
CKPT_API size_t ckpt_reader_count(const ckpt_reader *reader);
/* Variable name of array i: the member name without ".npy", or the objax name (borrowed); NULL if out of range.
 * Since 0.6. */
CKPT_API const char *ckpt_reader_name(const ckpt_reader *reader, size_t i);
/* Sets *out_index to the position of the array named `name` (as ckpt_reader_name gives it): a binary search, after
 * the names are sorted once on the first call. Safe to call from several threads at once.
 * Returns CKPT_OK, CKPT_ENOTFOUND (no such array; *out_index unchanged), CKPT_EINVAL (NULL argument). Since 0.8. */
CKPT_API int ckpt_reader_find(const ckpt_reader *reader, const char *name, size_t *out_index);
/* Accessors of array i, as the ckpt_vars ones; out of range gives 0 or NULL. Since 0.6. */
CKPT_API uint32_t ckpt_reader_dtype(const ckpt_reader *reader, size_t i);
CKPT_API size_t ckpt_reader_itemsize(const ckpt_reader *reader, size_t i);
CKPT_API uint32_t ckpt_reader_ndim(const ckpt_reader *reader, size_t i);
CKPT_API const int64_t *ckpt_reader_shape(const ckpt_reader *reader, size_t i);
CKPT_API size_t ckpt_reader_nbytes(const ckpt_reader *reader, size_t i);
/* Reads array i into dst (native byte order, C order), verifying its CRC-32. dst_size must be at least
 * ckpt_reader_nbytes(reader, i). On CKPT_EFORMAT or CKPT_EIO the contents of dst are unspecified.
 * Returns CKPT_OK; CKPT_EINVAL (NULL reader, NULL dst with a non-empty array); CKPT_ENOTFOUND (i out of range);
 * CKPT_EBUFS (dst_size too small); CKPT_EFORMAT (corrupt data, CRC mismatch); CKPT_EIO; CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_reader_read_into(ckpt_reader *reader, size_t i, void *dst, size_t dst_size);
/* Reads bytes [offset, offset + size) of array i into dst, as ckpt_reader_read_into would deliver them (native byte
 * order, C order), in bounded memory whatever the array's size. offset and size must be multiples of
 * ckpt_reader_itemsize(reader, i) and the range must lie within ckpt_reader_nbytes(reader, i); size 0 reads nothing
 * (dst may then be NULL). Ranges of a deflated member read in order cost one pass over it in all. A member read range
 * after range in order from byte 0 to its end has its CRC-32 checked at the last range; other patterns are not checked.
 * Fortran-order arrays of more than one dimension are not read in ranges. Details: docs/guide.md, section 10.
 * Returns CKPT_OK; CKPT_EINVAL (NULL reader, NULL dst with size > 0, an offset or size that is not a multiple of the
 * itemsize, a range reaching past the array's end); CKPT_ENOTFOUND (i out of range); CKPT_EUNSUPPORTED (Fortran
 * order); CKPT_EFORMAT (corrupt data, CRC-32 mismatch); CKPT_EIO; CKPT_ENOMEM. On CKPT_EFORMAT or CKPT_EIO the
 * contents of dst are unspecified, and the next range starts the member afresh. Since 0.7. */
CKPT_API int ckpt_reader_read_range(ckpt_reader *reader, size_t i, uint64_t offset, void *dst, size_t size);
/* How the file holds array i, for inspection tools: its zip member's name ("w.npy", "0.npy"; borrowed),
 * CKPT_STORE or CKPT_DEFLATE, its bytes in the file (compressed, with its npy header), its CRC-32 (over the npy
 * header and data, as the zip directory records it), and the file offset of its first data byte when it is stored
 * (0 when deflated: its bytes are not in the file as they are; for a member with a head copy, as the zip directory
 * gives it until the array is read). Out of range gives NULL or 0. Since 0.6. */
CKPT_API const char *ckpt_reader_member_name(const ckpt_reader *reader, size_t i);
CKPT_API uint32_t ckpt_reader_compression(const ckpt_reader *reader, size_t i);
CKPT_API uint64_t ckpt_reader_stored_bytes(const ckpt_reader *reader, size_t i);
CKPT_API uint32_t ckpt_reader_crc32(const ckpt_reader *reader, size_t i);
CKPT_API uint64_t ckpt_reader_data_offset(const ckpt_reader *reader, size_t i);
/* How array i's data lies in its member, as its npy header says — reads deliver native byte order and C order
 * whatever it is, so this is for inspection tools. ckpt_reader_byte_order: '<' (little-endian), '>' (big-endian, as
 * numpy writes a '>f8' array), or '|' where byte order does not apply (items of single bytes: bool, int8, uint8,
 * float8, bytes, void); 0 out of range. ckpt_reader_fortran_order: 1 for Fortran (column-major) order, 0 for C order or
 * out of range. Since 0.7. */
CKPT_API int ckpt_reader_byte_order(const ckpt_reader *reader, size_t i);
CKPT_API int ckpt_reader_fortran_order(const ckpt_reader *reader, size_t i);
/* The size in bytes of the file (or S3 object, or storage file) the handle was opened on, as it was then: what
 * stat would say of a local file, and the only way to learn an object's size through the C API. 0 for NULL.
 * Since 0.7. */
CKPT_API uint64_t ckpt_reader_file_size(const ckpt_reader *reader);
/* The layout the file was read in: CKPT_LAYOUT_PLAIN or CKPT_LAYOUT_OBJAX (detected, or as the options asked;
 * PLAIN for a safetensors file); 0 for NULL. Since 0.6. */
CKPT_API uint32_t ckpt_reader_layout(const ckpt_reader *reader);
/* The format of the open file: CKPT_FORMAT_NPZ or CKPT_FORMAT_SAFETENSORS; 0 for NULL. For a safetensors file the
 * inspection accessors above say: member name = the tensor's name (for an index of shards: the shard file holding
 * it), CKPT_STORE, stored bytes = its bytes, CRC-32 0 (the format has no checksums), data offset = where its bytes
 * start in the file (the shard), byte order '<' or '|'.
 * Since 0.10. */
CKPT_API uint32_t ckpt_reader_format(const ckpt_reader *reader);
/* The file's metadata, as the ckpt_vars_metadata functions (borrowed until the file is closed); available right
 * after ckpt_reader_open, before any array is read. Since 0.6. */
CKPT_API const char *ckpt_reader_metadata(const ckpt_reader *reader, const char *key);
CKPT_API size_t ckpt_reader_metadata_count(const ckpt_reader *reader);
CKPT_API const char *ckpt_reader_metadata_key(const ckpt_reader *reader, size_t i);
CKPT_API const char *ckpt_reader_metadata_value(const ckpt_reader *reader, size_t i);

/* Array i's bytes without a copy: *out_data points at ckpt_reader_nbytes(reader, i) bytes in native byte order and C
 * order, read-only (copy-on-write under CKPT_MAP_WRITABLE), valid until ckpt_reader_close(reader); every call for the
 * same i gives the same pointer (an empty array's is not NULL and must not be read). Members ckpt writes are
 * pointers into one private mapping of the file; others, and those of storages that cannot map, are decoded once.
 * The first call for i checks the CRC-32 (not for mapped members under CKPT_MAP_UNVERIFIED). A file truncated
 * while mapped raises SIGBUS where its lost pages are touched: docs/guide.md ("Arrays without a copy").
 * Returns CKPT_OK; CKPT_EINVAL (NULL reader or out_data); CKPT_ENOTFOUND (i out of range); CKPT_EFORMAT (corrupt data,
 * CRC-32 mismatch); CKPT_EIO (also a file that shrank before the first call); CKPT_ENOMEM. On failure *out_data is
 * NULL. Since 0.6. */
CKPT_API int ckpt_reader_map(ckpt_reader *reader, size_t i, const void **out_data);
/* A restore without copies: *out is a new collection of every array of the file, in ckpt_reader_name's order, each
 * borrowing what ckpt_reader_map gives for it (so every member is mapped, and checked as ckpt_reader_map checks it),
 * with the file's metadata. The collection must not be used after ckpt_reader_close(reader) (free it before, or with,
 * the handle).
 * Writing into its arrays is allowed when the file was opened with CKPT_MAP_WRITABLE (copy-on-write), and
 * faults (SIGSEGV) otherwise for mapped members. Returns CKPT_OK; CKPT_EINVAL (NULL argument); CKPT_EFORMAT (a
 * corrupt member, the message naming it); CKPT_EIO; CKPT_ENOMEM. On failure *out is NULL. Since 0.6. */
CKPT_API int ckpt_reader_map_vars(ckpt_reader *reader, ckpt_vars **out);

/* Names before 0.11: each function, type and flag under the name it had while ckpt wrote .npz only, for programs
 * written then; the same function (one symbol of the library, two names), type and value as the one named. New code
 * uses the new names. */
typedef ckpt_options ckpt_npz_options;
typedef ckpt_reader ckpt_npz;
#define CKPT_NPZ_OPTIONS_VERSION CKPT_OPTIONS_VERSION
#define CKPT_NPZ_OPTIONS_INIT CKPT_OPTIONS_INIT
#define CKPT_NPZ_PARTIAL CKPT_PARTIAL
#define CKPT_NPZ_MAP_UNVERIFIED CKPT_MAP_UNVERIFIED
#define CKPT_NPZ_MAP_WRITABLE CKPT_MAP_WRITABLE
#define CKPT_NPZ_KEEP_MANAGER_KEYS CKPT_KEEP_MANAGER_KEYS
CKPT_API int ckpt_npz_options_init(ckpt_npz_options *opts, uint32_t version) CKPT_SAME_AS(ckpt_options_init);
CKPT_API int ckpt_npz_save(const char *path, const ckpt_vars *vars, const ckpt_npz_options *opts)
    CKPT_SAME_AS(ckpt_save);
CKPT_API int ckpt_npz_read(ckpt_vars **out, const char *path, const ckpt_npz_options *opts) CKPT_SAME_AS(ckpt_read);
CKPT_API int ckpt_npz_read_memory(ckpt_vars **out, const void *bytes, size_t size, const ckpt_npz_options *opts)
    CKPT_SAME_AS(ckpt_read_memory);
CKPT_API int ckpt_npz_restore(const char *path, ckpt_vars *vars, const ckpt_npz_options *opts)
    CKPT_SAME_AS(ckpt_restore);
CKPT_API int ckpt_npz_open(ckpt_npz **out, const char *path, const ckpt_npz_options *opts)
    CKPT_SAME_AS(ckpt_reader_open);
CKPT_API void ckpt_npz_close(ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_close);
CKPT_API size_t ckpt_npz_count(const ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_count);
CKPT_API const char *ckpt_npz_name(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_name);
CKPT_API int ckpt_npz_find(const ckpt_npz *npz, const char *name, size_t *out_index) CKPT_SAME_AS(ckpt_reader_find);
CKPT_API uint32_t ckpt_npz_dtype(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_dtype);
CKPT_API size_t ckpt_npz_itemsize(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_itemsize);
CKPT_API uint32_t ckpt_npz_ndim(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_ndim);
CKPT_API const int64_t *ckpt_npz_shape(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_shape);
CKPT_API size_t ckpt_npz_nbytes(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_nbytes);
CKPT_API int ckpt_npz_read_into(ckpt_npz *npz, size_t i, void *dst, size_t dst_size)
    CKPT_SAME_AS(ckpt_reader_read_into);
CKPT_API int ckpt_npz_read_range(ckpt_npz *npz, size_t i, uint64_t offset, void *dst, size_t size)
    CKPT_SAME_AS(ckpt_reader_read_range);
CKPT_API const char *ckpt_npz_member_name(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_member_name);
CKPT_API uint32_t ckpt_npz_compression(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_compression);
CKPT_API uint64_t ckpt_npz_stored_bytes(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_stored_bytes);
CKPT_API uint32_t ckpt_npz_crc32(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_crc32);
CKPT_API uint64_t ckpt_npz_data_offset(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_data_offset);
CKPT_API int ckpt_npz_byte_order(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_byte_order);
CKPT_API int ckpt_npz_fortran_order(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_fortran_order);
CKPT_API uint64_t ckpt_npz_file_size(const ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_file_size);
CKPT_API uint32_t ckpt_npz_layout(const ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_layout);
CKPT_API uint32_t ckpt_npz_format(const ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_format);
CKPT_API const char *ckpt_npz_metadata(const ckpt_npz *npz, const char *key) CKPT_SAME_AS(ckpt_reader_metadata);
CKPT_API size_t ckpt_npz_metadata_count(const ckpt_npz *npz) CKPT_SAME_AS(ckpt_reader_metadata_count);
CKPT_API const char *ckpt_npz_metadata_key(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_metadata_key);
CKPT_API const char *ckpt_npz_metadata_value(const ckpt_npz *npz, size_t i) CKPT_SAME_AS(ckpt_reader_metadata_value);
CKPT_API int ckpt_npz_map(ckpt_npz *npz, size_t i, const void **out_data) CKPT_SAME_AS(ckpt_reader_map);
CKPT_API int ckpt_npz_map_vars(ckpt_npz *npz, ckpt_vars **out) CKPT_SAME_AS(ckpt_reader_map_vars);

/* -------------------------------------------------------------------------------------------------- storage */
/* Where checkpoints live: the local filesystem by default (a NULL storage), an "s3://bucket/key" path's S3 storage,
 * memory, or any medium a program plugs in through a table of callbacks (ckpt/sys/storage.h). */
/* Called for each name of a listing (ckpt_storage_list, and the listing callbacks of ckpt/sys/storage.h). */
typedef int (*ckpt_list_entry_fn)(const char *name, void *ctx);
/* What is at a path of a storage (ckpt_storage_stat, and the storage callback `stat`). */
typedef struct ckpt_file_info {
    uint64_t size;       /* bytes; 0 for a directory */
    int64_t modified_ns; /* last modification, nanoseconds since 1970-01-01 UTC; CKPT_TIME_UNKNOWN when not known */
    uint32_t is_dir;     /* 1 for a directory (on an object store: a prefix that keys go under), else 0 */
    uint32_t reserved;   /* 0 */
} ckpt_file_info;
#define CKPT_TIME_UNKNOWN INT64_MIN

/* A storage held in this process's memory (thread-safe): for tests, and for programs that want checkpoint bytes
 * without a filesystem. Directories must be made (make_dirs) before files go in them; "" and "." always exist.
 * Returns CKPT_OK, CKPT_EINVAL, CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_storage_new_memory(ckpt_storage **out);
/* Releases the caller's reference. Writers and managers that use the storage keep their own; the storage (and its
 * destroy callback) goes when the last one is released. NULL is fine. Since 0.6. */
CKPT_API void ckpt_storage_free(ckpt_storage *storage);

/* ---------------------------------------------------------------------------------------- files of a storage */
/* What a program's own filesystem object needs beside ckpt's saves: list a directory, tell a file's size and age,
 * read a file, remove files and directories — on any storage. pytorch-pfn-extras' snapshot extension does all of
 * these through its writer's `fs` (docs/python.md). As for writers and managers, `storage` NULL means the local
 * filesystem, or the S3 storage an "s3://bucket/key" path names. Messages name the path. */

/* Fills *info for the file or directory at path. Returns CKPT_OK; CKPT_EINVAL (NULL argument); CKPT_ENOTFOUND
 * (nothing there); CKPT_EIO. Since 0.8. */
CKPT_API int ckpt_storage_stat(ckpt_storage *storage, const char *path, ckpt_file_info *info);

/* Sets *shared to how many bytes of the file at path have blocks it shares with other files — what a filesystem
 * that clones (XFS, btrfs) holds once for several checkpoints after incremental saves (docs/checkpoint-manager.md).
 * Returns CKPT_OK; CKPT_EINVAL (NULL argument); CKPT_ENOTFOUND; CKPT_EUNSUPPORTED (the storage cannot tell: object
 * stores, memory, callback storages, a filesystem without FIEMAP); CKPT_EIO. Since 0.9. */
CKPT_API int ckpt_storage_shared_bytes(ckpt_storage *storage, const char *path, uint64_t *shared);
/* Calls entry(name, ctx) for each file of dir and each subdirectory (whose name ends in '/'), names sorted
 * bytewise; stops and returns entry's code if it returns non-zero. Returns CKPT_OK; CKPT_EINVAL; CKPT_ENOTFOUND
 * (no such directory; on an object store an empty prefix lists nothing instead); CKPT_EIO; CKPT_ENOMEM.
 * Since 0.8. */
CKPT_API int ckpt_storage_list(ckpt_storage *storage, const char *dir, ckpt_list_entry_fn entry, void *ctx);
/* Creates the directory dir and its missing parents (nothing on an object store, where directories are the prefixes
 * of names); CKPT_OK when it exists. Writers save only into directories that exist. Returns CKPT_OK; CKPT_EINVAL;
 * CKPT_EIO (a file is in the way, the medium failed). Since 0.8. */
CKPT_API int ckpt_storage_make_dirs(ckpt_storage *storage, const char *dir);
#define CKPT_STORAGE_REMOVE_RECURSIVE 1u /* ckpt_storage_remove: a directory with everything in it */
/* Removes the file at path, or the directory at path: an empty one, or with CKPT_STORAGE_REMOVE_RECURSIVE
 * everything in it. Returns CKPT_OK; CKPT_EINVAL (NULL path, unknown flags); CKPT_ENOTFOUND; CKPT_EEXIST (a
 * directory that is not empty, without the flag); CKPT_EIO. Since 0.8. */
CKPT_API int ckpt_storage_remove(ckpt_storage *storage, const char *path, uint32_t flags);

/* A file of a storage opened for reading (any file, not only checkpoints: ckpt_reader reads those). One thread at a
 * time may use a handle. */
typedef struct ckpt_file ckpt_file;
/* Opens the regular file at path; *size (may be NULL) gets its size. The handle keeps its own reference to the
 * storage. Returns CKPT_OK; CKPT_EINVAL (NULL out or path; a directory); CKPT_ENOTFOUND; CKPT_EIO; CKPT_ENOMEM.
 * On failure *out is NULL. Since 0.8. */
CKPT_API int ckpt_file_open(ckpt_file **out, ckpt_storage *storage, const char *path, uint64_t *size);
/* Reads up to size bytes at offset into dst; *got < size only at the end of the file. Returns CKPT_OK; CKPT_EINVAL
 * (NULL file or got, NULL dst with size > 0); CKPT_EIO. Since 0.8. */
CKPT_API int ckpt_file_read(ckpt_file *file, uint64_t offset, void *dst, size_t size, size_t *got);
/* Closes the file; NULL is fine. Since 0.8. */
CKPT_API void ckpt_file_close(ckpt_file *file);

/* -------------------------------------------------------------------------------------------------- writers */
/* pytorch-pfn-extras' writers: save bytes to a file atomically and durably, in the caller's thread or in the
 * background. Errors of background saves are never lost: each is returned exactly once, by the next
 * ckpt_writer_save*, ckpt_writer_wait or ckpt_writer_finalize call. */
typedef struct ckpt_writer ckpt_writer;
typedef struct ckpt_sink ckpt_sink; /* the file a save function writes into */

#define CKPT_WRITER_SIMPLE 0u /* saves run in the caller's thread */
#define CKPT_WRITER_THREAD 1u /* one background save at a time: a save first waits for the previous one */
#define CKPT_WRITER_QUEUE 2u  /* one background thread behind a queue of queue_depth saves */

/* ckpt_writer_save's and ckpt_writer_save_vars' flags: CKPT_WRITER_APPEND appends to the file in place, not
 * atomically (pfn-extras' append); CKPT_WRITER_NO_COPY (save_vars) does not copy the arrays: the caller promises the
 * collection and its data stay alive and unchanged until the save completes (ckpt_writer_wait). */
#define CKPT_WRITER_APPEND 1u
#define CKPT_WRITER_NO_COPY 2u
#define CKPT_APPEND CKPT_WRITER_APPEND /* the names before 0.8, kept */
#define CKPT_NO_COPY CKPT_WRITER_NO_COPY

/* Called after each save that succeeded, once its file is durable under its final name, with the path saved to
 * (<out_dir>/<filename>; borrowed for the call) and the writer's after_save_payload, on the thread that ran the
 * save (before ckpt_writer_wait returns). It must not call ckpt_writer_* functions of its own writer. Return CKPT_OK,
 * or a negative CKPT_* code (ckpt_error_set_message says why) to make that save fail — the file stays — with the
 * message "<path>: the after_save callback failed: <message>". docs/storage-and-writers.md ("After each save"). */
typedef int (*ckpt_after_save_fn)(const char *path, void *payload);

typedef struct ckpt_writer_options {
    uint32_t version;      /* CKPT_WRITER_OPTIONS_VERSION */
    uint32_t kind;         /* CKPT_WRITER_*; default SIMPLE */
    uint32_t queue_depth;  /* QUEUE: saves queued or running before a save blocks; 0 = 1. THREAD is always 1 */
    ckpt_storage *storage; /* NULL = the local filesystem; the writer keeps its own reference */
    const char *out_dir;   /* directory for saves given out_dir NULL; copied; NULL = "." */
    /* version 2 */
    ckpt_after_save_fn after_save; /* NULL = none; called after each durable save (see ckpt_after_save_fn) */
    void *after_save_payload;      /* after_save's; the caller keeps it valid until ckpt_writer_free */
} ckpt_writer_options;
#define CKPT_WRITER_OPTIONS_VERSION 2
#define CKPT_WRITER_OPTIONS_INIT {CKPT_WRITER_OPTIONS_VERSION, 0, 0, NULL, NULL, NULL, NULL}
/* Fills *opts with the defaults of struct version `version` (1..CKPT_WRITER_OPTIONS_VERSION), writing only the
 * fields that version has. Returns CKPT_OK, CKPT_EINVAL (NULL opts, unknown version). Since 0.6. */
CKPT_API int ckpt_writer_options_init(ckpt_writer_options *opts, uint32_t version);

/* Writes the file's bytes: called once per save, on the writer's thread for background kinds. Return CKPT_OK,
 * or a negative CKPT_* code to fail the save (the target then keeps its previous content). */
typedef int (*ckpt_save_fn)(ckpt_sink *sink, void *payload);

/* Creates a writer (background kinds start their thread). opts NULL means the defaults; a struct of an older
 * version (1) is read only as far as that version goes, its later fields taking their defaults. Returns CKPT_OK,
 * CKPT_EINVAL (bad options, unknown version), CKPT_ENOMEM, CKPT_ERROR (no thread could be started). Since 0.6. */
CKPT_API int ckpt_writer_new(ckpt_writer **out, const ckpt_writer_options *opts);
/* Saves what fn writes to <out_dir>/<filename> (out_dir NULL: the writer's). Atomic and durable unless flags has
 * CKPT_WRITER_APPEND; an atomic save then removes the stale temporaries of <filename> that killed saves left, as
 * ckpt_save does. For background kinds fn runs later on the writer's thread: payload must stay valid until then
 * (ckpt_writer_wait). Blocks while the writer's queue is full.
 * If a ckpt_sink_write fails, the save fails with that error whatever fn returns (the target is left alone).
 * Returns CKPT_OK (for background kinds: queued); the error of an earlier background save, in which case this save
 * was not started (the message ends "; the save of <path> was not started"); CKPT_EINVAL (NULL writer, filename
 * or fn, empty filename, flags other than CKPT_WRITER_APPEND, writer finalized); for SIMPLE writers, the save's own
 * errors: CKPT_ENOTFOUND (no such directory), CKPT_EIO, fn's code, the after_save callback's code. Since 0.6. */
CKPT_API int ckpt_writer_save(ckpt_writer *w, const char *out_dir, const char *filename, ckpt_save_fn fn,
                              void *payload, uint32_t flags);
/* Saves a collection as .npz (ckpt_save's format and options; npz->storage is ignored: the writer's storage
 * is used). Background kinds copy every array before returning, so training may change them at once — unless
 * flags has CKPT_WRITER_NO_COPY. npz->base (0.9) is a path in the save's storage as ckpt_save takes it (not
 * one in out_dir), opened when the save runs: a queued save shares with the save queued before it. Returns the
 * codes of ckpt_writer_save, plus CKPT_ENOMEM for the copy. Since 0.6. */
CKPT_API int ckpt_writer_save_vars(ckpt_writer *w, const char *out_dir, const char *filename, const ckpt_vars *vars,
                                   const ckpt_options *npz, uint32_t flags);
/* Appends size bytes to the file being saved. Returns CKPT_OK, CKPT_EINVAL, CKPT_EIO (the storage failed; every
 * later write to this sink fails the same way). Since 0.6. */
CKPT_API int ckpt_sink_write(ckpt_sink *sink, const void *data, size_t size);
/* Waits for every queued save and its after_save callback; returns CKPT_OK or the first error not yet reported
 * (CKPT_EINVAL for NULL). Since 0.6. */
CKPT_API int ckpt_writer_wait(ckpt_writer *w);
/* Waits, then stops the background thread; later saves fail with CKPT_EINVAL. Idempotent: a second call returns
 * CKPT_OK. Returns the first unreported error. Never hangs on a failed save. Since 0.6. */
CKPT_API int ckpt_writer_finalize(ckpt_writer *w);
/* Finalizes (discarding unreported errors: call ckpt_writer_finalize first to see them) and frees. NULL is fine.
 * Since 0.6. */
CKPT_API void ckpt_writer_free(ckpt_writer *w);

/* ------------------------------------------------------------------------------------------- communicators */
/* How the processes of one training job that save a sharded checkpoint together coordinate (docs/distributed.md).
 * ckpt has no transport of its own: libckpt_mpi (ckpt/ckpt_mpi.h) makes one over an MPI communicator, and a program
 * using NCCL, Gloo or torch.distributed fills this table with its own collectives.
 *
 * Every callback receives `payload` first and returns CKPT_OK or a negative CKPT_* code (which then fails the ckpt
 * call that made it). Every call but rank and size is collective: ckpt makes the same calls in the same order on
 * every rank, from the thread that called the ckpt function. Buffers are small (a few KiB: statuses, names, the
 * variables' descriptions), never array data. */
typedef struct ckpt_comm ckpt_comm;
#define CKPT_REDUCE_MIN 0u
#define CKPT_REDUCE_MAX 1u
#define CKPT_REDUCE_SUM 2u
typedef struct ckpt_comm_ops {
    uint32_t version; /* CKPT_COMM_OPS_VERSION */
    void *payload;
    /* This process's rank (0 <= rank < size) and the number of ranks; called once, by ckpt_comm_new. */
    int (*rank)(void *payload, int32_t *out);
    int (*size)(void *payload, int32_t *out);
    /* Returns once every rank has called it. */
    int (*barrier)(void *payload);
    /* Replaces *value on every rank with the minimum, maximum or sum (op: CKPT_REDUCE_*) of every rank's. */
    int (*all_reduce_i64)(void *payload, int64_t *value, uint32_t op);
    /* Replaces buf[0..size) on every rank with rank root's bytes; every rank passes the same size. */
    int (*broadcast)(void *payload, void *buf, size_t size, int32_t root);
    /* recv[r*size .. (r+1)*size) gets rank r's send[0..size); every rank passes the same size, and recv holds
     * size times the number of ranks bytes. */
    int (*all_gather)(void *payload, const void *send, size_t size, void *recv);
    /* Called once when nothing uses the communicator any more (may be NULL). */
    void (*destroy)(void *payload);
} ckpt_comm_ops;
#define CKPT_COMM_OPS_VERSION 1

/* Makes a communicator from a callback table (copied; `ops->payload` is kept), asking rank and size once.
 * Every callback except destroy is required. Returns CKPT_OK; CKPT_EINVAL (NULL argument, unknown version, a
 * callback missing, a size < 1 or a rank outside [0, size)); the code a rank or size callback returned;
 * CKPT_ENOMEM. On failure destroy is not called: the payload stays the caller's. Since 0.6. */
CKPT_API int ckpt_comm_new(ckpt_comm **out, const ckpt_comm_ops *ops);

/* Releases the caller's reference; managers that use the communicator keep their own, and destroy is called when
 * the last goes. NULL is fine. Since 0.6. */
CKPT_API void ckpt_comm_free(ckpt_comm *comm);
/* This process's rank and the number of ranks, as the callbacks reported them; -1 and 0 for NULL. Since 0.6. */
CKPT_API int32_t ckpt_comm_rank(const ckpt_comm *comm);
CKPT_API int32_t ckpt_comm_size(const ckpt_comm *comm);

/* --------------------------------------------------------------------------------------------- sharded steps */
/* One sharded checkpoint step, read by one process: a directory "<subdir>/%010d/" of shards and manifest.json that a
 * manager with a communicator saved (docs/distributed.md). Opening reads and checks the manifest; shards are opened
 * when a variable is read from them. Managers read sharded steps themselves; this is for tools and inspection. */
typedef struct ckpt_step ckpt_step;
/* Opens the step directory `dir`. opts (may be NULL): its storage and reading limits apply. Returns CKPT_OK;
 * CKPT_EINVAL (NULL out or dir, bad options); CKPT_ENOTFOUND (no manifest.json in dir); CKPT_EFORMAT (a malformed
 * manifest, the message naming the problem); CKPT_EUNSUPPORTED (a newer manifest version); CKPT_EIO; CKPT_ENOMEM.
 * Since 0.6. */
CKPT_API int ckpt_step_open(ckpt_step **out, const char *dir, const ckpt_options *opts);
/* Closes the step. NULL is fine. Since 0.6. */
CKPT_API void ckpt_step_close(ckpt_step *step);
/* The step's index (-1 for NULL) and the number of ranks that saved it (0 for NULL). Since 0.6. */
CKPT_API int64_t ckpt_step_index(const ckpt_step *step);
CKPT_API int32_t ckpt_step_world_size(const ckpt_step *step);
/* The file name of rank's shard in the step directory ("shard-00003-of-00008.npz", borrowed); NULL out of range.
 * Since 0.6. */
CKPT_API const char *ckpt_step_shard(const ckpt_step *step, int32_t rank);
/* Number of variables; their names and accessors, as the ckpt_reader ones — the shape is the global one for a
 * row-split variable (borrowed). Out of range gives 0 or NULL. Since 0.6. */
CKPT_API size_t ckpt_step_count(const ckpt_step *step);
CKPT_API const char *ckpt_step_name(const ckpt_step *step, size_t i);
CKPT_API uint32_t ckpt_step_dtype(const ckpt_step *step, size_t i);
CKPT_API size_t ckpt_step_itemsize(const ckpt_step *step, size_t i);
CKPT_API uint32_t ckpt_step_ndim(const ckpt_step *step, size_t i);
CKPT_API const int64_t *ckpt_step_shape(const ckpt_step *step, size_t i);
CKPT_API size_t ckpt_step_nbytes(const ckpt_step *step, size_t i);
/* Number of pieces of variable i: 0 for a whole variable (held by one shard), else the shards its rows are in.
 * Since 0.6. */
CKPT_API size_t ckpt_step_pieces(const ckpt_step *step, size_t i);
/* Reads rows [first, first + count) of variable i along dimension 0 (a 0-d variable: first 0, count 1) into dst
 * (native byte order, C order), from whichever shards hold them: a piece read whole has its CRC-32 verified, part
 * of a stored one is a ranged read (see ckpt_manager_restore). dst_size must hold count rows.
 * Returns CKPT_OK; CKPT_EINVAL (NULL step, NULL dst for a non-empty read, rows outside the variable);
 * CKPT_ENOTFOUND (i out of range); CKPT_EBUFS (dst_size too small); CKPT_EFORMAT (a shard is corrupt, or does not
 * hold what the manifest says); CKPT_EIO; CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_step_read_rows(ckpt_step *step, size_t i, int64_t first, int64_t count, void *dst, size_t dst_size);
/* The step's metadata (the manifest's), as the ckpt_reader_metadata functions (borrowed until the step is closed).
 * Since 0.6. */
CKPT_API const char *ckpt_step_metadata(const ckpt_step *step, const char *key);
CKPT_API size_t ckpt_step_metadata_count(const ckpt_step *step);
CKPT_API const char *ckpt_step_metadata_key(const ckpt_step *step, size_t i);
CKPT_API const char *ckpt_step_metadata_value(const ckpt_step *step, size_t i);

/* ------------------------------------------------------------------------------------------ checkpoint manager */
/* objax.io.Checkpoint: a directory <logdir>/<subdir> of numbered checkpoints "%010d.npz" that a training program
 * saves into and resumes from, readable by numpy and objax. Saves are atomic and durable; retention then keeps the
 * newest `keep` (by index), multiples of `keep_every`, the `keep_best` best by `best_metric` and those saved in the
 * last `keep_seconds`, never the newest nor the one just written, from the files' metadata ("ckpt."-prefixed keys,
 * the manager's own), so the same after a restart. Restoring the latest falls back past corrupt files. One manager
 * owns a directory from its first save to its close (".ckpt.lock"); opening, listing, reading and restoring lock
 * and change nothing. docs/checkpoint-manager.md says the rest: the keys, retention, takeover within a process. */
typedef struct ckpt_manager ckpt_manager;
#define CKPT_LOG_INFO 1    /* "Resuming from …", "No checkpoints found" */
#define CKPT_LOG_WARNING 2 /* a corrupt checkpoint skipped, a stale temporary removed, a directory taken over */
/* Called from the thread doing the work (a background save's thread for retention messages). */
typedef void (*ckpt_log_fn)(int level, const char *message, void *payload);
#define CKPT_LATEST (-1)
#define CKPT_MANAGER_ASYNC 1u       /* saves run on a background writer */
#define CKPT_MANAGER_NO_FALLBACK 2u /* restore(LATEST) fails instead of trying older checkpoints */
#define CKPT_MANAGER_NO_MAKEDIR 4u  /* the directory must exist */
#define CKPT_MANAGER_VERBOSE 8u     /* log to stderr when no log callback is set */
#define CKPT_MANAGER_READ_ONLY 16u  /* for tools and evaluators: nothing is created, saves fail (no manager
                                       locks before its first save, so any manager restores beside a trainer) */
/* Every save writes every byte. Without it (since 0.9), where the storage can share blocks between files (XFS with
 * reflink, btrfs, bcachefs, ZFS 2.2, NFS 4.2 servers that clone), a save shares the chunks that did not change with
 * the checkpoint saved before it, and every file stays complete (docs/checkpoint-manager.md, "Incremental saves"). */
#define CKPT_MANAGER_FULL_SAVES 32u
typedef struct ckpt_manager_options {
    uint32_t version;              /* CKPT_MANAGER_OPTIONS_VERSION */
    int32_t keep;                  /* newest checkpoints kept; <= 0 keeps all; default 10 */
    int64_t keep_every;            /* also keep indices that are multiples of this; 0 = off */
    uint32_t flags;                /* CKPT_MANAGER_* */
    uint32_t queue_depth;          /* async: saves in flight before save() blocks; 0 = 1. With a communicator,
                                      one: the next save commits the step before it */
    const char *subdir;            /* NULL = "ckpt" (objax DIR_NAME); "" = the logdir itself; copied */
    const ckpt_options *npz;       /* NULL = defaults; copied. Its layout is how saves write (reads detect either);
                                          its storage and base fields are ignored (see storage, full_every). Its format
                                          (since 0.10) names the checkpoints: CKPT_FORMAT_SAFETENSORS saves
                                          "<index>.safetensors" (no communicator; incremental against the checkpoint
                                          this manager saved before), AUTO and NPZ "<index>.npz"; every manager
                                          lists, restores and retains both */
    ckpt_log_fn log;
    void *log_payload;
    ckpt_storage *storage;         /* NULL = the local filesystem; the manager keeps its own reference */
    /* version 2: */
    int32_t keep_best;             /* also keep the keep_best best checkpoints by best_metric; <= 0 = off.
                                      Checkpoints without the metric, or with NaN, are neither best nor counted */
    const char *best_metric;       /* the metric of keep_best and ckpt_manager_best; NULL = none; copied */
    uint32_t best_mode;            /* CKPT_BEST_MIN (lower is better) or CKPT_BEST_MAX */
    int64_t keep_seconds;          /* also keep what was saved within the last keep_seconds (by the time each file
                                      records, not its mtime); 0 = off */
    int64_t save_every_steps;      /* ckpt_manager_should_save: steps that are multiples of this; 0 = off */
    int64_t save_every_seconds;    /* ckpt_manager_should_save: once this many seconds have passed since the
                                      manager's last save, or since it was opened; 0 = off (whole seconds, like
                                      keep_seconds) */
    /* version 3: */
    uint64_t max_staging_bytes;    /* CKPT_MANAGER_ASYNC: the copies held by queued and running saves never exceed
                                      this; a save whose copy would exceed it first waits for earlier saves, and
                                      one larger than the whole budget is written synchronously from the caller's
                                      arrays, without a copy, after the earlier ones. 0 = no limit */
    /* version 4: */
    ckpt_comm *comm;               /* NULL: this process alone. Otherwise the manager is collective over the
                                      communicator's ranks (docs/distributed.md), each of which opens it with the
                                      same logdir and options: opening, every save (each rank writes its own
                                      variables as one shard of a step directory "<subdir>/%010d/", committed by
                                      rank 0 with a manifest once every shard is durable) and every restore (rank
                                      0 chooses the step, every rank reads what it needs) are made by every rank,
                                      and every rank gets the same result. Rank 0 holds the lock and runs
                                      retention. With CKPT_MANAGER_ASYNC each rank's shard is written in the
                                      background and the step is committed by the next save, wait, close,
                                      restore or read, which are then collective too (ckpt_manager_save). The
                                      manager keeps its own reference */
    /* version 5: with incremental saves, every full_every-th save of the manager shares nothing (two files that
     * share blocks share a media error); 0 = never */
    int64_t full_every;
} ckpt_manager_options;
#define CKPT_BEST_MIN 0u
#define CKPT_BEST_MAX 1u
#define CKPT_MANAGER_OPTIONS_VERSION 5
/* clang-format off */
#define CKPT_MANAGER_OPTIONS_INIT \
    {CKPT_MANAGER_OPTIONS_VERSION, 10, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, CKPT_BEST_MIN, 0, 0, 0, 0, NULL, 0}
/* clang-format on */
/* Fills *opts with the defaults of `version` (1 to 5: an older caller's struct ends before the later fields, and
 * only that much is written). ckpt_manager_open accepts every version. Returns CKPT_OK, CKPT_EINVAL (NULL opts,
 * unknown version). Since 0.6. */
CKPT_API int ckpt_manager_options_init(ckpt_manager_options *opts, uint32_t version);
/* Opens (creating, unless CKPT_MANAGER_NO_MAKEDIR) the checkpoint directory of `logdir`. It locks nothing and
 * deletes nothing: another manager, of this process or another, may hold the directory and save meanwhile; the
 * first ckpt_manager_save takes it. With CKPT_MANAGER_READ_ONLY it only opens an existing directory, and
 * ckpt_manager_save fails with CKPT_EINVAL.
 * With a comm, opening is collective: rank 0 opens the directory and every rank gets its result.
 * Returns CKPT_OK; CKPT_EINVAL (also READ_ONLY with ASYNC, keep_best > 0 without a
 * best_metric, an empty or invalid best_metric, an unknown best_mode, a negative keep_every, keep_seconds,
 * save_every_steps or save_every_seconds); CKPT_ENOTFOUND (NO_MAKEDIR or READ_ONLY, and no
 * directory); CKPT_EIO; CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_manager_open(ckpt_manager **out, const char *logdir, const ckpt_manager_options *opts);
/* Saves `vars` as checkpoint idx (>= 0), replacing an existing one atomically, then applies retention; vars is
 * left as it was. The first save locks the directory (CKPT_EBUSY naming the holder's pid: nothing is written) and
 * removes stale temporaries. A save that the storage says will not fit fails with CKPT_EIO before its first byte.
 * CKPT_MANAGER_ASYNC: the arrays are copied before it returns; it blocks while queue_depth saves are in flight and
 * returns an earlier background save's error instead of starting. With a comm it is collective (every rank, the
 * same idx and metrics) and every rank returns the same result. docs/checkpoint-manager.md ("One manager per
 * directory", "Disk space", "Incremental saves") and docs/distributed.md say the rest.
 * Returns CKPT_OK; CKPT_EINVAL (NULL argument, idx < 0, a manager opened read-only; sharded: a whole variable saved
 * by two ranks, pieces that do not tile their rows); CKPT_EBUSY; CKPT_EIO; CKPT_ENOMEM; an earlier save's code;
 * CKPT_EUNSUPPORTED (sharded, on a callback storage without list_dirs). Since 0.6. */
CKPT_API int ckpt_manager_save(ckpt_manager *m, const ckpt_vars *vars, int64_t idx);
/* As ckpt_manager_save, also recording metrics names[0..n) = values[0..n) as "ckpt.metric.<name>" in the file's
 * metadata (names and values are read before it returns; NULL when n is 0). Any value may be saved; NaN is never
 * the best. Returns the codes of ckpt_manager_save, and CKPT_EINVAL for NULL names or values with n > 0, a NULL,
 * empty or invalid UTF-8 name, or a name given twice. Since 0.6. */
CKPT_API int ckpt_manager_save_metrics(ckpt_manager *m, const ckpt_vars *vars, int64_t idx,
                                       const char *const *names, const double *values, size_t n);
/* Sets *out to the value of metric `name` that checkpoint idx (>= 0) recorded, reading only the file's metadata.
 * Waits for background saves first. Returns CKPT_OK; CKPT_ENOTFOUND (no checkpoint idx, or it records no such
 * metric); CKPT_EFORMAT (the file is corrupt, or the value is not a number); CKPT_EINVAL (NULL argument, idx < 0);
 * CKPT_EIO. Since 0.6. */
CKPT_API int ckpt_manager_metric(ckpt_manager *m, int64_t idx, const char *name, double *out);
/* Sets *out_idx to the checkpoint with the best value of best_metric under best_mode, read from the files (not
 * validated beyond their metadata; unreadable files are skipped); a tie goes to the higher index, NaN never is
 * the best. Waits for background saves first. Returns CKPT_OK; CKPT_ENOTFOUND (no checkpoint records the
 * metric); CKPT_EINVAL (NULL argument, no best_metric set); CKPT_EIO. Since 0.6. */
CKPT_API int ckpt_manager_best(ckpt_manager *m, int64_t *out_idx);
/* Whether the training loop should save at `step` (>= 0): returns 1 after ckpt_manager_request_save (the call
 * that returns 1 consumes the request), when step is a multiple of save_every_steps (step 0 included), or once
 * save_every_seconds have passed since the manager's last save or its opening; 0 otherwise. It saves nothing.
 * Returns 1, 0, or CKPT_EINVAL (NULL m, step < 0, a manager opened read-only). Since 0.6. */
CKPT_API int ckpt_manager_should_save(ckpt_manager *m, int64_t step);
/* Makes the next ckpt_manager_should_save return 1: for a SIGTERM handler before preemption. Async-signal-safe
 * (one lock-free atomic store; it neither allocates nor locks); NULL is ignored. Since 0.6. */
CKPT_API void ckpt_manager_request_save(ckpt_manager *m);
/* Restores `vars` in place (ckpt_restore's rules) from checkpoint idx, or from the newest readable one for
 * CKPT_LATEST: corrupt or unreadable files are skipped newest-first, each reported through the log (unless
 * CKPT_MANAGER_NO_FALLBACK). Waits for background saves first. *restored_idx (may be NULL) gets the index used.
 * Sharded steps are restored by any manager, a row split getting its rows of the global array whatever the world
 * size that saved it; with a comm the restore is collective and every rank returns the same index or error
 * (docs/distributed.md, "Restore with agreement").
 * Returns CKPT_OK; CKPT_ENOTFOUND (no checkpoint: objax's restore returns (0, '') here; no checkpoint idx);
 * CKPT_EFORMAT/CKPT_EIO (the checkpoint asked for, every checkpoint, or with NO_FALLBACK the newest, is
 * unreadable); CKPT_EMISMATCH (not retried on older checkpoints); CKPT_EINVAL. Since 0.6. */
CKPT_API int ckpt_manager_restore(ckpt_manager *m, ckpt_vars *vars, int64_t idx, int64_t *restored_idx);
/* Reads checkpoint idx (or CKPT_LATEST, with fallback) into a new collection (*out, owned by the caller).
 * Returns the codes of ckpt_manager_restore except CKPT_EMISMATCH. Since 0.6. */
CKPT_API int ckpt_manager_read(ckpt_manager *m, int64_t idx, ckpt_vars **out, int64_t *restored_idx);
/* The newest checkpoint index on disk (not validated). Returns CKPT_OK, CKPT_ENOTFOUND (none), CKPT_EINVAL,
 * CKPT_EIO. Since 0.6. */
CKPT_API int ckpt_manager_latest(ckpt_manager *m, int64_t *out_idx);
/* Checkpoint indices, ascending: writes min(cap, n) of them to idx (NULL when cap is 0) and n to *count.
 * Returns CKPT_OK; CKPT_EBUFS (cap < n: *count says how many there are); CKPT_EINVAL; CKPT_EIO. Since 0.6. */
CKPT_API int ckpt_manager_list(ckpt_manager *m, int64_t *idx, size_t cap, size_t *count);
/* Writes the path of checkpoint idx (NUL-terminated) into buf: a URL for a logdir given as one
 * ("s3://bucket/run/ckpt/0000000300.npz"), so the path opens with a NULL storage as the logdir did; a path in the
 * manager's storage otherwise. Returns CKPT_OK, CKPT_EBUFS (cap too small),
 * CKPT_EINVAL (NULL argument, idx < 0). Since 0.6. */
CKPT_API int ckpt_manager_path(ckpt_manager *m, int64_t idx, char *buf, size_t cap);
/* ckpt_manager_clean's flags. */
#define CKPT_CLEAN_DRY_RUN 1u /* find the stale temporaries; remove nothing */
/* What ckpt_clean_fn's is_dir says a temporary is. */
#define CKPT_CLEAN_FILE 0   /* a temporary file */
#define CKPT_CLEAN_DIR 1    /* a directory (a sharded save's staging, a step without a manifest) */
#define CKPT_CLEAN_UPLOAD 2 /* an unfinished write of the file at path (an incomplete multipart upload on S3): the
                             * file itself, if there is one, stays */
/* Called by ckpt_manager_clean for each stale temporary, once it is removed (with CKPT_CLEAN_DRY_RUN: once found):
 * its path (the manager's directory joined with its name; valid during the call) and what it is (is_dir: one of
 * CKPT_CLEAN_FILE, CKPT_CLEAN_DIR, CKPT_CLEAN_UPLOAD). */
typedef void (*ckpt_clean_fn)(const char *path, int is_dir, void *payload);
/* Removes the temporaries that interrupted saves left in the manager's directory: checkpoint files' temporaries,
 * sharded saves' staging directories, step directories without a manifest, any other ckpt save's temporary, and
 * unfinished writes (incomplete multipart uploads on S3). Nothing whose name ckpt does not make is touched, nor (on
 * the local file system) a temporary a live save holds. It takes the directory as a save does (CKPT_EBUSY while
 * another process's manager holds it); CKPT_CLEAN_DRY_RUN only reads, and works on a read-only manager. Waits for
 * this manager's background saves first. Details: docs/cli.md, "ckpt clean". fn (may be NULL) is called per temporary;
 * count (may be NULL) receives how many there were. Returns CKPT_OK, CKPT_EBUSY, CKPT_EINVAL (NULL m, unknown flags, a
 * read-only manager without CKPT_CLEAN_DRY_RUN, a comm of more than one rank), CKPT_EIO (one would not go; the others
 * were still removed) or the storage's error. Since 0.7. */
CKPT_API int ckpt_manager_clean(ckpt_manager *m, uint32_t flags, ckpt_clean_fn fn, void *payload, size_t *count);
/* Waits for background saves; returns the first error not yet reported (CKPT_OK if none). With a comm and
 * CKPT_MANAGER_ASYNC it commits the step saved last (collective: every rank calls it), returning its error on every
 * rank. Since 0.6. */
CKPT_API int ckpt_manager_wait(ckpt_manager *m);
/* Waits for background saves, unlocks the directory (if this manager locked it and no newer manager of this
 * process took it over) and frees the manager; returns the first unreported error. `m` is gone afterwards, whatever
 * is returned: using it again is a use after free, which ckpt cannot detect.
 * With a comm and CKPT_MANAGER_ASYNC it first commits the step saved last, as ckpt_manager_wait (collective).
 * NULL is fine (CKPT_OK). Since 0.6. */
CKPT_API int ckpt_manager_close(ckpt_manager *m);
/* objax's checkpoint_idx: "…/0000000042.npz" -> 42 (and, since 0.10, "…/0000000042.safetensors" -> 42); -1 if the
 * file name is not a checkpoint's (ten or more digits, no extra leading zero, ".npz" or ".safetensors"). NULL gives
 * -1. Since 0.6. */
CKPT_API int64_t ckpt_checkpoint_idx(const char *filename);

#ifdef __cplusplus
}
#endif

/* What implementers of storages and extension libraries use (ckpt/sys/): included here so that a
 * program written against earlier versions of this header, where they were declared, still compiles. */
#include "ckpt/sys/errors.h"
#include "ckpt/sys/storage.h"

#endif /* CKPT_CKPT_H */
