#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deb_test.sh <build-dir> <source-dir>
# Builds the Debian packages with packaging/build-debs, checks their control fields and files, installs them with
# dpkg into a fresh root directory (never the machine's /usr: `dpkg --root`, maintainer scripts outside a chroot),
# builds tests/packaging/consumer.c against that install through pkg-config and through find_package(ckpt), runs
# both, the installed `ckpt` program and the installed Python package, runs lintian (every tag it reports must be
# explained in docs/abi.md's lintian table), then removes the packages with dpkg again.
# Exit status 77 (a skip) for a build that cannot be packaged: not configured with -DCMAKE_INSTALL_PREFIX=/usr, or
# a sanitizer build. Everything happens in a fresh mktemp directory.
set -euo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 <build-dir> <source-dir>" >&2
    exit 2
fi
build="$(cd "$1" && pwd)"
src="$(cd "$2" && pwd)"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
for tool in dpkg dpkg-deb pkg-config lintian; do
    command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found (scripts/deps build test installs it)"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-deb-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
log="$tmp/log"
run() {
    if ! "$@" >"$log" 2>&1; then
        echo "FAIL: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}
cache_value() {
    sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"
}

# 1. The packages.
echo "-- packaging/build-debs"
status=0
bash "$src/packaging/build-debs" "$build" "$tmp/debs" >"$log" 2>&1 || status=$?
if [ "$status" -eq 3 ]; then
    echo "SKIP: $(tail -n 1 "$log")"
    exit 77
fi
[ "$status" -eq 0 ] || { cat "$log" >&2; fail "packaging/build-debs failed"; }
version="$(sed -n 's/^#define CKPT_VERSION_STRING "\(.*\)".*/\1/p' "$build/include/ckpt/version.h")"
debver="$version-1"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
L="usr/lib/$multiarch"
deb() {
    local f
    f="$(find "$tmp/debs" -name "$1_${debver}_*.deb" -print -quit)"
    [ -n "$f" ] || fail "no package $1 in $(ls "$tmp/debs")"
    echo "$f"
}
field() {
    dpkg-deb -f "$(deb "$1")" "$2"
}
contents() {
    dpkg-deb -c "$(deb "$1")" | awk '{ print $6 }' | sed 's|^\./||'
}
has_file() {
    contents "$1" | grep -qxF "$2" || fail "$1 lacks $2"
}
depends_on() {
    grep -qE "(^|, )$2( |,|$)" <<<"$(field "$1" Depends)" || fail "$1 does not depend on $2: $(field "$1" Depends)"
}

# The library, its development files and the program always; the others when their parts were built.
packages=(libckpt0 libckpt-dev ckpt-tools)
for pkg in libckpt-mpi0 libckpt-mpi-dev libckpt-s3-0 libckpt-s3-dev python3-ckpt; do
    [ -n "$(find "$tmp/debs" -name "${pkg}_${debver}_*.deb" -print -quit)" ] && packages+=("$pkg")
done
declare -A section=([libckpt0]=libs [libckpt-mpi0]=libs [libckpt-s3-0]=libs [libckpt-dev]=libdevel
                    [libckpt-mpi-dev]=libdevel [libckpt-s3-dev]=libdevel [ckpt-tools]=utils [python3-ckpt]=python)
for pkg in "${packages[@]}"; do
    [ "$(field "$pkg" Version)" = "$debver" ] || fail "$pkg has version $(field "$pkg" Version)"
    [ "$(field "$pkg" Section)" = "${section[$pkg]}" ] || fail "$pkg is in section $(field "$pkg" Section)"
    has_file "$pkg" "usr/share/doc/$pkg/copyright"
    has_file "$pkg" "usr/share/doc/$pkg/changelog.Debian.gz"
    # Installed-Size as dpkg-gencontrol counts it: KiB per file rounded up, one per directory or link; it counts the
    # control files present when it runs too (shlibs, symbols, triggers), so those bound it from above.
    mkdir "$tmp/x-$pkg" "$tmp/c-$pkg"
    dpkg-deb -x "$(deb "$pkg")" "$tmp/x-$pkg"
    dpkg-deb -e "$(deb "$pkg")" "$tmp/c-$pkg"
    kib() {
        find "$1" -mindepth 1 -printf '%s %y\n' |
            awk '{ s += ($2 == "f") ? int(($1 + 1023) / 1024) : 1 } END { print s + 0 }'
    }
    data="$(kib "$tmp/x-$pkg")" ctrl="$(kib "$tmp/c-$pkg")" size="$(field "$pkg" Installed-Size)"
    [ "$size" -ge "$data" ] && [ "$size" -le $((data + ctrl + 1)) ] ||
        fail "$pkg: Installed-Size $size, but its files take $data KiB (and its control files $ctrl)"
    grep -q 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
        "$tmp/x-$pkg/usr/share/doc/$pkg/copyright" || fail "$pkg: copyright is not DEP-5"
    grep -q '^License: Apache-2.0' "$tmp/x-$pkg/usr/share/doc/$pkg/copyright" || fail "$pkg: copyright not Apache-2.0"
done
echo "-- ${packages[*]}"

# The run-time libraries: the library and its SONAME link, shlibs, symbols, the ldconfig trigger.
for pair in libckpt0:libckpt libckpt-mpi0:libckpt_mpi libckpt-s3-0:libckpt_s3; do
    pkg="${pair%%:*}" stem="${pair#*:}"
    [[ " ${packages[*]} " == *" $pkg "* ]] || continue
    has_file "$pkg" "$L/$stem.so.0"
    has_file "$pkg" "$L/$stem.so.$version"
    dpkg-deb --ctrl-tarfile "$(deb "$pkg")" | tar -x -C "$tmp" ./shlibs ./symbols ./triggers ||
        fail "$pkg lacks shlibs, symbols or triggers"
    grep -qx "$stem 0 $pkg (>= $version)" "$tmp/shlibs" || fail "$pkg: shlibs says $(cat "$tmp/shlibs")"
    head -n 1 "$tmp/symbols" | grep -qx "$stem.so.0 $pkg #MINVER#" || fail "$pkg: symbols starts $(head -n 1 "$tmp/symbols")"
    grep -qvE '^( ckpt_[a-z0-9_]+@Base [0-9.]+|\* Build-Depends-Package: .*|.*#MINVER#)$' "$tmp/symbols" &&
        fail "$pkg: symbols lists more than ckpt_* functions: $(grep -vE '^ ckpt_' "$tmp/symbols" | head -3)"
    grep -qx 'activate-noawait ldconfig' "$tmp/triggers" || fail "$pkg: triggers says $(cat "$tmp/triggers")"
    [ -z "$(contents "$pkg" | grep -E '\.so$|include/')" ] || fail "$pkg carries development files"
done
for dep in libc6 zlib1g libfmt9; do depends_on libckpt0 "$dep"; done
depends_on libckpt-dev "libckpt0 \(= $debver\)"
has_file libckpt-dev "$L/libckpt.so"
has_file libckpt-dev usr/include/ckpt/ckpt.h
has_file libckpt-dev usr/include/ckpt/sys/storage.h
has_file libckpt-dev "$L/pkgconfig/ckpt.pc"
has_file libckpt-dev "$L/cmake/ckpt/ckptConfig.cmake"
depends_on ckpt-tools libckpt0
has_file ckpt-tools usr/bin/ckpt
has_file ckpt-tools usr/share/man/man1/ckpt.1.gz
# A user of the program gets neither MPI nor curl.
grep -qE 'mpi|curl|expat|s3' <<<"$(field ckpt-tools Depends)" && fail "ckpt-tools depends on $(field ckpt-tools Depends)"
if [[ " ${packages[*]} " == *" libckpt-s3-0 "* ]]; then
    depends_on libckpt-s3-0 libcurl4
    depends_on libckpt-s3-dev "libckpt-s3-0 \(= $debver\)"
fi
if [[ " ${packages[*]} " == *" libckpt-mpi0 "* ]]; then
    depends_on libckpt-mpi0 libopenmpi3
    depends_on libckpt-mpi-dev "libckpt-mpi0 \(= $debver\)"
fi

# 2. Installed into a fresh root (the machine's libc and friends are not in it: --force-depends).
root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: >"$root/var/lib/dpkg/status"
dpkg_root() {
    dpkg --root="$root" --log="$tmp/dpkg.log" --force-script-chrootless --force-not-root --force-depends "$@"
}
debs=()
for pkg in "${packages[@]}"; do debs+=("$(deb "$pkg")"); done
echo "-- dpkg --root=<tmp> -i"
run dpkg_root -i "${debs[@]}"
for pkg in "${packages[@]}"; do
    [ "$(dpkg --root="$root" -s "$pkg" 2>/dev/null | sed -n 's/^Status: //p')" = "install ok installed" ] ||
        fail "dpkg does not list $pkg as installed in $root"
done
libdir="$root/$L"

# 3. The installed program, on the installed library.
out="$(env LD_LIBRARY_PATH="$libdir" "$root/usr/bin/ckpt" --version)" || fail "ckpt --version failed"
[ "$out" = "ckpt $version (library $version)" ] || fail "ckpt --version says '$out'"
zcat "$root/usr/share/man/man1/ckpt.1.gz" | grep -q '^\.SH DESCRIPTION' || fail "ckpt.1 is not a manual page"
echo "-- $out"

# 4. The Python package: it loads the package's own library, saves and loads.
if [[ " ${packages[*]} " == *" python3-ckpt "* ]]; then
    out="$(cd "$tmp" && env -u CKPT_LIBRARY -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 \
        PYTHONPATH="$root/usr/lib/python3/dist-packages" "$(cache_value CKPT_PYTHON)" -c '
import os, sys, numpy as np, ckpt
from ckpt import _native
lib = os.path.realpath(_native.lib._name)
assert lib.startswith(os.path.realpath(sys.argv[1]) + os.sep), "loaded " + lib
ckpt.save("deb.npz", {"w": np.arange(4.0)})
assert ckpt.load("deb.npz")["w"].tolist() == [0, 1, 2, 3]
print("ckpt", ckpt.__version__, "with", lib)' "$libdir")" || fail "the installed Python package does not work"
    echo "-- python: $out"
fi

# 5. A consumer through pkg-config (ckpt.pc finds the prefix from its own place).
pc() {
    PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config "$@" ckpt
}
[ "$(pc --modversion)" = "$version" ] || fail "pkg-config says version '$(pc --modversion)'"
read -ra pc_flags <<<"$(pc --cflags --libs)"
cc="$(cache_value CMAKE_C_COMPILER)"
run "${cc:-cc}" -std=c99 -Wall -Wextra -Wpedantic -Werror "$src/tests/packaging/consumer.c" \
    -o "$tmp/consumer-pkgconfig" "${pc_flags[@]}"
run env LD_LIBRARY_PATH="$libdir" "$tmp/consumer-pkgconfig" "$tmp/pkgconfig.npz"
run env LD_LIBRARY_PATH="$libdir" "$root/usr/bin/ckpt" verify "$tmp/pkgconfig.npz"
echo "-- consumer through pkg-config: wrote and verified"

# 6. A consumer through find_package(ckpt).
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
run cmake -S "$src/tests/packaging" -B "$tmp/cmake-build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="${cc:-cc}" -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
found="$(sed -n 's/^ckpt_DIR:[A-Z]*=//p' "$tmp/cmake-build/CMakeCache.txt")"
[ "$found" = "$libdir/cmake/ckpt" ] || fail "find_package(ckpt) found '$found', not $libdir/cmake/ckpt"
run cmake --build "$tmp/cmake-build"
run env LD_LIBRARY_PATH="$libdir" "$tmp/cmake-build/consumer" "$tmp/cmake.npz"
echo "-- consumer through find_package(ckpt)"

# 7. lintian: every tag it reports (warnings, errors, and pedantic and informational ones) is in docs/abi.md's table.
allowed="$(sed -n '/^### lintian/,/^#/p' "$src/docs/abi.md" | sed -n 's/^| `\([a-z0-9-]*\)` |.*/\1/p')"
lintian --display-info --pedantic "${debs[@]}" >"$tmp/lintian" 2>&1 || true
grep -E '^[EWIPX]: ' "$tmp/lintian" >"$tmp/tags" || true
unexplained="$(awk '{ print $3 }' "$tmp/tags" | sort -u | grep -vxF -f <(echo "$allowed") || true)"
[ -z "$unexplained" ] || fail "lintian tags docs/abi.md does not explain: $unexplained
$(cat "$tmp/tags")"
grep -q '^E: ' "$tmp/tags" && fail "lintian reports errors: $(grep '^E: ' "$tmp/tags")"
echo "-- lintian: $(wc -l <"$tmp/tags") tag(s), each explained in docs/abi.md"

# 8. Removed again: dpkg takes away every file it installed.
run dpkg_root -r "${packages[@]}"
left="$(find "$root/usr" ! -type d 2>/dev/null || true)"
[ -z "$left" ] || fail "files left after dpkg -r: $left"
echo "deb test passed"
