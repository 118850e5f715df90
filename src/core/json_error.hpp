// SPDX-License-Identifier: Apache-2.0
// The words of a JSON parser's error for a message, without the library's tag: nlohmann says
// "[json.exception.parse_error.101] parse error at line 1, column 3: …"; a ckpt message says "parse error at …".
#pragma once

#include <string>

namespace ckpt::core {

inline std::string json_error_words(std::string what) {
    if (const size_t end = what.find("] "); what.rfind("[json.", 0) == 0 && end != std::string::npos)
        what.erase(0, end + 2);
    return what;
}

}  // namespace ckpt::core
