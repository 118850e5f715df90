# SPDX-License-Identifier: Apache-2.0
"""Leftovers of killed saves: a writer's next save of a name removes what a SIGKILLed save of that name left — but
never the temporary of a save that is still running, in another process — and `ckpt clean` finds the temporaries of
every kind of save, a writer's non-npz files included, and nothing that is not ckpt's."""
import glob
import os
import signal
import subprocess
import sys

from cli_run import child_env, run, run_json

# A writer's save of NAME into DIR whose savefun writes part of the file, says so, and then waits for a line on stdin
# (a save in progress, to be killed or let finish).
SLOW_SAVE = """if True:
    import sys
    from ckpt.writing import SimpleWriter
    def savefun(target, f):
        f.write(b"x" * (1 << 20))
        print("writing", flush=True)
        sys.stdin.readline()
        f.write(target)
    w = SimpleWriter()
    w.save(sys.argv[2], sys.argv[1], b"done", savefun=savefun)
    w.finalize()
    print("saved", flush=True)
"""

SAVE = """if True:
    import sys
    from ckpt.writing import SimpleWriter
    w = SimpleWriter()
    w.save(sys.argv[2], sys.argv[1], b"new", savefun=lambda t, f: f.write(t))
    w.finalize()
"""


def start_slow_save(directory, name):
    p = subprocess.Popen([sys.executable, "-c", SLOW_SAVE, str(directory), name], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=child_env())
    assert p.stdout.readline() == b"writing\n"
    return p


def killed_save(directory, name):
    """A save of `name` killed with SIGKILL mid-write: returns the temporary it left."""
    before = set(glob.glob(str(directory / (".%s.tmp-*" % name))))
    p = start_slow_save(directory, name)
    p.kill()
    assert p.wait(timeout=60) == -signal.SIGKILL
    left = set(glob.glob(str(directory / (".%s.tmp-*" % name)))) - before
    assert len(left) == 1, left
    return left.pop()


def save(directory, name):
    p = subprocess.run([sys.executable, "-c", SAVE, str(directory), name], capture_output=True, text=True,
                       env=child_env(), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_next_save_of_a_name_removes_what_killed_saves_left_but_not_a_live_saves_temporary(tmp_path):
    for name in ("progress.txt", "model.npz"):
        stale = [killed_save(tmp_path, name), killed_save(tmp_path, name)]
        other = killed_save(tmp_path, "other.txt")  # another name's: not this save's to remove
        live = start_slow_save(tmp_path, name)  # another process saving the same name right now
        try:
            live_temp = set(glob.glob(str(tmp_path / (".%s.tmp-*" % name)))) - set(stale)
            assert len(live_temp) == 1
            save(tmp_path, name)
            assert (tmp_path / name).read_bytes() == b"new"
            assert not any(os.path.exists(t) for t in stale), stale
            assert os.path.exists(other) and all(os.path.exists(t) for t in live_temp)
            live.stdin.write(b"go\n")
            live.stdin.flush()
            assert live.stdout.readline() == b"saved\n"  # the live save was left alone and finished
        finally:
            live.kill()
            live.wait(timeout=60)
        assert (tmp_path / name).read_bytes() == b"x" * (1 << 20) + b"done"
        assert glob.glob(str(tmp_path / (".%s.tmp-*" % name))) == []
        os.remove(other)


def test_clean_finds_every_kind_of_save_temporary_and_keeps_live_ones_and_other_programs_files(tmp_path):
    progress = killed_save(tmp_path, "progress.txt")
    model = killed_save(tmp_path, "model.npz")
    foreign = tmp_path / ".notes.tmp-abcdef"  # another program's file, named in the same fashion
    foreign.write_text("not ckpt's")
    live = start_slow_save(tmp_path, "metrics.json")
    try:
        live_temp = glob.glob(str(tmp_path / ".metrics.json.tmp-*"))
        found = run_json("clean", tmp_path, "--dry-run")["found"]
        assert sorted(f["path"] for f in found) == sorted([progress, model])
        p = run("clean", tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("%s: removed 2 stale temporaries left by interrupted saves:\n" % tmp_path)
        assert not os.path.exists(progress) and not os.path.exists(model)
        assert foreign.read_text() == "not ckpt's" and all(os.path.exists(t) for t in live_temp)
        live.stdin.write(b"go\n")
        live.stdin.flush()
        assert live.stdout.readline() == b"saved\n"
    finally:
        live.kill()
        live.wait(timeout=60)
    assert (tmp_path / "metrics.json").read_bytes().endswith(b"done")
