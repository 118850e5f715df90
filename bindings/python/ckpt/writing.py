"""pytorch-pfn-extras' writers on ckpt: ``Writer``, ``SimpleWriter``, ``ThreadWriter``, ``ThreadQueueWriter``
(also as ``StandardWriter`` and ``QueueWriter``), by ppe's documented signatures.

``savefun(target, file_object, **kwargs)`` writes into a binary file object backed by ckpt's atomic, durable sink:
the file appears complete under its name, or not at all (a failing savefun leaves the previous file untouched),
and it is fsynced with its directory before the save counts as done. ``torch.save`` works as the savefun, and is
the default when torch is importable; ``save_npz`` writes a mapping of arrays as .npz.

Fixes over ppe: background writers save a deep copy of the target taken when the save is called (ppe saves the
live state, which training may already have changed); an error of a background save is raised by the next
``__call__``, by ``wait()`` or by ``finalize()`` — never lost, never a hang; ``finalize()`` is idempotent.
"""
import copy
import ctypes
import io
import os
import threading

from . import _native, errors, npz
from ._native import lib
from .storage import check, handle_of

_KINDS = {"simple": _native.WRITER_SIMPLE, "thread": _native.WRITER_THREAD, "queue": _native.WRITER_QUEUE}


def _default_savefun():
    try:
        import torch
    except ImportError:
        raise TypeError("no savefun given and torch is not importable: pass savefun= (ckpt.writing.save_npz saves "
                        "a mapping of arrays)") from None
    return torch.save


def save_npz(target, file, **kwargs):
    """A savefun writing a mapping of name -> array as .npz (ckpt.save's keywords apply)."""
    npz.save(file, target, **kwargs)


class SinkFile(io.RawIOBase):
    """The binary file object a savefun writes into: every write goes to ckpt's sink (no seeking: the bytes go
    front to back, as they do to a pipe or an object store)."""

    def __init__(self, sink):
        super().__init__()
        self._sink = sink
        self._pos = 0

    def writable(self):
        return True

    def write(self, b):
        view = memoryview(b).cast("B")
        n = len(view)
        if n:
            buf = (ctypes.c_char * n).from_buffer_copy(view) if view.readonly else (ctypes.c_char * n).from_buffer(view)
            _native.check(lib.ckpt_sink_write(self._sink, buf, n))
        self._pos += n
        return n

    def tell(self):
        return self._pos

    def seekable(self):
        return False


class Writer:
    """Base class of the writers: ``writer(filename, out_dir, target, savefun=None, append=False)`` saves `target`
    to ``<out_dir>/<filename>`` (the writer's own ``out_dir`` takes precedence when it is set, as in ppe)."""

    _kind = "simple"

    def __init__(self, fs=None, out_dir="", queue_depth=0, copy_target=None):
        self.fs = fs
        self.out_dir = out_dir
        self._initialized = False
        self._finalized = False
        self._copy = copy_target if copy_target is not None else self._kind != "simple"
        self._lock = threading.Lock()
        self._pending = {}  # id of a save in flight -> its Python state (savefun, target, the exception it raised)
        self._ids = 0
        self._failed = []  # Python exceptions of background saves, oldest first
        o = _native.WriterOptions()
        _native.check(lib.ckpt_writer_options_init(ctypes.byref(o), _native.WRITER_OPTIONS_VERSION))
        o.kind = _KINDS[self._kind]
        o.queue_depth = queue_depth
        o.storage, self._storage = handle_of(fs)
        h = _native.out()
        _native.check(lib.ckpt_writer_new(ctypes.byref(h), ctypes.byref(o)))
        self._handle = h.value
        self._callback = _native.SAVE_FN(self._run)

    def __call__(self, filename, out_dir, target, *, savefun=None, append=False):
        self.save(filename, out_dir, target, savefun, append)

    def initialize(self, out_dir):
        """Creates the output directory (once; saves call it)."""
        if out_dir:
            if self._storage is not None:
                self._storage.fs.makedirs(out_dir, exist_ok=True)
            else:
                os.makedirs(out_dir, exist_ok=True)
        self._initialized = True

    def save(self, filename, out_dir, target, savefun=None, append=False, **savefun_kwargs):
        """Saves target with savefun(target, file_object, **savefun_kwargs), atomically unless `append`."""
        if self._finalized:
            raise errors.InvalidArgumentError(errors.EINVAL, "the writer is finalized")
        if savefun is None:
            savefun = _default_savefun()
        out_dir = self.out_dir or out_dir or "."
        dest = os.path.join(out_dir, filename)
        directory = os.path.dirname(dest) or "."
        if not self._initialized:
            self.initialize(out_dir)
        if directory != out_dir:
            self.initialize(directory)
            self._initialized = True
        if self._copy:
            target = copy.deepcopy(target)  # what the caller had at this call, whatever training does next
        with self._lock:
            self._ids += 1
            key = self._ids
            self._pending[key] = [savefun, target, savefun_kwargs, None]
        rc = lib.ckpt_writer_save(self._handle, directory.encode(), os.path.basename(dest).encode(), self._callback,
                                  ctypes.c_void_p(key), _native.APPEND if append else 0)
        if rc != 0:
            message = _native.message()
            with self._lock:
                state = self._pending.pop(key, None)
            if state is not None and state[3] is not None:  # this save's own savefun failed (simple writers)
                raise state[3]
            self._raise(rc, message)

    def save_arrays(self, filename, out_dir, arrays, metadata=None, layout="plain", compression=None, level=0):
        """Saves a mapping of name -> array as .npz through the writer, at C speed: background writers copy
        the arrays before this returns (no savefun, no deep copy of Python objects)."""
        if self._finalized:
            raise errors.InvalidArgumentError(errors.EINVAL, "the writer is finalized")
        out_dir = self.out_dir or out_dir or "."
        dest = os.path.join(out_dir, filename)
        directory = os.path.dirname(dest) or "."
        if not self._initialized or directory != out_dir:
            self.initialize(directory)
        o = npz.options(layout=layout, compression=compression, level=level)
        with npz.collection(arrays, metadata) as v:
            rc = lib.ckpt_writer_save_vars(self._handle, directory.encode(), os.path.basename(dest).encode(),
                                           v.handle, ctypes.byref(o), 0)
            if rc != 0:
                self._raise(rc, _native.message())

    def _run(self, sink, payload):
        """Runs on the writer's thread (or the caller's, for SimpleWriter): the savefun into the sink."""
        key = payload
        with self._lock:
            state = self._pending.get(key)
        if state is None:
            return errors.ERROR
        savefun, target, kwargs, _ = state
        try:
            f = SinkFile(sink)
            savefun(target, f, **kwargs)
            f.flush()
        except BaseException as e:  # nothing may propagate into C: kept for the caller, the save fails
            with self._lock:
                state[3] = e
                if self._kind != "simple":
                    self._failed.append(e)
                    self._pending.pop(key, None)
            return e.code if isinstance(e, errors.CkptError) else errors.ERROR
        if self._kind != "simple":
            with self._lock:
                self._pending.pop(key, None)
        return 0

    def _raise(self, code, message):
        with self._lock:
            failed = self._failed.pop(0) if self._failed else None
        if failed is not None:
            raise errors.error_for(code, message) from failed
        check(code, self._storage)

    def wait(self):
        """Waits for background saves; raises the first error not yet raised."""
        rc = lib.ckpt_writer_wait(self._handle)
        if rc != 0:
            self._raise(rc, _native.message())

    def finalize(self):
        """Waits for background saves and stops the writer; raises the first unreported error. Idempotent."""
        if self._finalized:
            return
        self._finalized = True
        rc = lib.ckpt_writer_finalize(self._handle)
        if rc != 0:
            self._raise(rc, _native.message())

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h:
            try:
                self.finalize()
            except Exception:
                pass
            lib.ckpt_writer_free(h)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.finalize()


class _WithSavefun(Writer):
    def __init__(self, savefun=None, fs=None, out_dir="", **kwds):
        queue_depth = kwds.pop("queue_depth", 0)
        copy_target = kwds.pop("copy_target", None)
        super().__init__(fs=fs, out_dir=out_dir, queue_depth=queue_depth, copy_target=copy_target)
        self._savefun = savefun
        self._kwds = kwds

    def __call__(self, filename, out_dir, target, *, savefun=None, append=False):
        self.save(filename, out_dir, target, savefun or self._savefun, append, **self._kwds)


class SimpleWriter(_WithSavefun):
    """Saves in the caller's thread: ppe's SimpleWriter(savefun=torch.save, fs=None, out_dir='', **kwds)."""

    _kind = "simple"


class ThreadWriter(_WithSavefun):
    """One background save at a time (a save first waits for the previous one): ppe's ThreadWriter."""

    _kind = "thread"


class ThreadQueueWriter(_WithSavefun):
    """One background thread behind a queue of `queue_depth` saves (default 1): ppe's ThreadQueueWriter."""

    _kind = "queue"

    def __init__(self, savefun=None, fs=None, out_dir="", task=None, queue_depth=0, **kwds):
        if task is not None:
            raise TypeError("ThreadQueueWriter(task=...) is not supported: pass savefun")
        super().__init__(savefun=savefun, fs=fs, out_dir=out_dir, queue_depth=queue_depth, **kwds)


StandardWriter = ThreadWriter
QueueWriter = ThreadQueueWriter
