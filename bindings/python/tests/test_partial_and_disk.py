# SPDX-License-Identifier: Apache-2.0
"""Partial restores (partial=True, Metadata.restored, Collection.restored), the manager's staging budget
(max_staging_bytes) and its disk check through a Python storage's free_space."""
import numpy as np
import pytest

import ckpt


def old_model():
    return {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5, 2.5], np.float64)}


def grown_model():
    """The old model plus a variable the old file lacks, each holding values no restore would write."""
    return {"w": np.full((2, 3), -1, np.float32), "b": np.full(2, -1.0), "extra": np.full(4, 7, np.int32)}


def test_a_partial_restore_fills_what_the_file_has_and_leaves_the_rest(tmp_path):
    path = str(tmp_path / "old.npz")
    ckpt.save(path, old_model(), metadata={"note": "old"})
    target = grown_model()
    meta = ckpt.restore(path, target, partial=True)
    assert meta["note"] == "old" and isinstance(meta, ckpt.Metadata)
    assert meta.restored == ["w", "b"]
    np.testing.assert_array_equal(target["w"], old_model()["w"])
    np.testing.assert_array_equal(target["b"], old_model()["b"])
    np.testing.assert_array_equal(target["extra"], np.full(4, 7, np.int32))


def test_values_restored_through_assignment_are_left_alone_when_the_file_lacks_them(tmp_path):
    path = str(tmp_path / "old.npz")
    ckpt.save(path, old_model())
    extra = np.full(4, 7, np.int32)
    extra.flags.writeable = False  # ckpt cannot write into it: a strict restore would assign a new array
    target = {"w": np.zeros((2, 3), np.float32), "extra": extra}
    meta = ckpt.restore(path, target, partial=True)
    assert meta.restored == ["w"]
    assert target["extra"] is extra and target["extra"].tolist() == [7, 7, 7, 7]
    assert target["w"].tolist() == old_model()["w"].tolist()


def test_restores_stay_strict_by_default(tmp_path):
    path = str(tmp_path / "old.npz")
    ckpt.save(path, old_model())
    target = grown_model()
    with pytest.raises(ckpt.MismatchError) as e:
        ckpt.restore(path, target)
    assert e.value.code == ckpt.errors.EMISMATCH
    assert "old.npz: cannot restore; missing from the file: 'extra'" in e.value.message
    assert target["w"].tolist() == [[-1] * 3] * 2  # nothing changed


def test_a_partial_restore_still_fails_on_another_shape(tmp_path):
    path = str(tmp_path / "old.npz")
    ckpt.save(path, old_model())
    target = {"w": np.zeros((3, 2), np.float32), "extra": np.zeros(1)}
    with pytest.raises(ckpt.MismatchError) as e:
        ckpt.restore(path, target, partial=True)
    assert e.value.code == ckpt.errors.EMISMATCH
    assert "dtype or shape differ: 'w' is float32 (3, 2) in the collection but float32 (2, 3) in the file" \
        in e.value.message
    assert "missing" not in e.value.message
    assert target["w"].tolist() == [[0, 0]] * 3


def test_a_collection_says_which_arrays_the_latest_restore_filled(tmp_path):
    path = str(tmp_path / "old.npz")
    ckpt.save(path, old_model())
    target = grown_model()
    with ckpt.Collection(target) as c:
        assert c.restored_names == [] and not c.restored("w")  # before any restore
        assert ckpt.restore(path, c, partial=True).restored == ["w", "b"]
        assert c.restored("w") and c.restored("b") and not c.restored("extra")
        assert c.restored_names == ["w", "b"]
        with pytest.raises(KeyError):
            c.restored("nothing")
        with pytest.raises(ckpt.MismatchError):
            ckpt.restore(path, c)  # strict: 'extra' is missing
        assert c.restored_names == []  # a failed restore filled nothing
    assert target["w"].tolist() == old_model()["w"].tolist() and target["extra"].tolist() == [7] * 4


def test_a_partial_manager_resumes_a_grown_model_from_an_older_checkpoint(tmp_path):
    with ckpt.Manager(str(tmp_path)) as m:
        m.save(old_model(), 3)
    with ckpt.Manager(str(tmp_path)) as m:
        with pytest.raises(ckpt.MismatchError) as e:
            m.restore(grown_model())
        assert "missing from the file: 'extra'" in e.value.message
    target = grown_model()
    with ckpt.Manager(str(tmp_path), partial=True) as m:
        idx, meta = m.restore(target)
        assert idx == 3 and meta.restored == ["w", "b"] and meta["ckpt.index"] == "3"
    assert target["b"].tolist() == [1.5, 2.5] and target["extra"].tolist() == [7] * 4


@pytest.mark.parametrize("budget", [64, 1 << 20])
def test_saves_round_trip_under_a_staging_budget_smaller_or_larger_than_them(tmp_path, budget):
    big = {"w": np.arange(10000, dtype=np.float64), "step": np.array(1, np.int64)}  # 80 kB
    with ckpt.Manager(str(tmp_path), asynchronous=True, max_staging_bytes=budget, keep=3) as m:
        for step in (1, 2, 3):
            big["step"][...] = step
            m.save(big, step)
            big["w"] += 1  # copied or already written: changing the arrays now changes no save
        m.wait()
        for step in (1, 2, 3):
            _, back = m.read(step)
            assert int(back["step"]) == step
            np.testing.assert_array_equal(back["w"], np.arange(10000, dtype=np.float64) + step - 1)


class ReportedSpace(ckpt.MemoryFiles):
    """An in-memory filesystem object whose free_space reports what the test says (None: cannot tell)."""

    def __init__(self, free):
        super().__init__()
        self.free = free
        self.asked = []

    def free_space(self, path):
        self.asked.append(path)
        return self.free


def test_a_storage_reporting_too_little_space_fails_the_save_and_keeps_the_previous_checkpoint():
    fs = ReportedSpace(free=None)
    with ckpt.Manager("run", storage=fs) as m:
        m.save(old_model(), 1)  # None: the medium cannot tell, no check
        fs.free = 100
        with pytest.raises(ckpt.StorageError) as e:
            m.save(grown_model(), 2)
        assert e.value.code == ckpt.errors.EIO
        assert "run/ckpt/0000000002.npz: not enough space for checkpoint 2: it needs up to" in e.value.message
        assert "and 100 bytes is free" in e.value.message
        assert m.list() == [1] and fs.asked and fs.asked[-1] == "run/ckpt"
        target = grown_model()
        idx, _ = m.restore({"w": target["w"], "b": target["b"]})
        assert idx == 1 and target["w"].tolist() == old_model()["w"].tolist()
    assert sorted(fs.files) == ["run/ckpt/0000000001.npz"]  # no temporary left behind


def test_a_storage_reporting_enough_space_saves_and_one_running_low_warns():
    fs = ReportedSpace(free=1 << 40)
    messages = []
    with ckpt.Manager("run", storage=fs, keep=5, log=lambda level, text: messages.append((level, text))) as m:
        m.save(old_model(), 1)
        assert not [t for _, t in messages if "free" in t]
        fs.free = 3000  # room for this save, not for the four more keep=5 will accumulate
        m.save(old_model(), 2)
        assert m.list() == [1, 2]
    warnings = [t for level, t in messages if level == ckpt._native.LOG_WARNING and "free" in t]
    assert warnings and "run/ckpt: 3000 bytes free, less than the" in warnings[0]


def test_a_failing_free_space_fails_the_save_with_its_exception():
    class Broken(ckpt.MemoryFiles):
        def free_space(self, path):
            raise OSError("statfs failed")

    with ckpt.Manager("run", storage=Broken()) as m:
        with pytest.raises(ckpt.StorageError) as e:
            m.save(old_model(), 1)
        assert "free_space" in e.value.message and "OSError: statfs failed" in e.value.message
        assert m.list() == []
