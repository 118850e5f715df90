// SPDX-License-Identifier: Apache-2.0
// Views of an open file's arrays without a copy (ckpt_reader_map). A member that lies in the file exactly as it is
// used — stored, native byte order, C order, aligned for its dtype, as every member ckpt writes — is a pointer
// into one private mapping of the whole file (read-only, or copy-on-write), made at the first view; any other
// member (deflated, byte-swapped, Fortran order, unaligned, or a storage that cannot map) is decoded once into
// memory the views own.
#pragma once

#include "core/array.hpp"
#include "npz/npz_reader.hpp"
#include "storage/storage.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

namespace ckpt::core {

class NpzViews {
public:
    // verify: check each member's CRC-32 at its first view (reading every page of it once, on several threads for
    // a large one). Without it a mapped view reads only the member's local header, where opening left it unchecked
    // (a small read, not through the mapping), until its pages are touched; decoded members are always verified,
    // as they are read anyway.
    // writable: the mapping is copy-on-write, so a caller may write into mapped views (the file never changes).
    NpzViews(bool verify, bool writable) : verify_(verify), writable_(writable) {}

    // Entry i of `reader` (which must be the same reader at every call): its nbytes bytes in native byte order and
    // C order, valid as long as this object; the same pointer at every call. An empty array gives a pointer that is
    // not NULL and must not be read. Throws Error(format) — a CRC-32 mismatch naming file and member — for corrupt
    // data, and what NpzReader::read_into and InputFile::map throw; a failed view may be asked for again.
    const void* view(NpzReader& reader, size_t i);

    // Whether entry i can be a view into the file's mapping (not whether it is one yet).
    static bool mappable(const NpzReader& reader, size_t i);

private:
    const void* map(NpzReader& reader, size_t i);

    bool verify_;
    bool writable_;
    bool map_tried_ = false;
    std::unique_ptr<MappedFile> mapping_;
    std::vector<const void*> views_;   // by entry; nullptr until made
    std::map<size_t, Array> decoded_;  // by entry
};

}  // namespace ckpt::core
