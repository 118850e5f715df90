# SPDX-License-Identifier: Apache-2.0
"""objax.io's functions and Checkpoint, used as an objax user's script uses them (objax_shim provides the objax
names; objax.io is ckpt's)."""
import glob
import io
import os

import numpy as np
import pytest

import ckpt
import objax_shim as objax


def model():
    w = objax.TrainVar(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = objax.TrainVar(np.zeros(3, np.float32))
    step = objax.StateVar(np.array(0, np.int64))
    # objax collections name one variable twice when modules share it, and hold TrainRefs for optimizer state.
    return objax.VarCollection({"(Linear).w": w, "(Linear).b": b, "(Shared).w": w, "step": step,
                                "(Momentum).m": objax.TrainRef(b)}), w, b, step


def test_save_var_collection_writes_objax_layout_numpy_reads(tmp_path):
    vc, w, b, step = model()
    objax.io.save_var_collection(str(tmp_path / "m.npz"), vc)
    with np.load(tmp_path / "m.npz") as data:
        assert list(data["names"]) == ["(Linear).w", "(Linear).b", "step"]  # shared variables once
        assert data["0"].tolist() == w.value.tolist()
        assert sorted(data.files) == ["0", "1", "2", "names"]


def test_load_var_collection_restores_in_place_and_through_assign(tmp_path):
    vc, w, b, step = model()
    step.value = np.array(7, np.int64)
    objax.io.save_var_collection(str(tmp_path / "m.npz"), vc)
    vc2, w2, b2, step2 = model()
    w2.value = np.zeros((2, 3), np.float32)
    buffer = w2.value
    objax.io.load_var_collection(str(tmp_path / "m.npz"), vc2)
    assert w2.value.tolist() == w.value.tolist() and w2.value is buffer  # filled in place
    assert int(step2.value) == 7


def test_load_var_collection_from_a_file_object_with_a_renamer(tmp_path):
    vc, w, _, _ = model()
    f = io.BytesIO()
    objax.io.save_var_collection(f, vc)
    vc2, w2, _, _ = model()
    renamed = objax.VarCollection({k.replace("Linear", "Dense"): v for k, v in vc2.items()})
    w2.value = np.zeros((2, 3), np.float32)
    objax.io.load_var_collection(io.BytesIO(f.getvalue()), renamed, renamer={"Linear": "Dense"})
    assert w2.value.tolist() == w.value.tolist()


def test_a_missing_variable_raises_ValueError_listing_missing_and_unused(tmp_path):
    vc, *_ = model()
    objax.io.save_var_collection(str(tmp_path / "m.npz"), vc)
    other = objax.VarCollection({"(Linear).w": objax.TrainVar(np.zeros((2, 3), np.float32)),
                                 "(New).v": objax.TrainVar(np.zeros(1))})
    with pytest.raises(ValueError) as e:
        objax.io.load_var_collection(str(tmp_path / "m.npz"), other)
    assert "'(New).v'" in str(e.value) and "'(Linear).b'" in str(e.value) and "'step'" in str(e.value)
    assert other["(Linear).w"].value.tolist() == [[0, 0, 0], [0, 0, 0]]  # nothing restored


def test_checkpoint_saves_numbered_files_keeps_the_newest_and_restores_the_latest(tmp_path, capsys):
    vc, w, b, step = model()
    ck = objax.io.Checkpoint(str(tmp_path), keep_ckpts=2)
    assert ck.DIR_NAME == "ckpt" and ck.FILE_MATCH == "*.npz" and ck.FILE_FORMAT == "%010d.npz"
    assert ck.restore(vc) == (0, "")
    assert "No checkpoints found" in capsys.readouterr().out
    for idx in (9, 10, 11):  # 9 -> 10 crosses a digit, which objax's string sort got wrong at 11 digits
        step.value = np.array(idx, np.int64)
        ck.save(vc, idx)
    files = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "ckpt" / "*.npz")))
    assert files == ["0000000010.npz", "0000000011.npz"]
    vc2, w2, b2, step2 = model()
    idx, path = ck.restore(vc2)
    assert (idx, path) == (11, os.path.join(str(tmp_path), "ckpt", "0000000011.npz"))
    assert int(step2.value) == 11 and "Resuming from " + path in capsys.readouterr().out
    assert ck.restore(vc2, idx=10)[0] == 10 and int(step2.value) == 10
    assert objax.io.Checkpoint.checkpoint_idx("/x/ckpt/0000000042.npz") == 42
    ck.close()


def test_checkpoint_falls_back_past_a_corrupt_newest_file(tmp_path):
    vc, w, b, step = model()
    ck = objax.io.Checkpoint(str(tmp_path), keep_ckpts=5, verbose=False)
    for idx in (1, 2):
        step.value = np.array(idx, np.int64)
        ck.save(vc, idx)
    newest = tmp_path / "ckpt" / "0000000002.npz"
    newest.write_bytes(newest.read_bytes()[:-30])
    vc2, _, _, step2 = model()
    assert ck.restore(vc2)[0] == 1 and int(step2.value) == 1
    with pytest.raises(ckpt.FormatError):
        ck.restore(vc2, idx=2)
    ck.close()


def test_checkpoint_subclass_hooks_replace_the_save_and_load_functions(tmp_path):
    calls = []

    class Logged(objax.io.Checkpoint):
        @staticmethod
        def SAVE_FN(file, vc):
            calls.append(("save", os.path.basename(file)))
            ckpt.save_var_collection(file, vc)

        @staticmethod
        def LOAD_FN(file, vc):
            calls.append(("load", os.path.basename(file)))
            ckpt.load_var_collection(file, vc)

    vc, *_ = model()
    ck = Logged(str(tmp_path), keep_ckpts=1, verbose=False)
    ck.save(vc, 3)
    ck.save(vc, 4)
    assert ck.restore(vc) == (4, os.path.join(str(tmp_path), "ckpt", "0000000004.npz"))
    assert calls == [("save", "0000000003.npz"), ("save", "0000000004.npz"), ("load", "0000000004.npz")]
    assert [os.path.basename(p) for p in glob.glob(str(tmp_path / "ckpt" / "*.npz"))] == ["0000000004.npz"]
    ck.close()


def _child_env():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(here, ".."), here, env.get("PYTHONPATH", "")])
    return env


_TRAINER = """
import os, sys, time, numpy as np, objax_shim as objax
logdir, stop = sys.argv[1], sys.argv[2]
w = objax.TrainVar(np.zeros(64, np.float32))
step = objax.StateVar(np.array(0, np.int64))
vc = objax.VarCollection({"w": w, "step": step})
ck = objax.io.Checkpoint(logdir, keep_ckpts=3, verbose=False)
for i in range(1, 100000):
    w.assign(np.full(64, i, np.float32))
    step.assign(np.array(i, np.int64))
    ck.save(vc, i)
    if i == 1:
        print("ready", flush=True)
    if os.path.exists(stop) and i >= 5:
        break
    time.sleep(0.005)
ck.close()
print("saved", i, flush=True)
"""

_EVALUATOR = """
import sys, numpy as np, ckpt, objax_shim as objax
logdir = sys.argv[1]
w = objax.TrainVar(np.zeros(64, np.float32))
step = objax.StateVar(np.array(0, np.int64))
vc = objax.VarCollection({"w": w, "step": step})
seen = []
for _ in range(20):
    idx, path = ckpt.Checkpoint(logdir, 3, verbose=False).restore(vc)
    assert idx >= 1 and int(step.value) == idx and (w.value == idx).all(), (idx, int(step.value))
    seen.append(idx)
try:
    ckpt.Checkpoint(logdir, 3, verbose=False).save(vc, 10 ** 9)
    print("saved?!")
except ckpt.BusyError as e:
    print("busy:", e.message)
print("restored", min(seen), max(seen), flush=True)
"""


def test_an_evaluator_process_restores_while_a_trainer_process_holds_the_directory_and_saves(tmp_path):
    import subprocess
    logdir, stop = str(tmp_path / "run"), str(tmp_path / "stop")
    trainer = subprocess.Popen(["/usr/bin/python3", "-c", _TRAINER, logdir, stop], stdout=subprocess.PIPE,
                               text=True, env=_child_env())
    try:
        assert trainer.stdout.readline().strip() == "ready"
        evaluator = subprocess.run(["/usr/bin/python3", "-c", _EVALUATOR, logdir], capture_output=True, text=True,
                                   env=_child_env(), timeout=120)
    finally:
        open(stop, "w").close()
        out, _ = trainer.communicate(timeout=120)
    assert evaluator.returncode == 0, evaluator.stderr
    lines = evaluator.stdout.splitlines()
    # Its restores never locked: the trainer kept the directory; its save was refused, naming the trainer.
    assert lines[0].startswith("busy: ") and "pid %d" % trainer.pid in lines[0], lines
    assert lines[1].startswith("restored ")
    assert trainer.returncode == 0 and out.startswith("saved ")
    last = int(out.split()[1])
    assert last >= 5
    assert [os.path.basename(p) for p in sorted(glob.glob(os.path.join(logdir, "ckpt", "*.npz")))] == \
        ["%010d.npz" % i for i in range(last - 2, last + 1)]


def test_running_a_notebook_cell_again_takes_the_directory_over_from_the_old_checkpoint(tmp_path):
    vc, w, b, step = model()
    ck = objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False)
    ck.save(vc, 1)
    old = ck
    ck = objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False)  # the cell again: no BusyError
    assert ck.restore(vc)[0] == 1
    ck.save(vc, 2)
    with pytest.raises(ckpt.BusyError, match="another checkpoint manager of this process took the directory over"):
        old.save(vc, 3)
    assert old.restore(vc)[0] == 2  # the old object still reads
    old.close()  # leaves the lock with the new one
    ck.save(vc, 3)
    assert ck._manager.list() == [2, 3]
    ck.close()


def test_a_checkpoint_used_in_a_with_block_is_closed_at_its_end(tmp_path):
    vc, w, b, step = model()
    with objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False) as ck:
        ck.save(vc, 1)
    with pytest.raises(ValueError, match="closed"):
        ck.save(vc, 2)
    with pytest.raises(ckpt.BusyError):  # a with block's exception is the one seen
        with objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False):
            raise ckpt.BusyError(ckpt.errors.EBUSY, "raised in the block")


def test_a_read_only_checkpoint_restores_and_refuses_saves(tmp_path):
    vc, w, b, step = model()
    with objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False) as ck:
        step.assign(np.array(7, np.int64))
        ck.save(vc, 7)
        reader = objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False, read_only=True)
        step.assign(np.array(0, np.int64))
        assert reader.restore(vc)[0] == 7 and int(step.value) == 7
        with pytest.raises(ckpt.InvalidArgumentError, match="opened read-only"):
            reader.save(vc, 8)
        reader.close()
    with pytest.raises(ckpt.NotFoundError):
        objax.io.Checkpoint(str(tmp_path / "missing"), keep_ckpts=2, read_only=True)


def test_the_checkpoint_keys_a_restore_brings_are_not_saved_again_by_a_plain_save(tmp_path):
    vc, w, b, step = model()
    with objax.io.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False) as ck:
        ck.save(vc, 4, metadata={"note": "kept"})
        meta = ckpt.load_var_collection(ck._manager.path(4), vc)
    assert meta["ckpt.index"] == "4" and meta["note"] == "kept"
    ckpt.save_var_collection(str(tmp_path / "model.npz"), vc, metadata=meta)
    saved = ckpt.load(str(tmp_path / "model.npz")).metadata
    assert saved == {"note": "kept"}


class UnreadableFiles(ckpt.MemoryFiles):
    """Files in memory whose reads fail once `broken` is set, as a storage going offline."""

    broken = False

    def open(self, path, mode="rb"):
        if self.broken and "r" in mode:
            raise ConnectionError("the object store went away")
        return super().open(path, mode)


def test_a_checkpoint_restore_over_a_failing_storage_raises_the_storages_own_exception_as_cause(tmp_path):
    vc, w, _, _ = model()
    files = UnreadableFiles()
    ckpt_ = objax.io.Checkpoint("logs", keep_ckpts=2, storage=ckpt.Storage(files), verbose=False, fallback=False)
    ckpt_.save(vc, 1)
    files.broken = True
    with pytest.raises(ckpt.StorageError) as e:
        ckpt_.restore(vc)
    assert "the object store went away" in e.value.message
    assert isinstance(e.value.__cause__, ConnectionError)
    ckpt_.close()


def test_nested_state_with_variables_saves_and_restores_through_every_entry_point(tmp_path):
    def state():
        vc, w, b, step = model()
        frozen = objax.StateVar(np.ones(2, np.float32))
        frozen._value.flags.writeable = False  # as a JAX array: only assign can change it
        return {"model": vc, "frozen": frozen, "epoch": 0, "opt": {0: (0.1, None)}, "hist": [np.zeros(2)]}, w, frozen

    saved, w, frozen = state()
    w.value[...] = 5
    saved["epoch"], saved["opt"][0], saved["hist"][0][:] = 3, (0.5, True), [1, 2]
    frozen.assign(np.array([7, 8], np.float32))

    def check(target, w2, frozen2, buffer):
        assert w2.value.tolist() == [[5] * 3] * 2 and w2.value is buffer  # a variable's array filled in place
        assert frozen2.value.tolist() == [7, 8]  # one that cannot be, given its value through assign
        assert target["epoch"] == 3 and target["opt"] == {0: (0.5, True)} and target["hist"][0].tolist() == [1, 2]
        assert target["model"]["(Momentum).m"].ref is target["model"]["(Linear).b"]

    path = str(tmp_path / "state.npz")
    objax.io.save_var_collection(path, saved)
    with np.load(path) as data:  # objax's layout, members named by their paths
        assert "model/(Linear).w" in list(data["names"]) and "epoch" not in list(data["names"])
    target, w2, frozen2 = state()
    objax.io.load_var_collection(path, target)
    check(target, w2, frozen2, w2.value)

    c = objax.io.Checkpoint(str(tmp_path / "logs"), keep_ckpts=2, verbose=False)
    c.save(saved, 4)
    c.close()
    target, w2, frozen2 = state()
    buffer = w2.value
    assert objax.io.Checkpoint(str(tmp_path / "logs"), keep_ckpts=2, verbose=False).restore(target)[0] == 4
    check(target, w2, frozen2, buffer)
    assert ckpt.load(c._path(4))["opt"] == {0: (0.5, True)}
