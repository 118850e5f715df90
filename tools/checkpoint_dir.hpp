// A checkpoint manager's directory opened only to look: CKPT_MANAGER_READ_ONLY takes no lock and removes
// nothing, so it works while a training program holds the directory and saves into it.
#pragma once

#include "failure.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckpt_tool {

struct CheckpointDir {
    std::string directory;  // where the checkpoints are: LOGDIR/SUBDIR, or LOGDIR itself
    Manager manager;
    std::vector<int64_t> indices;  // ascending

    std::string path_of(int64_t index) const;
    // Temporary files of saves in progress or interrupted (".<checkpoint>.tmp-XXXXXX"), by name, sorted.
    std::vector<std::string> temporaries() const;
};

// Opens LOGDIR's checkpoint directory LOGDIR/SUBDIR (SUBDIR "" is LOGDIR itself). Without an explicit subdir it is
// "ckpt", the manager's default, unless LOGDIR has no such directory but holds checkpoints itself: then LOGDIR is
// the checkpoint directory (so both `ckpt ls run` and `ckpt ls run/ckpt` work). Throws on failure.
CheckpointDir open_checkpoint_dir(const std::string& logdir, const std::optional<std::string>& subdir);

// Whether `path` names a directory (following symbolic links).
bool is_directory(const std::string& path);

}  // namespace ckpt_tool
