// The C boundary: handle structs, and the one guard every extern "C" body runs through so that no exception
// crosses into C and every failure leaves a message for ckpt_error_message().
#pragma once

#include "ckpt/ckpt.h"
#include "error.hpp"
#include "npz_reader.hpp"
#include "var_collection.hpp"

#include <new>
#include <string>
#include <type_traits>

struct ckpt_vars {
    ckpt::VarCollection vc;
};

struct ckpt_npz {
    ckpt::NpzReader reader;
};

namespace ckpt::capi {

void set_error(const char* message) noexcept;

// What shape getters return for 0-d arrays: a valid pointer, never read.
inline constexpr int64_t kNoDims[1] = {0};

// Runs body (returning void) and maps what it throws to a CKPT_* code.
template <typename Body>
int guard(Body&& body) noexcept {
    try {
        body();
        return CKPT_OK;
    } catch (const Error& e) {
        set_error(e.what());
        return static_cast<int>(e.code());
    } catch (const std::bad_alloc&) {
        set_error("out of memory");
        return CKPT_ENOMEM;
    } catch (const std::exception& e) {
        set_error(e.what());
        return CKPT_ERROR;
    } catch (...) {
        set_error("unexpected internal failure");
        return CKPT_ERROR;
    }
}

// Throws Error(invalid) naming the argument when p is NULL.
inline void require(const void* p, const char* function, const char* argument) {
    if (p == nullptr) fail(Code::invalid, "{}: {} is NULL", function, argument);
}

}  // namespace ckpt::capi
