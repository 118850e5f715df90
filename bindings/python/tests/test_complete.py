"""Every function of the installed ckpt.h has a counterpart here: a declared signature, and a use in the package.
When the C API grows, this fails until the binding grows with it."""
import os
import re

import pytest

from ckpt import _native

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt")

# Functions the package needs no call to, and why.
NOT_NEEDED = {
    "ckpt_vars_find": "collections cross as Python mappings, which find their names themselves",
    "ckpt_vars_metadata": "metadata crosses whole, as a dict (count, key, value)",
    "ckpt_npz_metadata": "metadata crosses whole, as a dict (count, key, value)",
}


def header_functions():
    path = os.environ.get("CKPT_HEADER")
    if not path:
        pytest.fail("CKPT_HEADER must name the installed ckpt/ckpt.h (the CMake test sets it)")
    with open(path) as f:
        text = f.read()
    names = re.findall(r"CKPT_API\s+[^;{}]*?\b(ckpt_\w+)\s*\(", text)
    assert len(names) > 50, "found only %d functions in %s" % (len(names), path)
    return names


def package_source():
    """The package's code, without the table of signatures (a declaration is not a use)."""
    text = ""
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name)) as f:
                text += f.read()
    return re.sub(r"\nSIGNATURES = \{.*?\n\}\n", "\n", text, flags=re.S)


def test_every_function_of_the_header_is_declared():
    missing = [f for f in header_functions() if f not in _native.SIGNATURES]
    assert not missing, "ckpt.h functions without a signature in ckpt/_native.py: %s" % ", ".join(missing)


def test_every_function_of_the_header_is_used_or_explained():
    source = package_source()
    used = re.compile(r"\blib\.(ckpt_\w+)|_release = \"(ckpt_\w+)\"")  # a call, or a handle's release function
    calls = {a or b for a, b in used.findall(source)}
    unused = [f for f in header_functions() if f not in NOT_NEEDED and f not in calls]
    assert not unused, "ckpt.h functions the package never calls (use them, or add them to NOT_NEEDED with a " \
                       "reason): %s" % ", ".join(unused)


def test_nothing_is_declared_that_the_header_lacks():
    extra = set(_native.SIGNATURES) - set(header_functions())
    assert not extra, "declared but not in ckpt.h: %s" % ", ".join(sorted(extra))


def test_the_compiled_fast_path_is_there_when_expected():
    from ckpt import _vars
    if os.environ.get("CKPT_EXPECT_SPEEDUPS"):
        assert _vars._speedups is not None, "ckpt._speedups did not import"
