// SPDX-License-Identifier: Apache-2.0
//! Storages: where checkpoint files live. The local filesystem is the default; [`StorageHandle::memory`] is
//! the library's in-memory storage, and any type implementing [`Storage`] plugs in through ckpt's callback
//! table (`ckpt_storage_ops`).
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::error::{check, Code, Error, Result};
use crate::sys;

/// A medium for checkpoint files: an object store, an encryption layer, a map in memory.
///
/// ckpt writes each file front to back into a new temporary file that it then renames over the target, and
/// reads files at arbitrary offsets. Methods may be called from a writer's background thread, concurrently with
/// calls from other threads (for different files), hence `Send + Sync`. An `Err` fails the ckpt call with its
/// code — [`Code::NotFound`] for a missing file or directory, [`Code::Exists`] from `create` when the path
/// exists, [`Code::Io`] for failures of the medium; the library's message names the operation and the path.
/// A panic in a method is caught and fails the call with [`Code::Internal`].
///
/// Paths are the ones ckpt is given, joined with `/`; paths that are not UTF-8 fail with
/// [`Code::InvalidArgument`] before reaching the storage.
pub trait Storage: Send + Sync {
    /// Creates `dir` and its missing parents; `Ok` if it exists.
    fn make_dirs(&self, dir: &str) -> Result<()>;
    /// Creates a new empty file at `path`, failing with [`Code::Exists`] if anything is there.
    fn create(&self, path: &str) -> Result<Box<dyn OutputFile>>;
    /// Opens `path` for appending, creating it if missing (only appending saves use it).
    fn open_append(&self, path: &str) -> Result<Box<dyn OutputFile>> {
        Err(Error::new(Code::Unsupported, format!("{path}: this storage cannot append")))
    }
    /// Replaces `to` with `from` atomically.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Makes renames and creations in `dir` durable (nothing to do for media without directories).
    fn sync_dir(&self, _dir: &str) -> Result<()> {
        Ok(())
    }
    /// Removes the file at `path`.
    fn remove(&self, path: &str) -> Result<()>;
    /// The names (not paths) of the files in `dir`, leaving out subdirectories.
    fn list(&self, dir: &str) -> Result<Vec<String>>;
    /// Opens the file at `path` for reading.
    fn open_read(&self, path: &str) -> Result<Box<dyn InputFile>>;
    /// The bytes a new file in `dir` may still take, for a [`Manager`](crate::Manager)'s disk check before each
    /// save (a save needing more fails with [`Code::Io`], naming both) and its low-space warning; `Ok(None)`
    /// (the default) when the medium cannot tell: no check is made.
    fn free_space(&self, _dir: &str) -> Result<Option<u64>> {
        Ok(None)
    }
    /// Which of the directory methods below ckpt calls, asked once when the storage is made: directories hold
    /// sharded checkpoints (a directory of shards and a manifest per step).
    fn directories(&self) -> Directories {
        Directories::None
    }
    /// The names (not paths) of the subdirectories of `dir`.
    fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        Err(Error::new(Code::Unsupported, format!("{dir}: this storage has no directories")))
    }
    /// Removes the empty directory `dir`; by default nothing (directories that are only prefixes of names).
    fn remove_dir(&self, _dir: &str) -> Result<()> {
        Ok(())
    }
    /// Renames directory `from` to `to` (which does not exist) atomically; called for
    /// [`Directories::Renamable`] only.
    fn rename_dir(&self, from: &str, to: &str) -> Result<()> {
        Err(Error::new(Code::Unsupported, format!("{to}: this storage cannot rename directories (from {from})")))
    }
}

/// What a [`Storage`] offers of directories (`ckpt_storage_ops` version 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directories {
    /// Files only: sharded saves fail with [`Code::Unsupported`].
    None,
    /// Listed and removed, never renamed (an object store): the manifest written last commits a step.
    Prefixes,
    /// Also renamed atomically: a step's staging directory is renamed into place.
    Renamable,
}

/// A file being written by a [`Storage`].
pub trait OutputFile: Send {
    /// Appends `data`.
    fn write(&mut self, data: &[u8]) -> Result<()>;
    /// Makes the bytes durable. A failed sync is never retried: ckpt discards the file.
    fn sync(&mut self) -> Result<()>;
    /// Releases the file; called exactly once, also after failures (the result is then ignored).
    fn close(self: Box<Self>) -> Result<()>;
}

/// A file being read from a [`Storage`]; ckpt reads one file from one thread at a time.
pub trait InputFile: Send {
    /// The file's size in bytes.
    fn size(&self) -> u64;
    /// Reads up to `dst.len()` bytes at `offset`, returning how many; fewer only at the end of the file.
    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<usize>;
}

struct RawStorage(NonNull<sys::ckpt_storage>);

// SAFETY: the library passes storages to writers and managers used from any thread, keeping its own reference
// for each (ckpt.h: "Writers and managers that use the storage keep their own"); the handle itself is only read
// when a call takes it, and the memory storage and callback storages are thread-safe.
unsafe impl Send for RawStorage {}
unsafe impl Sync for RawStorage {}

impl Drop for RawStorage {
    fn drop(&mut self) {
        // SAFETY: this handle's reference, released once; users of the storage keep their own.
        unsafe { sys::ckpt_storage_free(self.0.as_ptr()) }
    }
}

/// A reference to a ckpt storage, to put in [`Options`](crate::Options),
/// [`ManagerOptions`](crate::ManagerOptions) or [`WriterOptions`](crate::WriterOptions). Cloning is cheap;
/// managers and writers keep their own reference, so the handle may be dropped once they are open.
#[derive(Clone)]
pub struct StorageHandle {
    raw: Arc<RawStorage>,
}

impl StorageHandle {
    /// The library's in-memory storage (`ckpt_storage_new_memory`): thread-safe; directories must be made
    /// before files go in them; "" and "." always exist; managers on it lock within the process.
    pub fn memory() -> Result<StorageHandle> {
        let mut raw = ptr::null_mut();
        // SAFETY: a valid out-pointer.
        check(unsafe { sys::ckpt_storage_new_memory(&mut raw) })?;
        Ok(StorageHandle::from_raw(raw))
    }

    /// A storage made of `storage`'s methods (`ckpt_storage_new`). The library owns it from now on and drops
    /// it when nothing uses the storage any more — possibly on a writer's background thread.
    pub fn new<S: Storage + 'static>(storage: S) -> Result<StorageHandle> {
        StorageHandle::from_box(Box::new(storage))
    }

    /// As [`new`](StorageHandle::new), for a boxed storage.
    pub fn from_box(storage: Box<dyn Storage>) -> Result<StorageHandle> {
        let dirs = storage.directories();
        let payload = Box::into_raw(Box::new(storage));
        let ops = sys::ckpt_storage_ops {
            version: sys::CKPT_STORAGE_OPS_VERSION,
            payload: payload.cast(),
            make_dirs: Some(make_dirs),
            create: Some(create),
            open_append: Some(open_append),
            write: Some(write),
            sync: Some(sync),
            close: Some(close),
            rename: Some(rename),
            sync_dir: Some(sync_dir),
            remove: Some(remove),
            list: Some(list),
            open_read: Some(open_read),
            read_at: Some(read_at),
            close_read: Some(close_read),
            destroy: Some(destroy),
            free_space: Some(free_space),
            list_dirs: if dirs == Directories::None { None } else { Some(list_dirs) },
            remove_dir: if dirs == Directories::None { None } else { Some(remove_dir) },
            rename_dir: if dirs == Directories::Renamable { Some(rename_dir) } else { None },
            // A storage of files leaves no unfinished writes beside them (only an object store's uploads are).
            list_incomplete: None,
            abort_incomplete: None,
            // list and list_dirs serve.
            list_entries: None,
            // ckpt opens the file for its size, or finds a directory in its parent's listing.
            stat: None,
            // Nothing is shared: saves against a base write every byte.
            clone_range: None,
        };
        let mut raw = ptr::null_mut();
        // SAFETY: a complete table; the library copies it and keeps the payload.
        let rc = unsafe { sys::ckpt_storage_new(&mut raw, &ops) };
        if rc != sys::CKPT_OK {
            let error = Error::last(rc);
            // CKPT_EINVAL is refused before the library takes the payload, so it is still ours. For other codes
            // (out of memory) whether `destroy` ran is not documented: leaking is the safe side.
            if rc == sys::CKPT_EINVAL {
                // SAFETY: not taken by the library (see above).
                drop(unsafe { Box::from_raw(payload) });
            }
            return Err(error);
        }
        Ok(StorageHandle::from_raw(raw))
    }

    pub(crate) fn from_raw(raw: *mut sys::ckpt_storage) -> StorageHandle {
        let raw = NonNull::new(raw).expect("the library returned CKPT_OK with a NULL storage");
        StorageHandle { raw: Arc::new(RawStorage(raw)) }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ckpt_storage {
        self.raw.0.as_ptr()
    }
}

impl std::fmt::Debug for StorageHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StorageHandle({:p})", self.as_ptr())
    }
}

// --------------------------------------------------------------------------------- the callbacks (C → Rust)
// Each runs the Rust code under catch_unwind: no panic crosses into the library.

/// Runs `f`, turning its error into its code and a panic into CKPT_ERROR.
pub(crate) fn guarded<F: FnOnce() -> Result<()>>(f: F) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => sys::CKPT_OK,
        Ok(Err(e)) => {
            set_callback_message(e.message());
            error_code(&e)
        }
        Err(_) => {
            set_callback_message("the callback panicked");
            sys::CKPT_ERROR
        }
    }
}

/// Gives the library the words of a failing callback (`ckpt_error_set_message`), so the error of the call that
/// made it says them.
pub(crate) fn set_callback_message(message: &str) {
    let text = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: a NUL-terminated string, copied by the library before it returns.
    unsafe { sys::ckpt_error_set_message(text.as_ptr()) }
}

/// The code to hand the library for `e`: negative, whatever the error holds.
pub(crate) fn error_code(e: &Error) -> c_int {
    let code = e.code().raw();
    if code < 0 {
        code
    } else {
        sys::CKPT_ERROR
    }
}

/// # Safety
/// `payload` is the pointer made by `from_box`, alive until `destroy`.
unsafe fn storage<'s>(payload: *mut c_void) -> &'s dyn Storage {
    &**(payload as *const Box<dyn Storage>)
}

/// # Safety
/// `p` is a NUL-terminated string valid for the call.
unsafe fn path<'p>(p: *const c_char, what: &str) -> Result<&'p str> {
    if p.is_null() {
        return Err(Error::invalid(format!("storage {what}: NULL path")));
    }
    CStr::from_ptr(p).to_str().map_err(|_| Error::invalid(format!("storage {what}: the path is not UTF-8")))
}

fn into_file_handle(file: Box<dyn OutputFile>) -> *mut c_void {
    Box::into_raw(Box::new(file)).cast()
}

unsafe extern "C" fn make_dirs(payload: *mut c_void, dir: *const c_char) -> c_int {
    guarded(|| storage(payload).make_dirs(path(dir, "make_dirs")?))
}

unsafe extern "C" fn create(payload: *mut c_void, p: *const c_char, file: *mut *mut c_void) -> c_int {
    guarded(|| {
        let out = storage(payload).create(path(p, "create")?)?;
        *file = into_file_handle(out);
        Ok(())
    })
}

unsafe extern "C" fn open_append(payload: *mut c_void, p: *const c_char, file: *mut *mut c_void) -> c_int {
    guarded(|| {
        let out = storage(payload).open_append(path(p, "open_append")?)?;
        *file = into_file_handle(out);
        Ok(())
    })
}

/// # Safety
/// `file` is a handle made by `into_file_handle` and not yet closed.
unsafe fn output<'f>(file: *mut c_void) -> &'f mut Box<dyn OutputFile> {
    &mut *(file as *mut Box<dyn OutputFile>)
}

unsafe extern "C" fn write(_payload: *mut c_void, file: *mut c_void, data: *const c_void, size: usize) -> c_int {
    guarded(|| {
        let bytes = if size == 0 { &[][..] } else { std::slice::from_raw_parts(data as *const u8, size) };
        output(file).write(bytes)
    })
}

unsafe extern "C" fn sync(_payload: *mut c_void, file: *mut c_void) -> c_int {
    guarded(|| output(file).sync())
}

unsafe extern "C" fn close(_payload: *mut c_void, file: *mut c_void) -> c_int {
    // SAFETY: called exactly once per file: the handle is taken back here.
    let out = Box::from_raw(file as *mut Box<dyn OutputFile>);
    guarded(move || (*out).close())
}

unsafe extern "C" fn rename(payload: *mut c_void, from: *const c_char, to: *const c_char) -> c_int {
    guarded(|| storage(payload).rename(path(from, "rename")?, path(to, "rename")?))
}

unsafe extern "C" fn sync_dir(payload: *mut c_void, dir: *const c_char) -> c_int {
    guarded(|| storage(payload).sync_dir(path(dir, "sync_dir")?))
}

unsafe extern "C" fn remove(payload: *mut c_void, p: *const c_char) -> c_int {
    guarded(|| storage(payload).remove(path(p, "remove")?))
}

unsafe extern "C" fn list(
    payload: *mut c_void,
    dir: *const c_char,
    entry: sys::ckpt_list_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    names(dir, entry, ctx, "list", |d| storage(payload).list(d))
}

unsafe extern "C" fn list_dirs(
    payload: *mut c_void,
    dir: *const c_char,
    entry: sys::ckpt_list_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    names(dir, entry, ctx, "list_dirs", |d| storage(payload).list_dirs(d))
}

unsafe extern "C" fn remove_dir(payload: *mut c_void, dir: *const c_char) -> c_int {
    guarded(|| storage(payload).remove_dir(path(dir, "remove_dir")?))
}

unsafe extern "C" fn rename_dir(payload: *mut c_void, from: *const c_char, to: *const c_char) -> c_int {
    guarded(|| storage(payload).rename_dir(path(from, "rename_dir")?, path(to, "rename_dir")?))
}

/// Hands the names `list` returns for `dir` to `entry`, stopping at its first non-zero answer.
unsafe fn names<F: FnOnce(&str) -> Result<Vec<String>>>(
    dir: *const c_char,
    entry: sys::ckpt_list_entry_fn,
    ctx: *mut c_void,
    op: &str,
    list: F,
) -> c_int {
    let mut stopped = sys::CKPT_OK;
    let rc = guarded(|| {
        let entry = entry.ok_or_else(|| Error::invalid(format!("storage {op}: NULL entry callback")))?;
        for name in list(path(dir, op)?)? {
            let name =
                CString::new(name).map_err(|_| Error::invalid(format!("storage {op}: a name holds a NUL byte")))?;
            let r = entry(name.as_ptr(), ctx);
            if r != 0 {
                stopped = r;
                break;
            }
        }
        Ok(())
    });
    if rc != sys::CKPT_OK {
        rc
    } else {
        stopped
    }
}

unsafe extern "C" fn open_read(
    payload: *mut c_void,
    p: *const c_char,
    file: *mut *mut c_void,
    size: *mut u64,
) -> c_int {
    guarded(|| {
        let input = storage(payload).open_read(path(p, "open_read")?)?;
        *size = input.size();
        *file = Box::into_raw(Box::new(input)).cast();
        Ok(())
    })
}

unsafe extern "C" fn read_at(
    _payload: *mut c_void,
    file: *mut c_void,
    offset: u64,
    dst: *mut c_void,
    size: usize,
    got: *mut usize,
) -> c_int {
    guarded(|| {
        let input = &mut *(file as *mut Box<dyn InputFile>);
        let buf = if size == 0 {
            &mut [][..]
        } else {
            // The library's buffer may be uninitialised: zeroed first, so it is valid as a `&mut [u8]`.
            ptr::write_bytes(dst as *mut u8, 0, size);
            std::slice::from_raw_parts_mut(dst as *mut u8, size)
        };
        let n = input.read_at(offset, buf)?;
        if n > size {
            return Err(Error::new(Code::Io, format!("storage read_at: {n} bytes reported for a buffer of {size}")));
        }
        *got = n;
        Ok(())
    })
}

unsafe extern "C" fn free_space(payload: *mut c_void, dir: *const c_char, bytes: *mut u64) -> c_int {
    let mut known = true;
    let rc = guarded(|| {
        match storage(payload).free_space(path(dir, "free_space")?)? {
            Some(n) => *bytes = n,
            None => known = false,
        }
        Ok(())
    });
    if rc == sys::CKPT_OK && !known {
        sys::CKPT_EUNSUPPORTED
    } else {
        rc
    }
}

unsafe extern "C" fn close_read(_payload: *mut c_void, file: *mut c_void) {
    // SAFETY: called once per file opened by open_read.
    let input = Box::from_raw(file as *mut Box<dyn InputFile>);
    let _ = catch_unwind(AssertUnwindSafe(move || drop(input)));
}

unsafe extern "C" fn destroy(payload: *mut c_void) {
    // SAFETY: called once, when nothing uses the storage any more.
    let storage = Box::from_raw(payload as *mut Box<dyn Storage>);
    let _ = catch_unwind(AssertUnwindSafe(move || drop(storage)));
}
