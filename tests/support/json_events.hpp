// SPDX-License-Identifier: Apache-2.0
// JsonEvents: an nlohmann::json_sax handler that writes down every event it gets, for holding json_sax_plain (the fast
// reader of core/json_sax.hpp) to nlohmann's own parser: the same text must give the same events.
#pragma once

#include "core/json_sax.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::testing {

class JsonEvents : public nlohmann::json_sax<nlohmann::json> {
public:
    std::vector<std::string> events;
    size_t stop_at = SIZE_MAX;  // the event whose handler returns false, as a handler that refuses a value does

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

// The events nlohmann's sax_parse gives for `text`.
inline std::vector<std::string> nlohmann_events(std::string_view text, size_t stop_at = SIZE_MAX) {
    JsonEvents r;
    r.stop_at = stop_at;
    nlohmann::json::sax_parse(text.begin(), text.end(), &r);
    return r.events;
}

// The events json_sax_plain gives for `text`, or nothing where it leaves the text to nlohmann.
inline std::optional<std::vector<std::string>> plain_events(std::string_view text, size_t stop_at = SIZE_MAX) {
    JsonEvents r;
    r.stop_at = stop_at;
    if (!ckpt::core::json_sax_plain(text, r)) return std::nullopt;
    return r.events;
}

}  // namespace ckpt::testing
