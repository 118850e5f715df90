// SPDX-License-Identifier: Apache-2.0
//! Conversions at the C boundary: strings and paths to C strings, borrowed C strings back, shapes to counts.
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};

/// `s` as a C string; an interior NUL is an invalid argument naming `what`.
pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} {s:?} holds a NUL byte")))
}

/// A path as the C string ckpt takes (its bytes, as the OS has them).
pub(crate) fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(format!("path {} holds a NUL byte", path.display())))
}

/// A string the library returned, borrowed for `'a`; `None` for NULL. ckpt hands out UTF-8 only (names and
/// metadata are checked when they are made or read); anything else shows as U+FFFD rather than being trusted.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn borrowed_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    Some(CStr::from_ptr(p).to_str().unwrap_or("\u{fffd}"))
}

/// The number of items of `shape`, refusing negative sizes and overflow (the C side checks these too, but the
/// binding must know the count to check the slice it passes).
pub(crate) fn item_count(shape: &[i64]) -> Result<usize> {
    let mut count: usize = 1;
    for &dim in shape {
        let dim = usize::try_from(dim).map_err(|_| Error::invalid(format!("shape {shape:?} holds a negative size")))?;
        count = count
            .checked_mul(dim)
            .ok_or_else(|| Error::invalid(format!("shape {shape:?} holds more items than memory can")))?;
    }
    Ok(count)
}

/// The shape's rank as the C API takes it.
pub(crate) fn ndim(shape: &[i64]) -> Result<u32> {
    u32::try_from(shape.len()).map_err(|_| Error::invalid(format!("{} dimensions are too many", shape.len())))
}

/// A slice of `len` items at `p`, or an empty one when there are none (the library may return NULL then).
///
/// # Safety
/// When `len > 0`, `p` points to `len` valid, aligned items that stay valid and unaliased by writers for `'a`.
pub(crate) unsafe fn slice_at<'a, T>(p: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, len)
    }
}

/// As [`slice_at`], mutable.
///
/// # Safety
/// When `len > 0`, `p` points to `len` valid, aligned items that nothing else reads or writes for `'a`.
pub(crate) unsafe fn slice_at_mut<'a, T>(p: *mut T, len: usize) -> &'a mut [T] {
    if len == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(p, len)
    }
}
