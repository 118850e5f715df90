// SPDX-License-Identifier: Apache-2.0
// Paths that name their storage: "s3://bucket/key" given with no storage is read and written through libckpt_s3,
// loaded when first needed (libckpt never links it), beside libckpt or from the library path.
#pragma once

#include "ckpt/ckpt.h"
#include "storage/storage.hpp"

#include <memory>
#include <string>

namespace ckpt::capi {

struct Located {
    std::shared_ptr<ckpt::core::Storage> storage;
    std::string path;        // in that storage
    std::string url_prefix;  // what names the storage in the given path ("s3://bucket/"), "" for none: paths in
                             // the storage are given back to the caller behind it
};

// The storage and path a C call's (storage, path) pair means: the caller's storage, else the one an s3:// URL
// names, else the local filesystem. Throws Error(unsupported) for an s3:// URL when libckpt_s3 cannot be loaded.
Located locate(const ckpt_storage* storage, const char* path);

}  // namespace ckpt::capi
