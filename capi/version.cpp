// SPDX-License-Identifier: Apache-2.0
#include "ckpt/ckpt.h"
#include "core/dtype.hpp"

extern "C" {

CKPT_API uint32_t ckpt_version_number(void) { return CKPT_VERSION_NUMBER; }
CKPT_API const char* ckpt_version_string(void) { return CKPT_VERSION_STRING; }

CKPT_API size_t ckpt_dtype_size(uint32_t dtype) {
    return ckpt::core::is_dtype(dtype) ? ckpt::core::numeric_size(static_cast<ckpt::core::DType>(dtype)) : 0;
}
CKPT_API const char* ckpt_dtype_name(uint32_t dtype) {
    return ckpt::core::is_dtype(dtype) ? ckpt::core::dtype_name(static_cast<ckpt::core::DType>(dtype)) : nullptr;
}

}
