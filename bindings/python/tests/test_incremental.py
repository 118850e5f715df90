# SPDX-License-Identifier: Apache-2.0
"""Incremental saves (libckpt 0.9.0): chunk hashes, saves against a base, a manager's incremental saves."""
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ckpt
from ckpt import filesystem, writing

HERE = os.path.dirname(os.path.abspath(__file__))

CHUNKS = "__ckpt_chunks__"


def state(step):
    """A model of 1 MiB (64 chunks) and a scalar: a training step changes one element of it."""
    w = np.arange(256 * 1024, dtype=np.float32)
    w[1000] = step
    return {"w": w, "step": np.array(step, np.int64)}


def file_bytes(path, storage):
    if storage is None:
        with open(path, "rb") as f:
            return f.read()
    with filesystem.StorageFiles("memory", storage).open(path, "rb") as f:
        return f.read()


@pytest.fixture(params=["filesystem", "memory"])
def where(request, tmp_path):
    """(directory, storage): the local filesystem, whose clones this test's filesystem may refuse (the save then
    writes), or ckpt's memory storage, which clones by copying."""
    if request.param == "filesystem":
        yield str(tmp_path), None
        return
    memory = ckpt.NativeMemory()
    yield "", memory
    memory.close()


def test_chunk_hashes_are_a_member_numpy_lists_and_ckpt_hides(tmp_path):
    path = tmp_path / "a.npz"
    ckpt.save(path, state(1), chunk_hashes=True)
    with np.load(path) as data:
        assert CHUNKS in data.files and sorted(data.files) == sorted(["w", "step", CHUNKS])
        assert data[CHUNKS].dtype == np.uint8
        assert data["w"][1000] == 1
    assert list(ckpt.load(path)) == ["w", "step"]
    with ckpt.open(path) as f:
        assert f.keys() == ["w", "step"]
    ckpt.save(tmp_path / "plain.npz", state(1))
    with np.load(tmp_path / "plain.npz") as data:
        assert CHUNKS not in data.files


def test_a_save_against_a_base_is_the_bytes_of_a_full_save(where):
    directory, storage = where
    first, incremental, full = (os.path.join(directory, name) for name in ("1.npz", "2.npz", "full.npz"))
    ckpt.save(first, state(1), chunk_hashes=True, storage=storage)
    ckpt.save(incremental, state(2), base=first, storage=storage)
    ckpt.save(full, state(2), chunk_hashes=True, storage=storage)
    assert file_bytes(incremental, storage) == file_bytes(full, storage)
    back = ckpt.load(incremental, storage=storage)
    assert list(back) == ["w", "step"] and int(back["step"]) == 2
    np.testing.assert_array_equal(back["w"], state(2)["w"])
    if storage is None:
        with np.load(incremental) as data:
            np.testing.assert_array_equal(data["w"], state(2)["w"])
            assert CHUNKS in data.files


@pytest.mark.parametrize("base", ["missing.npz", "numpy.npz"])
def test_a_base_that_cannot_serve_makes_a_full_save(tmp_path, base):
    np.savez(tmp_path / "numpy.npz", **state(1))
    ckpt.save(tmp_path / "b.npz", state(2), base=tmp_path / base)
    ckpt.save(tmp_path / "full.npz", state(2), chunk_hashes=True)
    assert (tmp_path / "b.npz").read_bytes() == (tmp_path / "full.npz").read_bytes()
    with np.load(tmp_path / "b.npz") as data:
        np.testing.assert_array_equal(data["w"], state(2)["w"])


def test_a_collection_saves_against_a_base(tmp_path):
    live = state(1)
    with ckpt.Collection(live) as c:
        ckpt.save(tmp_path / "1.npz", c, chunk_hashes=True)
        live["w"][1000] = 2
        live["step"][...] = 2
        ckpt.save(tmp_path / "2.npz", c, base=tmp_path / "1.npz")
    ckpt.save(tmp_path / "full.npz", state(2), chunk_hashes=True)
    assert (tmp_path / "2.npz").read_bytes() == (tmp_path / "full.npz").read_bytes()


def shares(log):
    """The checkpoints whose saves the log says shared chunks with an earlier one."""
    return [int(message.split()[1]) for _, message in log if " shares " in message]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_manager_in_memory_saves_incrementally_unless_told_not_to(incremental):
    memory = ckpt.NativeMemory()
    log = []
    with ckpt.Manager("run", storage=memory, incremental=incremental,
                      log=lambda level, message: log.append((level, message))) as m:
        for step in (1, 2, 3):
            m.save(state(step), step)
        target = {"w": np.zeros(256 * 1024, np.float32), "step": np.array(0, np.int64)}
        assert m.restore(target)[0] == 3
        np.testing.assert_array_equal(target["w"], state(3)["w"])
        assert int(target["step"]) == 3
        with np.load(io.BytesIO(file_bytes(m.path(2), memory))) as data:
            assert (CHUNKS in data.files) == incremental
    assert shares(log) == ([2, 3] if incremental else [])
    memory.close()


def test_full_every_makes_every_nth_save_of_the_manager_share_nothing():
    memory = ckpt.NativeMemory()
    log = []
    with ckpt.Manager("run", storage=memory, full_every=2, log=lambda level, message: log.append((level, message))) \
            as m:
        for step in (1, 2, 3, 4, 5):
            m.save(state(step), step)
        assert m.read()[1]["w"][1000] == 5
    assert shares(log) == [3, 5]
    memory.close()


def test_a_negative_full_every_is_refused_by_the_library(tmp_path):
    with pytest.raises(ckpt.InvalidArgumentError, match="full_every"):
        ckpt.Manager(str(tmp_path), full_every=-1)


def test_a_library_before_0_9_refuses_what_it_lacks_and_still_saves(tmp_path, monkeypatch):
    monkeypatch.setattr(ckpt._native, "VERSION", (0, 8, 0))  # the structs passed are then of version 4
    with pytest.raises(ckpt.UnsupportedError) as e:
        ckpt.save(tmp_path / "a.npz", state(1), chunk_hashes=True)
    assert e.value.message == "ckpt.save(chunk_hashes=True) needs libckpt 0.9.0 or newer (this one is 0.8.0)"
    with pytest.raises(ckpt.UnsupportedError, match=r"^ckpt.save\(base=...\) needs libckpt 0.9.0 or newer"):
        ckpt.save(tmp_path / "a.npz", state(1), base=tmp_path / "a.npz")
    with pytest.raises(ckpt.UnsupportedError, match=r"^ckpt.Manager\(full_every=...\) needs libckpt 0.9.0"):
        ckpt.Manager(str(tmp_path), full_every=2)
    ckpt.save(tmp_path / "a.npz", state(1))
    with ckpt.Manager(str(tmp_path), incremental=False) as m:  # what such a library always does
        m.save(state(1), 1)
        assert m.read()[1]["w"][1000] == 1


def test_shared_bytes_of_a_file_written_whole_and_of_a_storage_that_cannot_tell(tmp_path):
    # XFS and btrfs, where incremental saves share blocks, are in the C tests and the tool's (ckpt show).
    ckpt.save(str(tmp_path / "a.npz"), state(1))
    assert filesystem.StorageFiles("local").shared_bytes(str(tmp_path / "a.npz")) in (0, None)  # None: tmpfs
    with pytest.raises(FileNotFoundError):
        filesystem.StorageFiles("local").shared_bytes(str(tmp_path / "missing.npz"))
    memory = ckpt.NativeMemory()
    files = filesystem.StorageFiles("memory", memory)
    files.makedirs("run")
    ckpt.save("run/a.npz", state(1), storage=memory)
    assert files.shared_bytes("run/a.npz") is None


@pytest.mark.parametrize("kind", ["SimpleWriter", "ThreadWriter", "ThreadQueueWriter"])
def test_a_writer_saves_arrays_against_the_save_before_it(tmp_path, kind):
    # The base is named as the filename is, in out_dir; a background save takes the one queued before it.
    depth = {"queue_depth": 2} if kind == "ThreadQueueWriter" else {}
    with getattr(writing, kind)(out_dir=str(tmp_path), **depth) as w:
        w.save_arrays("1.npz", "", state(1), chunk_hashes=True)
        w.save_arrays("2.npz", "", state(2), base="1.npz")
        w.save_arrays("3.npz", "", state(2), base=str(tmp_path / "missing.npz"))  # cannot serve: a full save
    ckpt.save(tmp_path / "full.npz", state(2), chunk_hashes=True)
    assert (tmp_path / "2.npz").read_bytes() == (tmp_path / "full.npz").read_bytes()
    assert (tmp_path / "3.npz").read_bytes() == (tmp_path / "full.npz").read_bytes()
    with np.load(tmp_path / "2.npz") as data:
        np.testing.assert_array_equal(data["w"], state(2)["w"])
        assert CHUNKS in data.files


SHARING_WRITER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from ckpt import filesystem, writing

    out_dir = sys.argv[1]
    w = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: 256 chunks
    with writing.ThreadQueueWriter(queue_depth=2) as writer:
        writer.save_arrays("1.npz", out_dir, {"w": w}, chunk_hashes=True)
        w[5] = -1  # chunk 0; the writer copied the array
        writer.save_arrays("2.npz", out_dir, {"w": w}, base="1.npz")
        writer.wait()
        print(json.dumps({"shared": filesystem.StorageFiles("local").shared_bytes(out_dir + "/2.npz"),
                          "equal": bool(np.array_equal(np.load(out_dir + "/2.npz")["w"], w))}))
""")


def test_a_writer_on_xfs_shares_the_unchanged_chunks_with_its_base(tmp_path):
    # On an XFS image with reflink, in a mount namespace of the script's own (no mount outlives the test).
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None or shutil.which("unshare") is None:
        pytest.skip("an XFS image needs root, mkfs.xfs (xfsprogs) and unshare")
    (tmp_path / "mnt").mkdir()
    env = dict(os.environ)
    if not env.get("CKPT_TEST_INSTALLED"):
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE)] + env.get("PYTHONPATH", "").split(os.pathsep))
    script = ('truncate -s 512m "$1/xfs.img" && mkfs.xfs -q -m reflink=1 "$1/xfs.img" >/dev/null 2>&1 && '
              'mount -o loop "$1/xfs.img" "$1/mnt" 2>/dev/null || exit 77\n'
              'exec "$2" -c "$3" "$1/mnt"\n')
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(tmp_path),
                           sys.executable, SHARING_WRITER], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode == 77:
        pytest.skip("cannot mount an XFS image here (no loop device?)")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["equal"], report
    assert 255 * 16384 <= report["shared"] <= 256 * 16384 + 8192, report  # every chunk but the one changed
