# SPDX-License-Identifier: Apache-2.0
"""Every function of the installed ckpt.h has a counterpart here: a declared signature, and a use in the package
(or a reason why not); so has every function of ckpt_s3.h, and its options struct has the header's fields. When the
C API grows, this fails until the binding grows with it."""
import os
import re

import pytest

from ckpt import _native

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ckpt")

# Functions the package needs no call to, and why.
NOT_NEEDED = {
    "ckpt_vars_find": "collections cross as Python mappings, which find their names themselves",
    "ckpt_vars_metadata": "metadata crosses whole, as a dict (count, key, value)",
    "ckpt_reader_metadata": "metadata crosses whole, as a dict (count, key, value)",
    "ckpt_reader_find": "an open file's names cross once, in order, into the dict that finds them (and iterates them)",
}

# Functions the package neither declares nor calls, and why: declaring one would make `import ckpt` need the
# library that added it.
NOT_BOUND = {
    "ckpt_error_set": "for C libraries that extend ckpt with functions of their own (libckpt_s3); the package "
                      "raises its own errors as exceptions, and a callback's failure already reaches the library "
                      "through ckpt_error_set_message (0.5.0, the oldest library the package takes)",
}


def read_with_sys(path):
    """A header with the ckpt/sys/ headers it includes (installed beside it, in sys/) appended."""
    with open(path) as f:
        text = f.read()
    for name in re.findall(r'^#include "ckpt/(sys/[\w.]+)"', text, re.M):
        with open(os.path.join(os.path.dirname(path), name)) as f:
            text += f.read()
    return text


def header_functions(name="ckpt.h", api="CKPT_API", at_least=50):
    path = os.environ.get("CKPT_HEADER")
    if not path:
        pytest.fail("CKPT_HEADER must name the installed ckpt/ckpt.h (the CMake test sets it)")
    path = os.path.join(os.path.dirname(path), name)
    text = read_with_sys(path)
    names = re.findall(r"%s\s+[^;{}]*?\b(ckpt_\w+)\s*\(" % api, text)
    assert len(names) >= at_least, "found only %d functions in %s" % (len(names), path)
    return names


def s3_header():
    """The installed ckpt/ckpt_s3.h, or a skip when ckpt was installed without its S3 library."""
    path = os.path.join(os.path.dirname(os.environ.get("CKPT_HEADER") or "."), "ckpt_s3.h")
    if not os.path.exists(path):
        pytest.skip("no ckpt_s3.h beside ckpt.h: ckpt was built without libckpt_s3")
    with open(path) as f:
        return f.read()


def package_source():
    """The package's code, without the table of signatures (a declaration is not a use)."""
    text = ""
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name)) as f:
                text += f.read()
    return re.sub(r"\nSIGNATURES = \{.*?\n\}\n", "\n", text, flags=re.S)


def earlier_names():
    """{name: earlier name} of the functions ckpt.h declares under their names before a rename too (CKPT_SAME_AS)."""
    text = re.sub(r"/\*.*?\*/", " ", read_with_sys(os.environ["CKPT_HEADER"]), flags=re.S)
    pairs = re.findall(r"\b(ckpt_\w+)\s*\([^;{}]*?\)\s*CKPT_SAME_AS\s*\(\s*(\w+)\s*\)\s*;", text)
    assert len(pairs) >= 30, "found only %d earlier names in ckpt.h" % len(pairs)
    return {name: earlier for earlier, name in pairs}


def test_the_earlier_names_are_the_headers():
    # The package calls a function by its name, and by its earlier one where the library predates the name.
    assert _native.EARLIER_NAMES == earlier_names()


def bound(function):
    """Whether the package declares `function`: by its name, or as the earlier name of one it declares."""
    return function in _native.SIGNATURES or function in _native.EARLIER_NAMES.values()


def test_every_function_of_the_header_is_declared():
    missing = [f for f in header_functions() if not bound(f) and f not in NOT_BOUND]
    assert not missing, "ckpt.h functions without a signature in ckpt/_native.py: %s" % ", ".join(missing)


def test_every_function_of_the_header_is_used_or_explained():
    source = package_source()
    used = re.compile(r"\blib\.(ckpt_\w+)|_release = \"(ckpt_\w+)\"")  # a call, or a handle's release function
    calls = {a or b for a, b in used.findall(source)}
    earlier = set(_native.EARLIER_NAMES.values())  # bound in _native's load, in place of their new names
    unused = [f for f in header_functions() if f not in NOT_NEEDED and f not in NOT_BOUND and f not in calls
              and f not in earlier]
    assert not unused, "ckpt.h functions the package never calls (use them, or add them to NOT_NEEDED with a " \
                       "reason): %s" % ", ".join(unused)


def test_nothing_is_declared_that_the_header_lacks():
    extra = set(_native.SIGNATURES) - set(header_functions())
    assert not extra, "declared but not in ckpt.h: %s" % ", ".join(sorted(extra))


def test_functions_left_unbound_are_in_the_header_and_really_unbound():
    functions = header_functions()
    assert not [f for f in NOT_BOUND if f not in functions], "NOT_BOUND names functions ckpt.h lacks"
    source = package_source()
    assert not [f for f in NOT_BOUND if f in _native.SIGNATURES or re.search(r"\blib\.%s\b" % f, source)], \
        "NOT_BOUND names functions the package declares or calls"


def test_every_function_of_ckpt_s3_h_is_declared_and_used():
    from ckpt import s3
    s3_header()
    functions = header_functions("ckpt_s3.h", "CKPT_S3_API", 3)
    assert sorted(functions) == sorted(s3.S3_SIGNATURES), "ckpt_s3.h has %s; ckpt/s3.py declares %s" % (
        ", ".join(sorted(functions)), ", ".join(sorted(s3.S3_SIGNATURES)))
    with open(os.path.join(PACKAGE, "s3.py")) as f:
        calls = set(re.findall(r"\bs3\.(ckpt_\w+)\(", f.read()))
    assert calls == set(functions), "ckpt/s3.py calls %s" % ", ".join(sorted(calls))


def test_the_s3_options_struct_has_the_fields_of_the_header_in_order():
    from ckpt import s3
    text = s3_header()
    body = re.search(r"typedef struct ckpt_s3_options \{(.*?)\} ckpt_s3_options;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = re.findall(r"(\w+)\s*;", body)
    assert [name for name, _ in s3.S3Options._fields_] == fields
    version = int(re.search(r"#define CKPT_S3_OPTIONS_VERSION (\d+)", text).group(1))
    assert s3.S3_OPTIONS_VERSION == version, "ckpt_s3.h is at options version %d: the struct grew" % version


def header_struct_fields(text, name):
    """The fields of `typedef struct <name> { ... } <name>;` in order (a callback by its name in ``(*name)``)."""
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = []
    for declaration in body.split(";"):
        pointer = re.search(r"\(\*\s*(\w+)\s*\)", declaration)
        if pointer:
            fields.append(pointer.group(1))
        elif declaration.strip():
            fields.append(re.findall(r"\w+", declaration)[-1])
    return fields


@pytest.mark.parametrize("name, struct, version", [
    ("ckpt_writer_options", "WriterOptions", "WRITER_OPTIONS_VERSION"),
    ("ckpt_options", "NpzOptions", "NPZ_OPTIONS_VERSION"),
    ("ckpt_manager_options", "ManagerOptions", "MANAGER_OPTIONS_VERSION"),
])
def test_the_option_structs_have_the_fields_of_the_header_in_order(name, struct, version):
    text = read_with_sys(os.environ["CKPT_HEADER"])
    assert [n for n, _ in getattr(_native, struct)._fields_] == header_struct_fields(text, name)
    upper = name.upper()
    found = int(re.search(r"#define %s_VERSION (\d+)" % upper, text).group(1))
    assert getattr(_native, version) == found, "ckpt.h is at %s_VERSION %d: the struct grew" % (upper, found)


def test_the_compiled_fast_path_is_there_when_expected():
    from ckpt import _vars
    if os.environ.get("CKPT_EXPECT_SPEEDUPS"):
        assert _vars._speedups is not None, "ckpt._speedups did not import"


def test_the_package_version_is_the_project_version():
    # ckpt.__version__, the version pip installs and the library's own release move together.
    import ckpt
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        project = re.search(r"project\(ckpt VERSION (\S+)", f.read()).group(1)
    with open(os.path.join(root, "bindings", "python", "pyproject.toml")) as f:
        pyproject = re.search(r'^version = "(.+)"$', f.read(), re.M).group(1)
    assert (ckpt.__version__, pyproject) == (project, project)


def test_a_library_before_the_new_names_is_called_by_its_earlier_ones(monkeypatch):
    import ctypes
    real = ctypes.CDLL

    class Before011:  # libckpt 0.10: the same functions, under their earlier names only
        def __init__(self, name):
            self._lib = real(name)
            self._name = name

        def __getattr__(self, name):
            if name in _native.EARLIER_NAMES:
                raise AttributeError(name)
            if name == "ckpt_version_number":
                return lambda: 1000
            f = getattr(self._lib, name)
            setattr(self, name, f)
            return f

    monkeypatch.setattr(ctypes, "CDLL", Before011)
    old = _native._load()
    assert isinstance(old, Before011)
    for name, earlier in _native.EARLIER_NAMES.items():
        assert getattr(old, name) is getattr(old, earlier), name
    # A call through a new name reaches the function behind the earlier symbol.
    o = _native.NpzOptions()
    assert old.ckpt_options_init(ctypes.byref(o), 6) == 0 and o.version == 6
