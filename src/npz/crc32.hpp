// SPDX-License-Identifier: Apache-2.0
// CRC-32 as zip and zlib define it (reflected polynomial 0xEDB88320), at memory speed.
//
// Every byte ckpt writes or reads passes through a CRC. zlib 1.2.13's crc32_z runs at about 1.8 GB/s on the
// development machine — slower than a warm read() of the same bytes, so it set the pace of every restore. On
// x86-64 CPUs with carry-less multiplication (PCLMULQDQ, every x86-64 CPU since 2010) this folds 64 bytes per
// step with it instead — 256 bytes per step with its 512-bit form (VPCLMULQDQ) where the CPU has that — and falls
// back to zlib elsewhere and for short inputs. Results are identical to zlib's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt::core {

// The CRC-32 of `n` bytes at `data`, continuing from `crc`, the CRC-32 of the bytes before them (0 for none), as
// zlib's crc32_z(crc, data, n).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

// As crc32(0, data, n), the work shared among up to `threads` threads (the caller's one of them) in parts joined
// with crc32_combine: checking a mapped member of gigabytes runs at the memory bandwidth of several cores, not one.
// Inputs below 32 MiB, and threads = 1, stay on the caller's thread; so does the rest when no thread can start.
uint32_t crc32_parallel(const void* data, size_t n, unsigned threads);

// Joins CRC-32s of parts `part_bytes` long: join(crc(A), crc(B)) is crc(A then B) for any A and a B of that length
// (zlib's crc32_combine, with its operator made once).
class Crc32Join {
public:
    explicit Crc32Join(uint64_t part_bytes);
    uint32_t operator()(uint32_t before, uint32_t part) const;

private:
    unsigned long op_;
};

}  // namespace ckpt::core
