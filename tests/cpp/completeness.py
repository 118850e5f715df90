#!/usr/bin/python3
"""Every function of the C API has a counterpart in the C++ binding.

    completeness.py <installed ckpt.h> <installed ckpt.hpp>
    completeness.py --self-test <installed ckpt.h> <installed ckpt.hpp>

Reads the CKPT_API function declarations of the installed ckpt.h and fails, naming each, for every one that ckpt.hpp
never calls (comments and string literals do not count) and that EXEMPT does not list with a reason. It also fails
for an exemption that is no longer needed (the binding calls the function) or no longer names a function of the
API, so the list stays true. When the C API grows, this test makes the binding grow with it.

--self-test checks the check: a header with one more function, and a binding with one call taken out, must fail
naming exactly those functions.
"""
import contextlib
import io
import os
import re
import sys
import tempfile

# Functions of ckpt.h that ckpt.hpp deliberately does not call, each with the reason. Empty today: every function
# has a counterpart — constructors and destructors in the handles, getters behind typed accessors, the
# _options_init functions behind the option structs, ckpt_storage_new behind ckpt::Storage.
EXEMPT = {
    # "ckpt_example_function": "why C++ code needs no counterpart",
}


def strip_comments_and_strings(text):
    """C and C++ source without comments and string/char literals (each replaced by a space)."""
    pattern = re.compile(
        r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
        re.DOTALL,
    )
    return pattern.sub(" ", text)


def api_functions(header_text):
    """Names of the functions declared CKPT_API at the start of a line."""
    code = strip_comments_and_strings(header_text)
    names = re.findall(r"^[ \t]*CKPT_API\b[^;]*?\b(ckpt_[a-z0-9_]+)\s*\(", code, re.MULTILINE)
    return sorted(set(names))


def called_functions(binding_text):
    """Names of ckpt_* functions the binding calls (a name followed by an opening parenthesis)."""
    code = strip_comments_and_strings(binding_text)
    return set(re.findall(r"\b(ckpt_[a-z0-9_]+)\s*\(", code))


def problems(header_text, binding_text, exempt):
    api = api_functions(header_text)
    called = called_functions(binding_text)
    out = []
    if not api:
        out.append("no CKPT_API functions found in the header: is it ckpt.h?")
    for name in api:
        if name not in called and name not in exempt:
            out.append(f"{name}: ckpt.hpp never calls it (wrap it, or add it to EXEMPT with the reason)")
    for name in sorted(exempt):
        if name not in api:
            out.append(f"{name}: exempt, but not a function of ckpt.h any more (remove it from EXEMPT)")
        elif name in called:
            out.append(f"{name}: exempt, but ckpt.hpp calls it (remove it from EXEMPT)")
    return api, out


def check(header_path, binding_path):
    with open(header_path, encoding="utf-8") as f:
        header = f.read()
    with open(binding_path, encoding="utf-8") as f:
        binding = f.read()
    api, found = problems(header, binding, EXEMPT)
    for line in found:
        print(f"FAIL: {line}", file=sys.stderr)
    if found:
        return 1
    print(f"ok: all {len(api)} CKPT_API functions of {header_path} are called by {os.path.basename(binding_path)}"
          + (f" ({len(EXEMPT)} exempt)" if EXEMPT else ""))
    for name, reason in sorted(EXEMPT.items()):
        print(f"  exempt: {name}: {reason}")
    return 0


def self_test(header_path, binding_path):
    with open(header_path, encoding="utf-8") as f:
        header = f.read()
    with open(binding_path, encoding="utf-8") as f:
        binding = f.read()
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    api, found = problems(header, binding, EXEMPT)
    expect("the installed pair", found, [])
    expect("ckpt_vars_free is found in the header", "ckpt_vars_free" in api, True)
    expect("the CKPT_API macro definition is not a function", [n for n in api if not n.startswith("ckpt_")], [])

    # One more function in the C API, declared the way ckpt.h declares them, and one mentioned only in a comment.
    grown = header.replace(
        "#ifdef __cplusplus\n}",
        "/* ckpt_in_a_comment_only(void) */\nCKPT_API int ckpt_future_function(ckpt_vars *vars,\n"
        "                                    size_t i);\n#ifdef __cplusplus\n}",
    )
    expect("the header edit applied", grown != header, True)
    _, found = problems(grown, binding, EXEMPT)
    expect("a new function", [p.split(":")[0] for p in found], ["ckpt_future_function"])

    # A binding that stops calling a function, leaving the name only in a comment and a string.
    shrunk = re.sub(r"\bckpt_npz_metadata_key\s*\(", "ckpt_npz_metadata_value(", binding)
    shrunk += '\n// ckpt_npz_metadata_key(npz, i)\nstatic const char* s = "ckpt_npz_metadata_key(";\n'
    _, found = problems(header, shrunk, EXEMPT)
    expect("a dropped call", [p.split(":")[0] for p in found], ["ckpt_npz_metadata_key"])

    # Stale exemptions are refused too.
    _, found = problems(header, binding, {"ckpt_vars_new": "x", "ckpt_gone": "y"})
    expect("stale exemptions", sorted(p.split(":")[0] for p in found), ["ckpt_gone", "ckpt_vars_new"])
    # An exemption covers what the binding does not call.
    _, found = problems(grown, binding, {"ckpt_future_function": "reason"})
    expect("an exemption", found, [])

    with tempfile.TemporaryDirectory() as tmp:
        h = os.path.join(tmp, "ckpt.h")
        with open(h, "w", encoding="utf-8") as f:
            f.write(grown)
        with contextlib.redirect_stderr(io.StringIO()) as err:
            rc = check(h, binding_path)
        expect("the command fails for a grown header", rc, 1)
        expect("and names the function", "ckpt_future_function: ckpt.hpp never calls it" in err.getvalue(), True)

    for line in failures:
        print(f"FAIL: {line}", file=sys.stderr)
    if failures:
        return 1
    print("ok: the completeness check notices a new function, a dropped call and stale exemptions")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--self-test":
        return self_test(argv[2], argv[3])
    if len(argv) == 3:
        return check(argv[1], argv[2])
    print(__doc__.strip().splitlines()[2], file=sys.stderr)
    print("usage: completeness.py [--self-test] <ckpt.h> <ckpt.hpp>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
