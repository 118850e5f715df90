// A main() for the fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput once over every file named on
// the command line or found (recursively) in a directory named there, so the normal and sanitizer test builds
// replay the seed corpus and past crashes. A broken input crashes or traps exactly as it would under libFuzzer.
// Files whose names start with '.' or "README" are skipped, so a corpus directory can explain itself.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

bool is_input(const fs::path& p) {
    const std::string name = p.filename().string();
    return fs::is_regular_file(p) && name.rfind('.', 0) != 0 && name.rfind("README", 0) != 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path arg = argv[i];
        std::error_code ec;
        if (fs::is_directory(arg, ec)) {
            for (const auto& entry : fs::recursive_directory_iterator(arg))
                if (is_input(entry.path())) inputs.push_back(entry.path());
        } else if (fs::is_regular_file(arg, ec)) {
            inputs.push_back(arg);
        } else {
            std::fprintf(stderr, "%s: no such file or directory\n", arg.c_str());
            return 2;
        }
    }
    std::sort(inputs.begin(), inputs.end());  // a stable order makes a failure easy to rerun
    for (const fs::path& p : inputs) {
        std::ifstream in(p, std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        if (!in.eof() && in.fail()) {
            std::fprintf(stderr, "%s: cannot read\n", p.c_str());
            return 2;
        }
        std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), bytes.size());
        // A copy in a buffer of exactly the input's size lets ASan catch a read one byte past the end.
        std::vector<uint8_t> exact(bytes.begin(), bytes.end());
        LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    }
    std::printf("replayed %zu inputs\n", inputs.size());
    return inputs.empty() ? 1 : 0;
}
