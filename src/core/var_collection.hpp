// SPDX-License-Identifier: Apache-2.0
// VarCollection: named arrays in insertion order (the save order), names unique, and the collection's metadata.
#pragma once

#include "core/array.hpp"
#include "core/metadata.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ckpt::core {

// A variable that is rows [begin, begin + shape[0]) of a global array of global_rows rows along dimension 0 (the
// FSDP/ZeRO case): saved as its own piece by a sharded checkpoint, and restored from whichever pieces overlap it.
struct RowSplit {
    int64_t begin = 0;
    int64_t global_rows = 0;
};

class VarCollection {
public:
    // Appends; throws Error(invalid) for an empty name, one holding NUL or invalid UTF-8, or the name of the
    // metadata member; Error(exists) for a taken name.
    void add(std::string name, Array array);
    size_t size() const { return entries_.size(); }
    const std::string& name(size_t i) const { return entries_[i].name; }
    const Array& array(size_t i) const { return entries_[i].array; }
    // Whether the latest restore into this collection filled variable i (false before any, and for every
    // variable after a failed one). Set by restore_npz.
    bool restored(size_t i) const { return entries_[i].restored; }
    void set_restored(size_t i, bool filled) { entries_[i].restored = filled; }
    std::optional<size_t> find(std::string_view name) const;
    // Marks variable i as a row split (nullopt: a whole variable again). Throws Error(invalid) for a 0-d array or
    // rows outside [0, global_rows).
    void set_rows(size_t i, std::optional<RowSplit> rows);
    const std::optional<RowSplit>& rows(size_t i) const { return entries_[i].rows; }
    // Throws CallerError(invalid) naming `what` and the first variable that is a source (Array::from_source):
    // restores need arrays to write into.
    void check_restorable(const std::string& what) const;
    // The user's key/values, saved with the arrays and read back with them.
    Metadata& metadata() { return metadata_; }
    const Metadata& metadata() const { return metadata_; }

private:
    struct Entry {
        std::string name;
        Array array;
        bool restored = false;
        std::optional<RowSplit> rows;
    };
    std::vector<Entry> entries_;
    std::unordered_map<std::string, size_t> index_;
    Metadata metadata_;
};

}  // namespace ckpt::core
