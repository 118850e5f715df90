# SPDX-License-Identifier: Apache-2.0
"""safetensors files from Python: ckpt.safetensors with safetensors.numpy's functions, ckpt.save/load/open/restore on
either format, bit patterns of every type, numpy arrays of any byte and memory order, refusals before anything is
written, and @huggingface/hub (tests/hub/read.mjs) reading every file ckpt writes."""
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import ckpt
from ckpt import safetensors
from test_npz import NUMERIC, bits, every_dtype

HUB_READER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "hub", "read.mjs")
HUB_MODULES = os.path.join(os.path.dirname(HUB_READER), "node_modules", "@huggingface", "hub")
ST_NAMES = {"bool": "BOOL", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8",
            "uint16": "U16", "uint32": "U32", "uint64": "U64", "float16": "F16", "float32": "F32", "float64": "F64",
            "complex64": "C64", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
            "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0"}


def safetensors_dtypes():
    """every_dtype() less the types safetensors has none for."""
    return {k: v for k, v in every_dtype().items() if k not in ("complex128", "text", "bytes", "void")}


def header(data):
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8:8 + n])


def hub_read(*paths):
    """What @huggingface/hub's parseSafetensorsMetadata makes of each path (a file or an index)."""
    if shutil.which("node") is None or not os.path.isdir(HUB_MODULES):
        pytest.skip("@huggingface/hub is not installed in tests/hub (scripts/deps test installs it)")
    out = subprocess.run(["node", HUB_READER] + [str(p) for p in paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_every_type_round_trips_bit_for_bit_through_save_file_and_load_file(tmp_path):
    arrays = safetensors_dtypes()
    path = tmp_path / "all.safetensors"
    safetensors.save_file(arrays, path, metadata={"format": "pt", "step": "7"})
    back = safetensors.load_file(path)
    assert list(back) == list(arrays)
    for name, value in arrays.items():
        assert back[name].tobytes() == bits(value), name
    with ckpt.open(path) as f:
        assert f.format == "safetensors"
        assert f.metadata == {"format": "pt", "step": "7"}
        assert f.ckpt_dtype("bf16") == "bfloat16"
        for name in arrays:
            assert f.map(name).tobytes() == bits(arrays[name]), name
    n, h = header(path.read_bytes())
    assert n % 8 == 0 and h["__metadata__"] == {"format": "pt", "step": "7"}
    for name, value in arrays.items():
        ckpt_name = ckpt.dtypes.ML_NAMES[value.code] if isinstance(value, ckpt.typed) else np.asarray(value).dtype.name
        assert h[name]["dtype"] == ST_NAMES[ckpt_name], name
        begin, end = h[name]["data_offsets"]
        assert (8 + n + begin) % max(np.dtype(back[name].dtype).itemsize, 1) == 0, name  # aligned to its size


def test_save_and_load_of_bytes_as_safetensors_numpy_has_them():
    data = safetensors.save({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, metadata={"k": "v"})
    assert isinstance(data, bytes)
    n, h = header(data)
    assert data[8:9] == b"{" and h == {"__metadata__": {"k": "v"},
                                       "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    assert len(data) == 8 + n + 24
    back = safetensors.load(data)
    assert back["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ckpt.FormatError, match="not a safetensors file"):
        safetensors.load(open_npz_bytes())


def open_npz_bytes():
    import io
    out = io.BytesIO()
    ckpt.save(out, {"a": np.zeros(2)})
    return out.getvalue()


@pytest.mark.parametrize("kind", ["big-endian", "fortran", "strided"])
def test_arrays_of_any_byte_and_memory_order_are_saved_little_endian_in_c_order(tmp_path, kind):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    value = {"big-endian": base.astype(">f8"), "fortran": np.asfortranarray(base), "strided": base[:, ::2]}[kind]
    path = tmp_path / "o.safetensors"
    safetensors.save_file({"x": value}, path)
    n, h = header(path.read_bytes())
    assert h["x"]["dtype"] == "F64" and h["x"]["shape"] == list(value.shape)
    raw = path.read_bytes()[8 + n:]
    assert raw == np.ascontiguousarray(value, dtype="<f8").tobytes()
    assert np.array_equal(safetensors.load_file(path)["x"], value)


def test_ckpt_save_writes_safetensors_for_the_name_and_every_reader_takes_either_format(tmp_path):
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "step": np.int64(5)}
    ckpt.save(tmp_path / "m.safetensors", arrays, metadata={"loss": "0.5"})
    ckpt.save(tmp_path / "m.npz", arrays, metadata={"loss": "0.5"})
    assert (tmp_path / "m.safetensors").read_bytes()[8:9] == b"{"
    for name in ["m.safetensors", "m.npz"]:
        back = ckpt.load(tmp_path / name)
        assert back.metadata == {"loss": "0.5"}
        assert back["w"].tolist() == arrays["w"].tolist() and int(back["step"]) == 5
        target = {"w": np.zeros((3, 4), np.float32), "step": np.zeros((), np.int64)}
        meta = ckpt.restore(tmp_path / name, target)
        assert meta == {"loss": "0.5"} and target["w"][2, 3] == 11
    with ckpt.open(tmp_path / "m.npz") as f:
        assert f.format == "npz"
    # format= overrides the name; a reader asked for one format refuses the other.
    ckpt.save(tmp_path / "forced.bin", arrays, format="safetensors")
    assert ckpt.load(tmp_path / "forced.bin", format="safetensors")["step"] == 5
    with pytest.raises(ckpt.FormatError, match="forced.bin: not a npz file"):
        ckpt.load(tmp_path / "forced.bin", format="npz")
    with pytest.raises(ckpt.InvalidArgumentError, match="format must be one of"):
        ckpt.save(tmp_path / "x", arrays, format="gguf")


def test_npz_to_safetensors_to_npz_keeps_values_types_and_metadata(tmp_path):
    arrays = safetensors_dtypes()
    ckpt.save(tmp_path / "a.npz", arrays, metadata={"step": "5", "loss": "0.25"})
    ckpt.save(tmp_path / "b.safetensors", ckpt.load(tmp_path / "a.npz"), metadata={"step": "5", "loss": "0.25"})
    loaded = ckpt.load(tmp_path / "b.safetensors")
    ckpt.save(tmp_path / "c.npz", loaded, metadata=loaded.metadata)
    back = ckpt.load(tmp_path / "c.npz")
    assert back.metadata == {"step": "5", "loss": "0.25"}
    for name, value in arrays.items():
        assert back[name].tobytes() == bits(value), name
    assert back["bf16"].ckpt_dtype == "bfloat16"


def test_types_safetensors_cannot_hold_are_refused_before_anything_is_written(tmp_path):
    for name, value in [("z", np.zeros(2, np.complex128)), ("s", np.array(["a"])), ("b", np.array([b"x"])),
                        ("v", np.frombuffer(b"0123", "V4"))]:
        with pytest.raises(ckpt.UnsupportedError, match="safetensors has no"):
            safetensors.save_file({name: value}, tmp_path / "bad.safetensors")
    with pytest.raises(ckpt.InvalidArgumentError, match="not compressed"):
        ckpt.save(tmp_path / "bad.safetensors", {"a": np.zeros(2)}, compression="deflate")
    assert os.listdir(tmp_path) == []


def test_a_hostile_header_is_a_format_error_naming_the_file(tmp_path):
    path = tmp_path / "bad.safetensors"
    body = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    path.write_bytes(struct.pack("<Q", len(body)) + body + bytes(8))
    with pytest.raises(ckpt.FormatError, match=r"bad.safetensors: safetensors header: tensor 'a' appears twice"):
        safetensors.load_file(path)


def test_huggingface_hub_reads_every_file_ckpt_writes(tmp_path):
    arrays = safetensors_dtypes()
    arrays["big"] = np.arange(100000, dtype=np.float32).reshape(100, 1000)
    paths = []
    for i, (meta, subset) in enumerate([(None, arrays), ({"format": "pt", "step": "3"}, {"x": np.ones(3, np.int8)}),
                                        ({"empty": ""}, {})]):
        path = tmp_path / ("f%d.safetensors" % i)
        safetensors.save_file(subset, path, metadata=meta)
        paths.append((path, meta, subset))
    for (path, meta, subset), seen in zip(paths, hub_read(*[p for p, _, _ in paths])):
        assert "error" not in seen, seen
        assert seen["metadata"] == meta
        with ckpt.open(path) as f:
            assert set(seen["tensors"]) == set(f.keys())
            for name in f:
                t = seen["tensors"][name]
                assert t["dtype"] == ST_NAMES[f.ckpt_dtype(name)], name
                assert tuple(t["shape"]) == f.shape(name), name
                n = header(path.read_bytes())[0]
                assert t["data_offsets"][0] + 8 + n == f.info(name)["data_offset"], name
                assert t["data_offsets"][1] - t["data_offsets"][0] == f.info(name)["nbytes"], name


def test_numeric_types_of_numpy_come_back_with_their_numpy_dtype(tmp_path):
    arrays = {np.dtype(t).name: np.ones(3, t) for t in NUMERIC if t is not np.complex128}
    back = safetensors.load(safetensors.save(arrays))
    assert {k: v.dtype for k, v in back.items()} == {k: v.dtype for k, v in arrays.items()}


def test_a_manager_saving_safetensors_resumes_and_huggingface_hub_reads_its_checkpoints(tmp_path):
    state = {"w": np.zeros(4, np.float32), "step": np.zeros((), np.int64)}
    with ckpt.Manager(tmp_path / "run", keep=2, format="safetensors") as m:
        for step in (1, 2, 3):
            state["w"][:] = step
            state["step"][...] = step
            m.save(state, step)
        assert m.list() == [2, 3]
    names = sorted(n for n in os.listdir(tmp_path / "run" / "ckpt") if not n.startswith("."))  # not the lock
    assert names == ["0000000002.safetensors", "0000000003.safetensors"]
    assert ckpt.checkpoint_idx(names[-1]) == 3
    state["w"][:] = 0
    with ckpt.Manager(tmp_path / "run", format="safetensors") as m:
        assert m.restore(state)[0] == 3
    assert state["w"].tolist() == [3, 3, 3, 3] and int(state["step"]) == 3
    # An .npz manager of the same directory resumes from them too.
    with ckpt.Manager(tmp_path / "run") as m:
        assert m.restore(state)[0] == 3
    seen = hub_read(tmp_path / "run" / "ckpt" / names[-1])[0]
    assert seen["tensors"]["w"]["dtype"] == "F32" and seen["metadata"]["ckpt.index"] == "3"
    with pytest.raises(ckpt.InvalidArgumentError, match="format must be"):
        ckpt.Manager(tmp_path / "other", format="gguf")


def test_a_sharded_save_is_read_as_one_checkpoint_by_ckpt_and_by_huggingface_hub(tmp_path):
    arrays = {"embed": np.arange(3000, dtype=np.float32).reshape(30, 100), "norm": np.ones(100, np.float16),
              "head": np.arange(2000, dtype=np.int64).reshape(20, 100)}
    ckpt.save(tmp_path / "model.safetensors", arrays, metadata={"format": "pt"}, max_shard_size="20kB")
    names = sorted(os.listdir(tmp_path))
    assert names == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     "model.safetensors.index.json"]
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in arrays.values())
    assert index["weight_map"] == {"embed": "model-00001-of-00002.safetensors",  # 12 kB, then norm beside it
                                   "head": "model-00002-of-00002.safetensors",  # 16 kB more would pass 20 kB
                                   "norm": "model-00001-of-00002.safetensors"}
    for source in (tmp_path / "model.safetensors.index.json", tmp_path):
        back = ckpt.load(source)
        assert back.metadata == {"format": "pt"}
        for name, value in arrays.items():
            assert np.array_equal(back[name], value), name
    with ckpt.open(tmp_path) as f:
        assert f.map("head")[19, 99] == 1999
    seen = hub_read(tmp_path / "model.safetensors.index.json")[0]
    assert seen["sharded"] and seen["weight_map"] == index["weight_map"]
    assert seen["headers"]["model-00001-of-00002.safetensors"]["tensors"]["norm"]["dtype"] == "F16"
    assert seen["headers"]["model-00001-of-00002.safetensors"]["metadata"]["format"] == "pt"
    # Everything in one shard: model.safetensors alone, the layout of before removed.
    ckpt.save(tmp_path / "model.safetensors", arrays, max_shard_size=1 << 30)
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors"]
    with pytest.raises(ckpt.InvalidArgumentError, match="not a size like"):
        ckpt.save(tmp_path / "model.safetensors", arrays, max_shard_size="lots")
