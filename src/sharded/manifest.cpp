// SPDX-License-Identifier: Apache-2.0
#include "sharded/manifest.hpp"

#include "core/array.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <unordered_set>

namespace ckpt::core {

namespace {

using json = nlohmann::ordered_json;
constexpr std::string_view kFormat = "ckpt-sharded";
constexpr int64_t kVersion = 1;
// root {} > "variables" [] > variable {} > "pieces" [] > piece {} > "rows" []
constexpr int kMaxDepth = 6;

class Checker {
public:
    explicit Checker(const std::string& label) : label_(label) {}

    template <typename... A>
    [[noreturn]] void bad(fmt::format_string<A...> f, A&&... args) const {
        throw Error(Code::format, label_ + ": manifest: " + fmt::format(f, std::forward<A>(args)...));
    }
    const json& field(const json& object, const char* key, const std::string& where) const {
        auto it = object.find(key);
        if (it == object.end()) bad("{}'{}' is missing", where, key);
        return *it;
    }
    int64_t integer(const json& v, const std::string& what, int64_t min, int64_t max) const {
        if (!v.is_number_integer()) bad("{} is not an integer", what);
        const bool is_unsigned = v.is_number_unsigned();
        if (is_unsigned && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad("{} is out of range", what);
        const int64_t x = v.get<int64_t>();
        if (x < min || x > max) bad("{} is {}, outside [{}, {}]", what, x, min, max);
        return x;
    }
    const std::string& text(const json& v, const std::string& what) const {
        if (!v.is_string()) bad("{} is not a string", what);
        const std::string& s = v.get_ref<const std::string&>();
        if (s.find('\0') != std::string::npos || !valid_utf8(s)) bad("{} contains NUL or invalid UTF-8", what);
        return s;
    }
    void only_keys(const json& object, std::initializer_list<const char*> keys, const std::string& where) const {
        for (auto it = object.begin(); it != object.end(); ++it) {
            bool known = false;
            for (const char* k : keys) known = known || it.key() == k;
            if (!known) bad("{}unexpected key '{}'", where, it.key());
        }
    }

private:
    const std::string& label_;
};

ManifestVariable parse_variable(const Checker& c, const json& v, size_t k, int64_t world) {
    const std::string where = fmt::format("variables[{}]: ", k);
    if (!v.is_object()) c.bad("{}not an object", where);
    c.only_keys(v, {"name", "dtype", "itemsize", "shape", "shard", "pieces"}, where);
    ManifestVariable out;
    out.name = c.text(c.field(v, "name", where), where + "name");
    if (out.name.empty() || out.name == kMetadataName) c.bad("{}the name '{}' is not a variable's", where, out.name);
    const std::string& dtype = c.text(c.field(v, "dtype", where), where + "dtype");
    const auto d = dtype_named(dtype);
    if (!d) c.bad("{}unknown dtype '{}'", where, dtype);
    out.dtype = *d;
    out.itemsize = static_cast<size_t>(c.integer(c.field(v, "itemsize", where), where + "itemsize", 1, INT32_MAX));
    if (!has_array_itemsize(out.dtype) && out.itemsize != numeric_size(out.dtype))
        c.bad("{}itemsize {} is not that of {}", where, out.itemsize, dtype);
    const json& shape = c.field(v, "shape", where);
    if (!shape.is_array() || shape.size() > kMaxDims) c.bad("{}shape is not an array of at most {} sizes", where, kMaxDims);
    for (const json& dim : shape) out.shape.push_back(c.integer(dim, where + "shape", 0, INT64_MAX));
    if (!checked_nbytes(out.shape.data(), out.shape.size(), out.itemsize)) c.bad("{}the byte size overflows", where);
    const bool has_shard = v.contains("shard"), has_pieces = v.contains("pieces");
    if (has_shard == has_pieces) c.bad("{}needs exactly one of 'shard' and 'pieces'", where);
    if (has_shard) {
        out.shard = c.integer(v["shard"], where + "shard", 0, world - 1);
        return out;
    }
    const json& pieces = v["pieces"];
    if (!pieces.is_array() || pieces.empty()) c.bad("{}pieces is not a non-empty array", where);
    if (out.shape.empty()) c.bad("{}a row-split variable needs at least one dimension", where);
    int64_t next = 0;
    for (const json& p : pieces) {
        if (!p.is_object()) c.bad("{}a piece is not an object", where);
        c.only_keys(p, {"shard", "rows"}, where);
        ManifestPiece piece;
        piece.shard = c.integer(c.field(p, "shard", where), where + "piece shard", 0, world - 1);
        const json& rows = c.field(p, "rows", where);
        if (!rows.is_array() || rows.size() != 2) c.bad("{}rows is not [begin, end]", where);
        piece.row_begin = c.integer(rows[0], where + "rows", 0, INT64_MAX);
        piece.row_end = c.integer(rows[1], where + "rows", 0, INT64_MAX);
        if (piece.row_begin != next || piece.row_end < piece.row_begin)
            c.bad("{}the pieces do not tile rows [0, {}) in order: [{}, {}) after row {}", where, out.shape[0],
                  piece.row_begin, piece.row_end, next);
        next = piece.row_end;
        out.pieces.push_back(piece);
    }
    if (next != out.shape[0]) c.bad("{}the pieces cover rows [0, {}) of {}", where, next, out.shape[0]);
    return out;
}

}  // namespace

std::string shard_name(int64_t rank, int64_t world_size) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "shard-%05" PRId64 "-of-%05" PRId64 ".npz", rank, world_size);
    return buf;
}

const ManifestVariable* Manifest::find(std::string_view name) const {
    for (const ManifestVariable& v : variables)
        if (v.name == name) return &v;
    return nullptr;
}

std::string manifest_to_json(const Manifest& m) {
    json root = json::object();
    root["format"] = kFormat;
    root["version"] = kVersion;
    root["step"] = m.step;
    root["world_size"] = m.world_size;
    json shards = json::array();
    for (int64_t r = 0; r < m.world_size; ++r) shards.push_back(shard_name(r, m.world_size));
    root["shards"] = std::move(shards);
    json metadata = json::object();
    for (size_t i = 0; i < m.metadata.size(); ++i) metadata[m.metadata.key(i)] = m.metadata.value(i);
    root["metadata"] = std::move(metadata);
    json variables = json::array();
    for (const ManifestVariable& v : m.variables) {
        json o = json::object();
        o["name"] = v.name;
        o["dtype"] = dtype_name(v.dtype);
        o["itemsize"] = v.itemsize;
        o["shape"] = v.shape;
        if (!v.split()) {
            o["shard"] = v.shard;
        } else {
            json pieces = json::array();
            for (const ManifestPiece& p : v.pieces)
                pieces.push_back(json{{"shard", p.shard}, {"rows", json::array({p.row_begin, p.row_end})}});
            o["pieces"] = std::move(pieces);
        }
        variables.push_back(std::move(o));
    }
    root["variables"] = std::move(variables);
    return root.dump(1, ' ', false, json::error_handler_t::strict) + "\n";
}

Manifest manifest_from_json(std::string_view text, const std::string& label) {
    const Checker c(label);
    if (text.size() > kMaxManifestBytes) c.bad("{} bytes, more than the limit of {}", text.size(), kMaxManifestBytes);
    json root;
    try {
        // Nesting is refused while parsing, before it is built.
        root = json::parse(text.begin(), text.end(), [&](int depth, json::parse_event_t, json&) {
            if (depth > kMaxDepth) c.bad("nested deeper than {} levels", kMaxDepth);
            return true;
        });
    } catch (const json::exception& e) {
        c.bad("not JSON: {}", e.what());
    }
    if (!root.is_object()) c.bad("not a JSON object");
    c.only_keys(root, {"format", "version", "step", "world_size", "shards", "metadata", "variables"}, "");
    if (c.text(c.field(root, "format", ""), "format") != kFormat) c.bad("format is not '{}'", kFormat);
    if (c.integer(c.field(root, "version", ""), "version", 1, INT64_MAX) > kVersion)
        throw Error(Code::unsupported, label + ": manifest: version " + root["version"].dump() +
                                           " is newer than this library reads (1)");
    Manifest m;
    m.step = c.integer(c.field(root, "step", ""), "step", 0, INT64_MAX);
    m.world_size = c.integer(c.field(root, "world_size", ""), "world_size", 1, kMaxWorldSize);
    const json& shards = c.field(root, "shards", "");
    if (!shards.is_array() || shards.size() != static_cast<size_t>(m.world_size))
        c.bad("shards does not list world_size ({}) files", m.world_size);
    for (size_t r = 0; r < shards.size(); ++r)
        if (c.text(shards[r], "shards") != shard_name(static_cast<int64_t>(r), m.world_size))
            c.bad("shards[{}] is not '{}'", r, shard_name(static_cast<int64_t>(r), m.world_size));
    const json& metadata = c.field(root, "metadata", "");
    if (!metadata.is_object()) c.bad("metadata is not an object");
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
        const std::string& value = c.text(it.value(), "metadata '" + it.key() + "'");
        try {
            m.metadata.set(it.key(), value);
        } catch (const Error& e) {
            c.bad("metadata: {}", e.what());
        }
    }
    const json& variables = c.field(root, "variables", "");
    if (!variables.is_array()) c.bad("variables is not an array");
    std::unordered_set<std::string> names;
    for (size_t k = 0; k < variables.size(); ++k) {
        ManifestVariable v = parse_variable(c, variables[k], k, m.world_size);
        if (!names.insert(v.name).second) c.bad("variable '{}' is listed twice", v.name);
        m.variables.push_back(std::move(v));
    }
    return m;
}

}  // namespace ckpt::core
