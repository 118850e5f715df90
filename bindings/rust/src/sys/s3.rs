// SPDX-License-Identifier: Apache-2.0
//! The C API of `include/ckpt/ckpt_s3.h` (libckpt_s3), declared by hand as [`sys`](crate::sys) declares
//! ckpt.h's: every constant, the options struct with its exact fields, every `CKPT_S3_API` function. Built with
//! the crate's `s3` feature only, which links libckpt_s3; `tests/ckpt/completeness.rs` compares this file with
//! the installed ckpt_s3.h.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int};

use super::ckpt_storage;

pub const CKPT_S3_ADDRESSING_AUTO: u32 = 0;
pub const CKPT_S3_ADDRESSING_PATH: u32 = 1;
pub const CKPT_S3_ADDRESSING_VIRTUAL: u32 = 2;
pub const CKPT_S3_OPTIONS_VERSION: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ckpt_s3_options {
    pub version: u32,
    pub bucket: *const c_char,
    pub prefix: *const c_char,
    pub endpoint_url: *const c_char,
    pub region: *const c_char,
    pub access_key_id: *const c_char,
    pub secret_access_key: *const c_char,
    pub session_token: *const c_char,
    pub profile: *const c_char,
    pub part_size: u64,
    pub parallelism: u32,
    pub max_attempts: u32,
    pub connect_timeout_ms: u32,
    pub stall_timeout_ms: u32,
    pub addressing: u32,
    pub retry_window_ms: u32,
}

// Linked through build.rs (the `s3` feature: pkg-config ckpt-s3 or CKPT_LIB_DIR).
extern "C" {
    pub fn ckpt_s3_options_init(opts: *mut ckpt_s3_options, version: u32) -> c_int;
    pub fn ckpt_storage_s3_new(out: *mut *mut ckpt_storage, opts: *const ckpt_s3_options) -> c_int;
    pub fn ckpt_storage_s3_new_url(
        out: *mut *mut ckpt_storage,
        url: *const c_char,
        opts: *const ckpt_s3_options,
        path: *mut *const c_char,
    ) -> c_int;
}
