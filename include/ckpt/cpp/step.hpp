// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/step.hpp — ckpt::Step: one sharded checkpoint step read by one process (ckpt_step).
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_STEP_HPP
#define CKPT_CPP_STEP_HPP

#include <ckpt/cpp/array.hpp>
#include <ckpt/cpp/dtype.hpp>
#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/metadata.hpp>
#include <ckpt/cpp/options.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

namespace detail {
template <>
struct MetadataGetters<ckpt_step> {
    static const char* value(const ckpt_step* h, const char* key) noexcept { return ckpt_step_metadata(h, key); }
    static size_t count(const ckpt_step* h) noexcept { return ckpt_step_metadata_count(h); }
    static const char* key(const ckpt_step* h, size_t i) noexcept { return ckpt_step_metadata_key(h, i); }
    static const char* value_at(const ckpt_step* h, size_t i) noexcept { return ckpt_step_metadata_value(h, i); }
    static constexpr const char* owner = "ckpt::Step";
};
}  // namespace detail

// One sharded checkpoint step (a directory of shards and manifest.json, docs/distributed.md) read by one process:
// the manifest at opening, the shards as variables are read (ckpt_step_*).
class Step : public detail::MetadataReader<Step, ckpt_step> {
public:
    explicit Step(const std::string& dir, const Options& options = {})
        : callbacks_(std::make_unique<detail::NpzCallbacks>(options)) {
        detail::CNpzOptions c(options, callbacks_.get(), true);
        detail::check(ckpt_step_open(&step_, dir.c_str(), &c.c));
    }
    ~Step() { ckpt_step_close(step_); }
    Step(Step&& other) noexcept
        : step_(std::exchange(other.step_, nullptr)),
          callbacks_(std::move(other.callbacks_)) {}
    Step& operator=(Step&& other) noexcept {
        if (this != &other) {
            ckpt_step_close(step_);
            step_ = std::exchange(other.step_, nullptr);
            callbacks_ = std::move(other.callbacks_);
        }
        return *this;
    }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;
    ckpt_step* native() const noexcept { return step_; }

    int64_t index() const noexcept { return ckpt_step_index(step_); }
    int32_t world_size() const noexcept { return ckpt_step_world_size(step_); }
    // The file name of rank's shard; Error(CKPT_ENOTFOUND) out of range.
    std::string_view shard(int32_t rank) const {
        const char* name = ckpt_step_shard(step_, rank);
        if (name == nullptr) throw Error(CKPT_ENOTFOUND, "ckpt::Step: no shard " + std::to_string(rank));
        return name;
    }
    size_t size() const noexcept { return ckpt_step_count(step_); }
    // Accessors of variable i (Error(CKPT_ENOTFOUND) out of range); the shape is the global one.
    std::string_view name(size_t i) const { return ckpt_step_name(step_, at(i)); }
    Dtype dtype(size_t i) const { return static_cast<Dtype>(ckpt_step_dtype(step_, at(i))); }
    size_t itemsize(size_t i) const { return ckpt_step_itemsize(step_, at(i)); }
    Shape shape(size_t i) const {
        const int64_t* s = ckpt_step_shape(step_, at(i));
        return Shape(s, s + ckpt_step_ndim(step_, i));
    }
    size_t nbytes(size_t i) const { return ckpt_step_nbytes(step_, at(i)); }
    // Shards holding variable i's rows: 0 for a whole variable.
    size_t pieces(size_t i) const { return ckpt_step_pieces(step_, at(i)); }
    // Reads rows [first, first + count) of variable i (a 0-d one: 0, 1) into dst (dst_size bytes).
    void read_rows(size_t i, int64_t first, int64_t count, void* dst, size_t dst_size) {
        detail::check(ckpt_step_read_rows(step_, at(i), first, count, dst, dst_size));
    }
    // The step's metadata, as Vars' (MetadataReader; borrowed until the step is closed).

private:
    size_t at(size_t i) const {
        if (i >= size()) throw Error(CKPT_ENOTFOUND, "ckpt::Step: no variable " + std::to_string(i));
        return i;
    }
    ckpt_step* step_ = nullptr;
    std::unique_ptr<detail::NpzCallbacks> callbacks_;
};

}  // namespace ckpt

#endif  // CKPT_CPP_STEP_HPP
