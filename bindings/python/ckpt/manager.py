# SPDX-License-Identifier: Apache-2.0
"""ckpt's checkpoint manager: numbered checkpoints in a directory, retention, resume from the latest good one."""
import ctypes
import numbers
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _native, _paths, errors, npz
from ._native import lib
from ._vars import Vars
from .storage import check, handle_of

LATEST = None


def checkpoint_idx(filename: Union[str, bytes, os.PathLike]) -> int:
    """objax's Checkpoint.checkpoint_idx: "…/0000000042.npz" -> 42. ValueError for a name that is not a
    checkpoint's (ten or more digits, no extra leading zero, ".npz")."""
    i = lib.ckpt_checkpoint_idx(os.fsencode(filename))
    if i < 0:
        raise ValueError("%r is not a checkpoint file name (ten or more digits and .npz or .safetensors)" % (filename,))
    return i


def index_argument(value: Any, what: str = "idx") -> int:
    """`value` as a checkpoint index or step (an int, or a numpy integer); ArgumentTypeError naming `what` for
    anything else (a float, a str, a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise errors.ArgumentTypeError(errors.EINVAL, "%s must be an int, not %s (%r)"
                                       % (what, type(value).__name__, value))
    return int(value)


def _name_argument(value: Any, what: str = "name") -> bytes:
    if not isinstance(value, str):
        raise errors.ArgumentTypeError(errors.EINVAL, "%s must be a str, not %s (%r)"
                                       % (what, type(value).__name__, value))
    return value.encode("utf-8")


class Manager:
    """A directory ``<logdir>/<subdir>`` of checkpoints ``%010d.npz`` (or ``.safetensors``), locked from this object's first save until
    it is closed.

    Saves are atomic and durable and record their index, time, ckpt's version and any ``metrics`` in the file's
    metadata (keys "ckpt.*"). After each one, retention keeps a checkpoint when any policy keeps it: the newest
    `keep`, multiples of `keep_every`, the `keep_best` best by `best_metric` (``best_mode`` "min" or "max"), those
    saved within the last `keep_seconds`; never the newest or the one just written. ``should_save(step)`` says when
    to save (every `save_every_steps` steps, every `save_every_seconds` seconds, or after ``request_save()``, which a
    SIGTERM handler may call). ``restore(arrays)`` fills the arrays from the newest readable checkpoint, falling back past corrupt
    ones unless ``fallback=False``; with ``partial=True``, names the checkpoint lacks are left as they are (see
    ckpt.restore). With ``asynchronous=True`` saves run in the background (the arrays are copied
    first) and their errors surface at the next call, at ``wait()`` or at ``close()``; ``max_staging_bytes`` bounds
    the copies queued saves hold (a save larger than it is written at once from the arrays, without a copy).
    Before each save the storage's free space is checked (the local filesystem's, or a Storage's ``free_space``):
    a save that cannot fit fails with StorageError and leaves the directory as it was.

    ``format="safetensors"`` (libckpt 0.10.0 or newer) saves ``%010d.safetensors`` instead; every manager lists,
    restores and retains checkpoints of both formats, so a run may change its format and resume. Its saves are full
    ones, and it takes no ``comm`` (sharded steps are .npz shards).

    Saves are incremental (libckpt 0.9.0 or newer) where the storage can share blocks between files (XFS with
    reflink, btrfs; ``ckpt.NativeMemory`` copies instead): each file records its chunk hashes, and a save shares the
    16 KiB chunks that did not change with the checkpoint saved before it, every file staying complete. With
    ``full_every=N`` every N-th save of the manager shares nothing (files that share blocks share a media error);
    ``incremental=False`` makes every save a full one.

    Opening locks nothing: the first save locks the directory (BusyError naming the holder's pid when another
    process holds it) and removes the temporaries interrupted saves left. A manager that only lists, reads and
    restores never locks nor deletes, so an evaluator may restore while a trainer saves. A new manager of a
    directory that an older manager of this process holds (a notebook cell run again) takes it over at its first
    save, with a warning in the log; the older one's next save then raises BusyError. ``read_only=True`` makes
    saves fail (InvalidArgumentError), for evaluators and tools. Use it as a context manager to close it on exit.

    With ``comm`` (a ``ckpt.Comm``) the manager is collective over its ranks (sharded checkpoints,
    docs/distributed.md): every rank opens it, ``save`` writes each rank's arrays as one shard of a step directory
    that rank 0 commits once every shard is durable, and ``restore`` fills each rank's arrays from the step rank 0
    chooses — a ``ckpt.Rows`` value gets exactly its rows of the saved global array. Every rank gets the same
    result or the same error. With ``asynchronous=True`` each rank's shard is written in the background and the
    step is committed by the next ``save``, ``wait``, ``close``, ``restore`` or ``read``, which every rank must then call.
    ``ckpt.MPIComm()`` is a communicator over mpi4py.
    """

    def __init__(self, logdir: Union[str, bytes, os.PathLike], keep: Optional[int] = 10, keep_every: int = 0,
                 subdir: Optional[str] = "ckpt", asynchronous: bool = False, queue_depth: int = 0,
                 fallback: bool = True, makedir: bool = True, verbose: bool = False,
                 log: Optional[Callable[[int, str], None]] = None, layout: str = "plain",
                 compression: Optional[str] = None, level: int = 0, storage: Any = None, read_only: bool = False,
                 keep_best: int = 0, best_metric: Optional[str] = None, best_mode: str = "min", keep_seconds: int = 0,
                 save_every_steps: int = 0, save_every_seconds: int = 0, partial: bool = False,
                 max_staging_bytes: int = 0, comm: Any = None, incremental: bool = True, full_every: int = 0,
                 format: str = "npz", **limits: Any) -> None:  # noqa: A002
        """Opens (creating it unless ``makedir=False`` or ``read_only=True``) the checkpoint directory of `logdir`;
        see the class's documentation for the options. NotFoundError when the directory must exist and does not."""
        o = _native.ManagerOptions()
        _native.check(lib.ckpt_manager_options_init(ctypes.byref(o),
                                                    _native.options_version(_native.MANAGER_OPTIONS_VERSION)))
        o.keep = keep if keep is not None else 0
        o.keep_every = keep_every
        o.flags = ((_native.MANAGER_ASYNC if asynchronous else 0) | (0 if fallback else _native.MANAGER_NO_FALLBACK) |
                   (0 if makedir else _native.MANAGER_NO_MAKEDIR) | (_native.MANAGER_VERBOSE if verbose else 0) |
                   (_native.MANAGER_READ_ONLY if read_only else 0))
        o.queue_depth = queue_depth
        o.subdir = subdir.encode("utf-8") if subdir is not None else None
        o.keep_best = keep_best
        o.best_metric = best_metric.encode("utf-8") if best_metric is not None else None
        if best_mode not in ("min", "max"):
            raise ValueError("best_mode must be 'min' or 'max', not %r" % (best_mode,))
        o.best_mode = _native.BEST_MAX if best_mode == "max" else _native.BEST_MIN
        o.keep_seconds = keep_seconds
        o.save_every_steps = save_every_steps
        o.save_every_seconds = save_every_seconds
        o.max_staging_bytes = max_staging_bytes
        if not incremental and _native.VERSION >= _native.INCREMENTAL_SINCE:  # older libraries make only full saves
            o.flags |= _native.MANAGER_FULL_SAVES
        if full_every:
            _native.require(_native.INCREMENTAL_SINCE, "ckpt.Manager(full_every=...)")
            o.full_every = full_every
        if format not in ("npz", "safetensors"):
            raise errors.InvalidArgumentError(errors.EINVAL, "format must be 'npz' or 'safetensors', not %r" % (format,))
        self._npz = npz.options(layout=layout, compression=compression, level=level, partial=partial,
                                format="auto" if format == "npz" else format, **limits)
        o.npz = ctypes.pointer(self._npz)
        if log is not None:
            o.log = _native.LOG_FN(lambda level, message, payload: log(level, message.decode("utf-8", "replace")))
        o.storage, self._storage = handle_of(storage)
        o.comm = comm.handle if comm is not None else None
        self._comm = comm  # the manager keeps the library's reference; this keeps the Python callbacks alive
        self._sources = (self._storage, comm)  # whose callbacks' exceptions become the causes of errors
        self._options = o  # the log callback must live as long as the manager
        h = _native.out()
        check(lib.ckpt_manager_open(ctypes.byref(h), _paths.encode(logdir), ctypes.byref(o)), *self._sources)
        self.handle = h.value
        self.logdir = os.fsdecode(logdir)
        self._subdir = subdir or ""
        self._best_metric = best_metric

    def close(self) -> None:
        """Waits for background saves and unlocks the directory (unless a newer manager of this process took it
        over: its lock stays with that one); raises the first unreported save error. Idempotent."""
        h, self.handle = getattr(self, "handle", None), None
        if h:
            check(lib.ckpt_manager_close(h), *self._sources)

    def __del__(self) -> None:
        """Closes the manager, dropping a close error (call close() to see it)."""
        try:
            self.close()
        except errors.CkptError:
            pass

    def __enter__(self) -> "Manager":
        """Returns the manager itself; leaving the ``with`` block closes it."""
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """Closes the manager. With an exception in flight, a close error is dropped in its favour."""
        if exc_type is None:
            self.close()
        else:  # the exception in flight is the one to see
            try:
                self.close()
            except errors.CkptError:
                pass

    def _h(self):
        if not self.handle:
            raise ValueError("the manager of %s is closed" % self.logdir)
        return self.handle

    def save(self, arrays: Mapping[str, Any], idx: int, metadata: Optional[Mapping[str, str]] = None,
             metrics: Optional[Mapping[str, float]] = None) -> None:
        """Saves a mapping name -> array as checkpoint idx (replacing one that exists), then applies retention.
        `metrics` maps names to numbers, recorded as "ckpt.metric.<name>" in the file's metadata. The metadata's
        own "ckpt." keys (those a restore brought in) are replaced by this save's. The first save locks the
        directory: BusyError when another process's manager holds it, or when a newer manager of this process took
        it over from this one."""
        idx = self._collectively(lambda: index_argument(idx), "sharded save")
        if isinstance(arrays, npz.Collection):
            self._collectively(lambda: arrays._vars.set_metadata(metadata), "sharded save")
            self._save(arrays._vars, idx, metrics)
            return
        with self._collectively(lambda: npz.collection(arrays, metadata), "sharded save") as v:
            self._save(v, idx, metrics)

    def _collectively(self, prepare, what):
        """prepare() (turning this rank's arguments into what the C call takes); with a communicator, every rank
        then learns whether every rank could, and all raise the same error if one could not — instead of the
        failing rank leaving the others waiting in the call it never makes."""
        if self._comm is None:
            return prepare()
        what = "%s: %s" % (os.path.join(self.logdir, self._subdir) if self._subdir else self.logdir, what)
        try:
            result = prepare()
        except BaseException as e:
            self._comm._agree(e, what)
            raise  # not reached: _agree raises on every rank
        self._comm._agree(None, what)
        return result

    def _save(self, v, idx, metrics):
        if not metrics:
            check(lib.ckpt_manager_save(self._h(), v.handle, idx), *self._sources)
            return
        items = list(metrics.items())
        names = (ctypes.c_char_p * len(items))(*[str(k).encode("utf-8") for k, _ in items])
        values = (ctypes.c_double * len(items))(*[float(x) for _, x in items])
        check(lib.ckpt_manager_save_metrics(self._h(), v.handle, idx, names, values, len(items)), *self._sources)

    def metric(self, idx: int, name: str) -> Optional[float]:
        """The value of metric `name` checkpoint idx recorded (a float), or None when it records none.
        NotFoundError when there is no checkpoint idx."""
        idx, encoded = index_argument(idx), _name_argument(name)
        out = ctypes.c_double(0)
        rc = lib.ckpt_manager_metric(self._h(), idx, encoded, ctypes.byref(out))
        if rc == errors.ENOTFOUND and self._exists(idx):
            return None
        check(rc, *self._sources)
        return out.value

    def _exists(self, idx):
        return idx in self.list()

    def best(self) -> Optional[int]:
        """The checkpoint with the best `best_metric` (by `best_mode`; NaN never is), or None: when no checkpoint
        records the metric, and when the manager was opened without a `best_metric`."""
        if self._best_metric is None:
            return None
        i = ctypes.c_int64(-1)
        rc = lib.ckpt_manager_best(self._h(), ctypes.byref(i))
        if rc == errors.ENOTFOUND:
            return None
        check(rc, *self._sources)
        return i.value

    def should_save(self, step: int) -> bool:
        """Whether to save at `step`: after request_save(), at multiples of save_every_steps, or once
        save_every_seconds have passed since the last save (or opening)."""
        rc = lib.ckpt_manager_should_save(self._h(), index_argument(step, "step"))
        if rc < 0:
            check(rc, *self._sources)
        return rc == 1

    def request_save(self) -> None:
        """Makes the next should_save() true: call it from a signal handler (SIGTERM before preemption)."""
        lib.ckpt_manager_request_save(self._h())

    def restore(self, arrays: Mapping[str, Any], idx: Optional[int] = LATEST) -> Tuple[int, Dict[str, str]]:
        """Restores a mapping in place (ckpt.restore's rules) from checkpoint idx or the newest readable one.
        Returns (index restored, metadata: a ckpt Metadata dict whose ``restored`` lists the names filled).
        NotFoundError when there is no checkpoint. It neither locks nor changes the directory."""
        return self._restore(arrays, idx, lambda name, old, fresh: npz.assign(arrays, name, old, fresh))

    def _restore(self, arrays: Mapping[str, Any], idx: Optional[int],
                 assign: Any) -> Tuple[int, Dict[str, str]]:
        """restore, with `assign(name, old, fresh)` putting each array restored out of place where it belongs (the
        objax Checkpoint's variables hold theirs in objects of their own)."""
        restored = ctypes.c_int64(-1)
        agreed = []

        def restore_vars(v):
            agreed.append(True)  # from here on, every rank fails or succeeds together
            self._collectively(lambda: None, "sharded restore")  # every rank's collection is built
            check(lib.ckpt_manager_restore(self._h(), v.handle, _idx(idx), ctypes.byref(restored)), *self._sources)

        try:
            _idx(idx)  # a wrong type is refused before anything is read
            if isinstance(arrays, npz.Collection):
                v = arrays._for_restore()
                restore_vars(v)
                return restored.value, npz.restored_metadata(v, arrays.names)
            metadata = npz.restore_mapping(arrays, assign, restore_vars)
        except BaseException as e:
            if agreed or self._comm is None:
                raise
            self._collectively(lambda: _reraise(e), "sharded restore")  # this rank failed before the others' call
            raise
        return restored.value, metadata

    def read(self, idx: Optional[int] = LATEST, tensors: str = "numpy") -> Tuple[int, "npz.Arrays"]:
        """Reads checkpoint idx (or the newest readable one) into a new ``ckpt.Arrays`` (nested state as it was
        saved; ``tensors="torch"``: torch tensors, as ckpt.load gives them); returns (index, arrays)."""
        npz._check_tensors(tensors)  # before anything is read
        out = _native.out()
        restored = ctypes.c_int64(-1)
        check(lib.ckpt_manager_read(self._h(), _idx(idx), ctypes.byref(out), ctypes.byref(restored)), *self._sources)
        return restored.value, npz.arrays_of(Vars(out.value), tensors, "checkpoint %d" % restored.value)

    def latest(self) -> Optional[int]:
        """The newest index on disk (not validated), or None."""
        i = ctypes.c_int64(-1)
        rc = lib.ckpt_manager_latest(self._h(), ctypes.byref(i))
        if rc == errors.ENOTFOUND:
            return None
        check(rc, *self._sources)
        return i.value

    def list(self) -> List[int]:
        """Indices on disk, ascending."""
        count = ctypes.c_size_t(0)
        while True:
            cap = count.value
            buf = (ctypes.c_int64 * max(cap, 1))()
            rc = lib.ckpt_manager_list(self._h(), buf, cap, ctypes.byref(count))
            if rc == errors.EBUFS:
                continue  # more appeared since the count was taken
            check(rc, *self._sources)
            return [buf[k] for k in range(count.value)]

    def path(self, idx: int) -> str:
        """The path of checkpoint idx: in the storage, or its s3:// URL when the manager was opened with one."""
        idx = index_argument(idx)
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            rc = lib.ckpt_manager_path(self._h(), idx, buf, size)
            if rc != errors.EBUFS:
                _native.check(rc)
                return os.fsdecode(buf.value)
            size *= 4

    def wait(self) -> None:
        """Waits for background saves; raises the first unreported error."""
        check(lib.ckpt_manager_wait(self._h()), *self._sources)

    def clean(self, dry_run: bool = False) -> List[str]:
        """Removes the temporaries that interrupted saves left in the directory (those of checkpoints, sharded
        saves' staging directories, steps without a manifest, ``.NAME.npz.tmp-XXXXXX`` of any ckpt save, and
        unfinished writes such as S3's incomplete multipart uploads, of which the file's own path is returned) and
        returns their paths; with ``dry_run`` only returns them. Raises BusyError while a manager of another
        process holds the directory."""
        found: List[str] = []

        def record(path, _is_dir, _payload):
            found.append(os.fsdecode(path))

        callback = _native.CLEAN_FN(record)
        flags = _native.CLEAN_DRY_RUN if dry_run else 0
        check(lib.ckpt_manager_clean(self._h(), flags, callback, None, None), *self._sources)
        return found


def _reraise(e):
    raise e


def _idx(idx):
    return _native.LATEST if idx is None else index_argument(idx)

