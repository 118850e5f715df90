// SPDX-License-Identifier: Apache-2.0
#include "manager/temporaries.hpp"

#include "core/error.hpp"
#include "sharded/sharded_step.hpp"
#include "manager/checkpoint.hpp"

namespace ckpt {

namespace {

constexpr std::string_view kNpzSuffix = ".npz";

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<StaleTemporary> find_stale_temporaries(Storage& storage, const std::string& dir, TemporaryKinds kinds) {
    std::vector<StaleTemporary> found;
    std::vector<std::string> dirs;
    try {
        dirs = storage.list_dirs(dir);
    } catch (const Error& e) {
        if (e.code() != Code::unsupported) throw;
    }
    for (const std::string& name : dirs) {
        // A sharded save's staging directory, a replaced step set aside, or a step directory without a manifest
        // (a save cut short on a storage that commits by writing the manifest last).
        const std::string path = join_path(dir, name);
        if (is_step_temp(name) || (step_dir_index(name) && !has_manifest(storage, path))) found.push_back({path, true});
    }
    for (const std::string& name : storage.list(dir)) {
        if (!is_temp_name(name)) continue;
        const std::string target = temp_target(name);
        const bool checkpoint = checkpoint_index(target).has_value();
        const bool npz_or_checkpoint = checkpoint || ends_with(target, kNpzSuffix);
        const bool wanted = kinds == TemporaryKinds::any ? is_ckpt_temp_name(name, npz_or_checkpoint) : checkpoint;
        const std::string path = join_path(dir, name);
        // A save still writing it — a plain save that holds no lock, of this process or another — keeps it.
        if (wanted && storage.temp_in_use(path) != std::optional<bool>(true)) found.push_back({path, false});
    }
    return found;
}

void remove_temporaries(Storage& storage, const std::vector<StaleTemporary>& found,
                        const std::function<void(const StaleTemporary&)>& removed,
                        const std::function<void(const StaleTemporary&, const std::string&)>& failed) {
    for (const StaleTemporary& t : found) {
        try {
            if (t.dir)
                storage.remove_tree(t.path);
            else
                storage.remove(t.path);
        } catch (const Error& e) {
            failed(t, e.what());
            continue;
        }
        removed(t);
    }
}

}  // namespace ckpt
