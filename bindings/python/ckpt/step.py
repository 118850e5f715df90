# SPDX-License-Identifier: Apache-2.0
"""One sharded checkpoint step (a directory of shards and manifest.json, docs/distributed.md), read by one process.

    with ckpt.Step("runs/exp1/ckpt/0000000042") as step:
        step.index, step.world_size, step.metadata
        emb = step["emb"]                  # a row-split variable, whole
        part = step.rows("emb", 100, 50)   # rows [100, 150) only, from the shards that hold them
"""
import ctypes
import os
from typing import Any, Iterator, Optional, Tuple, Union

import numpy as np

from . import _native, _paths, dtypes
from ._native import lib
from ._vars import mark, read_metadata
from .npz import options
from .storage import check

__all__ = ["Step"]


class Step(_native.Handle):
    """A sharded step opened for reading: the manifest now, the shards as variables are read."""

    _release = "ckpt_step_close"

    def __init__(self, path: Union[str, bytes, "os.PathLike[Any]"], storage: Any = None, **limits: int) -> None:
        o = options(storage=storage, **limits)
        self._options = o  # keeps the storage alive as long as the step
        self._storage = o._storage
        h = _native.out()
        check(lib.ckpt_step_open(ctypes.byref(h), _paths.encode(path), ctypes.byref(o)), self._storage, filename=path)
        self.handle = h.value
        self.path = os.fsdecode(path)
        self.index = lib.ckpt_step_index(self.handle)
        self.world_size = lib.ckpt_step_world_size(self.handle)
        self.shards = [lib.ckpt_step_shard(self.handle, r).decode() for r in range(self.world_size)]
        self.metadata = dict(read_metadata(self.handle, lib.ckpt_step_metadata_count, lib.ckpt_step_metadata_key,
                                           lib.ckpt_step_metadata_value))
        self._index = {lib.ckpt_step_name(self.handle, i).decode("utf-8"): i for i in range(lib.ckpt_step_count(self.handle))}

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def _i(self, name):
        try:
            return self._index[name]
        except KeyError:
            raise KeyError("%s: no variable %r in the step" % (self.path, name)) from None

    def shape(self, name: str) -> Tuple[int, ...]:
        """The variable's (global) shape."""
        i = self._i(name)
        p = lib.ckpt_step_shape(self.handle, i)
        return tuple(p[k] for k in range(lib.ckpt_step_ndim(self.handle, i)))

    def nbytes(self, name: str) -> int:
        """The variable's (global) size in bytes."""
        return lib.ckpt_step_nbytes(self.handle, self._i(name))

    def pieces(self, name: str) -> int:
        """How many shards hold the variable's rows (0: it is whole, in one shard)."""
        return lib.ckpt_step_pieces(self.handle, self._i(name))

    def metadata_value(self, key: str) -> Optional[str]:
        """The step's metadata value for `key` (ckpt_step_metadata), None when it has none."""
        v = lib.ckpt_step_metadata(self.handle, key.encode("utf-8"))
        return None if v is None else v.decode("utf-8")

    def rows(self, name: str, first: int, count: int) -> np.ndarray:
        """Rows [first, first + count) of the variable, as a new numpy array."""
        i = self._i(name)
        shape = self.shape(name)
        code, itemsize = lib.ckpt_step_dtype(self.handle, i), lib.ckpt_step_itemsize(self.handle, i)
        out = np.empty((count,) + shape[1:] if shape else (), dtypes.numpy_dtype(code, itemsize))
        _native.check(lib.ckpt_step_read_rows(self.handle, i, first, count, out.ctypes.data if out.nbytes else None,
                                              out.nbytes))
        return mark(out, code)

    def __getitem__(self, name: str) -> np.ndarray:
        """The whole variable (a row-split one assembled from its pieces)."""
        shape = self.shape(name)
        return self.rows(name, 0, shape[0] if shape else 1)
