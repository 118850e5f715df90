"""CkptError and its subclasses: every ckpt status code surfaces as one, with the library's message.

Where Python has a natural exception for a code, the subclass also derives from it, so that ordinary handlers
work: ``except FileNotFoundError`` catches a missing checkpoint, ``except ValueError`` a malformed file or a
mismatch, ``except MemoryError`` an allocation failure.
"""

OK, ERROR, EINVAL, ENOTFOUND, EFORMAT, EIO, ENOMEM, EMISMATCH, EUNSUPPORTED, EBUSY, EEXIST, EBUFS = (
    0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11)



def strerror(code):
    """The library's static text for a code ("invalid argument")."""
    from ._native import lib
    return lib.ckpt_strerror(code).decode()


class CkptError(Exception):
    """A failed ckpt call: ``code`` is the CKPT_E* status code, ``message`` the library's detailed message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return "%s (%s, %d)" % (self.message, strerror(self.code), self.code)


class InvalidArgumentError(CkptError, ValueError):
    """CKPT_EINVAL."""


class NotFoundError(CkptError, FileNotFoundError):
    """CKPT_ENOTFOUND: no such file, variable or checkpoint."""

    def __init__(self, code, message):
        CkptError.__init__(self, code, message)


class FormatError(CkptError, ValueError):
    """CKPT_EFORMAT: a malformed or corrupt file."""


class StorageError(CkptError, OSError):
    """CKPT_EIO: the storage failed."""

    def __init__(self, code, message):
        CkptError.__init__(self, code, message)


class OutOfMemoryError(CkptError, MemoryError):
    """CKPT_ENOMEM."""


class MismatchError(CkptError, ValueError):
    """CKPT_EMISMATCH: variables missing from a file, or of another dtype or shape."""


class UnsupportedError(CkptError, ValueError):
    """CKPT_EUNSUPPORTED: valid NumPy content ckpt does not handle (object or structured arrays)."""


class BusyError(CkptError, BlockingIOError):
    """CKPT_EBUSY: another manager holds the checkpoint directory."""

    def __init__(self, code, message):
        CkptError.__init__(self, code, message)


class ExistsError(CkptError, FileExistsError):
    """CKPT_EEXIST."""

    def __init__(self, code, message):
        CkptError.__init__(self, code, message)


class BufferTooSmallError(CkptError):
    """CKPT_EBUFS."""


_BY_CODE = {EINVAL: InvalidArgumentError, ENOTFOUND: NotFoundError, EFORMAT: FormatError, EIO: StorageError,
            ENOMEM: OutOfMemoryError, EMISMATCH: MismatchError, EUNSUPPORTED: UnsupportedError, EBUSY: BusyError,
            EEXIST: ExistsError, EBUFS: BufferTooSmallError}


def error_for(code, message):
    """The exception for a status code."""
    return _BY_CODE.get(code, CkptError)(code, message)
