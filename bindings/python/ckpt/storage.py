# SPDX-License-Identifier: Apache-2.0
"""Storages: where ckpt reads and writes files.

``None`` everywhere means the local filesystem (ckpt's own POSIX storage, with fsync and atomic renames), or for
an "s3://bucket/key" path the bucket it names; ``ckpt.S3Storage`` (ckpt/s3.py) is a bucket with options of its own.
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
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _native, errors
from ._native import lib

__all__ = ["MemoryFiles", "NativeMemory", "NativeStorage", "Storage"]


def _code_of(exc: BaseException) -> int:
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

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self._files = {}  # type: Dict[int, Any]
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.error = None  # type: Optional[BaseException]  # the last exception a callback met: the error's cause
        ops = _native.StorageOps()
        # Version 4's callbacks (an object store's unfinished writes, one listing of files and directories) are none
        # of a Python storage's: a version-3 table works with the libraries from before them too.
        ops.version = 3
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
            except BaseException as e:  # nothing may propagate into C: its words go into the error instead
                self.error = e
                if name == "close_read":  # returns nothing: the call goes on
                    return None
                _native.set_message(e)  # the failed call's message says what the fs object said
                return _code_of(e)
        return callback

    def take_error(self) -> Optional[BaseException]:
        """The exception the last failing callback met (once): what the error of the call it failed was caused by."""
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


class NativeStorage(_native.Handle):
    """A storage implemented in C (ckpt's memory storage, ckpt.S3Storage): a ckpt_storage handle, released by
    ``close()``; every call that was given it keeps its own reference."""

    _release = "ckpt_storage_free"
    error = None  # type: Optional[BaseException]

    def take_error(self) -> Optional[BaseException]:
        """None: a storage in C runs no Python code that could fail."""
        return None


class NativeMemory(NativeStorage):
    """ckpt's own in-memory storage (thread-safe, in this process): checkpoints without a filesystem, at C speed.
    Pass it as a storage; ``close()`` releases this reference."""

    def __init__(self) -> None:
        h = _native.out()
        _native.check(lib.ckpt_storage_new_memory(ctypes.byref(h)))
        self.handle = h.value


class MemoryFiles:
    """A filesystem object holding files in a dict: how ckpt reads from and writes to Python file objects."""

    def __init__(self) -> None:
        self.files = {}  # type: Dict[str, bytes]
        self.dirs = {""}

    def open(self, path: str, mode: str = "rb") -> io.BytesIO:
        """The file at `path` for reading ("rb"), or a new one ("wb", or "ab" from the old bytes) kept at close."""
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

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        """Adds the directory `path`."""
        self.dirs.add(path)

    def exists(self, path: str) -> bool:
        """Whether `path` is a file or a directory."""
        return path in self.files or path in self.dirs or path == "."

    def isdir(self, path: str) -> bool:
        """Whether `path` is a directory."""
        return path in self.dirs or path == "."

    def rename(self, src: str, dst: str) -> None:
        """Moves the file `src` to `dst`, over any file there."""
        self.files[dst] = self.files.pop(src)

    def remove(self, path: str) -> None:
        """Removes the file `path` (KeyError when there is none)."""
        del self.files[path]

    def rmdir(self, path: str) -> None:
        """Removes the empty directory `path` (OSError ENOTEMPTY when it holds anything)."""
        if any(os.path.dirname(p) == path for p in list(self.files) + list(self.dirs) if p != path):
            raise OSError(errno.ENOTEMPTY, "directory not empty", path)
        self.dirs.discard(path)

    def list(self, path: str) -> List[str]:
        """The names of the files and directories directly in the directory `path`."""
        if not self.isdir(path):
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        prefix = "" if path in ("", ".") else path.rstrip("/") + "/"
        return [p[len(prefix):] for p in list(self.files) + list(self.dirs)
                if p.startswith(prefix) and p != prefix and "/" not in p[len(prefix):]]


def check(code: int, *sources: Any, filename: Union[str, bytes, "os.PathLike[str]", None] = None) -> None:
    """As _native.check, with the Python exception that a callback of one of `sources` (storages, communicators;
    None ignored) met as the error's cause. Callbacks give the exception's words to the library
    (ckpt_error_set_message), so the message has them already; where it does not, they are added to it.
    `filename`: the file the call was given, which a NotFoundError carries."""
    if code == 0:
        return
    err = errors.error_for(code, _native.message(), filename)
    found = [(s, s.take_error()) for s in sources if s is not None]
    source, cause = next(((s, c) for s, c in found if c is not None), (None, None))
    if cause is not None:
        err = _with_os_error(err, cause)
        text = "%s: %s" % (type(cause).__name__, cause)
        if text not in err.message:  # a callback that gave the error its words has them in it already
            err.message += " (%s)" % text
            err.args = (err.message,)
        raise err from cause
    raise err


def _with_os_error(err: errors.CkptError, cause: BaseException) -> errors.CkptError:
    """A StorageError caused by a callback's OSError: a StoragePermissionError when that was a PermissionError,
    with its errno where the message told none."""
    if not isinstance(err, errors.StorageError) or not isinstance(cause, OSError):
        return err
    if isinstance(cause, PermissionError) and not isinstance(err, PermissionError):
        fresh = errors.StoragePermissionError(err.code, err.message)
        fresh.errno, fresh.strerror, fresh.filename = err.errno, err.strerror, err.filename
        err = fresh
    if err.errno is None and cause.errno is not None:
        err.errno, err.strerror = cause.errno, cause.strerror
    return err


def handle_of(storage: Any) -> Tuple[Optional[int], Any]:
    """The ckpt_storage* of a storage argument: None (local filesystem, or the storage an s3:// path names), a
    Storage, a storage in C (NativeMemory, S3Storage), or an fs object."""
    if storage is None:
        return None, None
    if isinstance(storage, (Storage, NativeStorage)):
        return storage.handle, storage
    s = Storage(storage)
    return s.handle, s
