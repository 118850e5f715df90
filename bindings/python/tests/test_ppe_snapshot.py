# SPDX-License-Identifier: Apache-2.0
"""pytorch-pfn-extras' snapshot extension driving ckpt's writers (``extensions.snapshot(writer=w, n_retains=N,
autoload=True)``). ppe is not installed here: ``Snapshot`` below makes, in the same order, the calls ppe 0.9's
extension makes on a writer — ``writer.initialize(out)``, ``writer.fs.list(out_dir, recursive=True)`` and
``writer.fs.stat(path).last_modified`` to find snapshots by the filename template's prefix and suffix,
``writer.fs.open(path, "rb")`` and ``torch.load`` to autoload the newest, ``writer._add_cleanup_hook(fn)`` with
``fn`` removing all but the newest ``n_retains`` through ``writer.fs.remove`` (a directory, recursively, for
sharded snapshots), ``writer(filename, out, state, savefun=None)`` for each snapshot and ``writer.finalize()``."""
import os
import threading
import time

import numpy as np
import pytest

import ckpt
from ckpt import filesystem, writing

torch = pytest.importorskip("torch")

EVERY_WRITER = [writing.SimpleWriter, writing.ThreadWriter, writing.ThreadQueueWriter, writing.ProcessWriter,
                writing.ProcessQueueWriter]


class Trainer:
    """The part of ppe's ExtensionsManager the extension uses: ``iteration``, ``out`` (the writer's out_dir)."""

    def __init__(self, writer, iteration=0):
        self.writer, self.iteration = writer, iteration
        writer.initialize(self.out)  # as ppe's manager does when it is created

    @property
    def out(self):
        return self.writer.out_dir


class Snapshot:
    """The calls ppe's _Snapshot extension makes on its writer (see the module's documentation)."""

    def __init__(self, writer, target, filename="snapshot_iter_{.iteration}", n_retains=-1, autoload=False,
                 remove_dirs=False):
        self.writer, self.target, self.filename = writer, target, filename
        self.n_retains, self.autoload, self.remove_dirs = n_retains, autoload, remove_dirs

    def snapshots(self):
        """(last_modified, name) of every file matching the template under out_dir, oldest first."""
        fs, out = self.writer.fs, self.writer.out_dir
        head, tail = self.filename.split("{")[0], self.filename.split("}")[-1]
        names = [n for n in fs.list(out, recursive=True) if n.startswith(head) and n.endswith(tail)]
        return sorted((fs.stat(os.path.join(out, n)).last_modified, n) for n in names)

    def initialize(self, trainer):
        loaded = None
        if self.autoload:
            found = self.snapshots()
            if found:
                loaded = found[-1][1]
                f = self.writer.fs.open(os.path.join(self.writer.out_dir, loaded), "rb")
                state = torch.load(f, map_location=torch.device("cpu"))
                f.close()
                if type(self.target) is dict:
                    for k in self.target:
                        self.target[k].load_state_dict(state[k])
                else:
                    self.target.load_state_dict(state)
        if hasattr(self.writer, "_add_cleanup_hook") and self.n_retains > 0:
            self.writer._add_cleanup_hook(self.cleanup)
        return loaded

    def cleanup(self):
        stale = self.snapshots()[:-self.n_retains]
        for _, name in stale:
            path = os.path.join(self.writer.out_dir, name)
            if self.remove_dirs:
                self.writer.fs.remove(os.path.dirname(path), recursive=True)
            else:
                self.writer.fs.remove(path)

    def __call__(self, trainer):
        if type(self.target) is dict:
            state = {k: v.state_dict() for k, v in self.target.items()}
        else:
            state = self.target.state_dict()
        self.writer(self.filename.format(trainer), trainer.out, state, savefun=None)

    def finalize(self):
        self.writer.finalize()


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 2)


def train(kind, out_dir, iterations, n_retains=-1, autoload=True, start=0):
    """Runs a trainer whose model changes at each iteration, snapshotting it; returns (loaded, model)."""
    net = model(seed=100 + start)
    writer = kind(out_dir=str(out_dir))
    trainer = Trainer(writer, start)
    ext = Snapshot(writer, {"model": net}, n_retains=n_retains, autoload=autoload)
    loaded = ext.initialize(trainer)
    for it in iterations:
        trainer.iteration = it
        with torch.no_grad():
            net.weight.fill_(float(it))
        ext(trainer)
        writer.wait()
    ext.finalize()
    return loaded, net


@pytest.mark.parametrize("kind", EVERY_WRITER, ids=lambda k: k.__name__)
def test_autoload_after_a_restart_loads_the_newest_snapshot(tmp_path, kind):
    loaded, _ = train(kind, tmp_path, [1, 2, 3])
    assert loaded is None  # nothing to load at the first start
    assert sorted(os.listdir(tmp_path)) == ["snapshot_iter_1", "snapshot_iter_2", "snapshot_iter_3"]
    # The restarted process: a new writer and model; autoload finds iteration 3 by last_modified and loads it.
    net = model(seed=7)
    writer = kind(out_dir=str(tmp_path))
    assert isinstance(writer.fs, filesystem.LocalFileSystem)
    ext = Snapshot(writer, {"model": net}, autoload=True)
    assert ext.initialize(Trainer(writer)) == "snapshot_iter_3"
    assert torch.equal(net.weight, torch.full((2, 3), 3.0))
    writer.finalize()


@pytest.mark.parametrize("kind", EVERY_WRITER, ids=lambda k: k.__name__)
def test_n_retains_keeps_the_newest_snapshots_after_each_save(tmp_path, kind):
    net = model(seed=1)
    writer = kind(out_dir=str(tmp_path))
    trainer = Trainer(writer)
    ext = Snapshot(writer, {"model": net}, n_retains=2)
    ext.initialize(trainer)
    for it in range(1, 6):
        trainer.iteration = it
        ext(trainer)
        writer.wait()  # the hook ran after the save, before wait returned
        expected = ["snapshot_iter_%d" % i for i in range(max(1, it - 1), it + 1)]
        assert sorted(os.listdir(tmp_path)) == expected
    ext.finalize()
    assert torch.load(str(tmp_path / "snapshot_iter_5"))["model"]["weight"].shape == (2, 3)


@pytest.mark.parametrize("kind", EVERY_WRITER, ids=lambda k: k.__name__)
def test_cleanup_hooks_run_after_the_file_is_in_place_in_the_writers_thread(tmp_path, kind):
    seen = []
    writer = kind(out_dir=str(tmp_path))
    writer._add_cleanup_hook(lambda: seen.append((sorted(os.listdir(tmp_path)), threading.current_thread())))
    writer("a", "", {"x": 1})
    writer("b", "", {"x": 2})
    writer.finalize()
    assert [names for names, _ in seen] == [["a"], ["a", "b"]]  # each hook saw its save's file under its name
    threads = {t for _, t in seen}
    if kind is writing.SimpleWriter:
        assert threads == {threading.main_thread()}
    else:
        assert len(threads) == 1 and threading.main_thread() not in threads


@pytest.mark.parametrize("kind", EVERY_WRITER[1:], ids=lambda k: k.__name__)
def test_a_failing_hook_is_a_background_error_with_its_exception_as_the_cause(tmp_path, kind):
    writer = kind(out_dir=str(tmp_path))

    def broken():
        raise PermissionError("read-only bucket")

    writer._add_cleanup_hook(broken)
    writer("a", "", {"x": 1})
    with pytest.raises(ckpt.CkptError) as e:
        writer.finalize()
    assert str(e.value) == ("%s: a cleanup hook failed after the save: PermissionError: read-only bucket "
                            "(unexpected internal failure, -1)" % (tmp_path / "a"))
    assert type(e.value.__cause__) is PermissionError
    assert torch.load(str(tmp_path / "a")) == {"x": 1}  # the save itself is done


def test_a_failing_savefun_runs_no_hook(tmp_path):
    ran = []
    writer = writing.ThreadWriter(savefun=lambda target, f: 1 / 0, out_dir=str(tmp_path))
    writer._add_cleanup_hook(lambda: ran.append(1))
    writer("a", "", {})
    with pytest.raises(ckpt.CkptError):
        writer.finalize()
    assert ran == []


def test_snapshot_object_autoloads_a_module_and_keeps_n_retains(tmp_path):
    """ppe's snapshot_object(target, filename, ...): the target's own state_dict, not a dict of them."""
    for start, its in ((0, [1, 2]), (2, [3, 4, 5])):
        net = model(seed=start)
        writer = writing.ThreadQueueWriter(out_dir=str(tmp_path))
        trainer = Trainer(writer, start)
        ext = Snapshot(writer, net, filename="model_{.iteration}.pt", n_retains=2, autoload=True)
        loaded = ext.initialize(trainer)
        if start:
            assert loaded == "model_2.pt" and torch.equal(net.weight, torch.full((2, 3), 2.0))
        for it in its:
            trainer.iteration = it
            with torch.no_grad():
                net.weight.fill_(float(it))
            ext(trainer)
        ext.finalize()
    assert sorted(os.listdir(tmp_path)) == ["model_4.pt", "model_5.pt"]


@pytest.mark.parametrize("kind", [writing.SimpleWriter, writing.ThreadQueueWriter], ids=lambda k: k.__name__)
def test_sharded_snapshot_calls_marker_files_and_recursive_removal(tmp_path, kind):
    """ppe's sharded snapshot: files "<template>/<rank>", a "complete" marker per directory (checked with
    fs.exists, removed with fs.remove before a save), and stale directories removed recursively."""
    net = model(seed=3)
    writer = kind(out_dir=str(tmp_path))
    trainer = Trainer(writer)
    ext = Snapshot(writer, {"model": net}, filename=os.path.join("snapshot_iter_{.iteration}", "0"), n_retains=1,
                   remove_dirs=True)
    ext.initialize(trainer)
    for it in (1, 2):
        trainer.iteration = it
        complete = os.path.join(writer.out_dir, "snapshot_iter_%d" % it, "complete")
        if writer.fs.exists(complete):
            writer.fs.remove(complete)
        ext(trainer)
        writer(os.path.join("snapshot_iter_%d" % it, "complete"), "", dict(), savefun=None)
        writer.wait()
        assert writer.fs.exists(complete)
    writer.finalize()
    assert sorted(writer.fs.list(str(tmp_path), recursive=True)) == [
        "snapshot_iter_2", os.path.join("snapshot_iter_2", "0"), os.path.join("snapshot_iter_2", "complete")]


def test_the_default_fs_has_pfios_interface(tmp_path):
    fs = writing.SimpleWriter().fs
    assert isinstance(fs, filesystem.LocalFileSystem)
    d = str(tmp_path / "d")
    fs.makedirs(os.path.join(d, "sub"), exist_ok=False)
    fs.makedirs(os.path.join(d, "sub"), exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs(os.path.join(d, "sub"))
    fs.mkdir(os.path.join(d, "other"))
    with fs.open(os.path.join(d, "sub", "f"), "wb") as f:
        f.write(b"12345")
    assert sorted(fs.list(d)) == ["other", "sub"]
    assert sorted(fs.list(d, recursive=True)) == ["other", "sub", os.path.join("sub", "f")]
    st = fs.stat(os.path.join(d, "sub", "f"))
    assert st.size == 5 and st.filename == os.path.join(d, "sub", "f")
    assert st.last_modified == os.stat(os.path.join(d, "sub", "f")).st_mtime
    assert fs.isdir(d) and not fs.isdir(os.path.join(d, "sub", "f")) and fs.exists(os.path.join(d, "sub", "f"))
    fs.rename(os.path.join(d, "sub", "f"), os.path.join(d, "g"))
    assert fs.open(os.path.join(d, "g"), "rb").read() == b"12345"
    fs.remove(os.path.join(d, "other"))  # an empty directory
    with pytest.raises(OSError):
        fs.remove(os.path.join(d, "sub", "missing"))
    fs.remove(d, recursive=True)
    assert not fs.exists(d)
    with filesystem.LocalFileSystem(root=str(tmp_path)) as rooted:
        with rooted.open("r.txt", "w") as f:
            f.write("x")
        assert rooted.exists("r.txt") and (tmp_path / "r.txt").read_text() == "x"


def test_a_writer_given_an_fs_object_exposes_it():
    mem = ckpt.MemoryFiles()
    assert writing.ThreadWriter(fs=mem).fs is mem
    assert writing.SimpleWriter(fs=ckpt.Storage(mem)).fs is mem


def test_a_writer_over_a_storage_in_c_gets_an_fs_that_lists_stats_reads_and_removes_there():
    """ckpt's memory storage stands for any storage in C (S3Storage and s3:// out dirs are tested in test_s3.py):
    ppe's retention and autoload run through writer.fs on it."""
    memory = ckpt.NativeMemory()
    for kind in (writing.SimpleWriter, writing.ThreadWriter):
        net = model(seed=1)
        writer = kind(fs=memory, out_dir="run")
        assert isinstance(writer.fs, filesystem.StorageFiles)
        ext = Snapshot(writer, {"model": net}, n_retains=2, autoload=True)
        ext.initialize(Trainer(writer))
        for it in (1, 2, 3):
            with torch.no_grad():
                net.weight.fill_(float(it))
            ext(Trainer(writer, it))
            writer.wait()
        assert sorted(writer.fs.list("run", recursive=True)) == ["snapshot_iter_2", "snapshot_iter_3"]
        st = writer.fs.stat("run/snapshot_iter_3")
        assert st.size > 0 and abs(st.last_modified - time.time()) < 60
        ext.finalize()
    restarted = writing.ThreadWriter(fs=memory, out_dir="run")
    net = model(seed=7)
    assert Snapshot(restarted, {"model": net}, autoload=True).initialize(Trainer(restarted)) == "snapshot_iter_3"
    assert net.weight.flatten().tolist() == [3.0] * 6
    with restarted.fs.open("run/snapshot_iter_3") as text:  # text mode reads too (the bytes are torch's zip)
        assert text.buffer.read(2) == b"PK"
    with pytest.raises(ckpt.UnsupportedError, match="run/x: cannot open \\(mode 'w'\\) a file of"):
        restarted.fs.open("run/x", "w")
    restarted.fs.makedirs("run/a/b")
    assert sorted(restarted.fs.list("run", recursive=True)) == ["a", "a/b", "snapshot_iter_2", "snapshot_iter_3"]
    restarted.fs.remove("run", recursive=True)
    assert not restarted.fs.exists("run") and not restarted.fs.isdir("run")
    restarted.finalize()


def test_an_s3_out_dir_has_an_fs_of_the_bucket():
    w = writing.SimpleWriter(out_dir="s3://bucket/run")
    assert isinstance(w.fs, filesystem.StorageFiles) and w.fs.storage is None and w.fs.where == "s3://bucket/run"
    w.fs.makedirs("s3://bucket/run", exist_ok=True)  # nothing to create on an object store
    w.finalize()


def test_a_library_without_file_calls_says_what_the_fs_needs(monkeypatch):
    monkeypatch.setattr(ckpt._native, "VERSION", (0, 7, 0))
    fs = filesystem.StorageFiles("s3://bucket/run")
    with pytest.raises(ckpt.UnsupportedError) as e:
        list(fs.list("s3://bucket/run"))
    assert e.value.message == "StorageFiles.list needs libckpt 0.8.0 or newer (this one is 0.7.0)"


def test_ppes_queue_writer_building_blocks(tmp_path):
    w = writing.ThreadQueueWriter(out_dir=str(tmp_path))
    q = w.create_queue()
    consumer = w.create_consumer(q)
    consumer.start()
    task = w.create_task(None)
    q.put((task, "a", "", {"x": 1}, None, False))
    q.put((task, "b", "", {"x": 2}, None, False))
    q.put(None)
    q.join()
    consumer.join()
    assert torch.load(str(tmp_path / "a")) == {"x": 1} and torch.load(str(tmp_path / "b")) == {"x": 2}
    w.finalize()


@pytest.mark.parametrize("kind", [writing.ThreadWriter, writing.ProcessWriter], ids=lambda k: k.__name__)
def test_ppes_create_worker_saves_when_started(tmp_path, kind):
    w = kind(out_dir=str(tmp_path))
    ran = []
    w._add_cleanup_hook(lambda: ran.append(os.listdir(tmp_path)))
    worker = w.create_worker("a", "", {"x": 1})
    worker.start()
    worker.join()
    assert worker.exitcode == 0 and worker.error is None and ran == [["a"]]
    assert torch.load(str(tmp_path / "a")) == {"x": 1}
    bad = w.create_worker("b", "", {"o": object()}, savefun=writing.save_npz)  # not an array
    bad.start()
    bad.join()
    w.finalize()
    assert bad.exitcode == -1 and bad.error is not None and not (tmp_path / "b").exists()


@pytest.mark.parametrize("kind", EVERY_WRITER[:3], ids=lambda k: k.__name__)
def test_hooks_after_save_arrays_read_the_saved_values_and_run_in_ckpts_writer_thread(tmp_path, kind):
    """save_arrays snapshots the arrays in C (no deep copy) and its save runs on ckpt's own background writer: the
    hook, run from ckpt's after_save callback, reads each file complete, with the values of its call."""
    seen = []
    writer = kind(out_dir=str(tmp_path))

    def hook():
        newest = max(os.listdir(tmp_path))
        seen.append((newest, ckpt.load(tmp_path / newest)["w"].tolist(), threading.current_thread().name))

    writer._add_cleanup_hook(hook)
    live = np.zeros(3)
    for step in (1, 2):
        live[:] = step
        writer.save_arrays("%d.npz" % step, "", {"w": live})
        live[:] = -1  # what training does next; a background save copied the arrays already
    writer.finalize()
    assert [(name, values) for name, values, _ in seen] == [("1.npz", [1.0] * 3), ("2.npz", [2.0] * 3)]
    threads = {thread for _, _, thread in seen}
    if kind is writing.SimpleWriter:
        assert threads == {threading.main_thread().name}
    else:
        assert len(threads) == 1 and threading.main_thread().name not in threads


def test_a_library_without_after_save_refuses_cleanup_hooks_and_still_saves(tmp_path, monkeypatch):
    monkeypatch.setattr(ckpt._native, "VERSION", (0, 6, 0))
    writer = writing.ThreadWriter(out_dir=str(tmp_path))
    with pytest.raises(ckpt.UnsupportedError) as e:
        writer._add_cleanup_hook(lambda: None)
    assert e.value.message == "Writer._add_cleanup_hook needs libckpt 0.7.0 or newer (this one is 0.6.0)"
    writer("a", "", {"x": 1})
    writer.finalize()
    assert torch.load(str(tmp_path / "a")) == {"x": 1}
