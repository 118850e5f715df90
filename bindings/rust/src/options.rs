// SPDX-License-Identifier: Apache-2.0
//! `Options` (`ckpt_options`): how saves write and reads check .npz files, taken by every call that
//! saves, reads or restores ([`Vars`](crate::Vars), [`Reader`](crate::Reader), managers, writers, steps).
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Arc;

use crate::error::{check, Result};
use crate::storage::{set_callback_message, StorageHandle};
use crate::sys;
use crate::util::c_path;

/// How arrays are laid out in the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Reading: detect either; writing: plain.
    Auto,
    /// `<name>.npy` per variable, as `np.savez(**vars)` writes.
    Plain,
    /// `names.npy` plus `0.npy`, `1.npy`, … as `objax.io.save_var_collection` writes.
    Objax,
}

/// How members are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Stored, as `np.savez` writes (the default).
    Store,
    /// Deflate, as `np.savez_compressed` writes.
    Deflate,
}

/// The file format: what saves write and reads accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Saving: safetensors for a path ending in `.safetensors`, `.npz` for any other; reading: either, told by the
    /// file's content.
    Auto,
    /// A zip of `.npy` members, as `numpy.savez` writes.
    Npz,
    /// An 8-byte length, a JSON header and the tensors' bytes, as Hugging Face's `safetensors` writes.
    Safetensors,
}

type RenameFn = dyn Fn(&str) -> Option<String> + Send + Sync;
type ProgressFn = dyn Fn(u64, u64) + Send + Sync;

// Boxed once more so that the library's `void *payload` is a thin pointer.
pub(crate) struct Renamer(Box<RenameFn>);
pub(crate) struct Progress(Box<ProgressFn>);

/// Options of saves, reads and restores (`ckpt_options`). Unset fields keep the library's defaults.
///
/// ```
/// let options = ckpt::Options::new()
///     .layout(ckpt::Layout::Objax)
///     .compression(ckpt::Compression::Deflate)
///     .rename(|name| name.strip_prefix("model.").map(String::from));
/// # let _ = options;
/// ```
#[derive(Clone, Default)]
pub struct Options {
    layout: Option<Layout>,
    format: Option<Format>,
    max_shard_bytes: Option<u64>,
    compression: Option<Compression>,
    level: Option<i32>,
    max_header_bytes: Option<u64>,
    max_members: Option<u64>,
    max_total_bytes: Option<u64>,
    partial: bool,
    map_unverified: bool,
    map_writable: bool,
    chunk_hashes: bool,
    base: Option<PathBuf>,
    rename: Option<Arc<Renamer>>,
    progress: Option<Arc<Progress>>,
    storage: Option<StorageHandle>,
}

impl Options {
    /// The defaults: layout detected on reading and plain on writing, stored members, the local filesystem.
    pub fn new() -> Options {
        Options::default()
    }

    /// The layout saves write (and reads require, unless [`Layout::Auto`]).
    #[must_use]
    pub fn layout(mut self, layout: Layout) -> Options {
        self.layout = Some(layout);
        self
    }

    /// The format saves write (by default the path's: safetensors for a name ending in `.safetensors`) and reads
    /// require (by default either, told by the content). A safetensors file has no layouts and no compression, and
    /// holds no complex128, string, bytes or void arrays: such a save fails before anything is written.
    #[must_use]
    pub fn format(mut self, format: Format) -> Options {
        self.format = Some(format);
        self
    }

    /// Saves of a safetensors path `DIR/model.safetensors`: Hugging Face's sharded layout with at most this many
    /// bytes of tensors per shard — `model-00001-of-0000N.safetensors` … and `model.safetensors.index.json`, or the
    /// one file when everything fits. Every read takes the index (or the folder) as one checkpoint.
    #[must_use]
    pub fn max_shard_bytes(mut self, bytes: u64) -> Options {
        self.max_shard_bytes = Some(bytes);
        self
    }

    /// Stored or deflated members (writing only).
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Options {
        self.compression = Some(compression);
        self
    }

    /// Deflate level 1..=9; 0 is zlib's default.
    #[must_use]
    pub fn level(mut self, level: i32) -> Options {
        self.level = Some(level);
        self
    }

    /// The npy header limit per member (default 10000, numpy's).
    #[must_use]
    pub fn max_header_bytes(mut self, limit: u64) -> Options {
        self.max_header_bytes = Some(limit);
        self
    }

    /// The most zip members a file read may have (default 2^24).
    #[must_use]
    pub fn max_members(mut self, limit: u64) -> Options {
        self.max_members = Some(limit);
        self
    }

    /// The most array bytes a file read may hold, all arrays together (default: no limit).
    #[must_use]
    pub fn max_total_bytes(mut self, limit: u64) -> Options {
        self.max_total_bytes = Some(limit);
        self
    }

    /// Partial restores (`CKPT_PARTIAL`): a variable the file does not have is left untouched instead of
    /// failing the restore, and [`Vars::restored`](crate::Vars::restored) tells which were filled. A variable
    /// found with another dtype or shape still fails it ([`Code::Mismatch`](crate::Code::Mismatch)).
    #[must_use]
    pub fn partial(mut self, partial: bool) -> Options {
        self.partial = partial;
        self
    }

    /// Opening: [`Reader::map`](crate::Reader::map) and [`Reader::map_bytes`](crate::Reader::map_bytes) skip the CRC-32 check of mapped arrays
    /// (`CKPT_MAP_UNVERIFIED`), trading integrity for latency: views then cost microseconds whatever their size,
    /// and corrupt bytes are handed over as they are. For files verified already.
    #[must_use]
    pub fn map_unverified(mut self, yes: bool) -> Options {
        self.map_unverified = yes;
        self
    }

    /// Opening: the file's mapping is copy-on-write instead of read-only (`CKPT_MAP_WRITABLE`): pages written
    /// are copied into this process, and the file never changes. [`Reader::map_vars`](crate::Reader::map_vars) needs it.
    #[must_use]
    pub fn map_writable(mut self, yes: bool) -> Options {
        self.map_writable = yes;
        self
    }

    /// Saves: the hashes of each stored array's 16 KiB chunks go into one more member, `__ckpt_chunks__.npy`
    /// (`CKPT_NPZ_CHUNK_HASHES`; numpy lists it, ckpt's readers hide it), so that a later save can take the file as
    /// its [`base`](Options::base). A deflated save records none.
    #[must_use]
    pub fn chunk_hashes(mut self, on: bool) -> Options {
        self.chunk_hashes = on;
        self
    }

    /// Saves ([`Vars::save_with`](crate::Vars::save_with)): an earlier file, a path in the same storage, whose
    /// unchanged chunks this save shares (clones, where the filesystem can: XFS, btrfs) instead of writing them;
    /// implies [`chunk_hashes`](Options::chunk_hashes). The file's bytes are those of a full save with chunk
    /// hashes: a base that cannot serve (missing, or without chunk hashes) makes a full save, never an error.
    #[must_use]
    pub fn base(mut self, path: impl AsRef<Path>) -> Options {
        self.base = Some(path.as_ref().to_path_buf());
        self
    }

    /// A renamer for restores (objax's `renamer`): maps each name on disk to the variable name it restores, or
    /// `None` to keep it. Returning an empty name fails the restore with [`Code::InvalidArgument`](crate::Code::InvalidArgument).
    #[must_use]
    pub fn rename<F: Fn(&str) -> Option<String> + Send + Sync + 'static>(mut self, f: F) -> Options {
        self.rename = Some(Arc::new(Renamer(Box::new(f))));
        self
    }

    /// Progress of saves and reads: `(done_bytes, total_bytes)` of array data, never decreasing, from the
    /// thread doing the work (never two at once).
    #[must_use]
    pub fn progress<F: Fn(u64, u64) + Send + Sync + 'static>(mut self, f: F) -> Options {
        self.progress = Some(Arc::new(Progress(Box::new(f))));
        self
    }

    /// Where files are read and written (default: the local filesystem). Managers and writers take their
    /// storage from their own options instead.
    #[must_use]
    pub fn storage(mut self, storage: StorageHandle) -> Options {
        self.storage = Some(storage);
        self
    }

    /// Whether [`map_writable`](Options::map_writable) is set.
    pub(crate) fn is_map_writable(&self) -> bool {
        self.map_writable
    }

    /// The C struct for a call: the library's defaults (`ckpt_options_init`) with the fields set here. It
    /// points into `self` (callbacks, storage), so it lives no longer than `self`.
    pub(crate) fn to_raw(&self, with_storage: bool) -> Result<RawNpzOptions<'_>> {
        let mut raw = MaybeUninit::<sys::ckpt_options>::zeroed();
        // SAFETY: a valid struct of this version to fill.
        check(unsafe { sys::ckpt_options_init(raw.as_mut_ptr(), sys::CKPT_OPTIONS_VERSION) })?;
        // SAFETY: initialised (zeroed, then filled by the library); every field is an integer or pointer.
        let mut raw = unsafe { raw.assume_init() };
        if let Some(layout) = self.layout {
            raw.layout = match layout {
                Layout::Auto => sys::CKPT_LAYOUT_AUTO,
                Layout::Plain => sys::CKPT_LAYOUT_PLAIN,
                Layout::Objax => sys::CKPT_LAYOUT_OBJAX,
            };
        }
        if let Some(format) = self.format {
            raw.format = match format {
                Format::Auto => sys::CKPT_FORMAT_AUTO,
                Format::Npz => sys::CKPT_FORMAT_NPZ,
                Format::Safetensors => sys::CKPT_FORMAT_SAFETENSORS,
            };
        }
        if let Some(bytes) = self.max_shard_bytes {
            raw.max_shard_bytes = bytes;
        }
        if let Some(compression) = self.compression {
            raw.compression = match compression {
                Compression::Store => sys::CKPT_STORE,
                Compression::Deflate => sys::CKPT_DEFLATE,
            };
        }
        if let Some(level) = self.level {
            raw.level = level;
        }
        if let Some(limit) = self.max_header_bytes {
            raw.max_header_bytes = limit;
        }
        if let Some(limit) = self.max_members {
            raw.max_members = limit;
        }
        if let Some(limit) = self.max_total_bytes {
            raw.max_total_bytes = limit;
        }
        if self.partial {
            raw.flags |= sys::CKPT_PARTIAL;
        }
        if self.map_unverified {
            raw.flags |= sys::CKPT_MAP_UNVERIFIED;
        }
        if self.map_writable {
            raw.flags |= sys::CKPT_MAP_WRITABLE;
        }
        if self.chunk_hashes {
            raw.flags |= sys::CKPT_NPZ_CHUNK_HASHES;
        }
        let base = self.base.as_deref().map(c_path).transpose()?;
        if let Some(base) = &base {
            raw.base = base.as_ptr();
        }
        if let Some(rename) = &self.rename {
            raw.rename = Some(rename_trampoline);
            raw.rename_payload = Arc::as_ptr(rename) as *mut c_void;
        }
        if let Some(progress) = &self.progress {
            raw.progress = Some(progress_trampoline);
            raw.progress_payload = Arc::as_ptr(progress) as *mut c_void;
        }
        if with_storage {
            if let Some(storage) = &self.storage {
                raw.storage = storage.as_ptr();
            }
        }
        Ok(RawNpzOptions { raw, _base: base, _options: PhantomData })
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("layout", &self.layout)
            .field("format", &self.format)
            .field("max_shard_bytes", &self.max_shard_bytes)
            .field("compression", &self.compression)
            .field("level", &self.level)
            .field("max_header_bytes", &self.max_header_bytes)
            .field("max_members", &self.max_members)
            .field("max_total_bytes", &self.max_total_bytes)
            .field("partial", &self.partial)
            .field("map_unverified", &self.map_unverified)
            .field("map_writable", &self.map_writable)
            .field("chunk_hashes", &self.chunk_hashes)
            .field("base", &self.base)
            .field("rename", &self.rename.is_some())
            .field("progress", &self.progress.is_some())
            .field("storage", &self.storage)
            .finish()
    }
}

/// A `ckpt_options` whose pointers borrow the [`Options`] it was made from.
pub(crate) struct RawNpzOptions<'o> {
    raw: sys::ckpt_options,
    // What raw.base points to: the bytes of a CString stay where they are when it moves.
    _base: Option<CString>,
    _options: PhantomData<&'o Options>,
}

impl RawNpzOptions<'_> {
    pub(crate) fn as_ptr(&self) -> *const sys::ckpt_options {
        &self.raw
    }
}

unsafe extern "C" fn rename_trampoline(
    name: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
    payload: *mut c_void,
) -> c_int {
    // SAFETY: name is a C string the library passes for the call.
    let name = CStr::from_ptr(name).to_string_lossy();
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: payload is the Renamer an Options (kept alive by the caller) points to.
        let renamer = &*(payload as *const Renamer);
        (renamer.0)(&name)
    }));
    match result {
        Ok(None) => 0,
        Ok(Some(new)) if new.is_empty() => {
            set_callback_message(&format!("it gave an empty name for '{name}'"));
            sys::CKPT_EINVAL
        }
        Ok(Some(new)) if new.len() > c_int::MAX as usize => {
            set_callback_message("it gave a name too long for ckpt");
            sys::CKPT_EINVAL
        }
        Ok(Some(new)) => {
            if new.len() <= buf_size {
                // SAFETY: buf holds buf_size bytes.
                ptr::copy_nonoverlapping(new.as_ptr(), buf as *mut u8, new.len());
            }
            // Too long: the length asks for a larger buffer, and the library calls again.
            new.len() as c_int
        }
        Err(_) => {
            set_callback_message("it panicked");
            sys::CKPT_ERROR
        }
    }
}

unsafe extern "C" fn progress_trampoline(done: u64, total: u64, payload: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: payload is the Progress an Options (kept alive by the caller) points to.
        let progress = &*(payload as *const Progress);
        (progress.0)(done, total)
    }));
}
