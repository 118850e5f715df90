// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/array.hpp — Shapes, ckpt::ArrayView and the contiguous ranges Vars and Reader take.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_ARRAY_HPP
#define CKPT_CPP_ARRAY_HPP

#include <ckpt/cpp/dtype.hpp>
#include <ckpt/cpp/error.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
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

}  // namespace ckpt

#endif  // CKPT_CPP_ARRAY_HPP
