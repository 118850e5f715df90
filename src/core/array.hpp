// SPDX-License-Identifier: Apache-2.0
// Array: one named variable's value — dtype, itemsize, shape (int64, C order) and bytes that the array owns
// or borrows from the caller without a copy.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ckpt::core {

// numpy 2 allows 64 dimensions (numpy 1.x: 32); more is refused as malformed.
constexpr size_t kMaxDims = 64;

// Product of the shape times itemsize, or nullopt when a dimension is negative or the product overflows
// (the limit is PTRDIFF_MAX so any size fits every offset type). An empty shape is a scalar: one item.
std::optional<size_t> checked_nbytes(const int64_t* shape, size_t ndim, size_t itemsize);

// Bytes a save pulls from the caller in pieces instead of holding them (ckpt_vars_add_source): fills dst with bytes
// [offset, offset + n) of the array, or throws Error. Saves may ask for a range more than once, in any order.
using ByteSource = std::function<void(uint64_t offset, void* dst, size_t n)>;

class Array {
public:
    // Allocates nbytes, 64-byte aligned. `zero` fills them with zeros; otherwise they are uninitialised
    // (a restore overwrites every byte). Throws Error(invalid) on a bad shape or itemsize.
    static Array allocate(DType dtype, size_t itemsize, std::vector<int64_t> shape, bool zero);
    // Keeps `data` without a copy; the caller keeps it alive.
    static Array borrow(DType dtype, size_t itemsize, std::vector<int64_t> shape, void* data);
    // An owned copy of `data` (nbytes of it).
    static Array copy_of(DType dtype, size_t itemsize, std::vector<int64_t> shape, const void* data);
    // An array whose bytes come from `source` when a save reads them; it holds none (data() is NULL), so nothing
    // can be restored into it.
    static Array from_source(DType dtype, size_t itemsize, std::vector<int64_t> shape,
                             std::shared_ptr<const ByteSource> source);
    // The same array without a copy: borrowing `a`'s bytes, or sharing its source.
    static Array view_of(const Array& a);

    DType dtype() const { return dtype_; }
    size_t itemsize() const { return itemsize_; }
    const std::vector<int64_t>& shape() const { return shape_; }
    size_t nbytes() const { return nbytes_; }
    void* data() const { return data_; }
    // The source of an array made by from_source; NULL for one that holds its bytes.
    const ByteSource* source() const { return source_.get(); }
    // Copies bytes [offset, offset + n) into dst, from the array's memory or its source (which may throw).
    void read(uint64_t offset, void* dst, size_t n) const;

private:
    struct AlignedFree {
        std::align_val_t alignment;  // what the memory was allocated with
        void operator()(unsigned char* p) const;
    };
    Array(DType dtype, size_t itemsize, std::vector<int64_t> shape);

    DType dtype_;
    size_t itemsize_;
    std::vector<int64_t> shape_;
    size_t nbytes_ = 0;
    std::unique_ptr<unsigned char, AlignedFree> owned_;
    void* data_ = nullptr;
    std::shared_ptr<const ByteSource> source_;
};

}  // namespace ckpt::core
