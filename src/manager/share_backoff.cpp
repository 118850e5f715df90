// SPDX-License-Identifier: Apache-2.0
#include "manager/share_backoff.hpp"

#include <algorithm>

namespace ckpt::core {

ShareBackoff::Plan ShareBackoff::plan(int64_t ordinal) {
    Plan p;
    p.hash = ordinal > paused_through_.load();
    p.base = p.hash && previous_hashed_;
    previous_hashed_ = p.hash;
    return p;
}

int64_t ShareBackoff::saved(int64_t ordinal, uint64_t shared, uint64_t bytes) {
    if (shared >= bytes / 16) {
        pause_ = 0;
        return 0;
    }
    pause_ = std::min(kMaxPause, pause_ == 0 ? 1 : 2 * pause_);
    paused_through_.store(ordinal + pause_);
    return pause_;
}

}  // namespace ckpt::core
