// SPDX-License-Identifier: Apache-2.0
// Statistics of arrays read piece by piece, so memory does not grow with their size: min, max, mean and standard
// deviation of the finite elements with NaN and infinities counted (ckpt stats, ckpt report), numpy's 64-bin
// histogram (ckpt report, ckpt show --hist), and the reader of an array's pieces they are fed from.
#pragma once

#include "failure.hpp"
#include "progress.hpp"
#include "values.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace ckpt_tool {

// The bytes the commands read of an array at a time (rounded down to whole items).
constexpr size_t kPieceBytes = size_t{8} << 20;

// How element i of the items at p is read as a double: inlined for the common real types, through real_fn (as
// exact) for the other booleans, integers and reals. The vector passes (array_stats.cpp) load four at a time with
// the same types.
struct LoadFloat32 {
    double operator()(const unsigned char* p, uint64_t i) const {
        float x;
        std::memcpy(&x, p + i * 4, 4);
        return x;
    }
};
struct LoadFloat64 {
    double operator()(const unsigned char* p, uint64_t i) const {
        double x;
        std::memcpy(&x, p + i * 8, 8);
        return x;
    }
};
struct LoadBFloat16 {  // the top half of a float32
    double operator()(const unsigned char* p, uint64_t i) const {
        uint16_t bits;
        std::memcpy(&bits, p + i * 2, 2);
        const uint32_t wide = static_cast<uint32_t>(bits) << 16;
        float x;
        std::memcpy(&x, &wide, 4);
        return x;
    }
};
struct LoadOther {
    RealFn get;
    size_t size;
    double operator()(const unsigned char* p, uint64_t i) const { return get(p + i * size); }
};

// Calls f(load) once with the load for `dtype` and returns what it returns: the loops in f are compiled once per
// type, the dtype looked at once per call rather than per element. Always inlined, so that f is compiled for the
// target of its caller (the vector passes' AVX2 clones).
template <typename F>
inline __attribute__((always_inline)) decltype(auto) with_reader(uint32_t dtype, F&& f) {
    switch (dtype) {
        case CKPT_FLOAT32: return f(LoadFloat32{});
        case CKPT_FLOAT64: return f(LoadFloat64{});
        case CKPT_BFLOAT16: return f(LoadBFloat16{});
        default: return f(LoadOther{real_fn(dtype), ckpt_dtype_size(dtype)});
    }
}

// Calls f(i, x) for every element i of v, x its value as a double (v's kind is boolean, integer or real).
template <typename F>
void for_each_value(const ArrayView& v, F&& f) {
    const uint64_t n = v.count();
    with_reader(v.dtype, [&](auto load) {
        for (uint64_t i = 0; i < n; ++i) f(i, load(v.data, i));
    });
}

// What the change map needs of an array in a checkpoint, piece by piece: how many elements are NaN and infinite,
// and the sum of squares of the finite ones (its L2 norm, squared).
struct Moments {
    uint64_t nan = 0, inf = 0;
    double sum_squares = 0;
    void add_piece(const ArrayView& v);
};

// How two pieces of one array in two checkpoints (same dtype, same length) differ where both are finite: the sum
// of squared differences and the largest absolute difference.
struct Difference {
    double diff_squares = 0, max_abs = 0;
    void add_pieces(const ArrayView& a, const ArrayView& b);
};

// Whether an array of this dtype gets statistics: booleans, integers and reals (not complex, strings or raw bytes).
inline bool has_statistics(uint32_t dtype) {
    const Kind k = kind_of(dtype);
    return k != Kind::complex && k != Kind::text;
}

// The statistics of one array, gathered piece by piece: counts, the extremes, and the mean and sum of squared
// deviations of the finite elements, blocks of kBlock elements merged as Chan, Golub and LeVeque do (each block's
// own in two passes, so a large offset costs no precision). The blocks are the same whatever the pieces, as each
// of PieceReader's pieces but the last holds a whole number of blocks: every command that reads an array prints the
// same digits. Arrays without statistics (complex, text) count only their elements. Real blocks take vector passes
// (array_stats.cpp); integers are read one by one, exactly.
struct Stats {
    Kind kind = Kind::real;
    uint64_t elements = 0, finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
    double min = 0, max = 0;      // of the finite elements (reals)
    Real real_min, real_max;      // the same elements as their type holds them, to print them in its shortest form
    int64_t smin = 0, smax = 0;   // exact, for signed integers
    uint64_t umin = 0, umax = 0;  // exact, for booleans and unsigned integers
    double mean = 0, m2 = 0;
    double sum_squares = 0;  // of the finite elements: the squared L2 norm the change map takes

    static constexpr uint64_t kBlock = 4096;

    explicit Stats(uint32_t dtype = CKPT_FLOAT64) : kind(kind_of(dtype)) {}
    void add_piece(const ArrayView& v);
    void merge(uint64_t count, double piece_mean, double piece_m2);
    bool numeric() const { return kind != Kind::complex && kind != Kind::text; }
    double std_dev() const { return finite == 0 ? 0 : std::sqrt(m2 / static_cast<double>(finite)); }
    // What the change map needs of the same array (Moments), gathered on the way.
    Moments moments() const { return {nan, pos_inf + neg_inf, sum_squares}; }
    // elements, finite, min, max, mean, std, nan, pos_inf, neg_inf, zeros: the statistics of `ckpt stats --json`
    // (docs/cli.md), null where the array has no numbers or no finite element.
    Json to_json() const;
    // min or max as JSON (exact integers for integer arrays), null without finite elements.
    Json extreme_json(bool maximum) const;
    // min or max as text: integers exactly, booleans True/False, reals in their own type's shortest form.
    std::string extreme_text(bool maximum) const;

private:
    void add_block(const ArrayView& v);
};

// numpy.histogram(x, bins=64) of the finite elements x of an array taken as float64 values: 64 equal bins from
// the smallest to the largest (one unit wide around a single value), the last bin closed, edges and bin indices
// worked out as numpy does, so the counts are numpy's exactly.
class Histogram {
public:
    static constexpr int kBins = 64;
    Histogram(double min, double max);
    void add_piece(const ArrayView& v);
    const std::array<uint64_t, kBins>& counts() const { return counts_; }
    Json to_json() const;

    // The bin of x in [edge(0), edge(kBins)], numpy's exactly: (x - edge(0)) * norm() truncated, then moved to the
    // side of the edges x is on.
    int bin_of(double x) const;
    double edge(int i) const { return edges_[i]; }
    double norm() const { return norm_; }
    // How near a whole number (x - edge(0)) * norm() may lie before rounding could put it on the wrong side of an
    // edge: further away, the truncation is the bin.
    double margin() const { return margin_; }

private:
    std::array<double, kBins + 1> edges_{};
    std::array<uint64_t, kBins> counts_{};
    double norm_ = 0, margin_ = 0;
};

// Array i of an open file, read in order a piece of about `piece_bytes` at a time (whole items; for an array with
// statistics, whole blocks of Stats::kBlock items, at least one) with ckpt_reader_read_range, into a buffer of its own;
// its CRC-32 is checked at the last piece. A Fortran-order array, which is not read in ranges, is read whole once (in C
// order) and handed out in the same pieces. An empty array is one empty piece. Failures throw a Failure naming `path`.
class PieceReader {
public:
    PieceReader(ckpt_reader* reader, size_t i, std::string path, size_t piece_bytes);
    // Points `piece` at the next piece (valid until the next call); false after the last.
    bool next(ArrayView& piece);

private:
    unsigned char* buffer(size_t size);
    ckpt_reader* reader_;
    size_t index_;
    std::string path_;
    ArrayView view_;
    uint64_t nbytes_ = 0, at_ = 0;
    size_t piece_ = 0;
    bool started_ = false, whole_ = false;
    std::vector<unsigned char> bytes_;
};

// Calls f with each piece of array i of an open file in order (PieceReader's pieces of about piece_bytes).
void read_pieces(ckpt_reader* reader, size_t i, const std::string& path, size_t piece_bytes,
                 const std::function<void(const ArrayView&)>& f);

// The index of the array `name` of an open file; a Failure naming the file and the arrays it has when it has none
// of that name.
size_t array_index(ckpt_reader* reader, const std::string& name, const std::string& path);

// The statistics of array i of an open file, in one pass (progress advanced by the bytes read).
Stats array_stats(ckpt_reader* reader, size_t i, const std::string& path, Progress& progress);
// Its histogram, in a second pass over the array, from the statistics of the first (which must have finite
// elements: without, numpy has no range to divide and the report shows none).
Histogram array_histogram(ckpt_reader* reader, size_t i, const std::string& path, const Stats& stats,
                          Progress& progress);

}  // namespace ckpt_tool
