# SPDX-License-Identifier: Apache-2.0
"""Running the installed ckpt program, and the child processes that make inputs with the Python package.

Environment (set by tests/cli/CMakeLists.txt): CKPT_CLI (the program), CKPT_LIBRARY and CKPT_PYTHON_PACKAGE (for
the child processes), CKPT_EXPECTED_VERSION, and in sanitizer builds CKPT_TEST_PRELOAD (the sanitizer runtime
those children load first).
"""
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

CLI = os.environ["CKPT_CLI"]
LIBRARY = os.environ["CKPT_LIBRARY"]
PACKAGE = os.environ["CKPT_PYTHON_PACKAGE"]
VERSION = os.environ["CKPT_EXPECTED_VERSION"]
PRELOAD = os.environ.get("CKPT_TEST_PRELOAD", "")
SANITIZER_REPORTS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def run(*args, env=None, cwd=None, timeout=120):
    """Runs the program; its stderr never carries a sanitizer report."""
    full_env = dict(os.environ)
    full_env.pop("CKPT_PROGRESS_AFTER_MS", None)
    full_env.update(env or {})
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, env=full_env, cwd=cwd,
                       timeout=timeout)
    for report in SANITIZER_REPORTS:
        assert report not in p.stderr, "ckpt %s:\n%s" % (" ".join(map(str, args)), p.stderr)
    return p


def run_json(*args, status=0):
    p = run(*args, "--json")
    assert p.returncode == status, "exit %d (expected %d): %s%s" % (p.returncode, status, p.stdout, p.stderr)
    return json.loads(p.stdout)


def child_env():
    env = dict(os.environ, PYTHONPATH=PACKAGE, CKPT_LIBRARY=LIBRARY)
    if PRELOAD:
        env["LD_PRELOAD"] = PRELOAD
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # the interpreter's own allocations are not ckpt's to account for
    return env


def with_ckpt(code, cwd):
    """Runs Python code that uses the ckpt package, in a child process (so this process never loads the library)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                       env=child_env(), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def snapshot(directory):
    """Every file and directory under `directory`, hidden ones too, with size, mtime and content hash."""
    state = {}
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            full = os.path.join(root, d)
            state[os.path.relpath(full, directory) + "/"] = os.stat(full).st_mtime_ns
        for f in files:
            full = os.path.join(root, f)
            st = os.stat(full)
            with open(full, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            state[os.path.relpath(full, directory)] = (st.st_size, st.st_mtime_ns, digest)
    return state


def flip_byte(data, offset):
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1:]


def flip_in_array_data(filename, array):
    """Flips one bit of `array`'s bytes inside the file, where they are stored: only the CRC can tell."""
    with open(filename, "rb") as f:
        data = f.read()
    at = data.find(np.ascontiguousarray(array).tobytes())
    assert at > 0
    with open(filename, "wb") as f:
        f.write(flip_byte(data, at))
