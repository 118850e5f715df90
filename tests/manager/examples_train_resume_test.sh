#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# examples_train_resume_test.sh <path to train_resume>
#
# examples/train_resume resumes exactly:
#  1. a run to 600 steps, and a run to 300 steps followed by a new process to 600, print the same losses from step
#     300 on (bit for bit: the losses are printed with 17 significant digits);
#  2. runs killed with SIGKILL at random moments and restarted resume from a step that was saved (the last one
#     printed, or the one after it when the kill fell between the save and its message), with the loss printed
#     before the kill, and end with the losses of an uninterrupted run. A restart that only resumes removes
#     nothing (a manager touches the directory first when it saves, so an evaluator never disturbs a trainer):
#     the temporaries a kill left are gone once the next run has saved, and none is left at the end.
set -euo pipefail

bin="${1:?usage: examples_train_resume_test.sh <path to train_resume>}"
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

# The loss printed for step $2 in file $1 ("step N loss L saved" or "resumed at step N, loss L"); empty if none.
loss_at() {
    sed -n -e "s/^step $2 loss \([^ ]*\) saved\$/\1/p" -e "s/^resumed at step $2, loss \(.*\)\$/\1/p" "$1" | tail -n 1
}

# 1. Stop and resume at a save, in a new process.
"$bin" "$tmp/a" 600 >"$tmp/a.out"
"$bin" "$tmp/b" 300 >"$tmp/b1.out"
"$bin" "$tmp/b" 600 >"$tmp/b2.out"
head -n 1 "$tmp/a.out" | grep -qx "starting from scratch" || fail "a fresh logdir did not start from scratch"
[ "$(head -n 1 "$tmp/b2.out")" = "resumed at step 300, loss $(loss_at "$tmp/a.out" 300)" ] ||
    fail "the second run did not resume at step 300 with the loss of the uninterrupted run: $(head -n 1 "$tmp/b2.out")"
diff <(grep -E '^step (4|5|6)00 ' "$tmp/a.out") <(grep -E '^step ' "$tmp/b2.out") >&2 ||
    fail "after resuming, the losses differ from the uninterrupted run's (diff above)"
[ "$(grep '^step 600 ' "$tmp/a.out")" = "$(grep '^step 600 ' "$tmp/b2.out")" ] || fail "final losses differ"
[ -n "$(loss_at "$tmp/a.out" 600)" ] || fail "no loss printed at step 600"
echo "ok: 300 + 300 steps print the losses of 600 uninterrupted steps ($(grep '^step 600 ' "$tmp/a.out"))"

# 2. kill -9 mid-run, restart, and again; then finish and compare with an uninterrupted run.
total=2000
every=100
"$bin" "$tmp/ref" "$total" "$every" >"$tmp/ref.out"
leftovers=""
for cycle in 1 2 3; do
    out="$tmp/c$cycle.out"
    "$bin" "$tmp/c" "$total" "$every" 400 >"$out" &
    child=$!
    # Wait for a save in this run (at most 20 s), then kill at a random moment within the next ~60 ms.
    for _ in $(seq 200); do
        if grep -q ' saved$' "$out"; then break; fi
        sleep 0.1
    done
    grep -q ' saved$' "$out" || fail "cycle $cycle: no save within 20 s"
    for left in $leftovers; do
        [ ! -e "$left" ] || fail "cycle $cycle: $left, left by the previous kill, is still there after a save"
    done
    sleep "0.0$((RANDOM % 60 + 10))"
    kill -9 "$child"
    wait "$child" 2>/dev/null && fail "cycle $cycle: the run finished before the kill" || true
    child=""
    printed="$(grep -c ' saved$' "$out")"
    last="$(sed -n 's/^step \([0-9]*\) loss .* saved$/\1/p' "$out" | tail -n 1)"
    echo "cycle $cycle: killed after $printed saves printed, the last at step $last"

    # Restart (a new process) up to the next cycle's start, or to the end; read the first line.
    next="$tmp/r$cycle.out"
    if [ "$cycle" -lt 3 ]; then
        "$bin" "$tmp/c" 0 >"$next"  # steps 0: only resumes, trains nothing
    else
        "$bin" "$tmp/c" "$total" "$every" >"$next"
    fi
    first="$(head -n 1 "$next")"
    step="$(printf '%s\n' "$first" | sed -n 's/^resumed at step \([0-9]*\), loss .*$/\1/p')"
    [ -n "$step" ] || fail "cycle $cycle: the restart did not resume: '$first'"
    loss="${first##*loss }"
    if [ "$step" = "$last" ]; then
        [ "$loss" = "$(loss_at "$out" "$step")" ] ||
            fail "cycle $cycle: resumed at step $step with loss $loss, but $(loss_at "$out" "$step") was printed before the kill"
    elif [ "$step" = "$((last + every))" ]; then
        echo "cycle $cycle: the kill fell between the save of step $step and its message"
    else
        fail "cycle $cycle: resumed at step $step, but the last save printed before the kill was step $last"
    fi
    [ "$loss" = "$(loss_at "$tmp/ref.out" "$step")" ] ||
        fail "cycle $cycle: resumed at step $step with loss $loss, the uninterrupted run had $(loss_at "$tmp/ref.out" "$step")"
    leftovers="$(find "$tmp/c/ckpt" -name '.*' ! -name .ckpt.lock)"
    for left in $leftovers; do
        case "$(basename "$left")" in
            .*.npz.tmp-??????) ;;
            *) fail "cycle $cycle: $left, not a temporary of a save, is in the directory after the restart" ;;
        esac
    done
    count="$(find "$tmp/c/ckpt" -name '*.npz' | wc -l)"
    # keep + 1 when the kill interrupted retention; the restart removes nothing until it saves.
    [ "$count" -le 11 ] || fail "cycle $cycle: $count checkpoints after the restart (keep is 10)"
    echo "ok: cycle $cycle resumed at step $step, loss $loss"
done
left="$(find "$tmp/c/ckpt" -name '.*' ! -name .ckpt.lock)"
[ -z "$left" ] || fail "temporaries left after the last run saved: $left"
[ "$(tail -n 2 "$tmp/r3.out")" = "$(tail -n 2 "$tmp/ref.out")" ] ||
    fail "the killed and restarted runs ended with $(tail -n 2 "$tmp/r3.out" | head -n 1), the uninterrupted run with $(tail -n 2 "$tmp/ref.out" | head -n 1)"
echo "ok: after 3 kills, the run ends as the uninterrupted one: $(tail -n 2 "$tmp/ref.out" | head -n 1)"
