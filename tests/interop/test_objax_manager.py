# SPDX-License-Identifier: Apache-2.0
"""The checkpoint manager against objax.io.Checkpoint's directory: objax writes, ckpt resumes; ckpt writes, objax
resumes; and objax's delete-by-string-sort fault does not exist in ckpt.

Run with Debian's numpy interpreter:  /usr/bin/python3 test_objax_manager.py /path/to/libckpt.so [unittest args]
(or set CKPT_LIB). objax itself (and jax) are not installed: the functions below reimplement, line for line, what
objax.io.Checkpoint.save/restore and objax.io.save_var_collection/load_var_collection do with files, with plain
numpy arrays in place of objax variables. Arrays are compared by dtype, shape and tobytes(), so every bit counts.
"""
import ctypes
import glob
import os
import shutil
import json
import sys
import tempfile
import unittest
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
from ckpt_ctypes import (LATEST, LAYOUT_OBJAX, LAYOUT_PLAIN, MANAGER_ASYNC, MANAGER_OPTIONS_VERSION,  # noqa: E402
                         OK, EBUFS)

LIB = None  # ckpt_ctypes.Library, loaded once

# ------------------------------------------------------------------------------------------- objax, as files

# objax.io.Checkpoint's class attributes.
DIR_NAME = "ckpt"
METADATA = "__ckpt_metadata__"
FILE_MATCH = "%010d.npz"


def objax_save_var_collection(path, named_arrays):
    """objax.io.save_var_collection(file: str, vc): a '.tmp' beside the file, np.savez with 'names' plus one member
    per variable numbered in order, then os.rename."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        names = list(named_arrays)
        data = {str(i): np.asarray(v) for i, v in enumerate(named_arrays.values())}
        np.savez(f, names=np.array(names), **data)
    os.rename(path + ".tmp", path)


def objax_checkpoint_idx(filename):
    """objax.io.Checkpoint.checkpoint_idx."""
    return int(os.path.basename(filename).split(".")[0])


def objax_load_var_collection(path, names):
    """objax.io.load_var_collection(file, vc) for a vc holding `names`: returns name -> array. The objax layout is
    looked up through 'names' and the numbered members; a plain np.savez file (ckpt's default layout) by its keys."""
    with open(path, "rb") as f:
        data = np.load(f, allow_pickle=False)
        if "names" in data.files:
            name_index = {k: str(i) for i, k in enumerate(data["names"])}
            missing = [n for n in names if n not in name_index]
            if missing:
                raise AssertionError("missing from %s: %s" % (path, missing))
            return OrderedDict((n, data[name_index[n]]) for n in names)
        missing = [n for n in names if n not in data.files]
        if missing:
            raise AssertionError("missing from %s: %s" % (path, missing))
        return OrderedDict((n, data[n]) for n in names)


def objax_restore(logdir, names):
    """objax.io.Checkpoint(logdir).restore(vc) with idx=None: glob the checkpoints, take the largest index, load it.
    Returns (idx, path, arrays), or (0, '', None) when there is no checkpoint, as objax does."""
    all_ckpts = glob.glob(os.path.join(logdir, DIR_NAME, "*.npz"))
    if not all_ckpts:
        return 0, "", None
    idx = max(objax_checkpoint_idx(f) for f in all_ckpts)
    path = os.path.join(logdir, DIR_NAME, FILE_MATCH % idx)
    return idx, path, objax_load_var_collection(path, names)


def objax_files_deleted_by_retention(file_names, keep_ckpts):
    """What objax.io.Checkpoint.save deletes after writing: sorted(glob(...))[:-keep_ckpts] — sorted as strings."""
    return sorted(file_names)[:-keep_ckpts]


# --------------------------------------------------------------------------------------------- ckpt manager

class Manager:
    """A ckpt_manager* over ctypes."""

    def __init__(self, logdir, keep=10, keep_every=0, flags=0, queue_depth=0, layout=None):
        c = LIB.c
        self.opts = ckpt_ctypes.ManagerOptions()
        LIB.check("ckpt_manager_options_init", c.ckpt_manager_options_init(ctypes.byref(self.opts),
                                                                             MANAGER_OPTIONS_VERSION))
        self.opts.keep = keep
        self.opts.keep_every = keep_every
        self.opts.flags = flags
        self.opts.queue_depth = queue_depth
        if layout is not None:
            self.npz = LIB.options(layout=layout)
            self.opts.npz = ctypes.pointer(self.npz)
        self.handle = ckpt_ctypes.MANAGER_P()
        LIB.check("ckpt_manager_open", c.ckpt_manager_open(ctypes.byref(self.handle), os.fsencode(logdir),
                                                           ctypes.byref(self.opts)))

    def close(self):
        if self.handle:
            handle, self.handle = self.handle, ckpt_ctypes.MANAGER_P()
            LIB.check("ckpt_manager_close", LIB.c.ckpt_manager_close(handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def save(self, arrays, idx):
        with LIB.vars(arrays) as v:
            LIB.check("ckpt_manager_save", LIB.c.ckpt_manager_save(self.handle, v.handle, idx))

    def wait(self):
        LIB.check("ckpt_manager_wait", LIB.c.ckpt_manager_wait(self.handle))

    def restore(self, vars, idx=LATEST):
        restored = ctypes.c_int64(-100)
        LIB.check("ckpt_manager_restore",
                  LIB.c.ckpt_manager_restore(self.handle, vars.handle, idx, ctypes.byref(restored)))
        return restored.value

    def read(self, idx=LATEST):
        out = ckpt_ctypes.VARS_P()
        restored = ctypes.c_int64(-100)
        LIB.check("ckpt_manager_read", LIB.c.ckpt_manager_read(self.handle, idx, ctypes.byref(out),
                                                               ctypes.byref(restored)))
        return ckpt_ctypes.Vars(LIB, out), restored.value

    def list(self):
        count = ctypes.c_size_t(0)
        rc = LIB.c.ckpt_manager_list(self.handle, None, 0, ctypes.byref(count))
        if rc not in (OK, EBUFS):
            LIB.check("ckpt_manager_list", rc)
        buf = (ctypes.c_int64 * max(count.value, 1))()
        LIB.check("ckpt_manager_list", LIB.c.ckpt_manager_list(self.handle, buf, count.value, ctypes.byref(count)))
        return list(buf[:count.value])

    def path(self, idx):
        buf = ctypes.create_string_buffer(4096)
        LIB.check("ckpt_manager_path", LIB.c.ckpt_manager_path(self.handle, idx, buf, len(buf)))
        return os.fsdecode(buf.value)


# --------------------------------------------------------------------------------------------------- samples

def _bits(dtype, uint, values):
    return np.array(values, dtype=uint).view(dtype)


def sample(idx):
    """The training state at step idx: what objax models hold (float weights, int counters) plus every other
    numeric kind, with bit patterns (NaN payloads, -0.0, subnormals) that any conversion would change."""
    rng = np.random.default_rng(idx)
    return OrderedDict([
        ("(Linear).w", rng.standard_normal((3, 4)).astype(np.float32)),
        ("(Linear).b", np.concatenate([_bits(np.float32, np.uint32, [0x7FC00001, 0x80000000, 0x00000001]),
                                       np.array([idx], np.float32)])),
        ("(Adam).m", rng.standard_normal((2, 2)).astype(np.float64)),
        ("(Adam).step", np.array(idx, dtype=np.int64)),
        ("half", _bits(np.float16, np.uint16, [0x7E01, 0xFC02, 0x8000, idx & 0xFFFF])),
        ("mask", np.array([[True, False], [False, idx % 2 == 0]])),
        ("bytes", ((idx + np.arange(5)) % 256).astype(np.uint8)),
        ("counts", np.array([-(2 ** 63), 2 ** 63 - 1], dtype=np.int64)),
        ("u64", np.array([2 ** 64 - 1, idx], dtype=np.uint64)),
        ("i16", np.array([-32768, 32767, idx % 30000], dtype=np.int16)),
        ("z", np.array([1 + 2j, complex(0.0, -0.0)], dtype=np.complex64)),
        ("zz", np.array([3 - 4j], dtype=np.complex128)),
        ("empty", np.zeros((0, 3), np.float32)),
    ])


def zeros_like(lib, arrays):
    v = lib.vars()
    for name, a in arrays.items():
        v.add_zeros(name, a.dtype, a.shape)
    return v


class Base(unittest.TestCase):
    def setUp(self):
        self.logdir = tempfile.mkdtemp(prefix="ckpt-objax-manager-",
                                       dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
        self.addCleanup(shutil.rmtree, self.logdir, True)

    def assertSameArray(self, expected, actual, what):
        expected = np.asarray(expected)
        actual = np.asarray(actual)
        self.assertEqual(expected.dtype.newbyteorder("="), actual.dtype.newbyteorder("="), what + ": dtype")
        self.assertEqual(expected.shape, actual.shape, what + ": shape")
        self.assertEqual(expected.astype(expected.dtype.newbyteorder("=")).tobytes(),
                         actual.astype(actual.dtype.newbyteorder("=")).tobytes(), what + ": bytes")

    def assertSameArrays(self, expected, actual, what):
        self.assertEqual(list(expected), list(actual), what + ": names")
        for name in expected:
            self.assertSameArray(expected[name], actual[name], "%s: %s" % (what, name))

    def ckpt_files(self):
        return sorted(n for n in os.listdir(os.path.join(self.logdir, DIR_NAME)) if n != ".ckpt.lock")


# ---------------------------------------------------------------------------------------- (a) objax -> ckpt

class ObjaxWritesCkptResumes(Base):
    def setUp(self):
        super().setUp()
        for idx in (5, 10, 15):
            objax_save_var_collection(os.path.join(self.logdir, DIR_NAME, FILE_MATCH % idx), sample(idx))

    def test_objax_writes_the_layout_the_manager_expects(self):
        self.assertEqual(["0000000005.npz", "0000000010.npz", "0000000015.npz"], self.ckpt_files())
        with np.load(os.path.join(self.logdir, DIR_NAME, "0000000015.npz")) as data:
            self.assertEqual(sorted(["names"] + [str(i) for i in range(len(sample(15)))]), sorted(data.files))

    def test_the_manager_restores_the_latest_bit_exact_and_reports_index_15(self):
        expected = sample(15)
        with Manager(self.logdir) as m, zeros_like(LIB, expected) as v:
            self.assertEqual([5, 10, 15], m.list())
            self.assertEqual(15, m.restore(v))
            self.assertSameArrays(expected, v.to_dict(), "restored into a collection")

    def test_the_manager_reads_the_latest_as_a_whole_collection(self):
        with Manager(self.logdir) as m:
            v, idx = m.read()
            with v:
                self.assertEqual(15, idx)
                self.assertSameArrays(sample(15), v.to_dict(), "ckpt_manager_read")

    def test_the_manager_restores_an_older_index_on_request(self):
        with Manager(self.logdir) as m, zeros_like(LIB, sample(10)) as v:
            self.assertEqual(10, m.restore(v, 10))
            self.assertSameArrays(sample(10), v.to_dict(), "checkpoint 10")

    def test_objax_leftover_tmp_files_are_neither_checkpoints_nor_removed(self):
        # objax never removes the "<name>.tmp" of a save that crashed; ckpt does not take it for a checkpoint,
        # and does not delete a file whose pattern is not its own.
        leftover = os.path.join(self.logdir, DIR_NAME, FILE_MATCH % 20 + ".tmp")
        with open(leftover, "wb") as f:
            f.write(b"half a save")
        with Manager(self.logdir) as m, zeros_like(LIB, sample(15)) as v:
            self.assertEqual([5, 10, 15], m.list())
            self.assertEqual(15, m.restore(v))
        self.assertTrue(os.path.exists(leftover))


# ---------------------------------------------------------------------------------------- (b) ckpt -> objax

class CkptWritesObjaxResumes(Base):
    def check_objax_resumes(self, layout=None, flags=0):
        with Manager(self.logdir, flags=flags, queue_depth=2, layout=layout) as m:
            for idx in (1, 2, 3):
                m.save(sample(idx), idx)
            m.wait()
            paths = {idx: m.path(idx) for idx in (1, 2, 3)}
        names = list(sample(3))
        idx, path, arrays = objax_restore(self.logdir, names)
        self.assertEqual(3, idx)
        self.assertEqual(paths[3], path)
        self.assertSameArrays(sample(3), arrays, "objax's restore")
        for p in paths.values():
            self.assertEqual(objax_checkpoint_idx(p), LIB.c.ckpt_checkpoint_idx(os.fsencode(p)))
        with np.load(path) as data:
            # Every manager save records its index, time and version in one more member, which objax's
            # restore above ignores.
            self.assertIn(METADATA, data.files)
            record = json.loads(str(data[METADATA]))
            self.assertEqual("3", record["metadata"]["ckpt.index"])
            return sorted(f for f in data.files if f != METADATA)

    def test_objax_resumes_from_the_default_plain_layout(self):
        files = self.check_objax_resumes()
        self.assertEqual(sorted(sample(3)), files)

    def test_objax_resumes_from_the_objax_layout(self):
        files = self.check_objax_resumes(layout=LAYOUT_OBJAX)
        self.assertEqual(sorted(["names"] + [str(i) for i in range(len(sample(3)))]), files)
        with np.load(os.path.join(self.logdir, DIR_NAME, FILE_MATCH % 3)) as data:
            self.assertEqual(list(sample(3)), list(data["names"]))
            self.assertEqual("U", data["names"].dtype.kind)

    def test_objax_resumes_from_asynchronous_saves(self):
        files = self.check_objax_resumes(layout=LAYOUT_OBJAX, flags=MANAGER_ASYNC)
        self.assertIn("names", files)

    def test_the_explicit_plain_layout_is_what_np_savez_writes(self):
        files = self.check_objax_resumes(layout=LAYOUT_PLAIN)
        self.assertEqual(sorted(sample(3)), files)

    def test_objax_finds_nothing_before_the_first_save(self):
        with Manager(self.logdir):
            pass
        self.assertEqual((0, "", None), objax_restore(self.logdir, list(sample(1))))


# ------------------------------------------------------------------------------ (c) retention by number

class RetentionByNumber(Base):
    def test_keep_2_with_9_10_100_keeps_10_and_100(self):
        with Manager(self.logdir, keep=2) as m:
            for idx in (9, 10, 100):
                m.save(sample(idx), idx)
            self.assertEqual([10, 100], m.list())
        self.assertEqual(["0000000010.npz", "0000000100.npz"], self.ckpt_files())
        idx, _, arrays = objax_restore(self.logdir, list(sample(100)))
        self.assertEqual(100, idx)
        self.assertSameArrays(sample(100), arrays, "objax's restore after retention")

    def test_keep_2_past_ten_digits_keeps_the_two_largest_numbers(self):
        indices = (9999999999, 10000000000, 10000000001)
        with Manager(self.logdir, keep=2) as m:
            for idx in indices:
                m.save(sample(idx), idx)
            self.assertEqual([10000000000, 10000000001], m.list())
        self.assertEqual(["10000000000.npz", "10000000001.npz"], self.ckpt_files())
        # objax's sort of the same names as strings would have deleted 10000000000 and kept 9999999999.
        names = [FILE_MATCH % i for i in indices]
        self.assertEqual(["10000000000.npz"], objax_files_deleted_by_retention(names, 2))

    def test_asynchronous_saves_apply_the_same_retention(self):
        with Manager(self.logdir, keep=2, flags=MANAGER_ASYNC, queue_depth=2) as m:
            for idx in (9, 10, 100):
                m.save(sample(idx), idx)
            m.wait()
            self.assertEqual([10, 100], m.list())
        self.assertEqual(["0000000010.npz", "0000000100.npz"], self.ckpt_files())


def main():
    def loaded(lib):
        global LIB
        LIB = lib
        return "numpy %s (%s), ckpt %s" % (np.__version__, sys.executable, lib.version())
    return ckpt_ctypes.run_tests(sys.argv, loaded)


if __name__ == "__main__":
    sys.exit(main())
