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
import copy
import ctypes
import io
import multiprocessing
import os
import pickle
import signal
import threading
import traceback
from typing import Any, BinaryIO, Callable, List, Optional, Tuple

from . import _native, _paths, errors, npz
from ._native import lib
from .storage import check, handle_of

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
    front to back, as they do to a pipe or an object store)."""

    def __init__(self, sink: int) -> None:
        super().__init__()
        self._sink = sink
        self._pos = 0
        self.sink_failed = False  # a write the storage refused: the save fails with the storage's error

    def writable(self) -> bool:
        """True: the file is written front to back."""
        return True

    def write(self, b: Any) -> int:
        """Appends the bytes of `b` to the file being saved; returns how many (all of them)."""
        view = memoryview(b).cast("B")
        n = len(view)
        if n:
            buf = (ctypes.c_char * n).from_buffer_copy(view) if view.readonly else (ctypes.c_char * n).from_buffer(view)
            rc = lib.ckpt_sink_write(self._sink, buf, n)
            if rc != 0:
                self.sink_failed = True
                _native.check(rc)
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

    __slots__ = ("path", "savefun", "target", "kwargs", "error")

    def __init__(self, path: str, savefun: Any, target: Any, kwargs: dict) -> None:
        self.path, self.savefun, self.target, self.kwargs = path, savefun, target, kwargs
        self.error = None  # the exception the savefun raised


class _SaveFailed(Exception):
    """Raised by a writer's _write when the failure has its own words and cause (a savefun that failed in a
    worker process, or the worker's death)."""

    def __init__(self, words: str, cause: BaseException) -> None:
        super().__init__(words)
        self.words, self.cause = words, cause


class Writer:
    """Base class of the writers: ``writer(filename, out_dir, target, savefun=None, append=False)`` saves `target`
    to ``<out_dir>/<filename>`` (the writer's own ``out_dir`` takes precedence when it is set, as in ppe)."""

    _kind = "simple"

    def __init__(self, fs: Any = None, out_dir: str = "", queue_depth: int = 0,
                 copy_target: Optional[bool] = None) -> None:
        self.fs = fs
        self.out_dir = out_dir
        self._initialized = False
        self._finalized = False
        self._copy = copy_target if copy_target is not None else self._kind != "simple"
        self._lock = threading.Lock()
        self._pending = {}  # id of a save in flight -> its _Save
        self._ids = 0
        # Failures of background savefuns not yet raised, oldest first: (what the C message says of it, exception).
        self._failed: List[Tuple[str, BaseException]] = []
        o = _native.WriterOptions()
        _native.check(lib.ckpt_writer_options_init(ctypes.byref(o), _native.WRITER_OPTIONS_VERSION))
        o.kind = _KINDS[self._kind]
        o.queue_depth = queue_depth
        o.storage, self._storage = handle_of(fs)
        h = _native.out()
        _native.check(lib.ckpt_writer_new(ctypes.byref(h), ctypes.byref(o)))
        self._handle = h.value
        self._callback = _native.SAVE_FN(self._run)

    def __call__(self, filename: str, out_dir: str, target: Any, *, savefun: Optional[SaveFun] = None,
                 append: bool = False) -> None:
        """Saves `target` to ``<out_dir>/<filename>`` with `savefun` (see ``save``)."""
        self.save(filename, out_dir, target, savefun, append)

    def initialize(self, out_dir: str) -> None:
        """Creates the output directory (once; saves call it): a local one, or through the fs object. An s3://
        out_dir, or one in a storage in C (S3Storage), has nothing to create: an object store's directories are
        only the prefixes of its keys."""
        if out_dir and not _paths.is_url(out_dir):
            fs = getattr(self._storage, "fs", None)  # a Storage over a Python filesystem object
            if fs is not None:
                fs.makedirs(out_dir, exist_ok=True)
            elif self._storage is None:
                os.makedirs(out_dir, exist_ok=True)
        self._initialized = True

    def _destination(self, filename: str, out_dir: str) -> Tuple[str, bytes]:
        """The path a save writes, and its directory as the C call takes it (created first where it must be)."""
        if self._finalized:
            raise errors.InvalidArgumentError(errors.EINVAL, "the writer is finalized")
        out_dir = os.fspath(self.out_dir or out_dir or ".")
        # A URL filename stands alone, as an absolute path does; posixpath only splits at slashes: a URL stays one.
        dest = os.fspath(filename) if _paths.is_url(filename) else os.path.join(out_dir, filename)
        directory = os.path.dirname(dest) or "."
        encoded = _paths.encode(directory)  # a URL pathlib broke is refused before anything is created
        if not self._initialized:
            self.initialize(out_dir)
        if directory != out_dir:
            self.initialize(directory)
        return dest, encoded

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
        with self._lock:
            self._ids += 1
            key = self._ids
            self._pending[key] = state
        rc = lib.ckpt_writer_save(self._handle, directory, os.path.basename(dest).encode(), self._callback,
                                  ctypes.c_void_p(key), _native.APPEND if append else 0)
        if rc != 0:
            message = _native.message()
            with self._lock:
                self._pending.pop(key, None)
            if self._kind == "simple" and state.error is not None:  # this save's own savefun failed
                raise state.error
            self._raise(rc, message)

    def save_arrays(self, filename: str, out_dir: str, arrays: Any, metadata: Optional[dict] = None,
                    layout: str = "plain", compression: Optional[str] = None, level: int = 0) -> None:
        """Saves a mapping of name -> array as .npz through the writer, at C speed: background writers copy
        the arrays before this returns (no savefun, no deep copy of Python objects). An earlier background
        failure is raised as by ``save``, and this save is then not started."""
        dest, directory = self._destination(filename, out_dir)
        o = npz.options(layout=layout, compression=compression, level=level)
        with npz.collection(arrays, metadata) as v:
            rc = lib.ckpt_writer_save_vars(self._handle, directory, os.path.basename(dest).encode(),
                                           v.handle, ctypes.byref(o), 0)
            if rc != 0:
                self._raise(rc, _native.message())

    def _prepare(self, path: str, savefun: SaveFun, target: Any, kwargs: dict) -> _Save:
        """The state a save keeps until it runs: background writers take a copy of the target now."""
        if self._copy:
            target = copy.deepcopy(target)  # what the caller had at this call, whatever training does next
        return _Save(path, savefun, target, kwargs)

    def _write(self, state: _Save, f: SinkFile) -> None:
        """Writes one save's bytes into f (the writer's thread, or the caller's for SimpleWriter)."""
        state.savefun(state.target, f, **state.kwargs)

    def _run(self, sink: int, payload: int) -> int:
        """Runs on the writer's thread (or the caller's, for SimpleWriter): the save's bytes into the sink."""
        key = payload
        background = self._kind != "simple"
        with self._lock:
            state = self._pending.pop(key, None) if background else self._pending.get(key)
        if state is None:
            return errors.ERROR
        f = SinkFile(sink)
        try:
            self._write(state, f)
            f.flush()
        except BaseException as e:  # nothing may propagate into C: kept for the caller, the save fails
            if f.sink_failed:  # the storage's error, which the save reports (with its cause, see check)
                return e.code if isinstance(e, errors.CkptError) else errors.EIO
            words, cause = (e.words, e.cause) if isinstance(e, _SaveFailed) else (_words(e), e)
            lib.ckpt_error_set_message(words.encode("utf-8", "replace"))
            state.error = cause
            if background:
                with self._lock:
                    self._failed.append(("the save function failed: " + words, cause))
            return cause.code if isinstance(cause, errors.CkptError) else errors.ERROR
        return 0

    def _take_failure(self, message: str) -> Optional[BaseException]:
        """The savefun's exception behind a background error reported with `message`, if it is one: failures
        reported together with it (or dropped by the library's report) are forgotten with it."""
        with self._lock:
            for i, (said, exc) in enumerate(self._failed):
                if said in message:
                    del self._failed[:i + 1]
                    return exc
        return None

    def _raise(self, code: int, message: str) -> None:
        cause = self._take_failure(message)
        if cause is not None:
            raise errors.error_for(code, message) from cause
        check(code, self._storage)

    def wait(self) -> None:
        """Waits for background saves; raises the first error not yet raised (the savefun's exception as its
        ``__cause__``)."""
        rc = lib.ckpt_writer_wait(self._handle)
        if rc != 0:
            self._raise(rc, _native.message())

    def finalize(self) -> None:
        """Waits for background saves and stops the writer; raises the first unreported error. Idempotent: a
        second call does nothing, and later saves raise InvalidArgumentError."""
        if self._finalized:
            return
        self._finalized = True
        rc = lib.ckpt_writer_finalize(self._handle)
        if rc != 0:
            self._raise(rc, _native.message())

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
            outcome = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._died() from None
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
