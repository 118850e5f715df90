#!/usr/bin/env bash
# A kill -9 campaign at scale: the test suite's kill loop (tests/test_kill.cpp, 50 trials) run for many more
# trials. Each trial SIGKILLs a process that is saving checkpoints at a random moment, then checks that a new
# manager restores the newest acknowledged checkpoint (or a newer complete one) bit-exactly, with no temporary
# files left. Half the trials use background saves.
#   bench/kill_campaign.sh [trials=2000] [directory=/tmp] [build=build]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trials="${1:-2000}"
dir="${2:-/tmp}"
build="${3:-$root/build}"
if [ ! -x "$build/tests/test_kill" ]; then
    echo "no $build/tests/test_kill: run scripts/test (or scripts/build) first" >&2
    exit 1
fi
CKPT_KILL_TRIALS="$trials" CKPT_KILL_DIR="$dir" "$build/tests/test_kill"
