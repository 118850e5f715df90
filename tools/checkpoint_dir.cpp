#include "checkpoint_dir.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace ckpt_tool {
namespace {

constexpr char kTempMarker[] = ".tmp-";

// Names of the entries of `dir` (empty when it cannot be read: the manager reports that).
std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return names;
    while (const dirent* e = ::readdir(d.get())) names.emplace_back(e->d_name);
    return names;
}

std::string join(const std::string& dir, const std::string& name) {
    if (name.empty()) return dir;
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

bool is_directory(const std::string& path) {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string CheckpointDir::path_of(int64_t index) const {
    std::string buf(256, '\0');
    for (;;) {
        const int rc = ckpt_manager_path(manager.get(), index, &buf[0], buf.size());
        if (rc == CKPT_OK) break;
        if (rc != CKPT_EBUFS) fail_ckpt(rc, directory);
        buf.resize(buf.size() * 4);
    }
    buf.resize(buf.find('\0'));
    return buf;
}

std::vector<std::string> CheckpointDir::temporaries() const {
    std::vector<std::string> found;
    for (const std::string& name : entries(directory)) {
        const size_t marker = name.rfind(kTempMarker);
        if (name.size() < 2 || name[0] != '.' || marker == std::string::npos || marker < 2) continue;
        if (ckpt_checkpoint_idx(name.substr(1, marker - 1).c_str()) < 0) continue;
        found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    return found;
}

CheckpointDir open_checkpoint_dir(const std::string& logdir, const std::optional<std::string>& subdir) {
    std::string chosen = subdir.value_or("ckpt");
    if (!subdir && !is_directory(join(logdir, chosen))) {
        const std::vector<std::string> names = entries(logdir);
        if (std::any_of(names.begin(), names.end(), [](const std::string& n) { return ckpt_checkpoint_idx(n.c_str()) >= 0; }))
            chosen.clear();
    }
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.flags = CKPT_MANAGER_READ_ONLY;
    opts.subdir = chosen.c_str();
    opts.keep = 0;
    CheckpointDir dir;
    dir.directory = join(logdir, chosen);
    ckpt_manager* m = nullptr;
    int rc = ckpt_manager_open(&m, logdir.c_str(), &opts);
    if (rc != CKPT_OK) fail_ckpt(rc, dir.directory);
    dir.manager.reset(m);

    size_t count = 0;
    rc = ckpt_manager_list(m, nullptr, 0, &count);
    while (rc == CKPT_EBUFS || (rc == CKPT_OK && dir.indices.size() < count)) {
        dir.indices.resize(count);  // a save may add one between the calls: ask again
        rc = ckpt_manager_list(m, dir.indices.data(), dir.indices.size(), &count);
    }
    if (rc != CKPT_OK) fail_ckpt(rc, dir.directory);
    dir.indices.resize(count);
    return dir;
}

}  // namespace ckpt_tool
