// SPDX-License-Identifier: Apache-2.0
//! Array items at the C boundary: dtype codes the library reports, byte buffers as typed items, and the
//! fixed-width string items of unicode and bytes arrays. Shared by [`Vars`](crate::Vars), [`Reader`](crate::Reader)
//! and [`Step`](crate::Step).
use std::mem::{align_of, size_of};
use std::os::raw::c_void;

use crate::dtype::{Dtype, Element};
use crate::error::{Code, Error, Result};

/// The dtype of array `name` for the library's `code`; [`Code::Unsupported`] for a code this binding does not
/// know (a newer library's).
pub(crate) fn known_dtype(name: &str, code: u32) -> Result<Dtype> {
    Dtype::from_code(code).ok_or_else(|| {
        Error::new(Code::Unsupported, format!("array '{name}' has dtype {code}, unknown to this binding"))
    })
}

/// `n` bytes at `p` as items of `T`: the size must be a whole number of items and `p` aligned for `T`.
pub(crate) fn typed_view<T: Element>(name: &str, p: *mut c_void, n: usize) -> Result<(*mut c_void, usize)> {
    if n % size_of::<T>() != 0 {
        return Err(Error::new(Code::Mismatch, format!("array '{name}': {n} bytes are not whole {} items", T::DTYPE)));
    }
    if n > 0 && (p as usize) % align_of::<T>() != 0 {
        return Err(Error::new(Code::Internal, format!("array '{name}': data is not aligned for {}", T::DTYPE)));
    }
    Ok((p, n / size_of::<T>()))
}

/// The items of a `<U<width/4>` array: UTF-32 code units, trailing NULs dropped (numpy's padding);
/// [`Code::Format`] for a unit that is not a character.
pub(crate) fn decode_unicode(name: &str, bytes: &[u8], width: usize) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if width == 0 {
        return Ok(out);
    }
    for item in bytes.chunks(width) {
        let mut units: Vec<u32> = item.chunks(4).map(|u| u32::from_ne_bytes([u[0], u[1], u[2], u[3]])).collect();
        while units.last() == Some(&0) {
            units.pop();
        }
        let s: Option<String> = units.into_iter().map(char::from_u32).collect();
        out.push(s.ok_or_else(|| {
            Error::new(Code::Format, format!("array '{name}' holds a code unit that is not a character"))
        })?);
    }
    Ok(out)
}

/// The items of an `|S<width>` array, trailing NULs dropped (numpy's padding).
pub(crate) fn split_items(bytes: &[u8], width: usize) -> Vec<Vec<u8>> {
    if width == 0 {
        return Vec::new();
    }
    bytes
        .chunks(width)
        .map(|item| {
            let end = item.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            item[..end].to_vec()
        })
        .collect()
}
