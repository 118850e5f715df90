# SPDX-License-Identifier: Apache-2.0
"""Reader.map: read-only numpy arrays over the file without a copy, equal to what reading gives, that keep the file
open as long as they live."""
import gc

import numpy as np
import pytest

import ckpt
from test_npz import every_dtype


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("layout", ["plain", "objax"])
@pytest.mark.parametrize("compression", ["store", "deflate"])
def test_views_equal_reads_for_every_dtype(tmp_path, layout, compression):
    path = tmp_path / "all.npz"
    ckpt.save(path, every_dtype(), layout=layout, compression=compression)
    with ckpt.open(path) as f:
        for name in f:
            view = f.map(name)
            same(view, f[name])
            assert not view.flags.writeable
            with pytest.raises(ValueError):
                view.flags.writeable = True


def test_stored_views_share_one_mapping_of_the_file(tmp_path):
    path = tmp_path / "w.npz"
    ckpt.save(path, {"a": np.arange(100, dtype=np.float32), "b": np.arange(7, dtype=np.int64)})
    with ckpt.open(path) as f:
        a, b = f.map("a"), f.map("b")
        offsets = f.info("b")["data_offset"] - f.info("a")["data_offset"]
        assert b.ctypes.data - a.ctypes.data == offsets
        assert f.map("a").ctypes.data == a.ctypes.data  # the same view each time


def test_files_numpy_writes_are_decoded(tmp_path):
    """Big-endian, Fortran-order and unaligned (every np.savez member) arrays, stored and compressed, with zip64
    local headers (numpy forces them)."""
    arrays = {"big": np.arange(12, dtype=">f8").reshape(3, 4), "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "plain": np.arange(5, dtype=np.int32), "text": np.array(["x", "yz"])}
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / ("%s.npz" % save.__name__)
        save(path, **arrays)
        with ckpt.open(path) as f:
            for name, value in arrays.items():
                view = f.map(name)
                assert view.dtype.isnative and view.flags.c_contiguous
                np.testing.assert_array_equal(view, value)


def test_views_keep_the_file_open_after_close_and_del(tmp_path):
    path = tmp_path / "k.npz"
    ckpt.save(path, {"x": np.arange(1000, dtype=np.float64)})
    f = ckpt.open(path)
    view = f.map("x")[10:20]
    f.close()
    with pytest.raises(ckpt.CkptError):
        f.map("x")  # closed for every other use
    del f
    gc.collect()
    np.testing.assert_array_equal(view, np.arange(10, 20, dtype=np.float64))
    del view
    gc.collect()


def test_closing_after_the_views_are_gone_releases_the_handle(tmp_path):
    path = tmp_path / "r.npz"
    ckpt.save(path, {"x": np.ones(3)})
    f = ckpt.open(path)
    view = f.map("x")
    f.close()
    assert f._deferred is not None
    del view
    gc.collect()
    assert f._deferred is None and f.handle is None


def test_a_corrupt_member_fails_its_first_map(tmp_path):
    path = tmp_path / "bad.npz"
    ckpt.save(path, {"w": np.zeros(1024, np.float32)})
    with ckpt.open(path) as f:
        at = f.info("w")["data_offset"] + 100
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))
    with ckpt.open(path) as f:
        with pytest.raises(ckpt.FormatError, match="member 'w.npy'.*CRC-32 mismatch"):
            f.map("w")
    with ckpt.open(path, map_unverified=True) as f:
        assert f.map("w").view(np.uint8)[100] == 1  # the corrupt bytes, as they are
        with pytest.raises(ckpt.FormatError):
            f["w"]  # reads still check


def test_map_all_maps_every_array_and_copy_on_write_leaves_the_file_alone(tmp_path):
    path = tmp_path / "w.npz"
    arrays = {"w": np.arange(1000, dtype=np.float32).reshape(10, 100), "b": np.arange(5, dtype=np.int64)}
    ckpt.save(path, arrays)
    before = path.read_bytes()
    with ckpt.open(path) as f:
        views = f.map_all()
        assert list(views) == ["w", "b"]
        for name in arrays:
            same(views[name], arrays[name])
            assert not views[name].flags.writeable
        assert views["w"].ctypes.data == f.map("w").ctypes.data
    with ckpt.open(path, map_writable=True) as f:
        views = f.map_all()
    assert views["w"].flags.writeable
    views["w"] *= 2  # the file is closed: the arrays keep it, and their pages are copied as they are written
    assert np.array_equal(views["w"], arrays["w"] * 2)
    assert path.read_bytes() == before
    with ckpt.open(path) as f:
        same(f["w"], arrays["w"])
    del views
    gc.collect()
