# SPDX-License-Identifier: Apache-2.0
"""Every failure is a ckpt.CkptError subclass (docs/python.md, Errors), also the Python exception a handler would
name for it."""
import errno
import os
import subprocess
import sys

import numpy as np
import pytest

import ckpt
from ckpt import errors


def test_saving_an_object_array_is_an_UnsupportedError_and_a_TypeError(tmp_path):
    with pytest.raises(ckpt.UnsupportedError) as e:
        ckpt.save(tmp_path / "o.npz", {"o": np.array([None], dtype=object)})
    assert isinstance(e.value, TypeError) and isinstance(e.value, ckpt.CkptError)
    assert e.value.code == errors.EUNSUPPORTED
    assert e.value.message == "ckpt stores no arrays of dtype object (object, structured and datetime arrays are " \
                              "not stored)"
    assert not os.listdir(tmp_path)


def test_a_name_that_is_not_a_str_is_an_InvalidArgumentError_and_a_TypeError(tmp_path):
    arrays = {"w": np.zeros(2), 7: np.ones(3)}  # after one the compiled fast path takes: the Python path refuses it
    with pytest.raises(ckpt.InvalidArgumentError) as e:
        ckpt.save(tmp_path / "k.npz", arrays)
    assert isinstance(e.value, TypeError) and e.value.code == errors.EINVAL
    assert e.value.message == "an array's name must be a str, not int (7)"
    assert str(e.value) == "an array's name must be a str, not int (7) (invalid argument, -2)"
    assert not os.listdir(tmp_path)


def test_bad_options_are_InvalidArgumentErrors(tmp_path):
    with pytest.raises(ckpt.InvalidArgumentError, match="compression must be 'store' or 'deflate', not 'zstd'"):
        ckpt.save(tmp_path / "c.npz", {}, compression="zstd")
    with pytest.raises(ckpt.InvalidArgumentError, match="renamer must be a callable") as e:
        ckpt.restore(tmp_path / "c.npz", {}, renamer=3)
    assert isinstance(e.value, TypeError)
    with pytest.raises(ckpt.InvalidArgumentError, match="is not one of bfloat16"):
        ckpt.typed(np.zeros(2, np.uint16), "bfloat17")


@pytest.mark.parametrize("call", [
    lambda p: ckpt.load(p),
    lambda p: ckpt.restore(p, {"w": np.zeros(2)}),
    lambda p: ckpt.open(p),
    lambda p: ckpt.Step(p),
], ids=["load", "restore", "open", "Step"])
def test_a_missing_file_is_a_FileNotFoundError_with_errno_and_filename(tmp_path, call):
    path = tmp_path / "missing.npz"
    with pytest.raises(FileNotFoundError) as e:
        call(path)
    assert isinstance(e.value, ckpt.NotFoundError) and e.value.code == errors.ENOTFOUND
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == str(path)
    assert str(path) in e.value.message


def test_a_missing_variable_is_a_NotFoundError_without_a_filename():
    # Not a missing file: errno and filename stay None, as on a FileNotFoundError nobody gave them to.
    err = errors.error_for(errors.ENOTFOUND, "no variable 'w'")
    assert isinstance(err, ckpt.NotFoundError) and err.errno is None and err.filename is None


def test_the_errors_module_needs_nothing_else_of_the_package():
    # Loaded alone, from its file: it imports no other module of ckpt (none is there to import).
    code = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("lone_errors", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
assert not [n for n in sys.modules if n == "ckpt" or n.startswith("ckpt.")], sorted(sys.modules)
e = m.error_for(m.EFORMAT, "bad.npz: truncated")
assert isinstance(e, m.FormatError) and isinstance(e, ValueError)
print(str(e))
"""
    out = subprocess.run([sys.executable, "-c", code, errors.__file__], capture_output=True, text=True, check=True)
    assert out.stdout == "bad.npz: truncated (ckpt error -4, -4)\n"


def test_loaded_the_errors_name_the_code_as_the_library_does():
    for code in range(errors.ERROR, errors.EBUFS - 1, -1):
        assert errors.strerror(code) == ckpt._native.lib.ckpt_strerror(code).decode()
    assert str(errors.error_for(errors.EFORMAT, "x")) == "x (malformed or corrupt file, -4)"


class ReadOnlyBucket(ckpt.MemoryFiles):
    def open(self, path, mode="rb"):
        if "w" in mode:
            raise PermissionError("the bucket is read-only")
        return super().open(path, mode)


def test_a_failing_storage_callback_gives_its_own_words_to_the_error_once():
    with pytest.raises(ckpt.StorageError) as e:
        ckpt.save("a.npz", {"w": np.ones(2)}, storage=ReadOnlyBucket())
    message = e.value.message
    assert message.endswith(": storage callback 'create' failed: PermissionError: the bucket is read-only"), message
    assert message.count("the bucket is read-only") == 1
    assert isinstance(e.value.__cause__, PermissionError)
    assert str(e.value.__cause__) == "the bucket is read-only"


def test_a_storage_that_cannot_find_a_file_says_so_in_its_own_words():
    with pytest.raises(ckpt.NotFoundError) as e:
        ckpt.load("gone.npz", storage=ckpt.MemoryFiles())
    assert e.value.message == "gone.npz: storage callback 'open_read' failed: FileNotFoundError: [Errno 2] no such " \
                              "file: 'gone.npz'"
    assert e.value.filename == "gone.npz" and e.value.errno == errno.ENOENT
    assert isinstance(e.value.__cause__, FileNotFoundError)
