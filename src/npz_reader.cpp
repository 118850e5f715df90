#include "npz_reader.hpp"

#include "error.hpp"
#include "utf8.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace ckpt {

namespace {

// zip64 allows 2^64 entries; no real checkpoint has more than a few hundred thousand.
constexpr uint64_t kMaxMembers = uint64_t{1} << 24;

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

NpzReader::NpzReader(std::unique_ptr<InputFile> file, std::string label, NpzReadOptions options)
    : file_(std::move(file)), options_(options) {
    zip_ = std::make_unique<ZipReader>(*file_, std::move(label), kMaxMembers);
    scan();
    detect_layout();
}

NpzReader::NpzReader(NpzReader&&) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&&) noexcept = default;
NpzReader::~NpzReader() = default;

NpzReader NpzReader::open(Storage& storage, const std::string& path, NpzReadOptions options) {
    return NpzReader(storage.open_read(path), path, options);
}

std::string NpzReader::where(const Entry& e) const { return fmt::format("{}: member '{}'", label(), e.member); }

void NpzReader::scan() {
    const auto& members = zip_->members();
    entries_.reserve(members.size());
    std::unordered_map<std::string, std::string> names;  // variable name -> member
    for (size_t i = 0; i < members.size(); ++i) {
        Entry e;
        e.member = members[i].name;
        e.index = i;
        e.size = members[i].size;
        const std::string here = where(e);

        const bool suffixed = e.member.size() > kNpySuffix.size() &&
                              e.member.compare(e.member.size() - kNpySuffix.size(), kNpySuffix.size(), kNpySuffix) == 0;
        e.name = suffixed ? e.member.substr(0, e.member.size() - kNpySuffix.size()) : e.member;
        auto [it, fresh] = names.emplace(e.name, e.member);
        if (!fresh) fail(Code::format, "{}: variable '{}' also stored as member '{}'", here, e.name, it->second);

        ZipReader::Stream in(*zip_, i);
        char preamble[kNpyPreambleMax];
        const size_t got = in.read(preamble, sizeof preamble);
        try {
            const size_t data_offset = npy_data_offset(preamble, got, e.size, options_.max_header_bytes);
            // A version 1.0 header of length 0 or 1 ends inside the preamble bytes already read (the parse below
            // then rejects it): copy only what belongs to the header, read only what is missing.
            const size_t have = std::min(got, data_offset);
            std::string header(data_offset, '\0');
            std::copy(preamble, preamble + have, header.begin());
            in.read_exact(&header[have], data_offset - have);
            e.header = parse_npy_header(header.data(), data_offset, options_.max_header_bytes);
        } catch (const Error& err) {
            rethrow_naming(err, here);  // npy messages say what is wrong; this says where
        }
        if (e.header.data_offset + e.header.nbytes != e.size)
            fail(Code::format, "{}: member is {} bytes but its npy header describes {} ({} header + {} data)", here,
                 e.size, e.header.data_offset + e.header.nbytes, e.header.data_offset, e.header.nbytes);
        entries_.push_back(std::move(e));
    }
}

void NpzReader::detect_layout() {
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
        if (options_.layout == Layout::objax) fail(Code::format, "{}: not an objax-layout file: {}", label(), why);
        return;
    }

    const Entry names_entry = *names_at;
    const std::string here = where(names_entry);
    const size_t n = entries_.size() - 1;
    std::vector<std::string> names(n);
    if (n > 0) {
        const NpyHeader& h = names_at->header;
        Array table = Array::allocate(h.dtype, h.itemsize, h.shape, false);
        read_into(static_cast<size_t>(names_at - entries_.begin()), table.data(), nullptr);  // not array data
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
}

void NpzReader::read_into(size_t i, void* dst) { read_into(i, dst, &options_.progress); }

void NpzReader::read_into(size_t i, void* dst, Progress* progress) {
    const Entry& e = entries_.at(i);
    const NpyHeader& h = e.header;
    ZipReader::Stream in(*zip_, e.index);
    std::string header(h.data_offset, '\0');
    in.read_exact(&header[0], header.size());  // re-read: the CRC covers the header too
    const bool transpose = h.fortran_order && h.shape.size() > 1 && h.nbytes > 0;
    std::optional<Array> scratch;
    char* out = static_cast<char*>(dst);
    if (transpose) {
        scratch = Array::allocate(h.dtype, h.itemsize, h.shape, false);
        out = static_cast<char*>(scratch->data());
    }
    constexpr size_t kProgressChunk = size_t{64} << 20;
    for (size_t done = 0; done < h.nbytes;) {
        const size_t n = std::min(h.nbytes - done, kProgressChunk);
        in.read_exact(out + done, n);
        done += n;
        if (progress != nullptr) progress->advance(n);
    }
    in.finish();
    if (transpose) fortran_to_c_order(scratch->data(), dst, h.shape, h.itemsize);
    if (h.byteswap) byteswap_in_place(h.dtype, dst, h.nbytes);
}

Array NpzReader::read(size_t i) {
    const NpyHeader& h = entries_.at(i).header;
    Array a = Array::allocate(h.dtype, h.itemsize, h.shape, false);
    read_into(i, a.data());
    return a;
}

VarCollection NpzReader::read_all() {
    uint64_t total = 0;
    for (const Entry& e : entries_) total += e.header.nbytes;
    options_.progress.start(total);
    VarCollection vars;
    for (size_t i = 0; i < entries_.size(); ++i) vars.add(entries_[i].name, read(i));
    return vars;
}

}  // namespace ckpt
