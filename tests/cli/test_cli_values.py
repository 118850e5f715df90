# SPDX-License-Identifier: Apache-2.0
"""Values as users look at them: convert of a transposed (Fortran-order) array, diff of two saves of one state and
where the largest difference is, cat's usage error for an index left open, and stats checked against numpy."""
import json
import zipfile

import numpy as np
import pytest

from cli_run import run, run_json, with_ckpt


def npy_header(path, member):
    with zipfile.ZipFile(path) as z:
        return z.read(member)[:128]


def test_convert_takes_a_transposed_array_and_numpy_loads_the_same_values(tmp_path):
    src = tmp_path / "fortran.npz"
    arrays = {"t": np.arange(12.0).reshape(3, 4).T, "cube": np.asfortranarray(np.arange(60, dtype=np.int16)
                                                                               .reshape(3, 4, 5)),
              "big_endian": np.asfortranarray(np.arange(6, dtype=">f4").reshape(2, 3)),
              "c": np.arange(5, dtype=np.uint8)}
    np.savez(str(src), **arrays)
    assert b"'fortran_order': True" in npy_header(str(src), "t.npy")  # what the user has: numpy wrote it so
    for extra in ([], ["--deflate"], ["--layout", "objax"]):
        out = tmp_path / "out.npz"
        p = run("convert", src, out, *extra)
        assert p.returncode == 0, p.stderr
        if extra == ["--layout", "objax"]:
            assert run("diff", src, out).returncode == 0
            continue
        with np.load(str(out)) as got:
            assert sorted(got.files) == sorted(arrays)
            for name, a in arrays.items():
                assert got[name].shape == a.shape and np.array_equal(got[name], a), name
                assert got[name].dtype.newbyteorder("=") == a.dtype.newbyteorder("="), name
        assert run("diff", src, out).returncode == 0


def test_two_saves_of_one_state_are_equal_and_the_managers_record_is_set_aside(tmp_path):
    with_ckpt("""
        import time, numpy as np, ckpt
        for run in ("a", "b"):
            with ckpt.Manager(run, keep=0) as m:
                m.save({"w": np.arange(6.0).reshape(2, 3)}, 1, metadata={"step": "1"})
            time.sleep(0.01)
    """, cwd=str(tmp_path))
    a, b = tmp_path / "a" / "ckpt" / "0000000001.npz", tmp_path / "b" / "ckpt" / "0000000001.npz"
    p = run("diff", a, b)
    assert p.returncode == 0, p.stdout
    assert "not compared: ckpt.saved_at" in p.stdout and "--all-metadata" in p.stdout
    doc = run_json("diff", a, b)
    assert doc["equal"] is True and doc["metadata"] == []
    assert "ckpt.saved_at" in doc["metadata_ignored"] and "ckpt.saved_at_ns" in doc["metadata_ignored"]
    # Asked for, the manager's record is compared too, and the times differ.
    doc = run_json("diff", a, b, "--all-metadata", status=1)
    assert "ckpt.saved_at" in [m["key"] for m in doc["metadata"]] and doc["metadata_ignored"] == []
    # The user's own metadata is always compared.
    np.savez(str(tmp_path / "c.npz"), w=np.arange(6.0).reshape(2, 3))
    with_ckpt("""
        import numpy as np, ckpt
        ckpt.save("d.npz", {"w": np.arange(6.0).reshape(2, 3)}, metadata={"step": "2"})
    """, cwd=str(tmp_path))
    assert run_json("diff", tmp_path / "c.npz", tmp_path / "d.npz", status=1)["metadata"][0]["key"] == "step"


def test_diff_names_where_the_largest_difference_is(tmp_path):
    a = np.zeros((5, 9), np.float32)
    b = a.copy()
    b[1, 2] = 0.5
    b[3, 7] = -2.0
    b[4, 8] = 1.0
    np.savez(str(tmp_path / "a.npz"), w=a, s=np.array(3.0), i=np.arange(4))
    np.savez(str(tmp_path / "b.npz"), w=b, s=np.array(4.5), i=np.array([0, 1, 7, 3]))
    p = run("diff", tmp_path / "a.npz", tmp_path / "b.npz", "--count")
    assert p.returncode == 1
    assert "w: 3 of 45 elements differ, max abs diff 2 at w[3, 7], max rel diff inf" in p.stdout, p.stdout
    assert "s: 1 of 1 element differs, max abs diff 1.5 at s[()], max rel diff 0.5" in p.stdout, p.stdout
    assert "i: 1 of 4 elements differs, max abs diff 5 at i[2]" in p.stdout, p.stdout
    doc = run_json("diff", tmp_path / "a.npz", tmp_path / "b.npz", "--count", status=1)
    entries = {e["name"]: e for e in doc["arrays"]}
    assert (entries["w"]["max_abs_diff"], entries["w"]["max_abs_diff_index"]) == (2.0, [3, 7])
    assert (entries["s"]["max_abs_diff"], entries["s"]["max_abs_diff_index"]) == (1.5, [])
    assert entries["i"]["max_abs_diff_index"] == [2]
    # Small arrays are compared whole without --count, so they get the place too.
    doc = run_json("diff", tmp_path / "a.npz", tmp_path / "b.npz", status=1)
    assert {e["name"]: e["max_abs_diff_index"] for e in doc["arrays"]} == {"w": [3, 7], "s": [], "i": [2]}


def test_cat_of_an_index_left_open_is_a_usage_error(tmp_path):
    np.savez(str(tmp_path / "f.npz"), w=np.arange(12).reshape(3, 4))
    for text in ("w[1,", "w[0:2", "w["):
        p = run("cat", tmp_path / "f.npz", text)
        assert p.returncode == 2, (text, p.returncode, p.stderr)
        assert p.stderr.startswith("ckpt: '%s' is not an index: the ']' that closes it is missing" % text[1:]), p.stderr
        assert p.stdout == ""
        err = run_json("cat", tmp_path / "f.npz", text, status=2)["error"]
        assert err["name"] == "CKPT_EINVAL"
    # An unknown array stays exit status 3, with or without an index.
    assert run("cat", tmp_path / "f.npz", "x[1,").returncode == 3
    assert run("cat", tmp_path / "f.npz", "x").returncode == 3


def bf16_bits(values):
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def finite_stats(x):
    x = np.asarray(x, np.float64)
    f = x[np.isfinite(x)]
    return {"min": f.min(), "max": f.max(), "mean": f.mean(), "std": f.std(),
            "nan": int(np.isnan(x).sum()), "pos_inf": int(np.isposinf(x).sum()), "neg_inf": int(np.isneginf(x).sum()),
            "zeros": int((x == 0).sum()), "finite": int(f.size), "elements": int(x.size)}


def test_stats_agree_with_numpy(tmp_path):
    rng = np.random.default_rng(7)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e3, -2.5])
    arrays = {
        "f64": np.concatenate([rng.normal(1e6, 3.0, 5000), special]),
        "f32": np.concatenate([rng.normal(0, 1, 3000), special]).astype(np.float32).reshape(-1, 1),
        "f16": np.concatenate([rng.normal(0, 10, 1000), special]).astype(np.float16),
        "i64": np.array([np.iinfo(np.int64).min, -3, 0, 0, 5, np.iinfo(np.int64).max], np.int64),
        "u8": rng.integers(0, 256, 999).astype(np.uint8),
        "b": np.array([True, False, False, True, True]),
    }
    bf = np.concatenate([rng.normal(0, 2, 500), special]).astype(np.float32)
    bf_values = (bf16_bits(bf).astype(np.uint32) << 16).view(np.float32)
    np.savez(str(tmp_path / "s.npz"), bf16=bf16_bits(bf).view("V2"), **arrays)  # 2-byte void: read as bfloat16
    arrays["bf16"] = bf_values
    doc = run_json("stats", tmp_path / "s.npz")
    assert doc["path"] == str(tmp_path / "s.npz")
    got = {a["name"]: a for a in doc["arrays"]}
    assert list(got) == ["bf16", "f64", "f32", "f16", "i64", "u8", "b"]
    assert got["bf16"]["dtype"] == "bfloat16" and got["f32"]["shape"] == [3007, 1]
    for name, x in arrays.items():
        want = finite_stats(x)
        g = got[name]
        for key in ("nan", "pos_inf", "neg_inf", "zeros", "finite", "elements"):
            assert g[key] == want[key], (name, key, g[key], want[key])
        if name == "i64":  # exact as integers, past what a double holds
            assert (g["min"], g["max"]) == (int(x.min()), int(x.max()))
        else:
            assert (g["min"], g["max"]) == (want["min"], want["max"]), name
        assert g["mean"] == pytest.approx(want["mean"], rel=1e-12, abs=1e-12), name
        assert g["std"] == pytest.approx(want["std"], rel=1e-9), name
    # Some arrays only, as a table.
    p = run("stats", tmp_path / "s.npz", "b", "i64")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "%s: 2 arrays" % (tmp_path / "s.npz")
    assert lines[1].split() == ["name", "dtype", "shape", "min", "max", "mean", "std", "nan", "+inf", "-inf", "zeros"]
    assert lines[2].split() == ["b", "bool", "(5,)", "False", "True", "0.6", repr(float(np.std([1, 0, 0, 1, 1]))),
                                "0", "0", "0", "2"]
    assert lines[3].split()[:5] == ["i64", "int64", "(6,)", str(np.iinfo(np.int64).min), str(np.iinfo(np.int64).max)]
    p = run("stats", tmp_path / "s.npz", "nope")
    assert p.returncode == 3 and "no array 'nope'" in p.stderr
    # The table's extremes are elements, printed as cat prints them: each type's shortest form (numpy's str).
    p = run("stats", tmp_path / "s.npz", "f32", "f16", "f64", "bf16")
    extremes = {line.split()[0]: line.split()[-8:-6] for line in p.stdout.splitlines()[2:]}  # min, max
    for name in ("f32", "f16", "f64"):
        x = arrays[name][np.isfinite(arrays[name])]
        assert extremes[name] == [str(x.min()), str(x.max())], (name, extremes[name])
    assert extremes["f32"][0] != repr(float(arrays["f32"][np.isfinite(arrays["f32"])].min()))  # not the double's
    finite_bf = bf_values[np.isfinite(bf_values)]
    u = np.array([float(e) for e in extremes["bf16"]], np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # each reads back as its bfloat16 element
    assert rounded.tolist() == bf16_bits([finite_bf.min(), finite_bf.max()]).tolist()


def test_stats_of_what_has_no_numbers_and_of_a_broken_file(tmp_path):
    np.savez(str(tmp_path / "t.npz"), s=np.array(["a", "bc"]), c=np.array([1 + 2j]), e=np.zeros((0, 3)),
             allnan=np.array([np.nan, np.inf]))
    got = {a["name"]: a for a in run_json("stats", tmp_path / "t.npz")["arrays"]}
    assert got["s"]["min"] is None and got["s"]["nan"] is None and got["s"]["elements"] == 2
    assert got["c"]["mean"] is None
    assert (got["e"]["elements"], got["e"]["min"], got["e"]["zeros"]) == (0, None, 0)
    assert (got["allnan"]["min"], got["allnan"]["nan"], got["allnan"]["pos_inf"]) == (None, 1, 1)
    data = (tmp_path / "t.npz").read_bytes()
    at = data.find(np.array([1 + 2j]).tobytes())
    (tmp_path / "bad.npz").write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    p = run("stats", tmp_path / "bad.npz")
    assert p.returncode == 1 and "CRC" in p.stderr, (p.returncode, p.stderr)
