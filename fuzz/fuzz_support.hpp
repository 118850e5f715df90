// SPDX-License-Identifier: Apache-2.0
// What the fuzz targets share: the bound on per-input work, and how a target reports a broken invariant.
#pragma once

#include "npz/npz_reader.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace ckpt_fuzz {

// The reader only refuses sizes the file cannot justify, and deflate justifies up to 1032 bytes per compressed
// byte: a 64 KiB input may legitimately declare 64 MiB of arrays. Decoding that is correct but slow under ASan,
// so a target reads array data only when the archive declares at most this much in total. Headers, the zip
// directory and objax's names table are still read for every input (that happens while the reader opens).
constexpr uint64_t kMaxArrayBytes = uint64_t{4} << 20;

inline uint64_t declared_array_bytes(const ckpt::core::NpzReader& reader) {
    uint64_t total = 0;
    for (size_t i = 0; i < reader.size(); ++i) total += reader.entry(i).header.nbytes;
    return total;
}

// A broken invariant: say which, then stop the way libFuzzer and the replay driver both report as a crash.
[[noreturn]] inline void invariant_failed(const char* what) {
    std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
    std::fflush(stderr);
    __builtin_trap();
}

}  // namespace ckpt_fuzz

#define FUZZ_CHECK(cond)                                        \
    do {                                                        \
        if (!(cond)) ::ckpt_fuzz::invariant_failed(#cond);      \
    } while (0)
