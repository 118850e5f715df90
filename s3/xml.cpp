// SPDX-License-Identifier: Apache-2.0
#include "xml.hpp"

#include <expat.h>

#include <memory>
#include <vector>

namespace ckpt::s3 {

namespace {

struct Walk {
    const std::function<void(const std::string&, std::string&)>* leaf;
    std::string path;
    std::vector<size_t> starts;  // where each open element's name begins in path
    std::string text;            // of the innermost open element, while it has no child
    bool has_child = false;
};

void XMLCALL on_start(void* data, const XML_Char* name, const XML_Char** /*attributes*/) {
    auto* w = static_cast<Walk*>(data);
    w->starts.push_back(w->path.size());
    if (!w->path.empty()) w->path += '/';
    w->path += name;
    w->text.clear();
    w->has_child = false;
}

void XMLCALL on_end(void* data, const XML_Char* /*name*/) {
    auto* w = static_cast<Walk*>(data);
    if (!w->has_child) (*w->leaf)(w->path, w->text);
    w->text.clear();
    w->path.resize(w->starts.back());
    w->starts.pop_back();
    w->has_child = true;  // the parent now has a child
}

void XMLCALL on_text(void* data, const XML_Char* s, int len) {
    auto* w = static_cast<Walk*>(data);
    w->text.append(s, static_cast<size_t>(len));
}

}  // namespace

bool for_each_leaf(std::string_view document, const std::function<void(const std::string&, std::string&)>& leaf,
                   std::string* error) {
    std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate("UTF-8"), XML_ParserFree);
    if (!parser) throw std::bad_alloc();
    Walk walk;
    walk.leaf = &leaf;
    XML_SetUserData(parser.get(), &walk);
    XML_SetElementHandler(parser.get(), on_start, on_end);
    XML_SetCharacterDataHandler(parser.get(), on_text);
    // One call per chunk: an int length.
    constexpr size_t kChunk = size_t{1} << 30;
    size_t at = 0;
    do {
        const size_t n = std::min(kChunk, document.size() - at);
        const bool last = at + n == document.size();
        if (XML_Parse(parser.get(), document.data() + at, static_cast<int>(n), last) != XML_STATUS_OK) {
            if (error != nullptr)
                *error = std::string(XML_ErrorString(XML_GetErrorCode(parser.get()))) + " at line " +
                         std::to_string(XML_GetCurrentLineNumber(parser.get()));
            return false;
        }
        at += n;
    } while (at < document.size());
    return true;
}

ErrorDocument parse_error(std::string_view document) {
    ErrorDocument e;
    std::string ignored;
    for_each_leaf(
        document,
        [&](const std::string& path, std::string& text) {
            if (path == "Error/Code") e.code = std::move(text);
            if (path == "Error/Message") e.message = std::move(text);
        },
        &ignored);
    return e;
}

}  // namespace ckpt::s3
