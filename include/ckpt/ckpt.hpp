/*
 * ckpt.hpp — the C++ interface to ckpt: RAII handles, exceptions and typed arrays over the C API of ckpt/ckpt.h.
 *
 * Header-only; it uses nothing but ckpt/ckpt.h and the standard library (C++17; std::span under C++20), so a program
 * links libckpt exactly as a C program does. ckpt/ckpt.h stays the reference for what every operation does and for
 * the file format; the comments here say what the C++ layer adds and where it differs.
 *
 * Conventions that hold for everything below:
 *
 *  - Every operation that can fail throws ckpt::Error (a std::runtime_error) carrying the CKPT_* code and the
 *    message of ckpt_error_message(). When an exception thrown by your own code (a Storage method, a save function,
 *    a renamer) caused the failure, its text follows the library's message. Checks made by this header itself
 *    (a wrong element type, a shape that does not fit the data) throw Error too, with the code a C call would give.
 *  - Handles (Vars, Npz, Writer, Manager) are move-only: copying is deleted, moving leaves the source empty
 *    (`!handle`, native() == nullptr) and safe to destroy; calling a method on an empty handle throws
 *    Error(CKPT_EINVAL) or, for getters, behaves as the C getter does for NULL. Destructors never throw.
 *  - Ownership is ckpt.h's: views and string_views returned by getters are borrowed from their handle and live
 *    until it is modified or destroyed; borrowed arrays (Vars::borrow) must outlive every use of the collection.
 *  - A handle is used by one thread at a time; different handles may be used from different threads. Callbacks
 *    (Storage methods, save functions, progress and log functions) may run on ckpt's own threads.
 */
#ifndef CKPT_CKPT_HPP
#define CKPT_CKPT_HPP

#include <ckpt/ckpt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__has_include)
#if __has_include(<version>)
#include <version>
#endif
#endif
#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
#include <span>
#define CKPT_HPP_HAS_SPAN 1
#endif

namespace ckpt {

// ------------------------------------------------------------------------------------------------------- version

// CKPT_VERSION_NUMBER of the headers compiled against; version_number() is the library's loaded at run time.
inline constexpr uint32_t header_version_number = CKPT_VERSION_NUMBER;
inline uint32_t version_number() noexcept { return ckpt_version_number(); }
inline const char* version_string() noexcept { return ckpt_version_string(); }

// -------------------------------------------------------------------------------------------------------- errors

// Static text naming a CKPT_* code ("invalid argument"): ckpt_strerror. (Not "strerror", which would make
// strerror(errno) ambiguous where ckpt is a used namespace.)
inline const char* code_name(int code) noexcept { return ckpt_strerror(code); }

namespace detail {
struct ErrorAccess;
}

// What every failing call throws. code() is the CKPT_* code (negative); what() the detailed message. Throw it
// from your own callbacks to fail the ckpt operation with a chosen code, e.g. Error(CKPT_ENOTFOUND, "no object").
class Error : public std::runtime_error {
public:
    Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
    explicit Error(int code) : Error(code, ckpt_strerror(code)) {}

    int code() const noexcept { return code_; }
    // ckpt_strerror(code()).
    const char* code_name() const noexcept { return ckpt_strerror(code_); }

private:
    friend struct detail::ErrorAccess;
    int code_;
    // How much of what() is the library's own message (ckpt_error_message()); the rest came from a callback.
    size_t library_length_ = 0;
};

namespace detail {

// The first exception a callback of this header caught on this thread during the current ckpt call, so that
// the Error the call then throws can say what it was. Every checked call consumes it.
struct CallbackFailure {
    std::string message;
    size_t library_length = 0;  // the part of message that was itself a ckpt message (see Error)
    bool set = false;
};
inline CallbackFailure& callback_failure() noexcept {
    thread_local CallbackFailure failure;
    return failure;
}
inline void forget_callback_failure() noexcept {
    CallbackFailure& f = callback_failure();
    if (f.set) {
        f.set = false;
        f.message.clear();
    }
}
inline void note_callback_failure(const char* message, size_t library_length = 0) noexcept {
    CallbackFailure& f = callback_failure();
    if (f.set) return;  // the first failure is the cause; what follows (closing, removing) is its consequence
    try {
        f.message = message;
        f.library_length = library_length;
        f.set = true;
    } catch (...) {
        // Out of memory while recording a message: the code still gets through.
    }
}

struct ErrorAccess {
    static size_t library_length(const Error& e) noexcept { return e.library_length_; }
    static Error make(int code, std::string library_message, const std::string& extra) {
        const size_t n = library_message.size();
        if (!extra.empty()) library_message += extra;
        Error e(code, library_message);
        e.library_length_ = n;
        return e;
    }
};

// ": <cause>" for a library message, leaving out the part of the cause the library message already holds
// (a failed Sink::write inside a save function comes back as the save's own error).
inline std::string cause_suffix(const std::string& library_message, const CallbackFailure& f) {
    if (!f.set || f.message.empty()) return {};
    if (f.library_length > 0) {
        const std::string_view inner(f.message.data(), f.library_length);
        if (std::string_view(library_message).find(inner) != std::string_view::npos)
            return f.message.substr(f.library_length);
    }
    return ": " + f.message;
}

// What the methods of one C++ Storage threw, on whatever thread they ran (a background save's, a parallel read's),
// so that the handle reporting the failed call can say it. The library's message names the operation and the path
// ("<path>: storage callback 'write' failed: …"); an entry is used only for a message that names both.
class StorageFailures {
public:
    void record(const char* op, const char* path, const char* message) noexcept {
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            if (entries_.size() >= kKept) entries_.pop_front();
            entries_.push_back(Entry{op, path, message});
        } catch (...) {
            // Out of memory: the code still gets through.
        }
    }
    // ": <what the method threw>" for the failure the library message reports, or "". Drops that entry and the
    // older ones (failures the library went past, such as a temporary it could not remove).
    std::string take(const std::string& library_message) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t k = 0; k < entries_.size(); ++k) {
            const Entry& e = entries_[k];
            if (library_message.find("storage callback '" + e.op + "'") != std::string::npos &&
                library_message.find(e.path) != std::string::npos) {
                std::string suffix = ": " + e.message;
                entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(k) + 1);
                return suffix;
            }
        }
        return {};
    }

private:
    static constexpr size_t kKept = 16;
    struct Entry {
        std::string op, path, message;
    };
    std::mutex mutex_;
    std::deque<Entry> entries_;
};

// Throws the Error of a failed C call: its code, ckpt_error_message(), and what a callback threw — on this thread,
// on another one that recorded it in `elsewhere`, or in a Storage whose failures `log` keeps.
[[noreturn]] inline void throw_error(int rc, const CallbackFailure* elsewhere = nullptr, StorageFailures* log = nullptr) {
    std::string message = ckpt_error_message();
    if (message.empty()) message = ckpt_strerror(rc);
    CallbackFailure& f = callback_failure();
    std::string suffix = cause_suffix(message, f);
    if (suffix.empty() && elsewhere != nullptr) suffix = cause_suffix(message, *elsewhere);
    if (log != nullptr) {
        std::string logged = log->take(message);
        if (suffix.empty()) suffix = std::move(logged);
    }
    forget_callback_failure();
    throw ErrorAccess::make(rc, std::move(message), suffix);
}

inline void check(int rc, StorageFailures* log = nullptr) {
    if (rc != CKPT_OK) throw_error(rc, nullptr, log);
    forget_callback_failure();
}

// The text of the exception being handled. Call only inside a catch.
inline const char* current_exception_text() noexcept {
    try {
        throw;
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        return "an exception not derived from std::exception";
    }
}

// Maps the exception being handled to a code for the C caller, noting its message. Call only inside a catch.
inline int current_exception_code(int fallback) noexcept {
    try {
        throw;
    } catch (const Error& e) {
        const int code = e.code() < 0 ? e.code() : CKPT_ERROR;
        // Not-found and already-exists are answers ckpt asks storages for (is there a lock file? is this temporary
        // name free?), not failures worth reporting.
        if (code != CKPT_ENOTFOUND && code != CKPT_EEXIST) note_callback_failure(e.what(), ErrorAccess::library_length(e));
        return code;
    } catch (const std::bad_alloc&) {
        note_callback_failure("out of memory");
        return CKPT_ENOMEM;
    } catch (const std::exception& e) {
        note_callback_failure(e.what());
        return fallback;
    } catch (...) {
        note_callback_failure("an exception not derived from std::exception");
        return fallback;
    }
}

}  // namespace detail

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

// ---------------------------------------------------------------------------------------------- shapes and views

// Sizes of the dimensions, outermost first; {} is a scalar (0-d).
using Shape = std::vector<int64_t>;

// A typed view of an array's items (C order, flat): a pointer and a count, borrowed from the handle it came from.
// Under C++20 it converts to std::span.
template <typename T>
class ArrayView {
public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    using iterator = T*;

    constexpr ArrayView() noexcept = default;
    constexpr ArrayView(T* data, size_t size) noexcept : data_(data), size_(size) {}

    constexpr T* data() const noexcept { return data_; }
    constexpr size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T& operator[](size_t i) const noexcept { return data_[i]; }
    // operator[] with a bounds check: Error(CKPT_EINVAL) past the end.
    T& at(size_t i) const {
        if (i >= size_) throw Error(CKPT_EINVAL, "ckpt::ArrayView::at: index " + std::to_string(i) + " is past the end (" + std::to_string(size_) + " items)");
        return data_[i];
    }
    constexpr T* begin() const noexcept { return data_; }
    constexpr T* end() const noexcept { return data_ + size_; }
    template <typename U = T, typename = std::enable_if_t<!std::is_const_v<U>>>
    constexpr operator ArrayView<const U>() const noexcept {
        return ArrayView<const U>(data_, size_);
    }
    std::vector<value_type> to_vector() const { return std::vector<value_type>(begin(), end()); }
#if defined(CKPT_HPP_HAS_SPAN)
    constexpr operator std::span<T>() const noexcept { return std::span<T>(data_, size_); }
#endif

private:
    T* data_ = nullptr;
    size_t size_ = 0;
};

namespace detail {

// The number of items of a shape; nullopt when a dimension is negative or the product overflows (ckpt then says
// what is wrong with it).
inline std::optional<size_t> item_count(const Shape& shape) noexcept {
    size_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return std::nullopt;
        const auto u = static_cast<uint64_t>(d);
        if (u > std::numeric_limits<size_t>::max()) return std::nullopt;
        if (u != 0 && n > std::numeric_limits<size_t>::max() / static_cast<size_t>(u)) return std::nullopt;
        n *= static_cast<size_t>(u);
    }
    return n;
}

// "(2, 3)", "(5,)", "()" as numpy prints shapes.
inline std::string shape_string(const Shape& shape) {
    std::string s = "(";
    for (size_t k = 0; k < shape.size(); ++k) {
        if (k > 0) s += ", ";
        s += std::to_string(shape[k]);
    }
    return s + (shape.size() == 1 ? ",)" : ")");
}

inline std::string dtype_string(Dtype d, size_t itemsize) {
    std::string s = dtype_name(d);
    if (has_array_itemsize(d)) s += " of " + std::to_string(itemsize) + "-byte items";
    return s;
}

// A bool is one byte 0 or 1, but ckpt hands files' '|b1' bytes over as they are: any other byte read as a bool
// would be undefined behaviour, so typed bool access checks them first.
inline void require_bools(const void* data, size_t n, const char* name) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t k = 0; k < n; ++k)
        if (bytes[k] > 1)
            throw Error(CKPT_EFORMAT, std::string("'") + name + "': bool item " + std::to_string(k) + " is the byte " +
                                          std::to_string(bytes[k]) + ", not 0 or 1");
}

inline uint32_t ndim_of(const Shape& shape, const char* where) {
    if (shape.size() > std::numeric_limits<uint32_t>::max())
        throw Error(CKPT_EINVAL, std::string(where) + ": " + std::to_string(shape.size()) + " dimensions");
    return static_cast<uint32_t>(shape.size());
}

// Contiguous ranges of elements: C arrays of any rank (their extents are the shape), and whatever std::data and
// std::size accept — std::vector, std::array, std::span, std::initializer_list. std::vector<bool> has no data()
// and is not one.
template <typename C, typename = void>
struct range_traits {
    static constexpr bool value = false;
};
template <typename C>
struct range_traits<C, std::enable_if_t<std::is_array_v<C>>> {
    using element = std::remove_all_extents_t<C>;
    static constexpr bool value = is_element_v<element>;
    static void* data(C& c) noexcept { return const_cast<void*>(static_cast<const volatile void*>(&c)); }
    static size_t size(C&) noexcept { return sizeof(C) / sizeof(element); }
    static Shape shape(C&) {
        Shape s;
        extents<C>(s);
        return s;
    }
    template <typename A>
    static void extents(Shape& s) {
        if constexpr (std::is_array_v<A>) {
            s.push_back(static_cast<int64_t>(std::extent_v<A>));
            extents<std::remove_extent_t<A>>(s);
        }
    }
};
template <typename C>
struct range_traits<C, std::enable_if_t<!std::is_array_v<C> &&
                                        std::is_pointer_v<decltype(std::data(std::declval<C&>()))> &&
                                        std::is_convertible_v<decltype(std::size(std::declval<C&>())), size_t>>> {
    using element = std::remove_pointer_t<decltype(std::data(std::declval<C&>()))>;
    static constexpr bool value = is_element_v<element>;
    static void* data(C& c) noexcept {
        return const_cast<void*>(static_cast<const volatile void*>(std::data(c)));
    }
    static size_t size(C& c) noexcept { return static_cast<size_t>(std::size(c)); }
    static Shape shape(C& c) { return Shape{static_cast<int64_t>(std::size(c))}; }
};

template <typename C>
inline constexpr bool is_range_v = range_traits<std::remove_reference_t<C>>::value;

}  // namespace detail

// ------------------------------------------------------------------------------------------------------- storage

namespace detail {
class StorageRef;
class NativeStorage;
}  // namespace detail

// Where files live: a C++ face of ckpt_storage_ops. Subclass it and override the methods to keep checkpoints in an
// object store, HDFS, memory or behind an encryption layer; pass it as std::shared_ptr<Storage> in the options'
// `storage` fields. ckpt reaches it through the callback table (ckpt_storage_new); every callback catches what
// the method throws and hands ckpt a code: an Error's own code, CKPT_ENOMEM for std::bad_alloc, and CKPT_EIO for
// any other exception; its what() follows ckpt's message in the Error of the call that failed, whichever thread the
// method ran on. Throw Error(CKPT_ENOTFOUND) for a missing file or directory and Error(CKPT_EEXIST) from create when
// the path exists: ckpt relies on both (and they are answers, not failures: their messages are not kept).
//
// Methods may run on a writer's or manager's background thread, concurrently with calls from other threads, so they
// must be thread-safe for different files. The storage lives as long as anything uses it: each user (an Npz, a
// Manager, a Writer, a running save) holds a reference to it.
class Storage {
public:
    // A file being written, as create and open_append return it. ckpt writes it front to back, syncs it, then
    // calls close() exactly once — also after a failure, when the result is ignored — and destroys it.
    class OutputFile {
    public:
        virtual ~OutputFile() = default;
        // Appends size bytes.
        virtual void write(const void* data, size_t size) = 0;
        // Makes the bytes durable. A failed sync is never retried: ckpt discards the file.
        virtual void sync() = 0;
        // Releases the file (commit an upload here); the destructor then runs.
        virtual void close() {}
    };
    // A file opened for reading. ckpt reads it at arbitrary offsets, from one thread at a time, and destroys it to
    // close it (close_read).
    class InputFile {
    public:
        virtual ~InputFile() = default;
        // The file's size in bytes.
        virtual uint64_t size() const = 0;
        // Reads up to size bytes at offset into dst and returns how many; fewer than size only at the end.
        virtual size_t read_at(uint64_t offset, void* dst, size_t size) = 0;
    };

    virtual ~Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    // The storage ckpt keeps in this process's memory (ckpt_storage_new_memory): thread-safe, for tests and for
    // programs that want checkpoint bytes without a filesystem. Make directories before files go in them ("" and
    // "." exist). It is used through ckpt's calls; its methods here throw Error(CKPT_EUNSUPPORTED).
    static std::shared_ptr<Storage> memory();
    // Takes over the caller's reference to a storage made through the C API (ckpt_storage_new, _new_memory); as
    // memory(), it is used through ckpt's calls only.
    static std::shared_ptr<Storage> adopt(ckpt_storage* storage);

    // The operations of ckpt_storage_ops, by the same names. Paths are those ckpt chooses ("dir/name").
    // Creates dir and its missing parents; nothing to do if it exists.
    virtual void make_dirs(const std::string& dir) = 0;
    // Creates a new empty file; Error(CKPT_EEXIST) if anything is at path.
    virtual std::unique_ptr<OutputFile> create(const std::string& path) = 0;
    // Opens path for appending, creating it if missing (Writer saves with SaveOptions::append only). By default
    // appending is unsupported (CKPT_EUNSUPPORTED).
    virtual std::unique_ptr<OutputFile> open_append(const std::string& path);
    // Replaces `to` with `from` atomically.
    virtual void rename(const std::string& from, const std::string& to) = 0;
    // Makes renames and creations in dir durable; by default nothing (a medium without directories).
    virtual void sync_dir(const std::string& dir);
    // Removes a file.
    virtual void remove(const std::string& path) = 0;
    // The names (not paths) of the files in dir, subdirectories left out.
    virtual std::vector<std::string> list(const std::string& dir) = 0;
    // Opens a file for reading.
    virtual std::unique_ptr<InputFile> open_read(const std::string& path) = 0;
    // The bytes a new file in dir may still take, for a Manager's disk check before each save (a save needing
    // more fails with CKPT_EIO, naming both) and its low-space warning; nullopt (the default) when the medium
    // cannot tell: no check is made.
    virtual std::optional<uint64_t> free_space(const std::string& dir);

    // Directories, for sharded checkpoints (a directory of shards and a manifest per step; ckpt_storage_ops
    // version 3). What directories() returns, once, when the storage is handed to ckpt, says which of the three
    // methods below ckpt calls:
    //   none       (the default) files only: sharded saves fail with CKPT_EUNSUPPORTED
    //   prefixes   listed and removed, never renamed (an object store): the manifest written last commits a step
    //   renamable  also renamed atomically: a step's staging directory is renamed into place
    enum class Directories { none, prefixes, renamable };
    virtual Directories directories() const { return Directories::none; }
    // The names (not paths) of the subdirectories of dir.
    virtual std::vector<std::string> list_dirs(const std::string& dir);
    // Removes the empty directory dir; by default nothing (directories that are only prefixes of names).
    virtual void remove_dir(const std::string& dir);
    // Renames directory `from` to `to` (which does not exist) atomically; called for Directories::renamable only.
    virtual void rename_dir(const std::string& from, const std::string& to);

protected:
    Storage() noexcept = default;

private:
    friend class detail::StorageRef;
    friend class detail::NativeStorage;
    ckpt_storage* native_ = nullptr;  // a storage of the library's own (memory, adopted): the caller's reference
};

inline std::unique_ptr<Storage::OutputFile> Storage::open_append(const std::string& path) {
    throw Error(CKPT_EUNSUPPORTED, path + ": this storage cannot append");
}
inline void Storage::sync_dir(const std::string&) {}
inline std::optional<uint64_t> Storage::free_space(const std::string&) { return std::nullopt; }
inline std::vector<std::string> Storage::list_dirs(const std::string& dir) {
    throw Error(CKPT_EUNSUPPORTED, dir + ": this storage has no directories");
}
inline void Storage::remove_dir(const std::string&) {}
inline void Storage::rename_dir(const std::string& from, const std::string& to) {
    throw Error(CKPT_EUNSUPPORTED, to + ": this storage cannot rename directories (from " + from + ")");
}

// How the processes of one job that save a sharded checkpoint together coordinate: a C++ face of ckpt_comm_ops.
// Subclass it over the job's transport (MPI, NCCL, Gloo) and make a CommHandle of it; or adopt libckpt_mpi's
// (CommHandle::adopt(ckpt_mpi_comm_new's result)). Every method but rank and size is collective: ckpt makes the
// same calls in the same order on every rank, from the thread that called it, with small buffers only. What a
// method throws fails the ckpt call (with an Error's own code, else CKPT_ERROR).
class Comm {
public:
    virtual ~Comm() = default;
    virtual int32_t rank() const = 0;
    virtual int32_t size() const = 0;
    virtual void barrier() = 0;
    // The minimum, maximum or sum (op: CKPT_REDUCE_*) of every rank's value.
    virtual int64_t all_reduce(int64_t value, uint32_t op) = 0;
    // Replaces buf[0..size) on every rank with rank root's bytes.
    virtual void broadcast(void* buf, size_t size, int32_t root) = 0;
    // recv[r*size .. (r+1)*size) gets rank r's send[0..size).
    virtual void all_gather(const void* send, size_t size, void* recv) = 0;
};

// A reference to a ckpt communicator, for ManagerOptions::comm; copies share it, and managers keep their own.
class CommHandle {
public:
    explicit CommHandle(std::shared_ptr<Comm> comm) {
        if (!comm) throw Error(CKPT_EINVAL, "ckpt::CommHandle: no communicator");
        auto* payload = new std::shared_ptr<Comm>(std::move(comm));
        ckpt_comm_ops ops{CKPT_COMM_OPS_VERSION, payload, &Callbacks::rank, &Callbacks::size, &Callbacks::barrier,
                          &Callbacks::all_reduce, &Callbacks::broadcast, &Callbacks::all_gather, &Callbacks::destroy};
        ckpt_comm* c = nullptr;
        const int rc = ckpt_comm_new(&c, &ops);
        if (rc != CKPT_OK) {
            delete payload;  // on failure the library does not call destroy
            detail::check(rc);
        }
        c_.reset(c, [](ckpt_comm* x) { ckpt_comm_free(x); });
    }
    // Takes over the caller's reference to a communicator made through the C API (ckpt_comm_new,
    // ckpt_mpi_comm_new).
    static CommHandle adopt(ckpt_comm* comm) {
        if (comm == nullptr) throw Error(CKPT_EINVAL, "ckpt::CommHandle::adopt: NULL communicator");
        CommHandle h;
        h.c_.reset(comm, [](ckpt_comm* x) { ckpt_comm_free(x); });
        return h;
    }
    int32_t rank() const noexcept { return ckpt_comm_rank(c_.get()); }
    int32_t size() const noexcept { return ckpt_comm_size(c_.get()); }
    ckpt_comm* native() const noexcept { return c_.get(); }

private:
    CommHandle() = default;
    struct Callbacks {
        static Comm& self(void* p) noexcept { return **static_cast<std::shared_ptr<Comm>*>(p); }
        template <typename F>
        static int run(F&& f) noexcept {
            try {
                f();
                return CKPT_OK;
            } catch (...) {
                return detail::current_exception_code(CKPT_ERROR);
            }
        }
        static int rank(void* p, int32_t* out) noexcept { return run([&] { *out = self(p).rank(); }); }
        static int size(void* p, int32_t* out) noexcept { return run([&] { *out = self(p).size(); }); }
        static int barrier(void* p) noexcept { return run([&] { self(p).barrier(); }); }
        static int all_reduce(void* p, int64_t* value, uint32_t op) noexcept {
            return run([&] { *value = self(p).all_reduce(*value, op); });
        }
        static int broadcast(void* p, void* buf, size_t size, int32_t root) noexcept {
            return run([&] { self(p).broadcast(buf, size, root); });
        }
        static int all_gather(void* p, const void* send, size_t size, void* recv) noexcept {
            return run([&] { self(p).all_gather(send, size, recv); });
        }
        static void destroy(void* p) noexcept { delete static_cast<std::shared_ptr<Comm>*>(p); }
    };
    std::shared_ptr<ckpt_comm> c_;
};

namespace detail {

// A storage of the library's own. The C++ methods have nothing to call: ckpt.h gives no access to a storage's
// operations, only to the storage as a whole.
class NativeStorage final : public Storage {
public:
    explicit NativeStorage(ckpt_storage* s) noexcept { native_ = s; }
    ~NativeStorage() override { ckpt_storage_free(native_); }

    void make_dirs(const std::string&) override { unsupported(); }
    std::unique_ptr<OutputFile> create(const std::string&) override { unsupported(); }
    std::unique_ptr<OutputFile> open_append(const std::string&) override { unsupported(); }
    void rename(const std::string&, const std::string&) override { unsupported(); }
    void sync_dir(const std::string&) override { unsupported(); }
    void remove(const std::string&) override { unsupported(); }
    std::vector<std::string> list(const std::string&) override { unsupported(); }
    std::unique_ptr<InputFile> open_read(const std::string&) override { unsupported(); }

private:
    [[noreturn]] static void unsupported() {
        throw Error(CKPT_EUNSUPPORTED, "ckpt::Storage: this storage is used through ckpt's calls only");
    }
};

// The callback table over a C++ Storage. The payload holds the storage (its destroy callback deletes the payload,
// so the storage lives exactly as long as the library uses it) and the log of what its methods threw. Files travel
// as boxes that remember their paths, for that log.
struct StorageCallbacks {
    struct Payload {
        std::shared_ptr<Storage> storage;
        std::shared_ptr<StorageFailures> failures;
    };
    struct Output {
        std::unique_ptr<Storage::OutputFile> file;
        std::string path;
    };
    struct Input {
        std::unique_ptr<Storage::InputFile> file;
        std::string path;
    };
    static Payload& payload(void* p) noexcept { return *static_cast<Payload*>(p); }
    static Storage& self(void* p) noexcept { return *payload(p).storage; }

    // Runs a method for the library: CKPT_OK, or the code of what it threw, which is also logged.
    template <typename F>
    static int run(void* p, const char* op, const char* path, F&& f) noexcept {
        try {
            f();
            return CKPT_OK;
        } catch (...) {
            const int code = current_exception_code(CKPT_EIO);
            if (code != CKPT_ENOTFOUND && code != CKPT_EEXIST)
                payload(p).failures->record(op, path, current_exception_text());
            return code;
        }
    }

    static int make_dirs(void* p, const char* dir) noexcept {
        return run(p, "make_dirs", dir, [&] { self(p).make_dirs(dir); });
    }
    static int create(void* p, const char* path, void** file) noexcept {
        return run(p, "create", path, [&] { *file = new Output{checked(self(p).create(path), "create"), path}; });
    }
    static int open_append(void* p, const char* path, void** file) noexcept {
        return run(p, "open_append", path,
                   [&] { *file = new Output{checked(self(p).open_append(path), "open_append"), path}; });
    }
    static int write(void* p, void* file, const void* data, size_t size) noexcept {
        auto* out = static_cast<Output*>(file);
        return run(p, "write", out->path.c_str(), [&] { out->file->write(data, size); });
    }
    static int sync(void* p, void* file) noexcept {
        auto* out = static_cast<Output*>(file);
        return run(p, "sync", out->path.c_str(), [&] { out->file->sync(); });
    }
    static int close(void* p, void* file) noexcept {
        std::unique_ptr<Output> out(static_cast<Output*>(file));
        return run(p, "close", out->path.c_str(), [&] { out->file->close(); });
    }
    static int rename(void* p, const char* from, const char* to) noexcept {
        return run(p, "rename", to, [&] { self(p).rename(from, to); });
    }
    static int sync_dir(void* p, const char* dir) noexcept {
        return run(p, "sync_dir", dir, [&] { self(p).sync_dir(dir); });
    }
    static int remove(void* p, const char* path) noexcept {
        return run(p, "remove", path, [&] { self(p).remove(path); });
    }
    static int names(void* p, const char* op, const char* dir, ckpt_list_entry_fn entry, void* ctx,
                     std::vector<std::string> (Storage::*method)(const std::string&)) noexcept {
        int rc = CKPT_OK;
        const int thrown = run(p, op, dir, [&] {
            for (const std::string& name : (self(p).*method)(dir)) {
                rc = entry(name.c_str(), ctx);
                if (rc != 0) return;
            }
        });
        return thrown != CKPT_OK ? thrown : rc;
    }
    static int list(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) noexcept {
        return names(p, "list", dir, entry, ctx, &Storage::list);
    }
    static int list_dirs(void* p, const char* dir, ckpt_list_entry_fn entry, void* ctx) noexcept {
        return names(p, "list_dirs", dir, entry, ctx, &Storage::list_dirs);
    }
    static int remove_dir(void* p, const char* dir) noexcept {
        return run(p, "remove_dir", dir, [&] { self(p).remove_dir(dir); });
    }
    static int rename_dir(void* p, const char* from, const char* to) noexcept {
        return run(p, "rename_dir", to, [&] { self(p).rename_dir(from, to); });
    }
    static int open_read(void* p, const char* path, void** file, uint64_t* size) noexcept {
        return run(p, "open_read", path, [&] {
            auto in = std::make_unique<Input>(Input{checked(self(p).open_read(path), "open_read"), path});
            *size = in->file->size();
            *file = in.release();
        });
    }
    static int read_at(void* p, void* file, uint64_t offset, void* dst, size_t size, size_t* got) noexcept {
        auto* in = static_cast<Input*>(file);
        return run(p, "read_at", in->path.c_str(), [&] { *got = in->file->read_at(offset, dst, size); });
    }
    static void close_read(void*, void* file) noexcept { delete static_cast<Input*>(file); }
    static int free_space(void* p, const char* dir, uint64_t* bytes) noexcept {
        std::optional<uint64_t> free;
        const int rc = run(p, "free_space", dir, [&] { free = self(p).free_space(dir); });
        if (rc != CKPT_OK) return rc;
        if (!free) return CKPT_EUNSUPPORTED;
        *bytes = *free;
        return CKPT_OK;
    }
    static void destroy(void* p) noexcept { delete static_cast<Payload*>(p); }

    template <typename P>
    static P checked(P file, const char* op) {
        if (!file) throw Error(CKPT_ERROR, std::string("ckpt::Storage::") + op + " returned no file");
        return file;
    }
};

// A ckpt_storage for one use (an options struct): the library's own one, borrowed, or a new callback table over a
// C++ Storage, whose reference this holds until the user of the options has taken its own.
class StorageRef {
public:
    StorageRef() noexcept = default;
    explicit StorageRef(const std::shared_ptr<Storage>& storage) {
        if (!storage) return;
        if (storage->native_ != nullptr) {
            ptr_ = storage->native_;
            return;
        }
        ckpt_storage_ops ops;
        std::memset(&ops, 0, sizeof ops);
        ops.version = CKPT_STORAGE_OPS_VERSION;
        failures_ = std::make_shared<StorageFailures>();
        auto payload = std::make_unique<StorageCallbacks::Payload>(StorageCallbacks::Payload{storage, failures_});
        ops.payload = payload.get();
        ops.make_dirs = &StorageCallbacks::make_dirs;
        ops.create = &StorageCallbacks::create;
        ops.open_append = &StorageCallbacks::open_append;
        ops.write = &StorageCallbacks::write;
        ops.sync = &StorageCallbacks::sync;
        ops.close = &StorageCallbacks::close;
        ops.rename = &StorageCallbacks::rename;
        ops.sync_dir = &StorageCallbacks::sync_dir;
        ops.remove = &StorageCallbacks::remove;
        ops.list = &StorageCallbacks::list;
        ops.open_read = &StorageCallbacks::open_read;
        ops.read_at = &StorageCallbacks::read_at;
        ops.close_read = &StorageCallbacks::close_read;
        ops.destroy = &StorageCallbacks::destroy;
        ops.free_space = &StorageCallbacks::free_space;
        const Storage::Directories dirs = storage->directories();
        if (dirs != Storage::Directories::none) {
            ops.list_dirs = &StorageCallbacks::list_dirs;
            ops.remove_dir = &StorageCallbacks::remove_dir;
        }
        if (dirs == Storage::Directories::renamable) ops.rename_dir = &StorageCallbacks::rename_dir;
        check(ckpt_storage_new(&ptr_, &ops));
        payload.release();  // the storage's destroy callback deletes it now
        owned_ = true;
    }
    ~StorageRef() {
        if (owned_) ckpt_storage_free(ptr_);
    }
    StorageRef(const StorageRef&) = delete;
    StorageRef& operator=(const StorageRef&) = delete;
    ckpt_storage* get() const noexcept { return ptr_; }
    // What the C++ storage's methods threw (null for the library's own storages and for none).
    const std::shared_ptr<StorageFailures>& failures() const noexcept { return failures_; }

private:
    ckpt_storage* ptr_ = nullptr;
    bool owned_ = false;
    std::shared_ptr<StorageFailures> failures_;
};

}  // namespace detail

inline std::shared_ptr<Storage> Storage::adopt(ckpt_storage* storage) {
    if (storage == nullptr) throw Error(CKPT_EINVAL, "ckpt::Storage::adopt: storage is NULL");
    try {
        return std::make_shared<detail::NativeStorage>(storage);
    } catch (...) {
        ckpt_storage_free(storage);
        throw;
    }
}

inline std::shared_ptr<Storage> Storage::memory() {
    ckpt_storage* s = nullptr;
    detail::check(ckpt_storage_new_memory(&s));
    return adopt(s);
}

// --------------------------------------------------------------------------------------------------- npz options

// CKPT_LAYOUT_*: how arrays are named inside the file.
enum class Layout : uint32_t {
    automatic = CKPT_LAYOUT_AUTO,  // reading: detect; writing: plain
    plain = CKPT_LAYOUT_PLAIN,     // "<name>.npy" per variable, as np.savez(**vars)
    objax = CKPT_LAYOUT_OBJAX,     // "names.npy" + "0.npy", "1.npy", … as objax.io
};
enum class Compression : uint32_t {
    store = CKPT_STORE,
    deflate = CKPT_DEFLATE,
};

// ckpt_npz_options. Zero values keep ckpt's defaults.
struct NpzOptions {
    Layout layout = Layout::automatic;
    Compression compression = Compression::store;  // writing only
    int32_t level = 0;                             // deflate level 1..9; 0 = zlib's default
    // Restores: the name to look each on-disk name up by (objax's renamer); return the argument to keep it.
    // Throw Error(code) to abort the restore with that code. Called from the restoring thread.
    std::function<std::string(const std::string& name_on_disk)> rename;
    uint64_t max_header_bytes = 0;  // npy header limit per member; 0 = 10000
    // Bytes of array data done out of the total, never decreasing. Called from a thread doing the work (a large
    // read uses several), never from two at once; it must not throw (what it throws is ignored).
    std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
    // Where files are read and written; null = the local filesystem. Managers and writers have their own
    // `storage` option and refuse a different one here (ckpt.h: the C struct's field is ignored there).
    std::shared_ptr<Storage> storage;
    uint64_t max_members = 0;      // zip members per file; 0 = 16777216
    uint64_t max_total_bytes = 0;  // array bytes per file, all arrays together; 0 = no limit
    // Restores (CKPT_NPZ_PARTIAL): a variable the file does not have is left untouched instead of failing the
    // restore; Vars::restored tells which were filled. One found with another dtype or shape still fails it.
    bool partial = false;
    // Opening: Npz::map skips the CRC-32 check of mapped arrays (CKPT_NPZ_MAP_UNVERIFIED), trading integrity for
    // latency — for files verified already.
    bool map_unverified = false;
    // Opening: the mapping is copy-on-write (CKPT_NPZ_MAP_WRITABLE), so the arrays of Npz::map_vars may be written.
    bool map_writable = false;
};

namespace detail {

// What C options point to for the callbacks: copies of the functions, alive as long as the C side may call them.
struct NpzCallbacks {
    std::function<std::string(const std::string&)> rename;
    std::function<void(uint64_t, uint64_t)> progress;
    // The renamer's result for a name whose new name did not fit the buffer: the library asks again with a
    // larger one, and the user's function runs once per name.
    std::string pending_name, pending_result;
    bool pending = false;

    explicit NpzCallbacks(const NpzOptions& o) : rename(o.rename), progress(o.progress) {}

    static int rename_fn(const char* name, char* buf, size_t size, void* payload) noexcept {
        auto& cb = *static_cast<NpzCallbacks*>(payload);
        try {
            if (!(cb.pending && cb.pending_name == name)) {
                cb.pending = false;
                cb.pending_result = cb.rename(std::string(name));
                cb.pending_name = name;
            }
            cb.pending = false;
            const std::string& result = cb.pending_result;
            if (result == name) return 0;
            if (result.empty()) throw Error(CKPT_EINVAL, std::string("the renamer gave an empty name for '") + name + "'");
            if (result.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
                throw Error(CKPT_EINVAL, "the renamer gave a name too long for ckpt");
            if (result.size() > size) {
                cb.pending = true;
                return static_cast<int>(result.size());
            }
            std::memcpy(buf, result.data(), result.size());
            return static_cast<int>(result.size());
        } catch (...) {
            cb.pending = false;
            return current_exception_code(CKPT_ERROR);
        }
    }
    static void progress_fn(uint64_t done, uint64_t total, void* payload) noexcept {
        try {
            static_cast<NpzCallbacks*>(payload)->progress(done, total);
        } catch (...) {
            // A progress report cannot fail the work it reports on.
        }
    }
};

// ckpt_npz_options for one use, from NpzOptions: callbacks pointed at `cb` (which must outlive the C users of the
// struct), and the storage held by `storage` unless the caller says the struct's storage is ignored.
struct CNpzOptions {
    ckpt_npz_options c;
    StorageRef storage;

    CNpzOptions(const NpzOptions& o, NpzCallbacks* cb, bool with_storage)
        : storage(with_storage ? o.storage : std::shared_ptr<Storage>()) {
        check(ckpt_npz_options_init(&c, CKPT_NPZ_OPTIONS_VERSION));
        c.layout = static_cast<uint32_t>(o.layout);
        c.compression = static_cast<uint32_t>(o.compression);
        c.level = o.level;
        c.max_header_bytes = o.max_header_bytes;
        c.max_members = o.max_members;
        c.max_total_bytes = o.max_total_bytes;
        c.flags = o.partial ? CKPT_NPZ_PARTIAL : 0u;
        if (o.map_unverified) c.flags |= CKPT_NPZ_MAP_UNVERIFIED;
        if (o.map_writable) c.flags |= CKPT_NPZ_MAP_WRITABLE;
        c.storage = storage.get();
        if (cb != nullptr && cb->rename) {
            c.rename = &NpzCallbacks::rename_fn;
            c.rename_payload = cb;
        }
        if (cb != nullptr && cb->progress) {
            c.progress = &NpzCallbacks::progress_fn;
            c.progress_payload = cb;
        }
    }
};

// Managers and writers take the storage from their own options (ckpt.h ignores the npz struct's there): a
// different one in the npz options would silently not be used.
inline void refuse_npz_storage(const NpzOptions& npz, const std::shared_ptr<Storage>& storage, const char* where) {
    if (npz.storage && npz.storage != storage)
        throw Error(CKPT_EINVAL, std::string(where) + ": the npz options name a storage; give it as the storage option");
}

}  // namespace detail

// ---------------------------------------------------------------------------------------- variable collections

// How Vars::add keeps the caller's bytes: CKPT_COPY or CKPT_BORROW.
enum class Ownership : uint32_t {
    copy = CKPT_COPY,
    borrow = CKPT_BORROW,
};

// A ckpt_vars: an ordered collection of named arrays, and string metadata about them. Names are unique and
// non-empty, other than "__ckpt_metadata__"; insertion order is the save order.
//
// add() copies the caller's data; borrow() keeps a pointer to it — no copy is made, the data must outlive every use
// of the collection (a std::vector must not reallocate), and restores write straight back into it. Element types
// say the dtype (dtype_of); a range's natural shape is its length (C arrays: their extents) unless a shape is given,
// whose item count must then equal the range's.
class Vars {
public:
    // A new empty collection.
    Vars() { detail::check(ckpt_vars_new(&v_)); }
    // Takes ownership of a collection made through the C API (it is freed with this object).
    explicit Vars(ckpt_vars* owned) noexcept : v_(owned) {}
    ~Vars() { ckpt_vars_free(v_); }
    Vars(Vars&& other) noexcept : v_(std::exchange(other.v_, nullptr)) {}
    Vars& operator=(Vars&& other) noexcept {
        if (this != &other) {
            ckpt_vars_free(v_);
            v_ = std::exchange(other.v_, nullptr);
        }
        return *this;
    }
    Vars(const Vars&) = delete;
    Vars& operator=(const Vars&) = delete;

    // The C handle (borrowed), for calls into the C API; nullptr once moved from.
    ckpt_vars* native() const noexcept { return v_; }
    // Gives up ownership of the C handle (the caller frees it with ckpt_vars_free); the object is empty after.
    ckpt_vars* release() noexcept { return std::exchange(v_, nullptr); }
    explicit operator bool() const noexcept { return v_ != nullptr; }

    // ---- adding arrays

    // A copy of `count(shape)` items at data.
    template <typename T, typename = std::enable_if_t<is_element_v<T>>>
    void add(const std::string& name, const T* data, const Shape& shape) {
        add_typed<T>(name, shape, data, Ownership::copy);
    }
    // A copy of a range (std::vector, std::array, C array, std::span, …), 1-d or of its extents.
    template <typename C, typename = std::enable_if_t<detail::is_range_v<const C>>>
    void add(const std::string& name, const C& values) {
        using R = detail::range_traits<const C>;
        add_typed<typename R::element>(name, R::shape(values), R::data(values), Ownership::copy);
    }
    // A copy of a range, as an array of `shape`.
    template <typename C, typename = std::enable_if_t<detail::is_range_v<const C>>>
    void add(const std::string& name, const C& values, const Shape& shape) {
        using R = detail::range_traits<const C>;
        require_items(name, shape, R::size(values));
        add_typed<typename R::element>(name, shape, R::data(values), Ownership::copy);
    }
    // A copy of listed values, 1-d or of `shape`: vars.add<float>("w", {1, 2, 3, 4}, {2, 2}).
    template <typename T, typename = std::enable_if_t<is_element_v<T>>>
    void add(const std::string& name, std::initializer_list<T> values) {
        add_typed<T>(name, Shape{static_cast<int64_t>(values.size())}, values.begin(), Ownership::copy);
    }
    template <typename T, typename = std::enable_if_t<is_element_v<T>>>
    void add(const std::string& name, std::initializer_list<T> values, const Shape& shape) {
        require_items(name, shape, values.size());
        add_typed<T>(name, shape, values.begin(), Ownership::copy);
    }
    // A scalar (0-d array), copied.
    template <typename T, typename = std::enable_if_t<is_element_v<T>>, typename = void>
    void add(const std::string& name, const T& value) {
        add_typed<T>(name, Shape{}, &value, Ownership::copy);
    }
    // A zero-filled array, ready to be restored into.
    template <typename T, typename = std::enable_if_t<is_element_v<T>>>
    void add_zeros(const std::string& name, const Shape& shape) {
        add_typed<T>(name, shape, nullptr, Ownership::copy);
    }
    // A zero-filled array of a dtype known at run time (itemsize only for unicode, bytes and void).
    void add_zeros(const std::string& name, Dtype dtype, const Shape& shape, size_t itemsize = 0) {
        add(name, dtype, shape, nullptr, Ownership::copy, itemsize);
    }

    // Borrows `count(shape)` items at data.
    template <typename T, typename = std::enable_if_t<is_element_v<T>>>
    void borrow(const std::string& name, T* data, const Shape& shape) {
        static_assert(!std::is_const_v<T>, "restores write into borrowed data: it must be writable");
        add_typed<T>(name, shape, data, Ownership::borrow);
    }
    // Borrows a range (not a temporary: it must outlive the collection), 1-d or of its extents.
    template <typename C, typename = std::enable_if_t<detail::is_range_v<C>>>
    void borrow(const std::string& name, C& values) {
        using R = detail::range_traits<C>;
        static_assert(!std::is_const_v<typename R::element>, "restores write into borrowed data: it must be writable");
        add_typed<typename R::element>(name, R::shape(values), R::data(values), Ownership::borrow);
    }
    template <typename C, typename = std::enable_if_t<detail::is_range_v<C>>>
    void borrow(const std::string& name, C& values, const Shape& shape) {
        using R = detail::range_traits<C>;
        static_assert(!std::is_const_v<typename R::element>, "restores write into borrowed data: it must be writable");
        require_items(name, shape, R::size(values));
        add_typed<typename R::element>(name, shape, R::data(values), Ownership::borrow);
    }
    // Borrows a scalar (0-d array).
    template <typename T, typename = std::enable_if_t<is_element_v<T>>, typename = void>
    void borrow(const std::string& name, T& value) {
        static_assert(!std::is_const_v<T>, "restores write into borrowed data: it must be writable");
        add_typed<T>(name, Shape{}, &value, Ownership::borrow);
    }
    template <typename C>
    void borrow(const std::string&, const C&&) = delete;  // a temporary would be gone before the collection is used

    // An array of a dtype known at run time: ckpt_vars_add for numeric dtypes, ckpt_vars_add_strings (with
    // itemsize) for unicode, bytes and void. data may be nullptr with Ownership::copy: zero-filled.
    void add(const std::string& name, Dtype dtype, const Shape& shape, const void* data, Ownership ownership,
             size_t itemsize = 0) {
        const uint32_t ndim = detail::ndim_of(shape, "ckpt::Vars::add");
        if (has_array_itemsize(dtype)) {
            detail::check(ckpt_vars_add_strings(v_, name.c_str(), static_cast<uint32_t>(dtype), itemsize, ndim,
                                                shape.data(), data, static_cast<uint32_t>(ownership)));
        } else {
            detail::check(ckpt_vars_add(v_, name.c_str(), static_cast<uint32_t>(dtype), ndim, shape.data(), data,
                                        static_cast<uint32_t>(ownership)));
        }
    }
    // Strings as a numpy '|S<n>' array (n = the longest, at least 1), copied; 1-d unless a shape is given.
    // Trailing NULs do not survive (numpy strips them too).
    void add_bytes(const std::string& name, const std::vector<std::string>& values) {
        add_text<char>(name, values, Shape{static_cast<int64_t>(values.size())}, Dtype::bytes);
    }
    void add_bytes(const std::string& name, const std::vector<std::string>& values, const Shape& shape) {
        add_text<char>(name, values, shape, Dtype::bytes);
    }
    // UTF-32 strings as a numpy '<U<n>' array, copied.
    void add_unicode(const std::string& name, const std::vector<std::u32string>& values) {
        add_text<char32_t>(name, values, Shape{static_cast<int64_t>(values.size())}, Dtype::unicode);
    }
    void add_unicode(const std::string& name, const std::vector<std::u32string>& values, const Shape& shape) {
        add_text<char32_t>(name, values, shape, Dtype::unicode);
    }

    // ---- inspecting

    size_t size() const noexcept { return ckpt_vars_count(v_); }
    bool empty() const noexcept { return size() == 0; }
    // The position of name, or nullopt.
    std::optional<size_t> find(const std::string& name) const {
        size_t i = 0;
        if (v_ == nullptr || ckpt_vars_find(v_, name.c_str(), &i) != CKPT_OK) return std::nullopt;
        return i;
    }
    bool contains(const std::string& name) const { return find(name).has_value(); }
    // The position of name; Error(CKPT_ENOTFOUND) if there is none.
    size_t index(const std::string& name) const {
        size_t i = 0;
        detail::check(ckpt_vars_find(v_, name.c_str(), &i));
        return i;
    }
    // Accessors of array i (Error(CKPT_ENOTFOUND) out of range). name and data are borrowed.
    std::string_view name(size_t i) const { return ckpt_vars_name(v_, at(i)); }
    Dtype dtype(size_t i) const { return static_cast<Dtype>(ckpt_vars_dtype(v_, at(i))); }
    size_t itemsize(size_t i) const { return ckpt_vars_itemsize(v_, at(i)); }
    uint32_t ndim(size_t i) const { return ckpt_vars_ndim(v_, at(i)); }
    Shape shape(size_t i) const {
        const int64_t* s = ckpt_vars_shape(v_, at(i));
        return Shape(s, s + ckpt_vars_ndim(v_, i));
    }
    size_t nbytes(size_t i) const { return ckpt_vars_nbytes(v_, at(i)); }
    // The array's bytes (C order, native byte order): the collection's copy or the borrowed data. Restores fill
    // them. May be nullptr for an empty array.
    void* data(size_t i) { return ckpt_vars_data(v_, at(i)); }
    const void* data(size_t i) const { return ckpt_vars_data(v_, at(i)); }
    // Whether the latest restore into the collection filled array i: false for one a partial restore
    // (NpzOptions::partial) did not find in the file, for every array after a failed restore and before any.
    bool restored(size_t i) const { return ckpt_vars_restored(v_, at(i)) == 1; }
    bool restored(const std::string& name) const { return restored(index(name)); }
    // By name (Error(CKPT_ENOTFOUND) if absent).
    Dtype dtype(const std::string& name) const { return dtype(index(name)); }
    Shape shape(const std::string& name) const { return shape(index(name)); }
    // Every name, in order (copies).
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        out.reserve(size());
        for (size_t i = 0; i < size(); ++i) out.emplace_back(ckpt_vars_name(v_, i));
        return out;
    }

    // The items of a variable as T, checked: Error(CKPT_EMISMATCH) unless its dtype is dtype_of<T> with T's size
    // (get<bfloat16> for a bfloat16 array, get<fixed_bytes<8>> for '|S8'), Error(CKPT_ENOTFOUND) if there is none.
    // The view is borrowed: it lives until the collection is modified or destroyed.
    template <typename T>
    ArrayView<T> get(const std::string& name) { return view<T>(index(name), "get"); }
    template <typename T>
    ArrayView<const T> get(const std::string& name) const { return view<const T>(index(name), "get"); }
    template <typename T>
    ArrayView<T> get(size_t i) { return view<T>(at(i), "get"); }
    template <typename T>
    ArrayView<const T> get(size_t i) const { return view<const T>(at(i), "get"); }
    // The single item of a variable (a scalar, or any array of one item), checked as get() is.
    template <typename T>
    T scalar(const std::string& name) const {
        const ArrayView<const T> v = view<const T>(index(name), "scalar");
        if (v.size() != 1)
            throw Error(CKPT_EMISMATCH, "ckpt::Vars::scalar: '" + name + "' holds " + std::to_string(v.size()) + " items, not one");
        return v[0];
    }
    // The items of a '|S<n>' array as strings, trailing NULs dropped (as numpy does).
    std::vector<std::string> bytes(const std::string& name) const { return text<char>(index(name), Dtype::bytes); }
    // The items of a '<U<n>' array as UTF-32 strings, trailing NULs dropped.
    std::vector<std::u32string> unicode(const std::string& name) const {
        return text<char32_t>(index(name), Dtype::unicode);
    }

    // ---- row splits, for sharded checkpoints (ckpt_vars_set_rows)

    // Marks array i as rows [row_begin, row_begin + shape[0]) of a global array of global_rows rows along
    // dimension 0: a sharded save records this rank's piece, a restore fills it with those rows from whichever
    // shards hold them. clear_rows makes it whole again.
    void set_rows(size_t i, int64_t row_begin, int64_t global_rows) {
        detail::check(ckpt_vars_set_rows(v_, i, row_begin, global_rows));
    }
    void clear_rows(size_t i) { detail::check(ckpt_vars_set_rows(v_, i, 0, -1)); }
    // {row_begin, global_rows} of array i when it is a row split; nullopt when it is whole.
    std::optional<std::pair<int64_t, int64_t>> rows(size_t i) const {
        int64_t begin = -1, global = -1;
        const int rc = ckpt_vars_rows(v_, at(i), &begin, &global);
        if (rc == CKPT_ENOTFOUND) return std::nullopt;
        detail::check(rc);
        return std::make_pair(begin, global);
    }

    // ---- metadata: string key/values saved with the collection, in insertion order

    // Sets key to value (both copied), replacing its value in place.
    void set_metadata(const std::string& key, const std::string& value) {
        detail::check(ckpt_vars_set_metadata(v_, key.c_str(), value.c_str()));
    }
    // Removes key (nothing to do if it is absent).
    void remove_metadata(const std::string& key) { detail::check(ckpt_vars_set_metadata(v_, key.c_str(), nullptr)); }
    // The value of key (borrowed, until the key is set or removed or the collection destroyed), or nullopt.
    std::optional<std::string_view> metadata(const std::string& key) const {
        const char* value = ckpt_vars_metadata(v_, key.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string_view(value);
    }
    size_t metadata_count() const noexcept { return ckpt_vars_metadata_count(v_); }
    // Key i and its value (borrowed); Error(CKPT_ENOTFOUND) out of range.
    std::string_view metadata_key(size_t i) const { return metadata_at(ckpt_vars_metadata_key(v_, i), i); }
    std::string_view metadata_value(size_t i) const { return metadata_at(ckpt_vars_metadata_value(v_, i), i); }
    // Every key/value pair, in order (copies).
    std::vector<std::pair<std::string, std::string>> metadata_items() const {
        std::vector<std::pair<std::string, std::string>> out;
        for (size_t i = 0; i < metadata_count(); ++i) out.emplace_back(metadata_key(i), metadata_value(i));
        return out;
    }

private:
    template <typename T>
    void add_typed(const std::string& name, const Shape& shape, const void* data, Ownership ownership) {
        using E = std::remove_cv_t<T>;
        static_assert(std::is_trivially_copyable_v<E>, "array elements are stored as their bytes");
        constexpr Dtype d = dtype_of_v<E>;
        if (!has_array_itemsize(d) && dtype_size(d) != sizeof(E))  // a dtype_of specialization of the wrong size
            throw Error(CKPT_EINVAL, "ckpt::Vars: variable '" + name + "': " + dtype_name(d) + " items are " +
                                         std::to_string(dtype_size(d)) + " bytes, the element type " +
                                         std::to_string(sizeof(E)));
        add(name, d, shape, data, ownership, sizeof(E));
    }

    static void require_items(const std::string& name, const Shape& shape, size_t count) {
        const std::optional<size_t> n = detail::item_count(shape);
        if (n && *n != count)
            throw Error(CKPT_EINVAL, "ckpt::Vars: variable '" + name + "': shape " + detail::shape_string(shape) +
                                         " holds " + std::to_string(*n) + " items, the data " + std::to_string(count));
    }

    template <typename Unit, typename S>
    void add_text(const std::string& name, const std::vector<S>& values, const Shape& s, Dtype dtype) {
        require_items(name, s, values.size());
        size_t width = 1;
        for (const S& v : values) width = v.size() > width ? v.size() : width;
        std::vector<Unit> items(width * values.size(), Unit(0));
        for (size_t k = 0; k < values.size(); ++k) std::copy(values[k].begin(), values[k].end(), items.begin() + static_cast<std::ptrdiff_t>(k * width));
        add(name, dtype, s, items.data(), Ownership::copy, width * sizeof(Unit));
    }

    template <typename Unit>
    std::vector<std::basic_string<Unit>> text(size_t i, Dtype want) const {
        const Dtype d = dtype(i);
        const size_t size = itemsize(i);
        if (d != want)
            throw Error(CKPT_EMISMATCH, std::string("ckpt::Vars: '") + ckpt_vars_name(v_, i) + "' is " +
                                            detail::dtype_string(d, size) + ", not " + dtype_name(want));
        const size_t width = size / sizeof(Unit);
        const size_t count = width == 0 ? 0 : nbytes(i) / size;
        std::vector<std::basic_string<Unit>> out;
        out.reserve(count);
        const unsigned char* p = static_cast<const unsigned char*>(ckpt_vars_data(v_, i));
        for (size_t k = 0; k < count; ++k) {
            std::basic_string<Unit> item(width, Unit(0));
            std::memcpy(&item[0], p + k * size, size);
            while (!item.empty() && item.back() == Unit(0)) item.pop_back();
            out.push_back(std::move(item));
        }
        return out;
    }

    template <typename T>
    ArrayView<T> view(size_t i, const char* what) const {
        using E = std::remove_cv_t<T>;
        static_assert(is_element_v<E>, "get<T>: T must be an element type (see ckpt::dtype_of)");
        const Dtype d = static_cast<Dtype>(ckpt_vars_dtype(v_, i));
        const size_t size = ckpt_vars_itemsize(v_, i);
        if (d != dtype_of_v<E> || size != sizeof(E))
            throw Error(CKPT_EMISMATCH, std::string("ckpt::Vars::") + what + ": '" + ckpt_vars_name(v_, i) + "' is " +
                                            detail::dtype_string(d, size) + ", not " +
                                            detail::dtype_string(dtype_of_v<E>, sizeof(E)));
        void* p = ckpt_vars_data(v_, i);
        const size_t n = ckpt_vars_nbytes(v_, i) / sizeof(E);
        if (n > 0 && reinterpret_cast<uintptr_t>(p) % alignof(E) != 0)
            throw Error(CKPT_EINVAL, std::string("ckpt::Vars::") + what + ": the data of '" + ckpt_vars_name(v_, i) +
                                         "' is not aligned for its type");
        if constexpr (std::is_same_v<E, bool>) detail::require_bools(p, n, ckpt_vars_name(v_, i));
        return ArrayView<T>(static_cast<T*>(p), n);
    }

    size_t at(size_t i) const {
        const size_t n = size();
        if (i >= n)
            throw Error(v_ == nullptr ? CKPT_EINVAL : CKPT_ENOTFOUND,
                        v_ == nullptr ? std::string("ckpt::Vars: the collection was moved from")
                                      : "ckpt::Vars: no variable " + std::to_string(i) + " (" + std::to_string(n) + " variables)");
        return i;
    }
    std::string_view metadata_at(const char* s, size_t i) const {
        if (s == nullptr)
            throw Error(CKPT_ENOTFOUND, "ckpt::Vars: no metadata key " + std::to_string(i) + " (" +
                                            std::to_string(metadata_count()) + " keys)");
        return s;
    }

    ckpt_vars* v_ = nullptr;
};

// ------------------------------------------------------------------------------------------------------ npz files

// Saves vars to path as an .npz numpy.load reads, atomically and durably (ckpt_npz_save).
inline void save(const std::string& path, const Vars& vars, const NpzOptions& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    detail::check(ckpt_npz_save(path.c_str(), vars.native(), &c.c), c.storage.failures().get());
}

// Reads every array of the .npz at path into a new collection, with the file's metadata (ckpt_npz_read).
inline Vars read(const std::string& path, const NpzOptions& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    ckpt_vars* out = nullptr;
    detail::check(ckpt_npz_read(&out, path.c_str(), &c.c), c.storage.failures().get());
    return Vars(out);
}

// As read() for an .npz held in memory (not retained); messages name the file "<memory>".
inline Vars read_memory(const void* bytes, size_t size, const NpzOptions& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, false);
    ckpt_vars* out = nullptr;
    detail::check(ckpt_npz_read_memory(&out, bytes, size, &c.c));
    return Vars(out);
}
// The bytes of a contiguous container (std::vector<char>, std::string, std::vector<std::byte>, …).
template <typename C, typename = std::enable_if_t<std::is_pointer_v<decltype(std::data(std::declval<const C&>()))>>>
inline Vars read_memory(const C& bytes, const NpzOptions& options = {}) {
    using E = std::remove_pointer_t<decltype(std::data(bytes))>;
    static_assert(sizeof(E) == 1, "read_memory takes a container of bytes");
    return read_memory(static_cast<const void*>(std::data(bytes)), std::size(bytes), options);
}

// Restores vars in place from the .npz at path (objax's load_var_collection; ckpt_npz_restore): each variable must
// be in the file with the same dtype, itemsize and shape, after options.rename. Error(CKPT_EMISMATCH) lists every
// missing variable and unused name and leaves vars unchanged. The collection's metadata becomes the file's.
inline void restore(const std::string& path, Vars& vars, const NpzOptions& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    detail::check(ckpt_npz_restore(path.c_str(), vars.native(), &c.c), c.storage.failures().get());
}

// A ckpt_npz: one file opened for lazy access, to load some arrays or inspect it. Opening reads and validates the
// zip directory, every npy header and the metadata; array data is read on demand, its CRC checked.
class Npz {
public:
    explicit Npz(const std::string& path, const NpzOptions& options = {})
        : callbacks_(std::make_unique<detail::NpzCallbacks>(options)) {
        detail::CNpzOptions c(options, callbacks_.get(), true);
        failures_ = c.storage.failures();
        detail::check(ckpt_npz_open(&npz_, path.c_str(), &c.c), failures_.get());
    }
    ~Npz() { ckpt_npz_close(npz_); }
    Npz(Npz&& other) noexcept
        : npz_(std::exchange(other.npz_, nullptr)),
          callbacks_(std::move(other.callbacks_)),
          failures_(std::move(other.failures_)) {}
    Npz& operator=(Npz&& other) noexcept {
        if (this != &other) {
            ckpt_npz_close(npz_);
            npz_ = std::exchange(other.npz_, nullptr);
            callbacks_ = std::move(other.callbacks_);
            failures_ = std::move(other.failures_);
        }
        return *this;
    }
    Npz(const Npz&) = delete;
    Npz& operator=(const Npz&) = delete;

    ckpt_npz* native() const noexcept { return npz_; }
    explicit operator bool() const noexcept { return npz_ != nullptr; }
    // Closes the file now; the object is empty after.
    void close() noexcept {
        ckpt_npz_close(npz_);
        npz_ = nullptr;
        callbacks_.reset();
        failures_.reset();
    }

    // Number of arrays (the metadata member and objax's names.npy not counted).
    size_t size() const noexcept { return ckpt_npz_count(npz_); }
    bool empty() const noexcept { return size() == 0; }
    // Accessors of array i, as Vars' (Error(CKPT_ENOTFOUND) out of range). name is borrowed.
    std::string_view name(size_t i) const { return ckpt_npz_name(npz_, at(i)); }
    Dtype dtype(size_t i) const { return static_cast<Dtype>(ckpt_npz_dtype(npz_, at(i))); }
    size_t itemsize(size_t i) const { return ckpt_npz_itemsize(npz_, at(i)); }
    uint32_t ndim(size_t i) const { return ckpt_npz_ndim(npz_, at(i)); }
    Shape shape(size_t i) const {
        const int64_t* s = ckpt_npz_shape(npz_, at(i));
        return Shape(s, s + ckpt_npz_ndim(npz_, i));
    }
    size_t nbytes(size_t i) const { return ckpt_npz_nbytes(npz_, at(i)); }
    // How the file holds array i, for inspection tools: its zip member ("w.npy"; borrowed), stored or deflated,
    // its bytes in the file, its CRC-32, and the file offset of its first data byte (stored arrays; 0 deflated).
    std::string_view member_name(size_t i) const { return ckpt_npz_member_name(npz_, at(i)); }
    Compression compression(size_t i) const { return static_cast<Compression>(ckpt_npz_compression(npz_, at(i))); }
    uint64_t stored_bytes(size_t i) const { return ckpt_npz_stored_bytes(npz_, at(i)); }
    uint32_t crc32(size_t i) const { return ckpt_npz_crc32(npz_, at(i)); }
    uint64_t data_offset(size_t i) const { return ckpt_npz_data_offset(npz_, at(i)); }
    // The layout the file was read in: Layout::plain or Layout::objax.
    Layout layout() const { return static_cast<Layout>(ckpt_npz_layout(npz_)); }
    // The position of name (a linear search), or nullopt.
    std::optional<size_t> find(const std::string& name) const {
        for (size_t i = 0; i < size(); ++i)
            if (name == ckpt_npz_name(npz_, i)) return i;
        return std::nullopt;
    }
    bool contains(const std::string& name) const { return find(name).has_value(); }
    size_t index(const std::string& name) const {
        if (std::optional<size_t> i = find(name)) return *i;
        throw Error(npz_ == nullptr ? CKPT_EINVAL : CKPT_ENOTFOUND, "ckpt::Npz: no array '" + name + "'");
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (size_t i = 0; i < size(); ++i) out.emplace_back(ckpt_npz_name(npz_, i));
        return out;
    }

    // Reads array i into dst (at least nbytes(i) bytes; ckpt_npz_read_into).
    void read_into(size_t i, void* dst, size_t dst_size) {
        detail::check(ckpt_npz_read_into(npz_, i, dst, dst_size), failures_.get());
    }
    // Reads an array into a range of its element type (at least as many items), checked as Vars::get is.
    template <typename C, typename = std::enable_if_t<detail::is_range_v<C>>>
    void read_into(const std::string& name, C& dst) {
        using R = detail::range_traits<C>;
        static_assert(!std::is_const_v<typename R::element>, "read_into writes into dst");
        using E = std::remove_cv_t<typename R::element>;
        const size_t i = index(name);
        require_type<E>(i);
        read_into(i, R::data(dst), R::size(dst) * sizeof(E));
        if constexpr (std::is_same_v<E, bool>) detail::require_bools(R::data(dst), nbytes(i), ckpt_npz_name(npz_, i));
    }
    // An array's items as a new vector, checked as Vars::get is (for bool, read_into a bool buffer).
    template <typename T>
    std::vector<T> read(const std::string& name) {
        static_assert(!std::is_same_v<T, bool>, "std::vector<bool> is not contiguous: read_into a bool buffer");
        const size_t i = index(name);
        require_type<T>(i);
        std::vector<T> out(nbytes(i) / sizeof(T));
        read_into(i, out.data(), out.size() * sizeof(T));
        return out;
    }

    // Array i's bytes without a copy (ckpt_npz_map): read-only, in native byte order and C order, valid until the
    // file is closed (close(), the destructor, or assigning another file to this object) — a view into a mapping of
    // the file for the stored arrays ckpt writes, else decoded once into memory the file keeps. Its CRC-32 is
    // checked at the first call unless the file was opened with NpzOptions::map_unverified.
    ArrayView<const unsigned char> map_bytes(size_t i) {
        const void* p = nullptr;
        detail::check(ckpt_npz_map(npz_, at(i), &p), failures_.get());
        return ArrayView<const unsigned char>(static_cast<const unsigned char*>(p), nbytes(i));
    }
    // Every array without a copy (ckpt_npz_map_vars): a collection in file order, with the file's metadata, whose
    // arrays are the file's views — a restore that maps instead of reading. It must not be used after the file is
    // closed. Its arrays may be written only if the file was opened with NpzOptions::map_writable (copy-on-write:
    // the file never changes); otherwise writing faults.
    Vars map_vars() {
        ckpt_vars* out = nullptr;
        detail::check(ckpt_npz_map_vars(npz_, &out), failures_.get());
        return Vars(out);
    }
    // An array's items without a copy, as map_bytes; T must be its element type (checked as Vars::get is).
    template <typename T>
    ArrayView<const T> map(const std::string& name) {
        const size_t i = index(name);
        require_type<T>(i);
        const ArrayView<const unsigned char> bytes = map_bytes(i);
        if (!bytes.empty() && reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) != 0)
            throw Error(CKPT_EINVAL, "ckpt::Npz::map: the data of '" + name + "' is not aligned for its type");
        if constexpr (std::is_same_v<T, bool>) detail::require_bools(bytes.data(), bytes.size(), ckpt_npz_name(npz_, i));
        return ArrayView<const T>(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
    }

    // The file's metadata, as Vars' (borrowed until the file is closed).
    std::optional<std::string_view> metadata(const std::string& key) const {
        const char* value = ckpt_npz_metadata(npz_, key.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string_view(value);
    }
    size_t metadata_count() const noexcept { return ckpt_npz_metadata_count(npz_); }
    std::string_view metadata_key(size_t i) const { return metadata_at(ckpt_npz_metadata_key(npz_, i), i); }
    std::string_view metadata_value(size_t i) const { return metadata_at(ckpt_npz_metadata_value(npz_, i), i); }
    std::vector<std::pair<std::string, std::string>> metadata_items() const {
        std::vector<std::pair<std::string, std::string>> out;
        for (size_t i = 0; i < metadata_count(); ++i) out.emplace_back(metadata_key(i), metadata_value(i));
        return out;
    }

private:
    template <typename T>
    void require_type(size_t i) const {
        static_assert(is_element_v<T>, "T must be an element type (see ckpt::dtype_of)");
        const Dtype d = static_cast<Dtype>(ckpt_npz_dtype(npz_, i));
        const size_t size = ckpt_npz_itemsize(npz_, i);
        if (d != dtype_of_v<T> || size != sizeof(T))
            throw Error(CKPT_EMISMATCH, std::string("ckpt::Npz: '") + ckpt_npz_name(npz_, i) + "' is " +
                                            detail::dtype_string(d, size) + ", not " +
                                            detail::dtype_string(dtype_of_v<T>, sizeof(T)));
    }
    size_t at(size_t i) const {
        const size_t n = size();
        if (i >= n)
            throw Error(npz_ == nullptr ? CKPT_EINVAL : CKPT_ENOTFOUND,
                        npz_ == nullptr ? std::string("ckpt::Npz: the file is closed")
                                        : "ckpt::Npz: no array " + std::to_string(i) + " (" + std::to_string(n) + " arrays)");
        return i;
    }
    std::string_view metadata_at(const char* s, size_t i) const {
        if (s == nullptr)
            throw Error(CKPT_ENOTFOUND, "ckpt::Npz: no metadata key " + std::to_string(i) + " (" +
                                            std::to_string(metadata_count()) + " keys)");
        return s;
    }

    ckpt_npz* npz_ = nullptr;
    std::unique_ptr<detail::NpzCallbacks> callbacks_;  // the progress function the open file reports through
    std::shared_ptr<detail::StorageFailures> failures_;
};

// One sharded checkpoint step (a directory of shards and manifest.json, docs/distributed.md) read by one process:
// the manifest at opening, the shards as variables are read (ckpt_step_*).
class Step {
public:
    explicit Step(const std::string& dir, const NpzOptions& options = {})
        : callbacks_(std::make_unique<detail::NpzCallbacks>(options)) {
        detail::CNpzOptions c(options, callbacks_.get(), true);
        failures_ = c.storage.failures();
        detail::check(ckpt_step_open(&step_, dir.c_str(), &c.c), failures_.get());
    }
    ~Step() { ckpt_step_close(step_); }
    Step(Step&& other) noexcept
        : step_(std::exchange(other.step_, nullptr)),
          callbacks_(std::move(other.callbacks_)),
          failures_(std::move(other.failures_)) {}
    Step& operator=(Step&& other) noexcept {
        if (this != &other) {
            ckpt_step_close(step_);
            step_ = std::exchange(other.step_, nullptr);
            callbacks_ = std::move(other.callbacks_);
            failures_ = std::move(other.failures_);
        }
        return *this;
    }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;
    ckpt_step* native() const noexcept { return step_; }

    int64_t index() const noexcept { return ckpt_step_index(step_); }
    int32_t world_size() const noexcept { return ckpt_step_world_size(step_); }
    // The file name of rank's shard; Error(CKPT_ENOTFOUND) out of range.
    std::string_view shard(int32_t rank) const {
        const char* name = ckpt_step_shard(step_, rank);
        if (name == nullptr) throw Error(CKPT_ENOTFOUND, "ckpt::Step: no shard " + std::to_string(rank));
        return name;
    }
    size_t size() const noexcept { return ckpt_step_count(step_); }
    // Accessors of variable i (Error(CKPT_ENOTFOUND) out of range); the shape is the global one.
    std::string_view name(size_t i) const { return ckpt_step_name(step_, at(i)); }
    Dtype dtype(size_t i) const { return static_cast<Dtype>(ckpt_step_dtype(step_, at(i))); }
    size_t itemsize(size_t i) const { return ckpt_step_itemsize(step_, at(i)); }
    Shape shape(size_t i) const {
        const int64_t* s = ckpt_step_shape(step_, at(i));
        return Shape(s, s + ckpt_step_ndim(step_, i));
    }
    size_t nbytes(size_t i) const { return ckpt_step_nbytes(step_, at(i)); }
    // Shards holding variable i's rows: 0 for a whole variable.
    size_t pieces(size_t i) const { return ckpt_step_pieces(step_, at(i)); }
    // Reads rows [first, first + count) of variable i (a 0-d one: 0, 1) into dst (dst_size bytes).
    void read_rows(size_t i, int64_t first, int64_t count, void* dst, size_t dst_size) {
        detail::check(ckpt_step_read_rows(step_, at(i), first, count, dst, dst_size), failures_.get());
    }
    // The step's metadata (borrowed until the step is closed).
    std::optional<std::string_view> metadata(const std::string& key) const {
        const char* value = ckpt_step_metadata(step_, key.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string_view(value);
    }
    std::vector<std::pair<std::string, std::string>> metadata_items() const {
        std::vector<std::pair<std::string, std::string>> out;
        for (size_t i = 0; i < ckpt_step_metadata_count(step_); ++i)
            out.emplace_back(ckpt_step_metadata_key(step_, i), ckpt_step_metadata_value(step_, i));
        return out;
    }

private:
    size_t at(size_t i) const {
        if (i >= size()) throw Error(CKPT_ENOTFOUND, "ckpt::Step: no variable " + std::to_string(i));
        return i;
    }
    ckpt_step* step_ = nullptr;
    std::unique_ptr<detail::NpzCallbacks> callbacks_;
    std::shared_ptr<detail::StorageFailures> failures_;
};

// --------------------------------------------------------------------------------------------------------- writers

// CKPT_WRITER_*: pytorch-pfn-extras' Simple, Thread and Queue writers.
enum class WriterKind : uint32_t {
    simple = CKPT_WRITER_SIMPLE,  // saves run in the caller's thread
    thread = CKPT_WRITER_THREAD,  // one background save at a time: a save first waits for the previous one
    queue = CKPT_WRITER_QUEUE,    // one background thread behind a queue of queue_depth saves
};

// ckpt_writer_options.
struct WriterOptions {
    WriterKind kind = WriterKind::simple;
    uint32_t queue_depth = 0;           // queue: saves queued or running before a save blocks; 0 = 1
    std::shared_ptr<Storage> storage;   // null = the local filesystem
    std::optional<std::string> out_dir; // directory of saves that name none; nullopt = "."
};

// Per save: where it goes and how.
struct SaveOptions {
    std::optional<std::string> out_dir;  // nullopt = the writer's
    bool append = false;                 // Writer::save: append to the file in place — not atomic (CKPT_APPEND)
    bool no_copy = false;  // Writer::save_vars: no snapshot; the data stays unchanged until wait() (CKPT_NO_COPY)
};

namespace detail {
struct SinkAccess;
}

// The file a save function writes into (a ckpt_sink), valid during the call.
class Sink {
public:
    explicit Sink(ckpt_sink* sink) noexcept : sink_(sink) {}
    // Appends size bytes. Throws Error (CKPT_EIO when the storage failed; every later write fails the same way,
    // and the save fails with that error whatever the function does).
    void write(const void* data, size_t size) {
        const int rc = ckpt_sink_write(sink_, data, size);
        if (rc == CKPT_OK) {
            detail::forget_callback_failure();
            return;
        }
        try {
            detail::throw_error(rc);
        } catch (const Error& e) {
            if (failure_.empty()) {
                // Kept for the save's own error, which is this one even if the function swallows it.
                failure_ = e.what();
                failure_library_length_ = detail::ErrorAccess::library_length(e);
            }
            throw;
        }
    }
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
    // The bytes of a contiguous range of trivially copyable values (not of characters: those go as string_view).
    template <typename C,
              typename E = std::remove_cv_t<std::remove_pointer_t<decltype(std::data(std::declval<const C&>()))>>,
              typename = std::enable_if_t<std::is_trivially_copyable_v<E> && !detail::is_character_v<E>>>
    void write(const C& values) {
        write(static_cast<const void*>(std::data(values)), std::size(values) * sizeof(E));
    }
    ckpt_sink* native() const noexcept { return sink_; }

private:
    friend struct detail::SinkAccess;
    ckpt_sink* sink_;
    std::string failure_;  // the first failed write's message
    size_t failure_library_length_ = 0;
};

namespace detail {
struct SinkAccess {
    static void note_failure(const Sink& s) noexcept {
        if (!s.failure_.empty()) note_callback_failure(s.failure_.c_str(), s.failure_library_length_);
    }
};
}  // namespace detail

namespace detail {

// One background save's payload, kept by its Writer until the save is known to be over.
struct InFlight {
    std::atomic<bool> done{false};  // set by the save function, after `thrown`
    CallbackFailure thrown;         // what it threw
    virtual ~InFlight() = default;
};

template <typename F>
struct SaveCall final : InFlight {
    F fn;
    bool background;
    SaveCall(F f, bool bg) : fn(std::forward<F>(f)), background(bg) {}

    static int run(ckpt_sink* sink, void* payload) noexcept {
        auto* call = static_cast<SaveCall*>(payload);
        // On a background thread nothing consumes this thread's record of callback failures: start clean.
        if (call->background) forget_callback_failure();
        int rc = CKPT_OK;
        Sink s(sink);
        try {
            call->fn(s);
            SinkAccess::note_failure(s);
        } catch (...) {
            SinkAccess::note_failure(s);  // a failed write is the save's error, whatever the function threw after
            rc = current_exception_code(CKPT_ERROR);
        }
        if (call->background) {
            // The error is reported on another thread, by the Writer: the record goes with the payload.
            try {
                call->thrown = callback_failure();
            } catch (...) {
            }
            forget_callback_failure();
        }
        call->done.store(true, std::memory_order_release);
        return rc;
    }
};

struct VarsSave final : InFlight {
    NpzCallbacks callbacks;
    explicit VarsSave(const NpzOptions& o) : callbacks(o) {}
};

}  // namespace detail

// A ckpt_writer: saves files atomically and durably, in the caller's thread (simple) or in the background. Errors of
// background saves are never lost: each is thrown exactly once, by the next save, save_vars, wait or finalize
// (with what a save function threw, when it threw).
class Writer {
public:
    explicit Writer(const WriterOptions& options = {})
        : kind_(options.kind),
          depth_(options.kind == WriterKind::queue && options.queue_depth > 0 ? options.queue_depth : 1),
          storage_(options.storage) {
        ckpt_writer_options c;
        detail::check(ckpt_writer_options_init(&c, CKPT_WRITER_OPTIONS_VERSION));
        detail::StorageRef storage(options.storage);
        c.kind = static_cast<uint32_t>(options.kind);
        c.queue_depth = options.queue_depth;
        c.storage = storage.get();
        c.out_dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        failures_ = storage.failures();
        detail::check(ckpt_writer_new(&w_, &c), failures_.get());
    }
    // Finalizes, dropping errors not yet reported (call finalize() to see them).
    ~Writer() {
        ckpt_writer_free(w_);
        detail::forget_callback_failure();
    }
    Writer(Writer&& other) noexcept
        : w_(std::exchange(other.w_, nullptr)),
          kind_(other.kind_),
          depth_(other.depth_),
          storage_(std::move(other.storage_)),
          in_flight_(std::move(other.in_flight_)),
          thrown_(std::move(other.thrown_)),
          failures_(std::move(other.failures_)) {}
    Writer& operator=(Writer&& other) noexcept {
        if (this != &other) {
            ckpt_writer_free(w_);
            w_ = std::exchange(other.w_, nullptr);
            kind_ = other.kind_;
            depth_ = other.depth_;
            storage_ = std::move(other.storage_);
            in_flight_ = std::move(other.in_flight_);
            thrown_ = std::move(other.thrown_);
            failures_ = std::move(other.failures_);
        }
        return *this;
    }
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    ckpt_writer* native() const noexcept { return w_; }
    explicit operator bool() const noexcept { return w_ != nullptr; }
    WriterKind kind() const noexcept { return kind_; }

    // Saves what fn writes to <out_dir>/<filename>: fn is called as fn(Sink&) once — in this thread for simple
    // writers, later on the writer's thread otherwise (fn is then moved into the writer, so capture by value what
    // training may change). If fn throws, the save fails with the exception's code (an Error's own, CKPT_ENOMEM
    // for std::bad_alloc, CKPT_ERROR otherwise) and the target keeps its previous content; nothing crosses into C.
    // Simple writers throw the save's own error here; background ones throw an earlier save's error (this save is
    // then not started) and block while the queue is full.
    template <typename F>
    void save(const std::string& filename, F&& fn, const SaveOptions& options = {}) {
        static_assert(std::is_invocable_v<std::decay_t<F>&, Sink&>, "a save function is called as fn(ckpt::Sink&)");
        const char* dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        const uint32_t flags = (options.append ? CKPT_APPEND : 0u) | (options.no_copy ? CKPT_NO_COPY : 0u);
        if (kind_ == WriterKind::simple) {
            detail::SaveCall<F&&> call(std::forward<F>(fn), false);
            checked(ckpt_writer_save(w_, dir, filename.c_str(), &detail::SaveCall<F&&>::run, &call, flags));
            return;
        }
        auto call = std::make_shared<detail::SaveCall<std::decay_t<F>>>(std::forward<F>(fn), true);
        submitted(ckpt_writer_save(w_, dir, filename.c_str(), &detail::SaveCall<std::decay_t<F>>::run, call.get(), flags),
                  call);
    }

    // Saves a collection as .npz (save()'s format and options; the writer's storage is used). Background writers
    // snapshot every array before returning, so training may change them at once — unless options.no_copy.
    void save_vars(const std::string& filename, const Vars& vars, const NpzOptions& npz = {},
                   const SaveOptions& options = {}) {
        detail::refuse_npz_storage(npz, storage_, "ckpt::Writer::save_vars");
        const char* dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        const uint32_t flags = (options.append ? CKPT_APPEND : 0u) | (options.no_copy ? CKPT_NO_COPY : 0u);
        auto call = std::make_shared<detail::VarsSave>(npz);
        detail::CNpzOptions c(npz, &call->callbacks, false);
        const int rc = ckpt_writer_save_vars(w_, dir, filename.c_str(), vars.native(), &c.c, flags);
        if (kind_ == WriterKind::simple) {
            checked(rc);
            return;
        }
        submitted(rc, call->callbacks.progress ? call : nullptr);
    }

    // Waits for every queued save; throws the first error not yet reported.
    void wait() {
        const int rc = ckpt_writer_wait(w_);
        all_done();
        checked(rc);
    }
    // Waits, then stops the background thread; later saves throw Error(CKPT_EINVAL). Throws the first unreported
    // error. A second call does nothing.
    void finalize() {
        const int rc = ckpt_writer_finalize(w_);
        all_done();
        checked(rc);
    }

private:
    // Keeps a queued save's payload for as long as the save may run. Saves run in order on one thread, and when a
    // save call returns at most depth_ saves are queued or running (ckpt.h): every older one is over.
    void submitted(int rc, std::shared_ptr<detail::InFlight> call) {
        if (rc == CKPT_OK) in_flight_.push_back(std::move(call));  // an error means this save was not started
        if (in_flight_.size() > depth_) {
            const auto over = in_flight_.begin() + static_cast<std::ptrdiff_t>(in_flight_.size() - depth_);
            for (auto it = in_flight_.begin(); it != over; ++it) retire(*it);
            in_flight_.erase(in_flight_.begin(), over);
        }
        checked(rc);
    }
    void all_done() noexcept {
        for (auto& call : in_flight_) retire(call);
        in_flight_.clear();
    }
    void retire(const std::shared_ptr<detail::InFlight>& call) noexcept {
        if (call && call->thrown.set) {
            try {
                thrown_.push_back(std::move(call->thrown));
            } catch (...) {
            }
            call->thrown = detail::CallbackFailure();
        }
    }
    // Throws the error of a failed call, with what the first background save function that threw since the last
    // report threw (the library reports every failure so far at once: the first, and how many more).
    void checked(int rc) {
        if (rc == CKPT_OK) {
            detail::forget_callback_failure();
            return;
        }
        for (auto& call : in_flight_)
            if (call && call->done.load(std::memory_order_acquire)) retire(call);
        detail::CallbackFailure first;
        if (!thrown_.empty()) first = std::move(thrown_.front());
        thrown_.clear();
        detail::throw_error(rc, &first, failures_.get());
    }

    ckpt_writer* w_ = nullptr;
    WriterKind kind_;
    size_t depth_;
    std::shared_ptr<Storage> storage_;
    // The last depth_ background saves' payloads, oldest first (a vector: its moves cannot throw, a deque's can).
    std::vector<std::shared_ptr<detail::InFlight>> in_flight_;
    std::vector<detail::CallbackFailure> thrown_;              // what background save functions threw
    std::shared_ptr<detail::StorageFailures> failures_;        // what the storage's methods threw
};

// ---------------------------------------------------------------------------------------------- checkpoint manager

inline constexpr int64_t latest = CKPT_LATEST;

enum class LogLevel : int {
    info = CKPT_LOG_INFO,        // "Resuming from …", "No checkpoints found"
    warning = CKPT_LOG_WARNING,  // a corrupt checkpoint skipped, a stale temporary removed
};

// Whether lower (min) or higher (max) values of the best metric are better.
enum class BestMode : uint32_t { min = CKPT_BEST_MIN, max = CKPT_BEST_MAX };

// ckpt_manager_options. Unset values keep ckpt's defaults.
struct ManagerOptions {
    std::optional<int32_t> keep;  // newest checkpoints kept; <= 0 keeps all; unset = ckpt's default (10)
    int64_t keep_every = 0;       // also keep indices that are multiples of this; 0 = off
    bool async = false;           // saves run on a background writer (CKPT_MANAGER_ASYNC)
    bool fallback = true;         // restore(latest) tries older checkpoints past unreadable ones
    bool make_dir = true;         // create the directory (false: CKPT_MANAGER_NO_MAKEDIR)
    bool verbose = false;         // log to stderr when there is no log function (CKPT_MANAGER_VERBOSE)
    // For tools and evaluators: open a directory another manager may hold, without a lock, cleanup or saves
    // (CKPT_MANAGER_READ_ONLY).
    bool read_only = false;
    uint32_t queue_depth = 0;     // async: saves in flight before save() blocks; 0 = 1
    std::optional<std::string> subdir;  // nullopt = "ckpt" (objax's DIR_NAME); "" = the logdir itself
    NpzOptions npz;                     // how saves write (reads detect the layout); leave npz.storage unset
    // Called from the thread doing the work (a background save's, for retention messages); must not throw.
    std::function<void(LogLevel level, std::string_view message)> log;
    std::shared_ptr<Storage> storage;  // null = the local filesystem
    // Retention policies that add to keep (a checkpoint is kept when any policy keeps it):
    int32_t keep_best = 0;                   // also keep the best N by best_metric; 0 = off
    std::string best_metric;                 // the metric of keep_best and best(); "" = none
    BestMode best_mode = BestMode::min;
    int64_t keep_seconds = 0;                // also keep what was saved within the last S seconds; 0 = off
    // When should_save() says to save:
    int64_t save_every_steps = 0;            // at multiples of this step; 0 = off
    int64_t save_every_seconds = 0;          // once this long has passed since the last save or opening; 0 = off
    // async: the copies held by queued and running saves never exceed this; a save larger than the whole budget is
    // written at once from the caller's arrays, without a copy. 0 = no limit
    uint64_t max_staging_bytes = 0;
    // Makes the manager collective over the communicator's ranks (sharded checkpoints, docs/distributed.md).
    std::optional<CommHandle> comm;
};

// A metric of a save: recorded as "ckpt.metric.<name>" in the checkpoint's metadata.
struct Metric {
    std::string name;
    double value;
};

// What Manager::read returns: a new collection, and the index it came from (auto [vars, idx] = m.read()).
struct ReadResult {
    Vars vars;
    int64_t index;
};

// A ckpt_manager: objax's Checkpoint, a directory <logdir>/<subdir> of numbered checkpoints that a training
// program saves into and resumes from, with retention, fallback past corrupt files and a lock (ckpt.h has every
// rule). With async, save errors surface at the next save, wait or close.
class Manager {
public:
    explicit Manager(const std::string& logdir, const ManagerOptions& options = {})
        : callbacks_(std::make_unique<Callbacks>(options)) {
        detail::refuse_npz_storage(options.npz, options.storage, "ckpt::Manager");
        detail::CNpzOptions npz(options.npz, &callbacks_->npz, false);
        detail::StorageRef storage(options.storage);
        ckpt_manager_options c;
        check(ckpt_manager_options_init(&c, CKPT_MANAGER_OPTIONS_VERSION));
        if (options.keep) c.keep = *options.keep;
        c.keep_every = options.keep_every;
        c.flags = (options.async ? CKPT_MANAGER_ASYNC : 0u) | (options.fallback ? 0u : CKPT_MANAGER_NO_FALLBACK) |
                  (options.make_dir ? 0u : CKPT_MANAGER_NO_MAKEDIR) | (options.verbose ? CKPT_MANAGER_VERBOSE : 0u) |
                  (options.read_only ? CKPT_MANAGER_READ_ONLY : 0u);
        c.queue_depth = options.queue_depth;
        c.subdir = options.subdir ? options.subdir->c_str() : nullptr;
        c.npz = &npz.c;
        if (callbacks_->log) {
            c.log = &Callbacks::log_fn;
            c.log_payload = callbacks_.get();
        }
        c.storage = storage.get();
        c.keep_best = options.keep_best;
        c.best_metric = options.best_metric.empty() ? nullptr : options.best_metric.c_str();
        c.best_mode = static_cast<uint32_t>(options.best_mode);
        c.keep_seconds = options.keep_seconds;
        c.save_every_steps = options.save_every_steps;
        c.save_every_seconds = options.save_every_seconds;
        c.max_staging_bytes = options.max_staging_bytes;
        if (options.comm) c.comm = options.comm->native();
        failures_ = storage.failures();
        check(ckpt_manager_open(&m_, logdir.c_str(), &c));
    }
    // Closes (waiting for background saves), dropping their errors: call close() to see them.
    ~Manager() {
        ckpt_manager_close(m_);
        detail::forget_callback_failure();
    }
    Manager(Manager&& other) noexcept
        : m_(std::exchange(other.m_, nullptr)),
          callbacks_(std::move(other.callbacks_)),
          failures_(std::move(other.failures_)) {}
    Manager& operator=(Manager&& other) noexcept {
        if (this != &other) {
            ckpt_manager_close(m_);
            m_ = std::exchange(other.m_, nullptr);
            callbacks_ = std::move(other.callbacks_);
            failures_ = std::move(other.failures_);
        }
        return *this;
    }
    Manager(const Manager&) = delete;
    Manager& operator=(const Manager&) = delete;

    ckpt_manager* native() const noexcept { return m_; }
    explicit operator bool() const noexcept { return m_ != nullptr; }

    // Saves vars as checkpoint idx (>= 0), then applies retention. async: the arrays are copied first.
    void save(const Vars& vars, int64_t idx) { check(ckpt_manager_save(m_, vars.native(), idx)); }
    // save(), also recording the metrics in the checkpoint's metadata (for metric(), best() and keep_best).
    void save(const Vars& vars, int64_t idx, const std::vector<Metric>& metrics) {
        std::vector<const char*> names;
        std::vector<double> values;
        names.reserve(metrics.size());
        values.reserve(metrics.size());
        for (const Metric& m : metrics) {
            names.push_back(m.name.c_str());
            values.push_back(m.value);
        }
        check(ckpt_manager_save_metrics(m_, vars.native(), idx, names.data(), values.data(), metrics.size()));
    }
    // The value of metric `name` that checkpoint idx recorded, or nullopt when it records none.
    // Error(CKPT_ENOTFOUND) when there is no checkpoint idx.
    std::optional<double> metric(int64_t idx, const std::string& name) {
        double out = 0;
        const int rc = ckpt_manager_metric(m_, idx, name.c_str(), &out);
        if (rc == CKPT_ENOTFOUND) {
            const std::vector<int64_t> indices = list();
            if (std::binary_search(indices.begin(), indices.end(), idx)) {
                detail::forget_callback_failure();
                return std::nullopt;
            }
        }
        check(rc);
        return out;
    }
    // The checkpoint with the best value of best_metric (ties go to the newer; NaN never is), or nullopt.
    std::optional<int64_t> best() {
        int64_t idx = -1;
        const int rc = ckpt_manager_best(m_, &idx);
        if (rc == CKPT_ENOTFOUND) {
            detail::forget_callback_failure();
            return std::nullopt;
        }
        check(rc);
        return idx;
    }
    // Whether to save at step: after request_save() (consumed by the call that reports it), at multiples of
    // save_every_steps, or once save_every_seconds have passed.
    bool should_save(int64_t step) {
        const int rc = ckpt_manager_should_save(m_, step);
        if (rc < 0) check(rc);
        return rc == 1;
    }
    // Makes the next should_save() true. Async-signal-safe, for a SIGTERM handler: one atomic store.
    void request_save() noexcept { ckpt_manager_request_save(m_); }
    // Restores vars in place from checkpoint idx, or the newest readable one for `latest` (falling back past corrupt
    // files), and returns the index restored. Error(CKPT_ENOTFOUND) when there is no such checkpoint,
    // Error(CKPT_EMISMATCH) naming every missing variable.
    int64_t restore(Vars& vars, int64_t idx = latest) {
        int64_t restored = -1;
        check(ckpt_manager_restore(m_, vars.native(), idx, &restored));
        return restored;
    }
    // restore(vars, latest) for a training program's start: nullopt when there is no checkpoint yet (objax's
    // restore returning 0), the index restored otherwise.
    std::optional<int64_t> resume(Vars& vars) {
        int64_t restored = -1;
        const int rc = ckpt_manager_restore(m_, vars.native(), latest, &restored);
        if (rc == CKPT_ENOTFOUND) {
            detail::forget_callback_failure();
            return std::nullopt;
        }
        check(rc);
        return restored;
    }
    // Reads checkpoint idx (or the newest readable one) into a new collection.
    ReadResult read(int64_t idx = latest) {
        ckpt_vars* out = nullptr;
        int64_t restored = -1;
        check(ckpt_manager_read(m_, idx, &out, &restored));
        return ReadResult{Vars(out), restored};
    }
    // The newest checkpoint index on disk (not validated), or nullopt if there is none.
    std::optional<int64_t> latest_index() {
        int64_t idx = -1;
        const int rc = ckpt_manager_latest(m_, &idx);
        if (rc == CKPT_ENOTFOUND) {
            detail::forget_callback_failure();
            return std::nullopt;
        }
        check(rc);
        return idx;
    }
    // Checkpoint indices, ascending.
    std::vector<int64_t> list() {
        std::vector<int64_t> out(8);
        for (;;) {
            size_t count = 0;
            const int rc = ckpt_manager_list(m_, out.data(), out.size(), &count);
            if (rc == CKPT_EBUFS && count > out.size()) {  // more checkpoints than room: ask again with enough
                out.resize(count);
                continue;
            }
            check(rc);
            out.resize(count);
            return out;
        }
    }
    // The path of checkpoint idx.
    std::string path(int64_t idx) {
        std::string buf(256, '\0');
        for (;;) {
            const int rc = ckpt_manager_path(m_, idx, &buf[0], buf.size());
            if (rc == CKPT_EBUFS && buf.size() < (size_t(1) << 24)) {
                buf.resize(buf.size() * 4);
                continue;
            }
            check(rc);
            buf.resize(std::strlen(buf.c_str()));
            return buf;
        }
    }
    // Waits for background saves; throws the first error not yet reported.
    void wait() { check(ckpt_manager_wait(m_)); }
    // Waits for background saves, unlocks the directory and frees the manager, throwing the first unreported error;
    // the object is empty after, whatever happened.
    void close() {
        const int rc = ckpt_manager_close(std::exchange(m_, nullptr));
        callbacks_.reset();
        std::shared_ptr<detail::StorageFailures> failures = std::move(failures_);
        detail::check(rc, failures.get());
    }

private:
    struct Callbacks {
        detail::NpzCallbacks npz;
        std::function<void(LogLevel, std::string_view)> log;
        explicit Callbacks(const ManagerOptions& o) : npz(o.npz), log(o.log) {}
        static void log_fn(int level, const char* message, void* payload) noexcept {
            try {
                static_cast<Callbacks*>(payload)->log(static_cast<LogLevel>(level), message);
            } catch (...) {
                // A log line cannot fail the work it reports on.
            }
        }
    };

    void check(int rc) { detail::check(rc, failures_.get()); }

    ckpt_manager* m_ = nullptr;
    std::unique_ptr<Callbacks> callbacks_;  // what the manager's callbacks point to, for its whole life
    std::shared_ptr<detail::StorageFailures> failures_;  // what the storage's methods threw
};

// objax's checkpoint_idx: "…/0000000042.npz" -> 42; nullopt if the file name is not a checkpoint's.
inline std::optional<int64_t> checkpoint_idx(const std::string& filename) noexcept {
    const int64_t idx = ckpt_checkpoint_idx(filename.c_str());
    if (idx < 0) return std::nullopt;
    return idx;
}

}  // namespace ckpt

#endif  // CKPT_CKPT_HPP
