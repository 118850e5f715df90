// SPDX-License-Identifier: Apache-2.0
// Which stored array each variable of a collection is restored from, with objax's load_var_collection rules: every
// variable must be found (after renaming the names on disk) with the same dtype and shape; stored arrays no
// variable asks for are ignored. Raw bytes whose type was never recorded (a void array) fill a variable of any dtype
// with the same item size. One matcher for a file (restore_npz) and for a sharded step (ShardedStep::restore), so
// both keep the same rules and say the same things.
#pragma once

#include "core/var_collection.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::core {

// Maps a name on disk to the name it is matched under; may throw Error to abort the restore.
using Renamer = std::function<std::string(const std::string& name_on_disk)>;

// One stored array as a restore sees it.
struct StoredArray {
    const std::string& name;  // on disk, before renaming
    DType dtype;
    size_t itemsize;
    const std::vector<int64_t>& shape;
};

struct RestoreMatch {
    const std::string& label;  // the file or step, for messages
    std::string_view where;    // "file" or "step": "missing from the file", "in the step"
    const Renamer& rename;     // empty: names are kept
    bool partial = false;      // a variable nothing stores is left alone (nullopt) instead of failing
    bool global_rows = false;  // a row-split variable (VarCollection::rows) is compared by its global shape
};

// For each variable of `vars`, the index of the stored array it is restored from (nullopt: not stored; only with
// `partial`). Throws CallerError(invalid) when the renamer maps two stored names to one, and Error(mismatch) whose
// message names the label, every missing variable, every one whose dtype or shape differ, and every stored name no
// variable took. Reads nothing and changes nothing.
std::vector<std::optional<size_t>> match_stored(const VarCollection& vars, size_t count,
                                                const std::function<StoredArray(size_t)>& stored,
                                                const RestoreMatch& how);

}  // namespace ckpt::core
