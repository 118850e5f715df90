// SPDX-License-Identifier: Apache-2.0
// Constants of the zip format (PKWARE APPNOTE 6.3) shared by ZipWriter and ZipReader.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt::core::zip {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kDataDescriptorSig = 0x08074b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kAlignmentExtraId = 0xD935;  // u16 alignment, then padding (Android's zipalign)
// ckpt's head copy, in the central directory entry of a stored member: u16 the length of the member's local extra
// field, u32 a length K, then the first J <= K bytes of the member's data; if J < K, the data's bytes J .. K-2 are
// spaces and byte K-1 is '\n' (an npy header's padding, which the copy leaves out). With it, a reader finds and
// describes a member from the central directory alone, and checks the local header when it reads the data.
constexpr uint16_t kHeadCopyExtraId = 0x6B63;  // "ck"
constexpr size_t kHeadCopyFixedBytes = 6;
constexpr size_t kHeadCopyMaxPadding = 64;  // K - J: numpy pads npy headers to a multiple of 64 bytes

constexpr size_t kLocalHeaderBytes = 30;
constexpr size_t kLocalHeaderCrcOffset = 14;  // of the CRC-32 in a local header
constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kEndBytes = 22;
constexpr size_t kZip64EndBytes = 56;
constexpr size_t kZip64LocatorBytes = 20;

constexpr uint16_t kMethodStore = 0;
constexpr uint16_t kMethodDeflate = 8;
constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagDataDescriptor = 1 << 3;
constexpr uint16_t kFlagStrongEncryption = 1 << 6;
constexpr uint16_t kFlagUtf8 = 1 << 11;

// A 16- or 32-bit field holding this says "the value is in the zip64 record or extra field".
constexpr uint32_t kMax32 = 0xFFFFFFFF;
constexpr uint16_t kMax16 = 0xFFFF;

}  // namespace ckpt::core::zip
