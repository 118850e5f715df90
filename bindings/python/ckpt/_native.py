# SPDX-License-Identifier: Apache-2.0
"""libckpt through ctypes: finding and checking the library, the C structs, every function's signature.

Nothing here is public: the rest of the package wraps it. The constants mirror include/ckpt/ckpt.h (fixed values).
"""
import ctypes
import os
import sys
import sysconfig
from typing import Any, Optional, Tuple, Union

from . import errors

# The oldest library this package works with: 0.5.0 added ckpt_error_set_message, which every callback calls.
REQUIRED_VERSION = (0, 5, 0)
# Functions newer than REQUIRED_VERSION, and the library version that added each: an older library loads without
# them, and the methods that call them raise UnsupportedError.
SINCE = {"ckpt_reader_read_range": (0, 7, 0), "ckpt_manager_clean": (0, 7, 0),
         "ckpt_reader_byte_order": (0, 7, 0), "ckpt_reader_file_size": (0, 7, 0), "ckpt_reader_fortran_order": (0, 7, 0),
         "ckpt_vars_add_source": (0, 7, 0), "ckpt_vars_is_source": (0, 7, 0), "ckpt_reader_find": (0, 8, 0),
         "ckpt_storage_shared_bytes": (0, 9, 0), "ckpt_reader_format": (0, 10, 0)}
FILES_SINCE = (0, 8, 0)  # ckpt_storage_stat, _list, _remove and ckpt_file_*: a storage's files
SINCE.update((f, FILES_SINCE) for f in ("ckpt_storage_stat", "ckpt_storage_list", "ckpt_storage_make_dirs",
                                        "ckpt_storage_remove", "ckpt_file_open", "ckpt_file_read", "ckpt_file_close"))

COPY, BORROW = 0, 1
LAYOUT_AUTO, LAYOUT_PLAIN, LAYOUT_OBJAX = 0, 1, 2
STORE, DEFLATE = 0, 1
NPZ_OPTIONS_VERSION = 6
MANAGER_OPTIONS_VERSION = 5
# ckpt_options and ckpt_manager_options version 5 (base, chunk hashes, full_every); older libraries take version 4
INCREMENTAL_SINCE = (0, 9, 0)
# ckpt_options version 6 (format: safetensors files); older libraries take version 5
FORMAT_SINCE = (0, 10, 0)
FORMAT_AUTO, FORMAT_NPZ, FORMAT_SAFETENSORS = 0, 1, 2
WRITER_OPTIONS_VERSION = 2
WRITER_AFTER_SAVE_SINCE = (0, 7, 0)  # ckpt_writer_options version 2 (after_save); older libraries take version 1
STORAGE_OPS_VERSION = 6
STORAGE_REMOVE_RECURSIVE = 1
TIME_UNKNOWN = -(1 << 63)
COMM_OPS_VERSION = 1
REDUCE_MIN, REDUCE_MAX, REDUCE_SUM = 0, 1, 2
LATEST = -1
MANAGER_ASYNC, MANAGER_NO_FALLBACK, MANAGER_NO_MAKEDIR, MANAGER_VERBOSE, MANAGER_READ_ONLY = 1, 2, 4, 8, 16
MANAGER_FULL_SAVES = 32
BEST_MIN, BEST_MAX = 0, 1
LOG_INFO, LOG_WARNING = 1, 2
WRITER_SIMPLE, WRITER_THREAD, WRITER_QUEUE = 0, 1, 2
APPEND, NO_COPY = 1, 2
NPZ_PARTIAL, NPZ_MAP_UNVERIFIED, NPZ_MAP_WRITABLE = 1, 2, 4
NPZ_CHUNK_HASHES = 16

c_void_p, c_char_p, c_size_t, c_int, c_uint32, c_int32 = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                                           ctypes.c_int, ctypes.c_uint32, ctypes.c_int32)
c_int64, c_uint64 = ctypes.c_int64, ctypes.c_uint64

RENAME_FN = ctypes.CFUNCTYPE(c_int, c_char_p, c_void_p, c_size_t, c_void_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, c_uint64, c_uint64, c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)
SAVE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)
AFTER_SAVE_FN = ctypes.CFUNCTYPE(c_int, c_char_p, c_void_p)
SOURCE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64, c_void_p, c_size_t)
LIST_ENTRY_FN = ctypes.CFUNCTYPE(c_int, c_char_p, c_void_p)
CLEAN_FN = ctypes.CFUNCTYPE(None, c_char_p, c_int, c_void_p)
CLEAN_DRY_RUN = 1
CLEAN_FILE, CLEAN_DIR, CLEAN_UPLOAD = 0, 1, 2  # ckpt_clean_fn's is_dir


class NpzOptions(ctypes.Structure):
    """ckpt_options (ckpt_npz_options before 0.11)."""

    _fields_ = [("version", c_uint32), ("layout", c_uint32), ("compression", c_uint32), ("level", c_int32),
                ("rename", RENAME_FN), ("rename_payload", c_void_p), ("max_header_bytes", c_uint64),
                ("progress", PROGRESS_FN), ("progress_payload", c_void_p),
                ("storage", c_void_p),  # version 2
                ("max_members", c_uint64), ("max_total_bytes", c_uint64),  # version 3
                ("flags", c_uint32),  # version 4
                ("base", c_char_p),  # version 5
                ("format", c_uint32), ("max_shard_bytes", c_uint64)]  # version 6


class ManagerOptions(ctypes.Structure):
    """ckpt_manager_options."""

    _fields_ = [("version", c_uint32), ("keep", c_int32), ("keep_every", c_int64), ("flags", c_uint32),
                ("queue_depth", c_uint32), ("subdir", c_char_p), ("npz", ctypes.POINTER(NpzOptions)),
                ("log", LOG_FN), ("log_payload", c_void_p), ("storage", c_void_p),
                # version 2
                ("keep_best", c_int32), ("best_metric", c_char_p), ("best_mode", c_uint32),
                ("keep_seconds", c_int64), ("save_every_steps", c_int64), ("save_every_seconds", c_int64),
                ("max_staging_bytes", c_uint64),  # version 3
                ("comm", c_void_p),  # version 4
                ("full_every", c_int64)]  # version 5


class WriterOptions(ctypes.Structure):
    """ckpt_writer_options."""

    _fields_ = [("version", c_uint32), ("kind", c_uint32), ("queue_depth", c_uint32), ("storage", c_void_p),
                ("out_dir", c_char_p),
                ("after_save", AFTER_SAVE_FN), ("after_save_payload", c_void_p)]  # version 2


_P = ctypes.POINTER


class FileInfo(ctypes.Structure):
    """ckpt_file_info: what is at a path of a storage."""

    _fields_ = [("size", c_uint64), ("modified_ns", c_int64), ("is_dir", c_uint32), ("reserved", c_uint32)]


STORAGE_CALLBACKS = [
    ("make_dirs", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)),
    ("create", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, _P(c_void_p))),
    ("open_append", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, _P(c_void_p))),
    ("write", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_size_t)),
    ("sync", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)),
    ("close", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)),
    ("rename", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p)),
    ("sync_dir", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)),
    ("remove", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)),
    ("list", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, LIST_ENTRY_FN, c_void_p)),
    ("open_read", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, _P(c_void_p), _P(c_uint64))),
    ("read_at", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint64, c_void_p, c_size_t, _P(c_size_t))),
    ("close_read", ctypes.CFUNCTYPE(None, c_void_p, c_void_p)),
    ("destroy", ctypes.CFUNCTYPE(None, c_void_p)),
    ("free_space", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, _P(c_uint64))),  # version 2
    ("list_dirs", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, LIST_ENTRY_FN, c_void_p)),  # version 3
    ("remove_dir", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)),
    ("rename_dir", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p)),
    ("list_incomplete", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, LIST_ENTRY_FN, c_void_p)),  # version 4
    ("abort_incomplete", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)),
    ("list_entries", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, LIST_ENTRY_FN, c_void_p)),
    ("stat", ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, _P(FileInfo))),  # version 5
    ("clone_range", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_uint64, c_uint64, c_void_p,
                                     _P(c_uint64))),  # version 6
]


class StorageOps(ctypes.Structure):
    """ckpt_storage_ops: a storage's callback table."""

    _fields_ = [("version", c_uint32), ("payload", c_void_p)] + STORAGE_CALLBACKS


COMM_CALLBACKS = [
    ("rank", ctypes.CFUNCTYPE(c_int, c_void_p, _P(c_int32))),
    ("size", ctypes.CFUNCTYPE(c_int, c_void_p, _P(c_int32))),
    ("barrier", ctypes.CFUNCTYPE(c_int, c_void_p)),
    ("all_reduce_i64", ctypes.CFUNCTYPE(c_int, c_void_p, _P(c_int64), c_uint32)),
    ("broadcast", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int32)),
    ("all_gather", ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_void_p)),
    ("destroy", ctypes.CFUNCTYPE(None, c_void_p)),
]


class CommOps(ctypes.Structure):
    """ckpt_comm_ops: a communicator's callback table."""

    _fields_ = [("version", c_uint32), ("payload", c_void_p)] + COMM_CALLBACKS


VARS_P = c_void_p  # opaque handles travel as plain pointers
_OUT = _P(c_void_p)
_SHAPE = _P(c_int64)

# name: (result type, argument types). Every CKPT_API function of ckpt.h; test_complete.py checks that.
# The functions of checkpoint files under their names before 0.11 (ckpt.h, "Names before 0.11": the same symbols).
# The package calls the new names; with a library older than 0.11 it binds each to the function's earlier name.
EARLIER_NAMES = {
    "ckpt_options_init": "ckpt_npz_options_init",
    "ckpt_save": "ckpt_npz_save",
    "ckpt_read": "ckpt_npz_read",
    "ckpt_read_memory": "ckpt_npz_read_memory",
    "ckpt_restore": "ckpt_npz_restore",
    "ckpt_reader_close": "ckpt_npz_close",
    "ckpt_reader_count": "ckpt_npz_count",
    "ckpt_reader_name": "ckpt_npz_name",
    "ckpt_reader_find": "ckpt_npz_find",
    "ckpt_reader_dtype": "ckpt_npz_dtype",
    "ckpt_reader_itemsize": "ckpt_npz_itemsize",
    "ckpt_reader_ndim": "ckpt_npz_ndim",
    "ckpt_reader_shape": "ckpt_npz_shape",
    "ckpt_reader_nbytes": "ckpt_npz_nbytes",
    "ckpt_reader_read_into": "ckpt_npz_read_into",
    "ckpt_reader_read_range": "ckpt_npz_read_range",
    "ckpt_reader_member_name": "ckpt_npz_member_name",
    "ckpt_reader_compression": "ckpt_npz_compression",
    "ckpt_reader_stored_bytes": "ckpt_npz_stored_bytes",
    "ckpt_reader_crc32": "ckpt_npz_crc32",
    "ckpt_reader_data_offset": "ckpt_npz_data_offset",
    "ckpt_reader_byte_order": "ckpt_npz_byte_order",
    "ckpt_reader_fortran_order": "ckpt_npz_fortran_order",
    "ckpt_reader_file_size": "ckpt_npz_file_size",
    "ckpt_reader_layout": "ckpt_npz_layout",
    "ckpt_reader_format": "ckpt_npz_format",
    "ckpt_reader_metadata": "ckpt_npz_metadata",
    "ckpt_reader_metadata_count": "ckpt_npz_metadata_count",
    "ckpt_reader_metadata_key": "ckpt_npz_metadata_key",
    "ckpt_reader_metadata_value": "ckpt_npz_metadata_value",
    "ckpt_reader_map": "ckpt_npz_map",
    "ckpt_reader_map_vars": "ckpt_npz_map_vars",
    "ckpt_reader_open": "ckpt_npz_open",
}

SIGNATURES = {
    "ckpt_version_number": (c_uint32, []),
    "ckpt_version_string": (c_char_p, []),
    "ckpt_strerror": (c_char_p, [c_int]),
    "ckpt_error_message": (c_char_p, []),
    "ckpt_error_set_message": (None, [c_char_p]),
    "ckpt_dtype_size": (c_size_t, [c_uint32]),
    "ckpt_dtype_name": (c_char_p, [c_uint32]),
    "ckpt_vars_new": (c_int, [_OUT]),
    "ckpt_vars_free": (None, [c_void_p]),
    "ckpt_vars_add": (c_int, [c_void_p, c_char_p, c_uint32, c_uint32, c_void_p, c_void_p, c_uint32]),
    "ckpt_vars_add_source": (c_int, [c_void_p, c_char_p, c_uint32, c_size_t, c_uint32, c_void_p, SOURCE_FN, c_void_p]),
    "ckpt_vars_is_source": (c_int, [c_void_p, c_size_t]),
    "ckpt_vars_add_strings": (c_int, [c_void_p, c_char_p, c_uint32, c_size_t, c_uint32, c_void_p, c_void_p,
                                      c_uint32]),
    "ckpt_vars_count": (c_size_t, [c_void_p]),
    "ckpt_vars_name": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_vars_find": (c_int, [c_void_p, c_char_p, _P(c_size_t)]),
    "ckpt_vars_dtype": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_vars_itemsize": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_vars_ndim": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_vars_shape": (_SHAPE, [c_void_p, c_size_t]),
    "ckpt_vars_nbytes": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_vars_data": (c_void_p, [c_void_p, c_size_t]),
    "ckpt_vars_restored": (c_int, [c_void_p, c_size_t]),
    "ckpt_vars_set_rows": (c_int, [c_void_p, c_size_t, c_int64, c_int64]),
    "ckpt_vars_rows": (c_int, [c_void_p, c_size_t, _P(c_int64), _P(c_int64)]),
    "ckpt_vars_set_metadata": (c_int, [c_void_p, c_char_p, c_char_p]),
    "ckpt_vars_metadata": (c_char_p, [c_void_p, c_char_p]),
    "ckpt_vars_metadata_count": (c_size_t, [c_void_p]),
    "ckpt_vars_metadata_key": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_vars_metadata_value": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_options_init": (c_int, [_P(NpzOptions), c_uint32]),
    "ckpt_save": (c_int, [c_char_p, c_void_p, _P(NpzOptions)]),
    "ckpt_read": (c_int, [_OUT, c_char_p, _P(NpzOptions)]),
    "ckpt_read_memory": (c_int, [_OUT, c_void_p, c_size_t, _P(NpzOptions)]),
    "ckpt_restore": (c_int, [c_char_p, c_void_p, _P(NpzOptions)]),
    "ckpt_reader_open": (c_int, [_OUT, c_char_p, _P(NpzOptions)]),
    "ckpt_reader_close": (None, [c_void_p]),
    "ckpt_reader_count": (c_size_t, [c_void_p]),
    "ckpt_reader_name": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_reader_find": (c_int, [c_void_p, c_char_p, _P(c_size_t)]),
    "ckpt_reader_dtype": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_reader_itemsize": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_reader_ndim": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_reader_shape": (_SHAPE, [c_void_p, c_size_t]),
    "ckpt_reader_nbytes": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_reader_read_into": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t]),
    "ckpt_reader_read_range": (c_int, [c_void_p, c_size_t, c_uint64, c_void_p, c_size_t]),
    "ckpt_reader_member_name": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_reader_compression": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_reader_stored_bytes": (c_uint64, [c_void_p, c_size_t]),
    "ckpt_reader_crc32": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_reader_data_offset": (c_uint64, [c_void_p, c_size_t]),
    "ckpt_reader_byte_order": (c_int, [c_void_p, c_size_t]),
    "ckpt_reader_file_size": (c_uint64, [c_void_p]),
    "ckpt_reader_fortran_order": (c_int, [c_void_p, c_size_t]),
    "ckpt_reader_map": (c_int, [c_void_p, c_size_t, ctypes.POINTER(c_void_p)]),
    "ckpt_reader_map_vars": (c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
    "ckpt_reader_layout": (c_uint32, [c_void_p]),
    "ckpt_reader_format": (c_uint32, [c_void_p]),
    "ckpt_reader_metadata": (c_char_p, [c_void_p, c_char_p]),
    "ckpt_reader_metadata_count": (c_size_t, [c_void_p]),
    "ckpt_reader_metadata_key": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_reader_metadata_value": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_storage_new": (c_int, [_OUT, _P(StorageOps)]),
    "ckpt_storage_new_memory": (c_int, [_OUT]),
    "ckpt_storage_free": (None, [c_void_p]),
    "ckpt_storage_stat": (c_int, [c_void_p, c_char_p, _P(FileInfo)]),
    "ckpt_storage_shared_bytes": (c_int, [c_void_p, c_char_p, _P(c_uint64)]),
    "ckpt_storage_list": (c_int, [c_void_p, c_char_p, LIST_ENTRY_FN, c_void_p]),
    "ckpt_storage_make_dirs": (c_int, [c_void_p, c_char_p]),
    "ckpt_storage_remove": (c_int, [c_void_p, c_char_p, c_uint32]),
    "ckpt_file_open": (c_int, [_OUT, c_void_p, c_char_p, _P(c_uint64)]),
    "ckpt_file_read": (c_int, [c_void_p, c_uint64, c_void_p, c_size_t, _P(c_size_t)]),
    "ckpt_file_close": (None, [c_void_p]),
    "ckpt_step_open": (c_int, [_OUT, c_char_p, _P(NpzOptions)]),
    "ckpt_step_close": (None, [c_void_p]),
    "ckpt_step_index": (c_int64, [c_void_p]),
    "ckpt_step_world_size": (c_int32, [c_void_p]),
    "ckpt_step_shard": (c_char_p, [c_void_p, c_int32]),
    "ckpt_step_count": (c_size_t, [c_void_p]),
    "ckpt_step_name": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_step_dtype": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_step_itemsize": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_step_ndim": (c_uint32, [c_void_p, c_size_t]),
    "ckpt_step_shape": (_SHAPE, [c_void_p, c_size_t]),
    "ckpt_step_nbytes": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_step_pieces": (c_size_t, [c_void_p, c_size_t]),
    "ckpt_step_read_rows": (c_int, [c_void_p, c_size_t, c_int64, c_int64, c_void_p, c_size_t]),
    "ckpt_step_metadata": (c_char_p, [c_void_p, c_char_p]),
    "ckpt_step_metadata_count": (c_size_t, [c_void_p]),
    "ckpt_step_metadata_key": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_step_metadata_value": (c_char_p, [c_void_p, c_size_t]),
    "ckpt_comm_new": (c_int, [_OUT, _P(CommOps)]),
    "ckpt_comm_free": (None, [c_void_p]),
    "ckpt_comm_rank": (c_int32, [c_void_p]),
    "ckpt_comm_size": (c_int32, [c_void_p]),
    "ckpt_writer_options_init": (c_int, [_P(WriterOptions), c_uint32]),
    "ckpt_writer_new": (c_int, [_OUT, _P(WriterOptions)]),
    "ckpt_writer_save": (c_int, [c_void_p, c_char_p, c_char_p, SAVE_FN, c_void_p, c_uint32]),
    "ckpt_writer_save_vars": (c_int, [c_void_p, c_char_p, c_char_p, c_void_p, _P(NpzOptions), c_uint32]),
    "ckpt_sink_write": (c_int, [c_void_p, c_void_p, c_size_t]),
    "ckpt_writer_wait": (c_int, [c_void_p]),
    "ckpt_writer_finalize": (c_int, [c_void_p]),
    "ckpt_writer_free": (None, [c_void_p]),
    "ckpt_manager_options_init": (c_int, [_P(ManagerOptions), c_uint32]),
    "ckpt_manager_open": (c_int, [_OUT, c_char_p, _P(ManagerOptions)]),
    "ckpt_manager_save": (c_int, [c_void_p, c_void_p, c_int64]),
    "ckpt_manager_save_metrics": (c_int, [c_void_p, c_void_p, c_int64, _P(c_char_p), _P(ctypes.c_double), c_size_t]),
    "ckpt_manager_metric": (c_int, [c_void_p, c_int64, c_char_p, _P(ctypes.c_double)]),
    "ckpt_manager_best": (c_int, [c_void_p, _P(c_int64)]),
    "ckpt_manager_should_save": (c_int, [c_void_p, c_int64]),
    "ckpt_manager_request_save": (None, [c_void_p]),
    "ckpt_manager_restore": (c_int, [c_void_p, c_void_p, c_int64, _P(c_int64)]),
    "ckpt_manager_read": (c_int, [c_void_p, c_int64, _OUT, _P(c_int64)]),
    "ckpt_manager_latest": (c_int, [c_void_p, _P(c_int64)]),
    "ckpt_manager_list": (c_int, [c_void_p, _P(c_int64), c_size_t, _P(c_size_t)]),
    "ckpt_manager_path": (c_int, [c_void_p, c_int64, c_char_p, c_size_t]),
    "ckpt_manager_clean": (c_int, [c_void_p, c_uint32, CLEAN_FN, c_void_p, _P(c_size_t)]),
    "ckpt_manager_wait": (c_int, [c_void_p]),
    "ckpt_manager_close": (c_int, [c_void_p]),
    "ckpt_checkpoint_idx": (c_int64, [c_char_p]),
}


def _built_for():
    """The library `cmake --install` (or the build tree) put beside this package, when it did: the path that
    ckpt/_build_config.py, written by CMake, names. None for a package installed by pip or used from the source
    tree, which rely on the loader's paths."""
    try:
        from . import _build_config
    except ImportError:
        return None
    path = getattr(_build_config, "LIBRARY", None)
    return path if path and os.path.exists(path) else None


def _standard_places():
    """Where `cmake --install` puts libckpt.so.0 under the usual prefixes (/usr/local, /usr, and the prefix of the
    interpreter a virtual environment was made from), for a package pip installed — which has no _build_config —
    when the loader's paths do not have it (ldconfig not run, or a prefix the loader does not search)."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    places = []
    for prefix in ("/usr/local", sys.base_prefix, "/usr"):
        for libdir in ("lib", "lib64", os.path.join("lib", multiarch) if multiarch else None):
            if libdir:
                path = os.path.join(prefix, libdir, "libckpt.so.0")
                if path not in places:
                    places.append(path)
    return places


def _load():
    # CKPT_LIBRARY first, then the library this package was installed with, then the loader's paths, then the
    # standard places.
    explicit = os.environ.get("CKPT_LIBRARY")
    built = None if explicit else _built_for()
    name = explicit or built or "libckpt.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        fallback = None if explicit or built else next((p for p in _standard_places() if os.path.exists(p)), None)
        if fallback is not None:
            name = fallback
            lib = ctypes.CDLL(fallback)
        else:
            where = ("CKPT_LIBRARY=%s" % explicit) if explicit else \
                ("%s (the library ckpt was installed with)" % built) if built else \
                ("libckpt.so.0 on the loader's path or in %s (install ckpt, or set LD_LIBRARY_PATH or CKPT_LIBRARY)"
                 % ", ".join(sorted({os.path.dirname(p) for p in _standard_places()})))
            raise ImportError("ckpt: cannot load the ckpt library from %s: %s" % (where, e)) from None
    version = lib.ckpt_version_number()
    found = (version // 10000, version // 100 % 100, version % 100)
    if found < REQUIRED_VERSION:
        raise ImportError("ckpt: the library %s is version %d.%d.%d; this package needs %d.%d.%d or newer"
                          % ((getattr(lib, "_name", name),) + found + REQUIRED_VERSION))
    for fname, (restype, argtypes) in SIGNATURES.items():
        try:
            f = getattr(lib, fname)
        except AttributeError:
            if fname in EARLIER_NAMES and found < (0, 11, 0) and hasattr(lib, EARLIER_NAMES[fname]):
                f = getattr(lib, EARLIER_NAMES[fname])  # the same function, as a library before 0.11 names it
                setattr(lib, fname, f)
                f.restype = restype
                f.argtypes = argtypes
                continue
            if fname in SINCE and found < SINCE[fname]:
                continue  # newer than the library: the method that calls it says so
            raise ImportError("ckpt: the library %s has no %s" % (name, fname)) from None
        f.restype = restype
        f.argtypes = argtypes
    return lib


lib = _load()
errors.use_strerror(lambda code: lib.ckpt_strerror(code).decode())
_number = lib.ckpt_version_number()
VERSION = (_number // 10000, _number // 100 % 100, _number % 100)  # of the library loaded


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p), ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def library_path() -> str:
    """The file of the libckpt this package loaded (as the loader found it, also when it came from the loader's
    paths): where ckpt's companion libraries (libckpt_s3) are looked for first."""
    info = _DlInfo()
    try:
        found = ctypes.CDLL(None).dladdr(ctypes.cast(lib.ckpt_version_number, c_void_p), ctypes.byref(info))
    except (OSError, AttributeError):
        found = 0
    if found and info.dli_fname:
        return os.fsdecode(info.dli_fname)
    return getattr(lib, "_name", "libckpt.so.0")


class Handle:
    """Owns one ckpt handle: released by close(), by leaving a with block, or when garbage-collected. Subclasses
    name the C function that releases it."""

    __slots__ = ()
    _release = None  # e.g. "ckpt_reader_close"

    def close(self) -> None:
        """Releases the handle (again: nothing)."""
        h = getattr(self, "handle", None)
        self.handle = None
        if h:
            getattr(lib, self._release)(h)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def options_version(current: int) -> int:
    """The version of ckpt_options or ckpt_manager_options to pass, `current` being this package's: the newest
    the library loaded knows, which refuses any later one (the later fields then stay unset): version 4 before
    INCREMENTAL_SINCE; ckpt_options version 5 before FORMAT_SINCE."""
    if VERSION < INCREMENTAL_SINCE:
        return 4
    if VERSION < FORMAT_SINCE and current == NPZ_OPTIONS_VERSION:
        return 5
    return current


def require(since: Tuple[int, int, int], what: str) -> None:
    """Raises UnsupportedError saying that `what` needs libckpt `since` or newer, when the library loaded is older."""
    if VERSION < since:
        raise errors.UnsupportedError(errors.EUNSUPPORTED, "%s needs libckpt %d.%d.%d or newer (this one is %d.%d.%d)"
                                      % ((what,) + since + VERSION))


def message() -> str:
    """This thread's ckpt_error_message()."""
    return lib.ckpt_error_message().decode("utf-8", "replace")


def check(code: int, filename: Union[str, bytes, "os.PathLike[str]", None] = None) -> None:
    """Raises the CkptError subclass for a negative code, with this thread's ckpt_error_message(); `filename` is the
    file the call was given (a NotFoundError carries it)."""
    if code != 0:
        raise errors.error_for(code, message(), filename)


def set_message(exc: BaseException) -> None:
    """Gives a Python exception met in a callback to the ckpt call that made the callback (ckpt_error_set_message):
    that call's error then says "<what> failed: <ExceptionType>: <text>"."""
    lib.ckpt_error_set_message(("%s: %s" % (type(exc).__name__, exc)).encode("utf-8", "replace"))


def out() -> ctypes.c_void_p:
    """A void* to pass as an out-parameter."""
    return ctypes.c_void_p()


def text(p: Optional[bytes]) -> Optional[str]:
    """A C string from the library as str (None stays None)."""
    return None if p is None else p.decode("utf-8")
