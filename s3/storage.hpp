// SPDX-License-Identifier: Apache-2.0
// The S3 storage: ckpt's storage callbacks (ckpt_storage_ops) over a bucket.
#pragma once

#include "config.hpp"

#include "ckpt/sys/storage.h"

namespace ckpt::s3 {

// Makes the ckpt_storage; throws RequestError (and std::bad_alloc).
ckpt_storage* new_storage(Config config);

}  // namespace ckpt::s3
