# SPDX-License-Identifier: Apache-2.0
"""bfloat16, float8 and metadata between ckpt, numpy and torch.

Run with Debian's interpreter:  /usr/bin/python3 test_ml_dtypes.py /path/to/libckpt.so [unittest args]
numpy (without ml_dtypes) must load every member ckpt writes, bfloat16 as '<V2' and float8 as '<V1' raw bytes, and
find the real types and the user's metadata as JSON in '__ckpt_metadata__'; files with the descrs numpy and
ml_dtypes write ('|V2', '<V2', '<V1', '<f1', 'bfloat16') read as ckpt's documented types; torch 1.13 is a second,
independent implementation of bfloat16: its conversions of NaN, infinities, subnormals and signed zeros are what ckpt
stores and what numpy and torch get back.
"""
import io
import json
import os
import sys
import tempfile
import unittest
import zipfile

try:
    import numpy as np
    import torch
except ImportError as e:  # a missing package is a broken test setup, never a skip
    sys.stderr.write("FAIL: %s is not importable by %s (%s); scripts/test installs python3-numpy and "
                     "python3-torch\n" % (e.name, sys.executable, e))
    sys.exit(1)

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_ctypes  # noqa: E402
from ckpt_ctypes import (BFLOAT16, DEFLATE, EFORMAT, FLOAT8_E4M3FN, FLOAT8_E4M3FNUZ, FLOAT8_E5M2,  # noqa: E402
                         FLOAT8_E5M2FNUZ, FLOAT8_E8M0FNU, LAYOUT_OBJAX, LAYOUT_PLAIN, STORE, VOID, CkptError)

LIB = None
META = "__ckpt_metadata__"
FLOAT8 = {FLOAT8_E4M3FN: "float8_e4m3fn", FLOAT8_E5M2: "float8_e5m2", FLOAT8_E4M3FNUZ: "float8_e4m3fnuz",
          FLOAT8_E5M2FNUZ: "float8_e5m2fnuz", FLOAT8_E8M0FNU: "float8_e8m0fnu"}


def setUpModule():
    global LIB
    LIB = ckpt_ctypes.load(os.environ["CKPT_LIB"])


def npy_bytes(descr, shape, data):
    """The .npy bytes np.save writes for an array with this header descr (numpy's own writer, any descr text)."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    out.write(data)
    return out.getvalue()


def npz_bytes(members, compression=zipfile.ZIP_STORED):
    """An .npz made as np.savez makes one (CPython's zipfile, forced zip64), from name -> .npy bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression, allowZip64=True) as z:
        for name, data in members.items():
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                f.write(data)
    return out.getvalue()


def torch_bf16_bits(values):
    """torch's bfloat16 of float32 values (round to nearest even), as uint16 bits."""
    t = torch.tensor(np.asarray(values, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16).copy()


# Values whose bfloat16 conversion has edge cases: NaN (with a payload), infinities, the largest finite value,
# subnormals, signed zeros, and values that round (ties to even).
EDGE = np.array([np.nan, -np.nan, np.inf, -np.inf, 3.3895314e38, -3.3895314e38, 9.18355e-41, -9.18355e-41,
                 1e-45, 0.0, -0.0, 1.0, -2.0, 1.00390625, 1.01171875, 3.14159265, 65504.0, 1e-38],
                dtype=np.float32)
EDGE[0] = np.frombuffer(np.uint32(0x7fc12345).tobytes(), np.float32)[0]


class Case(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="ckpt-ml-dtypes-")
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertBits(self, expected, actual, what):
        self.assertEqual(np.asarray(expected).tobytes(), np.asarray(actual).tobytes(), what)


class NumpyReadsWhatCkptWrites(Case):
    """ckpt writes, numpy (no ml_dtypes) reads."""

    def saved(self, layout, compression):
        bits = torch_bf16_bits(EDGE).reshape(3, 6)
        rng = np.random.default_rng(7)
        f8 = {code: rng.integers(0, 256, size=(4,), dtype=np.uint8) for code in FLOAT8}
        raw2 = np.frombuffer(b"abcdef", "V2")
        raw5 = np.frombuffer(b"0123456789", "V5")
        with LIB.vars() as v:
            v.add("w/bf16", bits, dtype=BFLOAT16)
            v.add("bf16_scalar", np.uint16(0x3f80), dtype=BFLOAT16)
            for code, a in f8.items():
                v.add(FLOAT8[code], a, dtype=code)
            v.add("raw2", raw2)
            v.add("raw5", raw5)
            v.add("plain", np.arange(3, dtype=np.float32))
            v.set_metadata("step", "1200")
            v.set_metadata("note", "été ∂L/∂w 😀")
            v.set_metadata("empty", "")
            path = self.path("ckpt.npz")
            LIB.save(path, v, layout=layout, compression=compression)
        return path, bits, f8, raw2, raw5

    def test_every_member_loads_in_numpy_as_raw_bytes_and_the_metadata_names_their_types(self):
        for layout in (LAYOUT_PLAIN, LAYOUT_OBJAX):
            for compression in (STORE, DEFLATE):
                with self.subTest(layout=layout, compression=compression):
                    path, bits, f8, raw2, raw5 = self.saved(layout, compression)
                    with np.load(path, allow_pickle=False) as data:
                        meta_array = data[META]
                        self.assertEqual((), meta_array.shape)
                        self.assertEqual("U", meta_array.dtype.kind)
                        meta = json.loads(str(meta_array))
                        if layout == LAYOUT_OBJAX:  # objax's load_var_collection: names, then members by index
                            names = list(data["names"])
                            arrays = {n: data[str(i)] for i, n in enumerate(names)}
                            by_key = {n: str(i) for i, n in enumerate(names)}
                        else:
                            arrays = {k: data[k] for k in data.files if k != META}
                            by_key = {k: k for k in arrays}
                    self.assertEqual(1, meta["format"])
                    self.assertEqual({"step": "1200", "note": "été ∂L/∂w 😀", "empty": ""}, meta["metadata"])
                    self.assertEqual(list(meta["metadata"]), ["step", "note", "empty"])  # order kept

                    bf16 = arrays["w/bf16"]
                    self.assertEqual(np.dtype("V2"), bf16.dtype)  # what np.load gives for ml_dtypes' '<V2'
                    self.assertEqual((3, 6), bf16.shape)
                    self.assertBits(bits, bf16.view(np.uint16), "bfloat16 bits through numpy")
                    self.assertEqual("bfloat16", meta["dtypes"][by_key["w/bf16"]])
                    self.assertEqual(0x3f80, int(arrays["bf16_scalar"].view(np.uint16)))
                    for code, name in FLOAT8.items():
                        self.assertEqual(np.dtype("V1"), arrays[name].dtype)
                        self.assertBits(f8[code], arrays[name].view(np.uint8), name)
                        self.assertEqual(name, meta["dtypes"][by_key[name]])
                    self.assertBits(raw2, arrays["raw2"], "raw2")
                    self.assertEqual("void", meta["dtypes"][by_key["raw2"]])  # else it would read as bfloat16
                    self.assertBits(raw5, arrays["raw5"], "raw5")
                    self.assertNotIn(by_key["raw5"], meta["dtypes"])
                    self.assertNotIn(by_key["plain"], meta["dtypes"])
                    self.assertBits(np.arange(3, dtype=np.float32), arrays["plain"], "plain")
                    if layout == LAYOUT_PLAIN:  # exactly the member np.save writes for an ml_dtypes bfloat16 array
                        with zipfile.ZipFile(path) as z:
                            self.assertEqual(npy_bytes("<V2", (3, 6), bits.tobytes()), z.read("w/bf16.npy"))

                    # And ckpt reads its own file back with every type and the metadata.
                    with LIB.read(path) as back:
                        self.assertEqual(BFLOAT16, back.dtype_code("w/bf16"))
                        self.assertEqual(VOID, back.dtype_code("raw2"))
                        self.assertEqual(FLOAT8_E5M2, back.dtype_code("float8_e5m2"))
                        self.assertBits(bits, back.array("w/bf16"), "bits through ckpt")
                        self.assertEqual(meta["metadata"], dict(back.metadata()))
                    with LIB.open(path) as npz:
                        self.assertEqual(meta["metadata"], dict(npz.metadata()))
                        self.assertNotIn(META, npz.names())

    def test_torch_gets_its_own_bfloat16_values_back_from_the_numpy_bytes(self):
        path, bits, _, _, _ = self.saved(LAYOUT_PLAIN, STORE)
        expected = torch.tensor(EDGE).to(torch.bfloat16).reshape(3, 6)
        with np.load(path) as data:
            raw = data["w/bf16"]
        back = torch.frombuffer(bytearray(raw.tobytes()), dtype=torch.bfloat16).reshape(3, 6)
        self.assertTrue(torch.equal(expected.view(torch.int16), back.view(torch.int16)), "bitwise, NaNs included")
        finite = torch.isfinite(expected)
        self.assertTrue(torch.equal(expected[finite], back[finite]))
        self.assertTrue(torch.isnan(back.flatten()[0]) and torch.isnan(back.flatten()[1]))
        self.assertEqual(float("inf"), back.flatten()[2].item())
        self.assertTrue(back.flatten()[10].item() == 0.0 and torch.signbit(back.flatten()[10]).item())

    def test_a_file_without_anything_to_record_has_no_metadata_member_and_equals_np_savez(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.frombuffer(b"wxyz", "V4")
        with LIB.vars({"a": a, "b": b}) as v:
            LIB.save(self.path("ckpt.npz"), v)
        np.savez(self.path("numpy.npz"), a=a, b=b)
        with zipfile.ZipFile(self.path("ckpt.npz")) as z, zipfile.ZipFile(self.path("numpy.npz")) as n:
            self.assertEqual(["a.npy", "b.npy"], z.namelist())
            for name in z.namelist():
                self.assertEqual(n.read(name), z.read(name), name)  # member for member what np.savez writes


class CkptReadsWhatOthersWrite(Case):
    """Files made here with numpy's writer and the descrs numpy and ml_dtypes produce."""

    def read_one(self, descr, shape, data, compression=zipfile.ZIP_STORED, extra=None):
        members = {"w": npy_bytes(descr, shape, data)}
        members.update(extra or {})
        path = self.path("given.npz")
        with open(path, "wb") as f:
            f.write(npz_bytes(members, compression))
        return path

    def test_raw_and_named_descrs_read_as_the_documented_types(self):
        bits = torch_bf16_bits(EDGE)
        f8 = bytes(range(0, 256, 17))
        cases = [("|V2", BFLOAT16, bits.tobytes(), 2), ("<V2", BFLOAT16, bits.tobytes(), 2),
                 ("bfloat16", BFLOAT16, bits.tobytes(), 2), ("<V1", VOID, f8, 1), ("|V1", VOID, f8, 1),
                 ("<f1", FLOAT8_E5M2, f8, 1), ("float8_e4m3fn", FLOAT8_E4M3FN, f8, 1),
                 ("float8_e8m0fnu", FLOAT8_E8M0FNU, f8, 1), ("|V3", VOID, b"abcdef", 3)]
        for descr, code, data, itemsize in cases:
            for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                with self.subTest(descr=descr, compression=compression):
                    path = self.read_one(descr, (len(data) // itemsize,), data, compression)
                    with LIB.read(path) as v:
                        self.assertEqual(code, v.dtype_code(0))
                        self.assertEqual(data, v.array(0).tobytes())
                    with LIB.open(path) as npz:
                        self.assertEqual(code, npz.dtype_code(0))
                        self.assertEqual(data, npz.read(0).tobytes())

    def test_a_bf16_file_from_numpy_bytes_restores_bit_exact_into_a_bfloat16_variable(self):
        bits = torch_bf16_bits(EDGE).reshape(2, 9)
        path = self.path("numpy-bf16.npz")
        np.savez(path, w=bits.view("V2"), b=np.float32(3))  # numpy's own '|V2'
        target = np.zeros((2, 9), np.uint16)
        with LIB.vars() as v:
            v.add("w", target, flags=ckpt_ctypes.BORROW, dtype=BFLOAT16)
            v.add("b", np.float32(0))
            LIB.restore(path, v)
            self.assertBits(bits, target, "restored in place")
            self.assertEqual(3.0, float(v.array("b")))

    def test_a_void_member_fills_a_typed_variable_of_its_item_size_and_nothing_else(self):
        values = np.array([1.5, -2.25], np.float32)
        path = self.path("void.npz")
        np.savez(path, w=values.view("V4"))
        with LIB.vars() as v:
            target = v.add("w", np.zeros(2, np.float32), flags=ckpt_ctypes.BORROW)
            LIB.restore(path, v)
            self.assertBits(values, target, "raw bytes into float32")
        with LIB.vars() as v:
            v.add("w", np.zeros(2, np.float64))
            with self.assertRaises(CkptError) as e:
                LIB.restore(path, v)
            self.assertEqual(ckpt_ctypes.EMISMATCH, e.exception.code)
            self.assertIn("void4 (2)", e.exception.message)

    def test_metadata_written_by_numpy_decides_the_types_and_malformed_metadata_is_refused(self):
        bits = torch_bf16_bits([1.0, -2.0])
        meta = json.dumps({"format": 1, "dtypes": {"w": "float8_e4m3fnuz"}, "metadata": {"by": "numpy"}})
        path = self.path("meta.npz")
        np.savez(path, w=np.frombuffer(bits.tobytes(), "V1"), __ckpt_metadata__=np.array(meta))
        with LIB.read(path) as v:
            self.assertEqual(["w"], v.names())
            self.assertEqual(FLOAT8_E4M3FNUZ, v.dtype_code("w"))
            self.assertEqual({"by": "numpy"}, dict(v.metadata()))
        for bad, problem in [("{", "not valid JSON"), (json.dumps({"format": 1, "dtypes": {"w": "bfloat16"}}),
                                                      "dtype bfloat16 (2 bytes) is recorded for raw items of 1 bytes"),
                             (json.dumps({"format": 1, "dtypes": {"nope": "void"}}), "which is not a member"),
                             (json.dumps({"format": 1, "metadata": {"a": [1]}}), "is an array, not a string")]:
            with self.subTest(problem=problem):
                np.savez(path, w=np.frombuffer(bits.tobytes(), "V1"), __ckpt_metadata__=np.array(bad))
                with self.assertRaises(CkptError) as e:
                    LIB.read(path).close()
                self.assertEqual(EFORMAT, e.exception.code)
                self.assertIn("meta.npz: member '__ckpt_metadata__.npy'", e.exception.message)
                self.assertIn(problem, e.exception.message)


def main():
    return ckpt_ctypes.run_tests(sys.argv, lambda lib: "numpy %s, torch %s, ckpt %s" % (np.__version__, torch.__version__, lib.version()))


if __name__ == "__main__":
    sys.exit(main())
