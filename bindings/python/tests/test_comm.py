"""Communicators (ckpt.Comm) and row splits (ckpt.Rows)."""
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
