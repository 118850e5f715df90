// SPDX-License-Identifier: Apache-2.0
//! `Manager`: objax's `Checkpoint` (`ckpt_manager`) — a directory of numbered checkpoints that a training
//! program saves into and resumes from.
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::comm::CommHandle;
use crate::error::{check, Error, Result};
use crate::options::Options;
use crate::storage::StorageHandle;
use crate::sys;
use crate::util::{c_path, c_string};
use crate::vars::Vars;

/// The level of a manager's log message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogLevel {
    /// "Resuming from …", "No checkpoints found in …".
    Info,
    /// A corrupt checkpoint skipped, a stale temporary removed, retention that could not delete.
    Warning,
    /// A level this binding does not know.
    Other(i32),
}

type LogFn = dyn Fn(LogLevel, &str) + Send + Sync;
struct Logger(Box<LogFn>);

/// Options of [`Manager::open`] (`ckpt_manager_options`). Unset fields keep the library's defaults.
#[derive(Clone, Default)]
pub struct ManagerOptions {
    keep: Option<i32>,
    keep_every: Option<i64>,
    flags: u32,
    queue_depth: Option<u32>,
    subdir: Option<String>,
    npz: Option<Options>,
    log: Option<Arc<Logger>>,
    storage: Option<StorageHandle>,
    keep_best: Option<i32>,
    best_metric: Option<String>,
    best_mode: Option<BestMode>,
    keep_seconds: Option<i64>,
    save_every_steps: Option<i64>,
    save_every_seconds: Option<i64>,
    max_staging_bytes: Option<u64>,
    comm: Option<CommHandle>,
    full_every: Option<i64>,
}

/// Whether lower or higher values of the best metric are better (`CKPT_BEST_MIN`, `CKPT_BEST_MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BestMode {
    /// Lower is better (a loss).
    Min,
    /// Higher is better (an accuracy).
    Max,
}

impl ManagerOptions {
    /// The defaults: keep the newest 10, subdirectory "ckpt", synchronous saves, fallback past corrupt files.
    pub fn new() -> ManagerOptions {
        ManagerOptions::default()
    }

    /// The newest checkpoints kept (objax's `keep_ckpts`); `<= 0` keeps all.
    #[must_use]
    pub fn keep(mut self, keep: i32) -> ManagerOptions {
        self.keep = Some(keep);
        self
    }

    /// Also keep every index that is a multiple of this (0: off).
    #[must_use]
    pub fn keep_every(mut self, every: i64) -> ManagerOptions {
        self.keep_every = Some(every);
        self
    }

    fn flag(mut self, flag: u32, on: bool) -> ManagerOptions {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
        self
    }

    /// Saves run on a background writer (`CKPT_MANAGER_ASYNC`): arrays are copied before `save` returns, and
    /// errors come back from the next `save`, `wait` or `close`.
    #[must_use]
    pub fn asynchronous(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_ASYNC, on)
    }

    /// Whether restoring the latest tries older checkpoints when the newest is unreadable (on by default);
    /// `fallback(false)` fails on it instead.
    #[must_use]
    pub fn fallback(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_NO_FALLBACK, !on)
    }

    /// Whether opening creates a missing directory (on by default); `make_dir(false)` needs it to exist already.
    #[must_use]
    pub fn make_dir(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_NO_MAKEDIR, !on)
    }

    /// `fallback(!on)`.
    #[must_use]
    #[deprecated(note = "use fallback(false)")]
    pub fn no_fallback(self, on: bool) -> ManagerOptions {
        self.fallback(!on)
    }

    /// `make_dir(!on)`.
    #[must_use]
    #[deprecated(note = "use make_dir(false)")]
    pub fn no_makedir(self, on: bool) -> ManagerOptions {
        self.make_dir(!on)
    }

    /// Opens a directory another manager may hold, for evaluators and tools: no lock, no cleanup, nothing
    /// created; saves fail with [`Code::InvalidArgument`](crate::Code::InvalidArgument).
    #[must_use]
    pub fn read_only(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_READ_ONLY, on)
    }

    /// Whether saves are incremental (on by default; `incremental(false)` is `CKPT_MANAGER_FULL_SAVES`): where the
    /// storage can share blocks between files (XFS with reflink, btrfs; the memory storage copies instead), each file
    /// records its chunk hashes and a save shares the 16 KiB chunks that did not change with the checkpoint saved
    /// before it. Every file stays complete.
    #[must_use]
    pub fn incremental(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_FULL_SAVES, !on)
    }

    /// With [`incremental`](ManagerOptions::incremental) saves, every `n`-th save of the manager shares nothing:
    /// files that share blocks share a media error (0: never).
    #[must_use]
    pub fn full_every(mut self, n: i64) -> ManagerOptions {
        self.full_every = Some(n);
        self
    }

    /// Log to stderr when no [`log`](ManagerOptions::log) callback is set (objax's `verbose=True`).
    #[must_use]
    pub fn verbose(self, on: bool) -> ManagerOptions {
        self.flag(sys::CKPT_MANAGER_VERBOSE, on)
    }

    /// Asynchronous saves in flight before `save` blocks (0 means 1).
    #[must_use]
    pub fn queue_depth(mut self, depth: u32) -> ManagerOptions {
        self.queue_depth = Some(depth);
        self
    }

    /// The checkpoint directory inside the logdir (default "ckpt", objax's `DIR_NAME`; "" is the logdir).
    #[must_use]
    pub fn subdir(mut self, subdir: &str) -> ManagerOptions {
        self.subdir = Some(subdir.to_string());
        self
    }

    /// How saves write (layout, deflate) and reads check (limits, renamer); their storage is ignored (see
    /// [`storage`](ManagerOptions::storage)).
    #[must_use]
    pub fn npz(mut self, npz: Options) -> ManagerOptions {
        self.npz = Some(npz);
        self
    }

    /// Receives the manager's log lines, from the thread doing the work (a background save's, for
    /// retention). A panic in it is caught and ignored.
    #[must_use]
    pub fn log<F: Fn(LogLevel, &str) + Send + Sync + 'static>(mut self, f: F) -> ManagerOptions {
        self.log = Some(Arc::new(Logger(Box::new(f))));
        self
    }

    /// The storage of the checkpoint directory (default: the local filesystem).
    #[must_use]
    pub fn storage(mut self, storage: StorageHandle) -> ManagerOptions {
        self.storage = Some(storage);
        self
    }

    /// Makes the manager collective over `comm`'s ranks (sharded checkpoints, docs/distributed.md): every rank
    /// opens it, saves its own variables as one shard of each step, and restores the step rank 0 chooses.
    #[must_use]
    pub fn comm(mut self, comm: CommHandle) -> ManagerOptions {
        self.comm = Some(comm);
        self
    }

    /// Also keep the `n` best checkpoints by [`best_metric`](ManagerOptions::best_metric) (0: off).
    /// Checkpoints without the metric, or with NaN, are neither best nor counted.
    #[must_use]
    pub fn keep_best(mut self, n: i32) -> ManagerOptions {
        self.keep_best = Some(n);
        self
    }

    /// The metric of `keep_best` and [`Manager::best`], and whether lower or higher is better.
    #[must_use]
    pub fn best_metric(mut self, name: &str, mode: BestMode) -> ManagerOptions {
        self.best_metric = Some(name.to_string());
        self.best_mode = Some(mode);
        self
    }

    /// Also keep what was saved within the last `seconds`, by the time each file records (0: off).
    #[must_use]
    pub fn keep_seconds(mut self, seconds: i64) -> ManagerOptions {
        self.keep_seconds = Some(seconds);
        self
    }

    /// [`Manager::should_save`] is true at multiples of `steps` (0: off).
    #[must_use]
    pub fn save_every_steps(mut self, steps: i64) -> ManagerOptions {
        self.save_every_steps = Some(steps);
        self
    }

    /// [`Manager::should_save`] is true once `seconds` have passed since the last save or the opening (0: off).
    #[must_use]
    pub fn save_every_seconds(mut self, seconds: i64) -> ManagerOptions {
        self.save_every_seconds = Some(seconds);
        self
    }

    /// With [`asynchronous`](ManagerOptions::asynchronous): the copies held by queued and running saves never
    /// exceed `bytes`; a save whose copy would exceed it first waits for earlier saves, and one larger than the
    /// whole budget is written at once from the caller's arrays, without a copy (0: no limit).
    #[must_use]
    pub fn max_staging_bytes(mut self, bytes: u64) -> ManagerOptions {
        self.max_staging_bytes = Some(bytes);
        self
    }
}

impl std::fmt::Debug for ManagerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerOptions")
            .field("keep", &self.keep)
            .field("keep_every", &self.keep_every)
            .field("flags", &self.flags)
            .field("queue_depth", &self.queue_depth)
            .field("subdir", &self.subdir)
            .field("npz", &self.npz)
            .field("log", &self.log.is_some())
            .field("storage", &self.storage)
            .field("keep_best", &self.keep_best)
            .field("best_metric", &self.best_metric)
            .field("best_mode", &self.best_mode)
            .field("keep_seconds", &self.keep_seconds)
            .field("save_every_steps", &self.save_every_steps)
            .field("save_every_seconds", &self.save_every_seconds)
            .field("max_staging_bytes", &self.max_staging_bytes)
            .field("full_every", &self.full_every)
            .finish()
    }
}

unsafe extern "C" fn log_trampoline(level: c_int, message: *const c_char, payload: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: payload is the Logger the manager keeps alive; message is a C string for the call.
        let logger = &*(payload as *const Logger);
        let message = CStr::from_ptr(message).to_string_lossy();
        let level = match level {
            sys::CKPT_LOG_INFO => LogLevel::Info,
            sys::CKPT_LOG_WARNING => LogLevel::Warning,
            other => LogLevel::Other(other),
        };
        (logger.0)(level, &message)
    }));
}

/// A checkpoint directory `<logdir>/<subdir>` of files `%010d.npz`, locked by this manager while it is open.
///
/// Saves are atomic and durable; after each, retention keeps the newest `keep` (by index, as numbers) and
/// multiples of `keep_every`. Restoring the latest validates each file fully and falls back past corrupt ones.
pub struct Manager {
    raw: Option<NonNull<sys::ckpt_manager>>,
    // The callbacks (log, renamer, progress) the library calls while the manager lives.
    _options: ManagerOptions,
}

// SAFETY: a handle used by one thread at a time (not Sync); its callbacks are Send + Sync.
unsafe impl Send for Manager {}

impl Manager {
    /// Opens (creating it unless `make_dir(false)`) the checkpoint directory of `logdir`. It locks nothing: the first
    /// save takes the directory and removes stale temporaries, and fails with [`Code::Busy`](crate::Code::Busy) while
    /// another process's manager holds it (the message names its pid).
    pub fn open(logdir: impl AsRef<Path>, options: &ManagerOptions) -> Result<Manager> {
        let logdir = c_path(logdir.as_ref())?;
        let options = options.clone();
        let subdir = options.subdir.as_deref().map(|s| c_string("subdir", s)).transpose()?;
        let npz = options.npz.as_ref().map(|n| n.to_raw(false)).transpose()?;
        let best_metric = options.best_metric.as_deref().map(|s| c_string("best_metric", s)).transpose()?;

        let mut raw = MaybeUninit::<sys::ckpt_manager_options>::zeroed();
        // SAFETY: a struct of this version to fill with the library's defaults.
        check(unsafe { sys::ckpt_manager_options_init(raw.as_mut_ptr(), sys::CKPT_MANAGER_OPTIONS_VERSION) })?;
        // SAFETY: initialised above.
        let mut raw = unsafe { raw.assume_init() };
        if let Some(keep) = options.keep {
            raw.keep = keep;
        }
        if let Some(every) = options.keep_every {
            raw.keep_every = every;
        }
        raw.flags |= options.flags;
        if let Some(depth) = options.queue_depth {
            raw.queue_depth = depth;
        }
        if let Some(subdir) = &subdir {
            raw.subdir = subdir.as_ptr();
        }
        if let Some(npz) = &npz {
            raw.npz = npz.as_ptr();
        }
        if let Some(log) = &options.log {
            raw.log = Some(log_trampoline);
            raw.log_payload = Arc::as_ptr(log) as *mut c_void;
        }
        if let Some(storage) = &options.storage {
            raw.storage = storage.as_ptr();
        }
        if let Some(comm) = &options.comm {
            raw.comm = comm.as_ptr();
        }
        if let Some(n) = options.keep_best {
            raw.keep_best = n;
        }
        if let Some(name) = &best_metric {
            raw.best_metric = name.as_ptr();
        }
        if let Some(mode) = options.best_mode {
            raw.best_mode = match mode {
                BestMode::Min => sys::CKPT_BEST_MIN,
                BestMode::Max => sys::CKPT_BEST_MAX,
            };
        }
        if let Some(s) = options.keep_seconds {
            raw.keep_seconds = s;
        }
        if let Some(s) = options.save_every_steps {
            raw.save_every_steps = s;
        }
        if let Some(s) = options.save_every_seconds {
            raw.save_every_seconds = s;
        }
        if let Some(bytes) = options.max_staging_bytes {
            raw.max_staging_bytes = bytes;
        }
        if let Some(n) = options.full_every {
            raw.full_every = n;
        }
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers; the library copies subdir and npz, and calls the callbacks, which `options`
        // (kept by the manager) owns, for as long as the manager lives.
        check(unsafe { sys::ckpt_manager_open(&mut out, logdir.as_ptr(), &raw) })?;
        let raw = NonNull::new(out).expect("the library returned CKPT_OK with a NULL manager");
        Ok(Manager { raw: Some(raw), _options: options })
    }

    fn as_ptr(&self) -> *mut sys::ckpt_manager {
        self.raw.map_or(ptr::null_mut(), |p| p.as_ptr())
    }

    /// Saves `vars` as checkpoint `idx` (>= 0), replacing one that exists, then applies retention.
    /// Asynchronous managers copy the arrays first and return an earlier background save's error, if any.
    pub fn save(&mut self, vars: &Vars<'_>, idx: i64) -> Result<()> {
        // SAFETY: valid handles; asynchronous saves copy the arrays before returning.
        check(unsafe { sys::ckpt_manager_save(self.as_ptr(), vars.as_ptr(), idx) })
    }

    /// As [`save`](Manager::save), also recording `metrics` (name, value) as `ckpt.metric.<name>` in the file's
    /// metadata, for [`metric`](Manager::metric), [`best`](Manager::best) and `keep_best`.
    pub fn save_metrics(&mut self, vars: &Vars<'_>, idx: i64, metrics: &[(&str, f64)]) -> Result<()> {
        let names = metrics.iter().map(|(name, _)| c_string("metric name", name)).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let values: Vec<f64> = metrics.iter().map(|(_, v)| *v).collect();
        // SAFETY: valid handles; names and values hold metrics.len() items, read before the call returns.
        check(unsafe {
            sys::ckpt_manager_save_metrics(
                self.as_ptr(),
                vars.as_ptr(),
                idx,
                name_ptrs.as_ptr(),
                values.as_ptr(),
                metrics.len(),
            )
        })
    }

    /// The value of metric `name` that checkpoint `idx` recorded (read from its metadata only); `None` when the
    /// checkpoint or the metric is absent. Waits for background saves first.
    pub fn metric(&self, idx: i64, name: &str) -> Result<Option<f64>> {
        let name = c_string("metric name", name)?;
        let mut out = 0.0;
        // SAFETY: valid pointers for the call.
        let rc = unsafe { sys::ckpt_manager_metric(self.as_ptr(), idx, name.as_ptr(), &mut out) };
        absent_if_not_found(rc, out)
    }

    /// The checkpoint with the best value of the best metric (ties go to the newer; NaN never is); `None` when
    /// none records it. Waits for background saves first.
    pub fn best(&self) -> Result<Option<i64>> {
        let mut idx = -1;
        // SAFETY: valid pointers for the call.
        let rc = unsafe { sys::ckpt_manager_best(self.as_ptr(), &mut idx) };
        absent_if_not_found(rc, idx)
    }

    /// Whether to save at `step`: after [`request_save`](Manager::request_save) (consumed by the call that
    /// reports it), at multiples of `save_every_steps`, or once `save_every_seconds` have passed.
    pub fn should_save(&mut self, step: i64) -> Result<bool> {
        // SAFETY: a live handle.
        let rc = unsafe { sys::ckpt_manager_should_save(self.as_ptr(), step) };
        if rc < 0 {
            return Err(Error::last(rc));
        }
        Ok(rc == 1)
    }

    /// Makes the next [`should_save`](Manager::should_save) true (the C function is async-signal-safe: one
    /// atomic store).
    pub fn request_save(&self) {
        // SAFETY: a live handle (or NULL, which the library ignores); the call only stores an atomic flag.
        unsafe { sys::ckpt_manager_request_save(self.as_ptr()) }
    }

    /// Restores `vars` in place from checkpoint `idx`, or from the newest readable one for `None` (skipping
    /// corrupt files unless `fallback(false)`); returns the index restored. [`Code::NotFound`](crate::Code::NotFound) when there is no
    /// checkpoint; [`Code::Mismatch`](crate::Code::Mismatch) (naming every missing or different variable) leaves `vars` untouched.
    pub fn restore(&mut self, vars: &mut Vars<'_>, idx: Option<i64>) -> Result<i64> {
        let mut restored = -1;
        // SAFETY: valid handles; the library writes only within each array of `vars`, held exclusively.
        check(unsafe {
            sys::ckpt_manager_restore(self.as_ptr(), vars.as_mut_ptr(), idx.unwrap_or(sys::CKPT_LATEST), &mut restored)
        })?;
        Ok(restored)
    }

    /// Reads checkpoint `idx` (or the newest readable one for `None`) into a new collection, with the index.
    pub fn read(&mut self, idx: Option<i64>) -> Result<(Vars<'static>, i64)> {
        let mut out = ptr::null_mut();
        let mut restored = -1;
        // SAFETY: valid pointers for the call.
        check(unsafe {
            sys::ckpt_manager_read(self.as_ptr(), idx.unwrap_or(sys::CKPT_LATEST), &mut out, &mut restored)
        })?;
        // SAFETY: a new collection owned by the caller.
        Ok((unsafe { Vars::from_raw(out) }, restored))
    }

    /// The newest checkpoint index on disk (not validated); `None` if there is none.
    pub fn latest(&self) -> Result<Option<i64>> {
        let mut idx = -1;
        // SAFETY: valid pointers for the call.
        let rc = unsafe { sys::ckpt_manager_latest(self.as_ptr(), &mut idx) };
        absent_if_not_found(rc, idx)
    }

    /// The checkpoint indices on disk, ascending.
    pub fn list(&self) -> Result<Vec<i64>> {
        let mut indices: Vec<i64> = Vec::new();
        loop {
            let mut count = 0;
            let buf = if indices.is_empty() { ptr::null_mut() } else { indices.as_mut_ptr() };
            // SAFETY: buf holds indices.len() items (NULL when 0).
            let rc = unsafe { sys::ckpt_manager_list(self.as_ptr(), buf, indices.len(), &mut count) };
            if rc == sys::CKPT_OK {
                indices.truncate(count);
                return Ok(indices);
            }
            if rc == sys::CKPT_EBUFS && count > indices.len() {
                // More than room for: make room for all, and ask again (a save may add more meanwhile).
                indices.resize(count, 0);
                continue;
            }
            return Err(Error::last(rc));
        }
    }

    /// The path of checkpoint `idx`, whether it exists or not.
    pub fn path(&self, idx: i64) -> Result<PathBuf> {
        let mut buf: Vec<u8> = vec![0; 256];
        loop {
            // SAFETY: buf holds buf.len() bytes.
            let rc = unsafe { sys::ckpt_manager_path(self.as_ptr(), idx, buf.as_mut_ptr().cast(), buf.len()) };
            if rc == sys::CKPT_OK {
                let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                buf.truncate(len);
                return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&buf)));
            }
            if rc == sys::CKPT_EBUFS && buf.len() < (1 << 20) {
                let len = buf.len() * 4;
                buf.resize(len, 0);
                continue;
            }
            return Err(Error::last(rc));
        }
    }

    /// Removes the temporaries that interrupted saves left in the directory (those of checkpoints, sharded saves'
    /// staging directories, steps without a manifest, `.NAME.npz.tmp-XXXXXX` of any ckpt save, and unfinished
    /// writes such as S3's incomplete multipart uploads) and returns them; with `dry_run` only finds them. [`Code::Busy`](crate::Code::Busy) while a manager of another process holds the directory.
    pub fn clean(&mut self, dry_run: bool) -> Result<Vec<StaleTemporary>> {
        unsafe extern "C" fn record(path: *const c_char, is_dir: c_int, payload: *mut c_void) {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: payload is the Vec below, path a C string for the call.
                let found = &mut *payload.cast::<Vec<StaleTemporary>>();
                let bytes = CStr::from_ptr(path).to_bytes();
                found.push(StaleTemporary {
                    path: PathBuf::from(std::ffi::OsStr::from_bytes(bytes)),
                    is_dir: is_dir == sys::CKPT_CLEAN_DIR,
                    upload: is_dir == sys::CKPT_CLEAN_UPLOAD,
                });
            }));
        }
        let mut found: Vec<StaleTemporary> = Vec::new();
        let flags = if dry_run { sys::CKPT_CLEAN_DRY_RUN } else { 0 };
        let payload: *mut Vec<StaleTemporary> = &mut found;
        // SAFETY: a live handle; record only runs during the call, with payload pointing at `found`.
        check(unsafe { sys::ckpt_manager_clean(self.as_ptr(), flags, Some(record), payload.cast(), ptr::null_mut()) })?;
        Ok(found)
    }

    /// Waits for background saves; returns the first error not yet reported.
    pub fn wait(&mut self) -> Result<()> {
        // SAFETY: a live handle.
        check(unsafe { sys::ckpt_manager_wait(self.as_ptr()) })
    }

    /// Waits for background saves, unlocks the directory and frees the manager; returns the first unreported
    /// error. (Dropping a manager does the same and discards the error.)
    pub fn close(mut self) -> Result<()> {
        self.close_raw()
    }

    fn close_raw(&mut self) -> Result<()> {
        match self.raw.take() {
            // SAFETY: owned, not used again.
            Some(raw) => check(unsafe { sys::ckpt_manager_close(raw.as_ptr()) }),
            None => Ok(()),
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.close_raw();
    }
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("raw", &self.raw).field("options", &self._options).finish()
    }
}

/// `Some(value)` for CKPT_OK, `None` for CKPT_ENOTFOUND (what a query reports for "there is none"), the error
/// otherwise.
fn absent_if_not_found<T>(rc: c_int, value: T) -> Result<Option<T>> {
    match rc {
        sys::CKPT_OK => Ok(Some(value)),
        sys::CKPT_ENOTFOUND => Ok(None),
        _ => Err(Error::last(rc)),
    }
}

/// objax's `checkpoint_idx`: `"…/0000000042.npz"` gives `Some(42)`; `None` if the file name is not a
/// checkpoint's (ten or more digits, no extra leading zero, ".npz").
pub fn checkpoint_idx(filename: impl AsRef<Path>) -> Option<i64> {
    let name = std::ffi::CString::new(filename.as_ref().as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string.
    let idx = unsafe { sys::ckpt_checkpoint_idx(name.as_ptr()) };
    if idx >= 0 {
        Some(idx)
    } else {
        None
    }
}

/// A temporary an interrupted save left, as [`Manager::clean`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTemporary {
    /// Its path: the manager's directory joined with its name.
    pub path: PathBuf,
    /// Whether it is a directory (a sharded save's staging directory, a step without its manifest).
    pub is_dir: bool,
    /// Whether it is an unfinished write of the file at `path` (an incomplete multipart upload on S3); the file
    /// itself, if there is one, stays.
    pub upload: bool,
}
