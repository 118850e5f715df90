// SPDX-License-Identifier: Apache-2.0
// The versioned structs of the C API (ckpt_options, ckpt_manager_options, ckpt_writer_options,
// ckpt_storage_ops, ckpt_s3_options): each starts with its version, and a caller built against an older header
// passes an older, shorter struct. One rule for all of them: only the bytes the caller's version has are read or
// written, and the fields it lacks take their defaults. Header-only and dependency-free: libckpt_s3 uses it too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace ckpt::capi {

// The layout of versions 1..N of struct T: sizes[v - 1] is the size of version v, which is the offset of the first
// field version v + 1 added (sizeof(T) for the current one).
template <typename T, size_t N>
struct VersionedStruct {
    static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>);
    std::array<size_t, N> sizes;

    static constexpr uint32_t current = N;
    static constexpr bool known(uint32_t version) { return version >= 1 && version <= N; }

    // Sets version `version` (known) of *out to `defaults`, writing only the bytes of that version.
    void init(T* out, uint32_t version, const T& defaults) const {
        std::memcpy(static_cast<void*>(out), &defaults, sizes[version - 1]);
        out->version = version;
    }
    // The current version of a caller's struct (of a known version): `defaults` overlaid with the bytes of the
    // caller's version, never more.
    T upgrade(const T& in, const T& defaults) const {
        T out = defaults;
        std::memcpy(static_cast<void*>(&out), &in, sizes[in.version - 1]);
        out.version = current;
        return out;
    }
    // Whether the sizes describe T: ascending, the last sizeof(T).
    constexpr bool consistent() const {
        for (size_t v = 1; v < N; ++v)
            if (sizes[v - 1] == 0 || sizes[v - 1] >= sizes[v]) return false;
        return sizes[N - 1] == sizeof(T);
    }
};

// "<function>: <what> version <version> is not supported (1..<current>)"; `what` may be "".
inline std::string unknown_version(const char* function, const std::string& what, uint32_t version, uint32_t current) {
    return std::string(function) + ": " + what + (what.empty() ? "" : " ") + "version " + std::to_string(version) +
           " is not supported (1.." + std::to_string(current) + ")";
}

}  // namespace ckpt::capi
