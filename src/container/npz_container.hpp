// SPDX-License-Identifier: Apache-2.0
// The npz implementation of Container: an NpzReader with its mapped views and ranged reads.
#pragma once

#include "container/container.hpp"
#include "npz/npz_range.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_views.hpp"

namespace ckpt::core {

class NpzContainer final : public Container {
public:
    NpzContainer(NpzReader reader, bool verify_views, bool writable_views)
        : reader_(std::move(reader)), views_(verify_views, writable_views) {}

    Format format() const override { return Format::npz; }
    const std::string& label() const override { return reader_.label(); }
    size_t size() const override { return reader_.size(); }
    ArrayInfo array(size_t i) const override {
        const NpzReader::Entry& e = reader_.entry(i);
        return {e.name, e.header.dtype, e.header.itemsize, e.header.shape, e.header.nbytes};
    }
    std::optional<size_t> find(std::string_view name) const override { return reader_.find(name); }
    const Metadata& metadata() const override { return reader_.metadata(); }
    uint64_t file_size() const override { return reader_.file().size(); }
    Placement placement(size_t i) const override;
    Layout layout() const override { return reader_.layout(); }

    void read_into(size_t i, void* dst) override { reader_.read_into(i, dst); }
    void read_entries(const std::vector<Job>& jobs) override;
    void read_range(size_t i, uint64_t offset, void* dst, size_t size) override {
        ranges_.read(reader_, i, offset, dst, size);
    }
    const void* view(size_t i) override { return views_.view(reader_, i); }

private:
    NpzReader reader_;
    NpzViews views_;  // destroyed (unmapped) before the reader's file
    NpzRanges ranges_;
};

}  // namespace ckpt::core
