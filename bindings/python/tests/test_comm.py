# SPDX-License-Identifier: Apache-2.0
"""Communicators (ckpt.Comm) and row splits (ckpt.Rows)."""
import io
import os
import numpy as np
import pytest

import ckpt
from ckpt._vars import Vars


class Solo(ckpt.Comm):
    """A world of one rank."""

    def get_rank(self):
        return 0

    def get_size(self):
        return 1

    def barrier(self):
        pass

    def all_reduce(self, value, op):
        return value

    def broadcast(self, data, root):
        return data

    def all_gather(self, data):
        return [data]


class Confused(Solo):
    def get_rank(self):
        return 3

    def get_size(self):
        return 2


class Failing(Solo):
    def get_size(self):
        raise RuntimeError("no world today")


def test_a_communicator_knows_its_rank_and_size():
    with Solo() as comm:
        assert (comm.rank, comm.size) == (0, 1)


def test_a_rank_outside_the_world_is_refused():
    with pytest.raises(ckpt.InvalidArgumentError, match="rank 3 of 2"):
        Confused()


def test_what_a_method_raises_is_in_the_error():
    with pytest.raises(ckpt.CkptError, match="communicator callback 'size' failed.*no world today"):
        Failing()


class LostLink(Solo):
    def all_gather(self, data):
        raise ConnectionError("peer 1 is gone")


def test_what_a_collective_raises_during_a_save_is_the_cause_of_the_error(tmp_path):
    with ckpt.Manager(str(tmp_path), comm=LostLink()) as m:
        with pytest.raises(ckpt.CkptError, match="communicator callback 'all_gather' failed.*peer 1 is gone") as e:
            m.save({"w": np.zeros(2)}, 1)
        assert isinstance(e.value.__cause__, ConnectionError)


def test_rows_mark_a_variable_as_part_of_a_global_array():
    v = Vars()
    try:
        v.add("emb", ckpt.Rows(np.zeros((2, 3), np.float32), 4, 10))
        v.add("w", np.zeros(3))
        assert v.rows(0) == (4, 10)
        assert v.rows(1) is None
        with pytest.raises(ckpt.InvalidArgumentError, match=r"not within \[0, 10\)"):
            v.add("bad", ckpt.Rows(np.zeros((2, 3), np.float32), 9, 10))
    finally:
        v.close()


def test_rows_outside_a_sharded_checkpoint_save_the_array_as_it_is(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ckpt.save(str(tmp_path / "x.npz"), {"emb": ckpt.Rows(a, 4, 10)})
    assert np.array_equal(np.load(str(tmp_path / "x.npz"))["emb"], a)
    out = ckpt.Rows(np.zeros((2, 3), np.float32), 4, 10)
    ckpt.restore(str(tmp_path / "x.npz"), {"emb": out})
    assert np.array_equal(out.array, a)


class ThreadWorld:
    """Ranks as threads of this process: each collective is a round in which every rank deposits and collects."""

    def __init__(self, size):
        import threading
        self.size = size
        self.slots = [None] * size
        self.barrier = threading.Barrier(size)

    def exchange(self, rank, value):
        self.barrier.wait()
        self.slots[rank] = value
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out


class ThreadComm(ckpt.Comm):
    def __init__(self, world, rank):
        self.world, self.my_rank = world, rank
        super().__init__()

    def get_rank(self):
        return self.my_rank

    def get_size(self):
        return self.world.size

    def barrier(self):
        self.world.exchange(self.my_rank, None)

    def all_reduce(self, value, op):
        values = self.world.exchange(self.my_rank, value)
        return {"min": min, "max": max, "sum": sum}[op](values)

    def broadcast(self, data, root):
        return self.world.exchange(self.my_rank, data)[root]

    def all_gather(self, data):
        return self.world.exchange(self.my_rank, data)


def run_ranks(size, body):
    import threading
    world = ThreadWorld(size)
    results, errors = [None] * size, [None] * size

    def run(rank):
        try:
            results[rank] = body(rank, ThreadComm(world, rank))
        except BaseException as e:  # reported on the main thread
            errors[rank] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def test_two_ranks_save_a_sharded_step_that_one_process_reads(tmp_path):
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)

    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm, keep=0) as m:
            rows = slice(0, 4) if rank == 0 else slice(4, 10)
            arrays = {"emb": ckpt.Rows(emb[rows].copy(), rows.start, 10), "own_%d" % rank: np.full(2, rank)}
            m.save(arrays, 7, metrics={"loss": 0.5})
            return m.list()

    assert run_ranks(2, save) == [[7], [7]]
    with ckpt.Step(str(tmp_path / "ckpt" / "0000000007")) as step:
        assert (step.index, step.world_size) == (7, 2)
        assert step.shards == ["shard-00000-of-00002.npz", "shard-00001-of-00002.npz"]
        assert sorted(step) == ["emb", "own_0", "own_1"]
        assert step.shape("emb") == (10, 3) and step.nbytes("emb") == 120 and step.pieces("emb") == 2 and step.pieces("own_1") == 0
        assert np.array_equal(step["emb"], emb)
        assert np.array_equal(step.rows("emb", 3, 4), emb[3:7])  # across both shards
        assert step.metadata["ckpt.metric.loss"] == "0.5" and step.metadata_value("ckpt.index") == "7"
    # A manager without a communicator restores rows of it in one process.
    with ckpt.Manager(str(tmp_path)) as m:
        part = ckpt.Rows(np.zeros((3, 3), np.float32), 5, 10)
        idx, _ = m.restore({"emb": part, "own_1": np.zeros(2, np.int64)})
        assert idx == 7
        assert np.array_equal(part.array, emb[5:8])


def test_a_rank_that_fails_makes_every_rank_raise_the_same_error(tmp_path):
    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm) as m:
            arrays = {"w": np.zeros(2)} if rank == 0 else {"w": np.ones(2)}  # a whole variable saved twice
            with pytest.raises(ckpt.InvalidArgumentError) as e:
                m.save(arrays, 1)
            return str(e.value)

    messages = run_ranks(2, save)
    assert messages[0] == messages[1]
    assert "variable 'w' is saved whole by rank 1 and also by another rank" in messages[0]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [".ckpt.lock"]


class ObjectStore:
    """Keys and their bytes, as a bucket has them: a "directory" is a prefix of keys, and nothing renames one."""

    def __init__(self):
        self.objects = {}

    def open(self, path, mode="rb"):
        if "r" in mode:
            return io.BytesIO(self.objects[path])
        objects = self.objects

        class Upload(io.BytesIO):
            def close(self):
                if not self.closed:
                    objects[path] = self.getvalue()  # visible complete, or not at all
                super().close()
        return Upload()

    def makedirs(self, path, exist_ok=True):
        pass  # prefixes exist when keys do

    def exists(self, path):
        return path in self.objects or self.isdir(path)

    def isdir(self, path):
        return path in ("", ".") or any(k.startswith(path.rstrip("/") + "/") for k in self.objects)

    def rename(self, src, dst):  # of one object: copy, then delete
        self.objects[dst] = self.objects.pop(src)

    def remove(self, path):
        del self.objects[path]

    def list(self, path):
        prefix = "" if path in ("", ".") else path.rstrip("/") + "/"
        return sorted({k[len(prefix):].split("/")[0] for k in self.objects if k.startswith(prefix)})


def test_a_sharded_step_on_an_object_store_is_committed_by_its_manifest():
    bucket = ObjectStore()
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)

    def save(rank, comm):
        with ckpt.Manager("run", comm=comm, keep=0, storage=bucket) as m:
            rows = slice(0, 5) if rank == 0 else slice(5, 10)
            for step in (1, 2):
                m.save({"emb": ckpt.Rows(emb[rows] * step, rows.start, 10)}, step)
            return m.list()

    assert run_ranks(2, save) == [[1, 2], [1, 2]]
    assert sorted(k for k in bucket.objects if k.startswith("run/ckpt/0000000002/")) == [
        "run/ckpt/0000000002/manifest.json", "run/ckpt/0000000002/shard-00000-of-00002.npz",
        "run/ckpt/0000000002/shard-00001-of-00002.npz"]
    assert not [k for k in bucket.objects if ".tmp-" in k]
    # A save cut short leaves shards without a manifest: no checkpoint, and the next manager's first save removes
    # them (restoring changes nothing).
    bucket.objects["run/ckpt/0000000003/shard-00000-of-00002.npz"] = bucket.objects[
        "run/ckpt/0000000002/shard-00000-of-00002.npz"]
    with ckpt.Manager("run", storage=bucket) as m:
        assert m.list() == [1, 2]
        part = ckpt.Rows(np.zeros((4, 3), np.float32), 3, 10)
        idx, _ = m.restore({"emb": part})
        assert idx == 2 and np.array_equal(part.array, emb[3:7] * 2)
        assert [k for k in bucket.objects if k.startswith("run/ckpt/0000000003/")]
        m.save({"emb": emb}, 4)
    assert not [k for k in bucket.objects if k.startswith("run/ckpt/0000000003/")]


def test_an_asynchronous_sharded_save_is_committed_by_the_next_collective_call(tmp_path):
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)

    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm, keep=0, asynchronous=True) as m:
            rows = slice(0, 5) if rank == 0 else slice(5, 10)
            piece = emb[rows].copy()
            m.save({"emb": ckpt.Rows(piece, rows.start, 10)}, 1)
            piece[:] = -1  # copied by the save: nothing on disk changes
            before = m.list()
            m.wait()
            return before, m.list()

    assert run_ranks(2, save) == [([], [1]), ([], [1])]
    with ckpt.Step(str(tmp_path / "ckpt" / "0000000001")) as step:
        assert np.array_equal(step["emb"], emb)


class LocalFiles:
    """The local file system as an fs object with directories that rename (and a count of those renames)."""

    def __init__(self):
        self.dir_renames = 0

    def open(self, path, mode="rb"):
        return open(path, mode)

    def makedirs(self, path, exist_ok=True):
        os.makedirs(path, exist_ok=exist_ok)

    def exists(self, path):
        return os.path.exists(path)

    def isdir(self, path):
        return os.path.isdir(path)

    def rename(self, src, dst):
        os.replace(src, dst)

    def rename_dir(self, src, dst):
        self.dir_renames += 1
        os.rename(src, dst)

    def rmdir(self, path):
        os.rmdir(path)

    def remove(self, path):
        os.remove(path)

    def list(self, path):
        return os.listdir(path)


def test_an_fs_object_with_rename_dir_commits_sharded_steps_by_renaming_them(tmp_path):
    fs = LocalFiles()
    emb = np.arange(12, dtype=np.float32).reshape(4, 3)

    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm, keep=1, storage=fs) as m:
            rows = slice(0, 2) if rank == 0 else slice(2, 4)
            for step in (1, 2):
                m.save({"emb": ckpt.Rows(emb[rows] + step, rows.start, 4)}, step)
            return m.list()

    assert run_ranks(2, save) == [[2], [2]]
    assert fs.dir_renames == 2  # one commit per step
    assert os.listdir(tmp_path / "ckpt") == ["0000000002"]  # step 1 removed by retention, its directory too
    with ckpt.Step(str(tmp_path / "ckpt" / "0000000002")) as step:
        assert np.array_equal(step["emb"], emb + 2)


def test_a_rank_with_a_negative_index_fails_every_rank_with_its_code_and_message(tmp_path):
    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm) as m:
            with pytest.raises(ckpt.InvalidArgumentError) as e:
                m.save({"w_%d" % rank: np.zeros(2)}, -1 if rank == 1 else 3)
            return str(e.value)

    messages = run_ranks(2, save)
    assert messages[0] == messages[1]
    assert "sharded save failed on rank 1 of 2: " in messages[0] and "checkpoint index -1 is negative" in messages[0]


def test_ranks_that_save_different_indices_all_fail(tmp_path):
    def save(rank, comm):
        with ckpt.Manager(str(tmp_path), comm=comm) as m:
            with pytest.raises(ckpt.InvalidArgumentError) as e:
                m.save({"w_%d" % rank: np.zeros(2)}, 3 + rank)
            return str(e.value), m.list()

    results = run_ranks(2, save)
    assert results[0] == results[1]
    assert "the ranks ask for different steps, from 3 to 4" in results[0][0] and results[0][1] == []
