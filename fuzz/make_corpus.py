#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the fuzzers' seed corpus: small .npy and .npz files as numpy, objax and Python's zipfile write them.

Usage: make_corpus.py OUT_DIR [MAKE_SEEDS]
  OUT_DIR/npy_header/  np.save output: every dtype, both byte orders, C and Fortran order, formats 1.0/2.0/3.0,
                       dtypes ckpt refuses (object, structured, datetime, void, long double), hand-written headers
  OUT_DIR/npz/         np.savez, np.savez_compressed, objax's layout, zip64 records and extras, members streamed
                       with data descriptors, a zip comment, members without '.npy'; one archive per known
                       difference between ckpt's reader and libzip's (disagree_*.npz, see libzip_judge.cpp); and,
                       when the MAKE_SEEDS program is given, archives written by ckpt itself (their members also go
                       to npy_header/)
Every file is under 64 KiB. Run it with Debian's /usr/bin/python3 (its numpy), not another python3 on PATH.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np

MAX_BYTES = 64 << 10


def save(path, data):
    assert len(data) < MAX_BYTES, (path, len(data))
    with open(path, "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None, allow_pickle=False):
    bio = io.BytesIO()
    np.lib.format.write_array(bio, arr, version=version, allow_pickle=allow_pickle)
    return bio.getvalue()


def sample(dtype, shape):
    """Deterministic values of any dtype numpy can cast an integer range to."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "U":
        base = np.array(["a", "\u00e9t\u00e9", "\u2202x", "", "zz"], dtype=dtype)
    elif dtype.kind == "S":
        base = np.array([b"a", b"bc", b"", b"\x00\xff"], dtype=dtype)
    elif dtype.kind == "b":
        base = np.array([True, False, True], dtype=dtype)
    else:
        base = (np.arange(7) * 3 - 5).astype(dtype)
    return np.resize(base, n).reshape(shape) if n else np.zeros(shape, dtype=dtype)


NUMERIC = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]


def npy_corpus(out):
    files = {}
    for code in NUMERIC + ["U3", "S4"]:
        orders = "<>" if np.dtype(code).itemsize > 1 and code[0] not in "?" else "|"
        for order in orders:
            dt = np.dtype(code).newbyteorder(order) if order != "|" else np.dtype(code)
            tag = {"<": "le", ">": "be", "|": "na"}[order]
            files[f"{code}_{tag}_2x3_c.npy"] = npy_bytes(sample(dt, (2, 3)))
            files[f"{code}_{tag}_2x3_f.npy"] = npy_bytes(np.asfortranarray(sample(dt, (2, 3))))
    for shape in [(), (0,), (1,), (5,), (3, 0), (2, 3, 4), (1,) * 12, (2, 1, 3, 1)]:
        name = "x".join(map(str, shape)) or "scalar"
        files[f"f4_shape_{name}.npy"] = npy_bytes(sample("<f4", shape))
        if len(shape) > 1:
            files[f"f8_shape_{name}_f.npy"] = npy_bytes(np.asfortranarray(sample(">f8", shape)))
    for version in [(1, 0), (2, 0), (3, 0)]:
        v = version[0]
        files[f"v{v}_i4.npy"] = npy_bytes(sample("<i4", (3, 2)), version=version)
        files[f"v{v}_U_f.npy"] = npy_bytes(np.asfortranarray(sample("<U4", (2, 2))), version=version)
    # Accepted by numpy, refused by ckpt: they must fail cleanly.
    files["object.npy"] = npy_bytes(np.array([1, "a", None], dtype=object), allow_pickle=True)
    files["structured.npy"] = npy_bytes(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8", (2,))]))
    files["nested_struct.npy"] = npy_bytes(np.zeros(1, dtype=[("p", [("x", "<f4"), ("y", "<f4")])]))
    files["datetime.npy"] = npy_bytes(np.array(["2020-01-01"], dtype="datetime64[D]"))
    files["timedelta.npy"] = npy_bytes(np.array([5], dtype="timedelta64[s]"))
    files["void.npy"] = npy_bytes(np.zeros(2, dtype="V4"))
    files["void2_bfloat16.npy"] = npy_bytes(np.zeros(3, dtype="V2"))
    # The headers ml_dtypes' np.save writes ('<V2' bfloat16, '<V1' float8, '<f1' float8_e5m2) and its names.
    for descr in ["<V2", "<V1", "<f1", "bfloat16", "float8_e4m3fn", "int4"]:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": (2, 2)})
        files[f"ml_dtypes_{descr.strip('<')}.npy"] = header.getvalue() + bytes(range(8 if "V2" in descr or descr == "bfloat16" else 4))
    files["longdouble.npy"] = npy_bytes(np.zeros(2, dtype=np.longdouble))
    # Headers numpy reads but does not write today: other key orders, Python 2 spellings, a 16-byte alignment.
    for name, text in {
        "keys_reordered.npy": "{'shape': (2,), 'fortran_order': False, 'descr': '<i2'}",
        "py2_long.npy": "{'descr': '<i2', 'fortran_order': False, 'shape': (2L,), }",
        "py2_unicode.npy": "{u'descr': u'<i2', u'fortran_order': False, u'shape': (2,)}",
        "double_quotes.npy": '{"descr": "<i2", "fortran_order": False, "shape": (2,)}',
    }.items():
        header = text.encode("latin1")
        header += b" " * (15 - (10 + len(header)) % 16) + b"\n"
        files[name] = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\x01\x00\x02\x00"
    for name, data in files.items():
        save(os.path.join(out, name), data)
    return len(files)


def npz_bytes(save_fn, *args, **kwargs):
    bio = io.BytesIO()
    save_fn(bio, *args, **kwargs)
    return bio.getvalue()


class Unseekable(io.RawIOBase):
    """A write-only stream that cannot seek: zipfile then streams members with data descriptors."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, b):
        self.buf += b
        return len(b)


def streamed_zip(members, compression):
    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", compression=compression) as zf:
        for name, data in members.items():
            with zf.open(name, "w", force_zip64=True) as f:
                f.write(data)
    return bytes(sink.buf)


def zip64_everywhere(members):
    """A stored archive where every size and offset lives in zip64 extras, with zip64 end records: what a
    writer produces past 4 GiB, in a few hundred bytes."""
    out, central = bytearray(), bytearray()
    for name, data in members.items():
        name_b, crc, offset = name.encode(), zlib.crc32(data), len(out)
        local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                           len(name_b), len(local_extra)) + name_b + local_extra + data
        central_extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                               0xFFFFFFFF, len(name_b), len(central_extra), 0, 0, 0, 0, 0xFFFFFFFF)
        central += name_b + central_extra
    cd_offset, n = len(out), len(members)
    out += central
    zip64_end = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, zip64_end, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(out)


def raw_zip(entries, prefix=b""):
    """A zip written field by field, so that one field can lie. Each entry is (name, data, options): options may
    give method (0 or 8, or any number with `compressed`), compressed (the member's bytes), `local` / `central`
    dicts overriding header fields (needed, flags, time, crc, csize, usize, extra, disk), and `at`: no local record
    of its own, the central entry points there."""
    out, central = bytearray(prefix), bytearray()
    for name, data, opt in entries:
        method = opt.get("method", 0)
        comp = opt.get("compressed", zlib.compress(data)[2:-4] if method == 8 else data)
        base = dict(needed=20, flags=0, time=0, crc=zlib.crc32(data), csize=len(comp), usize=len(data), extra=b"")
        lo, ce = dict(base, **opt.get("local", {})), dict(base, **opt.get("central", {}))
        offset = opt.get("at", len(out))
        if "at" not in opt:
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, lo["needed"], lo["flags"], method, lo["time"], 0x21,
                               lo["crc"], lo["csize"], lo["usize"], len(name), len(lo["extra"]))
            out += name + lo["extra"] + comp
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x314, ce["needed"], ce["flags"], method, ce["time"],
                               0x21, ce["crc"], ce["csize"], ce["usize"], len(name), len(ce["extra"]), 0,
                               ce.get("disk", 0), 0, 0o100644 << 16, offset) + name + ce["extra"]
    cd_offset = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), cd_offset, 0)
    return bytes(out)


def disagreements(npy):
    """One archive per documented difference between ckpt's reader and libzip 1.7.3 (libzip_judge.cpp, kKnown; the
    0-byte file is in regressions/). Each is otherwise valid, so that it shows that one difference."""
    files = {}

    def one(**options):
        return raw_zip([(b"w.npy", npy, options)])

    def deflated_declaring(size):  # in both headers
        return one(method=8, local=dict(usize=size), central=dict(usize=size))

    streamed = bytearray(streamed_zip({"w.npy": npy}, zipfile.ZIP_DEFLATED))
    streamed[streamed.find(b"PK\x07\x08") + 4] ^= 0x01  # the descriptor's CRC-32 alone
    files["disagree_descriptor_crc.npz"] = bytes(streamed)
    files["disagree_local_flags.npz"] = one(local=dict(flags=0x08))
    files["disagree_deflate_ratio.npz"] = deflated_declaring(1 << 30)
    files["disagree_deflate_longer.npz"] = deflated_declaring(len(npy) - 1)
    files["disagree_deflate_shorter.npz"] = deflated_declaring(len(npy) + 1)
    sync_flushed = zlib.compressobj(6, zlib.DEFLATED, -15)
    files["disagree_deflate_unterminated.npz"] = one(
        method=8, compressed=sync_flushed.compress(npy) + sync_flushed.flush(zlib.Z_SYNC_FLUSH))
    files["disagree_disk_number.npz"] = one(central=dict(disk=1))
    zip64 = bytearray(zip64_everywhere({"w.npy": npy}))
    zip64[zip64.find(b"PK\x06\x06") + 4] += 1  # the zip64 end record's size, one more than it is
    files["disagree_zip64_record_size.npz"] = bytes(zip64)
    files["disagree_extra_padding.npz"] = one(local=dict(extra=struct.pack("<HHH", 0xD935, 2, 64) + b"\0\0"))
    # A quoted overlap: a.npy is a uint8 array whose bytes are b.npy's whole local record (a 30-byte header, the
    # name, the data), and the central directory lists both.
    b_record = raw_zip([(b"b.npy", npy, {})])[:30 + 5 + len(npy)]
    a_npy = npy_bytes(np.frombuffer(b_record, dtype=np.uint8))
    b_at = 30 + 5 + len(a_npy) - len(b_record)
    files["disagree_overlap.npz"] = raw_zip([(b"a.npy", a_npy, {}), (b"b.npy", npy, dict(at=b_at))])
    files["disagree_prefix.npz"] = raw_zip([(b"w.npy", npy, {})], prefix=b"#!/bin/sh\nexit 0\n")
    files["disagree_empty_name.npz"] = raw_zip([(b"", npy, {})])
    files["disagree_nul_name.npz"] = raw_zip([(b"w.npy\0.exe", npy, {})])
    files["disagree_cp437_name.npz"] = raw_zip([(b"caf\x82.npy", npy, {})])  # "café" in CP437, no UTF-8 flag
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", compression=zipfile.ZIP_BZIP2) as zf:
        zf.writestr("w.npy", npy)
    files["disagree_bzip2.npz"] = bio.getvalue()
    # A head copy (ckpt's central extra field 0x6B63: the local extra field's length, the npy header's length, its
    # text without the padding) of another header than the member's: Fortran order instead of C order.
    head = 10 + struct.unpack("<H", npy[8:10])[0]
    text = npy[:head].rstrip(b" \n")
    assert b"'fortran_order': False, " in text
    text = text.replace(b"'fortran_order': False, ", b"'fortran_order': True,  ")
    files["disagree_head_copy.npz"] = one(central=dict(extra=struct.pack("<HHHI", 0x6B63, 6 + len(text), 0, head) + text))
    files["disagree_mtime.npz"] = one(local=dict(time=0x6000))
    files["disagree_version_needed.npz"] = one(local=dict(needed=45))
    return files


def objax_npz(save_fn, named):
    """objax.io.save_var_collection: np.savez(f, names=np.array(names), **{"0": v0, "1": v1, ...})."""
    names = list(named)
    arrays = {str(i): named[k] for i, k in enumerate(names)}
    return npz_bytes(save_fn, names=np.array(names), **arrays)


def npz_corpus(out):
    small = {
        "w": sample("<f4", (3, 4)),
        "b": sample("<f4", (4,)),
        "step": np.array(7, dtype="<i8"),
        "mask": sample("?", (2, 2)),
        "empty": np.zeros((0, 3), dtype="<f8"),
        "big_endian": sample(">i4", (3,)),
        "fortran": np.asfortranarray(sample("<i2", (2, 3))),
        "text": sample("<U5", (3,)),
        "raw": sample("S3", (2,)),
        "z": sample("<c8", (2,)),
    }
    files = {}
    for save_fn, tag in [(np.savez, "savez"), (np.savez_compressed, "savez_compressed")]:
        files[f"{tag}_mixed.npz"] = npz_bytes(save_fn, **small)
        files[f"{tag}_one.npz"] = npz_bytes(save_fn, x=sample("<f8", (2, 2)))
        files[f"{tag}_positional.npz"] = npz_bytes(save_fn, sample("<u2", (3,)), sample("<f2", (2,)))
        files[f"{tag}_nothing.npz"] = npz_bytes(save_fn)
        files[f"{tag}_dtypes.npz"] = npz_bytes(save_fn, **{c: sample(c, (2,)) for c in NUMERIC})
        files[f"{tag}_objax.npz"] = objax_npz(save_fn, {"model.w": small["w"], "model.b": small["b"],
                                                        "\u00e9t\u00e9": small["step"]})
        files[f"{tag}_objax_empty.npz"] = objax_npz(save_fn, {})
    members = {k + ".npy": npy_bytes(v) for k, v in list(small.items())[:4]}
    files["streamed_stored.npz"] = streamed_zip(members, zipfile.ZIP_STORED)
    files["streamed_deflated.npz"] = streamed_zip(members, zipfile.ZIP_DEFLATED)
    files["zip64_everywhere.npz"] = zip64_everywhere(members)
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.comment = b"a comment after the directory"
        zf.writestr("no_suffix", npy_bytes(small["w"]))
        zf.writestr("v2.npy", npy_bytes(small["b"], version=(2, 0)))
        zf.writestr("v3.npy", npy_bytes(small["text"], version=(3, 0)))
    files["comment_no_suffix.npz"] = bio.getvalue()
    # The metadata member as numpy writes it: JSON in a 0-d '<U' array, naming the real types of raw-bytes arrays.
    meta = json.dumps({"format": 1, "dtypes": {"w": "bfloat16", "f8": "float8_e4m3fn"},
                       "metadata": {"step": "7", "note": "\u00e9t\u00e9"}})
    with_meta = {"w": np.zeros(3, "V2"), "f8": np.zeros(2, "V1"), "__ckpt_metadata__": np.array(meta)}
    files["metadata_savez.npz"] = npz_bytes(np.savez, **with_meta)
    files["metadata_savez_compressed.npz"] = npz_bytes(np.savez_compressed, **with_meta)
    files.update(disagreements(npy_bytes(small["w"])))
    for name, data in files.items():
        save(os.path.join(out, name), data)
    return len(files)


def ckpt_corpus(make_seeds, npz_out, npy_out):
    before = set(os.listdir(npz_out))
    subprocess.run([make_seeds, npz_out], check=True, stdout=subprocess.DEVNULL)
    made = sorted(set(os.listdir(npz_out)) - before)
    for name in made:  # ckpt's own npy headers seed the header target too
        if name.endswith("_stored.npz") and "objax" not in name:
            with zipfile.ZipFile(os.path.join(npz_out, name)) as zf:
                for member in zf.namelist():
                    save(os.path.join(npy_out, "ckpt_" + member.replace("/", "_")), zf.read(member))
    return len(made)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    npy_out, npz_out = os.path.join(out, "npy_header"), os.path.join(out, "npz")
    for d in (npy_out, npz_out):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    n_npy = npy_corpus(npy_out)
    n_npz = npz_corpus(npz_out)
    n_ckpt = ckpt_corpus(sys.argv[2], npz_out, npy_out) if len(sys.argv) == 3 else 0
    print(f"seed corpus in {out}: {n_npy} npy files, {n_npz} numpy/zipfile archives, {n_ckpt} ckpt archives")


if __name__ == "__main__":
    main()
