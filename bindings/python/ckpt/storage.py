"""Storages: where ckpt reads and writes files.

``None`` everywhere means the local filesystem (ckpt's own POSIX storage, with fsync and atomic renames).
``Storage(fs)`` plugs in a filesystem object with the methods pytorch-pfn-extras and pfio use — ``open(path, mode)``,
``makedirs(path, exist_ok=True)``, ``rename(src, dst)``, ``remove(path)``, ``exists(path)``, ``list(path)`` — so
checkpoints can live on HDFS, an object store or anything else such an object reaches. ckpt still writes a
temporary file and renames it over the target, so the target is never seen half-written. An optional
``free_space(dir)`` method returns the bytes a new file in `dir` may still take (or None when the medium cannot
tell): a Manager then checks each save fits before writing it.

Sharded checkpoints (a directory per step, ``Manager(..., comm=...)``) need directories: an fs object with
``isdir(path)`` lists them (``list`` then also names subdirectories, as pfio's do). ``rmdir(path)`` removes an empty
one (leave it out where directories are only prefixes of names, as on an object store). ``rename_dir(src, dst)``,
an atomic directory rename, commits a step by renaming its staging directory; without it the manifest written last
is the commit point (docs/distributed.md), which is what an object store supports.
"""
import ctypes
import errno
import io
import itertools
import os
import threading

from . import _native, errors
from ._native import lib


def _code_of(exc):
    if isinstance(exc, FileNotFoundError):
        return errors.ENOTFOUND
    if isinstance(exc, FileExistsError):
        return errors.EEXIST
    if isinstance(exc, MemoryError):
        return errors.ENOMEM
    if isinstance(exc, OSError):
        return errors.EIO
    return errors.ERROR


# The optional callbacks, and the methods of the fs object each needs (the directory ones all need isdir: a table
# with remove_dir or rename_dir but no list_dirs is refused).
_NEEDS = {"free_space": ("free_space",), "list_dirs": ("isdir",), "remove_dir": ("isdir", "rmdir"),
          "rename_dir": ("isdir", "rename_dir")}


class Storage(_native.Handle):
    """A ckpt storage backed by a Python filesystem object (see the module's documentation). Pass it as the
    ``fs``/``storage`` argument of ckpt's functions; ``close()`` (or garbage collection) releases it."""

    _release = "ckpt_storage_free"

    def __init__(self, fs):
        self.fs = fs
        self._files = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.error = None  # the last exception a callback met, for messages
        ops = _native.StorageOps()
        ops.version = _native.STORAGE_OPS_VERSION
        self._callbacks = []
        for name, proto in _native.STORAGE_CALLBACKS:
            impl = getattr(self, "_" + name, None)
            if impl is None or not all(callable(getattr(fs, m, None)) for m in _NEEDS.get(name, ())):
                continue
            cb = proto(self._guarded(impl, name))
            self._callbacks.append(cb)  # ctypes callbacks must outlive every use of the storage
            setattr(ops, name, cb)
        h = _native.out()
        _native.check(lib.ckpt_storage_new(ctypes.byref(h), ctypes.byref(ops)))
        self.handle = h.value

    def _guarded(self, impl, name):
        def callback(payload, *args):
            try:
                return impl(*args)
            except BaseException as e:  # nothing may propagate into C
                self.error = e
                return None if name == "close_read" else _code_of(e)
        return callback

    def take_error(self):
        """The exception the last failing callback met (once)."""
        e, self.error = self.error, None
        return e

    def _new_id(self, obj):
        with self._lock:
            i = next(self._ids)
            self._files[i] = obj
        return i

    # The callbacks, in terms of the fs object.
    def _make_dirs(self, d):
        d = d.decode()
        if d not in ("", "."):
            self.fs.makedirs(d, exist_ok=True)
        return 0

    def _create(self, path, out):
        path = path.decode()
        if self.fs.exists(path):
            return errors.EEXIST
        out[0] = self._new_id(self.fs.open(path, "wb"))
        return 0

    def _open_append(self, path, out):
        out[0] = self._new_id(self.fs.open(path.decode(), "ab"))
        return 0

    def _write(self, f, data, size):
        self._files[f].write(ctypes.string_at(data, size))
        return 0

    def _sync(self, f):
        obj = self._files[f]
        obj.flush()
        fileno = getattr(obj, "fileno", None)
        if fileno is not None:
            try:
                os.fsync(fileno())
            except (OSError, io.UnsupportedOperation):
                pass  # not a local file: flushing is all the medium offers
        return 0

    def _close(self, f):
        with self._lock:
            obj = self._files.pop(f)
        obj.close()
        return 0

    def _rename(self, src, dst):
        src, dst = src.decode(), dst.decode()
        if self.fs.exists(dst):  # rename over an existing file, also where the medium refuses to
            try:
                self.fs.rename(src, dst)
                return 0
            except OSError:
                self.fs.remove(dst)
        self.fs.rename(src, dst)
        return 0

    def _remove(self, path):
        self.fs.remove(path.decode())
        return 0

    def _list(self, d, entry, ctx, dirs=False):
        d = d.decode() or "."
        # No existence check first: on an object store an empty prefix does not "exist", yet lists as empty. A
        # missing directory is the fs object's FileNotFoundError.
        for name in self.fs.list(d):
            name = str(name).rstrip("/")
            if self._is_dir(os.path.join(d, name)) != dirs:
                continue
            rc = entry(name.encode(), ctx)
            if rc != 0:
                return rc
        return 0

    def _list_dirs(self, d, entry, ctx):
        return self._list(d, entry, ctx, dirs=True)

    def _remove_dir(self, d):
        self.fs.rmdir(d.decode())
        return 0

    def _rename_dir(self, src, dst):
        self.fs.rename_dir(src.decode(), dst.decode())
        return 0

    def _is_dir(self, path):
        isdir = getattr(self.fs, "isdir", None)
        return bool(isdir(path)) if isdir is not None else False

    def _open_read(self, path, out, size):
        path = path.decode()
        if not self.fs.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        f = self.fs.open(path, "rb")
        f.seek(0, io.SEEK_END)
        size[0] = f.tell()
        out[0] = self._new_id(f)
        return 0

    def _read_at(self, f, offset, dst, size, got):
        obj = self._files[f]
        obj.seek(offset)
        data = obj.read(size)
        ctypes.memmove(dst, data, len(data))
        got[0] = len(data)
        return 0

    def _free_space(self, d, out):
        free = self.fs.free_space(d.decode() or ".")
        if free is None:
            return errors.EUNSUPPORTED
        if int(free) < 0:
            raise ValueError("free_space(%r) returned %r, not a byte count" % (d.decode(), free))
        out[0] = int(free)
        return 0

    def _close_read(self, f):
        with self._lock:
            obj = self._files.pop(f, None)
        if obj is not None:
            obj.close()


class NativeMemory(_native.Handle):
    """ckpt's own in-memory storage (thread-safe, in this process): checkpoints without a filesystem, at C speed.
    Pass it as a storage; ``close()`` releases this reference."""

    _release = "ckpt_storage_free"

    def __init__(self):
        h = _native.out()
        _native.check(lib.ckpt_storage_new_memory(ctypes.byref(h)))
        self.handle = h.value
        self.error = None

    def take_error(self):
        return None


class MemoryFiles:
    """A filesystem object holding files in a dict: how ckpt reads from and writes to Python file objects."""

    def __init__(self):
        self.files = {}
        self.dirs = {""}

    def open(self, path, mode="rb"):
        if "r" in mode:
            if path not in self.files:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return io.BytesIO(self.files[path])
        files = self.files

        class _File(io.BytesIO):
            def close(self):
                if not self.closed:
                    files[path] = self.getvalue()
                super().close()
        f = _File()
        if "a" in mode:
            f.write(self.files.get(path, b""))
        return f

    def makedirs(self, path, exist_ok=True):
        self.dirs.add(path)

    def exists(self, path):
        return path in self.files or path in self.dirs or path == "."

    def isdir(self, path):
        return path in self.dirs or path == "."

    def rename(self, src, dst):
        self.files[dst] = self.files.pop(src)

    def remove(self, path):
        del self.files[path]

    def rmdir(self, path):
        if any(os.path.dirname(p) == path for p in list(self.files) + list(self.dirs) if p != path):
            raise OSError(errno.ENOTEMPTY, "directory not empty", path)
        self.dirs.discard(path)

    def list(self, path):
        if not self.isdir(path):
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        prefix = "" if path in ("", ".") else path.rstrip("/") + "/"
        return [p[len(prefix):] for p in list(self.files) + list(self.dirs)
                if p.startswith(prefix) and p != prefix and "/" not in p[len(prefix):]]


def check(code, *sources):
    """As _native.check, adding to the message the Python exception that a callback of one of `sources` (storages,
    communicators; None ignored) met, as the cause."""
    if code == 0:
        return
    err = errors.error_for(code, _native.message())
    causes = [s.take_error() for s in sources if s is not None]
    cause = next((c for c in causes if c is not None), None)
    if cause is not None:
        err.message += " (%s: %s)" % (type(cause).__name__, cause)
        err.args = (err.message,)
        raise err from cause
    raise err


def handle_of(storage):
    """The ckpt_storage* of a storage argument: None (local filesystem), a Storage, or an fs object."""
    if storage is None:
        return None, None
    if isinstance(storage, (Storage, NativeMemory)):
        return storage.handle, storage
    s = Storage(storage)
    return s.handle, s
