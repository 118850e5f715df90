#include "npz_writer.hpp"

#include "error.hpp"
#include "npy.hpp"
#include "utf8.hpp"
#include "zip_writer.hpp"

#include <algorithm>

namespace ckpt {

namespace {

// objax's names array: numpy '<U<longest name>' with one zero-padded UTF-32 row per variable.
std::u32string objax_names(const VarCollection& vars, size_t& chars) {
    std::vector<std::u32string> names;
    chars = 1;  // np.array([], dtype=str) is '<U1'
    for (size_t i = 0; i < vars.size(); ++i) {
        names.push_back(utf8_to_utf32(vars.name(i)));
        chars = std::max(chars, names.back().size());
    }
    std::u32string table(chars * names.size(), U'\0');
    for (size_t i = 0; i < names.size(); ++i) std::copy(names[i].begin(), names[i].end(), &table[i * chars]);
    return table;
}

}  // namespace

void write_npz(OutputFile& out, const VarCollection& vars, NpzWriteOptions options) {
    if (options.layout == Layout::automatic) options.layout = Layout::plain;
    if (options.layout != Layout::plain && options.layout != Layout::objax)
        fail(Code::invalid, "unknown layout {}", static_cast<uint32_t>(options.layout));
    if (options.level < 0 || options.level > 9) fail(Code::invalid, "deflate level {} is not in 0..9", options.level);
    const int level = options.deflate ? options.level : -1;

    uint64_t total = 0;
    for (size_t i = 0; i < vars.size(); ++i) total += vars.array(i).nbytes();
    options.progress.start(total);
    // Piece 0 of a member is its npy header, piece 1 the array's bytes: only the latter counts as progress.
    const auto on_bytes = [&](size_t piece, uint64_t n) {
        if (piece == 1) options.progress.advance(n);
    };

    ZipWriter zip(out);
    if (options.layout == Layout::objax) {
        size_t chars = 0;
        const std::u32string names = objax_names(vars, chars);
        const std::string header =
            format_npy_header(DType::unicode, 4 * chars, {static_cast<int64_t>(vars.size())});
        zip.add("names.npy", {{header.data(), header.size()}, {names.data(), names.size() * sizeof(char32_t)}}, level,
                nullptr);
    }
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        const std::string name = options.layout == Layout::objax ? std::to_string(i) : vars.name(i);
        const std::string header = format_npy_header(a.dtype(), a.itemsize(), a.shape());
        zip.add(name + std::string(kNpySuffix), {{header.data(), header.size()}, {a.data(), a.nbytes()}}, level,
                on_bytes);
    }
    zip.finish();
}

void save_npz(Storage& storage, const std::string& path, const VarCollection& vars, const NpzWriteOptions& options) {
    try {
        write_atomically(storage, path, [&](OutputFile& out) { write_npz(out, vars, options); });
    } catch (const Error& e) {
        rethrow_naming(e, path);  // codec messages (bad options, a bad name) do not name it yet
    }
}

}  // namespace ckpt
