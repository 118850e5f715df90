// SPDX-License-Identifier: Apache-2.0
// Nested state read from C++ (ckpt/cpp/tree.hpp): the structure record of docs/format.md, walked, searched by path,
// checked against the file's arrays, and refused when damaged. The record Python writes for real training state
// is read in tests/cross (cross_test.py's nested-state check).
#include "support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using test::TempDir;
using Kind = ckpt::TreeNode::Kind;

namespace {

// docs/format.md's example: {"w": w, "opt": {0: (0.5, None)}, "l": [v]}
const char* const format_example =
    R"({"dict":[["w",{"array":"w"}],["opt",{"dict":[[0,{"tuple":[{"float":"0.5"},null]}]]}],)"
    R"(["l",{"list":[{"array":"l/0"}]}]]})";

// Every node as "path kind text", in the walk's order.
std::vector<std::string> listing(const ckpt::Tree& tree) {
    std::vector<std::string> out;
    tree.walk([&](const std::string& path, const ckpt::TreeNode& node) {
        out.push_back(path + " " + ckpt::TreeNode::kind_name(node.kind()) + " " + node.text());
    });
    return out;
}

std::string format_error(const std::string& record) {
    try {
        ckpt::Tree::parse(record, "x.npz");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EFORMAT);
        return e.what();
    }
    FAIL("the record was accepted: " << record);
    return "";
}

}  // namespace

TEST_CASE("the documented example walks as the structure it records", "[tree]") {
    const ckpt::Tree tree = ckpt::Tree::parse(format_example);
    CHECK(listing(tree) == std::vector<std::string>{" dict ", "w array w", "opt dict ", "opt/0 tuple ",
                                                    "opt/0/0 float 0.5", "opt/0/1 None ", "l list ", "l/0 array l/0"});
    const ckpt::TreeNode& root = tree.root();
    REQUIRE(root.kind() == Kind::dict);
    REQUIRE(root.size() == 3);
    CHECK(root.entries()[1].key.text == "opt");
    CHECK_FALSE(root.entries()[1].key.is_int);
    const ckpt::TreeEntry& zero = root.entries()[1].value.entries()[0];
    CHECK(zero.key.is_int);
    CHECK(zero.key.as_int() == 0);
    CHECK(zero.value.kind() == Kind::tuple);
    CHECK(zero.value.items()[0].as_double() == 0.5);
    CHECK(tree.members() == std::vector<std::string>{"w", "l/0"});
    REQUIRE(tree.find("l/0") != nullptr);
    CHECK(tree.find("l/0")->member() == "l/0");
    CHECK(tree.find("") == &root);
    CHECK(tree.find("opt/0/1")->kind() == Kind::none);
    CHECK(tree.find("opt/1") == nullptr);
    CHECK(tree.find("l/00") == nullptr);
    CHECK(tree.find("l/1") == nullptr);
    CHECK(tree.find("w/0") == nullptr);
}

TEST_CASE("scalars keep their type and exact value", "[tree]") {
    const ckpt::Tree tree = ckpt::Tree::parse(
        R"({"dict":[["i",-12],["big",123456789012345678901234567890],["t",true],["f",false],["s","\u00e9t\u00e9 \ud83d\ude00\n"],)"
        R"(["nan",{"float":"nan"}],["inf",{"float":"-inf"}],["z",{"float":"-0.0"}],["e",{"float":"1e-05"}],)"
        R"(["bare",2.5]]})");
    CHECK(tree.find("i")->as_int() == -12);
    CHECK(tree.find("i")->as_double() == -12.0);
    const ckpt::TreeNode& big = *tree.find("big");
    CHECK(big.kind() == Kind::integer);
    CHECK(big.text() == "123456789012345678901234567890");
    CHECK(test::code_of([&] { big.as_int(); }) == CKPT_EINVAL);
    CHECK(tree.find("t")->as_bool());
    CHECK_FALSE(tree.find("f")->as_bool());
    CHECK(tree.find("s")->text() == "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\n");
    CHECK(std::isnan(tree.find("nan")->as_double()));
    CHECK(tree.find("inf")->as_double() == -INFINITY);
    CHECK(std::signbit(tree.find("z")->as_double()));
    CHECK(tree.find("z")->as_double() == 0.0);
    CHECK(tree.find("e")->as_double() == 1e-05);
    CHECK(tree.find("e")->text() == "1e-05");
    CHECK(tree.find("bare")->as_double() == 2.5);
    // Asking a node for what it is not is an argument error naming both.
    try {
        tree.find("s")->as_int();
        FAIL("a str gave an int");
    } catch (const ckpt::Error& e) {
        CHECK(e.code() == CKPT_EINVAL);
        CHECK(std::string(e.what()) == "ckpt::TreeNode: the node is a str, not an int");
    }
    CHECK(test::code_of([&] { tree.find("i")->entries(); }) == CKPT_EINVAL);
}

TEST_CASE("keys with the separator and the escape round-trip through paths", "[tree]") {
    CHECK(ckpt::tree_escape("a/b~c") == "a~1b~0c");
    CHECK(ckpt::tree_unescape("a~1b~0c") == "a/b~c");
    CHECK(ckpt::tree_unescape("~01") == "~1");
    const ckpt::Tree tree = ckpt::Tree::parse(R"({"dict":[["a/b~c",{"dict":[["~1",{"array":"a~1b~0c/~01"}]]}]]})");
    REQUIRE(tree.find("a~1b~0c/~01") != nullptr);
    CHECK(tree.find("a~1b~0c/~01")->member() == "a~1b~0c/~01");
    CHECK(tree.root().entries()[0].key.text == "a/b~c");
    std::vector<std::string> paths;
    tree.walk([&](const std::string& path, const ckpt::TreeNode&) { paths.push_back(path); });
    CHECK(paths == std::vector<std::string>{"", "a~1b~0c", "a~1b~0c/~01"});
}

TEST_CASE("a checkpoint's structure is checked against its arrays", "[tree]") {
    TempDir dir;
    const std::string path = dir.path("nested.npz");
    {
        ckpt::Vars vars;
        vars.add("w", {1.0f, 2.0f});
        vars.add("l/0", {int64_t{7}});
        vars.add("extra", {int32_t{3}});
        vars.set_metadata(ckpt::tree_key, format_example);
        ckpt::save(path, vars);
    }
    SECTION("by a reader, with an array the record does not place kept at the top") {
        ckpt::Reader reader(path);
        const ckpt::Tree tree = ckpt::Tree::of(reader, path);
        CHECK(tree.members() == std::vector<std::string>{"w", "l/0", "extra"});
        CHECK(reader.read<int64_t>(tree.find("l/0")->member()) == std::vector<int64_t>{7});
        CHECK(tree.find("opt/0/0")->as_double() == 0.5);
    }
    SECTION("by a collection read whole") {
        const ckpt::Vars vars = ckpt::read(path);
        CHECK(ckpt::Tree::of(vars).members() == std::vector<std::string>{"w", "l/0", "extra"});
    }
    SECTION("a file saved flat is a dict of its arrays") {
        const std::string flat = dir.path("flat.npz");
        ckpt::Vars vars;
        vars.add("a", {1.0});
        vars.add("b/c", {2.0});
        ckpt::save(flat, vars);
        ckpt::Reader reader(flat);
        CHECK(listing(ckpt::Tree::of(reader)) == std::vector<std::string>{" dict ", "a array a", "b~1c array b/c"});
    }
    SECTION("a record naming an array the file does not have") {
        const std::string bad = dir.path("bad.npz");
        ckpt::Vars vars;
        vars.add("w", {1.0f});
        vars.set_metadata(ckpt::tree_key, format_example);
        ckpt::save(bad, vars);
        ckpt::Reader reader(bad);
        try {
            ckpt::Tree::of(reader, bad);
            FAIL("a record naming a missing array was accepted");
        } catch (const ckpt::Error& e) {
            CHECK(e.code() == CKPT_EFORMAT);
            CHECK(std::string(e.what()) ==
                  bad + ": its __ckpt_tree__ names the array \"l/0\", which the file does not have");
        }
    }
}

TEST_CASE("a damaged record is a format error naming the file and the fault", "[tree]") {
    CHECK(format_error("{") == "x.npz: its __ckpt_tree__ is cut short: '\"' expected (at byte 1)");
    CHECK(format_error(R"({"dict":[["a" 1]]})") ==
          "x.npz: its __ckpt_tree__ is not JSON of the documented shape: ',' expected (at byte 14)");
    CHECK(format_error(R"({"list":[]})") == "x.npz: its __ckpt_tree__ does not describe a dict (at byte 11)");
    CHECK(format_error(R"({"dict":[["a",{"set":[]}]]})").find("of the unknown kind \"set\"") != std::string::npos);
    CHECK(format_error(R"({"dict":[[true,1]]})").find("not a [str or int key, value] pair") != std::string::npos);
    CHECK(format_error(R"({"dict":[[1.5,1]]})").find("a number but not an int") != std::string::npos);
    CHECK(format_error(R"({"dict":[["a",{"float":"x1"}]]})").find("a float that is not one: \"x1\"") !=
          std::string::npos);
    CHECK(format_error(R"({"dict":[["a",{"array":"w","list":[]}]]})").find("more than its kind") != std::string::npos);
    CHECK(format_error(R"({"dict":[]} x)").find("text after its end") != std::string::npos);
    CHECK(format_error(R"({"dict":[["a","\ud800"]]})").find("lone high surrogate") != std::string::npos);
    CHECK(format_error(R"({"dict":[["a",01]]})").find("malformed number") != std::string::npos);
    CHECK(format_error(R"({"dict":[["a",[1]]]})").find("none of the documented kinds") != std::string::npos);
    // Deep nesting is refused, not a stack overflow.
    std::string deep = R"({"dict":[["a",)";
    for (int i = 0; i < 100000; ++i) deep += R"({"list":[)";
    CHECK(format_error(deep).find("nested more than 256 levels deep") != std::string::npos);
    // Every prefix of a good record is refused with a message, never a crash.
    const std::string good = format_example;
    for (size_t n = 0; n < good.size(); ++n) CHECK_FALSE(format_error(good.substr(0, n)).empty());
}
