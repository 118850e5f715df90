// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/metadata.hpp — the metadata accessors that Vars, Reader and Step share.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_METADATA_HPP
#define CKPT_CPP_METADATA_HPP

#include <ckpt/cpp/error.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {
namespace detail {

// The C getters of one handle's metadata, specialized next to each handle (vars.hpp, npz.hpp, step.hpp):
//   static const char* value(const H*, const char* key);   NULL when absent
//   static size_t count(const H*);
//   static const char* key(const H*, size_t i);            NULL out of range
//   static const char* value_at(const H*, size_t i);       NULL out of range
//   static constexpr const char* owner;                    the class named in errors ("ckpt::Vars")
template <typename H>
struct MetadataGetters;

// String key/value pairs in insertion order, read through Handle::native(): one implementation for every handle
// that has them. The string_views are borrowed from the handle (ckpt.h says how long each lives).
template <typename Handle, typename H>
class MetadataReader {
public:
    // The value of key, or nullopt.
    std::optional<std::string_view> metadata(const std::string& key) const {
        const char* value = Getters::value(handle(), key.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string_view(value);
    }
    size_t metadata_count() const noexcept { return Getters::count(handle()); }
    // Key i and its value; Error(CKPT_ENOTFOUND) out of range.
    std::string_view metadata_key(size_t i) const { return present(Getters::key(handle(), i), i); }
    std::string_view metadata_value(size_t i) const { return present(Getters::value_at(handle(), i), i); }
    // Every key/value pair, in order (copies).
    std::vector<std::pair<std::string, std::string>> metadata_items() const {
        std::vector<std::pair<std::string, std::string>> out;
        const size_t n = metadata_count();
        out.reserve(n);
        for (size_t i = 0; i < n; ++i) out.emplace_back(metadata_key(i), metadata_value(i));
        return out;
    }

protected:
    MetadataReader() noexcept = default;
    ~MetadataReader() = default;

private:
    using Getters = MetadataGetters<H>;
    const H* handle() const noexcept { return static_cast<const Handle&>(*this).native(); }
    std::string_view present(const char* s, size_t i) const {
        if (s == nullptr)
            throw Error(CKPT_ENOTFOUND, std::string(Getters::owner) + ": no metadata key " + std::to_string(i) + " (" +
                                            std::to_string(metadata_count()) + " keys)");
        return s;
    }
};

}  // namespace detail
}  // namespace ckpt

#endif  // CKPT_CPP_METADATA_HPP
