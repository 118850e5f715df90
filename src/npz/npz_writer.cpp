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
#include <utility>

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
    record.user = written_metadata(vars.metadata(), manager_keys);
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
// patched in when the thread has it.
//
// The chunk sums of a save that records them (chunks.hpp) are computed there too, a megabyte of chunks at a time, and
// the writer takes each as it reaches its chunk: hashing on the writer's thread made a save of 512 MiB that changed
// entirely 11% slower on XFS (bench/bench_incremental). A chunk is hashed first; one whose hash, length and place
// match the base's takes its CRC-32 from the base's table instead of a second pass, and a member's CRC-32 is its
// header's and chunks' joined (or the base's, where nothing of it changed). A writer that waits for a sum computes
// the next megabyte itself meanwhile: a save that changed little is as fast as two cores can hash.
class CrcAhead {
public:
    struct Input {
        std::vector<ZipWriter::Piece> pieces;      // a header and an array for chunked members
        bool chunked = false;                      // the array is hashed in chunks of chunk_bytes
        const ChunkTable::Member* base = nullptr;  // chunked: the base's record of the same array, or none
    };

    CrcAhead(std::vector<Input> members, uint32_t chunk_bytes)
        : members_(std::move(members)),
          chunk_bytes_(chunk_bytes),
          crcs_(members_.size()),
          member_done_(members_.size(), 0),
          items_left_(members_.size(), 0),
          first_item_(members_.size(), 0),
          sums_(members_.size()) {
        for (size_t i = 0; i < members_.size(); ++i) {
            first_item_[i] = items_.size();
            if (!members_[i].chunked) {
                items_.push_back({i, 0, 0});
            } else {  // at least kMinChunkedBytes: one item or more
                const size_t chunks = static_cast<size_t>(chunk_count(members_[i].pieces[1].size, chunk_bytes_));
                sums_[i].resize(chunks);
                for (size_t k = 0; k < chunks; k += chunks_per_item_)
                    items_.push_back({i, k, std::min(chunks_per_item_, chunks - k)});
                // The base's sums are indexed by this array's chunks: a record of another length is not used.
                const ChunkTable::Member* b = members_[i].base;
                if (b != nullptr && (b->data_bytes != members_[i].pieces[1].size || b->chunks.size() != chunks))
                    members_[i].base = nullptr;  // CRC-32s only from a record of the same length
            }
            items_left_[i] = items_.size() - first_item_[i];
        }
        item_done_.assign(items_.size(), 0);
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
        wait_helping([&] { return member_done_[i] != 0; });
        return crcs_[i];
    }
    bool ready(size_t i) {
        std::lock_guard<std::mutex> lock(mutex_);
        return member_done_[i] != 0;
    }
    // Member i's chunk sums, once its CRC is known (until then a chunk's CRC-32 may still change: chunked_crc).
    std::vector<ChunkSum> take_sums(size_t i) {
        wait_helping([&] { return member_done_[i] != 0; });
        return std::move(sums_[i]);
    }
    // The hash of chunk k of member i (a chunked one); without `wait`, nullopt until it is computed.
    std::optional<Hash128> hash(size_t i, size_t k, bool wait) {
        const size_t item = first_item_[i] + k / chunks_per_item_;
        if (wait) {
            wait_helping([&] { return item_done_[item] != 0; });
        } else {
            std::lock_guard<std::mutex> lock(mutex_);
            if (item_done_[item] == 0) return std::nullopt;
        }
        return sums_[i][k].hash;
    }

private:
    static constexpr size_t kItemBytes = size_t{1} << 20;  // chunks are taken a megabyte at a time

    struct Item {
        size_t member;
        size_t first;  // chunk
        size_t count;  // chunks; 0: the whole of an unchunked member
    };

    // Chunk k of chunked member m: its first byte and its length.
    std::pair<const unsigned char*, size_t> chunk(const Input& m, size_t k) const {
        const size_t at = k * chunk_bytes_;
        return {static_cast<const unsigned char*>(m.pieces[1].data) + at,
                std::min<size_t>(chunk_bytes_, m.pieces[1].size - at)};
    }

    // Waits until done() holds, meanwhile computing chunk items nobody has taken (never a whole member's CRC, which
    // may be long).
    template <class Done>
    void wait_helping(Done done) {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!done()) {
            if (!cancelled_ && next_ < items_.size() && items_[next_].count > 0) {
                const size_t j = next_++;
                lock.unlock();
                compute(j);
                lock.lock();
                continue;
            }
            ready_.wait(lock);
        }
    }

    void run() {
        for (;;) {
            size_t j;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (cancelled_ || next_ == items_.size()) return;
                j = next_++;
            }
            compute(j);
        }
    }

    // Computes item j and publishes it; the thread that completes a member publishes its CRC-32 too.
    void compute(size_t j) {
        const Item& item = items_[j];
        const Input& m = members_[item.member];
        if (!m.chunked) {
            crcs_[item.member] = ZipWriter::crc_of(m.pieces);
        } else {
            for (size_t k = item.first; k < item.first + item.count; ++k) {
                const auto [p, n] = chunk(m, k);
                sums_[item.member][k] = chunk_sum(p, n, m.base != nullptr ? &m.base->chunks[k] : nullptr);
            }
        }
        bool last;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            item_done_[j] = 1;
            last = --items_left_[item.member] == 0;
        }
        if (last && m.chunked) crcs_[item.member] = chunked_crc(m, sums_[item.member]);
        std::lock_guard<std::mutex> lock(mutex_);
        if (last) member_done_[item.member] = 1;
        ready_.notify_all();
    }

    // A chunked member's CRC-32: its header's joined with its chunks'; the base's where nothing differs from it (the
    // base's directory holds that CRC). Chunk CRC-32s taken from a base whose own do not join to its member's CRC
    // (a table written wrong) are computed instead.
    uint32_t chunked_crc(const Input& m, std::vector<ChunkSum>& sums) const {
        const uint32_t head = crc32(0, m.pieces[0].data, m.pieces[0].size);
        if (m.base != nullptr) {
            const auto same = [&](size_t k) { return sums[k].hash == m.base->chunks[k].hash; };
            size_t taken = 0;
            for (size_t k = 0; k < sums.size(); ++k) taken += same(k);
            if (taken == sums.size() && m.base->head_crc == head) return m.base->crc;
            if (taken > 0 &&
                join_chunks(m.base->head_crc, m.base->chunks, m.base->data_bytes, chunk_bytes_) != m.base->crc) {
                for (size_t k = 0; k < sums.size(); ++k)
                    if (same(k)) {
                        const auto [p, n] = chunk(m, k);
                        sums[k].crc = crc32(0, p, n);
                    }
            }
        }
        return join_chunks(head, sums, m.pieces[1].size, chunk_bytes_);
    }

    std::vector<Input> members_;
    uint32_t chunk_bytes_;
    size_t chunks_per_item_ = std::max<size_t>(1, kItemBytes / chunk_bytes_);
    std::vector<Item> items_;
    std::vector<uint32_t> crcs_;
    std::vector<char> member_done_;  // member i's CRC (and every sum) is known
    std::vector<size_t> items_left_;
    std::vector<size_t> first_item_;
    std::vector<char> item_done_;
    std::vector<std::vector<ChunkSum>> sums_;  // chunked members' chunk sums
    std::mutex mutex_;
    std::condition_variable ready_;
    size_t next_ = 0;  // the first item nobody has taken
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

// The base's array that chunked member m is saved against: the one of the same member name, dtype, shape and order,
// if the base has it.
const ChunkBase::Array* base_array(const Member& m, const ChunkBase* base, uint32_t chunk_bytes) {
    const ChunkBase::Array* old = base != nullptr && base->chunk_bytes() == chunk_bytes ? base->find(m.name) : nullptr;
    if (old == nullptr) return nullptr;
    const NpyHeader& h = old->header;
    if (m.array->dtype() != h.dtype || m.array->itemsize() != h.itemsize || m.array->shape() != h.shape ||
        h.fortran_order || h.byteswap)
        return nullptr;
    return old;
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
        std::vector<const ChunkBase::Array*> bases(members.size(), nullptr);
        for (size_t i = 0; i < members.size(); ++i)
            if (members[i].chunked) bases[i] = base_array(members[i], options.base, options.chunk_bytes);
        if (total >= kCrcAheadMinBytes && !sources) {
            try {
                std::vector<CrcAhead::Input> inputs;
                for (size_t i = 0; i < members.size(); ++i)
                    inputs.push_back({pieces(members[i]), members[i].chunked, bases[i] ? bases[i]->table : nullptr});
                crc_ahead = std::make_unique<CrcAhead>(std::move(inputs), options.chunk_bytes);
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
                chunking.emplace();
                chunking->chunk_bytes = options.chunk_bytes;
                if (bases[i] != nullptr) {
                    chunking->base = &options.base->file();
                    chunking->base_offset = bases[i]->offset;
                    chunking->base_sums = &bases[i]->table->chunks;
                }
                if (crc_ahead) chunking->hash_of = [&, i](size_t k, bool wait) { return crc_ahead->hash(i, k, wait); };
            }
            const uint32_t member_crc =
                zip.add_stored(m.name, pieces(m), on_bytes(m), crc, m.header.size(),
                               later ? ZipWriter::CrcWhen::after_data : ZipWriter::CrcWhen::before_data,
                               chunking ? &*chunking : nullptr);
            if (chunking) {
                if (crc_ahead) chunking->sums = crc_ahead->take_sums(i);
                shared += chunking->shared;
                table.members.push_back({m.name, member_crc, crc32(0, m.header.data(), m.header.size()), m.nbytes,
                                         std::move(chunking->sums)});
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
