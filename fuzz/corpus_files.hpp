// SPDX-License-Identifier: Apache-2.0
// The inputs named on a replay program's command line: each file named there, and every file found (recursively)
// in each directory named there, sorted, so that a failure is easy to rerun. Files whose names start with '.' or
// "README" are skipped, so a corpus directory can explain itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ckpt_fuzz {

// False, having said why on stderr, if an argument is neither a file nor a directory.
inline bool corpus_files(int argc, char** argv, std::vector<std::filesystem::path>& out) {
    namespace fs = std::filesystem;
    const auto is_input = [](const fs::path& p) {
        const std::string name = p.filename().string();
        return fs::is_regular_file(p) && name.rfind('.', 0) != 0 && name.rfind("README", 0) != 0;
    };
    for (int i = 1; i < argc; ++i) {
        const fs::path arg = argv[i];
        std::error_code ec;
        if (fs::is_directory(arg, ec)) {
            for (const auto& entry : fs::recursive_directory_iterator(arg))
                if (is_input(entry.path())) out.push_back(entry.path());
        } else if (fs::is_regular_file(arg, ec)) {
            out.push_back(arg);
        } else {
            std::fprintf(stderr, "%s: no such file or directory\n", arg.c_str());
            return false;
        }
    }
    std::sort(out.begin(), out.end());
    return true;
}

// False, having said why on stderr, if the file cannot be read.
inline bool read_input(const std::filesystem::path& p, std::vector<uint8_t>& out) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.eof() && in.fail()) {
        std::fprintf(stderr, "%s: cannot read\n", p.c_str());
        return false;
    }
    out.assign(bytes.begin(), bytes.end());
    return true;
}

}  // namespace ckpt_fuzz
