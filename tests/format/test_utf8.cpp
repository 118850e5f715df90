// SPDX-License-Identifier: Apache-2.0
// valid_utf8: strict UTF-8 at every position, including past the ASCII blocks it skips eight bytes at a time.
#include "core/utf8.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ckpt::core;

TEST_CASE("valid_utf8 accepts ASCII and well-formed sequences wherever they fall") {
    const std::vector<std::string> good = {"é", "€", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF"};
    for (size_t prefix = 0; prefix <= 17; ++prefix)
        for (const std::string& g : good) {
            const std::string s = std::string(prefix, 'a') + g + std::string(prefix % 5, 'z');
            INFO("prefix " << prefix << ": " << printable(s));
            CHECK(valid_utf8(s));
        }
    CHECK(valid_utf8(""));
    CHECK(valid_utf8(std::string(64, 'x')));
}

TEST_CASE("valid_utf8 refuses malformed bytes after any number of ASCII bytes") {
    const std::vector<std::string> bad = {
        "\x80",              // a continuation byte alone
        "\xC3",              // a lead byte cut short
        "\xC0\xAF",          // overlong '/'
        "\xE0\x80\xAF",      // overlong, three bytes
        "\xED\xA0\x80",      // a surrogate
        "\xF4\x90\x80\x80",  // above U+10FFFF
        "\xFF",
    };
    for (size_t prefix = 0; prefix <= 17; ++prefix)
        for (const std::string& b : bad) {
            const std::string s = std::string(prefix, 'a') + b + std::string(prefix % 9, 'z');
            INFO("prefix " << prefix << ": " << printable(s));
            CHECK_FALSE(valid_utf8(s));
        }
}

TEST_CASE("printable escapes invalid UTF-8 and control characters, and keeps the rest") {
    CHECK(printable("w.npy") == "w.npy");
    CHECK(printable("\xc3\xa9t\xc3\xa9") == "\xc3\xa9t\xc3\xa9");
    CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
    CHECK(printable("tab\there\n\x7f") == "tab\\x09here\\x0a\\x7f");
    CHECK(printable("bad\xff") == "bad\\xff");
}
