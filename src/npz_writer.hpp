// Writing .npz files that numpy.load reads: one stored or deflated zip member per array, each member the exact
// bytes np.save writes, timestamps fixed at 1980-01-01 so output is deterministic, zip64 where sizes need it.
#pragma once

#include "npz.hpp"
#include "var_collection.hpp"

#include <string>

namespace ckpt {

struct NpzWriteOptions {
    Layout layout = Layout::plain;  // automatic means plain
    bool deflate = false;
    int level = 0;  // 1..9; 0 = zlib's default
    Progress progress;
};

// Writes `vars` to `path` atomically and durably (see AtomicFile). Throws Error: invalid (bad options),
// not_found (no such directory), io, no_memory.
void save_npz(const std::string& path, const VarCollection& vars, NpzWriteOptions options);

}  // namespace ckpt
