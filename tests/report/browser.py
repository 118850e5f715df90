#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Load a local HTML page in headless Chromium and report what a real browser saw: console
errors and warnings (CSP violations included), the requests the page made and those that
failed, a full-page PNG screenshot, and the values of JS expressions. Std library only.

Chromium runs with --remote-debugging-pipe: it reads DevTools-protocol commands on fd 3
and writes replies and events on fd 4, each a JSON object ended by a NUL byte. We open a
tab (Target.createTarget), attach to it with flatten=true and send the page's commands
with the sessionId that returns; the tab's events arrive on the same pipe.

Usage: browser.py PAGE.html [--screenshot OUT.png] [--dark] [--eval KEY=EXPR ...]
prints {console_errors, requests, blocked, blank, values} as JSON; exits 0 if the page
logged no errors, made no requests and is not blank, else 1; 77 (SKIP) with no browser.
"""
import argparse, base64, fcntl, json, math, os, select, shutil, signal, struct
import subprocess, sys, tempfile, time, zlib
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
WIDTH = 1280


class BrowserError(RuntimeError):
    """Chromium could not load the page, or went wrong; the message starts with its path."""


class _Timeout(BrowserError):
    """A reply or event did not come in time."""


@dataclass
class PageReport:
    console_errors: list[str] = field(default_factory=list)  # readable text, one per message
    requests: list[str] = field(default_factory=list)        # URLs but the page's own and data:
    blocked: list[str] = field(default_factory=list)         # "URL: reason" for failed requests
    screenshot: bytes = b""                                  # full-page PNG
    values: dict = field(default_factory=dict)               # evaluate's results by key


def unavailable():
    """Why the browser cannot run here, or None."""
    return None if os.access(CHROMIUM, os.X_OK) else f"no {CHROMIUM} (bash scripts/deps browser installs it)"


class _Connection:
    """The DevTools pipe: call() sends a command and returns its result, wait_for() waits
    for an event; both hand every event that arrives meanwhile to on_event."""

    def __init__(self, wfd, rfd, on_event, page, log):
        self.wfd, self.rfd, self.on_event, self.page, self.log = wfd, rfd, on_event, page, log
        self.buf, self.last_id = bytearray(), 0

    def call(self, method, params, session, deadline):
        self.last_id += 1
        msg = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self.wfd, data):]
        except BrokenPipeError:
            self._died(f"the reply to {method}")
        m = self._until(lambda m: m.get("id") == self.last_id, deadline, f"the reply to {method}")
        if "error" in m:
            raise BrowserError(f"{self.page}: {method} failed: {m['error'].get('message')}")
        return m.get("result", {})

    def wait_for(self, event, deadline):
        return self._until(lambda m: m.get("method") == event, deadline, event)

    def _until(self, done, deadline, what):
        while True:
            m = self._read(deadline, what)
            if "method" in m:
                self.on_event(m["method"], m.get("params", {}))
            if done(m):
                return m

    def _read(self, deadline, what):
        while (end := self.buf.find(b"\0")) < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout(f"{self.page}: timed out waiting for {what}")
            if select.select([self.rfd], [], [], left)[0]:
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    self._died(what)
                self.buf += chunk
        msg = json.loads(self.buf[:end])
        del self.buf[:end + 1]
        return msg

    def _died(self, what):
        tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
        raise BrowserError(f"{self.page}: Chromium exited while we waited for {what}"
                           + "".join(f"\n  {line}" for line in tail))


def _arg_text(arg):  # a console.* argument (a Runtime.RemoteObject) as text
    if "value" in arg:
        return arg["value"] if isinstance(arg["value"], str) else json.dumps(arg["value"])
    return arg.get("description", arg.get("type", "?"))


def load(path, evaluate=None, dark=False, timeout=30):
    """Open the page, wait for its load event, evaluate, take a screenshot: a PageReport."""
    page = Path(path).resolve()
    if not page.is_file():
        raise BrowserError(f"{page}: no such file")
    if why := unavailable():
        raise BrowserError(f"{page}: {why}")
    url, report, urls = page.as_uri(), PageReport(), {}

    def on_event(name, p):
        if name == "Runtime.consoleAPICalled" and p["type"] in ("error", "warning", "assert"):
            report.console_errors.append(
                f"console.{p['type']}: " + " ".join(_arg_text(a) for a in p.get("args", [])))
        elif name == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            exc = d.get("exception", {})
            report.console_errors.append(
                f"{d.get('text', 'Uncaught')} {exc.get('description', exc.get('value', ''))}".strip())
        elif name == "Log.entryAdded" and (e := p["entry"])["level"] in ("error", "warning"):
            report.console_errors.append(f"{e['source']} {e['level']}: {e['text']}")  # CSP, network
        elif name == "Network.requestWillBeSent":
            u = urls[p["requestId"]] = p["request"]["url"]
            if u != url and not u.startswith("data:"):
                report.requests.append(u)
        elif name == "Network.loadingFailed":
            why = [p.get("errorText"), p.get("blockedReason") and f"blocked: {p['blockedReason']}"]
            report.blocked.append(f"{urls.get(p['requestId'], p['requestId'])}: "
                                  + (", ".join(filter(None, why)) or "failed"))

    tmp, proc, fds = tempfile.mkdtemp(prefix="ckpt-browser-"), None, []
    try:
        (cmd_r, cmd_w), (msg_r, msg_w) = os.pipe(), os.pipe()
        fds += [cmd_r, cmd_w, msg_r, msg_w]
        # the child's ends, copied to fds >= 10 so that putting them on 3 and 4 clobbers neither
        child = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (cmd_r, msg_w)]
        fds += child
        log = Path(tmp, "stderr")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [CHROMIUM, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                 "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                 f"--user-data-dir={tmp}/profile"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                close_fds=False,  # Python's own fds are close-on-exec anyway; 3 and 4 must stay
                preexec_fn=lambda: (os.dup2(child[0], 3), os.dup2(child[1], 4)))
        for fd in child + [cmd_r, msg_w]:  # else we would never see EOF when Chromium dies
            os.close(fd)
            fds.remove(fd)
        conn = _Connection(cmd_w, msg_r, on_event, page, log)
        deadline = time.monotonic() + timeout

        target = conn.call("Target.createTarget", {"url": "about:blank"}, None, deadline)
        session = conn.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                            None, deadline)["sessionId"]
        call = lambda method, params=None: conn.call(method, params, session, deadline)
        for domain in ("Page", "Runtime", "Network", "Log"):
            call(f"{domain}.enable")
        call("Emulation.setDeviceMetricsOverride",
             {"width": WIDTH, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        if dark:
            call("Emulation.setEmulatedMedia",
                 {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        nav = call("Page.navigate", {"url": url})
        if nav.get("errorText"):
            raise BrowserError(f"{page}: cannot open: {nav['errorText']}")
        try:
            conn.wait_for("Page.loadEventFired", deadline)
        except _Timeout:
            raise BrowserError(f"{page}: did not load within {timeout} s") from None
        deadline = time.monotonic() + timeout  # as long again for evaluating and the screenshot

        def run(expr):
            r = call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
            if "exceptionDetails" in r:
                d = r["exceptionDetails"]
                raise BrowserError(f"{page}: {expr!r} threw: "
                                   f"{d.get('exception', {}).get('description', d.get('text'))}")
            return r["result"].get("value")

        # two animation frames: the page has been laid out and painted at least once
        run("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))")
        for key, expr in (evaluate or {}).items():
            report.values[key] = run(expr)
        metrics = call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": max(WIDTH, math.ceil(size["width"])),
                     "height": max(1, math.ceil(size["height"])), "scale": 1}})
        report.screenshot = base64.b64decode(shot["data"])
        return report
    except OSError as e:
        raise BrowserError(f"{page}: {e}") from e
    finally:
        if proc:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group: renderers, zygote, ...
            except ProcessLookupError:
                pass
            proc.wait()
        for fd in fds:
            os.close(fd)
        shutil.rmtree(tmp, ignore_errors=True)


def _png_pixels(png):
    """Yield the rows of an 8-bit RGB/RGBA, non-interlaced PNG as bytes, unfiltered."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, bytearray(), None
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    if not hdr:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = hdr
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = 3 if colour == 2 else 4
    stride, raw = width * bpp, zlib.decompress(bytes(idat))
    prev = bytes(stride)
    for y in range(height):
        ftype, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:                                               # Sub
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 255
        elif ftype == 2 and any(row):                                # Up (all 0: same as prev)
            row = bytearray((a + b) & 255 for a, b in zip(row, prev))
        elif ftype == 2:
            row = prev
        elif ftype == 3:                                             # Average
            for i in range(stride):
                row[i] = (row[i] + ((row[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif ftype == 4:                                             # Paeth
            for i in range(stride):
                a, b = (row[i - bpp] if i >= bpp else 0), prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif ftype != 0:
            raise ValueError(f"bad PNG filter type {ftype}")
        prev = bytes(row)
        yield bpp, prev


def png_is_blank(png):
    """True if every pixel of the PNG has the same colour."""
    first = None
    for bpp, row in _png_pixels(png):
        if first is None:
            first = row[:bpp] * (len(row) // bpp)
        if row != first:
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page")
    ap.add_argument("--screenshot", metavar="OUT.png")
    ap.add_argument("--dark", action="store_true", help="prefers-color-scheme: dark")
    ap.add_argument("--eval", action="append", default=[], metavar="KEY=EXPR")
    args = ap.parse_args()
    if why := unavailable():
        print(f"SKIP: {why}")
        return 77
    if bad := [e for e in args.eval if "=" not in e]:
        ap.error(f"--eval wants KEY=EXPR, not {bad[0]!r}")
    try:
        r = load(args.page, dict(e.split("=", 1) for e in args.eval), args.dark)
    except BrowserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.screenshot:
        Path(args.screenshot).write_bytes(r.screenshot)
    blank = png_is_blank(r.screenshot)
    print(json.dumps({"console_errors": r.console_errors, "requests": r.requests,
                      "blocked": r.blocked, "blank": blank, "values": r.values}, indent=2))
    return 0 if not r.console_errors and not r.requests and not blank else 1


if __name__ == "__main__":
    sys.exit(main())
