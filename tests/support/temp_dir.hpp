// SPDX-License-Identifier: Apache-2.0
// TempDir: a fresh directory for one test, removed with everything in it. On tmpfs (/dev/shm) when there is one:
// every save fsyncs a file and a directory, which costs milliseconds apiece on a disk and nothing on tmpfs.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace ckpt::testing {

class TempDir {
public:
    TempDir() {
        namespace fs = std::filesystem;
        const bool shm = fs::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0;
        std::string pattern = (shm ? fs::path("/dev/shm") : fs::temp_directory_path()).string() + "/ckpt-test-XXXXXX";
        if (::mkdtemp(&pattern[0]) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        namespace fs = std::filesystem;
        std::error_code ec;
        // A test may have left a directory read-only; make everything removable again.
        for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            if (it->is_directory(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
        fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    const std::string& str() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    // Names of the directory's entries, sorted.
    std::vector<std::string> entries() const { return list(path_); }
    static std::vector<std::string> list(const std::string& dir) {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }

private:
    std::string path_;
};

}  // namespace ckpt::testing
