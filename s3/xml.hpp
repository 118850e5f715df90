// SPDX-License-Identifier: Apache-2.0
// The S3 responses ckpt reads (ListObjectsV2, InitiateMultipartUpload, CompleteMultipartUpload, Error), parsed
// with expat. S3's documents are flat: what ckpt needs is the text of leaf elements by their path.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ckpt::s3 {

// Calls leaf(path, text) for every element without child elements, in document order, `path` naming it from the
// root ("ListBucketResult/Contents/Key"; namespaces are not expanded, S3 puts everything in its default one).
// Returns false, with expat's reason and position in *error, for a document that is not well-formed XML.
bool for_each_leaf(std::string_view document, const std::function<void(const std::string& path, std::string& text)>& leaf,
                   std::string* error);

// The <Code> and <Message> of an S3 <Error> document (empty when the document is not one).
struct ErrorDocument {
    std::string code;
    std::string message;
};
ErrorDocument parse_error(std::string_view document);

}  // namespace ckpt::s3
