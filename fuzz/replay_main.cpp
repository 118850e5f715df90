// SPDX-License-Identifier: Apache-2.0
// A main() for the fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput once over every file named on
// the command line or found (recursively) in a directory named there, so the normal and sanitizer test builds
// replay the seed corpus and past crashes. A broken input crashes or traps exactly as it would under libFuzzer.
#include "corpus_files.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    std::vector<std::filesystem::path> inputs;
    if (!ckpt_fuzz::corpus_files(argc, argv, inputs)) return 2;
    for (const std::filesystem::path& p : inputs) {
        // Read into a buffer of exactly the input's size, so that ASan catches a read one byte past the end.
        std::vector<uint8_t> exact;
        if (!ckpt_fuzz::read_input(p, exact)) return 2;
        std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), exact.size());
        LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    }
    std::printf("replayed %zu inputs\n", inputs.size());
    return inputs.empty() ? 1 : 0;
}
