// SPDX-License-Identifier: Apache-2.0
#include "sigv4.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

namespace ckpt::s3 {

namespace {

std::string hex(const unsigned char* bytes, size_t size) {
    static const char digits[] = "0123456789abcdef";
    std::string out(size * 2, '0');
    for (size_t i = 0; i < size; ++i) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    return out;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
             data.size(), out, &size) == nullptr)
        throw std::runtime_error("OpenSSL's HMAC-SHA256 failed");
    return std::string(reinterpret_cast<const char*>(out), size);
}

std::string scope(const SigningRequest& r) { return r.amz_date.substr(0, 8) + "/" + r.region + "/s3/aws4_request"; }

// Lowercase name -> value trimmed, inner runs of blanks folded to one space; a repeated name's values joined by ','.
std::map<std::string, std::string> canonical_headers(const SigningRequest& r) {
    std::map<std::string, std::string> headers;
    for (const auto& [name, value] : r.headers) {
        std::string lower = name;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        std::string folded;
        for (char c : value) {
            const bool blank = c == ' ' || c == '\t';
            if (blank && (folded.empty() || folded.back() == ' ')) continue;
            folded += blank ? ' ' : c;
        }
        if (!folded.empty() && folded.back() == ' ') folded.pop_back();
        auto [it, fresh] = headers.emplace(lower, folded);
        if (!fresh) it->second += "," + folded;
    }
    return headers;
}

std::string signed_header_names(const std::map<std::string, std::string>& headers) {
    std::string names;
    for (const auto& entry : headers) names += (names.empty() ? "" : ";") + entry.first;
    return names;
}

}  // namespace

std::string canonical_query(const std::string& query) {
    std::vector<std::pair<std::string, std::string>> pairs;
    size_t start = 0;
    while (start <= query.size() && !query.empty()) {
        size_t end = query.find('&', start);
        if (end == std::string::npos) end = query.size();
        const std::string item = query.substr(start, end - start);
        if (!item.empty()) {
            const size_t eq = item.find('=');
            pairs.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
        }
        start = end + 1;
    }
    std::sort(pairs.begin(), pairs.end());
    std::string out;
    for (const auto& [name, value] : pairs) out += (out.empty() ? "" : "&") + name + "=" + value;
    return out;
}

std::string amz_date(std::time_t when) {
    std::tm utc{};
    gmtime_r(&when, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
    return text;
}

std::optional<int64_t> http_date_ns(std::string_view text) {
    // "Sun, 06 Nov 1994 08:49:37 GMT": 29 characters, every field at a fixed place.
    static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (text.size() != 29 || text.substr(3, 2) != ", " || text.substr(25) != " GMT") return std::nullopt;
    const auto number = [&](size_t at, size_t digits, int64_t* out) {
        *out = 0;
        for (size_t i = at; i < at + digits; ++i) {
            if (text[i] < '0' || text[i] > '9') return false;
            *out = *out * 10 + (text[i] - '0');
        }
        return true;
    };
    int64_t day, year, hour, minute, second;
    const size_t month_at = kMonths.find(text.substr(8, 3));
    if (!number(5, 2, &day) || !number(12, 4, &year) || !number(17, 2, &hour) || !number(20, 2, &minute) ||
        !number(23, 2, &second) || month_at == std::string_view::npos || month_at % 3 != 0 || text[7] != ' ' ||
        text[11] != ' ' || text[16] != ' ' || text[19] != ':' || text[22] != ':' || day < 1 || day > 31 || hour > 23 ||
        minute > 59 || second > 60)
        return std::nullopt;
    // Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days algorithm, inverted).
    const int64_t month = static_cast<int64_t>(month_at / 3) + 1;
    const int64_t y = year - (month <= 2 ? 1 : 0);
    const int64_t era = y / 400;
    const int64_t year_of_era = y - era * 400;
    const int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    const int64_t days = era * 146097 + day_of_era - 719468;
    return (((days * 24 + hour) * 60 + minute) * 60 + second) * 1000000000LL;
}

std::string sha256_hex(const void* data, size_t size) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(static_cast<const unsigned char*>(data), size, digest);
    return hex(digest, sizeof digest);
}

std::string canonical_request(const SigningRequest& r) {
    const auto headers = canonical_headers(r);
    std::string text = r.method + "\n" + r.path + "\n" + canonical_query(r.query) + "\n";
    for (const auto& [name, value] : headers) text += name + ":" + value + "\n";
    return text + "\n" + signed_header_names(headers) + "\n" + r.payload_hash;
}

std::string string_to_sign(const SigningRequest& r) {
    const std::string canonical = canonical_request(r);
    return "AWS4-HMAC-SHA256\n" + r.amz_date + "\n" + scope(r) + "\n" + sha256_hex(canonical.data(), canonical.size());
}

std::string authorization(const SigningRequest& r) {
    std::string key = hmac_sha256("AWS4" + r.secret_access_key, r.amz_date.substr(0, 8));
    for (const char* part : {r.region.c_str(), "s3", "aws4_request"}) key = hmac_sha256(key, part);
    const std::string signature = hmac_sha256(key, string_to_sign(r));
    return "AWS4-HMAC-SHA256 Credential=" + r.access_key_id + "/" + scope(r) +
           ", SignedHeaders=" + signed_header_names(canonical_headers(r)) +
           ", Signature=" + hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
}

}  // namespace ckpt::s3
