// SPDX-License-Identifier: Apache-2.0
#include "npz/npz_writer.hpp"

#include "core/error.hpp"
#include "npz/crc32.hpp"
#include "npz/metadata.hpp"
#include "npy/npy.hpp"
#include "core/utf8.hpp"
#include "npz/zip_format.hpp"
#include "npz/zip_writer.hpp"

#include <zlib.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace ckpt::core {

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

// The metadata member's record: the user's key/values (without the manager's "ckpt." keys unless manager_keys: see
// NpzWriteOptions) and the dtype of every array whose descr does not say it
// (bfloat16 and float8 are written as raw bytes, and raw bytes of two read as bfloat16 unless recorded as void).
// Arrays are named as numpy.load's keys name them (the member name without ".npy"), so the record reads the same
// whichever layout a reader sees.
MetadataRecord metadata_record(const VarCollection& vars, Layout layout, bool manager_keys) {
    MetadataRecord record;
    if (manager_keys) {
        record.user = vars.metadata();
    } else {
        const Metadata& all = vars.metadata();
        for (size_t i = 0; i < all.size(); ++i)
            if (all.key(i).compare(0, 5, "ckpt.") != 0) record.user.set(all.key(i), all.value(i));
    }
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        if (is_ml_dtype(a.dtype()) || (a.dtype() == DType::void_ && a.itemsize() == 2))
            record.dtypes.emplace_back(layout == Layout::objax ? std::to_string(i) : vars.name(i), a.dtype());
    }
    return record;
}

// A stored member's CRC-32 goes in its local header, before its data. Computing it in a pass just before writing
// cost 0.73x the throughput of raw write()+fsync for 512 MiB in 64 arrays (bench/bench_writers); computing every
// member's CRC on a second thread, ahead of the writer, hides it — except for the member the writer reaches first
// (a whole save of one large array). Where the output can be patched, that member is written at once and its CRC
// patched in when the thread has it. The chunk hashes of a save that records them are computed there too, chunk by
// chunk in the CRC's pass, and the writer takes each as it reaches its chunk: hashing on the writer's thread made a
// save of 512 MiB that changed entirely 11% slower on XFS (bench/bench_incremental).
class CrcAhead {
public:
    // `chunked[i]`: member i's second piece (its array) is also hashed in chunks of chunk_bytes (chunks.hpp), in
    // the same pass over memory as its CRC, so that the writer only compares and writes.
    CrcAhead(std::vector<std::vector<ZipWriter::Piece>> members, std::vector<bool> chunked, uint32_t chunk_bytes)
        : members_(std::move(members)),
          chunked_(std::move(chunked)),
          chunk_bytes_(chunk_bytes),
          crcs_(members_.size()),
          hashes_(members_.size()) {
        for (size_t i = 0; i < members_.size(); ++i)
            if (chunked_[i]) hashes_[i].resize(chunk_count(members_[i][1].size, chunk_bytes_));
        thread_ = std::thread([this] { run(); });
    }
    ~CrcAhead() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            cancelled_ = true;
        }
        thread_.join();
    }
    uint32_t get(size_t i) {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return done_ > i; });
        return crcs_[i];
    }
    bool ready(size_t i) {
        std::lock_guard<std::mutex> lock(mutex_);
        return done_ > i;
    }
    // The hash of chunk k of member i (a chunked one), once the thread has it.
    Hash128 hash(size_t i, size_t k) {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return done_ > i || (done_ == i && chunks_done_ > k); });
        return hashes_[i][k];
    }

private:
    static constexpr size_t kChunksPerNotice = 64;  // the writer hears of progress in steps of this many chunks

    void publish(size_t member, size_t chunks, std::optional<uint32_t> crc) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (crc) {
            crcs_[member] = *crc;
            done_ = member + 1;
            chunks_done_ = 0;
        } else {
            chunks_done_ = chunks;
        }
        ready_.notify_all();
    }
    bool cancelled() {
        std::lock_guard<std::mutex> lock(mutex_);
        return cancelled_;
    }

    void run() {
        for (size_t i = 0; i < members_.size(); ++i) {
            if (!chunked_[i]) {
                const uint32_t crc = ZipWriter::crc_of(members_[i]);
                if (cancelled()) return;
                publish(i, 0, crc);
                continue;
            }
            const ZipWriter::Piece& header = members_[i][0];
            const ZipWriter::Piece& array = members_[i][1];
            uint32_t crc = crc32(0, header.data, header.size);
            const auto* p = static_cast<const unsigned char*>(array.data);
            std::vector<Hash128>& hashes = hashes_[i];
            for (size_t k = 0; k < hashes.size(); ++k) {
                const size_t at = k * chunk_bytes_;
                const size_t n = std::min<size_t>(chunk_bytes_, array.size - at);
                crc = crc32(crc, p + at, n);  // the chunk is in cache for its hash
                hashes[k] = hash128(p + at, n);
                if ((k + 1) % kChunksPerNotice == 0) {
                    if (cancelled()) return;
                    publish(i, k + 1, std::nullopt);
                }
            }
            if (cancelled()) return;
            publish(i, hashes.size(), crc);
        }
    }

    std::vector<std::vector<ZipWriter::Piece>> members_;
    std::vector<bool> chunked_;
    uint32_t chunk_bytes_;
    std::vector<uint32_t> crcs_;
    std::vector<std::vector<Hash128>> hashes_;  // chunked members' chunk hashes
    std::mutex mutex_;
    std::condition_variable ready_;
    size_t done_ = 0;         // members whose CRC (and hashes) are known
    size_t chunks_done_ = 0;  // chunks hashed of member done_
    bool cancelled_ = false;
    std::thread thread_;
};

// Below this much data a second thread costs more than it saves.
constexpr uint64_t kCrcAheadMinBytes = uint64_t{16} << 20;

struct Member {
    std::string name;
    std::string header;
    const void* data;
    size_t nbytes;
    const ByteSource* source = nullptr;  // the bytes come from here instead (Array::from_source)
    bool chunked = false;                // hashed in chunks, block-aligned (chunks.hpp)
    const Array* array = nullptr;        // the variable's, for arrays (every chunked member has one)
};

// The members of the archive for `vars`, in file order, with the texts they point into.
struct Plan {
    std::u32string names;  // the objax names array
    std::u32string metadata_text;
    std::vector<Member> members;
};

// options.layout is plain or objax. The members point into `plan` and into the arrays of `vars`.
void plan_archive(Plan& plan, const VarCollection& vars, const NpzWriteOptions& options) {
    auto& members = plan.members;
    members.reserve(vars.size() + 2);
    if (options.layout == Layout::objax) {
        size_t chars = 0;
        plan.names = objax_names(vars, chars);
        members.push_back({"names.npy", format_npy_header(DType::unicode, 4 * chars, {static_cast<int64_t>(vars.size())}),
                           plan.names.data(), plan.names.size() * sizeof(char32_t)});
    }
    for (size_t i = 0; i < vars.size(); ++i) {
        const Array& a = vars.array(i);
        const std::string name = options.layout == Layout::objax ? std::to_string(i) : vars.name(i);
        const bool chunked = options.chunk_hashes && !options.deflate &&
                             a.nbytes() >= std::max<uint64_t>(kMinChunkedBytes, options.chunk_bytes);
        members.push_back({name + std::string(kNpySuffix), format_npy_header(a.dtype(), a.itemsize(), a.shape()),
                           a.data(), a.nbytes(), a.source(), chunked, &a});
    }
    // Last, and only when there is something to record: a file of numpy's own dtypes without metadata stays
    // member for member what np.savez writes.
    MetadataRecord record = metadata_record(vars, options.layout, options.manager_keys);
    if (!record.dtypes.empty() || !record.user.empty()) {
        plan.metadata_text = utf8_to_utf32(metadata_to_json(record));
        members.push_back({std::string(kMetadataName) + std::string(kNpySuffix),
                           format_npy_header(DType::unicode, 4 * plan.metadata_text.size(), {}),
                           plan.metadata_text.data(), plan.metadata_text.size() * sizeof(char32_t)});
    }
}

// How member m is chunked: against the base's array of the same member name, dtype, shape and order, if it has one.
ZipWriter::Chunking chunking_for(const Member& m, const ChunkBase* base, uint32_t chunk_bytes) {
    ZipWriter::Chunking chunking;
    chunking.chunk_bytes = chunk_bytes;
    const ChunkBase::Array* old = base != nullptr && base->chunk_bytes() == chunk_bytes ? base->find(m.name) : nullptr;
    if (old == nullptr) return chunking;
    const NpyHeader& h = old->header;
    if (m.array->dtype() != h.dtype || m.array->itemsize() != h.itemsize || m.array->shape() != h.shape ||
        h.fortran_order || h.byteswap)
        return chunking;
    chunking.base = &base->file();
    chunking.base_offset = old->offset;
    chunking.base_hashes = old->hashes;
    return chunking;
}

void check_options(NpzWriteOptions& options) {
    if (options.layout == Layout::automatic) options.layout = Layout::plain;
    if (options.layout != Layout::plain && options.layout != Layout::objax)
        fail(Code::invalid, "unknown layout {}", static_cast<uint32_t>(options.layout));
    if (options.level < 0 || options.level > 9) fail(Code::invalid, "deflate level {} is not in 0..9", options.level);
    if (options.base != nullptr && (!options.chunk_hashes || options.deflate))
        throw std::logic_error("write_npz: a base needs chunk_hashes and stored members");
    if (options.chunk_bytes == 0 || options.chunk_bytes % kBlockAlignment != 0 ||
        (uint32_t{4} << 20) % options.chunk_bytes != 0)
        fail(Code::invalid, "chunk size {} is not a multiple of {} that divides 4 MiB", options.chunk_bytes,
             kBlockAlignment);
}

}  // namespace

namespace {
// Per member: local header (30) and central directory entry (46), the name in both, zip64 extras in both (4 + 16
// and 4 + 24) once a size or offset may pass 32 bits; stored, the alignment extra (4 + up to 63) and the head copy
// (4 + 6 + the npy header); deflated, a data descriptor (24) and deflate's growth of incompressible data, 5 bytes
// per 16 KiB block. Then the end records: zip64 (56 + 20) and classic (22).
// A chunked array's alignment may take up to a block, and the chunk table is one more member (its npy header at
// most 128 bytes).
uint64_t size_bound(const Plan& plan, bool deflate, uint32_t chunk_bytes) {
    uint64_t bytes = 56 + 20 + 22;
    std::vector<std::pair<size_t, uint64_t>> chunked;
    for (const Member& m : plan.members) {
        const uint64_t data = m.header.size() + m.nbytes;
        bytes += 30 + 46 + 2 * m.name.size() + data;
        if (bytes >= zip::kMax32 - 0xFFFF) bytes += 20 + 28;
        bytes += deflate ? 24 + 5 * (data / 16384 + 1) + 6 : 67 + 10 + m.header.size();
        if (m.chunked) {
            bytes += kBlockAlignment;
            chunked.emplace_back(m.name.size(), m.nbytes);
        }
    }
    if (!chunked.empty())
        bytes += 30 + 46 + 2 * (kChunkTableName.size() + kNpySuffix.size()) + 48 + 67 + 10 + 2 * 128 +
                 chunk_table_bytes(chunked, chunk_bytes);
    return bytes;
}
}  // namespace

uint64_t write_npz(OutputFile& out, const VarCollection& vars, NpzWriteOptions options) {
    check_options(options);

    uint64_t total = 0;
    for (size_t i = 0; i < vars.size(); ++i) total += vars.array(i).nbytes();
    options.progress.start(total);

    Plan plan;
    plan_archive(plan, vars, options);
    if (options.before_write) options.before_write(size_bound(plan, options.deflate, options.chunk_bytes));
    std::vector<Member>& members = plan.members;
    const size_t first_array = options.layout == Layout::objax ? 1 : 0;
    const size_t end_array = first_array + vars.size();
    const auto pieces = [](const Member& m) {
        return std::vector<ZipWriter::Piece>{{m.header.data(), m.header.size()}, {m.data, m.nbytes, m.source}};
    };
    const auto all_pieces = [&] {
        std::vector<std::vector<ZipWriter::Piece>> all;
        all.reserve(members.size());
        for (const Member& m : members) all.push_back(pieces(m));
        return all;
    };
    // Progress counts array bytes only: the part of [offset, offset + n) of a member past its npy header.
    const auto on_bytes = [&](const Member& m) -> ZipWriter::OnBytes {
        const size_t k = static_cast<size_t>(&m - members.data());
        if (k < first_array || k >= end_array) return nullptr;  // the objax names and the metadata are not variables
        const uint64_t header = m.header.size();
        return [&options, header](uint64_t offset, uint64_t n) {
            const uint64_t end = offset + n;
            if (end > header) options.progress.advance(end - std::max(offset, header));
        };
    };

    ZipWriter zip(out);
    if (options.deflate) {
        DeflateAhead deflated(all_pieces(), options.level == 0 ? Z_DEFAULT_COMPRESSION : options.level,
                              DeflateAhead::threads_for(total));
        for (const Member& m : members) zip.add_deflated(m.name, m.header.size() + m.nbytes, deflated, on_bytes(m));
    } else {
        std::unique_ptr<CrcAhead> crc_ahead;
        // Sources are read on the writer's thread only: their CRCs are computed as they are written (an output that
        // can be patched) or in a pass just before each member.
        const bool sources = std::any_of(members.begin(), members.end(), [](const Member& m) { return m.source; });
        if (total >= kCrcAheadMinBytes && !sources) {
            try {
                std::vector<bool> chunked;
                for (const Member& m : members) chunked.push_back(m.chunked);
                crc_ahead = std::make_unique<CrcAhead>(all_pieces(), std::move(chunked), options.chunk_bytes);
            } catch (const std::system_error&) {
                // No thread to be had: the CRCs are computed on this one instead.
            }
        }
        const bool patch = out.can_patch();
        ChunkTable table;
        table.chunk_bytes = options.chunk_bytes;
        uint64_t shared = 0;
        for (size_t i = 0; i < members.size(); ++i) {
            const Member& m = members[i];
            std::function<uint32_t()> crc;
            if (crc_ahead) crc = [&, i] { return crc_ahead->get(i); };
            // After the data where the output allows it, unless the CRC is there already (a patch is a write).
            const bool later = patch && !(crc_ahead && crc_ahead->ready(i));
            std::optional<ZipWriter::Chunking> chunking;
            if (m.chunked) {
                chunking = chunking_for(m, options.base, options.chunk_bytes);
                if (crc_ahead) chunking->hash_of = [&, i](size_t k) { return crc_ahead->hash(i, k); };
            }
            const uint32_t member_crc =
                zip.add_stored(m.name, pieces(m), on_bytes(m), crc, m.header.size(),
                               later ? ZipWriter::CrcWhen::after_data : ZipWriter::CrcWhen::before_data,
                               chunking ? &*chunking : nullptr);
            if (chunking) {
                shared += chunking->shared;
                table.members.push_back({m.name, member_crc, m.nbytes, std::move(chunking->hashes)});
            }
        }
        if (!table.members.empty()) {
            const std::vector<unsigned char> bytes = encode_chunk_table(table);
            const std::string header = format_npy_header(DType::uint8, 1, {static_cast<int64_t>(bytes.size())});
            zip.add_stored(std::string(kChunkTableName) + std::string(kNpySuffix),
                           {{header.data(), header.size()}, {bytes.data(), bytes.size()}}, nullptr, nullptr,
                           header.size());
        }
        if (options.shared_bytes != nullptr) *options.shared_bytes = shared;
    }
    return zip.finish();
}

void save_npz(Storage& storage, const std::string& path, const VarCollection& vars, const NpzWriteOptions& options) {
    write_atomically(storage, path, [&](OutputFile& out) { write_npz(out, vars, options); });
}

}  // namespace ckpt::core
