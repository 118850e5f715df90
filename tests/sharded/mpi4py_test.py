# SPDX-License-Identifier: Apache-2.0
"""ckpt.MPIComm between the processes of `mpirun -np N python3 mpi4py_test.py`: an asynchronous sharded save of
row-split and whole variables, restored bit-exact on every rank; a rank whose save fails makes every rank raise
the same error, naming it; numpy reads a shard."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import ckpt  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
ROWS = 12


def rows_of(r):
    base, extra = divmod(ROWS, size)
    begin = r * base + min(r, extra)
    return begin, begin + base + (1 if r < extra else 0)


def state(step):
    b, e = rows_of(rank)
    emb = (np.arange(ROWS * 4, dtype=np.float32).reshape(ROWS, 4) + step * 1000)[b:e].copy()
    return {"emb": ckpt.Rows(emb, b, ROWS), "own_%d" % rank: np.full(3, rank * 10 + step, np.int64)}




def fail_fast(kind, value, tb):
    """A failing rank ends the whole job at once: otherwise the others wait at a collective until the timeout."""
    sys.__excepthook__(kind, value, tb)
    sys.stderr.flush()
    world.Abort(1)


sys.excepthook = fail_fast
tmp = world.bcast(tempfile.mkdtemp(prefix="ckpt-mpi4py-") if rank == 0 else None, root=0)
comm = ckpt.MPIComm()
assert (comm.rank, comm.size) == (rank, size)

with ckpt.Manager(tmp, comm=comm, keep=2, asynchronous=True) as m:
    for step in (1, 2, 3):
        m.save(state(step), step, metrics={"loss": 1.0 / step})
    m.wait()
    assert m.list() == [2, 3], m.list()
    back = state(0)
    for v in back.values():
        (v.array if isinstance(v, ckpt.Rows) else v)[...] = -1
    idx, _ = m.restore(back)
    want = state(3)
    assert idx == 3
    assert np.array_equal(back["emb"].array, want["emb"].array)
    assert np.array_equal(back["own_%d" % rank], want["own_%d" % rank])

    # A whole variable saved by two ranks: every rank raises the same error, nothing is committed.
    bad = state(4)
    bad["shared"] = np.zeros(2)
    try:
        m.save(bad, 4)
        m.wait()
        raise AssertionError("no error")
    except ckpt.InvalidArgumentError as e:
        message = str(e)
    assert world.allgather(message) == [message] * size
    assert "variable 'shared' is saved whole by rank 1 and also by another rank" in message, message
    assert m.list() == [2, 3]
comm.close()
world.Barrier()  # every rank is done with the directory before rank 0 reads a shard and removes it

if rank == 0:
    with np.load(os.path.join(tmp, "ckpt", "0000000003", "shard-00000-of-%05d.npz" % size)) as f:
        assert np.array_equal(f["emb"], state(3)["emb"].array)
    shutil.rmtree(tmp)
world.Barrier()
if rank == 0:
    print("PASS: %d ranks" % size)
