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


def test_a_second_checkpoint_on_a_locked_directory_is_busy(tmp_path):
    first = objax.io.Checkpoint(str(tmp_path), keep_ckpts=1)
    with pytest.raises(BlockingIOError) as e:
        objax.io.Checkpoint(str(tmp_path), keep_ckpts=1)
    assert isinstance(e.value, ckpt.BusyError) and e.value.code == ckpt.errors.EBUSY
    assert str(os.getpid()) in e.value.message
    first.close()
    objax.io.Checkpoint(str(tmp_path), keep_ckpts=1).close()
