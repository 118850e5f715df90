// SPDX-License-Identifier: Apache-2.0
// Whole files, for tests that build, damage or compare the bytes of a file: read_file and write_file.
#pragma once

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace ckpt::testing {

// The bytes of the file at path; "<no file at PATH>" when it cannot be opened, so that a comparison that fails
// says why.
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "<no file at " + path + ">";
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the file at path with `bytes`; throws when they could not all be written.
inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace ckpt::testing
