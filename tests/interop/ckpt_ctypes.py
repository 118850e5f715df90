# SPDX-License-Identifier: Apache-2.0
"""ctypes glue over libckpt.so for the interop tests: collections in, numpy arrays out.

    lib = ckpt_ctypes.load("/path/to/libckpt.so")
    with lib.vars() as v:
        v.add("w", np.ones(3, np.float32))
        lib.save("model.npz", v, layout=ckpt_ctypes.LAYOUT_OBJAX)
    with lib.read("model.npz") as v:
        v.to_dict()          # {"w": array([1., 1., 1.], dtype=float32)}

Every failing call raises CkptError carrying the code and ckpt_error_message().
"""
import ctypes
import os
import subprocess
import sys
from collections import OrderedDict

import numpy as np

# ckpt.h constants (fixed forever).
OK = 0
ERROR = -1
EINVAL = -2
ENOTFOUND = -3
EFORMAT = -4
EIO = -5
ENOMEM = -6
EMISMATCH = -7
EUNSUPPORTED = -8
EBUSY = -9
EEXIST = -10
EBUFS = -11

COPY = 0
BORROW = 1

LAYOUT_AUTO = 0
LAYOUT_PLAIN = 1
LAYOUT_OBJAX = 2
STORE = 0
DEFLATE = 1

NPZ_OPTIONS_VERSION = 1

UNICODE = 15
BYTES = 16
BFLOAT16 = 17
FLOAT8_E4M3FN = 18
FLOAT8_E5M2 = 19
FLOAT8_E4M3FNUZ = 20
FLOAT8_E5M2FNUZ = 21
FLOAT8_E8M0FNU = 22
VOID = 23
# Types numpy cannot name: arrays of them travel through this glue as their raw bits (uint16 for bfloat16, uint8 for
# the float8 types), with the ckpt dtype given explicitly to Vars.add and read back with dtype_code().
ML_DTYPES = {BFLOAT16: np.dtype(np.uint16), FLOAT8_E4M3FN: np.dtype(np.uint8), FLOAT8_E5M2: np.dtype(np.uint8),
             FLOAT8_E4M3FNUZ: np.dtype(np.uint8), FLOAT8_E5M2FNUZ: np.dtype(np.uint8),
             FLOAT8_E8M0FNU: np.dtype(np.uint8)}

# Checkpoint manager (ckpt.h "checkpoint manager").
LATEST = -1
MANAGER_ASYNC = 1
MANAGER_NO_FALLBACK = 2
MANAGER_NO_MAKEDIR = 4
MANAGER_VERBOSE = 8
MANAGER_OPTIONS_VERSION = 1
LOG_INFO = 1
LOG_WARNING = 2

# ckpt dtype code <-> numpy dtype (native byte order: ckpt data is always native).
_NUMERIC = OrderedDict([
    (1, np.dtype(np.bool_)),
    (2, np.dtype(np.int8)),
    (3, np.dtype(np.int16)),
    (4, np.dtype(np.int32)),
    (5, np.dtype(np.int64)),
    (6, np.dtype(np.uint8)),
    (7, np.dtype(np.uint16)),
    (8, np.dtype(np.uint32)),
    (9, np.dtype(np.uint64)),
    (10, np.dtype(np.float16)),
    (11, np.dtype(np.float32)),
    (12, np.dtype(np.float64)),
    (13, np.dtype(np.complex64)),
    (14, np.dtype(np.complex128)),
])
_CODE_OF = {dt: code for code, dt in _NUMERIC.items()}


def ckpt_dtype_of(dtype):
    """(ckpt dtype code, itemsize) of a numpy dtype, or ValueError if ckpt has no such dtype."""
    dtype = np.dtype(dtype).newbyteorder("=")
    if dtype.kind == "U":
        return UNICODE, dtype.itemsize
    if dtype.kind == "S":
        return BYTES, dtype.itemsize
    if dtype.kind == "V" and dtype.fields is None:
        return VOID, dtype.itemsize
    code = _CODE_OF.get(dtype)
    if code is None:
        raise ValueError("ckpt has no dtype for numpy %s" % dtype)
    return code, dtype.itemsize


def numpy_dtype_of(code, itemsize):
    """The native numpy dtype of a ckpt dtype code (and itemsize, for strings)."""
    if code == UNICODE:
        return np.dtype("=U%d" % (itemsize // 4))
    if code == BYTES:
        return np.dtype("S%d" % itemsize)
    if code == VOID:
        return np.dtype("V%d" % itemsize)
    if code in ML_DTYPES:
        return ML_DTYPES[code]
    return _NUMERIC[code]


class CkptError(Exception):
    """A ckpt call returned a negative code; .code is that code, .message ckpt_error_message()."""

    def __init__(self, function, code, message):
        super().__init__("%s failed with %d (%s): %s" % (function, code, _strerror(code), message))
        self.function = function
        self.code = code
        self.message = message


_strerror = str  # replaced once a library is loaded

RENAME_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)


class NpzOptions(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("layout", ctypes.c_uint32),
        ("compression", ctypes.c_uint32),
        ("level", ctypes.c_int32),
        ("rename", RENAME_FN),
        ("rename_payload", ctypes.c_void_p),
        ("max_header_bytes", ctypes.c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_payload", ctypes.c_void_p),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class ManagerOptions(ctypes.Structure):
    """ckpt_manager_options (version 1). `npz` may point to an NpzOptions of version 1."""
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("keep", ctypes.c_int32),
        ("keep_every", ctypes.c_int64),
        ("flags", ctypes.c_uint32),
        ("queue_depth", ctypes.c_uint32),
        ("subdir", ctypes.c_char_p),
        ("npz", ctypes.POINTER(NpzOptions)),
        ("log", LOG_FN),
        ("log_payload", ctypes.c_void_p),
        ("storage", ctypes.c_void_p),
    ]


class _ManagerHandle(ctypes.Structure):
    pass


class _VarsHandle(ctypes.Structure):
    pass


class _NpzHandle(ctypes.Structure):
    pass


VARS_P = ctypes.POINTER(_VarsHandle)
NPZ_P = ctypes.POINTER(_NpzHandle)
MANAGER_P = ctypes.POINTER(_ManagerHandle)
_SHAPE_P = ctypes.POINTER(ctypes.c_int64)


def _signatures():
    c = ctypes
    return {
        "ckpt_version_string": (c.c_char_p, []),
        "ckpt_strerror": (c.c_char_p, [c.c_int]),
        "ckpt_error_message": (c.c_char_p, []),
        "ckpt_dtype_size": (c.c_size_t, [c.c_uint32]),
        "ckpt_dtype_name": (c.c_char_p, [c.c_uint32]),
        "ckpt_vars_new": (c.c_int, [c.POINTER(VARS_P)]),
        "ckpt_vars_free": (None, [VARS_P]),
        "ckpt_vars_add": (c.c_int, [VARS_P, c.c_char_p, c.c_uint32, c.c_uint32, _SHAPE_P, c.c_void_p, c.c_uint32]),
        "ckpt_vars_add_strings": (c.c_int, [VARS_P, c.c_char_p, c.c_uint32, c.c_size_t, c.c_uint32, _SHAPE_P,
                                            c.c_void_p, c.c_uint32]),
        "ckpt_vars_count": (c.c_size_t, [VARS_P]),
        "ckpt_vars_name": (c.c_char_p, [VARS_P, c.c_size_t]),
        "ckpt_vars_find": (c.c_int, [VARS_P, c.c_char_p, c.POINTER(c.c_size_t)]),
        "ckpt_vars_dtype": (c.c_uint32, [VARS_P, c.c_size_t]),
        "ckpt_vars_itemsize": (c.c_size_t, [VARS_P, c.c_size_t]),
        "ckpt_vars_ndim": (c.c_uint32, [VARS_P, c.c_size_t]),
        "ckpt_vars_shape": (_SHAPE_P, [VARS_P, c.c_size_t]),
        "ckpt_vars_nbytes": (c.c_size_t, [VARS_P, c.c_size_t]),
        "ckpt_vars_data": (c.c_void_p, [VARS_P, c.c_size_t]),
        "ckpt_vars_set_metadata": (c.c_int, [VARS_P, c.c_char_p, c.c_char_p]),
        "ckpt_vars_metadata": (c.c_char_p, [VARS_P, c.c_char_p]),
        "ckpt_vars_metadata_count": (c.c_size_t, [VARS_P]),
        "ckpt_vars_metadata_key": (c.c_char_p, [VARS_P, c.c_size_t]),
        "ckpt_vars_metadata_value": (c.c_char_p, [VARS_P, c.c_size_t]),
        "ckpt_reader_metadata": (c.c_char_p, [NPZ_P, c.c_char_p]),
        "ckpt_reader_metadata_count": (c.c_size_t, [NPZ_P]),
        "ckpt_reader_metadata_key": (c.c_char_p, [NPZ_P, c.c_size_t]),
        "ckpt_reader_metadata_value": (c.c_char_p, [NPZ_P, c.c_size_t]),
        "ckpt_options_init": (c.c_int, [c.POINTER(NpzOptions), c.c_uint32]),
        "ckpt_save": (c.c_int, [c.c_char_p, VARS_P, c.POINTER(NpzOptions)]),
        "ckpt_read": (c.c_int, [c.POINTER(VARS_P), c.c_char_p, c.POINTER(NpzOptions)]),
        "ckpt_read_memory": (c.c_int, [c.POINTER(VARS_P), c.c_void_p, c.c_size_t, c.POINTER(NpzOptions)]),
        "ckpt_restore": (c.c_int, [c.c_char_p, VARS_P, c.POINTER(NpzOptions)]),
        "ckpt_reader_open": (c.c_int, [c.POINTER(NPZ_P), c.c_char_p, c.POINTER(NpzOptions)]),
        "ckpt_reader_close": (None, [NPZ_P]),
        "ckpt_reader_count": (c.c_size_t, [NPZ_P]),
        "ckpt_reader_name": (c.c_char_p, [NPZ_P, c.c_size_t]),
        "ckpt_reader_dtype": (c.c_uint32, [NPZ_P, c.c_size_t]),
        "ckpt_reader_itemsize": (c.c_size_t, [NPZ_P, c.c_size_t]),
        "ckpt_reader_ndim": (c.c_uint32, [NPZ_P, c.c_size_t]),
        "ckpt_reader_shape": (_SHAPE_P, [NPZ_P, c.c_size_t]),
        "ckpt_reader_nbytes": (c.c_size_t, [NPZ_P, c.c_size_t]),
        "ckpt_reader_read_into": (c.c_int, [NPZ_P, c.c_size_t, c.c_void_p, c.c_size_t]),
        "ckpt_manager_options_init": (c.c_int, [c.POINTER(ManagerOptions), c.c_uint32]),
        "ckpt_manager_open": (c.c_int, [c.POINTER(MANAGER_P), c.c_char_p, c.POINTER(ManagerOptions)]),
        "ckpt_manager_save": (c.c_int, [MANAGER_P, VARS_P, c.c_int64]),
        "ckpt_manager_restore": (c.c_int, [MANAGER_P, VARS_P, c.c_int64, c.POINTER(c.c_int64)]),
        "ckpt_manager_read": (c.c_int, [MANAGER_P, c.c_int64, c.POINTER(VARS_P), c.POINTER(c.c_int64)]),
        "ckpt_manager_latest": (c.c_int, [MANAGER_P, c.POINTER(c.c_int64)]),
        "ckpt_manager_list": (c.c_int, [MANAGER_P, c.POINTER(c.c_int64), c.c_size_t, c.POINTER(c.c_size_t)]),
        "ckpt_manager_path": (c.c_int, [MANAGER_P, c.c_int64, c.c_char_p, c.c_size_t]),
        "ckpt_manager_wait": (c.c_int, [MANAGER_P]),
        "ckpt_manager_close": (c.c_int, [MANAGER_P]),
        "ckpt_checkpoint_idx": (c.c_int64, [c.c_char_p]),
    }


def _path(p):
    return os.fsencode(p)


def _array_from(code, itemsize, ndim, shape_p, nbytes, data_p):
    """A numpy array that owns a copy of `nbytes` at data_p, shaped and typed as ckpt describes it."""
    dtype = numpy_dtype_of(code, itemsize)
    shape = tuple(shape_p[k] for k in range(ndim))
    if nbytes == 0:
        return np.zeros(shape, dtype)
    raw = (ctypes.c_char * nbytes).from_address(data_p)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


class Library:
    """libckpt.so with every function's signature declared."""

    def __init__(self, path):
        global _strerror
        self.path = path
        self.c = ctypes.CDLL(path)
        for name, (restype, argtypes) in _signatures().items():
            f = getattr(self.c, name)
            f.restype = restype
            f.argtypes = argtypes
        _strerror = lambda code: self.c.ckpt_strerror(code).decode()

    def check(self, function, code):
        if code != OK:
            raise CkptError(function, code, self.c.ckpt_error_message().decode("utf-8", "replace"))

    def version(self):
        return self.c.ckpt_version_string().decode()

    def options(self, layout=LAYOUT_AUTO, compression=STORE, level=0, rename=None, max_header_bytes=0):
        """An NpzOptions; `rename` is a Python function name -> new name (str), or None to keep the name."""
        opts = NpzOptions()
        self.check("ckpt_options_init", self.c.ckpt_options_init(ctypes.byref(opts), NPZ_OPTIONS_VERSION))
        opts.layout = layout
        opts.compression = compression
        opts.level = level
        opts.max_header_bytes = max_header_bytes
        if rename is not None:
            opts.rename = _renamer(rename)
            opts._keep = opts.rename  # the trampoline must outlive the options
        return opts

    def vars(self, arrays=None, flags=COPY):
        """A new collection, optionally filled from a mapping name -> array."""
        v = Vars(self)
        for name, a in (arrays or {}).items():
            v.add(name, a, flags)
        return v

    def save(self, path, vars, **options):
        opts = self.options(**options)
        self.check("ckpt_save", self.c.ckpt_save(_path(path), vars.handle, ctypes.byref(opts)))

    def read(self, path, **options):
        opts = self.options(**options)
        out = VARS_P()
        self.check("ckpt_read", self.c.ckpt_read(ctypes.byref(out), _path(path), ctypes.byref(opts)))
        return Vars(self, out)

    def read_memory(self, data, **options):
        opts = self.options(**options)
        out = VARS_P()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        self.check("ckpt_read_memory",
                   self.c.ckpt_read_memory(ctypes.byref(out), buf, len(data), ctypes.byref(opts)))
        return Vars(self, out)

    def restore(self, path, vars, **options):
        opts = self.options(**options)
        code = self.c.ckpt_restore(_path(path), vars.handle, ctypes.byref(opts))
        if code != OK and opts.rename and opts._keep.error is not None:
            raise opts._keep.error
        self.check("ckpt_restore", code)

    def open(self, path, **options):
        opts = self.options(**options)
        out = NPZ_P()
        self.check("ckpt_reader_open", self.c.ckpt_reader_open(ctypes.byref(out), _path(path), ctypes.byref(opts)))
        return Npz(self, out)


def _renamer(fn):
    """A ckpt_rename_fn trampoline around fn(name) -> str; errors inside fn abort the restore."""

    def trampoline(name_on_disk, buf, buf_size, payload):
        try:
            new = fn(name_on_disk.decode("utf-8"))
            if new is None:
                return 0
            data = new.encode("utf-8")
            if len(data) <= buf_size:
                ctypes.memmove(buf, data, len(data))
            return len(data)
        except BaseException as e:  # must not unwind through C
            trampoline_c.error = e
            return ERROR

    trampoline_c = RENAME_FN(trampoline)
    trampoline_c.error = None
    return trampoline_c


class Vars:
    """Owns a ckpt_vars*. Arrays go in with add(), come out as numpy copies with array()/to_dict()."""

    def __init__(self, lib, handle=None):
        self.lib = lib
        self._borrowed = []  # arrays added with BORROW stay alive as long as the collection
        if handle is None:
            handle = VARS_P()
            lib.check("ckpt_vars_new", lib.c.ckpt_vars_new(ctypes.byref(handle)))
        self.handle = handle

    def close(self):
        if self.handle:
            self.lib.c.ckpt_vars_free(self.handle)
        self.handle = VARS_P()
        self._borrowed = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def add(self, name, array, flags=COPY, dtype=None):
        """Adds a numpy array (any byte order or memory order: it is passed as native C order). `dtype` (a ckpt
        code such as BFLOAT16) stores the array's raw bits as that type instead of its numpy type."""
        array = np.asarray(array)
        code, itemsize = ckpt_dtype_of(array.dtype)
        if dtype is not None:
            if array.dtype.itemsize != self.lib.c.ckpt_dtype_size(dtype):
                raise ValueError("%s items are not %d-byte bits" % (array.dtype, self.lib.c.ckpt_dtype_size(dtype)))
            code = dtype
        # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
        array = np.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=False)
        ndim = array.ndim
        shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
        data = array.ctypes.data_as(ctypes.c_void_p) if array.nbytes else None
        name_b = name.encode("utf-8")
        if code in (UNICODE, BYTES, VOID):
            rc = self.lib.c.ckpt_vars_add_strings(self.handle, name_b, code, itemsize, ndim, shape, data, flags)
            self.lib.check("ckpt_vars_add_strings", rc)
        else:
            rc = self.lib.c.ckpt_vars_add(self.handle, name_b, code, ndim, shape, data, flags)
            self.lib.check("ckpt_vars_add", rc)
        if flags == BORROW:
            self._borrowed.append(array)
        return array

    def add_zeros(self, name, dtype, shape):
        """Adds a zero-filled array (data NULL, CKPT_COPY), ready to be restored into. `dtype` is a numpy dtype or
        a ckpt code of a fixed-size type."""
        if isinstance(dtype, int):
            code, itemsize = dtype, self.lib.c.ckpt_dtype_size(dtype)
        else:
            code, itemsize = ckpt_dtype_of(dtype)
        shape_c = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        name_b = name.encode("utf-8")
        if code in (UNICODE, BYTES, VOID):
            rc = self.lib.c.ckpt_vars_add_strings(self.handle, name_b, code, itemsize, len(shape), shape_c, None, COPY)
        else:
            rc = self.lib.c.ckpt_vars_add(self.handle, name_b, code, len(shape), shape_c, None, COPY)
        self.lib.check("ckpt_vars_add", rc)

    def __len__(self):
        return self.lib.c.ckpt_vars_count(self.handle)

    def name(self, i):
        n = self.lib.c.ckpt_vars_name(self.handle, i)
        return None if n is None else n.decode("utf-8")

    def names(self):
        return [self.name(i) for i in range(len(self))]

    def find(self, name):
        i = ctypes.c_size_t()
        self.lib.check("ckpt_vars_find", self.lib.c.ckpt_vars_find(self.handle, name.encode("utf-8"), ctypes.byref(i)))
        return i.value

    def array(self, i):
        """A copy of array i (an index or a name) as a numpy array in native byte order."""
        if isinstance(i, str):
            i = self.find(i)
        if not 0 <= i < len(self):
            raise IndexError(i)
        c, h = self.lib.c, self.handle
        return _array_from(c.ckpt_vars_dtype(h, i), c.ckpt_vars_itemsize(h, i), c.ckpt_vars_ndim(h, i),
                           c.ckpt_vars_shape(h, i), c.ckpt_vars_nbytes(h, i), c.ckpt_vars_data(h, i))

    def to_dict(self):
        return OrderedDict((self.name(i), self.array(i)) for i in range(len(self)))

    def dtype_code(self, i):
        return self.lib.c.ckpt_vars_dtype(self.handle, self.find(i) if isinstance(i, str) else i)

    def set_metadata(self, key, value):
        """Sets (value None: removes) a metadata key."""
        v = None if value is None else value.encode("utf-8")
        self.lib.check("ckpt_vars_set_metadata", self.lib.c.ckpt_vars_set_metadata(self.handle, key.encode("utf-8"), v))

    def metadata(self):
        """The metadata as an ordered dict, read through the count/key/value accessors and checked against the
        lookup by key."""
        c, h = self.lib.c, self.handle
        return _metadata(c.ckpt_vars_metadata_count(h), lambda i: c.ckpt_vars_metadata_key(h, i),
                         lambda i: c.ckpt_vars_metadata_value(h, i), lambda k: c.ckpt_vars_metadata(h, k))


def _metadata(count, key, value, find):
    out = OrderedDict()
    for i in range(count):
        k, v = key(i), value(i)
        if find(k) != v:
            raise AssertionError("metadata %r: the lookup gives %r, the index %r" % (k, find(k), v))
        out[k.decode("utf-8")] = v.decode("utf-8")
    if key(count) is not None or value(count) is not None:
        raise AssertionError("metadata index %d past the count gives a key" % count)
    return out


class Npz:
    """Owns a ckpt_reader* (lazy reader): headers via accessors, data via read()."""

    def __init__(self, lib, handle):
        self.lib = lib
        self.handle = handle

    def close(self):
        if self.handle:
            self.lib.c.ckpt_reader_close(self.handle)
        self.handle = NPZ_P()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __len__(self):
        return self.lib.c.ckpt_reader_count(self.handle)

    def name(self, i):
        n = self.lib.c.ckpt_reader_name(self.handle, i)
        return None if n is None else n.decode("utf-8")

    def names(self):
        return [self.name(i) for i in range(len(self))]

    def dtype(self, i):
        return numpy_dtype_of(self.lib.c.ckpt_reader_dtype(self.handle, i), self.lib.c.ckpt_reader_itemsize(self.handle, i))

    def shape(self, i):
        c, h = self.lib.c, self.handle
        p = c.ckpt_reader_shape(h, i)
        return tuple(p[k] for k in range(c.ckpt_reader_ndim(h, i)))

    def nbytes(self, i):
        return self.lib.c.ckpt_reader_nbytes(self.handle, i)

    def read(self, i):
        """Array i read with ckpt_reader_read_into into a numpy array allocated from the header's dtype/shape."""
        out = np.zeros(self.shape(i), self.dtype(i))
        if out.nbytes != self.nbytes(i):
            raise AssertionError("ckpt_reader_nbytes(%d) = %d, but dtype %s and shape %s make %d bytes"
                                 % (i, self.nbytes(i), out.dtype, out.shape, out.nbytes))
        dst = out.ctypes.data_as(ctypes.c_void_p) if out.nbytes else None
        self.lib.check("ckpt_reader_read_into", self.lib.c.ckpt_reader_read_into(self.handle, i, dst, out.nbytes))
        return out

    def to_dict(self):
        return OrderedDict((self.name(i), self.read(i)) for i in range(len(self)))

    def dtype_code(self, i):
        return self.lib.c.ckpt_reader_dtype(self.handle, i)

    def metadata(self):
        c, h = self.lib.c, self.handle
        return _metadata(c.ckpt_reader_metadata_count(h), lambda i: c.ckpt_reader_metadata_key(h, i),
                         lambda i: c.ckpt_reader_metadata_value(h, i), lambda k: c.ckpt_reader_metadata(h, k))


def library_path(argv=None):
    """The library named by argv[1] or $CKPT_LIB."""
    argv = sys.argv if argv is None else argv
    if len(argv) > 1 and not argv[1].startswith("-"):
        return argv[1]
    return os.environ.get("CKPT_LIB")


def preload_sanitizer_runtime(path):
    """Re-executes this interpreter with LD_PRELOAD=libasan (and libstdc++) when the library was built with
    AddressSanitizer: ASan must be the first library loaded, and ctypes loads it far too late (ASan would abort
    the process). libstdc++ must be there from the start too, or ASan's __cxa_throw interceptor finds no real
    __cxa_throw and aborts at the library's first exception (the interpreter does not link libstdc++)."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    except OSError:
        return
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            for prefix in ("libasan.so", "libstdc++.so"):
                if parts[0].startswith(prefix):
                    found[prefix] = parts[2]
    if "libasan.so" not in found or found["libasan.so"] in os.environ.get("LD_PRELOAD", ""):
        return
    env = dict(os.environ)
    preload = [found["libasan.so"], found.get("libstdc++.so"), env.get("LD_PRELOAD")]
    env["LD_PRELOAD"] = ":".join(p for p in preload if p)
    # The interpreter itself is not leak-clean; the library's leaks are the C++ tests' business.
    env["ASAN_OPTIONS"] = ":".join(p for p in (env.get("ASAN_OPTIONS"), "detect_leaks=0") if p)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def load(path):
    return Library(path)


def run_tests(argv, versions):
    """The interop scripts' main: takes the library from argv[1] (or $CKPT_LIB), preloads a sanitizer runtime it
    needs, prints `versions(library)` and runs the unittest cases of __main__. Returns the exit status."""
    import unittest
    argv = list(argv)
    if len(argv) > 1 and not argv[1].startswith("-"):
        os.environ["CKPT_LIB"] = os.path.abspath(argv.pop(1))
    if not os.environ.get("CKPT_LIB"):
        sys.stderr.write("usage: %s /path/to/libckpt.so [unittest args]  (or set CKPT_LIB)\n" % argv[0])
        return 2
    if not os.path.exists(os.environ["CKPT_LIB"]):
        sys.stderr.write("FAIL: %s does not exist\n" % os.environ["CKPT_LIB"])
        return 1
    preload_sanitizer_runtime(os.environ["CKPT_LIB"])
    sys.stdout.write(versions(load(os.environ["CKPT_LIB"])) + "\n")
    program = unittest.main(argv=argv, exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1
