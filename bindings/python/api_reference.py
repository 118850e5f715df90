# SPDX-License-Identifier: Apache-2.0
"""The Python package's API reference, docs/python-api.md, written from the package's own docstrings and signatures.

    python3 bindings/python/api_reference.py            # writes docs/python-api.md
    python3 bindings/python/api_reference.py --check    # exits 1 when docs/python-api.md is not what it would write

Run with the package importable (PYTHONPATH=bindings/python and CKPT_LIBRARY, as the tests run). Every public
function, class, method and property reachable from ``ckpt.__all__`` is listed with its arguments and defaults
(tests/test_api_docs.py checks each has a docstring, and that the page is current)."""
import inspect
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "docs", "python-api.md")


def _defined_in_package(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == "ckpt" or module.startswith("ckpt.")


def public_members(cls):
    """(qualified name, object) of the public methods and properties `cls` itself defines (or inherits from a ckpt
    class), not those of numpy, dict or Exception."""
    seen = set()
    for klass in cls.__mro__:
        if not _defined_in_package(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                seen.add(name)
                yield "%s.%s" % (cls.__qualname__, name), value


def public_api(ckpt):
    """(qualified name, object) of everything public, in the order of ckpt.__all__: its functions and classes, the
    public members of the modules it names, and the public methods and properties of every class among them."""
    seen = set()
    items = []

    def visit(qualname, obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        items.append((qualname, obj))
        if inspect.isclass(obj):
            for member_name, member in public_members(obj):
                items.append((member_name, member))

    for name in ckpt.__all__:
        obj = getattr(ckpt, name)
        if isinstance(obj, types.ModuleType):
            names = getattr(obj, "__all__", None) or [n for n in vars(obj) if not n.startswith("_")]
            for member_name in names:
                member = getattr(obj, member_name)
                if (inspect.isclass(member) or inspect.isfunction(member)) and _defined_in_package(member):
                    visit("%s.%s" % (obj.__name__.split(".")[-1], member_name), member)
        else:
            visit(name, obj)
    return items


def _default(value, module):
    """A default as the page shows it: its repr, or the name of the module constant it is (a sentinel object)."""
    text = repr(value)
    if " at 0x" in text:
        for name, candidate in vars(module).items():
            if candidate is value and not name.startswith("_"):
                return name
        return "..."
    return text


def signature(obj):
    """'(a, b=1, *, c=None, **limits)': the arguments and defaults, without annotations or self."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    module = sys.modules.get(getattr(obj, "__module__", "") or "", None)
    parts = []
    star = False
    for i, p in enumerate(sig.parameters.values()):
        if i == 0 and p.name in ("self", "cls"):
            continue
        if p.kind == p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
        elif p.kind == p.VAR_KEYWORD:
            parts.append("**" + p.name)
        else:
            if p.kind == p.KEYWORD_ONLY and not star:
                parts.append("*")
                star = True
            parts.append(p.name if p.default is p.empty else "%s=%s" % (p.name, _default(p.default, module)))
    return "(" + ", ".join(parts) + ")"


def render(ckpt):
    out = ["# Python API reference", "",
           "Every public function, class, method and property of the `ckpt` package, with its arguments and defaults, "
           "as its docstrings say. Written by `bindings/python/api_reference.py` from the package itself; "
           "`tests/test_api_docs.py` fails when this page is not what it would write. The guide to the package is "
           "[python.md](python.md).", ""]
    for qualname, obj in public_api(ckpt):
        doc = (inspect.getdoc(obj) or "").strip()
        if isinstance(obj, property):
            head = "`%s` (property)" % qualname
        elif inspect.isclass(obj):
            head = "class `ckpt.%s%s`" % (qualname, signature(obj))
        else:
            head = "`%s%s`" % (qualname if "." in qualname else "ckpt." + qualname, signature(obj))
        level = "####" if "." in qualname and not (inspect.isclass(obj) or _is_module_function(qualname, ckpt)) \
            else "###"
        out += ["%s %s" % (level, head), ""]
        if doc:
            out += ["    " + line if line else "" for line in doc.splitlines()] + [""]
    return "\n".join(out).rstrip() + "\n"


def _is_module_function(qualname, ckpt):
    """Whether `qualname` ("writing.save_npz") names a function of a module ckpt.__all__ lists, not a method."""
    first = qualname.split(".")[0]
    return isinstance(getattr(ckpt, first, None), types.ModuleType)


def main(argv):
    import ckpt
    text = render(ckpt)
    if "--check" in argv:
        try:
            with open(PAGE) as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            print("docs/python-api.md is not current: run python3 bindings/python/api_reference.py", file=sys.stderr)
            return 1
        return 0
    with open(PAGE, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
