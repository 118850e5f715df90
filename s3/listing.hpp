// SPDX-License-Identifier: Apache-2.0
// What S3 lists: the objects and common prefixes under a directory (ListObjectsV2 with a delimiter), and the
// incomplete multipart uploads under a prefix (ListMultipartUploads), page by page.
#pragma once

#include "http.hpp"

#include <string>
#include <vector>

namespace ckpt::s3 {

// Lists "<dir>/": the names of its objects (files) and of its common prefixes (directories); either may be null.
void list(Client& client, const char* dir, std::vector<std::string>* files, std::vector<std::string>* dirs);

// Whether any object's key starts with `prefix` (one request: a directory's test on a store of keys).
bool any_key_under(Client& client, const std::string& prefix);

struct IncompleteUpload {
    std::string key;
    std::string upload_id;
};

// The incomplete multipart uploads of the keys that start with `prefix`, in key order.
std::vector<IncompleteUpload> incomplete_uploads(Client& client, const std::string& prefix);

}  // namespace ckpt::s3
