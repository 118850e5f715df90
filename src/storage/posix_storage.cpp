// SPDX-License-Identifier: Apache-2.0
// Storage on the local filesystem: O_CLOEXEC everywhere, loops on short writes and EINTR, O_NOFOLLOW and a
// regular-file check on reads, errno text in every message.
#include "core/error.hpp"
#include "storage/storage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace ckpt::core {

namespace {

// Linux moves at most 0x7ffff000 bytes per read/write call; ask for no more than 1 GiB at a time.
constexpr size_t kMaxIo = size_t{1} << 30;
// Writeback of a file being written is started every this many bytes (see PosixOutputFile::write).
constexpr uint64_t kWritebackBytes = uint64_t{8} << 20;

// Runs make() — which wraps `fd` in an owning object — and closes fd if it throws (out of memory) before an
// object owns it; otherwise the descriptor would leak, and with it a directory lock.
template <typename Make>
auto owning(int fd, Make make) -> decltype(make()) {
    try {
        return make();
    } catch (...) {
        ::close(fd);
        throw;
    }
}

// Dropping the last name of a large file frees its blocks in the unlink or rename itself: 75-100 ms for 256 MiB
// on this ext4 (mounted with discard), a quarter of a save over an existing file and as much of a retention
// delete. A name that goes is unlinked at once (no reader sees it after the call) while a descriptor opened just
// before holds the blocks; a short-lived thread closes it, and the blocks are freed there, off the caller's time.
// Only on the local file systems where an open, unlinked file is simply orphaned (on NFS it would be renamed
// .nfsXXXX in the same directory until closed). free_bytes() waits until every such release is done, so space
// checks see the space freed.
class DeferredRelease {
public:
    // A read descriptor of `path` when releasing it later is worthwhile (a regular file of at least kMinBytes on
    // ext4, XFS or btrfs), else -1.
    static int hold(const std::string& path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat st;
        struct statfs fs;
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_blocks * 512 < kMinBytes ||
            ::fstatfs(fd, &fs) != 0 || !local(fs.f_type)) {
            ::close(fd);
            return -1;
        }
        return fd;
    }
    // Closes `fd` (from hold(); -1 is ignored) on a thread of its own, or here when no thread can be had.
    static void release(int fd) {
        if (fd < 0) return;
        State& s = state();
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            ++s.pending;
        }
        try {
            std::thread([fd] {
                ::close(fd);
                done();
            }).detach();
        } catch (const std::system_error&) {
            ::close(fd);
            done();
        }
    }
    // Returns once every release started before it is done.
    static void wait() {
        State& s = state();
        std::unique_lock<std::mutex> lock(s.mutex);
        s.idle.wait(lock, [&] { return s.pending == 0; });
    }
    static size_t pending() {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        return s.pending;
    }

private:
    static constexpr blkcnt_t kMinBytes = blkcnt_t{8} << 20;  // below this a thread costs more than the freeing
    struct State {
        std::mutex mutex;
        std::condition_variable idle;
        size_t pending = 0;
    };
    // Never destroyed: a release may still be running while the process exits.
    static State& state() {
        static State* s = new State;
        return *s;
    }
    static void done() {
        State& s = state();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (--s.pending == 0) s.idle.notify_all();
    }
    static bool local(decltype(statfs::f_type) type) {
        constexpr long kExt4 = 0xEF53, kXfs = 0x58465342, kBtrfs = 0x9123683E;
        return type == kExt4 || type == kXfs || type == kBtrfs;
    }
};

class PosixOutputFile final : public OutputFile {
public:
    // `patchable`: a new file (an appended one's offsets would not start at the writer's first byte).
    PosixOutputFile(int fd, std::string path, bool patchable)
        : fd_(fd), path_(std::move(path)), patchable_(patchable) {}
    ~PosixOutputFile() override {
        if (fd_ >= 0) ::close(fd_);
        if (lock_fd_ >= 0) ::close(lock_fd_);
    }

    // Start writing back what is written every kWritebackBytes, instead of leaving it all for the fsync: a save of
    // gigabytes otherwise fills the page cache with dirty pages until the kernel throttles the writer, and the fsync
    // then waits for all of it (RocksDB's bytes_per_sync). A large call is written in pieces of that size, so a
    // 64 MiB array starts its writeback 8 MiB in, not after its last byte. Asynchronous; a failure shows at fsync.
    void write(const void* data, size_t n) override {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            const size_t until_writeback = static_cast<size_t>(kWritebackBytes - (written_ - flushed_));
            const ssize_t w = ::write(fd_, p, std::min({n, kMaxIo, until_writeback}));
            if (w < 0) {
                if (errno == EINTR) continue;
                fail_errno(errno, fmt::format("{}: write failed", path_));
            }
            if (w == 0) fail(Code::io, "{}: write made no progress", path_);
            p += w;
            n -= static_cast<size_t>(w);
            written_ += static_cast<uint64_t>(w);
            if (written_ - flushed_ >= kWritebackBytes) {
                (void)::sync_file_range(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(written_ - flushed_),
                                        SYNC_FILE_RANGE_WRITE);
                flushed_ = written_;
            }
        }
    }

    bool can_patch() const override { return patchable_; }

    // A page already under writeback is written again at the fsync: one page per patch.
    void patch(uint64_t offset, const void* data, size_t n) override {
        if (!patchable_) OutputFile::patch(offset, data, n);
        if (offset + n > written_) throw std::logic_error("PosixOutputFile::patch past the bytes written");
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
            if (w < 0) {
                if (errno == EINTR) continue;
                fail_errno(errno, fmt::format("{}: write at offset {} failed", path_, offset));
            }
            if (w == 0) fail(Code::io, "{}: write at offset {} made no progress", path_, offset);
            p += w;
            n -= static_cast<size_t>(w);
            offset += static_cast<uint64_t>(w);
        }
    }

    uint64_t clone_from(InputFile& source, uint64_t offset, uint64_t n, const void* data) override;
    bool may_share() const override { return !clones_refused_; }

    void sync() override {
        if (::fsync(fd_) != 0) fail_errno(errno, fmt::format("{}: fsync failed", path_));
    }

    void close() override {
        const int fd = fd_;
        fd_ = -1;
        // A temporary's flock (hold_temp) outlives the close, until this object goes after the rename: a cleaner
        // must not take the closed but not yet renamed temporary for a killed save's. (Without a descriptor to spare
        // the window is only the rename's.)
        if (patchable_) lock_fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (::close(fd) != 0) fail_errno(errno, fmt::format("{}: close failed", path_));
    }

private:
    int fd_;
    int lock_fd_ = -1;
    std::string path_;
    bool patchable_;
    uint64_t written_ = 0;  // bytes written
    uint64_t flushed_ = 0;  // bytes whose writeback was started
    bool clones_refused_ = false;  // the filesystem would not clone into this file once
};

class PosixInputFile final : public InputFile {
public:
    PosixInputFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
    ~PosixInputFile() override { ::close(fd_); }
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }

    uint64_t size() const override { return size_; }
    bool concurrent_reads() const override { return true; }  // pread

    size_t read_at(uint64_t offset, void* dst, size_t n) override { return read(offset, dst, n, 0); }

    // RWF_DONTCACHE (Linux 6.14) drops the pages a read had to bring in, and leaves those that were cached.
    // Elsewhere the read fails with EOPNOTSUPP and is done as a plain one.
    size_t read_uncached_at(uint64_t offset, void* dst, size_t n) override {
        return read(offset, dst, n, dontcache_unsupported_.load(std::memory_order_relaxed) ? 0 : kRwfDontCache);
    }

    // cachestat (Linux 6.5) counts the cached pages of a range without reading them (a read with RWF_NOWAIT
    // would start the device's readahead there). Where it is missing, nothing can be told.
    bool cached(uint64_t offset, uint64_t n) override {
        if (n == 0 || kSysCachestat < 0 || cachestat_unsupported_.load(std::memory_order_relaxed)) return true;
        struct {
            uint64_t off, len;
        } range{offset, n};
        struct {
            uint64_t cache, dirty, writeback, evicted, recently_evicted;
        } stat{};
        if (::syscall(kSysCachestat, fd_, &range, &stat, 0) != 0) {
            if (errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP || errno == EPERM)
                cachestat_unsupported_.store(true, std::memory_order_relaxed);
            return true;
        }
        const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
        return stat.cache >= (offset + n - 1) / page - offset / page + 1;
    }

    std::unique_ptr<MappedFile> map(bool writable) override {
        struct stat st;
        if (::fstat(fd_, &st) != 0) fail_errno(errno, fmt::format("{}: cannot stat", path_));
        if (static_cast<uint64_t>(st.st_size) < size_)
            fail(Code::io, "{}: the file shrank from {} to {} bytes since it was opened", path_, size_, st.st_size);
        if (size_ > SIZE_MAX) return nullptr;
        const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;  // private either way: copy-on-write
        void* p = ::mmap(nullptr, static_cast<size_t>(size_), prot, MAP_PRIVATE, fd_, 0);
        if (p == MAP_FAILED) return nullptr;  // a filesystem that cannot map (ENODEV), no address space: read instead
        try {
            return std::make_unique<PosixMappedFile>(p, size_);
        } catch (...) {
            ::munmap(p, static_cast<size_t>(size_));
            throw;
        }
    }

private:
    static constexpr int kRwfDontCache = 0x80;
#if defined(__NR_cachestat)
    static constexpr long kSysCachestat = __NR_cachestat;
#elif defined(__x86_64__) || defined(__aarch64__)
    static constexpr long kSysCachestat = 451;  // Linux 6.5; glibc 2.36's headers do not name it yet
#else
    static constexpr long kSysCachestat = -1;
#endif

    class PosixMappedFile final : public MappedFile {
    public:
        using MappedFile::MappedFile;
        ~PosixMappedFile() override { ::munmap(const_cast<void*>(data()), static_cast<size_t>(size())); }
    };

    size_t read(uint64_t offset, void* dst, size_t n, int flags) {
        char* p = static_cast<char*>(dst);
        size_t done = 0;
        while (done < n) {
            iovec iov{p + done, std::min(n - done, kMaxIo)};
            const ssize_t r = ::preadv2(fd_, &iov, 1, static_cast<off_t>(offset + done), flags);
            if (r < 0) {
                if (errno == EINTR) continue;
                if (flags != 0 && (errno == EOPNOTSUPP || errno == EINVAL)) {
                    dontcache_unsupported_.store(true, std::memory_order_relaxed);
                    flags = 0;
                    continue;
                }
                fail_errno(errno, fmt::format("{}: read failed", path_));
            }
            if (r == 0) break;
            done += static_cast<size_t>(r);
        }
        return done;
    }

    int fd_;
    uint64_t size_;
    std::string path_;
    std::atomic<bool> dontcache_unsupported_{false};
    std::atomic<bool> cachestat_unsupported_{false};
};

uint64_t PosixOutputFile::clone_from(InputFile& source, uint64_t offset, uint64_t n, const void* data) {
    auto* from = dynamic_cast<PosixInputFile*>(&source);
    if (from == nullptr || clones_refused_) return OutputFile::clone_from(source, offset, n, data);
    file_clone_range range{};
    range.src_fd = from->fd();
    range.src_offset = offset;
    range.src_length = n;
    range.dest_offset = written_;
    if (::ioctl(fd_, FICLONERANGE, &range) != 0) {
        const int err = errno;
        // Not shareable here: another filesystem, one without clones (ext4), offsets it will not take.
        // Written instead, and not asked again of this file.
        if (err == EOPNOTSUPP || err == EXDEV || err == EINVAL || err == ENOTTY || err == ENOSYS || err == EPERM ||
            err == ETXTBSY || err == EISDIR || err == EBADF) {
            clones_refused_ = true;
            return OutputFile::clone_from(source, offset, n, data);
        }
        fail_errno(err, fmt::format("{}: cloning {} bytes at offset {} of {} failed", path_, n, offset, from->path()));
    }
    written_ += n;
    flushed_ = written_;  // shared blocks are on the disk already; nothing of them waits for writeback
    if (::lseek(fd_, static_cast<off_t>(written_), SEEK_SET) < 0)
        fail_errno(errno, fmt::format("{}: seek to offset {} failed", path_, written_));
    return n;
}

// flock on "<dir>/.ckpt.lock", which holds the owner's pid for the message another process gets. The lock goes
// with the descriptor, so a killed process never leaves the directory locked.
class PosixDirLock final : public DirLock {
public:
    explicit PosixDirLock(int fd) : fd_(fd) {}
    ~PosixDirLock() override { ::close(fd_); }

private:
    int fd_;
};

// A temporary's writer holds an flock on it for as long as it writes, so that a cleaner — a later save of the same
// name, `ckpt clean` — of this process or another can tell a live save's temporary from one a killed process left
// (temp_in_use): the lock goes with the descriptor, so a killed writer never leaves it held. A cleaner may find the
// new file before it is held and remove it: then `temp` no longer names the descriptor's file, which is closed (and
// false returned) for another name to be tried.
bool hold_temp(int fd, const std::string& temp) {
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        return true;  // a file system without flock: the temporary is written unheld, as before
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && (::lstat(temp.c_str(), &named) != 0 || named.st_ino != held.st_ino ||
                                    named.st_dev != held.st_dev)) {
        ::close(fd);
        return false;
    }
    return true;
}

class PosixStorage final : public Storage {
public:
    std::unique_ptr<DirLock> lock(const std::string& dir) override {
        const std::string path = join_path(dir, ".ckpt.lock");
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0) fail_errno(errno, fmt::format("{}: cannot open the lock file", path));
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            char pid[32] = {0};
            const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
            ::close(fd);
            if (err == EWOULDBLOCK)
                fail(Code::busy, "{}: locked by another checkpoint manager{}", dir,
                     n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<size_t>(n))) : std::string());
            fail_errno(err, fmt::format("{}: cannot lock", path));
        }
        char pid[32];
        const int len = std::snprintf(pid, sizeof pid, "%ld", static_cast<long>(::getpid()));
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid, static_cast<size_t>(len), 0) != len) {
            // The pid is only for messages; the lock itself is held.
        }
        return owning(fd, [&] { return std::make_unique<PosixDirLock>(fd); });
    }

    void check_unlocked(const std::string& dir) override {
        const std::string path = join_path(dir, ".ckpt.lock");
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            if (errno == ENOENT) return;  // never locked
            fail_errno(errno, fmt::format("{}: cannot open the lock file", path));
        }
        // A shared lock is refused exactly while a manager holds the exclusive one; it is released at once.
        const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        char pid[32] = {0};
        const ssize_t n = held ? ::pread(fd, pid, sizeof pid - 1, 0) : 0;
        ::close(fd);
        if (held)
            fail(Code::busy, "{}: locked by another checkpoint manager{}", dir,
                 n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<size_t>(n))) : std::string());
    }

    std::optional<bool> temp_in_use(const std::string& temp_path) override {
        const int fd = ::open(temp_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) return errno == ENOENT ? std::optional<bool>(false) : std::nullopt;
        const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
        const int err = errno;
        ::close(fd);
        if (held && err != EWOULDBLOCK) return std::nullopt;  // a file system without flock: cannot tell
        return held;
    }
    bool knows_temp_owners() const override { return true; }

    // Each directory created is made durable in its parent (an fsync of the parent) before the next is created in it:
    // a power cut must not take away a folder, with every checkpoint later saved durably in it, that a file system
    // without ext4's ordered journal had not yet written (tests/crash).
    void make_dirs(const std::string& dir) override {
        for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
            const std::string prefix = dir.substr(0, end);
            if (!prefix.empty()) {
                if (::mkdir(prefix.c_str(), 0777) == 0) {
                    sync_dir(parent_dir(prefix));
                } else if (errno != EEXIST) {
                    fail_errno(errno, fmt::format("{}: cannot create directory", prefix));
                }
            }
            if (end == std::string::npos) break;
        }
        struct stat st;
        if (::stat(dir.c_str(), &st) != 0) fail_errno(errno, fmt::format("{}: cannot create directory", dir));
        if (!S_ISDIR(st.st_mode)) fail(Code::io, "{}: exists and is not a directory", dir);
    }

    std::unique_ptr<OutputFile> create_temp(const std::string& target, std::string* temp_path) override {
        const std::string dir = parent_dir(target);
        const std::string name = base_name(target);
        for (int attempt = 0;; ++attempt) {
            std::string temp = join_path(dir, temp_name_for(name));
            const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd >= 0 && !hold_temp(fd, temp)) continue;  // a cleaner removed it before it was held: another name
            if (fd >= 0) {
                try {
                    *temp_path = temp;
                    return std::make_unique<PosixOutputFile>(fd, temp, true);
                } catch (...) {
                    // Out of memory before the file object owned the descriptor: nobody would remove the file.
                    ::close(fd);
                    ::unlink(temp.c_str());
                    throw;
                }
            }
            const int err = errno;
            if (err == EEXIST && attempt < 100) continue;
            if (err == ENOENT) fail(Code::not_found, "{}: directory {} does not exist", target, dir);
            fail_errno(err, fmt::format("{}: cannot create a temporary file in {}", target, dir));
        }
    }

    std::unique_ptr<OutputFile> open_append(const std::string& path) override {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno == ENOENT) fail(Code::not_found, "{}: directory {} does not exist", path, parent_dir(path));
            fail_errno(errno, fmt::format("{}: cannot open for appending", path));
        }
        return owning(fd, [&] { return std::make_unique<PosixOutputFile>(fd, path, false); });
    }

    void rename(const std::string& from, const std::string& to) override {
        const int replaced = DeferredRelease::hold(to);
        if (::rename(from.c_str(), to.c_str()) != 0) {
            const int err = errno;
            if (replaced >= 0) ::close(replaced);
            fail_errno(err, fmt::format("{}: rename from {} failed", to, from));
        }
        DeferredRelease::release(replaced);
    }

    void sync_dir(const std::string& dir) override {
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) fail_errno(errno, fmt::format("{}: cannot open directory to sync it", dir));
        const int rc = ::fsync(fd);
        const int err = errno;
        ::close(fd);
        if (rc != 0) fail_errno(err, fmt::format("{}: fsync of directory failed", dir));
    }

    void remove(const std::string& path) override {
        const int held = DeferredRelease::hold(path);
        if (::unlink(path.c_str()) != 0) {
            const int err = errno;
            if (held >= 0) ::close(held);
            if (err == ENOENT) fail(Code::not_found, "{}: no such file", path);
            fail_errno(err, fmt::format("{}: cannot remove", path));
        }
        DeferredRelease::release(held);
    }

    std::vector<std::string> list(const std::string& dir) override { return entries(dir).files; }
    std::vector<std::string> list_dirs(const std::string& dir) override { return entries(dir).dirs; }
    Entries list_entries(const std::string& dir) override { return entries(dir); }  // one pass over the directory

    bool renames_dirs() const override { return true; }
    void rename_dir(const std::string& from, const std::string& to) override {
        // renameat2 with RENAME_NOREPLACE would also refuse an existing empty directory; rename(2) replaces one, and
        // fails for a non-empty one: check first, as ckpt is the only writer of the checkpoint directory.
        struct stat st;
        if (::lstat(to.c_str(), &st) == 0) fail(Code::io, "{}: rename from {}: the target exists", to, from);
        if (::rename(from.c_str(), to.c_str()) != 0) {
            if (errno == ENOENT) fail(Code::not_found, "{}: rename from {}: no such directory", to, from);
            fail_errno(errno, fmt::format("{}: rename from {} failed", to, from));
        }
    }

    void remove_tree(const std::string& dir) override {
        const Entries inside = entries(dir);
        for (const std::string& name : inside.files) remove(join_path(dir, name));
        for (const std::string& name : inside.dirs) remove_tree(join_path(dir, name));
        if (::rmdir(dir.c_str()) != 0) fail_errno(errno, fmt::format("{}: cannot remove directory", dir));
    }

private:
    // The files and the subdirectories of dir; symbolic links count as files.
    Entries entries(const std::string& dir) {
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr) {
            if (errno == ENOENT) fail(Code::not_found, "{}: no such directory", dir);
            fail_errno(errno, fmt::format("{}: cannot list directory", dir));
        }
        struct CloseDir {
            void operator()(DIR* dir) const { ::closedir(dir); }
        };
        std::unique_ptr<DIR, CloseDir> owner(d);  // closed also when a name cannot be stored
        Entries names;
        errno = 0;
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            bool is_dir = e->d_type == DT_DIR;
            if (e->d_type == DT_UNKNOWN) {  // some filesystems do not fill d_type
                struct stat st;
                is_dir = ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
            }
            (is_dir ? names.dirs : names.files).push_back(name);
        }
        const int err = errno;
        owner.reset();
        if (err != 0) fail_errno(err, fmt::format("{}: cannot list directory", dir));
        return names;
    }

public:
    std::optional<uint64_t> free_bytes(const std::string& dir) override {
        DeferredRelease::wait();  // the space of files just removed or replaced counts as free
        struct statvfs st;
        if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
        return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    }

    // Filesystems that implement FICLONERANGE (XFS made with reflink, btrfs, bcachefs, ZFS 2.2, OCFS2, NFS 4.2 where
    // the server clones). An XFS without reflink refuses the first clone, and the save writes instead.
    bool clones(const std::string& dir) override {
        struct statfs st {};
        if (::statfs(dir.empty() ? "." : dir.c_str(), &st) != 0) return false;
        constexpr long kXfs = 0x58465342, kBtrfs = 0x9123683E, kBcachefs = 0xca451a4e, kZfs = 0x2fc12fc1,
                       kOcfs2 = 0x7461636f, kNfs = 0x6969;
        const long type = static_cast<long>(st.f_type);
        return type == kXfs || type == kBtrfs || type == kBcachefs || type == kZfs || type == kOcfs2 || type == kNfs;
    }

    // FIEMAP: the extents the filesystem marks shared. nullopt where it has no FIEMAP (tmpfs): ext4 has it, and
    // shares nothing.
    std::optional<uint64_t> shared_bytes(const std::string& path) override {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            const int err = errno;
            if (err == ENOENT) fail(Code::not_found, "{}: no such file", path);
            fail_errno(err, fmt::format("{}: cannot open", path));
        }
        constexpr unsigned kExtents = 256;
        std::vector<char> buf(sizeof(fiemap) + kExtents * sizeof(fiemap_extent));
        uint64_t shared = 0, start = 0;
        for (;;) {
            std::fill(buf.begin(), buf.end(), 0);
            auto* map = reinterpret_cast<fiemap*>(buf.data());
            map->fm_start = start;
            map->fm_length = ~uint64_t{0} - start;
            map->fm_flags = FIEMAP_FLAG_SYNC;  // delayed allocations are extents too
            map->fm_extent_count = kExtents;
            if (::ioctl(fd, FS_IOC_FIEMAP, map) != 0) {
                const int err = errno;
                ::close(fd);
                if (err == EOPNOTSUPP || err == ENOTTY || err == EINVAL) return std::nullopt;
                fail_errno(err, fmt::format("{}: cannot map its extents", path));
            }
            if (map->fm_mapped_extents == 0) break;
            bool last = false;
            for (unsigned i = 0; i < map->fm_mapped_extents; ++i) {
                const fiemap_extent& e = map->fm_extents[i];
                if (e.fe_flags & FIEMAP_EXTENT_SHARED) shared += e.fe_length;
                start = e.fe_logical + e.fe_length;
                last = last || (e.fe_flags & FIEMAP_EXTENT_LAST) != 0;
            }
            if (last) break;
        }
        ::close(fd);
        return shared;
    }

    std::optional<FileInfo> stat(const std::string& path) override {
        struct stat st;
        if (::stat(path.empty() ? "." : path.c_str(), &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
            fail_errno(errno, fmt::format("{}: cannot stat", path));
        }
        const bool dir = S_ISDIR(st.st_mode);
        return FileInfo{dir ? 0 : static_cast<uint64_t>(st.st_size),
                        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, dir};
    }

    std::unique_ptr<InputFile> open_read(const std::string& path) override {
        // O_NONBLOCK: opening a FIFO must not wait for a writer before the regular-file check refuses it (it has
        // no effect on regular files).
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            const int err = errno;
            if (err == ENOENT) fail(Code::not_found, "{}: no such file", path);
            if (err == ELOOP) fail(Code::invalid, "{}: is a symbolic link; ckpt reads only regular files", path);
            fail_errno(err, fmt::format("{}: cannot open", path));
        }
        struct stat st;
        if (::fstat(fd, &st) != 0) {
            const int err = errno;
            ::close(fd);
            fail_errno(err, fmt::format("{}: cannot stat", path));
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            fail(Code::invalid, "{}: not a regular file", path);
        }
        return owning(fd, [&] { return std::make_unique<PosixInputFile>(fd, static_cast<uint64_t>(st.st_size), path); });
    }
};

}  // namespace

// How many large files that posix_storage() removed or renamed over still have their blocks being freed on a thread
// of their own; free_bytes() waits for them first. Not in a header: only the test of that promise declares it.
size_t posix_pending_releases();
size_t posix_pending_releases() { return DeferredRelease::pending(); }

std::shared_ptr<Storage> posix_storage() {
    static const std::shared_ptr<Storage> instance = std::make_shared<PosixStorage>();
    return instance;
}

}  // namespace ckpt::core
