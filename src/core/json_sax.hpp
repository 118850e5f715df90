// SPDX-License-Identifier: Apache-2.0
// What ckpt's SAX readers of JSON (the npz metadata member, safetensors headers, Hugging Face's index) share.
#pragma once

#include <string>

namespace ckpt::core {

// The words of a JSON parser's error for a message, without the library's tag: nlohmann says
// "[json.exception.parse_error.101] parse error at line 1, column 3: …"; a ckpt message says "parse error at …".
inline std::string json_error_words(std::string what) {
    if (const size_t end = what.find("] "); what.rfind("[json.", 0) == 0 && end != std::string::npos)
        what.erase(0, end + 2);
    return what;
}

// Passing over a value a reader has no use for (an unknown field), whatever it holds, counting only its nesting:
// next() before the value; then each event asks whether it is passed over — scalar() for a scalar or a key, open()
// and close() for the start and end of an object or array.
class JsonSkip {
public:
    void next() { next_ = true; }
    bool scalar() {
        if (depth_ > 0) return true;
        const bool skipped = next_;
        next_ = false;
        return skipped;
    }
    bool key() const { return depth_ > 0; }
    bool open() {
        if (depth_ == 0 && !next_) return false;
        next_ = false;
        ++depth_;
        return true;
    }
    bool close() {
        if (depth_ == 0) return false;
        --depth_;
        return true;
    }

private:
    bool next_ = false;
    int depth_ = 0;
};

}  // namespace ckpt::core
