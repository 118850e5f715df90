// SPDX-License-Identifier: Apache-2.0
#include "array_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>

namespace ckpt_tool {

void Stats::add_piece(const ArrayView& v) {
    elements += v.count();
    if (!numeric()) return;
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
        } else if (kind != Kind::real) {
            const uint64_t u = unsigned_item(v, i);
            umin = first ? u : std::min(umin, u);
            umax = first ? u : std::max(umax, u);
        }
        if (first || x < min) {
            min = x;
            if (kind == Kind::real) real_min = real_item(v, i);
        }
        if (first || x > max) {
            max = x;
            if (kind == Kind::real) real_max = real_item(v, i);
        }
        sum += x;
        ++count;
    });
    if (count == 0) return;
    const double piece_mean = sum / static_cast<double>(count);
    double piece_m2 = 0;
    for_each_value(v, [&](uint64_t, double x) {
        if (std::isfinite(x)) piece_m2 += (x - piece_mean) * (x - piece_mean);
    });
    const double na = static_cast<double>(finite), nb = static_cast<double>(count), total = na + nb;
    const double delta = piece_mean - mean;
    mean += delta * nb / total;
    m2 += piece_m2 + delta * delta * na * nb / total;
    finite += count;
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
    first_ = min;
    norm_ = kBins / delta;
}

int Histogram::bin_of(double x) const {
    const double f = (x - first_) * norm_;
    // numpy casts to an integer here; f is NaN or out of range only where the extremes overflow a double's range
    // (delta infinite), which numpy leaves undefined and the clamp keeps in the bins.
    int i = f >= 0 && f < kBins ? static_cast<int>(f) : (f >= kBins ? kBins - 1 : 0);
    if (x < edges_[i] && i > 0) --i;
    if (i != kBins - 1 && x >= edges_[i + 1]) ++i;
    return i;
}

void Histogram::add_piece(const ArrayView& v) {
    const double lo = edges_[0], hi = edges_[kBins];
    for_each_value(v, [&](uint64_t, double x) {
        if (x >= lo && x <= hi) ++counts_[bin_of(x)];  // not NaN, not infinite
    });
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
    const size_t item = std::max<size_t>(view_.itemsize, 1);
    piece_ = std::max(piece_bytes / item, size_t{1}) * item;
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

Stats array_stats(ckpt_reader* reader, size_t i, const std::string& path, Progress& progress) {
    Stats st(ckpt_reader_dtype(reader, i));
    PieceReader pieces(reader, i, path, kPieceBytes);
    ArrayView piece;
    while (pieces.next(piece)) {
        st.add_piece(piece);
        progress.advance(piece.count() * piece.itemsize);
    }
    return st;
}

Histogram array_histogram(ckpt_reader* reader, size_t i, const std::string& path, const Stats& stats,
                          Progress& progress) {
    Histogram h(stats.min, stats.max);
    PieceReader pieces(reader, i, path, kPieceBytes);
    ArrayView piece;
    while (pieces.next(piece)) {
        h.add_piece(piece);
        progress.advance(piece.count() * piece.itemsize);
    }
    return h;
}

}  // namespace ckpt_tool
