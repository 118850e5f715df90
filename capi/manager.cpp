// SPDX-License-Identifier: Apache-2.0
// ckpt_manager: the C face of ckpt::core::CheckpointManager.
#include "manager/checkpoint.hpp"
#include "comm.hpp"
#include "guard.hpp"
#include "versioned.hpp"
#include "url_storage.hpp"
#include "manager_clock.hpp"
#include "core/utf8.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>

using ckpt::capi::guard;
using ckpt::capi::require;
using ckpt::capi::unknown_version;
using ckpt::core::Code;

struct ckpt_manager {
    std::unique_ptr<ckpt::core::CheckpointManager> manager;
    std::string url_prefix;  // "s3://bucket/" for a logdir given as a URL: ckpt_manager_path gives URLs back
};

namespace {

ckpt::core::CheckpointManager& manager_of(ckpt_manager* m, const char* function) {
    require(m, function, "m");
    return *m->manager;
}

constexpr ckpt::capi::VersionedStruct<ckpt_manager_options, 5> kManagerOptions{
    {offsetof(ckpt_manager_options, keep_best), offsetof(ckpt_manager_options, max_staging_bytes),
     offsetof(ckpt_manager_options, comm), offsetof(ckpt_manager_options, full_every), sizeof(ckpt_manager_options)}};
static_assert(kManagerOptions.current == CKPT_MANAGER_OPTIONS_VERSION && kManagerOptions.consistent());
constexpr ckpt_manager_options kManagerDefaults = CKPT_MANAGER_OPTIONS_INIT;

std::mutex clock_mutex;
std::function<int64_t()>& manager_clock() {
    static std::function<int64_t()> clock;
    return clock;
}

std::optional<int64_t> index_arg(int64_t idx, const char* function) {
    if (idx == CKPT_LATEST) return std::nullopt;
    if (idx < 0) ckpt::core::fail(Code::invalid, "{}: index {} is neither >= 0 nor CKPT_LATEST", function, idx);
    return idx;
}

}  // namespace

extern "C" {

CKPT_API int ckpt_manager_options_init(ckpt_manager_options* opts, uint32_t version) {
    return guard([&] {
        require(opts, "ckpt_manager_options_init", "opts");
        if (!kManagerOptions.known(version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_manager_options_init", "", version, kManagerOptions.current));
        kManagerOptions.init(opts, version, kManagerDefaults);
    });
}

CKPT_API int ckpt_manager_open(ckpt_manager** out, const char* logdir, const ckpt_manager_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_manager_open", "out");
        require(logdir, "ckpt_manager_open", "logdir");
        if (opts != nullptr && !kManagerOptions.known(opts->version))
            ckpt::core::fail(Code::invalid, "{}",
                             unknown_version("ckpt_manager_open", "options", opts->version, kManagerOptions.current));
        const ckpt_manager_options o =
            opts != nullptr ? kManagerOptions.upgrade(*opts, kManagerDefaults) : kManagerDefaults;
        constexpr uint32_t kKnownFlags = CKPT_MANAGER_ASYNC | CKPT_MANAGER_NO_FALLBACK | CKPT_MANAGER_NO_MAKEDIR |
                                         CKPT_MANAGER_VERBOSE | CKPT_MANAGER_READ_ONLY | CKPT_MANAGER_FULL_SAVES;
        if ((o.flags & ~kKnownFlags) != 0)
            ckpt::core::fail(Code::invalid, "ckpt_manager_open: unknown flags {}", o.flags);
        if (o.best_mode != CKPT_BEST_MIN && o.best_mode != CKPT_BEST_MAX)
            ckpt::core::fail(Code::invalid,
                             "ckpt_manager_open: best_mode {} is neither CKPT_BEST_MIN nor CKPT_BEST_MAX", o.best_mode);
        // NULL is "no best metric"; "" would be a metric without a name.
        if (o.best_metric != nullptr && o.best_metric[0] == '\0')
            ckpt::core::fail(Code::invalid, "ckpt_manager_open: best_metric is empty (NULL means none)");
        const ckpt_options npz = ckpt::capi::checked_options(o.npz, "ckpt_manager_open");

        ckpt::core::CheckpointManager::Options m;
        m.keep = o.keep;
        m.keep_every = o.keep_every;
        m.keep_best = o.keep_best;
        if (o.best_metric != nullptr) m.best_metric = o.best_metric;
        m.best_max = o.best_mode == CKPT_BEST_MAX;
        m.keep_seconds = o.keep_seconds;
        m.save_every_steps = o.save_every_steps;
        m.save_every_seconds = o.save_every_seconds;
        {
            std::lock_guard<std::mutex> lock(clock_mutex);
            m.now_ns = manager_clock();
        }
        m.async = (o.flags & CKPT_MANAGER_ASYNC) != 0;
        m.fallback = (o.flags & CKPT_MANAGER_NO_FALLBACK) == 0;
        m.make_dir = (o.flags & CKPT_MANAGER_NO_MAKEDIR) == 0;
        m.read_only = (o.flags & CKPT_MANAGER_READ_ONLY) != 0;
        m.incremental = (o.flags & CKPT_MANAGER_FULL_SAVES) == 0;
        m.full_every = o.full_every;
        m.queue_depth = o.queue_depth == 0 ? 1 : o.queue_depth;
        // The npz options' format is the checkpoints' (AUTO: .npz, the manager's names having no other to follow).
        m.format = npz.format == CKPT_FORMAT_SAFETENSORS ? ckpt::core::Format::safetensors : ckpt::core::Format::npz;
        if (npz.max_shard_bytes > 0)
            ckpt::core::fail(Code::invalid,
                             "ckpt_manager_open: {}: a manager saves one file per checkpoint; "
                             "max_shard_bytes is for ckpt_save",
                             logdir);
        m.npz_write = ckpt::capi::write_options(npz).npz;
        m.npz_read = ckpt::capi::read_options(npz).npz;
        m.npz_read.layout = ckpt::core::Layout::automatic;  // the npz layout says how to write; reading detects either
        m.rename = ckpt::capi::renamer(npz);
        m.partial = (npz.flags & CKPT_PARTIAL) != 0;
        m.max_staging_bytes = o.max_staging_bytes;
        m.comm = ckpt::capi::comm_of(o.comm);
        ckpt::capi::Located at = ckpt::capi::locate(o.storage, logdir);
        m.storage = std::move(at.storage);
        if (o.log != nullptr) {
            m.log = [fn = o.log, payload = o.log_payload](int level, const std::string& message) {
                fn(level, message.c_str(), payload);
            };
        } else if ((o.flags & CKPT_MANAGER_VERBOSE) != 0) {
            m.log = [](int, const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); };
        }
        const std::string subdir = o.subdir != nullptr ? o.subdir : "ckpt";
        const std::string dir = subdir.empty() ? at.path : ckpt::core::join_path(at.path, subdir);
        auto handle = std::make_unique<ckpt_manager>();
        handle->manager = std::make_unique<ckpt::core::CheckpointManager>(dir, std::move(m));
        handle->url_prefix = at.url_prefix;
        *out = handle.release();
    });
}

CKPT_API int ckpt_manager_save(ckpt_manager* m, const ckpt_vars* vars, int64_t idx) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_save");
        require(vars, "ckpt_manager_save", "vars");
        manager.save(vars->vc, idx);
    });
}

CKPT_API int ckpt_manager_save_metrics(ckpt_manager* m, const ckpt_vars* vars, int64_t idx,
                                       const char* const* names, const double* values, size_t n) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_save_metrics");
        require(vars, "ckpt_manager_save_metrics", "vars");
        if (n > 0) {
            require(names, "ckpt_manager_save_metrics", "names");
            require(values, "ckpt_manager_save_metrics", "values");
        }
        ckpt::core::Metrics metrics;
        metrics.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            if (names[i] == nullptr) ckpt::core::fail(Code::invalid, "ckpt_manager_save_metrics: names[{}] is NULL", i);
            metrics.emplace_back(names[i], values[i]);
        }
        manager.save(vars->vc, idx, metrics);
    });
}

CKPT_API int ckpt_manager_metric(ckpt_manager* m, int64_t idx, const char* name, double* out) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_metric");
        require(name, "ckpt_manager_metric", "name");
        require(out, "ckpt_manager_metric", "out");
        if (idx < 0) ckpt::core::fail(Code::invalid, "ckpt_manager_metric: index {} is negative", idx);
        const std::optional<double> value = manager.metric(idx, name);
        if (!value)
            ckpt::core::fail(Code::not_found, "ckpt_manager_metric: {} records no metric '{}'", manager.path(idx),
                             name);
        *out = *value;
    });
}

CKPT_API int ckpt_manager_best(ckpt_manager* m, int64_t* out_idx) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_best");
        require(out_idx, "ckpt_manager_best", "out_idx");
        const std::optional<int64_t> best = manager.best();
        if (!best) ckpt::core::fail(Code::not_found, "{}: no checkpoint records the best metric", manager.dir());
        *out_idx = *best;
    });
}

CKPT_API int ckpt_manager_should_save(ckpt_manager* m, int64_t step) {
    bool yes = false;
    const int rc = guard([&] { yes = manager_of(m, "ckpt_manager_should_save").should_save(step); });
    return rc != CKPT_OK ? rc : (yes ? 1 : 0);
}

CKPT_API void ckpt_manager_request_save(ckpt_manager* m) {
    // Async-signal-safe: no allocation, no lock, no error message; only an atomic store.
    if (m != nullptr && m->manager) m->manager->request_save();
}

CKPT_API int ckpt_manager_restore(ckpt_manager* m, ckpt_vars* vars, int64_t idx, int64_t* restored_idx) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_restore");
        require(vars, "ckpt_manager_restore", "vars");
        const int64_t i = manager.restore(vars->vc, index_arg(idx, "ckpt_manager_restore"));
        if (restored_idx != nullptr) *restored_idx = i;
    });
}

CKPT_API int ckpt_manager_read(ckpt_manager* m, int64_t idx, ckpt_vars** out, int64_t* restored_idx) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_read");
        require(out, "ckpt_manager_read", "out");
        auto [vars, i] = manager.read(index_arg(idx, "ckpt_manager_read"));
        *out = new ckpt_vars{std::move(vars)};
        if (restored_idx != nullptr) *restored_idx = i;
    });
}

CKPT_API int ckpt_manager_latest(ckpt_manager* m, int64_t* out_idx) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_latest");
        require(out_idx, "ckpt_manager_latest", "out_idx");
        const auto indices = manager.list();
        if (indices.empty()) ckpt::core::fail(Code::not_found, "{}: no checkpoints found", manager.dir());
        *out_idx = indices.back();
    });
}

CKPT_API int ckpt_manager_list(ckpt_manager* m, int64_t* idx, size_t cap, size_t* count) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_list");
        require(count, "ckpt_manager_list", "count");
        if (cap > 0) require(idx, "ckpt_manager_list", "idx");
        const auto indices = manager.list();
        *count = indices.size();
        std::copy_n(indices.begin(), std::min(cap, indices.size()), idx);
        if (cap < indices.size())
            ckpt::core::fail(Code::buffer_small, "ckpt_manager_list: {} checkpoints do not fit in {}", indices.size(),
                             cap);
    });
}

CKPT_API int ckpt_manager_path(ckpt_manager* m, int64_t idx, char* buf, size_t cap) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_path");
        require(buf, "ckpt_manager_path", "buf");
        if (idx < 0) ckpt::core::fail(Code::invalid, "ckpt_manager_path: index {} is negative", idx);
        const std::string path = m->url_prefix + manager.path(idx);
        if (path.size() + 1 > cap)
            ckpt::core::fail(Code::buffer_small, "ckpt_manager_path: {} needs {} bytes", path, path.size() + 1);
        std::memcpy(buf, path.c_str(), path.size() + 1);
    });
}

CKPT_API int ckpt_manager_clean(ckpt_manager* m, uint32_t flags, ckpt_clean_fn fn, void* payload, size_t* count) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_clean");
        if ((flags & ~CKPT_CLEAN_DRY_RUN) != 0)
            ckpt::core::fail(Code::invalid, "ckpt_manager_clean: unknown flags {:#x}", flags);
        if (count != nullptr) *count = 0;
        manager.clean((flags & CKPT_CLEAN_DRY_RUN) != 0, [&](const ckpt::core::StaleTemporary& t) {
            if (count != nullptr) ++*count;
            if (fn != nullptr)
                fn(t.path.c_str(), t.upload ? CKPT_CLEAN_UPLOAD : t.dir ? CKPT_CLEAN_DIR : CKPT_CLEAN_FILE, payload);
        });
    });
}

CKPT_API int ckpt_manager_wait(ckpt_manager* m) {
    return guard([&] { manager_of(m, "ckpt_manager_wait").wait(); });
}

CKPT_API int ckpt_manager_close(ckpt_manager* m) {
    if (m == nullptr) return CKPT_OK;
    const int rc = guard([&] {
        if (m->manager) m->manager->close();
    });
    delete m;
    return rc;
}

CKPT_API int64_t ckpt_checkpoint_idx(const char* filename) {
    if (filename == nullptr) return -1;
    try {
        return ckpt::core::checkpoint_index(filename).value_or(-1);
    } catch (...) {
        return -1;
    }
}

}

namespace ckpt::capi {

void set_manager_clock(std::function<int64_t()> now_ns) {
    std::lock_guard<std::mutex> lock(clock_mutex);
    manager_clock() = std::move(now_ns);
}

}  // namespace ckpt::capi
