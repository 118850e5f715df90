#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench/bench_report.py [--checkpoints N] [--mib M] [--arrays A] [--runs R] [--cli PATH] [--dir D] [--docs]

What `ckpt report` costs beside what reads the same bytes: a run of N checkpoints of M MiB each (A float32 arrays,
numpy's .npz files in a manager's directory layout) is read by a plain read() of every file (raw I/O), by
`ckpt verify` (every byte once, CRC-32 checked), by `ckpt report -o` (every byte once, the newest checkpoint twice,
statistics, histograms and the change map) and by numpy computing the same numbers (np.load of each array, its
NaN/Inf counts and norm, the difference from the checkpoint before, and the newest's min, max, mean, std and
np.histogram). Each is timed warm (the files in the page cache) and cold (the files evicted from it first, as
bench_numpy.py evicts them); the figures are medians of R runs, the ratios against `ckpt verify` of the same run, the memory the
peak resident set (GNU time). --docs writes the table into docs/performance.md between its bench_report markers.
Nothing here passes or fails on speed.
"""
import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_numpy import evict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- bench/bench_report.py: begin -->", "<!-- bench/bench_report.py: end -->"

NUMPY_REPORT = r"""
import os, sys
import numpy as np
d = sys.argv[1]
files = sorted(f for f in os.listdir(d) if f.endswith(".npz"))
previous = {}
for k, f in enumerate(files):
    with np.load(os.path.join(d, f)) as z:
        for name in z.files:
            x = z[name].astype(np.float64)
            finite = np.isfinite(x)
            nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
            norm = np.linalg.norm(x[finite])
            if name in previous:
                change = np.linalg.norm(x - previous[name]) / np.linalg.norm(previous[name])
            if k == len(files) - 1:
                v = x[finite]
                stats = (v.min(), v.max(), v.mean(), v.std(), int((v == 0).sum()), np.histogram(v, bins=64))
            previous[name] = x
"""


def timed(command):
    """Seconds and peak RSS (KiB) of one run of command."""
    start = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit("bench_report: %s failed:\n%s" % (" ".join(command), p.stderr))
    return seconds, int(p.stderr.strip().splitlines()[-1])


def make_run(directory, checkpoints, mib, arrays):
    rng = np.random.default_rng(0)
    ckpt_dir = os.path.join(directory, "ckpt")
    os.makedirs(ckpt_dir)
    elements = mib * (1 << 20) // 4 // arrays
    state = {"layer%02d/w" % i: rng.standard_normal(elements, dtype=np.float32) for i in range(arrays)}
    for k in range(checkpoints):
        for name in state:
            state[name] += np.float32(0.01) * rng.standard_normal(elements, dtype=np.float32)
        np.savez(os.path.join(ckpt_dir, "%010d.npz" % (100 * k)), **state)
    return ckpt_dir


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[2])
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--mib", type=int, default=256, help="MiB per checkpoint")
    ap.add_argument("--arrays", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build-release", "tools", "ckpt"))
    ap.add_argument("--dir", default=None, help="where the run goes (default: a new directory under /var/tmp)")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/performance.md")
    args = ap.parse_args()
    if not os.access(args.cli, os.X_OK):
        sys.exit("bench_report: no ckpt program at %s (bench/run builds build-release; or give --cli)" % args.cli)
    started = time.time()
    work = args.dir or tempfile.mkdtemp(prefix="ckpt-bench-report-", dir="/var/tmp")
    try:
        ckpt_dir = make_run(work, args.checkpoints, args.mib, args.arrays)
        files = [os.path.join(ckpt_dir, f) for f in sorted(os.listdir(ckpt_dir))]
        page = os.path.join(work, "report.html")
        commands = {
            "raw read() of the files": ["/usr/bin/python3", "-c",
                                        "import sys\nfor f in sys.argv[1:]:\n    with open(f, 'rb', buffering=0) as h:\n"
                                        "        while h.read(8 << 20): pass", *files],
            "ckpt verify": [args.cli, "verify", work],
            "ckpt report -o page": [args.cli, "report", work, "-o", page],
            "numpy, the same numbers": ["/usr/bin/python3", "-c", NUMPY_REPORT, ckpt_dir],
        }
        results = {}
        for label, command in commands.items():
            timed(command)  # warm-up: the files in the page cache, the program loaded
            warm = [timed(command) for _ in range(args.runs)]
            cold = []
            for _ in range(args.runs):
                for f in files:
                    evict(f)
                cold.append(timed(command))
            results[label] = (statistics.median(s for s, _ in warm), statistics.median(s for s, _ in cold),
                              max(kib for _, kib in warm + cold))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    verify_warm, verify_cold, _ = results["ckpt verify"]
    total_mib = args.checkpoints * args.mib
    lines = ["| reads %d checkpoints of %d MiB (%d float32 arrays each) | warm (s) | × verify | cold (s) | × verify "
             "| peak RSS (MiB) |" % (args.checkpoints, args.mib, args.arrays), "|---|---:|---:|---:|---:|---:|"]
    for label, (warm, cold, kib) in results.items():
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f | %.0f |" % (
            label, warm, warm / verify_warm, cold, cold / verify_cold, kib / 1024))
    load = open("/proc/loadavg").read().split()[:3]
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    header = ("Measured %s (commit %s) by `bench/bench_report.py%s` in %.0f s: %d MiB in all, medians of %d runs; "
              "cold runs after evicting the files from the page cache (posix_fadvise). Machine: %d vCPUs (%s); load average %s after." % (
                  datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), commit,
                  "".join(" " + a for a in sys.argv[1:] if a != "--docs"), time.time() - started, total_mib,
                  args.runs, os.cpu_count(), cpu,
                  " ".join(load)))
    table = header + "\n\n" + "\n".join(lines)
    print(table)
    if args.docs:
        path = os.path.join(ROOT, "docs", "performance.md")
        text = open(path).read()
        if BEGIN not in text or END not in text:
            sys.exit("bench_report: %s has no %s ... %s markers" % (path, BEGIN, END))
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        with open(path, "w") as f:
            f.write(before + BEGIN + "\n" + table + "\n" + END + after)
        print("bench_report: wrote the table into %s" % path)


if __name__ == "__main__":
    main()
