#include "values.hpp"

#include "float_formats.hpp"

#include <fmt/format.h>

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

using RealFn = double (*)(const unsigned char*);
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
void account(Comparison& c, double abs_diff, double magnitude_a) {
    c.any_numeric_difference = true;
    const double rel = magnitude_a == 0 ? kInf : (std::isinf(abs_diff) ? kInf : abs_diff / magnitude_a);
    if (abs_diff > c.max_abs) c.max_abs = abs_diff;
    if (rel > c.max_rel) c.max_rel = rel;
}

bool same_real(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The magnitudes of the values on either side of a narrow float's bits `bits` (the same sign, one step smaller
// and larger in magnitude); NaN where there is none.
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
    smaller = magnitude > 0 ? decode((bits & sign) | (magnitude - 1))
                            : std::numeric_limits<double>::quiet_NaN();
    larger = magnitude < magnitude_mask ? decode((bits & sign) | (magnitude + 1))
                                        : std::numeric_limits<double>::quiet_NaN();
}

// The shortest "%.<p>g" text of v that lies closer to v than to either neighbour (so reads back as v's bits).
std::string shortest_between(double v, double smaller, double larger) {
    const double mag = std::fabs(v);
    double below = std::isnan(smaller) ? (std::isnan(larger) ? 0 : larger - mag) : mag - smaller;
    double above = std::isnan(larger) ? below : larger - mag;
    if (std::isnan(smaller)) below = above;
    for (int precision = 1; precision < 17; ++precision) {
        std::string text = fmt::format("{:.{}g}", v, precision);
        const double back = std::fabs(std::strtod(text.c_str(), nullptr));
        if ((back >= mag && back - mag < above / 2) || (back < mag && mag - back < below / 2)) return text;
    }
    return fmt::format("{:.17g}", v);
}

// numpy writes floats with a decimal point: 1. and 1.e-10.
std::string with_point(std::string text) {
    if (text.find_first_of(".ni") != std::string::npos) return text;  // has one, or nan/inf
    const size_t e = text.find('e');
    if (e == std::string::npos) return text + ".";
    return text.insert(e, ".");
}

std::string format_real(uint32_t dtype, const unsigned char* p) {
    const double v = real_fn(dtype)(p);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    std::string text;
    if (dtype == CKPT_FLOAT64) {
        text = fmt::format("{}", v);
    } else if (dtype == CKPT_FLOAT32) {
        text = fmt::format("{}", load<float>(p));
    } else {
        double smaller, larger;
        const unsigned bits = (dtype == CKPT_FLOAT16 || dtype == CKPT_BFLOAT16) ? load<uint16_t>(p) : *p;
        narrow_neighbours(dtype, bits, smaller, larger);
        text = v == 0 ? fmt::format("{}", v) : shortest_between(v, smaller, larger);
    }
    // At most 8 significant digits, numpy's default precision.
    size_t digits = 0;
    for (char ch : text) {
        if (ch == 'e') break;
        if (ch >= '0' && ch <= '9') ++digits;
    }
    if (digits > 8) text = fmt::format("{:.8g}", v);
    return with_point(text);
}

std::string format_complex_part(double v, uint32_t part_dtype) {
    unsigned char raw[8];
    if (part_dtype == CKPT_FLOAT32) {
        const float f = static_cast<float>(v);
        std::memcpy(raw, &f, 4);
    } else {
        std::memcpy(raw, &v, 8);
    }
    return format_real(part_dtype, raw);
}

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

std::string hex_escape(unsigned byte) { return fmt::format("\\x{:02x}", byte); }

}  // namespace

Kind kind_of(uint32_t dtype) {
    switch (dtype) {
        case CKPT_BOOL: return Kind::boolean;
        case CKPT_INT8: case CKPT_INT16: case CKPT_INT32: case CKPT_INT64: return Kind::signed_integer;
        case CKPT_UINT8: case CKPT_UINT16: case CKPT_UINT32: case CKPT_UINT64: return Kind::unsigned_integer;
        case CKPT_COMPLEX64: case CKPT_COMPLEX128: return Kind::complex;
        case CKPT_UNICODE: case CKPT_BYTES: case CKPT_VOID: return Kind::text;
        default: return real_fn(dtype) != nullptr ? Kind::real : Kind::text;
    }
}

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
                account(c, static_cast<double>(x > y ? x - y : y - x), static_cast<double>(x));
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
                account(c, static_cast<double>(d < 0 ? -d : d), static_cast<double>(mag));
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
                account(c, std::isinf(x) || std::isinf(y) ? kInf : std::fabs(y - x), std::fabs(x));
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
                const bool infinite = std::isinf(x.real()) || std::isinf(x.imag()) || std::isinf(y.real()) ||
                                      std::isinf(y.imag());
                account(c, infinite ? kInf : std::abs(y - x), std::abs(x));
            }
            break;
        case Kind::text:
            for (uint64_t i = 0; i < n; ++i)
                if (std::memcmp(a.item(i), b.item(i), size) != 0) ++c.differing;
            break;
    }
    return c;
}

std::string format_element(const ArrayView& a, uint64_t i) {
    const unsigned char* p = a.item(i);
    switch (kind_of(a.dtype)) {
        case Kind::boolean:
            return *p != 0 ? "True" : "False";
        case Kind::signed_integer:
            return fmt::format("{}", signed_at(a.dtype, p));
        case Kind::unsigned_integer:
            return fmt::format("{}", unsigned_at(a.dtype, p));
        case Kind::real:
            return format_real(a.dtype, p);
        case Kind::complex: {
            const uint32_t part = a.dtype == CKPT_COMPLEX64 ? CKPT_FLOAT32 : CKPT_FLOAT64;
            const std::complex<double> z = complex_at(a.dtype, p);
            std::string imag = format_complex_part(z.imag(), part);
            if (imag[0] != '-') imag = "+" + imag;
            return format_complex_part(z.real(), part) + imag + "j";
        }
        case Kind::text:
            break;
    }
    std::string out;
    if (a.dtype == CKPT_UNICODE) {
        out = "'";
        for (uint32_t cp : code_points(p, a.itemsize)) {
            if (cp == '\'' || cp == '\\') {
                out += '\\';
                out += static_cast<char>(cp);
            } else if (cp < 0x20 || cp == 0x7F) {
                out += cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : cp == '\r' ? "\\r" : hex_escape(cp);
            } else {
                append_utf8(out, cp);
            }
        }
        return out + "'";
    }
    out = "b'";
    const size_t n = a.dtype == CKPT_BYTES ? trimmed_bytes(p, a.itemsize) : a.itemsize;
    for (size_t k = 0; k < n; ++k) {
        const unsigned byte = p[k];
        if (a.dtype == CKPT_VOID || byte < 0x20 || byte >= 0x7F) {
            out += hex_escape(byte);
        } else {
            if (byte == '\'' || byte == '\\') out += '\\';
            out += static_cast<char>(byte);
        }
    }
    return out + "'";
}

Json json_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    return v;
}

Json json_element(const ArrayView& a, uint64_t i) {
    const unsigned char* p = a.item(i);
    switch (kind_of(a.dtype)) {
        case Kind::boolean:
            return *p != 0;
        case Kind::signed_integer:
            return signed_at(a.dtype, p);
        case Kind::unsigned_integer:
            return unsigned_at(a.dtype, p);
        case Kind::real:
            return json_number(real_fn(a.dtype)(p));
        case Kind::complex: {
            const std::complex<double> z = complex_at(a.dtype, p);
            return Json::array({json_number(z.real()), json_number(z.imag())});
        }
        case Kind::text:
            break;
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
