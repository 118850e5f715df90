// SPDX-License-Identifier: Apache-2.0
// ckpt report PATH... -o report.html: a training run's checkpoints as one self-contained page (report_page.hpp
// draws it) or, with --json, as the numbers behind it. A run is a manager's directory (local or s3://) or the
// files given, in order; one file is reported alone; two files are also compared. Each array is read once for all
// the checkpoints that hold it, side by side and a piece at a time, so memory stays bounded whatever the array
// sizes; the newest checkpoint's arrays are read a second time for their histograms. Arrays are read on as many
// threads as there are cores (up to 4), each with its own readers.
#include "checkpoint_dir.hpp"
#include "commands.hpp"
#include "location.hpp"
#include "report_page.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace ckpt_tool {
namespace {

struct ReportOptions {
    std::vector<std::string> paths;
    std::string out;
    std::optional<std::string> subdir;
    bool json = false;
};

// The memory the side-by-side reads share: the pieces of every checkpoint's copy of the arrays being read. Each
// piece is at most kSideBySidePiece, so that the two a change is taken between are still in the core's cache from
// their reading (8 MiB pieces made the report a quarter slower).
constexpr size_t kSideBySideBytes = size_t{32} << 20;
constexpr size_t kSideBySidePiece = size_t{256} << 10;
constexpr size_t kMinPieceBytes = size_t{64} << 10;
// Threads reading arrays at once (no more than the machine's cores).
constexpr size_t kWorkers = 4;
// A norm that grows more than this between two checkpoints is a jump.
constexpr double kJumpFactor = 10;

// One checkpoint of the report.
struct Source {
    std::string path;
    int64_t step = 0;
    Reader reader;
};

// An array of one checkpoint, as the side-by-side pass reads it.
struct Member {
    size_t source = 0;  // index into the sources
    size_t index = 0;   // the array's index in its file
    uint32_t dtype = 0;
    std::vector<int64_t> shape;
    std::unique_ptr<PieceReader> pieces;
    bool active = true;
    ArrayView piece;
    Moments moments;
    // How it differs from the array in the checkpoint before; none for the first, or where the dtype or shape
    // changed or the array has no numbers.
    std::optional<Difference> change;
};

// What one array adds to the report. Arrays are read in parallel, their results put in order afterwards.
struct ArrayResult {
    Json array;   // its statistics in the newest checkpoint; null when that does not hold it
    Json change;  // its relative changes; null with fewer than two checkpoints holding it
    std::vector<Json> warnings, differences;
};

bool lower_is_better(const std::string& metric) {
    for (const char* word : {"loss", "err", "ppl", "perplexity", "mse", "mae", "nll", "cost", "time"})
        if (metric.find(word) != std::string::npos) return true;
    return false;
}

bool higher_is_better(const std::string& metric) {
    for (const char* word : {"acc", "score", "f1", "auc", "bleu", "reward", "precision", "recall", "map", "iou"})
        if (metric.find(word) != std::string::npos) return true;
    return false;
}

// A metadata value that is a number as a whole ("0.25", "nan", "1e-3"); none for other text.
std::optional<double> number_in(const std::string& text) {
    if (text.empty() || text.size() > 64) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
    return v;
}

std::string number_text(double v) { return fmt::format("{:.4g}", v); }

class Report {
public:
    explicit Report(const ReportOptions& o) : o_(o) {}

    Json build() {
        collect_sources();
        Json checkpoints = Json::array();
        for (const Source& s : sources_) checkpoints.push_back(checkpoint_json(s));
        doc_["kind"] = kind_;
        doc_["paths"] = o_.paths;
        doc_["checkpoints"] = checkpoints;
        doc_["metrics"] = metrics_json();
        doc_["arrays"] = Json::array();
        doc_["changes"] = Json::array();
        doc_["warnings"] = nullptr;  // gathered in warnings_, sorted at the end
        if (kind_ == "files" && sources_.size() == 2) doc_["differences"] = Json::array();

        uint64_t total = 0;
        for (const Source& s : sources_)
            for (size_t i = 0; i < ckpt_reader_count(s.reader.get()); ++i)
                total += ckpt_reader_nbytes(s.reader.get(), i);
        if (!sources_.empty()) {  // the newest's arrays are read twice
            ckpt_reader* newest = sources_.back().reader.get();
            for (size_t i = 0; i < ckpt_reader_count(newest); ++i) total += ckpt_reader_nbytes(newest, i);
        }
        progress_.start("report", total);
        const std::vector<std::string> names = array_names();
        std::vector<ArrayResult> results(names.size());
        report_arrays(names, results);
        progress_.clear();
        for (ArrayResult& r : results) {
            if (!r.array.is_null()) doc_["arrays"].push_back(std::move(r.array));
            if (!r.change.is_null()) doc_["changes"].push_back(std::move(r.change));
            for (Json& w : r.warnings) warnings_.push_back(std::move(w));
            if (doc_.contains("differences"))
                for (Json& d : r.differences) doc_["differences"].push_back(std::move(d));
        }
        if (doc_.contains("differences")) doc_["only_in"] = only_in_json();
        sort_warnings();
        doc_["warnings"] = warnings_;
        return doc_;
    }

private:
    // The checkpoints the paths name: a directory's (a manager's, or the .npz and safetensors files of another),
    // else the files themselves.
    void collect_sources() {
        const std::string& first = o_.paths.front();
        const bool directory = o_.paths.size() == 1 &&
                               (is_url(first) ? path_kind(first) == PathKind::directory : is_local_directory(first)) &&
                               !is_step_dir(first);
        if (!directory) {
            kind_ = o_.paths.size() == 1 ? "file" : "files";
            for (size_t k = 0; k < o_.paths.size(); ++k) {
                if (is_step_dir(o_.paths[k]))
                    throw Failure(kExitUsage,
                                  fmt::format("{}: a sharded step; ckpt report reads .npz and "
                                              "safetensors files (ckpt stats and ckpt verify read steps)",
                                              o_.paths[k]),
                                  CKPT_EUNSUPPORTED);
                Source s;
                s.path = o_.paths[k];
                s.reader = open_reader(s.path);
                s.step = step_of(s, static_cast<int64_t>(k));
                sources_.push_back(std::move(s));
            }
            // Files whose steps do not rise in the order given (two runs' checkpoints of one step, compared) are
            // placed by their positions, so each has a column of its own.
            for (size_t k = 1; k < sources_.size(); ++k)
                if (sources_[k].step <= sources_[k - 1].step) {
                    for (size_t j = 0; j < sources_.size(); ++j) sources_[j].step = static_cast<int64_t>(j);
                    break;
                }
            return;
        }
        kind_ = "run";
        struct Found {
            std::string path;
            int64_t step;
            bool sharded;  // as the listing says: no second look at each path
        };
        std::vector<Found> found;
        if (is_url(first) || is_manager_dir(first) || o_.subdir) {
            const CheckpointDir dir = open_checkpoint_dir(first, o_.subdir);
            for (int64_t idx : dir.indices) {
                const std::string path = dir.path_of(idx);
                found.push_back({path, idx, CheckpointDir::is_step(path)});
            }
        } else {
            int64_t position = 0;
            for (const NamedCheckpoint& c : named_checkpoints(first))
                found.push_back({c.path, checkpoint_index(c.name).value_or(position++), c.step});
        }
        for (const auto& [path, step, sharded] : found) {
            if (sharded) {
                warn("unsupported", "", step, fmt::format("{}: a sharded step, not read by ckpt report", path));
                continue;
            }
            Source s;
            s.path = path;
            s.step = step;
            try {
                s.reader = open_reader(path);
            } catch (const Failure& f) {  // a run's broken checkpoint is reported, the others still are
                warn("unreadable", "", step, f.what());
                continue;
            }
            sources_.push_back(std::move(s));
        }
        if (sources_.empty())
            throw Failure(kExitIo, fmt::format("{}: no checkpoints to report on", first), CKPT_ENOTFOUND);
    }

    // A file's step: the number in its name (0000000300.npz), else its "step" or "global_step" metadata, else its
    // position among the paths given (all files' positions where those steps do not rise in the order given).
    static int64_t step_of(const Source& s, int64_t position) {
        if (const auto idx = checkpoint_index(last_component(s.path))) return *idx;
        for (const char* key : {"step", "global_step"}) {
            const char* v = ckpt_reader_metadata(s.reader.get(), key);
            if (v == nullptr) continue;
            const auto n = number_in(v);
            if (n && *n >= 0 && *n < 9e18 && *n == std::floor(*n)) return static_cast<int64_t>(*n);
        }
        return position;
    }

    static Json checkpoint_json(const Source& s) {
        ckpt_reader* r = s.reader.get();
        Json j;
        j["step"] = s.step;
        j["path"] = s.path;
        j["bytes"] = ckpt_reader_file_size(r);
        const std::optional<uint64_t> shared = shared_bytes_of(s.path);
        j["shared_bytes"] = shared ? Json(*shared) : Json(nullptr);
        Json metadata = Json::object();
        for (size_t k = 0; k < ckpt_reader_metadata_count(r); ++k)
            metadata[ckpt_reader_metadata_key(r, k)] = ckpt_reader_metadata_value(r, k);
        j["metadata"] = metadata;
        return j;
    }

    // A curve for every numeric metadata entry: the manager's metrics ("ckpt.metric.loss") by their names, the
    // user's own keys as they are; the manager's other keys (times, format records) are no curves.
    Json metrics_json() const {
        std::vector<std::string> names;
        std::map<std::string, std::vector<Json>> values;
        for (size_t t = 0; t < sources_.size(); ++t) {
            ckpt_reader* r = sources_[t].reader.get();
            for (size_t k = 0; k < ckpt_reader_metadata_count(r); ++k) {
                std::string key = ckpt_reader_metadata_key(r, k);
                if (manager_key(key)) continue;
                key = metric_name(key).value_or(key);
                const auto v = number_in(ckpt_reader_metadata_value(r, k));
                if (!v) continue;
                auto& series = values[key];
                if (series.empty()) {
                    names.push_back(key);
                    series.assign(sources_.size(), nullptr);
                }
                series[t] = json_number(*v);
            }
        }
        Json out = Json::array();
        for (const std::string& name : names) {
            Json m;
            m["name"] = name;
            Json steps = Json::array();
            for (const Source& s : sources_) steps.push_back(s.step);
            m["steps"] = steps;
            m["values"] = values[name];
            const bool lower = lower_is_better(name), higher = !lower && higher_is_better(name);
            std::optional<size_t> best;
            for (size_t t = 0; t < sources_.size(); ++t) {
                const Json& v = values[name][t];
                if (!v.is_number() || (!lower && !higher)) continue;
                const double x = v.get<double>();
                // a tie goes to the later checkpoint, as the manager's best does
                if (!best || (lower ? x <= values[name][*best].get<double>() : x >= values[name][*best].get<double>()))
                    best = t;
            }
            m["best_step"] = best ? Json(sources_[*best].step) : Json(nullptr);
            m["better"] = lower ? Json("lower") : higher ? Json("higher") : Json(nullptr);
            out.push_back(m);
        }
        return out;
    }

    // Every array name: the newest checkpoint's in its order, then those only older ones have, newest first.
    std::vector<std::string> array_names() const {
        std::vector<std::string> names;
        std::map<std::string, bool> seen;
        for (size_t t = sources_.size(); t-- > 0;) {
            ckpt_reader* r = sources_[t].reader.get();
            for (size_t i = 0; i < ckpt_reader_count(r); ++i) {
                const std::string name = ckpt_reader_name(r, i);
                if (!seen[name]) {
                    seen[name] = true;
                    names.push_back(name);
                }
            }
        }
        return names;
    }

    // Reads the arrays on up to kWorkers threads, each with readers of its own (a reader serves one thread at a
    // time), an array at a time; the first failure stops them all and is thrown here.
    void report_arrays(const std::vector<std::string>& names, std::vector<ArrayResult>& results) {
        const size_t workers =
            std::min<size_t>({names.size(), kWorkers, std::max(1u, std::thread::hardware_concurrency())});
        std::atomic<size_t> next{0};
        std::atomic<bool> stop{false};
        std::vector<std::exception_ptr> failures(workers);
        const auto work = [&](size_t w) {
            try {
                std::vector<Reader> own;
                std::vector<ckpt_reader*> readers;
                for (const Source& s : sources_) {
                    if (w != 0) own.push_back(open_reader(s.path));
                    readers.push_back(w == 0 ? s.reader.get() : own.back().get());
                }
                for (size_t k; !stop && (k = next++) < names.size();)
                    results[k] = report_array(names[k], readers, kSideBySideBytes / workers);
            } catch (...) {
                failures[w] = std::current_exception();
                stop = true;
            }
        };
        std::vector<std::thread> threads;
        for (size_t w = 1; w < workers; ++w) threads.emplace_back(work, w);
        work(0);
        for (std::thread& t : threads) t.join();
        for (const std::exception_ptr& f : failures)
            if (f) std::rethrow_exception(f);
    }

    void advance(uint64_t bytes) {
        const std::lock_guard<std::mutex> lock(progress_mutex_);
        progress_.advance(bytes);
    }

    // One array in every checkpoint that holds it, read side by side a piece at a time: each checkpoint's norm
    // and NaN/Inf counts, each change from the checkpoint before, the newest one's statistics; then the newest
    // one's histogram in a second pass.
    ArrayResult report_array(const std::string& name, const std::vector<ckpt_reader*>& readers, size_t budget) {
        std::vector<Member> members;
        for (size_t t = 0; t < sources_.size(); ++t) {
            size_t i = 0;
            if (ckpt_reader_find(readers[t], name.c_str(), &i) != CKPT_OK) continue;
            Member m;
            m.source = t;
            m.index = i;
            m.dtype = ckpt_reader_dtype(readers[t], i);
            const int64_t* shape = ckpt_reader_shape(readers[t], i);
            m.shape.assign(shape, shape + ckpt_reader_ndim(readers[t], i));
            members.push_back(std::move(m));
        }
        const bool in_newest = !members.empty() && members.back().source + 1 == sources_.size();
        for (size_t k = 1; k < members.size(); ++k)
            if (members[k].dtype == members[k - 1].dtype && members[k].shape == members[k - 1].shape &&
                has_statistics(members[k].dtype))
                members[k].change.emplace();
        const size_t piece = std::clamp(budget / std::max<size_t>(members.size(), 1), kMinPieceBytes, kSideBySidePiece);
        for (Member& m : members)
            m.pieces = std::make_unique<PieceReader>(readers[m.source], m.index, sources_[m.source].path, piece);

        // The newest checkpoint's array gets its full statistics, which include what the others' Moments hold.
        Stats newest(in_newest ? members.back().dtype : CKPT_FLOAT64);
        for (bool any = true; any;) {
            any = false;
            for (size_t k = 0; k < members.size(); ++k) {
                Member& m = members[k];
                if (!m.active || !(m.active = m.pieces->next(m.piece))) continue;
                any = true;
                advance(m.piece.count() * m.piece.itemsize);
                if (in_newest && k + 1 == members.size())
                    newest.add_piece(m.piece);
                else if (has_statistics(m.dtype))
                    m.moments.add_piece(m.piece);
                if (m.change && members[k - 1].active) m.change->add_pieces(members[k - 1].piece, m.piece);
            }
        }
        ArrayResult result;
        if (in_newest) {
            members.back().moments = newest.moments();
            result.array = array_json(name, readers.back(), members.back(), newest);
        }
        add_changes(result, name, members);
        return result;
    }

    Json array_json(const std::string& name, ckpt_reader* r, const Member& m, const Stats& st) {
        Json j = {{"name", name},
                  {"dtype", ckpt_dtype_name(m.dtype)},
                  {"shape", m.shape},
                  {"bytes", ckpt_reader_nbytes(r, m.index)}};
        j.update(st.to_json());
        j["inf"] = st.numeric() ? Json(st.pos_inf + st.neg_inf) : Json(nullptr);
        if (st.numeric() && st.finite != 0) {
            Histogram h(st.min, st.max);
            read_pieces(r, m.index, sources_[m.source].path, kPieceBytes, [&](const ArrayView& piece) {
                h.add_piece(piece);
                advance(piece.count() * piece.itemsize);
            });
            j["histogram"] = h.to_json();
        } else {
            j["histogram"] = nullptr;
            advance(ckpt_reader_nbytes(r, m.index));
        }
        return j;
    }

    void add_changes(ArrayResult& result, const std::string& name, const std::vector<Member>& members) {
        const auto warn = [&](const char* kind, int64_t step, const std::string& message) {
            result.warnings.push_back(warning(kind, name, step, message));
        };
        // NaN and Inf: where they first appear.
        for (const bool nan : {true, false})
            for (const Member& m : members) {
                const uint64_t count = nan ? m.moments.nan : m.moments.inf;
                if (count == 0) continue;
                const int64_t step = sources_[m.source].step;
                warn(nan ? "nan" : "inf", step,
                     fmt::format("'{}' holds {} {} at step {}{}", name, count, nan ? "NaN" : "infinite values", step,
                                 members.size() == 1      ? ""
                                 : &m == &members.front() ? " (its first checkpoint)"
                                                          : " (the first checkpoint with them)"));
                break;
            }
        if (members.size() < 2) return;
        Json steps = Json::array(), relative = Json::array();
        bool frozen = true;
        bool jumped = false;
        for (size_t k = 1; k < members.size(); ++k) {
            const Member &a = members[k - 1], &b = members[k];
            steps.push_back(sources_[b.source].step);
            if (!b.change) {  // a new dtype or shape: no change to measure
                relative.push_back(nullptr);
                frozen = false;
                result.differences.push_back({{"name", name},
                                              {"max_abs", nullptr},
                                              {"relative_l2", nullptr},
                                              {"note", "the dtype or shape differs"}});
                continue;
            }
            const bool finite = a.moments.nan + a.moments.inf + b.moments.nan + b.moments.inf == 0;
            const double before = std::sqrt(a.moments.sum_squares), after = std::sqrt(b.moments.sum_squares);
            const double diff = std::sqrt(b.change->diff_squares);
            const double rel = !finite ? std::nan("") : before > 0 ? diff / before : diff == 0 ? 0 : HUGE_VAL;
            relative.push_back(json_number(rel));
            if (rel != 0) frozen = false;
            const int64_t from = sources_[a.source].step, to = sources_[b.source].step;
            if (!jumped && finite && before > 0 && after > kJumpFactor * before) {
                jumped = true;
                warn("jump", to,
                     fmt::format("'{}': its norm grew {}-fold from step {} to step {} ({} to {})", name,
                                 number_text(after / before), from, to, number_text(before), number_text(after)));
            }
            result.differences.push_back(
                {{"name", name}, {"max_abs", json_number(b.change->max_abs)}, {"relative_l2", json_number(rel)}});
        }
        if (frozen) {
            const int64_t first = sources_[members.front().source].step, last = sources_[members.back().source].step;
            warn("frozen", first,
                 fmt::format("'{}' never changed over its {} checkpoints, from step {} to step {}", name,
                             members.size(), first, last));
        }
        result.change = {{"name", name}, {"steps", steps}, {"relative_change", relative}};
    }

    Json only_in_json() const {
        Json out = Json::array();
        for (size_t t = 0; t < 2; ++t) {
            Json names = Json::array();
            ckpt_reader* mine = sources_[t].reader.get();
            ckpt_reader* other = sources_[1 - t].reader.get();
            for (size_t i = 0; i < ckpt_reader_count(mine); ++i) {
                size_t unused = 0;
                if (ckpt_reader_find(other, ckpt_reader_name(mine, i), &unused) != CKPT_OK)
                    names.push_back(ckpt_reader_name(mine, i));
            }
            out.push_back({{"path", sources_[t].path}, {"names", names}});
        }
        return out;
    }

    static Json warning(const std::string& kind, const std::string& name, int64_t step, const std::string& message) {
        return {
            {"kind", kind}, {"name", name.empty() ? Json(nullptr) : Json(name)}, {"step", step}, {"message", message}};
    }

    void warn(const std::string& kind, const std::string& name, int64_t step, const std::string& message) {
        warnings_.push_back(warning(kind, name, step, message));
    }

    // Warnings that say the run is broken first (NaN, Inf, unreadable checkpoints), then jumps, then frozen
    // arrays; by step within each kind.
    void sort_warnings() {
        const auto rank = [](const Json& w) {
            const std::string k = w["kind"];
            return k == "nan" ? 0 : k == "inf" ? 1 : k == "unreadable" ? 2 : k == "jump" ? 3 : k == "frozen" ? 4 : 5;
        };
        std::stable_sort(warnings_.begin(), warnings_.end(), [&](const Json& a, const Json& b) {
            return rank(a) != rank(b) ? rank(a) < rank(b) : a["step"].get<int64_t>() < b["step"].get<int64_t>();
        });
    }

    const ReportOptions& o_;
    std::string kind_;
    std::vector<Source> sources_;
    Json doc_ = Json::object();
    Json warnings_ = Json::array();
    Progress progress_;
    std::mutex progress_mutex_;
};

// Writes `text` to `path` through a temporary beside it, renamed over it when complete: a report that fails half
// way leaves the previous one.
void write_page(const std::string& path, const std::string& text) {
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) fail_errno(errno, path, "cannot write the report");
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.close();
        if (!out) {
            const int err = errno;
            std::remove(temporary.c_str());
            fail_errno(err, path, "cannot write the report");
        }
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        const int err = errno;
        std::remove(temporary.c_str());
        fail_errno(err, path, "cannot write the report");
    }
}

int run_report(const ReportOptions& o) {
    if (o.out.empty() && !o.json)
        throw Failure(kExitUsage, "ckpt report: say where the page goes (-o report.html), or ask for --json");
    if (o.paths.size() > 1 && o.subdir)
        throw Failure(kExitUsage, "ckpt report: --subdir goes with one directory, not with files");
    Report report(o);
    const Json doc = report.build();
    if (!o.out.empty()) write_page(o.out, report_page(doc));
    if (o.json) print_json(doc);
    return kExitOk;
}

}  // namespace

Command add_report(CLI::App& parent) {
    auto o = std::make_shared<ReportOptions>();
    CLI::App* app = parent.add_subcommand(
        "report",
        "A run's checkpoints as one HTML page: metric curves, how much each array changed, histograms, "
        "warnings");
    app->footer(
        "PATH is a checkpoint manager's directory (local or s3://): a run, drawn as curves of every numeric metadata "
        "entry over the steps (the best checkpoint marked), a map of each array's relative change between "
        "consecutive checkpoints, and the newest checkpoint's arrays (statistics and a 64-bin histogram each). One "
        "file gets the table and histograms; two files are compared array by array; more files are a run in the "
        "order given. Warnings come first: NaN or Inf in an array (and where it first appears), an array that never "
        "changed, a norm that grew more than tenfold between two checkpoints. The page fetches nothing (a Content "
        "Security Policy forbids it) and works offline, in light and dark, printed too. Each array is read once "
        "for all checkpoints, a piece at a time, so memory stays bounded; the newest checkpoint's arrays twice.");
    app->add_option("PATH", o->paths, "a manager's directory, or .npz / safetensors files")->required();
    app->add_option("-o,--output", o->out, "the HTML page to write (replaced only once complete)");
    app->add_option("--subdir", o->subdir, "the manager's checkpoint directory under PATH (default: ckpt, or PATH)");
    app->add_flag("--json", o->json, "the numbers as one JSON document on stdout (docs/cli.md)");
    return {app, [o] { return run_report(*o); }};
}

}  // namespace ckpt_tool
