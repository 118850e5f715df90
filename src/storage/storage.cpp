// SPDX-License-Identifier: Apache-2.0
#include "storage/storage.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace ckpt::core {

namespace {
constexpr std::string_view kTempMarker = ".tmp-";
constexpr size_t kTempRandomChars = 6;
constexpr size_t kTempSignatureChars = 2;  // the last 2 of the 6
constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
constexpr uint64_t kAlphabetSize = sizeof kAlphabet - 1;

bool is_random_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// The signature of a temporary for `name` whose random characters are `random`: FNV-1a over both, in 2 characters
// (a file of another program named in ckpt's fashion passes with a chance of 1 in 3844).
std::string signature(const std::string& name, std::string_view random) {
    uint64_t h = 14695981039346656037ull;
    const auto mix = [&h](std::string_view bytes) {
        for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    };
    mix("ckpt temporary");
    mix(name);
    mix(std::string_view("\0", 1));
    mix(random);
    return {kAlphabet[h % kAlphabetSize], kAlphabet[(h / kAlphabetSize) % kAlphabetSize]};
}

}  // namespace

void OutputFile::patch(uint64_t, const void*, size_t) {
    throw std::logic_error("OutputFile::patch on a file that cannot be patched");
}

uint64_t OutputFile::clone_from(InputFile&, uint64_t, uint64_t n, const void* data) {
    write(data, static_cast<size_t>(n));
    return 0;
}

std::string parent_dir(const std::string& path) {
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join_path(const std::string& dir, const std::string& name) {
    if (dir.empty() || dir == ".") return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string temp_name_for(const std::string& name) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string random;
    for (size_t i = 0; i < kTempRandomChars - kTempSignatureChars; ++i) random += kAlphabet[rng() % kAlphabetSize];
    return "." + name + std::string(kTempMarker) + random + signature(name, random);
}

bool is_temp_name(const std::string& name) {
    const size_t min = 1 + 1 + kTempMarker.size() + kTempRandomChars;
    if (name.size() < min || name[0] != '.') return false;
    const size_t marker = name.size() - kTempRandomChars - kTempMarker.size();
    if (name.compare(marker, kTempMarker.size(), kTempMarker) != 0) return false;
    for (size_t i = name.size() - kTempRandomChars; i < name.size(); ++i)
        if (!is_random_char(name[i])) return false;
    return true;
}

bool is_signed_temp_name(const std::string& name) {
    if (!is_temp_name(name)) return false;
    const std::string_view random(name.data() + name.size() - kTempRandomChars, kTempRandomChars - kTempSignatureChars);
    return name.compare(name.size() - kTempSignatureChars, kTempSignatureChars,
                        signature(temp_target(name), random)) == 0;
}

std::string temp_target(const std::string& temp) { return temp.substr(1, temp.rfind(kTempMarker) - 1); }

bool is_ckpt_temp_name(const std::string& name, bool npz_or_checkpoint) {
    return is_temp_name(name) && (npz_or_checkpoint || is_signed_temp_name(name));
}

size_t remove_stale_temporaries_of(Storage& storage, const std::string& path) {
    size_t removed = 0;
    try {
        const std::string dir = parent_dir(path), name = base_name(path);
        const bool npz = ends_with(name, ".npz");
        for (const std::string& entry : storage.list(dir)) {
            if (!is_ckpt_temp_name(entry, npz) || temp_target(entry) != name) continue;
            const std::string temp = join_path(dir, entry);
            if (storage.temp_in_use(temp) != std::optional<bool>(false)) continue;
            try {
                storage.remove(temp);
                ++removed;
            } catch (const Error&) {
                // Gone already (another save of the name removed it), or not ours to remove: either way not this
                // save's failure.
            }
        }
    } catch (...) {
        // A listing that failed (or no memory for it): the temporaries stay for the next save, or `ckpt clean`.
    }
    return removed;
}

std::vector<std::string> Storage::list_dirs(const std::string& dir) {
    fail(Code::unsupported, "{}: this storage cannot list directories (sharded checkpoints need it)", dir);
}

void Storage::rename_dir(const std::string& from, const std::string& to) {
    fail(Code::unsupported, "{}: this storage cannot rename directories (from {}; sharded checkpoints need it)", to, from);
}

void Storage::remove_tree(const std::string& dir) {
    fail(Code::unsupported, "{}: this storage cannot remove directories (sharded checkpoints need it)", dir);
}

std::optional<FileInfo> Storage::stat(const std::string& path) {
    if (path.empty() || path == "." || path == "/") return FileInfo{0, std::nullopt, true};
    try {
        return FileInfo{open_read(path)->size(), std::nullopt, false};
    } catch (const Error& e) {
        if (e.code() != Code::not_found) throw;
    }
    try {
        const Entries entries = list_entries(parent_dir(path));
        const std::string name = base_name(path);
        if (std::find(entries.dirs.begin(), entries.dirs.end(), name) != entries.dirs.end())
            return FileInfo{0, std::nullopt, true};
    } catch (const Error& e) {
        if (e.code() != Code::not_found) throw;
    }
    return std::nullopt;
}

Storage::Entries Storage::list_entries(const std::string& dir) {
    Entries out;
    try {
        out.dirs = list_dirs(dir);
    } catch (const Error& e) {
        if (e.code() != Code::unsupported) throw;  // a storage without directories holds files only
    }
    out.files = list(dir);
    return out;
}

std::string read_small_file(Storage& storage, const std::string& path, uint64_t max_bytes, const char* what) {
    return read_small_file(*storage.open_read(path), path, max_bytes, what);
}

std::string read_small_file(InputFile& file, const std::string& path, uint64_t max_bytes, const char* what) {
    const uint64_t size = file.size();
    if (size > max_bytes)
        fail(Code::format, "{}: {}: {} bytes, more than the limit of {}", path, what, size, max_bytes);
    std::string text(static_cast<size_t>(size), '\0');
    for (size_t at = 0; at < text.size();) {
        const size_t got = file.read_at(at, &text[at], text.size() - at);
        if (got == 0) fail(Code::format, "{}: {}: shorter than its size", path, what);
        at += got;
    }
    return text;
}

void write_atomically(Storage& storage, const std::string& path, const std::function<void(OutputFile&)>& body) {
    if (base_name(path).empty()) fail(Code::invalid, "{}: not a file path", path);
    try {
        // Allocated up front: once the rename is done, running out of memory must not fail the save.
        const std::string dir = parent_dir(path);
        std::string temp;
        std::unique_ptr<OutputFile> file = storage.create_temp(path, &temp);
        try {
            body(*file);
            file->sync();
            file->close();
            storage.rename(temp, path);  // before the file object goes: a POSIX temporary is held until renamed
            file.reset();
        } catch (...) {
            file.reset();
            try {
                storage.remove(temp);
            } catch (...) {
                // The save already failed; that error is the one to report. A leftover temporary is removed by the
                // next manager that opens the directory.
            }
            throw;
        }
        // Renamed but not yet durable: the directory entry needs its own sync. If that fails the new file may or
        // may not survive a crash, so the save is reported as failed.
        storage.sync_dir(dir);
    } catch (const Error& e) {
        rethrow_naming(e, path);  // a failure on the temporary names the checkpoint it was for
    }
    // Saved: what earlier saves of this name left when they were killed goes now, once their writers are gone.
    if (storage.knows_temp_owners()) remove_stale_temporaries_of(storage, path);
}

}  // namespace ckpt::core
