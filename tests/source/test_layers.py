#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The library's source tree is layered (docs/source-tree.md): each folder of src/ includes only the folders below
it. Reads every #include "folder/..." of src/ and fails, naming the file and the line, for one that reaches up or
sideways.

    test_layers.py <source dir>
"""
import os
import re
import sys

# Each folder and the folders it may include (besides itself and the public headers, "ckpt/...").
ALLOWED = {
    "core": set(),
    "storage": {"core"},
    "npy": {"core"},
    "incremental": {"core", "storage"},
    "npz": {"core", "storage", "npy", "incremental"},
    "safetensors": {"core", "storage", "npy", "incremental"},
    "container": {"core", "storage", "npy", "incremental", "npz", "safetensors"},
    "writer": {"core", "storage"},
    "sharded": {"core", "storage", "npy", "incremental", "npz"},
    "manager": {"core", "storage", "npy", "incremental", "npz", "safetensors", "container", "writer", "sharded"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def violations(src):
    found = []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        if folder not in ALLOWED:
            found.append("%s/: a folder this check does not know: give it its place in ALLOWED and the docs" % folder)
            continue
        for name in sorted(os.listdir(path)):
            with open(os.path.join(path, name), encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target in (folder, "ckpt") or target in ALLOWED[folder]:
                    continue
                line = text.count("\n", 0, m.start()) + 1
                found.append("src/%s/%s:%d includes %s/, which %s/ may not" % (folder, name, line, target, folder))
    return found


def main():
    src = os.path.join(sys.argv[1], "src")
    bad = violations(src)
    for v in bad:
        print("FAIL:", v)
    if not bad:
        print("src/: every include goes down the layers (%s)" % ", ".join(ALLOWED))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
