// SPDX-License-Identifier: Apache-2.0
// ckpt clean DIR: removes what interrupted saves left in a checkpoint directory (ckpt_manager_clean): temporaries of
// checkpoint files and of any other ckpt save of an .npz file there, sharded saves' staging directories, and step
// directories without a manifest. It takes the directory's lock as a save does, so it refuses while a training
// program's manager holds it.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
#include "location.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>
#include <vector>

namespace ckpt_tool {
namespace {

struct CleanOptions {
    std::string dir;
    std::optional<std::string> subdir;
    bool dry_run = false;
    bool json = false;
};

struct Found {
    std::string path;
    int kind;  // CKPT_CLEAN_FILE, CKPT_CLEAN_DIR or CKPT_CLEAN_UPLOAD
};

const char* kind_name(int kind) {
    return kind == CKPT_CLEAN_DIR ? "directory" : kind == CKPT_CLEAN_UPLOAD ? "upload" : "file";
}

// The directory to clean: DIR/SUBDIR when asked; else DIR/ckpt for a manager's logdir (as `ckpt ls` takes it), and
// DIR itself otherwise (a directory of checkpoints, or any directory a save into which was interrupted).
std::string directory_to_clean(const CleanOptions& o) {
    if (o.subdir) return join_path(o.dir, *o.subdir);
    if (!is_url(o.dir)) return is_local_directory(join_path(o.dir, "ckpt")) ? join_path(o.dir, "ckpt") : o.dir;
    try {
        return open_checkpoint_dir(o.dir, std::nullopt).directory;
    } catch (const Failure&) {
        return o.dir;  // no checkpoints under it: there may still be steps without their manifest
    }
}

extern "C" void record_found(const char* path, int is_dir, void* payload) {
    try {
        static_cast<std::vector<Found>*>(payload)->push_back({path, is_dir});
    } catch (...) {
        // Out of memory: the count from ckpt_manager_clean still tells how many there were.
    }
}

int run_clean(const CleanOptions& o) {
    const std::string dir = directory_to_clean(o);
    if (!is_url(dir) && !is_local_directory(dir)) throw Failure(kExitIo, dir + ": not found: no such directory");
    ckpt_manager_options opts = CKPT_MANAGER_OPTIONS_INIT;
    // A dry run only reads: a read-only manager takes no lock and creates nothing (not even the lock file).
    opts.flags = o.dry_run ? CKPT_MANAGER_READ_ONLY : CKPT_MANAGER_NO_MAKEDIR;
    opts.subdir = "";
    opts.keep = 0;  // clean applies no retention; nothing else is deleted either way
    ckpt_manager* raw = nullptr;
    int rc = ckpt_manager_open(&raw, dir.c_str(), &opts);
    if (rc != CKPT_OK) fail_ckpt(rc, dir);
    Manager manager(raw);

    std::vector<Found> found;
    size_t count = 0;
    rc = ckpt_manager_clean(manager.get(), o.dry_run ? CKPT_CLEAN_DRY_RUN : 0u, record_found, &found, &count);
    if (rc == CKPT_OK) rc = ckpt_manager_close(manager.release());  // unlocks the directory
    if (rc != CKPT_OK && found.empty()) fail_ckpt(rc, dir);         // e.g. CKPT_EBUSY: nothing was removed
    // A failure after some were removed (CKPT_EIO: one would not go) is reported after them.
    const std::string error = rc == CKPT_OK ? "" : ckpt_message(rc, dir);
    if (found.size() != count) throw std::bad_alloc();

    if (o.json) {
        Json out;
        out["directory"] = dir;
        out["dry_run"] = o.dry_run;
        Json items = Json::array();
        for (const Found& f : found) items.push_back({{"path", f.path}, {"kind", kind_name(f.kind)}});
        out[o.dry_run ? "found" : "removed"] = items;
        if (rc != CKPT_OK) out["error"] = {{"code", rc}, {"name", code_name(rc)}, {"message", error}};
        print_json(out);
    } else {
        const char* verb = o.dry_run ? "would remove" : "removed";
        if (found.empty())
            std::cout << fmt::format("{}: no stale temporaries\n", dir);
        else
            std::cout << fmt::format("{}: {} {} stale temporar{} left by interrupted saves:\n", dir, verb, found.size(),
                                     found.size() == 1 ? "y" : "ies");
        for (const Found& f : found)
            std::cout << "  " << (f.kind == CKPT_CLEAN_UPLOAD ? "unfinished upload of " : "") << f.path
                      << (f.kind == CKPT_CLEAN_DIR ? "/" : "") << '\n';
        if (rc != CKPT_OK) std::cerr << "ckpt: " << error << '\n';
    }
    return exit_code_for(rc);
}

}  // namespace

Command add_clean(CLI::App& parent) {
    auto o = std::make_shared<CleanOptions>();
    CLI::App* app = parent.add_subcommand(
        "clean", "Remove the temporary files and directories that interrupted saves left in a checkpoint directory");
    app->footer(
        "A save writes a temporary (.NAME.npz.tmp-XXXXXX) beside its file and renames it into place; a "
        "process killed with SIGKILL, or a machine lost, leaves the temporary behind (SIGINT, SIGTERM and "
        "SIGHUP do not: ckpt convert and the library remove it). clean removes those of checkpoints and of "
        "any other .npz file in DIR, sharded saves' staging directories and step directories without a "
        "manifest; nothing whose name ckpt does not make. On S3 it aborts every incomplete multipart upload "
        "under DIR (a killed save's parts, billed and invisible to listings). It takes the directory's lock as a save "
        "does, so "
        "it refuses (exit status 3) while a training program's checkpoint manager holds the directory.");
    app->add_option("DIR", o->dir, "the directory: a manager's logdir (DIR/ckpt is cleaned), or any directory")
        ->required();
    app->add_option("--subdir", o->subdir, "clean DIR/SUBDIR (\"\" for DIR itself) instead of choosing");
    app->add_flag("--dry-run,-n", o->dry_run, "list what would be removed; remove nothing");
    app->add_flag("--json", o->json, "print one JSON document");
    return {app, [o] { return run_clean(*o); }};
}

}  // namespace ckpt_tool
