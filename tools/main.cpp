// ckpt: inspect, check, compare and convert checkpoints from the command line (docs/cli.md).
#include "commands.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <new>
#include <vector>

namespace {

std::string version_text() {
    return fmt::format("ckpt {} (library {})", CKPT_VERSION_STRING, ckpt_version_string());
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ckpt_tool;
    CLI::App app{"ckpt: inspect, check, compare and convert checkpoints (NumPy .npz files, as ckpt, numpy and objax "
                 "write them)",
                 "ckpt"};
    app.set_version_flag("--version", version_text(), "print the program's and the library's versions");
    app.require_subcommand(1);
    app.footer(
        "Exit status: 0 ok; 1 files differ (diff) or a file is broken; 2 usage error; 3 a file or directory is "
        "missing, unreadable or unwritable; 4 out of memory or another failure.\n"
        "`ckpt COMMAND --help` describes a command; docs/cli.md has the JSON schemas.");
    std::vector<Command> commands = {add_ls(app), add_show(app), add_verify(app),
                                     add_diff(app), add_cat(app), add_convert(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);  // prints help, the version, or the error
        return rc == 0 ? kExitOk : kExitUsage;
    }
    int status = kExitOk;
    try {
        for (const Command& c : commands)
            if (c.app->parsed()) status = c.run();
    } catch (const Failure& f) {
        std::cout.flush();
        std::cerr << "ckpt: " << f.what() << '\n';
        status = f.exit_code();
    } catch (const std::bad_alloc&) {
        std::cout.flush();
        std::cerr << "ckpt: out of memory\n";
        status = kExitInternal;
    } catch (const std::exception& e) {
        std::cout.flush();
        std::cerr << "ckpt: " << e.what() << '\n';
        status = kExitInternal;
    }
    std::cout.flush();
    if (!std::cout) {
        std::cerr << "ckpt: cannot write the output\n";
        if (status == kExitOk) status = kExitIo;
    }
    return status;
}
