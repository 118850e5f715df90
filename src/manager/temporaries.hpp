// SPDX-License-Identifier: Apache-2.0
// The temporaries interrupted saves leave in a checkpoint directory, and their removal.
#pragma once

#include "storage/storage.hpp"

#include <functional>
#include <string>
#include <vector>

namespace ckpt::core {

// A temporary an interrupted save left: its path (the directory joined with its name) and whether it is a directory.
struct StaleTemporary {
    std::string path;
    bool dir = false;
    bool upload = false;  // an unfinished write of the file at `path` (storage.hpp's list_incomplete), not a file
};

// "file", "directory" or "unfinished upload", for messages.
const char* kind_of(const StaleTemporary& t);

enum class TemporaryKinds {
    checkpoints,  // those of checkpoints: ".<checkpoint file>.tmp-XXXXXX", sharded saves' staging and set-aside
                  // directories, step directories without a manifest, and unfinished writes of checkpoint files
                  // and of the files in step directories
    any,          // those, the temporary of any other ckpt save (".<name>.npz.tmp-XXXXXX" of an .npz file, and
                  // ".<name>.tmp-XXXXXX" of any other file where its name is signed: is_ckpt_temp_name), and every
                  // unfinished write under the directory
};

// The stale temporaries of `dir`, directories first. Only names ckpt makes: never a file that is not ckpt's. A file
// that a save is still writing (Storage::temp_in_use) is not stale. A storage that cannot list directories has only
// files to report. `listed`: dir's listing, when the caller has it (else it is listed here). A storage that cannot
// list unfinished writes (an S3 server without ListMultipartUploads answers 501) has none to report: `unlisted`, when
// given, then receives why, for the caller to say once.
std::vector<StaleTemporary> find_stale_temporaries(Storage& storage, const std::string& dir, TemporaryKinds kinds,
                                                   const Storage::Entries* listed = nullptr,
                                                   std::string* unlisted = nullptr);

// Removes each of `found`, calling `removed` after each removal and `failed` with the error's message for one that
// could not be removed (the others are still tried).
void remove_temporaries(Storage& storage, const std::vector<StaleTemporary>& found,
                        const std::function<void(const StaleTemporary&)>& removed,
                        const std::function<void(const StaleTemporary&, const std::string&)>& failed);

}  // namespace ckpt::core
