#include "npz_writer.hpp"

#include "atomic_file.hpp"
#include "error.hpp"
#include "npy.hpp"
#include "utf8.hpp"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

namespace ckpt {

namespace {

// MS-DOS date of 1980-01-01, the earliest a zip can hold and what Python's zipfile (so numpy) writes.
constexpr zip_uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;

// Unix mode of the members: a regular file, rw-r--r--.
constexpr zip_uint32_t kRegularFile0644 = 0100644u << 16;

// The 22-byte end-of-central-directory record of an archive with no members. libzip writes no file at all
// for zero entries, but numpy writes (and reads) exactly this.
constexpr unsigned char kEmptyZip[22] = {'P', 'K', 5, 6};

// A libzip source that libzip writes the archive into: bytes are gathered in a large buffer and written to the
// AtomicFile with pwrite, instead of libzip's default stdio file that issues 4 KiB write(2) calls. libzip seeks
// back to rewrite each local header once the member's CRC and sizes are known; a write away from the end of
// the buffer flushes it.
class ZipFileSink {
public:
    explicit ZipFileSink(AtomicFile& file) : file_(file) {
        zip_error_init(&zerr_);
        buf_.reserve(kBufferBytes);
    }
    ~ZipFileSink() { zip_error_fini(&zerr_); }

    static zip_int64_t callback(void* self, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        return static_cast<ZipFileSink*>(self)->handle(data, len, cmd);
    }
    // The first exception a callback caught (libzip is C: exceptions must not unwind through it).
    std::exception_ptr error;

private:
    static constexpr size_t kBufferBytes = size_t{8} << 20;

    zip_int64_t handle(void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        try {
            switch (cmd) {
                case ZIP_SOURCE_SUPPORTS:
                    return ZIP_SOURCE_SUPPORTS_WRITABLE;
                case ZIP_SOURCE_STAT: {
                    auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &zerr_);
                    if (st == nullptr) return -1;
                    zip_stat_init(st);
                    st->size = 0;
                    st->valid |= ZIP_STAT_SIZE;
                    return sizeof(zip_stat_t);
                }
                case ZIP_SOURCE_OPEN:
                case ZIP_SOURCE_CLOSE:
                case ZIP_SOURCE_FREE:
                case ZIP_SOURCE_ROLLBACK_WRITE:  // the AtomicFile removes the temporary
                case ZIP_SOURCE_REMOVE:
                    return 0;
                case ZIP_SOURCE_READ:
                    return 0;  // a new archive: nothing to read
                case ZIP_SOURCE_SEEK:
                case ZIP_SOURCE_TELL:
                    return 0;
                case ZIP_SOURCE_BEGIN_WRITE:
                    pos_ = end_ = buf_offset_ = 0;
                    buf_.clear();
                    return 0;
                case ZIP_SOURCE_WRITE:
                    write(data, len);
                    return static_cast<zip_int64_t>(len);
                case ZIP_SOURCE_SEEK_WRITE: {
                    const zip_int64_t to = zip_source_seek_compute_offset(pos_, end_, data, len, &zerr_);
                    if (to < 0) return -1;
                    pos_ = static_cast<uint64_t>(to);
                    return 0;
                }
                case ZIP_SOURCE_TELL_WRITE:
                    return static_cast<zip_int64_t>(pos_);
                case ZIP_SOURCE_COMMIT_WRITE:
                    flush();
                    return 0;
                case ZIP_SOURCE_ERROR:
                    return zip_error_to_data(&zerr_, data, len);
                default:
                    zip_error_set(&zerr_, ZIP_ER_OPNOTSUPP, 0);
                    return -1;
            }
        } catch (...) {
            if (!error) error = std::current_exception();
            zip_error_set(&zerr_, ZIP_ER_WRITE, 0);
            return -1;
        }
    }

    void write(const void* data, size_t n) {
        if (pos_ != buf_offset_ + buf_.size()) {
            flush();
            buf_offset_ = pos_;
        }
        const char* p = static_cast<const char*>(data);
        if (buf_.empty() && n >= kBufferBytes) {
            file_.write_at(pos_, p, n);
            buf_offset_ = pos_ + n;
        } else {
            buf_.insert(buf_.end(), p, p + n);
            if (buf_.size() >= kBufferBytes) flush();
        }
        pos_ += n;
        end_ = std::max(end_, pos_);
    }

    void flush() {
        if (!buf_.empty()) file_.write_at(buf_offset_, buf_.data(), buf_.size());
        buf_offset_ += buf_.size();
        buf_.clear();
    }

    AtomicFile& file_;
    std::vector<char> buf_;
    uint64_t buf_offset_ = 0;  // file offset of buf_[0]
    uint64_t pos_ = 0;         // libzip's write position
    uint64_t end_ = 0;         // bytes written so far (the file's size)
    zip_error_t zerr_;
};

// A libzip source for one member: the npy header followed by the array's bytes, served without a copy.
class MemberSource {
public:
    MemberSource(std::string header, const void* data, size_t nbytes, Progress& progress)
        : header_(std::move(header)), data_(static_cast<const char*>(data)), nbytes_(nbytes), progress_(progress) {
        zip_error_init(&zerr_);
    }
    ~MemberSource() { zip_error_fini(&zerr_); }

    static zip_int64_t callback(void* self, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        return static_cast<MemberSource*>(self)->handle(data, len, cmd);
    }

private:
    zip_int64_t handle(void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        switch (cmd) {
            case ZIP_SOURCE_SUPPORTS:
                return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                                      ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
            case ZIP_SOURCE_OPEN:
                pos_ = 0;
                return 0;
            case ZIP_SOURCE_READ: {
                char* out = static_cast<char*>(data);
                uint64_t done = 0;
                while (done < len && pos_ < header_.size() + nbytes_) {
                    const bool in_header = pos_ < header_.size();
                    const char* from = in_header ? header_.data() + pos_ : data_ + (pos_ - header_.size());
                    const uint64_t left = in_header ? header_.size() - pos_ : header_.size() + nbytes_ - pos_;
                    const uint64_t n = std::min<uint64_t>(left, len - done);
                    std::memcpy(out + done, from, n);
                    if (!in_header) progress_.advance(n);
                    done += n;
                    pos_ += n;
                }
                return static_cast<zip_int64_t>(done);
            }
            case ZIP_SOURCE_CLOSE:
            case ZIP_SOURCE_FREE:  // owned by save_npz, which outlives the archive
                return 0;
            case ZIP_SOURCE_STAT: {
                auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &zerr_);
                if (st == nullptr) return -1;
                zip_stat_init(st);
                st->size = header_.size() + nbytes_;
                st->valid |= ZIP_STAT_SIZE;
                return sizeof(zip_stat_t);
            }
            case ZIP_SOURCE_ERROR:
                return zip_error_to_data(&zerr_, data, len);
            default:
                zip_error_set(&zerr_, ZIP_ER_OPNOTSUPP, 0);
                return -1;
        }
    }

    std::string header_;
    const char* data_;
    size_t nbytes_;
    Progress& progress_;
    uint64_t pos_ = 0;
    zip_error_t zerr_;
};

struct Member {
    std::string name;
    std::string header;
    const void* data;
    size_t nbytes;
};

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

[[noreturn]] void fail_zip(const std::string& path, const char* what, zip_error_t* err) {
    const int code = zip_error_code_zip(err);
    throw Error(code == ZIP_ER_MEMORY ? Code::no_memory : Code::io,
                fmt::format("{}: {}: {}", path, what, zip_error_strerror(err)));
}

}  // namespace

void save_npz(const std::string& path, const VarCollection& vars, NpzWriteOptions options) {
    if (options.layout == Layout::automatic) options.layout = Layout::plain;
    if (options.layout != Layout::plain && options.layout != Layout::objax)
        fail(Code::invalid, "{}: unknown layout {}", path, static_cast<uint32_t>(options.layout));
    if (options.level < 0 || options.level > 9)
        fail(Code::invalid, "{}: deflate level {} is not in 0..9", path, options.level);

    std::vector<Member> members;
    std::u32string names;  // keeps the objax names array alive until the archive is written
    if (options.layout == Layout::objax) {
        size_t chars = 0;
        names = objax_names(vars, chars);
        const std::vector<int64_t> shape{static_cast<int64_t>(vars.size())};
        members.push_back({"names.npy", format_npy_header(DType::unicode, 4 * chars, shape), names.data(),
                           names.size() * sizeof(char32_t)});
    }
    uint64_t total = 0;
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        std::string name = options.layout == Layout::objax ? std::to_string(i) : vars.name(i);
        members.push_back({name + std::string(kNpySuffix), format_npy_header(a.dtype(), a.itemsize(), a.shape()),
                           a.data(), a.nbytes()});
        total += a.nbytes();
    }
    options.progress.start(total);

    AtomicFile file(path);
    if (members.empty()) {
        file.write_at(0, kEmptyZip, sizeof kEmptyZip);
        file.commit();
        return;
    }

    ZipFileSink sink(file);
    zip_error_t err;
    zip_error_init(&err);
    std::unique_ptr<zip_error_t, void (*)(zip_error_t*)> err_guard(&err, zip_error_fini);
    zip_source_t* out = zip_source_function_create(&ZipFileSink::callback, &sink, &err);
    if (out == nullptr) fail_zip(path, "cannot create zip output", &err);
    zip_t* za = zip_open_from_source(out, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (za == nullptr) {
        zip_source_free(out);
        fail_zip(path, "cannot start zip archive", &err);
    }
    std::unique_ptr<zip_t, void (*)(zip_t*)> archive(za, zip_discard);

    std::vector<std::unique_ptr<MemberSource>> sources;
    sources.reserve(members.size());
    const zip_int32_t method = options.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE;
    for (Member& m : members) {
        sources.push_back(
            std::make_unique<MemberSource>(std::move(m.header), m.data, m.nbytes, options.progress));
        zip_source_t* src = zip_source_function_create(&MemberSource::callback, sources.back().get(), &err);
        if (src == nullptr) fail_zip(path, "cannot create zip member source", &err);
        const zip_int64_t idx = zip_file_add(za, m.name.c_str(), src, ZIP_FL_ENC_UTF_8);
        if (idx < 0) {
            zip_source_free(src);
            fail_zip(path, fmt::format("cannot add member '{}'", m.name).c_str(), zip_get_error(za));
        }
        const auto i = static_cast<zip_uint64_t>(idx);
        if (zip_set_file_compression(za, i, method, static_cast<zip_uint32_t>(options.level)) != 0 ||
            zip_file_set_dostime(za, i, 0, kDosDate1980, 0) != 0 ||
            zip_file_set_external_attributes(za, i, 0, ZIP_OPSYS_UNIX, kRegularFile0644) != 0)
            fail_zip(path, fmt::format("cannot set up member '{}'", m.name).c_str(), zip_get_error(za));
    }

    if (zip_close(za) != 0) {
        if (sink.error) std::rethrow_exception(sink.error);
        fail_zip(path, "cannot write zip archive", zip_get_error(za));
    }
    archive.release();  // zip_close freed it
    file.commit();
}

}  // namespace ckpt
