// SPDX-License-Identifier: Apache-2.0
//! The binding's tests: one binary (linking is the slow part of a build), one module per part of the API.
mod comm;
mod common;
mod completeness;
mod errors;
mod files;
mod incremental;
mod layout;
mod manager;
mod map;
mod npz;
mod partial;
#[cfg(feature = "s3")]
mod s3;
mod safetensors;
mod storage;
mod threads;
mod tree;
mod vars;
mod writer;
