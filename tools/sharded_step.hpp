// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoint steps (directories of shards and manifest.json) in the tool: told apart from log directories,
// verified, shown, sized.
#pragma once

#include "commands.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ckpt_tool {

struct StepCloser {
    void operator()(ckpt_step* s) const { ckpt_step_close(s); }
};
using Step = std::unique_ptr<ckpt_step, StepCloser>;

// Whether `path` is a sharded step: a directory holding manifest.json; for an s3:// URL, one under which
// ckpt_step_open finds a manifest (a broken one too).
bool is_step_dir(const std::string& path);
// Bytes of the step's files (its shards and manifest); none for an s3:// URL, whose objects' sizes the C API does
// not tell.
std::optional<uint64_t> step_bytes(const std::string& path);
// The full check of a step, in bounded memory: its manifest, every variable read through it in pieces of rows
// (each shard holds what the manifest says), then every shard file read in pieces (every CRC-32 verified). The
// data is read twice.
Verdict verify_step(const std::string& path, Progress& progress, Scratch& scratch);
// `ckpt show` of a step: its shards, variables (dtype, global shape, pieces) and metadata.
int show_step(const std::string& path, bool json, bool bytes);

}  // namespace ckpt_tool
