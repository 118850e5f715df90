// SPDX-License-Identifier: Apache-2.0
#include "sharded/sharded_step.hpp"

#include "core/decimal_index.hpp"
#include "core/error.hpp"
#include "core/newest_readable.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

namespace ckpt::core {

namespace {

using json = nlohmann::ordered_json;

// What a rank tells the others after its part of a collective step: its status, and what it saved.
struct Report {
    int code = 0;
    std::string message;
    json vars = json::array();  // save: what the rank saved; restore: rank 0's candidates
    bool retry = false;         // restore: an older step may do
};

std::string encode(const Report& r) {
    return json{{"code", r.code}, {"message", r.message}, {"vars", r.vars}, {"retry", r.retry}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

Report decode(const std::string& text, size_t rank) {
    try {
        const json j = json::parse(text);
        Report r;
        r.code = j.at("code").get<int>();
        r.message = j.at("message").get<std::string>();
        r.vars = j.at("vars");
        r.retry = j.at("retry").get<bool>();
        return r;
    } catch (const json::exception& e) {
        fail(Code::error, "rank {} sent a malformed status: {}", rank, e.what());
    }
}

template <typename Body>
Report run(Body&& body) {
    Report r;
    try {
        body(r);
    } catch (const CallerError& e) {
        r.code = static_cast<int>(e.code());
        r.message = e.what();
    } catch (const Error& e) {
        r.code = static_cast<int>(e.code());
        r.message = e.what();
        r.retry = unreadable_checkpoint(e.code());  // an older step may be fine
    } catch (const std::bad_alloc&) {
        r.code = static_cast<int>(Code::no_memory);
        r.message = "out of memory";
    } catch (const std::exception& e) {
        r.code = static_cast<int>(Code::error);
        r.message = e.what();
    }
    return r;
}

// The error every rank throws: the code of the first failing rank, and every failing rank's message.
std::string failure_text(const std::string& what, const std::vector<Report>& reports, int* code) {
    std::string text;
    size_t failed = 0;
    for (size_t r = 0; r < reports.size(); ++r) {
        if (reports[r].code == 0) continue;
        if (failed++ == 0) *code = reports[r].code;
        text += fmt::format("{}rank {} of {}: {}", text.empty() ? "" : "; ", r, reports.size(), reports[r].message);
    }
    return fmt::format("{} failed on {} rank{}: {}", what, failed, failed == 1 ? "" : "s", text);
}

json describe(const VarCollection& vars) {
    json out = json::array();
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        json v{{"name", vars.name(i)}, {"dtype", dtype_name(a.dtype())}, {"itemsize", a.itemsize()}, {"shape", a.shape()}};
        if (const auto& rows = vars.rows(i)) v["rows"] = json::array({rows->begin, rows->global_rows});
        out.push_back(std::move(v));
    }
    return out;
}

// Rank 0: the manifest from every rank's description of its shard. A whole variable must be saved by one rank;
// the pieces of a split one must agree on dtype, global rows and the other dimensions, and tile the rows.
Manifest build_manifest(int64_t index, const Metadata& metadata, const std::vector<Report>& reports) {
    Manifest m;
    m.step = index;
    m.world_size = static_cast<int64_t>(reports.size());
    m.metadata = metadata;
    std::map<std::string, size_t> at;  // name -> position in m.variables
    for (size_t r = 0; r < reports.size(); ++r) {
        for (const json& d : reports[r].vars) {
            ManifestVariable v;
            v.name = d.at("name").get<std::string>();
            v.dtype = *dtype_named(d.at("dtype").get<std::string>());
            v.itemsize = d.at("itemsize").get<size_t>();
            v.shape = d.at("shape").get<std::vector<int64_t>>();
            const auto rank = static_cast<int64_t>(r);
            auto found = at.find(v.name);
            if (!d.contains("rows")) {
                if (found != at.end())
                    fail(Code::invalid, "variable '{}' is saved whole by rank {} and also by another rank (save a "
                                        "replicated variable from one rank only, or split its rows)", v.name, r);
                v.shard = rank;
                at.emplace(v.name, m.variables.size());
                m.variables.push_back(std::move(v));
                continue;
            }
            const int64_t begin = d.at("rows").at(0).get<int64_t>(), global = d.at("rows").at(1).get<int64_t>();
            ManifestPiece piece{rank, begin, begin + v.shape[0]};
            std::vector<int64_t> global_shape = v.shape;
            global_shape[0] = global;
            if (found == at.end()) {
                v.shape = global_shape;
                v.pieces.push_back(piece);
                at.emplace(v.name, m.variables.size());
                m.variables.push_back(std::move(v));
                continue;
            }
            ManifestVariable& known = m.variables[found->second];
            if (!known.split() || known.dtype != v.dtype || known.itemsize != v.itemsize || known.shape != global_shape)
                fail(Code::invalid, "variable '{}': rank {} saves a piece of a different dtype or global shape than "
                                    "rank {}", v.name, r, known.split() ? known.pieces[0].shard : known.shard);
            known.pieces.push_back(piece);
        }
    }
    for (ManifestVariable& v : m.variables) {
        if (!v.split()) continue;
        std::stable_sort(v.pieces.begin(), v.pieces.end(),
                         [](const ManifestPiece& a, const ManifestPiece& b) { return a.row_begin < b.row_begin; });
        int64_t next = 0;
        for (const ManifestPiece& p : v.pieces) {
            if (p.row_begin != next)
                fail(Code::invalid, "variable '{}': the ranks' rows do not tile [0, {}): rank {} has [{}, {}) after "
                                    "row {}", v.name, v.shape[0], p.shard, p.row_begin, p.row_end, next);
            next = p.row_end;
        }
        if (next != v.shape[0]) fail(Code::invalid, "variable '{}': the ranks' rows end at {} of {}", v.name, next, v.shape[0]);
    }
    return m;
}

void remove_quietly(Storage& storage, const std::string& dir) {
    try {
        storage.remove_tree(dir);
    } catch (const Error&) {
        // Best effort: what is left is a stale temporary, removed by the next manager that opens the directory.
    }
}

// Rank 0, once every shard is durable: the manifest, then the rename that commits the step — or, on a storage that
// cannot rename directories (where the shards went straight into the step's directory), the manifest alone.
void commit(Storage& storage, const std::string& dir, const std::string& staging, const std::string& target,
            const Manifest& manifest) {
    const std::string text = manifest_to_json(manifest);
    write_atomically(storage, join_path(staging, std::string(kManifestName)),
                     [&](OutputFile& out) { out.write(text.data(), text.size()); });
    if (staging == target) return storage.sync_dir(dir);
    std::string aside;
    const auto existing = storage.list_dirs(dir);
    if (std::find(existing.begin(), existing.end(), base_name(target)) != existing.end()) {
        aside = join_path(dir, temp_name_for(base_name(target) + ".old"));
        storage.rename_dir(target, aside);
    }
    try {
        storage.rename_dir(staging, target);
    } catch (...) {
        if (!aside.empty()) {
            try {
                storage.rename_dir(aside, target);
            } catch (...) {
            }
        }
        throw;
    }
    storage.sync_dir(dir);
    if (!aside.empty()) remove_quietly(storage, aside);
}

bool has_dir(Storage& storage, const std::string& dir, const std::string& name) {
    const auto names = storage.list_dirs(dir);
    return std::find(names.begin(), names.end(), name) != names.end();
}

// Rank 0: where the shards of step `target` go. A temporary directory renamed at the commit; on a storage that
// cannot rename directories, the step's own directory, emptied first (its manifest before anything else, so that
// no reader ever sees a manifest without its shards).
std::string make_staging(Storage& storage, const std::string& dir, const std::string& target) {
    if (!storage.renames_dirs()) {
        if (has_dir(storage, dir, base_name(target))) remove_step(storage, target);
        storage.make_dirs(target);
        return target;
    }
    std::string staging = join_path(dir, temp_name_for(base_name(target)));
    storage.make_dirs(staging);
    return staging;
}

}  // namespace

std::string step_dir_name(int64_t index) { return padded_index(index); }

std::optional<int64_t> step_dir_index(const std::string& name) { return parse_padded_index(name); }

void remove_step(Storage& storage, const std::string& step_dir) {
    try {
        storage.remove(join_path(step_dir, std::string(kManifestName)));
    } catch (const Error& e) {
        if (e.code() != Code::not_found) throw;
    }
    storage.remove_tree(step_dir);
}

bool has_manifest(Storage& storage, const std::string& step_dir) {
    const auto files = storage.list(step_dir);
    return std::find(files.begin(), files.end(), std::string(kManifestName)) != files.end();
}

bool is_step_temp(const std::string& name) {
    if (!is_temp_name(name)) return false;
    std::string inner = name.substr(1, name.rfind(".tmp-") - 1);
    constexpr std::string_view kOld = ".old";
    if (inner.size() > kOld.size() && inner.compare(inner.size() - kOld.size(), kOld.size(), kOld) == 0)
        inner.resize(inner.size() - kOld.size());
    return step_dir_index(inner).has_value();
}

ShardedSave begin_sharded_save(Comm& comm, Storage& storage, const std::string& dir, int64_t index) {
    ShardedSave save;
    save.index = index;
    save.dir = dir;
    save.target = join_path(dir, step_dir_name(index));
    save.what = fmt::format("{}: sharded save of step {}", save.target, index);
    // Rank 0 makes the staging directory; every rank learns its name, or why there is none.
    Report made;
    if (comm.rank() == 0) made = run([&](Report& r) { r.message = make_staging(storage, dir, save.target); });
    made = decode(broadcast_string(comm, comm.rank() == 0 ? encode(made) : std::string(), 0), 0);
    if (made.code != 0)
        throw Error(static_cast<Code>(made.code),
                    fmt::format("{} failed on rank 0 of {}: {}", save.what, comm.size(), made.message));
    save.staging = made.message;
    return save;
}

void describe_shard(ShardedSave& save, const VarCollection& vars) {
    save.description = describe(vars).dump(-1, ' ', false, json::error_handler_t::replace);
    save.metadata = vars.metadata();
}

std::string shard_path(const ShardedSave& save, const Comm& comm) {
    return join_path(save.staging, shard_name(comm.rank(), comm.size()));
}

void finish_sharded_save(Comm& comm, Storage& storage, const ShardedSave& save, std::exception_ptr failed,
                         const OnCommit& on_commit) {
    const Report mine = run([&](Report& r) {
        if (failed) std::rethrow_exception(failed);
        r.vars = json::parse(save.description);
    });
    std::vector<Report> reports;
    for (const std::string& text : all_gather_strings(comm, encode(mine)))
        reports.push_back(decode(text, reports.size()));

    // Rank 0 commits when every shard is durable, and removes the staging directory otherwise; every rank then
    // learns the outcome from rank 0, so all return success or all throw the same error.
    Report outcome;
    if (comm.rank() == 0) {
        const auto durable = std::chrono::steady_clock::now();
        int code = 0;
        const bool all_ok = std::all_of(reports.begin(), reports.end(), [](const Report& r) { return r.code == 0; });
        if (!all_ok) {
            outcome.message = failure_text(save.what, reports, &code);
            outcome.code = code;
            remove_quietly(storage, save.staging);
        } else {
            outcome = run([&](Report&) {
                commit(storage, save.dir, save.staging, save.target, build_manifest(save.index, save.metadata, reports));
            });
            const double commit_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - durable).count();
            if (outcome.code != 0) {
                outcome.message = fmt::format("{} failed on rank 0 of {}: {}", save.what, comm.size(), outcome.message);
                remove_quietly(storage, save.staging);
            } else if (on_commit) {
                try {
                    on_commit(commit_ms);
                } catch (...) {
                    // Best effort after the commit (retention logs its own failures): the save has succeeded.
                }
            }
        }
    }
    outcome = decode(broadcast_string(comm, comm.rank() == 0 ? encode(outcome) : std::string(), 0), 0);
    if (outcome.code != 0) throw Error(static_cast<Code>(outcome.code), outcome.message);
}

void save_sharded(Comm& comm, Storage& storage, const std::string& dir, int64_t index, const VarCollection& vars,
                  const NpzWriteOptions& options, std::exception_ptr failed, const OnCommit& on_commit) {
    ShardedSave save = begin_sharded_save(comm, storage, dir, index);
    // Every rank writes its shard (durably: a temporary renamed, the directory synced) and says how it went.
    if (!failed) {
        try {
            describe_shard(save, vars);
            save_npz(storage, shard_path(save, comm), vars, options);
        } catch (...) {
            failed = std::current_exception();
        }
    }
    finish_sharded_save(comm, storage, save, failed, on_commit);
}

ShardedStep::ShardedStep(Storage& storage, std::string step_dir, NpzReadOptions options)
    : storage_(storage), dir_(std::move(step_dir)), options_(std::move(options)) {
    const std::string path = join_path(dir_, std::string(kManifestName));
    manifest_ = manifest_from_json(read_small_file(storage_, path, kMaxManifestBytes, "manifest"), path);
    for (int64_t r = 0; r < manifest_.world_size; ++r) shard_names_.push_back(shard_name(r, manifest_.world_size));
}

NpzReader& ShardedStep::shard(int64_t rank) {
    auto it = shards_.find(rank);
    if (it != shards_.end()) return it->second;
    NpzReader reader = NpzReader::open(storage_, join_path(dir_, shard_name(rank, manifest_.world_size)), options_);
    return shards_.try_emplace(rank, std::move(reader)).first->second;
}

// The entry of v (or of its piece) in a shard, checked against what the manifest says it holds.
size_t ShardedStep::entry_of(const NpzReader& shard, const ManifestVariable& v, const std::vector<int64_t>& shape) {
    const std::optional<size_t> at = shard.find(v.name);
    if (!at) fail(Code::format, "{}: no array '{}', which the manifest records in it", shard.label(), v.name);
    const NpzReader::Entry& e = shard.entry(*at);
    if (e.header.dtype != v.dtype || e.header.itemsize != v.itemsize || e.header.shape != shape)
        fail(Code::format, "{}: '{}' is not the {} array of shape {} that the manifest records", shard.label(), v.name,
             dtype_name(v.dtype), fmt::join(shape, "x"));
    return *at;
}

void ShardedStep::read_rows(const ManifestVariable& v, int64_t first, int64_t count, void* dst) {
    Reads reads;
    plan_rows(v, first, count, dst, reads);
    run(reads);
}

// Whole members (a whole variable, or a piece wanted entirely) are queued by shard, to be read together with the
// reader's parallel pipeline (and their CRCs checked); part of a stored member is read now, by a ranged read.
void ShardedStep::plan_rows(const ManifestVariable& v, int64_t first, int64_t count, void* dst, Reads& reads) {
    const auto whole_or_rows = [&](int64_t rank, const std::vector<int64_t>& shape, int64_t from, int64_t n,
                                   void* out) {
        NpzReader& s = shard(rank);
        const size_t entry = entry_of(s, v, shape);
        if (shape.empty() || (from == 0 && n == shape[0]))
            reads[rank].push_back({entry, out});
        else
            s.read_rows(entry, from, n, out);
    };
    if (!v.split()) return whole_or_rows(v.shard, v.shape, first, count, dst);
    const size_t row_bytes = v.shape[0] == 0 ? 0 : *checked_nbytes(v.shape.data() + 1, v.shape.size() - 1, v.itemsize);
    const int64_t end = first + count;
    for (const ManifestPiece& p : v.pieces) {
        const int64_t from = std::max(first, p.row_begin), to = std::min(end, p.row_end);
        if (from >= to) continue;
        std::vector<int64_t> shape = v.shape;
        shape[0] = p.row_end - p.row_begin;
        whole_or_rows(p.shard, shape, from - p.row_begin, to - from,
                      static_cast<char*>(dst) + row_bytes * static_cast<size_t>(from - first));
    }
}

void ShardedStep::run(const Reads& reads) {
    for (const auto& [rank, jobs] : reads) shard(rank).read_entries(jobs);
}

void ShardedStep::restore(VarCollection& vars, const Renamer& rename, bool partial) {
    vars.check_restorable(dir_);
    for (size_t i = 0; i < vars.size(); ++i) vars.set_restored(i, false);
    const auto stored = [&](size_t i) {
        const ManifestVariable& v = manifest_.variables[i];
        return StoredArray{v.name, v.dtype, v.itemsize, v.shape};
    };
    const std::vector<std::optional<size_t>> source = match_stored(
        vars, manifest_.variables.size(), stored, RestoreMatch{dir_, "step", rename, partial, /*global_rows=*/true});
    Reads reads;
    for (size_t i = 0; i < vars.size(); ++i) {
        if (!source[i]) continue;  // partial: not in the step
        const Array& a = vars.array(i);
        const auto& rows = vars.rows(i);
        const int64_t first = rows ? rows->begin : 0;
        const int64_t count = a.shape().empty() ? 1 : a.shape()[0];
        plan_rows(manifest_.variables[*source[i]], first, count, a.data(), reads);
    }
    run(reads);
    for (size_t i = 0; i < vars.size(); ++i) vars.set_restored(i, source[i].has_value());
    vars.metadata() = manifest_.metadata;
}

VarCollection ShardedStep::read_all() {
    VarCollection out;
    Reads reads;
    for (const ManifestVariable& v : manifest_.variables) {
        Array a = Array::allocate(v.dtype, v.itemsize, v.shape, false);
        plan_rows(v, 0, v.shape.empty() ? 1 : v.shape[0], a.data(), reads);
        out.add(v.name, std::move(a));
    }
    run(reads);
    out.metadata() = manifest_.metadata;
    return out;
}

int64_t restore_collectively(Comm& comm, const std::vector<int64_t>& candidates, bool fallback, const std::string& dir,
                             const std::function<void(int64_t)>& attempt,
                             const std::function<void(const std::string&)>& skipped) {
    Report list;
    if (comm.rank() == 0) list.vars = candidates;
    list = decode(broadcast_string(comm, comm.rank() == 0 ? encode(list) : std::string(), 0), 0);
    const auto agreed = list.vars.get<std::vector<int64_t>>();
    // Every rank sees every rank's outcome of each attempt, so all go on to the same older step or stop together.
    const auto attempt_everywhere = [&](int64_t index) -> std::optional<FailedAttempt> {
        const Report mine = run([&](Report&) { attempt(index); });
        std::vector<Report> reports;
        for (const std::string& text : all_gather_strings(comm, encode(mine)))
            reports.push_back(decode(text, reports.size()));
        if (std::all_of(reports.begin(), reports.end(), [](const Report& r) { return r.code == 0; }))
            return std::nullopt;
        int code = 0;
        const std::string text = failure_text(fmt::format("{}: restoring step {}", dir, index), reports, &code);
        const bool retry =
            std::all_of(reports.begin(), reports.end(), [](const Report& r) { return r.code == 0 || r.retry; });
        return FailedAttempt{std::make_exception_ptr(Error(static_cast<Code>(code), text)), retry};
    };
    return newest_readable(agreed, fallback, dir, attempt_everywhere, skipped);
}

}  // namespace ckpt::core
