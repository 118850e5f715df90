// SPDX-License-Identifier: Apache-2.0
// Fuzzes the parser of sharded checkpoints' manifest.json on arbitrary bytes. ckpt::core::Error is the expected answer
// to bad input; any other exception, a crash, UB or a leak is a bug. A manifest the parser accepts must survive
// ckpt's own writing: manifest_to_json of it parses back to the same manifest.
#include "core/error.hpp"
#include "sharded/manifest.hpp"
#include "fuzz_support.hpp"

#include <optional>
#include <string>

namespace {

bool same(const ckpt::core::Manifest& a, const ckpt::core::Manifest& b) {
    if (a.step != b.step || a.world_size != b.world_size || a.variables.size() != b.variables.size()) return false;
    if (a.metadata.size() != b.metadata.size()) return false;
    for (size_t i = 0; i < a.metadata.size(); ++i)
        if (a.metadata.key(i) != b.metadata.key(i) || a.metadata.value(i) != b.metadata.value(i)) return false;
    for (size_t i = 0; i < a.variables.size(); ++i) {
        const ckpt::core::ManifestVariable &x = a.variables[i], &y = b.variables[i];
        if (x.name != y.name || x.dtype != y.dtype || x.itemsize != y.itemsize || x.shape != y.shape ||
            x.shard != y.shard || x.pieces.size() != y.pieces.size())
            return false;
        for (size_t k = 0; k < x.pieces.size(); ++k)
            if (x.pieces[k].shard != y.pieces[k].shard || x.pieces[k].row_begin != y.pieces[k].row_begin ||
                x.pieces[k].row_end != y.pieces[k].row_end)
                return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::optional<ckpt::core::Manifest> m;
    try {
        m = ckpt::core::manifest_from_json(text, "manifest.json");
    } catch (const ckpt::core::Error& e) {
        FUZZ_CHECK(e.code() == ckpt::core::Code::format || e.code() == ckpt::core::Code::unsupported);
        return 0;
    }
    const ckpt::core::Manifest again =
        ckpt::core::manifest_from_json(ckpt::core::manifest_to_json(*m), "manifest.json");
    FUZZ_CHECK(same(*m, again));
    return 0;
}
