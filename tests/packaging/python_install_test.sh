#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# python_install_test.sh <build-dir> <python> <ON|OFF: ckpt._speedups was built> [prefix|venv]
# prefix (the default): installs the build with `cmake --install` into a fresh prefix, then, from another directory and with neither
# CKPT_LIBRARY nor LD_LIBRARY_PATH set, imports ckpt from the site directory the install made (PYTHONPATH), checks
# that it is that copy, that it loaded the library installed with it (not the build tree's, not the loader's
# search path) and, when it was built, the compiled fast path; then saves and loads a checkpoint with it. The
# prefix is then moved: the package finds its library from its own place, so it still imports.
# venv: docs/python.md's install into /usr/local and a virtual environment (below); exits 77 (skipped) where it
# cannot run.
set -euo pipefail
if [ "$#" -lt 3 ] || [ "$#" -gt 4 ]; then
    echo "usage: $0 <build-dir> <python> <ON|OFF> [prefix|venv]" >&2
    exit 2
fi
build="$(cd "$1" && pwd)"
python="$2"
speedups="$3"
part="${4:-prefix}"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-python-install-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if [ "$part" = venv ]; then
    if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2>/dev/null; then
        echo "skipped: the docs' venv install needs root and mount namespaces (to have a /usr/local of its own)"
        exit 77
    elif ! "$python" -m venv --help >/dev/null 2>&1; then
        echo "skipped: $python has no venv module (Debian: apt-get install python3-venv)"
        exit 77
    fi
fi
site_rel="$(sed -n 's/^CKPT_PYTHON_SITE_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")"
[ -n "$site_rel" ] || fail "$build/CMakeCache.txt has no CKPT_PYTHON_SITE_DIR"
case "$site_rel" in /*) fail "CKPT_PYTHON_INSTALL_DIR is absolute ($site_rel): this test installs under a prefix" ;; esac

if [ "$part" = prefix ]; then
    echo "-- cmake --install $build --prefix <tmp>/prefix"
    cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "cmake --install"; }
    [ -f "$tmp/prefix/$site_rel/ckpt/__init__.py" ] || fail "no ckpt/__init__.py under <prefix>/$site_rel"
    [ -f "$tmp/prefix/$site_rel/ckpt/py.typed" ] || fail "no ckpt/py.typed under <prefix>/$site_rel"
    [ ! -e "$tmp/prefix/$site_rel/ckpt/_speedups.c" ] || fail "the extension's C source was installed"

    check() {  # check <prefix>
        local prefix="$1"
        mkdir -p "$tmp/elsewhere"
        (cd "$tmp/elsewhere" && env -u CKPT_LIBRARY -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$prefix/$site_rel" \
            "$python" - "$prefix" "$site_rel" "$speedups" <<'PY'
import os, sys
prefix, site, speedups = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
import numpy as np
import ckpt
from ckpt import _native, _vars
here = os.path.realpath(os.path.dirname(ckpt.__file__))
assert here == os.path.join(prefix, site, "ckpt"), "ckpt imported from %s" % here
loaded = os.path.realpath(_native.lib._name)
assert loaded.startswith(prefix + os.sep), "the package loaded %s, not the library under %s" % (loaded, prefix)
with open("/proc/self/maps") as maps:
    libs = {os.path.realpath(line.split()[-1]) for line in maps if "libckpt.so" in line}
assert libs == {loaded}, "libckpt mapped from %s" % sorted(libs)
if speedups == "ON":
    assert _vars._speedups is not None, "the compiled fast path was not installed"
    assert os.path.realpath(_vars._speedups.__file__).startswith(here), _vars._speedups.__file__
ckpt.save("x.npz", {"w": np.arange(3.0)}, metadata={"by": "cmake --install"})
back = ckpt.load("x.npz")
assert back["w"].tolist() == [0, 1, 2] and back.metadata == {"by": "cmake --install"}
print("-- ckpt %s from %s, library %s" % (ckpt.__version__, here, loaded))
PY
        ) || fail "import ckpt from $prefix/$site_rel"
    }
    check "$tmp/prefix"
    mv "$tmp/prefix" "$tmp/moved"
    check "$tmp/moved"
fi

# docs/python.md's Install section on Debian 12, literally: `cmake --install build --prefix /usr/local && ldconfig`,
# then a virtual environment that sees Debian's numpy and torch, and `pip install --no-build-isolation
# ./bindings/python` in it. /usr/local and the loader's cache are this test's own (a private mount namespace), so
# nothing of the machine changes. `import ckpt` must then work with no CKPT_LIBRARY: after ldconfig, and without
# it (the package looks in /usr/local/lib itself).
src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")"
if [ "$part" = venv ]; then
    echo "-- docs/python.md: cmake --install to /usr/local, ldconfig, a venv with --system-site-packages, pip install"
    mkdir -p "$tmp/docs/src" "$tmp/elsewhere"
    cp -r "$src/bindings" "$tmp/docs/src/"  # pip builds in the directory it is given; keep the source tree clean
    cp /etc/ld.so.cache "$tmp/docs/ld.so.cache.before"
    # ldconfig replaces /etc/ld.so.cache by renaming a new file over it, which a file bind-mounted there refuses
    # (EBUSY): the namespace gets a copy of /etc instead, whose cache it may replace.
    cp -a /etc "$tmp/docs/etc"
    unshare --mount --propagation private env -u CKPT_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH \
        bash -euo pipefail -s "$build" "$python" "$tmp" <<'SH' || fail "the docs' install in a venv"
build="$1"; python="$2"; tmp="$3"
mount -t tmpfs tmpfs /usr/local
mount --bind "$tmp/docs/etc" /etc
cd "$tmp/docs/src"
cmake --install "$build" --prefix /usr/local >"$tmp/docs/install.log" 2>&1 && ldconfig
"$python" -m venv --system-site-packages "$tmp/docs/venv"
. "$tmp/docs/venv/bin/activate"
pip install --quiet --no-build-isolation ./bindings/python
try() {
    (cd "$tmp/elsewhere" && PYTHONDONTWRITEBYTECODE=1 python - "$tmp/docs/venv" "$1" <<'PY')
import os, sys
venv, how = os.path.realpath(sys.argv[1]), sys.argv[2]
import numpy as np
import ckpt
from ckpt import _native
assert os.path.realpath(ckpt.__file__).startswith(venv + os.sep), "ckpt imported from %s" % ckpt.__file__
with open("/proc/self/maps") as maps:
    libs = {os.path.realpath(line.split()[-1]) for line in maps if "libckpt.so" in line}
# lib/ or lib/<multiarch>/, as the build's CMAKE_INSTALL_LIBDIR has it
assert len(libs) == 1 and os.path.dirname(next(iter(libs))).startswith("/usr/local/lib"), \
    "libckpt mapped from %s" % sorted(libs)
ckpt.save("x.npz", {"w": np.arange(3.0)})
assert ckpt.load("x.npz")["w"].tolist() == [0, 1, 2]
print("-- %s: ckpt %s from %s, library %s" % (how, ckpt.__version__, os.path.dirname(ckpt.__file__), libs.pop()))
PY
}
try "after ldconfig"
cp "$tmp/docs/ld.so.cache.before" /etc/ld.so.cache  # the loader's cache without /usr/local's libckpt
try "without ldconfig"
SH
fi
echo "python install test ($part) passed"
