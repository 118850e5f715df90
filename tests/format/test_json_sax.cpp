// SPDX-License-Identifier: Apache-2.0
// json_sax_plain, the fast reader of the safetensors header and Hugging Face's index: wherever it finishes, its handler
// saw exactly the events nlohmann's sax_parse gives; wherever the text holds more than plain JSON (or is not JSON),
// it leaves the text to nlohmann.
#include "core/json_sax.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <random>
#include <string>
#include <vector>

using ckpt::core::json_sax_plain;

namespace {

// Writes down every event; stops (returns false) at event number stop_at, as a handler that refuses a value does.
class Recorder : public nlohmann::json_sax<nlohmann::json> {
public:
    std::vector<std::string> events;
    size_t stop_at = SIZE_MAX;

    bool null() override { return add("null"); }
    bool boolean(bool b) override { return add(b ? "true" : "false"); }
    bool number_integer(number_integer_t v) override { return add("int " + std::to_string(v)); }
    bool number_unsigned(number_unsigned_t v) override { return add("uint " + std::to_string(v)); }
    bool number_float(number_float_t, const string_t& text) override { return add("float " + text); }
    bool string(string_t& s) override { return add("string " + s); }
    bool binary(binary_t&) override { return add("binary"); }
    bool start_object(std::size_t) override { return add("{"); }
    bool end_object() override { return add("}"); }
    bool start_array(std::size_t) override { return add("["); }
    bool end_array() override { return add("]"); }
    bool key(string_t& k) override { return add("key " + k); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        events.emplace_back("error");
        return false;
    }

private:
    bool add(std::string e) {
        events.push_back(std::move(e));
        return events.size() != stop_at;
    }
};

std::vector<std::string> by_nlohmann(const std::string& text, size_t stop_at = SIZE_MAX) {
    Recorder r;
    r.stop_at = stop_at;
    nlohmann::json::sax_parse(text.begin(), text.end(), &r);
    return r.events;
}

// The events of json_sax_plain, or nothing when it leaves the text to nlohmann.
std::optional<std::vector<std::string>> by_plain(const std::string& text, size_t stop_at = SIZE_MAX) {
    Recorder r;
    r.stop_at = stop_at;
    if (!json_sax_plain(text, r)) return std::nullopt;
    return r.events;
}

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
        const auto fast = by_plain(text);
        REQUIRE(fast.has_value());
        CHECK(*fast == by_nlohmann(text));
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
        CHECK_FALSE(by_plain(text).has_value());
    }
    // Nesting up to 32 is its own.
    const std::string deep = std::string(32, '[') + "1" + std::string(32, ']');
    CHECK(by_plain(deep) == by_nlohmann(deep));
}

TEST_CASE("json_sax_plain stops where a handler returns false, as sax_parse does") {
    const size_t events = by_nlohmann(kHeader).size();
    for (size_t stop = 1; stop <= events; ++stop) {
        INFO("stop at event " << stop);
        const auto fast = by_plain(kHeader, stop);
        REQUIRE(fast.has_value());
        CHECK(*fast == by_nlohmann(kHeader, stop));
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
        const auto fast = by_plain(text);
        if (!fast) continue;
        ++finished;
        INFO(text);
        const std::vector<std::string> reference = by_nlohmann(text);
        REQUIRE(*fast == reference);
        REQUIRE(reference.back() != "error");
    }
    CHECK(finished > 1000);  // the comparison covered many texts, not only the fallbacks
}
