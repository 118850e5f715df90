// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_restore.hpp"

#include "core/restore_match.hpp"

#include <vector>

namespace ckpt::core {

void restore_npz(NpzReader& reader, VarCollection& vars, const Renamer& rename, bool partial) {
    vars.check_restorable(reader.label());
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, false);
    const auto stored = [&](size_t i) {
        const NpzReader::Entry& e = reader.entry(i);
        return StoredArray{e.name, e.header.dtype, e.header.itemsize, e.header.shape};
    };
    const std::vector<std::optional<size_t>> source =
        match_stored(vars, reader.size(), stored, RestoreMatch{reader.label(), "file", rename, partial});

    std::vector<NpzReader::Job> jobs;
    jobs.reserve(vars.size());
    for (size_t v = 0; v < vars.size(); ++v)
        if (source[v]) jobs.push_back({*source[v], vars.array(v).data()});
    // Copied before the arrays are read, then moved in: running out of memory leaves the metadata as it was
    // (a copy assignment could stop halfway through the keys).
    Metadata metadata = reader.metadata();
    reader.read_entries(jobs);
    vars.metadata() = std::move(metadata);
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, source[v].has_value());
}

}  // namespace ckpt::core
