// SPDX-License-Identifier: Apache-2.0
#include "manager/save_bases.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace ckpt::core {

bool SaveBases::plan(NpzWriteOptions& npz) {
    if (++saves_ == 1 && !why_full_.empty()) env_.log(why_full_);
    npz.chunk_hashes = clones_ && !npz.deflate;
    if (!npz.chunk_hashes) return false;
    const ShareBackoff::Plan plan = backoff_.plan(saves_);
    npz.chunk_hashes = plan.hash;
    return plan.base && !(full_every_ > 0 && saves_ % full_every_ == 0);
}

void SaveBases::saved_against(int64_t ordinal, uint64_t shared, uint64_t bytes, const std::string& what) {
    const int64_t pause = backoff_.saved(ordinal, shared, bytes);
    if (pause > 0)
        env_.log(fmt::format("{} shares less than a sixteenth of its arrays with its base: the next {} no chunk hashes",
                             what, pause == 1 ? std::string("save records") : fmt::format("{} saves record", pause)));
}

void SaveBases::listed(const Newest& newest) {
    if (!clones_ || file_listed_) return;
    file_listed_ = true;
    if (newest.file) file_ = SavedFile{*newest.file, std::nullopt, nullptr};
}

SaveBases::Opened SaveBases::open_file(int64_t index, Format format) {
    Opened base;
    try {
        if (!file_listed_) {
            file_listed_ = true;
            const std::optional<int64_t> newest = env_.list().file;
            if (newest) file_ = SavedFile{*newest, std::nullopt, nullptr};
        }
        if (!file_) return base;
        const std::string path = env_.file_path(file_->index);
        if (file_->as_saved) {
            const std::optional<FileInfo> now = env_.storage->stat(path);
            if (!now || now->size != file_->as_saved->size || now->modified_ns != file_->as_saved->modified_ns) {
                env_.log(fmt::format("Saving checkpoint {} in full: checkpoint {} changed since it was saved", index,
                                     file_->index));
                return base;
            }
        }
        if (format == Format::npz) {
            base.npz = open_chunk_base(path, fmt::format("checkpoint {}", index));
        } else if (!file_->region) {
            env_.log(
                fmt::format("Saving checkpoint {} in full: checkpoint {} was not saved by this manager (a "
                            "safetensors file records no chunk hashes)",
                            index, file_->index));
        } else {
            base.file = env_.storage->open_read(path);
            base.region = file_->region;
        }
        if (base) base.index = file_->index;
        return base;
    } catch (const Error& e) {
        env_.log(fmt::format("Saving checkpoint {} in full: {}", index, e.what()));
        return Opened{};
    }
}

void SaveBases::file_saved(int64_t index, std::shared_ptr<const RegionChunks> region) {
    file_listed_ = true;
    try {
        file_ = SavedFile{index, env_.storage->stat(env_.file_path(index)), std::move(region)};
    } catch (const Error&) {
        file_.reset();
    }
}

std::string SaveBases::shard_base(bool share, const std::function<std::string(int64_t step)>& shard_path) {
    if (share && !shard_base_ && !shard_listed_) {
        // A first save after a restart: this rank's shard of the newest step on disk, if it has one (another world
        // size names other shards: then the save is a full one, and the log says why).
        shard_listed_ = true;
        try {
            shard_base_ = env_.list().step;
        } catch (const Error&) {
            // no base: a full save
        }
    }
    return share && shard_base_ ? shard_path(*shard_base_) : std::string();
}

std::unique_ptr<ChunkBase> SaveBases::open_shard(const std::string& path, int64_t index) const {
    return path.empty() ? nullptr : open_chunk_base(path, fmt::format("this rank's shard of step {}", index));
}

std::unique_ptr<ChunkBase> SaveBases::open_chunk_base(const std::string& path, const std::string& what) const {
    std::string why_not;
    std::unique_ptr<ChunkBase> base = ChunkBase::open(*env_.storage, path, &why_not);
    if (!base) env_.log(fmt::format("Saving {} in full: {}", what, why_not));
    return base;
}

}  // namespace ckpt::core
