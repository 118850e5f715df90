# SPDX-License-Identifier: Apache-2.0
"""ckpt report reads arrays on several threads, each with readers of its own: a run of three files of twelve arrays
(numpy's, so this process never loads libckpt) reported twice, once with a corrupt array in the middle, whose
failure must stop every thread and name the file. Run under ThreadSanitizer by scripts/test --tsan (label
threads), where any race report fails the run (halt_on_error)."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CLI = os.environ["CKPT_CLI"]


def main():
    with tempfile.TemporaryDirectory() as d:
        rng = np.random.default_rng(0)
        state = {"layer%02d" % k: rng.normal(size=(64, 33)).astype(np.float32) for k in range(12)}
        paths = []
        for step in range(3):
            for a in state.values():
                a += np.float32(0.01)
            paths.append(os.path.join(d, "%010d.npz" % step))
            np.savez(paths[-1], **state)
        p = subprocess.run([CLI, "report", *paths, "--json"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [a["name"] for a in doc["arrays"]] == sorted(state), doc["arrays"]
        assert all(len(c["relative_change"]) == 2 for c in doc["changes"])
        # A flipped bit in one array of the middle file: its CRC fails on some thread; the command fails naming it.
        show = json.loads(subprocess.run([CLI, "show", paths[1], "--json"], capture_output=True, text=True,
                                         check=True).stdout)
        at = next(a["data_offset"] for a in show["arrays"] if a["name"] == "layer07") + 100
        data = open(paths[1], "rb").read()
        with open(paths[1], "wb") as f:
            f.write(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
        p = subprocess.run([CLI, "report", *paths, "--json"], capture_output=True, text=True, timeout=300)
        assert p.returncode == 1 and paths[1] in p.stderr and "CRC" in p.stderr, (p.returncode, p.stderr)
    print("ok: report on threads, and its failure on one of them")


if __name__ == "__main__":
    sys.exit(main())
