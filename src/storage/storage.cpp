// SPDX-License-Identifier: Apache-2.0
#include "storage/storage.hpp"

#include "core/error.hpp"

#include <random>
#include <stdexcept>

namespace ckpt {

namespace {
constexpr std::string_view kTempMarker = ".tmp-";
constexpr size_t kTempRandomChars = 6;

bool is_random_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
}  // namespace

void OutputFile::patch(uint64_t, const void*, size_t) {
    throw std::logic_error("OutputFile::patch on a file that cannot be patched");
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
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string s = "." + name + std::string(kTempMarker);
    for (size_t i = 0; i < kTempRandomChars; ++i) s += kAlphabet[rng() % (sizeof kAlphabet - 1)];
    return s;
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

std::vector<std::string> Storage::list_dirs(const std::string& dir) {
    fail(Code::unsupported, "{}: this storage cannot list directories (sharded checkpoints need it)", dir);
}

void Storage::rename_dir(const std::string& from, const std::string& to) {
    fail(Code::unsupported, "{}: this storage cannot rename directories (from {}; sharded checkpoints need it)", to, from);
}

void Storage::remove_tree(const std::string& dir) {
    fail(Code::unsupported, "{}: this storage cannot remove directories (sharded checkpoints need it)", dir);
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
            file.reset();
            storage.rename(temp, path);
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
}

}  // namespace ckpt
