# SPDX-License-Identifier: Apache-2.0
"""ckpt convert in bounded memory, from sharded steps, and interrupted by signals (no temporary left behind)."""
import glob
import os
import signal
import subprocess
import tempfile
import time

import numpy as np
import pytest

from cli_inputs import make_sharded_run
from cli_run import CLI, run

LIMIT_MIB = 64  # above the peak of converting a tiny file


def measured_env():
    """The environment of a run whose memory is measured. Under AddressSanitizer, freed memory waits in a quarantine
    of 256 MiB before reuse, which the peak would count: a small one keeps the peak the program's own."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env or os.environ.get("CKPT_TEST_PRELOAD"):
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "quarantine_size_mb=8"]))
    return env


def peak_mib(*args):
    """Runs the program under GNU time and returns (exit status, its peak RSS in MiB). Not os.wait4 from here: the
    kernel starts a child's peak at this (numpy-sized) process's own, which would hide the child's."""
    with tempfile.NamedTemporaryFile("r") as report:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, CLI, *map(str, args)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=measured_env())
        return p.returncode, int(report.read().split()[-1]) / 1024


def write_big(path, mib):
    """A stored .npz of one uint32 array of `mib` MiB (written in pieces: this process stays small), plus two
    small arrays; returns nothing, the values are arange."""
    n = (mib << 20) // 4
    header_npy = np.lib.format
    with open(path + ".w.npy", "wb") as f:
        header_npy.write_array_header_1_0(f, {"descr": "<u4", "fortran_order": False, "shape": (n,)})
        step = 1 << 22
        for start in range(0, n, step):
            f.write(np.arange(start, min(n, start + step), dtype=np.uint32).tobytes())
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        z.write(path + ".w.npy", "w.npy")
        z.writestr("s.npy", _npy(np.array(["ab", "xyz"])))
    os.remove(path + ".w.npy")


def _npy(a):
    import io
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def check_big(path, mib):
    z = np.load(path, mmap_mode=None)
    w = z["w"]
    n = (mib << 20) // 4
    assert w.shape == (n,) and w[0] == 0 and w[-1] == n - 1 and w.dtype == np.uint32
    assert np.array_equal(w[:: 1 << 16], np.arange(0, n, 1 << 16, dtype=np.uint32))
    assert list(z["s"]) == ["ab", "xyz"]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    path = str(d / "big.npz")
    write_big(path, 512)
    np.savez(str(d / "tiny.npz"), w=np.ones(3))
    return d


def test_convert_memory_stays_bounded_for_stored_and_deflated_inputs(big):
    status, base = peak_mib("convert", big / "tiny.npz", big / "tiny2.npz")
    assert status == 0
    status, stored = peak_mib("convert", big / "big.npz", big / "deflated.npz", "--deflate=1")
    assert status == 0
    status, deflated = peak_mib("convert", big / "deflated.npz", big / "stored.npz", "--store")
    assert status == 0
    status, both = peak_mib("convert", big / "deflated.npz", big / "deflated2.npz")
    assert status == 0
    assert stored - base < LIMIT_MIB, (base, stored)
    assert deflated - base < LIMIT_MIB, (base, deflated)
    assert both - base < LIMIT_MIB, (base, both)
    check_big(str(big / "deflated.npz"), 512)
    check_big(str(big / "stored.npz"), 512)
    check_big(str(big / "deflated2.npz"), 512)
    for f in ("stored.npz", "deflated.npz", "deflated2.npz"):
        os.remove(big / f)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_convert_leaves_the_old_file_and_no_temporary(big, sig):
    out = big / "out.npz"
    np.savez(str(out), old=np.arange(3))
    before = out.read_bytes()
    p = subprocess.Popen([CLI, "convert", str(big / "big.npz"), str(out), "--deflate"], stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 60
    while not glob.glob(str(big / ".out.npz.tmp-*")):
        assert p.poll() is None and time.monotonic() < deadline, "no temporary appeared"
        time.sleep(0.01)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -sig, (p.returncode, err)
    assert "ckpt: convert interrupted by" in err and err.count("\n") == 1, err
    assert out.read_bytes() == before
    assert glob.glob(str(big / ".*.tmp-*")) == []


def test_a_sharded_step_converts_to_one_file(tmp_path):
    make_sharded_run(str(tmp_path / "run"), cwd=str(tmp_path))
    step = tmp_path / "run" / "ckpt" / "0000000002"
    assert (step / "manifest.json").exists()
    p = run("convert", step, tmp_path / "one.npz")
    assert p.returncode == 0, p.stderr
    z = np.load(str(tmp_path / "one.npz"))
    emb = np.arange(12, dtype=np.float32).reshape(4, 3) + 2
    assert np.array_equal(z["emb"], emb) and z["emb"].dtype == np.float32
    assert np.array_equal(z["own_0"], np.full(2, 0)) and np.array_equal(z["own_1"], np.full(2, 1))
    assert sorted(k for k in z.files if not k.startswith("__")) == ["emb", "own_0", "own_1"]
    p = run("convert", step, tmp_path / "two.npz", "--deflate", "--layout", "objax")
    assert p.returncode == 0, p.stderr
    z = np.load(str(tmp_path / "two.npz"))
    assert list(z["names"]) == ["emb", "own_0", "own_1"] and np.array_equal(z["0"], emb)


def test_convert_records_chunk_hashes_and_re_saves_against_a_base(tmp_path):
    src, hashed, again = tmp_path / "in.npz", tmp_path / "hashed.npz", tmp_path / "again.npz"
    big = np.arange(1 << 18, dtype=np.float32)  # 1 MiB: 16 chunks
    np.savez(src, big=big, small=np.arange(3))
    p = run("convert", src, hashed, "--chunk-hashes")
    assert p.returncode == 0, p.stderr
    with np.load(hashed) as z:
        assert sorted(z.files) == ["__ckpt_chunks__", "big", "small"]  # numpy sees the table as a uint8 array
        assert z["__ckpt_chunks__"].dtype == np.uint8
        np.testing.assert_array_equal(z["big"], big)
    # Against itself (a re-save, which shares everything where the filesystem clones): the same bytes.
    before = hashed.read_bytes()
    p = run("convert", hashed, hashed, "--base", hashed)
    assert p.returncode == 0, p.stderr
    assert hashed.read_bytes() == before
    p = run("convert", hashed, again, "--base", src)  # a base without a table: a full save, the same file
    assert p.returncode == 0, p.stderr
    assert again.read_bytes() == before
    shown = run("show", hashed)
    assert shown.returncode == 0 and "__ckpt_chunks__" not in shown.stdout, shown.stdout


def test_show_says_how_much_of_a_file_shares_its_blocks_after_a_convert_against_a_base(tmp_path):
    # On an XFS image, in a mount namespace of the commands' own (so that no mount outlives the test): OUT shares
    # every unchanged 16 KiB chunk with its base, and show says so; on this test's own directory nothing is shared.
    import json
    import shutil
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None or shutil.which("unshare") is None:
        pytest.skip("an XFS image needs root, mkfs.xfs (xfsprogs) and unshare")
    src = tmp_path / "in.npz"
    big = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: 256 chunks
    np.savez(src, big=big, small=np.arange(3))
    (tmp_path / "mnt").mkdir()
    script = (
        "truncate -s 512m {d}/xfs.img && mkfs.xfs -q -m reflink=1 {d}/xfs.img >/dev/null 2>&1 && "
        "mount -o loop {d}/xfs.img {d}/mnt 2>/dev/null || exit 77\n"
        "set -e\n"
        "{cli} convert {src} {d}/mnt/a.npz --chunk-hashes\n"
        "{cli} convert {d}/mnt/a.npz {d}/mnt/b.npz --base {d}/mnt/a.npz\n"
        "{cli} show {d}/mnt/b.npz --json > {d}/shown.json\n"
        "{cli} show {d}/mnt/b.npz > {d}/shown.txt\n"
        "cp {d}/mnt/b.npz {d}/b.npz\n").format(d=tmp_path, cli=CLI, src=src)
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=300)
    if p.returncode == 77:
        pytest.skip("cannot mount an XFS image here (no loop device?)")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "shown.json").read_text())
    assert doc["shared_bytes"] >= big.nbytes, doc  # the array, and the blocks around it
    assert doc["shared_bytes"] <= doc["bytes"]
    assert "with other files" in (tmp_path / "shown.txt").read_text()
    with np.load(tmp_path / "b.npz") as z:
        np.testing.assert_array_equal(z["big"], big)
    # A copy is a file of its own: nothing shared, and no line about it.
    here = run("show", tmp_path / "b.npz", "--json")
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout)["shared_bytes"] in (0, None)
    assert "with other files" not in run("show", tmp_path / "b.npz").stdout
