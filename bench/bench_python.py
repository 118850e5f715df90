# SPDX-License-Identifier: Apache-2.0
"""What the Python binding adds to ckpt's own cost, beside numpy, in one run.

    pip install --no-build-isolation --target build-release/python bindings/python
    PYTHONPATH=build-release/python CKPT_LIBRARY=build-release/libckpt.so.0 \
        /usr/bin/python3 bench/bench_python.py [--runs N] [--dir D] [--quick]

For W1 (512 MiB in 64 float32 arrays) and W2 (64 MiB in 8192), measures in one process, runs interleaved:
  - the C call alone: ckpt_save / ckpt_restore on a collection built once beforehand (the C figure);
  - the binding: ckpt.save(path, dict) / ckpt.restore(path, dict), which builds the collection every call, and
    ckpt.save/restore(path, ckpt.Collection(dict)) with the collection built once, as the C figure's is;
  - numpy: np.savez (+ fsync, rename, directory fsync, for the same durability) / np.load into the arrays.
Restores are from a warm page cache. Prints a table of medians and the ratios binding/C and numpy/binding.
Nothing passes or fails on speed.
"""
import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time

import numpy as np

try:  # an installed package (with its compiled fast path), else the one in this tree
    import ckpt
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
    import ckpt  # noqa: E402
from ckpt import _native, npz  # noqa: E402
from ckpt._native import lib  # noqa: E402


def workload(total_mib, count):
    n = total_mib * 1024 * 1024 // 4 // count
    rng = np.random.default_rng(1)
    return {"layer%05d/w" % i: rng.standard_normal(n, dtype=np.float32) for i in range(count)}


def fsync_dir(path):
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def numpy_save(path, arrays):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    fsync_dir(path)


def numpy_restore(path, arrays):
    with np.load(path) as data:
        for k, a in arrays.items():
            a[...] = data[k]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(name, arrays, runs, directory):
    path = os.path.join(directory, name + ".npz")
    np_path = os.path.join(directory, name + "-numpy.npz")
    opts = npz.options()
    held = npz.collection(arrays)  # the C figure's collection, built once
    into = {k: np.empty_like(a) for k, a in arrays.items()}
    held_into = npz.collection(into, writable=True)
    built = ckpt.Collection(arrays)
    built_into = ckpt.Collection(into)
    ops = {
        "save, C call": lambda: _native.check(lib.ckpt_save(path.encode(), held.handle, ctypes.byref(opts))),
        "save, ckpt.save": lambda: ckpt.save(path, arrays),
        "save, ckpt.save of a Collection": lambda: ckpt.save(path, built),
        "save, np.savez + fsync": lambda: numpy_save(np_path, arrays),
        "restore, C call": lambda: _native.check(lib.ckpt_restore(path.encode(), held_into.handle,
                                                                      ctypes.byref(opts))),
        "restore, ckpt.restore": lambda: ckpt.restore(path, into),
        "restore, ckpt.restore of a Collection": lambda: ckpt.restore(path, built_into),
        "restore, np.load": lambda: numpy_restore(np_path, into),
    }
    for fn in ops.values():  # warm-up: files exist, the page cache holds them
        fn()
    times = {k: [] for k in ops}
    saves = [k for k in ops if k.startswith("save")]
    restores = [k for k in ops if k.startswith("restore")]
    for r in range(runs):
        # Each operation goes first equally often: the first save of a round meets the writeback of the last.
        for group in (saves, restores):
            for k in group[r % len(group):] + group[:r % len(group)]:
                times[k].append(timed(ops[k]))
    assert all(np.array_equal(into[k], arrays[k]) for k in list(arrays)[:4])
    for c in (held, held_into, built, built_into):
        c.close()
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=8, help="a multiple of 4 puts each operation first equally often")
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true", help="small sizes, two runs")
    args = p.parse_args()
    workloads = [("W1", 512, 64), ("W2", 64, 8192)] if not args.quick else [("W1", 32, 64), ("W2", 8, 1024)]
    runs = 2 if args.quick else args.runs
    directory = args.dir or tempfile.mkdtemp(prefix="ckpt-bench-py-", dir="/var/tmp")
    os.makedirs(directory, exist_ok=True)
    from ckpt import _vars
    print("ckpt %s (library %s, compiled fast path %s), numpy %s, %d runs, files in %s"
          % (ckpt.__version__, ckpt.library_version, "on" if _vars._speedups else "off", np.__version__, runs,
             directory))
    print()
    print("| workload | operation | seconds (median) | x the C call | x numpy |")
    print("|---|---|---|---|---|")
    for name, mib, count in workloads:
        m = measure(name, workload(mib, count), runs, directory)
        for op in ("save", "restore"):
            c = m["%s, C call" % op]
            binding = m["%s, ckpt.%s" % (op, op)]
            numpy = m["save, np.savez + fsync" if op == "save" else "restore, np.load"]
            print("| %s %d MiB / %d arrays | %s: C call | %.4f | 1.00 | %.1f |" % (name, mib, count, op, c, numpy / c))
            print("| | %s: ckpt.%s | %.4f | %.2f | %.1f |" % (op, op, binding, binding / c, numpy / binding))
            once = m["%s, ckpt.%s of a Collection" % (op, op)]
            print("| | %s: ckpt.%s of a Collection | %.4f | %.2f | %.1f |" % (op, op, once, once / c, numpy / once))
            print("| | %s: numpy | %.4f | %.2f | 1.0 |" % (op, numpy, numpy / c))
        for f in os.listdir(directory):
            os.remove(os.path.join(directory, f))
    if not args.dir:
        os.rmdir(directory)


if __name__ == "__main__":
    main()
