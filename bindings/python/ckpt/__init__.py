# SPDX-License-Identifier: Apache-2.0
"""ckpt: machine-learning checkpoints as NumPy .npz files and safetensors files — atomic, durable, checked, fast.

    import ckpt
    ckpt.save("model.npz", {"w": w, "step": np.int64(100)}, metadata={"loss": "0.25"})
    arrays = ckpt.load("model.npz")          # dict of numpy arrays, .metadata
    ckpt.restore("model.npz", params)        # in place, every name must match
    with ckpt.open("model.npz") as f:        # lazy: only what is asked for is read
        w = f["w"]
    ckpt.save("s3://bucket/run/model.npz", arrays)   # any path may be an s3:// URL (or use ckpt.S3Storage)
    ckpt.save("model.safetensors", arrays)   # safetensors by the name; every function reads either format
    from ckpt import safetensors             # safetensors.numpy's save_file, load_file, save and load

objax's io (save_var_collection, load_var_collection, Checkpoint), pytorch-pfn-extras' writers (ckpt.writing) and
ckpt's own checkpoint manager (ckpt.Manager) are built on the same library (libckpt.so.0, found through
CKPT_LIBRARY, the library a CMake install put beside the package, or the loader's paths). The package is typed
(py.typed).
"""
from . import _native, dtypes, errors, filesystem, safetensors, writing
from ._vars import RawArray, Rows, Source
from .comm import Comm, MPIComm, TorchComm
from .step import Step
from .dtypes import typed, view
from .errors import (ArgumentTypeError, BufferTooSmallError, BusyError, CkptError, ExistsError, FormatError,
                     InvalidArgumentError, MismatchError, NotFoundError, OutOfMemoryError, StorageError,
                     StoragePermissionError, UnsupportedDtypeError, UnsupportedError)
from .manager import Manager, checkpoint_idx
from .npz import Arrays, Collection, Metadata, NpzFile, Reader, load, open, restore, save
from .objax import Checkpoint, load_var_collection, save_var_collection
from .s3 import S3Storage
from .storage import MemoryFiles, NativeMemory, Storage

__version__ = "0.12.0"  # type: str
library_version = _native.lib.ckpt_version_string().decode()  # type: str  # of the library loaded

__all__ = ["ArgumentTypeError", "Arrays", "BufferTooSmallError", "BusyError", "Checkpoint", "CkptError", "Collection",
           "Comm", "ExistsError", "FormatError", "InvalidArgumentError", "MPIComm", "Manager", "MemoryFiles",
           "Metadata", "MismatchError", "NativeMemory", "NotFoundError", "NpzFile", "OutOfMemoryError", "RawArray",
           "Reader", "Rows", "S3Storage", "Source", "Step", "Storage", "StorageError", "StoragePermissionError", "TorchComm",
           "UnsupportedDtypeError", "UnsupportedError", "checkpoint_idx", "dtypes", "errors", "filesystem", "load",
           "load_var_collection", "open", "restore", "safetensors", "save", "save_var_collection", "typed", "view",
           "writing"]
