// SPDX-License-Identifier: Apache-2.0
#include "manager/temporaries.hpp"

#include "core/error.hpp"
#include "sharded/sharded_step.hpp"
#include "manager/checkpoint.hpp"

namespace ckpt::core {

namespace {

constexpr std::string_view kNpzSuffix = ".npz";

}  // namespace

const char* kind_of(const StaleTemporary& t) { return t.upload ? "unfinished upload of" : t.dir ? "directory" : "file"; }

namespace {

// The unfinished writes under dir; none where the storage cannot list them (unlisted says why).
std::vector<std::string> incomplete_writes(Storage& storage, const std::string& dir, std::string* unlisted) {
    try {
        return storage.list_incomplete(dir);
    } catch (const Error& e) {
        if (e.code() != Code::unsupported) throw;
        if (unlisted != nullptr) *unlisted = e.what();
        return {};
    }
}

}  // namespace

std::vector<StaleTemporary> find_stale_temporaries(Storage& storage, const std::string& dir, TemporaryKinds kinds,
                                                   const Storage::Entries* listed, std::string* unlisted) {
    std::vector<StaleTemporary> found;
    const Storage::Entries entries = listed != nullptr ? *listed : storage.list_entries(dir);
    for (const std::string& name : entries.dirs) {
        // A sharded save's staging directory, a replaced step set aside, or a step directory without a manifest
        // (a save cut short on a storage that commits by writing the manifest last).
        const std::string path = join_path(dir, name);
        if (is_step_temp(name) || (step_dir_index(name) && !has_manifest(storage, path))) found.push_back({path, true});
    }
    for (const std::string& name : entries.files) {
        if (!is_temp_name(name)) continue;
        const std::string target = temp_target(name);
        const bool checkpoint = checkpoint_index(target).has_value();
        const bool npz_or_checkpoint = checkpoint || ends_with(target, kNpzSuffix);
        const bool wanted = kinds == TemporaryKinds::any ? is_ckpt_temp_name(name, npz_or_checkpoint) : checkpoint;
        const std::string path = join_path(dir, name);
        // A save still writing it — a plain save that holds no lock, of this process or another — keeps it.
        if (wanted && storage.temp_in_use(path) != std::optional<bool>(true)) found.push_back({path, false});
    }
    for (const std::string& name : incomplete_writes(storage, dir, unlisted)) {
        const size_t slash = name.find('/');
        const bool wanted = kinds == TemporaryKinds::any ||
                            (slash == std::string::npos ? checkpoint_index(name).has_value()
                                                        : step_dir_index(name.substr(0, slash)).has_value());
        if (wanted) found.push_back({join_path(dir, name), false, true});
    }
    return found;
}

void remove_temporaries(Storage& storage, const std::vector<StaleTemporary>& found,
                        const std::function<void(const StaleTemporary&)>& removed,
                        const std::function<void(const StaleTemporary&, const std::string&)>& failed) {
    for (const StaleTemporary& t : found) {
        try {
            if (t.upload)
                storage.abort_incomplete(t.path);
            else if (t.dir)
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

}  // namespace ckpt::core
