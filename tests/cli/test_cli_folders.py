# SPDX-License-Identifier: Apache-2.0
"""What users hit on folders of files: verify of a folder of .npz files checks every one of them, `ls` and
`verify` name broken files with the same words, and a dry run of clean only reads."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from cli_run import run, run_json, snapshot
from cli_schema import check_ls, check_verify


def folder_with_three_broken(d):
    """Five .npz files named by the user (no manager's numbering): two good, one corrupt, one no npz, one with
    content ckpt does not read; and a text file that is no checkpoint at all."""
    np.savez(str(d / "a.npz"), w=np.arange(6.0))
    np.savez_compressed(str(d / "b.npz"), w=np.ones(3, np.float32))
    data = (d / "a.npz").read_bytes()
    at = data.find(np.arange(6.0).tobytes())
    (d / "c-corrupt.npz").write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    (d / "d-torch.npz").write_text("this is not a zip file, as torch legacy pickles are not\n")
    np.savez(str(d / "e-object.npz"), o=np.array([{"a": 1}], dtype=object))
    (d / "notes.txt").write_text("not a checkpoint")


EXPECTED = [("a.npz", "ok"), ("b.npz", "ok"), ("c-corrupt.npz", "corrupt"), ("d-torch.npz", "not-npz"),
            ("e-object.npz", "unsupported")]


def test_verify_of_a_folder_checks_every_npz_file_in_it(tmp_path):
    folder_with_three_broken(tmp_path)
    for args, cwd in (([str(tmp_path)], None), (["."], str(tmp_path)), ([".", "--subdir", ""], str(tmp_path)),
                      ([str(tmp_path.parent), "--subdir", tmp_path.name], None)):
        p = run("verify", *args, cwd=cwd)
        assert p.returncode == 1, (args, p.returncode, p.stdout, p.stderr)
        lines = p.stdout.splitlines()
        assert [line.split(": ")[0].split("/")[-1] for line in lines[:-1]] == [n for n, _ in EXPECTED], lines
        assert lines[-1] == "5 files: 2 ok, 1 corrupt, 1 unsupported, 1 not npz checkpoint", lines
        assert "no such directory" not in p.stdout + p.stderr

    doc = run_json("verify", tmp_path, status=1)
    check_verify(self_check(), doc)
    assert [(os.path.basename(f["path"]), f["verdict"]) for f in doc["files"]] == EXPECTED
    assert doc["directories"] == [{"path": str(tmp_path), "checkpoints": 5, "error": None}]
    assert doc["summary"] == {"files": 5, "ok": 2, "corrupt": 1, "unsupported": 1, "unreadable": 0, "not_npz": 1}
    # ls lists the same files (`--subdir ""` too), so the two agree on what a folder holds.
    listed = run_json("ls", tmp_path, "--subdir", "", "--verify", status=1)
    assert [(os.path.basename(c["path"]), c["verdict"]) for c in listed["checkpoints"]] == EXPECTED


def test_a_folder_of_good_files_is_ok_and_one_without_any_is_not(tmp_path):
    np.savez(str(tmp_path / "a.npz"), w=np.arange(3))
    p = run("verify", tmp_path)
    assert (p.returncode, p.stdout) == (0, "%s/a.npz: ok (1 array, %s B)\n" % (tmp_path, (tmp_path / "a.npz")
                                                                                .stat().st_size))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    for args in ([empty], [empty, "--subdir", ""], [tmp_path, "--subdir", "empty"]):
        p = run("verify", *args)
        assert p.returncode == 3, (args, p.returncode, p.stdout)
        assert p.stdout == "%s: nothing to verify: no checkpoints and no .npz files or sharded steps in it\n" % empty
        doc = run_json("verify", *args, status=3)
        assert doc["files"] == [] and doc["directories"][0]["error"].startswith("%s: nothing to verify" % empty)
    # A manager's directory without checkpoints yet: nothing verified is no success either.
    (tmp_path / "run" / "ckpt").mkdir(parents=True)
    p = run("verify", tmp_path / "run")
    assert (p.returncode, p.stdout.split(": ")[:2]) == (3, [str(tmp_path / "run" / "ckpt"), "nothing to verify"])


def self_check():
    """check_verify and check_ls take a unittest.TestCase for its assertions."""
    import unittest

    class Checks(unittest.TestCase):
        def runTest(self):
            pass
    return Checks()


def test_ls_and_verify_use_the_same_words_for_broken_files(tmp_path):
    folder_with_three_broken(tmp_path)
    shutil.copy(str(tmp_path / "a.npz"), str(tmp_path / "f-unreadable.npz"))
    os.chmod(str(tmp_path / "f-unreadable.npz"), 0)
    as_root = os.geteuid() == 0  # root reads it anyway
    expected = dict(EXPECTED, **{"f-unreadable.npz": "ok" if as_root else "unreadable"})
    doc = run_json("ls", tmp_path, status=3 if not as_root else 1)
    check_ls(self_check(), doc)
    verdicts = run_json("verify", tmp_path, status=3 if not as_root else 1)["files"]
    # ls without --verify opens each file (it reads no data): the corrupt data of c needs --verify; the others
    # are named by what opening them finds, in verify's words.
    words = {os.path.basename(c["path"]): c for c in doc["checkpoints"]}
    assert words["d-torch.npz"]["verdict"] is None
    assert [os.path.basename(v["path"]) for v in verdicts] == sorted(expected)
    p = run("ls", tmp_path)
    rows = {line.split()[0]: line for line in p.stdout.splitlines()[2:] if line.split()[0].endswith(".npz")}
    assert "not-npz" in rows["d-torch.npz"] and "unreadable" not in rows["d-torch.npz"], rows
    assert "unsupported" in rows["e-object.npz"] and "unreadable" not in rows["e-object.npz"], rows
    assert "ok" not in rows["a.npz"].split()  # no verdict claimed for what was not verified
    with_verify = run("ls", tmp_path, "--verify")
    rows = {line.split()[0]: line.split() for line in with_verify.stdout.splitlines()[2:]
            if line.split()[0].endswith(".npz")}
    for name, verdict in expected.items():
        assert verdict in rows[name], (name, rows[name])
    # --json: a file that did not open has the problem's word in "problem", with or without --verify.
    assert words["d-torch.npz"]["problem"] == "not-npz" and words["e-object.npz"]["problem"] == "unsupported"
    assert words["a.npz"]["problem"] is None and words["c-corrupt.npz"]["problem"] is None


def read_only_mount(src, target):
    """A read-only bind mount of src at target (tests run as root, where permission bits stop no write)."""
    target.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(target)], capture_output=True).returncode != 0:
        return False
    if subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True).returncode != 0:
        subprocess.run(["umount", str(target)])
        return False
    return True


def test_clean_dry_run_only_reads(tmp_path):
    run_dir = tmp_path / "run" / "ckpt"
    run_dir.mkdir(parents=True)
    np.savez(str(run_dir / "0000000001.npz"), w=np.arange(3))
    (run_dir / ".0000000002.npz.tmp-AbC123").write_bytes(b"half")
    before = snapshot(str(tmp_path))
    got = run_json("clean", tmp_path / "run", "--dry-run")
    assert got == {"directory": str(run_dir), "dry_run": True,
                   "found": [{"path": str(run_dir / ".0000000002.npz.tmp-AbC123"), "kind": "file"}]}
    p = run("clean", tmp_path / "run", "-n")
    assert p.returncode == 0 and "would remove 1 stale temporary" in p.stdout, p.stdout + p.stderr
    assert snapshot(str(tmp_path)) == before  # no .ckpt.lock, nothing else either
    assert not (run_dir / ".ckpt.lock").exists()
    os.utime(str(run_dir), (1, 1))
    run("clean", tmp_path / "run", "--dry-run")
    assert os.stat(str(run_dir)).st_mtime == 1



def test_clean_dry_run_works_on_a_read_only_mount(tmp_path):
    run_dir = tmp_path / "run" / "ckpt"
    run_dir.mkdir(parents=True)
    np.savez(str(run_dir / "0000000001.npz"), w=np.arange(3))
    (run_dir / ".0000000002.npz.tmp-AbC123").write_bytes(b"half")
    mounted = tmp_path / "ro"
    if not read_only_mount(tmp_path / "run", mounted):
        pytest.skip("a read-only bind mount needs mount privileges (CAP_SYS_ADMIN), which this run lacks")
    try:
        p = run("clean", mounted, "--dry-run")
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout == ("%s: would remove 1 stale temporary left by interrupted saves:\n  %s\n"
                            % (mounted / "ckpt", mounted / "ckpt" / ".0000000002.npz.tmp-AbC123"))
        p = run("clean", mounted)  # a real clean there cannot write: said so, status 3
        assert p.returncode == 3 and "ckpt: " in p.stderr, (p.returncode, p.stdout, p.stderr)
    finally:
        subprocess.run(["umount", str(mounted)])
