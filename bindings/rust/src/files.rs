// SPDX-License-Identifier: Apache-2.0
//! Any file of a storage — listed, stat'ed, read and removed — for a program's own bookkeeping beside ckpt's saves
//! (`ckpt_storage_stat`, `_list`, `_make_dirs`, `_remove`, `ckpt_file_*`).
use std::io::{self, Read, Seek, SeekFrom};
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{check, Code, Result};
use crate::storage::StorageHandle;
use crate::sys;
use crate::util::{borrowed_str, c_path};

/// What is at a path of a storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Bytes; 0 for a directory.
    pub size: u64,
    /// When it last changed, where the storage knows (a local file's mtime, an S3 object's Last-Modified).
    pub modified: Option<SystemTime>,
    /// A directory (on an object store: a prefix that keys go under).
    pub is_dir: bool,
}

/// The files of a storage: the local filesystem (and the S3 storage `s3://bucket/key` paths name) with
/// [`Files::local`], or a [`StorageHandle`]'s with [`Files::new`]. Errors carry the library's code
/// ([`Code::NotFound`] for a missing path) and its message naming the path.
#[derive(Clone, Debug, Default)]
pub struct Files {
    storage: Option<StorageHandle>,
}

impl Files {
    /// The local filesystem, and S3 for `s3://` paths.
    pub fn local() -> Files {
        Files { storage: None }
    }

    /// The files of `storage`.
    pub fn new(storage: &StorageHandle) -> Files {
        Files { storage: Some(storage.clone()) }
    }

    fn raw(&self) -> *mut sys::ckpt_storage {
        self.storage.as_ref().map_or(ptr::null_mut(), StorageHandle::as_ptr)
    }

    /// What is at `path`; `Ok(None)` when nothing is.
    pub fn stat(&self, path: impl AsRef<Path>) -> Result<Option<FileInfo>> {
        let p = c_path(path.as_ref())?;
        let mut info = sys::ckpt_file_info { size: 0, modified_ns: 0, is_dir: 0, reserved: 0 };
        // SAFETY: a valid storage (or NULL), C string and out-pointer.
        let rc = unsafe { sys::ckpt_storage_stat(self.raw(), p.as_ptr(), &mut info) };
        if rc == sys::CKPT_ENOTFOUND {
            return Ok(None);
        }
        check(rc)?;
        let modified = match info.modified_ns {
            sys::CKPT_TIME_UNKNOWN => None,
            ns if ns >= 0 => UNIX_EPOCH.checked_add(Duration::from_nanos(ns as u64)),
            ns => UNIX_EPOCH.checked_sub(Duration::from_nanos(ns.unsigned_abs())),
        };
        Ok(Some(FileInfo { size: info.size, modified, is_dir: info.is_dir != 0 }))
    }

    /// How many bytes of the file at `path` have blocks it shares with other files (what incremental saves leave on
    /// XFS or btrfs); `Ok(None)` where the storage cannot tell (S3, memory, a filesystem without FIEMAP).
    pub fn shared_bytes(&self, path: impl AsRef<Path>) -> Result<Option<u64>> {
        let p = c_path(path.as_ref())?;
        let mut shared = 0u64;
        // SAFETY: a valid storage (or NULL), C string and out-pointer.
        let rc = unsafe { sys::ckpt_storage_shared_bytes(self.raw(), p.as_ptr(), &mut shared) };
        if rc == sys::CKPT_EUNSUPPORTED {
            return Ok(None);
        }
        check(rc)?;
        Ok(Some(shared))
    }

    /// The names in `dir`, sorted; a subdirectory's ends in `/`.
    pub fn list(&self, dir: impl AsRef<Path>) -> Result<Vec<String>> {
        unsafe extern "C" fn entry(name: *const c_char, ctx: *mut c_void) -> c_int {
            // SAFETY: ctx is the Vec below; name a C string valid for the call.
            let names = &mut *(ctx as *mut Vec<String>);
            names.push(borrowed_str(name).unwrap_or_default().to_owned());
            sys::CKPT_OK
        }
        let d = c_path(dir.as_ref())?;
        let mut names: Vec<String> = Vec::new();
        // SAFETY: the callback only pushes onto `names`, which outlives the call.
        check(unsafe {
            sys::ckpt_storage_list(self.raw(), d.as_ptr(), Some(entry), (&mut names as *mut Vec<String>).cast())
        })?;
        Ok(names)
    }

    /// Creates `dir` and its missing parents (nothing on an object store).
    pub fn make_dirs(&self, dir: impl AsRef<Path>) -> Result<()> {
        let d = c_path(dir.as_ref())?;
        // SAFETY: a valid storage (or NULL) and C string.
        check(unsafe { sys::ckpt_storage_make_dirs(self.raw(), d.as_ptr()) })
    }

    /// Removes the file at `path`, or the directory: an empty one, or with `recursive` everything in it
    /// ([`Code::Exists`] for a directory that is not empty, without it).
    pub fn remove(&self, path: impl AsRef<Path>, recursive: bool) -> Result<()> {
        let p = c_path(path.as_ref())?;
        let flags = if recursive { sys::CKPT_STORAGE_REMOVE_RECURSIVE } else { 0 };
        // SAFETY: a valid storage (or NULL) and C string.
        check(unsafe { sys::ckpt_storage_remove(self.raw(), p.as_ptr(), flags) })
    }

    /// Opens the file at `path` for reading.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<File> {
        let p = c_path(path.as_ref())?;
        let mut raw = ptr::null_mut();
        let mut size = 0u64;
        // SAFETY: valid out-pointers; the handle keeps its own reference to the storage.
        check(unsafe { sys::ckpt_file_open(&mut raw, self.raw(), p.as_ptr(), &mut size) })?;
        let raw = NonNull::new(raw).expect("the library returned CKPT_OK with a NULL file");
        Ok(File { raw, size, pos: 0 })
    }
}

/// A file of a storage opened for reading; [`Read`] and [`Seek`] over [`File::read_at`].
#[derive(Debug)]
pub struct File {
    raw: NonNull<sys::ckpt_file>,
    size: u64,
    pos: u64,
}

// SAFETY: the handle is used by one thread at a time (&mut self), as ckpt_file_read asks; it owns its storage
// reference, which is thread-safe.
unsafe impl Send for File {}

impl File {
    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Reads up to `dst.len()` bytes at `offset`, returning how many: fewer only at the end of the file.
    pub fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<usize> {
        let mut got = 0usize;
        // SAFETY: dst is valid for dst.len() bytes; the handle is ours.
        check(unsafe { sys::ckpt_file_read(self.raw.as_ptr(), offset, dst.as_mut_ptr().cast(), dst.len(), &mut got) })?;
        Ok(got)
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(self.pos, buf).map_err(|e| {
            let kind = if e.code() == Code::NotFound { io::ErrorKind::NotFound } else { io::ErrorKind::Other };
            io::Error::new(kind, e)
        })?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            SeekFrom::Start(at) => (at as i128, 0i128),
            SeekFrom::Current(d) => (self.pos as i128, d as i128),
            SeekFrom::End(d) => (self.size as i128, d as i128),
        };
        let at = base + delta;
        if at < 0 || at > u64::MAX as i128 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "seek before the start of the file"));
        }
        self.pos = at as u64;
        Ok(self.pos)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: our handle, closed once.
        unsafe { sys::ckpt_file_close(self.raw.as_ptr()) }
    }
}
