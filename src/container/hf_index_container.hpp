// SPDX-License-Identifier: Apache-2.0
// Hugging Face's sharded layout read as one checkpoint: "model.safetensors.index.json" and the shards it names
// (safetensors/hf_index.hpp). Opening reads the index and every shard's header, and checks that they describe one
// checkpoint: each tensor once, in the shard its entry names; no shard holding a tensor the index does not list; no
// shard missing; for ckpt's saves, every shard of the save the index records. Tensors come in the shards' order
// (their names sorted), each shard's in its header's order.
#pragma once

#include "container/container.hpp"
#include "container/safetensors_container.hpp"

#include <memory>
#include <string>
#include <vector>

namespace ckpt::core {

class HfIndexContainer final : public Container {
public:
    // Opens the index at `index_path` in `storage` (unless `index` is that file, open already), and the shards beside
    // it. Throws Error(format) naming the index (or the shard) and the problem, Error(not_found) for the index or a
    // shard that is missing, and each shard's errors.
    HfIndexContainer(Storage& storage, const std::string& index_path, const ContainerReadOptions& options,
                     std::unique_ptr<InputFile> index = nullptr);

    Format format() const override { return Format::safetensors; }
    const std::string& label() const override { return label_; }
    size_t size() const override { return entries_.size(); }
    ArrayInfo array(size_t i) const override { return shards_[entries_[i].shard]->array(entries_[i].tensor); }
    std::optional<size_t> find(std::string_view name) const override;
    const Metadata& metadata() const override { return metadata_; }
    uint64_t file_size() const override;
    // As the shard's, but the member is the shard's file name: the data offset is in that file.
    Placement placement(size_t i) const override {
        Placement p = shards_[entries_[i].shard]->placement(entries_[i].tensor);
        p.member = shard_names_[entries_[i].shard];
        return p;
    }

    void read_into(size_t i, void* dst) override;
    void read_entries(const std::vector<Job>& jobs) override;
    void read_range(size_t i, uint64_t offset, void* dst, size_t size) override {
        shards_[entries_[i].shard]->read_range(entries_[i].tensor, offset, dst, size);
    }
    const void* view(size_t i) override { return shards_[entries_[i].shard]->view(entries_[i].tensor); }

private:
    struct Entry {
        size_t shard;
        size_t tensor;  // in the shard
    };
    std::string label_;
    std::vector<std::unique_ptr<SafetensorsContainer>> shards_;  // by name
    std::vector<std::string> shard_names_;                       // their file names, as the index gives them
    std::vector<Entry> entries_;
    NameLookup names_;  // for find()
    Metadata metadata_;
    Progress progress_;
};

}  // namespace ckpt::core
