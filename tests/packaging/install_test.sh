#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_test.sh <build-dir> <source-dir>
# Installs the build into a temporary prefix and builds tests/packaging/consumer.c against that install twice,
# through pkg-config and through find_package(ckpt), then runs both; checks the installed files and the SONAME.
# Everything happens in a fresh mktemp directory, so parallel runs do not meet (cmake --install does rewrite
# <build-dir>/install_manifest.txt, which nothing here reads).
set -euo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 <build-dir> <source-dir>" >&2
    exit 2
fi
build="$(cd "$1" && pwd)"
src="$(cd "$2" && pwd)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-install-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
log="$tmp/log"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# Runs a command quietly; on failure shows what it printed.
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

[ -f "$build/CMakeCache.txt" ] || fail "$build is not a CMake build directory"
# Build the consumers with the library's compiler and, for a sanitizer build, the same sanitizers: an
# instrumented library needs an instrumented program to load it.
cc="$(cache_value CMAKE_C_COMPILER)"
cc="${cc:-cc}"
sanitize="$(cache_value CKPT_SANITIZE)"
san_flags=()
if [ -n "$sanitize" ]; then
    san_flags=("-fsanitize=$sanitize" -fno-omit-frame-pointer)
fi

echo "-- cmake --install $build --prefix $prefix"
run cmake --install "$build" --prefix "$prefix"

# Installed files.
# The C++ binding's parts: every header of the source tree's include/ckpt/cpp/.
cpp_parts=()
for part in "$src"/include/ckpt/cpp/*.hpp; do
    [ -f "$part" ] && cpp_parts+=("include/ckpt/cpp/$(basename "$part")")
done
# The implementers' C headers: every header of include/ckpt/sys/.
for part in "$src"/include/ckpt/sys/*.h; do
    [ -f "$part" ] && cpp_parts+=("include/ckpt/sys/$(basename "$part")")
done
for f in include/ckpt/ckpt.h include/ckpt/ckpt.hpp include/ckpt/version.h "${cpp_parts[@]}"; do
    [ -f "$prefix/$f" ] || fail "not installed: $f"
done
lib="$(find "$prefix" -name libckpt.so -print -quit)"
[ -n "$lib" ] || fail "libckpt.so not installed under $prefix"
libdir="$(dirname "$lib")"
[ -f "$libdir/pkgconfig/ckpt.pc" ] || fail "not installed: ${libdir#"$prefix"/}/pkgconfig/ckpt.pc"
for f in ckptConfig.cmake ckptConfigVersion.cmake ckptTargets.cmake; do
    [ -f "$libdir/cmake/ckpt/$f" ] || fail "not installed: ${libdir#"$prefix"/}/cmake/ckpt/$f"
done

# SONAME: libckpt.so.<major>, with the symlink the loader looks for.
major="$(sed -n 's/^#define CKPT_VERSION_MAJOR \([0-9][0-9]*\).*/\1/p' "$prefix/include/ckpt/version.h")"
version="$(sed -n 's/^#define CKPT_VERSION_STRING "\(.*\)".*/\1/p' "$prefix/include/ckpt/version.h")"
if [ -z "$major" ] || [ -z "$version" ]; then
    fail "installed ckpt/version.h has no version"
fi
soname="$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
[ "$soname" = "libckpt.so.$major" ] || fail "SONAME is '$soname', expected 'libckpt.so.$major'"
[ -e "$libdir/$soname" ] || fail "$soname is not installed beside libckpt.so"
if readelf -d "$lib" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
    fail "the installed library keeps a run path into the build tree: $(readelf -d "$lib" | grep -E 'R(UN)?PATH')"
fi
echo "-- SONAME $soname, version $version"

# The consumer must load the installed library, not the one in the build tree.
check_loads_installed() {
    local resolved
    resolved="$(env -u LD_LIBRARY_PATH ldd "$1" | sed -n 's/^[[:space:]]*libckpt\.so[^ ]* => \([^ ]*\).*/\1/p')"
    [ "$(dirname "$resolved")" = "$libdir" ] || fail "$1 loads libckpt from '$resolved', not from $libdir"
}

# 1. pkg-config. The prefix is given explicitly because the .pc names the prefix chosen at configure time,
#    while this install went elsewhere; this also checks that libdir and includedir are relative to it.
pc() {
    PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
        pkg-config --define-variable=prefix="$prefix" "$@" ckpt
}
pc_version="$(pc --modversion)" || fail "pkg-config does not find ckpt"
[ "$pc_version" = "$version" ] || fail "pkg-config says version $pc_version, headers say $version"
read -ra pc_flags <<<"$(pc --cflags --libs)"
echo "-- $cc consumer.c ${pc_flags[*]}"
run "$cc" -std=c99 -Wall -Wextra -Wpedantic -Werror "${san_flags[@]}" "$src/tests/packaging/consumer.c" \
    -o "$tmp/consumer-pkgconfig" "${pc_flags[@]}" "-Wl,-rpath,$libdir"
check_loads_installed "$tmp/consumer-pkgconfig"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer-pkgconfig" "$tmp/pkgconfig.npz" || fail "consumer built with pkg-config"

# 2. find_package(ckpt) with the exported ckpt::ckpt target.
generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi
echo "-- cmake -S tests/packaging -DCMAKE_PREFIX_PATH=$prefix"
run cmake -S "$src/tests/packaging" -B "$tmp/cmake-build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
found="$(sed -n 's/^ckpt_DIR:[A-Z]*=//p' "$tmp/cmake-build/CMakeCache.txt")"
[ "$found" = "$libdir/cmake/ckpt" ] || fail "find_package(ckpt) found '$found', not $libdir/cmake/ckpt"
run cmake --build "$tmp/cmake-build"
check_loads_installed "$tmp/cmake-build/consumer"
LD_LIBRARY_PATH="$libdir" "$tmp/cmake-build/consumer" "$tmp/cmake.npz" || fail "consumer built with find_package"

echo "install test passed"
