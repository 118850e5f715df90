# SPDX-License-Identifier: Apache-2.0
"""The ckpt program on s3:// paths, against a real S3 server: s3rver on 127.0.0.1, started by tests/s3/s3_env.py.

Every command takes an s3:// URL wherever it takes a local path, and says of an object what it says of the same
bytes on disk, but for the sizes and modification times that the C API does not tell of objects (null in --json,
left out or "-" in the text). The objects are written by the program itself (ckpt convert, local -> s3), by the
Python package (a checkpoint manager's directory, sharded steps), or put as they are with a plain PUT (broken files,
numpy's own files). Also: a missing key, prefix and bucket, and a libckpt installed without libckpt_s3.

Run under s3_env.py (ctest cli_s3 does) it uses that server; run alone it starts one, or skips saying why.
"""
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.request

import numpy as np

from cli_inputs import PLAIN, RUN_W, make_inputs, make_sharded_run
from cli_run import CLI, LIBRARY, flip_in_array_data, run, run_json, with_ckpt
from cli_schema import check_diff, check_ls, check_show, check_verify

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "s3"))
import s3_env  # noqa: E402  (tests/s3, beside this directory)

WORK = None     # local inputs (WORK/...) and the local copies the S3 objects are compared with (WORK/ref/...)
SERVER = None   # the S3Env this module started, when it was not run under s3_env.py
BUCKET = None
ROOT = None     # "s3://<bucket>/cli-<pid>": every key this module writes is under it

# Files numpy and ckpt wrote (cli_inputs.py), put on S3 by `ckpt convert` and compared with a local `ckpt convert`.
FILES = ["plain.npz", "compressed.npz", "objax.npz", "typed.npz", "numpy_typed.npz", "patterns.npz",
         "diff_a.npz", "diff_b.npz", "nan_a.npz", "nan_b.npz", "large.npz"]
# Files put on S3 byte for byte, as numpy wrote them or as they were broken.
RAW = ["plain.npz", "bitflip.npz", "crc.npz", "truncated.npz", "notzip.npz", "object.npz", "empty.npz"]


def path(*parts):
    return os.path.join(WORK, *parts)


def ref(name):
    """The local copy of what `ckpt convert` put at url(name)."""
    return path("ref", name)


def url(*parts):
    return "/".join((ROOT,) + parts)


def raw_url(name):
    return url("raw", name)


def object_url(u):
    """The HTTP URL of an s3:// URL's object, path-style."""
    assert u.startswith("s3://")
    return "%s/%s" % (os.environ["AWS_ENDPOINT_URL"].rstrip("/"), u[len("s3://"):])


# Raw objects go up, and come back, with plain HTTP, signed (RGW refuses unsigned requests; s3rver ignores them).
def put_object(u, data):
    with urllib.request.urlopen(s3_env.signed_request(object_url(u), data=data)) as r:
        assert r.status == 200, r.status


def get_object(u):
    with urllib.request.urlopen(s3_env.signed_request(object_url(u))) as r:
        return r.read()


def without(doc, *keys):
    return {k: v for k, v in doc.items() if k not in keys}


def setUpModule():
    global WORK, SERVER, BUCKET, ROOT
    if not (os.environ.get("AWS_ENDPOINT_URL") and os.environ.get("CKPT_S3_TEST_BUCKET")):
        server = s3_env.S3Env()
        try:
            server.__enter__()
        except s3_env.Unavailable as why:
            raise unittest.SkipTest("no S3 server: %s" % why)
        SERVER = server
        environ = server.child_environ()
        os.environ.clear()
        os.environ.update(environ)
    BUCKET = os.environ["CKPT_S3_TEST_BUCKET"]
    ROOT = "s3://%s/cli-%d" % (BUCKET, os.getpid())
    WORK = tempfile.mkdtemp(prefix="ckpt-cli-s3-test.")
    make_inputs(WORK)
    os.makedirs(path("ref"))
    for name in FILES:
        for out in (ref(name), url(name)):
            p = run("convert", path(name), out)
            assert p.returncode == 0, "convert %s %s: %s" % (name, out, p.stderr)
    for name in RAW:
        with open(path(name), "rb") as f:
            put_object(raw_url(name), f.read())


def tearDownModule():
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)
    if SERVER:
        SERVER.close()


class Convert(unittest.TestCase):
    def test_local_to_s3_uploads_what_a_local_convert_writes(self):
        for name in FILES:
            with open(ref(name), "rb") as f:
                self.assertEqual(get_object(url(name)), f.read(), name)

    def test_s3_to_local_keeps_every_array(self):
        for name in FILES:
            out = path("back-" + name)
            p = run("convert", url(name), out, "--deflate")
            self.assertEqual(p.returncode, 0, p.stderr)
            # Every member as numpy reads it: the same as in the local copy, and each array as in the original.
            with np.load(ref(name)) as copy, np.load(out) as back, np.load(path(name)) as original:
                self.assertEqual(sorted(back.files), sorted(copy.files), name)
                for member in copy.files:
                    a, b = copy[member], back[member]
                    self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape), "%s: %s" % (name, member))
                    self.assertEqual(a.tobytes(), b.tobytes(), "%s: %s" % (name, member))
                for member in original.files:
                    if member != "__ckpt_metadata__":  # ckpt writes its own record of the types
                        self.assertEqual(original[member].tobytes(), back[member].tobytes(), "%s: %s" % (name, member))
            doc = run_json("show", out)
            self.assertEqual({a["compression"] for a in doc["arrays"]} or {"deflated"}, {"deflated"}, name)
        with np.load(path("back-plain.npz")) as back:
            for key, value in PLAIN.items():
                np.testing.assert_array_equal(back[key], value, key)

    def test_s3_to_s3_in_another_layout_and_in_place(self):
        copy = url("convert", "objax.npz")
        p = run("convert", url("plain.npz"), copy, "--layout", "objax")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(run_json("show", copy)["layout"], "objax")
        self.assertEqual(run("diff", url("plain.npz"), copy).returncode, 0)
        p = run("convert", copy, copy, "--deflate=9")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = run_json("show", copy)
        self.assertEqual((doc["layout"], {a["compression"] for a in doc["arrays"]}), ("objax", {"deflated"}))
        self.assertEqual(run("diff", path("plain.npz"), copy).returncode, 0)


class Show(unittest.TestCase):
    def test_json_is_the_local_copys_but_for_the_path(self):
        pairs = [(url(n), ref(n)) for n in FILES] + [(raw_url("plain.npz"), path("plain.npz"))]
        for remote, local in pairs:
            got, expected = run_json("show", remote), run_json("show", local)
            check_show(self, got)
            self.assertEqual((got["path"], got["bytes"]), (remote, expected["bytes"]))  # ckpt_reader_file_size
            self.assertIsNone(got["shared_bytes"])  # S3 cannot tell which bytes objects share
            self.assertEqual(without(got, "path", "bytes", "shared_bytes"),
                             without(expected, "path", "bytes", "shared_bytes"), remote)

    def test_text_is_the_local_copys_but_for_path_and_size(self):
        for name in ("plain.npz", "objax.npz", "typed.npz", "compressed.npz"):
            got, expected = run("show", url(name)), run("show", ref(name))
            self.assertEqual((got.returncode, expected.returncode), (0, 0), got.stderr)
            first, *rest = got.stdout.splitlines()
            local_first, *local_rest = expected.stdout.splitlines()
            self.assertEqual(rest, local_rest, name)
            self.assertEqual(local_first[len(ref(name)) + 2:], first[len(url(name)) + 2:])  # the size too
            self.assertTrue(first.startswith(url(name) + ": "), first)

    def test_broken_objects_fail_as_the_files_do(self):
        for name in ("notzip.npz", "truncated.npz", "object.npz", "empty.npz"):
            got, expected = run("show", raw_url(name)), run("show", path(name))
            self.assertEqual(got.returncode, expected.returncode, name)
            self.assertEqual(got.returncode, 1, name)
            self.assertEqual(got.stderr.replace(raw_url(name), "FILE"), expected.stderr.replace(path(name), "FILE"))


class Cat(unittest.TestCase):
    def test_values_are_the_local_copys(self):
        cases = [("plain.npz", "w"), ("plain.npz", "big", "--full"), ("plain.npz", "s"), ("typed.npz", "w"),
                 ("typed.npz", "q", "--json"), ("patterns.npz", "bf16"), ("large.npz", "x"), ("objax.npz", "net.b")]
        for name, array, *flags in cases:
            got, expected = run("cat", url(name), array, *flags), run("cat", ref(name), array, *flags)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertEqual(got.stdout, expected.stdout, (name, array))
        doc = json.loads(run("cat", raw_url("plain.npz"), "w", "--json").stdout)
        self.assertEqual(doc["values"], PLAIN["w"].tolist())

    def test_an_unknown_name_lists_the_arrays(self):
        p = run("cat", url("plain.npz"), "nope")
        self.assertEqual(p.returncode, 3)
        self.assertTrue(p.stderr.startswith("ckpt: %s: no array 'nope'" % url("plain.npz")), p.stderr)

    def test_a_corrupt_array_names_the_url(self):
        p = run("cat", raw_url("bitflip.npz"), "w")
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.startswith("ckpt: %s: " % raw_url("bitflip.npz")), p.stderr)
        self.assertIn("CRC", p.stderr)


class Diff(unittest.TestCase):
    def test_differences_are_the_local_copys(self):
        for a, b, status in (("diff_a.npz", "diff_b.npz", 1), ("nan_a.npz", "nan_b.npz", 0),
                             ("plain.npz", "plain.npz", 0)):
            got = run_json("diff", url(a), url(b), status=status)
            check_diff(self, got)
            expected = run_json("diff", ref(a), ref(b), status=status)
            self.assertEqual((got["a"], got["b"]), (url(a), url(b)))
            self.assertEqual(without(got, "a", "b"), without(expected, "a", "b"))
            text, local = run("diff", url(a), url(b)), run("diff", ref(a), ref(b))
            self.assertEqual(text.returncode, status)
            self.assertEqual(text.stdout.splitlines()[:2], ["A = " + url(a), "B = " + url(b)])
            self.assertEqual(text.stdout.splitlines()[2:], local.stdout.splitlines()[2:])

    def test_an_object_equals_its_local_file(self):
        for a, b in ((path("plain.npz"), url("plain.npz")), (url("compressed.npz"), path("compressed.npz")),
                     (raw_url("plain.npz"), url("plain.npz")), (path("typed.npz"), url("typed.npz"))):
            p = run("diff", a, b)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("equal:", p.stdout)

    def test_a_broken_object_exits_2_naming_it(self):
        p = run("diff", url("plain.npz"), raw_url("bitflip.npz"))
        self.assertEqual((p.returncode, p.stdout), (2, ""))  # diff's trouble, as diff(1)'s
        self.assertIn(raw_url("bitflip.npz"), p.stderr)
        self.assertIn("CRC", p.stderr)


class Verify(unittest.TestCase):
    def test_verdicts_are_the_local_files(self):
        remote = [url(n) for n in FILES] + [raw_url(n) for n in RAW]
        local = [ref(n) for n in FILES] + [path(n) for n in RAW]
        got, expected = run_json("verify", *remote, status=1), run_json("verify", *local, status=1)
        check_verify(self, got)
        self.assertEqual(got["summary"], expected["summary"])
        self.assertEqual(got["summary"]["ok"], len(FILES) + 1)
        for g, e, r, l in zip(got["files"], expected["files"], remote, local):
            # The object's size once opened (ckpt_reader_file_size); none for one that did not open.
            self.assertEqual((g["path"], g["bytes"]), (r, e["bytes"] if g["arrays"] is not None else None))
            self.assertEqual((g["verdict"], g["arrays"]), (e["verdict"], e["arrays"]), r)
            self.assertEqual(g["error"] and g["error"].replace(r, "FILE"), e["error"] and e["error"].replace(l, "FILE"))
        verdicts = {os.path.basename(g["path"]): g["verdict"] for g in got["files"][len(FILES):]}
        self.assertEqual(verdicts, {"plain.npz": "ok", "bitflip.npz": "corrupt", "crc.npz": "corrupt",
                                    "truncated.npz": "corrupt", "notzip.npz": "not-npz",
                                    "object.npz": "unsupported", "empty.npz": "corrupt"})

    def test_text_lines_name_the_url(self):
        p = run("verify", url("plain.npz"), raw_url("bitflip.npz"))
        self.assertEqual(p.returncode, 1)
        lines = p.stdout.splitlines()
        local = run("verify", ref("plain.npz")).stdout.splitlines()[0]
        self.assertEqual(lines[0], url("plain.npz") + local[len(ref("plain.npz")):])  # "ok (10 arrays, 11.2 KiB)"
        self.assertTrue(lines[1].startswith("%s: corrupt: member 'w.npy': " % raw_url("bitflip.npz")), lines[1])
        self.assertEqual(lines[2], "2 files: 1 ok, 1 corrupt")


def manager_run(logdir):
    """Four checkpoints of a manager in `logdir` (local or s3://), as cli_inputs.make_inputs makes its "run"."""
    return """
        import numpy as np, ckpt
        m = ckpt.Manager(%r, keep=0)
        for k in range(1, 5):
            meta = {"step": str(100 * k), "loss": str(1.0 / k), "lr": "0.001"}
            if k == 2:
                meta["time"] = "1714564800"
            m.save({"w": np.arange(1000, dtype=np.float32) * k + 0.5}, k, metadata=meta)
        m.close()
    """ % logdir


# The keys a manager's save records that differ from one save to the next (when it was saved).
TIMES = ("ckpt.saved_at", "ckpt.saved_at_ns")


class ManagerDirectory(unittest.TestCase):
    """A checkpoint manager's directory on S3, written by the Python package, beside the same one on disk."""

    @classmethod
    def setUpClass(cls):
        cls.logdir, cls.local = url("run"), path("manager-run")
        with_ckpt(manager_run(cls.logdir), cwd=WORK)
        with_ckpt(manager_run(cls.local), cwd=WORK)

    def comparable(self, entry):
        return dict(without(entry, "path", "bytes", "mtime", "saved_at", "saved_at_source"),
                    metadata=entry["metadata"] and without(entry["metadata"], *TIMES))

    def test_ls_is_the_local_directorys_but_for_sizes_and_times(self):
        got, expected = run_json("ls", self.logdir, "--verify"), run_json("ls", self.local, "--verify")
        check_ls(self, got)
        self.assertEqual(got["directory"], self.logdir + "/ckpt")
        self.assertEqual(got["temporaries"], [])
        self.assertEqual([self.comparable(c) for c in got["checkpoints"]],
                         [self.comparable(c) for c in expected["checkpoints"]])
        self.assertEqual([c["index"] for c in got["checkpoints"]], [1, 2, 3, 4])
        self.assertEqual({c["verdict"] for c in got["checkpoints"]}, {"ok"})
        for c in got["checkpoints"]:
            self.assertEqual(c["path"], "%s/ckpt/%010d.npz" % (self.logdir, c["index"]))
            self.assertEqual((c["mtime"], c["sharded"]), (None, False))
            self.assertIsInstance(c["bytes"], int)  # the object's size, from ckpt_reader_file_size
            # The manager's record of the save, as on disk (where it comes before the user's time and the mtime).
            self.assertEqual((c["saved_at"], c["saved_at_source"]),
                             (c["metadata"]["ckpt.saved_at"], "metadata:ckpt.saved_at"))

    def test_ls_text(self):
        p = run("ls", self.logdir, env={"TZ": "UTC"})
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "%s/ckpt: 4 checkpoints" % self.logdir)
        self.assertEqual(lines[1].split(), ["index", "size", "saved", "arrays", "metadata"])
        doc = run_json("ls", self.logdir)
        for line, c in zip(lines[2:], doc["checkpoints"]):
            cells = line.split()
            self.assertEqual(cells[0], str(c["index"]))
            self.assertEqual(" ".join(cells[1:3]), "%.1f KiB" % (c["bytes"] / 1024))  # the object's size
            # The saving time the manager recorded, in whole seconds as a file's mtime is shown.
            self.assertEqual("%sT%sZ" % tuple(cells[3:5]), c["metadata"]["ckpt.saved_at"][:19] + "Z")
            self.assertIn("step=%d" % (100 * c["index"]), line)
        self.assertEqual(len(lines), 6)  # and no temporaries

    def test_the_checkpoint_directory_itself_and_subdir(self):
        ckdir = self.logdir + "/ckpt"
        self.assertEqual(run_json("ls", ckdir)["directory"], ckdir)
        self.assertEqual(len(run_json("ls", self.logdir, "--subdir", "ckpt")["checkpoints"]), 4)
        self.assertEqual(len(run_json("ls", ckdir, "--subdir", "")["checkpoints"]), 4)
        self.assertEqual(len(run_json("ls", self.logdir + "/")["checkpoints"]), 4)

    def test_verify_checks_each_checkpoint(self):
        doc = run_json("verify", self.logdir)
        check_verify(self, doc)
        self.assertEqual(doc["directories"], [{"path": self.logdir + "/ckpt", "checkpoints": 4, "error": None}])
        self.assertEqual([(f["path"], f["verdict"], f["arrays"]) for f in doc["files"]],
                         [("%s/ckpt/%010d.npz" % (self.logdir, k), "ok", 1) for k in range(1, 5)])
        p = run("verify", self.logdir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[-1], "4 files: 4 ok")

    def test_show_and_cat_of_a_checkpoint_are_the_local_ones(self):
        remote, local = "%s/ckpt/0000000003.npz" % self.logdir, os.path.join(self.local, "ckpt", "0000000003.npz")
        got, expected = run_json("show", remote), run_json("show", local)
        check_show(self, got)
        self.assertEqual(
            dict(without(got, "path", "bytes", "shared_bytes"), metadata=without(got["metadata"], *TIMES)),
            dict(without(expected, "path", "bytes", "shared_bytes"), metadata=without(expected["metadata"], *TIMES)))
        self.assertEqual(run("cat", remote, "w").stdout, run("cat", local, "w").stdout)
        # The same values: equal, ckpt's own record of when each was saved aside (and different with it).
        diff = run_json("diff", remote, local)
        self.assertEqual([a["status"] for a in diff["arrays"]], ["equal"])
        self.assertEqual(sorted(diff["metadata_ignored"]), sorted(TIMES))
        diff = run_json("diff", remote, local, "--all-metadata", status=1)
        self.assertEqual(sorted(m["key"] for m in diff["metadata"]), sorted(TIMES))  # when each was saved
        back = path("restored-3.npz")
        self.assertEqual(run("convert", remote, back).returncode, 0)
        with np.load(back) as f:
            np.testing.assert_array_equal(f["w"], RUN_W[2])

    def test_report_is_the_local_directorys_but_for_paths_and_times(self):
        got, expected = run_json("report", self.logdir), run_json("report", self.local)
        self.assertEqual(got["kind"], "run")
        self.assertEqual([c["path"] for c in got["checkpoints"]],
                         ["%s/ckpt/%010d.npz" % (self.logdir, k) for k in range(1, 5)])
        for c in got["checkpoints"]:
            self.assertIsNone(c["shared_bytes"])  # an object store cannot tell
        for key in ("metrics", "arrays", "changes"):
            self.assertEqual(got[key], expected[key], key)
        self.assertEqual([(w["kind"], w["name"], w["step"]) for w in got["warnings"]],
                         [(w["kind"], w["name"], w["step"]) for w in expected["warnings"]])
        page = path("s3-report.html")
        self.assertEqual(run("report", self.logdir, "-o", page).returncode, 0)
        with open(page) as f:
            self.assertIn(self.logdir, f.read())

    def test_a_directory_where_a_file_belongs_exits_3(self):
        for args in (["show", self.logdir], ["cat", self.logdir + "/ckpt", "w"]):
            p = run(*args)
            self.assertEqual(p.returncode, 3, args)
            self.assertEqual(p.stderr, "ckpt: %s: is a directory (ckpt ls and ckpt verify take a checkpoint "
                                       "directory)\n" % args[1])

    def test_a_corrupt_checkpoint_is_found_by_verify(self):
        broken = url("broken-run")
        for k in range(1, 5):
            name = "ckpt/%010d.npz" % k
            put_object("%s/%s" % (broken, name), get_object("%s/%s" % (self.logdir, name)))
        local = path("broken-newest.npz")
        with open(local, "wb") as f:
            f.write(get_object("%s/ckpt/0000000004.npz" % self.logdir))
        flip_in_array_data(local, RUN_W[3])
        with open(local, "rb") as f:
            put_object("%s/ckpt/0000000004.npz" % broken, f.read())
        doc = run_json("ls", broken, "--verify", status=1)
        check_ls(self, doc)
        self.assertEqual([c["verdict"] for c in doc["checkpoints"]], ["ok", "ok", "ok", "corrupt"])
        self.assertTrue(doc["checkpoints"][3]["error"].startswith("%s/ckpt/0000000004.npz: " % broken))
        self.assertIn("CRC", doc["checkpoints"][3]["error"])
        self.assertIsNone(run_json("ls", broken)["checkpoints"][3]["error"])  # only reading the data tells
        p = run("verify", broken)
        self.assertEqual(p.returncode, 1)
        self.assertIn("%s/ckpt/0000000004.npz: corrupt: " % broken, p.stdout)


class ShardedSteps(unittest.TestCase):
    """Steps of shards that managers with a communicator save on S3 (committed by their manifest, written last)."""

    @classmethod
    def setUpClass(cls):
        cls.logdir, cls.local = url("sharded"), path("sharded")
        make_sharded_run(cls.logdir, WORK)
        make_sharded_run(cls.local, WORK)

    def test_ls_lists_steps_and_files_together(self):
        got, expected = run_json("ls", self.logdir, "--verify"), run_json("ls", self.local, "--verify")
        check_ls(self, got)
        summary = lambda doc: [(c["index"], c["sharded"], c["arrays"], c["verdict"], c["error"],
                                without(c["metadata"], *TIMES)) for c in doc["checkpoints"]]
        self.assertEqual(summary(got), summary(expected))
        self.assertEqual([(c["index"], c["sharded"]) for c in got["checkpoints"]], [(1, True), (2, True), (3, False)])
        self.assertEqual([c["path"] for c in got["checkpoints"]],
                         [self.logdir + "/ckpt/0000000001", self.logdir + "/ckpt/0000000002",
                          self.logdir + "/ckpt/0000000003.npz"])

    def test_show_describes_a_step_as_on_disk(self):
        step, local = self.logdir + "/ckpt/0000000002", os.path.join(self.local, "ckpt", "0000000002")
        got, expected = run_json("show", step), run_json("show", local)
        check_show(self, got)
        self.assertEqual((got["path"], got["bytes"], got["step"], got["world_size"]), (step, None, 2, 2))
        self.assertEqual(
            dict(without(got, "path", "bytes", "shared_bytes"), metadata=without(got["metadata"], *TIMES)),
            dict(without(expected, "path", "bytes", "shared_bytes"), metadata=without(expected["metadata"], *TIMES)))
        p = run("show", step)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[0], step + ": sharded step 2 of 2 ranks, 3 variables")
        self.assertIn("rows in 2", p.stdout)

    def test_verify_finds_a_corrupt_shard(self):
        logdir = url("sharded-corrupt")
        make_sharded_run(logdir, WORK)
        shard = logdir + "/ckpt/0000000001/shard-00001-of-00002.npz"
        put_object(shard, get_object(shard)[:60])
        doc = run_json("verify", logdir, status=1)
        check_verify(self, doc)
        self.assertEqual([(f["path"], f["verdict"]) for f in doc["files"]],
                         [(logdir + "/ckpt/0000000001", "corrupt"), (logdir + "/ckpt/0000000002", "ok"),
                          (logdir + "/ckpt/0000000003.npz", "ok")])
        self.assertIn(shard + ": ", doc["files"][0]["error"])
        p = run("verify", logdir + "/ckpt/0000000002")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout, "%s/ckpt/0000000002: ok (sharded step, 3 arrays)\n" % logdir)


class Missing(unittest.TestCase):
    def test_a_missing_key_exits_3_naming_the_url(self):
        missing = url("no-such.npz")
        for args in (["show", missing], ["cat", missing, "w"], ["diff", missing, path("plain.npz")],
                     ["diff", path("plain.npz"), missing], ["convert", missing, path("out.npz")]):
            p = run(*args)
            self.assertEqual((p.returncode, p.stdout), (2 if args[0] == "diff" else 3, ""),
                             "%s: %s" % (args, p.stderr))
            self.assertTrue(p.stderr.startswith("ckpt: %s: " % missing), p.stderr)
            self.assertIn("HTTP 404 NoSuchKey", p.stderr)
        self.assertFalse(os.path.exists(path("out.npz")))
        doc = run_json("verify", missing, url("plain.npz"), status=3)
        self.assertEqual([(f["path"], f["verdict"]) for f in doc["files"]],
                         [(missing, "unreadable"), (url("plain.npz"), "ok")])
        self.assertTrue(doc["files"][0]["error"].startswith(missing + ": "))
        self.assertIn("HTTP 404 NoSuchKey", doc["files"][0]["error"])

    def test_a_missing_bucket_exits_3_naming_it(self):
        bucket = "ckpt-no-such-bucket-%d" % os.getpid()
        missing = "s3://%s/run/x.npz" % bucket
        p = run("show", missing)
        self.assertEqual(p.returncode, 3)
        self.assertTrue(p.stderr.startswith("ckpt: %s: " % missing), p.stderr)
        self.assertIn("HTTP 404 NoSuchBucket", p.stderr)
        for args in (["ls", "s3://%s/run" % bucket], ["convert", path("plain.npz"), missing]):
            p = run(*args)
            self.assertEqual(p.returncode, 3, args)
            self.assertTrue(p.stderr.startswith("ckpt: s3://%s/" % bucket), p.stderr)
            self.assertIn("NoSuchBucket", p.stderr)

    def test_a_prefix_without_checkpoints_is_not_found(self):
        nothing = url("nothing-here")
        p = run("ls", nothing)
        self.assertEqual((p.returncode, p.stdout), (3, ""))
        self.assertEqual(p.stderr, "ckpt: %s: not found: no checkpoints under %s/ckpt nor under %s itself (on S3 a "
                                   "directory is only the prefix of the keys under it)\n" % (nothing, nothing, nothing))
        p = run("ls", url("run"), "--subdir", "nothing-here")
        self.assertEqual(p.returncode, 3)
        self.assertIn("%s/nothing-here: not found" % url("run"), p.stderr)
        doc = run_json("verify", url("raw") + "/", status=3)
        self.assertEqual(doc["directories"][0]["checkpoints"], None)
        self.assertIn("not found", doc["directories"][0]["error"])


class WithoutLibckptS3(unittest.TestCase):
    """The program and libckpt installed without libckpt_s3: s3:// paths fail with libckpt's message."""

    @classmethod
    def setUpClass(cls):
        if ctypes.util.find_library("ckpt_s3"):
            raise unittest.SkipTest("a libckpt_s3 is installed where the loader finds it")
        cls.prefix = path("without-s3")
        os.makedirs(os.path.join(cls.prefix, "bin"))
        libdir = os.path.join(cls.prefix, "bin", os.path.relpath(os.path.dirname(LIBRARY), os.path.dirname(CLI)))
        os.makedirs(libdir)
        shutil.copy(CLI, os.path.join(cls.prefix, "bin", "ckpt"))  # its run path: the staged libdir, relative
        shutil.copy(os.path.realpath(LIBRARY), os.path.join(libdir, os.path.basename(LIBRARY)))
        cls.env = {"LD_LIBRARY_PATH": ""}

    def run_here(self, *args):
        return subprocess.run([os.path.join(self.prefix, "bin", "ckpt"), *args], capture_output=True, text=True,
                              env=dict(os.environ, **self.env), timeout=60)

    def test_s3_paths_fail_with_exit_4_and_the_librarys_message(self):
        target = url("plain.npz")
        for args, named in ((["show", target], target), (["cat", target, "w"], target),
                            (["diff", path("plain.npz"), target], target),
                            (["convert", path("plain.npz"), url("x.npz")], url("x.npz")),
                            (["ls", url("run")], url("run"))):
            p = self.run_here(*args)
            self.assertEqual((p.returncode, p.stdout), (2 if args[0] == "diff" else 4, ""),
                             "%s: %s" % (args, p.stderr))
            self.assertTrue(p.stderr.startswith("ckpt: %s: s3:// paths need libckpt_s3, which could not be loaded ("
                                                % named), p.stderr)
            self.assertIn("libckpt_s3.so.0", p.stderr)
        p = self.run_here("verify", target, "--json")
        self.assertEqual(p.returncode, 4)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["files"][0]["verdict"], "unreadable")  # no verdict on the content it never read
        self.assertIn("s3:// paths need libckpt_s3", doc["files"][0]["error"])

    def test_local_paths_still_work(self):
        p = self.run_here("show", path("plain.npz"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plain layout, 10 arrays", p.stdout)


if __name__ == "__main__":
    unittest.main()
