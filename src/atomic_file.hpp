// AtomicFile: the POSIX form of ckpt's atomic save. Bytes go to ".<name>.tmp-XXXXXX" beside the target
// (created O_EXCL, so concurrent writers never share one); commit() fsyncs the file, closes it, renames it onto
// the target and fsyncs the directory. Until commit() returns, the target keeps its previous content; a file
// destroyed without a successful commit() removes its temporary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ckpt {

class AtomicFile {
public:
    // Creates the temporary file. Throws Error(invalid) for a path with no file name, Error(not_found) when the
    // directory does not exist, Error(io) otherwise.
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    // Writes all of [data, data+n) at `offset`, looping on short writes and EINTR. Throws Error(io).
    void write_at(uint64_t offset, const void* data, size_t n);
    // fsync, close, rename, fsync of the directory. Throws Error(io); the temporary is then removed and a
    // failed fsync is never retried on the same data.
    void commit();

    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_path_; }

private:
    void discard() noexcept;

    std::string path_;
    std::string dir_;
    std::string name_;
    std::string temp_name_;
    std::string temp_path_;
    int dir_fd_ = -1;
    int fd_ = -1;
    bool committed_ = false;
};

}  // namespace ckpt
