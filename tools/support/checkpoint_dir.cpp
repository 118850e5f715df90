// SPDX-License-Identifier: Apache-2.0
#include "checkpoint_dir.hpp"

#include "location.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace ckpt_tool {
namespace {

constexpr char kTempMarker[] = ".tmp-";

// Whether `name` is longer than `suffix` and ends with it.
bool ends_with(std::string_view name, std::string_view suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Names of the entries of `dir` (empty when it cannot be read: the manager reports that).
std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return names;
    while (const dirent* e = ::readdir(d.get())) names.emplace_back(e->d_name);
    return names;
}

// Opens the manager of logdir/subdir read-only and lists its checkpoints; throws on failure.
CheckpointDir open_listed(const std::string& logdir, const std::string& subdir) {
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    opts.flags = CKPT_MANAGER_READ_ONLY;
    opts.subdir = subdir.c_str();
    opts.keep = 0;
    CheckpointDir dir;
    dir.directory = join_path(logdir, subdir);
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

// An s3:// LOGDIR: LOGDIR/ckpt when it holds checkpoints, else LOGDIR itself when it does (or the subdir asked
// for); no checkpoints is "not found", as nothing tells an empty prefix from a missing one.
CheckpointDir open_url_dir(const std::string& logdir, const std::optional<std::string>& subdir) {
    CheckpointDir dir = open_listed(logdir, subdir.value_or("ckpt"));
    if (!dir.indices.empty()) return dir;
    const std::string why = "(on S3 a directory is only the prefix of the keys under it)";
    if (subdir) throw Failure(kExitIo, dir.directory + ": not found: no checkpoints under it " + why);
    CheckpointDir root = open_listed(logdir, "");
    if (!root.indices.empty()) return root;
    throw Failure(kExitIo, logdir + ": not found: no checkpoints under " + dir.directory + " nor under " + logdir +
                               " itself " + why);
}

// Whether a manager finds checkpoints in logdir/ckpt or logdir: failures of the probe say no.
bool holds_checkpoints(const std::string& logdir) {
    try {
        return !open_url_dir(logdir, std::nullopt).indices.empty();
    } catch (const Failure&) {
        return false;
    }
}

}  // namespace

bool is_local_directory(const std::string& path) {
    struct stat st {};
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
    return buf;  // a URL for a URL directory: the C API takes it again as it is
}

bool CheckpointDir::is_step(const std::string& path) { return ckpt_checkpoint_idx(last_component(path).c_str()) < 0; }

std::vector<std::string> CheckpointDir::temporaries() const {
    return is_url(directory) ? std::vector<std::string>{} : temporaries_in(directory, true);
}

std::vector<std::string> temporaries_in(const std::string& dir, bool numbered) {
    std::vector<std::string> found;
    for (const std::string& name : entries(dir)) {
        const size_t marker = name.rfind(kTempMarker);
        if (name.size() < 2 || name[0] != '.' || marker == std::string::npos || marker < 2) continue;
        const std::string file = name.substr(1, marker - 1);
        if (numbered ? ckpt_checkpoint_idx(file.c_str()) < 0
                     : !(ends_with(file, ".npz") || ends_with(file, ".safetensors") || ends_with(file, ".index.json")))
            continue;
        found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    return found;
}

std::vector<std::string> directory_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (std::string& n : entries(dir))
        if (n != "." && n != "..") names.push_back(std::move(n));
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<NamedCheckpoint> named_checkpoints(const std::string& dir) {
    std::vector<NamedCheckpoint> found;
    for (const std::string& name : directory_entries(dir)) {
        const std::string path = join_path(dir, name);
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) continue;
        const bool file = (ends_with(name, ".npz") || ends_with(name, ".safetensors")) && S_ISREG(st.st_mode);
        const bool step = !file && S_ISDIR(st.st_mode) && is_step_dir(path);
        if (file || step) found.push_back({name, path, step});
    }
    return found;
}

std::optional<int64_t> checkpoint_index(const std::string& name) {
    int64_t index = ckpt_checkpoint_idx(name.c_str());
    if (index < 0) index = ckpt_checkpoint_idx((name + ".npz").c_str());
    if (index < 0) return std::nullopt;
    return index;
}

namespace {

bool holds_checkpoints_itself(const std::string& logdir) {
    const std::vector<std::string> names = entries(logdir);
    return std::any_of(names.begin(), names.end(),
                       [](const std::string& n) { return checkpoint_index(n).has_value(); });
}

}  // namespace

bool is_manager_dir(const std::string& logdir) {
    return is_local_directory(join_path(logdir, "ckpt")) || holds_checkpoints_itself(logdir);
}

CheckpointDir open_checkpoint_dir(const std::string& logdir, const std::optional<std::string>& subdir) {
    if (is_url(logdir)) return open_url_dir(logdir, subdir);
    // Named as the user typed it, not as the LOGDIR/ckpt looked into.
    if (!is_local_directory(logdir)) throw Failure(kExitIo, logdir + ": not found: no such directory", CKPT_ENOTFOUND);
    std::string chosen = subdir.value_or("ckpt");
    if (!subdir && !is_local_directory(join_path(logdir, chosen)) && holds_checkpoints_itself(logdir)) chosen.clear();
    return open_listed(logdir, chosen);
}

PathKind path_kind(const std::string& path, bool not_a_file) {
    if (!is_url(path)) {
        if (!is_local_directory(path)) return PathKind::file;
        return is_step_dir(path) ? PathKind::step : PathKind::directory;
    }
    const bool prefix_only = path.back() == '/' || path.find('/', 5) == std::string::npos;
    if (!prefix_only && !not_a_file) {
        ckpt_reader* npz = nullptr;
        const int rc = ckpt_reader_open(&npz, path.c_str(), nullptr);
        ckpt_reader_close(npz);
        if (rc != CKPT_ENOTFOUND) return PathKind::file;
    }
    if (is_step_dir(path)) return PathKind::step;
    if (prefix_only || holds_checkpoints(path)) return PathKind::directory;
    return PathKind::file;
}

bool is_step_dir(const std::string& path) {
    if (is_url(path)) {
        ckpt_step* raw = nullptr;
        const int rc = ckpt_step_open(&raw, path.c_str(), nullptr);
        const Step step(raw);
        // A manifest was found (a broken one or a newer version's too); not found or unreachable, there is none.
        return rc == CKPT_OK || rc == CKPT_EFORMAT ||
               (rc == CKPT_EUNSUPPORTED && !needs_s3_library(ckpt_error_message()));
    }
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::stat((path + "/manifest.json").c_str(), &st) == 0;
}

std::optional<uint64_t> step_bytes(const std::string& path) {
    if (is_url(path)) return std::nullopt;
    ckpt_step* raw = nullptr;
    uint64_t total = 0;
    struct stat st {};
    if (::stat((path + "/manifest.json").c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_size);
    if (ckpt_step_open(&raw, path.c_str(), nullptr) != CKPT_OK) return total;
    const Step step(raw);
    for (int32_t r = 0; r < ckpt_step_world_size(raw); ++r)
        if (::stat((path + "/" + ckpt_step_shard(raw, r)).c_str(), &st) == 0)
            total += static_cast<uint64_t>(st.st_size);
    return total;
}

namespace {
constexpr char kManagerPrefix[] = "ckpt.";
constexpr char kMetricPrefix[] = "ckpt.metric.";
}  // namespace

std::optional<std::string> metric_name(const std::string& key) {
    if (key.rfind(kMetricPrefix, 0) != 0) return std::nullopt;
    return key.substr(sizeof kMetricPrefix - 1);
}

bool manager_key(const std::string& key) { return key.rfind(kManagerPrefix, 0) == 0 && !metric_name(key); }

std::optional<uint64_t> shared_bytes_of(const std::string& file) {
    uint64_t shared = 0;
    if (ckpt_storage_shared_bytes(nullptr, file.c_str(), &shared) != CKPT_OK) return std::nullopt;
    return shared;
}

}  // namespace ckpt_tool
