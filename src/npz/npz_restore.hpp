// SPDX-License-Identifier: Apache-2.0
// Restoring an existing collection in place from a file, with the rules of core/restore_match.hpp (objax's
// load_var_collection).
#pragma once

#include "core/restore_match.hpp"
#include "core/var_collection.hpp"
#include "npz/npz_reader.hpp"

namespace ckpt::core {

// Checks every variable against the file before writing any data, so Error(mismatch) — whose message lists
// every missing or differing variable and every unused name on disk — leaves `vars` unchanged. Then reads each
// variable's data straight into its buffer, and replaces the collection's metadata with the file's. Throws the
// reader's errors too.
// `partial`: a variable the file does not have is left untouched instead of failing (one whose dtype or shape
// differs still fails). Afterwards vars.restored(i) tells which were filled; every flag is false after a failure.
void restore_npz(NpzReader& reader, VarCollection& vars, const Renamer& rename, bool partial = false);

}  // namespace ckpt::core
