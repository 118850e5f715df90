// SPDX-License-Identifier: Apache-2.0
// The safetensors implementation of Container: a SafetensorsReader with a name index, mapped views and ranged reads.
#pragma once

#include "container/container.hpp"
#include "core/name_lookup.hpp"
#include "core/progress.hpp"
#include "safetensors/safetensors_reader.hpp"

#include <map>
#include <memory>
#include <vector>

namespace ckpt::core {

class SafetensorsContainer final : public Container {
public:
    SafetensorsContainer(SafetensorsReader reader, bool writable_views, Progress progress);

    Format format() const override { return Format::safetensors; }
    const std::string& label() const override { return reader_.label(); }
    size_t size() const override { return reader_.size(); }
    ArrayInfo array(size_t i) const override {
        const SafetensorsTensor& t = reader_.tensor(i);
        return {t.name, t.dtype, numeric_size(t.dtype), t.shape, reader_.nbytes(i)};
    }
    std::optional<size_t> find(std::string_view name) const override;
    const Metadata& metadata() const override { return reader_.metadata(); }
    uint64_t file_size() const override { return reader_.file().size(); }
    Placement placement(size_t i) const override;

    void read_into(size_t i, void* dst) override;
    void read_entries(const std::vector<Job>& jobs) override;
    void read_range(size_t i, uint64_t offset, void* dst, size_t size) override;
    const void* view(size_t i) override;

    // Whether entry i can be a view into the file's mapping: native (little-endian) byte order, and its data aligned
    // for its type in the file (a file of another writer may not align it).
    bool mappable(size_t i) const;

private:
    SafetensorsReader reader_;
    bool writable_views_;
    Progress progress_;
    NameLookup names_;  // for find()
    bool map_tried_ = false;
    std::unique_ptr<MappedFile> mapping_;
    std::vector<const void*> views_;   // by entry; nullptr until made
    std::map<size_t, Array> decoded_;  // by entry: views that are copies
};

}  // namespace ckpt::core
