# SPDX-License-Identifier: Apache-2.0
"""ckpt.writing's process writers: the savefun runs in a spawned worker process, and the file is still atomic and
durable, whatever happens to that process; its errors reach the caller with the worker's own exception.

The savefuns are defined at the top of this module: the worker imports them by name."""
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import ckpt
from ckpt import writing

torch = pytest.importorskip("torch")

PROCESS_WRITERS = [writing.ProcessWriter, writing.ProcessQueueWriter]


def save_with_pid(target, f):
    torch.save({"pid": os.getpid(), "target": target}, f)


def save_then_fail(target, f):
    f.write(b"half a checkpoint")
    raise ValueError("disk quota")


class TwoArgumentError(Exception):
    """Pickles, but does not unpickle: pickle calls it again with the one argument its message became."""

    def __init__(self, what, why):
        super().__init__("%s/%s" % (what, why))


def fail_unpicklably(target, f):
    raise TwoArgumentError("shard 3", "lost")


def write_then_hang(target, f):
    """Writes part of the file, says so (with its pid) in the file named by target, then waits to be killed."""
    f.write(b"x" * 4096)
    f.flush()  # the bytes reach the writer, which has them in the temporary file
    with open(target + ".tmp", "w") as marker:
        marker.write(str(os.getpid()))
    os.rename(target + ".tmp", target)
    time.sleep(120)


def log_order(target, f):
    log, n = target
    with open(log, "a") as out:
        out.write("%d %d\n" % (n, os.getpid()))
    torch.save(n, f)


def state(step):
    return {"model": {"w": torch.full((3,), float(step))}, "step": step}


def kill_mid_save(w, tmp_path):
    """Starts a save of s.pt that hangs after its first bytes, and SIGKILLs the worker process then."""
    marker = str(tmp_path / "pid")
    w("s.pt", "", marker, savefun=write_then_hang)
    deadline = time.monotonic() + 60
    while not os.path.exists(marker):
        assert time.monotonic() < deadline, "the worker never reached its savefun"
        time.sleep(0.02)
    pid = int(open(marker).read())
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.parametrize("kind", PROCESS_WRITERS)
def test_torch_save_in_the_worker_writes_what_torch_load_reads(tmp_path, kind):
    out = tmp_path / "out"
    w = kind(out_dir=str(out))
    for step in (1, 2, 3):
        w("snapshot_%d.pt" % step, "ignored", state(step))  # the writer's out_dir takes precedence, as in ppe
    w.finalize()
    for step in (1, 2, 3):
        back = torch.load(str(out / ("snapshot_%d.pt" % step)))
        assert back["step"] == step and torch.equal(back["model"]["w"], torch.full((3,), float(step)))
    assert sorted(os.listdir(out)) == ["snapshot_1.pt", "snapshot_2.pt", "snapshot_3.pt"]


@pytest.mark.parametrize("kind", [writing.ProcessWriter])
def test_the_savefun_runs_in_another_process(tmp_path, kind):
    with kind(savefun=save_with_pid, out_dir=str(tmp_path)) as w:
        w("s.pt", "", "payload")
    back = torch.load(str(tmp_path / "s.pt"))
    assert back["target"] == "payload" and back["pid"] != os.getpid()


@pytest.mark.parametrize("kind", [writing.ProcessQueueWriter])
def test_the_target_is_saved_as_it_was_at_the_call(tmp_path, kind):
    live = {"w": torch.zeros(4)}
    with kind(out_dir=str(tmp_path)) as w:
        w("s.pt", "", live)
        live["w"] += 1  # training goes on while the worker saves
    assert torch.equal(torch.load(str(tmp_path / "s.pt"))["w"], torch.zeros(4))


@pytest.mark.parametrize("kind", PROCESS_WRITERS)
def test_a_savefun_failing_in_the_worker_raises_its_type_and_message_with_its_exception_as_the_cause(tmp_path,
                                                                                                     kind):
    torch.save({"old": 1}, str(tmp_path / "s.pt"))
    w = kind(savefun=save_then_fail, out_dir=str(tmp_path))
    w("s.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        w.wait()
    assert str(e.value) == ("%s: the save function failed: ValueError: disk quota (unexpected internal failure, -1)"
                            % (tmp_path / "s.pt"))
    cause = e.value.__cause__
    assert type(cause) is ValueError and cause.args == ("disk quota",)
    assert any('raise ValueError("disk quota")' in note for note in getattr(cause, "__notes__", [""]))
    assert torch.load(str(tmp_path / "s.pt")) == {"old": 1}
    assert os.listdir(tmp_path) == ["s.pt"]
    w.finalize()  # reported once


@pytest.mark.parametrize("kind", [writing.ProcessWriter])
def test_an_exception_that_cannot_be_unpickled_arrives_as_a_runtime_error_with_the_worker_traceback(tmp_path, kind):
    w = kind(savefun=fail_unpicklably, out_dir=str(tmp_path))
    w("s.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        w.finalize()
    assert "the save function failed: TwoArgumentError: shard 3/lost (" in str(e.value)
    cause = e.value.__cause__
    assert type(cause) is RuntimeError
    assert "Traceback (most recent call last)" in str(cause) and "TwoArgumentError: shard 3/lost" in str(cause)
    assert not (tmp_path / "s.pt").exists()


@pytest.mark.parametrize("kind, reported_by", [(writing.ProcessWriter, "wait"), (writing.ProcessWriter, "finalize"),
                                                (writing.ProcessQueueWriter, "wait"),
                                                (writing.ProcessQueueWriter, "the next call")])
def test_a_worker_killed_mid_save_leaves_the_previous_file_and_is_reported_as_an_error(tmp_path, kind, reported_by):
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"old": 1}, str(out / "s.pt"))
    w = kind(out_dir=str(out))
    pid = kill_mid_save(w, tmp_path)
    with pytest.raises(ckpt.CkptError) as e:
        if reported_by == "wait":
            w.wait()
        elif reported_by == "finalize":
            w.finalize()
        else:
            w("t.pt", "", {"new": 2})
    assert isinstance(e.value.__cause__, ChildProcessError)
    assert ("the save function failed: ChildProcessError: ckpt's save process (pid %d) was killed by SIGKILL before "
            "the save was complete" % pid) in str(e.value)
    if reported_by == "the next call":
        assert str(e.value).endswith("; the save of %s was not started (unexpected internal failure, -1)"
                                     % (out / "t.pt"))
    assert torch.load(str(out / "s.pt")) == {"old": 1}
    assert os.listdir(out) == ["s.pt"]  # no temporary, no t.pt
    w.finalize()


@pytest.mark.parametrize("kind", PROCESS_WRITERS)
def test_after_a_killed_worker_the_next_save_runs_in_a_new_one(tmp_path, kind):
    w = kind(savefun=save_with_pid, out_dir=str(tmp_path / "out"))
    killed = kill_mid_save(w, tmp_path)
    with pytest.raises(ckpt.CkptError):
        w.wait()
    w("s.pt", "", "again")
    w.finalize()
    back = torch.load(str(tmp_path / "out" / "s.pt"))
    assert back["target"] == "again" and back["pid"] not in (killed, os.getpid())


@pytest.mark.parametrize("kind", PROCESS_WRITERS)
def test_a_call_that_reports_an_earlier_failure_does_not_start_its_own_save(tmp_path, kind):
    w = kind(savefun=save_then_fail, out_dir=str(tmp_path))
    w("a.pt", "", {})
    with pytest.raises(ckpt.CkptError) as e:
        w("b.pt", "", {}, savefun=save_with_pid)  # it first waits for the failed save: one at a time
    assert str(e.value).endswith("; the save of %s was not started (unexpected internal failure, -1)"
                                 % (tmp_path / "b.pt"))
    assert not (tmp_path / "b.pt").exists()
    assert isinstance(e.value.__cause__, ValueError)
    w.finalize()


@pytest.mark.parametrize("kind", [writing.ProcessWriter])
def test_a_savefun_that_cannot_be_pickled_is_refused_at_the_call(tmp_path, kind):
    with kind(savefun=lambda target, f: torch.save(target, f), out_dir=str(tmp_path)) as w:
        with pytest.raises(TypeError, match="must be picklable") as e:
            w("s.pt", "", {})
        assert isinstance(e.value.__cause__, (pickle.PicklingError, AttributeError))
    assert os.listdir(tmp_path) == []


def test_a_queue_of_saves_is_served_in_order_by_one_worker_process(tmp_path):
    log = str(tmp_path / "order.log")
    with writing.ProcessQueueWriter(savefun=log_order, out_dir=str(tmp_path / "out"), queue_depth=4) as w:
        for n in range(6):
            w("s%d.pt" % n, "", (log, n))
    lines = [line.split() for line in open(log)]
    assert [int(n) for n, _ in lines] == list(range(6))
    assert len({pid for _, pid in lines}) == 1
    assert [torch.load(str(tmp_path / "out" / ("s%d.pt" % n))) for n in range(6)] == list(range(6))


@pytest.mark.parametrize("kind", PROCESS_WRITERS)
def test_finalize_is_idempotent_and_ends_the_worker_process(tmp_path, kind):
    w = kind(savefun=save_with_pid, out_dir=str(tmp_path))
    w("s.pt", "", 1)
    w.finalize()
    w.finalize()
    pid = torch.load(str(tmp_path / "s.pt"))["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped
    with pytest.raises(ckpt.InvalidArgumentError, match="finalized"):
        w("t.pt", "", 2)


@pytest.mark.parametrize("kind", [writing.ProcessQueueWriter])
def test_a_with_block_finalizes_the_writer_and_raises_its_error(tmp_path, kind):
    with pytest.raises(ckpt.CkptError) as e:
        with kind(savefun=save_then_fail, out_dir=str(tmp_path)) as w:
            w("s.pt", "", {})
    assert isinstance(e.value.__cause__, ValueError)
    with pytest.raises(ckpt.InvalidArgumentError, match="finalized"):
        w("s.pt", "", {})


def test_a_ppe_user_script_saves_a_state_dict_with_each_writer(tmp_path):
    script = textwrap.dedent("""
        import sys
        import torch
        from ckpt.writing import ProcessWriter, ProcessQueueWriter, ThreadWriter

        if __name__ == "__main__":
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 3)
            for kind in (ProcessWriter, ProcessQueueWriter, ThreadWriter):
                writer = kind(out_dir=sys.argv[1])
                writer("%s.pt" % kind.__name__, "", model.state_dict())
                writer.finalize()
    """)
    (tmp_path / "train.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(ckpt.__file__))))
    run = subprocess.run(["/usr/bin/python3", str(tmp_path / "train.py"), str(tmp_path / "out")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    torch.manual_seed(0)
    expected = torch.nn.Linear(4, 3).state_dict()
    for name in ("ProcessWriter", "ProcessQueueWriter", "ThreadWriter"):
        back = torch.load(str(tmp_path / "out" / ("%s.pt" % name)))
        assert list(back) == ["weight", "bias"]
        assert all(torch.equal(back[k], expected[k]) for k in expected)
