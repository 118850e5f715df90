// SPDX-License-Identifier: Apache-2.0
// The C boundary: handle structs, and the one guard every extern "C" body runs through so that no exception
// crosses into C and every failure leaves a message for ckpt_error_message().
#pragma once

#include "ckpt/ckpt.h"
#include "core/error.hpp"
#include "mirrored_enums.hpp"
#include "container/container.hpp"
#include "npz/npz_reader.hpp"
#include "npz/npz_writer.hpp"
#include "storage/storage.hpp"
#include "core/var_collection.hpp"

#include <memory>
#include <new>
#include <string>
#include <type_traits>

struct ckpt_vars {
    ckpt::core::VarCollection vc;
};

struct ckpt_reader {
    std::shared_ptr<ckpt::core::Storage> storage;  // kept alive as long as the file read through it
    std::unique_ptr<ckpt::core::Container> file;   // an .npz or safetensors file; destroyed first
};

struct ckpt_storage {
    std::shared_ptr<ckpt::core::Storage> storage;
};

namespace ckpt::capi {

// capi/ is the core's C face: its code names the core's types and functions as its own.
using namespace ckpt::core;

void set_error(const char* message) noexcept;

// Forgets a message a callback left with ckpt_error_set_message and never failed after: each ckpt call starts
// without one, so a stale message never explains a later failure.
void forget_callback_message() noexcept;
// Takes the message a failing callback left with ckpt_error_set_message ("" when it left none).
std::string take_callback_message();

// Throws the Error of a user callback that returned rc != CKPT_OK: its code (CKPT_ERROR for a positive one), and
// "<what> failed: <message>", `what` naming the callback ("<path>: storage callback 'write'") and <message> the
// callback's own (ckpt_error_set_message on this thread), or "<strerror> (<rc>)" when it left none.
[[noreturn]] void callback_failed(int rc, const std::string& what);

// What shape getters return for 0-d arrays: a valid pointer, never read.
inline constexpr int64_t kNoDims[1] = {0};

// Runs body (returning void) and maps what it throws to a CKPT_* code.
template <typename Body>
int guard(Body&& body) noexcept {
    forget_callback_message();
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

// The storage an option names: the caller's, or the local filesystem for NULL.
std::shared_ptr<Storage> storage_of(const ckpt_storage* s);

// The caller's ckpt_options (NULL = defaults), checked; fields beyond opts->version are defaults.
ckpt_options checked_options(const ckpt_options* opts, const char* function);

// The core's write options, read options and renamer from checked C options.
ContainerWriteOptions write_options(const ckpt_options& o);
// `reads_all`: the caller reads every member (a restore), so the file's start is read ahead while it opens.
ContainerReadOptions read_options(const ckpt_options& o, bool reads_all = false);
Renamer renamer(const ckpt_options& o);

// Borrowed C strings of a Metadata: the value of key (NULL for a NULL or absent key), key i, value i (NULL out of
// range).
inline const char* metadata_value(const Metadata& m, const char* key) {
    if (key == nullptr) return nullptr;
    const std::string* v = m.find(key);
    return v != nullptr ? v->c_str() : nullptr;
}
inline const char* metadata_key(const Metadata& m, size_t i) { return i < m.size() ? m.key(i).c_str() : nullptr; }
inline const char* metadata_value_at(const Metadata& m, size_t i) { return i < m.size() ? m.value(i).c_str() : nullptr; }

// Throws Error(invalid) naming the argument when p is NULL.
inline void require(const void* p, const char* function, const char* argument) {
    if (p == nullptr) fail(Code::invalid, "{}: {} is NULL", function, argument);
}

}  // namespace ckpt::capi
