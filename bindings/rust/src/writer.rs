// SPDX-License-Identifier: Apache-2.0
//! `Writer`: pytorch-pfn-extras' Simple, Thread and Queue writers (`ckpt_writer`), saving what a closure writes
//! into a [`Sink`], or a [`Vars`], atomically and durably, in the caller's thread or in the background.
use std::ffi::{CStr, OsStr};
use std::io;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{check, Code, Error, Result};
use crate::options::Options;
use crate::storage::{error_code, set_callback_message, StorageHandle};
use crate::sys;
use crate::util::{c_path, c_string};
use crate::vars::Vars;

/// Where saves run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriterKind {
    /// In the caller's thread; a save returns its own result.
    Simple,
    /// One background save at a time: a save first waits for the previous one.
    Thread,
    /// One background thread behind a queue of [`WriterOptions::queue_depth`] saves.
    Queue,
}

/// What runs after each durable save: [`WriterOptions::after_save`].
type AfterSave = dyn Fn(&Path) -> Result<()> + Send + Sync;

/// Options of a [`Writer`] (`ckpt_writer_options`).
#[derive(Clone)]
pub struct WriterOptions {
    kind: WriterKind,
    queue_depth: u32,
    storage: Option<StorageHandle>,
    out_dir: Option<PathBuf>,
    after_save: Option<Arc<AfterSave>>,
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("kind", &self.kind)
            .field("queue_depth", &self.queue_depth)
            .field("storage", &self.storage)
            .field("out_dir", &self.out_dir)
            .field("after_save", &self.after_save.as_ref().map(|_| "Fn(&Path)"))
            .finish()
    }
}

impl WriterOptions {
    /// A writer of `kind`, on the local filesystem, saving into "." by default.
    pub fn new(kind: WriterKind) -> WriterOptions {
        WriterOptions { kind, queue_depth: 0, storage: None, out_dir: None, after_save: None }
    }

    /// Queue writers: saves queued or running before a save blocks (0 means 1).
    #[must_use]
    pub fn queue_depth(mut self, depth: u32) -> WriterOptions {
        self.queue_depth = depth;
        self
    }

    /// The storage saves go to (the writer keeps its own reference).
    #[must_use]
    pub fn storage(mut self, storage: StorageHandle) -> WriterOptions {
        self.storage = Some(storage);
        self
    }

    /// The directory of saves given no directory of their own (default ".").
    #[must_use]
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> WriterOptions {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Calls `f` with the path saved to (`<out_dir>/<filename>`) after each save that succeeded, once its file is
    /// durable under its name (`ckpt_writer_options.after_save`): in the saving call for simple writers, on the
    /// writer's thread otherwise, before [`Writer::wait`] returns; never after a failed save. An error it returns
    /// (or a panic) fails that save — the file stays — and comes back like the save's own error, with its code
    /// and the message "`<path>`: the after_save callback failed: `<its message>`". It must not use its own
    /// writer. Where pytorch-pfn-extras' snapshot retention (`n_retains`) belongs.
    #[must_use]
    pub fn after_save<F>(mut self, f: F) -> WriterOptions
    where
        F: Fn(&Path) -> Result<()> + Send + Sync + 'static,
    {
        self.after_save = Some(Arc::new(f));
        self
    }
}

impl Default for WriterOptions {
    fn default() -> WriterOptions {
        WriterOptions::new(WriterKind::Simple)
    }
}

/// The file a save closure writes into: `std::io::Write` over `ckpt_sink_write`. A failed write fails the
/// save whatever the closure then returns, and the target keeps its previous content.
pub struct Sink<'s> {
    raw: *mut sys::ckpt_sink,
    failed: bool,
    _call: PhantomData<&'s mut sys::ckpt_sink>,
}

impl Sink<'_> {
    /// Appends all of `data`; the error is the storage's (every later write fails the same way).
    pub fn write_bytes(&mut self, data: &[u8]) -> Result<()> {
        // SAFETY: the sink is valid for the save function's call, which `'s` spans.
        let result = check(unsafe { sys::ckpt_sink_write(self.raw, data.as_ptr().cast(), data.len()) });
        self.failed |= result.is_err();
        result
    }
}

impl io::Write for Sink<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_bytes(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        Ok(self.write_bytes(data)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type SaveFn = Box<dyn FnOnce(&mut Sink<'_>) -> Result<()> + Send>;

/// One submitted save's closure, reached by the library through the save function's payload. It stays in
/// the writer until the library is known to be done with it (the save ran, or a wait or finalize returned).
struct Pending {
    save: Mutex<Option<SaveFn>>,
    done: AtomicBool,
    // What else the save reads while it runs (a save_vars' progress callback).
    _keep: Option<Options>,
}

unsafe extern "C" fn save_trampoline(sink: *mut sys::ckpt_sink, payload: *mut c_void) -> c_int {
    let pending = payload as *const Pending;
    let mut sink = Sink { raw: sink, failed: false, _call: PhantomData };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the writer keeps the Pending alive until the library is done with this save.
        let pending = &*pending;
        let save = pending.save.lock().unwrap_or_else(|p| p.into_inner()).take();
        let save = save.ok_or_else(|| Error::new(Code::Internal, "a save function was called twice"))?;
        save(&mut sink)
    }));
    let rc = match result {
        Ok(Ok(())) => sys::CKPT_OK,
        // After a failed write the library reports that write's error, whatever the closure says.
        Ok(Err(e)) if sink.failed => error_code(&e),
        Ok(Err(e)) => {
            // The save fails with "<path>: the save function failed: <the closure's message>".
            set_callback_message(e.message());
            error_code(&e)
        }
        Err(_) => {
            set_callback_message("the save closure panicked");
            sys::CKPT_ERROR
        }
    };
    // Last touch: after this the writer may free the Pending.
    (*pending).done.store(true, Ordering::Release);
    rc
}

unsafe extern "C" fn after_save_trampoline(path: *const c_char, payload: *mut c_void) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the payload is the writer's boxed closure, alive until ckpt_writer_free returns; the path is a
        // NUL-terminated string the library keeps for the call.
        let f = &*(payload as *const Arc<AfterSave>);
        f(Path::new(OsStr::from_bytes(CStr::from_ptr(path).to_bytes())))
    }));
    match result {
        Ok(Ok(())) => sys::CKPT_OK,
        Ok(Err(e)) => {
            set_callback_message(e.message());
            error_code(&e)
        }
        Err(_) => {
            set_callback_message("the after_save closure panicked");
            sys::CKPT_ERROR
        }
    }
}

/// A writer (`ckpt_writer`): saves bytes to files atomically and durably, in the caller's thread or in the
/// background. Errors of background saves are never lost: each comes back exactly once, from the next save,
/// [`wait`](Writer::wait) or [`finalize`](Writer::finalize).
///
/// Dropping a writer finalizes it but discards errors nobody asked for: call `finalize` first.
pub struct Writer {
    raw: NonNull<sys::ckpt_writer>,
    kind: WriterKind,
    // Boxed: the library holds pointers to them while the vector grows.
    #[allow(clippy::vec_box)]
    pending: Vec<Box<Pending>>,
    // Boxed: the library holds a pointer to it (a thin one, to the Arc) until the writer is freed.
    #[allow(clippy::redundant_allocation)]
    _after_save: Option<Box<Arc<AfterSave>>>,
}

// SAFETY: a handle used by one thread at a time (not Sync); the closures it holds are Send.
unsafe impl Send for Writer {}

impl Writer {
    /// Creates a writer; background kinds start their thread.
    pub fn new(options: &WriterOptions) -> Result<Writer> {
        let mut raw = MaybeUninit::<sys::ckpt_writer_options>::zeroed();
        // SAFETY: a struct of this version to fill with the library's defaults.
        check(unsafe { sys::ckpt_writer_options_init(raw.as_mut_ptr(), sys::CKPT_WRITER_OPTIONS_VERSION) })?;
        // SAFETY: initialised above.
        let mut raw = unsafe { raw.assume_init() };
        raw.kind = match options.kind {
            WriterKind::Simple => sys::CKPT_WRITER_SIMPLE,
            WriterKind::Thread => sys::CKPT_WRITER_THREAD,
            WriterKind::Queue => sys::CKPT_WRITER_QUEUE,
        };
        raw.queue_depth = options.queue_depth;
        if let Some(storage) = &options.storage {
            raw.storage = storage.as_ptr();
        }
        let out_dir = options.out_dir.as_deref().map(c_path).transpose()?;
        if let Some(dir) = &out_dir {
            raw.out_dir = dir.as_ptr();
        }
        let after_save = options.after_save.clone().map(Box::new);
        if let Some(f) = &after_save {
            raw.after_save = Some(after_save_trampoline);
            raw.after_save_payload = &**f as *const Arc<AfterSave> as *mut c_void;
        }
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers; the library copies out_dir and takes its own storage reference; the closure's
        // box lives in the writer, which frees the library's writer before it.
        check(unsafe { sys::ckpt_writer_new(&mut out, &raw) })?;
        let raw = NonNull::new(out).expect("the library returned CKPT_OK with a NULL writer");
        Ok(Writer { raw, kind: options.kind, pending: Vec::new(), _after_save: after_save })
    }

    /// Saves what `save` writes to `filename` in the writer's directory. For background kinds `save` runs
    /// later on the writer's thread and this returns once it is queued — or with the error of an earlier
    /// background save, in which case this save was not started. If `save` returns an error (or a write to the
    /// sink fails), the save fails and the target keeps its previous content.
    pub fn save<F>(&mut self, filename: &str, save: F) -> Result<()>
    where
        F: FnOnce(&mut Sink<'_>) -> Result<()> + Send + 'static,
    {
        self.submit(None, filename, Box::new(save), 0)
    }

    /// As [`save`](Writer::save), into `out_dir`.
    pub fn save_in<F>(&mut self, out_dir: impl AsRef<Path>, filename: &str, save: F) -> Result<()>
    where
        F: FnOnce(&mut Sink<'_>) -> Result<()> + Send + 'static,
    {
        self.submit(Some(out_dir.as_ref()), filename, Box::new(save), 0)
    }

    /// Appends what `save` writes to the file in place — not atomic (pfn-extras' append mode). `out_dir`
    /// `None` is the writer's directory.
    pub fn append<F>(&mut self, out_dir: Option<&Path>, filename: &str, save: F) -> Result<()>
    where
        F: FnOnce(&mut Sink<'_>) -> Result<()> + Send + 'static,
    {
        self.submit(out_dir, filename, Box::new(save), sys::CKPT_WRITER_APPEND)
    }

    fn submit(&mut self, out_dir: Option<&Path>, filename: &str, save: SaveFn, flags: u32) -> Result<()> {
        let out_dir = out_dir.map(c_path).transpose()?;
        let filename = c_string("file name", filename)?;
        self.prune();
        let pending = Box::new(Pending { save: Mutex::new(Some(save)), done: AtomicBool::new(false), _keep: None });
        let payload = &*pending as *const Pending as *mut c_void;
        self.pending.push(pending);
        // SAFETY: valid strings; the payload stays alive in `self.pending` until the library is done with it.
        let rc = unsafe {
            sys::ckpt_writer_save(
                self.raw.as_ptr(),
                out_dir.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
                filename.as_ptr(),
                Some(save_trampoline),
                payload,
                flags,
            )
        };
        self.finish_call(rc, false)
    }

    /// Saves `vars` as .npz to `filename` in the writer's directory (`options`' storage is ignored: the
    /// writer's is used). Background kinds copy every array before this returns, so training may change them
    /// at once.
    pub fn save_vars(&mut self, filename: &str, vars: &Vars<'_>, options: &Options) -> Result<()> {
        // SAFETY: no CKPT_WRITER_NO_COPY: the library copies what it needs before returning.
        unsafe { self.submit_vars(None, filename, vars, options, 0) }
    }

    /// As [`save_vars`](Writer::save_vars), into `out_dir`.
    pub fn save_vars_in(
        &mut self,
        out_dir: impl AsRef<Path>,
        filename: &str,
        vars: &Vars<'_>,
        options: &Options,
    ) -> Result<()> {
        // SAFETY: as save_vars.
        unsafe { self.submit_vars(Some(out_dir.as_ref()), filename, vars, options, 0) }
    }

    /// As [`save_vars`](Writer::save_vars) without the copy (`CKPT_WRITER_NO_COPY`).
    ///
    /// # Safety
    /// `vars` and the data of every array in it must stay alive and unchanged until the save completes:
    /// until [`wait`](Writer::wait) or [`finalize`](Writer::finalize) returns.
    pub unsafe fn save_vars_no_copy(
        &mut self,
        out_dir: Option<&Path>,
        filename: &str,
        vars: &Vars<'_>,
        options: &Options,
    ) -> Result<()> {
        self.submit_vars(out_dir, filename, vars, options, sys::CKPT_WRITER_NO_COPY)
    }

    /// # Safety
    /// With CKPT_WRITER_NO_COPY, as `save_vars_no_copy`.
    unsafe fn submit_vars(
        &mut self,
        out_dir: Option<&Path>,
        filename: &str,
        vars: &Vars<'_>,
        options: &Options,
        flags: u32,
    ) -> Result<()> {
        let out_dir = out_dir.map(c_path).transpose()?;
        let filename = c_string("file name", filename)?;
        self.prune();
        // The options' progress callback runs with the save: kept with the pending saves until a wait.
        let keep = options.clone();
        let raw = keep.to_raw(false)?;
        let rc = sys::ckpt_writer_save_vars(
            self.raw.as_ptr(),
            out_dir.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
            filename.as_ptr(),
            vars.as_ptr(),
            raw.as_ptr(),
            flags,
        );
        if self.kind != WriterKind::Simple {
            self.pending.push(Box::new(Pending {
                save: Mutex::new(None),
                // Not a closure the library calls: only `wait` may release it.
                done: AtomicBool::new(false),
                _keep: Some(keep),
            }));
        }
        self.finish_call(rc, false)
    }

    /// Waits for every queued save; returns the first error not yet reported.
    pub fn wait(&mut self) -> Result<()> {
        // SAFETY: a live writer.
        let rc = unsafe { sys::ckpt_writer_wait(self.raw.as_ptr()) };
        self.finish_call(rc, true)
    }

    /// Waits, then stops the background thread; later saves fail with [`Code::InvalidArgument`]. Returns the
    /// first unreported error; a second call returns `Ok`.
    pub fn finalize(&mut self) -> Result<()> {
        // SAFETY: a live writer.
        let rc = unsafe { sys::ckpt_writer_finalize(self.raw.as_ptr()) };
        self.finish_call(rc, true)
    }

    /// The result of a writer call; `settled`: no save is in flight any more (or, for simple writers, ever).
    fn finish_call(&mut self, rc: c_int, settled: bool) -> Result<()> {
        let result = check(rc);
        if settled || self.kind == WriterKind::Simple {
            // Every save so far has finished: the library calls none of the closures any more.
            self.pending.clear();
        }
        result
    }

    /// Frees the closures of saves that have run.
    fn prune(&mut self) {
        self.pending.retain(|p| !p.done.load(Ordering::Acquire));
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // SAFETY: finalizes (every save finishes) and frees; the pending closures are freed after.
        unsafe { sys::ckpt_writer_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("kind", &self.kind).field("pending", &self.pending.len()).finish()
    }
}
