# SPDX-License-Identifier: Apache-2.0
"""ckpt.Manager: numbered checkpoints, retention, resume from the latest good one, locking, background saves."""
import os

import numpy as np
import pytest

import ckpt


def user(metadata):
    """The caller's keys: every manager save adds its own "ckpt." keys (index, time, version, metrics)."""
    return {k: v for k, v in metadata.items() if not k.startswith("ckpt.")}


def arrays(step):
    return {"w": np.full((2, 2), float(step), np.float32), "step": np.array(step, np.int64)}


def test_save_list_restore_read_and_retention(tmp_path):
    with ckpt.Manager(str(tmp_path), keep=2, keep_every=10) as m:
        assert m.latest() is None and m.list() == []
        with pytest.raises(FileNotFoundError):
            m.restore(arrays(0))
        for step in (5, 10, 11, 12):
            m.save(arrays(step), step, metadata={"step": str(step)})
        assert m.list() == [10, 11, 12] and m.latest() == 12  # 10 is a multiple of keep_every
        target = arrays(0)
        idx, meta = m.restore(target)
        assert idx == 12 and user(meta) == {"step": "12"} and int(target["step"]) == 12
        assert meta["ckpt.index"] == "12"
        idx, back = m.read(10)
        assert idx == 10 and back["w"].tolist() == [[10, 10], [10, 10]] and user(back.metadata) == {"step": "10"}
        assert m.path(11) == os.path.join(str(tmp_path), "ckpt", "0000000011.npz")
        assert ckpt.checkpoint_idx(m.path(11)) == 11
    with pytest.raises(ValueError):
        ckpt.checkpoint_idx("model.npz")


def test_restore_falls_back_past_a_corrupt_newest_checkpoint_and_logs_it(tmp_path):
    messages = []
    with ckpt.Manager(str(tmp_path), log=lambda level, msg: messages.append((level, msg))) as m:
        m.save(arrays(1), 1)
        m.save(arrays(2), 2)
        with open(m.path(2), "r+b") as f:
            f.truncate(100)
        target = arrays(0)
        assert m.restore(target)[0] == 1 and int(target["step"]) == 1
    assert any(level == 2 and "0000000002.npz" in msg for level, msg in messages)
    with ckpt.Manager(str(tmp_path), fallback=False) as m:
        with pytest.raises(ckpt.FormatError):
            m.restore(arrays(0))


def test_a_manager_locks_nothing_until_its_first_save(tmp_path):
    with ckpt.Manager(str(tmp_path)) as m:
        m.save(arrays(1), 1)
    os.remove(str(tmp_path / "ckpt" / ".ckpt.lock"))
    with ckpt.Manager(str(tmp_path)) as m:
        assert m.list() == [1] and m.restore(arrays(0))[0] == 1 and m.read()[0] == 1
        assert sorted(os.listdir(str(tmp_path / "ckpt"))) == ["0000000001.npz"]
        m.save(arrays(2), 2)
        assert sorted(os.listdir(str(tmp_path / "ckpt"))) == [".ckpt.lock", "0000000001.npz", "0000000002.npz"]


def test_a_second_manager_of_this_process_takes_the_directory_over_with_a_warning(tmp_path):
    old_log, new_log = [], []
    old = ckpt.Manager(str(tmp_path), log=lambda level, msg: old_log.append((level, msg)))
    old.save(arrays(1), 1)
    new = ckpt.Manager(str(tmp_path), log=lambda level, msg: new_log.append((level, msg)))
    new.save(arrays(2), 2)
    assert [level for level, msg in new_log if "took the directory over" in msg] == [2]
    with pytest.raises(ckpt.BusyError, match="another checkpoint manager of this process took the directory over"):
        old.save(arrays(3), 3)
    old.close()
    new.save(arrays(3), 3)
    assert new.list() == [1, 2, 3]
    new.close()


def test_the_managers_keys_a_restore_brought_are_replaced_by_a_save_and_left_out_of_a_plain_save(tmp_path):
    with ckpt.Manager(str(tmp_path)) as m:
        m.save(arrays(1), 1, metadata={"note": "mine"}, metrics={"loss": 0.5})
        _, restored = m.read(1)
        assert restored.metadata["ckpt.index"] == "1" and restored.metadata["ckpt.metric.loss"] == "0.5"
        m.save(restored, 5, metadata=restored.metadata)
        again = m.read(5)[1].metadata
    assert again["ckpt.index"] == "5" and "ckpt.metric.loss" not in again and again["note"] == "mine"
    ckpt.save(str(tmp_path / "model.npz"), restored, metadata=restored.metadata)
    assert ckpt.load(str(tmp_path / "model.npz")).metadata == {"note": "mine"}


def test_background_saves_copy_the_arrays_and_report_errors(tmp_path):
    live = arrays(3)
    with ckpt.Manager(str(tmp_path), asynchronous=True) as m:
        m.save(live, 3)
        live["w"][...] = -1  # changed right after the call: the save has its own copy
        m.wait()
        assert m.read(3)[1]["w"].tolist() == [[3, 3], [3, 3]]
    full = FullDisk()
    with ckpt.Manager("run", storage=full, asynchronous=True) as m:
        m.save(arrays(1), 1)
        with pytest.raises(ckpt.StorageError, match="No space left"):
            m.wait()
        m.wait()  # reported once
        assert m.list() == []


class FullDisk(ckpt.MemoryFiles):
    """A storage whose every new file fails to be written."""

    def open(self, path, mode="rb"):
        if "w" in mode:
            raise OSError(28, "No space left on device", path)
        return super().open(path, mode)


def test_a_memory_storage_holds_a_whole_manager_directory():
    fs = ckpt.MemoryFiles()
    with ckpt.Manager("run", storage=fs, keep=1) as m:
        m.save(arrays(1), 1)
        m.save(arrays(2), 2)
        assert m.list() == [2]
    assert sorted(p for p in fs.files if p.endswith(".npz")) == ["run/ckpt/0000000002.npz"]
    with ckpt.Manager("run", storage=fs) as m:
        assert m.read()[1]["w"].tolist() == [[2, 2], [2, 2]]


def test_ckpts_native_memory_storage_serves_a_manager():
    mem = ckpt.NativeMemory()
    with ckpt.Manager("run", storage=mem, keep=2) as m:
        for step in (1, 2, 3):
            m.save(arrays(step), step)
        assert m.list() == [2, 3]
    with ckpt.Manager("run", storage=mem) as m:
        assert m.restore(arrays(0))[0] == 3
    mem.close()


def test_a_manager_saves_and_restores_a_collection(tmp_path):
    live = arrays(4)
    with ckpt.Collection(live) as c, ckpt.Manager(str(tmp_path)) as m:
        m.save(c, 4, metadata={"step": "4"})
        live["w"][...] = 0
        idx, meta = m.restore(c)
        assert idx == 4 and user(meta) == {"step": "4"}
        assert live["w"].tolist() == [[4, 4], [4, 4]]


def test_a_read_only_manager_reads_a_directory_another_holds(tmp_path):
    with ckpt.Manager(str(tmp_path)) as owner:
        owner.save(arrays(1), 1)
        with ckpt.Manager(str(tmp_path), read_only=True) as reader:
            assert reader.list() == [1]
            target = arrays(0)
            assert reader.restore(target)[0] == 1 and int(target["step"]) == 1
            with pytest.raises(ckpt.InvalidArgumentError, match="read-only"):
                reader.save(arrays(2), 2)
    with pytest.raises(FileNotFoundError):
        ckpt.Manager(str(tmp_path / "missing"), read_only=True)
    assert not (tmp_path / "missing").exists()


def test_metrics_are_recorded_read_back_and_keep_the_best_with_the_latest(tmp_path):
    opts = dict(keep=1, keep_best=2, best_metric="loss")
    with ckpt.Manager(str(tmp_path), **opts) as m:
        assert m.best() is None
        for step, loss in ((10, 0.5), (20, 0.2), (30, 0.9), (40, 0.8)):
            m.save(arrays(step), step, metrics={"loss": loss, "acc": 1 - loss})
        m.save(arrays(45), 45, metrics={"loss": float("nan")})  # never the best
        assert m.list() == [10, 20, 45]
        assert m.metric(20, "loss") == 0.2 and m.metric(20, "acc") == 0.8
        assert m.metric(20, "missing") is None
        with pytest.raises(FileNotFoundError):
            m.metric(30, "loss")
        idx, meta = m.read(20)
        assert meta.metadata["ckpt.metric.loss"] == "0.2" and meta.metadata["ckpt.index"] == "20"
    with ckpt.Manager(str(tmp_path), **opts) as m:  # after a restart the files still say what is best
        assert m.best() == 20
        m.save(arrays(50), 50, metrics={"loss": 0.7})
        assert m.list() == [10, 20, 50]
        assert m.restore(arrays(0))[0] == 50
    with ckpt.Manager(str(tmp_path), best_metric="loss", best_mode="max") as m:
        assert m.best() == 50
    with pytest.raises(ValueError):
        ckpt.Manager(str(tmp_path), best_mode="lowest")


def test_should_save_every_n_steps_and_on_request(tmp_path):
    with ckpt.Manager(str(tmp_path), save_every_steps=10) as m:
        assert [s for s in range(1, 31) if m.should_save(s)] == [10, 20, 30]
        m.request_save()
        assert m.should_save(3) and not m.should_save(3)
    with ckpt.Manager(str(tmp_path), save_every_seconds=3600) as m:
        assert not m.should_save(1)
        with pytest.raises(ValueError):
            m.should_save(-1)


def test_clean_removes_what_interrupted_saves_left_and_refuses_while_another_process_holds_the_directory(tmp_path):
    import subprocess
    import sys
    d = tmp_path / "ckpt"
    with ckpt.Manager(str(tmp_path)) as m:
        m.save(arrays(1), 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, ckpt, numpy as np\n"
         "m = ckpt.Manager(sys.argv[1]); m.save({'x': np.zeros(1)}, 9); print('held', flush=True); sys.stdin.read()",
         str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
             [os.path.dirname(os.path.dirname(ckpt.__file__))] + [p for p in [os.environ.get("PYTHONPATH")] if p])))
    try:
        assert holder.stdout.readline() == b"held\n"
        # Left by saves interrupted after the holder's first save, which removes those of checkpoints.
        stale = [d / ".0000000002.npz.tmp-AbC123", d / ".model.npz.tmp-zZ09yY"]
        for p in stale:
            p.write_bytes(b"half a save")
        (d / "notes.txt").write_text("mine")
        with ckpt.Manager(str(tmp_path)) as m:
            with pytest.raises(ckpt.BusyError, match="pid %d" % holder.pid):
                m.clean()
    finally:
        holder.stdin.close()
        holder.wait()
    assert all(p.exists() for p in stale)
    with ckpt.Manager(str(tmp_path)) as m:
        assert sorted(m.clean(dry_run=True)) == sorted(map(str, stale))
        assert all(p.exists() for p in stale)
        assert sorted(m.clean()) == sorted(map(str, stale))
        assert m.clean() == []
        assert m.list() == [1, 9]
    assert not any(p.exists() for p in stale) and (d / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("compression", [None, "deflate"])
def test_a_source_saves_through_the_manager_sync_and_async(tmp_path, asynchronous, compression):
    a = np.arange(3 << 20, dtype=np.float32)
    raw = a.tobytes()
    asked = []

    def read(offset, size):
        asked.append(size)
        return raw[offset:offset + size]

    with ckpt.Manager(str(tmp_path), asynchronous=asynchronous, compression=compression) as m:
        m.save({"w": ckpt.Source(np.float32, a.shape, read), "step": np.array(1)}, 1)
        m.wait()
        _, back = m.read(1)
    assert np.array_equal(back["w"], a) and int(back["step"]) == 1
    assert asked and max(asked) <= 4 << 20  # in pieces, never the whole array at once
    with np.load(os.path.join(str(tmp_path), "ckpt", "0000000001.npz")) as z:
        assert np.array_equal(z["w"], a)
