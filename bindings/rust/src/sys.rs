// SPDX-License-Identifier: Apache-2.0
//! The C API of `include/ckpt/ckpt.h`, declared by hand: every constant, struct and `CKPT_API` function, in the
//! header's order and with its exact field order and types. The header is the reference for what each function
//! does, who owns what, and the codes it returns; the safe API in the rest of this crate follows it.
//!
//! `tests/ckpt/completeness.rs` compares this file with the installed header, so a function, constant or struct
//! field added to the C API fails the tests until it is declared here and reached by the safe API.
//!
//! `sys::s3` (the `s3` feature) is the same for `include/ckpt/ckpt_s3.h`, libckpt_s3's header.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

#[cfg(feature = "s3")]
pub mod s3;

// ------------------------------------------------------------------------------------------------ status codes
pub const CKPT_OK: c_int = 0;
pub const CKPT_ERROR: c_int = -1;
pub const CKPT_EINVAL: c_int = -2;
pub const CKPT_ENOTFOUND: c_int = -3;
pub const CKPT_EFORMAT: c_int = -4;
pub const CKPT_EIO: c_int = -5;
pub const CKPT_ENOMEM: c_int = -6;
pub const CKPT_EMISMATCH: c_int = -7;
pub const CKPT_EUNSUPPORTED: c_int = -8;
pub const CKPT_EBUSY: c_int = -9;
pub const CKPT_EEXIST: c_int = -10;
pub const CKPT_EBUFS: c_int = -11;

// ------------------------------------------------------------------------------------------------------ dtypes
pub const CKPT_BOOL: u32 = 1;
pub const CKPT_INT8: u32 = 2;
pub const CKPT_INT16: u32 = 3;
pub const CKPT_INT32: u32 = 4;
pub const CKPT_INT64: u32 = 5;
pub const CKPT_UINT8: u32 = 6;
pub const CKPT_UINT16: u32 = 7;
pub const CKPT_UINT32: u32 = 8;
pub const CKPT_UINT64: u32 = 9;
pub const CKPT_FLOAT16: u32 = 10;
pub const CKPT_FLOAT32: u32 = 11;
pub const CKPT_FLOAT64: u32 = 12;
pub const CKPT_COMPLEX64: u32 = 13;
pub const CKPT_COMPLEX128: u32 = 14;
pub const CKPT_UNICODE: u32 = 15;
pub const CKPT_BYTES: u32 = 16;
pub const CKPT_BFLOAT16: u32 = 17;
pub const CKPT_FLOAT8_E4M3FN: u32 = 18;
pub const CKPT_FLOAT8_E5M2: u32 = 19;
pub const CKPT_FLOAT8_E4M3FNUZ: u32 = 20;
pub const CKPT_FLOAT8_E5M2FNUZ: u32 = 21;
pub const CKPT_FLOAT8_E8M0FNU: u32 = 22;
pub const CKPT_VOID: u32 = 23;

// --------------------------------------------------------------------------------------- variable collections
pub const CKPT_VARS_COPY: u32 = 0;
pub const CKPT_VARS_BORROW: u32 = 1;
pub const CKPT_COPY: u32 = CKPT_VARS_COPY;
pub const CKPT_BORROW: u32 = CKPT_VARS_BORROW;

// ---------------------------------------------------------------------------------------- checkpoint files
pub const CKPT_LAYOUT_AUTO: u32 = 0;
pub const CKPT_LAYOUT_PLAIN: u32 = 1;
pub const CKPT_LAYOUT_OBJAX: u32 = 2;
pub const CKPT_STORE: u32 = 0;
pub const CKPT_DEFLATE: u32 = 1;
pub const CKPT_PARTIAL: u32 = 1;
pub const CKPT_OPTIONS_VERSION: u32 = 6;
pub const CKPT_MAP_UNVERIFIED: u32 = 2;
pub const CKPT_MAP_WRITABLE: u32 = 4;
pub const CKPT_KEEP_MANAGER_KEYS: u32 = 8;
// The earlier names of ckpt.h's "Names before 0.11".
pub const CKPT_NPZ_PARTIAL: u32 = CKPT_PARTIAL;
pub const CKPT_NPZ_OPTIONS_VERSION: u32 = CKPT_OPTIONS_VERSION;
pub const CKPT_NPZ_MAP_UNVERIFIED: u32 = CKPT_MAP_UNVERIFIED;
pub const CKPT_NPZ_MAP_WRITABLE: u32 = CKPT_MAP_WRITABLE;
pub const CKPT_NPZ_KEEP_MANAGER_KEYS: u32 = CKPT_KEEP_MANAGER_KEYS;
pub const CKPT_NPZ_CHUNK_HASHES: u32 = 16;
pub const CKPT_FORMAT_AUTO: u32 = 0;
pub const CKPT_FORMAT_NPZ: u32 = 1;
pub const CKPT_FORMAT_SAFETENSORS: u32 = 2;

// ------------------------------------------------------------------------------------------------ storage
pub const CKPT_STORAGE_OPS_VERSION: u32 = 6;
pub const CKPT_TIME_UNKNOWN: i64 = i64::MIN;
pub const CKPT_STORAGE_REMOVE_RECURSIVE: u32 = 1;

// ------------------------------------------------------------------------------------------ communicators
pub const CKPT_REDUCE_MIN: u32 = 0;
pub const CKPT_REDUCE_MAX: u32 = 1;
pub const CKPT_REDUCE_SUM: u32 = 2;
pub const CKPT_COMM_OPS_VERSION: u32 = 1;

// ------------------------------------------------------------------------------------------------ writers
pub const CKPT_WRITER_SIMPLE: u32 = 0;
pub const CKPT_WRITER_THREAD: u32 = 1;
pub const CKPT_WRITER_QUEUE: u32 = 2;
pub const CKPT_WRITER_APPEND: u32 = 1;
pub const CKPT_WRITER_NO_COPY: u32 = 2;
pub const CKPT_APPEND: u32 = CKPT_WRITER_APPEND;
pub const CKPT_NO_COPY: u32 = CKPT_WRITER_NO_COPY;
pub const CKPT_WRITER_OPTIONS_VERSION: u32 = 2;

// ------------------------------------------------------------------------------------------ checkpoint manager
pub const CKPT_LOG_INFO: c_int = 1;
pub const CKPT_LOG_WARNING: c_int = 2;
pub const CKPT_LATEST: i64 = -1;
pub const CKPT_MANAGER_ASYNC: u32 = 1;
pub const CKPT_MANAGER_NO_FALLBACK: u32 = 2;
pub const CKPT_MANAGER_NO_MAKEDIR: u32 = 4;
pub const CKPT_MANAGER_VERBOSE: u32 = 8;
pub const CKPT_MANAGER_READ_ONLY: u32 = 16;
pub const CKPT_MANAGER_FULL_SAVES: u32 = 32;
pub const CKPT_BEST_MIN: u32 = 0;
pub const CKPT_BEST_MAX: u32 = 1;
pub const CKPT_MANAGER_OPTIONS_VERSION: u32 = 5;

// ------------------------------------------------------------------------------------------------ opaque handles
// Zero-sized and unconstructible: only pointers to them exist, and they are neither Send nor Sync by themselves.
#[repr(C)]
pub struct ckpt_vars {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_reader {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_storage {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_file {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_step {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_comm {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_writer {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_sink {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}
#[repr(C)]
pub struct ckpt_manager {
    _opaque: [u8; 0],
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

// --------------------------------------------------------------------------------------------------- callbacks
pub type ckpt_rename_fn = Option<
    unsafe extern "C" fn(name_on_disk: *const c_char, buf: *mut c_char, buf_size: usize, payload: *mut c_void) -> c_int,
>;
pub type ckpt_progress_fn = Option<unsafe extern "C" fn(done_bytes: u64, total_bytes: u64, payload: *mut c_void)>;
pub type ckpt_list_entry_fn = Option<unsafe extern "C" fn(name: *const c_char, ctx: *mut c_void) -> c_int>;
pub type ckpt_source_fn =
    Option<unsafe extern "C" fn(payload: *mut c_void, offset: u64, dst: *mut c_void, size: usize) -> c_int>;
pub type ckpt_save_fn = Option<unsafe extern "C" fn(sink: *mut ckpt_sink, payload: *mut c_void) -> c_int>;
pub type ckpt_log_fn = Option<unsafe extern "C" fn(level: c_int, message: *const c_char, payload: *mut c_void)>;
pub type ckpt_after_save_fn = Option<unsafe extern "C" fn(path: *const c_char, payload: *mut c_void) -> c_int>;
pub type ckpt_clean_fn = Option<unsafe extern "C" fn(path: *const c_char, is_dir: c_int, payload: *mut c_void)>;
pub const CKPT_CLEAN_DRY_RUN: u32 = 1;
pub const CKPT_CLEAN_FILE: c_int = 0;
pub const CKPT_CLEAN_DIR: c_int = 1;
pub const CKPT_CLEAN_UPLOAD: c_int = 2;

// ------------------------------------------------------------------------------------------------ option structs
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_options {
    pub version: u32,
    pub layout: u32,
    pub compression: u32,
    pub level: i32,
    pub rename: ckpt_rename_fn,
    pub rename_payload: *mut c_void,
    pub max_header_bytes: u64,
    pub progress: ckpt_progress_fn,
    pub progress_payload: *mut c_void,
    // version 2
    pub storage: *mut ckpt_storage,
    // version 3
    pub max_members: u64,
    pub max_total_bytes: u64,
    // version 4
    pub flags: u32,
    // version 5
    pub base: *const c_char,
    // version 6
    pub format: u32,
    pub max_shard_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_comm_ops {
    pub version: u32,
    pub payload: *mut c_void,
    pub rank: Option<unsafe extern "C" fn(payload: *mut c_void, out: *mut i32) -> c_int>,
    pub size: Option<unsafe extern "C" fn(payload: *mut c_void, out: *mut i32) -> c_int>,
    pub barrier: Option<unsafe extern "C" fn(payload: *mut c_void) -> c_int>,
    pub all_reduce_i64: Option<unsafe extern "C" fn(payload: *mut c_void, value: *mut i64, op: u32) -> c_int>,
    pub broadcast:
        Option<unsafe extern "C" fn(payload: *mut c_void, buf: *mut c_void, size: usize, root: i32) -> c_int>,
    pub all_gather: Option<
        unsafe extern "C" fn(payload: *mut c_void, send: *const c_void, size: usize, recv: *mut c_void) -> c_int,
    >,
    pub destroy: Option<unsafe extern "C" fn(payload: *mut c_void)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_file_info {
    pub size: u64,
    pub modified_ns: i64,
    pub is_dir: u32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_storage_ops {
    pub version: u32,
    pub payload: *mut c_void,
    pub make_dirs: Option<unsafe extern "C" fn(payload: *mut c_void, dir: *const c_char) -> c_int>,
    pub create:
        Option<unsafe extern "C" fn(payload: *mut c_void, path: *const c_char, file: *mut *mut c_void) -> c_int>,
    pub open_append:
        Option<unsafe extern "C" fn(payload: *mut c_void, path: *const c_char, file: *mut *mut c_void) -> c_int>,
    pub write: Option<
        unsafe extern "C" fn(payload: *mut c_void, file: *mut c_void, data: *const c_void, size: usize) -> c_int,
    >,
    pub sync: Option<unsafe extern "C" fn(payload: *mut c_void, file: *mut c_void) -> c_int>,
    pub close: Option<unsafe extern "C" fn(payload: *mut c_void, file: *mut c_void) -> c_int>,
    pub rename: Option<unsafe extern "C" fn(payload: *mut c_void, from: *const c_char, to: *const c_char) -> c_int>,
    pub sync_dir: Option<unsafe extern "C" fn(payload: *mut c_void, dir: *const c_char) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(payload: *mut c_void, path: *const c_char) -> c_int>,
    pub list: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            dir: *const c_char,
            entry: ckpt_list_entry_fn,
            ctx: *mut c_void,
        ) -> c_int,
    >,
    pub open_read: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            path: *const c_char,
            file: *mut *mut c_void,
            size: *mut u64,
        ) -> c_int,
    >,
    pub read_at: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            file: *mut c_void,
            offset: u64,
            dst: *mut c_void,
            size: usize,
            got: *mut usize,
        ) -> c_int,
    >,
    pub close_read: Option<unsafe extern "C" fn(payload: *mut c_void, file: *mut c_void)>,
    pub destroy: Option<unsafe extern "C" fn(payload: *mut c_void)>,
    // version 2
    pub free_space: Option<unsafe extern "C" fn(payload: *mut c_void, dir: *const c_char, bytes: *mut u64) -> c_int>,
    // version 3
    pub list_dirs: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            dir: *const c_char,
            entry: ckpt_list_entry_fn,
            ctx: *mut c_void,
        ) -> c_int,
    >,
    pub remove_dir: Option<unsafe extern "C" fn(payload: *mut c_void, dir: *const c_char) -> c_int>,
    pub rename_dir: Option<unsafe extern "C" fn(payload: *mut c_void, from: *const c_char, to: *const c_char) -> c_int>,
    // version 4
    pub list_incomplete: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            dir: *const c_char,
            entry: ckpt_list_entry_fn,
            ctx: *mut c_void,
        ) -> c_int,
    >,
    pub abort_incomplete: Option<unsafe extern "C" fn(payload: *mut c_void, path: *const c_char) -> c_int>,
    pub list_entries: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            dir: *const c_char,
            entry: ckpt_list_entry_fn,
            ctx: *mut c_void,
        ) -> c_int,
    >,
    // version 5
    pub stat:
        Option<unsafe extern "C" fn(payload: *mut c_void, path: *const c_char, info: *mut ckpt_file_info) -> c_int>,
    // version 6
    pub clone_range: Option<
        unsafe extern "C" fn(
            payload: *mut c_void,
            file: *mut c_void,
            source: *mut c_void,
            offset: u64,
            size: u64,
            data: *const c_void,
            shared: *mut u64,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_writer_options {
    pub version: u32,
    pub kind: u32,
    pub queue_depth: u32,
    pub storage: *mut ckpt_storage,
    pub out_dir: *const c_char,
    // version 2
    pub after_save: ckpt_after_save_fn,
    pub after_save_payload: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_manager_options {
    pub version: u32,
    pub keep: i32,
    pub keep_every: i64,
    pub flags: u32,
    pub queue_depth: u32,
    pub subdir: *const c_char,
    pub npz: *const ckpt_options,
    pub log: ckpt_log_fn,
    pub log_payload: *mut c_void,
    pub storage: *mut ckpt_storage,
    // version 2
    pub keep_best: i32,
    pub best_metric: *const c_char,
    pub best_mode: u32,
    pub keep_seconds: i64,
    pub save_every_steps: i64,
    pub save_every_seconds: i64,
    // version 3
    pub max_staging_bytes: u64,
    // version 4
    pub comm: *mut ckpt_comm,
    // version 5
    pub full_every: i64,
}

// ------------------------------------------------------------------------------------------------ functions
// Linked through build.rs (pkg-config or CKPT_LIB_DIR).
extern "C" {
    // version
    pub fn ckpt_version_number() -> u32;
    pub fn ckpt_version_string() -> *const c_char;

    // status codes
    pub fn ckpt_strerror(code: c_int) -> *const c_char;
    pub fn ckpt_error_message() -> *const c_char;
    pub fn ckpt_error_set_message(message: *const c_char);
    pub fn ckpt_error_set(code: c_int, message: *const c_char) -> c_int;

    // dtypes
    pub fn ckpt_dtype_size(dtype: u32) -> usize;
    pub fn ckpt_dtype_name(dtype: u32) -> *const c_char;

    // variable collections
    pub fn ckpt_vars_new(out: *mut *mut ckpt_vars) -> c_int;
    pub fn ckpt_vars_free(vars: *mut ckpt_vars);
    pub fn ckpt_vars_add(
        vars: *mut ckpt_vars,
        name: *const c_char,
        dtype: u32,
        ndim: u32,
        shape: *const i64,
        data: *const c_void,
        flags: u32,
    ) -> c_int;
    pub fn ckpt_vars_add_strings(
        vars: *mut ckpt_vars,
        name: *const c_char,
        dtype: u32,
        itemsize: usize,
        ndim: u32,
        shape: *const i64,
        data: *const c_void,
        flags: u32,
    ) -> c_int;
    pub fn ckpt_vars_add_source(
        vars: *mut ckpt_vars,
        name: *const c_char,
        dtype: u32,
        itemsize: usize,
        ndim: u32,
        shape: *const i64,
        fn_: ckpt_source_fn,
        payload: *mut c_void,
    ) -> c_int;
    pub fn ckpt_vars_is_source(vars: *const ckpt_vars, i: usize) -> c_int;
    pub fn ckpt_vars_count(vars: *const ckpt_vars) -> usize;
    pub fn ckpt_vars_name(vars: *const ckpt_vars, i: usize) -> *const c_char;
    pub fn ckpt_vars_find(vars: *const ckpt_vars, name: *const c_char, out_index: *mut usize) -> c_int;
    pub fn ckpt_vars_dtype(vars: *const ckpt_vars, i: usize) -> u32;
    pub fn ckpt_vars_itemsize(vars: *const ckpt_vars, i: usize) -> usize;
    pub fn ckpt_vars_ndim(vars: *const ckpt_vars, i: usize) -> u32;
    pub fn ckpt_vars_shape(vars: *const ckpt_vars, i: usize) -> *const i64;
    pub fn ckpt_vars_nbytes(vars: *const ckpt_vars, i: usize) -> usize;
    pub fn ckpt_vars_data(vars: *const ckpt_vars, i: usize) -> *mut c_void;
    pub fn ckpt_vars_restored(vars: *const ckpt_vars, i: usize) -> c_int;
    pub fn ckpt_vars_set_rows(vars: *mut ckpt_vars, i: usize, row_begin: i64, global_rows: i64) -> c_int;
    pub fn ckpt_vars_rows(vars: *const ckpt_vars, i: usize, row_begin: *mut i64, global_rows: *mut i64) -> c_int;
    pub fn ckpt_vars_set_metadata(vars: *mut ckpt_vars, key: *const c_char, value: *const c_char) -> c_int;
    pub fn ckpt_vars_metadata(vars: *const ckpt_vars, key: *const c_char) -> *const c_char;
    pub fn ckpt_vars_metadata_count(vars: *const ckpt_vars) -> usize;
    pub fn ckpt_vars_metadata_key(vars: *const ckpt_vars, i: usize) -> *const c_char;
    pub fn ckpt_vars_metadata_value(vars: *const ckpt_vars, i: usize) -> *const c_char;

    // npz files
    pub fn ckpt_options_init(opts: *mut ckpt_options, version: u32) -> c_int;
    pub fn ckpt_save(path: *const c_char, vars: *const ckpt_vars, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_read(out: *mut *mut ckpt_vars, path: *const c_char, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_read_memory(
        out: *mut *mut ckpt_vars,
        bytes: *const c_void,
        size: usize,
        opts: *const ckpt_options,
    ) -> c_int;
    pub fn ckpt_restore(path: *const c_char, vars: *mut ckpt_vars, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_reader_open(out: *mut *mut ckpt_reader, path: *const c_char, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_reader_close(reader: *mut ckpt_reader);
    pub fn ckpt_reader_count(reader: *const ckpt_reader) -> usize;
    pub fn ckpt_reader_name(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_reader_find(reader: *const ckpt_reader, name: *const c_char, out_index: *mut usize) -> c_int;
    pub fn ckpt_reader_dtype(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_reader_itemsize(reader: *const ckpt_reader, i: usize) -> usize;
    pub fn ckpt_reader_ndim(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_reader_shape(reader: *const ckpt_reader, i: usize) -> *const i64;
    pub fn ckpt_reader_nbytes(reader: *const ckpt_reader, i: usize) -> usize;
    pub fn ckpt_reader_read_into(reader: *mut ckpt_reader, i: usize, dst: *mut c_void, dst_size: usize) -> c_int;
    pub fn ckpt_reader_read_range(
        reader: *mut ckpt_reader,
        i: usize,
        offset: u64,
        dst: *mut c_void,
        size: usize,
    ) -> c_int;
    pub fn ckpt_reader_member_name(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_reader_compression(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_reader_stored_bytes(reader: *const ckpt_reader, i: usize) -> u64;
    pub fn ckpt_reader_crc32(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_reader_data_offset(reader: *const ckpt_reader, i: usize) -> u64;
    pub fn ckpt_reader_byte_order(reader: *const ckpt_reader, i: usize) -> c_int;
    pub fn ckpt_reader_file_size(reader: *const ckpt_reader) -> u64;
    pub fn ckpt_reader_fortran_order(reader: *const ckpt_reader, i: usize) -> c_int;
    pub fn ckpt_reader_layout(reader: *const ckpt_reader) -> u32;
    pub fn ckpt_reader_format(reader: *const ckpt_reader) -> u32;
    pub fn ckpt_reader_metadata(reader: *const ckpt_reader, key: *const c_char) -> *const c_char;
    pub fn ckpt_reader_metadata_count(reader: *const ckpt_reader) -> usize;
    pub fn ckpt_reader_metadata_key(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_reader_metadata_value(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_reader_map(reader: *mut ckpt_reader, i: usize, out_data: *mut *const c_void) -> c_int;
    pub fn ckpt_reader_map_vars(reader: *mut ckpt_reader, out: *mut *mut ckpt_vars) -> c_int;

    // storage
    pub fn ckpt_storage_new(out: *mut *mut ckpt_storage, ops: *const ckpt_storage_ops) -> c_int;
    pub fn ckpt_storage_new_memory(out: *mut *mut ckpt_storage) -> c_int;
    pub fn ckpt_storage_free(storage: *mut ckpt_storage);
    // The same functions under their names before 0.11 (ckpt.h, "Names before 0.11"): one symbol each with the
    // function above; the safe API calls the new names.
    pub fn ckpt_npz_options_init(opts: *mut ckpt_options, version: u32) -> c_int;
    pub fn ckpt_npz_save(path: *const c_char, vars: *const ckpt_vars, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_npz_read(out: *mut *mut ckpt_vars, path: *const c_char, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_npz_read_memory(
        out: *mut *mut ckpt_vars,
        bytes: *const c_void,
        size: usize,
        opts: *const ckpt_options,
    ) -> c_int;
    pub fn ckpt_npz_restore(path: *const c_char, vars: *mut ckpt_vars, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_npz_close(reader: *mut ckpt_reader);
    pub fn ckpt_npz_count(reader: *const ckpt_reader) -> usize;
    pub fn ckpt_npz_name(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_npz_find(reader: *const ckpt_reader, name: *const c_char, out_index: *mut usize) -> c_int;
    pub fn ckpt_npz_dtype(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_npz_itemsize(reader: *const ckpt_reader, i: usize) -> usize;
    pub fn ckpt_npz_ndim(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_npz_shape(reader: *const ckpt_reader, i: usize) -> *const i64;
    pub fn ckpt_npz_nbytes(reader: *const ckpt_reader, i: usize) -> usize;
    pub fn ckpt_npz_read_into(reader: *mut ckpt_reader, i: usize, dst: *mut c_void, dst_size: usize) -> c_int;
    pub fn ckpt_npz_read_range(reader: *mut ckpt_reader, i: usize, offset: u64, dst: *mut c_void, size: usize)
        -> c_int;
    pub fn ckpt_npz_member_name(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_npz_compression(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_npz_stored_bytes(reader: *const ckpt_reader, i: usize) -> u64;
    pub fn ckpt_npz_crc32(reader: *const ckpt_reader, i: usize) -> u32;
    pub fn ckpt_npz_data_offset(reader: *const ckpt_reader, i: usize) -> u64;
    pub fn ckpt_npz_byte_order(reader: *const ckpt_reader, i: usize) -> c_int;
    pub fn ckpt_npz_fortran_order(reader: *const ckpt_reader, i: usize) -> c_int;
    pub fn ckpt_npz_file_size(reader: *const ckpt_reader) -> u64;
    pub fn ckpt_npz_layout(reader: *const ckpt_reader) -> u32;
    pub fn ckpt_npz_format(reader: *const ckpt_reader) -> u32;
    pub fn ckpt_npz_metadata(reader: *const ckpt_reader, key: *const c_char) -> *const c_char;
    pub fn ckpt_npz_metadata_count(reader: *const ckpt_reader) -> usize;
    pub fn ckpt_npz_metadata_key(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_npz_metadata_value(reader: *const ckpt_reader, i: usize) -> *const c_char;
    pub fn ckpt_npz_map(reader: *mut ckpt_reader, i: usize, out_data: *mut *const c_void) -> c_int;
    pub fn ckpt_npz_map_vars(reader: *mut ckpt_reader, out: *mut *mut ckpt_vars) -> c_int;
    pub fn ckpt_npz_open(out: *mut *mut ckpt_reader, path: *const c_char, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_storage_stat(storage: *mut ckpt_storage, path: *const c_char, info: *mut ckpt_file_info) -> c_int;
    pub fn ckpt_storage_shared_bytes(storage: *mut ckpt_storage, path: *const c_char, shared: *mut u64) -> c_int;
    pub fn ckpt_storage_list(
        storage: *mut ckpt_storage,
        dir: *const c_char,
        entry: ckpt_list_entry_fn,
        ctx: *mut c_void,
    ) -> c_int;
    pub fn ckpt_storage_make_dirs(storage: *mut ckpt_storage, dir: *const c_char) -> c_int;
    pub fn ckpt_storage_remove(storage: *mut ckpt_storage, path: *const c_char, flags: u32) -> c_int;
    pub fn ckpt_file_open(
        out: *mut *mut ckpt_file,
        storage: *mut ckpt_storage,
        path: *const c_char,
        size: *mut u64,
    ) -> c_int;
    pub fn ckpt_file_read(file: *mut ckpt_file, offset: u64, dst: *mut c_void, size: usize, got: *mut usize) -> c_int;
    pub fn ckpt_file_close(file: *mut ckpt_file);

    // sharded steps
    pub fn ckpt_step_open(out: *mut *mut ckpt_step, dir: *const c_char, opts: *const ckpt_options) -> c_int;
    pub fn ckpt_step_close(step: *mut ckpt_step);
    pub fn ckpt_step_index(step: *const ckpt_step) -> i64;
    pub fn ckpt_step_world_size(step: *const ckpt_step) -> i32;
    pub fn ckpt_step_shard(step: *const ckpt_step, rank: i32) -> *const c_char;
    pub fn ckpt_step_count(step: *const ckpt_step) -> usize;
    pub fn ckpt_step_name(step: *const ckpt_step, i: usize) -> *const c_char;
    pub fn ckpt_step_dtype(step: *const ckpt_step, i: usize) -> u32;
    pub fn ckpt_step_itemsize(step: *const ckpt_step, i: usize) -> usize;
    pub fn ckpt_step_ndim(step: *const ckpt_step, i: usize) -> u32;
    pub fn ckpt_step_shape(step: *const ckpt_step, i: usize) -> *const i64;
    pub fn ckpt_step_nbytes(step: *const ckpt_step, i: usize) -> usize;
    pub fn ckpt_step_pieces(step: *const ckpt_step, i: usize) -> usize;
    pub fn ckpt_step_read_rows(
        step: *mut ckpt_step,
        i: usize,
        first: i64,
        count: i64,
        dst: *mut c_void,
        dst_size: usize,
    ) -> c_int;
    pub fn ckpt_step_metadata(step: *const ckpt_step, key: *const c_char) -> *const c_char;
    pub fn ckpt_step_metadata_count(step: *const ckpt_step) -> usize;
    pub fn ckpt_step_metadata_key(step: *const ckpt_step, i: usize) -> *const c_char;
    pub fn ckpt_step_metadata_value(step: *const ckpt_step, i: usize) -> *const c_char;

    // communicators
    pub fn ckpt_comm_new(out: *mut *mut ckpt_comm, ops: *const ckpt_comm_ops) -> c_int;
    pub fn ckpt_comm_free(comm: *mut ckpt_comm);
    pub fn ckpt_comm_rank(comm: *const ckpt_comm) -> i32;
    pub fn ckpt_comm_size(comm: *const ckpt_comm) -> i32;

    // writers
    pub fn ckpt_writer_options_init(opts: *mut ckpt_writer_options, version: u32) -> c_int;
    pub fn ckpt_writer_new(out: *mut *mut ckpt_writer, opts: *const ckpt_writer_options) -> c_int;
    pub fn ckpt_writer_save(
        w: *mut ckpt_writer,
        out_dir: *const c_char,
        filename: *const c_char,
        fn_: ckpt_save_fn,
        payload: *mut c_void,
        flags: u32,
    ) -> c_int;
    pub fn ckpt_writer_save_vars(
        w: *mut ckpt_writer,
        out_dir: *const c_char,
        filename: *const c_char,
        vars: *const ckpt_vars,
        npz: *const ckpt_options,
        flags: u32,
    ) -> c_int;
    pub fn ckpt_sink_write(sink: *mut ckpt_sink, data: *const c_void, size: usize) -> c_int;
    pub fn ckpt_writer_wait(w: *mut ckpt_writer) -> c_int;
    pub fn ckpt_writer_finalize(w: *mut ckpt_writer) -> c_int;
    pub fn ckpt_writer_free(w: *mut ckpt_writer);

    // checkpoint manager
    pub fn ckpt_manager_options_init(opts: *mut ckpt_manager_options, version: u32) -> c_int;
    pub fn ckpt_manager_open(
        out: *mut *mut ckpt_manager,
        logdir: *const c_char,
        opts: *const ckpt_manager_options,
    ) -> c_int;
    pub fn ckpt_manager_save(m: *mut ckpt_manager, vars: *const ckpt_vars, idx: i64) -> c_int;
    pub fn ckpt_manager_save_metrics(
        m: *mut ckpt_manager,
        vars: *const ckpt_vars,
        idx: i64,
        names: *const *const c_char,
        values: *const f64,
        n: usize,
    ) -> c_int;
    pub fn ckpt_manager_metric(m: *mut ckpt_manager, idx: i64, name: *const c_char, out: *mut f64) -> c_int;
    pub fn ckpt_manager_best(m: *mut ckpt_manager, out_idx: *mut i64) -> c_int;
    pub fn ckpt_manager_should_save(m: *mut ckpt_manager, step: i64) -> c_int;
    pub fn ckpt_manager_request_save(m: *mut ckpt_manager);
    pub fn ckpt_manager_restore(m: *mut ckpt_manager, vars: *mut ckpt_vars, idx: i64, restored_idx: *mut i64) -> c_int;
    pub fn ckpt_manager_read(m: *mut ckpt_manager, idx: i64, out: *mut *mut ckpt_vars, restored_idx: *mut i64)
        -> c_int;
    pub fn ckpt_manager_latest(m: *mut ckpt_manager, out_idx: *mut i64) -> c_int;
    pub fn ckpt_manager_list(m: *mut ckpt_manager, idx: *mut i64, cap: usize, count: *mut usize) -> c_int;
    pub fn ckpt_manager_path(m: *mut ckpt_manager, idx: i64, buf: *mut c_char, cap: usize) -> c_int;
    pub fn ckpt_manager_clean(
        m: *mut ckpt_manager,
        flags: u32,
        fn_: ckpt_clean_fn,
        payload: *mut c_void,
        count: *mut usize,
    ) -> c_int;
    pub fn ckpt_manager_wait(m: *mut ckpt_manager) -> c_int;
    pub fn ckpt_manager_close(m: *mut ckpt_manager) -> c_int;
    pub fn ckpt_checkpoint_idx(filename: *const c_char) -> i64;
}
