// SPDX-License-Identifier: Apache-2.0
#include "npy/npy.hpp"

#include "core/array.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

namespace ckpt::core {

namespace {

#if !defined(__BYTE_ORDER__) || !defined(__ORDER_LITTLE_ENDIAN__)
#error "ckpt needs __BYTE_ORDER__ to know the host's byte order"
#endif
constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
constexpr char kNativeOrder = kLittleEndianHost ? '<' : '>';
constexpr char kForeignOrder = kLittleEndianHost ? '>' : '<';

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kArrayAlign = 64;        // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS
constexpr int kMaxNesting = 16;           // bounds the recursion that skips structured descrs
constexpr const char* kKeys[] = {"descr", "fortran_order", "shape"};

// The longest header format_npy_header can produce (kMaxDims dimensions of 19 digits each, plus the fixed text,
// a descr and padding) fits the u16 length of version 1.0, so the 2.0 fallback numpy has is never needed.
static_assert(kMaxDims * 21 + 256 + kArrayAlign <= 65535, "npy headers of kMaxDims dimensions need format 2.0");

template <typename... A>
[[noreturn]] void malformed(fmt::format_string<A...> f, A&&... args) {
    throw Error(Code::format, "npy header: " + fmt::format(f, std::forward<A>(args)...));
}

// Header text for a message: printable ASCII as is, anything else as \xNN, cut after 32 characters.
std::string shown(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < 32; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
        else out += fmt::format("\\x{:02x}", c);
    }
    if (s.size() > 32) out += "...";
    return out;
}

std::string shape_repr(const std::vector<int64_t>& shape) {  // as Python's repr(tuple)
    if (shape.size() == 1) return fmt::format("({},)", shape[0]);
    std::string out = "(";
    for (size_t i = 0; i < shape.size(); ++i) out += fmt::format(i ? ", {}" : "{}", shape[i]);
    return out + ")";
}

// numpy's kind character of a numeric dtype ('b', 'i', 'u', 'f', 'c'); 0 for the types numpy has no descr for
// and those whose itemsize is per array.
char numeric_kind(DType d) {
    switch (d) {
        case DType::bool_: return 'b';
        case DType::int8: case DType::int16: case DType::int32: case DType::int64: return 'i';
        case DType::uint8: case DType::uint16: case DType::uint32: case DType::uint64: return 'u';
        case DType::float16: case DType::float32: case DType::float64: return 'f';
        case DType::complex64: case DType::complex128: return 'c';
        default: return 0;
    }
}

// ml_dtypes' types that a descr can name once ml_dtypes is imported, beyond those ckpt stores: refused as
// unsupported rather than malformed.
constexpr const char* kOtherMlDtypes[] = {"float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float6_e2m3fn",
                                          "float6_e3m2fn",      "float4_e2m1fn", "int2", "int4", "uint2", "uint4"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_char(char c) { return is_digit(c) || c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

struct Descr {
    DType dtype = DType::float32;
    size_t itemsize = 0;
    bool byteswap = false;
    bool foreign_order = false;
    bool raw_void = false;
    std::string unsupported;  // why ckpt refuses a descr numpy knows; empty when supported
};

Descr unsupported(std::string why) {
    Descr d;
    d.unsupported = std::move(why);
    return d;
}

// A typestring as dtype.str writes it: byte order [<>|=] (optional), kind, decimal size.
Descr parse_typestring(std::string_view whole) {
    // A dtype name, as a writer with ml_dtypes registered can produce for its types: native byte order. (No name
    // starts with a byte order, which every typestring numpy writes does.)
    const bool ordered = !whole.empty() && whole[0] != '\0' && std::strchr("<>|=", whole[0]) != nullptr;
    if (const std::optional<DType> named = ordered ? std::nullopt : dtype_named(whole); named && is_ml_dtype(*named)) {
        Descr d;
        d.dtype = *named;
        d.itemsize = numeric_size(*named);
        return d;
    }
    for (const char* other : kOtherMlDtypes)
        if (!ordered && whole == other)
            return unsupported(fmt::format("'descr' '{}' is an ml_dtypes type that ckpt does not store", other));
    std::string_view s = whole;
    char order = '=';
    if (!s.empty() && std::strchr("<>|=", s[0]) != nullptr) {
        order = s[0];
        s.remove_prefix(1);
    }
    const char kind = s.empty() ? '\0' : s[0];
    const std::string_view rest = s.substr(s.empty() ? 0 : 1);
    size_t ndigits = 0;
    while (ndigits < rest.size() && is_digit(rest[ndigits])) ++ndigits;
    const std::string_view digits = rest.substr(0, ndigits), tail = rest.substr(ndigits);
    const auto name = [&] { return shown(whole); };  // for messages only

    // Kinds numpy knows that ckpt does not store. The rest must still look like numpy's, so garbage stays EFORMAT.
    const bool unit_tail = tail.size() > 2 && tail.front() == '[' && tail.back() == ']';
    if (kind == 'O' && tail.empty())
        return unsupported(fmt::format("'descr' '{}' is an object array; pickled object arrays are refused", name()));
    if ((kind == 'M' || kind == 'm') && !digits.empty() && (tail.empty() || unit_tail))
        return unsupported(fmt::format("'descr' '{}' is a datetime/timedelta type, which ckpt does not store", name()));
    if (kind == 'a' && !digits.empty() && tail.empty())
        return unsupported(fmt::format("'descr' '{}' uses numpy's deprecated 'a' bytes kind; ckpt reads 'S'", name()));

    // 18 digits cannot overflow, and 4 * 10^18 still fits in size_t for unicode.
    const auto not_a_dtype = [&] {
        malformed("'descr' '{}' is not a dtype (expected a typestring such as '<f4')", name());
    };
    if (!tail.empty() || digits.empty() || digits.size() > 18) not_a_dtype();
    uint64_t size = 0;
    for (char c : digits) size = size * 10 + static_cast<uint64_t>(c - '0');

    if ((kind == 'f' && (size == 12 || size == 16)) || (kind == 'c' && (size == 24 || size == 32)))
        return unsupported(fmt::format("'descr' '{}' is a long double type, which ckpt does not store", name()));
    Descr d;
    if ((kind == 'U' || kind == 'S') && size >= 1) {
        d.dtype = kind == 'U' ? DType::unicode : DType::bytes;
        d.itemsize = kind == 'U' ? 4 * size : size;
    } else if (kind == 'V') {
        if (size == 0) return unsupported(fmt::format("'descr' '{}' is a zero-size void type", name()));
        // Two raw bytes are bfloat16 unless the file's metadata says otherwise: what ml_dtypes writes for it, and
        // what jax.numpy.load and Keras assume.
        d.dtype = size == 2 ? DType::bfloat16 : DType::void_;
        d.itemsize = size;
        d.raw_void = true;
    } else if (kind == 'f' && size == 1) {
        d.dtype = DType::float8_e5m2;  // ml_dtypes' np.save of float8_e5m2, which numpy itself cannot load
        d.itemsize = 1;
    } else {
        for (uint32_t v = 1; is_dtype(v) && d.itemsize == 0; ++v)
            if (numeric_kind(DType(v)) == kind && numeric_size(DType(v)) == size) {
                d.dtype = DType(v);
                d.itemsize = size;
            }
        if (d.itemsize == 0) not_a_dtype();
    }
    // numpy reads '|' on a multi-byte type as native order (np.dtype('|f4') is float32), and so does ckpt.
    d.foreign_order = order == kForeignOrder;
    d.byteswap = d.foreign_order && swap_unit(d.dtype) > 1;
    return d;
}

// A strict recursive-descent parser of the tiny subset of Python literals that npy headers use.
class HeaderParser {
public:
    HeaderParser(const char* begin, const char* end, unsigned major) : p_(begin), end_(end), major_(major) {}

    NpyHeader parse() {
        NpyHeader h;
        Descr descr;
        bool seen[3] = {false, false, false};
        if (!accept('{')) malformed("the header is not a dict literal: it starts with {}", found());
        while (!accept('}')) {
            const std::string_view key = string_literal("a key");
            size_t k = 0;
            while (k < 3 && key != kKeys[k]) ++k;
            if (k == 3)
                malformed("unexpected key '{}' (only 'descr', 'fortran_order' and 'shape' are allowed)", shown(key));
            if (seen[k]) malformed("key '{}' appears twice", kKeys[k]);
            seen[k] = true;
            expect(':', "after a key");
            if (k == 0) descr = parse_descr();
            if (k == 1) h.fortran_order = boolean();
            if (k == 2) h.shape = shape();
            if (!accept(',')) {
                expect('}', "after a value");
                break;
            }
        }
        skip_space();
        if (p_ != end_) malformed("unexpected {} after the dict", found());
        for (size_t k = 0; k < 3; ++k)
            if (!seen[k]) malformed("missing key '{}'", kKeys[k]);
        // Only a well-formed header earns EUNSUPPORTED; anything malformed above is EFORMAT.
        if (!descr.unsupported.empty()) throw Error(Code::unsupported, "npy header: " + descr.unsupported);

        h.dtype = descr.dtype;
        h.itemsize = descr.itemsize;
        h.byteswap = descr.byteswap;
        h.foreign_order = descr.foreign_order;
        h.raw_void = descr.raw_void;
        const auto nbytes = checked_nbytes(h.shape.data(), h.shape.size(), h.itemsize);
        if (!nbytes) malformed("shape {} of {}-byte items overflows the byte size", shape_repr(h.shape), h.itemsize);
        h.nbytes = *nbytes;
        return h;
    }

private:
    const char* p_;
    const char* const end_;
    const unsigned major_;

    char peek() const { return p_ < end_ ? *p_ : '\0'; }
    std::string found() const {
        if (p_ == end_) return "the end of the header";
        const char* stop = p_ + 1;  // the next token-ish run of text, up to whitespace
        while (stop < end_ && stop - p_ < 16 && !std::strchr(" \t\r\n", *stop)) ++stop;
        return fmt::format("'{}'", shown(std::string_view(p_, size_t(stop - p_))));
    }
    void skip_space() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
    }
    bool accept(char c) {
        skip_space();
        if (p_ == end_ || *p_ != c) return false;
        ++p_;
        return true;
    }
    void expect(char c, const char* where) {
        if (!accept(c)) malformed("expected '{}' {}, found {}", c, where, found());
    }

    bool at_string() const {  // at a quote, or at Python 2's u prefix before one
        const char* q = p_ < end_ && *p_ == 'u' ? p_ + 1 : p_;
        return q < end_ && (*q == '\'' || *q == '"');
    }

    // Quoted with ' or ", without escapes (numpy's own headers never need them).
    std::string_view string_literal(const char* what) {
        skip_space();
        if (!at_string()) malformed("expected a quoted string as {}, found {}", what, found());
        if (*p_ == 'u') ++p_;
        const char quote = *p_;
        const char* start = ++p_;
        while (p_ < end_ && *p_ != quote && *p_ != '\n') {
            if (*p_ == '\\') malformed("backslash escapes in strings are not supported");
            ++p_;
        }
        if (p_ == end_ || *p_ != quote)
            malformed("unterminated string {}{}", quote, shown({start, size_t(p_ - start)}));
        return {start, size_t(p_++ - start)};
    }

    // [-]digits[L]; returns the text without the 'L'.
    std::string_view integer_literal(const char* what) {
        skip_space();
        const char* start = p_;
        if (peek() == '-') ++p_;
        const char* digits = p_;
        while (p_ < end_ && is_digit(*p_)) ++p_;
        if (p_ == digits) {
            p_ = start;
            malformed("expected an integer in {}, found {}", what, found());
        }
        const std::string_view text(start, size_t(p_ - start));
        if (peek() == 'L') {
            // Python 2 wrote 3L for longs; numpy filters the suffix from format 1.0 and 2.0 headers only.
            if (major_ >= 3) malformed("{}L in {}: the Python 2 'L' suffix is not allowed in format 3.0", text, what);
            ++p_;
        }
        if (p_ < end_ && (is_word_char(*p_) || *p_ == '.'))
            malformed("malformed integer {}{} in {}", text, shown({p_, 1}), what);
        return text;
    }

    int64_t dimension() {
        const std::string_view text = integer_literal("'shape'");
        if (text[0] == '-') malformed("'shape' holds a negative dimension ({})", shown(text));
        int64_t value = 0;
        for (char c : text) {
            if (value > (INT64_MAX - (c - '0')) / 10) malformed("'shape' dimension {} overflows int64", shown(text));
            value = value * 10 + (c - '0');
        }
        return value;
    }

    std::vector<int64_t> shape() {
        std::vector<int64_t> dims;
        if (!accept('(')) malformed("'shape' must be a tuple such as (2, 3), found {}", found());
        if (accept(')')) return dims;
        for (bool comma = false;;) {
            if (dims.size() == kMaxDims) malformed("'shape' has more than {} dimensions", kMaxDims);
            dims.push_back(dimension());
            if (accept(',')) {
                comma = true;
                if (accept(')')) return dims;
            } else if (accept(')')) {
                if (!comma) malformed("'shape' ({}) is an integer, not a tuple (that is ({},))", dims[0], dims[0]);
                return dims;
            } else {
                malformed("expected ',' or ')' in 'shape', found {}", found());
            }
        }
    }

    std::string_view word() {  // a Python name such as True; empty if there is none
        skip_space();
        const char* start = p_;
        while (p_ < end_ && is_word_char(*p_)) ++p_;
        return {start, size_t(p_ - start)};
    }

    bool boolean() {
        const std::string_view w = word();
        if (w == "True") return true;
        if (w == "False") return false;
        p_ = w.data();
        malformed("'fortran_order' must be True or False, found {}", found());
    }

    Descr parse_descr() {
        skip_space();
        const char c = peek();
        if (c == '[' || c == '(') {
            skip_literal(1);
            return unsupported(c == '[' ? "'descr' is a structured dtype (a list of fields), which ckpt does not store"
                                        : "'descr' is a subarray dtype (a tuple), which ckpt does not store");
        }
        return parse_typestring(string_literal("'descr'"));
    }

    // Skips a string, integer, True/False/None, or a tuple or list of them, nested at most kMaxNesting deep: enough
    // to step over a structured descr such as [('a', '<i4'), ('b', '<f8', (2,))].
    void skip_literal(int depth) {
        if (depth > kMaxNesting) malformed("'descr' is nested more than {} levels deep", kMaxNesting);
        skip_space();
        const char c = peek();
        if (c == '(' || c == '[') {
            const char close = c == '(' ? ')' : ']';
            ++p_;
            while (!accept(close)) {
                skip_literal(depth + 1);
                if (!accept(',')) return expect(close, "in 'descr'");
            }
        } else if (at_string()) {
            string_literal("a string in 'descr'");
        } else if (c == '-' || is_digit(c)) {
            integer_literal("'descr'");
        } else {
            const std::string_view w = word();
            if (w != "True" && w != "False" && w != "None") {
                p_ = w.data();
                malformed("unexpected {} in 'descr'", found());
            }
        }
    }
};

// numpy's own header text — "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", spaces, '\n' —
// recognised by direct comparison, at a tenth of the grammar's cost: nearly every header read is exactly this.
// Any other text gives nothing and goes to the grammar, so all errors and other spellings are handled in one
// place; what this accepts, the grammar parses to the same header (the npy_header fuzz target checks it).
std::optional<NpyHeader> parse_numpy_text(const char* p, const char* const end) {
    const auto take = [&](std::string_view s) {
        if (static_cast<size_t>(end - p) < s.size() || std::memcmp(p, s.data(), s.size()) != 0) return false;
        p += s.size();
        return true;
    };
    if (!take("{'descr': '")) return std::nullopt;
    const char* const descr_begin = p;
    while (p < end && *p != '\'' && *p != '\n' && *p != '\\') ++p;
    if (p == end || *p != '\'') return std::nullopt;
    const Descr descr = parse_typestring({descr_begin, static_cast<size_t>(p - descr_begin)});  // throws as the grammar
    if (!descr.unsupported.empty()) return std::nullopt;
    ++p;
    NpyHeader h;
    if (take(", 'fortran_order': False, 'shape': (")) {
        h.fortran_order = false;
    } else if (take(", 'fortran_order': True, 'shape': (")) {
        h.fortran_order = true;
    } else {
        return std::nullopt;
    }
    if (!take(")")) {
        for (;;) {
            if (h.shape.size() == kMaxDims) return std::nullopt;
            const char* const digits = p;
            int64_t value = 0;
            while (p < end && is_digit(*p) && p - digits < 18) value = value * 10 + (*p++ - '0');  // cannot overflow
            if (p == digits || (p < end && is_digit(*p))) return std::nullopt;
            h.shape.push_back(value);
            if (take(",)")) break;
            if (take(", ")) continue;
            if (h.shape.size() < 2 || !take(")")) return std::nullopt;  // (3) is an integer, not a tuple
            break;
        }
    }
    // Then spaces up to a final '\n', eight at a time: numpy pads every header to 64 bytes and more.
    if (!take(", }") || p == end || end[-1] != '\n') return std::nullopt;
    for (uint64_t eight; end - 1 - p >= 8; p += 8) {
        std::memcpy(&eight, p, 8);
        if (eight != 0x2020202020202020u) return std::nullopt;
    }
    for (; p < end - 1; ++p)
        if (*p != ' ') return std::nullopt;
    const auto nbytes = checked_nbytes(h.shape.data(), h.shape.size(), descr.itemsize);
    if (!nbytes) return std::nullopt;
    h.dtype = descr.dtype;
    h.itemsize = descr.itemsize;
    h.byteswap = descr.byteswap;
    h.foreign_order = descr.foreign_order;
    h.raw_void = descr.raw_void;
    h.nbytes = *nbytes;
    return h;
}

// Copies every item of a Fortran-order array to its C-order place: dst is written in order while an index
// counter (last axis fastest) tracks the source offset, so the work is O(items) with no recursion.
template <size_t kFixedSize>
void gather_c_order(const unsigned char* src, unsigned char* dst, const std::vector<int64_t>& shape, size_t itemsize,
                    size_t count) {
    // A constant size turns memcpy into one move: 4096x4096 float32 took 135 ms instead of 185 ms (-O2, 2 vCPUs;
    // the strided reads dominate, a plain memcpy of the same 64 MiB took 10 ms).
    const size_t size = kFixedSize ? kFixedSize : itemsize;
    const size_t ndim = shape.size();
    std::vector<size_t> index(ndim, 0), stride(ndim);
    for (size_t k = 0, s = size; k < ndim; s *= size_t(shape[k]), ++k) stride[k] = s;
    size_t from = 0;
    for (size_t i = 0; i < count; ++i, dst += size) {
        std::memcpy(dst, src + from, size);
        for (size_t k = ndim; k-- > 0;) {
            if (++index[k] < size_t(shape[k])) {
                from += stride[k];
                break;
            }
            index[k] = 0;
            from -= (size_t(shape[k]) - 1) * stride[k];
        }
    }
}

template <typename Unit, typename Swap>
void swap_units(unsigned char* p, size_t count, Swap swap) {
    for (size_t i = 0; i < count; ++i, p += sizeof(Unit)) {
        Unit u;
        std::memcpy(&u, p, sizeof u);
        u = swap(u);
        std::memcpy(p, &u, sizeof u);
    }
}

}  // namespace

size_t npy_data_offset(const void* bytes, size_t n, uint64_t member_size, size_t max_header_bytes) {
    const auto* b = static_cast<const unsigned char*>(bytes);
    const size_t avail = n < member_size ? n : size_t(member_size);
    if (avail > 0 && std::memcmp(b, kMagic, std::min(avail, kNpyMagicBytes)) != 0)
        malformed("not an npy array: the magic string \\x93NUMPY is missing");
    if (avail < 8) malformed("truncated: {} bytes cannot hold the preamble", avail);
    const unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        malformed("format version {}.{} is not 1.0, 2.0 or 3.0", major, minor);
    const size_t preamble = major == 1 ? 10 : 12;
    if (avail < preamble) malformed("truncated: {} bytes cannot hold the preamble of format {}.0", avail, major);
    uint64_t header_len = b[8] | uint32_t(b[9]) << 8;
    if (major > 1) header_len |= uint32_t(b[10]) << 16 | uint32_t(b[11]) << 24;
    if (header_len > max_header_bytes)
        malformed("header length {} exceeds the limit of {} bytes (max_header_bytes)", header_len, max_header_bytes);
    if (preamble + header_len > member_size)
        malformed("truncated: the header needs {} bytes but the member holds {}", preamble + header_len, member_size);
    return preamble + size_t(header_len);
}

NpyHeader parse_npy_header(const void* bytes, size_t data_offset, size_t max_header_bytes, NpyParse how) {
    const size_t offset = npy_data_offset(bytes, data_offset, data_offset, max_header_bytes);
    if (offset != data_offset) malformed("the header ends at byte {}, not at data offset {}", offset, data_offset);
    const auto* b = static_cast<const char*>(bytes);
    const unsigned major = static_cast<unsigned char>(b[6]);
    const char* const text = b + (major == 1 ? 10 : 12);
    std::optional<NpyHeader> fast;
    if (how == NpyParse::fast_path_first) fast = parse_numpy_text(text, b + data_offset);
    NpyHeader h = fast ? std::move(*fast) : HeaderParser(text, b + data_offset, major).parse();
    h.data_offset = data_offset;
    return h;
}

std::string npy_descr(DType dtype, size_t itemsize) {
    if (!is_dtype(static_cast<uint32_t>(dtype))) fail(Code::invalid, "unknown dtype {}", static_cast<uint32_t>(dtype));
    if (dtype == DType::unicode) {
        if (itemsize == 0 || itemsize % 4 != 0)
            fail(Code::invalid, "unicode itemsize {} is not a positive multiple of 4", itemsize);
        return fmt::format("{}U{}", kNativeOrder, itemsize / 4);
    }
    if (dtype == DType::bytes || dtype == DType::void_) {
        if (itemsize == 0) fail(Code::invalid, "{} itemsize must be at least 1", dtype_name(dtype));
        return fmt::format("|{}{}", dtype == DType::bytes ? 'S' : 'V', itemsize);
    }
    if (itemsize != numeric_size(dtype))
        fail(Code::invalid, "itemsize {} does not match dtype {}", itemsize, dtype_name(dtype));
    if (is_ml_dtype(dtype)) return fmt::format("{}V{}", kNativeOrder, itemsize);  // as ml_dtypes' np.save
    return fmt::format("{}{}{}", itemsize == 1 ? '|' : kNativeOrder, numeric_kind(dtype), itemsize);
}

void retype_npy_header(NpyHeader& h, DType dtype) {
    if (h.dtype == dtype) return;
    if (!is_ml_dtype(dtype) && dtype != DType::void_)
        fail(Code::format, "dtype {} is recorded, but that is numpy's own, which the descr names (only bfloat16, "
             "float8 and void are recorded)", dtype_name(dtype));
    if (!h.raw_void)
        fail(Code::format, "dtype {} is recorded, but the descr says {}", dtype_name(dtype), dtype_name(h.dtype));
    if (dtype != DType::void_ && numeric_size(dtype) != h.itemsize)
        fail(Code::format, "dtype {} ({} bytes) is recorded for raw items of {} bytes", dtype_name(dtype),
             numeric_size(dtype), h.itemsize);
    h.dtype = dtype;
    h.byteswap = h.foreign_order && swap_unit(dtype) > 1;
}

std::string format_npy_header(DType dtype, size_t itemsize, const std::vector<int64_t>& shape) {
    const std::string descr = npy_descr(dtype, itemsize);
    if (shape.size() > kMaxDims) fail(Code::invalid, "{} dimensions exceed the limit of {}", shape.size(), kMaxDims);
    if (!checked_nbytes(shape.data(), shape.size(), itemsize))
        fail(Code::invalid, "shape {} has a negative dimension or its byte size overflows", shape_repr(shape));

    std::string dict =
        fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_repr(shape));
    // numpy >= 1.24 leaves room for the first dimension to grow to 21 digits when rewriting the header in place.
    if (!shape.empty()) dict.append(kGrowthAxisDigits - fmt::formatted_size("{}", shape[0]), ' ');
    constexpr size_t kPreamble = 10;  // version 1.0; see the static_assert on the size above
    // Like numpy, pad a whole 64 bytes when the header would already end on the boundary.
    const size_t pad = kArrayAlign - (kPreamble + dict.size() + 1) % kArrayAlign;
    const size_t header_len = dict.size() + pad + 1;

    std::string out(kMagic, kNpyMagicBytes);
    out += {'\x01', '\x00', static_cast<char>(header_len & 0xff), static_cast<char>(header_len >> 8)};
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
}

void byteswap_in_place(DType dtype, void* data, size_t nbytes) {
    const size_t unit = swap_unit(dtype);
    if (unit <= 1) return;
    if (nbytes % unit != 0) fail(Code::invalid, "{} bytes are not a whole number of {}-byte units", nbytes, unit);
    auto* p = static_cast<unsigned char*>(data);
    switch (unit) {
        case 2: return swap_units<uint16_t>(p, nbytes / 2, [](uint16_t u) { return __builtin_bswap16(u); });
        case 4: return swap_units<uint32_t>(p, nbytes / 4, [](uint32_t u) { return __builtin_bswap32(u); });
        case 8: return swap_units<uint64_t>(p, nbytes / 8, [](uint64_t u) { return __builtin_bswap64(u); });
        default: fail(Code::invalid, "no byte swap for {}-byte units", unit);
    }
}

void fortran_to_c_order(const void* src, void* dst, const std::vector<int64_t>& shape, size_t itemsize) {
    const auto nbytes = checked_nbytes(shape.data(), shape.size(), itemsize);
    if (!nbytes || itemsize == 0)
        fail(Code::invalid, "fortran_to_c_order: invalid shape {} or itemsize {}", shape_repr(shape), itemsize);
    if (*nbytes == 0) return;
    const auto* s = static_cast<const unsigned char*>(src);
    auto* d = static_cast<unsigned char*>(dst);
    const size_t count = *nbytes / itemsize;
    switch (itemsize) {
        case 1: return gather_c_order<1>(s, d, shape, itemsize, count);
        case 2: return gather_c_order<2>(s, d, shape, itemsize, count);
        case 4: return gather_c_order<4>(s, d, shape, itemsize, count);
        case 8: return gather_c_order<8>(s, d, shape, itemsize, count);
        case 16: return gather_c_order<16>(s, d, shape, itemsize, count);
        default: return gather_c_order<0>(s, d, shape, itemsize, count);
    }
}

}  // namespace ckpt::core
