// ckpt ls LOGDIR: the checkpoints of a manager's directory — index, size, when saved, a metadata summary and, with
// --verify, a verdict — without locking or changing anything.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
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
// Keys shown first in the summary, then keys that look like metrics.
const char* const kStepKeys[] = {"step", "global_step", "epoch", "iteration", "iter"};
const char* const kMetricWords[] = {"loss", "acc", "metric", "score", "ppl", "perplexity", "f1", "auc",
                                    "bleu", "reward", "err"};
constexpr size_t kSummaryKeys = 4;
constexpr size_t kSummaryValueWidth = 20;

struct Entry {
    int64_t index = 0;
    std::string path;
    uint64_t size = 0;
    std::time_t mtime = 0;
    bool opened = false;
    uint64_t arrays = 0;
    std::vector<std::pair<std::string, std::string>> metadata;
    std::optional<Verdict> verdict;
    std::string error;
    int exit_code = kExitOk;
    std::string time_key;  // the metadata key the saving time came from, or "" for the file's mtime
    bool sharded = false;  // a step directory of shards
};

std::string summary(const Entry& e) {
    std::vector<const std::pair<std::string, std::string>*> chosen;
    const auto take = [&](const std::pair<std::string, std::string>& kv) {
        if (std::find(chosen.begin(), chosen.end(), &kv) == chosen.end() && kv.first != e.time_key) chosen.push_back(&kv);
    };
    for (const char* key : kStepKeys)
        for (const auto& kv : e.metadata)
            if (kv.first == key) take(kv);
    for (const auto& kv : e.metadata)
        for (const char* word : kMetricWords)
            if (kv.first.find(word) != std::string::npos) take(kv);
    for (const auto& kv : e.metadata) take(kv);  // then the rest, in the file's order
    std::string out;
    size_t shown = 0;
    for (const auto* kv : chosen) {
        if (shown == kSummaryKeys) break;
        std::string value = kv->second;
        if (text_width(value) > kSummaryValueWidth) {
            size_t cut = 0, width = 0;  // cut on a code point boundary
            while (cut < value.size() && width < kSummaryValueWidth - 3) {
                ++cut;
                while (cut < value.size() && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) ++cut;
                ++width;
            }
            value = value.substr(0, cut) + "...";
        }
        for (char& ch : value)
            if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
        out += (shown == 0 ? "" : " ") + kv->first + "=" + value;
        ++shown;
    }
    if (chosen.size() > shown) out += fmt::format(" (+{} more)", chosen.size() - shown);
    return out;
}

// The saving time as shown: the metadata's (seconds since the epoch shown as a date), else the file's mtime.
std::string saved_text(const Entry& e) {
    if (e.time_key.empty()) return local_time(e.mtime);
    for (const auto& kv : e.metadata) {
        if (kv.first != e.time_key) continue;
        char* end = nullptr;
        const double seconds = std::strtod(kv.second.c_str(), &end);
        if (end != kv.second.c_str() && *end == '\0' && std::isfinite(seconds) && seconds > 0 && seconds < 1e11)
            return local_time(static_cast<std::time_t>(seconds));
        return kv.second;
    }
    return local_time(e.mtime);
}

// What an open checkpoint — a file's ckpt_npz or a step's ckpt_step — says of itself: its arrays and metadata.
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

Entry inspect(const CheckpointDir& dir, int64_t index, const LsOptions& o, Progress& progress, Scratch& scratch) {
    Entry e;
    e.index = index;
    e.path = dir.path_of(index);
    struct stat st{};
    if (::stat(e.path.c_str(), &st) != 0) {
        e.error = fmt::format("{}: cannot stat: {}", e.path, std::strerror(errno));
        e.exit_code = kExitIo;
        return e;
    }
    e.size = static_cast<uint64_t>(st.st_size);
    e.mtime = st.st_mtime;
    // A sharded step: its shards' and manifest's sizes, its manifest's variables and metadata.
    e.sharded = is_step_dir(e.path);
    int rc;
    if (e.sharded) {
        e.size = step_bytes(e.path);
        ckpt_step* raw = nullptr;
        rc = ckpt_step_open(&raw, e.path.c_str(), nullptr);
        const Step step(raw);
        if (rc == CKPT_OK)
            describe(e, raw, ckpt_step_count, ckpt_step_metadata_count, ckpt_step_metadata_key, ckpt_step_metadata_value);
    } else {
        ckpt_npz* raw = nullptr;
        rc = ckpt_npz_open(&raw, e.path.c_str(), nullptr);
        const Npz npz(raw);
        if (rc == CKPT_OK)
            describe(e, raw, ckpt_npz_count, ckpt_npz_metadata_count, ckpt_npz_metadata_key, ckpt_npz_metadata_value);
    }
    if (rc != CKPT_OK) {
        e.error = ckpt_message(rc, e.path);
        e.exit_code = open_exit_code(rc);
    }
    if (o.verify) {
        e.verdict = e.sharded ? verify_step(e.path, progress, scratch) : verify_file(e.path, progress, scratch);
        if (e.verdict->verdict != "ok") {
            e.error = e.verdict->error;
            e.exit_code = std::max(e.exit_code, e.verdict->exit_code);
        }
    }
    return e;
}

Json entry_json(const Entry& e, bool verify) {
    Json j;
    j["index"] = e.index;
    j["path"] = e.path;
    j["bytes"] = e.size;
    j["mtime"] = utc_time(e.mtime);
    std::string saved = utc_time(e.mtime);
    for (const auto& kv : e.metadata)
        if (kv.first == e.time_key) saved = kv.second;
    j["saved_at"] = saved;
    j["saved_at_source"] = e.time_key.empty() ? std::string("mtime") : "metadata:" + e.time_key;
    j["arrays"] = e.opened ? Json(e.arrays) : Json(nullptr);
    j["sharded"] = e.sharded;
    if (e.opened) {
        Json meta = Json::object();
        for (const auto& kv : e.metadata) meta[kv.first] = kv.second;
        j["metadata"] = meta;
    } else {
        j["metadata"] = nullptr;
    }
    j["verdict"] = verify && e.verdict ? Json(e.verdict->verdict) : Json(nullptr);
    j["error"] = e.error.empty() ? Json(nullptr) : Json(e.error);
    return j;
}

int run_ls(const LsOptions& o) {
    const CheckpointDir dir = open_checkpoint_dir(o.logdir, o.subdir);
    Progress progress;
    Scratch scratch;
    std::vector<Entry> entries;
    int status = kExitOk;
    for (int64_t index : dir.indices) {
        Entry e = inspect(dir, index, o, progress, scratch);
        if (e.exit_code == kExitIo && !e.opened && ::access(e.path.c_str(), F_OK) != 0)
            continue;  // retention removed it between the listing and now: it is no checkpoint any more
        status = std::max(status, e.exit_code);
        entries.push_back(std::move(e));
    }
    progress.clear();
    const std::vector<std::string> temporaries = dir.temporaries();

    if (o.json) {
        Json out;
        out["directory"] = dir.directory;
        Json list = Json::array();
        for (const Entry& e : entries) list.push_back(entry_json(e, o.verify));
        out["checkpoints"] = list;
        out["temporaries"] = temporaries;
        print_json(out);
        return status;
    }

    std::cout << fmt::format("{}: {} checkpoint{}\n", dir.directory, entries.size(), entries.size() == 1 ? "" : "s");
    std::vector<std::string> header = {"index", "size", "saved", "arrays"};
    std::vector<bool> right = {true, true, false, true};
    if (o.verify) {
        header.push_back("verify");
        right.push_back(false);
    }
    header.push_back("metadata");
    Table table(header, right);
    for (const Entry& e : entries) {
        std::vector<std::string> row = {fmt::format("{}", e.index), human_size(e.size, o.bytes), saved_text(e),
                                        e.opened ? fmt::format("{}", e.arrays) : "-"};
        if (o.verify) row.push_back(e.verdict ? e.verdict->verdict : "-");
        row.push_back(e.opened ? summary(e) : "unreadable (below)");
        table.add(row);
    }
    if (!entries.empty()) std::cout << table.render();
    for (const Entry& e : entries)
        if (!e.error.empty()) std::cout << e.error << '\n';
    if (!temporaries.empty()) {
        std::cout << fmt::format("{} temporary file{} of a save in progress or interrupted (the next manager to "
                                 "open the directory removes stale ones):\n",
                                 temporaries.size(), temporaries.size() == 1 ? "" : "s");
        for (const std::string& name : temporaries) std::cout << "  " << name << '\n';
    }
    return status;
}

}  // namespace

Command add_ls(CLI::App& parent) {
    auto o = std::make_shared<LsOptions>();
    CLI::App* app = parent.add_subcommand(
        "ls", "List a checkpoint manager's checkpoints: index, size, when saved, metadata");
    app->footer("Nothing is locked or changed: it works while a training program holds the directory and saves into "
                "it. Temporary files of saves in progress or interrupted are listed, never removed.");
    app->add_option("LOGDIR", o->logdir, "the manager's log directory (or its checkpoint directory)")->required();
    app->add_option("--subdir", o->subdir,
                    "the checkpoint directory inside LOGDIR (default: ckpt, or LOGDIR itself when it holds the "
                    "checkpoints)");
    app->add_flag("--verify", o->verify, "also check each file fully (reads all data); exit status 1 when one is broken");
    app->add_flag("--json", o->json, "one JSON document (docs/cli.md)");
    app->add_flag("--bytes", o->bytes, "sizes in bytes");
    return {app, [o] { return run_ls(*o); }};
}

}  // namespace ckpt_tool
