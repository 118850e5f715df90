# SPDX-License-Identifier: Apache-2.0
"""Power cuts at every system call of every save path, judged (tests/crash/README.md).

    crash_test.py --shim syscall_log.so [--scenario NAME ...] [--fault FAULT:SCENARIO ...] [--keep DIR]

For each scenario: crash_driver.py prepares a directory (--setup), copies it as the state before the run, runs the
scenario under the recorder, then every state crash_states.py builds from the log is judged:

- every file reported durable (and not since released by its owner) is there, and holds that version or a version
  a later save completed: never an older one, never a partial one;
- every other file the run saved holds its old content or a complete version, if it is there at all;
- in a manager's directory: the newest checkpoint reported durable, or a newer complete one, is there; retention
  left at least as many complete checkpoints as it promised (keep, or as many as were reported); a manager opened on
  the state resumes at the newest complete checkpoint with its exact arrays, and its next save leaves no temporary.

With --fault FAULT:SCENARIO the recorder makes the process a faulty one (syscall_log.c lists the faults) and the
judge must find violations: the check of the checker. Prints one line per run; exits 1 on any violation of a
correct run, or a faulty run without one.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import crash_driver  # noqa: E402
import crash_states  # noqa: E402

import ckpt  # noqa: E402  (crash_driver put the package on the path)

sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python", "tests"))
from test_comm import run_ranks  # noqa: E402  (ranks as threads, with a communicator of their own)

CHECKPOINT = re.compile(r"^(\d+)(\.npz|\.safetensors)?$")  # a checkpoint file, or a sharded step's directory
FAULTS = {"no-file-sync": "save", "no-dir-sync": "save", "no-mkdir-sync": "manager",
          "unlink-before-sync": "manager-resume"}


def digest(data):
    return hashlib.sha256(data).hexdigest()


class Marks:
    """What the program relied on, from its marks in the order made, and the files there before the run (which
    count as reported durable before the first mark)."""

    def __init__(self, marks, initial):
        # (position, path, sha); of the files before the run, those a user saved (not locks, not temporaries)
        self.durable = [(-1, path, digest(data)) for path, data in sorted(initial.items())
                        if not os.path.basename(path).startswith(".")]
        self.released = []  # (position, path)
        self.managers = {}  # dir -> keep
        for i, text in enumerate(marks):
            kind, _, rest = text.partition(" ")
            if kind == "durable":
                path, sha = rest.rsplit(" ", 1)
                self.durable.append((i, path, sha))
            elif kind == "released":
                self.released.append((i, rest))
            elif kind == "manager":
                d, keep = rest.rsplit(" ", 1)
                self.managers[d] = int(keep)
        self._versions = {}
        for _, path, sha in self.durable:
            self._versions.setdefault(path, set()).add(sha)

    def versions(self, path):
        """The digests of every version of `path` reported complete, over the whole run."""
        return self._versions.get(path, set())


def unit(path, d):
    """The index of the checkpoint of manager directory d that path is (a file) or is in (a step's file), or None."""
    if not path.startswith(d + "/"):
        return None
    rest = path[len(d) + 1:].split("/")
    m = CHECKPOINT.match(rest[0])
    if m is None or (len(rest) == 1) != (m.group(2) is not None):
        return None
    return int(m.group(1))


def digests(state):
    """{path: digest} of a state's files."""
    return {p: digest(data) for p, data in state.items() if data is not None}


def complete_checkpoints(shas, run, d):
    """The indices of manager directory d's checkpoints that are whole in a state (`shas`, its digests): every file
    reported for one (its file, or its step's files) there in a reported version."""
    files = {}
    for _, p, _ in run.durable:
        if unit(p, d) is not None:
            files.setdefault(unit(p, d), set()).add(p)
    present = {unit(p, d) for p in shas if unit(p, d) is not None}
    return sorted(i for i in present if i in files and all(shas.get(p) in run.versions(p) for p in files[i]))


def judge(state, made, run):
    """The violations of one state: made is how many marks the program had made at the cut, run is Marks of the
    whole run."""
    problems = []
    shas = digests(state)
    paths = {p for _, p, _ in run.durable}
    for path in sorted(paths):
        present = state.get(path)
        sha = shas.get(path)
        known = run.versions(path)
        in_manager = any(unit(path, d) is not None for d in run.managers)
        before = [(i, s) for i, p, s in run.durable if p == path and i < made]
        released = any(p == path and before and i > before[-1][0] and i < made for i, p in run.released)
        if before and not released and not in_manager:
            later = {s for i, p, s in run.durable if p == path and i >= made}
            if present is None:
                problems.append("%s was reported durable and is gone" % path)
            elif sha != before[-1][1] and sha not in later:
                problems.append("%s holds %s, not the version reported durable" % (
                    path, "an earlier version" if sha in known else "a partial or unknown file (%d bytes)"
                    % len(present)))
        elif present is not None and sha not in known:
            problems.append("%s holds a partial or unknown file (%d bytes)" % (path, len(present)))
    for d, keep in run.managers.items():
        reported = sorted({unit(p, d) for i, p, _ in run.durable if unit(p, d) is not None and i < made})
        complete = complete_checkpoints(shas, run, d)
        if reported and (not complete or complete[-1] < reported[-1]):
            problems.append("%s: checkpoint %d was reported durable and neither it nor a newer one is complete "
                            "(complete: %s)" % (d, reported[-1], complete))
        if len(complete) < min(keep, len(reported)):
            problems.append("%s: %d complete checkpoints (%s) where %d were promised (keep=%d, %d reported)"
                            % (d, len(complete), complete, min(keep, len(reported)), keep, len(reported)))
    return problems


def resume(state, run, scratch):
    """A manager opened on the state resumes at the newest complete checkpoint, exactly, and its next save leaves
    no temporary. The violations."""
    problems = []
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    for path, data in sorted(state.items()):
        full = os.path.join(scratch, path)
        if data is None:
            os.makedirs(full, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
    for d, keep in run.managers.items():
        run_dir = os.path.join(scratch, os.path.dirname(d))
        complete = complete_checkpoints(digests(state), run, d)
        fmt = "safetensors" if any(p.endswith(".safetensors") for _, p, _ in run.durable) else "npz"
        steps = any(p.endswith("manifest.json") for _, p, _ in run.durable)
        expected_of = crash_driver.sharded_arrays if steps else crash_driver.arrays
        try:
            with ckpt.Manager(run_dir, keep=keep, format=fmt) as m:
                try:
                    idx, arrays = m.read()
                except ckpt.NotFoundError:
                    idx, arrays = 0, None
                want = max(complete, default=0)
                if idx != want:
                    problems.append("%s: a manager resumes at %d, not at the newest complete checkpoint %d"
                                    % (d, idx, want))
                elif arrays is not None:
                    expected = expected_of(idx)
                    if sorted(arrays) != sorted(expected) or any(
                            not np.array_equal(arrays[k], v) for k, v in expected.items()):
                        problems.append("%s: checkpoint %d resumed with other arrays than were saved" % (d, idx))
                if not steps:
                    m.save(crash_driver.arrays(idx + 1), idx + 1)
            if steps:  # the next step, by a manager over one rank (its first save cleans up too)
                nxt = crash_driver.sharded_arrays(idx + 1)

                def save(rank, comm):
                    with ckpt.Manager(run_dir, comm=comm, keep=keep) as m:
                        m.save(dict(nxt, emb=ckpt.Rows(nxt["emb"], 0, len(nxt["emb"]))), idx + 1)

                run_ranks(1, save)
            left = [n for n in os.listdir(os.path.join(scratch, d)) if ".tmp-" in n]
            if left:
                problems.append("%s: temporaries left after the resumed manager's save: %s" % (d, left))
        except ckpt.CkptError as e:
            problems.append("%s: a manager on the state fails: %s" % (d, e))
    return problems


def run_scenario(scenario, shim, work, fault=None):
    """(states judged, distinct states, crash points, clones, violations as [(crash point, problem)])."""
    root = os.path.join(work, "root")
    before = os.path.join(work, "before")
    log = os.path.join(work, "log")
    for p in (root, before):
        shutil.rmtree(p, ignore_errors=True)
    if os.path.exists(log):
        os.remove(log)
    os.makedirs(root)
    driver = [sys.executable, os.path.join(HERE, "crash_driver.py"), scenario, root]
    subprocess.run(driver + ["--setup"], check=True)
    shutil.copytree(root, before)
    env = dict(os.environ, CKPT_SYSCALL_ROOT=root, CKPT_SYSCALL_LOG=log, LD_PRELOAD=shim)
    if fault:
        env["CKPT_SYSCALL_FAULT"] = fault
    subprocess.run(driver, check=True, env=env)
    left = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names if ".tmp-" in n]
    if left:
        raise SystemExit("%s: temporaries left after the run: %s" % (scenario, left))
    records = crash_states.read_log(log)
    clones = sum(1 for r in records if r.op == "cloned")
    marks = [crash_states.unquote(r.args[0]) for r in records if r.op == "mark"]
    if not marks:
        raise SystemExit("%s: the run marked nothing: is %s preloaded?" % (scenario, shim))
    initial = {}
    for dirpath, _, files in os.walk(before):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                initial[os.path.relpath(os.path.join(dirpath, name), before)] = f.read()
    run = Marks(marks, initial)
    judged, verdicts, points, violations = 0, {}, set(), []
    scratch = os.path.join(work, "scratch")
    for index, made, state, digest in crash_states.crash_states(log, before, root):
        judged += 1
        points.add(index)
        key = (len(made), digest)
        if key not in verdicts:
            problems = judge(state, len(made), run)
            if not problems and run.managers:
                problems = resume(state, run, scratch)
            verdicts[key] = problems
        for problem in verdicts[key]:
            violations.append((index, problem))
    return judged, len(verdicts), len(points), clones, violations


def on_xfs(argv):
    """Runs this test again in a mount namespace of its own with --work on a fresh XFS image with reflink, where a
    manager's saves clone what did not change (FICLONERANGE). Exits 77 when that cannot be had here."""
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs") or not shutil.which("unshare"):
        print("skipped: an XFS image needs root, mkfs.xfs (xfsprogs) and unshare")
        return 77
    work = tempfile.mkdtemp(prefix="ckpt-crash-xfs-")
    try:
        os.makedirs(os.path.join(work, "mnt"))
        script = ('truncate -s 512m "$1/xfs.img" && mkfs.xfs -q -m reflink=1 "$1/xfs.img" >/dev/null 2>&1 && '
                  'mount -o loop "$1/xfs.img" "$1/mnt" 2>/dev/null || { echo "skipped: no XFS image here"; exit 77; }\n'
                  'shift; exec "$@"')
        inner = [sys.executable, os.path.abspath(__file__)] + argv + ["--work", os.path.join(work, "mnt", "w"),
                                                                      "--need-clones"]
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", work]
                              + inner).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--fault", action="append", metavar="FAULT[:SCENARIO]")
    parser.add_argument("--work", help="a directory for the runs (kept); default: a temporary one")
    parser.add_argument("--xfs", action="store_true", help="on an XFS image with reflink (root)")
    parser.add_argument("--need-clones", action="store_true", help="fail a manager run whose saves clone nothing")
    args = parser.parse_args()
    if args.xfs:
        return on_xfs([a for a in sys.argv[1:] if a != "--xfs"])
    scenarios = args.scenario or list(crash_driver.SCENARIOS) + (
        list(crash_driver.TOOL_SCENARIOS) if os.path.isfile(os.environ.get("CKPT_CLI", "")) else [])
    faults = args.fault if args.fault is not None else list(FAULTS)
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="ckpt-crash-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    failed = 0
    try:
        for scenario in scenarios:
            judged, distinct, points, clones, violations = run_scenario(scenario, os.path.abspath(args.shim),
                                                                        os.path.join(work, scenario))
            print("%-20s %5d crash points  %6d states  %5d distinct  %3d clones  %d violations"
                  % (scenario, points, judged, distinct, clones, len(violations)))
            for index, problem in sorted(set(violations))[:10]:
                print("    after record %d: %s" % (index, problem))
            failed += bool(violations)
            if args.need_clones and (scenario.startswith("manager") or scenario == "save-base") and clones == 0:
                print("    its saves cloned nothing: not the incremental path")
                failed += 1
        for spec in faults:
            fault, _, scenario = spec.partition(":")
            scenario = scenario or FAULTS[fault]
            judged, distinct, points, _, violations = run_scenario(scenario, os.path.abspath(args.shim),
                                                                   os.path.join(work, "fault-" + fault), fault)
            caught = bool(violations)
            print("%-20s %5d crash points  %6d states  %5d distinct  %d violations: %s" % (
                "fault " + fault, points, judged, distinct, len(violations),
                "caught (%s)" % violations[0][1] if caught else "NOT CAUGHT"))
            failed += not caught
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
