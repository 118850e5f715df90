# SPDX-License-Identifier: Apache-2.0
"""The inputs of the CLI tests: files from numpy, objax's layout and ckpt, broken files, manager directories; and
reference decoders of the narrow float formats, from their definitions."""
import json
import math
import os
import shutil
import struct
import zipfile

import numpy as np

from cli_run import flip_byte, flip_in_array_data, with_ckpt
from thread_world import THREAD_WORLD


# Reference decoders of the narrow float formats, from their definitions.
def minifloat(bits, exponent_bits, mantissa_bits, bias, nan_rule):
    sign = -1.0 if (bits >> (exponent_bits + mantissa_bits)) & 1 else 1.0
    e = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    m = bits & ((1 << mantissa_bits) - 1)
    all_ones = (1 << exponent_bits) - 1
    if nan_rule == "ieee" and e == all_ones:
        return sign * math.inf if m == 0 else math.nan
    if nan_rule == "fn" and e == all_ones and m == (1 << mantissa_bits) - 1:
        return math.nan
    if nan_rule == "fnuz" and bits == 0x80:
        return math.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + m / 2 ** mantissa_bits) * 2.0 ** (e - bias)


FLOAT8 = {
    "float8_e4m3fn": lambda b: minifloat(b, 4, 3, 7, "fn"),
    "float8_e5m2": lambda b: minifloat(b, 5, 2, 15, "ieee"),
    "float8_e4m3fnuz": lambda b: minifloat(b, 4, 3, 8, "fnuz"),
    "float8_e5m2fnuz": lambda b: minifloat(b, 5, 2, 16, "fnuz"),
    "float8_e8m0fnu": lambda b: math.nan if b == 0xFF else 2.0 ** (b - 127),
}
# Known values, by hand from the formats' specifications.
FLOAT8_KNOWN = {
    "float8_e4m3fn": {0x38: 1.0, 0x7E: 448.0, 0xFE: -448.0, 0x01: 2.0 ** -9, 0x7F: math.nan},
    "float8_e5m2": {0x3C: 1.0, 0x7B: 57344.0, 0x7C: math.inf, 0xFC: -math.inf, 0x01: 2.0 ** -16, 0x7F: math.nan},
    "float8_e4m3fnuz": {0x40: 1.0, 0x7F: 240.0, 0x80: math.nan, 0x01: 2.0 ** -10},
    "float8_e5m2fnuz": {0x40: 1.0, 0x7F: 57344.0, 0x80: math.nan, 0x01: 2.0 ** -17},
    "float8_e8m0fnu": {0x7F: 1.0, 0x80: 2.0, 0x00: 2.0 ** -127, 0xFF: math.nan},
}


def json_value(v):
    """A float as the program's JSON writes it: a number, or "nan", "inf", "-inf"."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def same_values(got, expected):
    """Element-wise equality of JSON values with floats, zeros' signs included."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        e = json_value(e)
        if isinstance(e, str) or isinstance(g, str):
            if g != e:
                return False
        elif g != e or math.copysign(1, g) != math.copysign(1, e):
            return False
    return True


W = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5 + 0.25
PLAIN = {
    "w": W,
    "b": np.array([1, 2, 3], np.int64),
    "flag": np.array([True, False]),
    "s": np.array(["ab", "c"]),
    "raw": np.array([b"x", b"yz"]),
    "z": np.array([1 + 2j, -0.5 - 1j]),
    "big": np.arange(2000, dtype=np.int32).reshape(50, 40),
    "empty": np.zeros((0, 3), np.float32),
    "scalar": np.array(3.5),
    "nested/name": np.array([7], np.uint16),
}
BF16_BITS = np.array([0x3F80, 0x4049, 0x7FC0, 0xFF80, 0x3DCD], np.uint16)  # 1, 3.140625, nan, -inf, 0.10009765625
BF16_VALUES = [1.0, 3.140625, math.nan, -math.inf, 0.10009765625]
E4M3_BITS = np.array([0x7E, 0x7F, 0x01, 0x38], np.uint8)  # 448, nan, 2^-9, 1
SCALE_BITS = np.array([0x7F, 0x80, 0x00], np.uint8)  # e8m0: 1, 2, 2^-127
RUN_W = [np.arange(1000, dtype=np.float32) * k + 0.5 for k in range(1, 5)]


def savez_with_metadata(filename, arrays, dtypes=None, metadata=None):
    """numpy's savez plus the metadata member docs/format.md describes (what ckpt writes for typed arrays)."""
    record = {"format": 1, "dtypes": dtypes or {}, "metadata": metadata or {}}
    members = dict(arrays)
    members["__ckpt_metadata__"] = np.array(json.dumps(record))
    np.savez(filename, **members)


def make_inputs(work):
    """Writes every input into `work`."""
    def path(*parts):
        return os.path.join(work, *parts)

    np.savez(path("plain.npz"), **PLAIN)
    np.savez_compressed(path("compressed.npz"), **PLAIN)
    np.savez(path("objax.npz"), names=np.array(["net.w", "net.b"]), **{"0": W, "1": PLAIN["b"]})

    # Every bit pattern of every narrow format, by numpy: float16 natively, bfloat16 as raw 2-byte items (which
    # ckpt reads as bfloat16 without a record), the float8 types as raw bytes with their types recorded.
    all8 = np.arange(256, dtype=np.uint8).view("V1")
    savez_with_metadata(path("patterns.npz"),
                        dict({"f16": np.arange(65536, dtype=np.uint16).view(np.float16),
                              "bf16": np.arange(65536, dtype=np.uint16).view("V2")},
                             **{name: all8 for name in FLOAT8}),
                        dtypes={name: name for name in FLOAT8})
    savez_with_metadata(path("numpy_typed.npz"), {"w": BF16_BITS.view("V2"), "q": np.array([0x3C], np.uint8).view("V1")},
                        dtypes={"w": "bfloat16", "q": "float8_e5m2"}, metadata={"step": "7", "by": "numpy"})

    # A file big enough for a progress report, and pairs for diff.
    np.savez(path("large.npz"), x=np.arange(2 << 20, dtype=np.float32))
    np.savez(path("diff_a.npz"), w=np.array([1.0, 2.0, 3.0, 4.0]), n=np.array([np.nan, 1.0, 2.0], np.float32),
             bf=np.array([0x3F80, 0x4000, 0x7FC0], np.uint16).view("V2"), i=np.arange(5), same=np.arange(3.0),
             x=np.zeros(3, np.float32), y=np.zeros((2, 3)), gone=np.ones(2))
    np.savez(path("diff_b.npz"), w=np.array([1.0, 2.5, 3.0, 4.0]), n=np.array([np.nan, 1.0, 2.0], np.float32),
             bf=np.array([0x3F80, 0x4020, 0x7FC1], np.uint16).view("V2"), i=np.arange(5), same=np.arange(3.0),
             x=np.zeros(3, np.float64), y=np.zeros((3, 2)), new=np.ones(2))
    np.savez(path("nan_a.npz"), v=np.array([np.nan, 1.0, np.inf, 0.0]))
    np.savez(path("nan_b.npz"), v=np.array([np.nan, 1.0, np.inf, -0.0]))
    np.savez(path("nan_c.npz"), v=np.array([0.0, 1.0, np.inf, 0.0]))
    np.savez(path("int_a.npz"), v=np.array([0, 10, np.iinfo(np.int64).min], np.int64))
    np.savez(path("int_b.npz"), v=np.array([3, 10, np.iinfo(np.int64).max], np.int64))

    # Broken files.
    with open(path("plain.npz"), "rb") as f:
        good = f.read()
    with open(path("truncated.npz"), "wb") as f:
        f.write(good[: len(good) // 2])
    shutil.copy(path("plain.npz"), path("bitflip.npz"))
    flip_in_array_data(path("bitflip.npz"), W)
    crc = zipfile.ZipFile(path("plain.npz")).getinfo("w.npy").CRC
    packed = struct.pack("<I", crc)
    assert good.count(packed) == 2  # the local header and the central directory entry
    with open(path("crc.npz"), "wb") as f:
        f.write(good.replace(packed, struct.pack("<I", crc ^ 0x00010000)))
    at = good.find(b"\x93NUMPY")
    with open(path("header.npz"), "wb") as f:
        f.write(flip_byte(good, at + 1))
    np.savez(path("object.npz"), o=np.array([{"a": 1}, None], dtype=object), w=np.ones(2))
    with open(path("notzip.npz"), "w") as f:
        f.write("this is not a zip file\n")
    open(path("empty.npz"), "wb").close()

    # ckpt's own files: typed arrays and metadata; 65535 members (zip64 end records); a manager's directory.
    with_ckpt("""
        import numpy as np, ckpt
        ckpt.save("typed.npz", {"w": ckpt.typed(np.array(%r, np.uint16), "bfloat16"),
                                "q": ckpt.typed(np.array(%r, np.uint8), "float8_e4m3fn"),
                                "scale": ckpt.typed(np.array(%r, np.uint8), "float8_e8m0fnu"),
                                "h": np.array([0.5, -2.0], np.float16)},
                  metadata={"step": "1200", "loss": "0.25", "note": "bf16 weights"})
        ckpt.save("many.npz", {"a%%d" %% i: np.array(i %% 256, np.uint8) for i in range(65535)})
        m = ckpt.Manager("run", keep=0)
        for k in range(1, 5):
            meta = {"step": str(100 * k), "loss": str(1.0 / k), "lr": "0.001"}
            if k == 2:
                meta["time"] = "1714564800"  # seconds since the epoch: 2024-05-01 12:00:00 UTC
            if k == 3:
                meta["saved_at"] = "2024-05-01T12:00:00Z"
            m.save({"w": np.arange(1000, dtype=np.float32) * k + 0.5}, k, metadata=meta)
        m.close()
    """ % (BF16_BITS.tolist(), E4M3_BITS.tolist(), SCALE_BITS.tolist()), cwd=work)
    with open(path("many.npz"), "rb") as f:
        f.seek(-200, os.SEEK_END)
        assert b"PK\x06\x06" in f.read(), "many.npz has no zip64 end record"
    # An interrupted save's temporary, and the newest checkpoint corrupt (its data, so only a full check sees it).
    ckdir = path("run", "ckpt")
    with open(os.path.join(ckdir, "0000000004.npz"), "rb") as f:
        partial = f.read()[:300]
    with open(os.path.join(ckdir, ".0000000005.npz.tmp-Ab12Cd"), "wb") as f:
        f.write(partial)
    flip_in_array_data(os.path.join(ckdir, "0000000004.npz"), RUN_W[3])

    # Checkpoints that no manager ever opened: no lock file, and none may appear.
    os.makedirs(path("plainrun", "ckpt"))
    for k in (1, 2):
        np.savez(path("plainrun", "ckpt", "%010d.npz" % k), w=np.full(3, k, np.float32))


# Two ranks as threads of one process, each saving its rows of "emb" and a variable of its own, as sharded steps 1
# and 2 of LOGDIR's manager; then file checkpoint 3, saved by a manager without a communicator.
SHARDED_RUN = """
import threading, numpy as np, ckpt
""" + THREAD_WORLD + """
world = World(2)
emb = np.arange(12, dtype=np.float32).reshape(4, 3)
def rank(r):
    with ckpt.Manager(LOGDIR, comm=Comm(world, r), keep=0) as m:
        for step in (1, 2):
            m.save({"emb": ckpt.Rows(emb[2 * r:2 * r + 2] + step, 2 * r, 4), "own_%d" % r: np.full(2, r)},
                   step, metrics={"loss": 0.5})
threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
[t.start() for t in threads]; [t.join() for t in threads]
with ckpt.Manager(LOGDIR, keep=0) as m:
    m.save({"w": np.ones(3)}, 3)
"""


def make_sharded_run(logdir, cwd):
    """SHARDED_RUN into `logdir` (a local directory or an s3:// URL)."""
    with_ckpt("LOGDIR = %r\n%s" % (logdir, SHARDED_RUN), cwd=cwd)
