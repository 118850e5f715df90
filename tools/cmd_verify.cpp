// ckpt verify FILE|LOGDIR...: the full check of every file, one verdict line each.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
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

void print_json(const Json& j) {
    std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

uint64_t file_size(const std::string& path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) fail_errno(errno, path, "cannot stat");
    return static_cast<uint64_t>(st.st_size);
}

void set_failure(Verdict& v, int rc) {
    v.verdict = rc == CKPT_EFORMAT ? "corrupt" : rc == CKPT_EUNSUPPORTED ? "unsupported" : "unreadable";
    v.error = ckpt_message(rc, v.path);
    v.exit_code = exit_code_for(rc);
}

void verify_arrays(Verdict& v, const ArrayReader& arrays, Progress& progress, Scratch& scratch) {
    uint64_t total = 0;
    for (size_t i = 0; i < v.arrays; ++i) total += arrays.nbytes(i);
    progress.start("verifying " + v.path, total);
    for (size_t i = 0; i < v.arrays; ++i) {
        const size_t n = arrays.nbytes(i);
        unsigned char* dst;
        try {
            dst = scratch.get(n);
        } catch (const std::bad_alloc&) {
            v.verdict = "unreadable";
            v.error = fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", v.path, arrays.name(i), n);
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
    ckpt_npz_options opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(opts);
    ckpt_npz* raw = nullptr;
    const int rc = ckpt_npz_open(&raw, path.c_str(), &opts);
    if (rc != CKPT_OK) {
        set_failure(v, rc);
        v.exit_code = open_exit_code(rc);
        return v;
    }
    const Npz npz(raw);
    v.opened = true;
    v.arrays = ckpt_npz_count(raw);
    verify_arrays(v,
                  {[&](size_t i) { return ckpt_npz_nbytes(raw, i); }, [&](size_t i) { return ckpt_npz_name(raw, i); },
                   [&](size_t i, void* dst, size_t n) { return ckpt_npz_read_into(raw, i, dst, n); }},
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
    size_t counts[4] = {0, 0, 0, 0};  // ok, corrupt, unsupported, unreadable
    const auto tally = [&](const Verdict& v) {
        const size_t k = v.verdict == "ok" ? 0 : v.verdict == "corrupt" ? 1 : v.verdict == "unsupported" ? 2 : 3;
        ++counts[k];
        status = std::max(status, v.exit_code);
    };
    const auto one = [&](const std::string& path) {
        const bool step = is_step_dir(path);
        Verdict v = step ? verify_step(path, progress, scratch) : verify_file(path, progress, scratch);
        std::optional<uint64_t> size;
        struct stat st{};
        if (step)
            size = step_bytes(path);
        else if (::stat(path.c_str(), &st) == 0)
            size = static_cast<uint64_t>(st.st_size);
        tally(v);
        if (o.json) {
            files.push_back(verdict_json(v, size));
            return;
        }
        progress.clear();
        if (v.verdict == "ok") {
            std::cout << fmt::format("{}: ok ({}{} array{}, {})\n", path, step ? "sharded step, " : "", v.arrays,
                                     v.arrays == 1 ? "" : "s", human_size(size.value_or(0), o.bytes));
        } else {
            std::cout << fmt::format("{}: {}: {}\n", path, v.verdict, without_path(v.error, path));
        }
        std::cout.flush();
    };

    for (const std::string& target : o.targets) {
        if (!is_directory(target) || is_step_dir(target)) {
            one(target);
            continue;
        }
        std::optional<CheckpointDir> dir;
        std::string error;
        int code = kExitOk;
        try {
            dir = open_checkpoint_dir(target, o.subdir);
        } catch (const Failure& f) {
            error = f.what();
            code = f.exit_code();
        }
        if (!dir) {
            status = std::max(status, code);
            if (o.json) {
                directories.push_back(Json{{"path", target}, {"checkpoints", nullptr}, {"error", error}});
            } else {
                progress.clear();
                std::cout << error << '\n';
            }
            continue;
        }
        if (o.json) {
            directories.push_back(Json{{"path", dir->directory}, {"checkpoints", dir->indices.size()}, {"error", nullptr}});
        } else if (dir->indices.empty()) {
            progress.clear();
            std::cout << dir->directory << ": no checkpoints\n";
        }
        for (int64_t index : dir->indices) {
            const std::string path = dir->path_of(index);
            struct stat st{};
            if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) continue;  // retention removed it meanwhile
            one(path);
        }
    }

    const size_t total = counts[0] + counts[1] + counts[2] + counts[3];
    if (o.json) {
        Json out;
        out["files"] = files;
        out["directories"] = directories;
        out["summary"] = Json{{"files", total}, {"ok", counts[0]}, {"corrupt", counts[1]},
                              {"unsupported", counts[2]}, {"unreadable", counts[3]}};
        print_json(out);
    } else if (total > 1) {
        std::string line = fmt::format("{} files: {} ok", total, counts[0]);
        if (counts[1] != 0) line += fmt::format(", {} corrupt", counts[1]);
        if (counts[2] != 0) line += fmt::format(", {} unsupported", counts[2]);
        if (counts[3] != 0) line += fmt::format(", {} unreadable", counts[3]);
        std::cout << line << '\n';
    }
    return status;
}

}  // namespace

Command add_verify(CLI::App& parent) {
    auto o = std::make_shared<VerifyOptions>();
    CLI::App* app = parent.add_subcommand(
        "verify", "Check files fully: zip structure, npy headers, sizes and CRC-32s; one verdict per file");
    app->footer("Every array is read. A LOGDIR checks each of its checkpoints (without locking it). Exit status 1 "
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
