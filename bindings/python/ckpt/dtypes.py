# SPDX-License-Identifier: Apache-2.0
"""ckpt's dtypes as numpy sees them.

numpy has no bfloat16 or float8. Without ml_dtypes, arrays of those types come back as numpy's raw-bytes ``'V2'``
and ``'V1'`` arrays, exactly what ``np.load`` gives for the same file; their ``ckpt_dtype`` attribute
(``ckpt.RawArray``) is then the real type, and ``view(array, "bfloat16")`` (or ``array.view(ml_dtypes.bfloat16)``) gives typed values. When ml_dtypes is
importable, arrays are returned with its types directly, and arrays of its types are saved as ckpt's.

To save raw bits as one of these types without ml_dtypes, pass a ``ckpt.typed(bits, "bfloat16")`` value (bits as
``uint16``/``uint8`` or ``V2``/``V1``).
"""
from typing import Any, Tuple, Union

import numpy as np

from . import errors
from ._native import lib

__all__ = ["code_of", "name", "numpy_dtype", "size", "typed", "view"]

try:  # optional: numpy types for bfloat16 and float8 when installed
    import ml_dtypes as _ml
except ImportError:
    _ml = None

BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64 = range(1, 10)
FLOAT16, FLOAT32, FLOAT64, COMPLEX64, COMPLEX128, UNICODE, BYTES = range(10, 17)
BFLOAT16, FLOAT8_E4M3FN, FLOAT8_E5M2, FLOAT8_E4M3FNUZ, FLOAT8_E5M2FNUZ, FLOAT8_E8M0FNU, VOID = range(17, 24)

_NUMPY = {BOOL: np.bool_, INT8: np.int8, INT16: np.int16, INT32: np.int32, INT64: np.int64, UINT8: np.uint8,
          UINT16: np.uint16, UINT32: np.uint32, UINT64: np.uint64, FLOAT16: np.float16, FLOAT32: np.float32,
          FLOAT64: np.float64, COMPLEX64: np.complex64, COMPLEX128: np.complex128}
_CODE = {np.dtype(t): code for code, t in _NUMPY.items()}

# ckpt's names of the types numpy cannot name (ml_dtypes' spelling), and their sizes.
ML_NAMES = {BFLOAT16: "bfloat16", FLOAT8_E4M3FN: "float8_e4m3fn", FLOAT8_E5M2: "float8_e5m2",
            FLOAT8_E4M3FNUZ: "float8_e4m3fnuz", FLOAT8_E5M2FNUZ: "float8_e5m2fnuz", FLOAT8_E8M0FNU: "float8_e8m0fnu"}
ML_CODES = {name: code for code, name in ML_NAMES.items()}
_ML_SIZE = {code: 2 if code == BFLOAT16 else 1 for code in ML_NAMES}
_ML_NUMPY = {}
if _ml is not None:
    for _code, _name in ML_NAMES.items():
        if hasattr(_ml, _name):
            _ML_NUMPY[_code] = np.dtype(getattr(_ml, _name))
_ML_CODE = {dt: code for code, dt in _ML_NUMPY.items()}

_ckpt_types = {}  # id of an array returned by this package -> its ckpt type, while it lives


class typed:
    """An array's raw bits with the ckpt type they hold: ``ckpt.typed(bits, "bfloat16")``. Accepted wherever an
    array is saved; ``bits`` is any array of the type's item size (uint16 or 'V2' for bfloat16, uint8 or 'V1'
    for float8)."""

    def __init__(self, bits: Any, dtype: Union[str, int]) -> None:
        code = ML_CODES.get(dtype, dtype) if isinstance(dtype, str) else dtype
        if code not in ML_NAMES:
            raise errors.InvalidArgumentError(
                errors.EINVAL, "ckpt.typed: %r is not one of %s" % (dtype, ", ".join(ML_CODES)))
        bits = np.asarray(bits)
        if bits.dtype.itemsize != size(code):
            raise errors.InvalidArgumentError(
                errors.EINVAL, "ckpt.typed: %s has %d-byte items, not the %d of %s"
                % (bits.dtype, bits.dtype.itemsize, _ML_SIZE[code], ML_NAMES[code]))
        self.bits = bits
        self.code = code

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shape of the bits."""
        return self.bits.shape


def code_of(array: Union[np.ndarray, typed]) -> Tuple[int, int, np.ndarray]:
    """(ckpt dtype code, itemsize, the array to pass) for a numpy array or a ckpt.typed; UnsupportedDtypeError (a
    TypeError) if ckpt has no such type."""
    if isinstance(array, typed):
        return array.code, _ML_SIZE[array.code], array.bits
    dt = array.dtype
    code = _CODE.get(dt.newbyteorder("=")) if dt.byteorder != "|" else _CODE.get(dt)
    if code is not None:
        return code, dt.itemsize, array
    if dt in _ML_CODE:
        return _ML_CODE[dt], dt.itemsize, array
    if dt.kind == "U":
        return UNICODE, dt.itemsize, array
    if dt.kind == "S":
        return BYTES, dt.itemsize, array
    if dt.kind == "V" and dt.fields is None and dt.subdtype is None and dt.itemsize > 0:
        return VOID, dt.itemsize, array
    raise errors.UnsupportedDtypeError(
        errors.EUNSUPPORTED,
        "ckpt stores no arrays of dtype %s (object, structured and datetime arrays are not stored)" % dt)


def numpy_dtype(code: int, itemsize: int) -> np.dtype:
    """The numpy dtype ckpt's type is returned as (native byte order)."""
    if code in _NUMPY:
        return np.dtype(_NUMPY[code])
    if code == UNICODE:
        return np.dtype("U%d" % (itemsize // 4))
    if code == BYTES:
        return np.dtype("S%d" % itemsize)
    if code in _ML_NUMPY:
        return _ML_NUMPY[code]
    return np.dtype("V%d" % itemsize)  # VOID, and bfloat16/float8 without ml_dtypes


def name(code: int) -> Any:
    """ckpt's name of a dtype code: "float32", "bfloat16", "void", …; None for a value that is not one."""
    n = lib.ckpt_dtype_name(code)
    return None if n is None else n.decode()


def size(code: int) -> int:
    """Bytes per item of a fixed-size dtype; 0 for unicode, bytes and void (their itemsize is per array)."""
    return lib.ckpt_dtype_size(code)


def view(array: Any, dtype: Union[str, int]) -> np.ndarray:
    """Typed values of raw bfloat16/float8 bits: with ml_dtypes, a view as its type; without it, bfloat16 as
    float32 values (exact: bfloat16 is the top half of a float32). float8 needs ml_dtypes."""
    code = ML_CODES.get(dtype, dtype)
    array = np.asarray(array)
    if code in _ML_NUMPY:
        return array.view(_ML_NUMPY[code])
    if code == BFLOAT16:
        return (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    raise errors.UnsupportedDtypeError(errors.EUNSUPPORTED,
                                       "viewing %s needs ml_dtypes (numpy has no such type)" % name(code))
