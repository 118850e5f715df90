// SPDX-License-Identifier: Apache-2.0
// Fuzzes the safetensors reader on arbitrary bytes, through the container seam every caller uses: open (the length,
// the header's JSON, every rule of the format), then every tensor read whole, as a view and in two ranges.
// ckpt::core::Error (format, unsupported) is the expected answer to bad input; any other exception, a crash, UB or a
// leak is a bug. A file the reader accepts must survive ckpt's own writing: saved again, it reads back the same
// tensors, bytes and metadata.
#include "container/container.hpp"
#include "core/error.hpp"
#include "fuzz_support.hpp"
#include "safetensors/safetensors_writer.hpp"
#include "storage/memory_storage.hpp"  // BytesInput

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using ckpt::core::Code;
using ckpt::core::Container;
using ckpt::core::ContainerReadOptions;
using ckpt::core::Format;

std::unique_ptr<Container> open(const void* data, size_t size) {
    ContainerReadOptions o;
    o.format = Format::safetensors;
    return ckpt::core::open_container(std::make_unique<ckpt::core::BytesInput>(data, size), "fuzz.safetensors", o);
}

// Writes into memory: the atomic sequence is the storage's business, the bytes the writer's.
class StringOutput final : public ckpt::core::OutputFile {
public:
    std::string bytes;
    void write(const void* data, size_t n) override { bytes.append(static_cast<const char*>(data), n); }
    void sync() override {}
    void close() override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<Container> file;
    try {
        file = open(data, size);
    } catch (const ckpt::core::Error& e) {
        FUZZ_CHECK(e.code() == Code::format || e.code() == Code::unsupported);
        return 0;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < file->size(); ++i) total += file->array(i).nbytes;
    FUZZ_CHECK(total <= size);  // the bytes are the file's: nothing is allocated that the input does not hold
    const ckpt::core::VarCollection vars = file->read_all();
    for (size_t i = 0; i < file->size(); ++i) {
        const ckpt::core::ArrayInfo a = file->array(i);
        FUZZ_CHECK(file->find(a.name) == i);
        const void* view = file->view(i);
        FUZZ_CHECK(a.nbytes == 0 || std::memcmp(view, vars.array(i).data(), a.nbytes) == 0);
        if (a.nbytes >= 2 * a.itemsize) {  // the second half, then the first: ranges in any order
            const size_t half = a.nbytes / a.itemsize / 2 * a.itemsize;
            std::vector<unsigned char> parts(a.nbytes);
            file->read_range(i, half, parts.data() + half, a.nbytes - half);
            file->read_range(i, 0, parts.data(), half);
            FUZZ_CHECK(std::memcmp(parts.data(), vars.array(i).data(), a.nbytes) == 0);
        }
    }
    StringOutput out;
    ckpt::core::SafetensorsWriteOptions w;
    w.manager_keys = true;  // every key the file had
    ckpt::core::write_safetensors(out, vars, w);
    const std::unique_ptr<Container> again = open(out.bytes.data(), out.bytes.size());
    FUZZ_CHECK(again->size() == file->size());
    FUZZ_CHECK(again->metadata().size() == file->metadata().size());
    for (size_t k = 0; k < file->metadata().size(); ++k)
        FUZZ_CHECK(again->metadata().key(k) == file->metadata().key(k) &&
                   again->metadata().value(k) == file->metadata().value(k));
    for (size_t i = 0; i < file->size(); ++i) {
        const ckpt::core::ArrayInfo a = file->array(i), b = again->array(i);
        FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes);
        FUZZ_CHECK(a.nbytes == 0 || std::memcmp(again->view(i), vars.array(i).data(), a.nbytes) == 0);
        FUZZ_CHECK(again->placement(i).data_offset % a.itemsize == 0);  // ckpt aligns every tensor to its size
    }
    return 0;
}
