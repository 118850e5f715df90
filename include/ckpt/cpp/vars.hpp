// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/vars.hpp — ckpt::Vars, the collection of named arrays (ckpt_vars).
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_VARS_HPP
#define CKPT_CPP_VARS_HPP

#include <ckpt/cpp/array.hpp>
#include <ckpt/cpp/dtype.hpp>
#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/metadata.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ckpt {

// ---------------------------------------------------------------------------------------- variable collections

// How Vars::add keeps the caller's bytes: CKPT_VARS_COPY or CKPT_VARS_BORROW.
enum class Ownership : uint32_t {
    copy = CKPT_VARS_COPY,
    borrow = CKPT_VARS_BORROW,
};

namespace detail {
template <>
struct MetadataGetters<ckpt_vars> {
    static const char* value(const ckpt_vars* h, const char* key) noexcept { return ckpt_vars_metadata(h, key); }
    static size_t count(const ckpt_vars* h) noexcept { return ckpt_vars_metadata_count(h); }
    static const char* key(const ckpt_vars* h, size_t i) noexcept { return ckpt_vars_metadata_key(h, i); }
    static const char* value_at(const ckpt_vars* h, size_t i) noexcept { return ckpt_vars_metadata_value(h, i); }
    static constexpr const char* owner = "ckpt::Vars";
};
}  // namespace detail

// A ckpt_vars: an ordered collection of named arrays, and string metadata about them. Names are unique and
// non-empty, other than "__ckpt_metadata__"; insertion order is the save order.
//
// add() copies the caller's data; borrow() keeps a pointer to it — no copy is made, the data must outlive every use
// of the collection (a std::vector must not reallocate), and restores write straight back into it. Element types
// say the dtype (dtype_of); a range's natural shape is its length (C arrays: their extents) unless a shape is given,
// whose item count must then equal the range's.
class Vars : public detail::MetadataReader<Vars, ckpt_vars> {
public:
    // A new empty collection.
    Vars() { detail::check(ckpt_vars_new(&v_)); }
    // Takes ownership of a collection made through the C API (it is freed with this object).
    explicit Vars(ckpt_vars* owned) noexcept : v_(owned) {}
    ~Vars() { ckpt_vars_free(v_); }
    Vars(Vars&& other) noexcept : v_(std::exchange(other.v_, nullptr)), sources_(std::move(other.sources_)) {}
    Vars& operator=(Vars&& other) noexcept {
        if (this != &other) {
            ckpt_vars_free(v_);
            v_ = std::exchange(other.v_, nullptr);
            sources_ = std::move(other.sources_);
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
    // Fills dst with bytes [offset, offset + size) of a source's array; throws to fail the save.
    using Source = std::function<void(uint64_t offset, void* dst, size_t size)>;
    // An array whose bytes a save pulls from `source` a few MiB at a time (ckpt_vars_add_source: ranges may be asked
    // for more than once; calls are never concurrent within a save). The collection keeps `source`. What it throws
    // fails the save, with its message. itemsize: as add's.
    void add_source(const std::string& name, Dtype dtype, const Shape& shape, Source source, size_t itemsize = 0) {
        const uint32_t ndim = detail::ndim_of(shape, "ckpt::Vars::add_source");
        auto owned = std::make_unique<Source>(std::move(source));
        detail::check(ckpt_vars_add_source(v_, name.c_str(), static_cast<uint32_t>(dtype), itemsize, ndim,
                                           shape.data(), &Vars::call_source, owned.get()));
        sources_.push_back(std::move(owned));
    }
    // Whether array i is a source (ckpt_vars_is_source).
    bool is_source(size_t i) const noexcept { return ckpt_vars_is_source(v_, i) == 1; }
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
    // (Options::partial) did not find in the file, for every array after a failed restore and before any.
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
    // metadata(key), metadata_count(), metadata_key(i), metadata_value(i), metadata_items() (MetadataReader):
    // the values are borrowed until their key is set or removed or the collection destroyed.

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
    static int call_source(void* payload, uint64_t offset, void* dst, size_t size) noexcept {
        try {
            (*static_cast<Source*>(payload))(offset, dst, size);
            return CKPT_OK;
        } catch (...) {
            const detail::Thrown t = detail::current_exception(CKPT_ERROR);
            ckpt_error_set_message(t.text);
            return t.code;
        }
    }

    ckpt_vars* v_ = nullptr;
    std::vector<std::unique_ptr<Source>> sources_;  // what add_source's arrays read
};

}  // namespace ckpt

#endif  // CKPT_CPP_VARS_HPP
