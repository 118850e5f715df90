# SPDX-License-Identifier: Apache-2.0
"""One training process of the soak (soak.py): resumes its manager directory, checks what it resumed, then saves a
checkpoint every INTERVAL seconds until killed or until STOP_AT (a time.time()).

    worker.py LOGDIR ACKS INTERVAL STOP_AT

After each save returns, the worker appends "<index> <seconds the save took>" to ACKS and fsyncs it: that index is
reported durable. At start it checks its resume: the checkpoint a manager restores must be the last index in ACKS
or the one after it (saved, killed before it was acknowledged), with exactly the arrays saved under that index.
Exits 1 naming the difference otherwise."""
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))

import numpy as np  # noqa: E402

import ckpt  # noqa: E402

KEEP = 3


def arrays(i):
    """Checkpoint i: 8 MiB of weights that change with i (a multipart upload on S3), and the index."""
    w = np.arange(1 << 20, dtype=np.float64)
    w[::4096] = i
    return {"w": w, "b": np.full(16, i, np.float32), "step": np.array(i, np.int64)}


def acknowledged(acks):
    if not os.path.exists(acks):
        return []
    with open(acks) as f:
        return [int(line.split()[0]) for line in f if line.strip()]


def main(argv):
    logdir, acks, interval, stop_at = argv[1], argv[2], float(argv[3]), float(argv[4])
    acked = acknowledged(acks)
    with ckpt.Manager(logdir, keep=KEEP) as m:
        try:
            idx, got = m.read()
        except ckpt.NotFoundError:
            idx, got = 0, None
        last = acked[-1] if acked else 0
        if idx not in (last, last + 1):
            sys.stderr.write("worker %s: resumed at %d; the last acknowledged save was %d\n" % (logdir, idx, last))
            return 1
        if got is not None:
            want = arrays(idx)
            if sorted(got) != sorted(want) or any(not np.array_equal(got[k], v) for k, v in want.items()):
                sys.stderr.write("worker %s: checkpoint %d resumed with other arrays than were saved\n" % (logdir, idx))
                return 1
        while time.time() < stop_at:
            idx += 1
            began = time.monotonic()
            m.save(arrays(idx), idx)
            took = time.monotonic() - began
            with open(acks, "a") as f:
                f.write("%d %.4f\n" % (idx, took))
                f.flush()
                os.fsync(f.fileno())
            time.sleep(max(0.0, interval - took))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
