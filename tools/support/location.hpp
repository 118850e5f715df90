// SPDX-License-Identifier: Apache-2.0
// The paths the tool is given: local paths, or s3:// URLs. libckpt resolves an s3:// URL itself (it loads
// libckpt_s3) when the URL reaches the C API with no storage, so the tool passes URLs through unchanged and never
// asks the file system about them: what it knows of an object comes from the C API.
#pragma once

#include <string>

namespace ckpt_tool {

// Whether `path` is an s3:// URL rather than a local path.
bool is_url(const std::string& path);
// `dir` and `name` joined by one '/' (as the checkpoint manager joins them); `name` alone when `dir` is empty,
// `dir` alone when `name` is.
std::string join_path(const std::string& dir, const std::string& name);
// The last component of a '/'-separated path: "runs/ckpt/0000000001.npz" -> "0000000001.npz".
std::string last_component(const std::string& path);

}  // namespace ckpt_tool
