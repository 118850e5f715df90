#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# configure_test.sh <source-dir>
# What a user's configure makes of the tree: the README's install configure builds the libraries, the tool and the
# Python package and no tests, examples or benchmarks; and a developer's build (the tests asked for) on a machine
# without Catch2 — only `scripts/deps build` installed — configures, saying the tests are not built, instead of
# failing. (Catch2 is hidden from CMake with CMAKE_DISABLE_FIND_PACKAGE_Catch2.)
set -euo pipefail
src="$1"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-configure-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

cmake -S "$src" -B "$tmp/install" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr/local \
    >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "the README's configure failed"; }
targets="$(ninja -C "$tmp/install" -t targets all)"
grep -q '^ckpt_cli:' <<<"$targets" || fail "the install build has no ckpt program"
for t in test_capi bench_npz save_load; do
    ! grep -q "^$t:" <<<"$targets" || fail "the install build builds $t (tests, benchmarks and examples only when asked)"
done

cmake -S "$src" -B "$tmp/dev" -G Ninja -DCKPT_BUILD_TESTS=ON -DCKPT_BUILD_EXAMPLES=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=TRUE >"$tmp/dev.log" 2>&1 ||
    { cat "$tmp/dev.log" >&2; fail "a configure without Catch2 failed"; }
grep -q "no Catch2 (scripts/deps test installs it): the tests are not built" "$tmp/dev.log" ||
    fail "a configure without Catch2 did not say the tests are not built"
targets="$(ninja -C "$tmp/dev" -t targets all)"
grep -q '^save_load:' <<<"$targets" || fail "the examples asked for are not built"
echo "ok: the install configure builds no tests, examples or benchmarks; without Catch2 the tests are skipped, saying so"
