# SPDX-License-Identifier: Apache-2.0
"""pytorch-pfn-extras' writers on ckpt: ``Writer``, ``SimpleWriter``, ``ThreadWriter``, ``ThreadQueueWriter``
(also as ``StandardWriter`` and ``QueueWriter``), ``ProcessWriter`` and ``ProcessQueueWriter``, by ppe's
documented signatures.

``savefun(target, file_object, **kwargs)`` writes into a binary file object backed by ckpt's atomic, durable sink:
the file appears complete under its name, or not at all (a failing savefun leaves the previous file untouched),
and it is fsynced with its directory before the save counts as done. ``torch.save`` works as the savefun, and is
the default when torch is importable; ``save_npz`` writes a mapping of arrays as .npz.

The process writers run the savefun in a worker process started with multiprocessing's ``spawn`` method, which
streams the bytes it writes back to this process, where ckpt's writer commits them: a worker that dies mid-save
(killed, out of memory) leaves the previous file as it was. ``savefun``, ``target`` and the savefun's keywords
are pickled when the save is called, so they must be picklable (``torch.save``, functions defined at the top
level of a module, state dicts of CPU tensors), and a script that creates a process writer must do so under
``if __name__ == "__main__":``, as ``spawn`` imports the script again in the worker.

Fixes over ppe: background writers save a copy of the target taken when the save is called (ppe saves the live
state, which training may already have changed); an error of a background save is raised by the next
``__call__``, by ``wait()`` or by ``finalize()`` — never lost, never a hang — with the savefun's own exception as
its ``__cause__``; a call that raises such an error does not start the save it was asked for; ``finalize()`` is
idempotent.
"""
import atexit
import copy
import ctypes
import io
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import traceback
import weakref
from typing import Any, BinaryIO, Callable, List, Optional, Tuple

from . import _native, _paths, errors, npz
from ._native import lib
from .filesystem import LocalFileSystem, StorageFiles
from .storage import NativeStorage, Storage, handle_of

_KINDS = {"simple": _native.WRITER_SIMPLE, "thread": _native.WRITER_THREAD, "queue": _native.WRITER_QUEUE}

SaveFun = Callable[..., Any]  # savefun(target, file_object, **kwargs)


def _default_savefun() -> SaveFun:
    try:
        import torch
    except ImportError:
        raise TypeError("no savefun given and torch is not importable: pass savefun= (ckpt.writing.save_npz saves "
                        "a mapping of arrays)") from None
    return torch.save


def save_npz(target: Any, file: BinaryIO, **kwargs: Any) -> None:
    """A savefun writing a mapping of name -> array as .npz (ckpt.save's keywords apply)."""
    npz.save(file, target, **kwargs)


def _words(exc: BaseException) -> str:
    """How an error message names a savefun's exception: "ValueError: disk quota" ("ValueError" alone when the
    exception has no text; a ckpt error without its code, which the outer error states)."""
    text = exc.message if isinstance(exc, errors.CkptError) else str(exc)
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


class SinkFile(io.RawIOBase):
    """The binary file object a savefun writes into: every write goes to ckpt's sink (no seeking: the bytes go
    front to back, as they do to a pipe or an object store).

    A write never raises: torch.save calls it from C++, where an exception ends the process. When the storage
    refuses bytes (a full disk), the error is kept in ``sink_error``, later writes are accepted and dropped, and
    the save fails with that error once the savefun returns, leaving the previous file as it was."""

    def __init__(self, sink: int) -> None:
        super().__init__()
        self._sink = sink
        self._pos = 0
        self.sink_error = None  # type: Optional[errors.CkptError]  # the storage's refusal: the save's error

    def writable(self) -> bool:
        """True: the file is written front to back."""
        return True

    def write(self, b: Any) -> int:
        """Appends the bytes of `b` to the file being saved; returns how many (all of them, also after the
        storage failed: see ``sink_error``)."""
        view = memoryview(b).cast("B")
        n = len(view)
        if n and self.sink_error is None:
            buf = (ctypes.c_char * n).from_buffer_copy(view) if view.readonly else (ctypes.c_char * n).from_buffer(view)
            rc = lib.ckpt_sink_write(self._sink, buf, n)
            if rc != 0:
                self.sink_error = errors.error_for(rc, _native.message())
        self._pos += n
        return n

    def tell(self) -> int:
        """The number of bytes written so far."""
        return self._pos

    def seekable(self) -> bool:
        """False: the bytes go front to back."""
        return False


class _Save:
    """The Python side of one save in flight."""

    __slots__ = ("path", "savefun", "target", "kwargs", "error", "simple")

    def __init__(self, path: str, savefun: Any, target: Any, kwargs: dict) -> None:
        self.path, self.savefun, self.target, self.kwargs = path, savefun, target, kwargs
        self.error = None  # the exception the savefun raised
        self.simple = True  # run by a simple C writer, in the saving call (else: a background save)


class _SaveFailed(Exception):
    """Raised by a writer's _write when the failure has its own words and cause (a savefun that failed in a
    worker process, or the worker's death)."""

    def __init__(self, words: str, cause: BaseException) -> None:
        super().__init__(words)
        self.words, self.cause = words, cause


_LIVE = weakref.WeakSet()  # type: weakref.WeakSet[Writer]


@atexit.register
def _drain_at_exit() -> None:
    """Saves queued when the interpreter exits are completed first (their errors then go unreported)."""
    for writer in list(_LIVE):
        writer._drain()


def _default_fs(fs: Any, out_dir: Any) -> Any:
    """What ``writer.fs`` is: the filesystem object given (the one a ckpt.Storage wraps), else one for where the
    writer saves — a storage in C (an s3:// out_dir, S3Storage, NativeMemory) or the local disk."""
    if isinstance(fs, Storage):
        return fs.fs
    if isinstance(fs, NativeStorage):
        return StorageFiles(repr(fs), fs)
    if fs is not None:
        return fs
    if _paths.is_url(out_dir):
        return StorageFiles(os.fsdecode(out_dir))
    return LocalFileSystem()


class Writer:
    """Base class of the writers: ``writer(filename, out_dir, target, savefun=None, append=False)`` saves `target`
    to ``<out_dir>/<filename>`` (the writer's own ``out_dir`` takes precedence when it is set, as in ppe).

    ``fs`` is the filesystem object ppe's extensions use (``writer.fs.list``, ``stat``, ``open``, ``exists``,
    ``remove``): the one given, else a ``ckpt.filesystem.LocalFileSystem`` (ckpt itself still saves through its
    own storage, with fsync and atomic renames). Functions given to ``_add_cleanup_hook`` (ppe's snapshot
    retention, ``n_retains``) run after each successful save, once its file is durable under its name (ckpt's
    after_save callback): in the caller's thread for SimpleWriter, in the writer's background thread for the
    others."""

    _kind = "simple"

    def __init__(self, fs: Any = None, out_dir: str = "", queue_depth: int = 0,
                 copy_target: Optional[bool] = None) -> None:
        self.fs = _default_fs(fs, out_dir)
        self._fs_given = fs
        self.out_dir = out_dir
        self._post_save_hooks = []  # type: List[Callable[[], None]]
        self._initialized = False
        self._finalized = False
        self._copy = copy_target if copy_target is not None else self._kind != "simple"
        self._lock = threading.Lock()  # never held across a C call: the writer's thread takes it in callbacks
        self._pending = {}  # id of a save in flight -> its _Save
        self._ids = 0
        # Background failures not yet raised, oldest first: (the words of the C message that report it, what the
        # raised error says instead (None: the same), the exception behind it).
        self._failed = []  # type: List[Tuple[str, Optional[str], BaseException]]
        self._local = threading.local()  # hook_error: a cleanup hook's exception in a save made in this thread
        self._storage_handle, self._storage = handle_of(fs)
        self._callback = _native.SAVE_FN(self._run)
        self._after_save_fn = _native.AFTER_SAVE_FN(self._after_save)
        self._queue_depth = queue_depth
        self._handle = self._new_handle(_KINDS[self._kind])
        self._side = None  # type: Optional[int]  # a simple C writer for create_worker's saves, made when needed
        self._side_lock = threading.Lock()  # one create_worker save at a time on it
        _LIVE.add(self)

    def _new_handle(self, kind: int) -> int:
        """A C writer of `kind` over this writer's storage, calling the cleanup hooks after each durable save
        (its after_save payload says whether its saves report a hook's exception in the saving thread: 1, for
        simple writers, or as a background error: 0)."""
        o = _native.WriterOptions()
        if _native.VERSION < _native.WRITER_AFTER_SAVE_SINCE:  # no after_save: no cleanup hooks (see below)
            _native.check(lib.ckpt_writer_options_init(ctypes.byref(o), 1))
        else:
            _native.check(lib.ckpt_writer_options_init(ctypes.byref(o), _native.WRITER_OPTIONS_VERSION))
            o.after_save = self._after_save_fn
            o.after_save_payload = 1 if kind == _native.WRITER_SIMPLE else None
        o.kind = kind
        o.queue_depth = self._queue_depth
        o.storage = self._storage_handle
        h = _native.out()
        _native.check(lib.ckpt_writer_new(ctypes.byref(h), ctypes.byref(o)))
        return h.value

    def __call__(self, filename: str, out_dir: str, target: Any, *, savefun: Optional[SaveFun] = None,
                 append: bool = False) -> None:
        """Saves `target` to ``<out_dir>/<filename>`` with `savefun` (see ``save``)."""
        self.save(filename, out_dir, target, savefun, append)

    def initialize(self, out_dir: str) -> None:
        """Creates the output directory (once; saves call it): a local one, through the fs object, or in a
        storage in C (NativeMemory). An s3:// out_dir has nothing to create: an object store's directories are
        only the prefixes of its keys."""
        if out_dir and not _paths.is_url(out_dir):
            fs = getattr(self._storage, "fs", None)  # a Storage over a Python filesystem object
            if fs is not None:
                fs.makedirs(out_dir, exist_ok=True)
            elif self._storage is None:
                _paths.make_dirs(out_dir)
            elif isinstance(self.fs, StorageFiles) and _native.VERSION >= _native.FILES_SINCE:
                self.fs.makedirs(out_dir)
        self._initialized = True

    def _add_cleanup_hook(self, hook_fun: Callable[[], None]) -> None:
        """Adds a function (of no arguments) to run after each successful save, once its file is durable: how
        ppe's snapshot extension removes old snapshots (``n_retains``). A hook's exception fails that save's
        report (raised by the call for SimpleWriter, else as a background error, its ``__cause__``). Needs
        libckpt 0.7.0 or newer (UnsupportedError), whose writers call back after each durable save."""
        if _native.VERSION < _native.WRITER_AFTER_SAVE_SINCE:
            raise errors.UnsupportedError(errors.EUNSUPPORTED, "Writer._add_cleanup_hook needs libckpt %d.%d.%d or "
                                          "newer (this one is %d.%d.%d)"
                                          % (_native.WRITER_AFTER_SAVE_SINCE + _native.VERSION))
        self._post_save_hooks.append(hook_fun)

    def _post_save(self) -> None:
        """Runs the cleanup hooks, in the order they were added."""
        for hook in list(self._post_save_hooks):
            hook()

    def _after_save(self, path: bytes, payload: Optional[int]) -> int:
        """ckpt's after_save callback, on the thread that ran the save, once its file is durable: the cleanup
        hooks. Nothing may propagate into C: a hook's exception makes the save fail, kept for the call that
        reports it."""
        try:
            self._post_save()
        except BaseException as e:  # noqa: B036 -- the save's error, raised by whichever call reports it
            words = _words(e)
            lib.ckpt_error_set_message(words.encode("utf-8", "replace"))
            if payload:  # a simple writer: its call raises the exception as it is
                self._local.hook_error = e
            else:
                where = os.fsdecode(path)
                with self._lock:
                    self._failed.append(("%s: the after_save callback failed: %s" % (where, words),
                                         "%s: a cleanup hook failed after the save: %s" % (where, words), e))
            return e.code if isinstance(e, errors.CkptError) and e.code < 0 else errors.ERROR
        return 0

    def _destination(self, filename: str, out_dir: str) -> Tuple[str, bytes]:
        """The path a save writes, and its directory as the C call takes it (created first where it must be)."""
        if self._finalized:
            raise errors.InvalidArgumentError(errors.EINVAL, "the writer is finalized")
        out_dir = os.fspath(self.out_dir or out_dir or ".")
        dest = self._in_out_dir(filename, out_dir)
        directory = os.path.dirname(dest) or "."
        encoded = _paths.encode(directory)  # a URL pathlib broke is refused before anything is created
        if not self._initialized:
            self.initialize(out_dir)
        if directory != out_dir:
            self.initialize(directory)
        return dest, encoded

    def _in_out_dir(self, filename: str, out_dir: str) -> str:
        """The path `filename` names for a save into `out_dir`."""
        # A URL filename stands alone, as an absolute path does; posixpath only splits at slashes: a URL stays one.
        if _paths.is_url(filename):
            return os.fspath(filename)
        return os.path.join(os.fspath(self.out_dir or out_dir or "."), filename)

    def _failed_error(self, code: int, cause: Optional[BaseException]) -> errors.CkptError:
        """The error of a C call that returned `code` (this thread's message), with the exception behind it as its
        cause: `cause` (the savefun's), else one a storage callback met."""
        err = errors.error_for(code, _native.message())
        if cause is None and self._storage is not None:
            cause = self._storage.take_error()
            if cause is not None:
                text = "%s: %s" % (type(cause).__name__, cause)
                if text not in err.message:
                    err.message += " (%s)" % text
                    err.args = (err.message,)
        err.__cause__ = cause
        return err

    def _raise(self, code: int) -> None:
        """Raises the error of a C writer call that returned `code`: for a background save's failure, with the
        savefun's or the hook's exception behind it as its cause (forgotten with it, as are the failures the
        message says followed it)."""
        message = _native.message()
        cause, instead, reported = None, None, ""
        with self._lock:
            kept = []
            for said, replacement, exc in self._failed:
                if said in message:
                    if cause is None:
                        cause, instead, reported = exc, replacement, said
                else:
                    kept.append((said, replacement, exc))
            self._failed = kept
        if cause is None:
            raise self._failed_error(code, None)
        if instead is not None:
            message = message.replace(reported, instead)
        raise errors.error_for(code, message) from cause

    def save(self, filename: str, out_dir: str, target: Any, savefun: Optional[SaveFun] = None,
             append: bool = False, **savefun_kwargs: Any) -> None:
        """Saves target with savefun(target, file_object, **savefun_kwargs), atomically unless `append`.

        A background writer only queues the save. If an earlier background save failed, this call raises that
        error (its message ends "; the save of <path> was not started") and this save is not started: call
        again to save `target`."""
        if savefun is None:
            savefun = _default_savefun()
        dest, directory = self._destination(filename, out_dir)
        state = self._prepare(dest, savefun, target, savefun_kwargs)
        self._commit(self._handle, state, directory, os.path.basename(dest).encode(),
                     _native.APPEND if append else 0)

    def _commit(self, handle: int, state: _Save, directory: bytes, name: bytes, flags: int) -> None:
        """Hands one save to the C writer `handle`: run now (a simple one, then the cleanup hooks) or queued.
        A simple save's own failure raises the savefun's or the hook's exception as it is."""
        state.simple = simple = handle != self._handle or self._kind == "simple"
        with self._lock:
            self._ids += 1
            key = self._ids
            self._pending[key] = state
        self._local.hook_error = None
        rc = lib.ckpt_writer_save(handle, directory, name, self._callback, ctypes.c_void_p(key), flags)
        if simple or rc != 0:  # done, failed, or not started: the C writer never calls it again
            with self._lock:
                self._pending.pop(key, None)
        if rc != 0:
            if simple:
                hook_error, self._local.hook_error = self._local.hook_error, None
                if state.error is not None:
                    raise state.error
                if hook_error is not None:
                    raise hook_error
            self._raise(rc)

    def save_arrays(self, filename: str, out_dir: str, arrays: Any, metadata: Optional[dict] = None,
                    layout: str = "plain", compression: Optional[str] = None, level: int = 0,
                    chunk_hashes: bool = False, base: Optional[str] = None) -> None:
        """Saves a mapping of name -> array as .npz through the writer, at C speed: background writers copy
        the arrays (in C, into buffers kept from the previous save) before this returns (no savefun, no deep copy
        of Python objects). An earlier background failure is raised as by ``save``, and this save is then not
        started. `chunk_hashes` and `base` are ``ckpt.save``'s, the base named as `filename` is (in `out_dir`) and
        opened when the save runs, so a background save can share with the save queued before it."""
        dest, directory = self._destination(filename, out_dir)
        o = npz.options(layout=layout, compression=compression, level=level, chunk_hashes=chunk_hashes,
                        base=None if base is None else self._in_out_dir(base, out_dir))
        self._local.hook_error = None
        with npz.collection(arrays, metadata) as v:
            rc = lib.ckpt_writer_save_vars(self._handle, directory, os.path.basename(dest).encode(), v.handle,
                                           ctypes.byref(o), 0)
        if rc != 0:
            hook_error, self._local.hook_error = self._local.hook_error, None
            if hook_error is not None:
                raise hook_error
            self._raise(rc)

    def _prepare(self, path: str, savefun: SaveFun, target: Any, kwargs: dict) -> _Save:
        """The state a save keeps until it runs: background writers take a copy of the target now."""
        if self._copy:
            target = copy.deepcopy(target)  # what the caller had at this call, whatever training does next
        return _Save(path, savefun, target, kwargs)

    def _write(self, state: _Save, f: SinkFile) -> None:
        """Writes one save's bytes into f (the writer's thread, or the caller's for SimpleWriter)."""
        state.savefun(state.target, f, **state.kwargs)

    def _run(self, sink: int, payload: int) -> int:
        """Called by ckpt_writer_save, on the writer's thread (or the caller's, for simple writers): the save's
        bytes into the sink. Nothing may propagate into C."""
        with self._lock:
            state = self._pending.get(payload)
        if state is None:
            return errors.ERROR
        f = SinkFile(sink)
        try:
            self._write(state, f)
            f.flush()
        except BaseException as e:  # noqa: B036 -- kept for the caller, the save fails
            if f.sink_error is not None and not isinstance(e, _SaveFailed):
                return f.sink_error.code  # the storage's error, which the C call reports with its message
            words, cause = (e.words, e.cause) if isinstance(e, _SaveFailed) else (_words(e), e)
            lib.ckpt_error_set_message(words.encode("utf-8", "replace"))
            state.error = cause
            if not state.simple:
                with self._lock:
                    self._failed.append(("the save function failed: " + words, None, cause))
            return cause.code if isinstance(cause, errors.CkptError) and cause.code < 0 else errors.ERROR
        finally:
            if not state.simple:
                with self._lock:
                    self._pending.pop(payload, None)  # its only call: the state (the target's copy) goes now
        return 0

    def wait(self) -> None:
        """Waits for background saves and their cleanup hooks; raises the first error not yet raised (the
        savefun's or the hook's exception as its ``__cause__``)."""
        rc = lib.ckpt_writer_wait(self._handle)
        if rc != 0:
            self._raise(rc)

    def _drain(self) -> None:
        """Waits for background saves, reporting nothing (at the interpreter's exit)."""
        if getattr(self, "_handle", None) and not self._finalized:
            lib.ckpt_writer_wait(self._handle)

    def finalize(self) -> None:
        """Waits for background saves and stops the writer; raises the first unreported error. Idempotent: a
        second call does nothing, and later saves raise InvalidArgumentError."""
        if self._finalized:
            return
        self._finalized = True
        _LIVE.discard(self)
        with self._side_lock:
            side, self._side = self._side, None
        if side is not None:
            lib.ckpt_writer_free(side)  # a simple writer: nothing in flight, nothing unreported
        rc = lib.ckpt_writer_finalize(self._handle)
        if rc != 0:
            self._raise(rc)

    def __del__(self) -> None:
        h = getattr(self, "_handle", None)
        if h:
            try:
                self.finalize()
            except Exception:
                pass
            lib.ckpt_writer_free(h)
            self._handle = None

    def __enter__(self) -> "Writer":
        """The writer itself; leaving the block without an exception finalizes it."""
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        """Finalizes the writer (raising any unreported error) unless the block raised."""
        if exc_type is None:
            self.finalize()


class _WithSavefun(Writer):
    def __init__(self, savefun: Optional[SaveFun] = None, fs: Any = None, out_dir: str = "", **kwds: Any) -> None:
        queue_depth = kwds.pop("queue_depth", 0)
        copy_target = kwds.pop("copy_target", None)
        super().__init__(fs=fs, out_dir=out_dir, queue_depth=queue_depth, copy_target=copy_target)
        self._savefun = savefun
        self._kwds = kwds

    def __call__(self, filename: str, out_dir: str, target: Any, *, savefun: Optional[SaveFun] = None,
                 append: bool = False) -> None:
        """Saves `target` with `savefun`, else the writer's, passing it the writer's keywords (see ``save``)."""
        self.save(filename, out_dir, target, savefun or self._savefun, append, **self._kwds)

    def create_worker(self, filename: str, out_dir: str, target: Any, *, savefun: Optional[SaveFun] = None,
                      append: bool = False, **savefun_kwargs: Any) -> threading.Thread:
        """ppe's StandardWriter.create_worker: a thread, not yet started, that saves `target` through this writer
        (atomically and durably, then the cleanup hooks) when started, in that thread, outside the writer's queue
        (on a simple C writer of its own, over the same storage). After
        ``join()`` its ``exitcode`` is 0, or -1 when the save failed (``error`` is then the exception)."""
        savefun = savefun or self._savefun or _default_savefun()
        dest, directory = self._destination(filename, out_dir)
        state = self._prepare(dest, savefun, target, dict(self._kwds, **savefun_kwargs))
        worker = threading.Thread(name="ckpt-save")
        worker.exitcode, worker.error = None, None  # type: ignore[attr-defined]

        def run() -> None:
            try:
                self._save_aside(state, directory, os.path.basename(dest).encode(), _native.APPEND if append else 0)
                worker.exitcode = 0  # type: ignore[attr-defined]
            except BaseException as e:  # noqa: B036 -- kept on the thread, as ppe's exitcode
                worker.exitcode, worker.error = -1, e  # type: ignore[attr-defined]

        worker.run = run  # type: ignore[method-assign]
        return worker

    def _save_aside(self, state: _Save, directory: bytes, name: bytes, flags: int) -> None:
        """Runs a create_worker save in this thread on a simple C writer of its own (made at the first), one at a
        time, so the queue's C writer stays with the thread that saves through it."""
        with self._side_lock:
            if self._side is None:
                if self._finalized:
                    raise errors.InvalidArgumentError(errors.EINVAL, "the writer is finalized")
                self._side = self._new_handle(_native.WRITER_SIMPLE)
            self._commit(self._side, state, directory, name, flags)

    def create_task(self, savefun: Optional[SaveFun] = None) -> "SimpleWriter":
        """ppe's QueueWriter.create_task: a SimpleWriter with `savefun` (else this writer's), saving through this
        writer's fs, for ``consume`` to call."""
        return SimpleWriter(savefun=savefun or self._savefun, fs=self._fs_given, out_dir=self.out_dir)

    def create_queue(self) -> "queue.Queue[Any]":
        """ppe's QueueWriter.create_queue: a queue of (task, filename, out_dir, target, savefun, append) items,
        ended by None, for ``consume``."""
        return queue.Queue()

    def create_consumer(self, q: "queue.Queue[Any]") -> threading.Thread:
        """ppe's QueueWriter.create_consumer: a thread, not yet started, running ``consume(q)``."""
        return threading.Thread(target=self.consume, args=(q,), name="ckpt-consumer")

    def consume(self, q: "queue.Queue[Any]") -> None:
        """ppe's QueueWriter.consume: calls ``task(filename, out_dir, target, savefun=savefun, append=append)``
        for each item of `q` until a None, marking each done even when its task fails (so ``q.join()`` never
        hangs); then raises the first task's exception, if one failed."""
        failures = []
        while True:
            item = q.get()
            try:
                if item is None:
                    break
                task, filename, out_dir, target, savefun, append = item
                task(filename, out_dir, target, savefun=savefun, append=append)
            except BaseException as e:  # noqa: B036 -- raised once the queue is consumed
                failures.append(e)
            finally:
                q.task_done()
        if failures:
            raise failures[0]


class SimpleWriter(_WithSavefun):
    """Saves in the caller's thread: ppe's SimpleWriter(savefun=torch.save, fs=None, out_dir='', **kwds).
    A failing savefun's own exception is raised by the call."""

    _kind = "simple"


class ThreadWriter(_WithSavefun):
    """One background save at a time (a save first waits for the previous one): ppe's
    ThreadWriter(savefun=torch.save, fs=None, out_dir='', **kwds)."""

    _kind = "thread"


class ThreadQueueWriter(_WithSavefun):
    """One background thread behind a queue of `queue_depth` saves (default 1): ppe's
    ThreadQueueWriter(savefun=torch.save, fs=None, out_dir='', task=None)."""

    _kind = "queue"

    def __init__(self, savefun: Optional[SaveFun] = None, fs: Any = None, out_dir: str = "", task: Any = None,
                 queue_depth: int = 0, **kwds: Any) -> None:
        if task is not None:
            raise TypeError("ThreadQueueWriter(task=...) is not supported: pass savefun")
        super().__init__(savefun=savefun, fs=fs, out_dir=out_dir, queue_depth=queue_depth, **kwds)


# ---------------------------------------------------------------------------------------------- process writers

_CHUNK = 1 << 20  # the largest message between a worker and its writer: bytes of the file, in order
_OK, _FAILED = b"ok", b"failed"


class _PipeFile(io.RawIOBase):
    """In a worker process: the file object a savefun writes into, sending the bytes to the writer in chunks."""

    def __init__(self, conn: Any) -> None:
        super().__init__()
        self._conn = conn
        self._buf = bytearray()
        self._pos = 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    def write(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = len(view)
        self._pos += n
        if len(self._buf) + n < _CHUNK:
            self._buf += view
            return n
        self.flush()
        for start in range(0, n, _CHUNK):
            self._conn.send_bytes(view, start, min(_CHUNK, n - start))
        return n

    def flush(self) -> None:
        if self._buf:
            self._conn.send_bytes(self._buf)
            self._buf = bytearray()


def _serve(conn: Any) -> None:
    """A worker process's loop: runs each save it is sent, streams its bytes, then an empty message and the
    outcome; returns when the writer closes the pipe."""
    while True:
        try:
            job = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            savefun, target, kwargs = pickle.loads(job)
            del job
            f = _PipeFile(conn)
            savefun(target, f, **kwargs)
            f.flush()
            del savefun, target, kwargs, f
            outcome = [_OK]
        except BaseException as e:
            try:
                original = pickle.dumps(e)
            except Exception:
                original = None
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            outcome = [_FAILED, _words(e).encode("utf-8", "replace"), text.encode("utf-8", "replace"), original]
        try:
            conn.send_bytes(b"")
            conn.send_bytes(pickle.dumps(outcome))
        except OSError:  # the writer is gone (or dropped this save): nobody to tell
            return


class _Worker:
    """A worker process and the writer's end of its pipe."""

    def __init__(self, context: Any) -> None:
        self._conn, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_serve, args=(child,), name="ckpt-save", daemon=True)
        try:
            self.process.start()
        finally:
            child.close()

    def save(self, job: bytes, f: SinkFile) -> None:
        """Runs one save in the worker, writing what it streams into f; raises _SaveFailed for the worker's
        failure or death, or the sink's error."""
        try:
            self._conn.send_bytes(job)
            buf = bytearray(_CHUNK)
            view = memoryview(buf)
            while True:
                n = self._conn.recv_bytes_into(buf)
                if n == 0:
                    break
                f.write(view[:n])
                if f.sink_error is not None:  # the storage refused the bytes: the worker's are no longer wanted
                    break
            if f.sink_error is None:
                outcome = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._died() from None
        if f.sink_error is not None:
            raise f.sink_error
        if outcome[0] == _OK:
            return
        words, text, original = outcome[1].decode("utf-8", "replace"), outcome[2].decode("utf-8", "replace"), outcome[3]
        cause = None
        if original is not None:
            try:
                cause = pickle.loads(original)
            except Exception:
                cause = None
        if isinstance(cause, BaseException):
            if hasattr(cause, "add_note"):
                cause.add_note("raised in ckpt's save process, pid %d:\n%s" % (self.process.pid, text))
        else:
            cause = RuntimeError("the save function failed in ckpt's save process, pid %d:\n%s"
                                 % (self.process.pid, text))
        raise _SaveFailed(words, cause)

    def _died(self) -> _SaveFailed:
        self.process.join(5)
        code = self.process.exitcode
        if code is None:
            how = "closed its pipe"
        elif code < 0:
            try:
                how = "was killed by %s" % signal.Signals(-code).name
            except ValueError:
                how = "was killed by signal %d" % -code
        else:
            how = "exited with status %d" % code
        e = ChildProcessError("ckpt's save process (pid %s) %s before the save was complete" % (self.process.pid, how))
        return _SaveFailed(_words(e), e)

    def alive(self) -> bool:
        return self.process.is_alive()

    def close(self) -> None:
        """Ends the worker: it returns when its pipe closes; one that does not is killed."""
        self._conn.close()
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


class _ProcessSaves(_WithSavefun):
    """The process writers: savefuns run in one spawned worker process, which is started again for the next save
    if it died; its bytes are committed here by ckpt's writer."""

    def __init__(self, savefun: Optional[SaveFun] = None, fs: Any = None, out_dir: str = "", **kwds: Any) -> None:
        super().__init__(savefun=savefun, fs=fs, out_dir=out_dir, **kwds)
        self._context = multiprocessing.get_context("spawn")
        self._worker_lock = threading.Lock()
        self._worker: Optional[_Worker] = _Worker(self._context)  # started now: it is ready by the first save

    def _prepare(self, path: str, savefun: SaveFun, target: Any, kwargs: dict) -> _Save:
        """Pickles the save now (a copy of the target as it is at the call): the worker unpickles it."""
        try:
            job = pickle.dumps((savefun, target, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            raise TypeError("%s runs the savefun in another process, so savefun, target and the savefun's keywords "
                            "must be picklable: %s" % (type(self).__name__, _words(e))) from e
        return _Save(path, None, job, {})

    def _write(self, state: _Save, f: SinkFile) -> None:
        with self._worker_lock:
            if self._worker is None or not self._worker.alive():
                if self._worker is not None:
                    self._worker.close()
                self._worker = _Worker(self._context)
            worker = self._worker
        try:
            worker.save(state.target, f)
        except _SaveFailed as e:
            if not isinstance(e.cause, ChildProcessError):
                raise  # the savefun failed; the worker is ready for the next save
            self._drop(worker)
            raise
        except BaseException:
            self._drop(worker)  # the sink failed mid-stream: the worker's bytes are no longer wanted
            raise

    def _drop(self, worker: _Worker) -> None:
        with self._worker_lock:
            if self._worker is worker:
                self._worker = None
        worker.process.kill()
        worker.close()

    def finalize(self) -> None:
        """Waits for background saves, stops the writer and its worker process; raises the first unreported
        error. Idempotent."""
        try:
            super().finalize()
        finally:
            with self._worker_lock:
                worker, self._worker = getattr(self, "_worker", None), None
            if worker is not None:
                worker.close()


class ProcessWriter(_ProcessSaves):
    """One save at a time in a worker process (a save first waits for the previous one): ppe's
    ProcessWriter(savefun=torch.save, fs=None, out_dir='', **kwds). The savefun, the target and the keywords must
    be picklable (see the module's documentation)."""

    _kind = "thread"


class ProcessQueueWriter(_ProcessSaves):
    """A queue of `queue_depth` saves (default 1) served in order by one worker process: ppe's
    ProcessQueueWriter(savefun=torch.save, fs=None, out_dir='', task=None). The savefun, the target and the
    keywords must be picklable (see the module's documentation)."""

    _kind = "queue"

    def __init__(self, savefun: Optional[SaveFun] = None, fs: Any = None, out_dir: str = "", task: Any = None,
                 queue_depth: int = 0, **kwds: Any) -> None:
        if task is not None:
            raise TypeError("ProcessQueueWriter(task=...) is not supported: pass savefun")
        super().__init__(savefun=savefun, fs=fs, out_dir=out_dir, queue_depth=queue_depth, **kwds)


StandardWriter = ThreadWriter
QueueWriter = ThreadQueueWriter
