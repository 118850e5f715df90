// SPDX-License-Identifier: Apache-2.0
// Incremental saves, as ratios measured in one run (never pass/fail): a durable save of a state of which only part
// changed since the previous checkpoint, saved against that checkpoint (unchanged chunks cloned: FICLONERANGE), beside
// a full save of the same state and raw write() + fsync + rename + directory fsync of the same bytes. Run it on a
// filesystem that clones (XFS with reflink, btrfs) to see the sharing, and on ext4 for what recording the chunk hashes
// costs where nothing can be shared.
//   all:   every byte changed (the worst case: the hashes are pure cost)
//   frozen: one array of eight changed (a frozen backbone, a fine-tuned head)
//   backbone: 1 GiB that never changes and 32 MiB that changes every save (whatever MiB says; needs 4.2 GiB free),
//             as .npz files and as safetensors checkpoints of a manager
//   rows:  1% of an embedding table's rows changed, at random, for several chunk sizes
// Usage: bench_incremental DIR [MiB] [runs] [no-backbone]   (defaults: 512 5). Uses the core's C++ API to vary the
// chunk size.
#include "bench_common.h"

#include "manager/checkpoint.hpp"
#include "npz/chunk_base.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ckpt::core;

namespace {

struct Sample {
    std::vector<double> seconds, written_mib, shared_mib;
    void add(double s, double written, double shared) {
        seconds.push_back(s);
        written_mib.push_back(written);
        shared_mib.push_back(shared);
    }
    static double med(std::vector<double> v) { return median(v.data(), static_cast<int>(v.size())); }
};

struct Bench {
    std::string dir;
    std::shared_ptr<Storage> storage = posix_storage();
    std::vector<std::vector<float>> arrays;

    VarCollection vars() {
        VarCollection v;
        for (size_t i = 0; i < arrays.size(); ++i)
            v.add("a" + std::to_string(i),
                  Array::borrow(DType::float32, 4, {static_cast<int64_t>(arrays[i].size())}, arrays[i].data()));
        return v;
    }
    // One durable save of the state to `name`; incremental: against `base_name` (saved with chunk hashes before).
    void save(const std::string& name, bool incremental, const std::string& base_name, uint32_t chunk, Sample& s) {
        NpzWriteOptions o;
        o.chunk_hashes = incremental;
        o.chunk_bytes = chunk;
        uint64_t shared = 0;
        o.shared_bytes = &shared;
        std::unique_ptr<ChunkBase> base;
        std::string why;
        std::remove((dir + "/" + name).c_str());  // a save that replaces a file frees its blocks: none does
        const double t0 = now();
        if (incremental && !base_name.empty()) base = ChunkBase::open(*storage, dir + "/" + base_name, &why);
        o.base = base.get();
        save_npz(*storage, dir + "/" + name, vars(), o);
        const double t1 = now();
        const uint64_t size = storage->open_read(dir + "/" + name)->size();
        s.add(t1 - t0, static_cast<double>(size - shared) / (1 << 20), static_cast<double>(shared) / (1 << 20));
    }
    double raw(Sample& s) {
        std::vector<float*> pointers;
        for (auto& a : arrays) pointers.push_back(a.data());
        std::remove((dir + "/raw.bin").c_str());
        const double t0 = now();
        raw_save(dir.c_str(), (dir + "/raw.bin").c_str(), pointers.data(), static_cast<int>(pointers.size()),
                 arrays[0].size() * 4);
        const double t = now() - t0;
        s.add(t, static_cast<double>(pointers.size() * arrays[0].size() * 4) / (1 << 20), 0);
        return t;
    }
};

void report(const char* workload, const char* how, const Sample& s, const Sample& raw, double mib,
            const std::vector<double>& against_full) {
    const double t = Sample::med(s.seconds);
    const std::string x_full = against_full.empty() ? "" : fmt::format("{:.2f}", Sample::med(against_full));
    std::printf("| %s | %s | %.3f | %.0f | %.2f | %s | %.1f | %.1f |\n", workload, how, t, mib / t,
                Sample::med(raw.seconds) / t, x_full.c_str(), Sample::med(s.shared_mib), Sample::med(s.written_mib));
}

// `runs` rounds of: change the state (mutate), then a full save, a raw write and an incremental save against the
// round before's file, in alternating order so that a slow minute of the disk slows all three; "x full" is the median
// of each round's full save time over its incremental save time. The base is replaced outside the timings.
void workload(Bench& b, const char* name, uint32_t chunk, int runs, double mib, const std::function<void()>& mutate,
              bool with_full) {
    Sample full, inc, raw;
    b.save("base.npz", true, "", chunk, inc);  // warm-up and the first base
    inc = Sample{};
    std::vector<double> against_full;
    for (int r = 0; r < runs; ++r) {
        mutate();
        if (r % 2 == 0) {
            b.save("full.npz", false, "", kChunkBytes, full);
            b.raw(raw);
            b.save("next.npz", true, "base.npz", chunk, inc);
        } else {
            b.save("next.npz", true, "base.npz", chunk, inc);
            b.raw(raw);
            b.save("full.npz", false, "", kChunkBytes, full);
        }
        against_full.push_back(full.seconds.back() / inc.seconds.back());
        std::remove((b.dir + "/base.npz").c_str());
        std::rename((b.dir + "/next.npz").c_str(), (b.dir + "/base.npz").c_str());
    }
    if (with_full) {
        report(name, "raw write", raw, raw, mib, {});
        report(name, "full", full, raw, mib, {});
    }
    report(name, fmt::format("incremental, {} KiB chunks", chunk / 1024).c_str(), inc, raw, mib, against_full);
}

// Removes the directories of managers the bench made, and what they hold.
void remove_managed(Bench& b, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        for (const auto& f : b.storage->list(b.dir + "/" + name)) std::remove((b.dir + "/" + name + "/" + f).c_str());
        std::remove((b.dir + "/" + name + "/.ckpt.lock").c_str());
        ::rmdir((b.dir + "/" + name).c_str());
    }
}

// A manager of b.dir/name (keep 2) saving `format`, with incremental saves on or off.
std::unique_ptr<CheckpointManager> open_manager(Bench& b, const std::string& name, bool incremental, Format format) {
    CheckpointManager::Options o;
    o.storage = b.storage;
    o.keep = 2;
    o.incremental = incremental;
    o.format = format;
    return std::make_unique<CheckpointManager>(b.dir + "/" + name, o);
}

// Saves v as checkpoint i with both managers, the incremental one first on even i; returns the seconds each took.
std::pair<double, double> save_both(CheckpointManager& inc, CheckpointManager& full, const VarCollection& v,
                                    int64_t i) {
    double t_inc = 0, t_full = 0;
    for (int k = 0; k < 2; ++k) {
        const bool first_inc = (i % 2 == 0) == (k == 0);
        const double t0 = now();
        (first_inc ? inc : full).save(v, i);
        (first_inc ? t_inc : t_full) = now() - t0;
    }
    return {t_inc, t_full};
}

// A training run whose every weight changes between saves, through two managers side by side: one with incremental
// saves (the default where the filesystem clones), one with them off; `runs` * 4 saves each, in alternating order.
// After a save that shares nothing, the incremental manager pauses its hashing (manager/share_backoff.hpp): most of
// its saves are then plain ones.
void managers(Bench& b, int runs, double mib) {
    std::unique_ptr<CheckpointManager> inc = open_manager(b, "managed-incremental", true, Format::npz),
                                       full = open_manager(b, "managed-full", false, Format::npz);
    Sample s_inc, s_full;
    std::vector<double> ratios;
    for (int64_t i = 0; i < 4 * runs; ++i) {
        for (auto& a : b.arrays)
            for (float& x : a) x += 1.0f;
        const auto [t_inc, t_full] = save_both(*inc, *full, b.vars(), i);
        s_inc.add(t_inc, mib, 0);
        s_full.add(t_full, mib, 0);
        ratios.push_back(t_full / t_inc);
    }
    // Medians: a manager's retention deletes a file now and then, which on a loop-mounted image stalls a save or two.
    std::printf("| all, %zu saves through a manager | incremental off | %.3f | %.0f | | | | |\n", s_full.seconds.size(),
                Sample::med(s_full.seconds), mib / Sample::med(s_full.seconds));
    std::printf("| all, %zu saves through a manager | incremental (default) | %.3f | %.0f | | %.2f | | |\n",
                s_inc.seconds.size(), Sample::med(s_inc.seconds), mib / Sample::med(s_inc.seconds),
                Sample::med(ratios));
    inc.reset();
    full.reset();
    remove_managed(b, {"managed-incremental", "managed-full"});
}

// The state of b.arrays through two safetensors managers side by side, incremental on and off, `runs` * 2 saves each
// after a first one, in alternating order, mutate() before each. A safetensors file records no chunk hashes: a save
// shares with the checkpoint its manager saved before (its first save is a full one). "MiB shared" is what the
// filesystem reports shared in the new file (FIEMAP), "MiB written" the rest of it.
void safetensors_managers(Bench& b, const char* name, int runs, double mib, const std::function<void()>& mutate) {
    std::unique_ptr<CheckpointManager> inc = open_manager(b, "managed-st-incremental", true, Format::safetensors),
                                       full = open_manager(b, "managed-st-full", false, Format::safetensors);
    inc->save(b.vars(), 0);
    full->save(b.vars(), 0);
    Sample s_inc, s_full;
    std::vector<double> ratios;
    for (int64_t i = 1; i <= 2 * runs; ++i) {
        mutate();
        const auto [t_inc, t_full] = save_both(*inc, *full, b.vars(), i);
        const std::string path = inc->path(i);
        const double size = static_cast<double>(b.storage->open_read(path)->size()) / (1 << 20);
        const double shared = static_cast<double>(b.storage->shared_bytes(path).value_or(0)) / (1 << 20);
        s_inc.add(t_inc, size - shared, shared);
        s_full.add(t_full, size, 0);
        ratios.push_back(t_full / t_inc);
    }
    std::printf("| %s | safetensors, incremental off | %.3f | %.0f | | | 0 | %.1f |\n", name,
                Sample::med(s_full.seconds), mib / Sample::med(s_full.seconds), Sample::med(s_full.written_mib));
    std::printf("| %s | safetensors, incremental (the default) | %.3f | %.0f | | %.2f | %.1f | %.1f |\n", name,
                Sample::med(s_inc.seconds), mib / Sample::med(s_inc.seconds), Sample::med(ratios),
                Sample::med(s_inc.shared_mib), Sample::med(s_inc.written_mib));
    inc.reset();
    full.reset();
    remove_managed(b, {"managed-st-incremental", "managed-st-full"});
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_incremental DIR [MiB] [runs] [no-backbone]\n");
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured
    Bench b;
    b.dir = argv[1];
    const size_t mib = argc > 2 ? static_cast<size_t>(std::atol(argv[2])) : 512;
    const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
    const bool backbone = argc > 4 ? std::string(argv[4]) != "no-backbone" : true;
    std::printf("bench_incremental %s: %zu MiB, %d runs, filesystem %s share blocks\n", b.dir.c_str(), mib, runs,
                b.storage->clones(b.dir) ? "can" : "cannot");
    std::printf(
        "| workload | save | seconds | MiB/s | x raw | x full | MiB shared | MiB written |\n"
        "|---|---|---|---|---|---|---|---|\n");
    const double total = static_cast<double>(mib);

    // all and frozen: eight arrays.
    b.arrays.assign(8, std::vector<float>(mib * (1 << 20) / 8 / 4));
    for (size_t i = 0; i < b.arrays.size(); ++i) fill(b.arrays[i].data(), b.arrays[i].size(), i << 32, 0);
    size_t round = 0;
    workload(
        b, "all (every byte changed)", kChunkBytes, runs, total,
        [&] {
            for (auto& a : b.arrays)
                for (float& x : a) x += 1.0f;
        },
        true);
    workload(
        b, "frozen (1 of 8 arrays changed)", kChunkBytes, runs, total,
        [&] {
            for (float& x : b.arrays[round++ % b.arrays.size()]) x += 1.0f;
        },
        true);
    managers(b, runs, total);
    safetensors_managers(b, "frozen (1 of 8 arrays changed)", runs, total, [&] {
        for (float& x : b.arrays[round++ % b.arrays.size()]) x += 1.0f;
    });

    // backbone: 1 GiB (32 arrays of 32 MiB) that never changes and a 32 MiB head trained between saves.
    if (backbone) {
        const size_t n = (size_t{32} << 20) / 4;
        b.arrays.assign(33, std::vector<float>(n));
        for (size_t i = 0; i < b.arrays.size(); ++i) fill(b.arrays[i].data(), n, i << 32, 0);
        const auto train_head = [&] {
            for (float& x : b.arrays.back()) x += 1.0f;
        };
        workload(b, "backbone (1 GiB frozen, 32 MiB trained)", kChunkBytes, runs, 33 * 32.0, train_head, true);
        for (const char* f : {"base.npz", "full.npz", "raw.bin"}) std::remove((b.dir + "/" + f).c_str());  // room
        safetensors_managers(b, "backbone (1 GiB frozen, 32 MiB trained)", runs, 33 * 32.0, train_head);
    }

    // rows: one table of 128-float rows, 1% of them changed per save, for several chunk sizes.
    b.arrays.assign(1, std::vector<float>(mib * (1 << 20) / 4));
    fill(b.arrays[0].data(), b.arrays[0].size(), 7, 0);
    const size_t rows = b.arrays[0].size() / 128;
    std::mt19937_64 rng(42);
    for (const uint32_t chunk : {4096u, 16384u, 32768u, 65536u, 262144u}) {
        workload(
            b, "rows (1% of rows changed)", chunk, runs, total,
            [&] {
                for (size_t k = 0; k < rows / 100; ++k) b.arrays[0][(rng() % rows) * 128] += 1.0f;
            },
            chunk == 4096u);
    }
    for (const char* f : {"base.npz", "full.npz", "raw.bin"}) std::remove((b.dir + "/" + f).c_str());
    return 0;
}
