# SPDX-License-Identifier: Apache-2.0
"""Collections of named arrays crossing into ckpt (borrowed, no copy) and coming back (ckpt's buffers, no copy)."""
import ctypes
import os
from collections import OrderedDict
from typing import Any, Optional

import numpy as np

from . import _native, dtypes, errors
from ._native import lib

try:  # the compiled fast path for adding many arrays; the ctypes path below does everything without it
    if os.environ.get("CKPT_NO_SPEEDUPS"):
        raise ImportError("disabled by CKPT_NO_SPEEDUPS")
    from . import _speedups
    _speedups.set_functions(ctypes.cast(lib.ckpt_vars_add, ctypes.c_void_p).value)
except ImportError:
    _speedups = None

_Int64s = {}  # ndim -> ctypes array type


def _shape_of(shape):
    n = len(shape)
    t = _Int64s.get(n)
    if t is None:
        t = _Int64s[n] = ctypes.c_int64 * max(n, 1)
    return t(*shape)


class RawArray(np.ndarray):
    """A numpy array of raw bfloat16 or float8 bits (dtype 'V2' or 'V1', as numpy.load gives them) that remembers
    its ckpt type in ``ckpt_dtype``, so saving it again keeps the type. ``ckpt.view(a)`` gives typed values."""

    ckpt_dtype = None  # type: Optional[str]

    def __array_finalize__(self, obj: Any) -> None:
        self.ckpt_dtype = getattr(obj, "ckpt_dtype", None)


def _found(value: Any) -> str:
    """What an error says a value that is no array is."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return "a numpy array of dtype %s" % value.dtype
    kind = type(value).__name__ if type(value).__module__ == "builtins" else "%s.%s" % (type(value).__module__,
                                                                                    type(value).__qualname__)
    return "%s %s" % ("an" if kind[0] in "aeiou" else "a", kind)


def as_array(value: Any) -> Any:
    """A numpy array (or ckpt.typed) for a value: numpy arrays, numbers, torch tensors (bfloat16 included),
    objects with __array__."""
    if isinstance(value, (np.ndarray, dtypes.typed)):
        return value
    module = type(value).__module__
    if module.startswith("torch"):
        return _from_torch(value)
    return np.asarray(value)


def _from_torch(t):
    import torch
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        return dtypes.typed(t.view(torch.int16).numpy().view(np.uint16), dtypes.BFLOAT16)
    for name in dtypes.ML_CODES:
        if getattr(torch, name, None) is not None and t.dtype == getattr(torch, name):
            return dtypes.typed(t.view(torch.uint8).numpy(), name)
    return t.numpy()


class Source:
    """An array of ``dtype`` and ``shape`` whose bytes a save pulls from ``read(offset, size)`` a few MiB at a time
    (ckpt_vars_add_source), instead of holding them: save it as any array (``ckpt.save(path, {"w": Source(...)})``)
    and the save's memory stays bounded, whatever its size. ``read`` returns ``size`` bytes (any bytes-like object)
    of the array's native-order, C-order bytes starting at ``offset``; the save may ask for a range more than once,
    never two at once. What it raises fails the save, whose error carries it; the old file stays as it was."""

    __slots__ = ("dtype", "shape", "read")

    def __init__(self, dtype: Any, shape: Any, read: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.read = read


class Rows:
    """Rows ``[begin, begin + len(array))`` of a global array of ``global_rows`` rows along the first dimension: how
    a rank of a sharded checkpoint saves its piece of a split variable (FSDP/ZeRO), and restores the rows it owns
    now — from whichever shards hold them, whatever the number of ranks that saved them. Restores fill ``array``
    in place. Outside sharded checkpoints the array is saved as it is."""

    __slots__ = ("array", "begin", "global_rows")

    def __init__(self, array: Any, begin: int, global_rows: int) -> None:
        self.array = array
        self.begin = int(begin)
        self.global_rows = int(global_rows)

    def __repr__(self) -> str:
        return "Rows(begin=%d, global_rows=%d, shape=%s)" % (self.begin, self.global_rows, getattr(self.array, "shape", None))


class Vars(_native.Handle):
    """Owns a ckpt_vars*. Borrowed arrays are kept alive as long as the collection."""

    __slots__ = ("handle", "_keep", "borrowed")
    _release = "ckpt_vars_free"

    def __init__(self, handle=None):
        if handle is None:
            h = _native.out()
            _native.check(lib.ckpt_vars_new(ctypes.byref(h)))
            handle = h.value
        self.handle = handle
        self._keep = []
        self.borrowed = []  # per array added: whether ckpt points at the caller's memory

    def close(self):
        """Releases the collection and the arrays it borrowed."""
        super().close()
        self._keep = []

    def add(self, name, value, writable=False):
        """Adds `value` under `name` without a copy (a C-contiguous native-order copy is made only when it is not
        one already). Returns the numpy array ckpt points at. With `writable`, only an array ckpt may write into
        in place is borrowed; anything else is added as a zero-filled copy (to restore into and copy back).
        A ``Rows`` value adds its array marked as those rows of a global one."""
        if isinstance(value, Rows):
            data = self.add(name, value.array, writable=writable)
            _native.check(lib.ckpt_vars_set_rows(self.handle, len(self) - 1, value.begin, value.global_rows))
            return data
        if not isinstance(name, str):
            raise errors.ArgumentTypeError(errors.EINVAL, "an array's name must be a str, not %s (%r)"
                                           % (type(name).__name__, name))
        if isinstance(value, Source):
            return self._add_source(name, value)
        array = as_array(value)
        try:
            code, itemsize, data = dtypes.code_of(array)
        except errors.UnsupportedDtypeError as e:
            raise errors.UnsupportedDtypeError(e.code, "%r: %s; the value is %s" % (name, e.message, _found(value))) \
                from None
        if isinstance(array, RawArray) and array.ckpt_dtype is not None:
            code = dtypes.ML_CODES[array.ckpt_dtype]
        if data.dtype.byteorder == ">" or not data.flags.c_contiguous:
            if writable:
                data = None
            else:
                data = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("="))
                data = data.reshape(array.shape)  # ascontiguousarray turns 0-d into 1-d
        elif writable and not data.flags.writeable:
            data = None
        shape = _shape_of(array.shape)
        flags = _native.BORROW if data is not None else _native.COPY
        ptr = data.ctypes.data if data is not None and data.nbytes else None
        n = len(array.shape)
        encoded = name.encode("utf-8")
        if code in (dtypes.UNICODE, dtypes.BYTES, dtypes.VOID):
            rc = lib.ckpt_vars_add_strings(self.handle, encoded, code, itemsize, n, shape, ptr, flags)
        else:
            rc = lib.ckpt_vars_add(self.handle, encoded, code, n, shape, ptr, flags)
        _native.check(rc)
        if data is not None:
            self._keep.append(data)
        # In place only when ckpt points at the caller's own memory: the array itself, or a torch tensor's.
        self.borrowed.append(data is not None and (data is value or type(value).__module__.startswith("torch") or
                                                   (isinstance(value, dtypes.typed) and data is value.bits)))
        return data

    def is_source(self, i):
        """Whether array i was added from a ``Source`` (ckpt_vars_is_source)."""
        return lib.ckpt_vars_is_source(self.handle, i) == 1

    def _add_source(self, name, source):
        code, itemsize, _ = dtypes.code_of(np.empty(0, source.dtype))

        def pull(_payload, offset, dst, size):
            try:
                data = memoryview(source.read(offset, size)).cast("B")
                if len(data) != size:
                    raise ValueError("read(%d, %d) returned %d bytes" % (offset, size, len(data)))
                ctypes.memmove(dst, (ctypes.c_char * size).from_buffer_copy(data), size)
                return 0
            except BaseException as exc:  # noqa: B036 -- any exception fails the save, never crosses into C
                _native.set_message(exc)
                return errors.EIO if isinstance(exc, OSError) else -1

        fn = _native.SOURCE_FN(pull)
        shape = _shape_of(source.shape)
        _native.check(lib.ckpt_vars_add_source(self.handle, name.encode("utf-8"), code, itemsize, len(source.shape),
                                               shape, fn, None))
        self._keep.append(fn)
        self.borrowed.append(False)
        return None

    def add_all(self, items, writable=False):
        """Adds every (name, value) of a list, in order: plain numpy arrays in one compiled call when the fast
        path is built, the rest one by one."""
        start = 0
        while start < len(items):
            if _speedups is not None:
                end, code = _speedups.add_arrays(self.handle, items, start, writable)
                self._keep.append(items)  # keeps every value the fast path borrowed alive
                self.borrowed.extend([True] * (end - start))
                _native.check(code)
                if end == len(items):
                    return
                start = end
            name, value = items[start]
            self.add(name, value, writable=writable)
            start += 1

    def set_metadata(self, metadata):
        """Sets every key of a dict (str() of keys and values) as the collection's metadata."""
        for k, v in (metadata or {}).items():
            _native.check(lib.ckpt_vars_set_metadata(self.handle, str(k).encode("utf-8"), str(v).encode("utf-8")))

    def metadata(self):
        """The collection's metadata: key -> value, in order."""
        return read_metadata(self.handle, lib.ckpt_vars_metadata_count, lib.ckpt_vars_metadata_key,
                             lib.ckpt_vars_metadata_value)

    def __len__(self):
        return lib.ckpt_vars_count(self.handle)

    def rows(self, i):
        """(begin, global_rows) of array i when it is a row split, else None."""
        begin, total = ctypes.c_int64(), ctypes.c_int64()
        rc = lib.ckpt_vars_rows(self.handle, i, ctypes.byref(begin), ctypes.byref(total))
        if rc == errors.ENOTFOUND:
            return None
        _native.check(rc)
        return begin.value, total.value

    def array(self, i, copy=False):
        """Array i as numpy sees it: a view of ckpt's buffer that keeps this collection alive (or a copy)."""
        h = self.handle
        a = wrap(lib.ckpt_vars_dtype(h, i), lib.ckpt_vars_itemsize(h, i), lib.ckpt_vars_ndim(h, i),
                 lib.ckpt_vars_shape(h, i), lib.ckpt_vars_nbytes(h, i), lib.ckpt_vars_data(h, i), self)
        return a.copy() if copy else a

    def restored(self, i):
        """Whether the latest restore into this collection filled array i (a partial restore may leave some)."""
        return lib.ckpt_vars_restored(self.handle, i) == 1

    def to_dict(self):
        """Every array (views that keep the collection's buffers alive), in order."""
        h = self.handle
        return OrderedDict((lib.ckpt_vars_name(h, i).decode("utf-8"), self.array(i)) for i in range(len(self)))


def read_metadata(handle, count, key, value):
    """The metadata of a handle, read through its count, key(i) and value(i) functions."""
    return OrderedDict((key(handle, i).decode("utf-8"), value(handle, i).decode("utf-8"))
                       for i in range(count(handle)))


def wrap(code, itemsize, ndim, shape_p, nbytes, data_p, owner):
    """A numpy array over `nbytes` at data_p (kept alive through `owner`), typed and shaped as ckpt says."""
    dt = dtypes.numpy_dtype(code, itemsize)
    shape = tuple(shape_p[k] for k in range(ndim))
    if nbytes == 0 or not data_p:
        a = np.zeros(shape, dt)
    else:
        buf = (ctypes.c_char * nbytes).from_address(data_p)
        buf._owner = owner  # the numpy array keeps buf, buf keeps the collection that owns the bytes
        a = np.frombuffer(buf, dtype=dt).reshape(shape)
    return mark(a, code)


def mark(a, code):
    """`a` as a RawArray remembering its ckpt type, when it holds raw bfloat16/float8 bits."""
    if code in dtypes.ML_NAMES and a.dtype.kind == "V":
        a = a.view(RawArray)
        a.ckpt_dtype = dtypes.ML_NAMES[code]
    return a
