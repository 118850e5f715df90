"""ckpt: machine-learning checkpoints as NumPy .npz files — atomic, durable, checked, fast.

    import ckpt
    ckpt.save("model.npz", {"w": w, "step": np.int64(100)}, metadata={"loss": "0.25"})
    arrays = ckpt.load("model.npz")          # dict of numpy arrays, .metadata
    ckpt.restore("model.npz", params)        # in place, every name must match
    with ckpt.open("model.npz") as f:        # lazy: only what is asked for is read
        w = f["w"]

objax's io (save_var_collection, load_var_collection, Checkpoint), pytorch-pfn-extras' writers (ckpt.writing) and
ckpt's own checkpoint manager (ckpt.Manager) are built on the same library (libckpt.so.0, found through the
loader's paths or CKPT_LIBRARY).
"""
from . import _native, dtypes, errors, writing
from ._vars import RawArray, Rows
from .comm import Comm, MPIComm
from .step import Step
from .dtypes import typed, view
from .errors import (BufferTooSmallError, BusyError, CkptError, ExistsError, FormatError, InvalidArgumentError,
                     MismatchError, NotFoundError, OutOfMemoryError, StorageError, UnsupportedError)
from .manager import Manager, checkpoint_idx
from .npz import Arrays, Collection, Metadata, NpzFile, load, open, restore, save
from .objax import Checkpoint, load_var_collection, save_var_collection
from .storage import MemoryFiles, NativeMemory, Storage

__version__ = "0.4.1"
library_version = _native.lib.ckpt_version_string().decode()  # of the library loaded

__all__ = ["Arrays", "BufferTooSmallError", "Collection", "BusyError", "Checkpoint", "CkptError", "Comm", "MPIComm", "Rows", "Step", "ExistsError", "FormatError",
           "InvalidArgumentError", "Manager", "MemoryFiles", "Metadata", "MismatchError", "NotFoundError", "NpzFile",
           "NativeMemory", "OutOfMemoryError", "RawArray", "Storage", "StorageError", "UnsupportedError", "checkpoint_idx",
           "dtypes", "errors", "load", "load_var_collection", "open", "restore", "save", "save_var_collection",
           "typed", "view", "writing"]
