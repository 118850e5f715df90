// SPDX-License-Identifier: Apache-2.0
//! One sharded checkpoint step (a directory of shards and `manifest.json`, docs/distributed.md), read by one
//! process (`ckpt_step`).
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::dtype::Dtype;
use crate::error::{check, Code, Error, Result};
use crate::items::known_dtype;
use crate::options::Options;
use crate::sys;
use crate::util::{borrowed_str, c_path, c_string, slice_at};

/// A sharded step opened for reading: the manifest at once, the shards as variables are read.
pub struct Step {
    raw: NonNull<sys::ckpt_step>,
    _options: Options,
}

// SAFETY: a handle used by one thread at a time (not Sync).
unsafe impl Send for Step {}

impl Step {
    /// Opens the step directory `dir` with the default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Step> {
        Step::open_with(dir, &Options::new())
    }

    /// Opens the step directory `dir` (storage and reading limits from `options`).
    pub fn open_with(dir: impl AsRef<Path>, options: &Options) -> Result<Step> {
        let dir = c_path(dir.as_ref())?;
        let raw = options.to_raw(true)?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the call; the step keeps its own reference to the storage.
        check(unsafe { sys::ckpt_step_open(&mut out, dir.as_ptr(), raw.as_ptr()) })?;
        let raw = NonNull::new(out).expect("the library returned CKPT_OK with a NULL step");
        Ok(Step { raw, _options: options.clone() })
    }

    fn as_ptr(&self) -> *const sys::ckpt_step {
        self.raw.as_ptr()
    }

    /// The step's index.
    pub fn index(&self) -> i64 {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_step_index(self.as_ptr()) }
    }

    /// The number of ranks that saved it.
    pub fn world_size(&self) -> i32 {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_step_world_size(self.as_ptr()) }
    }

    /// The file name of `rank`'s shard; `None` out of range.
    pub fn shard(&self, rank: i32) -> Option<&str> {
        // SAFETY: borrowed until the step is closed.
        unsafe { borrowed_str(sys::ckpt_step_shard(self.as_ptr(), rank)) }
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_step_count(self.as_ptr()) }
    }

    /// Whether the step holds no variables.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name of variable `i`; `None` past the end.
    pub fn name(&self, i: usize) -> Option<&str> {
        // SAFETY: borrowed until the step is closed.
        unsafe { borrowed_str(sys::ckpt_step_name(self.as_ptr(), i)) }
    }

    /// The variable names, in manifest order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(move |i| self.name(i))
    }

    fn index_of(&self, name: &str) -> Result<usize> {
        self.names()
            .position(|n| n == name)
            .ok_or_else(|| Error::new(Code::NotFound, format!("no variable '{name}' in the step")))
    }

    /// The dtype of `name`.
    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        known_dtype(name, unsafe { sys::ckpt_step_dtype(self.as_ptr(), i) })
    }

    /// Bytes per item of `name`.
    pub fn itemsize(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_step_itemsize(self.as_ptr(), i) })
    }

    /// The (global) shape of `name`.
    pub fn shape(&self, name: &str) -> Result<&[i64]> {
        let i = self.index_of(name)?;
        // SAFETY: ndim sizes, borrowed until the step is closed.
        unsafe {
            let n = sys::ckpt_step_ndim(self.as_ptr(), i) as usize;
            Ok(slice_at(sys::ckpt_step_shape(self.as_ptr(), i), n))
        }
    }

    /// Bytes of data of `name` (whole).
    pub fn nbytes(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_step_nbytes(self.as_ptr(), i) })
    }

    /// How many shards hold `name`'s rows (0: it is whole, in one shard).
    pub fn pieces(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_step_pieces(self.as_ptr(), i) })
    }

    /// The raw bytes of rows `[first, first + count)` of `name` (a 0-d variable: 0, 1), from the shards that hold
    /// them.
    pub fn read_rows_bytes(&mut self, name: &str, first: i64, count: i64) -> Result<Vec<u8>> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range; ndim sizes, borrowed until the step is closed.
        let (rows, nbytes) = unsafe {
            let shape =
                slice_at(sys::ckpt_step_shape(self.as_ptr(), i), sys::ckpt_step_ndim(self.as_ptr(), i) as usize);
            (shape.first().copied().unwrap_or(1).max(1) as usize, sys::ckpt_step_nbytes(self.as_ptr(), i))
        };
        let row_bytes = nbytes / rows;
        let mut out = vec![0u8; row_bytes * count.max(0) as usize];
        // SAFETY: out's bytes, all writable.
        check(unsafe {
            sys::ckpt_step_read_rows(self.raw.as_ptr(), i, first, count, out.as_mut_ptr().cast(), out.len())
        })?;
        Ok(out)
    }

    /// The step's metadata value for `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        let key = c_string("metadata key", key).ok()?;
        // SAFETY: borrowed until the step is closed.
        unsafe { borrowed_str(sys::ckpt_step_metadata(self.as_ptr(), key.as_ptr())) }
    }

    /// The step's metadata as (key, value) pairs, in order.
    pub fn metadata_iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        // SAFETY: a live handle.
        let n = unsafe { sys::ckpt_step_metadata_count(self.as_ptr()) };
        (0..n).filter_map(move |i| {
            // SAFETY: i is in range; borrowed until the step is closed.
            unsafe {
                let key = borrowed_str(sys::ckpt_step_metadata_key(self.as_ptr(), i))?;
                let value = borrowed_str(sys::ckpt_step_metadata_value(self.as_ptr(), i))?;
                Some((key, value))
            }
        })
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        // SAFETY: the handle is ours, closed once.
        unsafe { sys::ckpt_step_close(self.raw.as_ptr()) }
    }
}
