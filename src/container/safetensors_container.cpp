// SPDX-License-Identifier: Apache-2.0
#include "container/safetensors_container.hpp"

#include "core/error.hpp"
#include "core/utf8.hpp"

#include <algorithm>
#include <numeric>

namespace ckpt::core {

namespace {

constexpr bool kLittleEndianHost = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// Where an empty array's view points: not NULL, never read.
const unsigned char kEmpty[8] = {};

}  // namespace

SafetensorsContainer::SafetensorsContainer(SafetensorsReader reader, bool writable_views, Progress progress)
    : reader_(std::move(reader)), writable_views_(writable_views), progress_(progress) {
    views_.assign(reader_.size(), nullptr);
}

std::optional<size_t> SafetensorsContainer::find(std::string_view name) const {
    return names_.find(reader_.size(), name, [this](size_t i) -> const std::string& { return reader_.tensor(i).name; });
}

Placement SafetensorsContainer::placement(size_t i) const {
    const SafetensorsTensor& t = reader_.tensor(i);
    Placement p;
    p.member = t.name;
    p.stored_bytes = reader_.nbytes(i);
    p.data_offset = reader_.data_offset(i);
    p.byte_order = swap_unit(t.dtype) <= 1 ? '|' : '<';
    return p;
}

void SafetensorsContainer::read_into(size_t i, void* dst) {
    progress_.start(reader_.nbytes(i));
    reader_.read_into(i, dst);
    progress_.advance(reader_.nbytes(i));
}

void SafetensorsContainer::read_entries(const std::vector<Job>& jobs) {
    // In the file's order, so the reads stream through it front to back.
    std::vector<size_t> order(jobs.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return reader_.tensor(jobs[a].entry).begin < reader_.tensor(jobs[b].entry).begin;
    });
    uint64_t total = 0;
    for (const Job& j : jobs) total += reader_.nbytes(j.entry);
    progress_.start(total);
    // Reported in the order of `jobs`: the first failing job's error, as other formats do.
    std::vector<std::exception_ptr> failed(jobs.size());
    for (const size_t k : order) {
        try {
            reader_.read_into(jobs[k].entry, jobs[k].dst);
            progress_.advance(reader_.nbytes(jobs[k].entry));
        } catch (...) {
            failed[k] = std::current_exception();
        }
    }
    for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
}

void SafetensorsContainer::read_range(size_t i, uint64_t offset, void* dst, size_t size) {
    const ArrayInfo a = array(i);
    if (offset % a.itemsize != 0 || size % a.itemsize != 0)
        fail(Code::invalid, "{}: tensor '{}': range [{}, {} + {}) is not whole items of {} bytes", label(),
             printable(a.name), offset, offset, size, a.itemsize);
    if (offset > a.nbytes || size > a.nbytes - offset)
        fail(Code::invalid, "{}: tensor '{}': range [{}, {} + {}) reaches past its {} bytes", label(),
             printable(a.name), offset, offset, size, a.nbytes);
    reader_.read(i, offset, dst, size);
}

bool SafetensorsContainer::mappable(size_t i) const {
    const size_t unit = swap_unit(reader_.tensor(i).dtype);  // a complex number is aligned as its parts
    return (kLittleEndianHost || unit <= 1) && reader_.data_offset(i) % std::max<size_t>(unit, 1) == 0;
}

const void* SafetensorsContainer::view(size_t i) {
    if (views_[i] != nullptr) return views_[i];
    if (reader_.nbytes(i) == 0) return views_[i] = kEmpty;
    if (mappable(i)) {
        if (!map_tried_) {
            mapping_ = reader_.file().map(writable_views_);
            map_tried_ = true;
        }
        if (mapping_) {
            // The mapping is of the file as it is now: a file that shrank since it was opened would fault.
            if (mapping_->size() < reader_.data_offset(i) + reader_.nbytes(i))
                fail(Code::format, "{}: the file has {} bytes, no longer the {} it had when it was opened", label(),
                     mapping_->size(), reader_.file().size());
            return views_[i] = static_cast<const unsigned char*>(mapping_->data()) + reader_.data_offset(i);
        }
    }
    const ArrayInfo a = array(i);
    Array copy = Array::allocate(a.dtype, a.itemsize, a.shape, false);
    read_into(i, copy.data());
    views_[i] = copy.data();
    decoded_.emplace(i, std::move(copy));
    return views_[i];
}

}  // namespace ckpt::core
