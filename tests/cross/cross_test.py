# SPDX-License-Identifier: Apache-2.0
"""Every language's `cross` program against every other's (tests/cross/README.md).

    cross_test.py --lang c=/path/cross_c --lang python="/usr/bin/python3 bindings/python/tests/cross.py" ...

Each --lang NAME=COMMAND names a language and the command line of its program (split on spaces). For every writer
and every reader: the writer saves the checkpoint in both layouts and the reader checks it; the writer saves two
manager checkpoints into a directory and the reader resumes from it, then saves the next one, which the writer
resumes. Then Python writes nested training state and every language with a structure walker (TREE_READERS) prints
its structure, which must be Python's line for line. Prints one line per pair and check, and a closing
'N passed, N failed'.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile


# The languages whose binding reads nested state's structure record (docs/format.md, "Nested state"); C programs
# read the record's documented JSON themselves.
TREE_READERS = ("python", "cpp", "rust")


def run(cmd, *args):
    p = subprocess.run(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lang", action="append", required=True, metavar="NAME=COMMAND")
    langs = {}
    for spec in parser.parse_args().lang:
        name, _, cmd = spec.partition("=")
        langs[name] = shlex.split(cmd)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="ckpt-cross-") as tmp:
        for writer, wcmd in langs.items():
            for reader, rcmd in langs.items():
                problems = []
                for layout in ("plain", "objax"):
                    path = os.path.join(tmp, "%s-%s-%s.npz" % (writer, reader, layout))
                    rc, _, err = run(wcmd, "write", path, layout)
                    if rc != 0:
                        problems.append("%s write %s: exit %d: %s" % (writer, layout, rc, err))
                        continue
                    rc, out, err = run(rcmd, "check", path)
                    if rc != 0 or out != "ok %s" % writer:
                        problems.append("%s check of %s's %s file: exit %d: %s %s" % (reader, writer, layout, rc,
                                                                                       out, err))
                logdir = os.path.join(tmp, "%s-%s-logdir" % (writer, reader))
                steps = [(wcmd, writer, "manager-save", "5"), (wcmd, writer, "manager-save", "12"),
                         (rcmd, reader, "manager-resume", "12"), (rcmd, reader, "manager-save", "30"),
                         (wcmd, writer, "manager-resume", "30")]
                for cmd, who, what, idx in steps:
                    rc, out, err = run(cmd, what, logdir, idx)
                    expected_writer = writer if idx == "12" else reader
                    if rc != 0 or (what == "manager-resume" and out != "ok %s" % expected_writer):
                        problems.append("%s %s %s: exit %d: %s %s" % (who, what, idx, rc, out, err))
                        break
                verdict = "ok" if not problems else "FAILED"
                print("%-6s -> %-6s %s" % (writer, reader, verdict))
                for p in problems:
                    print("    " + p)
                passed += not problems
                failed += bool(problems)
        if "python" in langs:
            path = os.path.join(tmp, "nested.npz")
            rc, _, err = run(langs["python"], "write-nested", path)
            if rc != 0:
                print("python write-nested: exit %d: %s" % (rc, err))
                failed += 1
            else:
                rc, expected, err = run(langs["python"], "tree", path)
                for reader in (r for r in TREE_READERS if r in langs):
                    rc2, listing, err2 = run(langs[reader], "tree", path)
                    ok = rc == 0 and rc2 == 0 and listing == expected and expected.count("\n") > 20
                    print("%-6s -> %-6s nested state %s" % ("python", reader, "ok" if ok else "FAILED"))
                    if not ok:
                        print("    python: exit %d %s\n%s\n    %s: exit %d %s\n%s" % (rc, err, expected, reader, rc2,
                                                                                  err2, listing))
                    passed += ok
                    failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
