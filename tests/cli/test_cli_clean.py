# SPDX-License-Identifier: Apache-2.0
"""ckpt clean: what a SIGKILLed save leaves behind is found and removed, nothing else is touched, and a directory a
training program's manager holds is refused."""
import glob
import os
import signal
import subprocess
import sys
import time

import numpy as np

from cli_run import CLI, child_env, run, run_json


def test_a_convert_killed_by_sigkill_leaves_a_temporary_that_clean_removes(tmp_path):
    src = tmp_path / "big.npz"
    np.savez(str(src), w=np.arange(48 << 20, dtype=np.uint32))  # 192 MiB: deflating it takes a few seconds
    out = tmp_path / "out.npz"
    np.savez(str(out), old=np.arange(3))
    before = out.read_bytes()
    (tmp_path / ".notes.tmp-abcdef").write_text("not ckpt's: no .npz")
    p = subprocess.Popen([CLI, "convert", str(src), str(out), "--deflate"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not glob.glob(str(tmp_path / ".out.npz.tmp-*")):
        assert p.poll() is None and time.monotonic() < deadline, "no temporary appeared"
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    assert p.wait(timeout=60) == -signal.SIGKILL
    temps = glob.glob(str(tmp_path / ".out.npz.tmp-*"))
    assert len(temps) == 1 and out.read_bytes() == before  # SIGKILL cannot be caught: the temporary stays

    listed = run_json("clean", tmp_path, "--dry-run")
    assert listed == {"directory": str(tmp_path), "dry_run": True, "found": [{"path": temps[0], "kind": "file"}]}
    assert os.path.exists(temps[0])

    p = run("clean", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "%s: removed 1 stale temporary left by interrupted saves:\n  %s\n" % (tmp_path, temps[0])
    assert not os.path.exists(temps[0])
    assert out.read_bytes() == before and (tmp_path / ".notes.tmp-abcdef").read_text() == "not ckpt's: no .npz"
    # What is left: the lock file clean took the directory with, as a manager does.
    assert sorted(os.listdir(str(tmp_path))) == [".ckpt.lock", ".notes.tmp-abcdef", "big.npz", "out.npz"]

    p = run("clean", tmp_path)
    assert (p.returncode, p.stdout) == (0, "%s: no stale temporaries\n" % tmp_path)
    assert run_json("clean", tmp_path) == {"directory": str(tmp_path), "dry_run": False, "removed": []}


HOLD = """if True:
    import sys
    import numpy as np
    import ckpt
    m = ckpt.Manager(sys.argv[1])
    m.save({"w": np.zeros(3)}, 1)  # takes the directory's lock
    print("held", flush=True)
    sys.stdin.read()
"""


def test_clean_refuses_while_a_manager_holds_the_directory_then_cleans_the_logdirs_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=child_env())
    ckpt_dir = run_dir / "ckpt"
    try:
        assert holder.stdout.readline() == b"held\n"
        stale = ckpt_dir / ".0000000002.npz.tmp-AbC123"  # as the holder's next save would be writing it
        stale.write_bytes(b"half a checkpoint")
        (ckpt_dir / "0000000003").mkdir()  # a sharded step whose manifest is not written yet
        p = run("clean", run_dir)
        assert p.returncode == 3 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
        assert "ckpt: " in p.stderr and "locked by another checkpoint manager" in p.stderr, p.stderr
        assert "pid %d" % holder.pid in p.stderr, p.stderr
        error = run_json("clean", run_dir, "--dry-run", status=3)["error"]
        assert error["name"] == "CKPT_EBUSY" and "pid %d" % holder.pid in error["message"]
        assert stale.exists() and (ckpt_dir / "0000000003").is_dir()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    got = run_json("clean", run_dir)
    assert got["directory"] == str(ckpt_dir)
    assert sorted((i["path"], i["kind"]) for i in got["removed"]) == [
        (str(ckpt_dir / ".0000000002.npz.tmp-AbC123"), "file"), (str(ckpt_dir / "0000000003"), "directory")]
    assert sorted(os.listdir(str(ckpt_dir))) == [".ckpt.lock", "0000000001.npz"]


def test_clean_of_a_missing_directory_is_exit_status_3(tmp_path):
    p = run("clean", tmp_path / "missing")
    assert p.returncode == 3 and "missing: not found" in p.stderr, p.stderr
    assert not (tmp_path / "missing").exists()
