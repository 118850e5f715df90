# SPDX-License-Identifier: Apache-2.0
"""Paths as ckpt's C functions take them: local paths, and "s3://bucket/key" URLs.

libckpt reads and writes an s3:// path given without a storage through libckpt_s3 itself, so a URL only has to
reach the C call unchanged. Nothing may treat one as a local path on the way: os.path.normpath and pathlib.Path
turn "s3://b/k" into "s3:/b/k", which the library would take for a local directory named "s3:".
"""
import os
from typing import Any

from . import _native, errors

SCHEME = "s3://"
URL_VERSION = (0, 6, 0)  # the first libckpt that resolves s3:// paths (older ones would write to ./s3:/...)


def is_url(path: Any) -> bool:
    """Whether a path argument (str, bytes or os.PathLike) is an s3:// URL."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        return path.startswith(SCHEME.encode())
    return isinstance(path, str) and path.startswith(SCHEME)


def encode(path: Any) -> bytes:
    """The bytes a C call takes for a path argument (str, bytes or os.PathLike), URLs unchanged.

    UnsupportedError for a URL when the library loaded predates s3:// paths; InvalidArgumentError for a path whose
    first component is "s3:" — a URL that lost a slash to pathlib or normpath, which would otherwise become a local
    directory "s3:" (a local directory of that name is still reachable as "./s3:/...")."""
    raw = os.fsencode(path)
    if raw.startswith(SCHEME.encode()):
        if _native.VERSION < URL_VERSION:
            raise errors.UnsupportedError(
                errors.EUNSUPPORTED, "%s: s3:// paths need libckpt %d.%d.%d or newer; the library loaded (%s) is "
                "%d.%d.%d" % ((os.fsdecode(raw),) + URL_VERSION + (_native.library_path(),) + _native.VERSION))
        return raw
    if raw.split(b"/", 1)[0] == b"s3:":
        text = os.fsdecode(raw)
        raise errors.InvalidArgumentError(
            errors.EINVAL, "%s: not an s3:// URL (pathlib.Path and os.path.normpath make s3:// into s3:/): pass "
            "the URL as a str, %r" % (text, "s3://" + text[len("s3:/"):].lstrip("/")))
    return raw


def sync_dir(path: Any) -> None:
    """fsync of a local directory: the changes of its entries made so far survive a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Any, mode: int = 0o777, exist_ok: bool = True) -> None:
    """os.makedirs, each directory it creates made durable in its parent before anything goes into it (as ckpt's
    own saves make the directories they create), so that a power cut cannot take a folder away from the files
    later saved durably in it."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        if not exist_ok:
            raise FileExistsError(17, "File exists", path)
        return
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        make_dirs(parent, mode, exist_ok=True)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not exist_ok or not os.path.isdir(path):
            raise
        return
    sync_dir(parent)
