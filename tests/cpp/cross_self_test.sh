#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cross_self_test.sh <cross program>
# The C++ cross program (tests/cross/README.md) against itself: what `write` saves in either layout `check` accepts,
# what `manager-save` saves `manager-resume` restores; a different file, a wrong index and bad usage fail with the
# documented exit codes.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 <cross program>" >&2
    exit 2
fi
cross="$1"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-cross-cpp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# expect <status> <stdout> <command...>: the command exits with status and prints exactly stdout.
expect() {
    local want_status="$1" want_out="$2" status=0 out
    shift 2
    out="$("$cross" "$@" 2>"$tmp/stderr")" || status=$?
    [ "$status" = "$want_status" ] || fail "cross $* exited $status, not $want_status: $(cat "$tmp/stderr")"
    [ "$out" = "$want_out" ] || fail "cross $* printed '$out', not '$want_out'"
}

for layout in plain objax; do
    expect 0 "" write "$tmp/$layout.npz" "$layout"
    expect 0 "ok cpp" check "$tmp/$layout.npz"
done
[ "$(head -c 2 "$tmp/plain.npz")" = "PK" ] || fail "write did not make a zip file"

expect 0 "" manager-save "$tmp/logdir" 7
expect 0 "ok cpp" manager-resume "$tmp/logdir" 7
[ -f "$tmp/logdir/ckpt/0000000007.npz" ] || fail "manager-save did not use the default subdir"
for idx in 8 9 10; do
    expect 0 "" manager-save "$tmp/logdir" "$idx"
done
expect 0 "ok cpp" manager-resume "$tmp/logdir" 10
[ ! -e "$tmp/logdir/ckpt/0000000007.npz" ] || fail "manager-save kept more than 3 checkpoints"
expect 0 "ok cpp" check "$tmp/logdir/ckpt/0000000009.npz"

# Failures: exit 1 with a message.
expect 1 "" manager-resume "$tmp/logdir" 9                 # the latest is 10
grep -q "restored checkpoint 10, not 9" "$tmp/stderr" || fail "a wrong index is not named: $(cat "$tmp/stderr")"
expect 1 "" check "$tmp/absent.npz"
grep -q "ckpt failed with -3" "$tmp/stderr" || fail "a missing file does not print its code: $(cat "$tmp/stderr")"
expect 1 "" manager-resume "$tmp/empty-logdir" 1
grep -q "ckpt failed with -3" "$tmp/stderr" || fail "no checkpoint does not print its code: $(cat "$tmp/stderr")"
head -c 100 "$tmp/plain.npz" >"$tmp/truncated.npz"
expect 1 "" check "$tmp/truncated.npz"
grep -q "ckpt failed with -4" "$tmp/stderr" || fail "a corrupt file does not print its code: $(cat "$tmp/stderr")"
# Files of other contents, made by numpy from the one written above: one value changed, one array missing.
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    /usr/bin/python3 - "$tmp" <<'PY'
import sys, numpy as np
tmp = sys.argv[1]
data = dict(np.load(f"{tmp}/plain.npz"))
w = data["w"].copy(); w[1, 2] = np.float32(0.002)
np.savez(f"{tmp}/value.npz", **{**data, "w": w})
np.savez(f"{tmp}/missing.npz", **{k: v for k, v in data.items() if k != "step"})
PY
    expect 1 "" check "$tmp/value.npz"
    grep -q "the values of 'w' differ" "$tmp/stderr" || fail "a changed value is not named: $(cat "$tmp/stderr")"
    expect 1 "" check "$tmp/missing.npz"
    grep -q "the variables are \[w, bf16, f8, empty\]" "$tmp/stderr" ||
        fail "a missing array is not named: $(cat "$tmp/stderr")"
else
    echo "-- numpy not found: the checks of files with other contents are skipped"
fi

# Usage errors: exit 2.
expect 2 "" write "$tmp/x.npz" zip
expect 2 "" manager-save "$tmp/logdir" -1
expect 2 "" manager-save "$tmp/logdir" 12x
expect 2 "" check
expect 2 "" frobnicate "$tmp/x.npz"
[ ! -e "$tmp/x.npz" ] || fail "a usage error wrote a file"

echo "cross self test passed: $cross"
