/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt/sys/storage.h: for implementers of a storage — a medium of checkpoints other than those ckpt brings (the
 * local filesystem, memory, S3). Programs that only use storages need ckpt/ckpt.h alone.
 *
 * ckpt writes files through these callbacks front to back (never seeking), as a temporary file that it then
 * renames over the target, and reads them at arbitrary offsets. Every callback receives `payload` first and
 * returns CKPT_OK or a negative CKPT_* code: CKPT_ENOTFOUND for a missing file or directory, CKPT_EEXIST from
 * `create` when the path exists, CKPT_EIO for failures of the medium. Callbacks may run on a writer's background
 * thread, concurrently with calls from other threads, so they must be thread-safe for different files. A failing
 * callback makes the ckpt call fail with its code and a message naming the operation and path (give it words of
 * its own with ckpt_error_set_message). docs/storage-and-writers.md has a whole example.
 */
#ifndef CKPT_SYS_STORAGE_H
#define CKPT_SYS_STORAGE_H

#include "ckpt/ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_storage_ops {
    uint32_t version; /* CKPT_STORAGE_OPS_VERSION */
    void *payload;
    /* Creates dir and its missing parents; CKPT_OK if it exists. */
    int (*make_dirs)(void *payload, const char *dir);
    /* Creates a new empty file at path, failing with CKPT_EEXIST if anything is there; *file is the callback's
     * handle for it, passed to write/sync/close. ckpt chooses the (temporary) paths. */
    int (*create)(void *payload, const char *path, void **file);
    /* Opens path for appending, creating it if missing (CKPT_WRITER_APPEND saves only; may be NULL). */
    int (*open_append)(void *payload, const char *path, void **file);
    /* Appends size bytes. */
    int (*write)(void *payload, void *file, const void *data, size_t size);
    /* Makes the file's bytes durable. A failed sync is never retried: ckpt discards the file. */
    int (*sync)(void *payload, void *file);
    /* Releases the file; called exactly once per file, also after failures (the result is then ignored). */
    int (*close)(void *payload, void *file);
    /* Replaces `to` with `from` atomically. */
    int (*rename)(void *payload, const char *from, const char *to);
    /* Makes renames and creations in dir durable (may be NULL when the medium has no such notion). */
    int (*sync_dir)(void *payload, const char *dir);
    /* Removes a file. */
    int (*remove)(void *payload, const char *path);
    /* Calls entry(name, ctx) for each file in dir (names, not paths; leave out subdirectories); stops and returns
     * entry's code if it returns non-zero. */
    int (*list)(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx);
    /* Opens a file for reading and reports its size. */
    int (*open_read)(void *payload, const char *path, void **file, uint64_t *size);
    /* Reads up to size bytes at offset into dst; *got < size only at the end of the file. ckpt calls it for one
     * file from one thread at a time (the local filesystem and memory storages read large files on several). */
    int (*read_at)(void *payload, void *file, uint64_t offset, void *dst, size_t size, size_t *got);
    /* Releases a file opened by open_read. */
    void (*close_read)(void *payload, void *file);
    /* Called once when the storage is no longer used by anything (may be NULL). */
    void (*destroy)(void *payload);
    /* version 2: */
    /* Bytes a new file in dir may still take (statvfs's f_bavail * f_frsize for a file system), for the manager's
     * disk check before a save. May be NULL, or return CKPT_EUNSUPPORTED, when the medium cannot tell: no check is
     * made. Any other error fails the save that asked. */
    int (*free_space)(void *payload, const char *dir, uint64_t *bytes);
    /* version 3: directories, for sharded checkpoints (a directory of shard files and a manifest per step). All
     * three may be NULL; without list_dirs the storage holds file-per-step checkpoints only (a sharded save fails
     * with CKPT_EUNSUPPORTED, and listings show files). */
    /* Calls entry(name, ctx) for each subdirectory of dir (names, not paths), as `list` does for files. On an object
     * store: the distinct next components of the keys under "dir/". */
    int (*list_dirs)(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx);
    /* Removes the empty directory dir (ckpt removes what is in it first). NULL where directories are only prefixes
     * of names (object stores): nothing is left to remove once the files are gone. */
    int (*remove_dir)(void *payload, const char *dir);
    /* Renames directory `from` to `to` (which does not exist) atomically: how a sharded save commits a step.
     * NULL for a storage that cannot (an object store): a sharded save then commits by writing the step's manifest
     * last. Shards go straight into the step's directory, and rank 0 writes manifest.json (create, write, sync,
     * close, rename over its temporary) only once every shard is durable. What that needs from the storage: a file
     * is visible under its final name only complete (rename of a file is atomic, as a single PUT is), and a file
     * written by one rank is seen by rank 0 and by later readers (read-after-write consistency). A step directory
     * without a manifest is never a checkpoint: listings ignore it and the next manager that opens the directory
     * removes it. Replacing a step that exists first deletes its manifest (the old step is gone from then on),
     * then its files. */
    int (*rename_dir)(void *payload, const char *from, const char *to);
    /* version 4: writes that interrupted saves left unfinished with no file to show for them — on an object store,
     * incomplete multipart uploads, which are billed and which no listing of files shows. ckpt_manager_clean finds
     * and abandons them, and a manager's first save those of its own checkpoints. Both may be NULL (the medium has
     * no such writes). */
    /* Calls entry(name, ctx) for each file under dir, at any depth ("x.npz", "0000000003/shard-00000-of-00002.npz"),
     * that has an unfinished write no live save of this storage owns; stops as list does. */
    int (*list_incomplete)(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx);
    /* Abandons the unfinished writes of the file at path that no live save of this storage owns (on S3: aborts its
     * incomplete multipart uploads). The file itself, if there is one, is untouched. CKPT_OK when there are none. */
    int (*abort_incomplete)(void *payload, const char *path);
    /* Calls entry(name, ctx) for each file of dir and for each subdirectory, the latter's name ending in '/': list
     * and list_dirs in one, for a medium where that is one request (an object store's listing). May be NULL: list
     * and list_dirs are called. */
    int (*list_entries)(void *payload, const char *dir, ckpt_list_entry_fn entry, void *ctx);
    /* version 5: */
    /* Fills *info for the file or directory at path (ckpt_storage_stat); CKPT_ENOTFOUND when nothing is there. May
     * be NULL: ckpt then opens the file (open_read) for its size, its age unknown, or finds a directory in its
     * parent's listing. */
    int (*stat)(void *payload, const char *path, ckpt_file_info *info);
    /* version 6: */
    /* Appends `size` bytes, `data`, to `file` (one create opened), where they are also bytes [offset, offset + size)
     * of `source` (a file open_read opened on this storage): shares what it can of them with `source` on the
     * medium's side instead of receiving them — an object store's server-side copy (UploadPartCopy), a
     * filesystem's reflink — writes the rest from `data`, and sets *shared to the number of bytes shared. offset and
     * size are multiples of 4096. Saves against a base (ckpt_options.base, a manager's incremental saves) call
     * it with the unchanged runs of their large arrays. May be NULL: nothing is shared, and such saves neither hash
     * their arrays nor open their base. Since 0.9. */
    int (*clone_range)(void *payload, void *file, void *source, uint64_t offset, uint64_t size, const void *data,
                       uint64_t *shared);
} ckpt_storage_ops;
#define CKPT_STORAGE_OPS_VERSION 6

/* Makes a storage from a callback table (copied; `ops->payload` is kept; a version-1 table ends before
 * free_space, a version-2 table before list_dirs, a version-3 table before list_incomplete, a version-4 table before
 * stat, a version-5 table before clone_range). Every callback except open_append, sync_dir, destroy,
 * free_space, list_dirs, remove_dir, rename_dir, list_incomplete, abort_incomplete, list_entries, stat and
 * clone_range is required. Returns CKPT_OK, CKPT_EINVAL (NULL argument,
 * unknown version, a required callback missing, rename_dir or remove_dir without list_dirs), CKPT_ENOMEM. Since 0.6. */
CKPT_API int ckpt_storage_new(ckpt_storage **out, const ckpt_storage_ops *ops);

#ifdef __cplusplus
}
#endif
#endif /* CKPT_SYS_STORAGE_H */
