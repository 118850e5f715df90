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
    assert e.value.message == "'o': ckpt stores no arrays of dtype object (object, structured and datetime arrays " \
                              "are not stored); the value is a numpy array of dtype object"
    assert not os.listdir(tmp_path)


def test_a_key_that_is_neither_str_nor_int_is_an_InvalidArgumentError_and_a_TypeError(tmp_path):
    arrays = {"w": np.zeros(2), 7.5: np.ones(3)}  # an int key is nested state's (tests/test_nested.py)
    with pytest.raises(ckpt.InvalidArgumentError) as e:
        ckpt.save(tmp_path / "k.npz", arrays)
    assert isinstance(e.value, TypeError) and e.value.code == errors.EINVAL
    assert e.value.message == "the root has the key 7.5 (a float): nested state takes str and int keys"
    assert str(e.value) == e.value.message + " (invalid argument, -2)"
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


def test_a_storage_callback_refused_permission_is_a_PermissionError():
    with pytest.raises(PermissionError) as e:
        ckpt.save("a.npz", {"w": np.ones(2)}, storage=ReadOnlyBucket())
    assert isinstance(e.value, ckpt.StorageError) and e.value.code == errors.EIO
    assert e.value.filename == "a.npz"


SAVE_AS_ANOTHER_ROOT = """
import json, sys
import numpy as np
import ckpt
try:
    ckpt.save(sys.argv[1], {"w": np.ones(2)})
except BaseException as e:
    print(json.dumps({"types": [c.__name__ for c in type(e).__mro__], "errno": e.errno, "strerror": e.strerror,
                      "filename": e.filename, "message": e.message}))
"""


def test_a_refused_permission_on_disk_is_a_PermissionError_with_errno_filename_and_strerror(tmp_path):
    """Run as root without CAP_DAC_OVERRIDE (setpriv), so that a read-only directory refuses the save."""
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"):
        pytest.skip("needs root and setpriv to drop the capability that overrides file permissions")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    env = dict(os.environ)
    if not env.get("CKPT_TEST_INSTALLED"):
        env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search",
                           "--inh-caps=-dac_override,-dac_read_search", sys.executable, "-c", SAVE_AS_ANOTHER_ROOT,
                           str(locked / "m.npz")], capture_output=True, text=True, env=env)
    if done.returncode != 0 and "setpriv" in done.stderr:
        pytest.skip("setpriv cannot drop capabilities here: %s" % done.stderr.strip())
    assert done.returncode == 0, done.stderr
    import json
    report = json.loads(done.stdout)
    assert "PermissionError" in report["types"] and "StorageError" in report["types"], report
    assert report["errno"] == errno.EACCES and report["strerror"] == os.strerror(errno.EACCES), report
    assert report["filename"] == str(locked / "m.npz"), report
    assert report["message"].startswith(str(locked / "m.npz") + ": "), report
    assert os.listdir(locked) == []


def test_a_storage_error_without_os_words_has_no_errno():
    err = errors.error_for(errors.EIO, "run/m.npz: the bucket went away")
    assert type(err) is ckpt.StorageError and err.errno is None and err.strerror is None
    assert err.filename == "run/m.npz"
    err = errors.error_for(errors.EIO, "run/m.npz: run/.m.npz.tmp-1: write: No space left on device")
    assert err.errno == errno.ENOSPC and err.strerror == "No space left on device" and err.filename == "run/m.npz"


class Var:
    def __init__(self, value):
        self.value = value

    def assign(self, value):
        self.value = value


@pytest.mark.parametrize("call, words", [
    (lambda ck, vc: ck.save(vc, 3.0), "idx must be an int, not float (3.0)"),
    (lambda ck, vc: ck.save(vc, "3"), "idx must be an int, not str ('3')"),
    (lambda ck, vc: ck.restore(vc, idx=1.0), "idx must be an int, not float (1.0)"),
    (lambda ck, vc: ck._manager.path(1.0), "idx must be an int, not float (1.0)"),
    (lambda ck, vc: ck._manager.metric(1, 3), "name must be a str, not int (3)"),
    (lambda ck, vc: ck._manager.metric(1.5, "loss"), "idx must be an int, not float (1.5)"),
    (lambda ck, vc: ck._manager.read(idx=True), "idx must be an int, not bool (True)"),
    (lambda ck, vc: ck._manager.should_save(2.0), "step must be an int, not float (2.0)"),
], ids=["save", "save-str", "restore", "path", "metric-name", "metric-idx", "read", "should_save"])
def test_an_argument_of_the_wrong_type_is_a_TypeError_naming_it(tmp_path, call, words):
    vc = {"w": Var(np.zeros(2))}
    with ckpt.Checkpoint(str(tmp_path), keep_ckpts=2, verbose=False) as ck:
        ck.save(vc, 1)
        with pytest.raises(TypeError) as e:
            call(ck, vc)
        assert isinstance(e.value, ckpt.ArgumentTypeError) and e.value.message == words
        assert ck._manager.list() == [1]
    assert ckpt.Manager(str(tmp_path)).path(np.int64(1)).endswith("0000000001.npz")  # numpy integers are ints


@pytest.mark.parametrize("value, found", [
    (object(), "the value is an object"),
    (lambda: 0, "the value is a function"),
], ids=["object", "function"])  # a dict, list, tuple or None is nested state (tests/test_nested.py)
def test_a_value_that_is_no_array_is_named_by_its_key_and_what_it_is(tmp_path, value, found):
    with pytest.raises(ckpt.UnsupportedDtypeError) as e:
        ckpt.save(tmp_path / "n.npz", {"w": np.zeros(2), "opt": value})
    assert e.value.message == "'opt': ckpt stores no arrays of dtype object (object, structured and datetime " \
                              "arrays are not stored); " + found
    assert isinstance(e.value, TypeError) and not os.listdir(tmp_path)


def test_best_is_None_without_a_best_metric(tmp_path):
    with ckpt.Manager(str(tmp_path)) as m:
        m.save({"w": np.zeros(2)}, 1, metrics={"loss": 0.5})
        assert m.best() is None
    with ckpt.Manager(str(tmp_path), best_metric="loss") as m:
        assert m.best() == 1


def test_an_old_library_without_file_size_is_an_UnsupportedError(tmp_path, monkeypatch):
    ckpt.save(tmp_path / "a.npz", {"w": np.zeros(2)})

    class Old:
        def __getattr__(self, name):
            if name == "ckpt_reader_file_size":
                raise AttributeError(name)
            return getattr(ckpt._native.lib, name)

    with ckpt.open(tmp_path / "a.npz") as f:
        monkeypatch.setattr(ckpt.npz, "lib", Old())
        with pytest.raises(ckpt.UnsupportedError) as e:
            f.file_size
        assert e.value.code == errors.EUNSUPPORTED and e.value.message.startswith("Reader.file_size needs libckpt")
