// SPDX-License-Identifier: Apache-2.0
#include "values.hpp"

#include "float_formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace ckpt_tool {
namespace {

template <typename T>
T load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename T>
double plain_real(const unsigned char* p) {
    return static_cast<double>(load<T>(p));
}
double f16_real(const unsigned char* p) { return float16_to_double(load<uint16_t>(p)); }
double bf16_real(const unsigned char* p) { return bfloat16_to_double(load<uint16_t>(p)); }
double e4m3fn_real(const unsigned char* p) { return float8_e4m3fn_to_double(*p); }
double e5m2_real(const unsigned char* p) { return float8_e5m2_to_double(*p); }
double e4m3fnuz_real(const unsigned char* p) { return float8_e4m3fnuz_to_double(*p); }
double e5m2fnuz_real(const unsigned char* p) { return float8_e5m2fnuz_to_double(*p); }
double e8m0fnu_real(const unsigned char* p) { return float8_e8m0fnu_to_double(*p); }
double bool_real(const unsigned char* p) { return *p != 0 ? 1.0 : 0.0; }

int64_t signed_at(uint32_t dtype, const unsigned char* p) {
    switch (dtype) {
        case CKPT_INT8: return load<int8_t>(p);
        case CKPT_INT16: return load<int16_t>(p);
        case CKPT_INT32: return load<int32_t>(p);
        default: return load<int64_t>(p);
    }
}

uint64_t unsigned_at(uint32_t dtype, const unsigned char* p) {
    switch (dtype) {
        case CKPT_BOOL: return *p != 0;
        case CKPT_UINT8: return load<uint8_t>(p);
        case CKPT_UINT16: return load<uint16_t>(p);
        case CKPT_UINT32: return load<uint32_t>(p);
        default: return load<uint64_t>(p);
    }
}

std::complex<double> complex_at(uint32_t dtype, const unsigned char* p) {
    if (dtype == CKPT_COMPLEX64) return {load<float>(p), load<float>(p + 4)};
    return {load<double>(p), load<double>(p + 8)};
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// Folds one differing pair of numbers into the comparison (neither is NaN).
void account(Comparison& c, double abs_diff, double magnitude_a, uint64_t at) {
    const double rel = magnitude_a == 0 ? kInf : (std::isinf(abs_diff) ? kInf : abs_diff / magnitude_a);
    if (!c.any_numeric_difference || abs_diff > c.max_abs) {
        c.max_abs = abs_diff;
        c.max_abs_at = at;  // the first element where the largest difference is
    }
    if (rel > c.max_rel) c.max_rel = rel;
    c.any_numeric_difference = true;
}

bool same_real(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The magnitudes of the values on either side of a narrow float's bits (the same sign, one step smaller and
// larger in magnitude); NaN where there is none.
void narrow_neighbours(uint32_t dtype, unsigned bits, double& smaller, double& larger) {
    const RealFn fn = real_fn(dtype);
    const bool two_bytes = dtype == CKPT_FLOAT16 || dtype == CKPT_BFLOAT16;
    const bool signless = dtype == CKPT_FLOAT8_E8M0FNU;
    const unsigned sign = signless ? 0 : (two_bytes ? 0x8000u : 0x80u);
    const unsigned magnitude_mask = signless ? 0xFFu : sign - 1;
    const unsigned magnitude = bits & magnitude_mask;
    const auto decode = [&](unsigned b) {
        unsigned char raw[2];
        if (two_bytes) {
            const uint16_t v = static_cast<uint16_t>(b);
            std::memcpy(raw, &v, 2);
        } else {
            raw[0] = static_cast<unsigned char>(b);
        }
        const double v = fn(raw);
        return std::isfinite(v) ? std::fabs(v) : std::numeric_limits<double>::quiet_NaN();
    };
    smaller = magnitude > 0 ? decode((bits & sign) | (magnitude - 1)) : std::numeric_limits<double>::quiet_NaN();
    larger =
        magnitude < magnitude_mask ? decode((bits & sign) | (magnitude + 1)) : std::numeric_limits<double>::quiet_NaN();
}

bool is_narrow(uint32_t dtype) { return dtype != CKPT_FLOAT32 && dtype != CKPT_FLOAT64; }

std::string hex_escape(unsigned byte) { return fmt::format("\\x{:02x}", byte); }

void append_utf8(std::string& out, uint32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
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

// The code points of a unicode item, without numpy's trailing NUL padding.
std::vector<uint32_t> code_points(const unsigned char* p, size_t itemsize) {
    std::vector<uint32_t> cps(itemsize / 4);
    for (size_t k = 0; k < cps.size(); ++k) cps[k] = load<uint32_t>(p + 4 * k);
    while (!cps.empty() && cps.back() == 0) cps.pop_back();
    return cps;
}

size_t trimmed_bytes(const unsigned char* p, size_t itemsize) {
    while (itemsize > 0 && p[itemsize - 1] == 0) --itemsize;
    return itemsize;
}

}  // namespace

RealFn real_fn(uint32_t dtype) {
    switch (dtype) {
        case CKPT_BOOL: return bool_real;
        case CKPT_INT8: return plain_real<int8_t>;
        case CKPT_INT16: return plain_real<int16_t>;
        case CKPT_INT32: return plain_real<int32_t>;
        case CKPT_INT64: return plain_real<int64_t>;
        case CKPT_UINT8: return plain_real<uint8_t>;
        case CKPT_UINT16: return plain_real<uint16_t>;
        case CKPT_UINT32: return plain_real<uint32_t>;
        case CKPT_UINT64: return plain_real<uint64_t>;
        case CKPT_FLOAT16: return f16_real;
        case CKPT_FLOAT32: return plain_real<float>;
        case CKPT_FLOAT64: return plain_real<double>;
        case CKPT_BFLOAT16: return bf16_real;
        case CKPT_FLOAT8_E4M3FN: return e4m3fn_real;
        case CKPT_FLOAT8_E5M2: return e5m2_real;
        case CKPT_FLOAT8_E4M3FNUZ: return e4m3fnuz_real;
        case CKPT_FLOAT8_E5M2FNUZ: return e5m2fnuz_real;
        case CKPT_FLOAT8_E8M0FNU: return e8m0fnu_real;
        default: return nullptr;
    }
}

Kind kind_of(uint32_t dtype) {
    switch (dtype) {
        case CKPT_BOOL: return Kind::boolean;
        case CKPT_INT8:
        case CKPT_INT16:
        case CKPT_INT32:
        case CKPT_INT64: return Kind::signed_integer;
        case CKPT_UINT8:
        case CKPT_UINT16:
        case CKPT_UINT32:
        case CKPT_UINT64: return Kind::unsigned_integer;
        case CKPT_COMPLEX64:
        case CKPT_COMPLEX128: return Kind::complex;
        case CKPT_UNICODE:
        case CKPT_BYTES:
        case CKPT_VOID: return Kind::text;
        default: return real_fn(dtype) != nullptr ? Kind::real : Kind::text;
    }
}

int64_t signed_item(const ArrayView& a, uint64_t i) { return signed_at(a.dtype, a.item(i)); }
uint64_t unsigned_item(const ArrayView& a, uint64_t i) { return unsigned_at(a.dtype, a.item(i)); }

uint64_t ArrayView::count() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
}

std::string dtype_label(uint32_t dtype, size_t itemsize) {
    const char* name = ckpt_dtype_name(dtype);
    std::string label = name != nullptr ? name : fmt::format("dtype#{}", dtype);
    if (dtype == CKPT_UNICODE) label += fmt::format("<{}>", itemsize / 4);
    if (dtype == CKPT_BYTES || dtype == CKPT_VOID) label += fmt::format("<{}>", itemsize);
    return label;
}

double real_at(const ArrayView& a, uint64_t i) {
    const RealFn fn = real_fn(a.dtype);
    return fn != nullptr ? fn(a.item(i)) : std::numeric_limits<double>::quiet_NaN();
}

Comparison compare(const ArrayView& a, const ArrayView& b) {
    Comparison c;
    c.elements = a.count();
    const uint64_t n = c.elements;
    const size_t size = a.itemsize;
    switch (kind_of(a.dtype)) {
        case Kind::boolean:
        case Kind::unsigned_integer:
            c.numeric = true;
            for (uint64_t i = 0; i < n; ++i) {
                const uint64_t x = unsigned_at(a.dtype, a.item(i)), y = unsigned_at(a.dtype, b.item(i));
                if (x == y) continue;
                ++c.differing;
                account(c, static_cast<double>(x > y ? x - y : y - x), static_cast<double>(x), i);
            }
            break;
        case Kind::signed_integer:
            c.numeric = true;
            for (uint64_t i = 0; i < n; ++i) {
                const int64_t x = signed_at(a.dtype, a.item(i)), y = signed_at(a.dtype, b.item(i));
                if (x == y) continue;
                ++c.differing;
                const __int128 d = static_cast<__int128>(y) - static_cast<__int128>(x);
                const __int128 mag = x < 0 ? -static_cast<__int128>(x) : static_cast<__int128>(x);
                account(c, static_cast<double>(d < 0 ? -d : d), static_cast<double>(mag), i);
            }
            break;
        case Kind::real: {
            c.numeric = true;
            const RealFn fn = real_fn(a.dtype);
            for (uint64_t i = 0; i < n; ++i) {
                const double x = fn(a.item(i)), y = fn(b.item(i));
                if (same_real(x, y)) continue;
                ++c.differing;
                if (std::isnan(x) || std::isnan(y)) {
                    ++c.nan_mismatches;
                    continue;
                }
                account(c, std::isinf(x) || std::isinf(y) ? kInf : std::fabs(y - x), std::fabs(x), i);
            }
            break;
        }
        case Kind::complex:
            c.numeric = true;
            for (uint64_t i = 0; i < n; ++i) {
                const std::complex<double> x = complex_at(a.dtype, a.item(i)), y = complex_at(a.dtype, b.item(i));
                if (same_real(x.real(), y.real()) && same_real(x.imag(), y.imag())) continue;
                ++c.differing;
                if (std::isnan(x.real()) || std::isnan(x.imag()) || std::isnan(y.real()) || std::isnan(y.imag())) {
                    ++c.nan_mismatches;
                    continue;
                }
                const bool infinite =
                    std::isinf(x.real()) || std::isinf(x.imag()) || std::isinf(y.real()) || std::isinf(y.imag());
                account(c, infinite ? kInf : std::abs(y - x), std::abs(x), i);
            }
            break;
        case Kind::text:
            for (uint64_t i = 0; i < n; ++i)
                if (std::memcmp(a.item(i), b.item(i), size) != 0) ++c.differing;
            break;
    }
    return c;
}

Real real_item(const ArrayView& a, uint64_t i) {
    Real r;
    r.dtype = a.dtype;
    r.value = real_fn(a.dtype)(a.item(i));
    if (is_narrow(a.dtype)) r.bits = a.itemsize == 2 ? load<uint16_t>(a.item(i)) : *a.item(i);
    return r;
}

void complex_item(const ArrayView& a, uint64_t i, Real& re, Real& im) {
    const std::complex<double> z = complex_at(a.dtype, a.item(i));
    re.dtype = im.dtype = a.dtype == CKPT_COMPLEX64 ? CKPT_FLOAT32 : CKPT_FLOAT64;
    re.value = z.real();
    im.value = z.imag();
}

bool reads_back(const Real& r, const std::string& text) {
    const double back = std::strtod(text.c_str(), nullptr);
    if (std::isnan(r.value) || std::isinf(r.value)) return back == r.value || (std::isnan(back) && std::isnan(r.value));
    if (r.dtype == CKPT_FLOAT64) return back == r.value;
    if (r.dtype == CKPT_FLOAT32) return static_cast<float>(back) == static_cast<float>(r.value);
    if (r.value == 0) return back == 0;
    if (std::signbit(back) != std::signbit(r.value)) return false;
    double smaller, larger;
    narrow_neighbours(r.dtype, r.bits, smaller, larger);
    const double mag = std::fabs(r.value), got = std::fabs(back);
    const double below = std::isnan(smaller) ? larger - mag : mag - smaller;
    const double above = std::isnan(larger) ? mag - smaller : larger - mag;
    return got >= mag ? got - mag < above / 2 : mag - got < below / 2;
}

std::string shortest_repr(const Real& r) {
    if (std::isnan(r.value)) return "nan";
    if (std::isinf(r.value)) return r.value < 0 ? "-inf" : "inf";
    std::string text;
    if (r.dtype == CKPT_FLOAT64) {
        text = fmt::format("{}", r.value);
    } else if (r.dtype == CKPT_FLOAT32) {
        text = fmt::format("{}", static_cast<float>(r.value));
    } else {
        // fmt's shortest form of the double, then as few significant digits as read back in the narrow type.
        text = fmt::format("{}", r.value);
        for (int digits = 1; digits <= 17; ++digits) {
            std::string candidate = fmt::format("{:.{}g}", r.value, digits);
            if (reads_back(r, candidate)) {
                text = fmt::format("{}", std::strtod(candidate.c_str(), nullptr));
                break;
            }
        }
    }
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return text;
}

std::string integer_text(const ArrayView& a, uint64_t i) {
    const unsigned char* p = a.item(i);
    switch (kind_of(a.dtype)) {
        case Kind::boolean: return *p != 0 ? "True" : "False";
        case Kind::signed_integer: return fmt::format("{}", signed_at(a.dtype, p));
        default: return fmt::format("{}", unsigned_at(a.dtype, p));
    }
}

std::string text_repr(const ArrayView& a, uint64_t i) {
    const unsigned char* p = a.item(i);
    // Python's repr: single quotes, or double quotes for text holding a single quote and no double quote.
    const auto quote_for = [](bool single, bool dbl) { return single && !dbl ? '"' : '\''; };
    std::string out;
    if (a.dtype == CKPT_UNICODE) {
        const std::vector<uint32_t> cps = code_points(p, a.itemsize);
        const char quote = quote_for(std::find(cps.begin(), cps.end(), '\'') != cps.end(),
                                     std::find(cps.begin(), cps.end(), '"') != cps.end());
        out = quote;
        for (uint32_t cp : cps) {
            if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
                out += '\\';
                out += static_cast<char>(cp);
            } else if (cp < 0x20 || cp == 0x7F) {
                out += cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : cp == '\r' ? "\\r" : hex_escape(cp);
            } else {
                append_utf8(out, cp);
            }
        }
        return out + quote;
    }
    const size_t n = a.dtype == CKPT_BYTES ? trimmed_bytes(p, a.itemsize) : a.itemsize;
    const char quote =
        a.dtype == CKPT_VOID ? '\'' : quote_for(std::memchr(p, '\'', n) != nullptr, std::memchr(p, '"', n) != nullptr);
    out = "b";
    out += quote;
    for (size_t k = 0; k < n; ++k) {
        const unsigned byte = p[k];
        if (a.dtype == CKPT_VOID || byte < 0x20 || byte >= 0x7F) {
            out += byte == '\n' && a.dtype != CKPT_VOID   ? "\\n"
                   : byte == '\t' && a.dtype != CKPT_VOID ? "\\t"
                   : byte == '\r' && a.dtype != CKPT_VOID ? "\\r"
                                                          : hex_escape(byte);
        } else {
            if (byte == static_cast<unsigned>(quote) || byte == '\\') out += '\\';
            out += static_cast<char>(byte);
        }
    }
    return out + quote;
}

std::string format_scalar(const ArrayView& a, uint64_t i) {
    switch (kind_of(a.dtype)) {
        case Kind::boolean:
        case Kind::signed_integer:
        case Kind::unsigned_integer: return integer_text(a, i);
        case Kind::real: return shortest_repr(real_item(a, i));
        case Kind::complex: {
            // Python's repr of a complex: (1+2j), (1.5-0.5j); a zero real part is left out: 2j.
            Real re, im;
            complex_item(a, i, re, im);
            const auto part = [](const Real& r) {
                std::string s = shortest_repr(r);
                if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
                return s;
            };
            std::string imag = part(im);
            if (re.value == 0 && !std::signbit(re.value)) return imag + "j";
            if (imag[0] != '-') imag = "+" + imag;
            return "(" + part(re) + imag + "j)";
        }
        case Kind::text: break;
    }
    if (a.dtype == CKPT_UNICODE) {
        std::string out;
        for (uint32_t cp : code_points(a.item(i), a.itemsize)) append_utf8(out, cp);
        return out;
    }
    return text_repr(a, i);
}

Json json_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    return v;
}

Json json_element(const ArrayView& a, uint64_t i) {
    const unsigned char* p = a.item(i);
    switch (kind_of(a.dtype)) {
        case Kind::boolean: return *p != 0;
        case Kind::signed_integer: return signed_at(a.dtype, p);
        case Kind::unsigned_integer: return unsigned_at(a.dtype, p);
        case Kind::real: return json_number(real_fn(a.dtype)(p));
        case Kind::complex: {
            const std::complex<double> z = complex_at(a.dtype, p);
            return Json::array({json_number(z.real()), json_number(z.imag())});
        }
        case Kind::text: break;
    }
    std::string out;
    if (a.dtype == CKPT_UNICODE) {
        for (uint32_t cp : code_points(p, a.itemsize)) append_utf8(out, cp);
    } else if (a.dtype == CKPT_BYTES) {
        const size_t n = trimmed_bytes(p, a.itemsize);
        for (size_t k = 0; k < n; ++k) append_utf8(out, p[k]);
    } else {
        for (size_t k = 0; k < a.itemsize; ++k) out += fmt::format("{:02x}", p[k]);
    }
    return out;
}

}  // namespace ckpt_tool
