// SPDX-License-Identifier: Apache-2.0
#include "safetensors/hf_index.hpp"

#include "core/error.hpp"
#include "core/find_duplicate.hpp"
#include "core/json_sax.hpp"
#include "core/utf8.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace ckpt::core {

namespace {

template <typename... A>
[[noreturn]] void malformed(fmt::format_string<A...> f, A&&... args) {
    throw Error(Code::format, "index: " + fmt::format(f, std::forward<A>(args)...));
}

// Reads "metadata" (total_size, the save id) and "weight_map" while nlohmann's parser walks the text; anything else
// is passed over whatever it holds, counting only its nesting.
class Reader : public nlohmann::json_sax<nlohmann::json> {
public:
    HfIndex index;
    bool weight_map_seen = false;

    bool null() override { return scalar("null"); }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t) override { return scalar("a negative number"); }
    bool number_float(number_float_t, const string_t&) override { return scalar("a fractional number"); }
    bool binary(binary_t&) override { return scalar("binary data"); }
    bool number_unsigned(number_unsigned_t value) override {
        if (!skip_.key() && depth_ == 2 && section_ == Section::metadata && key_ == "total_size") {
            index.total_size = value;
            return true;
        }
        return scalar("a number");
    }
    bool string(string_t& value) override {
        if (!skip_.key() && depth_ == 2 && section_ == Section::weight_map) {
            if (const char* problem = shard_name_problem(value))
                malformed("tensor '{}': the shard name '{}' {}", printable(key_), printable(value), problem);
            index.weight_map.emplace_back(std::move(key_), std::move(value));
            return true;
        }
        if (!skip_.key() && depth_ == 2 && section_ == Section::metadata && key_ == kSaveIdKey) {
            index.save_id = std::move(value);
            return true;
        }
        return scalar("a string");
    }
    bool start_object(std::size_t) override {
        if (skip_.open()) return true;
        ++depth_;
        if (depth_ == 1) return true;
        if (depth_ == 2 && section_ != Section::other) return true;
        malformed("'{}' is an object", printable(key_));
    }
    bool start_array(std::size_t) override {
        if (skip_.open()) return true;
        if (depth_ == 0) malformed("the text is an array, not a JSON object");
        if (section_ == Section::weight_map)
            malformed("the entry of tensor '{}' is an array, not a file name", printable(key_));
        malformed("'{}' is an array, not an object", section_ == Section::metadata ? "metadata" : "weight_map");
    }
    bool end_object() override { return closes(); }
    bool end_array() override { return closes(); }
    bool key(string_t& key) override {
        if (skip_.key()) return true;
        if (depth_ == 1) {
            section_ = key == "weight_map" ? Section::weight_map
                       : key == "metadata" ? Section::metadata
                                           : Section::other;
            if (section_ == Section::weight_map) {
                if (weight_map_seen) malformed("'weight_map' appears twice");
                weight_map_seen = true;
            }
            if (section_ == Section::other) skip_.next();
            return true;
        }
        if (section_ == Section::weight_map) {
            if (key.empty()) malformed("'weight_map' names a tensor with an empty name");
            if (key.find('\0') != std::string::npos) malformed("the tensor name '{}' contains NUL", printable(key));
        } else if (key != "total_size" && key != kSaveIdKey) {
            skip_.next();  // another metadata entry, whatever it holds
        }
        key_ = std::move(key);
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        malformed("not valid JSON: {}", json_error_words(e.what()));
    }

private:
    enum class Section { metadata, weight_map, other };

    bool closes() {
        if (!skip_.close()) --depth_;
        return true;
    }
    bool scalar(const char* what) {
        if (skip_.scalar()) return true;
        if (depth_ == 0) malformed("the text is {}, not a JSON object", what);
        if (depth_ == 1)
            malformed("'{}' is {}, not an object", section_ == Section::metadata ? "metadata" : "weight_map", what);
        if (section_ == Section::weight_map)
            malformed("the entry of tensor '{}' is {}, not a file name", printable(key_), what);
        malformed("'metadata': '{}' is {}", printable(key_), what);
    }

    int depth_ = 0;
    JsonSkip skip_;  // a value of an unknown key
    Section section_ = Section::other;
    std::string key_;
};

}  // namespace

const char* shard_name_problem(std::string_view name) {
    if (name.empty()) return "is empty";
    if (name == "." || name == "..") return "is not a file name";
    if (name.find('/') != std::string_view::npos || name.find('\\') != std::string_view::npos)
        return "is not a file of the index's folder (it has a slash or backslash)";
    for (const unsigned char c : name)
        if (c < 0x20 || c == 0x7f) return "has a control character";
    return nullptr;
}

HfIndex parse_hf_index(std::string_view json) {
    if (json.find('\0') != std::string_view::npos)
        malformed("not valid JSON: a NUL byte");  // nlohmann would stop there
    const size_t first = json.find_first_not_of(" \t\n\r");
    if (first == std::string_view::npos || json[first] != '{') malformed("the text is not a JSON object");
    Reader reader;
    if (!json_sax_plain(json, reader)) {
        reader = Reader();
        nlohmann::json::sax_parse(json.begin(), json.end(), &reader);
    }
    if (!reader.weight_map_seen) malformed("there is no 'weight_map'");
    HfIndex& index = reader.index;
    const auto name_of = [&](size_t i) -> const std::string& { return index.weight_map[i].first; };
    if (const auto dup = find_duplicate(index.weight_map.size(), name_of))
        malformed("tensor '{}' appears twice in 'weight_map'", printable(index.weight_map[dup->second].first));
    return std::move(index);
}

std::string format_hf_index(const HfIndex& index) {
    const auto quoted = [](const std::string& s) {
        return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    };
    std::string out = "{\n  \"metadata\": {";
    const char* sep = "\n";
    if (index.save_id) {
        out += fmt::format("{}    {}: {}", sep, quoted(std::string(kSaveIdKey)), quoted(*index.save_id));
        sep = ",\n";
    }
    if (index.total_size) out += fmt::format("{}    \"total_size\": {}", sep, *index.total_size);
    out += index.save_id || index.total_size ? "\n  },\n" : "},\n";
    std::vector<const std::pair<std::string, std::string>*> sorted;
    for (const auto& entry : index.weight_map) sorted.push_back(&entry);
    std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
    out += "  \"weight_map\": {";
    for (size_t i = 0; i < sorted.size(); ++i)
        out += fmt::format("{}\n    {}: {}", i ? "," : "", quoted(sorted[i]->first), quoted(sorted[i]->second));
    out += sorted.empty() ? "}\n}\n" : "\n  }\n}\n";
    return out;
}

std::string shard_file_name(std::string_view single_name, size_t k, size_t count) {
    constexpr std::string_view kSuffix = ".safetensors";
    std::string_view stem = single_name;
    if (stem.size() > kSuffix.size() && stem.substr(stem.size() - kSuffix.size()) == kSuffix)
        stem.remove_suffix(kSuffix.size());
    return fmt::format("{}-{:05}-of-{:05}{}", stem, k, count, kSuffix);
}

std::vector<size_t> split_into_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_bytes, size_t* count) {
    // Numbered as huggingface_hub appends them: a tensor of its own at once, the shard being filled when it closes.
    std::vector<size_t> shard(tensor_bytes.size());
    size_t shards = 0;
    std::vector<size_t> filling;
    uint64_t filled = 0;
    const auto close = [&] {
        if (filling.empty()) return;
        for (const size_t i : filling) shard[i] = shards;
        ++shards;
        filling.clear();
        filled = 0;
    };
    for (size_t i = 0; i < tensor_bytes.size(); ++i) {
        if (tensor_bytes[i] > max_bytes) {
            shard[i] = shards++;
            continue;
        }
        if (filled + tensor_bytes[i] > max_bytes) close();
        filling.push_back(i);
        filled += tensor_bytes[i];
    }
    close();
    *count = shards;
    return shard;
}

}  // namespace ckpt::core
