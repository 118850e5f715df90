# SPDX-License-Identifier: Apache-2.0
"""ckpt.save / load / restore / open: values bit for bit, every dtype, file objects, metadata, idiomatic errors."""
import io
import json
import os
import zipfile

import numpy as np
import pytest

import ckpt

NUMERIC = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
           np.float32, np.float64, np.complex64, np.complex128]


def every_dtype():
    rng = np.random.default_rng(3)
    arrays = {}
    for t in NUMERIC:
        raw = rng.integers(0, 256, size=2 * 3 * np.dtype(t).itemsize, dtype=np.uint8)
        arrays[np.dtype(t).name] = raw.view(t).reshape(2, 3) if t is not np.bool_ else raw[:6].reshape(2, 3) % 2 == 1
    arrays["text"] = np.array(["a", "été", ""], dtype="U4")
    arrays["bytes"] = np.array([b"ab", b"c"], dtype="S3")
    arrays["void"] = np.frombuffer(b"0123456789ab", "V4")
    arrays["scalar"] = np.float64(-0.0)
    arrays["empty"] = np.zeros((0, 4), np.int32)
    arrays["bf16"] = ckpt.typed(np.array([0x3f80, 0xc000, 0x7fc0, 0x0001], np.uint16), "bfloat16")
    for name in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]:
        arrays[name] = ckpt.typed(np.array([1, 2, 0x7f, 0x80, 0xff], np.uint8), name)
    return arrays


def bits(value):
    return value.bits.tobytes() if isinstance(value, ckpt.typed) else np.asarray(value).tobytes()


@pytest.mark.parametrize("layout", ["plain", "objax"])
@pytest.mark.parametrize("compression", ["store", "deflate"])
def test_every_dtype_round_trips_bit_for_bit(tmp_path, layout, compression):
    arrays = every_dtype()
    path = tmp_path / "all.npz"
    ckpt.save(path, arrays, layout=layout, compression=compression, metadata={"step": "7"})
    back = ckpt.load(path)
    assert list(back) == list(arrays)
    assert back.metadata == {"step": "7"}
    for name, value in arrays.items():
        assert back[name].tobytes() == bits(value), name
        assert back[name].shape == np.shape(value.bits if isinstance(value, ckpt.typed) else value), name
    assert back["bf16"].dtype == np.dtype("V2") and back["bf16"].ckpt_dtype == "bfloat16"
    assert back["float8_e5m2"].ckpt_dtype == "float8_e5m2"
    assert back["void"].dtype == np.dtype("V4") and not getattr(back["void"], "ckpt_dtype", None)
    # What numpy reads is the same bytes.
    with np.load(path) as data:
        key = (lambda n: str(list(data["names"]).index(n))) if layout == "objax" else (lambda n: n)
        for name, value in arrays.items():
            assert data[key(name)].tobytes() == bits(value), name


def test_a_loaded_bfloat16_array_keeps_its_type_when_saved_again(tmp_path):
    ckpt.save(tmp_path / "a.npz", {"w": ckpt.typed(np.array([0x3f80, 0x4000], np.uint16), "bfloat16")})
    loaded = ckpt.load(tmp_path / "a.npz")
    ckpt.save(tmp_path / "b.npz", {"w": loaded["w"][1:]})  # a slice is still a RawArray
    with ckpt.open(tmp_path / "b.npz") as f:
        assert f.ckpt_dtype("w") == "bfloat16"
        assert f["w"].tobytes() == np.uint16(0x4000).tobytes()
    assert ckpt.view(loaded["w"], "bfloat16").tolist() == [1.0, 2.0]


def test_torch_tensors_save_and_restore_in_place_including_bfloat16(tmp_path):
    torch = pytest.importorskip("torch")
    w = torch.tensor([[1.5, -2.0], [3.0, float("inf")]], dtype=torch.float32)
    b = torch.tensor([1.0, -0.0, float("nan"), 3.140625], dtype=torch.bfloat16)
    ckpt.save(tmp_path / "t.npz", {"w": w, "b": b})
    with np.load(tmp_path / "t.npz") as data:
        assert data["b"].dtype == np.dtype("V2")
        assert data["b"].tobytes() == b.view(torch.int16).numpy().tobytes()
    w2, b2 = torch.zeros(2, 2), torch.zeros(4, dtype=torch.bfloat16)
    target = {"w": w2, "b": b2}
    ckpt.restore(tmp_path / "t.npz", target)
    assert target["w"] is w2 and torch.equal(w2, w)
    assert target["b"] is b2 and torch.equal(b2.view(torch.int16), b.view(torch.int16))


def test_file_objects_are_read_and_written_through_memory(tmp_path):
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "s": np.int64(3)}
    buf = io.BytesIO()
    ckpt.save(buf, arrays, metadata={"k": "v"})
    assert np.load(io.BytesIO(buf.getvalue()))["w"].tolist() == arrays["w"].tolist()
    back = ckpt.load(io.BytesIO(buf.getvalue()))
    assert back["w"].tolist() == arrays["w"].tolist() and back.metadata == {"k": "v"}
    target = {"w": np.zeros((3, 4), np.float32), "s": np.zeros((), np.int64)}
    assert ckpt.restore(io.BytesIO(buf.getvalue()), target) == {"k": "v"}
    assert target["w"].tolist() == arrays["w"].tolist() and int(target["s"]) == 3
    with open(tmp_path / "f.npz", "wb") as f:
        ckpt.save(f, arrays)
    assert ckpt.load(tmp_path / "f.npz")["s"] == 3


def test_restore_fills_arrays_in_place_and_replaces_what_it_cannot_fill(tmp_path):
    ckpt.save(tmp_path / "r.npz", {"w": np.arange(4, dtype=np.float32), "n": np.int64(9), "extra": np.ones(2)})
    w = np.zeros(4, np.float32)
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    target = {"w": w, "n": 0}
    ckpt.restore(tmp_path / "r.npz", target)
    assert target["w"] is w and w.tolist() == [0, 1, 2, 3]
    assert int(target["n"]) == 9  # a Python number cannot be filled in place: the entry is replaced
    other = {"w": frozen}
    ckpt.restore(tmp_path / "r.npz", other)
    assert other["w"] is not frozen and other["w"].tolist() == [0, 1, 2, 3] and frozen.tolist() == [0] * 4


def test_a_renamer_maps_the_names_on_disk(tmp_path):
    ckpt.save(tmp_path / "n.npz", {"model/w": np.ones(2), "model/b": np.zeros(1)})
    for renamer in [lambda n: n.replace("model/", "net."), {"model/": "net."}, [(r"^model/", "net.")]]:
        target = {"net.w": np.zeros(2), "net.b": np.ones(1)}
        ckpt.restore(tmp_path / "n.npz", target, renamer=renamer)
        assert target["net.w"].tolist() == [1, 1] and target["net.b"].tolist() == [0]


def test_a_renamer_that_raises_aborts_the_restore_with_its_exception(tmp_path):
    ckpt.save(tmp_path / "n.npz", {"w": np.ones(2)})

    def refuse(name):
        raise KeyError("no " + name)

    with pytest.raises(KeyError, match="no w"):
        ckpt.restore(tmp_path / "n.npz", {"w": np.zeros(2)}, renamer=refuse)


def test_lazy_open_reads_only_what_is_asked_and_knows_every_header(tmp_path):
    ckpt.save(tmp_path / "l.npz", {"a": np.arange(3, dtype=np.int16), "b": np.ones((2, 2))}, metadata={"m": "1"})
    with ckpt.open(tmp_path / "l.npz") as f:
        assert f.keys() == ["a", "b"] and len(f) == 2 and "a" in f and "z" not in f
        assert f.shape("b") == (2, 2) and f.dtype("a") == np.int16 and f.ckpt_dtype("b") == "float64"
        assert f.metadata == {"m": "1"}
        assert f["a"].tolist() == [0, 1, 2]
        out = np.zeros((2, 2))
        assert f.read_into("b", out) is out and out.tolist() == [[1, 1], [1, 1]]
        with pytest.raises(KeyError, match="no array 'z'"):
            f["z"]


@pytest.mark.parametrize("compression", ["store", "deflate"])
def test_read_range_gives_pieces_of_the_flat_array_and_checks_the_crc_at_the_last(tmp_path, compression):
    a = np.arange(100000, dtype=">f4").reshape(100, 1000)  # big-endian: swapped piece by piece
    b = np.arange(12, dtype=np.int64)
    np.savez_compressed(tmp_path / "r.npz", a=a, b=b) if compression == "deflate" else np.savez(tmp_path / "r.npz", a=a, b=b)
    with ckpt.open(tmp_path / "r.npz") as f:
        pieces = [f.read_range("a", k, 30000) for k in range(0, 90000, 30000)] + [f.read_range("a", 90000, 10000)]
        assert np.array_equal(np.concatenate(pieces), a.ravel()) and pieces[0].dtype == np.float32
        assert f.read_range("b", 5, 3).tolist() == [5, 6, 7] and f.read_range("b", 1, 2).tolist() == [1, 2]
        assert f.read_range("b", 12, 0).size == 0
        with pytest.raises(ckpt.InvalidArgumentError, match="past the end of array 'b'"):
            f.read_range("b", 10, 3)
        with pytest.raises(KeyError, match="no array 'z'"):
            f.read_range("z", 0, 1)
    if compression == "store":  # a flipped data byte: the in-order pieces fail at the last one
        raw = bytearray((tmp_path / "r.npz").read_bytes())
        with ckpt.open(tmp_path / "r.npz") as f:
            at = f.info("a")["data_offset"] + 8
        raw[at] ^= 1
        (tmp_path / "r.npz").write_bytes(bytes(raw))
        with ckpt.open(tmp_path / "r.npz") as f:
            f.read_range("a", 0, 50000)
            with pytest.raises(ckpt.FormatError, match="member 'a.npy'.*CRC-32 mismatch"):
                f.read_range("a", 50000, 50000)


def test_a_missing_file_is_FileNotFoundError_with_the_code_and_path(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        ckpt.load(tmp_path / "nope.npz")
    assert isinstance(e.value, ckpt.NotFoundError) and e.value.code == ckpt.errors.ENOTFOUND
    assert "nope.npz" in e.value.message
    with pytest.raises(ckpt.NotFoundError):
        ckpt.open(tmp_path / "nope.npz")


def test_a_corrupt_file_is_a_FormatError_naming_the_member(tmp_path):
    path = tmp_path / "c.npz"
    ckpt.save(path, {"w": np.arange(100, dtype=np.float32)})
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF  # inside w's data
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as e:
        ckpt.load(path)
    assert isinstance(e.value, ckpt.FormatError) and e.value.code == ckpt.errors.EFORMAT
    assert "member 'w.npy'" in str(e.value) and "CRC" in str(e.value)
    with pytest.raises(ckpt.FormatError):
        ckpt.load(io.BytesIO(b"not a zip at all"))


def test_a_mismatch_lists_the_missing_and_unused_names_and_changes_nothing(tmp_path):
    ckpt.save(tmp_path / "m.npz", {"w": np.ones(3), "old_b": np.ones(2)})
    w, b = np.zeros(3), np.zeros(2)
    with pytest.raises(ValueError) as e:
        ckpt.restore(tmp_path / "m.npz", {"w": w, "b": b})
    assert isinstance(e.value, ckpt.MismatchError) and e.value.code == ckpt.errors.EMISMATCH
    assert "missing from the file: 'b'" in e.value.message and "unused names in the file: 'old_b'" in e.value.message
    assert w.tolist() == [0, 0, 0]
    with pytest.raises(ckpt.MismatchError, match="'w' is float32 \\(3\\) in the collection but float64 \\(3\\)"):
        ckpt.restore(tmp_path / "m.npz", {"w": np.zeros(3, np.float32)})


def test_bad_arguments_are_InvalidArgumentError_or_TypeError(tmp_path):
    with pytest.raises(ckpt.InvalidArgumentError, match="reserved"):
        ckpt.save(tmp_path / "x.npz", {"__ckpt_metadata__": np.ones(1)})
    with pytest.raises(TypeError, match="object"):
        ckpt.save(tmp_path / "x.npz", {"o": np.array([None], dtype=object)})
    with pytest.raises(ValueError, match="layout"):
        ckpt.save(tmp_path / "x.npz", {}, layout="zip")


def test_the_metadata_member_is_json_numpy_can_read(tmp_path):
    ckpt.save(tmp_path / "j.npz", {"w": ckpt.typed(np.zeros(2, np.uint8), "float8_e4m3fn")},
              metadata={"loss": "0.5", "note": "∂"})
    with np.load(tmp_path / "j.npz") as data:
        meta = json.loads(str(data["__ckpt_metadata__"]))
    assert meta == {"format": 1, "dtypes": {"w": "float8_e4m3fn"}, "metadata": {"loss": "0.5", "note": "∂"}}
    with zipfile.ZipFile(tmp_path / "j.npz") as z:
        assert z.namelist() == ["w.npy", "__ckpt_metadata__.npy"]


def test_saving_is_atomic_a_failed_save_leaves_the_previous_file(tmp_path):
    path = tmp_path / "a.npz"
    ckpt.save(path, {"w": np.ones(2)})
    before = path.read_bytes()
    with pytest.raises(TypeError):
        ckpt.save(path, {"w": np.ones(2), "bad": np.array([object()])})
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["a.npz"]


def test_a_collection_is_built_once_and_saved_and_restored_many_times(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = ckpt.typed(np.array([0x3f80], np.uint16), "bfloat16")
    with ckpt.Collection({"w": w, "b": b}, metadata={"run": "a"}) as c:
        assert len(c) == 2 and c.in_place
        ckpt.save(tmp_path / "c.npz", c, metadata={"step": "1"})
        assert c.metadata == {"run": "a", "step": "1"}
        w[...] = 7  # ckpt points at w: the next save sees the new values without rebuilding
        ckpt.save(tmp_path / "d.npz", c)
        assert ckpt.load(tmp_path / "c.npz")["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
        assert ckpt.load(tmp_path / "d.npz")["w"].tolist() == [[7, 7, 7], [7, 7, 7]]
        assert ckpt.restore(tmp_path / "c.npz", c) == {"run": "a", "step": "1"}
        assert w.tolist() == [[0, 1, 2], [3, 4, 5]]
    with ckpt.Collection({"t": np.arange(6.0)[::2]}) as strided:
        assert not strided.in_place
        ckpt.save(tmp_path / "s.npz", strided)  # saving a copy is fine
        with pytest.raises(TypeError, match="'t'"):
            ckpt.restore(tmp_path / "s.npz", strided)


@pytest.mark.parametrize("compression", ["store", "deflate"])
def test_info_tells_how_the_file_holds_each_array(tmp_path, compression):
    w = np.arange(64, dtype=np.float32)
    ckpt.save(tmp_path / "i.npz", {"w": w}, layout="objax", compression=compression)
    data = (tmp_path / "i.npz").read_bytes()
    with ckpt.open(tmp_path / "i.npz") as f, zipfile.ZipFile(tmp_path / "i.npz") as z:
        assert f.layout == "objax"
        info = f.info("w")
        zi = z.getinfo("0.npy")
        assert info["member"] == "0.npy" and info["compression"] == compression and info["nbytes"] == 256
        assert info["crc32"] == zi.CRC and info["stored_bytes"] == zi.compress_size
        if compression == "store":
            assert info["data_offset"] % 64 == 0 and data[info["data_offset"]:info["data_offset"] + 256] == w.tobytes()
        else:
            assert info["data_offset"] == 0
        assert info["byte_order"] == "<" and info["fortran_order"] is False
        assert f.file_size == len(data)


def test_info_tells_the_byte_order_and_memory_order_numpy_wrote(tmp_path):
    c = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.savez(tmp_path / "o.npz", big=c.astype(">f8"), fortran=np.asfortranarray(c), big_fortran=np.asfortranarray(
        c.astype(">i4")), flags=np.array([True, False]), text=np.array(["ab"], ">U2"), small=np.arange(3, dtype=np.int8))
    with ckpt.open(tmp_path / "o.npz") as f:
        got = {name: (f.info(name)["byte_order"], f.info(name)["fortran_order"]) for name in f.keys()}
        assert got == {"big": (">", False), "fortran": ("<", True), "big_fortran": (">", True), "flags": ("|", False),
                       "text": (">", False), "small": ("|", False)}
        assert f["big_fortran"].tolist() == c.tolist()  # delivered in native byte order and C order


def test_a_source_is_saved_as_the_array_it_reads_stored_and_deflated(tmp_path):
    a = np.arange(3 << 20, dtype=np.float32)
    raw = a.tobytes()
    calls = []

    def read(offset, size):
        calls.append((offset, size))
        return raw[offset:offset + size]

    for compression in ("store", "deflate"):
        path = str(tmp_path / ("s-%s.npz" % compression))
        ckpt.save(path, {"w": ckpt.Source(np.float32, a.shape, read), "b": np.ones(2)},
                  compression=compression)
        with np.load(path) as z:
            assert np.array_equal(z["w"], a) and np.array_equal(z["b"], np.ones(2))
    assert len(calls) > 2 and max(size for _, size in calls) <= 4 << 20
    from ckpt._vars import Vars
    v = Vars()
    v.add("w", ckpt.Source(np.float32, a.shape, read))
    v.add("b", np.ones(2))
    assert v.is_source(0) and not v.is_source(1)


def test_a_failing_source_fails_the_save_and_leaves_the_old_file(tmp_path):
    path = str(tmp_path / "x.npz")
    np.savez(path, w=np.arange(3))

    def read(offset, size):
        raise OSError("the disk went away")

    with pytest.raises(ckpt.StorageError, match="the disk went away"):
        ckpt.save(path, {"w": ckpt.Source(np.uint8, (1 << 20,), read)})
    with np.load(path) as z:
        assert np.array_equal(z["w"], np.arange(3))
    assert os.listdir(str(tmp_path)) == ["x.npz"]
