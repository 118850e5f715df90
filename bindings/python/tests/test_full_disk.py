# SPDX-License-Identifier: Apache-2.0
"""torch.save through every writer onto a really full filesystem (a 1 MiB tmpfs this test mounts): the process
survives (torch's C++ writer calls the file object's write, and an exception there ends the process), the save
raises a ckpt.StorageError that is an OSError with errno ENOSPC naming the target, and the previous file at that
path is intact. Needs root and a kernel that lets it mount (skipped, saying why, where it cannot)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
WRITERS = ["SimpleWriter", "ThreadWriter", "ThreadQueueWriter", "ProcessWriter", "ProcessQueueWriter"]

SCRIPT = textwrap.dedent("""
    import errno, json, os, sys
    import torch
    import ckpt
    from ckpt import writing

    kind, out_dir = sys.argv[1], sys.argv[2]
    w = getattr(writing, kind)(out_dir=out_dir)
    report = {}
    try:
        w("model.pt", "", {"w": torch.ones(1 << 20)})  # 4 MiB, on a 1 MiB filesystem
        w.finalize()
    except BaseException as e:
        report = {"types": [c.__name__ for c in type(e).__mro__], "errno": getattr(e, "errno", None),
                  "strerror": getattr(e, "strerror", None), "filename": getattr(e, "filename", None),
                  "message": str(e)}
    w.finalize()
    print(json.dumps(report))
""")


@pytest.fixture
def full_disk(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (euid %d)" % os.geteuid())
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % (done.stderr.strip() or done.returncode))
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("kind", WRITERS)
def test_torch_save_onto_a_full_disk_raises_ENOSPC_and_keeps_the_previous_file(full_disk, kind):
    previous = full_disk / "model.pt"
    torch.save({"w": torch.arange(4.0)}, str(previous))
    env = dict(os.environ)
    if not env.get("CKPT_TEST_INSTALLED"):
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE)] + env.get("PYTHONPATH", "").split(os.pathsep))
    done = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(full_disk)], capture_output=True, text=True,
                          env=env, cwd=str(full_disk.parent), timeout=300)
    assert done.returncode == 0, "the process ended with %d:\n%s" % (done.returncode, done.stderr)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "StorageError" in report["types"] and "OSError" in report["types"], report
    assert report["errno"] == 28 and report["strerror"] == os.strerror(28), report  # ENOSPC
    assert report["filename"] == str(previous), report
    assert report["message"].startswith(str(previous) + ": "), report
    assert "No space left on device" in report["message"], report
    assert torch.equal(torch.load(str(previous))["w"], torch.arange(4.0))
    assert sorted(os.listdir(full_disk)) == ["model.pt"]  # no temporary left behind
