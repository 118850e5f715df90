# SPDX-License-Identifier: Apache-2.0
"""The package's public API is documented and typed as a Python user expects: every public function, class, method
and property reachable from ``ckpt.__all__`` has a docstring, and the package ships ``py.typed`` so type checkers
read the hints of its modules."""
import inspect
import os
import types

import ckpt

# Public methods and functions that still lack a docstring, by qualified name. Each entry is one to document; the
# list only ever shrinks (a stale entry fails the test too).
UNDOCUMENTED = set()


def _defined_in_package(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == "ckpt" or module.startswith("ckpt.")


def _public_members(cls):
    """(qualified name, object) of the public methods and properties `cls` itself defines (or inherits from a ckpt
    class), not those of numpy, dict or Exception."""
    for klass in cls.__mro__:
        if not _defined_in_package(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                yield "%s.%s" % (cls.__qualname__, name), value


def public_api():
    """(qualified name, object) of everything public: ckpt.__all__, the public members of the modules it names,
    and the public methods of every class among them."""
    seen = set()
    items = []

    def visit(qualname, obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        items.append((qualname, obj))
        if inspect.isclass(obj):
            for member_name, member in _public_members(obj):
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


def test_every_public_function_class_and_method_has_a_docstring():
    missing = sorted({name for name, obj in public_api() if not (inspect.getdoc(obj) or "").strip()}
                     - set(UNDOCUMENTED))
    assert not missing, "public API without a docstring: %s" % ", ".join(missing)


def test_the_list_of_undocumented_methods_names_only_undocumented_ones():
    api = dict(public_api())
    stale = sorted(n for n in UNDOCUMENTED if n not in api or (inspect.getdoc(api[n]) or "").strip())
    assert not stale, "documented now, or gone (remove from UNDOCUMENTED): %s" % ", ".join(stale)


def test_the_walk_reaches_methods_of_the_classes():
    names = dict(public_api())
    for expected in ("Reader.keys", "Reader.map", "Manager.save", "Collection.restored", "load", "errors.error_for",
                     "dtypes.view"):
        assert expected in names, expected


def test_the_package_ships_py_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(ckpt.__file__), "py.typed"))
