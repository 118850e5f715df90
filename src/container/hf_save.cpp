// SPDX-License-Identifier: Apache-2.0
#include "container/hf_save.hpp"

#include "core/error.hpp"
#include "safetensors/hf_index.hpp"
#include "safetensors/safetensors_writer.hpp"

#include <random>
#include <set>

namespace ckpt::core {

namespace {

std::string random_save_id() {
    std::random_device random;
    return fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
}

// The shards an existing index names; none when there is no index or it cannot be read (nothing to clean up then).
std::vector<std::string> shards_of(Storage& storage, const std::string& index_path) {
    try {
        std::set<std::string> names;
        const std::string text = read_small_file(storage, index_path, kMaxIndexBytes, "index");
        for (const auto& entry : parse_hf_index(text).weight_map) names.insert(entry.second);
        return {names.begin(), names.end()};
    } catch (const Error&) {
        return {};
    }
}

void remove_if_there(Storage& storage, const std::string& path) {
    try {
        storage.remove(path);
    } catch (const Error&) {
        // missing, or it would not go: the new checkpoint is in place and complete either way
    }
}

// A shard written to its temporary, waiting for its rename.
struct PendingShard {
    std::string path, temp;
    std::unique_ptr<OutputFile> file;  // held until renamed: a POSIX temporary is in use while it is open
};

}  // namespace

void save_hf_sharded(Storage& storage, const std::string& path, const VarCollection& vars,
                     const ContainerWriteOptions& options) {
    const std::string dir = parent_dir(path), name = base_name(path);
    const std::string index_path = path + std::string(kIndexSuffix);
    std::vector<uint64_t> bytes(vars.size());
    uint64_t total = 0;
    for (size_t i = 0; i < vars.size(); ++i) total += bytes[i] = vars.array(i).nbytes();
    size_t count = 0;
    const std::vector<size_t> shard_of = split_into_shards(bytes, options.max_shard_bytes, &count);
    const std::vector<std::string> old_shards = shards_of(storage, index_path);
    const auto remove_old_shards = [&](const std::set<std::string>& keep) {
        for (const std::string& old : old_shards)
            if (!keep.count(old)) remove_if_there(storage, join_path(dir, old));
    };
    if (count <= 1) {
        write_atomically(storage, path,
                         [&](OutputFile& out) { write_container(out, Format::safetensors, vars, options); });
        remove_if_there(storage, index_path);  // the index first: a reader never meets it without its shards
        remove_old_shards({});
        return;
    }

    HfIndex index;
    index.save_id = random_save_id();
    index.total_size = total;
    Metadata metadata = written_metadata(vars.metadata(), options.npz.manager_keys);
    metadata.set(std::string(kSaveIdKey), *index.save_id);
    Progress progress = options.npz.progress;
    progress.start(total);
    SafetensorsWriteOptions w;
    w.manager_keys = true;  // the keys were chosen above
    w.before_write = options.npz.before_write;
    w.shared_progress = &progress;
    std::vector<PendingShard> pending;
    std::set<std::string> names;
    try {
        for (size_t k = 0; k < count; ++k) {
            VarCollection part;
            const std::string shard_name = shard_file_name(name, k + 1, count);
            for (size_t i = 0; i < vars.size(); ++i) {
                if (shard_of[i] != k) continue;
                part.add(vars.name(i), Array::view_of(vars.array(i)));
                index.weight_map.emplace_back(vars.name(i), shard_name);
            }
            part.metadata() = metadata;
            PendingShard shard{join_path(dir, shard_name), "", nullptr};
            shard.file = storage.create_temp(shard.path, &shard.temp);
            pending.push_back(std::move(shard));
            try {
                write_safetensors(*pending.back().file, part, w);
                pending.back().file->sync();
                pending.back().file->close();
            } catch (const Error& e) {
                rethrow_naming(e, pending.back().path);
            }
            names.insert(shard_name);
        }
        // Every shard is durable under its temporary name; now they take their names, and the index commits them.
        for (PendingShard& shard : pending) {
            storage.rename(shard.temp, shard.path);
            shard.file.reset();
            shard.temp.clear();
        }
        storage.sync_dir(dir);
    } catch (...) {
        for (PendingShard& shard : pending) {
            if (shard.temp.empty()) continue;
            shard.file.reset();
            remove_if_there(storage, shard.temp);
        }
        throw;
    }
    const std::string text = format_hf_index(index);
    write_atomically(storage, index_path, [&](OutputFile& out) { out.write(text.data(), text.size()); });
    remove_if_there(storage, path);  // a single file of an earlier save would be read before the index
    remove_old_shards(names);
}

}  // namespace ckpt::core
