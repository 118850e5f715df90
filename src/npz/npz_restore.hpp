// SPDX-License-Identifier: Apache-2.0
// Restoring an existing collection in place from a file, with objax's load_var_collection semantics: every
// variable must be found (after renaming the names on disk) with the same dtype and shape; arrays on disk that
// no variable asks for are ignored. Raw bytes whose type was never recorded (a void member) fill a variable of any
// dtype with the same item size.
#pragma once

#include "npz/npz_reader.hpp"
#include "core/var_collection.hpp"

#include <functional>
#include <string>

namespace ckpt {

// Maps a name on disk to the name it is matched under; may throw Error to abort the restore.
using Renamer = std::function<std::string(const std::string& name_on_disk)>;

// Checks every variable against the file before writing any data, so Error(mismatch) — whose message lists
// every missing or differing variable and every unused name on disk — leaves `vars` unchanged. Then reads each
// variable's data straight into its buffer, and replaces the collection's metadata with the file's. Throws the
// reader's errors too.
// `partial`: a variable the file does not have is left untouched instead of failing (one whose dtype or shape
// differs still fails). Afterwards vars.restored(i) tells which were filled; every flag is false after a failure.
void restore_npz(NpzReader& reader, VarCollection& vars, const Renamer& rename, bool partial = false);

}  // namespace ckpt
