// SPDX-License-Identifier: Apache-2.0
#include "npz/metadata.hpp"

#include "core/error.hpp"
#include "core/json_sax.hpp"
#include "core/utf8.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <unordered_set>

namespace ckpt::core {

namespace {

template <typename... A>
[[noreturn]] void malformed(fmt::format_string<A...> f, A&&... args) {
    throw Error(Code::format, "metadata: " + fmt::format(f, std::forward<A>(args)...));
}

std::string quoted(const std::string& s) {  // a JSON string literal
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}


// Builds the record while nlohmann's parser walks the text, refusing any value out of place as soon as it starts.
class Reader : public nlohmann::json_sax<nlohmann::json> {
public:
    MetadataRecord record;

    void finish() {
        if (!format_) malformed("'format' is missing");
        if (*format_ > static_cast<uint64_t>(kMetadataFormat)) newer();
        if (!unknown_.empty()) malformed("unexpected key '{}' (expected 'format', 'dtypes' and 'metadata')", unknown_);
    }

    bool null() override { return scalar("null"); }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t) override { return scalar("a negative number"); }
    bool number_float(number_float_t, const string_t&) override { return scalar("a fractional number"); }
    bool binary(binary_t&) override { return scalar("binary data"); }
    bool start_array(std::size_t) override { return scalar("an array"); }
    bool end_array() override { return true; }  // never reached: start_array refuses

    bool number_unsigned(number_unsigned_t value) override {
        if (depth_ == 1 && section_ == Section::format) {
            format_ = value;
            return true;
        }
        return scalar("a number");
    }

    bool string(string_t& value) override {
        if (depth_ != 2) return scalar("a string");
        if (value.find('\0') != std::string::npos) malformed("the value of '{}' contains NUL", printable(inner_key_));
        if (section_ == Section::dtypes) {
            const std::optional<DType> d = dtype_named(value);
            if (!d) malformed("unknown dtype '{}' for array '{}'", printable(value), printable(inner_key_));
            record.dtypes.emplace_back(std::move(inner_key_), *d);
        } else {
            record.user.set(std::move(inner_key_), std::move(value));
        }
        return true;
    }

    bool start_object(std::size_t) override {
        if (depth_ == 0) {
            depth_ = 1;
            return true;
        }
        if (depth_ == 1 && (section_ == Section::dtypes || section_ == Section::user)) {
            depth_ = 2;
            return true;
        }
        return scalar("an object");
    }

    bool end_object() override {
        --depth_;
        return true;
    }

    bool key(string_t& key) override {
        if (depth_ == 1) {
            section_ = key == "format" ? Section::format
                       : key == "dtypes" ? Section::dtypes
                       : key == "metadata" ? Section::user
                                           : Section::unknown;
            if (section_ == Section::unknown) {
                if (unknown_.empty()) unknown_ = printable(key);
            } else if (!top_seen_.insert(key).second) {
                malformed("key '{}' appears twice", key);
            }
            return true;
        }
        if (const char* problem = metadata_key_problem(key))
            malformed("a key in '{}' {}", section_ == Section::dtypes ? "dtypes" : "metadata", problem);
        const bool repeated = section_ == Section::dtypes ? !dtype_keys_.insert(key).second
                                                          : record.user.find(key) != nullptr;
        if (repeated)
            malformed("'{}' appears twice in '{}'", printable(key), section_ == Section::dtypes ? "dtypes" : "metadata");
        inner_key_ = std::move(key);
        return true;
    }

    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        malformed("not valid JSON: {}", json_error_words(e.what()));
    }

private:
    enum class Section { format, dtypes, user, unknown };

    [[noreturn]] void newer() const {
        throw Error(Code::unsupported, fmt::format("metadata: format {} is newer than this library reads ({})",
                                                   *format_, kMetadataFormat));
    }

    // A value where the documented shape has none of its kind.
    bool scalar(const char* what) {
        if (depth_ == 0) malformed("the text is {}, not a JSON object", what);
        if (depth_ == 1) {
            switch (section_) {
                case Section::format: malformed("'format' is {}, not a whole number", what);
                case Section::dtypes: malformed("'dtypes' is {}, not an object of strings", what);
                case Section::user: malformed("'metadata' is {}, not an object of strings", what);
                case Section::unknown:
                    // A newer format may nest under its new keys; this one never does.
                    if (format_ && *format_ > static_cast<uint64_t>(kMetadataFormat)) newer();
                    if (std::string_view(what) == "an object" || std::string_view(what) == "an array")
                        malformed("unexpected key '{}' (expected 'format', 'dtypes' and 'metadata')", unknown_);
                    return true;
            }
        }
        malformed("the value of '{}' in '{}' is {}, not a string", printable(inner_key_),
                  section_ == Section::dtypes ? "dtypes" : "metadata", what);
    }

    int depth_ = 0;
    Section section_ = Section::unknown;
    std::optional<uint64_t> format_;
    std::string unknown_;  // the first unexpected top-level key
    std::string inner_key_;
    std::unordered_set<std::string> top_seen_, dtype_keys_;
};

}  // namespace

std::string metadata_to_json(const MetadataRecord& record) {
    // Written by hand around the library's string quoting: the library's ordered objects find keys by a linear
    // search, which would make a file of many bfloat16 arrays quadratic to describe.
    std::string out = fmt::format("{{\"format\": {}, \"dtypes\": {{", kMetadataFormat);
    for (size_t i = 0; i < record.dtypes.size(); ++i)
        out += fmt::format("{}{}: \"{}\"", i ? ", " : "", quoted(record.dtypes[i].first), dtype_name(record.dtypes[i].second));
    out += "}, \"metadata\": {";
    for (size_t i = 0; i < record.user.size(); ++i)
        out += fmt::format("{}{}: {}", i ? ", " : "", quoted(record.user.key(i)), quoted(record.user.value(i)));
    out += "}}";
    return out;
}

MetadataRecord metadata_from_json(std::string_view json) {
    Reader reader;
    nlohmann::json::sax_parse(json.begin(), json.end(), &reader);
    reader.finish();
    return std::move(reader.record);
}

}  // namespace ckpt::core
