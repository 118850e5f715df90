// SPDX-License-Identifier: Apache-2.0
#include "npz/chunk_base.hpp"

#include "core/error.hpp"
#include "npz/zip_format.hpp"

namespace ckpt::core {

std::unique_ptr<ChunkBase> ChunkBase::open(Storage& storage, const std::string& path, std::string* why_not) {
    try {
        std::unique_ptr<ChunkBase> base(new ChunkBase(NpzReader::open(storage, path, {})));
        NpzReader& reader = base->reader_;
        std::optional<ChunkTable> table = reader.chunk_table();
        if (!table) {
            *why_not = path + ": it holds no chunk table";
            return nullptr;
        }
        base->table_ = std::move(*table);
        std::unordered_map<std::string_view, size_t> entries;
        for (size_t i = 0; i < reader.size(); ++i) entries.emplace(reader.entry(i).member, i);
        for (const ChunkTable::Member& m : base->table_.members) {
            const auto it = entries.find(m.name);
            if (it == entries.end())
                fail(Code::format, "the chunk table describes '{}', which it does not hold", m.name);
            const NpzReader::Entry& e = reader.entry(it->second);
            const ZipReader::Member& z = reader.member(it->second);
            if (z.method != zip::kMethodStore || z.crc != m.crc || e.header.nbytes != m.data_bytes ||
                e.header.fortran_order || e.header.byteswap)
                fail(Code::format, "the chunk table does not describe member '{}' as the file holds it", m.name);
            reader.zip().check_local(e.index);  // the data is where the central directory says
            const uint64_t offset = z.data_offset + e.header.data_offset;
            if (offset % kBlockAlignment != 0)
                fail(Code::format, "member '{}': its array does not begin on a {}-byte boundary", m.name,
                     kBlockAlignment);
            base->arrays_[m.name] = Array{offset, e.header, &m};
        }
        return base;
    } catch (const Error& e) {
        const std::string what = e.what();
        *why_not = what.compare(0, path.size(), path) == 0 ? what : path + ": " + what;
        return nullptr;
    }
}

const ChunkBase::Array* ChunkBase::find(const std::string& member) const {
    const auto it = arrays_.find(member);
    return it == arrays_.end() ? nullptr : &it->second;
}

}  // namespace ckpt::core
