#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One workload of bench/run, a peer's side: torch or h5py (Debian's /usr/bin/python3 and its python3-torch and
python3-h5py), measured as bench_numpy.py measures numpy.

Usage: bench_peers.py NAME MIB ARRAYS --peer torch|h5py [--bf16] [--dir D] [--runs N] [--no-cold]

Measures, on the same data as bench_npz.c (the same arrays, the same names), with the durability ckpt_save
gives (a temporary file, fsync of the file, rename, fsync of the directory):
  torch  save:    torch.save of a dict of tensors that share the arrays' memory (torch.from_numpy) to the
                  temporary path, then fsync;
         restore: torch.load of the file, then copy_ of each loaded tensor into the tensor that holds the state
                  (what Module.load_state_dict does); torch 1.13 has no mmap= for torch.load;
  h5py   save:    one contiguous dataset per array (h5py's default layout: no chunks, no compression), the file
                  closed, then fsynced;
         restore: Dataset.read_direct into the existing arrays.
--bf16 makes the state bfloat16 (torch only: numpy and h5py have no bfloat16): element k holds the upper half of
bench_npz's float32 element k, as bench_npz --bf16 writes it.
Each run also measures the raw I/O of the same bytes back to back with the peer, alternating which goes first, as
bench_numpy.py does (its helpers are imported from there). Prints a "data" line that bench/run compares with
bench_npz's and one "result" line per measure; the warm-up's restore into zeroed arrays is compared with the state
byte for byte (by digest).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

from bench_numpy import Measure, fill, make_state, publish, run_pairs, status_kib, sum_words


def make_bf16_state(mib, count):
    """bfloat16 bits (as uint16 arrays): element k is the upper half of bench_npz's float32 element k."""
    n = mib * 1024 * 1024 // count // 4 * 2  # an even count, so the checksum's 32-bit words cover every byte
    arrays, tmp = {}, np.empty(n, dtype=np.float32)
    for i in range(count):
        fill(tmp, i * n)
        arrays[f"layer{i:04d}/w"] = (tmp.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return arrays


def digest(arrays):
    h = hashlib.blake2b()
    for a in arrays.values():
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def fsync_path(path):
    """fsync of a file another library wrote and closed: its data and size reach the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Torch:
    ext = "pt"
    save_what = "torch.save + fsync + rename + dir fsync"
    load_what = "torch.load, then copy_ into the existing tensors"

    def __init__(self, arrays, bf16):
        import torch
        self.torch = torch
        # The tensors share the arrays' memory, so the raw I/O reads into and writes from the same bytes.
        self.tensors = {k: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if bf16 else torch.from_numpy(a)
                        for k, a in arrays.items()}

    def save(self, tmp):
        self.torch.save(self.tensors, tmp)

    def load(self, path):
        loaded = self.torch.load(path)
        for k, t in self.tensors.items():
            t.copy_(loaded[k])


class H5py:
    ext = "h5"
    save_what = "h5py, a dataset per array + fsync + rename + dir fsync"
    load_what = "h5py Dataset.read_direct into the existing arrays"

    def __init__(self, arrays, bf16):
        import h5py
        self.h5py, self.arrays = h5py, arrays

    def save(self, tmp):
        with self.h5py.File(tmp, "w") as f:
            for k, a in self.arrays.items():
                f.create_dataset(k, data=a)

    def load(self, path):
        with self.h5py.File(path, "r") as f:
            for k, a in self.arrays.items():
                f[k].read_direct(a)


PEERS = {"torch": Torch, "h5py": H5py}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name")
    p.add_argument("mib", type=int)
    p.add_argument("count", type=int)
    p.add_argument("--peer", choices=sorted(PEERS), required=True)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-cold", action="store_true")
    a = p.parse_args()
    if a.bf16 and a.peer != "torch":
        p.error("--bf16 needs --peer torch: h5py has no bfloat16")

    arrays = make_bf16_state(a.mib, a.count) if a.bf16 else make_state(a.mib, a.count)
    peer = PEERS[a.peer](arrays, a.bf16)
    checksum, expected = sum_words(arrays), digest(arrays)
    Measure.state_kib = status_kib("VmRSS")
    # bench/run compares this with bench_npz's: both sides must measure the same bytes.
    print(f"data workload={a.name} checksum={checksum}", flush=True)

    path = os.path.join(a.dir, f"{a.name}-{a.peer}.{peer.ext}")

    def save():
        tmp = path + ".tmp"
        peer.save(tmp)
        fsync_path(tmp)
        publish(tmp, path, a.dir)

    def verify():
        if digest(arrays) != expected:
            sys.exit(f"{path}: {a.peer} did not restore the arrays")

    run_pairs(a.name, a.dir, arrays, a.runs, not a.no_cold, a.peer, path, peer.save_what, save,
              peer.load_what, lambda: peer.load(path), verify)


if __name__ == "__main__":
    main()
