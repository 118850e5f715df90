# SPDX-License-Identifier: Apache-2.0
"""One rank of a torch.distributed job over gloo (torchrun's environment: MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE) that saves, restores and fails sharded steps through ckpt.TorchComm; test_torch_comm.py starts the
ranks and reads what each wrote to <dir>/result-<world>-<rank>.json.

    torch_ranks.py <dir> <scenario>...      scenarios: save, restore, storage_fails, rows_past_end
"""
import datetime
import json
import os
import sys

import numpy as np
import torch.distributed as dist

here = os.path.dirname(os.path.abspath(__file__))
if not os.environ.get("CKPT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(here, ".."))
import ckpt  # noqa: E402

ROWS = 10
EMB = np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)


def my_rows(rank, world):
    return rank * ROWS // world, (rank + 1) * ROWS // world


def failure(e):
    return {"code": e.code, "message": str(e), "cause": type(e.__cause__).__name__ if e.__cause__ else None}


class ShardUnwritable:
    """The local file system, on which this rank cannot create its shard (a permission it lacks)."""

    def __init__(self, rank):
        self.rank = rank

    def open(self, path, mode="rb"):
        if "w" in mode and ".shard-%05d-" % self.rank in os.path.basename(path):
            raise PermissionError(13, "Permission denied", path)
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
        os.rename(src, dst)

    def rmdir(self, path):
        os.rmdir(path)

    def remove(self, path):
        os.remove(path)

    def list(self, path):
        return os.listdir(path)


def main():
    out_dir, scenarios = sys.argv[1], sys.argv[2:]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    result = {}
    comm = ckpt.TorchComm()
    result["comm"] = [comm.rank, comm.size]
    logdir = os.path.join(out_dir, "run")
    begin, end = my_rows(rank, world)
    if "save" in scenarios:  # step `world`, saved by `world` ranks
        with ckpt.Manager(logdir, comm=comm, keep=0) as m:
            m.save({"emb": ckpt.Rows(EMB[begin:end] * world, begin, ROWS), "own_%d" % rank: np.full(2, rank)}, world)
            result["list"] = m.list()
    if "restore" in scenarios:  # every step on disk, whatever world saved it, into this world's rows
        with ckpt.Manager(logdir, comm=comm) as m:
            restored = {}
            for idx in m.list():
                part = ckpt.Rows(np.zeros((end - begin, 3), np.float32), begin, ROWS)
                got, _ = m.restore({"emb": part}, idx)
                restored[str(got)] = part.array.tolist()
            result["restored"] = restored
            result["expected"] = {str(idx): (EMB[begin:end] * idx).tolist() for idx in m.list()}
    if "storage_fails" in scenarios:  # rank 1 cannot write its shard
        fs = ShardUnwritable(1) if rank == 1 else ShardUnwritable(-1)
        with ckpt.Manager(os.path.join(out_dir, "unwritable"), comm=comm, storage=fs) as m:
            try:
                m.save({"emb": ckpt.Rows(EMB[begin:end], begin, ROWS)}, 1)
                result["storage_fails"] = None
            except ckpt.CkptError as e:
                result["storage_fails"] = failure(e)
            result["storage_fails_list"] = m.list()
    if "rows_past_end" in scenarios:  # rank 1's rows run past the global end
        with ckpt.Manager(os.path.join(out_dir, "bad_rows"), comm=comm) as m:
            rows = (begin, end) if rank != 1 else (begin, ROWS + 1)
            try:
                m.save({"emb": ckpt.Rows(np.zeros((rows[1] - rows[0], 3), np.float32), rows[0], ROWS)}, 1)
                result["rows_past_end"] = None
            except ckpt.CkptError as e:
                result["rows_past_end"] = failure(e)
            part = ckpt.Rows(np.zeros((rows[1] - rows[0], 3), np.float32), rows[0], ROWS)
            try:
                m.restore({"emb": part})
                result["restore_rows_past_end"] = None
            except ckpt.CkptError as e:
                result["restore_rows_past_end"] = failure(e)
    comm.close()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, "result-%d-%d.json" % (world, rank)), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
