# SPDX-License-Identifier: Apache-2.0
"""The save paths crash_test.py judges, each run once under syscall_log.so (tests/crash/README.md).

    crash_driver.py SCENARIO ROOT          run SCENARIO's saves in ROOT (under the recorder)
    crash_driver.py SCENARIO ROOT --setup  prepare ROOT for it (not recorded: the state before the run)

After each save returns, the driver marks in the log what it now relies on: `durable PATH SHA256` (the file at
PATH, relative to ROOT, is complete and must survive), `manager DIR KEEP` (DIR's checkpoints are a manager's that
keeps KEEP). The arrays of every save are a function of its number, so the judge can tell versions apart."""
import ctypes
import hashlib
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

import ckpt  # noqa: E402
import ckpt.writing  # noqa: E402

_mark = getattr(ctypes.CDLL(None), "ckpt_syscall_mark", None)


def mark(text):
    if _mark is not None:
        _mark(text.encode())


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def durable(root, rel):
    mark("durable %s %s" % (rel, sha(os.path.join(root, rel))))


def arrays(i):
    """Save i's arrays: big enough to span pages (torn writes), small enough to judge thousands of states; "frozen"
    is the same in every save (what an incremental save clones instead of writing)."""
    rng = np.random.default_rng(i)
    return {"w": rng.standard_normal((64, 40)).astype(np.float32), "frozen": np.arange(1 << 16, dtype=np.float32),
            "b": np.full(7, i, np.int64), "step": np.array(i, np.int64)}


def save_file(root, name, **kw):
    """ckpt.save three times over one path: created, then replaced twice."""
    for i in (1, 2, 3):
        ckpt.save(os.path.join(root, name), arrays(i), **kw)
        durable(root, name)


def save_against_base(root):
    """ckpt.save with base=: an earlier file saved with chunk hashes, whose unchanged chunks a file system that
    clones shares (FICLONERANGE) instead of writing them."""
    ckpt.save(os.path.join(root, "base.npz"), arrays(1), chunk_hashes=True)
    durable(root, "base.npz")
    for i in (2, 3):
        ckpt.save(os.path.join(root, "model.npz"), arrays(i), base=os.path.join(root, "base.npz"))
        durable(root, "model.npz")


def manager(root, subdir, keep=2, saves=(1, 2, 3, 4), **kw):
    mark("manager %s %d" % (subdir, keep))
    with ckpt.Manager(os.path.join(root, "run"), keep=keep, **kw) as m:
        for i in saves:
            m.save(arrays(i), i)
            m.wait()
            durable(root, os.path.relpath(m.path(i), root))


def sharded_arrays(i):
    """Sharded save i as one process reads it: "emb" split by rows between two ranks, one array of each rank."""
    emb = (np.arange(40 * 64, dtype=np.float32) * i).reshape(40, 64)
    return {"emb": emb, "own_0": np.full(3, i, np.int64), "own_1": np.full(5, -i, np.int64)}


def sharded(root):
    """A manager over two ranks (threads with a communicator of their own) saving steps 1 to 3, keeping 2: each
    rank writes its shard, rank 0 the manifest, and the step directory is committed by a rename."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python",
                                    "tests"))
    from test_comm import run_ranks  # ranks as threads, with a communicator of their own
    mark("manager run/ckpt 2")

    def save(rank, comm):
        with ckpt.Manager(os.path.join(root, "run"), comm=comm, keep=2) as m:
            for i in (1, 2, 3):
                whole = sharded_arrays(i)
                rows = slice(0, 15) if rank == 0 else slice(15, 40)
                m.save({"emb": ckpt.Rows(whole["emb"][rows].copy(), rows.start, 40),
                        "own_%d" % rank: whole["own_%d" % rank]}, i)
                comm.barrier()
                if rank == 0:
                    step = m.path(i)
                    for name in sorted(os.listdir(step)):
                        durable(root, os.path.relpath(os.path.join(step, name), root))
                comm.barrier()

    run_ranks(2, save)


def writer(root, kind):
    """A pytorch-pfn-extras writer saving snapshots into a folder it creates, its retention hook keeping two (it
    marks what it releases before removing it)."""
    cls = {"simple": ckpt.writing.SimpleWriter, "thread": ckpt.writing.ThreadWriter}[kind]
    out = os.path.join(root, "out", "snapshots")
    w = cls(out_dir=out)
    rels = []

    def retain():
        for old in rels[:-2]:
            if os.path.exists(os.path.join(root, old)):
                mark("released %s" % old)
                os.remove(os.path.join(root, old))

    w._add_cleanup_hook(retain)
    for i in (1, 2, 3):
        name = "snapshot_iter_%d" % i
        rels.append(os.path.relpath(os.path.join(out, name), root))
        w(name, out, arrays(i), savefun=lambda target, f: ckpt.save(f, target))
        if kind == "simple":
            durable(root, rels[-1])
    w.finalize()
    if kind != "simple":  # a background writer's saves are durable once finalize returned
        for rel in rels[-2:]:
            durable(root, rel)


def tool(*args):
    """The ckpt program (CKPT_CLI), run under the same recorder: its calls go into the same log."""
    subprocess.run([os.environ["CKPT_CLI"]] + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL)


def convert(root):
    """ckpt convert, creating its output and then replacing it, as .npz (deflated) and as safetensors."""
    source = os.path.join(root, "in.npz")
    for out, extra in (("out.npz", ["--deflate"]), ("out.npz", ["--store"]), ("out.safetensors", [])):
        tool("convert", source, os.path.join(root, out), *extra)
        durable(root, out)


def clean(root):
    """ckpt clean of a killed manager's directory: the stale temporary goes, the checkpoints stay."""
    mark("manager run/ckpt 2")
    tool("clean", os.path.join(root, "run"))


def killed_manager(root):
    """A manager's directory as a killed run leaves it: two checkpoints, and the temporary of a third save whose
    process died in the middle of writing it."""
    manager(root, "run/ckpt", saves=(1, 2))
    ckpt.save(os.path.join(root, "run", "ckpt", "0000000003.npz"), arrays(3), progress=lambda done, total: os._exit(0))


SCENARIOS = {
    "save": lambda root: save_file(root, "model.npz"),
    "save-deflate": lambda root: save_file(root, "model.npz", compression="deflate"),
    "save-objax": lambda root: save_file(root, "model.npz", layout="objax"),
    "save-safetensors": lambda root: save_file(root, "model.safetensors"),
    "save-base": save_against_base,
    "manager": lambda root: manager(root, "run/ckpt"),
    "manager-async": lambda root: manager(root, "run/ckpt", asynchronous=True),
    "manager-safetensors": lambda root: manager(root, "run/ckpt", format="safetensors"),
    "sharded": sharded,
    "writer": lambda root: writer(root, "simple"),
    "writer-thread": lambda root: writer(root, "thread"),
    "manager-resume": lambda root: manager(root, "run/ckpt", saves=(3, 4, 5)),  # after SETUPS' killed_manager
}

SETUPS = {
    # The recorded run resumes it: its first save removes the stale temporary, then it saves and retains.
    "manager-resume": killed_manager,
    "clean": killed_manager,
    "convert": lambda root: np.savez(os.path.join(root, "in.npz"), **arrays(1)),
}
TOOL_SCENARIOS = {"convert": convert, "clean": clean}  # need the ckpt program (CKPT_CLI)


def main(argv):
    if len(argv) < 3 or argv[1] not in SCENARIOS and argv[1] not in TOOL_SCENARIOS:
        sys.stderr.write("usage: crash_driver.py SCENARIO ROOT [--setup]; scenarios: %s\n"
                         % " ".join(list(SCENARIOS) + list(TOOL_SCENARIOS)))
        return 2
    scenario, root = argv[1], argv[2]
    if argv[3:] == ["--setup"]:
        SETUPS.get(scenario, lambda root: None)(root)
    else:
        SCENARIOS.get(scenario, TOOL_SCENARIOS.get(scenario))(root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
