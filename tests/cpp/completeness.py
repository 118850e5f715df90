#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every function of the C API has a counterpart in the C++ binding.

    completeness.py <installed ckpt.h> <installed ckpt.hpp>
    completeness.py --self-test <installed ckpt.h> <installed ckpt.hpp>

The binding is ckpt.hpp and its parts, the ckpt/cpp/*.hpp installed beside it. Reads the CKPT_API function
declarations of the installed ckpt.h and fails, naming each, for every one that no header of the binding calls
(comments and string literals do not count) and that EXEMPT does not list with a reason; and for a part that
ckpt.hpp does not include (its calls would reach no user). It also fails
for an exemption that is no longer needed (the binding calls the function) or no longer names a function of the
API, so the list stays true. When the C API grows, this test makes the binding grow with it.

The parts of EXTENSIONS are the exception: each covers the library of its own that ckpt/cpp/s3.hpp calls
(libckpt_s3), so ckpt.hpp must not include it (every C++ program would then have to link that library), and its
calls do not count for ckpt.h. Instead, the export-macro functions of its C header, installed beside ckpt.h
(CKPT_S3_API of ckpt_s3.h), must each be called by that part. A build without the library installs no such
header: the part is then not checked, and the check says so.

--self-test checks the check: a header with one more function, a binding with one call taken out of a part, and a
part ckpt.hpp leaves out must fail naming exactly those; calls made only in a part count; and for the extensions,
a function added to their header, a call dropped from their part, the part included by ckpt.hpp or missing, and a
ckpt.h call made only in it.
"""
import contextlib
import io
import os
import re
import sys
import tempfile

# Functions of the C API that the binding deliberately does not call, each with the reason. Every other function has a
# counterpart — constructors and destructors in the handles, getters behind typed accessors, the _options_init
# functions behind the option structs, ckpt_storage_new behind ckpt::Storage.
EXEMPT = {
    "ckpt_error_set": "for C libraries that extend ckpt with functions of their own (libckpt_s3 is one) to report "
                      "their failures as ckpt's; C++ code throws ckpt::Error, and the binding's callbacks hand their "
                      "words to the library with ckpt_error_set_message",
}

# Parts of the binding that ckpt.hpp leaves out because they call a library of their own, with that library's header
# (installed beside ckpt.h) and the macro that marks its functions.
EXTENSIONS = {
    "ckpt/cpp/s3.hpp": {"header": "ckpt_s3.h", "macro": "CKPT_S3_API", "library": "libckpt_s3"},
}


def strip_comments_and_strings(text):
    """C and C++ source without comments and string/char literals (each replaced by a space)."""
    pattern = re.compile(
        r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""",
        re.DOTALL,
    )
    return pattern.sub(" ", text)


def api_functions(header_text, macro="CKPT_API"):
    """Names of the functions declared with the export macro (CKPT_API) at the start of a line, but for those declared
    under an earlier name (CKPT_SAME_AS: the binding calls the function by its name)."""
    code = re.sub(r"\b" + re.escape(macro) + r"\b[^;]*\bCKPT_SAME_AS\s*\([^)]*\)\s*;", " ",
                  strip_comments_and_strings(header_text))
    names = re.findall(r"^[ \t]*" + re.escape(macro) + r"\b[^;]*?\b(ckpt_[a-z0-9_]+)\s*\(", code, re.MULTILINE)
    return sorted(set(names))


def earlier_names(header_text, macro="CKPT_API"):
    """Names of the functions declared under an earlier name (CKPT_SAME_AS)."""
    code = strip_comments_and_strings(header_text)
    return sorted(set(re.findall(r"\b" + re.escape(macro) + r"\b[^;]*?\b(ckpt_[a-z0-9_]+)\s*\([^;]*\bCKPT_SAME_AS\s*\(",
                                 code)))


# The part that holds every earlier name to the type of the function it names.
EARLIER_PART = "ckpt/cpp/earlier_names.hpp"


def called_functions(binding):
    """Names of ckpt_* functions the given headers call (a name followed by an opening parenthesis)."""
    code = " ".join(strip_comments_and_strings(text) for text in binding.values())
    return set(re.findall(r"\b(ckpt_[a-z0-9_]+)\s*\(", code))


def read_binding(hpp_path):
    """The binding's headers, by their path under the include directory: ckpt/ckpt.hpp and every ckpt/cpp/*.hpp."""
    ckpt_dir = os.path.dirname(os.path.abspath(hpp_path))
    paths = {"ckpt/ckpt.hpp": hpp_path}
    parts_dir = os.path.join(ckpt_dir, "cpp")
    if os.path.isdir(parts_dir):
        for name in sorted(os.listdir(parts_dir)):
            if name.endswith(".hpp"):
                paths["ckpt/cpp/" + name] = os.path.join(parts_dir, name)
    binding = {}
    for rel, path in paths.items():
        with open(path, encoding="utf-8") as f:
            binding[rel] = f.read()
    return binding


def read_extension_headers(header_path):
    """The C headers of EXTENSIONS installed beside ckpt.h, by the part that covers them."""
    headers = {}
    for rel, ext in EXTENSIONS.items():
        path = os.path.join(os.path.dirname(os.path.abspath(header_path)), ext["header"])
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                headers[rel] = f.read()
    return headers


def included_parts(binding):
    """Parts (ckpt/cpp/*.hpp) that ckpt.hpp includes itself."""
    return set(re.findall(r"^[ \t]*#[ \t]*include[ \t]*<(ckpt/cpp/[^>]+)>", binding.get("ckpt/ckpt.hpp", ""),
                          re.MULTILINE))


def unincluded_parts(binding):
    """Parts (ckpt/cpp/*.hpp) that ckpt.hpp does not include itself, extensions aside."""
    included = included_parts(binding)
    return sorted(rel for rel in binding
                  if rel.startswith("ckpt/cpp/") and rel not in included and rel not in EXTENSIONS)


def problems(header_text, binding, exempt, extension_headers=None):
    """The API found (function names by header) and what is wrong, one line each, starting with what it names."""
    extension_headers = extension_headers or {}
    core = {rel: text for rel, text in binding.items() if rel not in EXTENSIONS}
    api = api_functions(header_text)
    called = called_functions(core)
    apis = {"ckpt.h": api}
    out = []
    if not api:
        out.append("no CKPT_API functions found in the header: is it ckpt.h?")
    for rel in unincluded_parts(binding):
        out.append(f"{rel}: ckpt.hpp does not include it (include it there, or remove it)")
    for name in api:
        if name not in called and name not in exempt:
            out.append(f"{name}: the C++ binding never calls it (wrap it, or add it to EXEMPT with the reason)")
    named = set(re.findall(r"\b(ckpt_[a-z0-9_]+)\b", strip_comments_and_strings(binding.get(EARLIER_PART, ""))))
    for name in earlier_names(header_text):
        if name not in named:
            out.append(f"{name}: an earlier name {EARLIER_PART} does not hold to its function's type")

    included = included_parts(binding)
    for rel, ext in sorted(EXTENSIONS.items()):
        if rel in included:
            out.append(f"{rel}: ckpt.hpp includes it, so every C++ program would have to link {ext['library']} "
                       f"(leave it to the programs that include it)")
        text = extension_headers.get(rel)
        if text is None:
            continue
        ext_api = api_functions(text, ext["macro"])
        apis[ext["header"]] = ext_api
        if not ext_api:
            out.append(f"{ext['header']}: no {ext['macro']} functions found in it")
        if rel not in binding:
            out.append(f"{rel}: missing, so the functions of {ext['header']} have no C++ counterpart")
            continue
        ext_called = called_functions({rel: binding[rel]})
        called |= ext_called
        for name in ext_api:
            if name not in ext_called and name not in exempt:
                out.append(f"{name}: {rel} never calls it (wrap it, or add it to EXEMPT with the reason)")

    every = {name for names in apis.values() for name in names}
    for name in sorted(exempt):
        if name not in every:
            out.append(f"{name}: exempt, but not a function of {' or '.join(apis)} any more (remove it from EXEMPT)")
        elif name in called:
            out.append(f"{name}: exempt, but the C++ binding calls it (remove it from EXEMPT)")
    return apis, out


def read_c_api(header_path):
    """ckpt.h with the ckpt/sys/ headers it includes (installed beside it, in sys/) appended."""
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    for name in re.findall(r'^#include "ckpt/(sys/[\w.]+)"', text, re.M):
        with open(os.path.join(os.path.dirname(header_path), name), encoding="utf-8") as f:
            text += f.read()
    return text


def without_sys_includes(text):
    """A header read with read_c_api, for a copy written elsewhere: the ckpt/sys/ headers are in it already, so their
    includes (which would look for them beside the copy) go."""
    return re.sub(r'^#include "ckpt/sys/[\w.]+"\n', "", text, flags=re.M)


def check(header_path, binding_path):
    header = read_c_api(header_path)
    binding = read_binding(binding_path)
    extension_headers = read_extension_headers(header_path)
    apis, found = problems(header, binding, EXEMPT, extension_headers)
    for line in found:
        print(f"FAIL: {line}", file=sys.stderr)
    if found:
        return 1
    parts = len([rel for rel in binding if rel.startswith("ckpt/cpp/") and rel not in EXTENSIONS])
    print(f"ok: all {len(apis['ckpt.h'])} CKPT_API functions of {header_path} are called by ckpt.hpp and the {parts} "
          f"parts it includes" + (f" ({len(EXEMPT)} exempt)" if EXEMPT else ""))
    for rel, ext in sorted(EXTENSIONS.items()):
        if rel in extension_headers:
            print(f"ok: all {len(apis[ext['header']])} {ext['macro']} functions of {ext['header']} are called by {rel}")
        else:
            print(f"note: {ext['header']} is not installed beside ckpt.h (a build without {ext['library']}): "
                  f"{rel} is not checked")
    for name, reason in sorted(EXEMPT.items()):
        print(f"  exempt: {name}: {reason}")
    return 0


def grow(header, declaration):
    """The header with one more declaration before its closing extern "C" brace."""
    return header.replace("#ifdef __cplusplus\n}", declaration + "\n#ifdef __cplusplus\n}", 1)


def self_test(header_path, binding_path):
    header = read_c_api(header_path)
    binding = read_binding(binding_path)
    extension_headers = read_extension_headers(header_path)
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    def named(found):
        return [p.split(":")[0] for p in found]

    apis, found = problems(header, binding, EXEMPT, extension_headers)
    expect("the installed headers", found, [])
    api = apis["ckpt.h"]
    expect("the parts are read", "ckpt/cpp/reader.hpp" in binding, True)
    expect("ckpt_vars_free is found in the header", "ckpt_vars_free" in api, True)
    expect("the CKPT_API macro definition is not a function", [n for n in api if not n.startswith("ckpt_")], [])
    expect("the exempt ckpt_error_set is a function of the header", "ckpt_error_set" in api, True)

    # Calls made only in a part count: ckpt.hpp alone calls none of the functions.
    _, found = problems(header, {"ckpt/ckpt.hpp": binding["ckpt/ckpt.hpp"]}, EXEMPT)
    expect("ckpt.hpp alone misses ckpt_reader_metadata_key", "ckpt_reader_metadata_key" in named(found), True)

    # One more function in the C API, declared the way ckpt.h declares them, and one mentioned only in a comment.
    grown = grow(header, "/* ckpt_in_a_comment_only(void) */\nCKPT_API int ckpt_future_function(ckpt_vars *vars,\n"
                         "                                    size_t i);")
    expect("the header edit applied", grown != header, True)
    _, found = problems(grown, binding, EXEMPT, extension_headers)
    expect("a new function", named(found), ["ckpt_future_function"])

    # A part that stops calling a function, leaving the name only in a comment and a string.
    shrunk = dict(binding)
    part = "ckpt/cpp/reader.hpp"
    shrunk[part] = re.sub(r"\bckpt_reader_metadata_key\s*\(", "ckpt_reader_metadata_value(", binding[part])
    expect("the part edit applied", shrunk[part] != binding[part], True)
    shrunk[part] += '\n// ckpt_reader_metadata_key(npz, i)\nstatic const char* s = "ckpt_reader_metadata_key(";\n'
    _, found = problems(header, shrunk, EXEMPT, extension_headers)
    expect("a dropped call", named(found), ["ckpt_reader_metadata_key"])

    # A part ckpt.hpp does not include: its calls reach no user of <ckpt/ckpt.hpp>.
    orphaned = dict(binding)
    orphaned["ckpt/ckpt.hpp"] = re.sub(r"^#include <ckpt/cpp/step\.hpp>\n", "", binding["ckpt/ckpt.hpp"],
                                       flags=re.MULTILINE)
    expect("the include edit applied", orphaned["ckpt/ckpt.hpp"] != binding["ckpt/ckpt.hpp"], True)
    _, found = problems(header, orphaned, EXEMPT, extension_headers)
    expect("a part left out", named(found), ["ckpt/cpp/step.hpp"])

    # A function declared under an earlier name too (CKPT_SAME_AS) is asked for once, by its name; its earlier name, of
    # the part that holds it to the function's type.
    renamed = grow(header, "CKPT_API int ckpt_old_name(ckpt_vars *vars) CKPT_SAME_AS(ckpt_future_function);\n"
                           "CKPT_API int ckpt_future_function(ckpt_vars *vars);")
    _, found = problems(renamed, binding, EXEMPT, extension_headers)
    expect("an earlier name", sorted(named(found)), ["ckpt_future_function", "ckpt_old_name"])
    with_part = dict(binding)
    with_part[EARLIER_PART] = binding.get(EARLIER_PART, "") + "\nstatic_assert(sizeof(&ckpt_old_name) > 0);\n"
    _, found = problems(renamed, with_part, EXEMPT, extension_headers)
    expect("an earlier name held by the part", named(found), ["ckpt_future_function"])

    # Stale exemptions are refused too.
    _, found = problems(header, binding, {**EXEMPT, "ckpt_vars_new": "x", "ckpt_gone": "y"}, extension_headers)
    expect("stale exemptions", sorted(named(found)), ["ckpt_gone", "ckpt_vars_new"])
    # An exemption covers what the binding does not call.
    _, found = problems(grown, binding, {**EXEMPT, "ckpt_future_function": "reason"}, extension_headers)
    expect("an exemption", found, [])
    # Without its exemption, ckpt_error_set is reported like any other function.
    _, found = problems(header, binding, {}, extension_headers)
    expect("ckpt_error_set unexempted", named(found), ["ckpt_error_set"])

    with tempfile.TemporaryDirectory() as tmp:
        h = os.path.join(tmp, "ckpt.h")
        with open(h, "w", encoding="utf-8") as f:
            f.write(without_sys_includes(grown))
        with contextlib.redirect_stderr(io.StringIO()) as err:
            rc = check(h, binding_path)
        expect("the command fails for a grown header", rc, 1)
        expect("and names the function",
               "ckpt_future_function: the C++ binding never calls it" in err.getvalue(), True)

    # The extensions: their functions, their parts, and ckpt.hpp leaving them out.
    for rel, ext in sorted(EXTENSIONS.items()):
        if rel not in extension_headers:
            print(f"note: {ext['header']} is not installed beside ckpt.h: the checks of {rel} are not tested")
            continue
        ext_header = extension_headers[rel]
        ext_api = apis.get(ext["header"], [])
        expect(f"{ext['header']} has functions", len(ext_api) > 0, True)
        expect(f"{rel} is read", rel in binding, True)
        expect(f"ckpt.hpp does not include {rel}", rel in included_parts(binding), False)

        # A function added to the extension's header.
        grown_ext = grow(ext_header, f"{ext['macro']} int ckpt_future_extension(ckpt_storage **out,\n"
                                     "                                   const char *url);")
        expect(f"the {ext['header']} edit applied", grown_ext != ext_header, True)
        _, found = problems(header, binding, EXEMPT, {**extension_headers, rel: grown_ext})
        expect(f"a new function of {ext['header']}", found,
               [f"ckpt_future_extension: {rel} never calls it (wrap it, or add it to EXEMPT with the reason)"])
        # ... declared CKPT_API rather than with the extension's macro, it is not one of the extension's.
        _, found = problems(header, binding, EXEMPT,
                            {**extension_headers, rel: grow(ext_header, "CKPT_API int ckpt_not_extension(void);")})
        expect(f"a CKPT_API declaration in {ext['header']}", found, [])

        # The part stops calling one of them.
        dropped = ext_api[-1]
        shrunk = dict(binding)
        shrunk[rel] = re.sub(r"\b" + dropped + r"\s*\(", "ckpt_storage_free(", binding[rel])
        expect(f"the {rel} edit applied", shrunk[rel] != binding[rel], True)
        _, found = problems(header, shrunk, EXEMPT, extension_headers)
        expect(f"a call dropped from {rel}", named(found), [dropped])

        # A ckpt.h function called only in the extension's part does not reach users of ckpt.hpp.
        moved = dict(binding)
        moved["ckpt/cpp/reader.hpp"] = re.sub(r"\bckpt_reader_metadata_key\s*\(", "ckpt_reader_metadata_value(",
                                           binding["ckpt/cpp/reader.hpp"])
        moved[rel] = binding[rel] + "\ninline void f(ckpt_reader* n) { ckpt_reader_metadata_key(n, 0); }\n"
        _, found = problems(header, moved, EXEMPT, extension_headers)
        expect(f"a ckpt.h call made only in {rel}", named(found), ["ckpt_reader_metadata_key"])

        # ckpt.hpp including the part would make every program link the extension's library.
        including = dict(binding)
        including["ckpt/ckpt.hpp"] = binding["ckpt/ckpt.hpp"].replace(
            "#include <ckpt/cpp/manager.hpp>\n", f"#include <ckpt/cpp/manager.hpp>\n#include <{rel}>\n")
        expect("the ckpt.hpp edit applied", including["ckpt/ckpt.hpp"] != binding["ckpt/ckpt.hpp"], True)
        _, found = problems(header, including, EXEMPT, extension_headers)
        expect(f"{rel} included by ckpt.hpp", named(found), [rel])
        expect(f"and the message names {ext['library']}", ext["library"] in " ".join(found), True)

        # The header is installed but the part is not.
        missing = {k: v for k, v in binding.items() if k != rel}
        _, found = problems(header, missing, EXEMPT, extension_headers)
        expect(f"{rel} missing", named(found), [rel])
        # Neither is installed (a build without the library): nothing to check.
        _, found = problems(header, missing, EXEMPT, {})
        expect(f"{rel} and {ext['header']} both absent", found, [])

        with tempfile.TemporaryDirectory() as tmp:
            h = os.path.join(tmp, "ckpt.h")
            with open(h, "w", encoding="utf-8") as f:
                f.write(without_sys_includes(header))
            with open(os.path.join(tmp, ext["header"]), "w", encoding="utf-8") as f:
                f.write(grown_ext)
            with contextlib.redirect_stderr(io.StringIO()) as err:
                rc = check(h, binding_path)
            expect(f"the command fails for a grown {ext['header']}", rc, 1)
            expect("and names the function", f"ckpt_future_extension: {rel} never calls it" in err.getvalue(), True)

    for line in failures:
        print(f"FAIL: {line}", file=sys.stderr)
    if failures:
        return 1
    print("ok: the completeness check reads every part, and notices a new function, a dropped call, a part left out "
          "and stale exemptions" + (", and the same of " + ", ".join(sorted(extension_headers)) +
                                    " and ckpt.hpp including it" if extension_headers else ""))
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
