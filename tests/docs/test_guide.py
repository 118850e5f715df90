# SPDX-License-Identifier: Apache-2.0
"""Runs every code block of a document (docs/guide.md, docs/object-storage.md), in order, in one scratch directory,
against the installed library.

    test_guide.py GUIDE STAGE_PREFIX PYTHON_PACKAGE_DIR [--node-modules DIR]

```c blocks are compiled as C99 with -Wall -Wextra -Werror against STAGE_PREFIX (through pkg-config, as the guide
says: ckpt, and ckpt-s3 too for a block that includes ckpt/ckpt_s3.h) and run; ```python blocks run with the ckpt package; ```sh blocks run with bash, STAGE_PREFIX/bin first on
PATH. Each must exit 0. A comment `<!-- guide-test: runs=N expect="text" -->` just before a block runs it N times and
requires the last run's output to contain the text. A block of any other language fails the test: every block is
tested. The one kind of block not run is one that changes the machine (the install commands): `<!-- guide-test:
same-as="README.md docs/python.md" -->` requires instead that each named file (from the repository's root) has the
very same block, so the documents give one set of commands. Prints one line per block and a closing 'N passed, N failed'.

--node-modules DIR links DIR into the scratch directory as node_modules, so that a block which installs an npm
package only when node_modules lacks it (docs/object-storage.md's S3 server) runs with the pinned install of
tests/s3 and never needs the npm registry.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"(?:<!--\s*guide-test:(?P<directive>[^>]*)-->\s*\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```\s*$",
                   re.S | re.M)


def main():
    args = sys.argv[1:]
    node_modules = None
    if "--node-modules" in args:
        i = args.index("--node-modules")
        node_modules = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    guide, stage, package = (os.path.abspath(a) for a in args[:3])
    env = dict(os.environ)
    libdir = os.path.join(stage, os.environ.get("CKPT_INSTALL_LIBDIR", "lib"))  # CMAKE_INSTALL_LIBDIR
    env["PKG_CONFIG_PATH"] = os.path.join(libdir, "pkgconfig")
    env["PYTHONPATH"] = package
    env["CKPT_LIBRARY"] = os.path.join(libdir, "libckpt.so.0")
    env["PATH"] = os.path.join(stage, "bin") + os.pathsep + env.get("PATH", "")
    def pkg_config(*packages):
        return subprocess.run(["pkg-config", "--cflags", "--libs", *packages], env=env, check=True,
                              stdout=subprocess.PIPE, text=True).stdout.split()
    with open(guide) as f:
        text = f.read()
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="ckpt-guide-") as tmp:
        if node_modules:
            os.symlink(node_modules, os.path.join(tmp, "node_modules"))
        for n, m in enumerate(BLOCK.finditer(text), 1):
            lang, code = m.group("lang"), m.group("code")
            directive = m.group("directive") or ""
            runs = int(re.search(r"runs=(\d+)", directive).group(1)) if "runs=" in directive else 1
            expect = re.search(r'expect="([^"]*)"', directive)
            line = text.count("\n", 0, m.start("code")) + 1
            same_as = re.search(r'same-as="([^"]*)"', directive)
            if same_as:
                root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                root = os.path.dirname(root)
                missing = []
                for other in same_as.group(1).split():
                    with open(os.path.join(root, other)) as f:
                        if "```%s\n%s```" % (lang, code) not in f.read():
                            missing.append(other)
                ok = not missing
                print("%s block %d (%s, line %d, not run)%s" % ("ok" if ok else "FAILED", n, lang, line,
                      "" if ok else ": not the same block in " + ", ".join(missing)))
                passed += ok
                failed += not ok
                continue
            if lang == "c":
                src, exe = os.path.join(tmp, "block%d.c" % n), os.path.join(tmp, "block%d" % n)
                with open(src, "w") as f:
                    f.write(code)
                packages = ("ckpt", "ckpt-s3") if "ckpt/ckpt_s3.h" in code else ("ckpt",)
                cmd = [os.environ.get("CC", "cc"), "-std=c99", "-Wall", "-Wextra", "-Werror", src, "-o", exe] + \
                    pkg_config(*packages) + ["-Wl,-rpath," + libdir]
                build = subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
                if build.returncode != 0:
                    print("FAILED block %d (c, line %d): does not compile:\n%s" % (n, line, build.stdout))
                    failed += 1
                    continue
                run = [exe]
            elif lang == "python":
                run = [sys.executable, "-c", code]
            elif lang == "sh":
                run = ["bash", "-euo", "pipefail", "-c", code]
            else:
                print("FAILED block %d (line %d): language %r is not tested (use c, python or sh)" % (n, line, lang))
                failed += 1
                continue
            ok, out = True, ""
            for _ in range(runs):
                p = subprocess.run(run, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=300)
                out = p.stdout
                if p.returncode != 0:
                    ok = False
                    break
            if ok and expect and expect.group(1) not in out:
                ok = False
                out += "\n(expected the output to contain %r)" % expect.group(1)
            print("%s block %d (%s, line %d)%s" % ("ok" if ok else "FAILED", n, lang, line,
                                                   "" if ok else ":\n" + out))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
