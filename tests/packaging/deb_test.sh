#!/usr/bin/env bash
# deb_test.sh <build-dir> <source-dir>
# Builds the Debian package with `cpack -G DEB`, checks its control fields and contents, installs it with dpkg into a
# fresh root directory (never the machine's /usr: `dpkg --root`, with maintainer scripts run outside a chroot
# against a no-op ldconfig), builds tests/packaging/consumer.c against that install through pkg-config and through
# find_package(ckpt), runs both and the installed `ckpt` program, then removes the package with dpkg again.
# Everything happens in a fresh mktemp directory; nothing needs root.
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
for tool in cpack dpkg dpkg-deb pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found (scripts/deps build test installs it)"
done
[ -f "$build/CPackConfig.cmake" ] || fail "$build has no CPackConfig.cmake"

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
cc="$(cache_value CMAKE_C_COMPILER)"
cc="${cc:-cc}"
sanitize="$(cache_value CKPT_SANITIZE)"
san_flags=()
if [ -n "$sanitize" ]; then
    san_flags=("-fsanitize=$sanitize" -fno-omit-frame-pointer)
fi
# The library directory under /usr as this build lays it out ("lib", or "lib/<triplet>" for a /usr prefix).
lib_rel="$(cache_value CMAKE_INSTALL_LIBDIR)"
lib_rel="${lib_rel:-lib}"
case "$lib_rel" in /*) fail "CMAKE_INSTALL_LIBDIR is absolute ($lib_rel): the package cannot be relocated" ;; esac
version="$(sed -n 's/^#define CKPT_VERSION_STRING "\(.*\)".*/\1/p' "$build/include/ckpt/version.h")"
major="${version%%.*}"
[ -n "$version" ] || fail "no version in $build/include/ckpt/version.h"

# 1. The package, built into the temporary directory (in the build tree only install_manifest.txt is rewritten,
#    as by any install).
echo "-- cpack -G DEB"
run cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/cpack"
deb="$(find "$tmp/cpack" -maxdepth 1 -name 'ckpt_*.deb' -print -quit)"
[ -n "$deb" ] || fail "cpack made no ckpt_*.deb: $(ls "$tmp/cpack")"
echo "-- $(basename "$deb")"

field() {
    dpkg-deb -f "$deb" "$1"
}
[ "$(field Package)" = ckpt ] || fail "Package is '$(field Package)', not ckpt"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', not $version"
depends="$(field Depends)"
for dep in libfmt9 zlib1g libc6; do
    grep -qE "(^|, )$dep( |,|$)" <<<"$depends" || fail "Depends lacks $dep: $depends"
done
grep -qE 'libckpt' <<<"$depends" && fail "the package depends on itself: $depends"
echo "-- Depends: $depends"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./shlibs >"$tmp/shlibs" 2>/dev/null || fail "no shlibs control file"
grep -qx "libckpt $major ckpt (>= $version)" "$tmp/shlibs" || fail "shlibs says '$(cat "$tmp/shlibs")'"

# The files: what `cmake --install` installs, under /usr.
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$tmp/contents"
l="/usr/$lib_rel"
expected=(/usr/bin/ckpt /usr/include/ckpt/ckpt.h /usr/include/ckpt/version.h "$l/pkgconfig/ckpt.pc"
          "$l/cmake/ckpt/ckptConfig.cmake" "$l/cmake/ckpt/ckptConfigVersion.cmake" "$l/cmake/ckpt/ckptTargets.cmake"
          "$l/libckpt.so.$major" "$l/libckpt.so")
if [ -f "$src/include/ckpt/ckpt.hpp" ]; then
    expected+=(/usr/include/ckpt/ckpt.hpp)
fi
for f in "${expected[@]}"; do
    grep -qxF "$f" "$tmp/contents" || fail "the package lacks $f"
done

# 2. Installed into a fresh root. dpkg runs maintainer scripts in a chroot of the root unless told not to; the
#    postinst's ldconfig then finds the no-op one first on PATH, so the machine's loader cache is left alone.
root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$tmp/shim"
: >"$root/var/lib/dpkg/status"
printf '#!/bin/sh\nexit 0\n' >"$tmp/shim/ldconfig"
chmod +x "$tmp/shim/ldconfig"
dpkg_root() {
    PATH="$tmp/shim:$PATH" dpkg --root="$root" --log="$tmp/dpkg.log" --force-script-chrootless --force-not-root \
        --force-depends "$@"
}
echo "-- dpkg --root=<tmp> -i"
run dpkg_root -i "$deb"
[ "$(dpkg --root="$root" -s ckpt 2>/dev/null | sed -n 's/^Status: //p')" = "install ok installed" ] ||
    fail "dpkg does not list ckpt as installed in $root"
libdir="$root/usr/$lib_rel"
[ -e "$libdir/libckpt.so.$major" ] || fail "libckpt.so.$major is not under $libdir"

check_loads_installed() {
    local resolved
    resolved="$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="${2:-}" ldd "$1" |
        sed -n 's/^[[:space:]]*libckpt\.so[^ ]* => \([^ ]*\).*/\1/p')"
    [ "$(cd "$(dirname "$resolved")" && pwd -P)" = "$(cd "$libdir" && pwd -P)" ] ||
        fail "$1 loads libckpt from '$resolved', not from $libdir"
}

# 3. The installed program: it finds the library beside it (its run path is relative), not the build tree's.
check_loads_installed "$root/usr/bin/ckpt"
out="$(env -u LD_LIBRARY_PATH "$root/usr/bin/ckpt" --version)" || fail "ckpt --version failed"
[ "$out" = "ckpt $version (library $version)" ] || fail "ckpt --version says '$out'"
echo "-- $out"

# 4. A consumer through pkg-config: ckpt.pc finds the prefix from its own place, so no --define-variable.
pc() {
    PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config "$@" ckpt
}
[ "$(pc --modversion)" = "$version" ] || fail "pkg-config says version '$(pc --modversion)'"
read -ra pc_flags <<<"$(pc --cflags --libs)"
echo "-- $cc consumer.c ${pc_flags[*]}"
run "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror "${san_flags[@]}" "$src/tests/packaging/consumer.c" \
    -o "$tmp/consumer-pkgconfig" "${pc_flags[@]}"
check_loads_installed "$tmp/consumer-pkgconfig" "$libdir"
run env LD_LIBRARY_PATH="$libdir" "$tmp/consumer-pkgconfig" "$tmp/pkgconfig.npz"

# 5. A consumer through find_package(ckpt).
generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi
echo "-- cmake -S tests/packaging -DCMAKE_PREFIX_PATH=<root>/usr"
run cmake -S "$src/tests/packaging" -B "$tmp/cmake-build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" \
    -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
found="$(sed -n 's/^ckpt_DIR:[A-Z]*=//p' "$tmp/cmake-build/CMakeCache.txt")"
[ "$found" = "$libdir/cmake/ckpt" ] || fail "find_package(ckpt) found '$found', not $libdir/cmake/ckpt"
run cmake --build "$tmp/cmake-build"
check_loads_installed "$tmp/cmake-build/consumer" "$libdir"
run env LD_LIBRARY_PATH="$libdir" "$tmp/cmake-build/consumer" "$tmp/cmake.npz"

# The installed program reads what the consumer wrote.
run env -u LD_LIBRARY_PATH "$root/usr/bin/ckpt" verify "$tmp/cmake.npz"

# 6. Removed again: dpkg takes away every file it installed.
echo "-- dpkg --root=<tmp> -r ckpt"
run dpkg_root -r ckpt
left="$(find "$root/usr" -type f 2>/dev/null || true)"
[ -z "$left" ] || fail "files left after dpkg -r: $left"

echo "deb test passed"
