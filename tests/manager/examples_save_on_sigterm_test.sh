#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples_save_on_sigterm_test.sh <path to save_on_sigterm>
#
# examples/save_on_sigterm saves when SIGTERM arrives: a running loop sent SIGTERM exits 0 having saved the step
# it reports, that checkpoint is the latest, and a new process resumes from it and ends with the state of an
# uninterrupted run (bit for bit: printed with 17 significant digits). Twice, so a resumed run is stopped too.
set -euo pipefail

bin="${1:?usage: examples_save_on_sigterm_test.sh <path to save_on_sigterm>}"
tmp="$(mktemp -d)"
child=""
cleanup() {
    if [ -n "$child" ]; then kill -9 "$child" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

total=20000
"$bin" "$tmp/ref" "$total" 0 0 >"$tmp/ref.out"
expected="$(grep '^finished at step ' "$tmp/ref.out")" || fail "the uninterrupted run did not finish"

previous=0
for cycle in 1 2; do
    out="$tmp/run$cycle.out"
    "$bin" "$tmp/run" "$total" 0 200 >"$out" &
    child=$!
    for _ in $(seq 1 500); do  # until the handler is installed (at most 5 s)
        grep -qx running "$out" 2>/dev/null && break
        sleep 0.01
    done
    grep -qx running "$out" || fail "cycle $cycle: the program did not start"
    sleep 0.2
    kill -TERM "$child"
    rc=0
    wait "$child" || rc=$?
    child=""
    [ "$rc" -eq 0 ] || fail "cycle $cycle: exit status $rc after SIGTERM: $(cat "$out")"
    saved="$(sed -n 's/^saved at step \([0-9]*\) on SIGTERM$/\1/p' "$out")"
    [ -n "$saved" ] || fail "cycle $cycle: no 'saved at step N on SIGTERM' line: $(cat "$out")"
    [ "$saved" -gt "$previous" ] || fail "cycle $cycle: saved step $saved is not past $previous"
    [ "$saved" -lt "$total" ] || fail "cycle $cycle: the run finished before SIGTERM; nothing was tested"
    file="$tmp/run/ckpt/$(printf '%010d' "$saved").npz"
    [ -f "$file" ] || fail "cycle $cycle: no checkpoint file $file"
    newest="$(ls "$tmp/run/ckpt" | grep -E '^[0-9]+\.npz$' | sort -n | tail -n 1)"
    [ "$newest" = "$(basename "$file")" ] || fail "cycle $cycle: the newest checkpoint is $newest, not $file"
    if [ "$cycle" -gt 1 ]; then
        head -n 1 "$out" | grep -qx "resumed at step $previous" || fail "cycle $cycle: $(head -n 1 "$out")"
    fi
    echo "ok: cycle $cycle saved step $saved on SIGTERM"
    previous="$saved"
done

"$bin" "$tmp/run" "$total" 0 0 >"$tmp/final.out"
head -n 1 "$tmp/final.out" | grep -qx "resumed at step $previous" || fail "final run: $(head -n 1 "$tmp/final.out")"
[ "$(grep '^finished at step ' "$tmp/final.out")" = "$expected" ] ||
    fail "resumed run ended with '$(tail -n 1 "$tmp/final.out")', the uninterrupted one with '$expected'"
ls -a "$tmp/run/ckpt" | grep -q '\.tmp-' && fail "a temporary file was left behind"
echo "ok: resumed after two SIGTERMs, ended with the uninterrupted run's state ($expected)"
