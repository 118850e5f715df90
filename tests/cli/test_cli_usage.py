# SPDX-License-Identifier: Apache-2.0
"""The ckpt program's answers to its users: --json errors as one document, help and unknown commands as git gives
them, `ls` of what a user points it at (a manager's directory with its own keys and incomplete steps, one file, a
directory of .npz files), and files that are not npz checkpoints. Runs <stage>/bin/ckpt as test_cli.py does."""
import json
import os
import pty
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import zipfile

import numpy as np

from cli_inputs import make_sharded_run
from cli_run import CLI, run, run_json, with_ckpt
from cli_schema import check_error, check_ls

WORK = None


def path(*parts):
    return os.path.join(WORK, *parts)


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="ckpt-cli-usage.")
    np.savez(path("plain.npz"), w=np.arange(6, dtype=np.float32).reshape(2, 3), b=np.arange(3))
    with open(path("notzip.npz"), "w") as f:
        f.write("this is not a zip file\n")
    os.makedirs(path("adir"))


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


class JsonErrors(unittest.TestCase):
    def test_every_failure_is_one_json_document(self):
        missing = path("no-such.npz")
        cases = [
            (["show", missing], 3, "CKPT_ENOTFOUND"),
            (["cat", missing, "w"], 3, "CKPT_ENOTFOUND"),
            (["diff", missing, path("plain.npz")], 2, "CKPT_ENOTFOUND"),  # diff: trouble is 2
            (["ls", path("no-such-dir")], 3, None),
            (["show", path("notzip.npz")], 1, "CKPT_EFORMAT"),
            (["cat", path("notzip.npz"), "w"], 1, "CKPT_EFORMAT"),
            (["cat", path("plain.npz"), "nope"], 3, None),
            (["show", path("adir")], 3, "CKPT_EINVAL"),
            (["show"], 2, "CKPT_EINVAL"),
            (["show", "a", "b"], 2, "CKPT_EINVAL"),
            (["ls", "--bogus", WORK], 2, "CKPT_EINVAL"),
            (["frobnicate"], 2, "CKPT_EINVAL"),
            (["help", "frobnicate"], 2, "CKPT_EINVAL"),
            (["convert", path("plain.npz"), path("x.npz"), "--layout", "zip"], 2, "CKPT_EINVAL"),
        ]
        for args, status, name in cases:
            p = run(*args, "--json")
            self.assertEqual(p.returncode, status, "%s: %s" % (args, p.stderr))
            doc = json.loads(p.stdout)  # exactly one document: anything after it fails here
            check_error(self, doc, name or doc["error"]["name"])
            self.assertTrue(p.stderr.startswith("ckpt: "), (args, p.stderr))  # the message still goes to stderr
            self.assertIn(doc["error"]["message"], p.stderr)
            if args[0] in ("show", "cat", "diff") and len(args) > 1 and args[1] != "a":
                self.assertIn(os.path.basename(args[1]), doc["error"]["message"])
            self.assertEqual(run(*args).returncode, status, args)  # the same status without --json
        self.assertFalse(os.path.exists(path("x.npz")))

    @unittest.skipIf(os.geteuid() == 0, "root reads every file")
    def test_a_file_that_cannot_be_opened(self):
        locked = path("locked.npz")
        shutil.copy(path("plain.npz"), locked)
        os.chmod(locked, 0)
        try:
            p = run("show", locked, "--json")
            self.assertEqual(p.returncode, 3, p.stderr)
            doc = json.loads(p.stdout)
            check_error(self, doc, "CKPT_EIO")
            self.assertIn("locked.npz", doc["error"]["message"])
        finally:
            os.chmod(locked, 0o644)


class HelpAndCommands(unittest.TestCase):
    def test_help_and_help_command(self):
        top = run("--help")
        self.assertEqual(top.returncode, 0)
        self.assertEqual(run("help").stdout, top.stdout)
        for command in ("ls", "show", "verify", "diff", "cat", "convert"):
            p = run("help", command)
            self.assertEqual(p.returncode, 0, command)
            self.assertEqual(p.stdout, run(command, "--help").stdout, command)

    def test_an_unknown_command_answers_as_git(self):
        p = run("frobnicate")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "ckpt: 'frobnicate' is not a ckpt command. See 'ckpt --help'.\n")
        self.assertEqual(p.stdout, "")
        p = run("sho", "x.npz")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "ckpt: 'sho' is not a ckpt command. See 'ckpt --help'.\n\n"
                                   "The most similar command is\n\tshow\n")
        p = run("help", "verfy")
        self.assertEqual(p.returncode, 2)
        self.assertIn("The most similar command is\n\tverify", p.stderr)

    def test_usage_errors_start_with_the_program_name(self):
        for args in (["show"], ["show", "a", "b"], ["ls", "--bogus", WORK], ["cat", path("plain.npz")]):
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertTrue(p.stderr.startswith("ckpt: "), (args, p.stderr))
            self.assertIn("See 'ckpt %s --help'." % args[0], p.stderr)

    def test_help_texts_are_sentences(self):
        for command in ("ls", "show", "cat", "verify", "diff", "convert"):
            text = run(command, "--help").stdout
            self.assertTrue(text[0].isupper() and text.splitlines()[0].endswith("."), (command, text.splitlines()[0]))
            options = [l for l in text.splitlines() if l.startswith("  ") and "  " in l.strip()]
            self.assertTrue(options, command)
            for line in options:
                words = line.strip().split("  ")[-1].strip()
                self.assertTrue(words[0].isupper() and words.endswith("."), (command, line))

    def test_help_texts_have_no_parser_jargon(self):
        commands = ("ls", "show", "cat", "verify", "diff", "convert", "clean", "stats")
        top = run("--help").stdout
        self.assertIn("Usage: ckpt [OPTIONS] COMMAND\n", top)
        self.assertIn("\nCommands:\n", top)
        self.assertFalse(top.startswith("Ckpt:"), top.splitlines()[0])
        for command in commands:
            text = run(command, "--help").stdout
            for jargon in ("TEXT", "REQUIRED", "FLOAT", "Excludes:", "SUBCOMMAND", "Positionals:", "X>=0"):
                self.assertNotIn(jargon, text, command)
        self.assertIn("  --subdir SUBDIR ", run("ls", "--help").stdout)
        self.assertIn("  --layout {plain,objax} ", run("convert", "--help").stdout)
        self.assertIn("  --atol ATOL ", run("diff", "--help").stdout)
        self.assertIn("Usage: ckpt stats [OPTIONS] FILE [NAME...]\n", run("stats", "--help").stdout)

    def test_the_manual_page_carries_every_commands_arguments_and_options(self):
        page = os.path.join(os.path.dirname(os.path.dirname(CLI)), "share", "man", "man1", "ckpt.1")
        if not os.path.exists(page):
            self.skipTest("no manual page installed (a build without help2man)")
        with open(page) as f:
            roff = f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
        self.assertIn(".SH COMMANDS", roff)
        for command in ("ls", "show", "cat", "verify", "diff", "convert", "clean", "stats"):
            self.assertIn('.SS "ckpt %s"' % command, roff)
            section = roff.split('.SS "ckpt %s"' % command)[1].split(".SS ")[0]
            for line in run(command, "--help").stdout.splitlines():
                if line.startswith("  ") and "   " in line.strip():  # an argument or option and its description
                    name, words = line.strip().split("   ", 1)
                    self.assertIn(name.strip(), section, command)
                    self.assertIn(words.strip(), section.replace("\\&", ""), command)

    def test_options_before_the_command_are_the_commands(self):
        for before, after in ((["--json", "ls", WORK], ["ls", "--json", WORK]),
                              (["--json", "show", path("plain.npz")], ["show", "--json", path("plain.npz")]),
                              (["--bytes", "ls", path("plain.npz")], ["ls", "--bytes", path("plain.npz")])):
            p, q = run(*before), run(*after)
            self.assertEqual((p.returncode, p.stdout, p.stderr), (q.returncode, q.stdout, q.stderr), before)
            self.assertTrue(p.stdout, before)  # an answer, not a usage error (WORK holds a broken file: exit 1)
        self.assertEqual(run("--version").returncode, 0)  # the program's own stay its own

    def test_a_missing_directory_is_named_as_typed(self):
        missing = path("no", "such")
        for args in (["ls", missing], ["--json", "ls", missing]):
            p = run(*args)
            self.assertEqual(p.returncode, 3, args)
            self.assertEqual(p.stderr, "ckpt: %s: not found: no such directory\n" % missing)
        doc = json.loads(run("--json", "ls", missing).stdout)
        self.assertEqual((doc["error"]["name"], doc["error"]["message"]),
                         ("CKPT_ENOTFOUND", "%s: not found: no such directory" % missing))

    def test_deflate_takes_its_level_as_the_next_word(self):
        out = path("deflated9.npz")
        p = run("convert", path("plain.npz"), out, "--deflate", "9")
        self.assertEqual(p.returncode, 0, p.stderr)
        with zipfile.ZipFile(out) as z:
            self.assertEqual({i.compress_type for i in z.infolist()}, {zipfile.ZIP_DEFLATED})
        with np.load(out) as z:
            np.testing.assert_array_equal(z["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
        self.assertEqual(run("convert", path("plain.npz"), out, "--deflate", "12").returncode, 2)
        self.assertEqual(run("convert", path("plain.npz"), out, "--deflate", "0").returncode, 2)


class LsWhatItIsGiven(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with_ckpt("""
            import numpy as np, ckpt
            with ckpt.Manager("mrun", keep=0) as m:
                for k in (1, 2):
                    m.save({"w": np.full(3, k, np.float32)}, k, metadata={"lr": "0.1"}, metrics={"loss": 1.0 / k})
        """, cwd=WORK)
        ckdir = path("mrun", "ckpt")
        # A copy or a sync changes the mtime; the manager's record of the saving time stays.
        os.utime(os.path.join(ckdir, "0000000001.npz"), (978307200, 978307200))  # 2001-01-01
        # A sharded step whose manifest was never written: a save in progress or cut short.
        os.makedirs(os.path.join(ckdir, "0000000003"))
        np.savez(os.path.join(ckdir, "0000000003", "shard-00000-of-00002.npz"), w=np.ones(2))

    def test_the_managers_keys_are_not_user_metadata_and_its_time_comes_first(self):
        doc = run_json("ls", path("mrun"))
        check_ls(self, doc)
        self.assertTrue(doc["manager"])
        first = doc["checkpoints"][0]
        self.assertEqual(first["saved_at_source"], "metadata:ckpt.saved_at")
        self.assertEqual(first["saved_at"], first["metadata"]["ckpt.saved_at"])
        self.assertTrue(first["mtime"].startswith("2001-01-01"))
        p = run("ls", path("mrun"), env={"TZ": "UTC"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("ckpt.", p.stdout)
        self.assertNotIn("2001-01-01", p.stdout)
        row = p.stdout.splitlines()[2]
        self.assertRegex(row, r"\bloss=1\b")  # the manager's metrics by their names
        self.assertIn("lr=0.1", row)
        saved = first["metadata"]["ckpt.saved_at"]  # "2026-12-02T11:00:00...Z"
        self.assertIn(saved[:10] + " " + saved[11:19], row)

    def test_a_step_without_its_manifest_is_listed_as_incomplete(self):
        doc = run_json("ls", path("mrun"))
        self.assertEqual([(c["index"], c["sharded"], c["incomplete"]) for c in doc["checkpoints"]],
                         [(1, False, False), (2, False, False), (3, True, True)])
        step = doc["checkpoints"][2]
        self.assertIsNone(step["arrays"])
        self.assertIn("incomplete", step["error"])
        p = run("ls", path("mrun"))
        self.assertEqual(p.returncode, 0, p.stderr)  # a save in progress is no failure
        self.assertRegex(p.stdout, r"\n +3 .*incomplete")

    def test_one_file(self):
        f = path("mrun", "ckpt", "0000000002.npz")
        doc = run_json("ls", f)
        check_ls(self, doc)
        self.assertEqual([(c["index"], c["path"], c["arrays"]) for c in doc["checkpoints"]], [(2, f, 1)])
        self.assertEqual(doc["checkpoints"][0]["metadata"]["ckpt.metric.loss"], "0.5")
        p = run("ls", path("plain.npz"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[0], "%s: a checkpoint file" % path("plain.npz"))
        self.assertEqual(p.stdout.splitlines()[2].split()[0], "plain.npz")

    def test_a_directory_that_is_not_a_managers(self):
        d = path("loose")
        os.makedirs(d, exist_ok=True)
        np.savez(os.path.join(d, "model.npz"), w=np.ones(2))
        np.savez(os.path.join(d, "best.npz"), w=np.ones(2), b=np.zeros(1))
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not listed\n")
        doc = run_json("ls", d)
        check_ls(self, doc)
        self.assertFalse(doc["manager"])
        self.assertEqual([(os.path.basename(c["path"]), c["index"], c["arrays"]) for c in doc["checkpoints"]],
                         [("best.npz", None, 2), ("model.npz", None, 1)])
        p = run("ls", ".", cwd=d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("not a checkpoint manager's directory", p.stdout.splitlines()[0])
        self.assertEqual([l.split()[0] for l in p.stdout.splitlines()[2:]], ["best.npz", "model.npz"])

    def test_a_killed_convert_leaves_a_temporary_that_ls_shows_and_clean_removes(self):
        d = path("killed")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "big.npz")
        np.savez(src, **{"a%d" % i: np.random.default_rng(i).random(1 << 20) for i in range(24)})  # 192 MiB
        out = os.path.join(d, "small.npz")
        p = subprocess.Popen([CLI, "convert", "--deflate=9", src, out], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not [n for n in os.listdir(d) if n.startswith(".small.npz.tmp-")] and time.monotonic() < deadline:
            time.sleep(0.005)
        p.kill()
        p.wait()
        temporaries = [n for n in os.listdir(d) if n.startswith(".small.npz.tmp-")]
        self.assertEqual(len(temporaries), 1, os.listdir(d))
        self.assertFalse(os.path.exists(out))
        doc = run_json("ls", d)
        self.assertEqual(doc["temporaries"], temporaries)
        listing = run("ls", d).stdout
        self.assertIn("1 temporary file of a save in progress or interrupted (`ckpt clean` removes stale ones):\n"
                      "  %s\n" % temporaries[0], listing)
        self.assertEqual(run("clean", d).returncode, 0)
        self.assertEqual([n for n in sorted(os.listdir(d)) if n != ".ckpt.lock"], ["big.npz"])  # clean's lock stays


class CatAsNumpyPrints(unittest.TestCase):
    def test_booleans_and_long_exponents(self):
        rs = np.random.RandomState(3)
        cases = {
            "alltrue": np.ones(5, bool), "allfalse": np.zeros(5, bool), "bool2d": np.ones((2, 2), bool),
            "boolbig": rs.rand(2000) > 0.5, "bool0d": np.array(True),
            "e100": np.array([1e-100, 1.0]), "e300": np.array([1e300, 1.0]), "e300n": np.array([-1e300, 2.5, 3e-5]),
            "e300c": np.array([1e300 + 1j]), "mixedexp": np.array([1e-120, 1e50, np.nan]),
            "bigsci": rs.rand(2000) * 1e-200, "naninf": np.array([np.nan, np.inf, -np.inf]),
            "negzero": np.array([-0.0, 0.0]), "negzero0d": np.array(-0.0), "large3": rs.rand(20, 30, 40),
            "empty2": np.zeros((2, 0)), "f16": np.array([1.5, 2e-5, 60000], np.float16),
        }
        np.savez(path("cases.npz"), **cases)
        for name, value in cases.items():
            p = run("cat", path("cases.npz"), name)
            self.assertEqual((p.returncode, p.stdout), (0, str(value) + "\n"), name)


class CatOfASlice(unittest.TestCase):
    """`ckpt cat FILE 'w[0:4, :]'` prints what numpy prints of w[0:4, :]."""

    INDICES = ["0:4, :", "0:4", "-1", "1, 2", "::-1", "::2, 1:", "5:1:-2, -3", "..., 0", "1, ...", "0, ..., ::3",
               "10:", "3:3", "-100:100", "2:-1, ::-2, 1", ":, :, -1", "1,"]

    def test_indices_select_as_numpy_does_stored_deflated_and_fortran(self):
        w = np.arange(7 * 5 * 4, dtype=np.float32).reshape(7, 5, 4) * 0.5
        np.savez(path("slices.npz"), w=w, f=np.asfortranarray(w.astype(">f8")), s=np.array(2.5))
        np.savez_compressed(path("slices_z.npz"), w=w)
        for f, name, value in (("slices.npz", "w", w), ("slices_z.npz", "w", w), ("slices.npz", "f", w.astype(">f8"))):
            for index in self.INDICES:
                expected = eval("value[%s]" % index)  # the index, as numpy takes it
                p = run("cat", path(f), "%s[%s]" % (name, index))
                self.assertEqual((p.returncode, p.stdout), (0, str(expected) + "\n"), (f, name, index, p.stderr))
        doc = json.loads(run("cat", path("slices.npz"), "w[1, ::2]", "--json").stdout)
        self.assertEqual((doc["name"], doc["index"], doc["shape"]), ("w", "[1, ::2]", [3, 4]))
        self.assertEqual(doc["values"], w[1, ::2].tolist())
        self.assertEqual(run("cat", path("slices.npz"), "s[...]").stdout, str(np.array(2.5)[...]) + "\n")

    def test_bad_indices_are_refused_with_numpys_words(self):
        np.savez(path("bad.npz"), w=np.zeros((3, 2)), s=np.array(1.0))
        for index, status, words in (("w[3]", 3, "index 3 is out of bounds for axis 0 with size 3"),
                                     ("w[0, -3]", 3, "index -3 is out of bounds for axis 1 with size 2"),
                                     ("w[0, 0, 0]", 3, "too many indices for array: array is 2-dimensional, but 3 were indexed"),
                                     ("s[0]", 3, "array is 0-dimensional, but 1 were indexed"),
                                     ("w[::0]", 2, "slice step cannot be zero"),
                                     ("w[..., ...]", 2, "an index can only have a single ellipsis"),
                                     ("w[a]", 2, "'a' is not an integer"), ("w[]", 2, "it is empty"),
                                     ("v[0]", 3, "no array 'v[0]'")):
            p = run("cat", path("bad.npz"), index)
            self.assertEqual(p.returncode, status, (index, p.stderr))
            self.assertIn(words, p.stderr, index)
            self.assertTrue(p.stderr.startswith("ckpt: "), p.stderr)

    def test_a_name_with_brackets_is_that_array(self):
        np.savez(path("brackets.npz"), **{"w[0]": np.arange(3), "w": np.arange(10, 13)})
        self.assertEqual(run("cat", path("brackets.npz"), "w[0]").stdout, "[0 1 2]\n")
        self.assertEqual(run("cat", path("brackets.npz"), "w[1:]").stdout, "[11 12]\n")


class CatOfAShardedStep(unittest.TestCase):
    def test_a_variable_gathered_from_its_shards(self):
        logdir = path("sharded")
        make_sharded_run(logdir, WORK)
        step = os.path.join(logdir, "ckpt", "0000000002")
        emb = np.arange(12, dtype=np.float32).reshape(4, 3) + 2  # rows 0-1 from rank 0, 2-3 from rank 1
        p = run("cat", step, "emb")
        self.assertEqual((p.returncode, p.stdout), (0, str(emb) + "\n"), p.stderr)
        doc = json.loads(run("cat", step, "own_1", "--json").stdout)
        self.assertEqual((doc["shape"], doc["values"]), ([2], [1, 1]))
        p = run("cat", step, "emb[1:3, ::-1]")  # rows from both shards
        self.assertEqual((p.returncode, p.stdout), (0, str(emb[1:3, ::-1]) + "\n"), p.stderr)
        p = run("cat", step, "nope")
        self.assertEqual(p.returncode, 3)
        self.assertIn("no array 'nope'", p.stderr)
        self.assertIn("emb", p.stderr)


class DiffOfShardedSteps(unittest.TestCase):
    def test_steps_and_files_compare_in_any_pairing(self):
        logdir = path("sharded_diff")
        make_sharded_run(logdir, WORK)
        one, two = (os.path.join(logdir, "ckpt", "%010d" % k) for k in (1, 2))
        p = run("diff", one, two, "--count")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("emb: 12 of 12 elements differ, max abs diff 1", p.stdout)
        self.assertNotIn("own_0", p.stdout)  # equal in both steps
        doc = json.loads(run("diff", one, two, "--json", "--count").stdout)
        self.assertEqual({a["name"]: a["status"] for a in doc["arrays"]},
                         {"emb": "values_changed", "own_0": "equal", "own_1": "equal"})
        self.assertEqual(run("diff", two, two).returncode, 0)
        single = path("sharded_diff_two.npz")
        self.assertEqual(run("convert", two, single).returncode, 0)
        p = run("diff", two, single)  # convert keeps the manager's keys (ckpt.index, ckpt.saved_at, ...) too
        self.assertEqual((p.returncode, p.stdout.splitlines()[-1]), (0, "equal: 3 arrays and the metadata"), p.stdout)
        p = run("diff", single, one, "--atol", "1")  # the values within 1 of each other; the manager's keys not
        self.assertEqual(p.returncode, 0, p.stdout)  # which are its record of the saves, set aside by default
        self.assertIn("not compared: ckpt.index", p.stdout)
        p = run("diff", single, one, "--atol", "1", "--all-metadata")
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertEqual([l for l in p.stdout.splitlines()[2:] if not l.startswith("metadata ckpt.")],
                         ["different: 3 metadata keys"])
        self.assertIn("metadata ckpt.index: 2 -> 1", p.stdout)
        p = run("diff", os.path.join(logdir, "ckpt", "0000000009"), single)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)


class CatProgress(unittest.TestCase):
    def test_full_output_of_a_large_array_shows_progress_on_a_terminal(self):
        f = path("long.npz")
        values = np.arange(200000, dtype=np.float64) / 8
        np.savez(f, x=values)
        master, slave = pty.openpty()
        p = subprocess.Popen([CLI, "cat", f, "x", "--full"], stdout=subprocess.PIPE, stderr=slave,
                             env=dict(os.environ, CKPT_PROGRESS_AFTER_MS="0"))
        os.close(slave)
        chunks = []

        def drain():
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                chunks.append(data)
        reader = threading.Thread(target=drain)
        reader.start()
        out = p.stdout.read().decode()
        p.wait(timeout=120)
        reader.join(timeout=60)
        os.close(master)
        terminal = b"".join(chunks).decode(errors="replace")
        self.assertEqual(p.returncode, 0, terminal)
        self.assertRegex(terminal, r"\rwriting x \[[#.]+\] +\d+% ")
        self.assertIn("100%", terminal)
        self.assertTrue(terminal.endswith("\r\x1b[K"), repr(terminal[-40:]))
        np.testing.assert_array_equal(np.array(out.replace("[", " ").replace("]", " ").split(), float), values)


TORCH_FILES = """
import sys, torch
torch.save({"w": torch.ones(3)}, sys.argv[1])
torch.save({"w": torch.ones(3)}, sys.argv[2], _use_new_zipfile_serialization=False)
"""


class NotAnNpzCheckpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        p = subprocess.run(["/usr/bin/python3", "-c", TORCH_FILES, path("model.pt"), path("legacy.pt")],
                           capture_output=True, text=True, timeout=300)
        cls.torch = p.returncode == 0

    def test_torch_files_are_named_as_not_npz_checkpoints(self):
        if not self.torch:
            self.skipTest("torch is not installed for /usr/bin/python3")
        for f in ("model.pt", "legacy.pt"):
            for args in (["show", path(f)], ["cat", path(f), "w"], ["ls", path(f)]):
                p = run(*args)
                self.assertEqual(p.returncode, 1, (args, p.stdout, p.stderr))
                out = p.stderr + p.stdout
                self.assertIn("%s: not an npz checkpoint" % path(f), out)
                self.assertNotIn("corrupt", out)
                self.assertNotIn("npy header", out)
            doc = run_json("verify", path(f), status=1)  # its verdict is its own, and the summary counts it so
            self.assertEqual(doc["files"][0]["verdict"], "not-npz", doc)
            self.assertIn("not an npz checkpoint", doc["files"][0]["error"])
            self.assertEqual(doc["summary"]["not_npz"], 1)
            self.assertEqual(doc["summary"]["corrupt"], 0)

    def test_a_zip_with_a_readme_beside_the_arrays_reads_as_numpy_reads_it(self):
        f = path("readme.npz")
        np.savez(f, w=np.arange(4.0), b=np.array([True, False]))
        with zipfile.ZipFile(f, "a") as z:
            z.writestr("README.txt", "trained on CIFAR-10\n")
        with np.load(f) as z:  # numpy lists the other member and gives its bytes
            self.assertIn("README.txt", z.files)
            expected = {name: z[name] for name in ("w", "b")}
        doc = run_json("show", f)
        self.assertEqual([a["name"] for a in doc["arrays"]], ["w", "b"])  # the other member is skipped
        for name, value in expected.items():
            p = run("cat", f, name)
            self.assertEqual((p.returncode, p.stdout), (0, str(value) + "\n"), p.stderr)
        self.assertEqual(run("verify", f).returncode, 0)


if __name__ == "__main__":
    unittest.main()
