#include "atomic_file.hpp"

#include "error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

namespace ckpt {

namespace {
std::string random_suffix() {
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string s(6, 'x');
    for (char& c : s) c = kAlphabet[rng() % (sizeof kAlphabet - 1)];
    return s;
}
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    const auto slash = path_.rfind('/');
    dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
    name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    if (name_.empty() || name_ == "." || name_ == "..") fail(Code::invalid, "{}: not a file path", path_);

    dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) {
        const int err = errno;
        if (err == ENOENT) fail(Code::not_found, "{}: directory {} does not exist", path_, dir_);
        fail_errno(err, fmt::format("{}: cannot open directory {}", path_, dir_));
    }
    // The name starts with '.' and never ends in ".npz", so listings of checkpoints never see it.
    for (int attempt = 0; fd_ < 0; ++attempt) {
        temp_name_ = "." + name_ + ".tmp-" + random_suffix();
        fd_ = ::openat(dir_fd_, temp_name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
            const int err = errno;
            ::close(dir_fd_);
            fail_errno(err, fmt::format("{}: cannot create temporary file in {}", path_, dir_));
        }
    }
    temp_path_ = dir_ + "/" + temp_name_;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!committed_ && !temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    temp_name_.clear();
    if (dir_fd_ >= 0) ::close(dir_fd_);
    dir_fd_ = -1;
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        // Linux transfers at most 0x7ffff000 bytes per call; ask for no more than 1 GiB.
        const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
        const ssize_t w = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            fail_errno(errno, fmt::format("{}: write failed", path_));
        }
        if (w == 0) fail(Code::io, "{}: write made no progress", path_);
        p += w;
        n -= static_cast<size_t>(w);
        offset += static_cast<uint64_t>(w);
    }
}

void AtomicFile::commit() {
    try {
        if (::fsync(fd_) != 0) fail_errno(errno, fmt::format("{}: fsync failed", path_));
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) fail_errno(errno, fmt::format("{}: close failed", path_));
        if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str()) != 0)
            fail_errno(errno, fmt::format("{}: rename from {} failed", path_, temp_name_));
        committed_ = true;
        // The rename is atomic but not yet durable: the directory entry needs its own fsync.
        if (::fsync(dir_fd_) != 0) fail_errno(errno, fmt::format("{}: fsync of directory {} failed", path_, dir_));
    } catch (...) {
        discard();
        throw;
    }
    discard();
}

}  // namespace ckpt
