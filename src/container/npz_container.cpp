// SPDX-License-Identifier: Apache-2.0
#include "container/npz_container.hpp"

#include "npz/zip_format.hpp"

namespace ckpt::core {

Placement NpzContainer::placement(size_t i) const {
    const NpzReader::Entry& e = reader_.entry(i);
    const ZipReader::Member& m = reader_.member(i);
    Placement p;
    p.member = e.member;
    p.deflated = m.method == zip::kMethodDeflate;
    p.stored_bytes = m.compressed;
    p.crc32 = m.crc;
    p.data_offset = m.method == zip::kMethodStore ? m.data_offset + e.header.data_offset : 0;
    constexpr bool kLittleHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    p.byte_order = swap_unit(e.header.dtype) <= 1 ? '|' : e.header.foreign_order == kLittleHost ? '>' : '<';
    p.fortran_order = e.header.fortran_order;
    return p;
}

void NpzContainer::read_entries(const std::vector<Job>& jobs) {
    std::vector<NpzReader::Job> npz;
    npz.reserve(jobs.size());
    for (const Job& j : jobs) npz.push_back({j.entry, j.dst});
    reader_.read_entries(npz);
}

}  // namespace ckpt::core
