// SPDX-License-Identifier: Apache-2.0
// The subcommands: each adds itself to the program's command line and says how to run what was parsed.
#pragma once

#include "array_stats.hpp"
#include "failure.hpp"
#include "progress.hpp"
#include "values.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ckpt_tool {

struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

Command add_ls(CLI::App& parent);
Command add_show(CLI::App& parent);
Command add_verify(CLI::App& parent);
Command add_diff(CLI::App& parent);
Command add_cat(CLI::App& parent);
Command add_convert(CLI::App& parent);
Command add_clean(CLI::App& parent);
Command add_stats(CLI::App& parent);
Command add_report(CLI::App& parent);

// The full check of one file (ckpt verify, ckpt ls --verify): open it, then read every array into scratch memory,
// which checks the zip structure, every npy header, every size and every CRC-32.
struct Verdict {
    std::string path;
    std::string verdict;  // "ok", "corrupt" (CKPT_EFORMAT), "unsupported" (CKPT_EUNSUPPORTED), "unreadable"
    std::string error;    // the library's message; empty when ok
    int exit_code = kExitOk;
    int rc = CKPT_OK;  // the failed call's code
    bool opened = false;
    uint64_t arrays = 0;
    std::optional<uint64_t> bytes;  // a file's size, once opened (ckpt_reader_file_size: S3 objects' too)
};
Verdict verify_file(const std::string& path, Progress& progress, Scratch& scratch);
// How verify_arrays reaches the arrays of an open file or step.
struct ArrayReader {
    std::function<size_t(size_t)> nbytes;
    std::function<const char*(size_t)> name;
    std::function<int(size_t, void*, size_t)> read;  // a CKPT_* code
    // When set: reads bytes [offset, offset + size) (ckpt_reader_read_range), so arrays are read in pieces of
    // kPieceBytes (array_stats.hpp) whatever their size; CKPT_EUNSUPPORTED (Fortran order) falls back to `read`.
    std::function<int(size_t, uint64_t, void*, size_t)> read_range;
    std::function<size_t(size_t)> itemsize;
};
// Reads v.arrays arrays whole or in pieces in order (their CRC-32s checked either way), with progress; sets v's
// verdict: "ok" or the first failure.
void verify_arrays(Verdict& v, const ArrayReader& arrays, Progress& progress, Scratch& scratch);
// What a failed call on a file makes of its verdict (`opening`: the call that opens it); call it right after.
void set_failure(Verdict& v, int rc, bool opening = false);

// Writes JSON to stdout, one document, indented; invalid UTF-8 (from file names) is replaced, not fatal.
void print_json(const Json& j);

}  // namespace ckpt_tool
