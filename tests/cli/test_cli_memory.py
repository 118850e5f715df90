# SPDX-License-Identifier: Apache-2.0
"""Peak memory of `ckpt verify`, `diff`, `stats` and `report` on large arrays: arrays are read in pieces (ckpt_reader_read_range), so the
program's peak RSS stays within 64 MiB of what `ckpt verify` of a tiny file takes, stored and deflated alike.

The inputs (one 512 MiB stored array, one 256 MiB deflated array of compressible data) are made with numpy in a
temporary directory; each run's peak RSS is the child's ru_maxrss from os.wait4.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from thread_world import THREAD_WORLD

CLI = os.environ["CKPT_CLI"]
MIB = 1 << 20
MAKE = """if True:
    import sys
    import numpy as np
    tiny, stored, deflated = sys.argv[1:]
    np.savez(tiny, x=np.arange(4, dtype=np.float32))
    np.savez(stored, big=np.ones(512 << 18, np.float32))
    np.savez_compressed(deflated, big=np.tile(np.arange(1024, dtype=np.int64), (256 << 20) // 8 // 1024))
"""


# Two 20 MiB arrays (three pieces each) with one difference in each piece, the first stored, the second deflated;
# prints what numpy says of them. In a child, as MAKE.
DIFFERING = """if True:
    import json, sys
    import numpy as np
    a = np.arange(5 << 20, dtype=np.float32)
    b = a.copy()
    b[[7, (2 << 20) + 3, (5 << 20) - 1]] += [1.0, 2.5, -4.0]
    np.savez(sys.argv[1], x=a)
    np.savez_compressed(sys.argv[2], x=b)
    print(json.dumps([int(np.count_nonzero(a != b)), float(np.max(np.abs(b.astype(np.float64) - a)))]))
"""


def peak_rss(*args):
    """Runs the program; returns its exit status and peak resident set size in bytes."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:  # AddressSanitizer's quarantine of freed memory (256 MiB) is not the program's peak
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=8"
    p = subprocess.Popen([CLI, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    p.stderr.close()
    return p.returncode, usage.ru_maxrss * 1024, err


# A sharded step of two ranks (threads over a small comm) whose one variable is two 128 MiB row pieces, plus a
# small whole one; in a child with the ckpt package, as MAKE.
STEP = """
import sys, threading
import numpy as np
import ckpt
""" + THREAD_WORLD + """
logdir = sys.argv[1]
world = World(2)
def rank(r):
    rows = np.full((1024, 32768), r + 1, np.float32)  # 128 MiB
    with ckpt.Manager(logdir, comm=Comm(world, r)) as m:
        m.save({"emb": ckpt.Rows(rows, 1024 * r, 2048), "own_%d" % r: np.arange(3)}, 1)
threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
[t.start() for t in threads]; [t.join() for t in threads]
"""


def flip_middle_byte(path):
    """Flips one bit of the byte in the middle of the file (array data in these files: only a CRC can tell)."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 1]))


def package_env():
    """The environment of a child that imports the ckpt package the tests run against."""
    env = dict(os.environ, PYTHONPATH=os.environ["CKPT_PYTHON_PACKAGE"], CKPT_LIBRARY=os.environ["CKPT_LIBRARY"])
    if os.environ.get("CKPT_TEST_PRELOAD"):  # a sanitizer build's library needs its runtime loaded first
        env["LD_PRELOAD"] = os.environ["CKPT_TEST_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # the interpreter's own allocations are not ckpt's to account for
    return env


class BoundedMemory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.tiny = os.path.join(d, "tiny.npz")
        cls.stored = os.path.join(d, "stored.npz")
        cls.deflated = os.path.join(d, "deflated.npz")
        # In a child: the kernel counts the memory a forked child had before its exec in its peak RSS, so this
        # process stays small.
        subprocess.run([sys.executable, "-c", MAKE, cls.tiny, cls.stored, cls.deflated], check=True)
        with zipfile.ZipFile(cls.deflated) as z:
            assert z.getinfo("big.npy").compress_type == zipfile.ZIP_DEFLATED
        code, cls.base, err = peak_rss("verify", cls.tiny)
        assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_bounded(self, *args):
        code, peak, err = peak_rss(*args)
        self.assertEqual(code, 0, err)
        self.assertLess(peak, self.base + 64 * MIB,
                        "ckpt %s: peak RSS %d MiB, base %d MiB" % (" ".join(args), peak // MIB, self.base // MIB))

    def test_verify_of_a_512_mib_stored_array(self):
        self.assert_bounded("verify", self.stored)

    def test_verify_of_a_256_mib_deflated_array(self):
        self.assert_bounded("verify", self.deflated)

    def test_stats_of_a_512_mib_stored_and_a_256_mib_deflated_array(self):
        self.assert_bounded("stats", self.stored)
        self.assert_bounded("stats", self.deflated)
        out = subprocess.run([CLI, "stats", self.deflated, "--json"], capture_output=True, text=True, check=True)
        big = json.loads(out.stdout)["arrays"][0]
        n = (256 << 20) // 8
        std = ((1024 ** 2 - 1) / 12) ** 0.5  # of 0..1023, each equally often
        self.assertEqual((big["elements"], big["min"], big["max"], big["mean"], big["zeros"]),
                         (n, 0, 1023, 511.5, n // 1024))
        self.assertAlmostEqual(big["std"], std, places=9)

    def test_report_of_a_run_of_512_mib_arrays_and_of_a_256_mib_deflated_array(self):
        page = os.path.join(self.tmp.name, "report.html")
        # Three checkpoints holding the same 512 MiB array, read side by side, and a deflated one alone.
        self.assert_bounded("report", self.stored, self.stored, self.stored, "-o", page)
        self.assert_bounded("report", self.deflated, "-o", page)
        out = subprocess.run([CLI, "report", self.stored, self.stored, "--json"], capture_output=True, text=True,
                             check=True)
        doc = json.loads(out.stdout)
        self.assertEqual(doc["differences"], [{"name": "big", "max_abs": 0, "relative_l2": 0}])
        self.assertEqual(doc["arrays"][0]["histogram"]["counts"][31:33], [0, 512 << 18])  # every one in one bin

    def test_diff_of_a_file_with_itself_stored_and_deflated(self):
        self.assert_bounded("diff", self.stored, self.stored)
        self.assert_bounded("diff", self.deflated, self.deflated)

    def test_diff_counts_differences_across_pieces_as_numpy_does(self):
        a_path, b_path = (os.path.join(self.tmp.name, n) for n in ("a.npz", "b.npz"))
        made = subprocess.run([sys.executable, "-c", DIFFERING, a_path, b_path], check=True, capture_output=True)
        differing, max_abs = json.loads(made.stdout)
        code, peak, err = peak_rss("diff", "--count", a_path, b_path)
        self.assertEqual(code, 1, err)
        self.assertLess(peak, self.base + 64 * MIB)
        out = subprocess.run([CLI, "diff", "--count", "--json", a_path, b_path], capture_output=True, text=True).stdout
        entry = json.loads(out)["arrays"][0]
        self.assertEqual((entry["differing"], entry["max_abs_diff"]), (differing, max_abs))
        self.assertEqual(differing, 3)

    def test_verify_still_finds_a_flipped_byte_in_a_large_array(self):
        bad = os.path.join(self.tmp.name, "bad.npz")
        shutil.copyfile(self.stored, bad)
        flip_middle_byte(bad)
        code, peak, _ = peak_rss("verify", bad)
        self.assertEqual(code, 1)
        self.assertLess(peak, self.base + 64 * MIB)
        p = subprocess.run([CLI, "verify", bad], capture_output=True, text=True)
        self.assertIn("corrupt", p.stdout)
        self.assertIn("CRC-32 mismatch", p.stdout)


    def test_verify_of_a_sharded_step_of_two_128_mib_pieces_and_a_flipped_byte_in_a_shard(self):
        logdir = os.path.join(self.tmp.name, "sharded")
        subprocess.run([sys.executable, "-c", STEP, logdir], check=True, env=package_env())
        step = os.path.join(logdir, "ckpt", "0000000001")
        self.assert_bounded("verify", step)
        shard = os.path.join(step, "shard-00001-of-00002.npz")
        flip_middle_byte(shard)  # in the middle of rank 1's rows, which the manifest cannot tell
        code, peak, _ = peak_rss("verify", step)
        self.assertEqual(code, 1)
        self.assertLess(peak, self.base + 64 * MIB)
        p = subprocess.run([CLI, "verify", step], capture_output=True, text=True)
        self.assertIn("corrupt", p.stdout)
        self.assertIn("shard-00001-of-00002.npz", p.stdout)
        self.assertIn("CRC-32 mismatch", p.stdout)


if __name__ == "__main__":
    unittest.main()
