#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# exports_test.sh <libckpt.so> [ckpt.h]
# The library's dynamic symbol table holds only ckpt_* names, and every function ckpt.h declares is there.
set -euo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
    echo "usage: $0 <libckpt.so> [ckpt.h]" >&2
    exit 2
fi
lib="$1"
header="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/include/ckpt/ckpt.h}"
[ -f "$lib" ] || { echo "FAIL: no such library: $lib" >&2; exit 1; }
[ -f "$header" ] || { echo "FAIL: no such header: $header" >&2; exit 1; }

# "<address> <type> <name>[@version]" for every defined dynamic symbol, whatever its type.
exported="$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $2, $3 }' | sort -k2 -u)"
status=0

offenders="$(awk '$2 !~ /^ckpt_/' <<<"$exported")"
if [ -n "$offenders" ]; then
    echo "FAIL: $lib exports symbols outside the ckpt_ prefix (type name):" >&2
    while read -r type name; do
        demangled="$(c++filt "$name" 2>/dev/null || true)"
        printf "  %s %s  %.120s\n" "$type" "$name" "$demangled" >&2
    done <<<"$offenders"
    status=1
fi

# ckpt.h and the ckpt/sys/ headers it includes.
headers=("$header")
while read -r part; do headers+=("$(dirname "$header")/$part"); done < <(sed -nE 's|^#include "ckpt/(sys/[A-Za-z0-9_.]+)"$|\1|p' "$header")
declared="$(cat "${headers[@]}" | grep -oE '^CKPT_API [^(]*ckpt_[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/.*[^A-Za-z0-9_](ckpt_[A-Za-z0-9_]+)[[:space:]]*\($/\1/' | sort -u)"
[ -n "$declared" ] || { echo "FAIL: found no CKPT_API declarations in $header" >&2; exit 1; }
missing="$(comm -23 <(printf '%s\n' "$declared") <(awk '{ print $2 }' <<<"$exported" | sort -u))"
if [ -n "$missing" ]; then
    echo "FAIL: declared in $(basename "$header") but not exported by $lib:" >&2
    while read -r name; do echo "  $name" >&2; done <<<"$missing"
    status=1
fi

if [ "$status" -eq 0 ]; then
    echo "exports ok: $(wc -l <<<"$declared") ckpt_ functions, nothing else"
fi
exit "$status"
