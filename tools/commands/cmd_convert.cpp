// SPDX-License-Identifier: Apache-2.0
// ckpt convert IN OUT: the same arrays, dtypes and metadata in another format, layout or compression, saved atomically
// (OUT is the old file or the complete new one, whatever happens; IN may be OUT). IN is a file or a sharded step.
//
// Memory: nothing is read whole. Each array of IN becomes a source of the save (ckpt_vars_add_source) that reads it
// a few MiB at a time (ckpt_reader_read_range; a step's rows with ckpt_step_read_rows), so the peak memory does not
// depend on IN's size.
// Signals: SIGINT, SIGTERM and SIGHUP only set a flag; the next source call sees it and fails the save, the library
// removes its temporary file, and the program then ends as that signal would have ended it (default action).
#include "commands.hpp"
#include "sharded_step.hpp"

#include <fmt/format.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

namespace ckpt_tool {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int sig) { g_signal = sig; }

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void catch_signals() {
    for (int sig : kSignals) {
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        ::sigaction(sig, &sa, nullptr);
    }
}

// Ends the program as the signal caught would have: its message, then the signal's default action.
[[noreturn]] void die_of_signal(const std::string& out) {
    const int sig = g_signal;
    std::cout.flush();
    std::cerr << fmt::format("ckpt: convert interrupted by {}; {} was left as it was\n", strsignal(sig), out);
    std::cerr.flush();
    std::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    std::raise(sig);
    std::_Exit(128 + sig);
}

// One array of IN as a source of the save. `read` reads whole units (items of a file's array, rows of a step's
// variable); the save asks for any byte ranges, in order but not on unit boundaries, so the bytes of a unit read
// past one request's end are kept for the next (which then starts where the read ended: ranged reads of a
// deflated member stay one pass).
struct Lazy {
    std::function<int(uint64_t offset, void* dst, size_t size)> read;  // offset and size: whole units
    uint64_t unit = 1;
    uint64_t nbytes = 0;
    std::vector<unsigned char> carry;  // bytes [carry_at, carry_at + carry.size()) read but not yet asked for
    uint64_t carry_at = 0;
    std::vector<unsigned char> scratch;
};

// A failed read of IN fails the save with the read's own message, which names IN and the member.
int reading_failed(int rc) {
    const std::string message = ckpt_error_message();
    ckpt_error_set_message(message.c_str());
    return rc;
}

extern "C" int read_lazy(void* payload, uint64_t offset, void* dst, size_t size) {
    if (g_signal != 0) {
        ckpt_error_set_message(fmt::format("interrupted by {}", strsignal(g_signal)).c_str());
        return CKPT_ERROR;
    }
    Lazy& l = *static_cast<Lazy*>(payload);
    auto* out = static_cast<unsigned char*>(dst);
    try {
        if (!l.carry.empty() && offset >= l.carry_at && offset < l.carry_at + l.carry.size()) {
            const size_t skip = static_cast<size_t>(offset - l.carry_at);
            const size_t k = std::min(size, l.carry.size() - skip);
            std::memcpy(out, l.carry.data() + skip, k);
            out += k;
            offset += k;
            size -= k;
        }
        if (size == 0) return CKPT_OK;
        const uint64_t first = offset / l.unit * l.unit;
        const uint64_t end = std::min(l.nbytes, (offset + size + l.unit - 1) / l.unit * l.unit);
        l.carry.clear();
        if (first == offset && end == offset + size) {
            const int rc = l.read(offset, out, size);
            return rc == CKPT_OK ? rc : reading_failed(rc);
        }
        l.scratch.resize(static_cast<size_t>(end - first));
        const int rc = l.read(first, l.scratch.data(), l.scratch.size());
        if (rc != CKPT_OK) return reading_failed(rc);
        std::memcpy(out, l.scratch.data() + (offset - first), size);
        l.carry.assign(l.scratch.begin() + static_cast<ptrdiff_t>(offset + size - first), l.scratch.end());
        l.carry_at = offset + size;
        return CKPT_OK;
    } catch (const std::bad_alloc&) {
        return CKPT_ENOMEM;
    }
}

struct ConvertOptions {
    std::string in, out;
    std::string layout;   // "", "plain" or "objax"
    std::string deflate;  // "" (not given), "true" (given without a level) or the level
    bool store = false;
    bool chunk_hashes = false;
    std::string base;              // "": none
    uint64_t max_shard_bytes = 0;  // --max-shard-size: Hugging Face's sharded layout; 0: one file
};

// "5GB" (10^9 bytes), "500MiB" (2^20), "1000": a shard size as huggingface_hub and transformers take it.
std::string parse_shard_size(const std::string& text, uint64_t& bytes) {
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 15)
        return "the size is a whole number with an optional unit (5GB, 500MiB), not '" + text + "'";
    std::string unit = text.substr(digits);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::pair<const char*, uint64_t> units[] = {{"", 1},
                                                      {"B", 1},
                                                      {"KB", 1000},
                                                      {"MB", 1000000},
                                                      {"GB", 1000000000},
                                                      {"KIB", 1 << 10},
                                                      {"TB", uint64_t{1000000000000}},
                                                      {"MIB", 1 << 20},
                                                      {"GIB", uint64_t{1} << 30},
                                                      {"TIB", uint64_t{1} << 40}};
    for (const auto& [name, factor] : units) {
        if (unit != name) continue;
        const uint64_t count = std::stoull(text.substr(0, digits));
        if (count > UINT64_MAX / factor) return "the size '" + text + "' is more bytes than 64 bits count";
        bytes = count * factor;
        return bytes > 0 ? "" : "the size must be more than 0";
    }
    return "unknown unit '" + text.substr(digits) + "' (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)";
}

// What IN holds, as sources: the arrays and their readers, the metadata, and the defaults for what the options leave
// alone.
struct Input {
    Reader npz;
    Step step;
    Vars vars;
    std::vector<std::unique_ptr<Lazy>> lazies;
    uint32_t layout = CKPT_LAYOUT_PLAIN;
    bool any_deflated = false;
};

void add_source(Input& input, const std::string& path, const char* name, uint32_t dtype, size_t itemsize, uint32_t ndim,
                const int64_t* shape, std::unique_ptr<Lazy> lazy) {
    const int rc = ckpt_vars_add_source(input.vars.get(), name, dtype, itemsize, ndim, shape, read_lazy, lazy.get());
    if (rc != CKPT_OK) fail_ckpt(rc, path);
    input.lazies.push_back(std::move(lazy));
}

void open_file(Input& input, const std::string& path) {
    input.npz = open_reader(path);
    ckpt_reader* npz = input.npz.get();
    input.layout = ckpt_reader_layout(npz);
    for (size_t i = 0; i < ckpt_reader_count(npz); ++i) {
        if (ckpt_reader_compression(npz, i) == CKPT_DEFLATE) input.any_deflated = true;
        auto lazy = std::make_unique<Lazy>();
        lazy->unit = ckpt_reader_itemsize(npz, i);
        lazy->nbytes = ckpt_reader_nbytes(npz, i);
        if (ckpt_reader_fortran_order(npz, i) != 0 && ckpt_reader_ndim(npz, i) > 1) {
            // A Fortran-order array (a transposed one, as np.savez writes it) is not read in ranges: it is read
            // whole, in C order, when the save first asks for it, and its buffer goes once the save has it all.
            auto whole = std::make_shared<std::vector<unsigned char>>();
            const uint64_t nbytes = lazy->nbytes;
            lazy->read = [npz, i, whole, nbytes](uint64_t offset, void* dst, size_t size) {
                if (whole->size() != nbytes) {
                    whole->resize(static_cast<size_t>(nbytes));
                    const int rc = ckpt_reader_read_into(npz, i, whole->data(), whole->size());
                    if (rc != CKPT_OK) {
                        whole->clear();
                        return rc;
                    }
                }
                if (size != 0) std::memcpy(dst, whole->data() + offset, size);
                if (offset + size == nbytes) std::vector<unsigned char>().swap(*whole);
                return CKPT_OK;
            };
        } else {
            lazy->read = [npz, i](uint64_t offset, void* dst, size_t size) {
                return ckpt_reader_read_range(npz, i, offset, dst, size);
            };
        }
        add_source(input, path, ckpt_reader_name(npz, i), ckpt_reader_dtype(npz, i), ckpt_reader_itemsize(npz, i),
                   ckpt_reader_ndim(npz, i), ckpt_reader_shape(npz, i), std::move(lazy));
    }
    for (size_t k = 0; k < ckpt_reader_metadata_count(npz); ++k) {
        const int rc = ckpt_vars_set_metadata(input.vars.get(), ckpt_reader_metadata_key(npz, k),
                                              ckpt_reader_metadata_value(npz, k));
        if (rc != CKPT_OK) fail_ckpt(rc, path);
    }
}

// A sharded step's variables, each gathered whole from its shards (rows of a row-split one from every piece).
void open_step(Input& input, const std::string& path) {
    ckpt_step* raw = nullptr;
    const int rc = ckpt_step_open(&raw, path.c_str(), nullptr);
    if (rc != CKPT_OK) fail_ckpt(rc, path);
    input.step.reset(raw);
    for (size_t i = 0; i < ckpt_step_count(raw); ++i) {
        const uint32_t ndim = ckpt_step_ndim(raw, i);
        const int64_t* shape = ckpt_step_shape(raw, i);
        const int64_t rows = ndim == 0 ? 1 : shape[0];
        auto lazy = std::make_unique<Lazy>();
        lazy->nbytes = ckpt_step_nbytes(raw, i);
        lazy->unit = rows > 0 && lazy->nbytes > 0 ? lazy->nbytes / static_cast<uint64_t>(rows) : 1;
        const uint64_t unit = lazy->unit;
        lazy->read = [raw, i, unit](uint64_t offset, void* dst, size_t size) {
            return ckpt_step_read_rows(raw, i, static_cast<int64_t>(offset / unit), static_cast<int64_t>(size / unit),
                                       dst, size);
        };
        add_source(input, path, ckpt_step_name(raw, i), ckpt_step_dtype(raw, i), ckpt_step_itemsize(raw, i), ndim,
                   shape, std::move(lazy));
    }
    for (size_t k = 0; k < ckpt_step_metadata_count(raw); ++k) {
        const int set =
            ckpt_vars_set_metadata(input.vars.get(), ckpt_step_metadata_key(raw, k), ckpt_step_metadata_value(raw, k));
        if (set != CKPT_OK) fail_ckpt(set, path);
    }
}

// The library writes safetensors for OUT ending in ".safetensors" (ckpt_save's rule).
bool is_safetensors_name(const std::string& out) {
    constexpr std::string_view kSuffix = ".safetensors";
    return out.size() > kSuffix.size() && out.compare(out.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

int run_convert(const ConvertOptions& o) {
    const bool safetensors = is_safetensors_name(o.out);
    // Options the format has no use for are a wrong command line, refused before IN is opened.
    if (o.max_shard_bytes > 0 && !safetensors)
        throw Failure(kExitUsage,
                      fmt::format("{}: --max-shard-size writes Hugging Face's sharded safetensors layout: name OUT "
                                  "DIR/model.safetensors",
                                  o.out),
                      CKPT_EINVAL);
    if (safetensors && (!o.deflate.empty() || o.layout == "objax"))
        throw Failure(kExitUsage,
                      fmt::format("{}: safetensors files have {}; --deflate and --layout objax are for .npz files",
                                  o.out, !o.deflate.empty() ? "no compression" : "no layouts"),
                      CKPT_EINVAL);
    catch_signals();
    Progress progress;
    Input input;
    ckpt_vars* raw = nullptr;
    if (ckpt_vars_new(&raw) != CKPT_OK) throw std::bad_alloc();
    input.vars.reset(raw);
    if (is_step_dir(o.in))
        open_step(input, o.in);
    else
        open_file(input, o.in);
    if (g_signal != 0) die_of_signal(o.out);

    ckpt_options save_opts = CKPT_OPTIONS_INIT;
    progress.attach(save_opts);
    // Into safetensors IN's layout and compression do not carry over: the format has neither.
    const uint32_t kept_layout = safetensors ? CKPT_LAYOUT_PLAIN : input.layout;
    save_opts.layout = o.layout == "objax" ? CKPT_LAYOUT_OBJAX : o.layout == "plain" ? CKPT_LAYOUT_PLAIN : kept_layout;
    const bool deflate = !o.deflate.empty() || (!o.store && input.any_deflated && !safetensors);
    save_opts.compression = deflate ? CKPT_DEFLATE : CKPT_STORE;
    save_opts.level = o.deflate.empty() || o.deflate == "true" ? 0 : std::stoi(o.deflate);
    save_opts.flags = CKPT_KEEP_MANAGER_KEYS;  // a copy of a checkpoint keeps what its manager recorded
    if (o.chunk_hashes) save_opts.flags |= CKPT_NPZ_CHUNK_HASHES;
    if (!o.base.empty()) save_opts.base = o.base.c_str();
    save_opts.max_shard_bytes = o.max_shard_bytes;
    progress.start("writing " + o.out, 0);
    const int rc = ckpt_save(o.out.c_str(), input.vars.get(), &save_opts);
    progress.clear();
    if (g_signal != 0) die_of_signal(o.out);
    if (rc != CKPT_OK) fail_ckpt(rc, o.out);
    return kExitOk;
}

}  // namespace

Command add_convert(CLI::App& parent) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* app =
        parent.add_subcommand("convert",
                              "Rewrite a file or a sharded step as one file in another format, layout or compression, "
                              "keeping its arrays, dtypes and metadata");
    app->footer(
        "OUT is replaced atomically: it is the old file or the complete new one, whatever happens (SIGINT, "
        "SIGTERM and SIGHUP stop the conversion and leave no temporary file). Arrays are read a few MiB at "
        "a time, so memory does not grow with IN's size. What no option changes stays as in IN (deflate "
        "when any of IN's arrays is deflated; a step is written plain and stored). OUT's format is its name's: "
        "safetensors for a name ending in .safetensors (no layouts, no compression), .npz for any other.");
    app->add_option("IN", o->in, "the .npz or safetensors file, or sharded step directory, to read")->required();
    app->add_option("OUT", o->out,
                    "the file to write, replaced atomically (may be IN): safetensors for a name ending in "
                    ".safetensors, .npz for any other")
        ->required();
    app->add_option("--layout", o->layout, "plain (<name>.npy per array) or objax (names.npy, 0.npy, 1.npy, ...)")
        ->check(CLI::IsMember({"plain", "objax"}));
    CLI::Option* deflate = app->add_flag("--deflate", o->deflate,
                                         "compress with deflate; --deflate=LEVEL for level 1 to 9 (default: zlib's, 6)")
                               ->check([](const std::string& v) -> std::string {
                                   if (v == "true") return "";
                                   if (v.size() == 1 && v[0] >= '1' && v[0] <= '9') return "";
                                   return "the deflate level is 1 to 9, not '" + v + "'";
                               });
    CLI::Option* store = app->add_flag("--store", o->store, "store the arrays uncompressed");
    deflate->excludes(store);
    app->add_flag("--chunk-hashes", o->chunk_hashes,
                  "record chunk hashes (stored arrays), so that later saves can share OUT's unchanged chunks");
    app->add_option("--base", o->base,
                    "share the chunks that did not change with FILE, a file saved with chunk hashes (on a filesystem "
                    "that clones: XFS, btrfs); implies --chunk-hashes. `ckpt convert F F --base F` re-saves F at "
                    "no cost in space")
        ->type_name("FILE");
    app->add_option_function<std::string>(
           "--max-shard-size",
           [o](const std::string& text) {
               const std::string problem = parse_shard_size(text, o->max_shard_bytes);
               if (!problem.empty()) throw CLI::ValidationError("--max-shard-size", problem);
           },
           "Hugging Face's sharded layout for OUT = DIR/model.safetensors: shards model-00001-of-0000N.safetensors "
           "... of at most SIZE bytes of tensors (5GB, 500MiB, 1000000) and model.safetensors.index.json; OUT alone "
           "when everything fits")
        ->type_name("SIZE");
    return {app, [o] { return run_convert(*o); }};
}

}  // namespace ckpt_tool
