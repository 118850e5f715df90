// SPDX-License-Identifier: Apache-2.0
// What inspection tools see of a file through the C API: each array's member, compression, stored bytes, CRC-32 and
// data offset, and the layout — checked against the file's own bytes.
#include "ckpt/ckpt.h"
#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_builder.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace {

using ckpt::testing::read_file;
using ckpt::testing::TempDir;
using ckpt::testing::write_file;

std::string save(const TempDir& dir, uint32_t layout, uint32_t compression) {
    const ckpt::testing::Vars vars = ckpt::testing::new_vars();
    ckpt_vars* v = vars.get();
    float w[64];
    for (int i = 0; i < 64; ++i) w[i] = static_cast<float>(i % 7);
    const int64_t shape[] = {8, 8};
    const double s = 2.5;
    REQUIRE(ckpt_vars_add(v, "w", CKPT_FLOAT32, 2, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_vars_add(v, "s", CKPT_FLOAT64, 0, nullptr, &s, CKPT_COPY) == CKPT_OK);
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.layout = layout;
    o.compression = compression;
    const std::string path = dir.file("inspect.npz");
    REQUIRE(ckpt_save(path.c_str(), v, &o) == CKPT_OK);
    return path;
}

}  // namespace

TEST_CASE("each array's member, compression, stored bytes, CRC-32 and data offset match the file", "[inspect]") {
    TempDir dir;
    for (const uint32_t layout : {CKPT_LAYOUT_PLAIN, CKPT_LAYOUT_OBJAX}) {
        for (const uint32_t compression : {CKPT_STORE, CKPT_DEFLATE}) {
            DYNAMIC_SECTION("layout " << layout << ", compression " << compression) {
                const std::string path = save(dir, layout, compression);
                const std::string bytes = read_file(path);
                ckpt_reader* n = nullptr;
                REQUIRE(ckpt_reader_open(&n, path.c_str(), nullptr) == CKPT_OK);
                const ckpt::testing::Reader npz(n);
                CHECK(ckpt_reader_layout(n) == layout);
                REQUIRE(ckpt_reader_count(n) == 2);
                const char* members[] = {layout == CKPT_LAYOUT_OBJAX ? "0.npy" : "w.npy",
                                         layout == CKPT_LAYOUT_OBJAX ? "1.npy" : "s.npy"};
                for (size_t i = 0; i < 2; ++i) {
                    INFO("array " << i);
                    CHECK(std::string(ckpt_reader_member_name(n, i)) == members[i]);
                    CHECK(ckpt_reader_compression(n, i) == compression);
                    // The central directory's CRC-32 and compressed size, and the local header's length, read from
                    // the bytes by the test itself.
                    size_t central = 0;
                    for (;; ++central) {
                        central = bytes.find(std::string("PK\x01\x02", 4), central);
                        REQUIRE(central != std::string::npos);
                        if (bytes.compare(central + 46, zipb::get(bytes, central + 28, 2), members[i]) == 0) break;
                    }
                    CHECK(ckpt_reader_crc32(n, i) == zipb::get(bytes, central + 16, 4));
                    const uint64_t stored = ckpt_reader_stored_bytes(n, i);
                    CHECK(stored == zipb::get(bytes, central + 20, 4));
                    const size_t at = zipb::get(bytes, central + 42, 4);  // the local header
                    const size_t data_at = at + 30 + zipb::get(bytes, at + 26, 2) + zipb::get(bytes, at + 28, 2);
                    if (compression == CKPT_STORE) {
                        CHECK(stored == ckpt_reader_nbytes(n, i) + (ckpt_reader_data_offset(n, i) - data_at));
                        const uint64_t off = ckpt_reader_data_offset(n, i);
                        CHECK(off % 64 == 0);  // ckpt aligns stored data for mapping
                        REQUIRE(off + ckpt_reader_nbytes(n, i) <= bytes.size());
                        std::string data(ckpt_reader_nbytes(n, i), '\0');
                        REQUIRE(ckpt_reader_read_into(n, i, &data[0], data.size()) == CKPT_OK);
                        CHECK(bytes.compare(off, data.size(), data) == 0);  // the bytes at the offset are the array
                    } else {
                        CHECK(ckpt_reader_data_offset(n, i) == 0);
                        CHECK(stored < 30 + ckpt_reader_nbytes(n, i) + 128);
                    }
                }
                CHECK(ckpt_reader_member_name(n, 2) == nullptr);
                CHECK(ckpt_reader_stored_bytes(n, 2) == 0);
                CHECK(ckpt_reader_crc32(n, 2) == 0);
                CHECK(ckpt_reader_data_offset(n, 2) == 0);
            }
        }
    }
    CHECK(ckpt_reader_layout(nullptr) == 0);
    CHECK(ckpt_reader_member_name(nullptr, 0) == nullptr);
    CHECK(ckpt_reader_compression(nullptr, 0) == CKPT_STORE);
}
