# SPDX-License-Identifier: Apache-2.0
"""The ckpt program as `cmake --install` lays it out (<stage>/bin/ckpt), driven as a user drives it.

Inputs come from numpy (np.savez, np.savez_compressed), objax's layout (names, 0, 1, ...), ckpt itself (bfloat16,
float8 and metadata through the Python package), a file of 65535 members (zip64 end records), broken files
(truncated, a bit flipped in the data, a damaged CRC, a damaged header, no zip at all, empty), checkpoint manager
directories with stale temporaries and a corrupt newest checkpoint, and a directory held by a running manager.
The tests check exit codes, messages, the --json documents against the schemas of docs/cli.md, values against
numpy, and that no command changes anything it was not asked to.

cli_run.py runs the program (its environment is described there), cli_inputs.py makes the inputs, cli_schema.py
holds the JSON schemas.
"""
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
import zipfile

import numpy as np

from cli_inputs import (BF16_BITS, BF16_VALUES, FLOAT8, FLOAT8_KNOWN, PLAIN, W, json_value, make_inputs,
                        make_sharded_run, same_values)
from cli_run import CLI, VERSION, child_env, run, run_json, snapshot
from cli_schema import check_diff, check_ls, check_show, check_verify

WORK = None  # the module's scratch directory, with the inputs every test reads


def path(*parts):
    return os.path.join(WORK, *parts)


def largest_power_of_two_dividing(n, cap=4096):
    return min(n & -n, cap) if n else cap


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="ckpt-cli-test.")
    make_inputs(WORK)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


# ------------------------------------------------------------------------------------------------- tests

class GeneralBehaviour(unittest.TestCase):
    def test_version_names_the_program_and_the_library(self):
        p = run("--version")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "ckpt %s (library %s)" % (VERSION, VERSION))

    def test_every_command_has_help(self):
        for command, mentions in {"ls": "--verify", "show": "FILE", "verify": "--subdir", "diff": "B",
                                  "cat": "--full", "convert": "--deflate"}.items():
            p = run(command, "--help")
            self.assertEqual(p.returncode, 0, command)
            self.assertIn("Usage:", p.stdout, command)
            self.assertIn(mentions, p.stdout, command)
            self.assertIn("--json" if command not in ("convert",) else "--layout", p.stdout, command)
        p = run("--help")
        self.assertEqual(p.returncode, 0)
        for command in ("ls", "show", "verify", "diff", "cat", "convert"):
            self.assertIn(command, p.stdout)
        self.assertIn("Exit status", p.stdout)

    def test_usage_errors_exit_2(self):
        for args in ([], ["frobnicate"], ["show"], ["show", "a", "b"], ["ls", "--bogus", WORK],
                     ["convert", path("plain.npz"), path("x.npz"), "--deflate=12"],
                     ["convert", path("plain.npz"), path("x.npz"), "--deflate=0"],
                     ["convert", path("plain.npz"), path("x.npz"), "--deflate", "--store"],
                     ["convert", path("plain.npz"), path("x.npz"), "--layout", "zip"]):
            p = run(*args)
            self.assertEqual(p.returncode, 2, "%s: %s" % (args, p.stderr))
            self.assertNotEqual(p.stderr.strip(), "", args)
        self.assertFalse(os.path.exists(path("x.npz")))

    def test_a_missing_file_exits_3_naming_it(self):
        missing = path("no-such.npz")
        for args in (["show", missing], ["cat", missing, "w"], ["diff", missing, path("plain.npz")],
                     ["convert", missing, path("out.npz")], ["ls", path("no-such-dir")]):
            p = run(*args)
            self.assertEqual(p.returncode, 2 if args[0] == "diff" else 3, "%s: %s" % (args, p.stderr))
            self.assertTrue(p.stderr.startswith("ckpt: "), p.stderr)
            self.assertIn("no-such", p.stderr)
            self.assertEqual(p.stdout, "")

    def test_a_broken_file_exits_1_with_the_librarys_message(self):
        p = run("show", path("notzip.npz"))
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"^ckpt: .*notzip\.npz: .*zip")
        p = run("cat", path("bitflip.npz"), "w")
        self.assertEqual(p.returncode, 1)
        self.assertIn("bitflip.npz", p.stderr)
        self.assertIn("CRC", p.stderr)
        p = run("diff", path("plain.npz"), path("bitflip.npz"))
        self.assertEqual((p.returncode, p.stdout), (2, ""))  # diff's trouble is 2, as diff(1)'s and cmp(1)'s
        self.assertIn("bitflip.npz", p.stderr)
        p = run("show", path("object.npz"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("object", p.stderr)

    def test_a_directory_where_a_file_belongs_exits_3(self):
        p = run("show", path("run"))
        self.assertEqual(p.returncode, 3)
        self.assertIn("is a directory", p.stderr)

    def test_nothing_is_changed_by_the_commands_that_only_read(self):
        before = snapshot(WORK)
        files = ["plain.npz", "compressed.npz", "objax.npz", "typed.npz", "numpy_typed.npz", "bitflip.npz",
                 "notzip.npz", os.path.join("run", "ckpt", "0000000004.npz")]
        for f in files:
            run("show", path(f))
            run("show", path(f), "--json")
            run("verify", path(f))
            run("cat", path(f), "w")
            run("diff", path(f), path("plain.npz"))
        for d in ("run", "plainrun", os.path.join("run", "ckpt")):
            run("ls", path(d))
            run("ls", path(d), "--verify", "--json")
            run("verify", path(d))
        self.assertEqual(snapshot(WORK), before)
        self.assertFalse(os.path.exists(path("plainrun", "ckpt", ".ckpt.lock")))


class Show(unittest.TestCase):
    def test_plain_file_from_numpy(self):
        doc = run_json("show", path("plain.npz"))
        check_show(self, doc)
        self.assertEqual(doc["layout"], "plain")
        self.assertEqual(doc["bytes"], os.path.getsize(path("plain.npz")))
        self.assertEqual([a["name"] for a in doc["arrays"]], list(PLAIN))
        with open(path("plain.npz"), "rb") as f:
            data = f.read()
        zf = zipfile.ZipFile(path("plain.npz"))
        for a in doc["arrays"]:
            expected = PLAIN[a["name"]]
            self.assertEqual(a["member"], a["name"] + ".npy")
            self.assertEqual(a["shape"], list(expected.shape))
            self.assertEqual(a["bytes"], expected.nbytes)
            self.assertEqual(a["itemsize"], expected.dtype.itemsize)
            info = zf.getinfo(a["member"])
            self.assertEqual(a["crc32"], info.CRC)
            self.assertEqual(a["stored_bytes"], info.compress_size)
            self.assertEqual(a["compression"], "stored")
            # The data really starts at the offset reported.
            self.assertEqual(data[a["data_offset"]:a["data_offset"] + a["bytes"]], expected.tobytes())
            self.assertEqual(a["alignment"], largest_power_of_two_dividing(a["data_offset"]))
        dtypes = {a["name"]: a["dtype"] for a in doc["arrays"]}
        self.assertEqual(dtypes, {"w": "float32", "b": "int64", "flag": "bool", "s": "unicode", "raw": "bytes",
                                  "z": "complex128", "big": "int32", "empty": "float32", "scalar": "float64",
                                  "nested/name": "uint16"})
        self.assertEqual(doc["metadata"], {})

    def test_human_output_has_a_line_per_array(self):
        p = run("show", path("plain.npz"))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertRegex(lines[0], r"plain\.npz: .* plain layout, 10 arrays$")
        self.assertEqual(lines[1].split(), ["name", "dtype", "shape", "endian", "order", "bytes", "stored",
                                            "compression", "crc32", "offset", "align"])
        row = lines[2].split()
        self.assertEqual(row[:6], ["w", "float32", "(2,", "3)", "little", "C"])
        self.assertIn("unicode<2>", p.stdout)
        self.assertIn("bytes<2>", p.stdout)
        self.assertEqual(lines[-1], "metadata: none")
        exact = run("show", path("plain.npz"), "--bytes").stdout
        self.assertRegex(exact, r"plain\.npz: %d, " % os.path.getsize(path("plain.npz")))

    def test_byte_order_and_memory_order_as_numpy_wrote_them(self):
        c = np.arange(6, dtype=np.float64).reshape(2, 3)
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "orders.npz")
            np.savez(f, big=c.astype(">f8"), fortran=np.asfortranarray(c), both=np.asfortranarray(c.astype(">i4")),
                     flags=np.array([True, False]), text=np.array(["ab"], ">U2"))
            doc = run_json("show", f)
            check_show(self, doc)
            got = {a["name"]: (a["byte_order"], a["fortran_order"]) for a in doc["arrays"]}
            self.assertEqual(got, {"big": (">", False), "fortran": ("<", True), "both": (">", True),
                                   "flags": ("|", False), "text": (">", False)})
            rows = {line.split()[0]: line.split() for line in run("show", f).stdout.splitlines()[2:7]}
            self.assertEqual(rows["big"][1:5], ["float64", "(2,", "3)", "big"])
            self.assertEqual(rows["big"][5], "C")
            self.assertEqual(rows["both"][4:6], ["big", "Fortran"])
            self.assertEqual(rows["fortran"][4:6], ["little", "Fortran"])
            self.assertEqual(rows["flags"][1:5], ["bool", "(2,)", "-", "C"])

    def test_compressed_arrays_have_no_offset(self):
        doc = run_json("show", path("compressed.npz"))
        check_show(self, doc)
        for a in doc["arrays"]:
            self.assertEqual(a["compression"], "deflated")
            self.assertIsNone(a["data_offset"])
            self.assertIsNone(a["alignment"])
        zf = zipfile.ZipFile(path("compressed.npz"))
        self.assertEqual([a["stored_bytes"] for a in doc["arrays"]],
                         [zf.getinfo(a["member"]).compress_size for a in doc["arrays"]])

    def test_objax_layout_names_and_members(self):
        doc = run_json("show", path("objax.npz"))
        check_show(self, doc)
        self.assertEqual(doc["layout"], "objax")
        self.assertEqual([(a["name"], a["member"]) for a in doc["arrays"]], [("net.w", "0.npy"), ("net.b", "1.npy")])
        p = run("show", path("objax.npz"))
        self.assertIn("objax layout", p.stdout)
        self.assertEqual(p.stdout.splitlines()[1].split()[:2], ["name", "member"])

    def test_ckpt_file_with_bfloat16_float8_and_metadata(self):
        doc = run_json("show", path("typed.npz"))
        check_show(self, doc)
        self.assertEqual({a["name"]: a["dtype"] for a in doc["arrays"]},
                         {"w": "bfloat16", "q": "float8_e4m3fn", "scale": "float8_e8m0fnu", "h": "float16"})
        self.assertEqual(doc["metadata"], {"step": "1200", "loss": "0.25", "note": "bf16 weights"})
        for a in doc["arrays"]:  # ckpt aligns every stored array's data to 64 bytes
            self.assertEqual(a["data_offset"] % 64, 0)
            self.assertGreaterEqual(a["alignment"], 64)
        p = run("show", path("typed.npz"))
        self.assertIn("bfloat16", p.stdout)
        self.assertIn("  step = 1200", p.stdout)

    def test_numpy_file_with_the_metadata_member(self):
        doc = run_json("show", path("numpy_typed.npz"))
        self.assertEqual({a["name"]: a["dtype"] for a in doc["arrays"]}, {"w": "bfloat16", "q": "float8_e5m2"})
        self.assertEqual(doc["metadata"], {"step": "7", "by": "numpy"})

    def test_65535_members_with_zip64_end_records(self):
        doc = run_json("show", path("many.npz"))
        self.assertEqual(len(doc["arrays"]), 65535)
        self.assertEqual(doc["arrays"][-1]["name"], "a65534")


class Verify(unittest.TestCase):
    def test_good_files_are_ok(self):
        good = ["plain.npz", "compressed.npz", "objax.npz", "typed.npz", "numpy_typed.npz", "many.npz",
                "patterns.npz"]
        p = run("verify", *[path(f) for f in good])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), len(good) + 1)
        for f, line in zip(good, lines):
            self.assertRegex(line, r"^%s: ok \(\d+ arrays?, " % re.escape(path(f)))
        self.assertEqual(lines[-1], "%d files: %d ok" % (len(good), len(good)))

    def test_each_kind_of_damage_is_named(self):
        cases = {"truncated.npz": "", "bitflip.npz": "CRC", "crc.npz": "CRC", "header.npz": "npy",
                 "notzip.npz": "zip", "empty.npz": ""}
        for f, word in cases.items():
            p = run("verify", path(f))
            self.assertEqual(p.returncode, 1, f)
            not_npz = f == "notzip.npz"  # no zip at all: not a damaged checkpoint, but none
            verdict = "not an npz checkpoint" if not_npz else "corrupt"
            self.assertRegex(p.stdout, r"^%s: %s: \S" % (re.escape(path(f)), verdict))
            self.assertIn(word, p.stdout, f)
            doc = run_json("verify", path(f), status=1)
            check_verify(self, doc)
            entry = doc["files"][0]
            self.assertEqual(entry["verdict"], "not-npz" if not_npz else "corrupt")
            self.assertIn(path(f), entry["error"])  # the library's message names the file
            self.assertEqual(doc["summary"], {"files": 1, "ok": 0, "corrupt": 0 if not_npz else 1, "unsupported": 0,
                                              "unreadable": 0, "not_npz": 1 if not_npz else 0})

    def test_content_ckpt_does_not_read_is_unsupported(self):
        p = run("verify", path("object.npz"))
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stdout, r"^%s: unsupported: .*object" % re.escape(path("object.npz")))
        doc = run_json("verify", path("object.npz"), status=1)
        self.assertEqual(doc["files"][0]["verdict"], "unsupported")
        self.assertEqual(doc["summary"]["unsupported"], 1)

    def test_the_bit_flip_is_found_only_by_reading_the_data(self):
        self.assertEqual(run("show", path("bitflip.npz")).returncode, 0)
        self.assertEqual(run("verify", path("bitflip.npz")).returncode, 1)

    def test_a_logdir_verifies_each_checkpoint(self):
        doc = run_json("verify", path("run"), status=1)
        check_verify(self, doc)
        self.assertEqual(doc["directories"], [{"path": path("run", "ckpt"), "checkpoints": 4, "error": None}])
        verdicts = [(os.path.basename(f["path"]), f["verdict"]) for f in doc["files"]]
        self.assertEqual(verdicts, [("%010d.npz" % k, "ok") for k in (1, 2, 3)] + [("0000000004.npz", "corrupt")])
        self.assertEqual(doc["summary"]["corrupt"], 1)
        self.assertIn("CRC", doc["files"][3]["error"])
        p = run("verify", path("run"))
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout.splitlines()[-1], "4 files: 3 ok, 1 corrupt")
        # The checkpoint directory itself works too, and so does --subdir.
        self.assertEqual(run_json("verify", path("run", "ckpt"), status=1)["summary"]["files"], 4)
        self.assertEqual(run_json("verify", path("run"), "--subdir", "ckpt", status=1)["summary"]["files"], 4)
        self.assertEqual(run("verify", path("plainrun")).returncode, 0)

    def test_a_missing_file_among_others_exits_3(self):
        p = run("verify", path("plain.npz"), path("missing.npz"), path("bitflip.npz"))
        self.assertEqual(p.returncode, 3)
        self.assertIn("%s: unreadable: " % path("missing.npz"), p.stdout)
        doc = run_json("verify", path("plain.npz"), path("missing.npz"), status=3)
        self.assertEqual([f["verdict"] for f in doc["files"]], ["ok", "unreadable"])
        self.assertIsNone(doc["files"][1]["arrays"])


class Ls(unittest.TestCase):
    def test_lists_checkpoints_with_metadata_and_temporaries(self):
        doc = run_json("ls", path("run"))
        check_ls(self, doc)
        self.assertEqual(doc["directory"], path("run", "ckpt"))
        self.assertEqual([c["index"] for c in doc["checkpoints"]], [1, 2, 3, 4])
        self.assertEqual(doc["temporaries"], [".0000000005.npz.tmp-Ab12Cd"])
        for c in doc["checkpoints"]:
            self.assertEqual(c["bytes"], os.path.getsize(c["path"]))
            self.assertEqual(c["arrays"], 1)
            self.assertEqual(c["metadata"]["step"], str(100 * c["index"]))
            self.assertIsNone(c["verdict"])  # not asked to verify
            self.assertIsNone(c["error"])  # the corrupt data of 4 needs --verify to be seen
            mtime = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.stat(c["path"]).st_mtime)))
            self.assertEqual(c["mtime"], mtime)
            # The manager's record of the saving time comes before the user's keys and the file's mtime.
            self.assertEqual((c["saved_at"], c["saved_at_source"]),
                             (c["metadata"]["ckpt.saved_at"], "metadata:ckpt.saved_at"))

    def test_verify_adds_a_verdict_per_checkpoint(self):
        doc = run_json("ls", path("run"), "--verify", status=1)
        check_ls(self, doc)
        self.assertEqual([c["verdict"] for c in doc["checkpoints"]], ["ok", "ok", "ok", "corrupt"])
        self.assertIn("CRC", doc["checkpoints"][3]["error"])
        p = run("ls", path("run"), "--verify")
        self.assertEqual(p.returncode, 1)
        self.assertIn("verify", p.stdout.splitlines()[1].split())
        self.assertIn("0000000004.npz", p.stdout)

    def test_human_output(self):
        p = run("ls", path("run"), env={"TZ": "UTC"})
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "%s: 4 checkpoints" % path("run", "ckpt"))
        self.assertEqual(lines[1].split(), ["index", "size", "saved", "arrays", "metadata"])
        first = lines[2].split()
        self.assertEqual(first[0], "1")
        self.assertIn("step=100", lines[2])
        self.assertIn("loss=1.0", lines[2])
        self.assertNotIn("ckpt.", p.stdout)  # the manager's own keys are no user metadata
        self.assertIn(".0000000005.npz.tmp-Ab12Cd", p.stdout)
        exact = run("ls", path("run"), "--bytes").stdout.splitlines()[2].split()
        self.assertEqual(exact[1], str(os.path.getsize(path("run", "ckpt", "0000000001.npz"))))

    def test_the_checkpoint_directory_itself_and_subdir(self):
        self.assertEqual(run_json("ls", path("run", "ckpt"))["directory"], path("run", "ckpt"))
        self.assertEqual(len(run_json("ls", path("run"), "--subdir", "ckpt")["checkpoints"]), 4)
        self.assertEqual(len(run_json("ls", path("run", "ckpt"), "--subdir", "")["checkpoints"]), 4)
        p = run("ls", path("run"), "--subdir", "nothing-here")
        self.assertEqual(p.returncode, 3)
        self.assertIn("nothing-here", p.stderr)

    def test_checkpoints_written_by_numpy_without_a_manager(self):
        doc = run_json("ls", path("plainrun"), "--verify")
        self.assertEqual([c["verdict"] for c in doc["checkpoints"]], ["ok", "ok"])
        self.assertEqual(doc["checkpoints"][0]["metadata"], {})

    def test_an_empty_directory_has_no_checkpoints(self):
        os.makedirs(path("emptyrun", "ckpt"), exist_ok=True)
        doc = run_json("ls", path("emptyrun"))
        self.assertEqual((doc["checkpoints"], doc["temporaries"]), ([], []))
        self.assertEqual(run("ls", path("emptyrun")).stdout, "%s: 0 checkpoints\n" % path("emptyrun", "ckpt"))
        p = run("verify", path("emptyrun"))  # nothing to verify is no success
        self.assertEqual((p.returncode, p.stdout), (3, "%s: nothing to verify: no checkpoints and no .npz files or "
                                                       "sharded steps in it\n" % path("emptyrun", "ckpt")))


class LockedDirectory(unittest.TestCase):
    def test_ls_and_verify_work_while_a_manager_holds_the_directory(self):
        logdir = path("held")
        holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
            import sys, numpy as np, ckpt
            m = ckpt.Manager(sys.argv[1], keep=0)
            for k in (1, 2):
                m.save({"w": np.full(4, k, np.float32)}, k, metadata={"step": str(k)})
            print("ready", flush=True)
            sys.stdin.read()
            m.close()
        """), logdir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env())
        try:
            self.assertEqual(holder.stdout.readline().strip(), "ready")
            # The lock really is held: another manager's save is refused.
            busy = subprocess.run([sys.executable, "-c", textwrap.dedent("""
                import sys, ckpt, numpy as np
                try:
                    ckpt.Manager(sys.argv[1]).save({"w": np.zeros(1, np.float32)}, 9)
                except ckpt.BusyError as e:
                    print("busy:", e)
            """), logdir], capture_output=True, text=True, env=child_env(), timeout=60)
            self.assertIn("busy:", busy.stdout, busy.stderr)
            before = snapshot(logdir)
            doc = run_json("ls", logdir, "--verify")
            self.assertEqual([(c["index"], c["verdict"]) for c in doc["checkpoints"]], [(1, "ok"), (2, "ok")])
            p = run("verify", logdir)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(snapshot(logdir), before)
        finally:
            holder.stdin.close()
            holder.wait(timeout=60)
        self.assertEqual(holder.returncode, 0)


class ShardedSteps(unittest.TestCase):
    """Directories of shards that managers with a communicator save, beside file checkpoints."""

    @classmethod
    def setUpClass(cls):
        cls.logdir = path("sharded")
        make_sharded_run(cls.logdir, path())

    def test_ls_lists_steps_and_files_together(self):
        doc = run_json("ls", self.logdir, "--verify")
        check_ls(self, doc)
        got = [(c["index"], c["sharded"], c["arrays"], c["verdict"]) for c in doc["checkpoints"]]
        self.assertEqual(got, [(1, True, 3, "ok"), (2, True, 3, "ok"), (3, False, 1, "ok")])
        self.assertEqual(doc["checkpoints"][1]["metadata"]["ckpt.metric.loss"], "0.5")
        self.assertTrue(doc["checkpoints"][0]["path"].endswith("/ckpt/0000000001"))

    def test_show_describes_a_step(self):
        step = os.path.join(self.logdir, "ckpt", "0000000002")
        doc = run_json("show", step)
        check_show(self, doc)
        self.assertEqual((doc["step"], doc["world_size"], doc["layout"]), (2, 2, "sharded"))
        self.assertEqual(doc["shards"], ["shard-00000-of-00002.npz", "shard-00001-of-00002.npz"])
        emb = [a for a in doc["arrays"] if a["name"] == "emb"][0]
        self.assertEqual((emb["shape"], emb["pieces"], emb["bytes"]), ([4, 3], 2, 48))
        p = run("show", step)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("sharded step 2 of 2 ranks, 3 variables", p.stdout)
        self.assertIn("rows in 2", p.stdout)

    def test_verify_finds_a_corrupt_shard(self):
        work = path("sharded-corrupt")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(self.logdir, work)
        shard = os.path.join(work, "ckpt", "0000000001", "shard-00001-of-00002.npz")
        with open(shard, "r+b") as f:
            f.truncate(60)
        doc = run_json("verify", work, status=1)
        check_verify(self, doc)
        verdicts = [(os.path.basename(f["path"]), f["verdict"]) for f in doc["files"]]
        self.assertEqual(verdicts, [("0000000001", "corrupt"), ("0000000002", "ok"), ("0000000003.npz", "ok")])
        self.assertIn("shard-00001-of-00002.npz", doc["files"][0]["error"])
        p = run("verify", os.path.join(work, "ckpt", "0000000002"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok (sharded step, 3 arrays", p.stdout)


class Cat(unittest.TestCase):
    def cat(self, filename, name, *flags):
        p = run("cat", path(filename), name, *flags)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_prints_as_numpy_does(self):
        cases = {
            "ints2d": np.arange(6).reshape(2, 3), "ints3d": np.arange(24).reshape(2, 3, 4),
            "summarised": np.arange(2000).reshape(50, 40), "summarised3d": np.arange(3000).reshape(10, 10, 30),
            "wrapped": np.arange(1000), "floats": np.arange(6, dtype=np.float32) / 4,
            "sevenths": np.arange(1000) / 7, "scientific": np.linspace(0, 1, 2001), "tiny": np.array([1e-10, 1.0]),
            "special": np.array([0.25, np.nan, 10.0, -np.inf]), "negzero": np.array([-1.5, 2.0, -0.0]),
            "random": np.random.RandomState(0).randn(7, 5), "f32": np.random.RandomState(1).randn(60, 30).astype(np.float32),
            "half": np.array([0.1, 65504, np.nan], np.float16), "bools": np.array([True, False, True]),
            "text": np.array(["ab", "c", "it's", 'say "hi"', "both ' \"", "tab\tnew\nline\\"]),
            "bytes": np.array([b"ab", b"c\xff", b"it's", b"\t\n\x00x"]),
            "complex": np.array([1 + 2j, -0.5 - 1.25j]), "complexbig": (np.arange(2000) * (1 + 1j)).reshape(40, 50),
            "u8": np.arange(300).astype(np.uint8), "empty": np.zeros((0, 3)),
            "scalar": np.array(3.5), "scalar1": np.array(1.0), "scalartiny": np.array(1e-10),
            "scalarc": np.array(1 + 2j), "scalars": np.array("hi"), "scalari": np.array(-7, np.int16),
        }
        np.savez(path("cases.npz"), **cases)
        for name, value in cases.items():
            self.assertEqual(self.cat("cases.npz", name), str(value) + "\n", name)

    def test_full_prints_every_value(self):
        out = self.cat("plain.npz", "big", "--full")
        self.assertNotIn("...", out)
        self.assertEqual([int(v) for v in out.replace("[", " ").replace("]", " ").split()], list(range(2000)))
        self.assertIn("...", self.cat("plain.npz", "big"))

    def test_json_values_as_nested_lists(self):
        doc = json.loads(self.cat("plain.npz", "w", "--json"))
        self.assertEqual(set(doc), {"name", "dtype", "itemsize", "shape", "values"})
        self.assertEqual((doc["name"], doc["dtype"], doc["itemsize"], doc["shape"]), ("w", "float32", 4, [2, 3]))
        self.assertEqual(doc["values"], W.tolist())
        big = json.loads(self.cat("plain.npz", "big", "--json"))
        self.assertEqual(big["values"], PLAIN["big"].tolist())  # --json is never summarised
        self.assertEqual(json.loads(self.cat("plain.npz", "scalar", "--json"))["values"], 3.5)
        self.assertEqual(json.loads(self.cat("plain.npz", "z", "--json"))["values"], [[1.0, 2.0], [-0.5, -1.0]])
        self.assertEqual(json.loads(self.cat("plain.npz", "s", "--json"))["values"], ["ab", "c"])
        self.assertEqual(json.loads(self.cat("plain.npz", "flag", "--json"))["values"], [True, False])
        self.assertEqual(json.loads(self.cat("plain.npz", "raw", "--json"))["values"], ["x", "yz"])
        self.assertEqual(json.loads(self.cat("plain.npz", "empty", "--json"))["values"], [])
        self.assertEqual(json.loads(self.cat("nan_a.npz", "v", "--json"))["values"], ["nan", 1.0, "inf", 0.0])

    def test_bfloat16_and_float8_values_are_numbers(self):
        doc = json.loads(self.cat("typed.npz", "w", "--json"))
        self.assertEqual(doc["dtype"], "bfloat16")
        self.assertTrue(same_values(doc["values"], BF16_VALUES), doc["values"])
        self.assertEqual(self.cat("typed.npz", "w"), "[1.   3.14  nan -inf 0.1 ]\n")
        self.assertEqual(json.loads(self.cat("typed.npz", "q", "--json"))["values"], [448.0, "nan", 2.0 ** -9, 1.0])
        self.assertEqual(json.loads(self.cat("typed.npz", "scale", "--json"))["values"], [1.0, 2.0, 2.0 ** -127])

    def test_every_float16_and_bfloat16_bit_pattern_converts_exactly(self):
        bits = np.arange(65536, dtype=np.uint16)
        half = json.loads(self.cat("patterns.npz", "f16", "--json"))
        self.assertEqual(half["dtype"], "float16")
        self.assertTrue(same_values(half["values"], bits.view(np.float16).astype(np.float64).tolist()))
        bf = json.loads(self.cat("patterns.npz", "bf16", "--json"))
        self.assertEqual(bf["dtype"], "bfloat16")
        with np.errstate(invalid="ignore"):  # signalling NaN patterns become quiet ones: both are "nan"
            expected = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64).tolist()
        self.assertTrue(same_values(bf["values"], expected))

    def test_every_float8_bit_pattern_converts_exactly(self):
        for name, decode in FLOAT8.items():
            for bits, value in FLOAT8_KNOWN[name].items():  # the reference itself, against the specifications
                self.assertTrue(same_values([json_value(decode(bits))], [value]), (name, bits))
            doc = json.loads(self.cat("patterns.npz", name, "--json"))
            self.assertEqual(doc["dtype"], name)
            self.assertTrue(same_values(doc["values"], [decode(b) for b in range(256)]), name)

    def test_an_unknown_name_lists_the_arrays(self):
        p = run("cat", path("objax.npz"), "nope")
        self.assertEqual(p.returncode, 3)
        self.assertIn("no array 'nope'", p.stderr)
        self.assertIn("net.w, net.b", p.stderr)


class Diff(unittest.TestCase):
    def test_a_file_equals_itself_and_its_other_layouts(self):
        for f in ("plain.npz", "typed.npz", "objax.npz"):
            p = run("diff", path(f), path(f))
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertTrue(p.stdout.splitlines()[-1].startswith("equal: "), p.stdout)
        self.assertEqual(run("diff", path("plain.npz"), path("compressed.npz")).returncode, 0)
        doc = run_json("diff", path("typed.npz"), path("typed.npz"))
        check_diff(self, doc)
        self.assertTrue(doc["equal"])
        self.assertEqual({a["status"] for a in doc["arrays"]}, {"equal"})

    def test_every_kind_of_difference(self):
        doc = run_json("diff", path("diff_a.npz"), path("diff_b.npz"), status=1)
        check_diff(self, doc)
        self.assertFalse(doc["equal"])
        by_name = {a["name"]: a for a in doc["arrays"]}
        self.assertEqual({n: a["status"] for n, a in by_name.items()},
                         {"w": "values_changed", "n": "equal", "bf": "values_changed", "i": "equal",
                          "same": "equal", "x": "dtype_changed", "y": "shape_changed", "gone": "only_in_a",
                          "new": "only_in_b"})
        w = by_name["w"]
        self.assertEqual((w["elements"], w["differing"], w["nan_mismatches"]), (4, 1, 0))
        self.assertEqual((w["max_abs_diff"], w["max_rel_diff"]), (0.5, 0.25))  # 2 -> 2.5
        bf = by_name["bf"]  # bfloat16 compared as numbers: 2 -> 2.5, and two NaNs of different bits are equal
        self.assertEqual((bf["a"]["dtype"], bf["elements"], bf["differing"]), ("bfloat16", 3, 1))
        self.assertEqual((bf["max_abs_diff"], bf["max_rel_diff"]), (0.5, 0.25))
        self.assertEqual((by_name["x"]["a"]["dtype"], by_name["x"]["b"]["dtype"]), ("float32", "float64"))
        self.assertEqual((by_name["y"]["a"]["shape"], by_name["y"]["b"]["shape"]), ([2, 3], [3, 2]))
        self.assertIsNone(by_name["gone"]["b"])
        self.assertIsNone(by_name["new"]["a"])
        self.assertIsNone(by_name["x"]["differing"])
        self.assertEqual(doc["metadata"], [])

    def test_human_output(self):
        p = run("diff", path("diff_a.npz"), path("diff_b.npz"))
        self.assertEqual(p.returncode, 1)
        out = p.stdout
        self.assertIn("w: 1 of 4 elements differs, max abs diff 0.5 at w[1], max rel diff 0.25", out)
        self.assertIn("bf: 1 of 3 elements differs, max abs diff 0.5 at bf[1], max rel diff 0.25", out)
        self.assertIn("x: dtype float32 -> float64", out)
        self.assertIn("y: shape (2, 3) -> (3, 2)", out)
        self.assertIn("only in A: gone float64 (2,)", out)
        self.assertIn("only in B: new float64 (2,)", out)
        self.assertEqual(out.splitlines()[-1], "different: 6 of 9 arrays")

    def test_nan_equals_nan_and_zero_equals_minus_zero(self):
        self.assertEqual(run("diff", path("nan_a.npz"), path("nan_b.npz")).returncode, 0)
        doc = run_json("diff", path("nan_a.npz"), path("nan_c.npz"), status=1)
        v = doc["arrays"][0]
        self.assertEqual((v["differing"], v["nan_mismatches"]), (1, 1))
        self.assertIsNone(v["max_abs_diff"])  # the only difference is a NaN against a number
        self.assertIn("1 NaN where the other is not", run("diff", path("nan_a.npz"), path("nan_c.npz")).stdout)

    def test_integer_differences_are_exact(self):
        doc = run_json("diff", path("int_a.npz"), path("int_b.npz"), status=1)
        v = doc["arrays"][0]
        self.assertEqual(v["differing"], 2)
        self.assertEqual(v["max_abs_diff"], float(2 ** 64 - 1))
        self.assertEqual(v["max_rel_diff"], "inf")  # 0 -> 3, relative to the zero in A

    def test_metadata_differences(self):
        doc = run_json("diff", path("typed.npz"), path("numpy_typed.npz"), status=1)
        meta = {m["key"]: (m["status"], m["a"], m["b"]) for m in doc["metadata"]}
        self.assertEqual(meta, {"step": ("changed", "1200", "7"), "loss": ("only_in_a", "0.25", None),
                                "note": ("only_in_a", "bf16 weights", None), "by": ("only_in_b", None, "numpy")})
        out = run("diff", path("typed.npz"), path("numpy_typed.npz")).stdout
        self.assertIn("metadata step: 1200 -> 7", out)
        self.assertIn("metadata only in B: by = numpy", out)


class DiffOptions(unittest.TestCase):
    """diff's exit status (0 equal, 1 different, 2 trouble), --atol/--rtol against numpy.isclose, --count."""

    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(7)
        cls.a = rng.standard_normal(1000)
        cls.b = cls.a + rng.standard_normal(1000) * 1e-3
        cls.a[:3] = [np.nan, np.inf, 0.0]
        cls.b[:3] = [np.nan, np.inf, -0.0]
        np.savez(path("tol_a.npz"), v=cls.a, i=np.arange(10, dtype=np.int64))
        np.savez(path("tol_b.npz"), v=cls.b, i=np.arange(10, dtype=np.int64) + np.array([0] * 9 + [3]))
        big_a = np.zeros(3 << 20, dtype=np.float32)  # 12 MiB: two 8 MiB pieces
        big_b = big_a.copy()
        big_b[0], big_b[-1], big_b[5] = 1.0, 4.0, -2.0
        np.savez(path("big_a.npz"), x=big_a)
        np.savez(path("big_b.npz"), x=big_b)
        cls.big_a, cls.big_b = big_a, big_b

    def test_exit_codes(self):
        self.assertEqual(run("diff", path("tol_a.npz"), path("tol_a.npz")).returncode, 0)
        self.assertEqual(run("diff", path("tol_a.npz"), path("tol_b.npz")).returncode, 1)
        for args in ([path("tol_a.npz"), path("no-such.npz")], [path("notzip.npz"), path("tol_a.npz")],
                     [path("plain.npz"), path("bitflip.npz")], [path("tol_a.npz")],
                     [path("tol_a.npz"), path("tol_b.npz"), "--atol", "-1"],
                     [path("tol_a.npz"), path("tol_b.npz"), "--rtol", "x"],
                     [path("tol_a.npz"), path("tol_b.npz"), "--no-such-option"]):
            p = run("diff", *args)
            self.assertEqual(p.returncode, 2, "%s: %s" % (args, p.stderr))
            self.assertTrue(p.stderr.startswith("ckpt: "), p.stderr)
        p = run("diff", path("tol_a.npz"), path("no-such.npz"), "--json")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(json.loads(p.stdout)["error"]["name"], "CKPT_ENOTFOUND")
        self.assertIn("no-such.npz", p.stderr)
        p = run("diff", path("notzip.npz"), path("tol_a.npz"), "--json")
        self.assertEqual((p.returncode, json.loads(p.stdout)["error"]["name"]), (2, "CKPT_EFORMAT"))

    def test_tolerances_follow_numpy_isclose(self):
        for atol, rtol in ((0, 0), (1e-3, 0), (0, 1e-3), (5e-4, 5e-4), (1e-2, 0), (1, 1)):
            close = np.isclose(self.a, self.b, atol=atol, rtol=rtol, equal_nan=True)
            ints_close = np.isclose(np.arange(10), np.arange(10) + np.array([0] * 9 + [3]), atol=atol, rtol=rtol).all()
            doc = run_json("diff", path("tol_a.npz"), path("tol_b.npz"), "--count", "--atol", atol, "--rtol", rtol,
                           status=0 if close.all() and ints_close else 1)
            check_diff(self, doc)
            v = {a["name"]: a for a in doc["arrays"]}["v"]
            self.assertEqual(v["differing"], int((~close).sum()), (atol, rtol))
            if (~close).any():
                with np.errstate(invalid="ignore"):  # inf - inf, an equal pair
                    expected = float(np.abs(self.a - self.b)[~close].max())
                self.assertAlmostEqual(v["max_abs_diff"], expected, places=12)
                self.assertEqual(v["status"], "values_changed")
            else:
                self.assertEqual(v["status"], "equal")
        i = {a["name"]: a for a in run_json("diff", path("tol_a.npz"), path("tol_b.npz"), status=1)["arrays"]}["i"]
        self.assertEqual((i["differing"], i["max_abs_diff"]), (1, 3.0))  # integers exact without tolerances
        doc = run_json("diff", path("tol_a.npz"), path("tol_b.npz"), "--atol", 3, "--rtol", 1)
        self.assertTrue(doc["equal"])  # and within them, as doubles: 9 -> 12 is within 3
        self.assertEqual(run("diff", path("tol_a.npz"), path("tol_b.npz"), "--atol", 2.9).returncode, 1)

    def test_count_matches_numpy(self):
        doc = run_json("diff", path("big_a.npz"), path("big_b.npz"), "--count", status=1)
        x = doc["arrays"][0]
        d = self.big_a != self.big_b
        self.assertEqual((x["elements"], x["differing"]), (self.big_a.size, int(d.sum())))
        self.assertEqual(x["max_abs_diff"], float(np.abs(self.big_b - self.big_a).max()))
        # Where the largest difference is, across pieces of 8 MiB: numpy's argmax of it.
        where = int(np.argmax(np.abs(self.big_b.astype(np.float64) - self.big_a)))
        self.assertEqual(x["max_abs_diff_index"], [where])
        self.assertIn("x: 3 of 3145728 elements differ, max abs diff 4 at x[%d]," % where,
                      run("diff", path("big_a.npz"), path("big_b.npz"), "--count").stdout)

    def test_stops_at_the_first_differing_piece_without_count(self):
        doc = run_json("diff", path("big_a.npz"), path("big_b.npz"), status=1)
        check_diff(self, doc)
        x = doc["arrays"][0]
        self.assertEqual((x["status"], x["elements"]), ("values_changed", self.big_a.size))
        for key in ("differing", "nan_mismatches", "max_abs_diff", "max_rel_diff"):
            self.assertIsNone(x[key], key)
        p = run("diff", path("big_a.npz"), path("big_b.npz"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("x: values differ (stopped at the first difference; --count counts them)", p.stdout)
        self.assertNotIn("of 3145728", p.stdout)
        self.assertEqual(p.stdout.splitlines()[-1], "different: 1 of 1 array")


class Convert(unittest.TestCase):
    def test_to_objax_and_back_keeps_everything(self):
        out = path("conv_objax.npz")
        p = run("convert", path("typed.npz"), out, "--layout", "objax")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = run_json("show", out)
        self.assertEqual(doc["layout"], "objax")
        self.assertEqual(doc["metadata"], {"step": "1200", "loss": "0.25", "note": "bf16 weights"})
        self.assertEqual([a["dtype"] for a in doc["arrays"]], ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "float16"])
        self.assertEqual(run("diff", path("typed.npz"), out).returncode, 0)
        with np.load(out) as z:  # numpy reads it as objax wrote it
            self.assertEqual(z["names"].tolist(), ["w", "q", "scale", "h"])
            self.assertEqual(z["0"].view(np.uint16).tolist(), BF16_BITS.tolist())
        back = path("conv_plain.npz")
        self.assertEqual(run("convert", out, back, "--layout", "plain").returncode, 0)
        self.assertEqual(run_json("show", back)["layout"], "plain")
        self.assertEqual(run("diff", path("typed.npz"), back).returncode, 0)

    def test_compression(self):
        deflated = path("conv_deflated.npz")
        self.assertEqual(run("convert", path("plain.npz"), deflated, "--deflate=9").returncode, 0)
        doc = run_json("show", deflated)
        self.assertEqual({a["compression"] for a in doc["arrays"]}, {"deflated"})
        self.assertEqual(run("diff", path("plain.npz"), deflated).returncode, 0)
        with np.load(deflated) as z:
            for name, value in PLAIN.items():
                np.testing.assert_array_equal(z[name], value)
        # What no option changes stays: a deflated input stays deflated, a layout stays.
        kept = path("conv_kept.npz")
        self.assertEqual(run("convert", path("compressed.npz"), kept).returncode, 0)
        self.assertEqual({a["compression"] for a in run_json("show", kept)["arrays"]}, {"deflated"})
        stored = path("conv_stored.npz")
        self.assertEqual(run("convert", deflated, stored, "--store").returncode, 0)
        self.assertEqual({a["compression"] for a in run_json("show", stored)["arrays"]}, {"stored"})
        self.assertEqual(run("convert", path("objax.npz"), kept, "--deflate").returncode, 0)
        self.assertEqual(run_json("show", kept)["layout"], "objax")

    def test_in_place(self):
        target = path("conv_inplace.npz")
        shutil.copy(path("plain.npz"), target)
        self.assertEqual(run("convert", target, target, "--deflate").returncode, 0)
        self.assertEqual(run("diff", path("plain.npz"), target).returncode, 0)
        self.assertEqual({a["compression"] for a in run_json("show", target)["arrays"]}, {"deflated"})

    def test_a_failure_leaves_the_target_as_it_was(self):
        target = path("conv_target.npz")
        shutil.copy(path("objax.npz"), target)
        before = snapshot(WORK)
        p = run("convert", path("bitflip.npz"), target)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bitflip.npz", p.stderr)
        self.assertEqual(snapshot(WORK), before)  # the target untouched, no temporary left beside it
        p = run("convert", path("plain.npz"), path("no-such-dir", "out.npz"))
        self.assertEqual(p.returncode, 3)
        self.assertIn("no-such-dir", p.stderr)


class Safetensors(unittest.TestCase):
    """Every command takes safetensors files, with the output and exit codes it gives for .npz."""

    # PLAIN less what safetensors has no type for (strings, bytes, complex128)
    NUMERIC = {k: v for k, v in PLAIN.items() if k not in ("s", "raw", "z")}

    @classmethod
    def setUpClass(cls):
        np.savez(path("numeric.npz"), **cls.NUMERIC)

    def converted(self, name, source="typed.npz"):
        out = path(name)
        p = run("convert", path(source), out)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def test_convert_to_safetensors_and_back_keeps_arrays_types_and_metadata(self):
        st = self.converted("conv.safetensors")
        with open(st, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        self.assertEqual(header["__metadata__"], {"step": "1200", "loss": "0.25", "note": "bf16 weights"})
        self.assertEqual({k: v["dtype"] for k, v in header.items() if k != "__metadata__"},
                         {"w": "BF16", "q": "F8_E4M3", "scale": "F8_E8M0", "h": "F16"})
        doc = run_json("show", st)
        check_show(self, doc)
        self.assertEqual(doc["format"], "safetensors")
        self.assertEqual([a["dtype"] for a in doc["arrays"]], ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "float16"])
        self.assertEqual({a["crc32"] for a in doc["arrays"]}, {None})
        for a in doc["arrays"]:
            self.assertEqual(a["data_offset"] % a["itemsize"], 0, a["name"])
        self.assertRegex(run("show", st).stdout.splitlines()[0], r": \d+ B, safetensors, 4 arrays$")
        self.assertEqual(run("diff", path("typed.npz"), st).returncode, 0)  # across formats, by value
        back = path("conv_back.npz")
        self.assertEqual(run("convert", st, back).returncode, 0)
        self.assertEqual(run_json("show", back)["format"], "npz")
        self.assertEqual(run("diff", path("typed.npz"), back).returncode, 0)
        with np.load(back) as z:
            self.assertEqual(z["w"].view(np.uint16).tolist(), BF16_BITS.tolist())

    def test_a_deflated_or_objax_input_converts_to_safetensors_and_asking_for_either_is_refused(self):
        np.savez_compressed(path("numeric_compressed.npz"), **self.NUMERIC)
        self.converted("from_compressed.safetensors", "numeric_compressed.npz")
        self.assertEqual(run("diff", path("numeric.npz"), path("from_compressed.safetensors")).returncode, 0)
        for option in ("--deflate", "--layout=objax"):
            p = run("convert", path("numeric.npz"), path("refused.safetensors"), option)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertFalse(os.path.exists(path("refused.safetensors")))

    def test_cat_stats_verify_and_ls_read_safetensors(self):
        st = self.converted("numeric.safetensors", "numeric.npz")
        for name, value in self.NUMERIC.items():
            doc = run_json("cat", st, name)
            self.assertEqual(doc["values"], value.tolist(), name)
        self.assertEqual(run("stats", st).returncode, 0)
        p = run("verify", st)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertRegex(p.stdout, r"^%s: ok \(%d arrays, " % (re.escape(st), len(self.NUMERIC)))
        folder = path("st_folder")
        os.makedirs(folder, exist_ok=True)
        shutil.copy(st, os.path.join(folder, "a.safetensors"))
        self.assertIn("a.safetensors", run("ls", folder).stdout)

    def test_damaged_safetensors_files_are_corrupt_naming_the_problem(self):
        st = self.converted("damaged.safetensors", "numeric.npz")
        with open(st, "rb") as f:
            good = f.read()
        cases = {"truncated": good[:-1], "appended": good + b"x", "header": good[:8] + b"[" + good[9:],
                 "length": (10 ** 9).to_bytes(8, "little") + good[8:]}
        for kind, data in cases.items():
            bad = path("bad_%s.safetensors" % kind)
            with open(bad, "wb") as f:
                f.write(data)
            doc = run_json("verify", bad, status=1)
            check_verify(self, doc)
            self.assertEqual(doc["files"][0]["verdict"], "corrupt", kind)
            self.assertIn("safetensors header", doc["files"][0]["error"], kind)
            self.assertEqual(run("show", bad).returncode, 1, kind)

    def test_convert_writes_huggingface_s_sharded_layout_and_every_command_reads_it(self):
        folder = path("hf_model")
        os.makedirs(folder, exist_ok=True)
        out = os.path.join(folder, "model.safetensors")
        p = run("convert", path("numeric.npz"), out, "--max-shard-size", "8kB")
        self.assertEqual(p.returncode, 0, p.stderr)
        shards = sorted(f for f in os.listdir(folder) if f.startswith("model-"))
        # w, b and flag (50 B) until big (8000 B) does not fit beside them; big, empty and scalar; nested/name.
        self.assertEqual(shards, ["model-0000%d-of-00003.safetensors" % k for k in (1, 2, 3)])
        index = os.path.join(folder, "model.safetensors.index.json")
        with open(index) as f:
            self.assertEqual(set(json.load(f)["weight_map"].values()), set(shards))
        for source in (index, folder):
            self.assertEqual(run("diff", path("numeric.npz"), source).returncode, 0, source)
            self.assertEqual(run("verify", source).returncode, 0, source)
        self.assertEqual(run_json("cat", index, "big")["values"], self.NUMERIC["big"].tolist())
        p = run("convert", path("numeric.npz"), path("x.npz"), "--max-shard-size", "8kB")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--max-shard-size writes Hugging Face's sharded safetensors layout", p.stderr)
        p = run("convert", path("numeric.npz"), out, "--max-shard-size", "8XB")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown unit 'XB'", p.stderr)
        p = run("convert", path("numeric.npz"), out, "--max-shard-size", "999999999999999TB")  # no wrap-around
        self.assertEqual(p.returncode, 2)
        self.assertIn("is more bytes than 64 bits count", p.stderr)

    def test_values_that_differ_across_formats_are_a_difference(self):
        st = self.converted("differs.safetensors", "numeric.npz")
        other = path("numeric.npz")
        with open(st, "r+b") as f:  # one byte of the last tensor's data
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 1]))
        self.assertEqual(run("diff", other, st).returncode, 1)


class ProgressBar(unittest.TestCase):
    def run_on_terminal(self, *args, env):
        """Runs the program with stderr on a pseudo-terminal; returns (status, stdout, what the terminal got)."""
        master, slave = pty.openpty()
        full_env = dict(os.environ, **env)
        p = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=slave, env=full_env)
        os.close(slave)
        chunks = []

        def drain():
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's other side is closed
                    return
                if not data:
                    return
                chunks.append(data)
        reader = threading.Thread(target=drain)
        reader.start()
        out = p.stdout.read()
        p.wait(timeout=120)
        reader.join(timeout=60)
        os.close(master)
        return p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")

    def test_shown_on_a_terminal(self):
        for args in (["verify", path("large.npz")], ["diff", path("large.npz"), path("large.npz")],
                     ["cat", path("large.npz"), "x"], ["convert", path("large.npz"), path("conv_large.npz")]):
            status, out, terminal = self.run_on_terminal(*args, env={"CKPT_PROGRESS_AFTER_MS": "0"})
            self.assertEqual(status, 0, terminal)
            self.assertRegex(terminal, r"\r\S.* \[[#.]+\] +\d+% ", args)
            self.assertIn("100%", terminal, args)
            self.assertTrue(terminal.endswith("\r\x1b[K"), repr(terminal[-40:]))  # and removed at the end
            self.assertNotIn("%", out)

    def test_not_shown_for_quick_work_or_off_a_terminal(self):
        status, _, terminal = self.run_on_terminal("verify", path("plain.npz"), env={})
        self.assertEqual((status, terminal), (0, ""))  # under the default second
        for args in (["verify", path("large.npz")], ["cat", path("large.npz"), "x"]):
            p = run(*args, env={"CKPT_PROGRESS_AFTER_MS": "0"})
            self.assertEqual((p.returncode, p.stderr), (0, ""))


if __name__ == "__main__":
    unittest.main()
