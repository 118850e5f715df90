// SPDX-License-Identifier: Apache-2.0
//! `Vars`: an ordered collection of named arrays (`ckpt_vars`), copied or borrowed, and its metadata.
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::raw::c_void;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::dtype::{Dtype, Element, Pod};
use crate::error::{check, Code, Error, Result};
use crate::items::{decode_unicode, known_dtype, split_items, typed_view};
use crate::options::Options;
use crate::sys;
use crate::util::{borrowed_str, c_path, c_string, item_count, ndim, slice_at, slice_at_mut};

/// An ordered collection of named n-dimensional arrays and string metadata: what a checkpoint holds.
///
/// Arrays are either copied into the collection ([`add`](Vars::add)) or **borrowed** from the caller
/// ([`add_borrowed`](Vars::add_borrowed)): a borrowed array is the caller's own slice, saved without a copy and
/// written into by restores. `'a` is the lifetime of those borrows — the collection cannot outlive them, and while
/// it lives the slices are reached only through it ([`get`](Vars::get), [`get_mut`](Vars::get_mut)).
///
/// Everything a getter returns borrows the collection, so it cannot outlive a change to it (ckpt.h: getter
/// pointers live until the handle is modified or freed).
pub struct Vars<'a> {
    raw: NonNull<sys::ckpt_vars>,
    _borrows: PhantomData<&'a mut [u8]>,
    // Boxed twice on purpose: the outer box's thin, stable address is the payload the library hands back.
    #[allow(clippy::vec_box)]
    sources: Vec<Box<Source<'a>>>,
}

/// What [`add_source`](Vars::add_source) keeps: fills `dst` with the array's bytes from `offset`.
type Source<'a> = Box<dyn FnMut(u64, &mut [u8]) -> Result<()> + Send + 'a>;

unsafe extern "C" fn call_source(
    payload: *mut c_void,
    offset: u64,
    dst: *mut c_void,
    size: usize,
) -> std::os::raw::c_int {
    // SAFETY: payload is the boxed closure add_source registered, alive as long as the collection; dst holds size
    // bytes; the library never calls one collection's sources at once.
    let source = &mut *payload.cast::<Source<'_>>();
    let buf = if size == 0 { &mut [][..] } else { std::slice::from_raw_parts_mut(dst.cast::<u8>(), size) };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source(offset, buf))) {
        Ok(Ok(())) => sys::CKPT_OK,
        Ok(Err(e)) => {
            crate::storage::set_callback_message(&e.to_string());
            crate::storage::error_code(&e)
        }
        Err(_) => {
            crate::storage::set_callback_message("the source panicked");
            sys::CKPT_ERROR
        }
    }
}

// SAFETY: ckpt.h lets a handle be used from any thread, one thread at a time; `&mut`/`&` access through a
// `Vars` that is not `Sync` gives exactly that. The borrowed slices are plain data (`Pod`), which is `Send`.
unsafe impl Send for Vars<'_> {}

impl<'a> Vars<'a> {
    /// An empty collection.
    pub fn new() -> Result<Vars<'a>> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        check(unsafe { sys::ckpt_vars_new(&mut raw) })?;
        // SAFETY: on success `raw` is a new collection owned by the caller.
        Ok(unsafe { Vars::from_raw(raw) })
    }

    /// Takes ownership of a collection the library made.
    ///
    /// # Safety
    /// `raw` is a non-NULL collection owned by the caller, holding no borrows shorter than `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut sys::ckpt_vars) -> Vars<'a> {
        Vars {
            raw: NonNull::new(raw).expect("the library returned CKPT_OK with a NULL collection"),
            _borrows: PhantomData,
            sources: Vec::new(),
        }
    }

    pub(crate) fn as_ptr(&self) -> *const sys::ckpt_vars {
        self.raw.as_ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut sys::ckpt_vars {
        self.raw.as_ptr()
    }

    /// Appends a copy of `data`, an array of `shape` (`&[]` for a scalar) in C order.
    pub fn add<T: Element>(&mut self, name: &str, shape: &[i64], data: &[T]) -> Result<()> {
        check_len(name, shape, data.len())?;
        // SAFETY: data holds exactly the shape's items; the library copies them.
        unsafe { self.add_raw(name, T::DTYPE.code(), shape, data.as_ptr().cast(), sys::CKPT_VARS_COPY) }
    }

    /// Appends an array of `dtype` and `shape` whose bytes a save pulls from `source(offset, dst)` a few MiB at a
    /// time (`ckpt_vars_add_source`) instead of holding them: `source` fills `dst` with the bytes (native byte order,
    /// C order) from `offset`. A save may ask for a range more than once, never two at once; an error it returns
    /// fails the save with its code and words. `itemsize`: the item size of unicode, bytes and void arrays, else 0.
    pub fn add_source<F>(&mut self, name: &str, dtype: Dtype, itemsize: usize, shape: &[i64], source: F) -> Result<()>
    where
        F: FnMut(u64, &mut [u8]) -> Result<()> + Send + 'a,
    {
        let name = c_string("variable name", name)?;
        let mut boxed: Box<Source<'a>> = Box::new(Box::new(source));
        let payload = (&mut *boxed as *mut Source<'a>).cast::<c_void>();
        // SAFETY: the closure lives in the collection (self.sources) as long as the collection may be saved.
        check(unsafe {
            sys::ckpt_vars_add_source(
                self.as_mut_ptr(),
                name.as_ptr(),
                dtype.code(),
                itemsize,
                ndim(shape)?,
                shape.as_ptr(),
                Some(call_source),
                payload,
            )
        })?;
        self.sources.push(boxed);
        Ok(())
    }

    /// Whether array `i` is a source ([`add_source`](Vars::add_source)).
    pub fn is_source(&self, i: usize) -> bool {
        // SAFETY: a valid collection; out of range gives 0.
        unsafe { sys::ckpt_vars_is_source(self.as_ptr(), i) == 1 }
    }

    /// Appends a 0-d array holding `value`.
    pub fn add_scalar<T: Element>(&mut self, name: &str, value: T) -> Result<()> {
        self.add(name, &[], &[value])
    }

    /// Appends a zero-filled numeric array of `dtype`: a place for a restore to fill.
    pub fn add_zeroed(&mut self, name: &str, dtype: Dtype, shape: &[i64]) -> Result<()> {
        item_count(shape)?;
        // SAFETY: NULL data with CKPT_VARS_COPY makes a zero-filled array; the library refuses non-numeric dtypes.
        unsafe { self.add_raw(name, dtype.code(), shape, ptr::null(), sys::CKPT_VARS_COPY) }
    }

    /// Appends `data` **without a copy**: saves read it and restores write into it, for as long as the
    /// collection lives (which the borrow checker holds to `'a`).
    pub fn add_borrowed<T: Pod>(&mut self, name: &str, shape: &[i64], data: &'a mut [T]) -> Result<()> {
        check_len(name, shape, data.len())?;
        // SAFETY: data holds exactly the shape's items and stays exclusively borrowed by `self` for 'a; every
        // bit pattern the library writes into it is a valid T.
        unsafe { self.add_raw(name, T::DTYPE.code(), shape, data.as_mut_ptr().cast::<c_void>(), sys::CKPT_VARS_BORROW) }
    }

    /// Appends a copy of a fixed-width array — [`Dtype::Unicode`], [`Dtype::Bytes`] or [`Dtype::Void`] — of
    /// `itemsize` bytes per item, given as its raw bytes (UTF-32 code units in native byte order for Unicode).
    pub fn add_fixed(&mut self, name: &str, dtype: Dtype, itemsize: usize, shape: &[i64], data: &[u8]) -> Result<()> {
        check_fixed(name, dtype, itemsize, shape, data.len())?;
        // SAFETY: data holds exactly the shape's items of itemsize bytes; the library copies them.
        unsafe { self.add_fixed_raw(name, dtype, itemsize, shape, data.as_ptr().cast(), sys::CKPT_VARS_COPY) }
    }

    /// Appends a zero-filled fixed-width array, ready to be restored into.
    pub fn add_fixed_zeroed(&mut self, name: &str, dtype: Dtype, itemsize: usize, shape: &[i64]) -> Result<()> {
        item_count(shape)?;
        // SAFETY: NULL data with CKPT_VARS_COPY makes a zero-filled array.
        unsafe { self.add_fixed_raw(name, dtype, itemsize, shape, ptr::null(), sys::CKPT_VARS_COPY) }
    }

    /// Appends a fixed-width array without a copy, as [`add_borrowed`](Vars::add_borrowed) does.
    pub fn add_fixed_borrowed(
        &mut self,
        name: &str,
        dtype: Dtype,
        itemsize: usize,
        shape: &[i64],
        data: &'a mut [u8],
    ) -> Result<()> {
        check_fixed(name, dtype, itemsize, shape, data.len())?;
        // SAFETY: as add_borrowed; bytes take any value.
        unsafe {
            self.add_fixed_raw(name, dtype, itemsize, shape, data.as_mut_ptr().cast::<c_void>(), sys::CKPT_VARS_BORROW)
        }
    }

    /// Appends a 1-d Unicode array (numpy `<U<n>`, n the longest item's length in characters, at least 1).
    pub fn add_strings<S: AsRef<str>>(&mut self, name: &str, items: &[S]) -> Result<()> {
        let width = items.iter().map(|s| s.as_ref().chars().count()).max().unwrap_or(0).max(1);
        let mut bytes = Vec::with_capacity(items.len() * width * 4);
        for item in items {
            let mut n = 0;
            for c in item.as_ref().chars() {
                bytes.extend_from_slice(&(c as u32).to_ne_bytes());
                n += 1;
            }
            bytes.resize(bytes.len() + (width - n) * 4, 0);
        }
        self.add_fixed(name, Dtype::Unicode, width * 4, &[items.len() as i64], &bytes)
    }

    /// Appends a 1-d Bytes array (numpy `|S<n>`, n the longest item's length, at least 1).
    pub fn add_byte_strings<B: AsRef<[u8]>>(&mut self, name: &str, items: &[B]) -> Result<()> {
        let width = items.iter().map(|b| b.as_ref().len()).max().unwrap_or(0).max(1);
        let mut bytes = Vec::with_capacity(items.len() * width);
        for item in items {
            bytes.extend_from_slice(item.as_ref());
            bytes.resize(bytes.len() + width - item.as_ref().len(), 0);
        }
        self.add_fixed(name, Dtype::Bytes, width, &[items.len() as i64], &bytes)
    }

    /// # Safety
    /// `data` is NULL or points to the shape's items of `dtype`, valid as `flags` requires.
    unsafe fn add_raw(&mut self, name: &str, dtype: u32, shape: &[i64], data: *const c_void, flags: u32) -> Result<()> {
        let name = c_string("variable name", name)?;
        check(sys::ckpt_vars_add(self.as_mut_ptr(), name.as_ptr(), dtype, ndim(shape)?, shape.as_ptr(), data, flags))
    }

    /// # Safety
    /// As `add_raw`, for items of `itemsize` bytes.
    unsafe fn add_fixed_raw(
        &mut self,
        name: &str,
        dtype: Dtype,
        itemsize: usize,
        shape: &[i64],
        data: *const c_void,
        flags: u32,
    ) -> Result<()> {
        let name = c_string("variable name", name)?;
        check(sys::ckpt_vars_add_strings(
            self.as_mut_ptr(),
            name.as_ptr(),
            dtype.code(),
            itemsize,
            ndim(shape)?,
            shape.as_ptr(),
            data,
            flags,
        ))
    }

    /// Number of arrays.
    pub fn len(&self) -> usize {
        // SAFETY: a live collection.
        unsafe { sys::ckpt_vars_count(self.as_ptr()) }
    }

    /// Whether there are no arrays.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name of array `i` (in insertion order, the save order); `None` past the end.
    pub fn name(&self, i: usize) -> Option<&str> {
        // SAFETY: the name lives until the collection changes, which needs `&mut self`.
        unsafe { borrowed_str(sys::ckpt_vars_name(self.as_ptr(), i)) }
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(move |i| self.name(i))
    }

    /// Whether the latest restore into the collection filled array `i`: false for one a
    /// [`partial`](crate::Options::partial) restore did not find in the file, for every array after a failed
    /// restore or before any, and past the end.
    pub fn restored(&self, i: usize) -> bool {
        // SAFETY: a live collection; any index is accepted.
        unsafe { sys::ckpt_vars_restored(self.as_ptr(), i) == 1 }
    }

    /// Position of `name`; [`Code::NotFound`] if there is no such array.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        let c_name = c_string("variable name", name)?;
        let mut index = 0;
        // SAFETY: valid pointers for the call.
        check(unsafe { sys::ckpt_vars_find(self.as_ptr(), c_name.as_ptr(), &mut index) })?;
        Ok(index)
    }

    /// Whether there is an array `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.index_of(name).is_ok()
    }

    /// The dtype of `name`.
    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        let code = unsafe { sys::ckpt_vars_dtype(self.as_ptr(), i) };
        known_dtype(name, code)
    }

    /// Bytes per item of `name`.
    pub fn itemsize(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_vars_itemsize(self.as_ptr(), i) })
    }

    /// The shape of `name` (empty for a scalar).
    pub fn shape(&self, name: &str) -> Result<&[i64]> {
        let i = self.index_of(name)?;
        // SAFETY: ndim sizes, valid until the collection changes (which needs `&mut self`).
        unsafe {
            let n = sys::ckpt_vars_ndim(self.as_ptr(), i) as usize;
            Ok(slice_at(sys::ckpt_vars_shape(self.as_ptr(), i), n))
        }
    }

    /// Bytes of data of `name`.
    pub fn nbytes(&self, name: &str) -> Result<usize> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        Ok(unsafe { sys::ckpt_vars_nbytes(self.as_ptr(), i) })
    }

    /// The items of `name`, in C order, as `T` — which must be its dtype ([`Code::Mismatch`] otherwise).
    pub fn get<T: Element>(&self, name: &str) -> Result<&[T]> {
        let (p, count) = self.typed_data::<T>(name)?;
        // SAFETY: the array's bytes, not written while `self` is borrowed.
        let bytes = unsafe { slice_at(p as *const u8, count * size_of::<T>()) };
        if !T::valid_bytes(bytes) {
            return Err(Error::new(Code::Format, format!("variable '{name}' holds values that are not {}", T::DTYPE)));
        }
        // SAFETY: count valid (just checked), aligned T's (typed_data checked dtype, size and alignment).
        Ok(unsafe { slice_at(p as *const T, count) })
    }

    /// The items of `name` to change in place (the next save writes them).
    pub fn get_mut<T: Pod>(&mut self, name: &str) -> Result<&mut [T]> {
        let (p, count) = self.typed_data::<T>(name)?;
        // SAFETY: as get; `&mut self` makes the access exclusive.
        Ok(unsafe { slice_at_mut(p as *mut T, count) })
    }

    /// The raw bytes of `name`, whatever its dtype (native byte order, C order).
    pub fn bytes(&self, name: &str) -> Result<&[u8]> {
        let (p, n) = self.raw_data(name)?;
        // SAFETY: n bytes at p, not written while `self` is borrowed.
        Ok(unsafe { slice_at(p as *const u8, n) })
    }

    /// The raw bytes of `name`, to change in place.
    pub fn bytes_mut(&mut self, name: &str) -> Result<&mut [u8]> {
        let (p, n) = self.raw_data(name)?;
        // SAFETY: n bytes at p; `&mut self` makes the access exclusive.
        Ok(unsafe { slice_at_mut(p as *mut u8, n) })
    }

    /// The items of a Unicode array, trailing NULs removed (as numpy shows them).
    pub fn strings(&self, name: &str) -> Result<Vec<String>> {
        self.expect_dtype(name, Dtype::Unicode)?;
        let width = self.itemsize(name)?;
        decode_unicode(name, self.bytes(name)?, width)
    }

    /// The items of a Bytes array, trailing NULs removed (as numpy shows them).
    pub fn byte_strings(&self, name: &str) -> Result<Vec<Vec<u8>>> {
        self.expect_dtype(name, Dtype::Bytes)?;
        let width = self.itemsize(name)?;
        Ok(split_items(self.bytes(name)?, width))
    }

    fn expect_dtype(&self, name: &str, wanted: Dtype) -> Result<()> {
        let actual = self.dtype(name)?;
        if actual == wanted {
            Ok(())
        } else {
            Err(Error::new(Code::Mismatch, format!("variable '{name}' is {actual}, not {wanted}")))
        }
    }

    fn raw_data(&self, name: &str) -> Result<(*mut c_void, usize)> {
        let i = self.index_of(name)?;
        // SAFETY: i is in range.
        let (p, n) = unsafe { (sys::ckpt_vars_data(self.as_ptr(), i), sys::ckpt_vars_nbytes(self.as_ptr(), i)) };
        if p.is_null() && n > 0 {
            // A source (add_source): its bytes are pulled by saves, never held, so there is nothing to point at.
            return Err(Error::new(
                Code::InvalidArgument,
                format!("variable '{name}' is a source: a save pulls its bytes, the collection holds none"),
            ));
        }
        Ok((p, n))
    }

    fn typed_data<T: Element>(&self, name: &str) -> Result<(*mut c_void, usize)> {
        self.expect_dtype(name, T::DTYPE)?;
        let (p, n) = self.raw_data(name)?;
        typed_view::<T>(name, p, n)
    }

    /// Marks `name` as rows `[row_begin, row_begin + shape[0])` of a global array of `global_rows` rows along
    /// dimension 0, for sharded checkpoints (`ckpt_vars_set_rows`): a sharded save records this rank's piece, a
    /// restore fills the array with those rows from whichever shards hold them. `None` makes it whole again.
    pub fn set_rows(&mut self, name: &str, rows: Option<(i64, i64)>) -> Result<()> {
        let i = self.index_of(name)?;
        let (begin, global) = rows.unwrap_or((0, -1));
        // SAFETY: a valid collection.
        check(unsafe { sys::ckpt_vars_set_rows(self.as_mut_ptr(), i, begin, global) })
    }

    /// `(row_begin, global_rows)` of `name` when it is a row split, `None` when it is whole.
    pub fn rows(&self, name: &str) -> Result<Option<(i64, i64)>> {
        let i = self.index_of(name)?;
        let (mut begin, mut global) = (-1, -1);
        // SAFETY: valid pointers for the call.
        let rc = unsafe { sys::ckpt_vars_rows(self.as_ptr(), i, &mut begin, &mut global) };
        if rc == sys::CKPT_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        Ok(Some((begin, global)))
    }

    /// Sets metadata `key` to `value` (both copied), replacing any value it had and keeping its place.
    pub fn set_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        let key = c_string("metadata key", key)?;
        let value = c_string("metadata value", value)?;
        // SAFETY: valid strings for the call; the library copies them.
        check(unsafe { sys::ckpt_vars_set_metadata(self.as_mut_ptr(), key.as_ptr(), value.as_ptr()) })
    }

    /// Removes metadata `key` (fine if it is absent).
    pub fn remove_metadata(&mut self, key: &str) -> Result<()> {
        let key = c_string("metadata key", key)?;
        // SAFETY: a NULL value removes the key.
        check(unsafe { sys::ckpt_vars_set_metadata(self.as_mut_ptr(), key.as_ptr(), ptr::null()) })
    }

    /// The value of metadata `key`, if set.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        let key = c_string("metadata key", key).ok()?;
        // SAFETY: the value lives until the key changes or the collection is freed, both needing `&mut self`.
        unsafe { borrowed_str(sys::ckpt_vars_metadata(self.as_ptr(), key.as_ptr())) }
    }

    /// Number of metadata keys.
    pub fn metadata_len(&self) -> usize {
        // SAFETY: a live collection.
        unsafe { sys::ckpt_vars_metadata_count(self.as_ptr()) }
    }

    /// The metadata as (key, value) pairs, in insertion order.
    pub fn metadata_iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.metadata_len()).filter_map(move |i| {
            // SAFETY: i is in range; the strings live as long as the borrow of `self`.
            unsafe {
                let key = borrowed_str(sys::ckpt_vars_metadata_key(self.as_ptr(), i))?;
                let value = borrowed_str(sys::ckpt_vars_metadata_value(self.as_ptr(), i))?;
                Some((key, value))
            }
        })
    }

    /// Saves the collection to `path` as an .npz numpy reads, atomically and durably (default options).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_with(path, &Options::new())
    }

    /// Saves with `options` (layout, deflate, storage, progress).
    pub fn save_with(&self, path: impl AsRef<Path>, options: &Options) -> Result<()> {
        let path = c_path(path.as_ref())?;
        let raw = options.to_raw(true)?;
        // SAFETY: valid pointers for the call; the options' callbacks outlive it.
        check(unsafe { sys::ckpt_save(path.as_ptr(), self.as_ptr(), raw.as_ptr()) })
    }

    /// Restores every array of the collection in place from the .npz at `path` (objax's
    /// `load_var_collection`): each must be in the file with the same dtype and shape, or the call fails with
    /// [`Code::Mismatch`] naming all that are not, leaving the arrays untouched. Borrowed arrays are written
    /// straight into. The collection's metadata becomes the file's.
    pub fn restore(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.restore_with(path, &Options::new())
    }

    /// Restores with `options` (a renamer for the names on disk, storage, limits).
    pub fn restore_with(&mut self, path: impl AsRef<Path>, options: &Options) -> Result<()> {
        let path = c_path(path.as_ref())?;
        let raw = options.to_raw(true)?;
        // SAFETY: valid pointers; the library writes only within each array's nbytes, into memory `self`
        // holds exclusively (copies, or borrows of Pod slices).
        check(unsafe { sys::ckpt_restore(path.as_ptr(), self.as_mut_ptr(), raw.as_ptr()) })
    }
}

impl<'a> Vars<'a> {
    /// Reads every array of the .npz at `path`, and its metadata, into a new collection (which holds no
    /// borrows, and may be given some).
    pub fn read(path: impl AsRef<Path>) -> Result<Vars<'a>> {
        Vars::read_with(path, &Options::new())
    }

    /// Reads with `options` (layout, storage, limits).
    pub fn read_with(path: impl AsRef<Path>, options: &Options) -> Result<Vars<'a>> {
        let path = c_path(path.as_ref())?;
        let raw = options.to_raw(true)?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the call.
        check(unsafe { sys::ckpt_read(&mut out, path.as_ptr(), raw.as_ptr()) })?;
        // SAFETY: a new collection owned by the caller, with no borrows.
        Ok(unsafe { Vars::from_raw(out) })
    }

    /// Reads an .npz held in memory (messages name it `<memory>`).
    pub fn read_memory(bytes: &[u8], options: &Options) -> Result<Vars<'a>> {
        let raw = options.to_raw(true)?;
        let mut out = ptr::null_mut();
        // SAFETY: bytes are valid for the call and not retained.
        check(unsafe { sys::ckpt_read_memory(&mut out, bytes.as_ptr().cast(), bytes.len(), raw.as_ptr()) })?;
        // SAFETY: as read_with.
        Ok(unsafe { Vars::from_raw(out) })
    }
}

impl Drop for Vars<'_> {
    fn drop(&mut self) {
        // SAFETY: the collection is owned and not used again; borrowed bytes are left alone.
        unsafe { sys::ckpt_vars_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Vars<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_map();
        for name in self.names() {
            let dtype = self.dtype(name).map(|d| d.name()).unwrap_or("?");
            list.entry(&name, &format_args!("{dtype}{:?}", self.shape(name).unwrap_or(&[])));
        }
        list.finish()
    }
}

fn check_len(name: &str, shape: &[i64], len: usize) -> Result<()> {
    let count = item_count(shape)?;
    if count == len {
        Ok(())
    } else {
        Err(Error::invalid(format!("variable '{name}': shape {shape:?} holds {count} items, the data {len}")))
    }
}

fn check_fixed(name: &str, dtype: Dtype, itemsize: usize, shape: &[i64], len: usize) -> Result<()> {
    if !dtype.is_fixed_width() {
        return Err(Error::invalid(format!(
            "variable '{name}': {dtype} is not a fixed-width dtype (unicode, bytes, void)"
        )));
    }
    let count = item_count(shape)?;
    match count.checked_mul(itemsize) {
        Some(n) if n == len => Ok(()),
        _ => Err(Error::invalid(format!(
            "variable '{name}': shape {shape:?} of {itemsize}-byte items needs {count} × {itemsize} bytes, the data has {len}"
        ))),
    }
}
