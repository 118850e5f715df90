# SPDX-License-Identifier: Apache-2.0
"""Proof that tests/report/browser.py reports what headless Chromium saw.

Run: /usr/bin/python3 -m pytest -q tests/report/test_browser.py
Every check has a counterpart that shows it can fail (a page without the CSP, a page
with ink on it, a page in light mode, ...).
"""
import http.server
import json
import random
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser  # noqa: E402

if why := browser.unavailable():
    pytest.skip("browser unavailable: " + why, allow_module_level=True)

CSP = """<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">"""
PORT9 = "http://127.0.0.1:9/x.png"  # the discard port: Chromium refuses it as unsafe, never connects


def page(tmp_path, body, head="", name="page.html"):
    path = tmp_path / name
    path.write_text(f'<!doctype html><html><head><meta charset="utf-8">{head}</head>'
                    f"<body>{body}</body></html>")
    return path


@pytest.fixture
def server():
    """A local HTTP server that records the paths asked of it, to see what was really fetched."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_error(404)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()
    httpd.server_close()


# (1) a clean, self-contained page
def test_clean_page_with_csp(tmp_path):
    svg = '<svg width="200" height="100"><rect width="120" height="60" fill="#36c"/></svg>'
    path = page(tmp_path, f"<h1>Report</h1>{svg}<p>text</p>{svg}",
                head=CSP + "<style>h1 { color: #333 }</style>")
    r = browser.load(path, evaluate={"n": "document.querySelectorAll('svg').length",
                                     "h1": "getComputedStyle(document.querySelector('h1')).color"})
    assert r.console_errors == []
    assert r.requests == []
    assert r.blocked == []
    assert r.screenshot.startswith(b"\x89PNG")
    assert not browser.png_is_blank(r.screenshot)
    assert r.values["n"] == 2
    assert r.values["h1"] == "rgb(51, 51, 51)"  # the inline style was allowed by style-src


# (2) without a CSP the image is requested
def test_image_is_requested(tmp_path, server):
    base, hits = server
    gif = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
    path = page(tmp_path, f'<img src="{PORT9}"><img src="{base}/y.png"><img src="{gif}">')
    r = browser.load(path)
    assert sorted(r.requests) == sorted([PORT9, f"{base}/y.png"])  # not the page, not data:
    assert hits == ["/y.png"]  # really fetched
    assert any(b.startswith(PORT9) for b in r.blocked)  # port 9 fails (net::ERR_UNSAFE_PORT)


# (3) the same images under the CSP: a console error each, and nothing fetched
def test_csp_blocks_image(tmp_path, server):
    base, hits = server
    path = page(tmp_path, f'<img src="{PORT9}"><img src="{base}/y.png">', head=CSP)
    r = browser.load(path)
    for url in (PORT9, f"{base}/y.png"):
        assert any("Content Security Policy" in e and url in e for e in r.console_errors), r.console_errors
        assert url not in r.requests or f"{url}: blocked: csp" in r.blocked, (r.requests, r.blocked)
    assert hits == []


# (4) console.error, console.warn and an uncaught exception
def test_console_error(tmp_path):
    path = page(tmp_path, '<script>console.error("boom"); console.warn("careful");'
                          ' throw new Error("bang")</script>')
    r = browser.load(path)
    assert any("boom" in e for e in r.console_errors), r.console_errors
    assert any("careful" in e for e in r.console_errors), r.console_errors
    assert any("Error: bang" in e for e in r.console_errors), r.console_errors


# (5) an inline script is refused under the CSP, and the refusal reported; runs without it
@pytest.mark.parametrize("csp", [True, False])
def test_csp_refuses_inline_script(tmp_path, csp):
    path = page(tmp_path, '<script>document.title = "ran"</script>', head=CSP if csp else "")
    r = browser.load(path, evaluate={"title": "document.title"})
    refused = [e for e in r.console_errors if "inline script" in e and "Content Security Policy" in e]
    if csp:
        assert r.values["title"] == ""
        assert refused, r.console_errors
    else:
        assert r.values["title"] == "ran"
        assert r.console_errors == []


# (6) blank and not blank, over the full height of the page
@pytest.mark.parametrize("ink, blank", [("", True),
                                        ('<div style="width:20px;height:20px;background:#000"></div>', False)])
def test_blank(tmp_path, ink, blank):
    r = browser.load(page(tmp_path, ink, head="<style>body { margin: 0; background: #fff }</style>"))
    assert browser.png_is_blank(r.screenshot) is blank


def test_screenshot_is_full_page(tmp_path):
    path = page(tmp_path, '<div style="height:3000px"></div>'
                          '<div style="width:20px;height:20px;background:#000"></div>',
                head="<style>body { margin: 0 }</style>")
    r = browser.load(path)
    width, height = struct.unpack(">II", r.screenshot[16:24])
    assert (width, height) == (1280, 3020)  # the square ends 3020 px down
    assert not browser.png_is_blank(r.screenshot)  # the square below the 800 px viewport is in it


# (7) dark mode
@pytest.mark.parametrize("dark", [True, False])
def test_dark(tmp_path, dark):
    r = browser.load(page(tmp_path, "<p>x</p>"), dark=dark,
                     evaluate={"dark": "matchMedia('(prefers-color-scheme: dark)').matches"})
    assert r.values["dark"] is dark


def test_timeout_names_the_page(tmp_path):
    path = page(tmp_path, "<script>while (true) {}</script>", name="hangs.html")
    start = time.monotonic()
    with pytest.raises(browser.BrowserError, match=r"hangs\.html: did not load within 3 s"):
        browser.load(path, timeout=3)
    assert time.monotonic() - start < 10


def test_cli(tmp_path):
    clean = page(tmp_path, "<svg width='50' height='50'><circle r='20' cx='25' cy='25'/></svg>",
                 head=CSP, name="clean.html")
    noisy = page(tmp_path, "<p>x</p><script>console.error('boom')</script>", name="noisy.html")
    script = Path(browser.__file__)

    def cli(*args):
        return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True,
                              text=True, timeout=120)

    out = tmp_path / "shot.png"
    ok = cli(clean, "--screenshot", out, "--eval", "n=document.querySelectorAll('svg').length")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout) == {"console_errors": [], "requests": [], "blocked": [],
                                     "blank": False, "values": {"n": 1}}
    assert out.read_bytes().startswith(b"\x89PNG")
    bad = cli(noisy)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert json.loads(bad.stdout)["console_errors"] == ["console.error: boom"]


# png_is_blank's decoder, on PNGs written here with each of the five filter types
def _png(rows, bpp, ftype):
    def filtered(row, prev):
        out = bytearray()
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            p = a + b - c
            paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
            out.append((x - [0, a, b, (a + b) // 2, paeth][ftype]) & 255)
        return bytes([ftype]) + out

    prevs = [bytes(len(rows[0]))] + rows[:-1]
    raw = b"".join(filtered(row, prev) for row, prev in zip(rows, prevs))
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data
                                + struct.pack(">I", zlib.crc32(kind + data)))
    ihdr = struct.pack(">IIBBBBB", len(rows[0]) // bpp, len(rows), 8, 2 if bpp == 3 else 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("bpp", [3, 4])
@pytest.mark.parametrize("ftype", [0, 1, 2, 3, 4])
def test_png_decoder(ftype, bpp):
    rng = random.Random(ftype * 10 + bpp)
    byte = lambda: rng.choice((0, 32, 64, 96, 128, 255)) if rng.random() < 0.5 else rng.randrange(256)
    noise = [bytes(byte() for _ in range(16 * bpp)) for _ in range(9)]  # with ties for Paeth
    assert [row for _, row in browser._png_pixels(_png(noise, bpp, ftype))] == noise
    colour = bytes([200, 201, 202, 255][:bpp])
    flat = [colour * 7 for _ in range(5)]
    assert browser.png_is_blank(_png(flat, bpp, ftype))
    speck = flat[:4] + [colour * 3 + bytes([200, 201, 203, 255][:bpp]) + colour * 3]
    assert not browser.png_is_blank(_png(speck, bpp, ftype))
