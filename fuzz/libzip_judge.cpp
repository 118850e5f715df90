// SPDX-License-Identifier: Apache-2.0
// Replays fuzz inputs through two zip readers — ckpt's ZipReader and libzip 1.7.3 with ZIP_CHECKCONS — reading every
// member to its end in both, and reports every input that one accepts and the other refuses, or that both accept
// with different members. Each such difference must be a deliberate, documented decision: kKnown below, and
// docs/format.md, "What libzip and ckpt disagree on". Any other difference fails the run, printing both verdicts.
//
// A replay-only check, run by ctest over the seed corpus (which holds an example of every known difference) and the
// committed regressions; the libFuzzer targets never depend on libzip. Run it by hand over a fuzzing campaign's
// corpus (build/fuzz/fuzz_libzip_judge build-fuzz/corpus/npz_read) to see whether fuzzing found a new kind of
// difference.
//
// Usage: fuzz_libzip_judge [-v] [--all-known] FILE_OR_DIR...
//   -v           print both verdicts for every input, not only for differences
//   --all-known  also fail if some known difference was seen in none of the inputs (the list has gone stale)
#include "corpus_files.hpp"
#include "core/error.hpp"
#include "storage/memory_storage.hpp"
#include "npz/npz_reader.hpp"
#include "npz/zip_format.hpp"
#include "npz/zip_reader.hpp"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

// What one reader made of an input: refused (with its message), or accepted with these members.
struct Verdict {
    bool accepted = false;
    std::string message;
    struct Member {
        std::string name;
        uint64_t size = 0;
        uint32_t crc = 0;  // of the bytes read, computed here
        bool operator==(const Member& o) const { return name == o.name && size == o.size && crc == o.crc; }
    };
    std::vector<Member> members;
};

// Inflation is bounded by the input (1032:1 for deflate), so reading every member costs at most that much.
constexpr size_t kChunk = size_t{64} << 10;

Verdict ckpt_verdict(const std::vector<uint8_t>& bytes) {
    Verdict v;
    try {
        ckpt::core::BytesInput in(bytes.data(), bytes.size());
        const ckpt::core::ZipReader zip(in, "<input>", ckpt::core::kDefaultMaxMembers);
        std::vector<unsigned char> buf(kChunk);
        for (size_t i = 0; i < zip.members().size(); ++i) {
            ckpt::core::ZipReader::Stream s(zip, i);
            Verdict::Member m{zip.members()[i].name, 0, 0};
            for (size_t n; (n = s.read(buf.data(), buf.size())) != 0;) {
                m.crc = static_cast<uint32_t>(crc32(m.crc, buf.data(), static_cast<uInt>(n)));
                m.size += n;
            }
            s.finish();
            v.members.push_back(std::move(m));
        }
        v.accepted = true;
    } catch (const ckpt::core::Error& e) {
        v.message = e.what();
    }
    return v;
}

Verdict libzip_verdict(const std::vector<uint8_t>& bytes) {
    Verdict v;
    zip_error_t err;
    zip_error_init(&err);
    zip_source_t* src = zip_source_buffer_create(bytes.empty() ? nullptr : bytes.data(), bytes.size(), 0, &err);
    zip_t* za = src != nullptr ? zip_open_from_source(src, ZIP_CHECKCONS | ZIP_RDONLY, &err) : nullptr;
    if (za == nullptr) {
        v.message = std::string("zip_open: ") + zip_error_strerror(&err);
        if (src != nullptr) zip_source_free(src);
        zip_error_fini(&err);
        return v;
    }
    zip_error_fini(&err);
    std::vector<unsigned char> buf(kChunk);
    const zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n && v.message.empty(); ++i) {
        const char* name = zip_get_name(za, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
        Verdict::Member m{name != nullptr ? name : "", 0, 0};
        zip_file_t* f = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
        if (f == nullptr) {
            v.message = "member '" + m.name + "': zip_fopen_index: " + zip_error_strerror(zip_get_error(za));
            break;
        }
        // libzip 1.7.3 reports a CRC error only on the call after the last byte: read until zip_fread returns 0.
        for (;;) {
            const zip_int64_t got = zip_fread(f, buf.data(), buf.size());
            if (got < 0) {
                v.message = "member '" + m.name + "': zip_fread: " + zip_error_strerror(zip_file_get_error(f));
                break;
            }
            if (got == 0) break;
            m.crc = static_cast<uint32_t>(crc32(m.crc, buf.data(), static_cast<uInt>(got)));
            m.size += static_cast<uint64_t>(got);
        }
        zip_fclose(f);
        v.members.push_back(std::move(m));
    }
    zip_discard(za);
    v.accepted = v.message.empty();
    if (!v.accepted) v.members.clear();
    return v;
}

// ------------------------------------------------------------------------- what libzip's refusal was about

uint64_t le(const std::vector<uint8_t>& b, uint64_t at, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) v |= uint64_t{b.at(static_cast<size_t>(at) + i)} << (8 * i);
    return v;
}

// Where the central directory starts and how many entries it has, as ckpt finds them; throws std::out_of_range
// where the end records are not well formed.
std::pair<uint64_t, uint64_t> central_directory(const std::vector<uint8_t>& b) {
    using namespace ckpt::core::zip;
    for (size_t i = b.size() - std::min(b.size(), kEndBytes - 1); i-- > 0;) {
        if (le(b, i, 4) != kEndSig || i + kEndBytes + le(b, i + 20, 2) != b.size()) continue;
        if (i < kZip64LocatorBytes || le(b, i - kZip64LocatorBytes, 4) != kZip64LocatorSig)
            return {le(b, i + 16, 4), le(b, i + 10, 2)};
        const uint64_t zip64_end = le(b, i - kZip64LocatorBytes + 8, 8);
        return {le(b, zip64_end + 48, 8), le(b, zip64_end + 32, 8)};
    }
    throw std::out_of_range("no end record");
}

// The names in the central directory, as far as it can be walked.
std::vector<std::string> central_names(const std::vector<uint8_t>& b) {
    using namespace ckpt::core::zip;
    std::vector<std::string> names;
    try {
        auto [c, n] = central_directory(b);
        for (; n > 0 && le(b, c, 4) == kCentralHeaderSig; --n) {
            const size_t name_len = static_cast<size_t>(le(b, c + 28, 2));
            if (c + kCentralHeaderBytes + name_len > b.size()) break;
            names.emplace_back(reinterpret_cast<const char*>(&b[static_cast<size_t>(c) + kCentralHeaderBytes]), name_len);
            c += kCentralHeaderBytes + name_len + le(b, c + 30, 2) + le(b, c + 32, 2);
        }
    } catch (const std::out_of_range&) {
    }
    return names;
}

// ckpt's message about a name holding a NUL ends at that NUL: an exception's what() is a C string. Says so.
std::string ckpt_finding(const std::string& message, const std::vector<uint8_t>& b) {
    for (const std::string& name : central_names(b)) {
        const size_t nul = name.find('\0');
        if (nul != std::string::npos && message == "<input>: member '" + name.substr(0, nul))
            return message + " [cut at a NUL: member name contains NUL]";
    }
    return message;
}

// libzip's "Zip archive inconsistent" does not say what is; in an archive ckpt accepted, this says which of the
// local/central comparisons of libzip's _zip_headercomp failed.
std::vector<std::string> header_differences(const std::vector<uint8_t>& b) {
    using namespace ckpt::core::zip;
    ckpt::core::BytesInput in(b.data(), b.size());
    const ckpt::core::ZipReader zip(in, "<input>", ckpt::core::kDefaultMaxMembers);
    std::vector<std::string> found;
    uint64_t c = central_directory(b).first;
    for (const ckpt::core::ZipReader::Member& m : zip.members()) {
        const uint64_t l = m.local_offset;
        const std::string who = "member '" + m.name + "': ";
        if (le(b, l + 10, 4) != le(b, c + 12, 4))
            found.push_back(who + "the local header's modification time differs from the central directory's");
        if (le(b, l + 4, 2) > le(b, c + 6, 2))
            found.push_back(who + "the local header needs a later zip version than the central directory says");
        if (m.flags & kFlagDataDescriptor) {
            uint64_t crc = le(b, l + 14, 4), compressed = le(b, l + 18, 4), size = le(b, l + 22, 4);
            if (compressed == kMax32 || size == kMax32) {  // the values are in the local zip64 extra field
                const uint64_t extra = l + kLocalHeaderBytes + le(b, l + 26, 2), extra_end = extra + le(b, l + 28, 2);
                for (uint64_t f = extra; f + 4 <= extra_end; f += 4 + le(b, f + 2, 2)) {
                    if (le(b, f, 2) != kZip64ExtraId) continue;
                    uint64_t at = f + 4;
                    if (size == kMax32) {
                        size = le(b, at, 8);
                        at += 8;
                    }
                    if (compressed == kMax32) compressed = le(b, at, 8);
                    break;
                }
            }
            if ((crc != 0 || compressed != 0 || size != 0) && (crc != m.crc || compressed != m.compressed || size != m.size))
                found.push_back(who + "with a data descriptor, the local header's CRC-32 and sizes are neither zero nor the "
                                      "central directory's");
        }
        c += kCentralHeaderBytes + le(b, c + 28, 2) + le(b, c + 30, 2) + le(b, c + 32, 2);
    }
    return found;
}

// ------------------------------------------------------------------------------------ the known differences

enum class Who { ckpt_refuses, libzip_refuses, contents_differ };

// A known difference: `who` disagrees, and a finding — the refusing reader's message, or one of the header
// differences behind libzip's "Zip archive inconsistent" — contains `finding`.
struct Known {
    Who who;
    const char* finding;
    const char* reason;
};

const Known kKnown[] = {
    // ckpt refuses what libzip 1.7.3 accepts.
    {Who::ckpt_refuses, "empty file",
     "a 0-byte file is no zip archive (Python's zipfile, and so numpy.load, refuses it); libzip opens it as an empty "
     "archive"},
    {Who::ckpt_refuses, "its data descriptor",
     "a data descriptor that disagrees with the central directory, or does not fit before the next member, means the "
     "file is corrupt; libzip never reads data descriptors"},
    {Who::ckpt_refuses, "local header disagrees with the central directory (method or flags)",
     "local and central flags must agree on the bits that change how a member is read (data descriptor, "
     "encryption); libzip does not compare flags"},
    {Who::ckpt_refuses, "more than deflate can produce",
     "a size deflate cannot produce from the compressed bytes (1032:1) is a bomb or a lie, refused before anything "
     "is allocated for it; libzip never compares what it inflates with the declared size"},
    {Who::ckpt_refuses, "deflate data is longer than the declared",
     "a deflated member must inflate to exactly its declared size; libzip never compares the two"},
    {Who::ckpt_refuses, "data ends after",
     "a deflated member must inflate to exactly its declared size; libzip never compares the two"},
    {Who::ckpt_refuses, "deflate data is truncated or corrupt",
     "a deflate stream must end (final block) within the member's compressed bytes; libzip accepts a stream that "
     "stops without its final block when the output so far has the right CRC-32"},
    {Who::ckpt_refuses, "multi-disk archives are not supported",
     "ckpt refuses every disk number but 0, wherever it appears; libzip ignores a member's disk number and, in a "
     "zip64 archive, some of the end records'"},
    {Who::ckpt_refuses, "end record's size",
     "the zip64 end record's size must reach the locator exactly, leaving nowhere to hide bytes; libzip skips its "
     "ZIP_CHECKCONS checks of the end records (it passes them the archive's flags instead of the open flags)"},
    {Who::ckpt_refuses, "extra field is malformed",
     "an extra field must be a whole number of fields; libzip accepts up to 3 zero bytes after the last one (old "
     "zipalign padding)"},
    {Who::ckpt_refuses, "overlap",
     "members must not overlap (zip bombs, and one file with different contents for different readers); libzip only "
     "checks that each member ends before the central directory"},
    {Who::ckpt_refuses, "unexplained bytes before the first member",
     "nothing may precede the first member (no polyglot prefix); libzip accepts a prefix that the offsets skip"},
    {Who::ckpt_refuses, "empty member name", "a member needs a name to be a variable; libzip accepts an empty one"},
    {Who::ckpt_refuses, "member name contains NUL",
     "a NUL in a name makes it read differently by different readers (Python's zipfile cuts it there); libzip accepts "
     "it, and shows it as a space"},
    {Who::ckpt_refuses, "member name is not valid UTF-8",
     "variable names are UTF-8, with or without the UTF-8 flag; libzip reads an unflagged name as CP437"},
    {Who::ckpt_refuses, "head copy",
     "a stored member's head copy in the central directory (ckpt's extra field 0x6B63) must describe its local header "
     "and npy header exactly, since ckpt reads by it and numpy by the local header; libzip skips the field"},
    {Who::ckpt_refuses, "is not supported (only stored and deflate)",
     "ckpt reads the two methods numpy writes; libzip, as Debian builds it, also reads bzip2 and xz"},
    // libzip 1.7.3 refuses what ckpt accepts.
    {Who::libzip_refuses, "modification time differs",
     "timestamps say nothing about a member's bytes (numpy writes 1980-01-01 everywhere); ckpt does not compare "
     "them"},
    {Who::libzip_refuses, "needs a later zip version",
     "the version needed to extract changes nothing ckpt reads; ckpt does not compare the two headers' (Python's "
     "zipfile does not either)"},
};

const char* describe(Who who) {
    switch (who) {
        case Who::ckpt_refuses: return "ckpt refuses, libzip accepts";
        case Who::libzip_refuses: return "libzip refuses, ckpt accepts";
        case Who::contents_differ: return "both accept, with different members";
    }
    return "?";
}

// Names and messages may hold any bytes (a NUL, invalid UTF-8): printed escaped.
std::string escaped(const std::string& s) {
    std::string out;
    for (const unsigned char ch : s) {
        if (ch < 0x20 || ch >= 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", ch);
            out += hex;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out;
}

std::string summary(const Verdict& v) {
    if (!v.accepted) return "refuses: " + escaped(v.message);
    std::string s = "accepts " + std::to_string(v.members.size()) + " member(s)";
    for (const Verdict::Member& m : v.members) {
        char crc[16];
        std::snprintf(crc, sizeof crc, "%08x", m.crc);
        s += "\n            '" + escaped(m.name) + "' " + std::to_string(m.size) + " bytes, CRC-32 " + crc;
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    bool verbose = false, all_known = false;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; ++first) {
        if (std::strcmp(argv[first], "-v") == 0) {
            verbose = true;
        } else if (std::strcmp(argv[first], "--all-known") == 0) {
            all_known = true;
        } else {
            break;
        }
    }
    if (first >= argc) {
        std::fprintf(stderr, "usage: %s [-v] [--all-known] FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    std::vector<std::filesystem::path> inputs;
    if (!ckpt_fuzz::corpus_files(argc - first + 1, argv + first - 1, inputs)) return 2;

    std::vector<size_t> seen(std::size(kKnown), 0);
    size_t both_accept = 0, both_refuse = 0, known = 0, unexplained = 0;
    for (const std::filesystem::path& p : inputs) {
        std::vector<uint8_t> bytes;
        if (!ckpt_fuzz::read_input(p, bytes)) return 2;
        const Verdict ours = ckpt_verdict(bytes);
        const Verdict theirs = libzip_verdict(bytes);
        if (verbose)
            std::printf("%s\n    ckpt:   %s\n    libzip: %s\n", p.c_str(), summary(ours).c_str(), summary(theirs).c_str());
        Who who;
        std::vector<std::string> findings;
        if (ours.accepted && theirs.accepted) {
            if (ours.members == theirs.members) {
                ++both_accept;
                continue;
            }
            who = Who::contents_differ;
            findings.push_back("different members");
        } else if (!ours.accepted && !theirs.accepted) {
            ++both_refuse;
            continue;
        } else if (!ours.accepted) {
            who = Who::ckpt_refuses;
            findings.push_back(ckpt_finding(ours.message, bytes));
        } else {
            who = Who::libzip_refuses;
            if (theirs.message == "zip_open: Zip archive inconsistent") findings = header_differences(bytes);
            if (findings.empty()) findings.push_back(theirs.message);
        }
        // Known only if every finding is.
        std::vector<const Known*> reasons;
        for (const std::string& f : findings) {
            for (size_t k = 0; k < std::size(kKnown); ++k) {
                if (kKnown[k].who == who && f.find(kKnown[k].finding) != std::string::npos) {
                    reasons.push_back(&kKnown[k]);
                    ++seen[k];
                    break;
                }
            }
        }
        const bool explained = reasons.size() == findings.size();
        std::printf("%s %s: %s\n    ckpt:   %s\n    libzip: %s\n", explained ? "known" : "UNEXPLAINED", p.c_str(),
                    describe(who), summary(ours).c_str(), summary(theirs).c_str());
        if (who == Who::libzip_refuses || findings[0] != ours.message)
            for (const std::string& f : findings) std::printf("    found:  %s\n", escaped(f).c_str());
        for (const Known* r : reasons) std::printf("    why:    %s\n", r->reason);
        ++(explained ? known : unexplained);
    }
    std::printf("judged %zu inputs: %zu accepted by both, %zu refused by both, %zu known differences, %zu unexplained\n",
                inputs.size(), both_accept, both_refuse, known, unexplained);
    if (unexplained != 0)
        std::printf("every difference must be a documented decision: add it to kKnown (fuzz/libzip_judge.cpp) and "
                    "docs/format.md, or fix the reader that is wrong\n");
    size_t stale = 0;
    if (all_known) {
        for (size_t k = 0; k < std::size(kKnown); ++k) {
            if (seen[k] != 0) continue;
            std::printf("known difference never seen: %s (%s)\n", kKnown[k].finding, describe(kKnown[k].who));
            ++stale;
        }
    }
    return inputs.empty() || unexplained != 0 || stale != 0 ? 1 : 0;
}
