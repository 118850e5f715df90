// SPDX-License-Identifier: Apache-2.0
// ckpt: inspect, check, compare and convert checkpoints from the command line (docs/cli.md).
#include "commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <new>
#include <streambuf>
#include <vector>

namespace {

using namespace ckpt_tool;

std::string version_text() { return fmt::format("ckpt {} (library {})", CKPT_VERSION_STRING, ckpt_version_string()); }

// Counts what goes to stdout, so that an error after a document was written adds no second one.
class CountingBuf : public std::streambuf {
public:
    explicit CountingBuf(std::streambuf* to) : to_(to) {}
    size_t written() const { return written_; }

protected:
    int overflow(int c) override {
        if (c == traits_type::eof()) return traits_type::not_eof(c);
        ++written_;
        return to_->sputc(static_cast<char>(c));
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        written_ += static_cast<size_t>(n);
        return to_->sputn(s, n);
    }
    int sync() override { return to_->pubsync(); }

private:
    std::streambuf* to_;
    size_t written_ = 0;
};

// A help text as a sentence: capitalised, with a full stop.
std::string sentence(std::string text) {
    if (text.empty()) return text;
    if (std::islower(static_cast<unsigned char>(text[0]))) text[0] = static_cast<char>(std::toupper(text[0]));
    const char last = text.back();
    if (last != '.' && last != '?' && last != '!') text += '.';
    return text;
}

void make_sentences(CLI::App& app) {
    app.description(sentence(app.get_description()));
    for (CLI::Option* opt : app.get_options()) opt->description(sentence(opt->get_description()));
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) make_sentences(*sub);
}

// Help without CLI11's own words: an option's value shown by a name (`--subdir SUBDIR`, `--layout {plain,objax}`,
// `--max-shard-size SIZE`), arguments by theirs alone (`FILE`, `NAME ...`), no "TEXT", "REQUIRED" or "Excludes:".
class HelpFormatter : public CLI::Formatter {
public:
    std::string make_option_opts(const CLI::Option* opt) const override {
        if (opt->get_type_size() == 0 || (opt->get_type_name().empty() && !opt->get_positional()))
            return "";  // a flag (or an option whose description shows its value, as --deflate=LEVEL)
        const bool many = opt->get_expected_max() == CLI::detail::expected_max_vector_size;
        if (opt->get_positional()) return many ? " ..." : "";
        return " " + placeholder(opt) + (many ? " ..." : "");
    }

private:
    static std::string placeholder(const CLI::Option* opt) {
        std::string t = opt->get_type_name();
        for (const char* generic : {"TEXT", "FLOAT", "INT", "UINT", "NUMBER"}) {
            const std::string g = generic;
            if (t == g) t.clear();
            if (t.compare(0, g.size() + 1, g + ":") == 0) t.erase(0, g.size() + 1);
        }
        const bool word =
            !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return std::isupper(c) || c == '_'; });
        if (word || (!t.empty() && t[0] == '{')) return t;  // a name the option gave (FILE, SIZE), or its choices
        std::string name = opt->get_lnames().empty() ? opt->get_name() : opt->get_lnames()[0];
        for (char& c : name) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return name;
    }
};

// Edit distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// git's answer to a word that is no command, with the commands close to it.
std::string unknown_command(const std::string& word, const std::vector<std::string>& names) {
    std::string message = fmt::format("'{}' is not a ckpt command. See 'ckpt --help'.", word);
    size_t best = 3;  // farther than 2 edits is no likely typo
    for (const std::string& n : names) best = std::min(best, distance(word, n));
    std::vector<std::string> close;
    for (const std::string& n : names)
        if ((best <= 2 && distance(word, n) == best) || (word.size() >= 2 && n.compare(0, word.size(), word) == 0))
            if (std::find(close.begin(), close.end(), n) == close.end()) close.push_back(n);
    if (!close.empty()) {
        message += close.size() == 1 ? "\n\nThe most similar command is" : "\n\nThe most similar commands are";
        for (const std::string& n : close) message += "\n\t" + n;
    }
    return message;
}

// `--deflate 9` as `--deflate=9`: an option whose value is optional takes a level in the next word too.
std::vector<std::string> join_optional_values(std::vector<std::string> args) {
    static const char* const kOptionalValue[] = {"--deflate"};
    std::vector<std::string> out;
    for (size_t k = 0; k < args.size(); ++k) {
        const bool optional = std::any_of(std::begin(kOptionalValue), std::end(kOptionalValue),
                                          [&](const char* o) { return args[k] == o; });
        const bool number =
            k + 1 < args.size() && !args[k + 1].empty() &&
            std::all_of(args[k + 1].begin(), args[k + 1].end(), [](char c) { return c >= '0' && c <= '9'; });
        if (args[k] == "--") {
            out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(k), args.end());
            break;
        }
        if (optional && number) {
            out.push_back(args[k] + "=" + args[k + 1]);
            ++k;
        } else {
            out.push_back(args[k]);
        }
    }
    return out;
}

struct Run {
    bool json = false;  // --json on the command line: errors are a JSON document too
    CountingBuf* out = nullptr;

    // Reports a failure: on stderr as "ckpt: <message>", and with --json as the one document on stdout.
    int fail(int exit_code, int code, const std::string& message) const {
        std::cout.flush();
        std::cerr << "ckpt: " << message << '\n';
        if (json && out->written() == 0) {
            Json doc;
            doc["error"] = {{"code", code}, {"name", code_name(code)}, {"message", message}};
            print_json(doc);
        }
        return exit_code;
    }
};

// Sends std::cout through a CountingBuf while it lives.
struct CountedCout {
    std::streambuf* original = std::cout.rdbuf();
    CountingBuf counting{original};
    CountedCout() { std::cout.rdbuf(&counting); }
    ~CountedCout() {
        std::cout.flush();
        std::cout.rdbuf(original);
    }
};

}  // namespace

int main(int argc, char** argv) {
    CountedCout counted;
    CountingBuf& counting = counted.counting;
    Run run;
    run.out = &counting;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (const std::string& a : args) {
        if (a == "--") break;
        if (a == "--json") run.json = true;
    }
    args = join_optional_values(std::move(args));

    CLI::App app{
        "Inspect, check, compare, convert and clean up checkpoints (NumPy .npz files, as ckpt, numpy and objax "
        "write them, and safetensors files)",
        "ckpt"};
    const auto help = std::make_shared<HelpFormatter>();
    help->label("SUBCOMMAND", "COMMAND");
    help->label("Positionals", "Arguments");
    app.formatter(help);
    app.set_version_flag("--version", version_text(), "print the program's and the library's versions");
    app.require_subcommand(1);
    app.footer(
        "Exit status: 0 ok; 1 files differ (diff) or a file is broken; 2 usage error; 3 a file or directory is "
        "missing, unreadable or unwritable; 4 out of memory or another failure.\n"
        "Every path may be an s3://bucket/key URL (with libckpt_s3 installed; AWS_ENDPOINT_URL, AWS_REGION, "
        "AWS_ACCESS_KEY_ID, ... as the AWS tools take them).\n"
        "`ckpt COMMAND --help` or `ckpt help COMMAND` describes a command; docs/cli.md has the JSON schemas.");
    std::vector<Command> commands = {add_ls(app),      add_show(app),  add_verify(app), add_diff(app),  add_cat(app),
                                     add_convert(app), add_clean(app), add_stats(app),  add_report(app)};
    make_sentences(app);
    for (const Command& c : commands) c.app->group("Commands");
    std::vector<std::string> names;
    for (const Command& c : commands) names.push_back(c.app->get_name());
    const auto find = [&](const std::string& name) -> CLI::App* {
        for (const Command& c : commands)
            if (c.app->get_name() == name) return c.app;
        return nullptr;
    };

    // `ckpt help [COMMAND]`, and a first word that is no command, answered as git answers them.
    if (!args.empty() && args[0] == "help") {
        if (args.size() == 1) {
            std::cout << app.help();
            return kExitOk;
        }
        if (CLI::App* sub = find(args[1])) {
            std::cout << sub->help(app.get_name());
            return kExitOk;
        }
        return run.fail(kExitUsage, CKPT_EINVAL, unknown_command(args[1], names));
    }
    if (!args.empty() && !args[0].empty() && args[0][0] != '-' && !find(args[0]))
        return run.fail(kExitUsage, CKPT_EINVAL, unknown_command(args[0], names));
    // Options before the command are the command's, as after it: `ckpt --json ls DIR` is `ckpt ls --json DIR`.
    // The program's own (--help, --version) stay where they are.
    const auto command_at = std::find_if(args.begin(), args.end(), [&](const std::string& a) { return find(a); });
    if (command_at != args.end() && command_at != args.begin() &&
        std::none_of(args.begin(), command_at,
                     [](const std::string& a) { return a == "--help" || a == "-h" || a == "--version" || a == "--"; }))
        std::rotate(args.begin(), command_at, command_at + 1);

    try {
        std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes the words last first
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e) == 0 ? kExitOk : kExitUsage;
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e) == 0 ? kExitOk : kExitUsage;
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e) == 0 ? kExitOk : kExitUsage;
    } catch (const CLI::ParseError& e) {
        std::string command;
        for (const std::string& a : args)
            if (find(a)) {
                command = a + " ";
                break;
            }
        const std::string what = e.what();
        return run.fail(
            kExitUsage, CKPT_EINVAL,
            fmt::format("{}{} See 'ckpt {}--help'.", what, what.empty() || what.back() == '.' ? "" : ".", command));
    }
    int status = kExitOk;
    try {
        for (const Command& c : commands)
            if (c.app->parsed()) status = c.run();
    } catch (const Failure& f) {
        status = run.fail(f.exit_code(), f.code(), f.what());
    } catch (const std::bad_alloc&) {
        status = run.fail(kExitInternal, CKPT_ENOMEM, "out of memory");
    } catch (const std::exception& e) {
        status = run.fail(kExitInternal, CKPT_ERROR, e.what());
    }
    std::cout.flush();
    if (!std::cout) {
        std::cerr << "ckpt: cannot write the output\n";
        if (status == kExitOk) status = kExitIo;
    }
    return status;
}
