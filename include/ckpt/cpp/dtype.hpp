// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/dtype.hpp — ckpt::Dtype, the element types C++ has none for (bfloat16, float8, fixed-width strings) and dtype_of.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_DTYPE_HPP
#define CKPT_CPP_DTYPE_HPP

#include <ckpt/cpp/error.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace ckpt {

// -------------------------------------------------------------------------------------------------------- dtypes

// The CKPT_* dtypes. Keywords get a trailing underscore (bool_, void_).
enum class Dtype : uint32_t {
    bool_ = CKPT_BOOL,
    int8 = CKPT_INT8,
    int16 = CKPT_INT16,
    int32 = CKPT_INT32,
    int64 = CKPT_INT64,
    uint8 = CKPT_UINT8,
    uint16 = CKPT_UINT16,
    uint32 = CKPT_UINT32,
    uint64 = CKPT_UINT64,
    float16 = CKPT_FLOAT16,
    float32 = CKPT_FLOAT32,
    float64 = CKPT_FLOAT64,
    complex64 = CKPT_COMPLEX64,
    complex128 = CKPT_COMPLEX128,
    unicode = CKPT_UNICODE,
    bytes = CKPT_BYTES,
    bfloat16 = CKPT_BFLOAT16,
    float8_e4m3fn = CKPT_FLOAT8_E4M3FN,
    float8_e5m2 = CKPT_FLOAT8_E5M2,
    float8_e4m3fnuz = CKPT_FLOAT8_E4M3FNUZ,
    float8_e5m2fnuz = CKPT_FLOAT8_E5M2FNUZ,
    float8_e8m0fnu = CKPT_FLOAT8_E8M0FNU,
    void_ = CKPT_VOID,
};

// ckpt_dtype_name ("float32", "bfloat16", …); "unknown" for a value that is not a dtype of the loaded library.
inline const char* dtype_name(Dtype d) noexcept {
    const char* name = ckpt_dtype_name(static_cast<uint32_t>(d));
    return name != nullptr ? name : "unknown";
}
// ckpt_dtype_size: bytes per item; 0 for unicode, bytes and void (their itemsize is per array) and unknown values.
inline size_t dtype_size(Dtype d) noexcept { return ckpt_dtype_size(static_cast<uint32_t>(d)); }
// Unicode, bytes and void: the dtypes whose itemsize is chosen per array.
constexpr bool has_array_itemsize(Dtype d) noexcept {
    return d == Dtype::unicode || d == Dtype::bytes || d == Dtype::void_;
}

// Element types for the dtypes C++ has no type for: the raw bits, as ckpt stores them (ckpt.h). Aggregates, so
// `ckpt::bfloat16{0x3f80}` is 1.0; == compares bits (so NaN == NaN, and +0 != -0). Converting float8 values is
// left to the caller (ml_dtypes' tables); bfloat16, the top half of a float32, converts here.
struct float16 {
    uint16_t bits;
    static constexpr float16 from_bits(uint16_t b) noexcept { return float16{b}; }
    friend constexpr bool operator==(float16 a, float16 b) noexcept { return a.bits == b.bits; }
    friend constexpr bool operator!=(float16 a, float16 b) noexcept { return a.bits != b.bits; }
};
struct bfloat16 {
    uint16_t bits;
    static constexpr bfloat16 from_bits(uint16_t b) noexcept { return bfloat16{b}; }
    // Rounds to nearest, ties to even (as ml_dtypes and torch do); NaN stays a quiet NaN of the same sign.
    static bfloat16 from_float(float f) noexcept {
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
        u += 0x7fffu + ((u >> 16) & 1u);
        return bfloat16{static_cast<uint16_t>(u >> 16)};
    }
    float to_float() const noexcept {
        const uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
    friend constexpr bool operator==(bfloat16 a, bfloat16 b) noexcept { return a.bits == b.bits; }
    friend constexpr bool operator!=(bfloat16 a, bfloat16 b) noexcept { return a.bits != b.bits; }
};
// The float8 types, one per dtype: raw bits, as ml_dtypes lays them out (ckpt converts no values).
template <Dtype D>
struct float8 {
    uint8_t bits;
    static constexpr float8 from_bits(uint8_t b) noexcept { return float8{b}; }
    friend constexpr bool operator==(float8 a, float8 b) noexcept { return a.bits == b.bits; }
    friend constexpr bool operator!=(float8 a, float8 b) noexcept { return a.bits != b.bits; }
};
using float8_e4m3fn = float8<Dtype::float8_e4m3fn>;
using float8_e5m2 = float8<Dtype::float8_e5m2>;
using float8_e4m3fnuz = float8<Dtype::float8_e4m3fnuz>;
using float8_e5m2fnuz = float8<Dtype::float8_e5m2fnuz>;
using float8_e8m0fnu = float8<Dtype::float8_e8m0fnu>;

// Fixed-width items of the per-array dtypes, one item each: numpy '|S<N>' (N bytes, zero-padded), '<U<N>' (N
// UTF-32 code units, zero-padded) and '|V<N>' (N raw bytes). std::vector<ckpt::fixed_bytes<8>> is a '|S8' array.
template <size_t N>
struct fixed_bytes {
    static_assert(N > 0, "numpy has no zero-width strings");
    char chars[N];
    // The text up to the padding (numpy drops trailing NULs the same way).
    std::string_view view() const noexcept {
        size_t n = N;
        while (n > 0 && chars[n - 1] == '\0') --n;
        return std::string_view(chars, n);
    }
    // The text zero-padded; Error(CKPT_EINVAL) if it is longer than N.
    static fixed_bytes from(std::string_view text) {
        if (text.size() > N) throw Error(CKPT_EINVAL, "ckpt::fixed_bytes: '" + std::string(text) + "' is longer than " + std::to_string(N) + " bytes");
        fixed_bytes item{};
        std::memcpy(item.chars, text.data(), text.size());
        return item;
    }
    friend bool operator==(const fixed_bytes& a, const fixed_bytes& b) noexcept { return std::memcmp(a.chars, b.chars, N) == 0; }
    friend bool operator!=(const fixed_bytes& a, const fixed_bytes& b) noexcept { return !(a == b); }
};
template <size_t N>
struct fixed_unicode {
    static_assert(N > 0, "numpy has no zero-width strings");
    char32_t units[N];
    std::u32string_view view() const noexcept {
        size_t n = N;
        while (n > 0 && units[n - 1] == U'\0') --n;
        return std::u32string_view(units, n);
    }
    static fixed_unicode from(std::u32string_view text) {
        if (text.size() > N) throw Error(CKPT_EINVAL, "ckpt::fixed_unicode: the text is longer than " + std::to_string(N) + " code units");
        fixed_unicode item{};
        for (size_t k = 0; k < text.size(); ++k) item.units[k] = text[k];
        return item;
    }
    friend bool operator==(const fixed_unicode& a, const fixed_unicode& b) noexcept {
        return std::memcmp(a.units, b.units, sizeof a.units) == 0;
    }
    friend bool operator!=(const fixed_unicode& a, const fixed_unicode& b) noexcept { return !(a == b); }
};
template <size_t N>
struct raw {
    static_assert(N > 0, "numpy refuses zero-size void items");
    unsigned char bytes[N];
    friend bool operator==(const raw& a, const raw& b) noexcept { return std::memcmp(a.bytes, b.bytes, N) == 0; }
    friend bool operator!=(const raw& a, const raw& b) noexcept { return !(a == b); }
};

// The trait that maps an element type to its dtype: dtype_of<T>::value, or no member for types that have none.
// bool, every integer type except the character types (by size and signedness), float, double,
// std::complex<float/double>, and the structs above. Specialize it for your own trivially copyable types whose
// bytes are a dtype's item (a half type, say): template <> struct ckpt::dtype_of<my_half> { static constexpr
// ckpt::Dtype value = ckpt::Dtype::float16; };
template <typename T, typename = void>
struct dtype_of {};

namespace detail {
template <size_t Size, bool Signed>
struct integer_dtype {};
template <> struct integer_dtype<1, true> { static constexpr Dtype value = Dtype::int8; };
template <> struct integer_dtype<2, true> { static constexpr Dtype value = Dtype::int16; };
template <> struct integer_dtype<4, true> { static constexpr Dtype value = Dtype::int32; };
template <> struct integer_dtype<8, true> { static constexpr Dtype value = Dtype::int64; };
template <> struct integer_dtype<1, false> { static constexpr Dtype value = Dtype::uint8; };
template <> struct integer_dtype<2, false> { static constexpr Dtype value = Dtype::uint16; };
template <> struct integer_dtype<4, false> { static constexpr Dtype value = Dtype::uint32; };
template <> struct integer_dtype<8, false> { static constexpr Dtype value = Dtype::uint64; };

// char is signed on some platforms and unsigned on others, and the other character types are text: none of them
// says which integer dtype is meant (int8_t, uint8_t or fixed_bytes say it).
template <typename T>
inline constexpr bool is_character_v = std::is_same_v<T, char> || std::is_same_v<T, wchar_t> ||
                                       std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t>
#if defined(__cpp_char8_t)
                                       || std::is_same_v<T, char8_t>
#endif
    ;
}  // namespace detail

template <typename T>
struct dtype_of<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !detail::is_character_v<T>>>
    : detail::integer_dtype<sizeof(T), std::is_signed_v<T>> {};
template <> struct dtype_of<bool> { static constexpr Dtype value = Dtype::bool_; };
template <> struct dtype_of<float> { static constexpr Dtype value = Dtype::float32; };
template <> struct dtype_of<double> { static constexpr Dtype value = Dtype::float64; };
template <> struct dtype_of<std::complex<float>> { static constexpr Dtype value = Dtype::complex64; };
template <> struct dtype_of<std::complex<double>> { static constexpr Dtype value = Dtype::complex128; };
template <> struct dtype_of<float16> { static constexpr Dtype value = Dtype::float16; };
template <> struct dtype_of<bfloat16> { static constexpr Dtype value = Dtype::bfloat16; };
template <Dtype D> struct dtype_of<float8<D>> { static constexpr Dtype value = D; };
template <size_t N> struct dtype_of<fixed_bytes<N>> { static constexpr Dtype value = Dtype::bytes; };
template <size_t N> struct dtype_of<fixed_unicode<N>> { static constexpr Dtype value = Dtype::unicode; };
template <size_t N> struct dtype_of<raw<N>> { static constexpr Dtype value = Dtype::void_; };

namespace detail {
template <typename T, typename = void>
struct has_dtype : std::false_type {};
template <typename T>
struct has_dtype<T, std::void_t<decltype(dtype_of<T>::value)>> : std::true_type {};
}  // namespace detail

// True for the element types of arrays: those dtype_of maps (cv-qualifiers ignored).
template <typename T>
inline constexpr bool is_element_v = detail::has_dtype<std::remove_cv_t<T>>::value;
// dtype_of<T>::value.
template <typename T>
inline constexpr Dtype dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

static_assert(sizeof(bool) == 1, "ckpt stores bool as one byte");
static_assert(sizeof(float) == 4 && sizeof(double) == 8, "ckpt needs IEEE float32 and float64");
static_assert(sizeof(std::complex<float>) == 8 && sizeof(std::complex<double>) == 16, "complex is two floats");
static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2 && sizeof(float8_e4m3fn) == 1, "raw-bit types");
static_assert(sizeof(fixed_unicode<3>) == 12 && sizeof(fixed_bytes<3>) == 3 && sizeof(raw<3>) == 3,
              "fixed-width items must have no padding");

}  // namespace ckpt

#endif  // CKPT_CPP_DTYPE_HPP
