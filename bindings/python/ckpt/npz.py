# SPDX-License-Identifier: Apache-2.0
"""Saving, reading, restoring and opening .npz checkpoints."""
import ctypes
import os
import re
import weakref
from collections import OrderedDict
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native, _paths, dtypes, errors, tree
from ._native import lib
from ._vars import Rows, Vars, mark, read_metadata
from .storage import MemoryFiles, Storage, check, handle_of

__all__ = ["Arrays", "Collection", "Metadata", "NpzFile", "Reader", "load", "open", "restore", "save"]

# What names a file: a path (str, bytes or os.PathLike). Reads also take a binary file object or bytes; saves a
# writable binary file object.
Path = Union[str, bytes, "os.PathLike[Any]"]
Source = Union[Path, IO[bytes], bytes, bytearray, memoryview]
Renamer = Union[Callable[[str], str], Mapping[str, str], Sequence[Tuple[Any, str]]]
Progress = Callable[[int, int], None]

_LAYOUTS = {"auto": _native.LAYOUT_AUTO, "plain": _native.LAYOUT_PLAIN, "objax": _native.LAYOUT_OBJAX}
_FORMATS = {"auto": _native.FORMAT_AUTO, "npz": _native.FORMAT_NPZ, "safetensors": _native.FORMAT_SAFETENSORS}
_MEMORY_PATH = b"checkpoint.npz"


class Arrays(OrderedDict):
    """What ckpt.load returns: name -> numpy array, in file order, and the file's ``metadata`` (a dict)."""

    metadata = None  # type: Optional[Dict[str, str]]


class Metadata(dict):
    """What the restore functions return: the file's metadata (a dict), and in ``restored`` the names of the
    arrays the restore filled, in the collection's order (all of them, unless ``partial=True`` left some)."""

    restored = ()  # type: Sequence[str]


def options(layout: str = "auto", compression: Optional[str] = None, level: int = 0,
            renamer: Optional[Renamer] = None, progress: Optional[Progress] = None, storage: Any = None,
            max_header_bytes: int = 0, max_members: int = 0, max_total_bytes: int = 0, partial: bool = False,
            map_unverified: bool = False, map_writable: bool = False, base: Optional[Path] = None,
            chunk_hashes: bool = False, format: str = "auto",  # noqa: A002
            max_shard_size: Union[int, str, None] = None) -> _native.NpzOptions:
    """A ckpt_options (with the Python objects its callbacks need kept on it)."""
    o = _native.NpzOptions()
    _native.check(lib.ckpt_options_init(ctypes.byref(o), _native.options_version(_native.NPZ_OPTIONS_VERSION)))
    if layout not in _LAYOUTS:
        raise errors.InvalidArgumentError(
            errors.EINVAL, "layout must be one of %s, not %r" % (", ".join(_LAYOUTS), layout))
    o.layout = _LAYOUTS[layout]
    if format not in _FORMATS:
        raise errors.InvalidArgumentError(
            errors.EINVAL, "format must be one of %s, not %r" % (", ".join(_FORMATS), format))
    if format != "auto":
        _native.require(_native.FORMAT_SINCE, "format=%r" % format)
        o.format = _FORMATS[format]
    if max_shard_size is not None:
        _native.require(_native.FORMAT_SINCE, "max_shard_size")
        o.max_shard_bytes = shard_size_bytes(max_shard_size)
    if compression not in (None, "store", "deflate"):
        raise errors.InvalidArgumentError(
            errors.EINVAL, "compression must be 'store' or 'deflate', not %r" % (compression,))
    o.compression = _native.DEFLATE if compression == "deflate" else _native.STORE
    o.level = level
    o.max_header_bytes = max_header_bytes
    o.max_members = max_members
    o.max_total_bytes = max_total_bytes
    o.flags = _native.NPZ_PARTIAL if partial else 0
    if map_unverified:
        o.flags |= _native.NPZ_MAP_UNVERIFIED
    if map_writable:
        o.flags |= _native.NPZ_MAP_WRITABLE
    if base is not None:
        _native.require(_native.INCREMENTAL_SINCE, "ckpt.save(base=...)")
        o.base = _path(base)
    if chunk_hashes:
        _native.require(_native.INCREMENTAL_SINCE, "ckpt.save(chunk_hashes=True)")
        o.flags |= _native.NPZ_CHUNK_HASHES
    keep = []
    o._rename_state = None
    if renamer is not None:
        cb = _renamer_callback(rename_function(renamer), keep)
        o.rename = cb
        keep.append(cb)
        o._rename_state = cb.state
    if progress is not None:
        o.progress = _native.PROGRESS_FN(lambda done, total, payload: progress(done, total))
        keep.append(o.progress)
    o.storage, owner = handle_of(storage)
    keep.append(owner)
    o._storage = owner
    o._keep = keep
    return o


_SIZE_UNITS = {"B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12, "KIB": 2 ** 10, "MIB": 2 ** 20,
               "GIB": 2 ** 30, "TIB": 2 ** 40}


def shard_size_bytes(size: Union[int, str]) -> int:
    """A shard size as huggingface_hub takes it: bytes, or a string "5GB" (10^9), "500MiB" (2^20), …"""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise errors.ArgumentTypeError(errors.EINVAL, "max_shard_size must be an int or a str like '5GB', not %r"
                                       % (size,))
    if isinstance(size, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]I?B|B)\s*", size.upper())
        if not m:
            raise errors.InvalidArgumentError(errors.EINVAL, "max_shard_size %r is not a size like '5GB' or '500MiB'"
                                              % (size,))
        size = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    if size <= 0:
        raise errors.InvalidArgumentError(errors.EINVAL, "max_shard_size must be positive, not %d" % size)
    return size


def rename_function(renamer: Renamer) -> Callable[[str], str]:
    """objax's renamers: a callable, a dict of replacements (applied in order with str.replace), or a list of
    (regex, replacement) pairs (applied in order with re.sub)."""
    if callable(renamer):
        return renamer
    if isinstance(renamer, dict):
        pairs = list(renamer.items())
        def by_dict(name):
            for old, new in pairs:
                name = name.replace(old, new)
            return name
        return by_dict
    if isinstance(renamer, (list, tuple)):
        pairs = [(re.compile(p) if isinstance(p, str) else p, r) for p, r in renamer]
        def by_regex(name):
            for pattern, replacement in pairs:
                name = pattern.sub(replacement, name)
            return name
        return by_regex
    raise errors.ArgumentTypeError(
        errors.EINVAL, "renamer must be a callable, a dict or a list of (regex, replacement), not %s" % type(renamer))


def _renamer_callback(fn, keep):
    state = {"error": None}
    keep.append(state)

    def trampoline(name, buf, size, payload):
        try:
            new = fn(name.decode("utf-8")).encode("utf-8")
        except BaseException as e:  # reported after the call, with its own traceback
            state["error"] = e
            _native.set_message(e)  # and said in the library's message, for calls that report it (a manager's)
            return errors.EINVAL
        if len(new) > size:
            return len(new)
        ctypes.memmove(buf, new, len(new))
        return len(new) if len(new) else 0

    cb = _native.RENAME_FN(trampoline)
    cb.state = state
    return cb


def _raise_from_callbacks(opts, code, filename=None):
    """A renamer's own exception, when it raised one; else the code's."""
    state = opts._rename_state
    if code != 0 and state is not None and state["error"] is not None:
        raise state["error"]
    check(code, opts._storage, filename=filename)


def _is_path(file):
    return isinstance(file, (str, bytes, os.PathLike))


def _path(file):
    return _paths.encode(file)


class Collection:
    """A mapping of arrays handed to ckpt once, to be saved and restored many times: ckpt keeps pointers to the
    arrays (no copy), so each later save or restore costs what the C call costs — what a training loop that
    saves the same buffers every N steps wants. It holds the arrays it was built from (replace an array in your
    dict and build a new Collection); restoring into it needs every array to be one ckpt can write into (a
    writable, C-contiguous numpy array or CPU torch tensor). Accepted by save, restore and Manager."""

    def __init__(self, arrays: Mapping[str, Any], metadata: Optional[Mapping[str, Any]] = None) -> None:
        items, metadata = _flat(arrays, metadata)
        self.names = [name for name, _ in items]
        self._vars = _collection_of(items, metadata, writable=False)
        self.in_place = all(self._vars.borrowed)

    @property
    def metadata(self) -> Dict[str, str]:
        """The metadata the next save writes: what the Collection was built with, and what saves added."""
        return dict(self._vars.metadata())

    def restored(self, name: str) -> bool:
        """Whether the latest restore into this collection filled `name` (False before any restore, after a
        failed one, and for a name a ``partial=True`` restore did not find in the file)."""
        try:
            i = self.names.index(name)
        except ValueError:
            raise KeyError("no array %r in this Collection" % (name,)) from None
        return self._vars.restored(i)

    @property
    def restored_names(self) -> List[str]:
        """The names the latest restore into this collection filled, in order."""
        return [n for i, n in enumerate(self.names) if self._vars.restored(i)]

    def close(self) -> None:
        """Lets go of the arrays and of ckpt's collection (again: nothing)."""
        self._vars.close()

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.names)

    def _for_restore(self):
        if not self.in_place:
            bad = [n for n, b in zip(self.names, self._vars.borrowed) if not b]
            raise errors.ArgumentTypeError(
                errors.EINVAL, "cannot restore into this Collection: ckpt holds copies of %s (not writable "
                "C-contiguous arrays); restore into the dict instead" % ", ".join(repr(n) for n in bad))
        return self._vars


def _flat(arrays, metadata):
    """The (name, array) pairs of a mapping to save and the metadata to save with them: a nested mapping's leaves by
    their paths, and its structure recorded in the metadata (ckpt.tree)."""
    if not tree.is_nested(arrays):
        return list(arrays.items()), metadata
    items, record = tree.flatten(arrays)
    metadata = OrderedDict(metadata or {})
    metadata[tree.TREE_KEY] = record
    return items, metadata


def collection(arrays, metadata=None, writable=False):
    """A Vars holding every array of a mapping (name -> array-like, or nested state), borrowed where possible."""
    return _collection_of(*_flat(arrays, metadata), writable=writable)


def _collection_of(items, metadata, writable):
    v = Vars()
    try:
        v.add_all(items, writable=writable)
        v.set_metadata(metadata)
    except BaseException:
        v.close()
        raise
    return v


def save(file: Union[Path, IO[bytes]], arrays: Union[Mapping[str, Any], Collection],
         metadata: Optional[Mapping[str, Any]] = None, layout: str = "plain", compression: Optional[str] = None,
         level: int = 0, progress: Optional[Progress] = None, storage: Any = None, base: Optional[Path] = None,
         chunk_hashes: bool = False, format: str = "auto",  # noqa: A002
         max_shard_size: Union[int, str, None] = None) -> None:
    """Saves a mapping of name -> array (numpy arrays, numbers, torch tensors, ckpt.typed bits) to `file`: a path
    (atomic and durable: the file is either the old one or the complete new one) or a writable binary file
    object. `metadata` is a dict of strings saved with the arrays. numpy.load reads the result. `arrays` may be
    a Collection (built once, saved at the C call's cost).

    Nested state is saved as it is held: ``{"model": model.state_dict(), "optimizer": opt.state_dict(),
    "epoch": 3}`` — dicts with str or int keys, lists and tuples, whose leaves are arrays, tensors, or scalars
    (int, float, bool, str, None). Each array becomes a member named by its path ("model/fc.weight",
    "optimizer/state/0/exp_avg": keys joined by "/", a "/" in a key written "~1" and a "~" "~0"); the structure
    and the scalars go into the metadata entry "__ckpt_tree__" (docs/format.md, "Nested state"), and load gives the
    structure back. A mapping without nested values (and with str keys only) is saved flat, as always: a number
    is then a 0-d array.

    `format`: "auto" (the default) writes a safetensors file for a path ending in ".safetensors" and an .npz for any
    other path or a file object; "npz" or "safetensors" says which (safetensors needs libckpt 0.10.0). A safetensors
    file has no layouts and no compression, and holds no complex128, string or void arrays (UnsupportedError,
    before anything is written); the metadata is its header's "__metadata__". ``max_shard_size`` (bytes, or "5GB"
    as huggingface_hub takes it) saves "DIR/model.safetensors" in Hugging Face's sharded layout:
    "model-00001-of-0000N.safetensors" … and "model.safetensors.index.json" (or the one file, when everything fits);
    every reader takes the index, or the folder, as one checkpoint.

    ``chunk_hashes=True`` records the hashes of the 16 KiB chunks of arrays of 64 KiB or more (one more member,
    "__ckpt_chunks__", which numpy lists and ckpt's readers hide), so that a later save can take it as its `base`.
    `base` is such an earlier file, a path in the same storage: the chunks that did not change are shared with it
    (cloned, where the filesystem can: XFS, btrfs) instead of written, and the file records chunk hashes too. Its
    bytes are those of a full save with ``chunk_hashes=True``; a base that cannot serve (missing, or without chunk
    hashes) makes a full save, never an error. Stored saves only: a deflated one records no hashes. Both need
    libckpt 0.9.0 or newer (UnsupportedError)."""
    kw = dict(layout=layout, compression=compression, level=level, progress=progress, storage=storage, base=base,
              chunk_hashes=chunk_hashes, format=format, max_shard_size=max_shard_size)
    if isinstance(arrays, Collection):
        arrays._vars.set_metadata(metadata)
        _save_vars(file, arrays._vars, **kw)
        return
    with collection(arrays, metadata) as v:
        _save_vars(file, v, **kw)


def _save_vars(file, v, storage=None, **kw):
    if _is_path(file):
        o = options(storage=storage, **kw)
        check(lib.ckpt_save(_path(file), v.handle, ctypes.byref(o)), o._storage, filename=file)
        return
    memory = MemoryFiles()
    s = Storage(memory)
    try:
        o = options(storage=s, **kw)
        _native.check(lib.ckpt_save(_MEMORY_PATH, v.handle, ctypes.byref(o)))
    finally:
        s.close()
    file.write(memory.files[_MEMORY_PATH.decode()])


def _read_vars(file, **kw):
    out = _native.out()
    if _is_path(file):
        o = options(**kw)
        check(lib.ckpt_read(ctypes.byref(out), _path(file), ctypes.byref(o)), o._storage, filename=file)
    else:
        data = file if isinstance(file, (bytes, bytearray, memoryview)) else file.read()
        buf = (ctypes.c_char * len(data)).from_buffer_copy(data) if len(data) else None
        o = options(**kw)
        _native.check(lib.ckpt_read_memory(ctypes.byref(out), buf, len(data), ctypes.byref(o)))
    return Vars(out.value)


def load(file: Source, layout: str = "auto", progress: Optional[Progress] = None, storage: Any = None,
         format: str = "auto", tensors: str = "numpy", only: Union[str, int, Sequence[Union[str, int]], None] = None,
         **limits: int) -> Arrays:  # noqa: A002
    """Reads every array of a checkpoint (a path, a readable binary file object or bytes) into an ``Arrays``
    dict, in file order, with the file's metadata as ``.metadata``. .npz and safetensors files alike: the format is
    told by the content (``format="npz"`` or ``"safetensors"`` refuses the other, FormatError). The arrays are ckpt's own buffers, not
    copies. bfloat16/float8 arrays come back as raw 'V2'/'V1' arrays (``ckpt.RawArray``, which remembers the type)
    or, when ml_dtypes is installed, with its types. ``tensors="torch"`` gives CPU torch tensors instead (sharing
    the same buffers; bfloat16 as torch.bfloat16).

    A file saved from nested state (dicts, lists, tuples; see save) comes back as that structure: the same keys, of
    the same types, lists and tuples as they were, numbers, strings, bools and None as they were, arrays in their
    places.

    ``only``: a top-level key, or a list of them — just those entries, and of a path only their arrays are read
    (``ckpt.load(path, only="model")["model"]`` is the model's state dict without the optimizer's). In a flat file a
    key selects the array of that name and the arrays under it ("model" takes "model/w"). NotFoundError names a key
    the file does not have."""
    _check_tensors(tensors)  # before anything is read
    keys = None if only is None else [only] if isinstance(only, (str, int)) else list(only)
    if keys is not None and _is_path(file):
        return _load_only(file, keys, layout=layout, storage=storage, format=format, tensors=tensors, **limits)
    v = _read_vars(file, layout=layout, progress=progress, storage=storage, format=format, **limits)
    result = arrays_of(v, tensors, _origin(file))
    if keys is None:
        return result
    # A file object or bytes: read whole (nothing to open lazily), then the entries asked for.
    chosen = Arrays((k, result[k]) for k in keys if k in result)
    missing = [k for k in keys if k not in result]
    if missing:
        raise errors.NotFoundError(errors.ENOTFOUND, "the checkpoint has no %s" % " and no ".join(map(repr, missing)))
    chosen.metadata = result.metadata
    return chosen


_TENSORS = ("numpy", "torch")


def _check_tensors(tensors):
    if tensors not in _TENSORS:
        raise errors.InvalidArgumentError(errors.EINVAL, "tensors must be 'numpy' or 'torch', not %r" % (tensors,))


def _load_only(file, keys, tensors="numpy", **kw):
    """load(..., only=keys) of a path: the file opened lazily, and only the arrays under `keys` read."""
    with open(file, **kw) as f:
        record = f.metadata.get(tree.TREE_KEY)
        if record is not None:
            root = tree.parse(record, _origin(file))
            entries = {key: node for key, node in root["dict"]}
            missing = [k for k in keys if k not in entries]
            root = {"dict": [[k, entries[k]] for k in keys if k in entries]}
            names = tree.array_names(root)
        else:
            def under(name, key):  # the array of that name, or one under it ("model" takes "model/w")
                return name == str(key) or name.startswith(tree.escape(str(key)) + "/")

            names = [n for n in f.keys() if any(under(n, k) for k in keys)]
            missing = [k for k in keys if not any(under(n, k) for n in names)]
        if missing:
            raise errors.NotFoundError(errors.ENOTFOUND, "%s has no %s" % (
                _origin(file), " and no ".join(repr(k) for k in missing)))
        arrays = OrderedDict((n, f[n]) for n in names)
        metadata = tree.without_tree(f.metadata)
    if tensors == "torch":
        arrays = OrderedDict((n, _to_torch(n, a)) for n, a in arrays.items())
    result = tree.build(root, arrays, _origin(file), make_dict=Arrays) if record is not None else Arrays(arrays)
    result.metadata = dict(metadata)
    return result


def _origin(file):
    return os.fsdecode(file) if _is_path(file) else "the checkpoint"


def arrays_of(v, tensors="numpy", origin="the checkpoint"):
    """What a read gives: the Arrays of a collection just read — the saved structure when the file records one
    (ckpt.tree), its arrays as numpy arrays or torch tensors."""
    _check_tensors(tensors)
    arrays = v.to_dict()
    if tensors == "torch":
        arrays = OrderedDict((name, _to_torch(name, a)) for name, a in arrays.items())
    metadata = v.metadata()
    record = metadata.get(tree.TREE_KEY)
    if record is None:
        result = Arrays(arrays)
    else:
        root = tree.parse(record, origin)
        result = tree.build(root, arrays, origin, make_dict=Arrays)
        for name in set(arrays) - set(tree.array_names(root)):  # an array the record does not place: kept
            result[name] = arrays[name]
    result.metadata = dict(tree.without_tree(metadata))
    return result


def _to_torch(name, a):
    """A CPU torch tensor sharing the bytes of ckpt's array `a` (bfloat16 included)."""
    import torch
    kind = getattr(a, "ckpt_dtype", None) or a.dtype.name  # a RawArray's, or ml_dtypes'
    a = np.asarray(a)  # ckpt's arrays are C-contiguous; a RawArray as the plain array it is
    if kind == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    try:
        return torch.from_numpy(a)
    except TypeError:
        raise errors.UnsupportedDtypeError(
            errors.EUNSUPPORTED, "%r is %s, which this torch has no tensor type for: read it with "
            "tensors='numpy'" % (name, kind)) from None


def restore(file: Source, arrays: Union[Dict[str, Any], Collection], renamer: Optional[Renamer] = None,
            layout: str = "auto", progress: Optional[Progress] = None, storage: Any = None, partial: bool = False,
            **limits: int) -> Metadata:
    """Restores the arrays of a mapping in place from a checkpoint, .npz or safetensors (objax's
    load_var_collection rules): every name must be in the file (after `renamer` is applied to the names on disk) with the same dtype and shape,
    else MismatchError (a ValueError) lists every missing variable and unused name and nothing is changed. With
    ``partial=True`` a name the file lacks is left as it is instead (a model that gained variables resumes from
    an older file); one found with another dtype or shape still fails. numpy arrays and CPU torch tensors are
    filled in place, without a copy; other values (read-only arrays, arrays ckpt cannot point at) get the new
    value through ``arrays[name] = …``. Returns the file's metadata (a ``Metadata`` dict, whose ``restored``
    lists the names filled). `arrays` may be a Collection (built once, restored into at the C call's cost)."""
    kw = dict(renamer=renamer, layout=layout, progress=progress, storage=storage, partial=partial, **limits)
    if isinstance(arrays, Collection):
        v = arrays._for_restore()
        _restore_vars(file, v, **kw)
        return restored_metadata(v, arrays.names)
    return restore_mapping(arrays, lambda name, old, fresh: assign(arrays, name, old, fresh),
                           lambda v: _restore_vars(file, v, **kw))


def restore_mapping(arrays, assign_flat, restore_vars):
    """restore_values for a mapping: a flat one through assign_flat(name, old, fresh); a nested one leaf by leaf
    (by path), then its scalars and the arrays that could not be filled in place put where they belong, as the
    file's structure record says. The Metadata returned does not hold the record."""
    if not tree.is_nested(arrays):
        result = restore_values(list(arrays.items()), assign_flat, restore_vars)
        result.pop(tree.TREE_KEY, None)
        return result
    items, own_record = tree.flatten(arrays)
    fresh = {}  # type: Dict[str, Any]
    result = restore_values(items, lambda name, old, new: assign(fresh, name, old, new), restore_vars)
    record = result.pop(tree.TREE_KEY, None)
    tree.merge(arrays, tree.parse(record if record is not None else own_record), fresh)
    return result


def restore_values(items, assign, restore_vars):
    """Restores (name, value) pairs with restore_vars(Vars): in place where ckpt can write into the value, else
    through assign(name, old value, new numpy array). A value the restore did not fill (partial) is not touched.
    Returns the file's Metadata."""
    v = Vars()
    try:
        v.add_all(items, writable=True)
        restore_vars(v)
        if not all(v.borrowed):
            for i, (name, value) in enumerate(items):
                if not v.borrowed[i] and v.restored(i):
                    assign(name, value, v.array(i, copy=True))
        return restored_metadata(v, [name for name, _ in items])
    finally:
        v.close()


def restored_metadata(v, names):
    """The Metadata of a restore into `v`, whose arrays are `names`."""
    result = Metadata(v.metadata())
    result.restored = [n for i, n in enumerate(names) if v.restored(i)]
    return result


def assign(arrays, name, old, fresh):
    """Gives `name` in `arrays` the restored value `fresh`: into the old value where it can take it."""
    if isinstance(old, Rows):  # a row split's array
        if type(old.array).__module__.startswith("torch") or (
                isinstance(old.array, np.ndarray) and old.array.flags.writeable and old.array.shape == fresh.shape):
            assign({}, name, old.array, fresh)
        else:
            old.array = fresh
        return
    if type(old).__module__.startswith("torch"):
        import torch
        bf16 = old.dtype == torch.bfloat16
        t = torch.from_numpy(np.ascontiguousarray(fresh.view(np.int16) if bf16 else fresh))
        old.copy_((t.view(torch.bfloat16) if bf16 else t).reshape(old.shape))
        return
    if isinstance(old, np.ndarray) and old.flags.writeable and old.shape == fresh.shape:
        old[...] = fresh
        return
    arrays[name] = fresh


def _restore_vars(file, v, storage=None, **kw):
    if _is_path(file):
        o = options(storage=storage, **kw)
        _raise_from_callbacks(o, lib.ckpt_restore(_path(file), v.handle, ctypes.byref(o)), file)
        return
    memory = MemoryFiles()
    memory.files[_MEMORY_PATH.decode()] = file if isinstance(file, (bytes, bytearray)) else file.read()
    s = Storage(memory)
    try:
        o = options(storage=s, **kw)
        _raise_from_callbacks(o, lib.ckpt_restore(_MEMORY_PATH, v.handle, ctypes.byref(o)))
    finally:
        s.close()


class Reader(_native.Handle):
    """A checkpoint opened for lazy reading: ``with ckpt.open(path) as f: f['w']`` reads only 'w'. Names,
    dtypes and shapes are known at once (every header was checked), and so is ``metadata``."""

    _release = "ckpt_reader_close"

    def __init__(self, path: Path, layout: str = "auto", storage: Any = None, map_unverified: bool = False,
                 map_writable: bool = False, **limits: int) -> None:
        self._views = 0  # arrays from map() alive: the handle (and its mapping) must outlive them
        self._deferred = None  # the handle close() left open for them
        self._writable = map_writable
        o = options(layout=layout, storage=storage, map_unverified=map_unverified, map_writable=map_writable, **limits)
        h = _native.out()
        check(lib.ckpt_reader_open(ctypes.byref(h), _path(path), ctypes.byref(o)), o._storage, filename=path)
        self.handle = h.value
        self._storage = o._keep  # a storage object must outlive the file read through it
        self.path = os.fsdecode(path)
        self._index = {lib.ckpt_reader_name(self.handle, i).decode("utf-8"): i for i in range(len(self))}
        self.metadata = dict(read_metadata(self.handle, lib.ckpt_reader_metadata_count, lib.ckpt_reader_metadata_key,
                                           lib.ckpt_reader_metadata_value))

    def __len__(self) -> int:
        return lib.ckpt_reader_count(self.handle)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def keys(self) -> List[str]:
        """The arrays' names, in file order."""
        return list(self._index)

    def _i(self, name):
        try:
            return self._index[name]
        except KeyError:
            raise KeyError("%s: no array %r" % (self.path, name)) from None

    @property
    def file_size(self) -> int:
        """The size in bytes of the file (or S3 object) as it was when opened."""
        if not hasattr(lib, "ckpt_reader_file_size"):
            raise errors.UnsupportedError(errors.EUNSUPPORTED, "Reader.file_size needs libckpt 0.7.0 or newer "
                                          "(this one is %d.%d.%d)" % _native.VERSION)
        return lib.ckpt_reader_file_size(self.handle)

    @property
    def layout(self) -> str:
        """"plain" or "objax": how the file was read ("plain" for a safetensors file)."""
        return "objax" if lib.ckpt_reader_layout(self.handle) == _native.LAYOUT_OBJAX else "plain"

    @property
    def format(self) -> str:
        """"npz" or "safetensors": the file's format, told by its content."""
        if not hasattr(lib, "ckpt_reader_format"):
            return "npz"  # a library older than 0.10.0 reads nothing else
        return "safetensors" if lib.ckpt_reader_format(self.handle) == _native.FORMAT_SAFETENSORS else "npz"

    def info(self, name: str) -> Dict[str, Any]:
        """How the file holds `name`: its zip member, "store" or "deflate", its bytes in the file, its CRC-32, the
        file offset of its first data byte (stored arrays; 0 when deflated), and how its data lies in the member:
        "byte_order" ("<", ">", or "|" where it does not apply) and "fortran_order" (with a 0.7.0 library or newer;
        reads give native byte order and C order either way)."""
        i, h = self._i(name), self.handle
        info = {"member": lib.ckpt_reader_member_name(h, i).decode("utf-8"),
                "compression": "deflate" if lib.ckpt_reader_compression(h, i) == _native.DEFLATE else "store",
                "stored_bytes": lib.ckpt_reader_stored_bytes(h, i), "crc32": lib.ckpt_reader_crc32(h, i),
                "data_offset": lib.ckpt_reader_data_offset(h, i), "nbytes": lib.ckpt_reader_nbytes(h, i)}
        if hasattr(lib, "ckpt_reader_byte_order"):
            info["byte_order"] = chr(lib.ckpt_reader_byte_order(h, i))
            info["fortran_order"] = bool(lib.ckpt_reader_fortran_order(h, i))
        return info

    def dtype(self, name: str) -> np.dtype:
        """The numpy dtype `name` is read as."""
        i = self._i(name)
        return dtypes.numpy_dtype(lib.ckpt_reader_dtype(self.handle, i), lib.ckpt_reader_itemsize(self.handle, i))

    def ckpt_dtype(self, name: str) -> str:
        """ckpt's name of the array's type: "float32", "bfloat16", …"""
        return dtypes.name(lib.ckpt_reader_dtype(self.handle, self._i(name)))

    def shape(self, name: str) -> Tuple[int, ...]:
        """The array's shape."""
        i = self._i(name)
        p = lib.ckpt_reader_shape(self.handle, i)
        return tuple(p[k] for k in range(lib.ckpt_reader_ndim(self.handle, i)))

    def __getitem__(self, name: str) -> np.ndarray:
        """Reads one array (its CRC checked) into a new numpy array."""
        i = self._i(name)
        h = self.handle
        code, itemsize, nbytes = lib.ckpt_reader_dtype(h, i), lib.ckpt_reader_itemsize(h, i), lib.ckpt_reader_nbytes(h, i)
        out = np.empty(self.shape(name), dtypes.numpy_dtype(code, itemsize))
        _native.check(lib.ckpt_reader_read_into(h, i, out.ctypes.data if nbytes else None, nbytes))
        return mark(out, code)

    def read_into(self, name: str, out: np.ndarray) -> np.ndarray:
        """Reads one array into an existing C-contiguous numpy array of its size, and returns that array."""
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise errors.InvalidArgumentError(errors.EINVAL, "read_into needs a writable C-contiguous array")
        i = self._i(name)
        _native.check(lib.ckpt_reader_read_into(self.handle, i, out.ctypes.data if out.nbytes else None, out.nbytes))
        return out

    def read_range(self, name: str, start: int, count: int) -> np.ndarray:
        """Items [start, start + count) of `name` in C order (flat), as a new 1-d array (ckpt_reader_read_range): for
        reading a large array piece by piece in bounded memory. Pieces read in order from the first item to the
        last have the array's CRC-32 checked at the last; a deflated array read in order is inflated once in all."""
        if _native.VERSION < _native.SINCE["ckpt_reader_read_range"]:
            raise errors.UnsupportedError(errors.EUNSUPPORTED, "read_range needs libckpt %d.%d.%d or newer; %s is "
                                          "%d.%d.%d" % (_native.SINCE["ckpt_reader_read_range"]
                                                        + (_native.library_path(),) + _native.VERSION))
        i = self._i(name)
        h = self.handle
        code, itemsize = lib.ckpt_reader_dtype(h, i), lib.ckpt_reader_itemsize(h, i)
        if start < 0 or count < 0:
            raise errors.InvalidArgumentError(errors.EINVAL, "read_range: start and count must not be negative")
        out = np.empty(count, dtypes.numpy_dtype(code, itemsize))
        _native.check(lib.ckpt_reader_read_range(h, i, start * itemsize, out.ctypes.data if out.nbytes else None,
                                              out.nbytes))
        return mark(out, code)

    def items(self) -> List[Tuple[str, np.ndarray]]:
        """(name, array) for every array, in file order, each read as ``f[name]`` reads it."""
        return [(n, self[n]) for n in self._index]

    def map(self, name: str) -> np.ndarray:
        """`name` without a copy (ckpt_reader_map): a numpy array over a mapping of the file for the stored arrays ckpt
        writes (others are decoded once and kept by the file). Read-only, unless the file was opened with
        map_writable=True: the mapping is then copy-on-write (pages written are copied into this process; the file
        never changes). Its CRC-32 is checked at the first call (unless the file was opened with
        map_unverified=True). The array keeps the file open: close() while such arrays are alive closes the file
        for every other use, and releases it when the last of them is gone. A file truncated while mapped faults
        (SIGBUS) when its lost pages are read; one replaced or deleted keeps its old bytes for the arrays."""
        i, h = self._i(name), self.handle
        p = ctypes.c_void_p()
        _native.check(lib.ckpt_reader_map(h, i, ctypes.byref(p)))
        return self._view(p.value, lib.ckpt_reader_dtype(h, i), lib.ckpt_reader_itemsize(h, i), lib.ckpt_reader_nbytes(h, i),
                          self.shape(name))

    def map_all(self) -> Dict[str, np.ndarray]:
        """Every array without a copy (ckpt_reader_map_vars): a dict of name -> array, each as map() gives it, in file
        order — a restore that maps instead of reading."""
        v = _native.out()
        _native.check(lib.ckpt_reader_map_vars(self.handle, ctypes.byref(v)))
        try:
            out = {}
            for i in range(lib.ckpt_vars_count(v)):
                nd, shape = lib.ckpt_vars_ndim(v, i), lib.ckpt_vars_shape(v, i)
                out[lib.ckpt_vars_name(v, i).decode()] = self._view(
                    lib.ckpt_vars_data(v, i), lib.ckpt_vars_dtype(v, i), lib.ckpt_vars_itemsize(v, i),
                    lib.ckpt_vars_nbytes(v, i), tuple(shape[k] for k in range(nd)))
            return out
        finally:
            lib.ckpt_vars_free(v)  # the collection only borrowed the views: the file keeps them

    def _view(self, address, code, itemsize, nbytes, shape):
        buf = (ctypes.c_char * nbytes).from_address(address)
        self._views += 1
        weakref.finalize(buf, self._view_gone)  # holds this file until the buffer, and every array over it, is gone
        # Read-only views get a read-only buffer: numpy then refuses to make the array writable (the pages are
        # mapped read-only). Copy-on-write ones may be written.
        out = np.frombuffer(memoryview(buf) if self._writable else memoryview(buf).toreadonly(),
                            dtypes.numpy_dtype(code, itemsize))
        return mark(out.reshape(shape), code)

    def _view_gone(self):
        self._views -= 1
        if self._views == 0 and self._deferred:
            h, self._deferred = self._deferred, None
            lib.ckpt_reader_close(h)

    def close(self) -> None:
        """Closes the file (see map for arrays that still use it)."""
        if getattr(self, "_views", 0) and getattr(self, "handle", None):
            self._deferred, self.handle = self.handle, None
            return
        super().close()


#: Reader under its name before 0.11, when ckpt read .npz files only.
NpzFile = Reader


def open(path: Path, layout: str = "auto", storage: Any = None, map_unverified: bool = False,  # noqa: A001
         map_writable: bool = False, **limits: int) -> Reader:
    """Opens a checkpoint for lazy reading (see Reader), as ckpt.open does. map_unverified=True: Reader.map
    skips the CRC-32 check of mapped arrays, trading integrity for latency (for files verified already).
    map_writable=True: mapped arrays are copy-on-write, and may be written."""
    return Reader(path, layout=layout, storage=storage, map_unverified=map_unverified, map_writable=map_writable,
                   **limits)
