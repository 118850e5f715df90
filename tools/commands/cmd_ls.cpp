// SPDX-License-Identifier: Apache-2.0
// ckpt ls LOGDIR: the checkpoints of a manager's directory — index, size, when saved, a metadata summary and, with
// --verify, a verdict — without locking or changing anything.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
#include "location.hpp"
#include "sharded_step.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

namespace ckpt_tool {
namespace {

struct LsOptions {
    std::string logdir;
    std::optional<std::string> subdir;
    bool verify = false;
    bool json = false;
    bool bytes = false;
};

// Metadata keys that say when a checkpoint was saved, in the order they are looked for.
const char* const kTimeKeys[] = {"saved_at", "time", "timestamp", "saved", "date", "datetime", "wall_time"};
// The saving time a checkpoint manager records (ISO 8601, UTC): before any of those, and before the file's mtime
// (which a copy or a sync changes).
constexpr char kManagerTimeKey[] = "ckpt.saved_at";
constexpr char kManagerTimeNsKey[] = "ckpt.saved_at_ns";  // the same in nanoseconds since the epoch
// Keys shown first in the summary, then keys that look like metrics.
const char* const kStepKeys[] = {"step", "global_step", "epoch", "iteration", "iter"};
const char* const kMetricWords[] = {"loss", "acc", "metric", "score",  "ppl", "perplexity",
                                    "f1",   "auc", "bleu",   "reward", "err"};
constexpr size_t kSummaryKeys = 4;
constexpr size_t kSummaryValueWidth = 20;

struct Entry {
    std::optional<int64_t> index;  // none for a file of a directory that is not a manager's, named otherwise
    std::string path;
    std::optional<uint64_t> size;      // none on S3: the C API does not tell an object's size
    std::optional<std::time_t> mtime;  // nor its time
    int rc = CKPT_OK;                  // the failed open's code
    bool opened = false;
    uint64_t arrays = 0;
    std::vector<std::pair<std::string, std::string>> metadata;
    std::optional<Verdict> verdict;
    std::string error;
    // What is wrong with it in verify's words ("corrupt", "not-npz", "unsupported", "unreadable"; "incomplete" for
    // a step without its manifest), from opening it or from --verify; empty when nothing was found wrong.
    std::string problem;
    int exit_code = kExitOk;
    std::string time_key;     // the key of kTimeKeys the saving time came from, or "" for the file's mtime
    bool sharded = false;     // a step directory of shards
    bool incomplete = false;  // a step directory without its manifest: a save in progress or cut short
};

std::string summary(const Entry& e) {
    // The user's keys, and the manager's metrics by their names (the manager's other keys, the index and the
    // time, have their columns).
    std::vector<std::pair<std::string, std::string>> shown_keys;
    for (const auto& kv : e.metadata) {
        if (const auto metric = metric_name(kv.first))
            shown_keys.emplace_back(*metric, kv.second);
        else if (!manager_key(kv.first) && kv.first != e.time_key)
            shown_keys.push_back(kv);
    }
    std::vector<const std::pair<std::string, std::string>*> chosen;
    const auto take = [&](const std::pair<std::string, std::string>& kv) {
        if (std::find(chosen.begin(), chosen.end(), &kv) == chosen.end()) chosen.push_back(&kv);
    };
    for (const char* key : kStepKeys)
        for (const auto& kv : shown_keys)
            if (kv.first == key) take(kv);
    for (const auto& kv : shown_keys)
        for (const char* word : kMetricWords)
            if (kv.first.find(word) != std::string::npos) take(kv);
    for (const auto& kv : shown_keys) take(kv);  // then the rest, in the file's order
    std::string out;
    size_t shown = 0;
    for (const auto* kv : chosen) {
        if (shown == kSummaryKeys) break;
        std::string value = shorten(kv->second, kSummaryValueWidth, "...");
        for (char& ch : value)
            if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
        out += (shown == 0 ? "" : " ") + kv->first + "=" + value;
        ++shown;
    }
    if (chosen.size() > shown) out += fmt::format(" (+{} more)", chosen.size() - shown);
    return out;
}

const std::string* metadata_value(const Entry& e, const std::string& key) {
    for (const auto& kv : e.metadata)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

// The saving time and where it came from ("mtime", "metadata:<key>"): the manager's record, else the metadata's
// time, else the file's mtime; nothing when there is none of them.
std::optional<std::pair<std::string, std::string>> saved_time(const Entry& e) {
    if (const std::string* v = metadata_value(e, kManagerTimeKey))
        return std::make_pair(*v, std::string("metadata:") + kManagerTimeKey);
    if (const std::string* v = e.time_key.empty() ? nullptr : metadata_value(e, e.time_key))
        return std::make_pair(*v, "metadata:" + e.time_key);
    if (e.mtime) return std::make_pair(utc_time(*e.mtime), std::string("mtime"));
    return std::nullopt;
}

// The saving time as shown: the manager's record (in whole seconds, in the local time zone as an mtime is shown),
// else the metadata's (seconds since the epoch shown as a date), else the file's mtime; "-" when nothing tells.
std::string saved_text(const Entry& e) {
    if (const std::string* ns = metadata_value(e, kManagerTimeNsKey)) {
        char* end = nullptr;
        const long long value = std::strtoll(ns->c_str(), &end, 10);
        if (end != ns->c_str() && *end == '\0' && value > 0)
            return local_time(static_cast<std::time_t>(value / 1000000000));
    }
    if (const std::string* v = metadata_value(e, kManagerTimeKey)) return *v;
    if (const std::string* v = e.time_key.empty() ? nullptr : metadata_value(e, e.time_key)) {
        char* end = nullptr;
        const double seconds = std::strtod(v->c_str(), &end);
        if (end != v->c_str() && *end == '\0' && std::isfinite(seconds) && seconds > 0 && seconds < 1e11)
            return local_time(static_cast<std::time_t>(seconds));
        return *v;
    }
    if (e.mtime) return local_time(*e.mtime);
    return "-";
}

// What an open checkpoint — a file's ckpt_reader or a step's ckpt_step — says of itself: its arrays and metadata.
template <typename Handle>
void describe(Entry& e, const Handle* raw, size_t (*count)(const Handle*), size_t (*metadata_count)(const Handle*),
              const char* (*key)(const Handle*, size_t), const char* (*value)(const Handle*, size_t)) {
    e.opened = true;
    e.arrays = count(raw);
    for (size_t k = 0; k < metadata_count(raw); ++k) e.metadata.emplace_back(key(raw, k), value(raw, k));
    for (const char* time_key : kTimeKeys) {
        const auto has = [&](const std::pair<std::string, std::string>& kv) { return kv.first == time_key; };
        if (std::any_of(e.metadata.begin(), e.metadata.end(), has)) {
            e.time_key = time_key;
            break;
        }
    }
}

// The checkpoint at `path`: a file, or a step directory when `sharded`.
Entry inspect(const std::string& path, std::optional<int64_t> index, bool sharded, const LsOptions& o,
              Progress& progress, Scratch& scratch) {
    Entry e;
    e.index = index;
    e.path = path;
    if (!is_url(e.path)) {
        struct stat st {};
        if (::stat(e.path.c_str(), &st) != 0) {
            e.error = fmt::format("{}: cannot stat: {}", e.path, std::strerror(errno));
            e.exit_code = kExitIo;
            e.problem = "unreadable";
            return e;
        }
        e.size = static_cast<uint64_t>(st.st_size);
        e.mtime = st.st_mtime;
    }
    // A sharded step: its shards' and manifest's sizes, its manifest's variables and metadata.
    e.sharded = sharded;
    int rc;
    if (e.sharded) {
        e.size = step_bytes(e.path);
        ckpt_step* raw = nullptr;
        rc = ckpt_step_open(&raw, e.path.c_str(), nullptr);
        const Step step(raw);
        if (rc == CKPT_OK)
            describe(e, raw, ckpt_step_count, ckpt_step_metadata_count, ckpt_step_metadata_key,
                     ckpt_step_metadata_value);
    } else {
        ckpt_reader* raw = nullptr;
        rc = ckpt_reader_open(&raw, e.path.c_str(), nullptr);
        const Reader npz(raw);
        if (rc == CKPT_OK) {
            describe(e, raw, ckpt_reader_count, ckpt_reader_metadata_count, ckpt_reader_metadata_key,
                     ckpt_reader_metadata_value);
            if (!e.size) e.size = ckpt_reader_file_size(raw);  // an object on S3, which no stat reaches
        }
    }
    if (rc != CKPT_OK) {
        Verdict failed;  // named as verify names it
        failed.path = e.path;
        set_failure(failed, rc, true);
        e.rc = rc;
        e.error = failed.error;
        e.exit_code = failed.exit_code;
        e.problem = failed.verdict;
    }
    if (o.verify) {
        e.verdict = e.sharded ? verify_step(e.path, progress, scratch) : verify_file(e.path, progress, scratch);
        if (e.verdict->verdict != "ok") {
            e.error = e.verdict->error;
            e.problem = e.verdict->verdict;
            e.exit_code = std::max(e.exit_code, e.verdict->exit_code);
        }
    }
    return e;
}

Json entry_json(const Entry& e, bool verify) {
    Json j;
    j["index"] = e.index ? Json(*e.index) : Json(nullptr);
    j["path"] = e.path;
    j["bytes"] = e.size ? Json(*e.size) : Json(nullptr);
    j["mtime"] = e.mtime ? Json(utc_time(*e.mtime)) : Json(nullptr);
    const auto saved = saved_time(e);
    j["saved_at"] = saved ? Json(saved->first) : Json(nullptr);
    j["saved_at_source"] = saved ? Json(saved->second) : Json(nullptr);
    j["arrays"] = e.opened ? Json(e.arrays) : Json(nullptr);
    j["sharded"] = e.sharded;
    j["incomplete"] = e.incomplete;
    if (e.opened) {
        Json meta = Json::object();
        for (const auto& kv : e.metadata) meta[kv.first] = kv.second;
        j["metadata"] = meta;
    } else {
        j["metadata"] = nullptr;
    }
    j["verdict"] = verify && e.verdict ? Json(e.verdict->verdict) : Json(nullptr);
    j["error"] = e.error.empty() ? Json(nullptr) : Json(e.error);
    j["problem"] = e.problem.empty() ? Json(nullptr) : Json(e.problem);
    return j;
}

// An entry for a step directory that has no manifest.json: a save in progress, or one cut short, which the manager
// does not list (it removes such a directory when it next opens the log directory).
Entry incomplete_step(const std::string& path, std::optional<int64_t> index) {
    Entry e;
    e.index = index;
    e.path = path;
    e.sharded = true;
    e.incomplete = true;
    e.size = step_bytes(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) e.mtime = st.st_mtime;
    e.problem = "incomplete";
    e.error = path + ": incomplete: a sharded step without its manifest.json (a save in progress or cut short)";
    return e;
}

bool local_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string parent_of(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

struct Listing {
    std::string directory;
    std::string path;  // what was asked for: the directory, or a file or step
    std::vector<Entry> entries;
    std::vector<std::string> temporaries;
    bool manager = true;  // a manager's directory: its checkpoints by index; else files by name
    bool single = false;  // one file or step, as asked
};

// A manager's checkpoint directory: what it lists, and its steps without a manifest.
Listing manager_listing(const LsOptions& o, Progress& progress, Scratch& scratch, int& status) {
    const CheckpointDir dir = open_checkpoint_dir(o.logdir, o.subdir);
    Listing l;
    l.directory = l.path = dir.directory;
    for (int64_t index : dir.indices) {
        const std::string path = dir.path_of(index);
        Entry e = inspect(path, index, CheckpointDir::is_step(path), o, progress, scratch);
        const bool gone = is_url(e.path) ? e.rc == CKPT_ENOTFOUND : ::access(e.path.c_str(), F_OK) != 0;
        if (e.exit_code == kExitIo && !e.opened && gone)
            continue;  // retention removed it between the listing and now: it is no checkpoint any more
        status = std::max(status, e.exit_code);
        l.entries.push_back(std::move(e));
    }
    if (!is_url(dir.directory)) {
        for (const std::string& name : directory_entries(dir.directory)) {
            const std::string path = join_path(dir.directory, name);
            const std::optional<int64_t> index = checkpoint_index(name);
            if (!index || ckpt_checkpoint_idx(name.c_str()) >= 0 || !is_local_directory(path) || is_step_dir(path))
                continue;
            if (std::find(dir.indices.begin(), dir.indices.end(), *index) != dir.indices.end()) continue;
            l.entries.push_back(incomplete_step(path, index));
        }
        std::stable_sort(l.entries.begin(), l.entries.end(),
                         [](const Entry& a, const Entry& b) { return a.index < b.index; });
    }
    l.temporaries = dir.temporaries();
    return l;
}

// A local directory that is not a manager's: its .npz files and step directories, by name.
Listing plain_listing(const std::string& dir, const LsOptions& o, Progress& progress, Scratch& scratch, int& status) {
    Listing l;
    l.directory = l.path = dir;
    l.manager = false;
    for (const NamedCheckpoint& c : named_checkpoints(dir)) {
        Entry e = inspect(c.path, checkpoint_index(c.name), c.step, o, progress, scratch);
        status = std::max(status, e.exit_code);
        l.entries.push_back(std::move(e));
    }
    l.temporaries = temporaries_in(dir, false);
    return l;
}

int run_ls(const LsOptions& o) {
    Progress progress;
    Scratch scratch;
    int status = kExitOk;
    Listing l;
    const bool local = !is_url(o.logdir);
    if (local && !o.subdir && (local_file(o.logdir) || is_step_dir(o.logdir))) {
        // One file or step: its line, as in a listing of its directory.
        l.directory = parent_of(o.logdir);
        l.path = o.logdir;
        l.manager = false;
        l.single = true;
        const bool step = !local_file(o.logdir);
        Entry e = inspect(o.logdir, checkpoint_index(last_component(o.logdir)), step, o, progress, scratch);
        status = e.exit_code;
        l.entries.push_back(std::move(e));
    } else if (local && !o.subdir && is_local_directory(o.logdir) && !is_manager_dir(o.logdir)) {
        l = plain_listing(o.logdir, o, progress, scratch, status);
    } else {
        l = manager_listing(o, progress, scratch, status);
        // --subdir naming a directory of .npz files that no manager numbered (`--subdir ""` of one): those files.
        if (local && l.entries.empty() && l.temporaries.empty() && !named_checkpoints(l.directory).empty())
            l = plain_listing(l.directory, o, progress, scratch, status);
    }
    progress.clear();

    if (o.json) {
        Json out;
        out["directory"] = l.directory;
        Json list = Json::array();
        for (const Entry& e : l.entries) list.push_back(entry_json(e, o.verify));
        out["checkpoints"] = list;
        out["temporaries"] = l.temporaries;
        out["manager"] = l.manager;
        print_json(out);
        return status;
    }

    const size_t n = l.entries.size();
    if (l.single)
        std::cout << fmt::format("{}: {}\n", l.path, l.entries[0].sharded ? "a sharded step" : "a checkpoint file");
    else if (l.manager)
        std::cout << fmt::format("{}: {} checkpoint{}\n", l.directory, n, n == 1 ? "" : "s");
    else
        std::cout << fmt::format("{}: {} .npz file{} and sharded step{} (not a checkpoint manager's directory)\n",
                                 l.directory, n, n == 1 ? "" : "s", n == 1 ? "" : "s");
    std::vector<std::string> header = {l.manager ? "index" : "name", "size", "saved", "arrays"};
    std::vector<bool> right = {l.manager, true, false, true};
    if (o.verify) {
        header.push_back("verify");
        right.push_back(false);
    }
    header.push_back("metadata");
    Table table(header, right);
    for (const Entry& e : l.entries) {
        const std::string first = l.manager ? fmt::format("{}", *e.index) : last_component(e.path);
        std::vector<std::string> row = {first, e.size ? human_size(*e.size, o.bytes) : "-", saved_text(e),
                                        e.opened ? fmt::format("{}", e.arrays) : "-"};
        if (o.verify) row.push_back(e.verdict ? e.verdict->verdict : "-");
        row.push_back(e.opened ? summary(e) : e.problem + " (below)");
        table.add(row);
    }
    if (!l.entries.empty()) std::cout << table.render();
    for (const Entry& e : l.entries)
        if (!e.error.empty()) std::cout << e.error << '\n';
    if (!l.temporaries.empty()) {
        std::cout << fmt::format(
            "{} temporary file{} of a save in progress or interrupted ({}`ckpt clean` removes "
            "stale ones):\n",
            l.temporaries.size(), l.temporaries.size() == 1 ? "" : "s",
            l.manager ? "the next manager to save into the directory, or " : "");
        for (const std::string& name : l.temporaries) std::cout << "  " << name << '\n';
    }
    return status;
}

}  // namespace

Command add_ls(CLI::App& parent) {
    auto o = std::make_shared<LsOptions>();
    CLI::App* app = parent.add_subcommand(
        "ls",
        "List a checkpoint manager's checkpoints (or a directory's .npz files): index, size, when saved, metadata");
    app->footer(
        "Nothing is locked or changed: it works while a training program holds the directory and saves into "
        "it. Temporary files of saves in progress or interrupted are listed, never removed.");
    app->add_option("LOGDIR", o->logdir,
                    "the manager's log directory (or its checkpoint directory); or a directory of .npz files, or one "
                    ".npz file or sharded step")
        ->required();
    app->add_option("--subdir", o->subdir,
                    "the checkpoint directory inside LOGDIR (default: ckpt, or LOGDIR itself when it holds the "
                    "checkpoints)");
    app->add_flag("--verify", o->verify,
                  "also check each file fully (reads all data); exit status 1 when one is broken");
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    app->add_flag("--bytes", o->bytes, "sizes in bytes");
    return {app, [o] { return run_ls(*o); }};
}

}  // namespace ckpt_tool
