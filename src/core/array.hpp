// Array: one named variable's value — dtype, itemsize, shape (int64, C order) and bytes that the array owns
// or borrows from the caller without a copy.
#pragma once

#include "npy/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ckpt {

// numpy 2 allows 64 dimensions (numpy 1.x: 32); more is refused as malformed.
constexpr size_t kMaxDims = 64;

// Product of the shape times itemsize, or nullopt when a dimension is negative or the product overflows
// (the limit is PTRDIFF_MAX so any size fits every offset type). An empty shape is a scalar: one item.
std::optional<size_t> checked_nbytes(const int64_t* shape, size_t ndim, size_t itemsize);

class Array {
public:
    // Allocates nbytes, 64-byte aligned. `zero` fills them with zeros; otherwise they are uninitialised
    // (a restore overwrites every byte). Throws Error(invalid) on a bad shape or itemsize.
    static Array allocate(DType dtype, size_t itemsize, std::vector<int64_t> shape, bool zero);
    // Keeps `data` without a copy; the caller keeps it alive.
    static Array borrow(DType dtype, size_t itemsize, std::vector<int64_t> shape, void* data);
    // An owned copy of `data` (nbytes of it).
    static Array copy_of(DType dtype, size_t itemsize, std::vector<int64_t> shape, const void* data);

    DType dtype() const { return dtype_; }
    size_t itemsize() const { return itemsize_; }
    const std::vector<int64_t>& shape() const { return shape_; }
    size_t nbytes() const { return nbytes_; }
    void* data() const { return data_; }

private:
    struct AlignedFree {
        void operator()(unsigned char* p) const;
    };
    Array(DType dtype, size_t itemsize, std::vector<int64_t> shape);

    DType dtype_;
    size_t itemsize_;
    std::vector<int64_t> shape_;
    size_t nbytes_ = 0;
    std::unique_ptr<unsigned char, AlignedFree> owned_;
    void* data_ = nullptr;
};

}  // namespace ckpt
