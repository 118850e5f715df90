# SPDX-License-Identifier: Apache-2.0
"""Filesystem objects with the interface pytorch-pfn-extras and pfio give theirs: what a writer's ``fs`` is when
none was given, so that code written against ppe's writers (its snapshot extension lists, stats, opens and removes
snapshots through ``writer.fs``) works with ckpt's.

``LocalFileSystem`` is the local disk. ``StorageFiles`` is a storage in C (an ``s3://`` out_dir, ``ckpt.S3Storage``,
``ckpt.NativeMemory``): it lists, stats, reads and removes files there through ckpt's C calls for a storage's files.
"""
import ctypes
import errno
import io
import os
import shutil
import stat
from typing import IO, Any, Callable, Iterator, List, Optional

from . import _native, _paths, errors
from ._native import lib

__all__ = ["FileStat", "LocalFileSystem", "StorageFiles"]


class FileStat:
    """What ``stat`` says of a file, by pfio's names: ``filename`` (the path), ``last_modified``,
    ``last_accessed`` and ``created`` (seconds since the epoch, as floats), ``mode`` and ``size``."""

    __slots__ = ("filename", "last_modified", "last_accessed", "created", "mode", "size")

    def __init__(self, st: os.stat_result, filename: str) -> None:
        self.filename = filename
        self.last_modified = st.st_mtime
        self.last_accessed = st.st_atime
        self.created = st.st_ctime
        self.mode = st.st_mode
        self.size = st.st_size

    def __repr__(self) -> str:
        return "FileStat(%r, size=%d, last_modified=%r)" % (self.filename, self.size, self.last_modified)


class LocalFileSystem:
    """The local disk, through pfio's filesystem interface (ppe's ``_PosixFileSystem``). Relative paths are under
    `root`; without one (the default) they are relative to the working directory at each call, as the paths a
    writer saves to are."""

    def __init__(self, root: Optional[str] = None) -> None:
        self.root = root

    def _at(self, path: Any) -> str:
        path = os.fspath(path)
        return os.path.join(self.root, path) if self.root else path

    def open(self, path: str, mode: str = "r", buffering: int = -1, encoding: Optional[str] = None,
             errors: Optional[str] = None, newline: Optional[str] = None, closefd: bool = True,
             opener: Optional[Callable[[str, int], int]] = None) -> IO[Any]:
        """The file at `path`, as the built-in ``open`` gives it."""
        return io.open(self._at(path), mode, buffering, encoding, errors, newline, closefd, opener)

    def list(self, path_or_prefix: Optional[str] = None, recursive: bool = False) -> Iterator[str]:
        """The names in the directory `path_or_prefix` (the working directory or `root` when None); with
        `recursive`, every file and directory below it, as paths relative to it ("sub/name")."""
        top = self._at(path_or_prefix) if path_or_prefix is not None else (self.root or ".")
        if not recursive:
            with os.scandir(top) as entries:
                names = [e.name for e in entries]
            yield from names
            return
        pending = [""]
        while pending:
            rel = pending.pop()
            with os.scandir(os.path.join(top, rel) if rel else top) as entries:
                found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            for name, is_dir in found:
                child = os.path.join(rel, name) if rel else name
                yield child
                if is_dir:
                    pending.append(child)

    def stat(self, path: str) -> FileStat:
        """The file's ``FileStat`` (FileNotFoundError when there is none)."""
        full = self._at(path)
        return FileStat(os.stat(full), full)

    def isdir(self, path: str) -> bool:
        """Whether `path` is a directory."""
        return os.path.isdir(self._at(path))

    def exists(self, path: str) -> bool:
        """Whether `path` is there (a file, a directory or anything else)."""
        return os.path.exists(self._at(path))

    def mkdir(self, path: str, mode: int = 0o777, *args: Any, dir_fd: Optional[int] = None) -> None:
        """Creates the directory `path` (its parent must exist), durably: its parent is synced."""
        os.mkdir(self._at(path), mode, *args, dir_fd=dir_fd)
        if dir_fd is None:
            _paths.sync_dir(os.path.dirname(os.path.abspath(self._at(path))))

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        """Creates the directory `path` and any missing parent, each durably (its parent is synced)."""
        _paths.make_dirs(self._at(path), mode, exist_ok)

    def rename(self, src: str, dst: str) -> None:
        """Moves `src` to `dst`, replacing a file there."""
        os.replace(self._at(src), self._at(dst))

    def remove(self, path: str, recursive: bool = False) -> None:
        """Removes the file `path`, or the directory `path`: an empty one, or with `recursive` everything in it."""
        full = self._at(path)
        if recursive:
            shutil.rmtree(full)
        elif os.path.isdir(full) and not os.path.islink(full):
            os.rmdir(full)
        else:
            os.remove(full)

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> "LocalFileSystem":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "LocalFileSystem(%r)" % self.root if self.root else "LocalFileSystem()"


class _StorageReader(io.RawIOBase):
    """A file of a storage in C, read at any offset (ckpt_file_open, ckpt_file_read)."""

    def __init__(self, storage: Any, path: str) -> None:
        super().__init__()
        self.name = path
        self._h = _native.out()
        size = ctypes.c_uint64()
        _native.check(lib.ckpt_file_open(ctypes.byref(self._h), storage, _paths.encode(path),
                                         ctypes.byref(size)), path)
        self._size, self._pos = size.value, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        got = ctypes.c_size_t()
        target = (ctypes.c_char * len(view)).from_buffer(view)
        _native.check(lib.ckpt_file_read(self._h, self._pos, target, len(view), ctypes.byref(got)), self.name)
        self._pos += got.value
        return got.value

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, "negative seek position %d" % (base + offset), self.name)
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if self._h:
            lib.ckpt_file_close(self._h)
            self._h = None
        super().close()


class StorageFiles:
    """A writer's ``fs`` over a storage in C — an ``s3://`` out_dir (`storage` None: paths are URLs),
    ``ckpt.S3Storage``, ``ckpt.NativeMemory`` — through ckpt's C calls for a storage's files (libckpt 0.8.0):
    ``list``, ``stat``, ``isdir``, ``exists``, ``open`` for reading, ``makedirs``, ``remove``. Files are written
    through ckpt's writers, so ``open`` for writing and ``rename`` raise ``ckpt.UnsupportedError``."""

    def __init__(self, where: str, storage: Any = None) -> None:
        self.where = where
        self.storage = storage  # a ckpt.NativeStorage, or None for URLs and local paths

    def _handle(self, what: str) -> Any:
        if _native.VERSION < _native.FILES_SINCE:
            raise errors.UnsupportedError(
                errors.EUNSUPPORTED, "StorageFiles.%s needs libckpt %d.%d.%d or newer (this one is %d.%d.%d)"
                % ((what,) + _native.FILES_SINCE + _native.VERSION))
        return self.storage.handle if self.storage is not None else None

    def _unsupported(self, what: str, path: Any) -> errors.UnsupportedError:
        return errors.UnsupportedError(
            errors.EUNSUPPORTED, "%s: cannot %s a file of %s: ckpt writes files there through its writers (pass a "
            "pfio or pytorch-pfn-extras filesystem object as the writer's fs to have this)" % (path, what, self.where))

    def open(self, path: str, mode: str = "r", buffering: int = -1, encoding: Optional[str] = None,
             errors: Optional[str] = None, newline: Optional[str] = None) -> IO[Any]:
        """The file at `path` for reading ("rb", or text with "r"); other modes raise UnsupportedError."""
        if set(mode) - set("rbt") or "r" not in mode:
            raise self._unsupported("open (mode %r)" % mode, path)
        raw = _StorageReader(self._handle("open"), os.fspath(path))
        binary = io.BufferedReader(raw, buffering if buffering > 1 else 1 << 20)
        if "b" in mode:
            return binary
        return io.TextIOWrapper(binary, encoding, errors, newline)

    def _names(self, handle: Any, path: str) -> List[str]:
        names = []  # type: List[str]
        failed = []  # type: List[BaseException]

        def entry(name: bytes, _ctx: Any) -> int:
            try:
                names.append(os.fsdecode(name))
                return 0
            except BaseException as e:  # noqa: B902 - a callback must not raise into C
                failed.append(e)
                return errors.ENOMEM
        _native.check(lib.ckpt_storage_list(handle, _paths.encode(path), _native.LIST_ENTRY_FN(entry), None),
                      path)
        if failed:
            raise failed[0]
        return names

    def list(self, path_or_prefix: Optional[str] = None, recursive: bool = False) -> Iterator[str]:
        """The names in the directory `path_or_prefix` (sorted; `where` when None); with `recursive`, every file
        and directory below it, as paths relative to it ("sub/name")."""
        handle = self._handle("list")
        top = os.fspath(path_or_prefix) if path_or_prefix is not None else self.where
        pending = [""]
        while pending:
            rel = pending.pop(0)
            for name in self._names(handle, top.rstrip("/") + "/" + rel if rel else top):
                child = (rel + "/" if rel else "") + name.rstrip("/")
                yield child
                if recursive and name.endswith("/"):
                    pending.append(child)

    def stat(self, path: str) -> FileStat:
        """The ``FileStat`` of the file or directory at `path` (``ckpt.NotFoundError``, a FileNotFoundError, when
        there is none). ``last_modified`` is the storage's (an object's Last-Modified on S3, to the second), 0.0 where
        the storage cannot tell; ``last_accessed`` and ``created`` are the same."""
        info = _native.FileInfo()
        path = os.fspath(path)
        _native.check(lib.ckpt_storage_stat(self._handle("stat"), _paths.encode(path), ctypes.byref(info)), path)
        t = 0.0 if info.modified_ns == _native.TIME_UNKNOWN else info.modified_ns / 1e9
        mode = (stat.S_IFDIR | 0o755) if info.is_dir else (stat.S_IFREG | 0o644)
        return FileStat(os.stat_result((mode, 0, 0, 1, 0, 0, info.size, t, t, t)), path)

    def shared_bytes(self, path: str) -> Optional[int]:
        """How many bytes of the file at `path` have blocks it shares with other files — what incremental saves leave
        on XFS or btrfs, where several checkpoints hold their unchanged chunks once (libckpt 0.9.0); None where the
        storage cannot tell (S3, memory, a filesystem without FIEMAP)."""
        shared = ctypes.c_uint64()
        path = os.fspath(path)
        rc = lib.ckpt_storage_shared_bytes(self._handle("shared_bytes"), _paths.encode(path), ctypes.byref(shared))
        if rc == errors.EUNSUPPORTED:
            return None
        _native.check(rc, path)
        return shared.value

    def isdir(self, path: str) -> bool:
        """Whether `path` is a directory (on an object store: a prefix that names go under)."""
        try:
            return self.stat(path).mode & stat.S_IFDIR != 0
        except FileNotFoundError:
            return False

    def exists(self, path: str) -> bool:
        """Whether a file or a directory is at `path`."""
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def remove(self, path: str, recursive: bool = False) -> None:
        """Removes the file `path`, or the directory `path`: an empty one, or with `recursive` everything in it."""
        path = os.fspath(path)
        flags = _native.STORAGE_REMOVE_RECURSIVE if recursive else 0
        _native.check(lib.ckpt_storage_remove(self._handle("remove"), _paths.encode(path), flags), path)

    def rename(self, src: str, dst: str) -> None:
        """Raises UnsupportedError: such a storage renames only the files ckpt's saves write."""
        raise self._unsupported("rename", src)

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        """Creates the directory `path` and its missing parents (nothing on an object store, where directories are
        only the prefixes of names); `mode` and `exist_ok` are pfio's, and ignored."""
        path = os.fspath(path)
        _native.check(lib.ckpt_storage_make_dirs(self._handle("makedirs"), _paths.encode(path)), path)

    def mkdir(self, path: str, *args: Any, **kwargs: Any) -> None:
        """As makedirs."""
        self.makedirs(path)

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> "StorageFiles":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "StorageFiles(%r)" % self.where
