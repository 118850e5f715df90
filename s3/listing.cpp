// SPDX-License-Identifier: Apache-2.0
#include "listing.hpp"

#include "xml.hpp"

#include <algorithm>

namespace ckpt::s3 {

void list(Client& client, const char* dir, std::vector<std::string>* files, std::vector<std::string>* dirs) {
    std::string prefix = client.config().key_of(dir);
    if (!prefix.empty()) prefix += '/';
    std::string token;
    for (;;) {
        Request r;
        r.key = "";
        r.query = (token.empty() ? "" : "continuation-token=" + uri_encode(token, false) + "&") +
                  "delimiter=%2F&list-type=2&prefix=" + uri_encode(prefix, false);
        const Response response = client.perform(r, "list");
        bool truncated = false;
        std::string next, why;
        const bool ok = for_each_leaf(
            response.body,
            [&](const std::string& p, std::string& text) {
                if (p == "ListBucketResult/Contents/Key" && files != nullptr && text.size() > prefix.size() &&
                    text.compare(0, prefix.size(), prefix) == 0)
                    files->push_back(text.substr(prefix.size()));
                else if (p == "ListBucketResult/CommonPrefixes/Prefix" && dirs != nullptr &&
                         text.size() > prefix.size() + 1 && text.compare(0, prefix.size(), prefix) == 0)
                    dirs->push_back(text.substr(prefix.size(), text.size() - prefix.size() - 1));
                else if (p == "ListBucketResult/IsTruncated")
                    truncated = text == "true";
                else if (p == "ListBucketResult/NextContinuationToken")
                    next = std::move(text);
            },
            &why);
        if (!ok) throw RequestError{CKPT_EIO, "list " + client.describe(prefix) + ": the answer is not XML: " + why};
        if (!truncated) return;
        if (next.empty() || next == token)
            throw RequestError{CKPT_EIO, "list " + client.describe(prefix) + ": truncated without a continuation token"};
        token = std::move(next);
    }
}

bool any_key_under(Client& client, const std::string& prefix) {
    Request r;
    r.query = "list-type=2&max-keys=1&prefix=" + uri_encode(prefix, false);
    const Response response = client.perform(r, "list");
    bool found = false;
    std::string why;
    const bool ok = for_each_leaf(
        response.body,
        [&](const std::string& p, std::string&) { found = found || p == "ListBucketResult/Contents/Key"; }, &why);
    if (!ok) throw RequestError{CKPT_EIO, "list " + client.describe(prefix) + ": the answer is not XML: " + why};
    return found;
}

std::vector<IncompleteUpload> incomplete_uploads(Client& client, const std::string& prefix) {
    std::vector<IncompleteUpload> found;
    std::string key_marker, id_marker;
    for (;;) {
        Request r;
        r.query = "prefix=" + uri_encode(prefix, false) + "&uploads=";
        if (!key_marker.empty())
            r.query += "&key-marker=" + uri_encode(key_marker, false) + "&upload-id-marker=" + uri_encode(id_marker, false);
        const Response response = client.perform(r, "list incomplete uploads of");
        bool truncated = false;
        std::string next_key, next_id, why;
        const bool ok = for_each_leaf(
            response.body,
            [&](const std::string& p, std::string& text) {
                if (p == "ListMultipartUploadsResult/Upload/Key")
                    found.push_back({std::move(text), ""});
                else if (p == "ListMultipartUploadsResult/Upload/UploadId" && !found.empty())
                    found.back().upload_id = std::move(text);
                else if (p == "ListMultipartUploadsResult/IsTruncated")
                    truncated = text == "true";
                else if (p == "ListMultipartUploadsResult/NextKeyMarker")
                    next_key = std::move(text);
                else if (p == "ListMultipartUploadsResult/NextUploadIdMarker")
                    next_id = std::move(text);
            },
            &why);
        if (!ok)
            throw RequestError{CKPT_EIO, "list incomplete uploads of " + client.describe(prefix) +
                                             ": the answer is not XML: " + why};
        if (!truncated) break;
        if (next_key.empty() || (next_key == key_marker && next_id == id_marker))
            throw RequestError{CKPT_EIO, "list incomplete uploads of " + client.describe(prefix) +
                                             ": truncated without a next marker"};
        key_marker = std::move(next_key);
        id_marker = std::move(next_id);
    }
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const IncompleteUpload& u) {
                                   return u.key.compare(0, prefix.size(), prefix) != 0 || u.upload_id.empty();
                               }),
                found.end());
    return found;
}

}  // namespace ckpt::s3
