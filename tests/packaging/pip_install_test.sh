#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pip_install_test.sh <python> <bindings/python> <libckpt.so.0> <target-dir>
# Installs the Python package with pip as a user on a machine without a package index would (Debian's setuptools,
# no build isolation, nothing fetched) into <target-dir> (emptied first), then imports it from there — not from
# the source tree — and saves and loads a checkpoint with it. The package's compiled fast path must have been
# built. The tests then run once more against this installed copy (python_binding_installed).
set -euo pipefail
python="$1"
src="$(cd "$2" && pwd)"
lib="$3"
target="$4"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-pip-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/src"  # pip builds in the directory it is given; keep the source tree clean
rm -rf "$target"
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$target" "$tmp/src"
cd "$tmp"
PYTHONPATH="$target" CKPT_LIBRARY="$lib" "$python" - "$target" <<'PY'
import os, sys, numpy as np, ckpt
from ckpt import _vars
assert ckpt.__file__.startswith(os.path.abspath(sys.argv[1])), ckpt.__file__
assert _vars._speedups is not None, "the compiled fast path was not built"
ckpt.save("x.npz", {"w": np.arange(3.0)}, metadata={"by": "pip"})
back = ckpt.load("x.npz")
assert back["w"].tolist() == [0, 1, 2] and back.metadata == {"by": "pip"}
print("installed ckpt", ckpt.__version__, "from", os.path.dirname(ckpt.__file__), "with library", ckpt.library_version)
PY
