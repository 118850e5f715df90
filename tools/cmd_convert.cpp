// ckpt convert IN OUT: the same arrays, dtypes and metadata in another layout or compression, saved atomically
// (OUT is the old file or the complete new one, whatever happens; IN may be OUT).
#include "commands.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

namespace ckpt_tool {
namespace {

struct ConvertOptions {
    std::string in, out;
    std::string layout;   // "", "plain" or "objax"
    std::string deflate;  // "" (not given), "true" (given without a level) or the level
    bool store = false;
};

int run_convert(const ConvertOptions& o) {
    Progress progress;
    ckpt_npz_options read_opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(read_opts);

    // How IN holds its arrays: the defaults for what the options leave alone.
    uint32_t layout;
    bool any_deflated = false;
    {
        const Npz npz = open_npz(o.in);
        layout = ckpt_npz_layout(npz.get());
        for (size_t i = 0; i < ckpt_npz_count(npz.get()); ++i)
            if (ckpt_npz_compression(npz.get(), i) == CKPT_DEFLATE) any_deflated = true;
    }

    progress.start("reading " + o.in, 0);
    ckpt_vars* raw = nullptr;
    int rc = ckpt_npz_read(&raw, o.in.c_str(), &read_opts);
    if (rc != CKPT_OK) fail_ckpt(rc, o.in);
    const Vars vars(raw);

    ckpt_npz_options save_opts = CKPT_NPZ_OPTIONS_INIT;
    progress.attach(save_opts);
    save_opts.layout = o.layout == "objax" ? CKPT_LAYOUT_OBJAX : o.layout == "plain" ? CKPT_LAYOUT_PLAIN : layout;
    const bool deflate = !o.deflate.empty() || (!o.store && any_deflated);
    save_opts.compression = deflate ? CKPT_DEFLATE : CKPT_STORE;
    save_opts.level = o.deflate.empty() || o.deflate == "true" ? 0 : std::stoi(o.deflate);
    progress.start("writing " + o.out, 0);
    rc = ckpt_npz_save(o.out.c_str(), raw, &save_opts);
    progress.clear();
    if (rc != CKPT_OK) fail_ckpt(rc, o.out);
    return kExitOk;
}

}  // namespace

Command add_convert(CLI::App& parent) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* app = parent.add_subcommand(
        "convert", "Rewrite a file in another layout or compression, keeping its arrays, dtypes and metadata");
    app->footer("OUT is replaced atomically: it is the old file or the complete new one, whatever happens. What no "
                "option changes stays as in IN (deflate when any of IN's arrays is deflated).");
    app->add_option("IN", o->in, "the .npz file to read")->required();
    app->add_option("OUT", o->out, "the .npz file to write (replaced atomically; may be IN)")->required();
    app->add_option("--layout", o->layout, "plain (<name>.npy per array) or objax (names.npy, 0.npy, 1.npy, ...)")
        ->check(CLI::IsMember({"plain", "objax"}));
    CLI::Option* deflate =
        app->add_flag("--deflate", o->deflate, "compress with deflate; --deflate=LEVEL for level 1 to 9 (default: zlib's, 6)")
            ->check([](const std::string& v) -> std::string {
                if (v == "true") return "";
                if (v.size() == 1 && v[0] >= '1' && v[0] <= '9') return "";
                return "the deflate level is 1 to 9, not '" + v + "'";
            });
    CLI::Option* store = app->add_flag("--store", o->store, "store the arrays uncompressed");
    deflate->excludes(store);
    return {app, [o] { return run_convert(*o); }};
}

}  // namespace ckpt_tool
