// SPDX-License-Identifier: Apache-2.0
// The one matcher of variables to stored arrays (core/restore_match.hpp) that file and sharded restores share, and
// the one reader and writer of decimal indices in names (core/decimal_index.hpp).
#include "core/decimal_index.hpp"
#include "core/error.hpp"
#include "core/restore_match.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace ckpt::core;
using Catch::Matchers::Equals;

namespace {

struct Stored {
    std::string name;
    DType dtype;
    size_t itemsize;
    std::vector<int64_t> shape;
};

std::vector<std::optional<size_t>> match(const VarCollection& vars, const std::vector<Stored>& on_disk,
                                         const Renamer& rename = {}, bool partial = false, bool global_rows = false,
                                         const std::string& where = "file") {
    const std::string label = "x.npz";
    return match_stored(
        vars, on_disk.size(),
        [&](size_t i) {
            return StoredArray{on_disk[i].name, on_disk[i].dtype, on_disk[i].itemsize, on_disk[i].shape};
        },
        RestoreMatch{label, where, rename, partial, global_rows});
}

std::string mismatch(const VarCollection& vars, const std::vector<Stored>& on_disk, const std::string& where = "file",
                     const Renamer& rename = {}) {
    try {
        match(vars, on_disk, rename, false, false, where);
    } catch (const Error& e) {
        CHECK(e.code() == (rename ? Code::invalid : Code::mismatch));
        return e.what();
    }
    FAIL("no error");
    return {};
}

}  // namespace

TEST_CASE("Each variable is matched to the stored array of its name, in any order") {
    float a[2], b[3];
    VarCollection vars;
    vars.add("a", Array::borrow(DType::float32, 4, {2}, a));
    vars.add("b", Array::borrow(DType::float32, 4, {3}, b));
    const auto m =
        match(vars, {{"b", DType::float32, 4, {3}}, {"unused", DType::int8, 1, {}}, {"a", DType::float32, 4, {2}}});
    REQUIRE(m.size() == 2);
    CHECK(m[0] == std::optional<size_t>(2));
    CHECK(m[1] == std::optional<size_t>(0));
}

TEST_CASE("A mismatch names every missing and differing variable and every unused stored name") {
    float a[2], b[3], c[1];
    VarCollection vars;
    vars.add("a", Array::borrow(DType::float32, 4, {2}, a));
    vars.add("b", Array::borrow(DType::float32, 4, {3}, b));
    vars.add("c", Array::borrow(DType::float32, 4, {1}, c));
    const std::vector<Stored> on_disk{
        {"a", DType::float32, 4, {2}}, {"b", DType::float64, 8, {3}}, {"d", DType::int8, 1, {}}};
    CHECK_THAT(mismatch(vars, on_disk),
               Equals("x.npz: cannot restore; missing from the file: 'c'; dtype or shape differ: 'b' is float32 (3) "
                      "in the collection but float64 (3) in the file; unused names in the file: 'd'"));
    // A sharded step says the same in its own words.
    CHECK_THAT(mismatch(vars, on_disk, "step"),
               Equals("x.npz: cannot restore; missing from the step: 'c'; dtype or shape differ: 'b' is float32 (3) "
                      "in the collection but float64 (3) in the step; unused names in the step: 'd'"));
}

TEST_CASE("partial leaves out what is not stored, but not what differs") {
    float a[2], b[3];
    VarCollection vars;
    vars.add("a", Array::borrow(DType::float32, 4, {2}, a));
    vars.add("b", Array::borrow(DType::float32, 4, {3}, b));
    const auto m = match(vars, {{"a", DType::float32, 4, {2}}}, {}, true);
    CHECK(m[0] == std::optional<size_t>(0));
    CHECK_FALSE(m[1].has_value());
    CHECK_THROWS_AS(match(vars, {{"a", DType::float32, 4, {3}}}, {}, true), Error);
}

TEST_CASE("A void array fills a variable of any fixed-size dtype with its item size, and only that size") {
    int32_t a[2];
    VarCollection vars;
    vars.add("a", Array::borrow(DType::int32, 4, {2}, a));
    CHECK(match(vars, {{"a", DType::void_, 4, {2}}})[0] == std::optional<size_t>(0));
    CHECK_THROWS_AS(match(vars, {{"a", DType::void_, 2, {2}}}), Error);
}

TEST_CASE("Renamed names are matched, and two stored names renamed to one are the caller's error") {
    float a[2];
    VarCollection vars;
    vars.add("new_a", Array::borrow(DType::float32, 4, {2}, a));
    const Renamer prefix = [](const std::string& n) { return "new_" + n; };
    CHECK(match(vars, {{"a", DType::float32, 4, {2}}}, prefix)[0] == std::optional<size_t>(0));
    const Renamer one = [](const std::string&) { return std::string("new_a"); };
    CHECK_THAT(mismatch(vars, {{"a", DType::float32, 4, {2}}, {"b", DType::float32, 4, {2}}}, "file", one),
               Equals("x.npz: the renamer maps both 'a' and 'b' to 'new_a'"));
}

TEST_CASE("A row-split variable is compared by its global shape only where the stored arrays are global") {
    float a[2 * 3];
    VarCollection vars;
    vars.add("a", Array::borrow(DType::float32, 4, {2, 3}, a));
    vars.set_rows(0, RowSplit{4, 8});
    CHECK(match(vars, {{"a", DType::float32, 4, {8, 3}}}, {}, false, true)[0] == std::optional<size_t>(0));
    CHECK(match(vars, {{"a", DType::float32, 4, {2, 3}}})[0] == std::optional<size_t>(0));
    CHECK_THROWS_AS(match(vars, {{"a", DType::float32, 4, {2, 3}}}, {}, false, true), Error);
}

TEST_CASE("Indices in names are read back exactly as they are written, and nothing else is") {
    CHECK(padded_index(42) == "0000000042");
    CHECK(padded_index(12345678901) == "12345678901");
    CHECK(padded_index(7, 1) == "7");
    for (int64_t i : {int64_t{0}, int64_t{42}, int64_t{9999999999}, int64_t{10000000000}, INT64_MAX}) {
        CHECK(parse_padded_index(padded_index(i)) == i);
        CHECK(parse_padded_index(padded_index(i, 1), 1) == i);
    }
    for (const char* bad : {"", "42", "000000042", "00000000042", "+000000042", "000000004a", "9223372036854775808",
                            "99999999999999999999"})
        CHECK_FALSE(parse_padded_index(bad).has_value());
    CHECK_FALSE(parse_padded_index("07", 1).has_value());
    CHECK(parse_padded_index("0", 1) == 0);
}
