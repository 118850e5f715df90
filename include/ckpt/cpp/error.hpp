// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/error.hpp — the version, ckpt::Error, and how failures cross between C and C++ in both directions.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_ERROR_HPP
#define CKPT_CPP_ERROR_HPP

#include <ckpt/ckpt.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

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
    int code_;
};

namespace detail {

// Throws the Error of a failed C call: its code and ckpt_error_message(), which holds what a callback of this
// binding threw (they hand it over with ckpt_error_set_message).
[[noreturn]] inline void throw_error(int rc) {
    std::string message = ckpt_error_message();
    if (message.empty()) message = ckpt_strerror(rc);
    throw Error(rc, message);
}

inline void check(int rc) {
    if (rc != CKPT_OK) throw_error(rc);
}

// The code and text of the exception being handled, for a callback to hand back to the library. Call only inside
// a catch.
struct Thrown {
    int code;
    const char* text;
};
inline Thrown current_exception(int fallback) noexcept {
    try {
        throw;
    } catch (const Error& e) {
        return Thrown{e.code() < 0 ? e.code() : CKPT_ERROR, e.what()};
    } catch (const std::bad_alloc&) {
        return Thrown{CKPT_ENOMEM, "out of memory"};
    } catch (const std::exception& e) {
        return Thrown{fallback, e.what()};
    } catch (...) {
        return Thrown{fallback, "an exception not derived from std::exception"};
    }
}

// Maps the exception being handled to a code for the C caller and gives its text to the library
// (ckpt_error_set_message), which puts it in the error of the ckpt call that made the callback — on whatever
// thread the callback ran. Call only inside a catch. It is C++'s ckpt_error_set: a callback written in C++ throws,
// and this returns the code that ckpt_error_set(code, message) would.
inline int current_exception_code(int fallback) noexcept {
    const Thrown t = current_exception(fallback);
    ckpt_error_set_message(t.text);
    return t.code;
}

}  // namespace detail

}  // namespace ckpt

#endif  // CKPT_CPP_ERROR_HPP
