// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoint steps (directories of shards and manifest.json) in the tool: told apart from log directories,
// verified, shown, sized.
#pragma once

#include "checkpoint_dir.hpp"
#include "commands.hpp"

#include <string>

namespace ckpt_tool {

// The full check of a step, in bounded memory: its manifest, every variable read through it in pieces of rows
// (each shard holds what the manifest says), then every shard file read in pieces (every CRC-32 verified). The
// data is read twice.
Verdict verify_step(const std::string& path, Progress& progress, Scratch& scratch);
// `ckpt show` of a step: its shards, variables (dtype, global shape, pieces) and metadata.
int show_step(const std::string& path, bool json, bool bytes);

}  // namespace ckpt_tool
