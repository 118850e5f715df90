// SPDX-License-Identifier: Apache-2.0
#include "array_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>

namespace ckpt_tool {

namespace {

// The passes over a piece that every report makes, written with GCC's vector types: four doubles at a time, no
// branches per element (selects where elements are left out). Each is compiled twice, for AVX2 and for any x86-64 (then
// as pairs of SSE2 registers), and the machine's is picked when the program starts. Sums are double whatever the
// element type. Element types without a vector load (float16, float8, integers) run the same code a lane at a time.
using Doubles = double __attribute__((vector_size(32)));
using Mask = int64_t __attribute__((vector_size(32)));
using Floats = float __attribute__((vector_size(16)));
using Halves = uint16_t __attribute__((vector_size(8)));
using Words = uint32_t __attribute__((vector_size(16)));
using Ints = int32_t __attribute__((vector_size(16)));
constexpr int kLanes = 4;

inline Doubles splat(double x) { return Doubles{x, x, x, x}; }
inline double lane_sum(Doubles v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline double lane_min(Doubles v) { return std::min(std::min(v[0], v[1]), std::min(v[2], v[3])); }
inline double lane_max(Doubles v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }
// Four elements as Doubles, for each of the loads of array_stats.hpp.
// (Floats widened lane by lane: GCC 12 makes __builtin_convertvector two half conversions through the stack.)
inline Doubles four(LoadFloat32, const unsigned char* p, uint64_t i) {
    Floats x;
    std::memcpy(&x, p + i * 4, sizeof x);
    return Doubles{x[0], x[1], x[2], x[3]};
}
inline Doubles four(LoadFloat64, const unsigned char* p, uint64_t i) {
    Doubles x;
    std::memcpy(&x, p + i * 8, sizeof x);
    return x;
}
inline Doubles four(LoadBFloat16, const unsigned char* p, uint64_t i) {
    Halves bits;
    std::memcpy(&bits, p + i * 2, sizeof bits);
    const Words wide = __builtin_convertvector(bits, Words) << 16;
    Floats x;
    std::memcpy(&x, &wide, sizeof x);
    return Doubles{x[0], x[1], x[2], x[3]};
}
inline Doubles four(const LoadOther& load, const unsigned char* p, uint64_t i) {  // a lane at a time
    return Doubles{load(p, i), load(p, i + 1), load(p, i + 2), load(p, i + 3)};
}
// The bytes of an element each load reads.
constexpr size_t sizeof_load(LoadFloat32) { return 4; }
constexpr size_t sizeof_load(LoadFloat64) { return 8; }
constexpr size_t sizeof_load(LoadBFloat16) { return 2; }
inline size_t sizeof_load(const LoadOther& load) { return load.size; }

// Over the finite elements of a piece: how many, their sum, sum of squares, zeros, minimum and maximum.
struct PieceSums {
    double finite = 0, sum = 0, sum_squares = 0, zeros = 0;
    double min = HUGE_VAL, max = -HUGE_VAL;
};

// Each pass comes twice. The plain one takes a piece's elements by sixteen with no selects, in four sets of
// sums (one would wait on each addition before the next), and trusts a finite sum of squares to mean that every
// element was finite (a NaN or an infinity makes it NaN or infinite; so does a square too large for a double, which
// the masked pass then leaves out as it must). The masked one leaves out the elements that are not finite: it
// takes a piece whose plain sum was not finite, and the last elements short of sixteen.

// Calls step(x) for each four elements as Doubles (the last ones padded with NaN, which every masked pass skips).
template <typename Load, typename Step>
inline __attribute__((always_inline)) void each_four(const unsigned char* p, uint64_t n, Load load, Step step) {
    uint64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) step(four(load, p, i));
    if (i == n) return;
    Doubles tail = splat(std::nan(""));
    for (int k = 0; i < n; ++i, ++k) tail[k] = load(p, i);
    step(tail);
}

// The elements of a piece the plain passes take: n rounded down to a multiple of kWide, in kSets sets of sums.
constexpr int kSets = 4;
constexpr uint64_t kWide = kSets * kLanes;
inline uint64_t whole_wide(uint64_t n) { return n - n % kWide; }
// Calls step(set, x) for each four of elements [0, whole) as Doubles, the fours taken in turn by the kSets sets.
template <typename Load, typename Step>
inline __attribute__((always_inline)) void each_wide(const unsigned char* p, uint64_t whole, Load load, Step step) {
    for (uint64_t i = 0; i < whole; i += kWide) {
#pragma GCC unroll 4
        for (int j = 0; j < kSets; ++j) step(j, four(load, p, i + j * kLanes));
    }
}
inline Doubles sum_sets(const Doubles (&v)[kSets]) { return (v[0] + v[1]) + (v[2] + v[3]); }

inline PieceSums operator+(const PieceSums& a, const PieceSums& b) {
    return {a.finite + b.finite, a.sum + b.sum,          a.sum_squares + b.sum_squares,
            a.zeros + b.zeros,   std::min(a.min, b.min), std::max(a.max, b.max)};
}

template <typename Load>
inline __attribute__((always_inline)) PieceSums masked_sums(const unsigned char* p, uint64_t n, Load load) {
    Doubles count{}, sum{}, squares{}, zeros{}, lo = splat(HUGE_VAL), hi = splat(-HUGE_VAL);
    const Doubles zero{}, one = splat(1), inf = splat(HUGE_VAL), minus_inf = splat(-HUGE_VAL);
    each_four(p, n, load, [&](Doubles x) {
        const Mask finite = (x - x) == zero;  // false for NaN and infinities
        const Doubles v = finite ? x : zero;
        count += finite ? one : zero;
        sum += v;
        squares += v * v;
        zeros += x == zero ? one : zero;
        const Doubles low = finite ? x : inf, high = finite ? x : minus_inf;
        lo = low < lo ? low : lo;
        hi = high > hi ? high : hi;
    });
    return {lane_sum(count), lane_sum(sum), lane_sum(squares), lane_sum(zeros), lane_min(lo), lane_max(hi)};
}

template <typename Load>
inline __attribute__((always_inline)) PieceSums sums_lanes(const unsigned char* p, uint64_t n, Load load) {
    const uint64_t whole = whole_wide(n);
    Doubles sum[kSets]{}, squares[kSets]{}, zeros[kSets]{}, lo = splat(HUGE_VAL), hi = splat(-HUGE_VAL);
    const Doubles zero{}, one = splat(1);
    each_wide(p, whole, load, [&](int j, Doubles x) {
        sum[j] += x;
        squares[j] += x * x;
        zeros[j] += x == zero ? one : zero;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    });
    const PieceSums plain{static_cast<double>(whole),
                          lane_sum(sum_sets(sum)),
                          lane_sum(sum_sets(squares)),
                          lane_sum(sum_sets(zeros)),
                          lane_min(lo),
                          lane_max(hi)};
    if (!std::isfinite(plain.sum_squares) || !std::isfinite(plain.sum)) return masked_sums(p, n, load);
    return whole == n ? plain : plain + masked_sums(p + whole * sizeof_load(load), n - whole, load);
}

// Over the finite elements of a piece: how many, and the sum of their squares.
template <typename Load>
inline __attribute__((always_inline)) void masked_squares(const unsigned char* p, uint64_t n, Load load, double& finite,
                                                          double& squares) {
    Doubles count{}, acc{};
    const Doubles zero{}, one = splat(1);
    each_four(p, n, load, [&](Doubles x) {
        const Mask is_finite = (x - x) == zero;
        const Doubles v = is_finite ? x : zero;
        count += is_finite ? one : zero;
        acc += v * v;
    });
    finite += lane_sum(count);
    squares += lane_sum(acc);
}

template <typename Load>
inline __attribute__((always_inline)) void squares_lanes(const unsigned char* p, uint64_t n, Load load, double& finite,
                                                         double& squares) {
    const uint64_t whole = whole_wide(n);
    Doubles acc[kSets]{};
    each_wide(p, whole, load, [&](int j, Doubles x) { acc[j] += x * x; });
    const double plain = lane_sum(sum_sets(acc));
    if (!std::isfinite(plain)) return masked_squares(p, n, load, finite, squares);
    finite += static_cast<double>(whole);
    squares += plain;
    if (whole != n) masked_squares(p + whole * sizeof_load(load), n - whole, load, finite, squares);
}

// The sum of (x - mean)^2 over the finite elements; `all_finite` when the piece is known to have no others.
template <typename Load>
inline __attribute__((always_inline)) double deviations_lanes(const unsigned char* p, uint64_t n, double mean,
                                                              bool all_finite, Load load) {
    Doubles acc[kSets]{};
    const Doubles zero{}, m = splat(mean);
    const uint64_t whole = all_finite ? whole_wide(n) : 0;
    each_wide(p, whole, load, [&](int j, Doubles x) {
        const Doubles d = x - m;
        acc[j] += d * d;
    });
    each_four(p + whole * sizeof_load(load), n - whole, load, [&](Doubles x) {
        const Doubles d = (x - x) == zero ? x - m : zero;
        acc[0] += d * d;
    });
    return lane_sum(sum_sets(acc));
}

// Over the elements where b - a is finite: the sum of (b - a)^2 and the largest |b - a|.
template <typename Load>
inline __attribute__((always_inline)) void masked_difference(const unsigned char* a, const unsigned char* b, uint64_t n,
                                                             Load load, double& squares, double& top) {
    Doubles acc{}, largest{};
    const Doubles zero{};
    uint64_t i = 0;
    const auto step = [&](Doubles d) {
        const Doubles v = (d - d) == zero ? d : zero;  // where either side is not finite, neither is d
        acc += v * v;
        const Doubles magnitude = v < zero ? -v : v;
        largest = magnitude > largest ? magnitude : largest;
    };
    for (; i + kLanes <= n; i += kLanes) step(four(load, b, i) - four(load, a, i));
    Doubles tail{};
    for (int k = 0; i < n; ++i, ++k) tail[k] = load(b, i) - load(a, i);
    step(tail);
    squares += lane_sum(acc);
    top = std::max(top, lane_max(largest));
}

template <typename Load>
inline __attribute__((always_inline)) void difference_lanes(const unsigned char* a, const unsigned char* b, uint64_t n,
                                                            Load load, double& squares, double& top) {
    const uint64_t whole = whole_wide(n);
    Doubles acc[kSets]{}, largest[kSets]{};
    const Mask no_sign = ~Mask{} ^ (Mask{} + INT64_MIN);  // every bit but the sign's
    for (uint64_t i = 0; i < whole; i += kWide) {
#pragma GCC unroll 4
        for (int j = 0; j < kSets; ++j) {
            const Doubles d = four(load, b, i + j * kLanes) - four(load, a, i + j * kLanes);
            acc[j] += d * d;
            const Doubles magnitude = reinterpret_cast<Doubles>(reinterpret_cast<Mask>(d) & no_sign);
            largest[j] = magnitude > largest[j] ? magnitude : largest[j];
        }
    }
    const double plain = lane_sum(sum_sets(acc));
    if (!std::isfinite(plain)) return masked_difference(a, b, n, load, squares, top);
    squares += plain;
    for (const Doubles& l : largest) top = std::max(top, lane_max(l));
    const size_t skip = whole * sizeof_load(load);
    if (whole != n) masked_difference(a + skip, b + skip, n - whole, load, squares, top);
}

// numpy's bins of the elements of a piece in [first, last], counted in four tables (one per lane, so that runs of
// elements in one bin do not wait on each other's increments). (x - first) * norm truncated is an element's bin
// wherever it lies further than h.margin() from a whole number: it and numpy's edges are each within a few units in
// the last place of the exact values, which the margin bounds. Sixteen elements with one nearer an edge (or
// outside the range, or not finite) take Histogram::bin_of's exact checks.
template <typename Load>
inline __attribute__((always_inline)) void bins_lanes(const Histogram& h, const unsigned char* p, uint64_t n, Load load,
                                                      uint64_t (&tables)[4][Histogram::kBins]) {
    const double lo = h.edge(0), hi = h.edge(Histogram::kBins);
    const auto exact = [&](int k, double x) {
        if (x >= lo && x <= hi) ++tables[k][h.bin_of(x)];  // not NaN, not infinite
    };
    const Doubles first = splat(lo), norm = splat(h.norm()), zero{}, bins = splat(Histogram::kBins),
                  below = splat(h.margin()), above = splat(1 - h.margin());
    const uint64_t whole = h.margin() < 0.25 ? whole_wide(n) : 0;
    for (uint64_t i = 0; i < whole; i += kWide) {
        Ints bin[kSets];
        Mask near{};  // the lanes where an element of some four may not lie in the bin truncation gives it
#pragma GCC unroll 4
        for (int j = 0; j < kSets; ++j) {
            const Doubles f = (four(load, p, i + j * kLanes) - first) * norm;
            const Mask inside = (f >= zero) & (f < bins);
            const Doubles g = inside ? f : zero;
            bin[j] = __builtin_convertvector(g, Ints);
            const Doubles part = g - __builtin_convertvector(bin[j], Doubles);
            near |= ~(inside & (part > below) & (part < above));
        }
        if ((near[0] | near[1] | near[2] | near[3]) == 0) {
            for (int j = 0; j < kSets; ++j)
                for (int k = 0; k < kLanes; ++k) ++tables[k][bin[j][k]];
        } else {
            for (uint64_t e = i; e < i + kWide; ++e) exact(static_cast<int>(e % kLanes), load(p, e));
        }
    }
    for (uint64_t i = whole; i < n; ++i) exact(0, load(p, i));
}

// The clones are chosen by an ifunc resolver, which the dynamic loader runs before a sanitizer's runtime is up: an
// instrumented resolver crashes a ThreadSanitizer build at start. Sanitizer builds take the x86-64 code alone.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CKPT_VECTOR_CLONES
#else
#define CKPT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
// One entry per pass, cloned; with_reader picks the element type's load inside it, so the pass is inlined into
// each clone once per type.
#define CKPT_INLINE __attribute__((always_inline))
CKPT_VECTOR_CLONES PieceSums piece_sums(const ArrayView& v) {
    return with_reader(v.dtype, [&](auto load) CKPT_INLINE { return sums_lanes(v.data, v.count(), load); });
}
CKPT_VECTOR_CLONES double piece_deviations(const ArrayView& v, double mean, bool all_finite) {
    return with_reader(
        v.dtype, [&](auto load) CKPT_INLINE { return deviations_lanes(v.data, v.count(), mean, all_finite, load); });
}
CKPT_VECTOR_CLONES void piece_squares(const ArrayView& v, double& finite, double& squares) {
    with_reader(v.dtype, [&](auto load) CKPT_INLINE { squares_lanes(v.data, v.count(), load, finite, squares); });
}
CKPT_VECTOR_CLONES void piece_difference(const ArrayView& a, const ArrayView& b, double& squares, double& top) {
    const uint64_t n = std::min(a.count(), b.count());
    with_reader(a.dtype, [&](auto load) CKPT_INLINE { difference_lanes(a.data, b.data, n, load, squares, top); });
}
CKPT_VECTOR_CLONES void piece_bins(const Histogram& h, const ArrayView& v, uint64_t (&tables)[4][Histogram::kBins]) {
    with_reader(v.dtype, [&](auto load) CKPT_INLINE { bins_lanes(h, v.data, v.count(), load, tables); });
}
#undef CKPT_INLINE
#undef CKPT_VECTOR_CLONES

// The NaN, +Inf and -Inf of a piece, counted where the sums found elements that are not finite.
void count_nonfinite(const ArrayView& v, uint64_t& nan, uint64_t& pos_inf, uint64_t& neg_inf) {
    for_each_value(v, [&](uint64_t, double x) {
        if (std::isnan(x))
            ++nan;
        else if (std::isinf(x))
            ++(x > 0 ? pos_inf : neg_inf);
    });
}

// The first element of a piece equal to x, as its type holds it.
Real first_equal(const ArrayView& v, double x) {
    Real found;
    bool done = false;
    for_each_value(v, [&](uint64_t i, double y) {
        if (!done && y == x) {
            found = real_item(v, i);
            done = true;
        }
    });
    return found;
}

}  // namespace

void Stats::add_piece(const ArrayView& v) {
    ArrayView block = v;
    for (uint64_t at = 0, n = v.count(); at < n; at += kBlock) {
        block.data = v.data + at * v.itemsize;
        block.shape = {static_cast<int64_t>(std::min<uint64_t>(kBlock, n - at))};
        add_block(block);
    }
}

void Stats::add_block(const ArrayView& v) {
    elements += v.count();
    if (!numeric()) return;
    if (kind == Kind::real) {  // the common case, in vector passes
        const PieceSums p = piece_sums(v);
        const uint64_t count = static_cast<uint64_t>(p.finite);
        if (count != v.count()) count_nonfinite(v, nan, pos_inf, neg_inf);
        if (count == 0) return;
        zeros += static_cast<uint64_t>(p.zeros);
        sum_squares += p.sum_squares;
        // The extremes as the type holds them: the first element equal to a new one (first as a scan in order
        // would keep it: -0.0 and 0.0 are equal).
        if (finite == 0 || p.min < min) {
            min = p.min;
            real_min = first_equal(v, p.min);
        }
        if (finite == 0 || p.max > max) {
            max = p.max;
            real_max = first_equal(v, p.max);
        }
        const double piece_mean = p.sum / static_cast<double>(count);
        merge(count, piece_mean, piece_deviations(v, piece_mean, count == v.count()));
        return;
    }
    uint64_t count = 0;
    double sum = 0;
    for_each_value(v, [&](uint64_t i, double x) {
        if (std::isnan(x)) {
            ++nan;
            return;
        }
        if (std::isinf(x)) {
            ++(x > 0 ? pos_inf : neg_inf);
            return;
        }
        if (x == 0) ++zeros;
        const bool first = finite + count == 0;
        if (kind == Kind::signed_integer) {
            const int64_t s = signed_item(v, i);
            smin = first ? s : std::min(smin, s);
            smax = first ? s : std::max(smax, s);
        } else {
            const uint64_t u = unsigned_item(v, i);
            umin = first ? u : std::min(umin, u);
            umax = first ? u : std::max(umax, u);
        }
        if (first || x < min) min = x;
        if (first || x > max) max = x;
        sum += x;
        sum_squares += x * x;
        ++count;
    });
    if (count == 0) return;
    const double piece_mean = sum / static_cast<double>(count);
    merge(count, piece_mean, piece_deviations(v, piece_mean, false));
}

// Chan, Golub and LeVeque's merge of a piece's count, mean and sum of squared deviations into the totals.
void Stats::merge(uint64_t count, double piece_mean, double piece_m2) {
    const double na = static_cast<double>(finite), nb = static_cast<double>(count), total = na + nb;
    const double delta = piece_mean - mean;
    mean += delta * nb / total;
    m2 += piece_m2 + delta * delta * na * nb / total;
    finite += count;
}

void Moments::add_piece(const ArrayView& v) {
    double finite = 0;
    piece_squares(v, finite, sum_squares);
    if (static_cast<uint64_t>(finite) != v.count()) {
        uint64_t pos = 0, neg = 0;
        count_nonfinite(v, nan, pos, neg);
        inf += pos + neg;
    }
}

void Difference::add_pieces(const ArrayView& a, const ArrayView& b) { piece_difference(a, b, diff_squares, max_abs); }

Json Stats::to_json() const {
    const bool have = numeric() && finite != 0;
    const auto count = [&](uint64_t n) { return numeric() ? Json(n) : Json(nullptr); };
    Json j;
    j["elements"] = elements;
    j["finite"] = count(finite);
    j["min"] = extreme_json(false);
    j["max"] = extreme_json(true);
    j["mean"] = have ? json_number(mean) : Json(nullptr);
    j["std"] = have ? json_number(std_dev()) : Json(nullptr);
    j["nan"] = count(nan);
    j["pos_inf"] = count(pos_inf);
    j["neg_inf"] = count(neg_inf);
    j["zeros"] = count(zeros);
    return j;
}

Json Stats::extreme_json(bool maximum) const {
    if (!numeric() || finite == 0) return nullptr;
    if (kind == Kind::signed_integer) return maximum ? smax : smin;
    if (kind != Kind::real) return maximum ? umax : umin;
    return json_number(maximum ? max : min);
}

std::string Stats::extreme_text(bool maximum) const {
    if (!numeric() || finite == 0) return "-";
    if (kind == Kind::signed_integer) return fmt::format("{}", maximum ? smax : smin);
    if (kind == Kind::boolean) return (maximum ? umax : umin) != 0 ? "True" : "False";
    if (kind != Kind::real) return fmt::format("{}", maximum ? umax : umin);
    return shortest_repr(maximum ? real_max : real_min);  // as ckpt cat prints the element
}

// numpy 1.24's histogram with bins=64 and no range: the outer edges are the extremes (widened by half a unit each
// way when they are equal); np.linspace makes the edges as start + i * step with step = (stop - start) / 64 (or
// start + (i / 64) * delta where that step underflows to 0) and the last edge stop itself; an element's bin is
// (x - first) * (64 / (last - first)) truncated, the last bin taking the right edge, then moved down or up by one
// where rounding put it on the wrong side of an edge.
Histogram::Histogram(double min, double max) {
    if (min == max) {
        min -= 0.5;
        max += 0.5;
    }
    const double delta = max - min;
    const double step = delta / kBins;
    for (int i = 0; i < kBins; ++i)
        edges_[i] = step != 0 ? i * step + min : (static_cast<double>(i) / kBins) * delta + min;
    edges_[kBins] = max;
    norm_ = kBins / delta;
    // An edge is within 2^-51 max(|min|, |max|) of min + i * delta / 64, (x - min) * norm within 2^-45 bins of the
    // exact value; the margin leaves a factor of 32 and more (infinite where the range is too narrow for a double).
    margin_ = 0x1p-40 * (1 + std::max(std::fabs(min), std::fabs(max)) * norm_);
}

int Histogram::bin_of(double x) const {
    const double f = (x - edges_[0]) * norm_;
    // numpy casts to an integer here; f is NaN or out of range only where the extremes overflow a double's range
    // (delta infinite), which numpy leaves undefined and the clamp keeps in the bins.
    int i = f >= 0 && f < kBins ? static_cast<int>(f) : (f >= kBins ? kBins - 1 : 0);
    if (x < edges_[i] && i > 0) --i;
    if (i != kBins - 1 && x >= edges_[i + 1]) ++i;
    return i;
}

void Histogram::add_piece(const ArrayView& v) {
    uint64_t tables[4][kBins] = {};
    piece_bins(*this, v, tables);
    for (int b = 0; b < kBins; ++b) counts_[b] += tables[0][b] + tables[1][b] + tables[2][b] + tables[3][b];
}

Json Histogram::to_json() const {
    Json edges = Json::array(), counts = Json::array();
    for (double e : edges_) edges.push_back(json_number(e));
    for (uint64_t c : counts_) counts.push_back(c);
    return Json{{"edges", edges}, {"counts", counts}};
}

PieceReader::PieceReader(ckpt_reader* reader, size_t i, std::string path, size_t piece_bytes)
    : reader_(reader), index_(i), path_(std::move(path)) {
    view_.dtype = ckpt_reader_dtype(reader, i);
    view_.itemsize = ckpt_reader_itemsize(reader, i);
    nbytes_ = ckpt_reader_nbytes(reader, i);
    const size_t unit = std::max<size_t>(view_.itemsize, 1) * (has_statistics(view_.dtype) ? Stats::kBlock : 1);
    piece_ = std::max(piece_bytes / unit, size_t{1}) * unit;
}

unsigned char* PieceReader::buffer(size_t size) {
    try {
        if (bytes_.size() < size) bytes_.resize(size);
    } catch (const std::bad_alloc&) {
        throw Failure(kExitInternal,
                      fmt::format("{}: array '{}': cannot allocate {} bytes to read it into", path_,
                                  ckpt_reader_name(reader_, index_), size),
                      CKPT_ENOMEM);
    }
    return bytes_.data();
}

bool PieceReader::next(ArrayView& piece) {
    if (started_ && at_ >= nbytes_) return false;
    started_ = true;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(piece_, nbytes_ - at_));
    const size_t item = std::max<size_t>(view_.itemsize, 1);
    piece = view_;
    piece.shape = {static_cast<int64_t>(k / item)};
    if (whole_) {
        piece.data = bytes_.data() + at_;
        at_ += k;
        return true;
    }
    unsigned char* dst = k == 0 ? nullptr : buffer(k);
    const int rc = ckpt_reader_read_range(reader_, index_, at_, dst, k);
    if (rc == CKPT_EUNSUPPORTED && at_ == 0 && ckpt_reader_fortran_order(reader_, index_) != 0) {
        unsigned char* all = buffer(static_cast<size_t>(nbytes_));
        const int read = ckpt_reader_read_into(reader_, index_, all, static_cast<size_t>(nbytes_));
        if (read != CKPT_OK) fail_ckpt(read, path_);
        whole_ = true;
        piece.data = all;
        at_ += k;
        return true;
    }
    if (rc != CKPT_OK) fail_ckpt(rc, path_);
    piece.data = dst;
    at_ += k;
    return true;
}

size_t array_index(ckpt_reader* reader, const std::string& name, const std::string& path) {
    size_t i = 0;
    if (ckpt_reader_find(reader, name.c_str(), &i) == CKPT_OK) return i;
    const size_t count = ckpt_reader_count(reader);
    std::string names;
    for (size_t j = 0; j < count && j < 20; ++j)
        names += (j == 0 ? "" : ", ") + std::string(ckpt_reader_name(reader, j));
    if (count > 20) names += ", ...";
    throw Failure(
        kExitIo,
        fmt::format("{}: no array '{}' (the file has {})", path, name, count == 0 ? std::string("none") : names),
        CKPT_ENOTFOUND);
}

void read_pieces(ckpt_reader* reader, size_t i, const std::string& path, size_t piece_bytes,
                 const std::function<void(const ArrayView&)>& f) {
    PieceReader pieces(reader, i, path, piece_bytes);
    ArrayView piece;
    while (pieces.next(piece)) f(piece);
}

Stats array_stats(ckpt_reader* reader, size_t i, const std::string& path, Progress& progress) {
    Stats st(ckpt_reader_dtype(reader, i));
    read_pieces(reader, i, path, kPieceBytes, [&](const ArrayView& piece) {
        st.add_piece(piece);
        progress.advance(piece.count() * piece.itemsize);
    });
    return st;
}

Histogram array_histogram(ckpt_reader* reader, size_t i, const std::string& path, const Stats& stats,
                          Progress& progress) {
    Histogram h(stats.min, stats.max);
    read_pieces(reader, i, path, kPieceBytes, [&](const ArrayView& piece) {
        h.add_piece(piece);
        progress.advance(piece.count() * piece.itemsize);
    });
    return h;
}

}  // namespace ckpt_tool
