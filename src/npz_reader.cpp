#include "npz_reader.hpp"

#include "error.hpp"
#include "utf8.hpp"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <unordered_map>
#include <unordered_set>

namespace ckpt {

namespace {

// Deflate cannot expand data more than 1032:1; a member declaring more is a bomb or a lie, and its size must
// not drive an allocation.
constexpr uint64_t kMaxDeflateRatio = 1032;
// zip64 allows 2^64 entries; no real checkpoint has more than a few hundred thousand.
constexpr uint64_t kMaxMembers = uint64_t{1} << 24;
// zip_fread of more than 4 GiB from a deflated member returns a wrong length in libzip 1.7.3 (#326).
constexpr size_t kReadChunk = size_t{1} << 30;

Code code_of(int zip_error) {
    switch (zip_error) {
        case ZIP_ER_MEMORY:
            return Code::no_memory;
        case ZIP_ER_NOENT:
            return Code::not_found;
        case ZIP_ER_OPEN:
        case ZIP_ER_READ:
        case ZIP_ER_SEEK:
        case ZIP_ER_TELL:
            return Code::io;
        case ZIP_ER_COMPNOTSUPP:
        case ZIP_ER_ENCRNOTSUPP:
            return Code::unsupported;
        default:  // NOZIP, INCONS, CRC, ZLIB, EOF, COMPRESSED_DATA, MULTIDISK, …
            return Code::format;
    }
}

[[noreturn]] void fail_zip(const std::string& where, zip_error_t* err) {
    throw Error(code_of(zip_error_code_zip(err)), fmt::format("{}: {}", where, zip_error_strerror(err)));
}

bool is_canonical_index(const std::string& s, uint64_t limit, uint64_t& value) {
    if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return false;
    value = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    return value < limit;
}

}  // namespace

// libzip reads the archive through this source, which reads the InputFile: so every storage — and memory —
// is read the same way, with libzip's reads going straight to pread-style calls of the caller's size.
class NpzReader::InputSource {
public:
    explicit InputSource(InputFile& file) : file_(file) { zip_error_init(&zerr_); }
    ~InputSource() { zip_error_fini(&zerr_); }

    static zip_int64_t callback(void* self, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        return static_cast<InputSource*>(self)->handle(data, len, cmd);
    }

    // The storage's own error behind a libzip read error, with its path and OS reason.
    std::exception_ptr error;

private:
    zip_int64_t handle(void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
        try {
            switch (cmd) {
                case ZIP_SOURCE_SUPPORTS:
                    return ZIP_SOURCE_SUPPORTS_SEEKABLE;
                case ZIP_SOURCE_OPEN:
                    pos_ = 0;
                    return 0;
                case ZIP_SOURCE_READ: {
                    const size_t got = file_.read_at(pos_, data, static_cast<size_t>(len));
                    pos_ += got;
                    return static_cast<zip_int64_t>(got);
                }
                case ZIP_SOURCE_CLOSE:
                case ZIP_SOURCE_FREE:  // owned by the NpzReader
                    return 0;
                case ZIP_SOURCE_STAT: {
                    auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &zerr_);
                    if (st == nullptr) return -1;
                    zip_stat_init(st);
                    st->size = file_.size();
                    st->valid |= ZIP_STAT_SIZE;
                    return sizeof(zip_stat_t);
                }
                case ZIP_SOURCE_SEEK: {
                    const zip_int64_t to = zip_source_seek_compute_offset(pos_, file_.size(), data, len, &zerr_);
                    if (to < 0) return -1;
                    pos_ = static_cast<uint64_t>(to);
                    return 0;
                }
                case ZIP_SOURCE_TELL:
                    return static_cast<zip_int64_t>(pos_);
                case ZIP_SOURCE_ERROR:
                    return zip_error_to_data(&zerr_, data, len);
                default:
                    zip_error_set(&zerr_, ZIP_ER_OPNOTSUPP, 0);
                    return -1;
            }
        } catch (...) {
            // libzip is C: no exception may unwind through it. The error is rethrown once libzip returns.
            if (!error) error = std::current_exception();
            zip_error_set(&zerr_, ZIP_ER_READ, EIO);
            return -1;
        }
    }

    InputFile& file_;
    uint64_t pos_ = 0;
    zip_error_t zerr_;
};

namespace {

// One member opened for reading. libzip checks the CRC only when a read reaches the end of the member, so
// every read of data ends with expect_end().
class MemberFile {
public:
    MemberFile(zip_t* za, uint64_t index, const std::string& where, const std::exception_ptr& storage_error)
        : where_(where), storage_error_(storage_error) {
        zf_ = zip_fopen_index(za, index, 0);
        if (zf_ == nullptr) fail(zip_get_error(za));
    }
    ~MemberFile() { zip_fclose(zf_); }
    MemberFile(const MemberFile&) = delete;
    MemberFile& operator=(const MemberFile&) = delete;

    // Reads up to n bytes; fewer only at the end of the member.
    size_t read_some(void* dst, size_t n) {
        char* p = static_cast<char*>(dst);
        size_t done = 0;
        while (done < n) {
            const zip_int64_t got = zip_fread(zf_, p + done, std::min(n - done, kReadChunk));
            if (got < 0) fail(zip_file_get_error(zf_));
            if (got == 0) break;
            done += static_cast<size_t>(got);
        }
        return done;
    }

    void read_exact(void* dst, size_t n) {
        const size_t got = read_some(dst, n);
        if (got != n) ckpt::fail(Code::format, "{}: data ends after {} of {} bytes", where_, got, n);
    }

    void skip(size_t n) {
        char buf[4096];
        while (n > 0) {
            const size_t chunk = std::min(n, sizeof buf);
            read_exact(buf, chunk);
            n -= chunk;
        }
    }

    // Reads past the last byte: libzip reports a CRC mismatch only here.
    void expect_end() {
        char extra;
        if (read_some(&extra, 1) != 0) ckpt::fail(Code::format, "{}: data is longer than its zip entry says", where_);
    }

private:
    [[noreturn]] void fail(zip_error_t* err) {
        if (zip_error_code_zip(err) == ZIP_ER_READ && storage_error_) std::rethrow_exception(storage_error_);
        fail_zip(where_, err);
    }

    std::string where_;
    const std::exception_ptr& storage_error_;
    zip_file_t* zf_ = nullptr;
};

}  // namespace

void NpzReader::ZipCloser::operator()(zip_t* za) const { zip_discard(za); }

NpzReader::NpzReader(std::unique_ptr<InputFile> file, std::string label, NpzReadOptions options)
    : file_(std::move(file)), label_(std::move(label)), options_(options) {
    const uint64_t size = file_->size();
    if (size == 0) fail(Code::format, "{}: empty file, not a zip archive", label_);
    zip_error_t err;
    zip_error_init(&err);
    source_ = std::make_unique<InputSource>(*file_);
    zip_source_t* src = zip_source_function_create(&InputSource::callback, source_.get(), &err);
    if (src == nullptr) fail_zip(label_, &err);
    zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (za == nullptr) {
        zip_source_free(src);
        if (source_->error) std::rethrow_exception(source_->error);
        const Code code = code_of(zip_error_code_zip(&err));
        const std::string text = zip_error_strerror(&err);
        zip_error_fini(&err);
        throw Error(code, fmt::format("{}: not a valid npz (zip) file: {}", label_, text));
    }
    zip_error_fini(&err);
    zip_.reset(za);
    scan(size);
    detect_layout();
}

NpzReader::NpzReader(NpzReader&&) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&&) noexcept = default;
NpzReader::~NpzReader() = default;

NpzReader NpzReader::open(Storage& storage, const std::string& path, NpzReadOptions options) {
    return NpzReader(storage.open_read(path), path, options);
}

void NpzReader::read_header(Entry& e, const std::string& here) {
    MemberFile f(zip_.get(), e.index, here, source_->error);
    char preamble[kNpyPreambleMax];
    const size_t got = f.read_some(preamble, std::min<uint64_t>(sizeof preamble, e.size));
    try {
        const size_t data_offset = npy_data_offset(preamble, got, e.size, options_.max_header_bytes);
        std::string header(data_offset, '\0');
        std::copy(preamble, preamble + got, header.begin());
        f.read_exact(&header[got], data_offset - got);
        e.header = parse_npy_header(header.data(), data_offset, options_.max_header_bytes);
    } catch (const Error& err) {
        // npy messages say what is wrong; this says where. MemberFile's messages already do.
        if (std::string_view(err.what()).rfind(here, 0) == 0) throw;
        rethrow_with_context(err, here);
    }
}

std::string NpzReader::where(const Entry& e) const { return fmt::format("{}: member '{}'", label_, e.member); }

void NpzReader::scan(uint64_t file_size) {
    zip_t* za = zip_.get();
    const zip_int64_t count = zip_get_num_entries(za, 0);
    if (count < 0 || static_cast<uint64_t>(count) > kMaxMembers)
        fail(Code::format, "{}: {} members is more than the limit of {}", label_, count, kMaxMembers);
    entries_.reserve(static_cast<size_t>(count));

    uint64_t compressed_total = 0;
    std::unordered_set<std::string> members;
    std::unordered_map<std::string, std::string> names;  // variable name -> member
    for (zip_int64_t i = 0; i < count; ++i) {
        zip_stat_t st;
        if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) != 0)
            fail_zip(fmt::format("{}: member #{}", label_, i), zip_get_error(za));
        Entry e;
        e.member = st.name;
        e.index = static_cast<uint64_t>(i);
        e.size = st.size;
        const std::string here = where(e);

        if (st.encryption_method != ZIP_EM_NONE) fail(Code::unsupported, "{}: encrypted members are not supported", here);
        if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
            fail(Code::unsupported, "{}: compression method {} is not supported (only stored and deflate)", here,
                 st.comp_method);
        if (st.comp_method == ZIP_CM_STORE && st.comp_size != st.size)
            fail(Code::format, "{}: stored member declares {} bytes but occupies {}", here, st.size, st.comp_size);
        if (st.comp_method == ZIP_CM_DEFLATE && st.size / kMaxDeflateRatio > st.comp_size)
            fail(Code::format, "{}: declares {} bytes from {} compressed, more than deflate can produce", here,
                 st.size, st.comp_size);
        // Members of a well-formed zip do not overlap, so together they fit in the file; overlapping members
        // are how zip bombs multiply their output.
        compressed_total += st.comp_size;
        if (compressed_total > file_size)
            fail(Code::format, "{}: members together occupy more than the file's {} bytes (overlapping members?)",
                 here, file_size);
        if (!members.insert(e.member).second) fail(Code::format, "{}: duplicate member name", here);

        const bool suffixed = e.member.size() > kNpySuffix.size() &&
                              e.member.compare(e.member.size() - kNpySuffix.size(), kNpySuffix.size(), kNpySuffix) == 0;
        e.name = suffixed ? e.member.substr(0, e.member.size() - kNpySuffix.size()) : e.member;
        if (e.name.empty()) fail(Code::format, "{}: empty variable name", here);
        if (!valid_utf8(e.name)) fail(Code::format, "{}: name is not valid UTF-8", here);
        auto [it, fresh] = names.emplace(e.name, e.member);
        if (!fresh) fail(Code::format, "{}: variable '{}' also stored as member '{}'", here, e.name, it->second);

        read_header(e, here);
        if (e.header.data_offset + e.header.nbytes != e.size)
            fail(Code::format, "{}: member is {} bytes but its npy header describes {} ({} header + {} data)", here,
                 e.size, e.header.data_offset + e.header.nbytes, e.header.data_offset, e.header.nbytes);
        entries_.push_back(std::move(e));
    }
}

void NpzReader::detect_layout() {
    layout_ = Layout::plain;
    if (options_.layout == Layout::plain) return;

    // objax writes np.savez(f, names=np.array(names), **{"0": v0, "1": v1, …}).
    const auto names_at = std::find_if(entries_.begin(), entries_.end(),
                                       [](const Entry& e) { return e.name == kObjaxNamesKey; });
    std::string why;
    if (names_at == entries_.end()) {
        why = "no 'names' member";
    } else if (names_at->header.shape.size() != 1 ||
               (names_at->header.dtype != DType::unicode && names_at->header.nbytes != 0)) {
        why = "'names' is not a 1-d unicode array";
    } else if (static_cast<uint64_t>(names_at->header.shape[0]) + 1 != entries_.size()) {
        why = "'names' does not count the other members";
    } else {
        const uint64_t n = entries_.size() - 1;
        for (const Entry& e : entries_) {
            uint64_t k;
            if (&e != &*names_at && !is_canonical_index(e.name, n, k)) {
                why = fmt::format("member '{}' is not an index below {}", e.member, n);
                break;
            }
        }
    }
    if (!why.empty()) {
        if (options_.layout == Layout::objax) fail(Code::format, "{}: not an objax-layout file: {}", label_, why);
        return;
    }

    const Entry names_entry = *names_at;
    const std::string here = where(names_entry);
    const size_t n = entries_.size() - 1;
    std::vector<std::string> names(n);
    if (n > 0) {
        const Array table = read(static_cast<size_t>(names_at - entries_.begin()));
        const size_t chars = table.itemsize() / 4;
        const auto* units = static_cast<const char32_t*>(table.data());
        std::unordered_set<std::string> seen;
        for (size_t i = 0; i < n; ++i) {
            std::u32string_view row(units + i * chars, chars);
            row = row.substr(0, row.find_last_not_of(U'\0') + 1);  // numpy strips trailing NULs
            if (row.empty()) fail(Code::format, "{}: name #{} is empty", here, i);
            if (!utf32_to_utf8(row, names[i])) fail(Code::format, "{}: name #{} is not valid unicode", here, i);
            if (!seen.insert(names[i]).second) fail(Code::format, "{}: name '{}' appears twice", here, names[i]);
        }
    }
    std::vector<Entry> ordered(n);
    for (Entry& e : entries_) {
        uint64_t k;
        if (e.name == kObjaxNamesKey || !is_canonical_index(e.name, n, k)) continue;
        e.name = names[k];
        ordered[k] = std::move(e);
    }
    entries_ = std::move(ordered);
    layout_ = Layout::objax;
}

void NpzReader::read_into(size_t i, void* dst) {
    const Entry& e = entries_.at(i);
    const NpyHeader& h = e.header;
    const std::string here = where(e);
    MemberFile f(zip_.get(), e.index, here, source_->error);
    f.skip(h.data_offset);
    if (h.fortran_order && h.shape.size() > 1 && h.nbytes > 0) {
        Array scratch = Array::allocate(h.dtype, h.itemsize, h.shape, false);
        f.read_exact(scratch.data(), h.nbytes);
        f.expect_end();
        fortran_to_c_order(scratch.data(), dst, h.shape, h.itemsize);
        options_.progress.advance(h.nbytes);
    } else {
        char* p = static_cast<char*>(dst);
        for (size_t done = 0; done < h.nbytes;) {
            const size_t n = std::min(h.nbytes - done, kReadChunk);
            f.read_exact(p + done, n);
            done += n;
            options_.progress.advance(n);
        }
        f.expect_end();
    }
    if (h.byteswap) byteswap_in_place(h.dtype, dst, h.nbytes);
}

Array NpzReader::read(size_t i) {
    const NpyHeader& h = entries_.at(i).header;
    Array a = Array::allocate(h.dtype, h.itemsize, h.shape, false);
    read_into(i, a.data());
    return a;
}

}  // namespace ckpt
