// SPDX-License-Identifier: Apache-2.0
// Fuzzes decode -> encode -> decode: whatever ckpt reads, it must write (stored and deflated, in the plain and
// the objax layout) so that reading it back gives the same names, dtypes, shapes and bytes; and writing what it
// read back must reproduce the same file, byte for byte (the writer is deterministic). A mismatch traps.
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "storage/memory_storage.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>

namespace {

std::optional<ckpt::core::VarCollection> decode(const void* data, size_t size) {
    try {
        ckpt::core::NpzReader reader(std::make_unique<ckpt::core::BytesInput>(data, size), "<memory>", {});
        if (ckpt_fuzz::declared_array_bytes(reader) > ckpt_fuzz::kMaxArrayBytes) return std::nullopt;
        return reader.read_all();
    } catch (const ckpt::core::Error&) {
        return std::nullopt;
    }
}

// Whether `layout` can hold these names: a zip member name has at most 65535 bytes, and objax's names table
// (longest name times count, in UTF-32) must stay within the work bound.
bool writable(const ckpt::core::VarCollection& vars, ckpt::core::Layout layout) {
    size_t longest = 0;
    for (size_t i = 0; i < vars.size(); ++i) longest = std::max(longest, vars.name(i).size());
    if (layout == ckpt::core::Layout::plain) return longest + 4 <= 0xFFFF;
    return uint64_t{4} * longest * vars.size() <= ckpt_fuzz::kMaxArrayBytes;
}

std::string encode(const ckpt::core::VarCollection& vars, ckpt::core::Layout layout, bool deflate) {
    ckpt::core::NpzWriteOptions options;
    options.layout = layout;
    options.deflate = deflate;
    ckpt::core::MemoryStorage storage;
    ckpt::core::save_npz(storage, "x.npz", vars, options);
    auto in = storage.open_read("x.npz");
    std::string bytes(static_cast<size_t>(in->size()), '\0');
    in->read_at(0, &bytes[0], bytes.size());
    return bytes;
}

void check_same(const ckpt::core::VarCollection& a, const ckpt::core::VarCollection& b) {
    FUZZ_CHECK(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const ckpt::core::Array& x = a.array(i);
        const ckpt::core::Array& y = b.array(i);
        FUZZ_CHECK(a.name(i) == b.name(i));
        FUZZ_CHECK(x.dtype() == y.dtype() && x.itemsize() == y.itemsize() && x.shape() == y.shape());
        FUZZ_CHECK(x.nbytes() == y.nbytes());
        FUZZ_CHECK(x.nbytes() == 0 || std::memcmp(x.data(), y.data(), x.nbytes()) == 0);
    }
    FUZZ_CHECK(a.metadata().size() == b.metadata().size());
    for (size_t i = 0; i < a.metadata().size(); ++i)
        FUZZ_CHECK(a.metadata().key(i) == b.metadata().key(i) && a.metadata().value(i) == b.metadata().value(i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::optional<ckpt::core::VarCollection> vars = decode(data, size);
    if (!vars) return 0;
    // From here on nothing may fail: an exception escaping ends the run as a crash.
    for (const ckpt::core::Layout layout : {ckpt::core::Layout::plain, ckpt::core::Layout::objax}) {
        if (!writable(*vars, layout)) continue;
        for (const bool deflate : {false, true}) {
            const std::string file = encode(*vars, layout, deflate);
            ckpt::core::NpzReadOptions options;
            options.layout = layout;  // a plain file may also look like objax's; read it as it was written
            ckpt::core::NpzReader reader(std::make_unique<ckpt::core::BytesInput>(file.data(), file.size()), "<memory>",
                                         options);
            const ckpt::core::VarCollection back = reader.read_all();
            check_same(*vars, back);
            FUZZ_CHECK(encode(back, layout, deflate) == file);
        }
    }
    return 0;
}
