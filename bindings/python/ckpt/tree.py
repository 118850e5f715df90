# SPDX-License-Identifier: Apache-2.0
"""Nested training state — dicts with str or int keys, lists, tuples; arrays, tensors and scalars as leaves — saved
as a checkpoint's flat arrays plus one metadata entry that records the rest (docs/format.md, "Nested state").

Each array leaf becomes a member named by its path: the keys and positions from the root, joined by "/", each
written with "~" as "~0" and "/" as "~1" (JSON Pointer's escapes, RFC 6901), so any key round-trips:
``{"model": {"fc.weight": w}}`` → "model/fc.weight", ``{"state": {0: {"exp_avg": m}}}`` → "state/0/exp_avg".
The structure (key types, list or tuple, and every scalar: int, float, bool, str, None) is the JSON of TREE_KEY."""
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from . import errors

TREE_KEY = "__ckpt_tree__"
SEPARATOR = "/"
MAX_DEPTH = 256  # levels below the root, the most any reader of the record takes (docs/format.md)

# Leaves that are arrays whatever they hold (ckpt's own wrappers are recognised by name, to import nothing).
_ARRAY_WRAPPERS = ("typed", "Rows", "Source", "RawArray")


def escape(key: str) -> str:
    """One path segment: "~" as "~0", "/" as "~1"."""
    return key.replace("~", "~0").replace("/", "~1")


def unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def _is_array(value: Any) -> bool:
    if isinstance(value, (np.ndarray, np.generic, complex)):
        return True
    kind = type(value)
    if kind.__name__ in _ARRAY_WRAPPERS and kind.__module__.startswith("ckpt"):
        return True
    return kind.__module__.startswith("torch") and hasattr(value, "dtype")


def is_nested(arrays: Mapping) -> bool:
    """Whether a mapping to save needs a structure record: a key that is not a str, or a value that is a mapping,
    a list, a tuple or None. Anything else is saved flat, as before nested state existed (a number as a 0-d array)."""
    for key, value in arrays.items():
        if not isinstance(key, str):
            return True
        if value is None or (not _is_array(value) and isinstance(value, (Mapping, list, tuple))):
            return True
    return False


def flatten(arrays: Mapping) -> Tuple[List[Tuple[str, Any]], str]:
    """(member name, array leaf) pairs in order, and the structure record's JSON."""
    items = []  # type: List[Tuple[str, Any]]
    # member name -> the path that made it, to name both of a collision
    where = {}  # type: Dict[str, str]

    def describe(path):
        return "".join("[%r]" % (k,) for k in path) or "the root"

    def node(value, path):
        if len(path) > MAX_DEPTH:
            raise errors.InvalidArgumentError(
                errors.EINVAL, "%s is nested more than %d levels deep" % (describe(path[:8]) + "...",
                                                                          MAX_DEPTH))
        if _is_array(value):
            name = SEPARATOR.join(escape(str(k)) for k in path)
            if name in where:
                raise errors.InvalidArgumentError(
                    errors.EINVAL, "%s and %s would both be saved as the array %r: give them keys that differ "
                    "as text" % (where[name], describe(path), name))
            where[name] = describe(path)
            items.append((name, value))
            return {"array": name}
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return {"float": repr(value)}
        if isinstance(value, Mapping):
            entries = []
            for key, child in value.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    raise errors.ArgumentTypeError(
                        errors.EINVAL, "%s has the key %r (a %s): nested state takes str and int keys"
                        % (describe(path), key, type(key).__name__))
                entries.append([key if isinstance(key, str) else int(key), node(child, path + (key,))])
            return {"dict": entries}
        if isinstance(value, (list, tuple)):
            children = [node(child, path + (i,)) for i, child in enumerate(value)]
            return {"tuple" if isinstance(value, tuple) else "list": children}
        # Anything else np.asarray takes (a ckpt.typed, a memoryview, …) is an array.
        return node(np.asarray(value), path) if _asarray_ok(value) else _refuse(value, path, describe)

    root = node(arrays, ())
    return items, json.dumps(root, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _asarray_ok(value):
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - whatever numpy refuses is refused below with the path
        return False
    return a.dtype != np.dtype(object)


def _refuse(value, path, describe):
    raise errors.UnsupportedDtypeError(
        errors.EUNSUPPORTED, "%s is a %s: nested state holds arrays, tensors, numbers, bools, strings and None, in "
        "dicts, lists and tuples" % (describe(path), type(value).__name__))


def parse(text: str, origin: str = "the checkpoint") -> Any:
    """The structure record, checked to be of the documented shape (a FormatError naming what is wrong)."""
    try:
        root = json.loads(text)
    except RecursionError:
        raise errors.FormatError(errors.EFORMAT, "%s: its %s is nested more than %d levels deep"
                                 % (origin, TREE_KEY, MAX_DEPTH)) from None
    except ValueError as e:
        raise errors.FormatError(errors.EFORMAT, "%s: its %s is not JSON: %s" % (origin, TREE_KEY, e)) from None
    if not isinstance(root, dict) or "dict" not in root:
        raise errors.FormatError(errors.EFORMAT, "%s: its %s does not describe a dict" % (origin, TREE_KEY))
    build(root, _AnyArray(), origin)  # every node of a documented kind, so that what walks it later may trust it
    return root


class _AnyArray(dict):
    """Arrays for a check of a record's shape alone: every member name is there."""

    def __contains__(self, name):
        return isinstance(name, str)

    def __getitem__(self, name):
        return None


def build(root: Any, arrays: Mapping[str, Any], origin: str = "the checkpoint",
          make_dict: Callable[[], Any] = dict) -> Any:
    """The nested value a structure record describes, its array leaves taken from `arrays` by member name. The root
    is made by make_dict, every inner dict is a dict."""
    def bad(what):
        return errors.FormatError(errors.EFORMAT, "%s: its %s %s" % (origin, TREE_KEY, what))

    def value(node, top=False, depth=0):
        if depth > MAX_DEPTH:
            raise bad("is nested more than %d levels deep" % MAX_DEPTH)
        if node is None or isinstance(node, (bool, str, int)):
            return node
        if isinstance(node, float):
            return node
        if not isinstance(node, dict) or len(node) != 1:
            raise bad("has a node that is none of the documented kinds: %.80r" % (node,))
        (kind, body), = node.items()
        if kind == "array":
            if not isinstance(body, str) or body not in arrays:
                raise bad("names the array %r, which the file does not have" % (body,))
            return arrays[body]
        if kind == "float":
            try:
                return float(body)
            except (TypeError, ValueError):
                raise bad("has a float that is not one: %.80r" % (body,)) from None
        if kind in ("list", "tuple"):
            if not isinstance(body, list):
                raise bad("has a %s that is not a JSON array" % kind)
            items = [value(child, depth=depth + 1) for child in body]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict":
            if not isinstance(body, list):
                raise bad("has a dict that is not a JSON array of pairs")
            out = make_dict() if top else {}
            for pair in body:
                if (not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0], bool)
                        or not isinstance(pair[0], (str, int))):
                    raise bad("has a dict entry that is not a [str or int key, value] pair: %.80r" % (pair,))
                out[pair[0]] = value(pair[1], depth=depth + 1)
            return out
        raise bad("has a node of the unknown kind %r" % (kind,))

    return value(root, top=True)


def array_names(root: Any) -> List[str]:
    """The member names of a structure record's array leaves, in order."""
    names = []  # type: List[str]

    def walk(node):
        if isinstance(node, dict) and len(node) == 1:
            (kind, body), = node.items()
            if kind == "array":
                names.append(body)
            elif kind in ("list", "tuple") and isinstance(body, list):
                for child in body:
                    walk(child)
            elif kind == "dict" and isinstance(body, list):
                for pair in body:
                    if isinstance(pair, list) and len(pair) == 2:
                        walk(pair[1])

    walk(root)
    return names


def merge(target: Any, node: Any, fresh: Mapping[str, Any]) -> Any:
    """A restore's last step: `target` (what the caller holds at one place of the structure) given the file's
    value there. Arrays are the restore's (filled in place, or the `fresh` array for a member that could not be);
    scalars are the file's; containers are updated in place where they can be (dicts, lists) and rebuilt where they
    cannot (tuples). Places only one side has are left as they are."""
    if not isinstance(node, dict) or len(node) != 1:
        return target if _is_array(target) else node  # a scalar of the file
    (kind, body), = node.items()
    if kind == "array":
        return fresh.get(body, target)
    if kind == "float":
        return target if _is_array(target) else float(body)
    if kind == "dict" and isinstance(target, Mapping):
        for key, child in body:
            if key in target:
                new = merge(target[key], child, fresh)
                if new is not target[key]:
                    target[key] = new
        return target
    if kind in ("list", "tuple") and isinstance(target, (list, tuple)):
        items = list(target)
        for i, child in enumerate(body[:len(items)]):
            items[i] = merge(items[i], child, fresh)
        return put_items(target, items)
    return target


def put_items(target: Any, items: List[Any]) -> Any:
    """A list or tuple given new items: a list updated in place (only where an item changed), a tuple rebuilt when
    one did."""
    if isinstance(target, list):
        for i, item in enumerate(items):
            if item is not target[i]:
                target[i] = item
        return target
    return target if all(a is b for a, b in zip(items, target)) else type(target)(items)


def without_tree(metadata: Mapping[str, str]) -> "OrderedDict[str, str]":
    return OrderedDict((k, v) for k, v in metadata.items() if k != TREE_KEY)

