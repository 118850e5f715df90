// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/tree.hpp — nested training state read from C++: the structure record "__ckpt_tree__" as a tree to walk.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part.
 *
 * A program that saves nested state (Python's ckpt.save of {"model": ..., "optimizer": ..., "epoch": 3}) writes each
 * array as a member named by its path ("optimizer/state/0/exp_avg") and the rest of the structure — dicts with str
 * or int keys, lists, tuples, and the scalars (int, float, bool, str, None) — as JSON in the metadata key
 * "__ckpt_tree__" (docs/format.md, "Nested state"). ckpt::Tree::of(reader) gives that structure back: walk it,
 * find a place by its path, and read an array leaf through the reader by its member name. */
#ifndef CKPT_CPP_TREE_HPP
#define CKPT_CPP_TREE_HPP

#include <ckpt/cpp/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

// The metadata key of the structure record.
inline constexpr const char* tree_key = "__ckpt_tree__";

// One segment of a path: "~" written "~0" and "/" written "~1" (JSON Pointer's escapes), and back.
inline std::string tree_escape(std::string_view key) {
    std::string out;
    out.reserve(key.size());
    for (char c : key) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}
inline std::string tree_unescape(std::string_view segment) {
    std::string out;
    out.reserve(segment.size());
    for (size_t i = 0; i < segment.size(); ++i) {
        if (segment[i] == '~' && i + 1 < segment.size() && (segment[i + 1] == '0' || segment[i + 1] == '1')) {
            out += segment[i + 1] == '0' ? '~' : '/';
            ++i;
        } else {
            out += segment[i];
        }
    }
    return out;
}

// A dict's key: a str key, or an int key (an optimizer's state has them), kept as its decimal text since a
// Python int may be of any size.
struct TreeKey {
    bool is_int = false;
    std::string text;  // the str key, or the int key in decimal

    // The int key; Error(CKPT_EINVAL) for a str key or one beyond int64.
    int64_t as_int() const;
};

struct TreeEntry;

// One node of the structure: a container (dict, list, tuple) or a leaf (an array, or a scalar).
class TreeNode {
public:
    enum class Kind { dict, list, tuple, array, floating, integer, boolean, str, none };

    Kind kind() const noexcept { return kind_; }
    bool is_container() const noexcept { return kind_ == Kind::dict || kind_ == Kind::list || kind_ == Kind::tuple; }

    // A dict's entries in their order; Error(CKPT_EINVAL) for any other node.
    const std::vector<TreeEntry>& entries() const {
        require(kind_ == Kind::dict, "a dict");
        return entries_;
    }
    // A list's or tuple's items; Error(CKPT_EINVAL) for any other node.
    const std::vector<TreeNode>& items() const {
        require(kind_ == Kind::list || kind_ == Kind::tuple, "a list or tuple");
        return items_;
    }
    // Entries of a dict, items of a list or tuple; 0 for a leaf.
    size_t size() const noexcept;
    // An array leaf's member (tensor) name: what Reader::read and friends take.
    const std::string& member() const {
        require(kind_ == Kind::array, "an array");
        return text_;
    }
    // A float's value (exact: the record holds its shortest text; NaN and infinities included); an int's too.
    double as_double() const;
    // An int's value; Error(CKPT_EINVAL) for one beyond int64 (text() then has all its digits).
    int64_t as_int() const;
    bool as_bool() const {
        require(kind_ == Kind::boolean, "a bool");
        return flag_;
    }
    // A str's text; a float's text as recorded ("0.001", "nan", "-0.0"); an int's decimal digits; an array's member
    // name; empty for the others.
    const std::string& text() const noexcept { return text_; }
    // The child at one (unescaped) path segment: a dict's entry whose key has that text (the first, should a str
    // and an int key both have it), a list's or tuple's item at that decimal position; nullptr when there is none.
    const TreeNode* child(std::string_view segment) const;

    // The name of a kind ("dict", "float", "None", ...), as the record and Python call it.
    static const char* kind_name(Kind kind) noexcept;

private:
    friend class Tree;
    void require(bool ok, const char* what) const {
        if (!ok)
            throw Error(CKPT_EINVAL,
                        std::string("ckpt::TreeNode: the node is a ") + kind_name(kind_) + ", not " + what);
    }

    Kind kind_ = Kind::none;
    bool flag_ = false;
    std::string text_;
    std::vector<TreeNode> items_;
    std::vector<TreeEntry> entries_;
};

struct TreeEntry {
    TreeKey key;
    TreeNode value;
};

// A checkpoint's structure. Its root is a dict.
class Tree {
public:
    // The structure a record describes; Error(CKPT_EFORMAT) naming `origin` and what is wrong when it is not JSON
    // of the documented shape.
    static Tree parse(std::string_view record, const std::string& origin = "the checkpoint");

    // The structure of an open checkpoint (a Reader, or a Vars read from a file): its record, every array it names
    // checked to be in the file (Error(CKPT_EFORMAT) otherwise); an array the record does not place is added to
    // the root under its member name. A file saved flat has no record: its root is then a dict of its arrays.
    template <typename Handle>
    static Tree of(const Handle& checkpoint, const std::string& origin = "the checkpoint") {
        auto record = checkpoint.metadata(tree_key);
        Tree tree = record ? parse(*record, origin) : Tree();
        std::vector<std::string> placed = tree.members();
        for (const std::string& name : placed)
            if (!checkpoint.find(name))
                throw Error(CKPT_EFORMAT, origin + ": its " + tree_key + " names the array \"" + name +
                                              "\", which the file does not have");
        std::sort(placed.begin(), placed.end());
        for (const std::string& name : checkpoint.names())
            if (!std::binary_search(placed.begin(), placed.end(), name))
                tree.root_.entries_.push_back(TreeEntry{TreeKey{false, name}, array_node(name)});
        return tree;
    }

    const TreeNode& root() const noexcept { return root_; }
    // The node at a path ("optimizer/state/0", escaped as member names are; "" is the root), or nullptr.
    const TreeNode* find(std::string_view path) const;
    // Calls visit(path, node) for every node, parents before their children, in order; path is escaped as member
    // names are ("" for the root), so an array leaf's path is its member name when Python saved it.
    template <typename Visit>
    void walk(Visit&& visit) const {
        std::string path;
        walk_from(root_, path, visit);
    }
    // The member names of the array leaves, in order.
    std::vector<std::string> members() const {
        std::vector<std::string> out;
        walk([&](const std::string&, const TreeNode& node) {
            if (node.kind() == TreeNode::Kind::array) out.push_back(node.member());
        });
        return out;
    }

private:
    Tree() { root_.kind_ = TreeNode::Kind::dict; }
    static TreeNode array_node(const std::string& name) {
        TreeNode node;
        node.kind_ = TreeNode::Kind::array;
        node.text_ = name;
        return node;
    }
    template <typename Visit>
    static void walk_from(const TreeNode& node, std::string& path, Visit& visit) {
        visit(static_cast<const std::string&>(path), node);
        const size_t length = path.size();
        auto descend = [&](const std::string& segment, const TreeNode& child) {
            if (length != 0) path += '/';
            path += tree_escape(segment);
            walk_from(child, path, visit);
            path.resize(length);
        };
        if (node.kind() == TreeNode::Kind::dict) {
            for (const TreeEntry& e : node.entries_) descend(e.key.text, e.value);
        } else if (node.is_container()) {
            for (size_t i = 0; i < node.items_.size(); ++i) descend(std::to_string(i), node.items_[i]);
        }
    }

    class Parser;
    TreeNode root_;
};

// ---- implementation ----

namespace detail {
inline int64_t tree_int(const std::string& text, const char* what) {
    int64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end)
        throw Error(CKPT_EINVAL, std::string("ckpt::Tree: ") + what + " " + text + " does not fit in int64");
    return value;
}
}  // namespace detail

inline int64_t TreeKey::as_int() const {
    if (!is_int) throw Error(CKPT_EINVAL, "ckpt::TreeKey: \"" + text + "\" is a str key, not an int key");
    return detail::tree_int(text, "the key");
}

inline size_t TreeNode::size() const noexcept {
    return kind_ == Kind::dict ? entries_.size() : is_container() ? items_.size() : 0;
}

inline int64_t TreeNode::as_int() const {
    require(kind_ == Kind::integer, "an int");
    return detail::tree_int(text_, "the int");
}

inline double TreeNode::as_double() const {
    require(kind_ == Kind::floating || kind_ == Kind::integer, "a float");
    const std::string_view s = text_;
    const bool minus = !s.empty() && s[0] == '-';
    const std::string_view magnitude = !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
    double value = 0;
    if (magnitude == "inf" || magnitude == "infinity") {
        value = std::numeric_limits<double>::infinity();
    } else if (magnitude == "nan") {
        value = std::numeric_limits<double>::quiet_NaN();
    } else {
        // Parsed and checked when the record was read (Tree::parse).
        std::from_chars(magnitude.data(), magnitude.data() + magnitude.size(), value);
    }
    return minus ? -value : value;
}

inline const TreeNode* TreeNode::child(std::string_view segment) const {
    if (kind_ == Kind::dict) {
        for (const TreeEntry& e : entries_)
            if (e.key.text == segment) return &e.value;
        return nullptr;
    }
    if (!is_container() || segment.empty() || (segment.size() > 1 && segment[0] == '0')) return nullptr;
    size_t i = 0;
    auto [ptr, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), i);
    if (ec != std::errc() || ptr != segment.data() + segment.size() || i >= items_.size()) return nullptr;
    return &items_[i];
}

inline const char* TreeNode::kind_name(Kind kind) noexcept {
    switch (kind) {
        case Kind::dict: return "dict";
        case Kind::list: return "list";
        case Kind::tuple: return "tuple";
        case Kind::array: return "array";
        case Kind::floating: return "float";
        case Kind::integer: return "int";
        case Kind::boolean: return "bool";
        case Kind::str: return "str";
        case Kind::none: return "None";
    }
    return "?";
}

inline const TreeNode* Tree::find(std::string_view path) const {
    const TreeNode* node = &root_;
    while (node != nullptr && !path.empty()) {
        const size_t slash = path.find('/');
        node = node->child(tree_unescape(path.substr(0, slash)));
        path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    }
    return node;
}

// A JSON reader of just what the record holds, bounded in depth (records are untrusted input).
class Tree::Parser {
public:
    Parser(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

    TreeNode record() {
        TreeNode root = node(0);
        space();
        if (at_ != s_.size()) fail("has text after its end");
        if (root.kind_ != TreeNode::Kind::dict) fail("does not describe a dict");
        return root;
    }

private:
    static constexpr int max_depth = 256;

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(CKPT_EFORMAT,
                    origin_ + ": its " + tree_key + " " + what + " (at byte " + std::to_string(at_) + ")");
    }
    void space() {
        while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
    }
    bool eat(char c) {
        space();
        if (at_ < s_.size() && s_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (eat(c)) return;
        fail(std::string(at_ >= s_.size() ? "is cut short" : "is not JSON of the documented shape") + ": '" + c +
             "' expected");
    }
    bool word(std::string_view w) {
        space();
        if (s_.substr(at_, w.size()) != w) return false;
        at_ += w.size();
        return true;
    }
    unsigned hex4() {
        if (at_ + 4 > s_.size()) fail("is not JSON: a \\u escape is cut short");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = s_[at_++];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= unsigned(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= unsigned(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                v |= unsigned(c - 'A' + 10);
            else
                fail("is not JSON: a \\u escape with a character that is not hex");
        }
        return v;
    }
    static void utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }
    std::string string() {
        expect('"');
        std::string out;
        while (true) {
            if (at_ >= s_.size()) fail("is not JSON: a string is not closed");
            const char c = s_[at_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("is not JSON: a control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (at_ >= s_.size()) fail("is not JSON: a string is not closed");
            const char e = s_[at_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    unsigned cp = hex4();
                    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("is not JSON text of Unicode: a lone low surrogate");
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (s_.substr(at_, 2) != "\\u") fail("is not JSON text of Unicode: a lone high surrogate");
                        at_ += 2;
                        const unsigned low = hex4();
                        if (low < 0xDC00 || low > 0xDFFF) fail("is not JSON text of Unicode: a lone high surrogate");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    }
                    utf8(out, cp);
                    break;
                }
                default: fail("is not JSON: an unknown escape in a string");
            }
        }
    }
    // A JSON number's text; *integer tells whether it has no fraction or exponent.
    std::string number(bool* integer) {
        space();
        const size_t begin = at_;
        auto digits = [&] {
            const size_t from = at_;
            while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
            return at_ > from;
        };
        if (at_ < s_.size() && s_[at_] == '-') ++at_;
        const size_t first = at_;
        if (!digits() || (s_[first] == '0' && at_ - first > 1)) fail("is not JSON: a malformed number");
        *integer = true;
        if (at_ < s_.size() && s_[at_] == '.') {
            ++at_;
            if (!digits()) fail("is not JSON: a malformed number");
            *integer = false;
        }
        if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
            ++at_;
            if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
            if (!digits()) fail("is not JSON: a malformed number");
            *integer = false;
        }
        return std::string(s_.substr(begin, at_ - begin));
    }
    bool number_ahead() {
        space();
        return at_ < s_.size() && (s_[at_] == '-' || (s_[at_] >= '0' && s_[at_] <= '9'));
    }

    TreeNode node(int depth) {
        if (depth > max_depth) fail("is nested more than " + std::to_string(max_depth) + " levels deep");
        TreeNode n;
        space();
        if (at_ >= s_.size()) fail("is not JSON: it ends where a value is expected");
        const char c = s_[at_];
        if (c == '"') {
            n.kind_ = TreeNode::Kind::str;
            n.text_ = string();
        } else if (word("true") || word("false")) {
            n.kind_ = TreeNode::Kind::boolean;
            n.flag_ = c == 't';
        } else if (word("null")) {
            n.kind_ = TreeNode::Kind::none;
        } else if (number_ahead()) {
            bool integer = false;
            n.text_ = number(&integer);
            n.kind_ = integer ? TreeNode::Kind::integer : TreeNode::Kind::floating;
        } else if (c == '{') {
            tagged(n, depth);
        } else {
            fail("has a node that is none of the documented kinds");
        }
        return n;
    }
    // {"kind": body}
    void tagged(TreeNode& n, int depth) {
        expect('{');
        const std::string kind = string();
        expect(':');
        if (kind == "array" || kind == "float") {
            const size_t where = at_;
            n.text_ = string();
            if (kind == "array") {
                n.kind_ = TreeNode::Kind::array;
            } else {
                n.kind_ = TreeNode::Kind::floating;
                if (!is_float(n.text_)) {
                    at_ = where;
                    fail("has a float that is not one: \"" + n.text_.substr(0, 80) + "\"");
                }
            }
        } else if (kind == "list" || kind == "tuple") {
            n.kind_ = kind == "list" ? TreeNode::Kind::list : TreeNode::Kind::tuple;
            expect('[');
            if (!eat(']')) {
                do {
                    n.items_.push_back(node(depth + 1));
                } while (eat(','));
                expect(']');
            }
        } else if (kind == "dict") {
            n.kind_ = TreeNode::Kind::dict;
            expect('[');
            if (!eat(']')) {
                do {
                    TreeEntry entry;
                    expect('[');
                    if (number_ahead()) {
                        bool integer = false;
                        entry.key.text = number(&integer);
                        if (!integer) fail("has a dict key that is a number but not an int");
                        entry.key.is_int = true;
                    } else {
                        space();
                        if (at_ >= s_.size() || s_[at_] != '"')
                            fail("has a dict entry that is not a [str or int key, value] pair");
                        entry.key.text = string();
                    }
                    expect(',');
                    entry.value = node(depth + 1);
                    expect(']');
                    n.entries_.push_back(std::move(entry));
                } while (eat(','));
                expect(']');
            }
        } else {
            fail("has a node of the unknown kind \"" + kind.substr(0, 80) + "\"");
        }
        if (!eat('}')) fail("has a node with more than its kind in it");
    }
    // Python's float text: a decimal number, or nan, inf, -inf.
    static bool is_float(const std::string& text) {
        std::string_view s = text;
        if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
        if (s == "nan" || s == "inf" || s == "infinity") return true;
        if (s.empty() || s[0] == '-' || s[0] == '+') return false;
        double value = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value, std::chars_format::general);
        return ec == std::errc() && ptr == s.data() + s.size();
    }

    std::string_view s_;
    const std::string& origin_;
    size_t at_ = 0;
};

inline Tree Tree::parse(std::string_view record, const std::string& origin) {
    Tree tree;
    tree.root_ = Parser(record, origin).record();
    return tree;
}

}  // namespace ckpt

#endif  // CKPT_CPP_TREE_HPP
