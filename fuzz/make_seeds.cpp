// SPDX-License-Identifier: Apache-2.0
// Writes a few small archives with ckpt's own writer, for the fuzzers' seed corpus: every dtype, 0-d, empty and
// multi-dimensional arrays, unicode and non-ASCII names, in the plain and objax layouts, stored and deflated.
// Usage: make_seeds OUT_DIR
#include "core/error.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// An owned array whose bytes count up from `seed`, so members differ and deflate has something to find.
ckpt::core::Array counting(ckpt::core::DType dtype, size_t itemsize, std::vector<int64_t> shape, unsigned seed) {
    ckpt::core::Array a = ckpt::core::Array::allocate(dtype, itemsize, std::move(shape), true);
    auto* p = static_cast<unsigned char*>(a.data());
    for (size_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<unsigned char>(seed + i * 7);
    if (dtype == ckpt::core::DType::bool_)
        for (size_t i = 0; i < a.nbytes(); ++i) p[i] &= 1;
    if (dtype == ckpt::core::DType::unicode)  // keep every UTF-32 unit a valid code point
        for (size_t i = 0; i < a.nbytes(); i += 4) p[i + 1] = p[i + 2] = p[i + 3] = 0;
    return a;
}

ckpt::core::VarCollection every_dtype() {
    using ckpt::core::DType;
    ckpt::core::VarCollection vars;
    unsigned seed = 1;
    for (uint32_t v = 1; ckpt::core::is_dtype(v); ++v) {
        const auto d = static_cast<DType>(v);
        const size_t itemsize = d == DType::unicode ? 12
                                : d == DType::bytes ? 5
                                : d == DType::void_ ? 3
                                                    : ckpt::core::numeric_size(d);
        vars.add(std::string(ckpt::core::dtype_name(d)), counting(d, itemsize, {2, 3}, seed++));
    }
    return vars;
}

ckpt::core::VarCollection shapes() {
    using ckpt::core::DType;
    ckpt::core::VarCollection vars;
    vars.add("scalar", counting(DType::float64, 8, {}, 3));
    vars.add("empty", counting(DType::float32, 4, {0}, 4));
    vars.add("empty_2d", counting(DType::int32, 4, {3, 0}, 5));
    vars.add("cube", counting(DType::int16, 2, {2, 3, 4}, 6));
    vars.add("many_dims", counting(DType::uint8, 1, std::vector<int64_t>(10, 1), 7));
    vars.add("layer/weight", counting(DType::float32, 4, {4, 4}, 8));
    vars.add("\xc3\xa9t\xc3\xa9_\xe2\x88\x82", counting(DType::float16, 2, {5}, 9));  // "été_∂"
    return vars;
}

// User metadata and the dtype record: the metadata member with both of its objects filled.
ckpt::core::VarCollection with_metadata() {
    using ckpt::core::DType;
    ckpt::core::VarCollection vars;
    vars.add("w", counting(DType::bfloat16, 2, {3}, 10));
    vars.add("raw2", counting(DType::void_, 2, {2}, 11));
    vars.add("scale", counting(DType::float8_e8m0fnu, 1, {}, 12));
    vars.metadata().set("step", "100");
    vars.metadata().set("note", "\xc3\xa9t\xc3\xa9 \"quoted\" \\ \n");  // été, JSON escapes
    vars.metadata().set("empty", "");
    return vars;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const struct {
        const char* name;
        ckpt::core::VarCollection vars;
    } sets[] = {{"dtypes", every_dtype()},
                {"shapes", shapes()},
                {"metadata", with_metadata()},
                {"empty", ckpt::core::VarCollection()}};
    int written = 0;
    for (const auto& set : sets) {
        for (const ckpt::core::Layout layout : {ckpt::core::Layout::plain, ckpt::core::Layout::objax}) {
            for (const bool deflate : {false, true}) {
                ckpt::core::NpzWriteOptions options;
                options.layout = layout;
                options.deflate = deflate;
                const std::string path = dir + "/ckpt_" + set.name +
                                         (layout == ckpt::core::Layout::objax ? "_objax" : "") +
                                         (deflate ? "_deflate" : "_stored") + ".npz";
                try {
                    ckpt::core::save_npz(*ckpt::core::posix_storage(), path, set.vars, options);
                } catch (const ckpt::core::Error& e) {
                    std::fprintf(stderr, "%s\n", e.what());
                    return 1;
                }
                ++written;
            }
        }
    }
    // A file with chunk hashes (an array of 80 KiB: five chunks, the last one short, block-aligned; a small one that
    // is not chunked): the chunk table member, which a later save reads as its base.
    ckpt::core::VarCollection chunked;
    chunked.add("w", counting(ckpt::core::DType::float32, 4, {5 * 4096 + 7}, 13));
    chunked.add("b", counting(ckpt::core::DType::float64, 8, {3}, 14));
    ckpt::core::NpzWriteOptions options;
    options.chunk_hashes = true;
    try {
        ckpt::core::save_npz(*ckpt::core::posix_storage(), dir + "/ckpt_chunk_hashes.npz", chunked, options);
    } catch (const ckpt::core::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    ++written;
    std::printf("wrote %d archives to %s\n", written, dir.c_str());
    return 0;
}
