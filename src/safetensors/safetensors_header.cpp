// SPDX-License-Identifier: Apache-2.0
#include "safetensors/safetensors_header.hpp"

#include "core/array.hpp"
#include "core/error.hpp"
#include "core/json_sax.hpp"
#include "core/find_duplicate.hpp"
#include "core/utf8.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <unordered_set>
#include <utility>

namespace ckpt::core {

namespace {

struct DtypeName {
    DType dtype;
    const char* name;
};
constexpr std::array<DtypeName, 19> kDtypeNames{{
    {DType::bool_, "BOOL"},
    {DType::uint8, "U8"},
    {DType::int8, "I8"},
    {DType::int16, "I16"},
    {DType::uint16, "U16"},
    {DType::float16, "F16"},
    {DType::bfloat16, "BF16"},
    {DType::int32, "I32"},
    {DType::uint32, "U32"},
    {DType::float32, "F32"},
    {DType::complex64, "C64"},
    {DType::float64, "F64"},
    {DType::int64, "I64"},
    {DType::uint64, "U64"},
    {DType::float8_e5m2, "F8_E5M2"},
    {DType::float8_e4m3fn, "F8_E4M3"},
    {DType::float8_e8m0fnu, "F8_E8M0"},
    {DType::float8_e4m3fnuz, "F8_E4M3FNUZ"},
    {DType::float8_e5m2fnuz, "F8_E5M2FNUZ"},
}};

template <typename... A>
[[noreturn]] void malformed(fmt::format_string<A...> f, A&&... args) {
    throw Error(Code::format, "safetensors header: " + fmt::format(f, std::forward<A>(args)...));
}

std::string json_string(std::string_view s) {  // a JSON string literal of valid UTF-8
    return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

// Builds the header while nlohmann's parser walks the text, refusing anything out of place the moment it appears.
// Depth 1 is the top object, 2 an entry (or the metadata map), 3 a shape or offsets array; unknown fields of an
// entry are skipped whatever they hold, counting only their nesting.
class Reader : public nlohmann::json_sax<nlohmann::json> {
public:
    SafetensorsHeader header;

    bool null() override {
        if (skip_.scalar()) return true;
        if (depth_ == 1 && section_ == Section::metadata) return true;  // "__metadata__": null is no metadata
        return unexpected("null");
    }
    bool boolean(bool) override { return skip_.scalar() || unexpected("a boolean"); }
    bool number_integer(number_integer_t) override { return skip_.scalar() || unexpected("a negative number"); }
    bool number_float(number_float_t, const string_t& text) override {
        if (skip_.scalar()) return true;
        return unexpected(text.find_first_of(".eE") == std::string::npos ? "a number of 2^64 or more"
                                                                         : "a fractional number");
    }
    bool binary(binary_t&) override { return skip_.scalar() || unexpected("binary data"); }

    bool number_unsigned(number_unsigned_t value) override {
        if (skip_.scalar()) return true;
        if (depth_ != 3) return unexpected("a number");
        SafetensorsTensor& t = header.tensors.back();
        if (field_ == Field::shape) {
            if (t.shape.size() == kMaxDims) malformed("tensor '{}' has more than {} dimensions", shown(), kMaxDims);
            if (value > static_cast<uint64_t>(INT64_MAX))
                malformed("tensor '{}': dimension {} is larger than ckpt's arrays allow (2^63 - 1)", shown(), value);
            t.shape.push_back(static_cast<int64_t>(value));
        } else {
            if (offsets_seen_ == 2) malformed("tensor '{}': 'data_offsets' has more than 2 numbers", shown());
            (offsets_seen_++ == 0 ? t.begin : t.end) = value;
        }
        return true;
    }

    bool string(string_t& value) override {
        if (skip_.scalar()) return true;
        if (depth_ == 2 && section_ == Section::metadata) {
            if (value.find('\0') != std::string::npos)
                malformed("the value of '{}' in '__metadata__' contains NUL", printable(key_));
            header.metadata.set(std::move(key_), std::move(value));
            return true;
        }
        if (depth_ == 2 && field_ == Field::dtype) {
            const std::optional<DType> d = safetensors_dtype(value);
            if (!d) malformed("tensor '{}' has the unknown dtype '{}'", shown(), printable(value));
            header.tensors.back().dtype = *d;
            return true;
        }
        return unexpected("a string");
    }

    bool start_object(std::size_t) override {
        if (skip_.open()) return true;
        if (depth_ == 0 || (depth_ == 1 && section_ != Section::none)) {
            ++depth_;
            return true;
        }
        return unexpected("an object");
    }
    bool start_array(std::size_t) override {
        if (skip_.open()) return true;
        if (depth_ == 2 && (field_ == Field::shape || field_ == Field::offsets)) {
            ++depth_;
            return true;
        }
        return unexpected("an array");
    }
    bool end_array() override {
        if (skip_.close()) return true;
        if (field_ == Field::offsets && offsets_seen_ != 2)
            malformed("tensor '{}': 'data_offsets' has {} numbers, not 2", shown(), offsets_seen_);
        field_ = Field::none;
        --depth_;
        return true;
    }
    bool end_object() override {
        if (skip_.close()) return true;
        if (depth_ == 2 && section_ == Section::tensor) {
            const char* missing = !seen_[0] ? "dtype" : !seen_[1] ? "shape" : !seen_[2] ? "data_offsets" : nullptr;
            if (missing != nullptr) malformed("tensor '{}' has no '{}'", shown(), missing);
        }
        if (depth_ == 2) section_ = Section::none;
        --depth_;
        return true;
    }

    bool key(string_t& key) override {
        if (skip_.key()) return true;
        if (depth_ == 1) return top_key(key);
        if (section_ == Section::metadata) {
            if (const char* problem = metadata_key_problem(key)) malformed("a key in '__metadata__' {}", problem);
            if (header.metadata.find(key) != nullptr) malformed("'{}' appears twice in '__metadata__'", printable(key));
            key_ = std::move(key);
            return true;
        }
        // An entry's field: one of the three, each once, or an unknown one, whose value is skipped.
        const int k = key == "dtype" ? 0 : key == "shape" ? 1 : key == "data_offsets" ? 2 : -1;
        if (k < 0) {
            skip_.next();
            return true;
        }
        if (seen_[k]) malformed("tensor '{}' gives '{}' twice", shown(), key);
        seen_[k] = true;
        field_ = k == 0 ? Field::dtype : k == 1 ? Field::shape : Field::offsets;
        return true;
    }

    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        malformed("not valid JSON: {}", json_error_words(e.what()));
    }

private:
    enum class Section { none, metadata, tensor };
    enum class Field { none, dtype, shape, offsets };

    bool top_key(string_t& key) {
        if (key == kSafetensorsMetadataKey) {
            if (metadata_seen_) malformed("'__metadata__' appears twice");
            metadata_seen_ = true;
            section_ = Section::metadata;
            return true;
        }
        if (key.empty()) malformed("a tensor has an empty name, which ckpt's arrays cannot have");
        if (key.find('\0') != std::string::npos) malformed("the tensor name '{}' contains NUL", printable(key));
        header.tensors.emplace_back();
        header.tensors.back().name = std::move(key);
        section_ = Section::tensor;
        seen_ = {false, false, false};
        offsets_seen_ = 0;
        field_ = Field::none;
        return true;
    }

    std::string shown() const { return printable(header.tensors.back().name); }

    // A value where the format has none of its kind.
    bool unexpected(const char* what) {
        if (depth_ == 0) malformed("the header is {}, not a JSON object", what);
        if (depth_ == 1 && section_ == Section::metadata)
            malformed("'__metadata__' is {}, not an object of strings", what);
        if (depth_ == 1) malformed("tensor '{}' is {}, not an object", shown(), what);
        if (depth_ == 2 && section_ == Section::metadata)
            malformed("the value of '{}' in '__metadata__' is {}, not a string", printable(key_), what);
        switch (field_) {
            case Field::dtype: malformed("tensor '{}': 'dtype' is {}, not a string", shown(), what);
            case Field::shape: malformed("tensor '{}': 'shape' holds {}, not only whole numbers >= 0", shown(), what);
            case Field::offsets:
                malformed("tensor '{}': 'data_offsets' holds {}, not only whole numbers >= 0", shown(), what);
            case Field::none: break;
        }
        malformed("tensor '{}': unexpected {}", shown(), what);
    }

    int depth_ = 0;
    Section section_ = Section::none;
    Field field_ = Field::none;
    bool metadata_seen_ = false;
    std::array<bool, 3> seen_{};  // dtype, shape, data_offsets of the current entry
    int offsets_seen_ = 0;
    JsonSkip skip_;    // the value of an unknown field of an entry
    std::string key_;  // the current key of "__metadata__"
};

// The checks of the reference's Metadata::validate, on tensors in offset order: the ranges tile [0, buffer_bytes)
// exactly, each as long as its tensor's bytes.
void check_ranges(const std::vector<SafetensorsTensor>& tensors, uint64_t buffer_bytes) {
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const auto before = [&](size_t a, size_t b) {
        return std::tie(tensors[a].begin, tensors[a].end) < std::tie(tensors[b].begin, tensors[b].end);
    };
    if (!std::is_sorted(order.begin(), order.end(), before)) std::sort(order.begin(), order.end(), before);
    uint64_t at = 0;
    for (const size_t i : order) {
        const SafetensorsTensor& t = tensors[i];
        if (t.end >= t.begin && t.begin == at &&
            t.end - t.begin == checked_nbytes(t.shape.data(), t.shape.size(), numeric_size(t.dtype))) {
            at = t.end;  // the common case, without the name a message would show
            continue;
        }
        const std::string name = printable(t.name);
        if (t.end < t.begin)
            malformed("tensor '{}': data_offsets [{}, {}) end before they begin", name, t.begin, t.end);
        if (t.begin != at) {
            if (t.begin < at)
                malformed("tensor '{}': data_offsets [{}, {}) overlap the tensor before, which ends at {}", name,
                          t.begin, t.end, at);
            malformed("tensor '{}': data_offsets [{}, {}) leave a hole: the tensor before ends at {}", name, t.begin,
                      t.end, at);
        }
        const std::optional<size_t> bytes = checked_nbytes(t.shape.data(), t.shape.size(), numeric_size(t.dtype));
        if (!bytes) malformed("tensor '{}': the byte size of shape {} overflows", name, fmt::join(t.shape, "x"));
        if (t.end - t.begin != *bytes)
            malformed("tensor '{}': data_offsets [{}, {}) hold {} bytes; its dtype and shape need {}", name, t.begin,
                      t.end, t.end - t.begin, *bytes);
        at = t.end;
    }
    if (at != buffer_bytes) {
        if (at < buffer_bytes)
            malformed(
                "the tensors end at byte {} of the data, but the file has {} data bytes (bytes appended, or a "
                "tensor missing from the header)",
                at, buffer_bytes);
        malformed("the tensors need {} bytes of data, but the file has {} (truncated)", at, buffer_bytes);
    }
}

}  // namespace

const char* safetensors_dtype_name(DType d) {
    for (const DtypeName& n : kDtypeNames)
        if (n.dtype == d) return n.name;
    return nullptr;
}

std::optional<DType> safetensors_dtype(std::string_view name) {
    for (const DtypeName& n : kDtypeNames)
        if (name == n.name) return n.dtype;
    if (name == "F4" || name == "F6_E2M3" || name == "F6_E3M2")
        fail(Code::unsupported,
             "safetensors header: dtype {} (a float of {} bits, packed) is not supported: ckpt has no sub-byte types",
             name, name == "F4" ? 4 : 6);
    return std::nullopt;
}

SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t buffer_bytes) {
    // nlohmann skips a UTF-8 byte-order mark, which the reference refuses: the text must start with whitespace or '{'.
    const size_t first = json.find_first_not_of(" \t\n\r");
    if (first == std::string_view::npos)
        malformed("the header holds no JSON (only {} bytes of whitespace)", json.size());
    if (json[first] != '{')
        malformed("the header does not start with a JSON object (byte {} is {:#04x}, not '{{')", first,
                  static_cast<unsigned char>(json[first]));
    // nlohmann also takes a NUL byte for the end of the text: JSON has none outside strings, and none raw inside.
    if (const size_t nul = json.find('\0'); nul != std::string_view::npos)
        malformed("not valid JSON: a NUL byte at byte {} of the header", nul);
    Reader reader;
    try {
        if (!json_sax_plain(json, reader)) {
            reader = Reader();
            nlohmann::json::sax_parse(json.begin(), json.end(), &reader);
        }
    } catch (const Error& e) {
        if (e.code() != Code::invalid) throw;
        malformed("{}", e.what());  // Metadata::set's refusal of a value that is not valid UTF-8
    }
    SafetensorsHeader& h = reader.header;
    const auto name_of = [&](size_t i) -> const std::string& { return h.tensors[i].name; };
    if (const auto dup = find_duplicate(h.tensors.size(), name_of))
        malformed("tensor '{}' appears twice", printable(h.tensors[dup->second].name));
    check_ranges(h.tensors, buffer_bytes);
    return std::move(h);
}

std::string format_safetensors_header(const std::vector<SafetensorsTensor>& tensors, const Metadata& metadata,
                                      uint64_t alignment) {
    std::string json = "{";
    if (!metadata.empty()) {
        json += "\"__metadata__\":{";
        for (size_t i = 0; i < metadata.size(); ++i)
            json += fmt::format("{}{}:{}", i ? "," : "", json_string(metadata.key(i)), json_string(metadata.value(i)));
        json += "}";
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
        const SafetensorsTensor& t = tensors[i];
        const char* dtype = safetensors_dtype_name(t.dtype);
        if (dtype == nullptr)
            fail(Code::invalid, "array '{}': safetensors has no {} type", printable(t.name), dtype_name(t.dtype));
        json += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                            (i > 0 || !metadata.empty()) ? "," : "", json_string(t.name), dtype,
                            fmt::join(t.shape, ","), t.begin, t.end);
    }
    json += "}";
    // Spaces up to the alignment, counting the 8 bytes of the length before the text (a multiple of 8 either way).
    const uint64_t whole = kSafetensorsLengthBytes + json.size();
    json.resize(json.size() + (alignment - whole % alignment) % alignment, ' ');
    if (json.size() > kMaxSafetensorsHeaderBytes)
        fail(Code::invalid, "the safetensors header would take {} bytes; the format allows at most {}", json.size(),
             kMaxSafetensorsHeaderBytes);
    std::string out(kSafetensorsLengthBytes, '\0');
    uint64_t n = json.size();
    for (size_t i = 0; i < kSafetensorsLengthBytes; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xff);
    return out + json;
}

}  // namespace ckpt::core
