// SPDX-License-Identifier: Apache-2.0
#include "incremental/chunk_stream.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ckpt::core {

namespace {
// A run of chunks to write goes to the output in steps of at most this.
constexpr size_t kWriteRunBytes = size_t{64} << 20;
}  // namespace

ChunkStream::ChunkStream(OutputFile& out, uint64_t offset, uint32_t chunk_bytes, RegionBase base)
    : out_(out),
      base_(base),
      partial_(new char[chunk_bytes]),
      runs_([this](const char* data, uint64_t from,
                   uint64_t n) { shared_ += out_.clone_from(*base_.file, from, n, data); },
            [this](const char* data, size_t n) { out_.write(data, n); }, kWriteRunBytes) {
    if (chunk_bytes == 0 || chunk_bytes % kChunkRegionAlignment != 0 || offset % kChunkRegionAlignment != 0)
        throw std::logic_error("ChunkStream: the region and its chunks must start on 4096-byte boundaries");
    chunks_.offset = offset;
    chunks_.chunk_bytes = chunk_bytes;
    // A base whose region lies elsewhere, or is cut otherwise, has no chunk at this one's places.
    if (base_.file == nullptr || base_.chunks == nullptr || base_.chunks->offset != offset ||
        base_.chunks->chunk_bytes != chunk_bytes)
        base_ = RegionBase{};
}

ChunkStream::~ChunkStream() = default;

void ChunkStream::put(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    const size_t whole = chunks_.chunk_bytes;
    chunks_.length += n;
    if (partial_n_ > 0) {
        const size_t take = std::min(n, whole - partial_n_);
        std::memcpy(partial_.get() + partial_n_, p, take);
        partial_n_ += take;
        p += take;
        n -= take;
        if (partial_n_ < whole) return;
        chunk(partial_.get(), whole);
        partial_n_ = 0;
    }
    for (; n >= whole; p += whole, n -= whole) chunk(p, whole);
    runs_.flush();  // nothing pending may point into the caller's bytes, nor into partial_, which the rest overwrites
    if (n > 0) {
        std::memcpy(partial_.get(), p, n);
        partial_n_ = n;
    }
}

RegionChunks ChunkStream::finish() {
    if (partial_n_ > 0) chunk(partial_.get(), partial_n_);
    partial_n_ = 0;
    runs_.flush();
    return std::move(chunks_);
}

void ChunkStream::chunk(const char* data, size_t n) {
    const size_t k = chunks_.hashes.size();
    const uint64_t at = chunks_.offset + uint64_t{k} * chunks_.chunk_bytes;  // in this file and in the base
    const Hash128 hash = hash128(data, n);
    chunks_.hashes.push_back(hash);
    const RegionChunks* base = base_.chunks;
    // Only whole chunks that are whole in the base too: a clone takes whole blocks, from inside the base's file.
    const bool same = base != nullptr && n == chunks_.chunk_bytes && k < base->hashes.size() &&
                      uint64_t{k + 1} * chunks_.chunk_bytes <= base->length && base->hashes[k] == hash &&
                      out_.may_share();
    if (same)
        runs_.shared(data, n, at);
    else
        runs_.written(data, n);
}

}  // namespace ckpt::core
