// SPDX-License-Identifier: Apache-2.0
//! `Reader`: lazy access to one .npz file's arrays (`ckpt_reader`).
use std::mem::size_of;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::dtype::{Dtype, Element, Pod};
use crate::error::{check, Code, Error, Result};
use crate::items::{decode_unicode, known_dtype, split_items};
use crate::options::{Compression, Format, Layout, Options};
use crate::sys;
use crate::util::{borrowed_str, c_path, c_string, slice_at};
use crate::vars::Vars;

/// How a file holds one array ([`Reader::member_info`]), for inspection tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// The zip member's name: `w.npy`, or `0.npy` in the objax layout.
    pub member: String,
    /// Stored or deflated.
    pub compression: Compression,
    /// The member's bytes in the file (compressed, npy header included).
    pub stored_bytes: u64,
    /// CRC-32 of the npy header and data, as the zip directory records it.
    pub crc32: u32,
    /// File offset of the first data byte of a stored array; 0 when deflated.
    pub data_offset: u64,
    /// The data's byte order in the member: `'<'`, `'>'`, or `'|'` where it does not apply (single-byte items).
    /// Reads give native byte order either way.
    pub byte_order: char,
    /// Whether the data lies in Fortran (column-major) order in the member. Reads give C order either way.
    pub fortran_order: bool,
}

/// One .npz file opened for lazy reads (`ckpt_reader`): opening validates the zip directory and every npy header
/// and reads the metadata; array data is read only when asked for, one array at a time.
pub struct Reader {
    raw: NonNull<sys::ckpt_reader>,
    // The progress callback, called by later reads, and whether the mapping is writable (map_vars).
    _options: Options,
}

// SAFETY: a handle used by one thread at a time (not Sync); its progress callback is Send + Sync.
unsafe impl Send for Reader {}

impl Reader {
    /// Opens `path` with the default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader> {
        Reader::open_with(path, &Options::new())
    }

    /// Opens `path` with `options` (layout, storage, limits, progress of reads).
    pub fn open_with(path: impl AsRef<Path>, options: &Options) -> Result<Reader> {
        let path = c_path(path.as_ref())?;
        let raw = options.to_raw(true)?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the call; the file keeps its own reference to the storage.
        check(unsafe { sys::ckpt_reader_open(&mut out, path.as_ptr(), raw.as_ptr()) })?;
        let raw = NonNull::new(out).expect("the library returned CKPT_OK with a NULL file");
        Ok(Reader { raw, _options: options.clone() })
    }

    fn as_ptr(&self) -> *const sys::ckpt_reader {
        self.raw.as_ptr()
    }

    /// Number of arrays (not counting the metadata member, nor objax's `names.npy`).
    pub fn len(&self) -> usize {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_reader_count(self.as_ptr()) }
    }

    /// Whether the file holds no arrays.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name of array `i`; `None` past the end.
    pub fn name(&self, i: usize) -> Option<&str> {
        // SAFETY: borrowed until the file is closed (or read, which needs `&mut self`).
        unsafe { borrowed_str(sys::ckpt_reader_name(self.as_ptr(), i)) }
    }

    /// The array names, in file order (objax files: the order of `names.npy`).
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(move |i| self.name(i))
    }

    /// Position of `name`; [`Code::NotFound`] if the file has no such array.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        let c_name = c_string("array name", name)?;
        let mut index = 0;
        // SAFETY: valid pointers for the call.
        check(unsafe { sys::ckpt_reader_find(self.as_ptr(), c_name.as_ptr(), &mut index) })?;
        Ok(index)
    }

    /// The dtype of `name`.
    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        known_dtype(name, unsafe { sys::ckpt_reader_dtype(self.as_ptr(), i) })
    }

    /// Bytes per item of `name`.
    pub fn itemsize(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_reader_itemsize(self.as_ptr(), i) })
    }

    /// The shape of `name`.
    pub fn shape(&self, name: &str) -> Result<&[i64]> {
        let i = self.index_of(name)?;
        // SAFETY: ndim sizes, borrowed until the file is closed.
        unsafe {
            let n = sys::ckpt_reader_ndim(self.as_ptr(), i) as usize;
            Ok(slice_at(sys::ckpt_reader_shape(self.as_ptr(), i), n))
        }
    }

    /// Bytes of data of `name`.
    pub fn nbytes(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_reader_nbytes(self.as_ptr(), i) })
    }

    /// Reads `name` into `dst`, which must be of its dtype and hold at least its items; the CRC is verified.
    pub fn read_into<T: Pod>(&mut self, name: &str, dst: &mut [T]) -> Result<()> {
        self.expect_dtype(name, T::DTYPE)?;
        let i = self.index_of(name)?;
        // SAFETY: dst's bytes, all writable; any bytes are valid T's (Pod).
        check(unsafe {
            sys::ckpt_reader_read_into(self.raw.as_ptr(), i, dst.as_mut_ptr().cast(), std::mem::size_of_val(dst))
        })
    }

    /// Reads items `[start, start + dst.len())` of `name` (flat, C order) into `dst`, which must be of its dtype
    /// (`ckpt_reader_read_range`): for reading a large array piece by piece in bounded memory. Pieces read in order
    /// from the first item to the last have the array's CRC-32 checked at the last; a deflated array read in order
    /// is inflated once in all.
    pub fn read_range_into<T: Pod>(&mut self, name: &str, start: usize, dst: &mut [T]) -> Result<()> {
        self.expect_dtype(name, T::DTYPE)?;
        let i = self.index_of(name)?;
        let item = std::mem::size_of::<T>() as u64;
        // SAFETY: dst's bytes, all writable; any bytes are valid T's (Pod).
        check(unsafe {
            sys::ckpt_reader_read_range(
                self.raw.as_ptr(),
                i,
                start as u64 * item,
                dst.as_mut_ptr().cast(),
                std::mem::size_of_val(dst),
            )
        })
    }

    /// Reads the raw bytes of `name`, whatever its dtype, into `dst` (at least its nbytes).
    pub fn read_bytes_into(&mut self, name: &str, dst: &mut [u8]) -> Result<()> {
        let i = self.index_of(name)?;
        // SAFETY: dst's bytes, all writable.
        check(unsafe { sys::ckpt_reader_read_into(self.raw.as_ptr(), i, dst.as_mut_ptr().cast(), dst.len()) })
    }

    /// Reads `name` into a new vector of its items, in C order.
    pub fn read<T: Element>(&mut self, name: &str) -> Result<Vec<T>> {
        self.expect_dtype(name, T::DTYPE)?;
        let bytes = self.read_bytes(name)?;
        if bytes.len() % size_of::<T>() != 0 || !T::valid_bytes(&bytes) {
            return Err(Error::new(Code::Format, format!("array '{name}' holds values that are not {}", T::DTYPE)));
        }
        let count = bytes.len() / size_of::<T>();
        let mut out: Vec<T> = Vec::with_capacity(count);
        // SAFETY: count whole items of valid bit patterns (checked above) copied into the new capacity.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
            out.set_len(count);
        }
        Ok(out)
    }

    /// Reads the raw bytes of `name`.
    pub fn read_bytes(&mut self, name: &str) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.nbytes(name)?];
        self.read_bytes_into(name, &mut bytes)?;
        Ok(bytes)
    }

    /// Reads a Unicode array's items, trailing NULs removed.
    pub fn read_strings(&mut self, name: &str) -> Result<Vec<String>> {
        self.expect_dtype(name, Dtype::Unicode)?;
        let width = self.itemsize(name)?;
        decode_unicode(name, &self.read_bytes(name)?, width)
    }

    /// Reads a Bytes array's items, trailing NULs removed.
    pub fn read_byte_strings(&mut self, name: &str) -> Result<Vec<Vec<u8>>> {
        self.expect_dtype(name, Dtype::Bytes)?;
        let width = self.itemsize(name)?;
        Ok(split_items(&self.read_bytes(name)?, width))
    }

    /// The raw bytes of `name` without a copy (`ckpt_reader_map`): a view into a read-only mapping of the file for
    /// the stored, native, C-order, aligned arrays ckpt writes, else bytes decoded once and kept by the file. The
    /// slice borrows the file, so it cannot outlive it. Its CRC-32 is checked at the first call unless the file
    /// was opened with [`Options::map_unverified`]. A truncated file faults (SIGBUS) when its lost pages are
    /// read (see `ckpt_reader_map` in ckpt.h).
    ///
    /// ```compile_fail
    /// # fn f(npz: ckpt::Reader) -> ckpt::Result<()> {
    /// let view = npz.map_bytes("w")?;
    /// drop(npz); // error: the view still borrows the file
    /// println!("{}", view[0]);
    /// # Ok(()) }
    /// ```
    pub fn map_bytes(&self, name: &str) -> Result<&[u8]> {
        let i = self.index_of(name)?;
        let n = self.nbytes(name)?;
        let mut p = ptr::null();
        // SAFETY: a live handle used by one thread at a time (Reader is not Sync); views never move or change while
        // the file is open, nor invalidate what other getters borrowed.
        check(unsafe { sys::ckpt_reader_map(self.raw.as_ptr(), i, &mut p) })?;
        // SAFETY: n readable bytes (p is never NULL on success), valid until ckpt_reader_close, which needs the Reader.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
    }

    /// Every array without a copy (`ckpt_reader_map_vars`): a collection, in file order and with the file's
    /// metadata, whose arrays are the file's views (each checked as [`Reader::map_bytes`] checks it) — a restore that
    /// maps instead of reading. Its arrays may be written: the file must have been opened with
    /// [`Options::map_writable`] (copy-on-write; [`Code::InvalidArgument`] otherwise). The collection borrows
    /// the file mutably, so no other view of it can be alive meanwhile.
    pub fn map_vars(&mut self) -> Result<Vars<'_>> {
        if !self._options.is_map_writable() {
            return Err(Error::invalid(
                "Reader::map_vars: open the file with Options::map_writable (the collection's arrays are mutable, \
                 and a read-only mapping cannot be written)",
            ));
        }
        let mut out = ptr::null_mut();
        // SAFETY: a live handle used by one thread at a time; a valid out-pointer.
        check(unsafe { sys::ckpt_reader_map_vars(self.raw.as_ptr(), &mut out) })?;
        // SAFETY: a new collection the caller owns; its arrays borrow the file's copy-on-write views, valid until
        // ckpt_reader_close, which needs the Reader that the returned Vars borrows.
        Ok(unsafe { Vars::from_raw(out) })
    }

    /// The items of `name` without a copy, as [`Reader::map_bytes`]; its dtype must be `T`'s.
    pub fn map<T: Pod>(&self, name: &str) -> Result<&[T]> {
        self.expect_dtype(name, T::DTYPE)?;
        let bytes = self.map_bytes(name)?;
        if bytes.len() % size_of::<T>() != 0 || bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
            return Err(Error::new(
                Code::Format,
                format!("array '{name}' is not a whole, aligned run of {}", T::DTYPE),
            ));
        }
        // SAFETY: aligned whole items (checked above), any bit pattern a valid T (Pod), borrowed as the bytes are.
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size_of::<T>()) })
    }

    /// The size in bytes of the file (or S3 object) as it was when opened.
    pub fn file_size(&self) -> u64 {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_reader_file_size(self.as_ptr()) }
    }

    /// The layout the file was read in: [`Layout::Plain`] or [`Layout::Objax`].
    pub fn layout(&self) -> Layout {
        // SAFETY: a live handle.
        if unsafe { sys::ckpt_reader_layout(self.as_ptr()) } == sys::CKPT_LAYOUT_OBJAX {
            Layout::Objax
        } else {
            Layout::Plain
        }
    }

    /// The file's format, told by its content: [`Format::Npz`] or [`Format::Safetensors`].
    pub fn format(&self) -> Format {
        // SAFETY: a live handle.
        if unsafe { sys::ckpt_reader_format(self.as_ptr()) } == sys::CKPT_FORMAT_SAFETENSORS {
            Format::Safetensors
        } else {
            Format::Npz
        }
    }

    /// How the file holds `name`: its zip member, compression, bytes in the file, CRC-32 and data offset.
    pub fn member_info(&self, name: &str) -> Result<MemberInfo> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range; the name is copied before the handle can change.
        unsafe {
            let p = self.as_ptr();
            Ok(MemberInfo {
                member: borrowed_str(sys::ckpt_reader_member_name(p, i)).unwrap_or_default().to_owned(),
                compression: if sys::ckpt_reader_compression(p, i) == sys::CKPT_DEFLATE {
                    Compression::Deflate
                } else {
                    Compression::Store
                },
                stored_bytes: sys::ckpt_reader_stored_bytes(p, i),
                crc32: sys::ckpt_reader_crc32(p, i),
                data_offset: sys::ckpt_reader_data_offset(p, i),
                byte_order: char::from(sys::ckpt_reader_byte_order(p, i) as u8),
                fortran_order: sys::ckpt_reader_fortran_order(p, i) != 0,
            })
        }
    }

    fn expect_dtype(&self, name: &str, wanted: Dtype) -> Result<()> {
        let actual = self.dtype(name)?;
        if actual == wanted {
            Ok(())
        } else {
            Err(Error::new(Code::Mismatch, format!("array '{name}' is {actual}, not {wanted}")))
        }
    }

    /// The file's metadata value for `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        let key = c_string("metadata key", key).ok()?;
        // SAFETY: borrowed until the file is closed.
        unsafe { borrowed_str(sys::ckpt_reader_metadata(self.as_ptr(), key.as_ptr())) }
    }

    /// Number of metadata keys.
    pub fn metadata_len(&self) -> usize {
        // SAFETY: a live handle.
        unsafe { sys::ckpt_reader_metadata_count(self.as_ptr()) }
    }

    /// The file's metadata as (key, value) pairs, in order.
    pub fn metadata_iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.metadata_len()).filter_map(move |i| {
            // SAFETY: i is in range; borrowed until the file is closed.
            unsafe {
                let key = borrowed_str(sys::ckpt_reader_metadata_key(self.as_ptr(), i))?;
                let value = borrowed_str(sys::ckpt_reader_metadata_value(self.as_ptr(), i))?;
                Some((key, value))
            }
        })
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: owned, not used again.
        unsafe { sys::ckpt_reader_close(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
