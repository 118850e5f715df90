# SPDX-License-Identifier: Apache-2.0
"""objax.io on ckpt: save_var_collection, load_var_collection and Checkpoint, by objax's documented signatures.

A variable collection is any mapping from name to a value: a numpy array (or anything numpy can view, such as a
CPU torch tensor) or an object with a ``.value`` (objax's variables), which gets restored values through
``.assign(value)`` when it has one, else by setting ``.value``. One variable reached under several names (objax
shares them) is saved once, under its first name, and restored from whichever of its names the file has.
Files are objax's layout (``names.npy`` + ``0.npy``, ``1.npy``, …), written atomically and durably.

Each function also takes nested state — ``{"model": vc, "epoch": 3, "opt": {...}}``, dicts, lists and tuples with
variables, arrays and scalars as leaves — saved as ``ckpt.save`` saves it (docs/format.md, "Nested state") and
restored into it: variables through ``.assign``, arrays in place, scalars replaced.
"""
import io
import os
import sys
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from . import _paths, errors, npz, tree
from .manager import Manager, checkpoint_idx, index_argument

_DEFAULT = object()


def _unique(vc):
    """[(names, holder)] of the collection's distinct variables, in order (objax dedupes by identity)."""
    by_id, order = {}, []
    for name, holder in vc.items():
        ref = getattr(holder, "ref", None)  # objax's TrainRef points at the variable it trains
        if ref is not None and hasattr(ref, "value"):
            holder = ref
        key = id(holder)
        if key not in by_id:
            by_id[key] = ([], holder)
            order.append(key)
        by_id[key][0].append(name)
    return [by_id[k] for k in order]


def _value(holder):
    return holder.value if hasattr(holder, "value") and not hasattr(holder, "dtype") else holder


def _set(vc, name, holder, fresh):
    if hasattr(holder, "value") and not hasattr(holder, "dtype"):
        _assign(holder, fresh)
    else:
        npz.assign(vc, name, holder, fresh)


def _assign(variable, fresh):
    if hasattr(variable, "assign"):
        variable.assign(fresh)
    else:
        variable.value = fresh


def _variable(leaf):
    """The objax variable a leaf of nested state is (a TrainRef's variable for a TrainRef), or None."""
    ref = getattr(leaf, "ref", None)
    if ref is not None and hasattr(ref, "value"):
        return ref
    return leaf if hasattr(leaf, "value") and not hasattr(leaf, "dtype") else None


def _values(state):
    """Nested state with each variable replaced by its value, in containers of its own (dicts, lists, tuples)."""
    variable = _variable(state)
    if variable is not None:
        return variable.value
    if isinstance(state, Mapping):
        return {key: _values(child) for key, child in state.items()}
    if isinstance(state, tuple):
        return tuple(_values(child) for child in state)
    if isinstance(state, list):
        return [_values(child) for child in state]
    return state


def _put_back(target, restored):
    """Gives nested state `target` what a restore left in `restored` (its _values): variables through assign, arrays
    not filled in place and scalars replaced; containers updated in place where they can be, tuples rebuilt."""
    variable = _variable(target)
    if variable is not None:
        if restored is not variable.value:
            _assign(variable, restored)
        return target
    if isinstance(target, Mapping) and isinstance(restored, Mapping):
        for key in list(target):
            if key in restored:
                new = _put_back(target[key], restored[key])
                if new is not target[key]:
                    target[key] = new
        return target
    if isinstance(target, (list, tuple)) and isinstance(restored, (list, tuple)):
        return tree.put_items(target, [_put_back(t, r) for t, r in zip(target, restored)] +
                              list(target[len(restored):]))
    return restored


def save_var_collection(file: Any, vc: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> None:
    """Saves the collection to `file` (a path, atomically and durably, or a writable binary file object) in
    objax's layout, with `metadata` except its "ckpt." keys (a checkpoint manager's own)."""
    if tree.is_nested(vc):
        npz.save(file, _values(vc), metadata=metadata, layout="objax")
        return
    arrays = {names[0]: _value(holder) for names, holder in _unique(vc)}
    npz.save(file, arrays, metadata=metadata, layout="objax")


def load_var_collection(file: Any, vc: Mapping[str, Any], renamer: Any = None) -> Dict[str, str]:
    """Restores every variable of the collection from `file` (a path or a readable binary file object), in place
    when dtype and shape match. `renamer` (a callable, a dict of replacements or a list of (regex, replacement))
    is applied to the names on disk. Variables in the file but not in the collection are ignored; a variable of
    the collection missing from the file raises MismatchError, a ValueError listing the missing variables and the
    unused names on disk, and changes nothing. Returns the file's metadata."""
    if tree.is_nested(vc):
        values = _values(vc)
        metadata = npz.restore_mapping(values, None, lambda v: npz._restore_vars(file, v, renamer=renamer))
        _put_back(vc, values)
        return metadata
    variables = _unique(vc)
    names = [group[0] for group, _ in variables]
    if not isinstance(file, (str, bytes, os.PathLike)):
        file = io.BytesIO(file.read())  # read once: the aliases below may look at it first
    if any(len(group) > 1 for group, _ in variables):
        names = _choose_aliases(file, variables, renamer)
    items = [(name, _value(holder)) for name, (_, holder) in zip(names, variables)]
    holders = {name: holder for name, (_, holder) in zip(names, variables)}
    return npz.restore_values(items, lambda name, old, fresh: _set(vc, name, holders[name], fresh),
                              lambda v: npz._restore_vars(file, v, renamer=renamer))


def _choose_aliases(file, variables, renamer, storage=None):
    """For shared variables, the first of their names the file holds (objax restores from any of them). A file
    that cannot be read keeps the first names: the restore then reports (or falls back past) it."""
    try:
        if isinstance(file, (str, bytes, os.PathLike)):
            with npz.open(file, storage=storage) as f:
                on_disk = set(f.keys())
        else:
            on_disk = set(npz.load(io.BytesIO(file.getvalue())).keys())
    except errors.CkptError:
        return [group[0] for group, _ in variables]
    rename = npz.rename_function(renamer) if renamer is not None else (lambda n: n)
    on_disk = {rename(n) for n in on_disk}
    return [next((n for n in group if n in on_disk), group[0]) for group, _ in variables]


class Checkpoint:
    """objax.io.Checkpoint: checkpoints ``<logdir>/ckpt/%010d.npz``, the newest `keep_ckpts` kept.

    Beyond objax: retention by index as numbers (not strings), only after the new checkpoint is durable; restoring
    the latest falls back past corrupt files (``fallback=False`` to fail instead); ``keep_every`` keeps multiples
    of it as well; ``asynchronous=True`` saves in the background; ``metadata`` is saved with each checkpoint.

    The directory is locked from the first save until ``close()`` (or the end of a ``with`` block); restoring never
    locks, so an evaluator may restore while a trainer saves (``read_only=True`` also makes its saves fail). A new
    Checkpoint of a directory an older one of this process holds (a notebook cell run again) takes it over at its
    first save; the older one's saves then raise BusyError.
    """

    DIR_NAME = "ckpt"
    FILE_MATCH = "*.npz"
    FILE_FORMAT = "%010d.npz"
    LOAD_FN = staticmethod(load_var_collection)
    SAVE_FN = staticmethod(save_var_collection)

    def __init__(self, logdir: Union[str, os.PathLike], keep_ckpts: int, makedir: bool = True, verbose: bool = True,
                 keep_every: int = 0, asynchronous: bool = False, fallback: bool = True, storage: Any = None,
                 read_only: bool = False) -> None:
        """Opens ``<logdir>/ckpt`` (creating it when `makedir`, unless `read_only`), keeping the newest
        `keep_ckpts` checkpoints. Nothing is locked until the first save."""
        self.logdir = logdir
        self.keep_ckpts = keep_ckpts
        self.verbose = verbose
        self._manager = Manager(logdir, keep=keep_ckpts, keep_every=keep_every, subdir=self.DIR_NAME,
                                asynchronous=asynchronous, fallback=fallback, makedir=makedir, layout="objax",
                                storage=storage, read_only=read_only)

    checkpoint_idx = staticmethod(checkpoint_idx)

    def _hooks_replaced(self):
        return (type(self).SAVE_FN is not Checkpoint.SAVE_FN) or (type(self).LOAD_FN is not Checkpoint.LOAD_FN)

    def _path(self, idx):
        return os.path.join(self.logdir, self.DIR_NAME, self.FILE_FORMAT % idx)

    def save(self, vc: Mapping[str, Any], idx: int, metadata: Optional[Mapping[str, str]] = None) -> None:
        """Saves the collection as checkpoint idx, then deletes all but the newest keep_ckpts. BusyError when
        another process's manager holds the directory, or a newer Checkpoint of this process took it over;
        InvalidArgumentError when opened with read_only=True."""
        idx = index_argument(idx)
        if type(self).SAVE_FN is not Checkpoint.SAVE_FN:
            if self.keep_ckpts and self.keep_ckpts > 0 and _paths.is_url(self._path(idx)):
                # Retention of a replaced SAVE_FN's files removes them as local files (os.remove): a URL is none.
                raise errors.UnsupportedError(
                    errors.EUNSUPPORTED, "%s: a Checkpoint whose SAVE_FN is replaced deletes old checkpoints as "
                    "local files, so it cannot keep_ckpts=%d in an s3:// logdir (keep_ckpts=0 keeps all)"
                    % (self._path(idx), self.keep_ckpts))
            self.SAVE_FN(self._path(idx), vc)
            self._retain()
            return
        if tree.is_nested(vc):
            self._manager.save(_values(vc), idx, metadata=metadata)
            return
        arrays = {names[0]: _value(holder) for names, holder in _unique(vc)}
        self._manager.save(arrays, idx, metadata=metadata)

    def _retain(self):
        if self.keep_ckpts and self.keep_ckpts > 0:
            for old in self._manager.list()[:-self.keep_ckpts]:
                os.remove(self._manager.path(old))

    def restore(self, vc: Mapping[str, Any], idx: Optional[int] = None) -> Tuple[int, str]:
        """Restores the collection from checkpoint idx, or the newest readable one. Returns (idx, path), or
        (0, '') when there is no checkpoint."""
        if idx is not None:
            idx = index_argument(idx)
        if type(self).LOAD_FN is not Checkpoint.LOAD_FN:
            if idx is None:
                idx = self._manager.latest()
                if idx is None:
                    return self._none()
            path = self._path(idx)
            self._say("Resuming from", path)
            self.LOAD_FN(path, vc)
            return idx, path
        variables = _unique(vc)
        arrays = {group[0]: _value(holder) for group, holder in variables}
        holders = {group[0]: holder for group, holder in variables}
        try:
            if tree.is_nested(vc):
                values = _values(vc)
                restored, _ = self._manager._restore(values, idx, None)
                _put_back(vc, values)
                return self._restored(restored)
            if any(len(group) > 1 for group, _ in variables):
                target = idx if idx is not None else self._manager.latest()
                if target is not None:
                    names = _choose_aliases(self._manager.path(target), variables, None, self._manager._storage)
                    arrays = {n: _value(h) for n, (_, h) in zip(names, variables)}
                    holders = {n: h for n, (_, h) in zip(names, variables)}
            restored, _ = self._manager._restore(arrays, idx, lambda n, old, fresh: _set(vc, n, holders[n], fresh))
        except errors.NotFoundError:
            if idx is not None:
                raise
            return self._none()
        return self._restored(restored)

    def _restored(self, idx):
        path = self._manager.path(idx)
        self._say("Resuming from", path)
        return idx, path

    def _none(self):
        if self.verbose:
            print("No checkpoints found. Skipping restoring variables.")
        return 0, ""

    def _say(self, *words):
        if self.verbose:
            print(*words)
            sys.stdout.flush()

    def wait(self) -> None:
        """Waits for background saves (asynchronous=True); raises the first error."""
        self._manager.wait()

    def close(self) -> None:
        """Waits for background saves and releases the directory (unless a newer Checkpoint of this process took it
        over); raises the first unreported save error. Idempotent."""
        self._manager.close()

    def __enter__(self) -> "Checkpoint":
        """Returns the checkpoint itself; leaving the ``with`` block closes it."""
        return self

    def __exit__(self, exc_type, *exc) -> None:
        """Closes the checkpoint. With an exception in flight, a close error is dropped in its favour."""
        self._manager.__exit__(exc_type, *exc)
