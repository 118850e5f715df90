// ckpt_manager: the C face of ckpt::CheckpointManager.
#include "checkpoint.hpp"
#include "guard.hpp"

#include <cstdio>
#include <cstring>

using ckpt::Code;
using ckpt::capi::guard;
using ckpt::capi::require;

struct ckpt_manager {
    std::unique_ptr<ckpt::CheckpointManager> manager;
};

namespace {

ckpt::CheckpointManager& manager_of(ckpt_manager* m, const char* function) {
    require(m, function, "m");
    if (!m->manager) ckpt::fail(Code::invalid, "{}: the manager is closed", function);
    return *m->manager;
}

std::optional<int64_t> index_arg(int64_t idx, const char* function) {
    if (idx == CKPT_LATEST) return std::nullopt;
    if (idx < 0) ckpt::fail(Code::invalid, "{}: index {} is neither >= 0 nor CKPT_LATEST", function, idx);
    return idx;
}

}  // namespace

extern "C" {

CKPT_API int ckpt_manager_options_init(ckpt_manager_options* opts, uint32_t version) {
    return guard([&] {
        require(opts, "ckpt_manager_options_init", "opts");
        if (version != CKPT_MANAGER_OPTIONS_VERSION)
            ckpt::fail(Code::invalid, "ckpt_manager_options_init: version {} is not supported (1)", version);
        std::memset(opts, 0, sizeof *opts);
        opts->version = version;
        opts->keep = 10;
    });
}

CKPT_API int ckpt_manager_open(ckpt_manager** out, const char* logdir, const ckpt_manager_options* opts) {
    if (out != nullptr) *out = nullptr;
    return guard([&] {
        require(out, "ckpt_manager_open", "out");
        require(logdir, "ckpt_manager_open", "logdir");
        ckpt_manager_options o;
        ckpt_manager_options_init(&o, CKPT_MANAGER_OPTIONS_VERSION);
        if (opts != nullptr) {
            if (opts->version != CKPT_MANAGER_OPTIONS_VERSION)
                ckpt::fail(Code::invalid, "ckpt_manager_open: options version {} is not supported (1)", opts->version);
            o = *opts;
        }
        constexpr uint32_t kKnownFlags =
            CKPT_MANAGER_ASYNC | CKPT_MANAGER_NO_FALLBACK | CKPT_MANAGER_NO_MAKEDIR | CKPT_MANAGER_VERBOSE |
            CKPT_MANAGER_READ_ONLY;
        if ((o.flags & ~kKnownFlags) != 0) ckpt::fail(Code::invalid, "ckpt_manager_open: unknown flags {}", o.flags);
        if (o.keep_every < 0) ckpt::fail(Code::invalid, "ckpt_manager_open: keep_every {} is negative", o.keep_every);
        const ckpt_npz_options npz = ckpt::capi::checked_npz_options(o.npz, "ckpt_manager_open");

        ckpt::CheckpointManager::Options m;
        m.keep = o.keep;
        m.keep_every = o.keep_every;
        m.async = (o.flags & CKPT_MANAGER_ASYNC) != 0;
        m.fallback = (o.flags & CKPT_MANAGER_NO_FALLBACK) == 0;
        m.make_dir = (o.flags & CKPT_MANAGER_NO_MAKEDIR) == 0;
        m.read_only = (o.flags & CKPT_MANAGER_READ_ONLY) != 0;
        if (m.read_only && m.async)
            ckpt::fail(Code::invalid, "ckpt_manager_open: CKPT_MANAGER_READ_ONLY makes no saves, so CKPT_MANAGER_ASYNC has no use");
        m.queue_depth = o.queue_depth == 0 ? 1 : o.queue_depth;
        m.npz_write = ckpt::capi::write_options(npz);
        m.npz_read = ckpt::capi::read_options(npz);
        m.npz_read.layout = ckpt::Layout::automatic;  // the npz layout says how to write; reading detects either
        m.rename = ckpt::capi::renamer(npz);
        m.storage = ckpt::capi::storage_of(o.storage);
        if (o.log != nullptr) {
            m.log = [fn = o.log, payload = o.log_payload](int level, const std::string& message) {
                fn(level, message.c_str(), payload);
            };
        } else if ((o.flags & CKPT_MANAGER_VERBOSE) != 0) {
            m.log = [](int, const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); };
        }
        const std::string subdir = o.subdir != nullptr ? o.subdir : "ckpt";
        const std::string dir = subdir.empty() ? std::string(logdir) : ckpt::join_path(logdir, subdir);
        auto handle = std::make_unique<ckpt_manager>();
        handle->manager = std::make_unique<ckpt::CheckpointManager>(dir, std::move(m));
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
        if (indices.empty()) ckpt::fail(Code::not_found, "{}: no checkpoints found", manager.dir());
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
            ckpt::fail(Code::buffer_small, "ckpt_manager_list: {} checkpoints do not fit in {}", indices.size(), cap);
    });
}

CKPT_API int ckpt_manager_path(ckpt_manager* m, int64_t idx, char* buf, size_t cap) {
    return guard([&] {
        auto& manager = manager_of(m, "ckpt_manager_path");
        require(buf, "ckpt_manager_path", "buf");
        if (idx < 0) ckpt::fail(Code::invalid, "ckpt_manager_path: index {} is negative", idx);
        const std::string path = manager.path(idx);
        if (path.size() + 1 > cap)
            ckpt::fail(Code::buffer_small, "ckpt_manager_path: {} needs {} bytes", path, path.size() + 1);
        std::memcpy(buf, path.c_str(), path.size() + 1);
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
        return ckpt::checkpoint_index(filename).value_or(-1);
    } catch (...) {
        return -1;
    }
}

}
