# SPDX-License-Identifier: Apache-2.0
"""ckpt.writing: pytorch-pfn-extras' writers with torch.save as the savefun, atomic and durable, errors never lost."""
import io
import os
import threading

import numpy as np
import pytest

import ckpt
from ckpt import writing

torch = pytest.importorskip("torch")

WRITERS = [writing.SimpleWriter, writing.ThreadWriter, writing.ThreadQueueWriter]


def state(step):
    return {"model": {"w": torch.full((3,), float(step))}, "step": step}


@pytest.mark.parametrize("kind", WRITERS)
def test_torch_save_as_the_savefun_and_torch_load_of_the_result(tmp_path, kind):
    w = kind(out_dir=str(tmp_path))
    for step in (1, 2, 3):
        w("snapshot_%d.pt" % step, "ignored", state(step))  # the writer's out_dir takes precedence, as in ppe
    w.finalize()
    w.finalize()  # idempotent
    for step in (1, 2, 3):
        back = torch.load(str(tmp_path / ("snapshot_%d.pt" % step)))
        assert back["step"] == step and torch.equal(back["model"]["w"], torch.full((3,), float(step)))
    assert sorted(os.listdir(tmp_path)) == ["snapshot_1.pt", "snapshot_2.pt", "snapshot_3.pt"]


@pytest.mark.parametrize("kind", WRITERS[1:])
def test_background_writers_save_the_target_as_it_was_at_the_call(tmp_path, kind):
    gate = threading.Event()

    def slow_save(target, f):
        gate.wait(5)
        torch.save(target, f)

    live = {"w": torch.zeros(4)}
    w = kind(savefun=slow_save, out_dir=str(tmp_path))
    w("s.pt", "", live)
    live["w"] += 1  # training goes on while the save waits
    gate.set()
    w.finalize()
    assert torch.equal(torch.load(str(tmp_path / "s.pt"))["w"], torch.zeros(4))


@pytest.mark.parametrize("kind", WRITERS)
def test_a_failing_savefun_leaves_the_target_untouched(tmp_path, kind):
    target = tmp_path / "s.pt"
    torch.save({"old": 1}, str(target))

    def broken(obj, f):
        f.write(b"partial bytes")
        raise RuntimeError("disk quota of the mind")

    w = kind(savefun=broken, out_dir=str(tmp_path))
    if kind is writing.SimpleWriter:
        with pytest.raises(RuntimeError, match="disk quota"):
            w("s.pt", "", {})
    else:
        w("s.pt", "", {})
        with pytest.raises(ckpt.CkptError) as e:
            w.finalize()
        assert isinstance(e.value.__cause__, RuntimeError)
    assert torch.load(str(target)) == {"old": 1}
    assert sorted(os.listdir(tmp_path)) == ["s.pt"]  # no temporary left


@pytest.mark.parametrize("kind", WRITERS[1:])
def test_a_background_error_is_raised_by_the_next_call_exactly_once(tmp_path, kind):
    calls = []

    def flaky(obj, f):
        calls.append(obj)
        if obj == "bad":
            raise ValueError("bad target")
        torch.save(obj, f)

    w = kind(savefun=flaky, out_dir=str(tmp_path))
    w("a.pt", "", "bad")
    with pytest.raises(ckpt.CkptError) as e:
        w.wait()
    assert isinstance(e.value.__cause__, ValueError)
    w("b.pt", "", "good")
    w.finalize()  # the error was raised once; nothing more to report
    assert torch.load(str(tmp_path / "b.pt")) == "good" and not (tmp_path / "a.pt").exists()


def test_save_npz_as_the_savefun_writes_what_numpy_reads(tmp_path):
    w = writing.SimpleWriter(savefun=writing.save_npz, out_dir=str(tmp_path))
    w("arrays.npz", "", {"w": np.arange(3.0)})
    with np.load(tmp_path / "arrays.npz") as data:
        assert data["w"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("kind", ["SimpleWriter", "ThreadWriter", "ThreadQueueWriter"])
def test_save_npz_of_a_source_in_a_background_writer(tmp_path, kind):
    a = np.arange(3 << 20, dtype=np.float32)
    raw = a.tobytes()
    w = getattr(writing, kind)(savefun=writing.save_npz, out_dir=str(tmp_path))
    w("src.npz", "", {"w": ckpt.Source(np.float32, a.shape, lambda offset, size: raw[offset:offset + size])})
    w.finalize()
    with np.load(tmp_path / "src.npz") as data:
        assert np.array_equal(data["w"], a)


class PpeStyleFs:
    """A filesystem object with the methods ppe's writers call, keeping files in memory (like an object store)."""

    def __init__(self):
        self.files, self.dirs, self.calls = {}, set(), []

    def open(self, path, mode="rb"):
        self.calls.append(("open", path, mode))
        if "r" in mode:
            if path not in self.files:
                raise FileNotFoundError(path)
            return io.BytesIO(self.files[path])
        fs = self

        class F(io.BytesIO):
            def close(self):
                if not self.closed:
                    fs.files[path] = (fs.files.get(path, b"") if "a" in mode else b"") + self.getvalue()
                super().close()
        return F()

    def makedirs(self, path, exist_ok=False):
        self.dirs.add(path)

    def exists(self, path):
        return path in self.files or path in self.dirs

    def rename(self, src, dst):
        self.calls.append(("rename", src, dst))
        self.files[dst] = self.files.pop(src)

    def remove(self, path, recursive=False):
        del self.files[path]

    def list(self, path):
        prefix = path.rstrip("/") + "/"
        return [p[len(prefix):] for p in self.files if p.startswith(prefix)]


@pytest.mark.parametrize("kind", WRITERS)
def test_a_ppe_filesystem_object_is_plugged_in_as_the_storage(kind):
    fs = PpeStyleFs()
    w = kind(fs=fs, out_dir="bucket/run1")
    w("s.pt", "", {"step": 5})
    w.finalize()
    assert torch.load(io.BytesIO(fs.files["bucket/run1/s.pt"])) == {"step": 5}
    renames = [c for c in fs.calls if c[0] == "rename"]
    assert len(renames) == 1 and renames[0][2] == "bucket/run1/s.pt"  # written aside, then renamed into place
    assert renames[0][1].startswith("bucket/run1/.s.pt.tmp-")
    assert list(fs.files) == ["bucket/run1/s.pt"]


def test_append_writes_in_place(tmp_path):
    w = writing.SimpleWriter(savefun=lambda obj, f: f.write(obj), out_dir=str(tmp_path))
    w("log.bin", "", b"one;")
    w("log.bin", "", b"two;", append=True)
    assert (tmp_path / "log.bin").read_bytes() == b"one;two;"


def test_a_finalized_writer_refuses_saves(tmp_path):
    w = writing.ThreadWriter(out_dir=str(tmp_path))
    w.finalize()
    with pytest.raises(ckpt.InvalidArgumentError, match="finalized"):
        w("s.pt", "", {})


def test_the_names_ppe_users_import_exist():
    for name in ["Writer", "SimpleWriter", "ThreadWriter", "ThreadQueueWriter", "StandardWriter", "QueueWriter",
                 "ProcessWriter", "ProcessQueueWriter"]:
        assert isinstance(getattr(writing, name), type)


@pytest.mark.parametrize("kind", WRITERS)
def test_save_arrays_writes_npz_through_the_writer_with_its_own_copy(tmp_path, kind):
    live = {"w": np.arange(4.0), "b": ckpt.typed(np.array([0x3f80], np.uint16), "bfloat16")}
    w = kind(out_dir=str(tmp_path))
    w.save_arrays("a.npz", "", live, metadata={"step": "3"})
    live["w"][:] = -1  # a background writer copied the arrays before save_arrays returned
    w.finalize()
    back = ckpt.load(tmp_path / "a.npz")
    assert back["w"].tolist() == [0, 1, 2, 3] and back["b"].ckpt_dtype == "bfloat16"
    assert back.metadata == {"step": "3"}


def failing_savefun(obj, f):
    raise ValueError("disk quota")


@pytest.mark.parametrize("kind", WRITERS[1:])
@pytest.mark.parametrize("reported_by", ["wait", "finalize"])
def test_a_failing_background_savefun_is_raised_in_its_own_words_with_its_exception_as_the_cause(tmp_path, kind,
                                                                                                reported_by):
    w = kind(savefun=failing_savefun, out_dir=str(tmp_path))
    w("x.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        getattr(w, reported_by)()
    assert str(e.value) == ("%s: the save function failed: ValueError: disk quota (unexpected internal failure, -1)"
                            % (tmp_path / "x.pt"))
    assert type(e.value.__cause__) is ValueError and e.value.__cause__.args == ("disk quota",)


@pytest.mark.parametrize("kind", WRITERS[1:])
def test_a_call_that_reports_an_earlier_failure_does_not_start_its_own_save(tmp_path, kind):
    calls = []

    def fail_on_bad(obj, f):
        calls.append(obj)
        if obj == "bad":
            raise ValueError("disk quota")
        torch.save(obj, f)

    w = kind(savefun=fail_on_bad, out_dir=str(tmp_path))
    w("a.pt", "", "bad")
    with pytest.raises(ckpt.CkptError) as e:
        w("b.pt", "", "good")  # with one save in flight at most, this call first waits for a.pt's
    assert str(e.value) == ("%s: the save function failed: ValueError: disk quota; the save of %s was not started "
                            "(unexpected internal failure, -1)" % (tmp_path / "a.pt", tmp_path / "b.pt"))
    assert isinstance(e.value.__cause__, ValueError)
    w.wait()
    assert calls == ["bad"] and os.listdir(tmp_path) == []
    w("b.pt", "", "good")  # asked again, it is saved
    w.finalize()
    assert torch.load(str(tmp_path / "b.pt")) == "good"


def test_a_savefun_failing_with_a_ckpt_error_is_named_without_its_code_twice(tmp_path):
    def nested(obj, f):
        ckpt.load(tmp_path / "missing.npz")

    w = writing.ThreadWriter(savefun=nested, out_dir=str(tmp_path))
    w("x.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        w.finalize()
    assert isinstance(e.value.__cause__, ckpt.NotFoundError)
    assert str(e.value).count("(not found, -3)") == 1, str(e.value)
    assert str(e.value).startswith("%s: the save function failed: NotFoundError: " % (tmp_path / "x.pt"))


def test_a_savefun_exception_without_text_is_named_by_its_type(tmp_path):
    def bare(obj, f):
        raise KeyError

    w = writing.ThreadQueueWriter(savefun=bare, out_dir=str(tmp_path))
    w("x.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        w.wait()
    assert str(e.value) == "%s: the save function failed: KeyError (unexpected internal failure, -1)" % (
        tmp_path / "x.pt")


@pytest.mark.parametrize("kind", WRITERS)
def test_a_with_block_finalizes_the_writer(tmp_path, kind):
    with kind(out_dir=str(tmp_path)) as w:
        w("s.pt", "", {"step": 1})
    assert torch.load(str(tmp_path / "s.pt")) == {"step": 1}
    with pytest.raises(ckpt.InvalidArgumentError, match="finalized"):
        w("t.pt", "", {})
