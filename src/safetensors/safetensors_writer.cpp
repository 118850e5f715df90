// SPDX-License-Identifier: Apache-2.0
#include "safetensors/safetensors_writer.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "npy/npy.hpp"
#include "safetensors/safetensors_header.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

namespace ckpt::core {

namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
// Arrays whose bytes come from a source, or that must be byte-swapped, go through a buffer of this size.
constexpr size_t kCopyBytes = size_t{4} << 20;
// A write hands the storage at most this much at once, so progress moves on for a large tensor.
constexpr size_t kWriteBytes = size_t{64} << 20;

// Writes array a's bytes, little-endian, with put(data, n).
template <typename Put>
void write_array(const Put& put, const Array& a, Progress& progress) {
    const bool copy = a.data() == nullptr || (!kLittleEndianHost && swap_unit(a.dtype()) > 1);
    if (!copy) {
        const auto* p = static_cast<const unsigned char*>(a.data());
        for (size_t at = 0; at < a.nbytes(); at += kWriteBytes) {
            const size_t n = std::min(kWriteBytes, a.nbytes() - at);
            put(p + at, n);
            progress.advance(n);
        }
        return;
    }
    // A whole number of items per piece, so a swap never splits one.
    const size_t piece = std::max<size_t>(kCopyBytes / a.itemsize(), 1) * a.itemsize();
    std::unique_ptr<unsigned char[]> buffer(new unsigned char[std::min(piece, a.nbytes())]);
    for (size_t at = 0; at < a.nbytes(); at += piece) {
        const size_t n = std::min(piece, a.nbytes() - at);
        a.read(at, buffer.get(), n);
        if (!kLittleEndianHost) byteswap_in_place(a.dtype(), buffer.get(), n);
        put(buffer.get(), n);
        progress.advance(n);
    }
}

}  // namespace

void check_safetensors_types(const VarCollection& vars) {
    for (size_t i = 0; i < vars.size(); ++i) {
        const DType d = vars.array(i).dtype();
        if (safetensors_dtype_name(d) == nullptr)
            fail(Code::unsupported,
                 "array '{}': safetensors has no {} type (it holds booleans, integers, floats of "
                 "16 to 64 bits, bfloat16, float8 and complex64)",
                 printable(vars.name(i)), dtype_name(d));
    }
}

uint64_t write_safetensors(OutputFile& out, const VarCollection& vars, SafetensorsWriteOptions options) {
    check_safetensors_types(vars);
    // The data by descending element size, so that every tensor is aligned to its own (the buffer starts 8-aligned);
    // within one size, in the collection's order.
    std::vector<size_t> order(vars.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return vars.array(a).itemsize() > vars.array(b).itemsize(); });
    std::vector<SafetensorsTensor> tensors(vars.size());
    uint64_t at = 0;
    for (const size_t i : order) {
        const Array& a = vars.array(i);
        tensors[i] = SafetensorsTensor{vars.name(i), a.dtype(), a.shape(), at, at + a.nbytes()};
        at += a.nbytes();
    }
    const bool chunked = options.record != nullptr;
    const std::string header = format_safetensors_header(
        tensors, written_metadata(vars.metadata(), options.manager_keys), chunked ? kChunkRegionAlignment : 8);
    const uint64_t size = header.size() + at;
    if (options.before_write) options.before_write(size);
    Progress& progress = options.shared_progress != nullptr ? *options.shared_progress : options.progress;
    if (options.shared_progress == nullptr) progress.start(at);
    out.write(header.data(), header.size());
    if (!chunked) {
        const auto put = [&](const void* data, size_t n) { out.write(data, n); };
        for (const size_t i : order) write_array(put, vars.array(i), progress);
        return size;
    }
    ChunkStream stream(out, header.size(), kSafetensorsChunkBytes, options.base);
    const auto put = [&](const void* data, size_t n) { stream.put(data, n); };
    for (const size_t i : order) write_array(put, vars.array(i), progress);
    *options.record = stream.finish();
    if (options.shared_bytes != nullptr) *options.shared_bytes = stream.shared();
    return size;
}

}  // namespace ckpt::core
