// SPDX-License-Identifier: Apache-2.0
// What ckpt's SAX readers of JSON (the npz metadata member, safetensors headers, Hugging Face's index) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ckpt::core {

// The words of a JSON parser's error for a message, without the library's tag: nlohmann says
// "[json.exception.parse_error.101] parse error at line 1, column 3: …"; a ckpt message says "parse error at …".
inline std::string json_error_words(std::string what) {
    if (const size_t end = what.find("] "); what.rfind("[json.", 0) == 0 && end != std::string::npos)
        what.erase(0, end + 2);
    return what;
}

// Passing over a value a reader has no use for (an unknown field), whatever it holds, counting only its nesting:
// next() before the value; then each event asks whether it is passed over — scalar() for a scalar or a key, open()
// and close() for the start and end of an object or array.
class JsonSkip {
public:
    void next() { next_ = true; }
    bool scalar() {
        if (depth_ > 0) return true;
        const bool skipped = next_;
        next_ = false;
        return skipped;
    }
    bool key() const { return depth_ > 0; }
    bool open() {
        if (depth_ == 0 && !next_) return false;
        next_ = false;
        ++depth_;
        return true;
    }
    bool close() {
        if (depth_ == 0) return false;
        --depth_;
        return true;
    }

private:
    bool next_ = false;
    int depth_ = 0;
};

// Walks `text` with `handler` (an nlohmann::json_sax) as nlohmann::json::sax_parse does, for the plain JSON that
// writers print: objects, arrays, strings of printable ASCII without escapes, and whole numbers below 10^19 without
// leading zeros, with whitespace between. It is several times faster than nlohmann's lexer, which a header of a
// thousand tensors spent most of its time in. The handler gets the same events in the same order nlohmann would
// give it, each once its text has been read whole; where a handler returns false the walk stops there, as
// sax_parse's does, and this returns true. On anything else — an escape, a byte outside printable ASCII, a
// fraction, an exponent, a negative number, true/false/null, nesting deeper than 32, any syntax error — it returns
// false at once: the caller then runs sax_parse over the whole text with a fresh handler, which gives those their
// meaning or their error.
template <typename Handler>
bool json_sax_plain(std::string_view text, Handler& handler) {
    constexpr int kMaxDepth = 32;
    bool in_object[kMaxDepth];
    int depth = 0;
    const char* p = text.data();
    const char* const end = p + text.size();
    std::string token;
    const auto space = [&] {
        while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
    };
    const auto string_at = [&] {  // *p == '"': the string into `token`, p past its closing quote
        const char* const begin = ++p;
        for (; p != end && *p != '"'; ++p) {
            const unsigned char c = static_cast<unsigned char>(*p);
            if (c < 0x20 || c > 0x7e || c == '\\') return false;
        }
        if (p == end) return false;
        token.assign(begin, p);
        ++p;
        return true;
    };
    enum class Next { value, after_value, key } next = Next::value;
    space();
    for (;;) {
        switch (next) {
            case Next::value: {
                if (p == end) return false;
                const char c = *p;
                if (c == '{' || c == '[') {
                    ++p;
                    const bool object = c == '{';
                    if (!(object ? handler.start_object(static_cast<std::size_t>(-1))
                                 : handler.start_array(static_cast<std::size_t>(-1))))
                        return true;
                    space();
                    if (p != end && *p == (object ? '}' : ']')) {
                        ++p;
                        if (!(object ? handler.end_object() : handler.end_array())) return true;
                        next = Next::after_value;
                        break;
                    }
                    if (depth == kMaxDepth) return false;
                    in_object[depth++] = object;
                    next = object ? Next::key : Next::value;
                    break;
                }
                if (c == '"') {
                    if (!string_at()) return false;
                    if (!handler.string(token)) return true;
                } else if (c >= '0' && c <= '9') {
                    const char* const begin = p;
                    uint64_t value = 0;
                    for (; p != end && *p >= '0' && *p <= '9'; ++p) {
                        if (p - begin == 19) return false;  // 10^19 or more: nlohmann's to tell uint64_t or double
                        value = value * 10 + static_cast<uint64_t>(*p - '0');
                    }
                    if (*begin == '0' && p - begin > 1) return false;  // a leading zero: a syntax error
                    if (p != end && (*p == '.' || *p == 'e' || *p == 'E')) return false;
                    if (!handler.number_unsigned(value)) return true;
                } else {
                    return false;
                }
                next = Next::after_value;
                break;
            }
            case Next::after_value:
                space();
                if (depth == 0) return p == end;
                if (p == end) return false;
                if (*p == ',') {
                    ++p;
                    space();
                    next = in_object[depth - 1] ? Next::key : Next::value;
                } else if (*p == (in_object[depth - 1] ? '}' : ']')) {
                    ++p;
                    --depth;
                    if (!(in_object[depth] ? handler.end_object() : handler.end_array())) return true;
                } else {
                    return false;
                }
                break;
            case Next::key:
                if (p == end || *p != '"' || !string_at()) return false;
                if (!handler.key(token)) return true;
                space();
                if (p == end || *p != ':') return false;
                ++p;
                space();
                next = Next::value;
                break;
        }
    }
}

}  // namespace ckpt::core
