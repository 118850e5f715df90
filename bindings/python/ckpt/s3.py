# SPDX-License-Identifier: Apache-2.0
"""Checkpoints in an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, GCS's S3 interface), through libckpt_s3.

    ckpt.save("s3://bucket/run/model.npz", arrays)          # a URL: libckpt opens the bucket itself
    store = ckpt.S3Storage("bucket", "run", endpoint_url="http://127.0.0.1:9000", part_size=64 << 20)
    with ckpt.Checkpoint("exp1", keep_ckpts=3, storage=store) as ck:   # s3://bucket/run/exp1/ckpt/...
        ...

Every option left None comes from the environment and ~/.aws as the AWS tools take theirs (include/ckpt/ckpt_s3.h
lists the variables and files); without credentials anywhere, requests go unsigned. libckpt_s3.so.0 is looked for
in CKPT_S3_LIBRARY, then beside the libckpt this package loaded (where ``cmake --install`` puts both), then on the
loader's paths.
"""
import ctypes
import os
from typing import Any, Dict, Optional, Tuple

from . import _native, errors
from .storage import NativeStorage

__all__ = ["S3Storage"]

LIBRARY = "libckpt_s3.so.0"
NEEDS_VERSION = (0, 6, 0)  # libckpt_s3 reports its errors with ckpt_error_set (0.6.0)
S3_OPTIONS_VERSION = 2
ADDRESSING = {"auto": 0, "path": 1, "virtual": 2}
_UINT32_MAX = 2 ** 32 - 1

c_char_p, c_uint32, c_uint64 = ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64


class S3Options(ctypes.Structure):
    """ckpt_s3_options (version 2)."""

    _fields_ = [("version", c_uint32), ("bucket", c_char_p), ("prefix", c_char_p), ("endpoint_url", c_char_p),
                ("region", c_char_p), ("access_key_id", c_char_p), ("secret_access_key", c_char_p),
                ("session_token", c_char_p), ("profile", c_char_p), ("part_size", c_uint64),
                ("parallelism", c_uint32), ("max_attempts", c_uint32), ("connect_timeout_ms", c_uint32),
                ("stall_timeout_ms", c_uint32), ("addressing", c_uint32), ("retry_window_ms", c_uint32)]


_OPTIONS_P = ctypes.POINTER(S3Options)
# Every CKPT_S3_API function of ckpt_s3.h; test_complete.py checks that.
S3_SIGNATURES = {
    "ckpt_s3_options_init": (ctypes.c_int, [_OPTIONS_P, c_uint32]),
    "ckpt_storage_s3_new": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), _OPTIONS_P]),
    "ckpt_storage_s3_new_url": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p), c_char_p, _OPTIONS_P,
                                               ctypes.POINTER(c_char_p)]),
}

_loaded = {}  # type: Dict[str, ctypes.CDLL]  # by the name it was loaded as: a failed name is tried again


def library() -> ctypes.CDLL:
    """libckpt_s3, loaded (once) from CKPT_S3_LIBRARY, else beside the libckpt this package loaded, else from the
    loader's paths. UnsupportedError saying where it looked, and why each failed, when it cannot be loaded."""
    if _native.VERSION < NEEDS_VERSION:
        raise errors.UnsupportedError(
            errors.EUNSUPPORTED, "S3 storage needs libckpt %d.%d.%d or newer; the library loaded (%s) is %d.%d.%d"
            % (NEEDS_VERSION + (_native.library_path(),) + _native.VERSION))
    explicit = os.environ.get("CKPT_S3_LIBRARY")
    if explicit:
        candidates = [("CKPT_S3_LIBRARY=%s" % explicit, explicit)]
    else:
        own = _native.library_path()
        candidates = [("%s on the loader's paths" % LIBRARY, LIBRARY)]
        if os.sep in own:
            beside = os.path.join(os.path.dirname(own), LIBRARY)
            candidates.insert(0, ("%s (beside %s)" % (beside, own), beside))
    tried = []
    for where, name in candidates:
        if name in _loaded:
            return _loaded[name]
        try:
            s3 = ctypes.CDLL(name)
            for fname, (restype, argtypes) in S3_SIGNATURES.items():
                f = getattr(s3, fname)
                f.restype, f.argtypes = restype, argtypes
        except (OSError, AttributeError) as e:
            tried.append("%s: %s" % (where, e))
            continue
        _loaded[name] = s3
        return s3
    raise errors.UnsupportedError(
        errors.EUNSUPPORTED, "S3 storage needs %s, which could not be loaded (tried %s). It is built with ckpt "
        "when libcurl's and expat's development files are there (CMake option CKPT_WITH_S3, on by default) and "
        "installed beside libckpt.so.0; set CKPT_S3_LIBRARY to its path if it is elsewhere"
        % (LIBRARY, "; ".join(tried)))


def _text(name: str, value: Any) -> Optional[bytes]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage: %s must be a str, not %s"
                                       % (name, type(value).__name__))
    return value.encode("utf-8")


def _count(name: str, value: Any, limit: int) -> int:
    """A positive whole number (None: 0, the library's default)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage: %s must be an int, not %s"
                                       % (name, type(value).__name__))
    if not 0 < value <= limit:
        raise errors.InvalidArgumentError(errors.EINVAL, "S3Storage: %s must be between 1 and %d, not %d"
                                          % (name, limit, value))
    return value


def _milliseconds(name: str, seconds: Any) -> int:
    """A positive number of seconds in whole milliseconds, at least one (None: 0, the library's default)."""
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage: %s must be a number of seconds, not %s"
                                       % (name, type(seconds).__name__))
    if not 0 < seconds <= _UINT32_MAX / 1000:
        raise errors.InvalidArgumentError(errors.EINVAL, "S3Storage: %s must be a positive number of seconds up "
                                          "to %d, not %r" % (name, _UINT32_MAX // 1000, seconds))
    return max(1, int(round(seconds * 1000)))


def _options(s3: ctypes.CDLL, bucket: Any, prefix: Any, endpoint_url: Any, region: Any, access_key_id: Any,
             secret_access_key: Any, session_token: Any, profile: Any, part_size: Any, parallelism: Any,
             max_attempts: Any, connect_timeout: Any, stall_timeout: Any, addressing: Any,
             retry_window: Any = None) -> S3Options:
    o = S3Options()
    if s3.ckpt_s3_options_init(ctypes.byref(o), S3_OPTIONS_VERSION) != 0:
        # A libckpt_s3 before 0.12 knows version 1, without retry_window.
        if retry_window is not None:
            raise errors.UnsupportedError(errors.EUNSUPPORTED, "S3Storage: retry_window needs libckpt_s3 0.12 or "
                                          "newer")
        _native.check(s3.ckpt_s3_options_init(ctypes.byref(o), 1))
    if addressing not in ADDRESSING:
        raise errors.InvalidArgumentError(errors.EINVAL, "S3Storage: addressing must be one of %s, not %r"
                                          % (", ".join(repr(a) for a in ADDRESSING), addressing))
    o.addressing = ADDRESSING[addressing]
    # The library copies what it keeps: these bytes only need to outlive the call (they live on `o`).
    o._strings = {name: _text(name, value) for name, value in (
        ("bucket", bucket), ("prefix", prefix), ("endpoint_url", endpoint_url), ("region", region),
        ("access_key_id", access_key_id), ("secret_access_key", secret_access_key),
        ("session_token", session_token), ("profile", profile))}
    for name, value in o._strings.items():
        setattr(o, name, value)
    o.part_size = _count("part_size", part_size, 2 ** 64 - 1)
    o.parallelism = _count("parallelism", parallelism, _UINT32_MAX)
    o.max_attempts = _count("max_attempts", max_attempts, _UINT32_MAX)
    o.connect_timeout_ms = _milliseconds("connect_timeout", connect_timeout)
    o.stall_timeout_ms = _milliseconds("stall_timeout", stall_timeout)
    if retry_window is not None:
        o.retry_window_ms = _milliseconds("retry_window", retry_window)
    return o


class S3Storage(NativeStorage):
    """A storage over an S3 bucket (libckpt_s3's ckpt_storage_s3_new): pass it as the ``storage`` (or ``fs``)
    argument of any ckpt function; paths are then keys under ``prefix``.

    Options left None come from the environment and the AWS shared files, then from defaults (ckpt_s3.h):
    `endpoint_url` (AWS_ENDPOINT_URL...; else AWS's own), `region`, the credentials (AWS_ACCESS_KEY_ID...,
    ~/.aws/credentials), `profile`; `part_size` in bytes (at least 5 MiB; default 16 MiB) splits larger files
    into a multipart upload and larger reads into ranges, `parallelism` requests per file in flight (4),
    `max_attempts` tries per request (as many as `retry_window` allows), `retry_window` in seconds (60: how long a
    request keeps being retried after what S3 asks clients to retry — HTTP 5xx, throttling, a dropped or refused
    connection, a stall — so that a gateway restarting mid-save costs a wait), `connect_timeout` and
    `stall_timeout` in seconds (10 and 30),
    `addressing` "path" (endpoint/bucket/key), "virtual" (bucket.endpoint/key) or "auto" (path-style for an
    explicit endpoint). Nothing is sent until the storage is used: a wrong bucket or credentials fail the first
    call that uses it (NotFoundError, StorageError naming the bucket, the key, the HTTP status and S3's code).
    UnsupportedError when libckpt_s3 cannot be loaded (see the module's documentation)."""

    def __init__(self, bucket: str, prefix: Optional[str] = None, *, endpoint_url: Optional[str] = None,
                 region: Optional[str] = None, access_key_id: Optional[str] = None,
                 secret_access_key: Optional[str] = None, session_token: Optional[str] = None,
                 profile: Optional[str] = None, part_size: Optional[int] = None, parallelism: Optional[int] = None,
                 max_attempts: Optional[int] = None, connect_timeout: Optional[float] = None,
                 stall_timeout: Optional[float] = None, addressing: str = "auto",
                 retry_window: Optional[float] = None) -> None:
        s3 = library()
        if not isinstance(bucket, str):
            raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage: bucket must be a str, not %s"
                                           % type(bucket).__name__)
        o = _options(s3, bucket, prefix, endpoint_url, region, access_key_id, secret_access_key, session_token,
                     profile, part_size, parallelism, max_attempts, connect_timeout, stall_timeout, addressing,
                     retry_window)
        h = _native.out()
        _native.check(s3.ckpt_storage_s3_new(ctypes.byref(h), ctypes.byref(o)))
        self.handle = h.value
        self.bucket = bucket
        self.prefix = (prefix or "").strip("/")

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Tuple["S3Storage", str]:
        """(storage, key) for "s3://bucket/key...": a storage over the URL's bucket (with the keyword options of
        S3Storage but bucket and prefix) and the rest of the URL, the path to give it ("" for the bucket itself).
        InvalidArgumentError for a URL that is not s3://<bucket>[/<key>]."""
        s3 = library()
        for taken in ("bucket", "prefix"):
            if taken in options:
                raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage.from_url: the URL gives the %s" % taken)
        names = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token", "profile",
                 "part_size", "parallelism", "max_attempts", "connect_timeout", "stall_timeout", "addressing",
                 "retry_window")
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage.from_url: no option %s" % ", ".join(unknown))
        if not isinstance(url, str):
            raise errors.ArgumentTypeError(errors.EINVAL, "S3Storage.from_url: url must be a str, not %s"
                                           % type(url).__name__)
        values = dict({n: None for n in names}, addressing="auto")
        values.update(options)
        o = _options(s3, None, None, **values)
        raw = url.encode("utf-8")
        h, key = _native.out(), c_char_p()
        _native.check(s3.ckpt_storage_s3_new_url(ctypes.byref(h), raw, ctypes.byref(o), ctypes.byref(key)))
        self = cls.__new__(cls)
        self.handle = h.value
        self.bucket = url[len("s3://"):].split("/", 1)[0]
        self.prefix = ""
        return self, (key.value or b"").decode("utf-8")

    def __repr__(self) -> str:
        return "S3Storage(%r, %r)" % (self.bucket, self.prefix) if self.prefix else "S3Storage(%r)" % self.bucket
