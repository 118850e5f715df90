// SPDX-License-Identifier: Apache-2.0
#include "container/hf_index_container.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "safetensors/hf_index.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace ckpt::core {

HfIndexContainer::HfIndexContainer(Storage& storage, const std::string& index_path, const ContainerReadOptions& options,
                                   std::unique_ptr<InputFile> index_file)
    : label_(index_path), progress_(options.npz.progress) {
    HfIndex index;
    try {
        if (!index_file) index_file = storage.open_read(index_path);
        index = parse_hf_index(read_small_file(*index_file, index_path, kMaxIndexBytes, "index"));
    } catch (const Error& e) {
        rethrow_naming(e, index_path);
    }
    // The shards, by name (model-00001-of-00003 first), each opened once, and which tensors the index puts in each.
    std::map<std::string, std::vector<size_t>> listed;  // shard name -> positions in weight_map
    for (size_t k = 0; k < index.weight_map.size(); ++k) listed[index.weight_map[k].second].push_back(k);
    ContainerReadOptions shard_options = options;
    shard_options.npz.progress = Progress{};  // reported here, over every shard
    const std::string dir = parent_dir(index_path);
    std::vector<std::string> names;
    for (const auto& [name, tensors] : listed) {
        const std::string path = join_path(dir, name);
        std::unique_ptr<InputFile> file;
        try {
            file = storage.open_read(path);
        } catch (const Error& e) {
            if (e.code() != Code::not_found) throw;
            fail(Code::not_found, "{}: the shard {} that holds tensor '{}' is missing", index_path, path,
                 printable(index.weight_map[tensors.front()].first));
        }
        std::unique_ptr<Container> shard = open_container(std::move(file), path, shard_options);
        if (shard->format() != Format::safetensors)
            fail(Code::format, "{}: the shard {} is not a safetensors file", index_path, path);
        shards_.emplace_back(static_cast<SafetensorsContainer*>(shard.release()));
        names.push_back(name);
    }
    // Every tensor once, where the index says, and every shard's tensor listed.
    for (size_t s = 0; s < shards_.size(); ++s) {
        SafetensorsContainer& shard = *shards_[s];
        const std::vector<size_t>& tensors = listed[names[s]];
        std::vector<bool> claimed(shard.size(), false);
        for (const size_t k : tensors) {
            const std::string& name = index.weight_map[k].first;
            const std::optional<size_t> t = shard.find(name);
            if (!t)
                fail(Code::format, "{}: tensor '{}' is not in the shard {}, where the index puts it", index_path,
                     printable(name), shard.label());
            claimed[*t] = true;
        }
        for (size_t t = 0; t < shard.size(); ++t) {
            if (!claimed[t])
                fail(Code::format,
                     "{}: the shard {} holds tensor '{}', which the index does not put there (a stale "
                     "index?)",
                     index_path, shard.label(), printable(shard.array(t).name));
            entries_.push_back({s, t});
        }
        // A shard of another save than the index's (an interrupted save of the same layout) is not this checkpoint.
        if (index.save_id) {
            const std::string* id = shard.metadata().find(kSaveIdKey);
            if (id == nullptr || *id != *index.save_id)
                fail(Code::format,
                     "{}: the shard {} is not of the save this index records ({} '{}', the shard's '{}'): "
                     "an interrupted save left shards of two saves",
                     index_path, shard.label(), kSaveIdKey, *index.save_id, id != nullptr ? printable(*id) : "none");
        }
    }
    shard_names_ = std::move(names);
    // The checkpoint's metadata: what its first shard records (ckpt writes the same in every shard), less the save id.
    if (!shards_.empty()) {
        const Metadata& first = shards_.front()->metadata();
        for (size_t k = 0; k < first.size(); ++k)
            if (first.key(k) != kSaveIdKey) metadata_.set(first.key(k), first.value(k));
    }
}

std::optional<size_t> HfIndexContainer::find(std::string_view name) const {
    return names_.find(entries_.size(), name, [this](size_t i) -> const std::string& { return array(i).name; });
}

uint64_t HfIndexContainer::file_size() const {
    uint64_t total = 0;
    for (const auto& shard : shards_) total += shard->file_size();
    return total;
}

void HfIndexContainer::read_into(size_t i, void* dst) {
    const size_t n = array(i).nbytes;
    progress_.start(n);
    shards_[entries_[i].shard]->read_into(entries_[i].tensor, dst);
    progress_.advance(n);
}

void HfIndexContainer::read_entries(const std::vector<Job>& jobs) {
    uint64_t total = 0;
    for (const Job& j : jobs) total += array(j.entry).nbytes;
    progress_.start(total);
    std::vector<std::vector<Job>> by_shard(shards_.size());
    std::vector<uint64_t> bytes(shards_.size(), 0);
    for (const Job& j : jobs) {
        by_shard[entries_[j.entry].shard].push_back({entries_[j.entry].tensor, j.dst});
        bytes[entries_[j.entry].shard] += array(j.entry).nbytes;
    }
    for (size_t s = 0; s < shards_.size(); ++s) {
        if (by_shard[s].empty()) continue;
        shards_[s]->read_entries(by_shard[s]);
        progress_.advance(bytes[s]);
    }
}

}  // namespace ckpt::core
