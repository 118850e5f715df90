# SPDX-License-Identifier: Apache-2.0
"""CkptError and its subclasses: every ckpt failure surfaces as one, with the library's message.

Where Python has a natural exception for a code, the subclass also derives from it, so that ordinary handlers
work: ``except FileNotFoundError`` catches a missing checkpoint, ``except ValueError`` a malformed file or a
mismatch, ``except MemoryError`` an allocation failure, ``except TypeError`` an argument of the wrong type.

This module needs nothing else of the package: the library's text for a code (``strerror``) is given to it by
the module that loads the library, once loaded.
"""
import errno as _errno
import os as _os
from typing import Callable, Dict, Optional, Type, Union

__all__ = ["ArgumentTypeError", "BufferTooSmallError", "BusyError", "CkptError", "ExistsError", "FormatError",
           "InvalidArgumentError", "MismatchError", "NotFoundError", "OutOfMemoryError", "StorageError",
           "StoragePermissionError", "UnsupportedDtypeError", "UnsupportedError", "error_for", "strerror"]

OK, ERROR, EINVAL, ENOTFOUND, EFORMAT, EIO, ENOMEM, EMISMATCH, EUNSUPPORTED, EBUSY, EEXIST, EBUFS = (
    0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11)

_strerror = None  # type: Optional[Callable[[int], str]]


def use_strerror(function: Callable[[int], str]) -> None:
    """Makes `function` (the library's ckpt_strerror) the source of ``strerror``; the package calls it once it has
    loaded the library."""
    global _strerror
    _strerror = function


def strerror(code: int) -> str:
    """The library's static text for a code ("invalid argument")."""
    if _strerror is None:  # only before the library is loaded: a bare errors module
        return "ckpt error %d" % code
    return _strerror(code)


class CkptError(Exception):
    """A failed ckpt call: ``code`` is the CKPT_E* status code, ``message`` the library's detailed message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return "%s (%s, %d)" % (self.message, strerror(self.code), self.code)


class InvalidArgumentError(CkptError, ValueError):
    """CKPT_EINVAL."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """CKPT_EINVAL for an argument of a type ckpt does not take (a name that is not a str, a renamer that is not a
    callable, a dict or a list): also a ``TypeError``."""


class NotFoundError(CkptError, FileNotFoundError):
    """CKPT_ENOTFOUND: no such file, variable or checkpoint. When a file is missing, ``errno`` is
    ``errno.ENOENT`` and ``filename`` its path, as on any FileNotFoundError; otherwise both are None."""

    def __init__(self, code: int, message: str) -> None:
        CkptError.__init__(self, code, message)


class FormatError(CkptError, ValueError):
    """CKPT_EFORMAT: a malformed or corrupt file."""


class StorageError(CkptError, OSError):
    """CKPT_EIO: the storage failed. When the library's message ends with the operating system's words for an
    error ("No space left on device"), ``errno`` is that error (``errno.ENOSPC``) and ``strerror`` its words, as
    on any OSError; ``filename`` is the path the message names first (the target of a save, not its temporary).
    A refused permission (EACCES, EPERM) is a ``StoragePermissionError``, also a ``PermissionError``."""

    def __init__(self, code: int, message: str) -> None:
        CkptError.__init__(self, code, message)


class StoragePermissionError(StorageError, PermissionError):
    """CKPT_EIO for a refused permission (EACCES, EPERM): also a ``PermissionError``."""


class OutOfMemoryError(CkptError, MemoryError):
    """CKPT_ENOMEM."""


class MismatchError(CkptError, ValueError):
    """CKPT_EMISMATCH: variables missing from a file, or of another dtype or shape."""


class UnsupportedError(CkptError, ValueError):
    """CKPT_EUNSUPPORTED: valid NumPy content ckpt does not handle (object or structured arrays)."""


class UnsupportedDtypeError(UnsupportedError, TypeError):
    """CKPT_EUNSUPPORTED for an array whose dtype ckpt does not store (object, structured, datetime), or cannot
    view without ml_dtypes: also a ``TypeError``, as numpy's own refusals of a dtype are."""


class BusyError(CkptError, BlockingIOError):
    """CKPT_EBUSY: another manager holds the checkpoint directory."""

    def __init__(self, code: int, message: str) -> None:
        CkptError.__init__(self, code, message)


class ExistsError(CkptError, FileExistsError):
    """CKPT_EEXIST."""

    def __init__(self, code: int, message: str) -> None:
        CkptError.__init__(self, code, message)


class BufferTooSmallError(CkptError):
    """CKPT_EBUFS."""


_BY_CODE = {EINVAL: InvalidArgumentError, ENOTFOUND: NotFoundError, EFORMAT: FormatError, EIO: StorageError,
            ENOMEM: OutOfMemoryError, EMISMATCH: MismatchError, EUNSUPPORTED: UnsupportedError, EBUSY: BusyError,
            EEXIST: ExistsError, EBUFS: BufferTooSmallError}  # type: Dict[int, Type[CkptError]]


def error_for(code: int, message: str, filename: Union[str, bytes, "_os.PathLike[str]", None] = None) -> CkptError:
    """The exception for a status code. `filename`: the path of the file the failed call was given; a
    NotFoundError then carries it, with errno ENOENT, as Python's FileNotFoundError does."""
    if code == EIO:
        return _storage_error(code, message, filename)
    err = _BY_CODE.get(code, CkptError)(code, message)
    if filename is not None and isinstance(err, NotFoundError):
        err.errno = _errno.ENOENT
        err.strerror = _os.strerror(_errno.ENOENT)
        err.filename = _os.fsdecode(filename)
    return err


# The operating system's words for each errno, longest first (so "Permission denied" does not hide a longer text).
_WORDS = sorted(((_os.strerror(n), n) for n in _errno.errorcode), key=lambda w: -len(w[0]))
_PERMISSION = {_errno.EACCES, _errno.EPERM}  # as Python maps them to PermissionError


def _storage_error(code: int, message: str, filename: Union[str, bytes, "_os.PathLike[str]", None]) -> CkptError:
    """A StorageError with the errno, strerror and filename its message tells (the library states an OS error as
    "<path>: <what>: <strerror>")."""
    number, words = None, None
    for text, n in _WORDS:
        at = message.rfind(text)
        if at >= 0 and (number is None or at > message.rfind(words)):
            number, words = n, text
    cls = StoragePermissionError if number in _PERMISSION else StorageError
    err = cls(code, message)
    err.errno, err.strerror = number, words
    if filename is not None:
        err.filename = _os.fsdecode(filename)
    elif ": " in message:
        err.filename = message.split(": ", 1)[0]
    return err
