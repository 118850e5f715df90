// SPDX-License-Identifier: Apache-2.0
// json_sax_plain, the fast reader of the safetensors header and Hugging Face's index: wherever it finishes, its handler
// saw exactly the events nlohmann's sax_parse gives; wherever the text holds more than plain JSON (or is not JSON),
// it leaves the text to nlohmann.
#include "support/json_events.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

namespace {

using ckpt::testing::nlohmann_events;
using ckpt::testing::plain_events;

const std::string kHeader =
    R"({"__metadata__":{"format":"pt","step":"5"},"a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
    R"("b":{"dtype":"BF16","shape":[],"data_offsets":[24,26]},"c":{"dtype":"U8","shape":[0],"data_offsets":[26,26]}})";

}  // namespace

TEST_CASE("json_sax_plain gives the events nlohmann gives, for what writers print") {
    const std::vector<std::string> plain = {
        kHeader,
        "{}",
        "  {\n  \"weight_map\": {\n    \"a\": \"model-00001-of-00002.safetensors\"\n  }\n}\n  ",
        R"({"metadata":{"total_size":18446744073709551}, "x":[[],[[1]],{}], "y":[0, 9999999999999999999]})",
        "[]",
        "7",
        R"("text")",
        R"({"":""})",
        R"({"a":{"b":{"c":{"d":[1,2,{"e":[3]}]}}}})",
    };
    for (const std::string& text : plain) {
        INFO(text);
        const auto fast = plain_events(text);
        REQUIRE(fast.has_value());
        CHECK(*fast == nlohmann_events(text));
        CHECK(fast->back() != "error");
    }
}

TEST_CASE("json_sax_plain leaves to nlohmann what it does not read itself, and text that is not JSON") {
    const std::vector<std::string> others = {
        R"({"a":"\u00e9"})",              // an escape
        R"({"a\"b":1})",                  // an escape in a key
        "{\"caf\xC3\xA9\":1}",            // UTF-8 beyond ASCII
        "{\"a\":\"\x7f\"}",               // DEL
        R"({"a":1.5})",                   // a fraction
        R"({"a":1e3})",                   // an exponent
        R"({"a":-1})",                    // a negative number
        R"({"a":10000000000000000000})",  // 10^19 and more: nlohmann says uint64_t or double
        R"({"a":true})",
        R"({"a":false})",
        R"({"a":null})",
        R"({"a":01})",   // a leading zero
        R"({"a":1,})",   // a trailing comma
        R"({"a" 1})",    // no colon
        R"({a:1})",      // a bare key
        R"({"a":1}})",   // text after the value
        R"({"a":1} x)",  // text after the value
        R"({"a":[1 2]})",
        R"({"a":"b)",        // cut short
        "{\"a\":\"b\nc\"}",  // a raw control character
        "",
        "   ",
        std::string(33, '[') + "1" + std::string(33, ']'),  // deeper than 32
    };
    for (const std::string& text : others) {
        INFO(text);
        CHECK_FALSE(plain_events(text).has_value());
    }
    // Nesting up to 32 is its own.
    const std::string deep = std::string(32, '[') + "1" + std::string(32, ']');
    CHECK(plain_events(deep) == nlohmann_events(deep));
}

TEST_CASE("json_sax_plain stops where a handler returns false, as sax_parse does") {
    const size_t events = nlohmann_events(kHeader).size();
    for (size_t stop = 1; stop <= events; ++stop) {
        INFO("stop at event " << stop);
        const auto fast = plain_events(kHeader, stop);
        REQUIRE(fast.has_value());
        CHECK(*fast == nlohmann_events(kHeader, stop));
        CHECK(fast->size() == stop);
    }
}

TEST_CASE("json_sax_plain agrees with nlohmann on every mutation of a header it finishes") {
    std::mt19937 random(20261206);
    const std::string alphabet = "{}[]:,\" 0123456789ae.-\\tn\x01\xC3";
    size_t finished = 0;
    for (int round = 0; round < 20000; ++round) {
        std::string text = kHeader;
        const int edits = 1 + static_cast<int>(random() % 3);
        for (int e = 0; e < edits; ++e) {
            const size_t at = random() % (text.size() + 1);
            const char c = alphabet[random() % alphabet.size()];
            switch (random() % 3) {
                case 0: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
                case 1:
                    if (at < text.size()) text.erase(at, 1);
                    break;
                default:
                    if (at < text.size()) text[at] = c;
            }
        }
        const auto fast = plain_events(text);
        if (!fast) continue;
        ++finished;
        INFO(text);
        const std::vector<std::string> reference = nlohmann_events(text);
        REQUIRE(*fast == reference);
        REQUIRE(reference.back() != "error");
    }
    CHECK(finished > 1000);  // the comparison covered many texts, not only the fallbacks
}
