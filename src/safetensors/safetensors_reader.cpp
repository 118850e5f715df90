// SPDX-License-Identifier: Apache-2.0
#include "safetensors/safetensors_reader.hpp"

#include "core/error.hpp"
#include "npy/npy.hpp"

#include <cstring>

namespace ckpt::core {

namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

bool json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void read_exactly(InputFile& file, const std::string& label, uint64_t offset, void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    while (n > 0) {
        const size_t got = file.read_at(offset, out, n);
        if (got == 0)
            fail(Code::format, "{}: the file ends at byte {}, before the {} bytes it held when it was opened", label,
                 offset, file.size());
        out += got;
        offset += got;
        n -= got;
    }
}

}  // namespace

bool looks_like_safetensors(const void* start, size_t n) {
    return n > kSafetensorsLengthBytes &&
           (static_cast<const unsigned char*>(start)[kSafetensorsLengthBytes] == '{' ||
            json_space(static_cast<const unsigned char*>(start)[kSafetensorsLengthBytes]));
}

SafetensorsReader::SafetensorsReader(std::unique_ptr<InputFile> file, std::string label, SafetensorsReadOptions options)
    : file_(std::move(file)), label_(std::move(label)) {
    const uint64_t size = file_->size();
    if (size < kSafetensorsLengthBytes)
        fail(Code::format, "{}: safetensors header: the file has {} bytes, fewer than the 8 of the header's length",
             label_, size);
    unsigned char prefix[kSafetensorsLengthBytes];
    read_exactly(*file_, label_, 0, prefix, sizeof prefix);
    uint64_t n = 0;
    for (size_t i = kSafetensorsLengthBytes; i-- > 0;) n = (n << 8) | prefix[i];
    if (n > kMaxSafetensorsHeaderBytes)
        fail(Code::format, "{}: safetensors header: its length {} is over the format's limit of {} bytes", label_, n,
             kMaxSafetensorsHeaderBytes);
    if (n > size - kSafetensorsLengthBytes)
        fail(Code::format, "{}: safetensors header: its length {} reaches past the end of the file ({} bytes)", label_,
             n, size);
    std::string json(static_cast<size_t>(n), '\0');  // no larger than the file
    read_exactly(*file_, label_, kSafetensorsLengthBytes, json.data(), json.size());
    data_start_ = kSafetensorsLengthBytes + n;
    SafetensorsHeader header;
    try {
        header = parse_safetensors_header(json, size - data_start_);
    } catch (const Error& e) {
        rethrow_with_context(e, label_);
    }
    if (header.tensors.size() > options.max_tensors)
        fail(Code::format, "{}: the file has {} tensors, more than the limit of {}", label_, header.tensors.size(),
             options.max_tensors);
    if (size - data_start_ > options.max_total_bytes)
        fail(Code::format, "{}: the file holds {} bytes of tensors, more than the limit of {}", label_,
             size - data_start_, options.max_total_bytes);
    tensors_ = std::move(header.tensors);
    metadata_ = std::move(header.metadata);
}

void SafetensorsReader::read(size_t i, uint64_t offset, void* dst, size_t n) {
    const SafetensorsTensor& t = tensors_[i];
    read_exactly(*file_, label_, data_start_ + t.begin + offset, dst, n);
    if constexpr (!kLittleEndianHost) byteswap_in_place(t.dtype, dst, n);
}

}  // namespace ckpt::core
