# SPDX-License-Identifier: Apache-2.0
"""ckpt report's pages in a real browser (Debian's headless Chromium, browser.py): a run with a NaN injected, one
file of every kind of dtype, two files compared. Each page loads with no console error, requests nothing, draws
every chart (not a blank screenshot, light and dark), and its DOM holds what the JSON report says: the array names,
the warnings, the curves' values, one histogram per array with numbers, one cell per change."""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import browser  # noqa: E402
from cli_run import run, with_ckpt  # noqa: E402

why = browser.unavailable()
if why:
    pytest.skip("browser unavailable: " + why, allow_module_level=True)

# What the page holds, read through the DOM after load.
PROBES = {
    "title": "document.title",
    "csp": "document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]').content",
    "warnings": "[...document.querySelectorAll('#warnings li')].map(l => [l.dataset.kind, l.dataset.name,"
                " Number(l.dataset.step), l.textContent])",
    "metrics": "[...document.querySelectorAll('svg.metric')].map(s => [s.dataset.metric,"
               " [...s.querySelectorAll('circle.point')].map(c => [Number(c.dataset.step), Number(c.dataset.value)])])",
    "arrays": "[...document.querySelectorAll('#arrays tbody tr')].map(r => r.dataset.name)",
    "histograms": "[...document.querySelectorAll('svg.histogram')].map(s => [s.dataset.name,"
                  " s.querySelectorAll('rect.bar').length])",
    "cells": "document.querySelectorAll('svg.changes rect').length",
    "differences": "document.querySelectorAll('#differences svg rect').length",
    # every chart is laid out with a size: drawn, not collapsed
    "unsized": "[...document.querySelectorAll('svg')].filter(s => { const r = s.getBoundingClientRect();"
               " return !(r.width > 0 && r.height > 0); }).length",
    "scripts": "document.scripts.length",
}


def report(tmp_path, *paths):
    page = tmp_path / "report.html"
    p = run("report", *paths, "-o", page, "--json")
    assert p.returncode == 0, p.stderr
    return page, json.loads(p.stdout)


def check_page(page, doc, name):
    for dark in (False, True):
        seen = browser.load(str(page), evaluate=PROBES, dark=dark)
        assert seen.console_errors == [], (name, dark, seen.console_errors)
        assert seen.requests == [] and seen.blocked == [], (name, dark, seen.requests, seen.blocked)
        assert not browser.png_is_blank(seen.screenshot), (name, dark)
        v = seen.values
        assert v["unsized"] == 0 and v["scripts"] == 0, (name, v["unsized"], v["scripts"])
        assert v["csp"].startswith("default-src 'none'"), v["csp"]
        assert [w[:3] for w in v["warnings"]] == [[w["kind"], w["name"] or "", w["step"]] for w in doc["warnings"]]
        for shown, w in zip(v["warnings"], doc["warnings"]):
            assert w["message"] in shown[3], (shown, w)
        assert v["arrays"] == [a["name"] for a in doc["arrays"]]
        assert v["histograms"] == [[a["name"], 64] for a in doc["arrays"] if a["histogram"] is not None]
        assert v["cells"] == sum(len(c["steps"]) for c in doc["changes"])
        if len(doc["checkpoints"]) > 1:
            want = [[m["name"], [[s, x] for s, x in zip(m["steps"], m["values"]) if isinstance(x, float)]]
                    for m in doc["metrics"]]
            assert v["metrics"] == want, (v["metrics"], want)
        assert v["differences"] == len(doc.get("differences", []))
    return seen


def test_a_run_with_a_nan_injected(tmp_path):
    with_ckpt("""
        import numpy as np, ckpt
        rng = np.random.default_rng(1)
        state = {"encoder/w": rng.normal(size=(32, 16)).astype(np.float32), "head/b": np.zeros(16, np.float32),
                 "frozen/emb": rng.normal(size=(50, 8)).astype(np.float32)}
        with ckpt.Manager("run", keep=8) as m:
            for step in range(0, 800, 100):
                state["encoder/w"] -= 0.02 * rng.normal(size=(32, 16)).astype(np.float32)
                state["head/b"] += 0.05
                if step == 500:
                    state["encoder/w"][0, 0] = np.nan
                m.save(state, step, metrics={"loss": 2.0 / (1 + step / 200), "accuracy": step / 1000})
    """, cwd=tmp_path)
    page, doc = report(tmp_path, tmp_path / "run")
    assert ("nan", "encoder/w", 500) in [(w["kind"], w["name"], w["step"]) for w in doc["warnings"]]
    check_page(page, doc, "run")


def test_one_file_of_every_kind_of_dtype(tmp_path):
    with_ckpt("""
        import numpy as np, ckpt
        arrays = {"f32": np.linspace(-1, 1, 999, dtype=np.float32), "i64": np.arange(10), "b": np.array([True, False]),
                  "text": np.array(["a", "bc"]), "c": np.array([1 + 2j]), "empty": np.zeros((0, 2)),
                  "inf": np.array([np.inf, 1.0]),
                  "bf16": ckpt.typed(np.array([0x3F80, 0x4049, 0xBF80], np.uint16), "bfloat16"),
                  "e4m3": ckpt.typed(np.arange(0, 127, dtype=np.uint8), "float8_e4m3fn")}
        ckpt.save("one.npz", arrays)
    """, cwd=tmp_path)
    page, doc = report(tmp_path, tmp_path / "one.npz")
    assert [w["kind"] for w in doc["warnings"]] == ["inf"]
    check_page(page, doc, "one file")


def test_two_files_compared(tmp_path):
    rng = np.random.default_rng(2)
    w = rng.normal(size=(20, 20))
    np.savez(str(tmp_path / "a.npz"), w=w, b=np.ones(4), old=np.zeros(1))
    np.savez(str(tmp_path / "b.npz"), w=w * 1.01, b=np.ones(4), new=np.zeros(1))
    page, doc = report(tmp_path, tmp_path / "a.npz", tmp_path / "b.npz")
    assert len(doc["differences"]) == 2
    check_page(page, doc, "two files")
    html = page.read_text()
    assert "Only in" in html and ">old<" in html and ">new<" in html
