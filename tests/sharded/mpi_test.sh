#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mpi_test.sh <mpiexec> <mpi_sharded> <python3>: sharded checkpoints between MPI processes — a round trip on 4
# ranks, restores on 2 of a step saved by 4 and on 4 of one saved by 2 (row-split variables), a failing rank, a
# corrupt shard, a single-process reader and numpy reading a shard.
set -euo pipefail
mpiexec="$1"
prog="$2"
python="$3"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-mpi-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Quiet, and what works in a container: shared memory without the single-copy kernel mechanism, no network probing.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_base_warn_component_unused=0
run() {
    local n="$1"
    shift
    echo "-- $n ranks: $*"
    "$mpiexec" --allow-run-as-root --oversubscribe -np "$n" "$prog" "$@"
}
d="$tmp/run"
run 4 save "$d" 1 2
run 4 restore "$d" 2 4
run 2 restore "$d" 2 4
run 2 save "$d" 3
run 4 restore "$d" 3 2
run 4 fail "$d" 4 2
run 2 fail "$d" 4 1
# A corrupt shard of the newest step (saved by 2): every rank falls back to step 2 (asking only for variables that
# both steps have: a variable missing from the newest step is a mismatch, which no older step is tried for).
truncate -s 100 "$d/ckpt/0000000003/shard-00001-of-00002.npz"
run 4 restore "$d" 2 2
run 2 restore "$d" 2 2
echo "-- one process reads step 2"
"$prog" read "$d" 2 4
echo "-- numpy reads a shard"
"$python" - "$d/ckpt/0000000002" <<'PY'
import json, sys
import numpy as np
step = sys.argv[1]
m = json.load(open(step + "/manifest.json"))
assert m["step"] == 2 and m["world_size"] == 4, m
with np.load(step + "/shard-00001-of-00004.npz") as f:
    assert sorted(f.files) == ["__ckpt_metadata__", "emb", "own_1"], f.files
    assert f["emb"].shape == (3, 3) and f["emb"][0, 0] == 2000 + 30, f["emb"]
emb = [v for v in m["variables"] if v["name"] == "emb"][0]
assert emb["shape"] == [10, 3] and [p["rows"] for p in emb["pieces"]] == [[0, 3], [3, 6], [6, 8], [8, 10]], emb
PY
echo "PASS"
