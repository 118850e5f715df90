# SPDX-License-Identifier: Apache-2.0
"""Nested training state: what a PyTorch or JAX user holds (dicts with str and int keys, lists, tuples, arrays,
tensors and scalars) saved in one call and given back as it was — by ckpt.save/load/restore, a Manager and a writer,
in both formats; numpy still sees one member per array."""
import json
import math
import os
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import ckpt
from ckpt import tree

torch = pytest.importorskip("torch")

FORMATS = ["npz", "safetensors"]


def state():
    """Every kind of node: str and int keys, a key with "/" and "~", lists, tuples, every scalar type, numpy arrays,
    numpy scalars, torch tensors (bfloat16 too) and arrays deep inside."""
    return {
        "model": {"fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "fc.bias": torch.ones(2)},
        "optimizer": {
            "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.full((2, 3), 0.25)},
                      1: {"step": torch.tensor(3.0), "exp_avg": torch.zeros(2)}},
            "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "amsgrad": False,
                              "foreach": None, "params": [0, 1], "name": "all"}],
        },
        "epoch": 3,
        "big": 2 ** 70,
        "floats": [float("nan"), float("inf"), -0.0, 1e-310, 0.1],
        "a/b~c": {"": np.arange(3, dtype=np.int16), "half": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)},
        "numpy": (np.float32(2.5), np.int64(-7)),
        "empty": {"list": [], "tuple": (), "dict": {}},
    }


def same(a, b, path="root"):
    """a equals b in structure, key and scalar types, and array bits."""
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict)), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), path
        assert [type(k) for k in a] == [type(k) for k in b], path
        for k in a:
            same(a[k], b[k], "%s[%r]" % (path, k))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (path, i))
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), path
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a.view(torch.int16) if a.dtype == torch.bfloat16 else a,
                           b.view(torch.int16) if b.dtype == torch.bfloat16 else b), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), path
    else:
        assert a == b, path


def as_torch(value):
    """state() as tensors="torch" gives it back: numpy arrays and numpy scalars as tensors."""
    if isinstance(value, dict):
        return {k: as_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_torch(v) for v in value)
    if isinstance(value, (np.ndarray, np.generic)):
        return torch.from_numpy(np.array(value))
    return value


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_state_comes_back_as_it_was_saved(tmp_path, fmt):
    path = str(tmp_path / ("state." + fmt))
    ckpt.save(path, state(), metadata={"run": "a"})
    back = ckpt.load(path, tensors="torch")
    same(as_torch(state()), back)
    assert back.metadata == {"run": "a"}  # the structure record is not the caller's metadata
    assert isinstance(back, ckpt.Arrays) and type(back["model"]) is dict


@pytest.mark.parametrize("fmt", FORMATS)
def test_numpy_by_default_and_every_array_is_a_member_named_by_its_path(tmp_path, fmt):
    path = str(tmp_path / ("state." + fmt))
    ckpt.save(path, state())
    back = ckpt.load(path)
    assert isinstance(back["model"]["fc.weight"], np.ndarray)
    assert back["optimizer"]["state"][0]["exp_avg"].tolist() == [[0.25] * 3] * 2
    assert back["a/b~c"]["half"].ckpt_dtype == "bfloat16"
    names = set(ckpt.open(path).keys())
    assert names == {"model/fc.weight", "model/fc.bias", "optimizer/state/0/step", "optimizer/state/0/exp_avg",
                     "optimizer/state/1/step", "optimizer/state/1/exp_avg", "a~1b~0c/", "a~1b~0c/half", "numpy/0",
                     "numpy/1"}
    if fmt == "npz":
        members = set(np.load(path).files)
        assert members == {n + "" for n in names} | {"__ckpt_metadata__"}
        with zipfile.ZipFile(path) as z:
            assert "model/fc.weight.npy" in z.namelist()


def test_the_structure_record_is_the_documented_json(tmp_path):
    path = str(tmp_path / "s.npz")
    ckpt.save(path, {"w": np.zeros(2), "opt": {0: (0.5, None, True, "x", 7)}, "l": [np.ones(1)]})
    with ckpt.open(path) as f:
        record = json.loads(f.metadata[tree.TREE_KEY])
    assert record == {"dict": [["w", {"array": "w"}],
                               ["opt", {"dict": [[0, {"tuple": [{"float": "0.5"}, None, True, "x", 7]}]]}],
                               ["l", {"list": [{"array": "l/0"}]}]]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_only_reads_just_the_entries_asked_for(tmp_path, fmt):
    path = str(tmp_path / ("state." + fmt))
    ckpt.save(path, state(), metadata={"run": "a"})
    model = ckpt.load(path, only="model", tensors="torch")
    assert list(model) == ["model"] and model.metadata == {"run": "a"}
    same(as_torch(state())["model"], model["model"])
    both = ckpt.load(path, only=["epoch", "optimizer"])
    assert list(both) == ["epoch", "optimizer"] and both["epoch"] == 3
    assert both["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    with pytest.raises(ckpt.NotFoundError) as e:
        ckpt.load(path, only=["model", "ema"])
    assert path in str(e.value) and "'ema'" in str(e.value)
    with open(path, "rb") as f:  # a file object: read whole, then the entries asked for
        model = ckpt.load(f, only="model")
    assert list(model) == ["model"] and list(model["model"]) == ["fc.weight", "fc.bias"]
    flat = str(tmp_path / ("flat." + fmt))
    ckpt.save(flat, {"model/w": np.ones(2), "model/b": np.zeros(1), "opt/m": np.ones(3)})
    assert sorted(ckpt.load(flat, only="model")) == ["model/b", "model/w"]


def test_a_flat_mapping_is_saved_as_before(tmp_path):
    path = str(tmp_path / "flat.npz")
    ckpt.save(path, {"w": np.arange(3.0), "step": 5})
    with ckpt.open(path) as f:
        assert tree.TREE_KEY not in f.metadata and f.keys() == ["w", "step"]
    back = ckpt.load(path)
    assert back["step"].shape == () and back["step"] == 5  # a number is a 0-d array, as always


def test_keys_that_would_name_the_same_member_are_refused_naming_both(tmp_path):
    with pytest.raises(ckpt.InvalidArgumentError) as e:
        ckpt.save(str(tmp_path / "x.npz"), {"s": {0: np.zeros(1), "0": np.ones(1)}})
    assert "['s'][0]" in str(e.value) and "['s']['0']" in str(e.value) and "'s/0'" in str(e.value)
    assert not os.path.exists(tmp_path / "x.npz")


def test_keys_of_other_types_and_values_of_no_kind_are_refused_naming_the_path(tmp_path):
    with pytest.raises(ckpt.ArgumentTypeError) as e:
        ckpt.save(str(tmp_path / "x.npz"), {"opt": {(1, 2): np.zeros(1)}})
    assert "['opt']" in str(e.value) and "(1, 2)" in str(e.value)
    with pytest.raises(ckpt.UnsupportedDtypeError) as e:
        ckpt.save(str(tmp_path / "x.npz"), {"cb": {"fn": object()}})
    assert "['cb']['fn']" in str(e.value)
    assert not os.path.exists(tmp_path / "x.npz")


def test_a_damaged_structure_record_is_a_format_error_naming_the_file(tmp_path):
    path = str(tmp_path / "bad.npz")
    for record, words in [("{", "is not JSON"), ('{"list": []}', "does not describe a dict"),
                          ('{"dict": [["w", {"array": "nope"}]]}', "names the array 'nope'"),
                          ('{"dict": [["w", {"set": []}]]}', "unknown kind 'set'"),
                          ('{"dict": [[1.5, 2]]}', "not a [str or int key, value] pair"),
                          ('{"dict": [["w", ' + '{"list": [' * 300 + ']}' * 300 + ']]}', "more than 256 levels"),
                          ('{"dict": [["w", ' + '{"list": [' * 5000 + ']}' * 5000 + ']]}', "more than 256 levels")]:
        ckpt.save(path, {"w": np.zeros(1)}, metadata={tree.TREE_KEY: record})
        with pytest.raises(ckpt.FormatError) as e:
            ckpt.load(path)
        assert path in str(e.value) and words in str(e.value), (record, str(e.value))
        if "nope" not in record:  # (a restore takes arrays by the caller's paths: a name it does not ask for is moot)
            with pytest.raises(ckpt.FormatError):  # a restore into nested state meets it too, never a TypeError
                ckpt.restore(path, {"w": np.zeros(1), "opt": {0: (0.5, None)}}, partial=True)


def test_state_nested_deeper_than_readers_take_is_refused_before_anything_is_written(tmp_path):
    deep = value = {}
    for _ in range(300):
        value["a"] = {}
        value = value["a"]
    with pytest.raises(ckpt.InvalidArgumentError) as e:
        ckpt.save(str(tmp_path / "x.npz"), {"w": np.zeros(1), "deep": deep})
    assert "['deep']['a']['a']" in str(e.value) and "more than 256 levels deep" in str(e.value)
    assert not os.path.exists(tmp_path / "x.npz")
    deep = value = {}  # 256 levels below the root is as deep as it goes
    for _ in range(254):
        value["a"] = {}
        value = value["a"]
    value["w"] = np.ones(2)
    ckpt.save(str(tmp_path / "y.npz"), {"deep": deep})
    got = ckpt.load(str(tmp_path / "y.npz"))["deep"]
    for _ in range(254):
        got = got["a"]
    np.testing.assert_array_equal(got["w"], np.ones(2))


def test_tensors_takes_numpy_or_torch(tmp_path):
    path = str(tmp_path / "x.npz")
    ckpt.save(path, {"w": np.zeros(1)})
    with pytest.raises(ckpt.InvalidArgumentError):
        ckpt.load(path, tensors="jax")
    assert isinstance(ckpt.load(path, tensors="torch")["w"], torch.Tensor)  # flat files too


@pytest.mark.parametrize("fmt", FORMATS)
def test_restore_fills_tensors_in_place_and_replaces_scalars(tmp_path, fmt):
    path = str(tmp_path / ("state." + fmt))
    ckpt.save(path, state())
    target = state()
    weight = target["model"]["fc.weight"]
    weight.zero_()
    target["epoch"] = 0
    target["optimizer"]["param_groups"][0]["betas"] = (0.0, 0.0)
    target["optimizer"]["param_groups"][0]["lr"] = 1.0
    target["floats"] = [0.0] * 5
    metadata = ckpt.restore(path, target)
    assert target["model"]["fc.weight"] is weight and weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert target["epoch"] == 3 and target["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert target["optimizer"]["param_groups"][0]["lr"] == 0.001
    same(state()["floats"], target["floats"])
    assert tree.TREE_KEY not in metadata and "optimizer/state/0/exp_avg" in metadata.restored


def test_restore_names_the_full_path_of_what_is_missing(tmp_path):
    path = str(tmp_path / "s.npz")
    ckpt.save(path, {"model": {"w": np.zeros(2, np.float32)}})
    target = {"model": {"w": np.zeros(2, np.float32)}, "optimizer": {"state": {0: {"exp_avg": np.zeros(2)}}}}
    with pytest.raises(ckpt.MismatchError) as e:
        ckpt.restore(path, target)
    assert "optimizer/state/0/exp_avg" in str(e.value)
    ckpt.restore(path, target, partial=True)  # a model that gained state resumes from an older file


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_manager_saves_reads_and_restores_nested_state(tmp_path, fmt):
    with ckpt.Manager(str(tmp_path / "run"), format=fmt, keep=2) as m:
        for step in (1, 2):
            s = state()
            s["epoch"] = step
            m.save(s, step, metrics={"loss": 1.0 / step})
        idx, back = m.read(tensors="torch")
        assert idx == 2 and back["epoch"] == 2
        expected = as_torch(state())
        expected["epoch"] = 2
        same(expected, back)
        target = state()
        target["epoch"] = -1
        idx, metadata = m.restore(target)
        assert idx == 2 and target["epoch"] == 2 and tree.TREE_KEY not in metadata


def test_a_writer_saves_nested_state(tmp_path):
    with ckpt.writing.SimpleWriter() as w:
        w.save_arrays("s.npz", str(tmp_path), state())
    same(as_torch(state()), ckpt.load(str(tmp_path / "s.npz"), tensors="torch"))


TRAIN = r"""
import os, signal, sys
import torch
import ckpt

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
adam = torch.optim.Adam(model[0].parameters(), lr=0.01)
sgd = torch.optim.SGD(model[2].parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(adam, step_size=3, gamma=0.5)
steps, kill_at = int(sys.argv[2]), int(sys.argv[3])
with ckpt.Manager(sys.argv[1], keep=2) as manager:
    start = 0
    if manager.latest() is not None:
        _, state = manager.read(tensors="torch")
        model.load_state_dict(state["model"])
        adam.load_state_dict(state["adam"])
        sgd.load_state_dict(state["sgd"])
        sched.load_state_dict(state["scheduler"])
        start = state["step"] + 1
        torch.set_rng_state(state["rng"])
    for step in range(start, steps):
        g = torch.Generator().manual_seed(step)  # the batch of each step, whenever it runs
        x = torch.randn(32, 8, generator=g)
        y = x.sum(dim=1, keepdim=True).sin()
        loss = torch.nn.functional.mse_loss(model(torch.nn.functional.dropout(x, 0.1)), y)
        adam.zero_grad()
        sgd.zero_grad()
        loss.backward()
        adam.step()
        sgd.step()
        sched.step()
        print("%d %s" % (step, loss.item().hex()), flush=True)
        manager.save({"model": model.state_dict(), "adam": adam.state_dict(), "sgd": sgd.state_dict(),
                      "scheduler": sched.state_dict(), "step": step, "rng": torch.get_rng_state()}, step)
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    torch.save(model.state_dict(), sys.argv[1] + ".final.pt")
"""


def test_a_killed_pytorch_job_resumes_and_trains_bit_for_bit_as_if_never_stopped(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))

    def run(run_dir, kill_at):
        return subprocess.run([sys.executable, str(script), str(run_dir), "12", str(kill_at)], env=env,
                              capture_output=True, text=True, timeout=300)

    whole = run(tmp_path / "whole", -1)
    assert whole.returncode == 0, whole.stderr
    first = run(tmp_path / "cut", 6)
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = run(tmp_path / "cut", -1)
    assert second.returncode == 0, second.stderr
    # The losses of every step, to the last bit, and the final weights, are those of the run never stopped.
    assert first.stdout + second.stdout == whole.stdout
    assert len(whole.stdout.splitlines()) == 12
    a = torch.load(str(tmp_path / "whole") + ".final.pt")
    b = torch.load(str(tmp_path / "cut") + ".final.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)
