// SPDX-License-Identifier: Apache-2.0
// When a manager's saves record chunk hashes (docs/checkpoint-manager.md, "Incremental saves"). Hashing every chunk
// is pure cost where the state changes entirely between saves (every weight trained): a tenth of a save's time or
// more on two cores. After a save that shared less than a sixteenth of its arrays' bytes with its base, the next 1,
// then 2, 4, 8 and at most 16 saves are plain ones (no hashes, no table: byte for byte a full save); then two saves
// hash again — the first has nothing to compare with, the second tells whether there is something to share. A save
// that shares more ends the pause.
#pragma once

#include <atomic>
#include <cstdint>

namespace ckpt::core {

class ShareBackoff {
public:
    struct Plan {
        bool hash = true;  // record chunk hashes
        bool base = true;  // the save before recorded them: this one may share with it
    };
    // On the caller's thread, for each save in order (ordinal 1, 2, ...) that would record hashes.
    Plan plan(int64_t ordinal);
    // On the writer's thread, after save `ordinal` was saved against a base: it shared `shared` of its arrays'
    // `bytes`. Returns how many saves now skip their hashes (0: none).
    int64_t saved(int64_t ordinal, uint64_t shared, uint64_t bytes);

    static constexpr int64_t kMaxPause = 16;

private:
    std::atomic<int64_t> paused_through_{0};  // the saves up to this ordinal record no hashes
    int64_t pause_ = 0;                       // the writer's thread's: the last pause's length
    bool previous_hashed_ = true;             // the caller's thread's
};

}  // namespace ckpt::core
