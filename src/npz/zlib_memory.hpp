// SPDX-License-Identifier: Apache-2.0
// zlib's allocations through operator new, like every other allocation of ckpt: a program (or a test) that
// replaces operator new sees them too, and running out of memory is reported as such. zlib expects Z_NULL, not
// an exception, when memory runs out; callers turn its Z_MEM_ERROR into std::bad_alloc.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <new>

namespace ckpt::core {

inline voidpf zlib_alloc(voidpf, uInt items, uInt size) {
    if (size != 0 && items > SIZE_MAX / size) return Z_NULL;
    return ::operator new(size_t{items} * size, std::nothrow);
}

inline void zlib_free(voidpf, voidpf p) { ::operator delete(p); }

}  // namespace ckpt::core
