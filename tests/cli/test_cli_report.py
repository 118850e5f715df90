# SPDX-License-Identifier: Apache-2.0
"""ckpt report and ckpt show --hist: every statistic and histogram against numpy's for every numeric dtype, a
run's curves, change map and warnings against what numpy computes of the same checkpoints, two files compared, and
the errors users meet. The page itself is judged in a browser by tests/report."""
import json
import math
import os

import numpy as np
import pytest

from cli_inputs import FLOAT8, savez_with_metadata
from cli_run import run, run_json, with_ckpt


def bf16_bits(values):
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def value(v):
    """A JSON value of the report as a float ("nan", "inf", "-inf" included)."""
    return float(v) if not isinstance(v, str) else {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]


def expected_stats(x):
    x = np.asarray(x, np.float64).reshape(-1)
    f = x[np.isfinite(x)]
    counts, edges = np.histogram(f, bins=64)
    return {"min": f.min(), "max": f.max(), "mean": f.mean(), "std": f.std(), "nan": int(np.isnan(x).sum()),
            "pos_inf": int(np.isposinf(x).sum()), "neg_inf": int(np.isneginf(x).sum()),
            "inf": int(np.isinf(x).sum()), "zeros": int((x == 0).sum()), "elements": int(x.size),
            "counts": counts.tolist(), "edges": edges.tolist()}


def check_array(got, x, name):
    want = expected_stats(x)
    for key in ("nan", "pos_inf", "neg_inf", "inf", "zeros", "elements"):
        assert got[key] == want[key], (name, key, got[key], want[key])
    assert (value(got["min"]), value(got["max"])) == (want["min"], want["max"]), name
    assert value(got["mean"]) == pytest.approx(want["mean"], rel=1e-12, abs=1e-12), name
    assert value(got["std"]) == pytest.approx(want["std"], rel=1e-9, abs=1e-12), name
    # The histogram is numpy's exactly: the same edges, the same count in every bin.
    assert [value(e) for e in got["histogram"]["edges"]] == want["edges"], name
    assert got["histogram"]["counts"] == want["counts"], name


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e3, -2.5])


def test_statistics_and_histograms_equal_numpys_for_every_dtype(tmp_path):
    rng = np.random.default_rng(11)
    arrays = {
        "f64": np.concatenate([rng.normal(1e6, 3.0, 5000), SPECIAL]),
        "f32": np.concatenate([rng.normal(0, 1, 3000), SPECIAL]).astype(np.float32).reshape(97, 31),
        "f16": np.concatenate([rng.normal(0, 10, 1000), SPECIAL]).astype(np.float16),
        "i8": rng.integers(-128, 128, 777).astype(np.int8),
        "i16": rng.integers(-30000, 30000, 777).astype(np.int16),
        "i32": rng.integers(-2 ** 31, 2 ** 31, 777).astype(np.int32),
        "i64": rng.integers(-2 ** 40, 2 ** 40, 777),
        "u8": rng.integers(0, 256, 999).astype(np.uint8),
        "u16": rng.integers(0, 65536, 999).astype(np.uint16),
        "u32": rng.integers(0, 2 ** 32, 999).astype(np.uint32),
        "u64": rng.integers(0, 2 ** 50, 999).astype(np.uint64),
        "b": rng.integers(0, 2, 100).astype(bool),
        "one_value": np.full(10, 2.5, np.float32),  # numpy widens a single value to [v - 0.5, v + 0.5]
        # Three pieces of 8 MiB and a bit: statistics and histograms merged across pieces.
        "large": (rng.standard_normal(6_300_000) * 5).astype(np.float32),
    }
    bf = np.concatenate([rng.normal(0, 2, 500), SPECIAL]).astype(np.float32)
    float8_bits = {name: np.arange(256, dtype=np.uint8).view("V1") for name in FLOAT8}
    members = dict(arrays, bf16=bf16_bits(bf).view("V2"), **float8_bits)  # raw bytes, typed by the record
    savez_with_metadata(str(tmp_path / "all.npz"), members,
                        dtypes=dict({"bf16": "bfloat16"}, **{name: name for name in FLOAT8}))
    expected = dict(arrays, bf16=(bf16_bits(bf).astype(np.uint32) << 16).view(np.float32))
    for name, decode in FLOAT8.items():  # every one of the 256 values, decoded from the format's definition
        expected[name] = np.array([decode(b) for b in range(256)])
    doc = run_json("report", tmp_path / "all.npz")
    assert doc["kind"] == "file" and len(doc["checkpoints"]) == 1
    got = {a["name"]: a for a in doc["arrays"]}
    assert sorted(got) == sorted(expected)
    for name, x in expected.items():
        check_array(got[name], x, name)
    assert got["bf16"]["dtype"] == "bfloat16" and got["f32"]["shape"] == [97, 31]
    assert got["large"]["bytes"] == arrays["large"].nbytes
    # The exact integers past what a double holds are kept as integers.
    assert got["u64"]["max"] == int(arrays["u64"].max()) and isinstance(got["u64"]["max"], int)
    # One file: no changes, no differences; warnings for the arrays with NaN and Inf.
    assert doc["changes"] == [] and "differences" not in doc
    kinds = {(w["kind"], w["name"]) for w in doc["warnings"]}
    assert ("nan", "f64") in kinds and ("inf", "f16") in kinds and ("nan", "b") not in kinds
    assert ("nan", "float8_e4m3fn") in kinds and ("inf", "float8_e4m3fn") not in kinds  # e4m3fn has no Inf
    # ckpt stats reads the same arrays the same way.
    stats = {a["name"]: a for a in run_json("stats", tmp_path / "all.npz")["arrays"]}
    for name in expected:
        assert (stats[name]["min"], stats[name]["mean"]) == (got[name]["min"], got[name]["mean"]), name


def test_histograms_of_elements_on_and_beside_numpys_edges(tmp_path):
    # Bins are found sixteen elements at a time by truncation, and by numpy's checks against its edges only where
    # an element may lie near one: elements on the edges and a few units in the last place either side, among
    # others, at offsets where the edges are inexact and ranges narrow beside their magnitude.
    rng = np.random.default_rng(21)
    arrays = {}
    for k, (low, high) in enumerate([(1e6 + 0.1, 1e6 + 3.7), (-3.3, 7.9), (1e15, 1e15 + 0.5), (-1e-300, 3e-300),
                                     (0.0, 1.0), (-7e150, 8e150)]):
        edges = np.histogram_bin_edges(np.array([low, high]), bins=64)
        near = [np.nextafter(edges, direction) for direction in (-np.inf, np.inf)]
        for _ in range(3):
            near += [np.nextafter(near[-2], -np.inf), np.nextafter(near[-1], np.inf)]
        ulp = np.spacing(np.maximum(np.abs(edges), np.finfo(np.float64).tiny))
        scaled = [edges + m * ulp for m in (-4096, -64, 64, 4096)]
        inside = rng.uniform(low, high, 3000)
        x = np.concatenate([[low, high], edges, *near, *scaled, inside])
        x = x[(x >= low) & (x <= high)]
        rng.shuffle(x)
        arrays["f64_%d" % k] = x
        if abs(high) < 3e38 and abs(low) > 1e-30 or (low, high) == (0.0, 1.0):
            arrays["f32_%d" % k] = x.astype(np.float32)
    np.savez(str(tmp_path / "edges.npz"), **arrays)
    got = {a["name"]: a for a in run_json("report", tmp_path / "edges.npz")["arrays"]}
    for name, x in arrays.items():
        check_array(got[name], x, name)


def test_a_safetensors_file_reports_as_its_npz(tmp_path):
    rng = np.random.default_rng(4)
    np.savez(str(tmp_path / "m.npz"), w=rng.normal(size=(30, 20)).astype(np.float32), b=np.arange(7.0),
             n=np.array([1.0, np.nan], np.float32))
    assert run("convert", tmp_path / "m.npz", tmp_path / "m.safetensors").returncode == 0
    npz, st = run_json("report", tmp_path / "m.npz"), run_json("report", tmp_path / "m.safetensors")
    by_name = lambda doc: sorted(doc["arrays"], key=lambda a: a["name"])  # noqa: E731  (safetensors sorts names)
    assert by_name(st) == by_name(npz)
    assert [w["kind"] for w in st["warnings"]] == ["nan"]
    # A run of the two formats, one after the other: nothing changed between them.
    doc = run_json("report", tmp_path / "m.npz", tmp_path / "m.safetensors")
    assert {d["name"]: d["relative_l2"] for d in doc["differences"]} == {"w": 0, "b": 0, "n": "nan"}


def test_arrays_without_numbers_get_no_statistics(tmp_path):
    np.savez(str(tmp_path / "t.npz"), s=np.array(["a", "bc"]), c=np.array([1 + 2j]), e=np.zeros((0, 3)),
             allnan=np.array([np.nan, np.inf]), f=np.asfortranarray(np.arange(12.0).reshape(3, 4)))
    got = {a["name"]: a for a in run_json("report", tmp_path / "t.npz")["arrays"]}
    assert got["s"]["min"] is None and got["s"]["histogram"] is None and got["s"]["nan"] is None
    assert got["c"]["mean"] is None and got["c"]["histogram"] is None
    assert (got["e"]["elements"], got["e"]["histogram"]) == (0, None)
    assert (got["allnan"]["nan"], got["allnan"]["inf"], got["allnan"]["histogram"]) == (1, 1, None)
    check_array(got["f"], np.arange(12.0).reshape(3, 4), "f")  # Fortran order: read whole, in C order


def make_run(tmp_path):
    """A manager's run of 10 checkpoints: a weight that trains and gets a NaN at step 700, a bias whose norm jumps
    36-fold at step 500, an embedding never trained, a step counter from 0; loss, accuracy and lr as metrics."""
    with_ckpt("""
        import numpy as np, ckpt
        rng = np.random.default_rng(0)
        w = rng.normal(size=(64, 32)).astype(np.float32)
        emb = rng.normal(size=(100, 16)).astype(np.float32)
        b = np.zeros(32, np.float32)
        with ckpt.Manager("run", keep=10) as m:
            for step in range(0, 1000, 100):
                w -= 0.01 * rng.normal(size=w.shape).astype(np.float32)
                b += 0.1
                if step == 700:
                    w[3, 4] = np.nan
                if step == 500:
                    b *= 30
                loss = 1.0 / (1 + step / 100)
                m.save({"layer/w": w, "layer/b": b, "emb": emb, "count": np.array(step, np.int64)}, step,
                       metrics={"loss": loss, "accuracy": 1 - loss, "lr": 0.1})
    """, cwd=tmp_path)
    return tmp_path / "run"


def load_checkpoints(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".npz"):
            with np.load(os.path.join(directory, name)) as z:
                out[int(name[:-4])] = {k: z[k] for k in z.files if not k.startswith("__")}
    return out


def test_a_run_curves_changes_and_warnings_equal_numpys(tmp_path):
    run_dir = make_run(tmp_path)
    page = tmp_path / "report.html"
    doc = run_json("report", run_dir, "-o", page)
    steps = list(range(0, 1000, 100))
    assert doc["kind"] == "run" and [c["step"] for c in doc["checkpoints"]] == steps
    for c in doc["checkpoints"]:
        assert c["bytes"] == os.path.getsize(c["path"]) and c["path"].endswith("%010d.npz" % c["step"])
    metrics = {m["name"]: m for m in doc["metrics"]}
    assert list(metrics) == ["loss", "accuracy", "lr"]
    assert metrics["loss"]["values"] == [1.0 / (1 + s / 100) for s in steps]
    assert (metrics["loss"]["best_step"], metrics["loss"]["better"]) == (900, "lower")
    assert (metrics["accuracy"]["best_step"], metrics["accuracy"]["better"]) == (900, "higher")
    assert (metrics["lr"]["best_step"], metrics["lr"]["better"]) == (None, None)

    # The change map: ||x_t - x_t-1|| / ||x_t-1||, as numpy computes it in float64.
    ckpts = load_checkpoints(run_dir / "ckpt")
    changes = {c["name"]: c for c in doc["changes"]}
    assert list(changes) == ["layer/w", "layer/b", "emb", "count"]
    for name, c in changes.items():
        assert c["steps"] == steps[1:]
        for k, got in enumerate(c["relative_change"]):
            a = ckpts[steps[k]][name].astype(np.float64)
            b = ckpts[steps[k + 1]][name].astype(np.float64)
            if not (np.isfinite(a).all() and np.isfinite(b).all()):
                assert got == "nan", (name, k)
            elif np.linalg.norm(a) == 0:
                assert got == "inf", (name, k)  # from all zeros: no scale to be relative to
            else:
                assert got == pytest.approx(np.linalg.norm(b - a) / np.linalg.norm(a), rel=1e-12), (name, k)

    # Warnings: the NaN with the step it first appears at, the jump, the frozen embedding; NaN first.
    warnings = [(w["kind"], w["name"], w["step"]) for w in doc["warnings"]]
    assert warnings == [("nan", "layer/w", 700), ("jump", "layer/b", 500), ("frozen", "emb", 0)], warnings
    assert "36-fold" in doc["warnings"][1]["message"]

    # The newest checkpoint's arrays, as numpy reads them.
    got = {a["name"]: a for a in doc["arrays"]}
    for name, x in ckpts[900].items():
        if np.isfinite(x.astype(np.float64)).any():
            check_array(got[name], x, name)

    # The page: written, self-contained, and the same bytes for the same checkpoints (no time in it).
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in html
    for needle in ("layer/w", "holds 1 NaN at step 700", "never changed", "data-metric=\"loss\""):
        assert needle in html, needle
    for forbidden in ("http://", "https://", "<script", "src="):
        assert forbidden not in html, forbidden
    first = page.read_bytes()
    assert run("report", run_dir, "-o", page).returncode == 0
    assert page.read_bytes() == first
    # The run's logdir or its checkpoint directory, and a progress line on stderr when asked for.
    p = run("report", run_dir / "ckpt", "--json", env={"CKPT_PROGRESS_AFTER_MS": "0"})
    assert p.returncode == 0 and json.loads(p.stdout)["checkpoints"] == doc["checkpoints"]


def test_two_files_are_compared_array_by_array(tmp_path):
    rng = np.random.default_rng(3)
    a = {"w": rng.normal(size=(50, 40)), "b": np.arange(5, dtype=np.float32), "same": np.ones(3),
         "only_a": np.zeros(2), "reshaped": np.zeros((2, 3))}
    b = {"w": a["w"] + rng.normal(scale=1e-3, size=(50, 40)), "b": a["b"] * 2, "same": np.ones(3),
         "only_b": np.zeros(2), "reshaped": np.zeros((3, 2))}
    np.savez(str(tmp_path / "a.npz"), **a)
    np.savez(str(tmp_path / "b.npz"), **b)
    doc = run_json("report", tmp_path / "a.npz", tmp_path / "b.npz", "-o", tmp_path / "diff.html")
    assert doc["kind"] == "files" and [c["step"] for c in doc["checkpoints"]] == [0, 1]
    diffs = {d["name"]: d for d in doc["differences"]}
    for name in ("w", "b", "same"):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        assert diffs[name]["max_abs"] == np.abs(y - x).max(), name
        assert diffs[name]["relative_l2"] == pytest.approx(np.linalg.norm(y - x) / np.linalg.norm(x), rel=1e-12)
    assert diffs["same"]["relative_l2"] == 0
    assert diffs["reshaped"]["relative_l2"] is None and "shape" in diffs["reshaped"]["note"]
    assert doc["only_in"] == [{"path": str(tmp_path / "a.npz"), "names": ["only_a"]},
                              {"path": str(tmp_path / "b.npz"), "names": ["only_b"]}]
    html = (tmp_path / "diff.html").read_text()
    assert 'id="differences"' in html and "only_a" in html and "only_b" in html


def test_errors_name_the_path_and_keep_the_previous_page(tmp_path):
    p = run("report", tmp_path / "missing.npz", "--json")
    assert p.returncode == 3 and str(tmp_path / "missing.npz") in p.stderr, p.stderr
    np.savez(str(tmp_path / "a.npz"), x=np.arange(4.0))
    p = run("report", tmp_path / "a.npz")
    assert p.returncode == 2 and "-o report.html" in p.stderr, p.stderr
    # A corrupt array (its CRC-32 fails): exit 1, the file named, the page already there untouched.
    page = tmp_path / "page.html"
    page.write_text("previous")
    data = (tmp_path / "a.npz").read_bytes()
    at = data.find(np.arange(4.0).tobytes())
    (tmp_path / "bad.npz").write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    p = run("report", tmp_path / "bad.npz", "-o", page)
    assert p.returncode == 1 and str(tmp_path / "bad.npz") in p.stderr and "CRC" in p.stderr, p.stderr
    assert page.read_text() == "previous" and not os.path.exists(str(page) + ".tmp")
    # A page that cannot be written: exit 3, its path named.
    p = run("report", tmp_path / "a.npz", "-o", tmp_path / "no" / "such" / "dir.html")
    assert p.returncode == 3 and str(tmp_path / "no" / "such" / "dir.html") in p.stderr, p.stderr
    # In a run, a checkpoint that cannot be opened is a warning; the others are reported.
    run_dir = make_run(tmp_path)
    (run_dir / "ckpt" / "0000000400.npz").write_bytes(b"not a zip")
    doc = run_json("report", run_dir)
    assert 400 not in [c["step"] for c in doc["checkpoints"]] and len(doc["checkpoints"]) == 9
    bad = [w for w in doc["warnings"] if w["kind"] == "unreadable"]
    assert len(bad) == 1 and bad[0]["step"] == 400 and "0000000400.npz" in bad[0]["message"], bad


def test_show_hist_draws_numpys_histogram(tmp_path):
    x = np.random.default_rng(5).normal(size=5000).astype(np.float32)
    x[7] = np.nan
    np.savez(str(tmp_path / "h.npz"), x=x, s=np.array(["a"]))
    doc = run_json("show", tmp_path / "h.npz", "--hist", "x")
    f = x[np.isfinite(x)].astype(np.float64)
    counts, edges = np.histogram(f, bins=64)
    assert doc["histogram"]["counts"] == counts.tolist() and doc["histogram"]["edges"] == edges.tolist()
    assert (doc["nan"], doc["elements"], doc["finite"]) == (1, 5000, 4999)
    p = run("show", "--hist", "x", tmp_path / "h.npz")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "%s: 'x' float32 (5000,), 5000 elements, 1 NaN" % (tmp_path / "h.npz")
    bars = lines[2:10]
    assert bars[0].split()[0] == str(counts.max()) and bars[-1].split()[0] == "1"
    # Each column's height in eighths grows with log(1 + count): the tallest bin is a full column.
    blocks = " \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
    columns = [row[row.index(("\u2524", "\u2502")[0 < i < 7]) + 1:] for i, row in enumerate(bars)]
    assert all(len(c) == 64 for c in columns), columns
    heights = [sum(blocks.index(c[k]) for c in columns) for k in range(64)]
    top = int(np.argmax(counts))
    assert heights[top] == 64 and all((h == 0) == (n == 0) for h, n in zip(heights, counts))
    assert lines[-1].split() == [str(x[np.isfinite(x)].min()), str(x[np.isfinite(x)].max())]  # float32's shortest
    p = run("show", tmp_path / "h.npz", "--hist", "s")
    assert p.returncode == 2 and "'s' is unicode" in p.stderr, p.stderr
    p = run("show", tmp_path / "h.npz", "--hist", "nope")
    assert p.returncode == 3 and "no array 'nope'" in p.stderr and "x, s" in p.stderr, p.stderr


def test_names_and_metadata_are_text_on_the_page(tmp_path):
    evil = "<script>alert(1)</script>&'\""
    savez_with_metadata(str(tmp_path / "e.npz"), {evil: np.array([1.0, np.nan])}, metadata={"note": "<img src=x>"})
    page = tmp_path / "e.html"
    assert run("report", tmp_path / "e.npz", "-o", page).returncode == 0
    html = page.read_text()
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#39;&quot;" in html


def test_files_of_one_step_from_two_runs_take_their_positions(tmp_path):
    for run_name, scale in (("a", 1.0), ("b", 1.5)):
        (tmp_path / run_name).mkdir()
        np.savez(str(tmp_path / run_name / "0000000100.npz"), w=np.arange(4.0) * scale)
    doc = run_json("report", tmp_path / "a" / "0000000100.npz", tmp_path / "b" / "0000000100.npz")
    assert [c["step"] for c in doc["checkpoints"]] == [0, 1]
    assert doc["changes"][0]["steps"] == [1] and doc["changes"][0]["relative_change"] == [pytest.approx(0.5)]
    # Steps that rise are kept: the numbers in the names.
    np.savez(str(tmp_path / "a" / "0000000200.npz"), w=np.arange(4.0))
    doc = run_json("report", tmp_path / "a" / "0000000100.npz", tmp_path / "a" / "0000000200.npz")
    assert [c["step"] for c in doc["checkpoints"]] == [100, 200]


def test_large_steps_are_whole_numbers_on_the_page(tmp_path):
    for step, loss in ((120000, "0.5"), (1250000, "0.25")):
        savez_with_metadata(str(tmp_path / ("%010d.npz" % step)), {"w": np.ones(3)}, metadata={"loss": loss})
    page = tmp_path / "big-steps.html"
    assert run("report", tmp_path, "-o", page).returncode == 0
    html = page.read_text()
    assert 'data-step="120000" data-value="0.5"' in html and 'data-step="1250000" data-value="0.25"' in html
    assert "step 120000<" in html and ">1250000<" in html and "e+0" not in html


def test_a_run_of_sharded_steps_says_report_does_not_read_them(tmp_path):
    from cli_inputs import make_sharded_run
    make_sharded_run(str(tmp_path / "sharded"), cwd=tmp_path)  # steps 1 and 2 sharded, checkpoint 3 a file
    doc = run_json("report", tmp_path / "sharded")
    assert [c["step"] for c in doc["checkpoints"]] == [3] and [a["name"] for a in doc["arrays"]] == ["w"]
    assert [(w["kind"], w["step"]) for w in doc["warnings"]] == [("unsupported", 1), ("unsupported", 2)]
    assert doc["warnings"][0]["message"].endswith("0000000001: a sharded step, not read by ckpt report")
