#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mpi_install_test.sh <build-dir> <source-dir> <mpiexec>
# libckpt_mpi as installed: its header, SONAME, ckpt-mpi.pc and the ckpt::mpi target of the CMake package, each
# building a consumer that runs under mpiexec; and libckpt itself linking no MPI.
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$2" && pwd)"
mpiexec="$3"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-mpi-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# A sanitizer build's library needs consumers built with the same sanitizers (the runtime must come first).
sanitize="$(sed -n "s/^CKPT_SANITIZE:[A-Z]*=//p" "$build/CMakeCache.txt")"
san_flags=()
[ -z "$sanitize" ] || san_flags=("-fsanitize=$sanitize" -fno-omit-frame-pointer)
cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "cmake --install"; }
[ -f "$prefix/include/ckpt/ckpt_mpi.h" ] || fail "not installed: include/ckpt/ckpt_mpi.h"
lib="$(find "$prefix" -name libckpt_mpi.so -print -quit)"
[ -n "$lib" ] || fail "libckpt_mpi.so not installed"
libdir="$(dirname "$lib")"
major="$(sed -n 's/^#define CKPT_VERSION_MAJOR \([0-9][0-9]*\).*/\1/p' "$prefix/include/ckpt/version.h")"
soname="$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
[ "$soname" = "libckpt_mpi.so.$major" ] || fail "SONAME is '$soname', expected 'libckpt_mpi.so.$major'"
[ -f "$libdir/pkgconfig/ckpt-mpi.pc" ] || fail "not installed: ckpt-mpi.pc"
[ -f "$libdir/cmake/ckpt/ckptMpiTargets.cmake" ] || fail "not installed: cmake/ckpt/ckptMpiTargets.cmake"
# The core library never links MPI: only libckpt_mpi does.
if readelf -d "$libdir/libckpt.so" | grep -q 'NEEDED.*libmpi'; then
    fail "libckpt.so links MPI: $(readelf -d "$libdir/libckpt.so" | grep NEEDED)"
fi
readelf -d "$lib" | grep -q 'NEEDED.*libmpi' || fail "libckpt_mpi.so does not link MPI"
# Its exports: ckpt_mpi_* only.
extra="$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | grep -v '^ckpt_mpi_' || true)"
[ -z "$extra" ] || fail "libckpt_mpi.so exports more than ckpt_mpi_*: $extra"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# 1. pkg-config
read -ra flags <<<"$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs ckpt-mpi)"
cc -std=c99 -Wall -Werror "${san_flags[@]}" "$src/tests/packaging/mpi/consumer.c" -o "$tmp/consumer-pc" "${flags[@]}" "-Wl,-rpath,$libdir" ||
    fail "building against pkg-config ckpt-mpi (${flags[*]})"
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$tmp/consumer-pc" || fail "the pkg-config consumer"
# 2. find_package(ckpt) and ckpt::mpi
cmake -S "$src/tests/packaging/mpi" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_RPATH="$libdir" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "configuring against find_package(ckpt)"; }
cmake --build "$tmp/cmake-build" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "building against ckpt::mpi"; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$tmp/cmake-build/consumer" || fail "the ckpt::mpi consumer"
# 3. A C++-only project finds ckpt where libckpt_mpi is installed too: MPI (whose C component such a project cannot
# find) is looked for only by projects that ask for the mpi component, or that enable C.
mkdir -p "$tmp/cxx-only"
cat >"$tmp/cxx-only/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(app CXX)
find_package(ckpt REQUIRED)
if(TARGET ckpt::mpi)
  message(FATAL_ERROR "ckpt::mpi was loaded, with MPI, for a project that did not ask for it")
endif()
add_executable(app app.cpp)
target_link_libraries(app PRIVATE ckpt::ckpt)
CMAKE
cat >"$tmp/cxx-only/app.cpp" <<'CXX'
#include <ckpt/ckpt.h>
#include <cstdio>
int main() { std::printf("%s\n", ckpt_version_string()); }
CXX
cmake -S "$tmp/cxx-only" -B "$tmp/cxx-only/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_RPATH="$libdir" \
    -DCMAKE_CXX_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "configuring a C++-only project against find_package(ckpt)"; }
cmake --build "$tmp/cxx-only/build" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "building the C++-only project"; }
[ -n "$("$tmp/cxx-only/build/app")" ] || fail "the C++-only consumer printed no version"
echo "mpi install test passed"
