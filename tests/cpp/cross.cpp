// SPDX-License-Identifier: Apache-2.0
// cross: the C++ program of the cross-language checkpoint (tests/cross/README.md), written with ckpt.hpp.
//
//     cross write PATH LAYOUT           save the checkpoint to PATH, layout plain or objax (stored)
//     cross check PATH                  read PATH and check every array and the note; print "ok <writer>"
//     cross manager-save LOGDIR IDX     save it as checkpoint IDX of a manager (default subdir, keep 3)
//     cross manager-resume LOGDIR IDX   restore the latest checkpoint in place; check it is IDX; print "ok <writer>"
//     cross tree PATH                   print the nested state of PATH, one line per node (ckpt::Tree)
//
// Exit status: 0; 1 for a failed ckpt call (its code and message are printed) or a difference; 2 for a usage error.
#include <ckpt/ckpt.hpp>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* const kWriter = "cpp";
const char* const kNote = "\xc3\xa9t\xc3\xa9 \xe2\x88\x82";  // "été ∂" in UTF-8

// A difference from the checkpoint of the README.
struct Mismatch {
    std::string what;
};

// One variable of the checkpoint: its name, dtype, shape and raw bytes.
struct Expected {
    std::string name;
    ckpt::Dtype dtype;
    ckpt::Shape shape;
    std::string bytes;
};

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<Expected> checkpoint() {
    return {
        {"w", ckpt::Dtype::float32, {2, 3}, bytes_of(std::vector<float>{0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 0.001f})},
        {"step", ckpt::Dtype::int64, {}, bytes_of(std::vector<int64_t>{42})},
        {"bf16", ckpt::Dtype::bfloat16, {4},
         bytes_of(std::vector<ckpt::bfloat16>{{0x3f80}, {0xc000}, {0x7f80}, {0x0001}})},
        {"f8", ckpt::Dtype::float8_e4m3fn, {3}, bytes_of(std::vector<ckpt::float8_e4m3fn>{{0x38}, {0xb8}, {0x7e}})},
        {"empty", ckpt::Dtype::int32, {0, 2}, std::string()},
    };
}

// The checkpoint's variables, filled with its values or with zeros, and its metadata.
ckpt::Vars make_vars(bool zeros) {
    ckpt::Vars vars;
    for (const Expected& e : checkpoint())
        vars.add(e.name, e.dtype, e.shape, zeros ? nullptr : e.bytes.data(), ckpt::Ownership::copy);
    if (!zeros) {
        vars.set_metadata("writer", kWriter);
        vars.set_metadata("note", kNote);
    }
    return vars;
}

std::string shape_text(const ckpt::Shape& shape) {
    std::string s = "(";
    for (size_t k = 0; k < shape.size(); ++k) s += (k > 0 ? ", " : "") + std::to_string(shape[k]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

// Every name in order, dtype, shape and value bit for bit, and the note; returns the writer.
std::string check_vars(const ckpt::Vars& vars) {
    const std::vector<Expected> expected = checkpoint();
    std::vector<std::string> names;
    for (const Expected& e : expected) names.push_back(e.name);
    if (vars.names() != names) {
        std::string got;
        for (const std::string& n : vars.names()) got += (got.empty() ? "" : ", ") + n;
        throw Mismatch{"the variables are [" + got + "], not [w, step, bf16, f8, empty]"};
    }
    for (size_t i = 0; i < expected.size(); ++i) {
        const Expected& e = expected[i];
        if (vars.dtype(i) != e.dtype)
            throw Mismatch{"'" + e.name + "' is " + ckpt::dtype_name(vars.dtype(i)) + ", not " + ckpt::dtype_name(e.dtype)};
        if (vars.shape(i) != e.shape)
            throw Mismatch{"'" + e.name + "' has shape " + shape_text(vars.shape(i)) + ", not " + shape_text(e.shape)};
        if (vars.nbytes(i) != e.bytes.size() ||
            (!e.bytes.empty() && std::memcmp(vars.data(i), e.bytes.data(), e.bytes.size()) != 0))
            throw Mismatch{"the values of '" + e.name + "' differ"};
    }
    const auto note = vars.metadata("note");
    if (!note) throw Mismatch{"the metadata has no 'note'"};
    if (*note != kNote) throw Mismatch{"the note is '" + std::string(*note) + "', not '" + kNote + "'"};
    const auto writer = vars.metadata("writer");
    if (!writer) throw Mismatch{"the metadata has no 'writer'"};
    return std::string(*writer);
}

// Parses a non-negative decimal index, or returns -1.
int64_t parse_index(const char* text) {
    if (*text == '\0' || *text == '-' || *text == '+') return -1;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) return -1;
    return static_cast<int64_t>(v);
}

ckpt::ManagerOptions manager_options() {
    ckpt::ManagerOptions o;  // default subdir
    o.keep = 3;
    return o;
}

// UTF-8 bytes in hex; "." for none.
std::string hex(const std::string& bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out.empty() ? "." : out;
}

// One line per node of the checkpoint's structure (tests/cross/README.md): path, how it is reached, kind, value.
void print_tree(const std::string& path, const ckpt::TreeNode& node, const char* reached, ckpt::Reader& reader) {
    std::string value;
    switch (node.kind()) {
        case ckpt::TreeNode::Kind::dict:
        case ckpt::TreeNode::Kind::list:
        case ckpt::TreeNode::Kind::tuple: value = std::to_string(node.size()); break;
        case ckpt::TreeNode::Kind::array: {
            value = hex(node.member()) + " [";
            const ckpt::Shape shape = reader.shape(reader.index(node.member()));
            for (size_t i = 0; i < shape.size(); ++i) value += (i ? "," : "") + std::to_string(shape[i]);
            value += "]";
            break;
        }
        case ckpt::TreeNode::Kind::floating: {
            const double d = node.as_double();
            uint64_t bits = 0;
            std::memcpy(&bits, &d, sizeof bits);
            char text[17];
            std::snprintf(text, sizeof text, "%016" PRIx64, bits);
            value = text;
            break;
        }
        case ckpt::TreeNode::Kind::integer: value = node.text(); break;
        case ckpt::TreeNode::Kind::boolean: value = node.as_bool() ? "true" : "false"; break;
        case ckpt::TreeNode::Kind::str: value = hex(node.text()); break;
        case ckpt::TreeNode::Kind::none: value = "-"; break;
    }
    std::printf("%s %s %s %s\n", hex(path).c_str(), reached, ckpt::TreeNode::kind_name(node.kind()), value.c_str());
    const std::string prefix = path.empty() ? "" : path + "/";
    if (node.kind() == ckpt::TreeNode::Kind::dict) {
        for (const ckpt::TreeEntry& e : node.entries())
            print_tree(prefix + ckpt::tree_escape(e.key.text), e.value, e.key.is_int ? "int" : "str", reader);
    } else if (node.is_container()) {
        for (size_t i = 0; i < node.size(); ++i)
            print_tree(prefix + std::to_string(i), node.items()[i], "item", reader);
    }
}

int usage() {
    std::fprintf(stderr,
                 "usage: cross write PATH plain|objax\n"
                 "       cross check PATH\n"
                 "       cross manager-save LOGDIR IDX\n"
                 "       cross manager-resume LOGDIR IDX\n"
                 "       cross tree PATH\n");
    return 2;
}

int run(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string command = argv[1];
    if (command == "write" && argc == 4) {
        ckpt::Options options;
        if (std::strcmp(argv[3], "plain") == 0) {
            options.layout = ckpt::Layout::plain;
        } else if (std::strcmp(argv[3], "objax") == 0) {
            options.layout = ckpt::Layout::objax;
        } else {
            return usage();
        }
        ckpt::save(argv[2], make_vars(false), options);
        return 0;
    }
    if (command == "check" && argc == 3) {
        std::printf("ok %s\n", check_vars(ckpt::read(argv[2])).c_str());
        return 0;
    }
    if (command == "tree" && argc == 3) {
        ckpt::Reader reader(argv[2]);
        const ckpt::Tree tree = ckpt::Tree::of(reader, argv[2]);
        print_tree("", tree.root(), "root", reader);
        return 0;
    }
    if ((command == "manager-save" || command == "manager-resume") && argc == 4) {
        const int64_t idx = parse_index(argv[3]);
        if (idx < 0) return usage();
        ckpt::Manager manager(argv[2], manager_options());
        if (command == "manager-save") {
            ckpt::Vars vars = make_vars(false);
            vars.set_metadata("step", std::to_string(idx));
            manager.save(vars, idx);
            manager.close();
            return 0;
        }
        ckpt::Vars vars = make_vars(true);
        const int64_t restored = manager.restore(vars);
        manager.close();
        if (restored != idx)
            throw Mismatch{"restored checkpoint " + std::to_string(restored) + ", not " + std::to_string(idx)};
        const std::string writer = check_vars(vars);
        const auto step = vars.metadata("step");
        if (!step || *step != std::to_string(idx))
            throw Mismatch{"the metadata 'step' is " + (step ? "'" + std::string(*step) + "'" : std::string("missing")) +
                           ", not '" + std::to_string(idx) + "'"};
        std::printf("ok %s\n", writer.c_str());
        return 0;
    }
    return usage();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const ckpt::Error& e) {
        std::fprintf(stderr, "cross: ckpt failed with %d (%s): %s\n", e.code(), e.code_name(), e.what());
        return 1;
    } catch (const Mismatch& m) {
        std::fprintf(stderr, "cross: %s\n", m.what.c_str());
        return 1;
    }
}
