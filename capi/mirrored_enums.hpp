// SPDX-License-Identifier: Apache-2.0
// The core's enums that cross the C boundary by value (a cast each way) equal ckpt.h's constants, value for value:
// a value added or changed on one side and not the other stops the build here.
#pragma once

#include "ckpt/ckpt.h"
#include "core/dtype.hpp"
#include "container/container.hpp"
#include "core/error.hpp"
#include "npz/npz.hpp"
#include "sharded/comm.hpp"
#include "writer/writer.hpp"

#include <cstdint>

namespace ckpt::capi {

using namespace ckpt::core;

template <typename Enum>
constexpr bool mirrors(Enum e, long long c) {
    return static_cast<long long>(e) == c;
}

static_assert(mirrors(Code::ok, CKPT_OK) && mirrors(Code::error, CKPT_ERROR) && mirrors(Code::invalid, CKPT_EINVAL) &&
              mirrors(Code::not_found, CKPT_ENOTFOUND) && mirrors(Code::format, CKPT_EFORMAT) &&
              mirrors(Code::io, CKPT_EIO) && mirrors(Code::no_memory, CKPT_ENOMEM) &&
              mirrors(Code::mismatch, CKPT_EMISMATCH) && mirrors(Code::unsupported, CKPT_EUNSUPPORTED) &&
              mirrors(Code::busy, CKPT_EBUSY) && mirrors(Code::exists, CKPT_EEXIST) &&
              mirrors(Code::buffer_small, CKPT_EBUFS));

static_assert(mirrors(DType::bool_, CKPT_BOOL) && mirrors(DType::int8, CKPT_INT8) &&
              mirrors(DType::int16, CKPT_INT16) && mirrors(DType::int32, CKPT_INT32) &&
              mirrors(DType::int64, CKPT_INT64) && mirrors(DType::uint8, CKPT_UINT8) &&
              mirrors(DType::uint16, CKPT_UINT16) && mirrors(DType::uint32, CKPT_UINT32) &&
              mirrors(DType::uint64, CKPT_UINT64) && mirrors(DType::float16, CKPT_FLOAT16) &&
              mirrors(DType::float32, CKPT_FLOAT32) && mirrors(DType::float64, CKPT_FLOAT64) &&
              mirrors(DType::complex64, CKPT_COMPLEX64) && mirrors(DType::complex128, CKPT_COMPLEX128) &&
              mirrors(DType::unicode, CKPT_UNICODE) && mirrors(DType::bytes, CKPT_BYTES) &&
              mirrors(DType::bfloat16, CKPT_BFLOAT16) && mirrors(DType::float8_e4m3fn, CKPT_FLOAT8_E4M3FN) &&
              mirrors(DType::float8_e5m2, CKPT_FLOAT8_E5M2) && mirrors(DType::float8_e4m3fnuz, CKPT_FLOAT8_E4M3FNUZ) &&
              mirrors(DType::float8_e5m2fnuz, CKPT_FLOAT8_E5M2FNUZ) &&
              mirrors(DType::float8_e8m0fnu, CKPT_FLOAT8_E8M0FNU) && mirrors(DType::void_, CKPT_VOID));

static_assert(mirrors(Layout::automatic, CKPT_LAYOUT_AUTO) && mirrors(Layout::plain, CKPT_LAYOUT_PLAIN) &&
              mirrors(Layout::objax, CKPT_LAYOUT_OBJAX));

static_assert(mirrors(Format::automatic, CKPT_FORMAT_AUTO) && mirrors(Format::npz, CKPT_FORMAT_NPZ) &&
              mirrors(Format::safetensors, CKPT_FORMAT_SAFETENSORS));

static_assert(mirrors(Writer::Kind::simple, CKPT_WRITER_SIMPLE) && mirrors(Writer::Kind::thread, CKPT_WRITER_THREAD) &&
              mirrors(Writer::Kind::queue, CKPT_WRITER_QUEUE));

static_assert(mirrors(Comm::Reduce::min, CKPT_REDUCE_MIN) && mirrors(Comm::Reduce::max, CKPT_REDUCE_MAX) &&
              mirrors(Comm::Reduce::sum, CKPT_REDUCE_SUM));

}  // namespace ckpt::capi
