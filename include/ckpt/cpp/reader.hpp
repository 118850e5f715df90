// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/reader.hpp — Whole-file saves, reads and restores of checkpoint files (.npz, safetensors), and
 * ckpt::Reader for lazy access to one. Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_READER_HPP
#define CKPT_CPP_READER_HPP

#include <ckpt/cpp/array.hpp>
#include <ckpt/cpp/dtype.hpp>
#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/metadata.hpp>
#include <ckpt/cpp/options.hpp>
#include <ckpt/cpp/vars.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ckpt {

// ------------------------------------------------------------------------------------------------------ npz files

// Saves vars to path as an .npz numpy.load reads, atomically and durably (ckpt_save).
inline void save(const std::string& path, const Vars& vars, const Options& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    detail::check(ckpt_save(path.c_str(), vars.native(), &c.c));
}

// Reads every array of the .npz at path into a new collection, with the file's metadata (ckpt_read).
inline Vars read(const std::string& path, const Options& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    ckpt_vars* out = nullptr;
    detail::check(ckpt_read(&out, path.c_str(), &c.c));
    return Vars(out);
}

// As read() for an .npz held in memory (not retained); messages name the file "<memory>".
inline Vars read_memory(const void* bytes, size_t size, const Options& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, false);
    ckpt_vars* out = nullptr;
    detail::check(ckpt_read_memory(&out, bytes, size, &c.c));
    return Vars(out);
}
// The bytes of a contiguous container (std::vector<char>, std::string, std::vector<std::byte>, …).
template <typename C, typename = std::enable_if_t<std::is_pointer_v<decltype(std::data(std::declval<const C&>()))>>>
inline Vars read_memory(const C& bytes, const Options& options = {}) {
    using E = std::remove_pointer_t<decltype(std::data(bytes))>;
    static_assert(sizeof(E) == 1, "read_memory takes a container of bytes");
    return read_memory(static_cast<const void*>(std::data(bytes)), std::size(bytes), options);
}

// Restores vars in place from the .npz at path (objax's load_var_collection; ckpt_restore): each variable must
// be in the file with the same dtype, itemsize and shape, after options.rename. Error(CKPT_EMISMATCH) lists every
// missing variable and unused name and leaves vars unchanged. The collection's metadata becomes the file's.
inline void restore(const std::string& path, Vars& vars, const Options& options = {}) {
    detail::NpzCallbacks cb(options);
    detail::CNpzOptions c(options, &cb, true);
    detail::check(ckpt_restore(path.c_str(), vars.native(), &c.c));
}

namespace detail {
template <>
struct MetadataGetters<ckpt_reader> {
    static const char* value(const ckpt_reader* h, const char* key) noexcept { return ckpt_reader_metadata(h, key); }
    static size_t count(const ckpt_reader* h) noexcept { return ckpt_reader_metadata_count(h); }
    static const char* key(const ckpt_reader* h, size_t i) noexcept { return ckpt_reader_metadata_key(h, i); }
    static const char* value_at(const ckpt_reader* h, size_t i) noexcept { return ckpt_reader_metadata_value(h, i); }
    static constexpr const char* owner = "ckpt::Reader";
};
}  // namespace detail

// A ckpt_reader: one file opened for lazy access, to load some arrays or inspect it. Opening reads and validates the
// zip directory, every npy header and the metadata; array data is read on demand, its CRC checked.
class Reader : public detail::MetadataReader<Reader, ckpt_reader> {
public:
    explicit Reader(const std::string& path, const Options& options = {})
        : callbacks_(std::make_unique<detail::NpzCallbacks>(options)) {
        detail::CNpzOptions c(options, callbacks_.get(), true);
        detail::check(ckpt_reader_open(&npz_, path.c_str(), &c.c));
    }
    ~Reader() { ckpt_reader_close(npz_); }
    Reader(Reader&& other) noexcept
        : npz_(std::exchange(other.npz_, nullptr)), callbacks_(std::move(other.callbacks_)) {}
    Reader& operator=(Reader&& other) noexcept {
        if (this != &other) {
            ckpt_reader_close(npz_);
            npz_ = std::exchange(other.npz_, nullptr);
            callbacks_ = std::move(other.callbacks_);
        }
        return *this;
    }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    ckpt_reader* native() const noexcept { return npz_; }
    explicit operator bool() const noexcept { return npz_ != nullptr; }
    // Closes the file now; the object is empty after.
    void close() noexcept {
        ckpt_reader_close(npz_);
        npz_ = nullptr;
        callbacks_.reset();
    }

    // Number of arrays (the metadata member and objax's names.npy not counted).
    size_t size() const noexcept { return ckpt_reader_count(npz_); }
    bool empty() const noexcept { return size() == 0; }
    // Accessors of array i, as Vars' (Error(CKPT_ENOTFOUND) out of range). name is borrowed.
    std::string_view name(size_t i) const { return ckpt_reader_name(npz_, at(i)); }
    Dtype dtype(size_t i) const { return static_cast<Dtype>(ckpt_reader_dtype(npz_, at(i))); }
    size_t itemsize(size_t i) const { return ckpt_reader_itemsize(npz_, at(i)); }
    uint32_t ndim(size_t i) const { return ckpt_reader_ndim(npz_, at(i)); }
    Shape shape(size_t i) const {
        const int64_t* s = ckpt_reader_shape(npz_, at(i));
        return Shape(s, s + ckpt_reader_ndim(npz_, i));
    }
    size_t nbytes(size_t i) const { return ckpt_reader_nbytes(npz_, at(i)); }
    // How the file holds array i, for inspection tools: its zip member ("w.npy"; borrowed), stored or deflated,
    // its bytes in the file, its CRC-32, and the file offset of its first data byte (stored arrays; 0 deflated).
    std::string_view member_name(size_t i) const { return ckpt_reader_member_name(npz_, at(i)); }
    Compression compression(size_t i) const { return static_cast<Compression>(ckpt_reader_compression(npz_, at(i))); }
    uint64_t stored_bytes(size_t i) const { return ckpt_reader_stored_bytes(npz_, at(i)); }
    uint32_t crc32(size_t i) const { return ckpt_reader_crc32(npz_, at(i)); }
    uint64_t data_offset(size_t i) const { return ckpt_reader_data_offset(npz_, at(i)); }
    // How array i's data lies in its member (reads give native byte order and C order whatever it is): '<', '>',
    // or '|' where byte order does not apply (single-byte items); and whether it is in Fortran order.
    char byte_order(size_t i) const { return static_cast<char>(ckpt_reader_byte_order(npz_, at(i))); }
    bool fortran_order(size_t i) const { return ckpt_reader_fortran_order(npz_, at(i)) != 0; }
    // The size in bytes of the file (or S3 object) as it was when opened.
    uint64_t file_size() const { return ckpt_reader_file_size(npz_); }
    // The layout the file was read in: Layout::plain or Layout::objax (plain for a safetensors file).
    Layout layout() const { return static_cast<Layout>(ckpt_reader_layout(npz_)); }
    // The file's format, told by its content: Format::npz or Format::safetensors.
    Format format() const { return static_cast<Format>(ckpt_reader_format(npz_)); }
    // The position of name, or nullopt.
    std::optional<size_t> find(const std::string& name) const {
        size_t i = 0;
        if (npz_ == nullptr || name.find('\0') != std::string::npos ||
            ckpt_reader_find(npz_, name.c_str(), &i) != CKPT_OK)
            return std::nullopt;
        return i;
    }
    bool contains(const std::string& name) const { return find(name).has_value(); }
    size_t index(const std::string& name) const {
        if (std::optional<size_t> i = find(name)) return *i;
        throw Error(npz_ == nullptr ? CKPT_EINVAL : CKPT_ENOTFOUND, "ckpt::Reader: no array '" + name + "'");
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (size_t i = 0; i < size(); ++i) out.emplace_back(ckpt_reader_name(npz_, i));
        return out;
    }

    // Reads array i into dst (at least nbytes(i) bytes; ckpt_reader_read_into).
    void read_into(size_t i, void* dst, size_t dst_size) {
        detail::check(ckpt_reader_read_into(npz_, i, dst, dst_size));
    }
    // Reads bytes [offset, offset + size) of array i into dst (ckpt_reader_read_range): pieces of a large array in
    // bounded memory; pieces read in order from byte 0 to the last have the CRC-32 checked at the last.
    void read_range(size_t i, uint64_t offset, void* dst, size_t size) {
        detail::check(ckpt_reader_read_range(npz_, i, offset, dst, size));
    }
    // Items [start, start + size(dst)) of an array (flat, C order) into a range of its element type.
    template <typename C, typename = std::enable_if_t<detail::is_range_v<C>>>
    void read_range(const std::string& name, size_t start, C& dst) {
        using R = detail::range_traits<C>;
        static_assert(!std::is_const_v<typename R::element>, "read_range writes into dst");
        using E = std::remove_cv_t<typename R::element>;
        const size_t i = index(name);
        require_type<E>(i);
        read_range(i, uint64_t{start} * sizeof(E), R::data(dst), R::size(dst) * sizeof(E));
        if constexpr (std::is_same_v<E, bool>)
            detail::require_bools(R::data(dst), R::size(dst), ckpt_reader_name(npz_, i));
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
        if constexpr (std::is_same_v<E, bool>)
            detail::require_bools(R::data(dst), nbytes(i), ckpt_reader_name(npz_, i));
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

    // Array i's bytes without a copy (ckpt_reader_map): read-only, in native byte order and C order, valid until the
    // file is closed (close(), the destructor, or assigning another file to this object) — a view into a mapping of
    // the file for the stored arrays ckpt writes, else decoded once into memory the file keeps. Its CRC-32 is
    // checked at the first call unless the file was opened with Options::map_unverified.
    ArrayView<const unsigned char> map_bytes(size_t i) {
        const void* p = nullptr;
        detail::check(ckpt_reader_map(npz_, at(i), &p));
        return ArrayView<const unsigned char>(static_cast<const unsigned char*>(p), nbytes(i));
    }
    // Every array without a copy (ckpt_reader_map_vars): a collection in file order, with the file's metadata, whose
    // arrays are the file's views — a restore that maps instead of reading. It must not be used after the file is
    // closed. Its arrays may be written only if the file was opened with Options::map_writable (copy-on-write:
    // the file never changes); otherwise writing faults.
    Vars map_vars() {
        ckpt_vars* out = nullptr;
        detail::check(ckpt_reader_map_vars(npz_, &out));
        return Vars(out);
    }
    // An array's items without a copy, as map_bytes; T must be its element type (checked as Vars::get is).
    template <typename T>
    ArrayView<const T> map(const std::string& name) {
        const size_t i = index(name);
        require_type<T>(i);
        const ArrayView<const unsigned char> bytes = map_bytes(i);
        if (!bytes.empty() && reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) != 0)
            throw Error(CKPT_EINVAL, "ckpt::Reader::map: the data of '" + name + "' is not aligned for its type");
        if constexpr (std::is_same_v<T, bool>)
            detail::require_bools(bytes.data(), bytes.size(), ckpt_reader_name(npz_, i));
        return ArrayView<const T>(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
    }

    // The file's metadata, as Vars' (MetadataReader; borrowed until the file is closed).

private:
    template <typename T>
    void require_type(size_t i) const {
        static_assert(is_element_v<T>, "T must be an element type (see ckpt::dtype_of)");
        const Dtype d = static_cast<Dtype>(ckpt_reader_dtype(npz_, i));
        const size_t size = ckpt_reader_itemsize(npz_, i);
        if (d != dtype_of_v<T> || size != sizeof(T))
            throw Error(CKPT_EMISMATCH, std::string("ckpt::Reader: '") + ckpt_reader_name(npz_, i) + "' is " +
                                            detail::dtype_string(d, size) + ", not " +
                                            detail::dtype_string(dtype_of_v<T>, sizeof(T)));
    }
    size_t at(size_t i) const {
        const size_t n = size();
        if (i >= n)
            throw Error(npz_ == nullptr ? CKPT_EINVAL : CKPT_ENOTFOUND,
                        npz_ == nullptr
                            ? std::string("ckpt::Reader: the file is closed")
                            : "ckpt::Reader: no array " + std::to_string(i) + " (" + std::to_string(n) + " arrays)");
        return i;
    }
    ckpt_reader* npz_ = nullptr;
    std::unique_ptr<detail::NpzCallbacks> callbacks_;  // the progress function the open file reports through
};

// Reader under its name before 0.11, when ckpt read .npz files only.
using Npz = Reader;

}  // namespace ckpt

#endif  // CKPT_CPP_READER_HPP
