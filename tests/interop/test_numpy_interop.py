# SPDX-License-Identifier: Apache-2.0
"""Bit-exact interop between ckpt and numpy, in both directions.

Run with Debian's numpy interpreter:  /usr/bin/python3 test_numpy_interop.py /path/to/libckpt.so [unittest args]
(or set CKPT_LIB). numpy writes -> ckpt reads (ckpt_read, ckpt_reader_open + ckpt_reader_read_into,
ckpt_read_memory, ckpt_restore); ckpt writes (ckpt_save) -> numpy reads. Arrays are compared by dtype,
shape and tobytes(), so every bit counts (NaN payloads, -0.0, padding of strings).
"""
import io
import os
import struct
import sys
import tempfile
import unittest
import zipfile
from collections import OrderedDict

try:
    import numpy as np
except ImportError as e:  # a missing numpy is a broken test setup, never a skip
    sys.stderr.write("FAIL: numpy is not importable by %s (%s); install it with "
                     "`apt-get install -y python3-numpy` (scripts/test does)\n" % (sys.executable, e))
    sys.exit(1)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_ctypes  # noqa: E402
from ckpt_ctypes import (BORROW, DEFLATE, LAYOUT_AUTO, LAYOUT_OBJAX, LAYOUT_PLAIN, STORE,  # noqa: E402
                         CkptError)

LIB = None  # ckpt_ctypes.Library, loaded once


def setUpModule():
    global LIB
    path = os.environ.get("CKPT_LIB")
    if not path:
        raise RuntimeError("no library: pass the path of libckpt.so as the first argument or set CKPT_LIB")
    LIB = ckpt_ctypes.load(path)


# ------------------------------------------------------------------------------------------------ samples

def _float_samples(t):
    """Every interesting bit pattern of float type t: signed zeros, extremes, subnormals, infinities, NaNs with
    payloads (np.frombuffer keeps them exactly; arithmetic would not)."""
    fi = np.finfo(t)
    values = np.array([0.0, -0.0, 1.0, -1.5, 1 / 3, fi.eps, fi.tiny, fi.smallest_subnormal, fi.max, -fi.max,
                       np.inf, -np.inf, np.nan], dtype=t)
    bits = {np.float16: (np.uint16, [0x7E01, 0xFC02, 0x7C01]),
            np.float32: (np.uint32, [0x7FC00001, 0xFFA5A5A5, 0x7F800001]),
            np.float64: (np.uint64, [0x7FF8000000000001, 0xFFF0DEADBEEF0001, 0x7FF0000000000001])}[t]
    nans = np.array(bits[1], dtype=bits[0]).view(t)
    return np.concatenate([values, nans])


def dtype_samples():
    """One array per dtype ckpt supports (and a 2-d random one per numeric dtype)."""
    rng = np.random.default_rng(20240601)
    out = OrderedDict()
    out["bool"] = np.array([True, False, False, True, True])
    out["bool_2d"] = rng.integers(0, 2, size=(3, 4)).astype(np.bool_)
    for t in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(t)
        out[np.dtype(t).name] = np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max], dtype=t)
        out[np.dtype(t).name + "_2d"] = rng.integers(info.min, info.max, size=(3, 4), dtype=t, endpoint=True)
    for t in (np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(t)
        out[np.dtype(t).name] = np.array([0, 1, 2, info.max - 1, info.max], dtype=t)
        out[np.dtype(t).name + "_2d"] = rng.integers(0, info.max, size=(3, 4), dtype=t, endpoint=True)
    for t in (np.float16, np.float32, np.float64):
        out[np.dtype(t).name] = _float_samples(t)
        out[np.dtype(t).name + "_2d"] = rng.standard_normal((3, 4)).astype(t)
    for t, f in ((np.complex64, np.float32), (np.complex128, np.float64)):
        parts = _float_samples(f)
        out[np.dtype(t).name] = np.repeat(parts, 2).view(t)  # (x, x) pairs, bits untouched
        out[np.dtype(t).name + "_mixed"] = np.concatenate([parts, parts[::-1]]).view(t)  # (x, y) pairs
        out[np.dtype(t).name + "_2d"] = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(t)
    # '<U': BMP, non-ASCII, astral planes (UTF-16 would need surrogate pairs), the last code point, an interior
    # NUL, the empty string, and a lone surrogate (numpy stores any UCS-4 unit).
    out["unicode"] = np.array(["", "a", "héllo wörld", "权重", "😀𝄞", "\U0010FFFF", "a\x00b", "\ud800"])
    out["unicode_2d"] = np.array([["αβγ", "δ"], ["🙂🙃", "x"], ["", "ünï"]])
    # '|S': arbitrary bytes, interior NULs, non-UTF-8.
    out["bytes"] = np.array([b"", b"a", b"\x00\xff\x01", b"abc\x00def", b"\x80" * 7])
    out["bytes_2d"] = np.array([[b"ab", b"\xfe"], [b"", b"xyz"]])
    return out


def shape_samples():
    """0-d, empty and 4-d arrays of several dtypes."""
    out = OrderedDict()
    out["f4_0d"] = np.array(3.25, np.float32)
    out["i8_0d"] = np.array(-(2 ** 62), np.int64)
    out["bool_0d"] = np.array(True)
    out["c16_0d"] = np.array(1.5 - 2.5j, np.complex128)
    out["f2_0d"] = np.array(np.nan, np.float16)
    out["U_0d"] = np.array("ünï😀")
    out["S_0d"] = np.array(b"x\x00y")
    out["f4_0"] = np.zeros((0,), np.float32)
    out["i8_0x3"] = np.zeros((0, 3), np.int64)
    out["u1_3x0"] = np.zeros((3, 0), np.uint8)
    out["c8_2x0x2"] = np.zeros((2, 0, 2), np.complex64)
    out["U4_0"] = np.zeros((0,), "U4")
    out["S3_0x2"] = np.zeros((0, 2), "S3")
    out["f4_4d"] = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) / 7
    out["u2_4d"] = np.arange(6, dtype=np.uint16).reshape(1, 2, 1, 3)
    out["i4_4d"] = np.arange(-60, 60, dtype=np.int32).reshape(2, 2, 5, 6)
    out["U_4d"] = np.array(["a", "ββ", "😀😀😀", ""] * 6).reshape(2, 3, 2, 2)
    out["f8_1x1x1x1"] = np.array(np.pi).reshape(1, 1, 1, 1)
    return out


def name_samples():
    """Variable names that are not plain identifiers: non-ASCII, astral, with '/', with spaces and dots."""
    out = OrderedDict()
    out["poids/é"] = np.array([1.0, 2.0], np.float32)
    out["权重"] = np.arange(4, dtype=np.int16)
    out["model/conv1/kernel"] = np.ones((2, 2), np.float64)
    out["a/b/c/d"] = np.array([7], np.uint8)
    out["😀/𝄞"] = np.array(["é"])
    out["with space.and.dots"] = np.array([True])
    return out


def all_samples():
    out = OrderedDict()
    for part in (dtype_samples(), shape_samples(), name_samples()):
        out.update(part)
    return out


def many_samples(n=300):
    kinds = [np.float32, np.int64, np.uint8, np.float16, np.complex64, np.bool_, "U3", "S2"]
    out = OrderedDict()
    for i in range(n):
        t = kinds[i % len(kinds)]
        out["var_%03d" % ((i * 37) % n)] = np.full((i % 4, 2), i % 7).astype(t)  # names not in sorted order
    return out


def npy_bytes(array, **kwargs):
    """What np.save writes for `array`."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False, **kwargs)
    return buf.getvalue()


def objax_save(file, names, values):
    """objax.io.save_var_collection's file format (objax 1.x: np.savez(f, names=np.array(names), **{'0': v0, ...}))."""
    np.savez(file, names=np.array(names), **{str(i): v for i, v in enumerate(values)})


def objax_load(path, wanted):
    """objax.io.load_var_collection's lookup logic: the arrays of `wanted` names, in that order."""
    with np.load(path, allow_pickle=False) as data:
        name_index = {k: str(i) for i, k in enumerate(data["names"])}
        return OrderedDict((name, data[name_index[name]]) for name in wanted)


def objax_samples():
    # 12 variables, so that member order ("0", "1", ..., "11") differs from sorted order ("0", "1", "10", ...).
    rng = np.random.default_rng(3)
    names = ["model/conv/w", "model/conv/b", "model/bn/mean", "model/bn/var", "model/head/w", "model/head/b",
             "model/poids/é", "model/权重", "model/emb/😀", "model/step", "model/labels", "model/zz"]
    values = [rng.standard_normal((3, 3, 2, 4)).astype(np.float32), np.zeros(4, np.float32),
              rng.standard_normal(4), np.ones(4), rng.standard_normal((8, 2)).astype(np.float16),
              np.array([0.5, -0.5], np.float32), np.arange(5, dtype=np.int8), np.array([[1, 2], [3, 4]], np.uint64),
              (rng.standard_normal((2, 3)) + 1j).astype(np.complex64), np.array(1234, np.int64),
              np.array(["cat", "chien", "猫"]), np.zeros((0, 3), np.float32)]
    return names, values


class WriteOnlyFile:
    """A stream that can only be written: zipfile cannot seek or tell, so it writes data descriptors (as when
    objax saves to a pipe or a gfile stream). read() exists only because np.savez's zipfile_factory asks
    hasattr(file, 'read') to tell a file object from a path; it is never called."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        return self._f.write(data)

    def flush(self):
        self._f.flush()

    def read(self, *args):
        raise io.UnsupportedOperation("write-only stream")


def local_extra_ids(path):
    """{member: [extra field header ids of its *local* header]} (numpy's zip64 extra is in the local header only)."""
    out = {}
    with open(path, "rb") as f, zipfile.ZipFile(path) as z:
        for info in z.infolist():
            f.seek(info.header_offset)
            fixed = f.read(30)
            sig, _, _, _, _, _, _, _, _, name_len, extra_len = struct.unpack("<IHHHHHIIIHH", fixed)
            assert sig == 0x04034B50, "no local header at %d" % info.header_offset
            f.seek(name_len, os.SEEK_CUR)
            extra = f.read(extra_len)
            ids, k = [], 0
            while k + 4 <= len(extra):
                hid, size = struct.unpack_from("<HH", extra, k)
                ids.append(hid)
                k += 4 + size
            out[info.filename] = ids
    return out


def as_written_by_newer_python(path):
    """Rewrites a numpy npz into the bytes Python >= 3.11.4 / 3.12 writes (gh-103861, verified against 3.11.7):
    local headers with version 45 and 0xFFFFFFFF sizes (the real sizes live only in the local zip64 extra
    field), and central directory entries made by and needing version 45 (their sizes stay real)."""
    with zipfile.ZipFile(path) as z:
        infos, cd_offset = z.infolist(), z.start_dir
    with open(path, "r+b") as f:
        for info in infos:
            f.seek(info.header_offset)
            local = bytearray(f.read(30))
            assert struct.unpack_from("<I", local)[0] == 0x04034B50
            struct.pack_into("<H", local, 4, 45)
            struct.pack_into("<II", local, 18, 0xFFFFFFFF, 0xFFFFFFFF)
            f.seek(info.header_offset)
            f.write(local)
        f.seek(cd_offset)
        for info in infos:
            entry = bytearray(f.read(46))
            assert struct.unpack_from("<I", entry)[0] == 0x02014B50
            entry[4] = 45  # version made by (low byte; the high byte is the OS)
            struct.pack_into("<H", entry, 6, 45)  # version needed to extract
            f.seek(-46, os.SEEK_CUR)
            f.write(entry)
            name_len, extra_len, comment_len = struct.unpack_from("<HHH", entry, 28)
            f.seek(name_len + extra_len + comment_len, os.SEEK_CUR)


# -------------------------------------------------------------------------------------------- base class

class InteropTest(unittest.TestCase):
    maxDiff = 4000

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="ckpt-interop-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertSameArray(self, expected, actual, what=""):
        self.assertIsInstance(actual, np.ndarray, what)
        self.assertEqual(expected.dtype.str, actual.dtype.str, "dtype of %s" % what)
        self.assertEqual(expected.shape, actual.shape, "shape of %s" % what)
        self.assertTrue(expected.tobytes() == actual.tobytes(),
                        "bytes of %s differ:\n expected %r\n actual   %r" % (what, expected, actual))

    def assertSameArrays(self, expected, actual, what=""):
        self.assertEqual(list(expected), list(actual), "names (in order) of %s" % what)
        for name in expected:
            self.assertSameArray(expected[name], actual[name], "'%s' in %s" % (name, what))

    def ckpt_reads(self, path, expected, **options):
        """Reads `path` with ckpt_read, ckpt_reader_open + ckpt_reader_read_into and ckpt_read_memory and checks
        each gives `expected` (names in order, dtypes, shapes, bytes)."""
        with LIB.read(path, **options) as v:
            self.assertSameArrays(expected, v.to_dict(), "ckpt_read(%s)" % os.path.basename(path))
        with LIB.open(path, **options) as npz:
            self.assertEqual(list(expected), npz.names())
            for i, name in enumerate(expected):
                self.assertEqual(expected[name].dtype.str, npz.dtype(i).str, "ckpt_reader_dtype of '%s'" % name)
                self.assertEqual(expected[name].shape, npz.shape(i), "ckpt_reader_shape of '%s'" % name)
                self.assertEqual(expected[name].nbytes, npz.nbytes(i), "ckpt_reader_nbytes of '%s'" % name)
            self.assertSameArrays(expected, npz.to_dict(), "ckpt_reader_read_into(%s)" % os.path.basename(path))
        with open(path, "rb") as f:
            data = f.read()
        with LIB.read_memory(data, **options) as v:
            self.assertSameArrays(expected, v.to_dict(), "ckpt_read_memory(%s)" % os.path.basename(path))

    def numpy_savez_then_ckpt_reads(self, arrays, expected=None):
        expected = arrays if expected is None else expected
        for save in (np.savez, np.savez_compressed):
            with self.subTest(writer=save.__name__):
                path = self.path(save.__name__ + ".npz")
                save(path, **arrays)
                self.ckpt_reads(path, expected)

    def ckpt_save(self, path, arrays, **options):
        with LIB.vars(arrays) as v:
            LIB.save(path, v, **options)


# Every way ckpt_save can be asked to write: (layout, compression, level).
SAVE_MODES = [(layout, compression, level)
              for layout in (LAYOUT_PLAIN, LAYOUT_OBJAX)
              for compression, level in ((STORE, 0), (DEFLATE, 1), (DEFLATE, 9))]


def mode_label(layout, compression, level):
    return "%s-%s" % ({LAYOUT_PLAIN: "plain", LAYOUT_OBJAX: "objax"}[layout],
                      "store" if compression == STORE else "deflate%d" % level)


# --------------------------------------------------------------------------------- numpy writes, ckpt reads

class NumpyWritesCkptReads(InteropTest):

    def test_savez_arrays_of_every_supported_dtype_read_back_bit_exact(self):
        self.numpy_savez_then_ckpt_reads(dtype_samples())

    def test_savez_zero_dimensional_arrays_read_back_with_empty_shape(self):
        arrays = OrderedDict((k, v) for k, v in shape_samples().items() if v.ndim == 0)
        self.numpy_savez_then_ckpt_reads(arrays)

    def test_savez_empty_arrays_read_back_with_their_zero_dimensions(self):
        arrays = OrderedDict((k, v) for k, v in shape_samples().items() if v.size == 0)
        self.numpy_savez_then_ckpt_reads(arrays)

    def test_savez_four_dimensional_arrays_read_back_in_c_order(self):
        arrays = OrderedDict((k, v) for k, v in shape_samples().items() if v.ndim == 4)
        self.numpy_savez_then_ckpt_reads(arrays)

    def test_savez_of_300_arrays_reads_back_all_in_member_order(self):
        self.numpy_savez_then_ckpt_reads(many_samples(300))

    def test_savez_unicode_and_slash_variable_names_read_back_unchanged(self):
        self.numpy_savez_then_ckpt_reads(name_samples())

    def test_savez_positional_arrays_read_back_as_arr_0_arr_1(self):
        path = self.path("positional.npz")
        a, b = np.arange(3, dtype=np.int32), np.array(["x"])
        np.savez(path, a, b)
        self.ckpt_reads(path, OrderedDict([("arr_0", a), ("arr_1", b)]))

    def test_big_endian_arrays_read_back_as_native_values(self):
        little = OrderedDict([
            ("f4", _float_samples(np.float32)),
            ("i8", np.array([-(2 ** 63), -2, 0, 0x0102030405060708, 2 ** 63 - 1], np.int64)),
            ("c16", np.concatenate([_float_samples(np.float64), _float_samples(np.float64)[::-1]]).view(np.complex128)),
            ("U3", np.array(["ab", "é😀", "", "权重x"])),
            ("f2", _float_samples(np.float16)),
            ("u2_2d", np.arange(12, dtype=np.uint16).reshape(3, 4) * 4097),
            ("i4_0d", np.array(-123456789, np.int32)),
            ("f8_0x2", np.zeros((0, 2))),
        ])
        big = OrderedDict((k, v.astype(v.dtype.newbyteorder(">"))) for k, v in little.items())
        for k, v in big.items():
            self.assertEqual(">", v.dtype.byteorder, k)
            self.assertIn(b"'descr': '>", npy_bytes(v)[:128], "np.save did not write '%s' big-endian" % k)
        self.numpy_savez_then_ckpt_reads(big, expected=little)

    def test_fortran_order_arrays_read_back_in_c_order(self):
        rng = np.random.default_rng(7)
        c_order = OrderedDict([
            ("f4_2d", rng.standard_normal((3, 5)).astype(np.float32)),
            ("f8_3d", rng.standard_normal((2, 3, 4))),
            ("i2_3d", np.arange(2 * 3 * 5, dtype=np.int16).reshape(2, 3, 5)),
            ("c16_2d", (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3)))),
            ("bool_3d", rng.integers(0, 2, (3, 2, 4)).astype(np.bool_)),
            ("U_2d", np.array([["a", "ββ", "😀"], ["d", "", "ffff"]])),
            ("S_3d", np.array([b"a", b"bb", b"", b"\xff"] * 6).reshape(2, 3, 4)),
            ("u8_4d", np.arange(2 * 3 * 2 * 2, dtype=np.uint64).reshape(2, 3, 2, 2) << np.uint64(40)),
            ("f8_big_2d", rng.standard_normal((3, 4))),
        ])
        fortran = OrderedDict((k, np.asfortranarray(v)) for k, v in c_order.items())
        fortran["f8_big_2d"] = np.asfortranarray(c_order["f8_big_2d"].astype(">f8"))
        for k, v in fortran.items():
            self.assertTrue(v.flags.f_contiguous and not v.flags.c_contiguous, k)
            self.assertIn(b"'fortran_order': True", npy_bytes(v)[:128], "np.save did not write '%s' in F order" % k)
        expected = OrderedDict((k, np.ascontiguousarray(v)) for k, v in c_order.items())
        self.numpy_savez_then_ckpt_reads(fortran, expected=expected)

    def test_npy_header_versions_1_2_and_3_and_members_without_npy_suffix_are_read(self):
        arrays = OrderedDict([
            ("v1", (np.arange(6, dtype=np.float32).reshape(2, 3), (1, 0))),
            ("v2", (np.array([1, -2, 3], np.int64), (2, 0))),
            ("v3", (np.array(["權重", "😀"]), (3, 0))),
            ("v3_0d", (np.array(2.5), (3, 0))),
        ])
        for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            with self.subTest(compression=compression):
                path = self.path("versions-%d.npz" % compression)
                expected = OrderedDict()
                with zipfile.ZipFile(path, "w", compression=compression) as z:
                    for name, (array, version) in arrays.items():
                        buf = io.BytesIO()
                        np.lib.format.write_array(buf, array, version=version, allow_pickle=False)
                        raw = buf.getvalue()
                        self.assertEqual(bytes(version), raw[6:8], "numpy wrote another version for %s" % name)
                        z.writestr(name + ".npy", raw)
                        expected[name] = array
                    # np.load parses any member that starts with the npy magic, with or without '.npy'.
                    noext = np.array([[1, 2], [3, 4]], np.uint32)
                    z.writestr("noext", npy_bytes(noext))
                    expected["noext"] = noext
                    z.writestr("dir/x", npy_bytes(np.array([b"s"])))
                    expected["dir/x"] = np.array([b"s"])
                with np.load(path) as data:  # the file is what numpy reads
                    self.assertEqual(list(expected), data.files)
                self.ckpt_reads(path, expected)

    def test_sixteen_byte_aligned_header_of_numpy_before_1_14_is_read(self):
        def old_style_npy(array):
            text = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (array.dtype.str, array.shape)
            pad = (16 - (10 + len(text) + 1) % 16) % 16
            if (10 + len(text) + 1 + pad) % 64 == 0:
                pad += 16  # make sure the data is *not* 64-aligned
            header = (text + " " * pad + "\n").encode("latin1")
            self.assertEqual(0, (10 + len(header)) % 16)
            self.assertNotEqual(0, (10 + len(header)) % 64)
            return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + array.tobytes()

        arrays = OrderedDict([
            ("w", np.arange(10, dtype=np.float64) / 3),
            ("b", np.array([1, 2, 3], np.int8)),
            ("s", np.array(["αβ", "😀"])),
            ("z", np.array(5, np.uint16)),
            ("e", np.zeros((0, 7), np.float32)),
        ])
        for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            with self.subTest(compression=compression):
                path = self.path("aligned16-%d.npz" % compression)
                with zipfile.ZipFile(path, "w", compression=compression) as z:
                    for name, array in arrays.items():
                        raw = old_style_npy(array)
                        self.assertSameArray(array, np.load(io.BytesIO(raw)), "numpy's reading of crafted " + name)
                        z.writestr(name + ".npy", raw)
                self.ckpt_reads(path, arrays)

    def _write_objax_through_non_seekable_file(self, path, names, values):
        with open(path, "wb") as f:
            objax_save(WriteOnlyFile(f), names, values)
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            self.assertEqual(["names.npy"] + ["%d.npy" % i for i in range(len(values))], [i.filename for i in infos])
            for info in infos:
                self.assertTrue(info.flag_bits & 0x08, "%s has no data descriptor (flag bit 3)" % info.filename)

    def test_objax_file_written_through_a_non_seekable_stream_is_read_with_auto_and_objax_layouts(self):
        names, values = objax_samples()
        path = self.path("objax.npz")
        self._write_objax_through_non_seekable_file(path, names, values)
        expected = OrderedDict(zip(names, values))
        for layout in (LAYOUT_AUTO, LAYOUT_OBJAX):
            with self.subTest(layout=layout):
                self.ckpt_reads(path, expected, layout=layout)
        with self.subTest(layout=LAYOUT_PLAIN):  # the plain layout shows the members as they are
            raw = OrderedDict([("names", np.array(names))] + [(str(i), v) for i, v in enumerate(values)])
            self.ckpt_reads(path, raw, layout=LAYOUT_PLAIN)

    def test_objax_file_restores_into_a_collection_through_a_renaming_callback(self):
        names, values = objax_samples()
        path = self.path("objax.npz")
        self._write_objax_through_non_seekable_file(path, names, values)
        seen = []

        def rename(name_on_disk):  # objax's Renamer({'model/': 'net/'})
            seen.append(name_on_disk)
            return "net/" + name_on_disk[len("model/"):] if name_on_disk.startswith("model/") else None

        for layout in (LAYOUT_AUTO, LAYOUT_OBJAX):
            with self.subTest(layout=layout):
                del seen[:]
                with LIB.vars() as v:
                    # The collection asks in another order than the file's, and holds zeros until restored.
                    order = list(range(len(names)))[::-1]
                    for i in order:
                        v.add_zeros("net/" + names[i][len("model/"):], values[i].dtype, values[i].shape)
                    LIB.restore(path, v, layout=layout, rename=rename)
                    self.assertEqual(sorted(names), sorted(seen), "names given to the renamer")
                    for i in order:
                        self.assertSameArray(values[i], v.array("net/" + names[i][len("model/"):]), names[i])

    def test_objax_file_restore_without_renamer_reports_every_missing_variable(self):
        names, values = objax_samples()
        path = self.path("objax.npz")
        self._write_objax_through_non_seekable_file(path, names, values)
        with LIB.vars() as v:
            v.add_zeros("net/conv/w", values[0].dtype, values[0].shape)
            v.add_zeros("model/conv/b", values[1].dtype, values[1].shape)
            with self.assertRaises(CkptError) as cm:
                LIB.restore(path, v)
            self.assertEqual(ckpt_ctypes.EMISMATCH, cm.exception.code)
            self.assertIn("net/conv/w", cm.exception.message)
            self.assertSameArray(np.zeros(4, np.float32), v.array("model/conv/b"), "untouched after a mismatch")

    def test_zip64_local_headers_of_newer_python_with_ffffffff_sizes_are_read(self):
        arrays = OrderedDict([("a", np.arange(100, dtype=np.float64)), ("b", np.array(["zip64"])),
                              ("c", np.zeros((0,), np.int8))])
        for save in (np.savez, np.savez_compressed):
            with self.subTest(writer=save.__name__):
                path = self.path(save.__name__ + ".npz")
                save(path, **arrays)
                as_written_by_newer_python(path)
                with np.load(path) as data:  # still a file numpy (and zipfile) reads
                    self.assertSameArrays(arrays, OrderedDict((k, data[k]) for k in data.files), "np.load")
                self.ckpt_reads(path, arrays)

    def test_savez_compressed_through_a_non_seekable_stream_is_read(self):
        arrays = OrderedDict([("w", np.arange(1000, dtype=np.float32)), ("s", np.array(["ünï", "😀"])),
                              ("e", np.zeros((0, 2), np.int64)), ("z", np.array(7, np.uint8))])
        path = self.path("stream.npz")
        with open(path, "wb") as f:
            np.savez_compressed(WriteOnlyFile(f), **arrays)
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                self.assertEqual(zipfile.ZIP_DEFLATED, info.compress_type, info.filename)
                self.assertTrue(info.flag_bits & 0x08, "%s has no data descriptor (flag bit 3)" % info.filename)
        self.ckpt_reads(path, arrays)

    def test_objax_file_of_an_empty_collection_reads_as_no_variables(self):
        # objax writes np.array([]) for no names: a float64 array of shape (0,), not a '<U' one.
        path = self.path("objax-empty.npz")
        self._write_objax_through_non_seekable_file(path, [], [])
        with np.load(path) as data:
            self.assertEqual((np.dtype(np.float64), (0,)), (data["names"].dtype, data["names"].shape))
        for layout in (LAYOUT_AUTO, LAYOUT_OBJAX):
            with self.subTest(layout=layout):
                self.ckpt_reads(path, OrderedDict(), layout=layout)

    def test_zip64_extra_fields_that_numpy_always_writes_are_accepted(self):
        arrays = OrderedDict([("a", np.arange(100, dtype=np.float64)), ("b", np.array(["zip64"])),
                              ("c", np.zeros((0,), np.int8))])
        for save in (np.savez, np.savez_compressed):
            with self.subTest(writer=save.__name__):
                path = self.path(save.__name__ + ".npz")
                save(path, **arrays)
                for member, ids in local_extra_ids(path).items():
                    self.assertIn(0x0001, ids, "numpy wrote no zip64 extra for %s" % member)
                self.ckpt_reads(path, arrays)


# --------------------------------------------------------------------------------- ckpt writes, numpy reads

class CkptWritesNumpyReads(InteropTest):

    def test_every_layout_and_compression_loads_in_numpy_with_identical_arrays(self):
        arrays = all_samples()
        for layout, compression, level in SAVE_MODES:
            label = mode_label(layout, compression, level)
            with self.subTest(mode=label):
                path = self.path(label + ".npz")
                self.ckpt_save(path, arrays, layout=layout, compression=compression, level=level)
                with zipfile.ZipFile(path) as z:
                    methods = {i.compress_type for i in z.infolist()}
                self.assertEqual({zipfile.ZIP_STORED if compression == STORE else zipfile.ZIP_DEFLATED}, methods)
                with np.load(path, allow_pickle=False) as data:
                    if layout == LAYOUT_PLAIN:
                        self.assertEqual(list(arrays), data.files)
                        loaded = OrderedDict((k, data[k]) for k in data.files)
                    else:
                        self.assertEqual(["names"] + [str(i) for i in range(len(arrays))], data.files)
                        self.assertSameArray(np.array(list(arrays)), data["names"], "objax names array")
                        loaded = OrderedDict((k, data[str(i)]) for i, k in enumerate(data["names"]))
                self.assertSameArrays(arrays, loaded, "np.load of " + label)

    def test_300_arrays_load_in_numpy_in_collection_order(self):
        arrays = many_samples(300)
        for layout in (LAYOUT_PLAIN, LAYOUT_OBJAX):
            with self.subTest(layout=layout):
                path = self.path("many-%d.npz" % layout)
                self.ckpt_save(path, arrays, layout=layout)
                if layout == LAYOUT_PLAIN:
                    with np.load(path, allow_pickle=False) as data:
                        loaded = OrderedDict((k, data[k]) for k in data.files)
                else:
                    loaded = objax_load(path, list(arrays))
                self.assertSameArrays(arrays, loaded, "np.load")

    def test_plain_members_are_byte_identical_to_what_np_save_writes(self):
        arrays = all_samples()
        for compression, level in ((STORE, 0), (DEFLATE, 9)):
            with self.subTest(compression=compression):
                path = self.path("plain-%d.npz" % compression)
                self.ckpt_save(path, arrays, layout=LAYOUT_PLAIN, compression=compression, level=level)
                with zipfile.ZipFile(path) as z:
                    self.assertEqual([k + ".npy" for k in arrays], z.namelist())
                    for name, array in arrays.items():
                        member = z.read(name + ".npy")  # also checks the CRC-32
                        expected = npy_bytes(array)
                        self.assertEqual(expected[:expected.index(b"\n") + 1], member[:expected.index(b"\n") + 1],
                                         "npy header of '%s'" % name)
                        self.assertTrue(expected == member, "npy bytes of '%s' differ from np.save's" % name)

    def test_objax_members_are_byte_identical_to_what_objax_writes(self):
        names, values = objax_samples()
        path = self.path("objax.npz")
        self.ckpt_save(path, OrderedDict(zip(names, values)), layout=LAYOUT_OBJAX)
        with zipfile.ZipFile(path) as z:
            self.assertEqual(["names.npy"] + ["%d.npy" % i for i in range(len(values))], z.namelist())
            self.assertTrue(npy_bytes(np.array(names)) == z.read("names.npy"), "names.npy differs from np.save's")
            for i, v in enumerate(values):
                self.assertTrue(npy_bytes(v) == z.read("%d.npy" % i), "%d.npy differs from np.save's" % i)

    def test_objax_loading_logic_reads_a_ckpt_objax_file(self):
        names, values = objax_samples()
        arrays = OrderedDict(zip(names, values))
        for compression, level in ((STORE, 0), (DEFLATE, 1)):
            with self.subTest(compression=compression):
                path = self.path("objax-%d.npz" % compression)
                self.ckpt_save(path, arrays, layout=LAYOUT_OBJAX, compression=compression, level=level)
                wanted = names[::-1]  # load_var_collection looks names up; the order is the collection's
                self.assertSameArrays(OrderedDict((k, arrays[k]) for k in wanted), objax_load(path, wanted),
                                      "objax load_var_collection")

    def test_empty_collection_saves_a_zip_that_numpy_opens_with_no_files(self):
        path = self.path("empty.npz")
        with LIB.vars() as v:
            LIB.save(path, v)
        with np.load(path, allow_pickle=False) as data:
            self.assertEqual([], data.files)
        buf = io.BytesIO()
        np.savez(buf)
        with open(path, "rb") as f:
            self.assertEqual(buf.getvalue(), f.read(), "numpy's empty npz")
        with LIB.read(path) as v:
            self.assertEqual(0, len(v))

    def test_empty_collection_in_objax_layout_loads_with_objax_logic(self):
        path = self.path("empty-objax.npz")
        with LIB.vars() as v:
            LIB.save(path, v, layout=LAYOUT_OBJAX)
        with np.load(path, allow_pickle=False) as data:
            self.assertEqual(["names"], data.files)
            self.assertEqual((0,), data["names"].shape)
        self.assertEqual(OrderedDict(), objax_load(path, []))
        with LIB.read(path) as v:
            self.assertEqual(0, len(v))

    def test_every_member_is_dated_1980_01_01_and_saving_twice_gives_identical_bytes(self):
        arrays = all_samples()
        for layout, compression, level in SAVE_MODES:
            label = mode_label(layout, compression, level)
            with self.subTest(mode=label):
                first, second = self.path(label + "-1.npz"), self.path(label + "-2.npz")
                self.ckpt_save(first, arrays, layout=layout, compression=compression, level=level)
                self.ckpt_save(second, arrays, layout=layout, compression=compression, level=level)
                with zipfile.ZipFile(first) as z:
                    for info in z.infolist():
                        self.assertEqual((1980, 1, 1, 0, 0, 0), info.date_time, info.filename)
                with open(first, "rb") as f1, open(second, "rb") as f2:
                    self.assertTrue(f1.read() == f2.read(), "two saves of the same collection differ")
                self.ckpt_save(first, arrays, layout=layout, compression=compression, level=level)  # over itself
                with open(first, "rb") as f1, open(second, "rb") as f2:
                    self.assertTrue(f1.read() == f2.read(), "saving over an existing file changed the bytes")

    def test_non_ascii_member_names_are_marked_utf8_in_the_zip(self):
        path = self.path("names.npz")
        self.ckpt_save(path, name_samples())
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.isascii():
                    self.assertTrue(info.flag_bits & 0x800, "%r lacks the UTF-8 flag" % info.filename)
            self.assertEqual([k + ".npy" for k in name_samples()], z.namelist())

    def test_borrowed_arrays_save_the_callers_bytes(self):
        arrays = dtype_samples()
        path = self.path("borrowed.npz")
        with LIB.vars() as v:
            for k, a in arrays.items():
                v.add(k, a, BORROW)
            LIB.save(path, v)
        with np.load(path, allow_pickle=False) as data:
            self.assertSameArrays(arrays, OrderedDict((k, data[k]) for k in data.files), "np.load")


class LargeArray(InteropTest):
    SIZE = 64 << 20  # bytes

    def test_a_64_mib_array_round_trips_both_ways(self):
        big = np.arange(self.SIZE // 4, dtype=np.float32)  # every value distinct and exact (< 2**24)
        big[::4097] = -big[::4097]
        small = np.array([1, 2, 3], np.int16)
        with self.subTest(direction="ckpt -> numpy"):
            path = self.path("ckpt.npz")
            with LIB.vars() as v:
                v.add("big", big, BORROW)
                v.add("small", small)
                LIB.save(path, v)
            with np.load(path, allow_pickle=False) as data:
                self.assertEqual(["big", "small"], data.files)
                self.assertSameArray(big, data["big"], "big")
                self.assertSameArray(small, data["small"], "small")
        with self.subTest(direction="numpy -> ckpt"):
            path = self.path("numpy.npz")
            np.savez(path, small=small, big=big)
            with LIB.read(path) as v:
                self.assertEqual(["small", "big"], v.names())
                self.assertSameArray(big, v.array("big"), "big")
                self.assertSameArray(small, v.array("small"), "small")
            with LIB.open(path) as npz:
                self.assertSameArray(big, npz.read(1), "big via ckpt_reader_read_into")


def main():
    return ckpt_ctypes.run_tests(sys.argv, lambda lib: "numpy %s (%s), ckpt %s" % (np.__version__, sys.executable, lib.version()))


if __name__ == "__main__":
    sys.exit(main())
