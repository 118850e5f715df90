# SPDX-License-Identifier: Apache-2.0
"""Filesystem objects with the interface pytorch-pfn-extras and pfio give theirs: what a writer's ``fs`` is when
none was given, so that code written against ppe's writers (its snapshot extension lists, stats, opens and removes
snapshots through ``writer.fs``) works with ckpt's.

``LocalFileSystem`` is the local disk. ``StorageFiles`` stands for a storage in C (an ``s3://`` out_dir,
``ckpt.S3Storage``, ``ckpt.NativeMemory``): ckpt writes there, but its C API has no call to list, stat, read or
remove an arbitrary file of such a storage, so those methods raise ``ckpt.UnsupportedError`` saying so (pass a
pfio or ppe filesystem object as ``fs`` to have them).
"""
import io
import os
import shutil
from typing import IO, Any, Callable, Iterator, Optional

from . import errors

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
        """Creates the directory `path` (its parent must exist)."""
        os.mkdir(self._at(path), mode, *args, dir_fd=dir_fd)

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        """Creates the directory `path` and any missing parent."""
        os.makedirs(self._at(path), mode, exist_ok)

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


class StorageFiles:
    """A writer's ``fs`` over a storage in C (an ``s3://`` out_dir, ``ckpt.S3Storage``, ``ckpt.NativeMemory``):
    ``makedirs`` and ``mkdir`` do nothing (such a storage has no directories to create), and every other method
    raises ``ckpt.UnsupportedError``, as ckpt's C API cannot list, stat, read or remove an arbitrary file of it."""

    def __init__(self, where: str) -> None:
        self.where = where

    def _unsupported(self, what: str, path: Any) -> errors.UnsupportedError:
        return errors.UnsupportedError(
            errors.EUNSUPPORTED, "%s: cannot %s a file of %s from Python (ckpt's C API has no call for it): pass a "
            "pfio or pytorch-pfn-extras filesystem object as the writer's fs" % (path, what, self.where))

    def open(self, path: str, mode: str = "r", *args: Any, **kwargs: Any) -> IO[Any]:
        """Raises UnsupportedError."""
        raise self._unsupported("open", path)

    def list(self, path_or_prefix: Optional[str] = None, recursive: bool = False) -> Iterator[str]:
        """Raises UnsupportedError."""
        raise self._unsupported("list", path_or_prefix)

    def stat(self, path: str) -> FileStat:
        """Raises UnsupportedError."""
        raise self._unsupported("stat", path)

    def isdir(self, path: str) -> bool:
        """Raises UnsupportedError."""
        raise self._unsupported("inspect", path)

    def exists(self, path: str) -> bool:
        """Raises UnsupportedError."""
        raise self._unsupported("inspect", path)

    def rename(self, src: str, dst: str) -> None:
        """Raises UnsupportedError."""
        raise self._unsupported("rename", src)

    def remove(self, path: str, recursive: bool = False) -> None:
        """Raises UnsupportedError."""
        raise self._unsupported("remove", path)

    def mkdir(self, path: str, *args: Any, **kwargs: Any) -> None:
        """Nothing: directories are only the prefixes of names there."""

    def makedirs(self, path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        """Nothing: directories are only the prefixes of names there."""

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> "StorageFiles":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "StorageFiles(%r)" % self.where
