// SPDX-License-Identifier: Apache-2.0
// Fuzzes the npz reader over bytes in memory, as ckpt_read_memory uses it: opening (zip directory, every npy
// header, objax layout detection), reading everything at once, and the lazy path that reads entries one by one
// into the caller's buffers; and the same bytes as the base of a save with chunk hashes (their chunk table, whatever
// it says, must never make the new file wrong). ckpt::core::Error is the expected answer to bad input; any other
// exception, a crash, UB or a leak is a bug. The ways of reading must also agree with each other.
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "storage/memory_storage.hpp"
#include "npz/chunk_base.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_views.hpp"
#include "npz/npz_writer.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

std::optional<ckpt::core::NpzReader> open(const uint8_t* data, size_t size, ckpt::core::Layout layout) {
    ckpt::core::NpzReadOptions options;
    options.layout = layout;
    try {
        return ckpt::core::NpzReader(std::make_unique<ckpt::core::BytesInput>(data, size), "<memory>", options);
    } catch (const ckpt::core::Error&) {
        return std::nullopt;
    }
}

// The lazy path: every entry read on its own into a buffer of the size its header declares. A failed entry
// (corrupt data, CRC) must leave the reader able to read the others. Returns the entries' bytes, nullopt for
// those that failed.
std::vector<std::optional<std::vector<unsigned char>>> read_each(ckpt::core::NpzReader& reader) {
    std::vector<std::optional<std::vector<unsigned char>>> out(reader.size());
    for (size_t i = 0; i < reader.size(); ++i) {
        std::vector<unsigned char> buf(reader.entry(i).header.nbytes);
        try {
            reader.read_into(i, buf.data());
            out[i] = std::move(buf);
        } catch (const ckpt::core::Error&) {}
    }
    return out;
}

// The views of ckpt_reader_map over the same bytes (BytesInput maps them in place, so a view that reached past them
// is an out-of-bounds read). Verified, each must exist exactly when its entry read, with the same bytes.
// Unverified, a mapped one exists even for corrupt data — unless its local header disagrees with its head copy,
// which is checked either way (and then the read failed too) — and every byte of it is touched. Copy-on-write,
// which BytesInput refuses to map, each is decoded, as the read: it must exist exactly when the read did.
void check_views(ckpt::core::NpzReader& reader, const std::vector<std::optional<std::vector<unsigned char>>>& each) {
    ckpt::core::NpzViews verified(true, false), unverified(false, false), copy_on_write(false, true);
    const auto view = [&](ckpt::core::NpzViews& views, size_t i) -> const unsigned char* {
        try {
            return static_cast<const unsigned char*>(views.view(reader, i));
        } catch (const ckpt::core::Error&) {
            return nullptr;
        }
    };
    for (size_t i = 0; i < reader.size(); ++i) {
        const size_t n = reader.entry(i).header.nbytes;
        const unsigned char* p = view(verified, i);
        FUZZ_CHECK((p != nullptr) == each[i].has_value());
        FUZZ_CHECK(p == nullptr || n == 0 || std::memcmp(p, each[i]->data(), n) == 0);
        const unsigned char* c = view(copy_on_write, i);
        FUZZ_CHECK((c != nullptr) == each[i].has_value());
        FUZZ_CHECK(c == nullptr || n == 0 || std::memcmp(c, each[i]->data(), n) == 0);
        if (!ckpt::core::NpzViews::mappable(reader, i)) continue;
        const unsigned char* q = view(unverified, i);
        if (q == nullptr) {
            FUZZ_CHECK(!each[i]);
        } else if (each[i]) {
            FUZZ_CHECK(n == 0 || std::memcmp(q, each[i]->data(), n) == 0);
        } else {
            volatile unsigned char last = 0;
            for (size_t k = 0; k < n; ++k) last = q[k];
            (void)last;
        }
    }
}

bool same_metadata(const ckpt::core::Metadata& a, const ckpt::core::Metadata& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a.key(i) != b.key(i) || a.value(i) != b.value(i)) return false;
    return true;
}

bool same_entry(const ckpt::core::NpzReader::Entry& a, const ckpt::core::NpzReader::Entry& b) {
    return a.name == b.name && a.member == b.member && a.header.dtype == b.header.dtype &&
           a.header.itemsize == b.header.itemsize && a.header.shape == b.header.shape &&
           a.header.nbytes == b.header.nbytes;
}

// The input as the base of a save of `vars` (what it read) with chunk hashes: the base opens or says why not, and
// the save — sharing what its table claims matches — must read back as exactly `vars`, its CRC-32s right.
void check_as_base(const uint8_t* data, size_t size, const ckpt::core::VarCollection& vars) {
    ckpt::core::MemoryStorage storage;
    storage.put("/base.npz", std::string(reinterpret_cast<const char*>(data), size));
    std::string why;
    const std::unique_ptr<ckpt::core::ChunkBase> base = ckpt::core::ChunkBase::open(storage, "/base.npz", &why);
    FUZZ_CHECK(base != nullptr || !why.empty());
    if (!base) return;
    ckpt::core::NpzWriteOptions o;
    o.chunk_hashes = true;
    o.base = base.get();
    try {
        ckpt::core::save_npz(storage, "/next.npz", vars, o);
    } catch (const ckpt::core::Error&) {
        return;  // names ckpt's writer refuses (an unsafe member name read from the input, say)
    }
    const ckpt::core::VarCollection back = ckpt::core::NpzReader::open(storage, "/next.npz", {}).read_all();
    FUZZ_CHECK(back.size() == vars.size());
    for (size_t i = 0; i < vars.size(); ++i) {
        const ckpt::core::Array& a = vars.array(i);
        FUZZ_CHECK(back.name(i) == vars.name(i) && back.array(i).nbytes() == a.nbytes());
        FUZZ_CHECK(a.nbytes() == 0 || std::memcmp(back.array(i).data(), a.data(), a.nbytes()) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::optional<ckpt::core::NpzReader> reader = open(data, size, ckpt::core::Layout::automatic);
    if (!reader) return 0;

    // Reading as plain never depends on the objax names table, so it must open whatever opened automatically;
    // if detection chose objax (one entry fewer: 'names'), forcing objax must give the same entries.
    std::optional<ckpt::core::NpzReader> plain = open(data, size, ckpt::core::Layout::plain);
    FUZZ_CHECK(plain.has_value());
    FUZZ_CHECK(plain->size() == reader->size() || plain->size() == reader->size() + 1);
    FUZZ_CHECK(same_metadata(plain->metadata(), reader->metadata()));
    if (plain->size() != reader->size()) {
        std::optional<ckpt::core::NpzReader> objax = open(data, size, ckpt::core::Layout::objax);
        FUZZ_CHECK(objax.has_value() && objax->size() == reader->size());
        for (size_t i = 0; i < reader->size(); ++i) FUZZ_CHECK(same_entry(objax->entry(i), reader->entry(i)));
    }

    for (size_t i = 0; i < reader->size(); ++i) {
        const ckpt::core::NpyHeader& h = reader->entry(i).header;
        FUZZ_CHECK(h.data_offset + h.nbytes == reader->entry(i).size);
    }
    if (ckpt_fuzz::declared_array_bytes(*reader) > ckpt_fuzz::kMaxArrayBytes) return 0;

    std::optional<ckpt::core::VarCollection> all;
    try {
        all = reader->read_all();
    } catch (const ckpt::core::Error&) {}
    const auto each = read_each(*reader);
    check_views(*reader, each);

    // When everything reads at once, each entry reads on its own too, to the same bytes; the metadata came with it.
    if (all) {
        FUZZ_CHECK(same_metadata(all->metadata(), reader->metadata()));
        FUZZ_CHECK(all->size() == reader->size());
        for (size_t i = 0; i < all->size(); ++i) {
            const ckpt::core::Array& a = all->array(i);
            const ckpt::core::NpzReader::Entry& e = reader->entry(i);
            FUZZ_CHECK(all->name(i) == e.name);
            FUZZ_CHECK(a.dtype() == e.header.dtype && a.itemsize() == e.header.itemsize && a.shape() == e.header.shape);
            FUZZ_CHECK(each[i].has_value() && each[i]->size() == a.nbytes());
            FUZZ_CHECK(a.nbytes() == 0 || std::memcmp(each[i]->data(), a.data(), a.nbytes()) == 0);
        }
        check_as_base(data, size, *all);
    }
    return 0;
}
