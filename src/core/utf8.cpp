// SPDX-License-Identifier: Apache-2.0
#include "core/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace ckpt::core {

namespace {
// Decodes one code point at s[i]; returns its length, or 0 if the sequence is not strict UTF-8.
size_t decode(std::string_view s, size_t i, char32_t& cp) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t c = b(0);
    size_t len;
    char32_t min;
    if (c < 0x80) {
        cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (s.size() - i < len) return 0;
    for (size_t k = 1; k < len; ++k) {
        if ((b(k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}
}  // namespace

bool valid_utf8(std::string_view s) {
    // Names are nearly always ASCII: skip eight bytes at a time while none has its high bit set.
    size_t i = 0;
    for (uint64_t eight; s.size() - i >= 8; i += 8) {
        std::memcpy(&eight, s.data() + i, 8);
        if (eight & 0x8080808080808080u) break;
    }
    char32_t cp;
    for (; i < s.size();) {
        size_t n = decode(s, i, cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string printable(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    char32_t cp;
    for (size_t i = 0; i < s.size();) {
        const size_t n = decode(s, i, cp);
        if (n == 0 || cp < 0x20 || cp == 0x7f) {  // invalid UTF-8, and control characters (NUL would cut a C string)
            const auto b = static_cast<unsigned char>(s[i]);
            out += "\\x";
            out += kHex[b >> 4];
            out += kHex[b & 15];
            ++i;
        } else {
            out.append(s, i, n);
            i += n;
        }
    }
    return out;
}

std::u32string utf8_to_utf32(std::string_view s) {
    std::u32string out;
    char32_t cp;
    for (size_t i = 0; i < s.size();) {
        size_t n = decode(s, i, cp);
        if (n == 0) break;  // callers pass validated strings
        out.push_back(cp);
        i += n;
    }
    return out;
}

bool utf32_to_utf8(std::u32string_view s, std::string& out) {
    out.clear();
    for (char32_t cp : s) {
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    return true;
}

}  // namespace ckpt::core
