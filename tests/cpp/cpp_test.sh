#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cpp_test.sh <build-dir> <source-dir> <17|20|cross|doc|s3>
# Builds the C++ binding's tests as a user of the installed ckpt would — the build's C++ compiler, the headers and
# library of <build-dir>/stage found through pkg-config, an rpath to it, -Wall -Wextra -Werror -pedantic, and the
# build's sanitizers when CKPT_SANITIZE is set — then runs them:
#   17, 20  the Catch2 program (tests/cpp/test_*.cpp) as C++17 or C++20, in <build-dir>/tests/cpp/c++<std>/
#   cross   tests/cpp/cross.cpp as <build-dir>/tests/cpp/cross_cpp (the C++ program of tests/cross/README.md),
#           checked against itself
#   doc     the first program of docs/cpp.md, which must print what the page says it prints
#   s3      tests/cpp/s3_test.cpp, the Catch2 program of ckpt/cpp/s3.hpp, linked through pkg-config ckpt-s3 as its
#           users link it, in <build-dir>/tests/cpp/s3/; it needs an S3 server: run it under tests/s3/s3_env.py
# Objects are rebuilt only when their sources, the installed headers or the flags changed. Extra arguments after
# the third go to the Catch2 program.
set -euo pipefail

if [ "$#" -lt 3 ]; then
    echo "usage: $0 <build-dir> <source-dir> <17|20|cross|doc|s3> [catch args...]" >&2
    exit 2
fi
build="$(cd "$1" && pwd)"
src="$(cd "$2" && pwd)"
what="$3"
shift 3
here="$src/tests/cpp"
stage="$build/stage"
out="$build/tests/cpp"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
cache_value() {
    sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"
}

[ -f "$build/CMakeCache.txt" ] || fail "$build is not a CMake build directory"
[ -f "$stage/include/ckpt/ckpt.hpp" ] || fail "no staged install in $stage (the stage_install test makes it)"
lib="$(find "$stage" -name libckpt.so -print -quit)"
[ -n "$lib" ] || fail "libckpt.so is not staged under $stage"
libdir="$(dirname "$lib")"

cxx="$(cache_value CMAKE_CXX_COMPILER)"
cxx="${cxx:-c++}"
# The build's compiler launcher (scripts/build sets ccache where it is installed), with the same settings, so a
# rebuild in another checkout of the same sources hits the cache.
launcher=()
launcher_value="$(cache_value CMAKE_CXX_COMPILER_LAUNCHER)"
if [ -n "$launcher_value" ]; then
    read -ra launcher <<<"${launcher_value//;/ }"
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$src}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
sanitize="$(cache_value CKPT_SANITIZE)"
san_flags=()
if [ -n "$sanitize" ]; then
    # An instrumented library needs an instrumented program to load it.
    san_flags=("-fsanitize=$sanitize" -fno-sanitize-recover=all -fno-omit-frame-pointer)
fi
pc_of() {  # pc_of <package> <pkg-config options...>
    local package="$1"
    shift
    PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" pkg-config "$@" "$package"
}
pc() {
    pc_of ckpt "$@"
}
read -ra pc_cflags <<<"$(pc --cflags)" || fail "pkg-config does not find ckpt in $libdir/pkgconfig"
read -ra pc_libs <<<"$(pc --libs)"
# The headers must come from the stage: nothing of the source tree is on the include path but tests/cpp.
case " ${pc_cflags[*]} " in
    *" -I$stage/"*) ;;
    *) fail "pkg-config --cflags does not point into $stage: ${pc_cflags[*]}" ;;
esac

warnings=(-Wall -Wextra -Werror -pedantic)
headers=("$stage/include/ckpt/ckpt.h" "$stage/include/ckpt/ckpt.hpp" "$stage/include/ckpt/version.h"
         "$stage"/include/ckpt/cpp/*.hpp "$stage"/include/ckpt/sys/*.h "$stage/include/ckpt/ckpt_s3.h")

# Rebuilds $1 from the remaining arguments (the compiler command) when a dependency is newer or the command changed.
# Dependencies: the files named in the command that exist, the staged headers, support.hpp and this script.
build_step() {
    local target="$1"
    shift
    local command="$*"
    local stamp="$target.cmd"
    local stale=0
    if [ ! -f "$target" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$command" ]; then
        stale=1
    else
        local dep
        for dep in "$@" "${headers[@]}" "$here/support.hpp" "${BASH_SOURCE[0]}"; do
            if [ -f "$dep" ] && [ "$dep" -nt "$target" ]; then
                stale=1
                break
            fi
        done
    fi
    if [ "$stale" = 1 ]; then
        echo "-- ${target#"$build"/}"
        rm -f "$stamp"
        "$@" || fail "compiling ${target#"$build"/}"
        printf '%s' "$command" >"$stamp"
    fi
}

compile() {  # compile <std> <object> <source> [extra flags...]
    local std="$1" object="$2" source="$3"
    shift 3
    build_step "$object" "${launcher[@]}" "$cxx" "-std=c++$std" "${warnings[@]}" -g -O1 "${san_flags[@]}" \
        "${pc_cflags[@]}" -I"$here" "$@" -c "$source" -o "$object"
}
link() {  # link <program> <objects...>
    local program="$1"
    shift
    build_step "$program" "$cxx" "${san_flags[@]}" "$@" -o "$program" "${pc_libs[@]}" "-Wl,-rpath,$libdir" -pthread
}

case "$what" in
    17 | 20)
        dir="$out/c++$what"
        mkdir -p "$dir"
        objects=()
        # Catch2's runner is not ours: under the sanitizers GCC 12 reports -Wmaybe-uninitialized false positives in
        # the libstdc++ <regex> it uses (GCC's manual warns that sanitizers cause such warnings). Only there, and only
        # that warning, stays a warning.
        catch_flags=()
        [ -n "$sanitize" ] && catch_flags=(-Wno-error=maybe-uninitialized)
        compile "$what" "$dir/catch_main.o" "$src/tests/catch_main.cpp" "${catch_flags[@]}"
        objects+=("$dir/catch_main.o")
        for source in "$here"/test_*.cpp; do
            object="$dir/$(basename "${source%.cpp}").o"
            compile "$what" "$object" "$source"
            objects+=("$object")
        done
        link "$dir/test_cpp" "${objects[@]}"
        echo "-- running ${dir#"$build"/}/test_cpp (C++$what)"
        "$dir/test_cpp" "$@"
        ;;
    cross)
        mkdir -p "$out"
        compile 17 "$out/cross.o" "$here/cross.cpp"
        link "$out/cross_cpp" "$out/cross.o"
        bash "$here/cross_self_test.sh" "$out/cross_cpp"
        ;;
    doc)
        dir="$out/doc"
        mkdir -p "$dir"
        page="$src/docs/cpp.md"
        # The first ```cpp block, and the "# <output>" line of the ```sh block after it.
        awk '/^```cpp$/ { n++; inside = (n == 1); next } /^```$/ { inside = 0 } inside' "$page" >"$dir/example.cpp.new"
        expected="$(awk '/^```sh$/ { inside = 1; next } /^```$/ { inside = 0 } inside && /^# / { print substr($0, 3); exit }' "$page")"
        [ -s "$dir/example.cpp.new" ] && [ -n "$expected" ] || fail "docs/cpp.md has no example program and output"
        cmp -s "$dir/example.cpp.new" "$dir/example.cpp" 2>/dev/null || mv "$dir/example.cpp.new" "$dir/example.cpp"
        rm -f "$dir/example.cpp.new"
        compile 17 "$dir/example.o" "$dir/example.cpp"
        link "$dir/example" "$dir/example.o"
        run_dir="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-cpp-doc.XXXXXX")"
        trap 'rm -rf "$run_dir"' EXIT
        got="$(cd "$run_dir" && "$dir/example")" || fail "the example of docs/cpp.md failed"
        [ "$got" = "$expected" ] || fail "the example of docs/cpp.md printed '$got', the page says '$expected'"
        echo "docs/cpp.md: the example prints what the page says: $got"
        ;;
    s3)
        [ -f "$stage/include/ckpt/ckpt_s3.h" ] && [ -f "$stage/include/ckpt/cpp/s3.hpp" ] ||
            fail "ckpt/ckpt_s3.h or ckpt/cpp/s3.hpp is not staged in $stage (a build without libckpt_s3?)"
        read -ra pc_libs <<<"$(pc_of ckpt-s3 --libs)" || fail "pkg-config does not find ckpt-s3 in $libdir/pkgconfig"
        case " ${pc_libs[*]} " in
            *" -lckpt_s3 "*) ;;
            *) fail "pkg-config --libs ckpt-s3 does not link libckpt_s3: ${pc_libs[*]}" ;;
        esac
        dir="$out/s3"
        mkdir -p "$dir"
        catch_flags=()  # as for 17 and 20 above
        [ -n "$sanitize" ] && catch_flags=(-Wno-error=maybe-uninitialized)
        compile 17 "$dir/catch_main.o" "$src/tests/catch_main.cpp" "${catch_flags[@]}"
        compile 17 "$dir/s3_test.o" "$here/s3_test.cpp"
        link "$dir/test_cpp_s3" "$dir/catch_main.o" "$dir/s3_test.o"
        echo "-- running ${dir#"$build"/}/test_cpp_s3"
        "$dir/test_cpp_s3" "$@"
        ;;
    *)
        echo "usage: $0 <build-dir> <source-dir> <17|20|cross|doc|s3> [catch args...]" >&2
        exit 2
        ;;
esac
