#!/usr/bin/env bash
# pip_install_test.sh <python> <bindings/python> <libckpt.so.0>
# Installs the Python package with pip as a user on a machine without a package index would (Debian's setuptools,
# no build isolation, no dependencies fetched) into a fresh directory, then imports it from there — not from the
# source tree — and saves and loads a checkpoint with it.
set -euo pipefail
python="$1"
src="$(cd "$2" && pwd)"
lib="$3"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-pip-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/src"  # pip builds in place; keep the tree clean
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$tmp/site" "$tmp/src"
cd "$tmp"
PYTHONPATH="$tmp/site" CKPT_LIBRARY="$lib" "$python" - <<'PY'
import os, numpy as np, ckpt
assert ckpt.__file__.startswith(os.path.join(os.getcwd(), "site")), ckpt.__file__
ckpt.save("x.npz", {"w": np.arange(3.0)}, metadata={"by": "pip"})
back = ckpt.load("x.npz")
assert back["w"].tolist() == [0, 1, 2] and back.metadata == {"by": "pip"}
print("installed ckpt", ckpt.__version__, "from", os.path.dirname(ckpt.__file__), "with library", ckpt.library_version)
PY
