# SPDX-License-Identifier: Apache-2.0
"""safetensors files with the functions of ``safetensors.numpy``, so that a program switches by its import alone:

    from ckpt import safetensors            # instead of: from safetensors import numpy as safetensors
    safetensors.save_file({"w": w}, "model.safetensors", metadata={"format": "pt"})
    tensors = safetensors.load_file("model.safetensors")

What ckpt adds: saves are atomic and durable (the file is the old one or the complete new one, whatever happens),
every header is checked by all the reference reader's rules and more, and any path may be an s3:// URL. The rest of
ckpt reads and writes safetensors files too (``ckpt.load``, ``ckpt.open`` with ``.map``, ``ckpt.restore``,
``ckpt.save`` of a path ending in ".safetensors"). bfloat16 and float8 tensors come back as ckpt.RawArray, or with
ml_dtypes' types when it is installed; numpy arrays of any byte order and memory order are saved little-endian in C
order.
"""
import io
from typing import Any, Dict, Mapping, Optional

from . import npz
from .npz import Path


def save_file(tensor_dict: Mapping[str, Any], filename: Path, metadata: Optional[Mapping[str, str]] = None) -> None:
    """Saves `tensor_dict` (name -> array) to `filename` as a safetensors file, with `metadata` as its header's
    "__metadata__" (a dict of strings)."""
    npz.save(filename, tensor_dict, metadata=metadata, format="safetensors")


def load_file(filename: Path) -> Dict[str, Any]:
    """Every tensor of the safetensors file `filename`, name -> numpy array, in the header's order. The header's
    "__metadata__" is ``ckpt.open(filename).metadata``."""
    return dict(npz.load(filename, format="safetensors"))


def save(tensor_dict: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a safetensors file holding `tensor_dict`, with `metadata` as its "__metadata__"."""
    out = io.BytesIO()
    npz.save(out, tensor_dict, metadata=metadata, format="safetensors")
    return out.getvalue()


def load(data: bytes) -> Dict[str, Any]:
    """Every tensor of the safetensors file whose bytes are `data`, name -> numpy array."""
    return dict(npz.load(memoryview(data), format="safetensors"))  # bytes alone would be a path
