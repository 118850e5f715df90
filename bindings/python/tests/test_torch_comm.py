# SPDX-License-Identifier: Apache-2.0
"""ckpt.TorchComm: real torch.distributed jobs over gloo (2 and 4 processes started with torchrun's environment)
that save and restore sharded steps, and fail the same way on every rank. Each job is bounded in time: a rank
that hangs fails the test."""
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("torch") is None:
    pytest.skip("torch is not installed", allow_module_level=True)

here = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(here, "torch_ranks.py")
DOCS = os.path.join(here, "..", "..", "..", "docs", "distributed.md")
JOB_SECONDS = 120  # a whole job, imports included, on a loaded machine


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(world, argv, cwd):
    """Starts `world` ranks of `argv` with torchrun's environment and waits for all of them (killing every one
    when the job outlives JOB_SECONDS); returns their outputs."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
    if not os.environ.get("CKPT_TEST_INSTALLED"):  # the package of this tree, as conftest.py takes it
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(os.path.join(here, ".."))] +
                                            [p for p in [os.environ.get("PYTHONPATH")] if p])
    procs = [subprocess.Popen([sys.executable] + argv, cwd=cwd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(world)]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=JOB_SECONDS)[0].decode("utf-8", "replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        pytest.fail("a job of %d ranks did not end within %d s" % (world, JOB_SECONDS))
    for r, p in enumerate(procs):
        assert p.returncode == 0, "rank %d of %d exited with %d:\n%s" % (r, world, p.returncode, outputs[r])
    return outputs


def job(directory, world, *scenarios):
    run_job(world, [RANKS, str(directory)] + list(scenarios), str(directory))
    results = []
    for r in range(world):
        with open(os.path.join(str(directory), "result-%d-%d.json" % (world, r))) as f:
            results.append(json.load(f))
    return results


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """A job of 2 ranks saves step 2, one of 4 saves step 4 and restores both, then one of 2 restores both; each
    also makes a rank fail."""
    d = tmp_path_factory.mktemp("torch")
    two = job(d, 2, "save", "storage_fails", "rows_past_end")
    four = job(d, 4, "save", "restore", "storage_fails", "rows_past_end")
    two_again = job(d, 2, "restore")
    return {"dir": d, 2: two, 4: four, "2 again": two_again}


def test_a_torch_comm_has_the_rank_and_size_of_the_process_group(jobs):
    assert [r["comm"] for r in jobs[2]] == [[0, 2], [1, 2]]
    assert [r["comm"] for r in jobs[4]] == [[r, 4] for r in range(4)]


def test_ranks_over_gloo_save_a_sharded_step_with_row_split_variables(jobs):
    assert [r["list"] for r in jobs[2]] == [[2], [2]]
    step = ckpt_step(jobs["dir"], 2)
    assert np.array_equal(step["emb"], np.arange(30, dtype=np.float32).reshape(10, 3) * 2)
    assert np.array_equal(step["own_1"], [1, 1])


def ckpt_step(d, idx):
    import ckpt
    with ckpt.Step(str(d / "run" / "ckpt" / ("%010d" % idx))) as step:
        return {name: step[name] for name in step}


def test_every_rank_restores_its_rows_of_a_step_saved_by_the_same_or_another_number_of_ranks(jobs):
    for results in (jobs[4], jobs["2 again"]):
        for r in results:
            assert sorted(r["restored"]) == ["2", "4"]
            assert r["restored"] == r["expected"]


def test_a_rank_that_cannot_write_its_shard_fails_the_save_on_every_rank_with_its_code_and_message(jobs):
    for world in (2, 4):
        failures = [r["storage_fails"] for r in jobs[world]]
        assert {f["code"] for f in failures} == {-5}  # CKPT_EIO, from rank 1's storage
        assert len({f["message"] for f in failures}) == 1
        message = failures[0]["message"]
        assert "sharded save of step 1 failed on 1 rank: rank 1 of %d: " % world in message
        assert "storage callback 'create' failed: PermissionError: [Errno 13] Permission denied" in message
        assert [f["cause"] for f in failures] == [None, "PermissionError"] + [None] * (world - 2)
        assert [r["storage_fails_list"] for r in jobs[world]] == [[]] * world


def test_a_rank_whose_rows_run_past_the_global_end_fails_every_rank_with_invalid_argument(jobs):
    for world in (2, 4):
        for key, what in (("rows_past_end", "save"), ("restore_rows_past_end", "restore")):
            failures = [r[key] for r in jobs[world]]
            assert {f["code"] for f in failures} == {-2}
            assert len({f["message"] for f in failures}) == 1
            assert re.search(r": sharded %s failed on rank 1 of %d: variable 'emb': rows \[\d+, \d+ \+ \d+\) are not "
                             r"within \[0, 10\)" % (what, world), failures[0]["message"]), failures[0]["message"]


def docs_example():
    text = open(DOCS).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    examples = [b for b in blocks if "ckpt.TorchComm" in b]
    assert len(examples) == 1, "docs/distributed.md should have one Python example with ckpt.TorchComm"
    return examples[0]


def test_the_ddp_example_of_the_docs_runs_on_two_ranks(tmp_path):
    import ckpt
    (tmp_path / "example.py").write_text(docs_example())
    outputs = run_job(2, [str(tmp_path / "example.py")], str(tmp_path))
    assert "started from step 0, saved up to step 4" in outputs[0]
    assert sorted(os.listdir(str(tmp_path / "runs" / "exp1" / "ckpt"))) == [".ckpt.lock", "0000000002", "0000000004"]
    with ckpt.Step(str(tmp_path / "runs" / "exp1" / "ckpt" / "0000000004")) as step:
        assert step.world_size == 2
        assert np.array_equal(step["emb"], np.full((10, 4), 4, np.float32))
        assert step["step"] == 4
