// SPDX-License-Identifier: Apache-2.0
// libzip as an independent judge of ckpt's zip writer: every kind of archive ckpt writes must open in libzip with
// ZIP_CHECKCONS (which compares every local header with the central directory), list the members ckpt's own reader
// lists, in the same order, and give back through zip_fread exactly the bytes ckpt was asked to write — each npy
// header as format_npy_header makes it and the array's bytes — with zip_stat agreeing with ckpt's reader on CRC-32,
// sizes and compression method.
//
// The archives are a table: one line per kind (a collection and write options), written once and judged by every
// TEST_CASE below. libzip 1.7.3 quirks that the judge works around (docs/format.md): a CRC error shows only on the
// zip_fread call after the last byte, so each member is read until zip_fread returns 0; one zip_fread of more than
// 4 GiB from a deflated member returns a wrong length, so members are read in 1 MiB chunks.
#include "core/array.hpp"
#include "core/dtype.hpp"
#include "npz/metadata.hpp"
#include "npy/npy.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"
#include "core/utf8.hpp"
#include "core/var_collection.hpp"
#include "npz/zip_reader.hpp"

#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ckpt::core;

namespace {

// ------------------------------------------------------------------------------------------- archives in memory

// A read-only region of zeros that costs no memory however large (every page maps the kernel's zero page): the
// data of the array over 4 GiB, borrowed by the collection and referenced, not copied, by the written archive.
class Zeros {
public:
    static constexpr size_t kBytes = (size_t{4} << 30) + 4096;
    static const unsigned char* data() {
        static Zeros zeros;
        return zeros.p_;
    }

private:
    Zeros() {
        void* p = mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("mmap of the zero region failed");
        p_ = static_cast<const unsigned char*>(p);
    }
    ~Zeros() { munmap(const_cast<unsigned char*>(p_), kBytes); }
    const unsigned char* p_;
};

bool in_zeros(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    return b >= Zeros::data() && n <= Zeros::kBytes && b - Zeros::data() <= static_cast<ptrdiff_t>(Zeros::kBytes - n);
}

// An archive as a list of fragments: bytes ckpt wrote (copied), and runs of the zero region that it wrote straight
// from a borrowed array (referenced). libzip reads it through zip_source_buffer_fragment_create, ckpt through
// FragmentInput.
struct Archive {
    std::vector<std::string> owned;
    std::vector<zip_buffer_fragment_t> fragments;
    uint64_t size = 0;
};

class FragmentOutput final : public OutputFile {
public:
    void write(const void* data, size_t n) override {
        if (n == 0) return;
        if (in_zeros(data, n)) {
            pieces_.push_back({static_cast<const unsigned char*>(data), {}, n});
        } else {
            if (pieces_.empty() || pieces_.back().borrowed != nullptr) pieces_.push_back({nullptr, {}, 0});
            pieces_.back().owned.append(static_cast<const char*>(data), n);
            pieces_.back().size += n;
        }
    }
    void sync() override {}
    void close() override {}

    Archive take() {
        Archive a;
        for (Piece& p : pieces_)
            if (p.borrowed == nullptr) a.owned.push_back(std::move(p.owned));
        size_t owned = 0;
        for (const Piece& p : pieces_) {
            const unsigned char* data = p.borrowed != nullptr ? p.borrowed : reinterpret_cast<const unsigned char*>(a.owned[owned++].data());
            a.fragments.push_back({const_cast<unsigned char*>(data), p.size});
            a.size += p.size;
        }
        pieces_.clear();
        return a;
    }

private:
    struct Piece {
        const unsigned char* borrowed;
        std::string owned;
        size_t size;
    };
    std::vector<Piece> pieces_;
};

class FragmentInput final : public InputFile {
public:
    explicit FragmentInput(const Archive& a) : a_(a) {}
    uint64_t size() const override { return a_.size; }
    size_t read_at(uint64_t offset, void* dst, size_t n) override {
        auto* out = static_cast<unsigned char*>(dst);
        size_t done = 0;
        uint64_t start = 0;
        for (const zip_buffer_fragment_t& f : a_.fragments) {
            if (done == n) break;
            const uint64_t end = start + f.length;
            if (offset + done < end) {
                const uint64_t from = offset + done - start;
                const size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, f.length - from));
                std::memcpy(out + done, f.data + from, k);
                done += k;
            }
            start = end;
        }
        return done;
    }

private:
    const Archive& a_;
};

// ---------------------------------------------------------------------------------------------- collections

// Bytes that differ from array to array and place to place, so deflate has work and a misplaced byte shows.
Array filled(DType dtype, size_t itemsize, std::vector<int64_t> shape, uint32_t seed) {
    Array a = Array::allocate(dtype, itemsize, std::move(shape), false);
    auto* p = static_cast<unsigned char*>(a.data());
    uint32_t x = seed;
    for (size_t i = 0; i < a.nbytes(); ++i) {
        x = x * 1664525u + 1013904223u;
        p[i] = static_cast<unsigned char>((i % 64 < 40 ? x >> 24 : i) & 0xff);
    }
    if (dtype == DType::bool_)
        for (size_t i = 0; i < a.nbytes(); ++i) p[i] &= 1;
    if (dtype == DType::unicode)  // valid code points, below the surrogates
        for (size_t i = 0; i < a.nbytes(); i += 4) {
            p[i + 1] &= 0x7f;
            p[i + 2] = p[i + 3] = 0;
        }
    return a;
}

VarCollection every_dtype() {
    VarCollection vars;
    uint32_t seed = 1;
    for (uint32_t v = 1; is_dtype(v); ++v) {
        const auto d = static_cast<DType>(v);
        const size_t itemsize =
            d == DType::unicode ? 12 : d == DType::bytes ? 5 : d == DType::void_ ? 3 : numeric_size(d);
        vars.add(dtype_name(d), filled(d, itemsize, {3, 5}, seed++));
    }
    return vars;
}

VarCollection nothing() { return VarCollection(); }

// The metadata member with both of its objects: user key/values and the types of raw-byte arrays.
VarCollection with_metadata() {
    VarCollection vars;
    vars.add("w", filled(DType::bfloat16, 2, {4, 4}, 1));
    vars.add("raw2", filled(DType::void_, 2, {3}, 2));
    vars.add("f8", filled(DType::float8_e4m3fn, 1, {5}, 3));
    vars.metadata().set("step", "1200");
    vars.metadata().set("note", "\xc3\xa9t\xc3\xa9 \"quoted\"");
    return vars;
}

VarCollection scalars_and_empties() {
    VarCollection vars;
    vars.add("scalar", filled(DType::float64, 8, {}, 1));
    vars.add("flag", filled(DType::bool_, 1, {}, 2));
    vars.add("empty", filled(DType::float32, 4, {0}, 3));
    vars.add("empty_rows", filled(DType::int32, 4, {0, 7}, 4));
    vars.add("empty_cols", filled(DType::uint16, 2, {7, 0}, 5));
    vars.add("empty_text", filled(DType::unicode, 4, {0}, 6));
    vars.add("after", filled(DType::int8, 1, {3}, 7));
    return vars;
}

VarCollection unicode_names() {
    VarCollection vars;
    vars.add("layer/weight", filled(DType::float32, 4, {4, 4}, 1));
    vars.add("\xc3\xa9t\xc3\xa9", filled(DType::float16, 2, {5}, 2));          // "été"
    vars.add("\xe6\x9d\x83\xe9\x87\x8d", filled(DType::int64, 8, {2}, 3));     // "权重"
    vars.add("emb/\xf0\x9f\x98\x80", filled(DType::complex64, 8, {3}, 4));    // an emoji
    return vars;
}

VarCollection small_arrays(size_t n) {
    VarCollection vars;
    for (size_t i = 0; i < n; ++i)
        vars.add("layer" + std::to_string(i) + "/w", filled(DType::float32, 4, {static_cast<int64_t>(i % 9)}, static_cast<uint32_t>(i)));
    return vars;
}
VarCollection thousand_arrays() { return small_arrays(1000); }
// ZipWriter needs zip64 end records from 65535 members on (the 16-bit count saturates there).
VarCollection arrays_65535() { return small_arrays(65535); }
VarCollection arrays_65534() { return small_arrays(65534); }  // + names.npy in the objax layout

VarCollection large_array() {
    VarCollection vars;
    vars.add("before", filled(DType::int32, 4, {10}, 1));
    vars.add("big", filled(DType::float32, 4, {int64_t{6} << 20}, 2));  // 24 MiB: CRC-32 ahead, many deflate blocks
    vars.add("after", filled(DType::int32, 4, {10}, 3));
    return vars;
}

// A member of 4 GiB + 1 byte of data (zip64 sizes; not 0xffffffff, which libzip 1.7.3 mishandles), then one at an
// offset past 4 GiB (zip64 offset in the central directory, zip64 end records).
VarCollection over_4gib() {
    VarCollection vars;
    vars.add("small", filled(DType::uint8, 1, {100}, 1));
    vars.add("huge", Array::borrow(DType::uint8, 1, {(int64_t{1} << 32) + 1}, const_cast<unsigned char*>(Zeros::data())));
    vars.add("tail", filled(DType::uint8, 1, {100}, 2));
    return vars;
}

NpzWriteOptions options(Layout layout, bool deflate, int level = 0) {
    NpzWriteOptions o;
    o.layout = layout;
    o.deflate = deflate;
    o.level = level;
    return o;
}

struct Case {
    const char* name;
    VarCollection (*vars)();
    NpzWriteOptions options;
    bool zip64 = false;  // needs zip64 end records
};

// Every kind of archive ckpt writes. One line adds one.
const Case kCases[] = {
    {"plain layout, stored, every dtype", every_dtype, options(Layout::plain, false)},
    {"plain layout, deflated at zlib's default level, every dtype", every_dtype, options(Layout::plain, true)},
    {"plain layout, deflated at level 1", every_dtype, options(Layout::plain, true, 1)},
    {"plain layout, deflated at level 9", every_dtype, options(Layout::plain, true, 9)},
    {"objax layout, stored", every_dtype, options(Layout::objax, false)},
    {"objax layout, deflated", every_dtype, options(Layout::objax, true)},
    {"user metadata and raw-byte types, stored", with_metadata, options(Layout::plain, false)},
    {"user metadata and raw-byte types, objax layout, deflated", with_metadata, options(Layout::objax, true)},
    {"an empty collection, plain layout, stored", nothing, options(Layout::plain, false)},
    {"an empty collection, plain layout, deflated", nothing, options(Layout::plain, true)},
    {"an empty collection, objax layout, stored", nothing, options(Layout::objax, false)},
    {"an empty collection, objax layout, deflated", nothing, options(Layout::objax, true)},
    {"0-d and empty arrays, stored", scalars_and_empties, options(Layout::plain, false)},
    {"0-d and empty arrays, deflated", scalars_and_empties, options(Layout::plain, true)},
    {"0-d and empty arrays, objax layout, deflated", scalars_and_empties, options(Layout::objax, true)},
    {"non-ASCII names, stored", unicode_names, options(Layout::plain, false)},
    {"non-ASCII names, objax layout, deflated", unicode_names, options(Layout::objax, true)},
    {"1000 small arrays, stored", thousand_arrays, options(Layout::plain, false)},
    {"1000 small arrays, deflated", thousand_arrays, options(Layout::plain, true)},
    {"a 24 MiB array, stored", large_array, options(Layout::plain, false)},
    {"a 24 MiB array, deflated", large_array, options(Layout::plain, true)},
    {"65535 members (zip64 end records), stored", arrays_65535, options(Layout::plain, false), true},
    {"65535 members (zip64 end records), objax layout, deflated", arrays_65534, options(Layout::objax, true), true},
    {"an array over 4 GiB (zip64 sizes and offsets), stored", over_4gib, options(Layout::plain, false), true},
};

// ------------------------------------------------------------------------------------------- what ckpt wrote

// A member as ckpt was asked to write it: the npy header, then the array's bytes.
struct ExpectedMember {
    std::string name;
    std::string header;
    const unsigned char* data;
    size_t nbytes;
};

struct Written {
    VarCollection vars;
    std::u32string names;  // the objax names table
    std::u32string metadata;  // the metadata member's text
    Archive archive;
    std::vector<ExpectedMember> members;
    bool deflate;
};

const Written& written(const Case& c) {
    static std::map<std::string, std::unique_ptr<Written>> cache;
    std::unique_ptr<Written>& w = cache[c.name];
    if (w) return *w;
    w = std::make_unique<Written>();
    w->vars = c.vars();
    w->deflate = c.options.deflate;
    FragmentOutput out;
    write_npz(out, w->vars, c.options);
    w->archive = out.take();

    const bool objax = c.options.layout == Layout::objax;
    if (objax) {  // objax's names: numpy '<U<longest>', one zero-padded UTF-32 row per variable ('<U1' for none)
        size_t chars = 1;
        for (size_t i = 0; i < w->vars.size(); ++i) chars = std::max(chars, utf8_to_utf32(w->vars.name(i)).size());
        for (size_t i = 0; i < w->vars.size(); ++i) {
            std::u32string row = utf8_to_utf32(w->vars.name(i));
            row.resize(chars, U'\0');
            w->names += row;
        }
        w->members.push_back({"names.npy", format_npy_header(DType::unicode, 4 * chars, {static_cast<int64_t>(w->vars.size())}),
                              reinterpret_cast<const unsigned char*>(w->names.data()), w->names.size() * sizeof(char32_t)});
    }
    for (size_t i = 0; i < w->vars.size(); ++i) {
        const Array& a = w->vars.array(i);
        w->members.push_back({(objax ? std::to_string(i) : w->vars.name(i)) + ".npy", format_npy_header(a.dtype(), a.itemsize(), a.shape()),
                              static_cast<const unsigned char*>(a.data()), a.nbytes()});
    }
    // Last, when there is anything to record: the user's metadata and the types numpy cannot name.
    MetadataRecord record;
    record.user = w->vars.metadata();
    for (size_t i = 0; i < w->vars.size(); ++i) {
        const Array& a = w->vars.array(i);
        if (is_ml_dtype(a.dtype()) || (a.dtype() == DType::void_ && a.itemsize() == 2))
            record.dtypes.emplace_back(objax ? std::to_string(i) : w->vars.name(i), a.dtype());
    }
    if (!record.dtypes.empty() || !record.user.empty()) {
        w->metadata = utf8_to_utf32(metadata_to_json(record));
        w->members.push_back({"__ckpt_metadata__.npy", format_npy_header(DType::unicode, 4 * w->metadata.size(), {}),
                              reinterpret_cast<const unsigned char*>(w->metadata.data()),
                              w->metadata.size() * sizeof(char32_t)});
    }
    return *w;
}

uint32_t crc_of(const ExpectedMember& m) {
    uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(m.header.data()), static_cast<uInt>(m.header.size()));
    for (size_t done = 0; done < m.nbytes;) {
        const size_t k = std::min<size_t>(m.nbytes - done, size_t{1} << 30);
        crc = crc32(crc, m.data + done, static_cast<uInt>(k));
        done += k;
    }
    return static_cast<uint32_t>(crc);
}

// ------------------------------------------------------------------------------------------------ libzip side

struct ZipDiscard {
    void operator()(zip_t* z) const { zip_discard(z); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;

// Opens the archive in libzip, read-only and with ZIP_CHECKCONS; nullptr and `error` set if libzip refuses it.
ZipPtr libzip_open(const Archive& a, std::string& error) {
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_fragment_create(a.fragments.data(), a.fragments.size(), 0, &err);
    if (src == nullptr) {
        error = zip_error_strerror(&err);
        zip_error_fini(&err);
        return nullptr;
    }
    zip_t* za = zip_open_from_source(src, ZIP_CHECKCONS | ZIP_RDONLY, &err);
    if (za == nullptr) {
        error = zip_error_strerror(&err);
        zip_source_free(src);
    }
    zip_error_fini(&err);
    return ZipPtr(za);
}

ZipPtr require_open(const Archive& a) {
    std::string error;
    ZipPtr za = libzip_open(a, error);
    INFO("libzip: " << error);
    REQUIRE(za != nullptr);
    return za;
}

// Reads member `index` through libzip to the end, in pieces of buf's size, and compares it with `want`. Returns ""
// or what went wrong.
std::string read_and_compare(zip_t* za, zip_uint64_t index, const ExpectedMember& want, std::vector<unsigned char>& buf) {
    zip_file_t* f = zip_fopen_index(za, index, 0);
    if (f == nullptr) return std::string("zip_fopen_index: ") + zip_error_strerror(zip_get_error(za));
    uint64_t at = 0;
    const uint64_t total = want.header.size() + want.nbytes;
    std::string problem;
    for (;;) {
        const zip_int64_t got = zip_fread(f, buf.data(), buf.size());
        if (got < 0) {
            problem = std::string("zip_fread after ") + std::to_string(at) + " bytes: " + zip_error_strerror(zip_file_get_error(f));
            break;
        }
        if (got == 0) break;
        const size_t n = static_cast<size_t>(got);
        if (at + n > total) {
            problem = "more than the " + std::to_string(total) + " bytes written";
            break;
        }
        for (size_t i = 0; i < n;) {  // against the header, then the data
            const uint64_t pos = at + i;
            const bool in_header = pos < want.header.size();
            const unsigned char* expected = in_header ? reinterpret_cast<const unsigned char*>(want.header.data()) + pos : want.data + (pos - want.header.size());
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n - i, in_header ? want.header.size() - pos : total - pos));
            if (std::memcmp(buf.data() + i, expected, k) != 0) {
                problem = "bytes differ in [" + std::to_string(pos) + ", " + std::to_string(pos + k) + ")";
                break;
            }
            i += k;
        }
        if (!problem.empty()) break;
        at += n;
    }
    zip_fclose(f);
    if (problem.empty() && at != total) problem = "ends after " + std::to_string(at) + " of " + std::to_string(total) + " bytes";
    return problem;
}

}  // namespace

// ----------------------------------------------------------------------------------------------------- judging

TEST_CASE("libzip opens every kind of archive ckpt writes, with its consistency checks", "[libzip]") {
    for (const Case& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const Written& w = written(c);
            std::string error;
            const ZipPtr za = libzip_open(w.archive, error);
            INFO("libzip: " << error);
            CHECK(za != nullptr);
        }
    }
}

TEST_CASE("ckpt writes zip64 end records where, and only where, the table says they are needed", "[libzip]") {
    for (const Case& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const Written& w = written(c);
            FragmentInput in(w.archive);
            unsigned char tail[42] = {};  // a zip64 locator, then the end record (ckpt writes no comment)
            const size_t n = static_cast<size_t>(std::min<uint64_t>(in.size(), sizeof tail));
            REQUIRE(in.read_at(in.size() - n, tail + sizeof tail - n, n) == n);
            CHECK(std::memcmp(tail + 20, "PK\x05\x06", 4) == 0);
            CHECK((std::memcmp(tail, "PK\x06\x07", 4) == 0) == c.zip64);
        }
    }
}

TEST_CASE("libzip lists the members ckpt's reader sees, and no others, in the same order", "[libzip]") {
    for (const Case& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const Written& w = written(c);
            const ZipPtr za = require_open(w.archive);
            REQUIRE(zip_get_num_entries(za.get(), 0) == static_cast<zip_int64_t>(w.members.size()));

            FragmentInput in(w.archive);
            const ZipReader zip(in, "<memory>", kDefaultMaxMembers);
            REQUIRE(zip.members().size() == w.members.size());
            for (size_t i = 0; i < w.members.size(); ++i) {
                const char* name = zip_get_name(za.get(), i, ZIP_FL_ENC_RAW);
                REQUIRE(name != nullptr);
                INFO("member #" << i);
                CHECK(name == w.members[i].name);
                CHECK(zip.members()[i].name == w.members[i].name);
            }

            // The variables ckpt reads are the same members, in the same places.
            NpzReadOptions o;
            o.layout = c.options.layout;
            const NpzReader npz(std::make_unique<FragmentInput>(w.archive), "<memory>", o);
            REQUIRE(npz.size() == w.vars.size());
            const size_t first = c.options.layout == Layout::objax ? 1 : 0;
            for (size_t i = 0; i < npz.size(); ++i) {
                INFO("variable #" << i);
                CHECK(npz.entry(i).name == w.vars.name(i));
                CHECK(npz.entry(i).member == zip_get_name(za.get(), first + i, ZIP_FL_ENC_RAW));
                CHECK(npz.entry(i).index == first + i);
                CHECK(npz.entry(i).header.dtype == w.vars.array(i).dtype());  // as the metadata member records
            }
            REQUIRE(npz.metadata().size() == w.vars.metadata().size());
            for (size_t i = 0; i < npz.metadata().size(); ++i)
                CHECK(npz.metadata().value(i) == w.vars.metadata().value(i));
        }
    }
}

TEST_CASE("every member reads back through libzip as the npy header and array bytes ckpt wrote", "[libzip]") {
    for (const Case& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const Written& w = written(c);
            const ZipPtr za = require_open(w.archive);
            REQUIRE(zip_get_num_entries(za.get(), 0) == static_cast<zip_int64_t>(w.members.size()));
            std::vector<unsigned char> buf(size_t{1} << 20);  // < 4 GiB: see the top of this file
            size_t wrong = 0;
            for (size_t i = 0; i < w.members.size(); ++i) {
                const std::string problem = read_and_compare(za.get(), i, w.members[i], buf);
                if (problem.empty()) continue;
                if (++wrong <= 5) FAIL_CHECK("member '" << w.members[i].name << "': " << problem);
            }
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("libzip's zip_stat agrees with ckpt on each member's CRC-32, sizes and compression method", "[libzip]") {
    for (const Case& c : kCases) {
        DYNAMIC_SECTION(c.name) {
            const Written& w = written(c);
            const ZipPtr za = require_open(w.archive);
            FragmentInput in(w.archive);
            const ZipReader zip(in, "<memory>", kDefaultMaxMembers);
            REQUIRE(zip.members().size() == w.members.size());
            size_t wrong = 0;
            for (size_t i = 0; i < w.members.size(); ++i) {
                const ExpectedMember& want = w.members[i];
                const ZipReader::Member& m = zip.members()[i];
                zip_stat_t st;
                zip_stat_init(&st);
                REQUIRE(zip_stat_index(za.get(), i, 0, &st) == 0);
                const uint64_t size = want.header.size() + want.nbytes;
                const uint16_t method = w.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE;
                const bool agree = (st.valid & ZIP_STAT_CRC) && (st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE) &&
                                   (st.valid & ZIP_STAT_COMP_METHOD) && st.crc == crc_of(want) && st.crc == m.crc &&
                                   st.size == size && st.size == m.size && st.comp_size == m.compressed &&
                                   st.comp_method == method && st.comp_method == m.method;
                if (agree) continue;
                if (++wrong <= 5)
                    FAIL_CHECK("member '" << want.name << "': libzip says crc " << std::hex << st.crc << ", size " << std::dec
                                          << st.size << ", compressed " << st.comp_size << ", method " << st.comp_method
                                          << "; ckpt's reader says crc " << std::hex << m.crc << ", size " << std::dec
                                          << m.size << ", compressed " << m.compressed << ", method " << m.method
                                          << "; written: size " << size << ", method " << method);
            }
            CHECK(wrong == 0);
        }
    }
}
