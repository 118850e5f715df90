#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One workload of bench/run, numpy's side (Debian's /usr/bin/python3 and its numpy).

Usage: bench_numpy.py NAME MIB ARRAYS [--dir D] [--runs N] [--deflate] [--no-cold]

Measures, on the same data as bench_npz.c:
  save    np.savez (np.savez_compressed with --deflate) into an open file, then fsync, rename and a directory
          fsync: the durability ckpt_save gives;
  restore np.load into the existing arrays (`dst[...] = z[name]`), numpy's fastest way to refill arrays it
          already has; from a warm page cache and, unless --no-cold, from a cold one.
Each run also measures, back to back with numpy and alternating which goes first, the raw I/O bench_npz.c
measures (write() + fsync + rename + directory fsync; read() into the same arrays), so that report.py can pair
numpy's runs with the machine's limit as it was at that moment, as it pairs ckpt's.
Prints one "result key=value ..." line per measure (medians of N runs after a warm-up), as bench_npz does, with
the runs' seconds (per_run) and those of the raw I/O paired with them (raw_per_run).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

U64 = np.uint64


def fill(dst, first):
    """The bench data, bit for bit as fill() in bench_npz.c (element k of the state, arrays in order).

    Works in slices so that the 64-bit temporaries stay small even for a 3 GiB array."""
    bits = dst.view(np.uint32)
    step = 1 << 21
    for lo in range(0, bits.size, step):
        hi = min(lo + step, bits.size)
        h = np.arange(first + lo + 1, first + hi + 1, dtype=np.uint64) * U64(0x9E3779B97F4A7C15)
        h ^= h >> U64(32)
        h *= U64(0xD6E8FEB86659FD93)
        h ^= h >> U64(32)
        exponent = U64(118) + ((h >> U64(56)) & U64(3)) + ((h >> U64(58)) & U64(3))
        bits[lo:hi] = ((h >> U64(32)) & U64(0x80000000)) | (exponent << U64(23)) | (h & U64(0x7FFF80))


def make_state(mib, count):
    """The bench state: `count` float32 arrays named as bench_npz names them, `mib` MiB in all."""
    n = mib * 1024 * 1024 // count // 4
    arrays = {}
    for i in range(count):
        arrays[f"layer{i:04d}/w"] = np.empty(n, dtype=np.float32)
        fill(arrays[f"layer{i:04d}/w"], i * n)
    return arrays


def sum_words(arrays):
    """The sum of the state's 32-bit words modulo 2**64, as bench_npz prints it."""
    return sum(int(a.view(np.uint32).sum(dtype=np.uint64)) for a in arrays.values()) % 2**64


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def peak_reset():
    """Resets the peak RSS (VmHWM) to the current RSS; False where the kernel cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def evict(path):
    """Drops the (clean, fsynced) file from the page cache, so the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def publish(tmp, path, directory):
    """Renames the written and fsynced tmp to path, then makes the rename durable (directory fsync)."""
    os.rename(tmp, path)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def save(path, directory, arrays, compressed):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    publish(tmp, path, directory)


def raw_save(path, directory, arrays):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        for a in arrays.values():
            view = memoryview(a).cast("B")
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    publish(tmp, path, directory)


def raw_read(path, arrays):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for a in arrays.values():
            view = memoryview(a).cast("B")
            while view:
                n = os.readv(fd, [view])
                if n <= 0:
                    sys.exit(f"{path}: short read")
                view = view[n:]
    finally:
        os.close(fd)


def load_into(path, arrays):
    with np.load(path) as z:
        for name, dst in arrays.items():
            dst[...] = z[name]


class Measure:
    """Median time, median CPU/wall and highest peak RSS above the state over the runs of one operation.

    The peak is the process's highest RSS during the operation minus its RSS once the state was built, so memory
    an earlier operation left resident (numpy's temporaries kept by malloc) counts too."""
    state_kib = -1

    def __init__(self, op, what, cache, path, who="numpy"):
        self.op, self.what, self.cache, self.path, self.who = op, what, cache, path, who
        self.seconds, self.cores, self.rss_above = [], [], -1

    def run(self, fn, warmup):
        if self.cache == "cold":
            evict(self.path)
        reset_ok = peak_reset()
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        above = -1
        if reset_ok and Measure.state_kib >= 0:
            above = (status_kib("VmHWM") - Measure.state_kib) * 1024
        if not warmup:
            self.seconds.append(wall)
            self.cores.append(cpu / wall)
            self.rss_above = max(self.rss_above, above)

    def report(self, name, arrays, raw):
        state = sum(a.nbytes for a in arrays.values())
        runs = lambda m: ",".join(f"{s:.6f}" for s in m.seconds)
        print(f'result workload={name} op={self.op} who={self.who} what="{self.what}" cache={self.cache} '
              f"per_run={runs(self)} raw_per_run={runs(raw)} "
              f"seconds={statistics.median(self.seconds):.6f} cores={statistics.median(self.cores):.2f} "
              f"rss_above={self.rss_above} state_bytes={state} file_bytes={os.path.getsize(self.path)} "
              f"arrays={len(arrays)} runs={len(self.seconds)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name")
    p.add_argument("mib", type=int)
    p.add_argument("count", type=int)
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--deflate", action="store_true")
    p.add_argument("--no-cold", action="store_true")
    a = p.parse_args()

    arrays = make_state(a.mib, a.count)
    checksum = sum_words(arrays)
    Measure.state_kib = status_kib("VmRSS")
    # bench/run compares this with bench_npz's: both sides must measure the same bytes.
    print(f"data workload={a.name} checksum={checksum}", flush=True)

    save_what = f"np.{'savez_compressed' if a.deflate else 'savez'} + fsync + rename + dir fsync"
    path = os.path.join(a.dir, f"{a.name}-numpy.npz")

    def verify():
        if sum_words(arrays) != checksum:
            sys.exit(f"{path}: np.load did not restore the arrays")

    run_pairs(a.name, a.dir, arrays, a.runs, not a.no_cold, "numpy", path,
              save_what, lambda: save(path, a.dir, arrays, a.deflate),
              "np.load into the existing arrays", lambda: load_into(path, arrays), verify)


def run_pairs(name, directory, arrays, runs, cold, who, path, save_what, save_fn, load_what, load_fn, verify):
    """Measures save_fn (which writes path durably) and load_fn (which refills arrays from path) against the raw
    I/O of the same bytes, back to back in this process and alternating which goes first, over a warm-up and
    `runs` runs; prints the result lines and removes the files. verify() is called once, after the warm-up's
    load into zeroed arrays, and must exit if the arrays do not hold the state again."""
    saving = Measure("save", save_what, "-", path, who)
    raw_path = os.path.join(directory, f"{name}-{who}-raw.bin")
    raw_saving = Measure("save", "raw", "-", raw_path, who)
    caches = ["warm", "cold"] if cold else ["warm"]
    loads = [Measure("restore", load_what, c, path, who) for c in caches]
    raw_reads = [Measure("restore", "raw", c, raw_path, who) for c in caches]
    for r in range(-1, runs):
        print(f"  {name}: {who} and raw, {'warm-up' if r < 0 else 'run'}", file=sys.stderr, flush=True)
        first = r % 2 == 0  # whichever goes second pays for the first one's writeback: alternate
        pair = [lambda: saving.run(save_fn, r < 0),
                lambda: raw_saving.run(lambda: raw_save(raw_path, directory, arrays), r < 0)]
        for step in pair if first else pair[::-1]:
            step()
        if r < 0:
            # Loads refill the arrays with what they hold; check once that they really do.
            for v in arrays.values():
                v[...] = 0
            load_fn()
            verify()
        for m, raw in zip(loads, raw_reads):
            pair = [lambda: m.run(load_fn, r < 0),
                    lambda: raw.run(lambda: raw_read(raw_path, arrays), r < 0)]
            for step in pair if first else pair[::-1]:
                step()

    saving.report(name, arrays, raw_saving)
    for m, raw in zip(loads, raw_reads):
        m.report(name, arrays, raw)
    os.unlink(path)
    os.unlink(raw_path)


if __name__ == "__main__":
    main()
