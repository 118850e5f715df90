// SPDX-License-Identifier: Apache-2.0
// Saving in Hugging Face's sharded layout (safetensors/hf_index.hpp): "model-00001-of-0000N.safetensors" … and
// "model.safetensors.index.json" beside the path asked for, or that path alone when everything fits one shard.
#pragma once

#include "container/container.hpp"

#include <string>

namespace ckpt::core {

// Saves `vars` for `path` ("DIR/model.safetensors") with at most max_shard_bytes of tensor data per shard
// (huggingface_hub's greedy split; a larger tensor has a shard of its own). One shard: `path` itself, atomically,
// as any save. More: every shard is written to a temporary and synced, then each renamed into place, then the index
// written atomically — the index is the commit. The shards and the index record one random save id
// ("ckpt.save_id"), so that a reader refuses shards of two saves (a save killed between its renames, over a layout of
// the same names) rather than mixing them. Once the new checkpoint is durable, what the old one left and the new one
// does not use goes: `path` after a sharded save, the index and its shards after a single-file one, shards of
// another count after a sharded one. Every shard's "__metadata__" holds the collection's metadata. Throws the
// errors of save_container; on failure, the temporaries are removed and the old index (if any) is untouched.
void save_hf_sharded(Storage& storage, const std::string& path, const VarCollection& vars,
                     const ContainerWriteOptions& options);

}  // namespace ckpt::core
