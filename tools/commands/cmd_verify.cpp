// SPDX-License-Identifier: Apache-2.0
// ckpt verify FILE|LOGDIR...: the full check of every file, one verdict line each.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
#include "location.hpp"
#include "sharded_step.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <memory>
#include <new>
#include <optional>

namespace ckpt_tool {

void print_json(const Json& j) { std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << '\n'; }

void set_failure(Verdict& v, int rc, bool opening) {
    v.rc = rc;
    v.error = ckpt_message(rc, v.path);
    // Without libckpt_s3 an s3:// file is not read at all: that is no verdict on its content.
    const bool unsupported = rc == CKPT_EUNSUPPORTED && !needs_s3_library(v.error);
    // A file that is no npz at all (a torch file, a text file) is not a corrupt checkpoint: the reader says which.
    const bool not_npz = rc == CKPT_EFORMAT && v.error.find(": not an npz checkpoint: ") != std::string::npos;
    v.verdict = not_npz ? "not-npz" : rc == CKPT_EFORMAT ? "corrupt" : unsupported ? "unsupported" : "unreadable";
    v.exit_code = opening ? open_exit_code(rc, v.error) : exit_code_of(rc, v.error);
}

void verify_arrays(Verdict& v, const ArrayReader& arrays, Progress& progress, Scratch& scratch) {
    uint64_t total = 0;
    for (size_t i = 0; i < v.arrays; ++i) total += arrays.nbytes(i);
    progress.start("verifying " + v.path, total);
    for (size_t i = 0; i < v.arrays; ++i) {
        const size_t n = arrays.nbytes(i);
        if (arrays.read_range) {
            const size_t item = std::max<size_t>(arrays.itemsize(i), 1);
            const size_t piece = std::max(kPieceBytes / item, size_t{1}) * item;
            int read = CKPT_OK;
            uint64_t at = 0;
            do {  // in order to the last byte: the CRC-32 is checked at the last piece (an empty array: at once)
                const size_t k = static_cast<size_t>(std::min<uint64_t>(piece, n - at));
                unsigned char* dst = k == 0 ? nullptr : scratch.get(k);
                read = arrays.read_range(i, at, dst, k);
                if (read == CKPT_OK) progress.advance(k);
                at += k;
            } while (read == CKPT_OK && at < n);
            if (read == CKPT_OK) continue;
            if (read != CKPT_EUNSUPPORTED || at > piece) {
                set_failure(v, read);
                return;
            }
            // A Fortran-order array, which is not read in ranges: read whole below.
        }
        unsigned char* dst;
        try {
            dst = scratch.get(n);
        } catch (const std::bad_alloc&) {
            v.verdict = "unreadable";
            v.error =
                fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", v.path, arrays.name(i), n);
            v.exit_code = kExitInternal;
            return;
        }
        const int read = arrays.read(i, dst, n);
        if (read != CKPT_OK) {
            set_failure(v, read);
            return;
        }
        progress.add_base(n);
    }
    v.verdict = "ok";
}

Verdict verify_file(const std::string& path, Progress& progress, Scratch& scratch) {
    Verdict v;
    v.path = path;
    ckpt_options opts = CKPT_OPTIONS_INIT;
    progress.attach(opts);
    ckpt_reader* raw = nullptr;
    const int rc = ckpt_reader_open(&raw, path.c_str(), &opts);
    if (rc != CKPT_OK) {
        set_failure(v, rc, true);
        return v;
    }
    const Reader npz(raw);
    v.opened = true;
    v.arrays = ckpt_reader_count(raw);
    v.bytes = ckpt_reader_file_size(raw);
    verify_arrays(
        v,
        {[&](size_t i) { return ckpt_reader_nbytes(raw, i); }, [&](size_t i) { return ckpt_reader_name(raw, i); },
         [&](size_t i, void* dst, size_t n) { return ckpt_reader_read_into(raw, i, dst, n); },
         [&](size_t i, uint64_t at, void* dst, size_t n) { return ckpt_reader_read_range(raw, i, at, dst, n); },
         [&](size_t i) { return ckpt_reader_itemsize(raw, i); }},
        progress, scratch);
    return v;
}

namespace {

struct VerifyOptions {
    std::vector<std::string> targets;
    std::optional<std::string> subdir;
    bool json = false;
    bool bytes = false;
};

Json verdict_json(const Verdict& v, std::optional<uint64_t> size) {
    Json j;
    j["path"] = v.path;
    j["verdict"] = v.verdict;
    j["error"] = v.error.empty() ? Json(nullptr) : Json(v.error);
    j["arrays"] = v.opened ? Json(v.arrays) : Json(nullptr);
    j["bytes"] = size ? Json(*size) : Json(nullptr);
    return j;
}

int run_verify(const VerifyOptions& o) {
    Progress progress;
    Scratch scratch;
    int status = kExitOk;
    Json files = Json::array(), directories = Json::array();
    size_t counts[5] = {0, 0, 0, 0, 0};  // ok, corrupt, unsupported, unreadable, not-npz
    const auto tally = [&](const Verdict& v) {
        const size_t k = v.verdict == "ok"            ? 0
                         : v.verdict == "corrupt"     ? 1
                         : v.verdict == "unsupported" ? 2
                         : v.verdict == "not-npz"     ? 4
                                                      : 3;
        ++counts[k];
        status = std::max(status, v.exit_code);
    };
    const auto check = [&](const std::string& path, bool step) {
        return step ? verify_step(path, progress, scratch) : verify_file(path, progress, scratch);
    };
    const auto report = [&](const Verdict& v, bool step) {
        std::optional<uint64_t> size;
        struct stat st {};
        if (step)
            size = step_bytes(v.path);
        else if (v.bytes)
            size = v.bytes;
        else if (!is_url(v.path) && ::stat(v.path.c_str(), &st) == 0)
            size = static_cast<uint64_t>(st.st_size);
        tally(v);
        if (o.json) {
            files.push_back(verdict_json(v, size));
            return;
        }
        progress.clear();
        if (v.verdict == "ok") {
            // No size for a step on S3 (the C API does not tell its objects' sizes), nor for a file never opened.
            const std::string bytes = size || !is_url(v.path) ? ", " + human_size(size.value_or(0), o.bytes) : "";
            std::cout << fmt::format("{}: ok ({}{} array{}{})\n", v.path, step ? "sharded step, " : "", v.arrays,
                                     v.arrays == 1 ? "" : "s", bytes);
        } else if (v.verdict == "not-npz") {  // the message begins "not an npz checkpoint: "
            std::cout << fmt::format("{}: {}\n", v.path, without_path(v.error, v.path));
        } else {
            std::cout << fmt::format("{}: {}: {}\n", v.path, v.verdict, without_path(v.error, v.path));
        }
        std::cout.flush();
    };

    for (const std::string& target : o.targets) {
        const PathKind kind = path_kind(target);
        if (kind != PathKind::directory) {
            report(check(target, kind == PathKind::step), kind == PathKind::step);
            continue;
        }
        // A local directory that is not a manager's (its .npz files and steps by name), or one where the manager
        // finds no numbered checkpoints but such files are: those are verified, as `ckpt ls` lists them.
        const bool local = !is_url(target);
        std::optional<CheckpointDir> dir;
        std::string error, directory = o.subdir ? join_path(target, *o.subdir) : target;
        int code = kExitOk;
        if (!local || o.subdir || is_manager_dir(target)) {
            try {
                dir = open_checkpoint_dir(target, o.subdir);
                directory = dir->directory;
            } catch (const Failure& f) {
                error = f.what();
                code = f.exit_code();
            }
        }
        std::vector<NamedCheckpoint> named;
        if (local && (dir ? dir->indices.empty() : error.empty())) named = named_checkpoints(directory);
        const size_t found = named.empty() && dir ? dir->indices.size() : named.size();
        if (error.empty() && found == 0) {
            error = directory + ": nothing to verify: no checkpoints" +
                    (local ? " and no .npz files or sharded steps in it" : "");
            code = kExitIo;
        }
        if (!error.empty()) {
            status = std::max(status, code);
            if (o.json) {
                directories.push_back(Json{{"path", directory}, {"checkpoints", nullptr}, {"error", error}});
            } else {
                progress.clear();
                std::cout << error << '\n';
            }
            continue;
        }
        if (o.json) directories.push_back(Json{{"path", directory}, {"checkpoints", found}, {"error", nullptr}});
        for (const NamedCheckpoint& c : named) report(check(c.path, c.step), c.step);
        if (!named.empty()) continue;
        for (int64_t index : dir->indices) {
            const std::string path = dir->path_of(index);
            const bool step = CheckpointDir::is_step(path);
            struct stat st {};
            if (!is_url(path) && ::stat(path.c_str(), &st) != 0 && errno == ENOENT) continue;  // retention removed it
            const Verdict v = check(path, step);
            if (is_url(path) && !v.opened && v.rc == CKPT_ENOTFOUND) continue;  // removed meanwhile, as above
            report(v, step);
        }
    }

    const size_t total = counts[0] + counts[1] + counts[2] + counts[3] + counts[4];
    if (o.json) {
        Json out;
        out["files"] = files;
        out["directories"] = directories;
        out["summary"] = Json{{"files", total},           {"ok", counts[0]},         {"corrupt", counts[1]},
                              {"unsupported", counts[2]}, {"unreadable", counts[3]}, {"not_npz", counts[4]}};
        print_json(out);
    } else if (total > 1) {
        std::string line = fmt::format("{} files: {} ok", total, counts[0]);
        if (counts[1] != 0) line += fmt::format(", {} corrupt", counts[1]);
        if (counts[2] != 0) line += fmt::format(", {} unsupported", counts[2]);
        if (counts[3] != 0) line += fmt::format(", {} unreadable", counts[3]);
        if (counts[4] != 0) line += fmt::format(", {} not npz checkpoint{}", counts[4], counts[4] == 1 ? "" : "s");
        std::cout << line << '\n';
    }
    return status;
}

}  // namespace

Command add_verify(CLI::App& parent) {
    auto o = std::make_shared<VerifyOptions>();
    CLI::App* app = parent.add_subcommand(
        "verify", "Check files fully: zip structure, npy headers, sizes and CRC-32s; one verdict per file");
    app->footer(
        "Every array is read. A LOGDIR checks each of its checkpoints (without locking it). Exit status 1 "
        "when a file is corrupt or holds what ckpt does not read, 3 when one cannot be read at all.");
    app->add_option("FILE|LOGDIR", o->targets, "checkpoint files, or log directories of a checkpoint manager")
        ->required();
    app->add_option("--subdir", o->subdir,
                    "the checkpoint directory inside each LOGDIR (default: ckpt, or LOGDIR itself when it holds "
                    "the checkpoints)");
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    app->add_flag("--bytes", o->bytes, "sizes in bytes");
    return {app, [o] { return run_verify(*o); }};
}

}  // namespace ckpt_tool
