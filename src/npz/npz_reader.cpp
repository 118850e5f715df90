// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_reader.hpp"

#include "npz/crc32.hpp"
#include "npz/read_plan.hpp"
#include "core/cores.hpp"
#include "core/decimal_index.hpp"
#include "core/error.hpp"
#include "core/find_duplicate.hpp"
#include "core/in_order_shares.hpp"
#include "core/utf8.hpp"
#include "npz/zip_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace ckpt::core {

namespace {

// objax's member names: "0" .. "<n-1>", unpadded.
std::optional<size_t> objax_index(const std::string& name, uint64_t n) {
    const std::optional<int64_t> k = parse_padded_index(name, 1);
    if (!k || static_cast<uint64_t>(*k) >= n) return std::nullopt;
    return static_cast<size_t>(*k);
}

}  // namespace

NpzReader::NpzReader(std::unique_ptr<InputFile> file, std::string label, NpzReadOptions options)
    : file_(std::move(file)), options_(options) {
    zip_ = std::make_unique<ZipReader>(*file_, std::move(label), options_.max_members, options_.read_ahead);
    scan();
    MetadataRecord record = take_metadata();
    take_chunks();
    apply_dtypes(record.dtypes);  // keyed by member, as numpy.load names them: before objax names replace those
    metadata_ = std::move(record.user);
    detect_layout();
}

std::optional<size_t> NpzReader::find(std::string_view name) const {
    return names_.find(entries_.size(), name, [this](size_t i) -> const std::string& { return entries_[i].name; });
}

NpzReader::NpzReader(NpzReader&&) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&&) noexcept = default;
NpzReader::~NpzReader() = default;

NpzReader NpzReader::open(Storage& storage, const std::string& path, NpzReadOptions options) {
    return NpzReader(storage.open_read(path), path, options);
}

std::string NpzReader::where(const Entry& e) const { return fmt::format("{}: member '{}'", label(), printable(e.member)); }

void NpzReader::scan() {
    const auto& members = zip_->members();
    entries_.resize(members.size());
    // Each member's npy header is checked on its own: on several threads for a large archive.
    struct Scratch {
        std::string head;
    };
    const auto check = [&](Scratch& scratch, size_t i) {
        Entry& e = entries_[i];
        e.member = members[i].name;
        e.index = i;
        e.size = members[i].size;
        const auto here = [&] { return where(e); };  // formatted only on failure

        const bool suffixed = e.member.size() > kNpySuffix.size() &&
                              e.member.compare(e.member.size() - kNpySuffix.size(), kNpySuffix.size(), kNpySuffix) == 0;
        e.name = suffixed ? e.member.substr(0, e.member.size() - kNpySuffix.size()) : e.member;
        try {
            // The zip reader has a stored member's first bytes already; other members are read for their header.
            const std::string_view head = zip_->head(i, scratch.head);
            // numpy.load gives a member without the npy magic as bytes (a README.txt beside the arrays): not an
            // array here, unless its name says it is one.
            const auto other = [&](const char* p, size_t n) {
                return !suffixed && (n < kNpyMagicBytes || std::memcmp(p, "\x93NUMPY", kNpyMagicBytes) != 0);
            };
            if (!head.empty() && head.size() >= std::min<uint64_t>(e.size, kNpyMagicBytes) &&
                other(head.data(), head.size())) {
                e.other = true;
                return;
            }
            size_t in_head = 0;  // the header's length, when the head holds all of it
            if (!head.empty() && head.size() >= std::min<uint64_t>(e.size, kNpyPreambleMax)) {
                const size_t data_offset = npy_data_offset(head.data(), head.size(), e.size, options_.max_header_bytes);
                if (data_offset <= head.size()) in_head = data_offset;
            }
            if (in_head > 0) {
                e.header = parse_npy_header(head.data(), in_head, options_.max_header_bytes);
                e.npy_crc = crc32(0, head.data(), in_head);
            } else {
                ZipReader::Stream in(*zip_, i);
                char preamble[kNpyPreambleMax];
                const size_t got = in.read(preamble, sizeof preamble);
                if (other(preamble, got)) {
                    e.other = true;
                    return;
                }
                const size_t data_offset = npy_data_offset(preamble, got, e.size, options_.max_header_bytes);
                // A version 1.0 header of length 0 or 1 ends inside the preamble bytes already read (the parse below
                // then rejects it): copy only what belongs to the header, read only what is missing.
                const size_t have = std::min(got, data_offset);
                std::string bytes(data_offset, '\0');
                std::copy(preamble, preamble + have, bytes.begin());
                in.read_exact(&bytes[have], data_offset - have);
                e.header = parse_npy_header(bytes.data(), bytes.size(), options_.max_header_bytes);
                e.npy_crc = crc32(0, bytes.data(), bytes.size());
            }
        } catch (const Error& err) {
            rethrow_naming(err, here());  // npy messages say what is wrong; this says where
        }
        if (e.header.data_offset + e.header.nbytes != e.size)
            fail(Code::format, "{}: member is {} bytes but its npy header describes {} ({} header + {} data)", here(),
                 e.size, e.header.data_offset + e.header.nbytes, e.header.data_offset, e.header.nbytes);
    };
    for_each_in_order_shares<Scratch>(members.size(), open_threads(members.size(), *file_), check);
    zip_->drop_heads();
    skip_other_members();

    uint64_t total = 0;
    for (const Entry& e : entries_) total += e.header.nbytes;  // each below the file's size: cannot overflow
    if (total > options_.max_total_bytes)
        fail(Code::format, "{}: the arrays hold {} bytes, more than the limit of {} (max_total_bytes)", label(), total,
             options_.max_total_bytes);

    // A variable name must not come from two members ("x" and "x.npy"); the later member is reported. Member
    // names are unique, so where all or none of them end in ".npy" (as in every file numpy or ckpt writes),
    // variable names are too.
    const size_t suffixed = static_cast<size_t>(std::count_if(
        entries_.begin(), entries_.end(), [](const Entry& e) { return e.name.size() != e.member.size(); }));
    if (suffixed == 0 || suffixed == entries_.size()) return;
    if (const auto d = find_duplicate(entries_.size(), [&](size_t i) -> const std::string& { return entries_[i].name; }))
        fail(Code::format, "{}: variable '{}' also stored as member '{}'", where(entries_[d->second]),
             entries_[d->second].name, entries_[d->first].member);
}

void NpzReader::skip_other_members() {
    std::vector<std::string> others;
    for (const Entry& e : entries_)
        if (e.other) others.push_back(printable(e.member));
    if (others.empty()) return;
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.other; }),
                   entries_.end());
    if (!entries_.empty()) return;
    // A zip with no array at all is some other program's file (torch.save writes zips of pickles and raw data).
    const size_t shown = std::min<size_t>(others.size(), 3);
    std::string names;
    for (size_t k = 0; k < shown; ++k) names += (k == 0 ? "'" : ", '") + others[k] + "'";
    fail(Code::format, "{}: not an npz checkpoint: a zip file, but none of its {} member{} is an npy array ({}{})",
         label(), others.size(), others.size() == 1 ? "" : "s", names, others.size() > shown ? ", ..." : "");
}

MetadataRecord NpzReader::take_metadata() {
    const auto at = std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.name == kMetadataName; });
    if (at == entries_.end()) return {};
    MetadataRecord record;
    metadata_member_ = at->member;
    try {
        const NpyHeader& h = at->header;
        if (h.dtype != DType::unicode || !h.shape.empty())
            fail(Code::format, "the metadata member must be a 0-d '<U' array, not {} of {} dimensions",
                 npy_descr(h.dtype, h.itemsize), h.shape.size());
        if (h.nbytes > kMaxMetadataBytes)
            fail(Code::format, "the metadata member holds {} bytes, more than the limit of {}", h.nbytes,
                 kMaxMetadataBytes);
        std::u32string text(h.nbytes / 4, U'\0');
        read_into(static_cast<size_t>(at - entries_.begin()), &text[0], nullptr);  // not array data
        text.erase(text.find_last_not_of(U'\0') + 1);  // numpy strips trailing NULs
        std::string utf8;
        if (!utf32_to_utf8(text, utf8)) fail(Code::format, "metadata: the text is not valid unicode");
        record = metadata_from_json(utf8);
    } catch (const Error& err) {
        rethrow_naming(err, where(*at));
    }
    entries_.erase(at);
    return record;
}

void NpzReader::take_chunks() {
    const auto at =
        std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.name == kChunkTableName; });
    if (at == entries_.end()) return;
    chunks_ = std::make_unique<Entry>(std::move(*at));
    entries_.erase(at);
}

std::optional<ChunkTable> NpzReader::chunk_table() {
    if (!chunks_) return std::nullopt;
    const Entry& e = *chunks_;
    try {
        const NpyHeader& h = e.header;
        if (h.dtype != DType::uint8 || h.shape.size() != 1)
            fail(Code::format, "the chunk table must be a 1-D uint8 array, not {} of {} dimensions",
                 npy_descr(h.dtype, h.itemsize), h.shape.size());
        if (h.nbytes > file_->size())
            fail(Code::format, "the chunk table's {} bytes are more than the file holds", h.nbytes);
        std::vector<unsigned char> bytes(h.nbytes);
        read_entry(e, bytes.data(), nullptr);
        return decode_chunk_table(bytes.data(), bytes.size());
    } catch (const Error& err) {
        rethrow_naming(err, where(e));
    }
}

void NpzReader::apply_dtypes(const std::vector<std::pair<std::string, DType>>& dtypes) {
    if (dtypes.empty()) return;
    std::unordered_map<std::string_view, size_t> by_name;
    by_name.reserve(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) by_name.emplace(entries_[i].name, i);
    for (const auto& [name, dtype] : dtypes) {
        const auto it = by_name.find(name);
        if (it == by_name.end())
            fail(Code::format, "{}: member '{}': metadata: dtype {} is recorded for '{}', which is not a member of the file",
                 label(), metadata_member_, dtype_name(dtype), printable(name));
        Entry& e = entries_[it->second];
        try {
            retype_npy_header(e.header, dtype);
        } catch (const Error& err) {
            rethrow_with_context(err, fmt::format("{}: member '{}': metadata: member '{}'", label(), metadata_member_,
                                                  e.member));
        }
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
            if (&e != &*names_at && !objax_index(e.name, n)) {
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
            if (names[i] == kMetadataName || names[i] == kChunkTableName)
                fail(Code::format, "{}: name #{} is '{}', which is reserved for ckpt's own member", here, i, names[i]);
        }
    }
    layout_ = Layout::objax;
    std::vector<Entry> ordered(n);
    for (Entry& e : entries_) {
        const std::optional<size_t> k = e.name == kObjaxNamesKey ? std::nullopt : objax_index(e.name, n);
        if (!k) continue;
        e.name = names[*k];
        ordered[*k] = std::move(e);
    }
    entries_ = std::move(ordered);
}

void NpzReader::read_into(size_t i, void* dst) { read_entries({{i, dst}}); }

void NpzReader::read_into(size_t i, void* dst, const OnBytes& on_bytes) { read_entry(entries_.at(i), dst, on_bytes); }

void NpzReader::read_entry(const Entry& e, void* dst, const OnBytes& on_bytes) {
    const NpyHeader& h = e.header;
    ZipReader::Stream in(*zip_, e.index);
    // The CRC covers the npy header too: a stored member's is counted from the copy kept at opening, a deflated
    // one's must be decompressed again.
    if (zip_->members()[e.index].method == zip::kMethodStore) {
        in.skip_prefix(h.data_offset, e.npy_crc);
    } else {
        std::string header(h.data_offset, '\0');
        in.read_exact(&header[0], header.size());
    }
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
        if (on_bytes) on_bytes(n);
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

void NpzReader::read_rows(size_t i, int64_t first, int64_t count, void* dst) {
    const Entry& e = entries_.at(i);
    const NpyHeader& h = e.header;
    if (h.shape.empty() || first < 0 || count < 0 || first > h.shape[0] || count > h.shape[0] - first)
        fail(Code::invalid, "{}: rows [{}, {} + {}) are not rows of the array", where(e), first, first, count);
    if (first == 0 && count == h.shape[0]) return read_into(i, dst);
    const size_t row_bytes = h.shape[0] == 0 ? 0 : h.nbytes / static_cast<size_t>(h.shape[0]);
    const size_t n = row_bytes * static_cast<size_t>(count);
    if (n == 0) return;
    if (zip_->members()[e.index].method == zip::kMethodStore && !(h.fortran_order && h.shape.size() > 1)) {
        zip_->read_stored(e.index, h.data_offset + row_bytes * static_cast<uint64_t>(first), dst, n, false);
        if (h.byteswap) byteswap_in_place(h.dtype, dst, n);
        return;
    }
    const Array whole = read(i);
    std::memcpy(dst, static_cast<const char*>(whole.data()) + row_bytes * static_cast<size_t>(first), n);
}

void NpzReader::read_entries(const std::vector<Job>& jobs) {
    std::vector<ArrayRead> reads;
    reads.reserve(jobs.size());
    for (const Job& job : jobs) {
        const Entry& e = entries_.at(job.entry);
        const ZipReader::Member& m = zip_->members()[e.index];
        reads.push_back({m.data_offset + e.header.data_offset, e.header.nbytes, m.method == zip::kMethodStore,
                         e.header.fortran_order && e.header.shape.size() > 1});
    }
    // The parts, batches and shares of the plan (npz/read_plan.hpp). Each thread reads its own contiguous share of
    // the file, in file order: the kernel's readahead then sees one sequential stream per thread, which from a cold
    // cache reads faster than parts taken in turn, which look random to it (512 MiB on two threads here: 0.35 s
    // against 0.50 s). A thread whose share is done takes the second half of the largest one left.
    ReadPlan plan = plan_reads(reads, file_->concurrent_reads(), cores());
    options_.progress.start(plan.total);
    const std::vector<ReadPlan::Part>& parts = plan.parts;
    const std::vector<size_t>& order = plan.order;
    const std::vector<uint64_t>& offset = plan.offset;
    std::vector<ReadPlan::Share>& shares = plan.shares;  // what each thread has yet to take
    const auto threads = static_cast<unsigned>(shares.size());
    using Part = ReadPlan::Part;
    using Batch = ReadPlan::Batch;
    using Share = ReadPlan::Share;

    // After a failure, parts later in `jobs` order are skipped but earlier ones still run, so the error reported is
    // that of the first failing part whatever the timing and whatever the batches.
    std::mutex mutex;  // guards the fields below and the progress callback
    std::atomic<size_t> first_failed{parts.size()};
    std::exception_ptr error;
    std::vector<uint32_t> part_crc(parts.size());
    std::set<size_t> handed;  // batches other threads found uncached, for the calling thread (see work)
    const OnBytes on_bytes = [&](uint64_t n) {
        std::lock_guard<std::mutex> lock(mutex);
        options_.progress.advance(n);
    };
    const auto take = [&](unsigned t) -> std::optional<size_t> {
        std::lock_guard<std::mutex> lock(mutex);
        Share& own = shares[t];
        if (own.begin == own.end) {
            if (t == 0 && !handed.empty()) {  // in file order, so that they are still read as one stream
                const size_t next = *handed.begin();
                handed.erase(handed.begin());
                return next;
            }
            Share* largest = &own;
            for (Share& s : shares)
                if (s.end - s.begin > largest->end - largest->begin) largest = &s;
            if (largest == &own) return std::nullopt;
            const size_t mid = largest->begin + (largest->end - largest->begin) / 2;
            own = {mid, largest->end};
            largest->end = mid;
        }
        return own.begin++;
    };
    const auto failed = [&](size_t p) {
        std::lock_guard<std::mutex> lock(mutex);
        if (p < first_failed.load()) {
            first_failed = p;
            error = std::current_exception();
        }
    };
    // One part on its own.
    const auto read_part = [&](size_t p) {
        const Part& part = parts[p];
        const Job& job = jobs[part.read];
        if (part.whole) return read_into(job.entry, job.dst, on_bytes);
        const Entry& e = entries_[job.entry];
        char* dst = static_cast<char*>(job.dst) + part.from;
        part_crc[p] = zip_->read_stored(e.index, e.header.data_offset + part.from, dst, part.size);
        if (e.header.byteswap) byteswap_in_place(e.header.dtype, dst, part.size);  // parts hold whole items
        on_bytes(part.size);
    };
    // A batch of small whole arrays: one read, from the first one's local header, then each array checked — its
    // local header, where opening left it unchecked (ZipReader::check_local), and its CRC — and copied from the
    // buffer. An array the read did not reach (the file ends early) is read on its own, which says where its data
    // ends. `cached_only`: returns false, having read nothing, if the batch's bytes are not in memory yet.
    const auto read_batch = [&](const Batch& b, std::vector<unsigned char>& buffer, bool cached_only) {
        const uint64_t from = member(jobs[parts[order[b.begin]].read].entry).local_offset;
        const size_t last = order[b.end - 1];
        buffer.resize(static_cast<size_t>(offset[last] + parts[last].size - from));
        if (cached_only && !file_->cached(from, buffer.size())) return false;
        const size_t got = file_->read_at(from, buffer.data(), buffer.size());
        uint64_t done = 0;
        for (size_t i = b.begin; i < b.end; ++i) {
            const size_t p = order[i];
            if (p >= first_failed.load()) continue;
            try {
                const size_t at = static_cast<size_t>(offset[p] - from);
                if (at + parts[p].size > got) {
                    read_part(p);
                    continue;
                }
                const Entry& e = entries_[jobs[parts[p].read].entry];
                zip_->check_local(e.index, buffer.data(), from, got);
                const unsigned char* src = buffer.data() + at;
                zip_->check_crc(e.index, crc32(e.npy_crc, src, parts[p].size));
                if (parts[p].size > 0) std::memcpy(jobs[parts[p].read].dst, src, parts[p].size);
                if (e.header.byteswap) byteswap_in_place(e.header.dtype, jobs[parts[p].read].dst, parts[p].size);
                done += parts[p].size;
            } catch (...) {
                failed(p);
            }
        }
        if (done > 0) on_bytes(done);
        return true;
    };
    // Batches of small arrays from a cold cache are read by the calling thread alone: a second thread reading
    // them too made restores of many small arrays slower, and much less steady, than one (W2 from a cold cache:
    // 34-60 ms on two threads, 28-30 ms on one, beside 23 ms for read() of the same bytes), while from the page
    // cache two threads are faster (8.6 ms against 10.2). So other threads read a batch only if it is cached, and
    // hand it to the calling thread if not, which reads what it was handed in file order once its own share is
    // done; large arrays are read by every thread either way.
    const auto work = [&](unsigned t) {
        std::vector<unsigned char> buffer;
        while (const std::optional<size_t> taken = take(t)) {
            const Batch& b = plan.batches[*taken];
            size_t first = parts.size();  // of the batch's parts, the first in jobs order
            for (size_t i = b.begin; i < b.end; ++i) first = std::min(first, order[i]);
            if (first >= first_failed.load()) continue;
            try {
                if (parts[first].batchable) {
                    if (!read_batch(b, buffer, t != 0)) {
                        std::lock_guard<std::mutex> lock(mutex);
                        handed.insert(*taken);
                    }
                } else {
                    read_part(first);
                }
            } catch (...) {
                failed(first);  // the batch's read failed: an error for each of its parts, of which this is the first
            }
        }
    };
    std::vector<std::thread> helpers;
    helpers.reserve(threads - 1);
    try {
        for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work, t);
    } catch (const std::system_error&) {
        // No more threads to be had: threads take over what is left of others' shares, so fewer still read it all.
    } catch (...) {
        first_failed = 0;  // out of memory: stop the threads that did start, then report
        for (auto& h : helpers) h.join();
        throw;
    }
    work(0);
    for (auto& h : helpers) h.join();
    work(0);  // what other threads handed over after this one had finished
    if (error) std::rethrow_exception(error);

    // A split entry's CRC-32: its npy header's, then its parts', combined in order.
    for (size_t p = 0; p < parts.size();) {
        if (parts[p].whole) {
            ++p;
            continue;
        }
        const Entry& e = entries_[jobs[parts[p].read].entry];
        uint32_t crc = e.npy_crc;
        for (const size_t job = parts[p].read; p < parts.size() && parts[p].read == job; ++p)
            crc = static_cast<uint32_t>(crc32_combine(crc, part_crc[p], static_cast<z_off_t>(parts[p].size)));
        zip_->check_crc(e.index, crc);
    }
}

VarCollection NpzReader::read_all() {
    std::vector<Array> arrays;
    std::vector<Job> jobs;
    arrays.reserve(entries_.size());
    jobs.reserve(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) {
        const NpyHeader& h = entries_[i].header;
        arrays.push_back(Array::allocate(h.dtype, h.itemsize, h.shape, false));
        jobs.push_back({i, arrays.back().data()});
    }
    read_entries(jobs);
    VarCollection vars;
    for (size_t i = 0; i < entries_.size(); ++i) vars.add(entries_[i].name, std::move(arrays[i]));
    vars.metadata() = metadata_;
    return vars;
}

}  // namespace ckpt::core
