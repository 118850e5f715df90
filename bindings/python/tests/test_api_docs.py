# SPDX-License-Identifier: Apache-2.0
"""The package's public API is documented and typed as a Python user expects: every public function, class, method
and property reachable from ``ckpt.__all__`` has a docstring, docs/python-api.md lists them all as the package has
them now, and the package ships ``py.typed`` so type checkers read the hints of its modules."""
import inspect
import os
import sys

import ckpt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import api_reference  # noqa: E402  (bindings/python/api_reference.py, which writes docs/python-api.md)

# Public methods and functions that still lack a docstring, by qualified name. Each entry is one to document; the
# list only ever shrinks (a stale entry fails the test too).
UNDOCUMENTED = set()


def public_api():
    """(qualified name, object) of everything public (api_reference.public_api: ckpt.__all__, the public members of
    the modules it names, and the public methods and properties of every class among them)."""
    return api_reference.public_api(ckpt)


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


def test_the_api_reference_page_is_current():
    with open(api_reference.PAGE) as f:
        page = f.read()
    assert page == api_reference.render(ckpt), \
        "docs/python-api.md is not current: run python3 bindings/python/api_reference.py"
    for entry in ("### `ckpt.load(file, layout='auto', progress=None, storage=None, format='auto', tensors='numpy', "
                  "only=None, **limits)`", "### class `ckpt.Manager(logdir, keep=10,", "#### `Reader.read_range(name, "
                  "start, count)`", "### `writing.save_npz(target, file, **kwargs)`"):
        assert entry in page, entry
