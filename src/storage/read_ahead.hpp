// SPDX-License-Identifier: Apache-2.0
// Reading a file's first bytes ahead, on a thread of its own, while its reader does something else.
#pragma once

#include "storage/storage.hpp"

#include <atomic>
#include <cstdint>
#include <thread>

namespace ckpt::core {

// Reads bytes [0, n) of `file` in 1 MiB steps into a scratch buffer it throws away, so that the storage fetches
// them while the caller is busy: a restore that must check a file's whole directory before it reads any data
// (ZipReader) has the disk read the data's start meanwhile. A plain sequential read, unlike
// posix_fadvise(WILLNEED), leaves the kernel's readahead marks, so the caller's own reads carry the stream on.
// Its errors are left to the caller, which reads the same bytes. `file` must allow concurrent reads and outlive
// this object, whose destruction stops the reading at its next step and waits for it. Throws std::system_error
// where no thread can be started.
class ReadAhead {
public:
    ReadAhead(InputFile& file, uint64_t n);
    ~ReadAhead();
    ReadAhead(const ReadAhead&) = delete;
    ReadAhead& operator=(const ReadAhead&) = delete;

    static constexpr size_t kStep = size_t{1} << 20;

private:
    void run(InputFile& file, uint64_t n);
    std::atomic<bool> stop_{false};
    std::thread thread_;  // last: started once stop_ exists
};

}  // namespace ckpt::core
