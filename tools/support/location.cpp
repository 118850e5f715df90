// SPDX-License-Identifier: Apache-2.0
#include "location.hpp"

namespace ckpt_tool {

bool is_url(const std::string& path) { return path.compare(0, 5, "s3://") == 0; }

std::string join_path(const std::string& dir, const std::string& name) {
    if (name.empty()) return dir;
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string last_component(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace ckpt_tool
