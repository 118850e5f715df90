#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ckpt on a real S3 server, from Python: objects that numpy and curl exchange with ckpt, and sharded steps, where
every rank writes its shard straight into the step's prefix and rank 0 commits the step by writing its manifest
last (ranks are threads, over the test communicator of the Python binding's tests). Run by ctest with the staged
library (CKPT_LIBRARY) and the package on PYTHONPATH."""
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "bindings" / "python" / "tests"))
import s3_env  # noqa: E402
import ckpt  # noqa: E402
from test_comm import run_ranks  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    try:
        with s3_env.S3Env(proxy=True, verify_sigv4=True) as env:
            saved = dict(os.environ)
            os.environ.update(env.environ)
            yield env
            os.environ.clear()
            os.environ.update(saved)
    except s3_env.Unavailable as why:
        pytest.skip(str(why))


def curl(s3, *args):
    """The curl program, signing with the test's credentials: what any other S3 client would do."""
    env = s3.environ
    return subprocess.run(["curl", "-sS", "--fail", "--aws-sigv4", "aws:amz:%s:s3" % env["AWS_REGION"],
                           "--user", "%s:%s" % (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]),
                           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"] + list(args),
                          check=True, capture_output=True)


def test_an_object_ckpt_saved_loads_in_numpy_after_a_download_and_the_reverse(s3, tmp_path):
    arrays = {"layer/w": np.arange(3 * 1024 * 1024, dtype=np.float32).reshape(1024, 3072),  # 12 MiB: multipart
              "b": np.array([1.5, -2.0]), "step": np.int64(7), "name": np.array("adam")}
    ckpt.save("s3://%s/interop/ckpt.npz" % s3.bucket, arrays)
    curl(s3, "-o", str(tmp_path / "down.npz"), "%s/%s/interop/ckpt.npz" % (s3.endpoint_url, s3.bucket))
    with np.load(tmp_path / "down.npz") as z:
        for name, a in arrays.items():
            assert np.array_equal(z[name], a) and z[name].dtype == np.asarray(a).dtype, name

    np.savez_compressed(tmp_path / "numpy.npz", **arrays)
    curl(s3, "-T", str(tmp_path / "numpy.npz"), "%s/%s/interop/numpy.npz" % (s3.endpoint_url, s3.bucket))
    got = {name: np.zeros_like(a) for name, a in arrays.items()}
    ckpt.restore("s3://%s/interop/numpy.npz" % s3.bucket, got)
    for name, a in arrays.items():
        assert np.array_equal(got[name], a), name


def keys(s3, prefix):
    """The bucket's keys under prefix, by a signed listing of the test's own (not ckpt's)."""
    out = curl(s3, "%s/%s?list-type=2&prefix=%s" % (s3.endpoint_url, s3.bucket, prefix.replace("/", "%2F"))).stdout.decode()
    return sorted(part.split("</Key>")[0] for part in out.split("<Key>")[1:])


def test_two_ranks_commit_a_step_by_its_manifest_and_one_process_restores_rows(s3):
    logdir = "s3://%s/sharded" % s3.bucket
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)

    def save(rank, comm):
        with ckpt.Manager(logdir, comm=comm, keep=2) as m:
            rows = slice(0, 4) if rank == 0 else slice(4, 10)
            for step in (1, 2, 3):
                m.save({"emb": ckpt.Rows(emb[rows] * step, rows.start, 10), "own_%d" % rank: np.full(2, rank)}, step)
            return m.list()

    s3.clear_log()
    assert run_ranks(2, save) == [[2, 3], [2, 3]]
    assert keys(s3, "sharded/ckpt/") == [
        "sharded/ckpt/0000000002/manifest.json", "sharded/ckpt/0000000002/shard-00000-of-00002.npz",
        "sharded/ckpt/0000000002/shard-00001-of-00002.npz", "sharded/ckpt/0000000003/manifest.json",
        "sharded/ckpt/0000000003/shard-00000-of-00002.npz", "sharded/ckpt/0000000003/shard-00001-of-00002.npz"]
    # Each step's manifest went up after both of its shards.
    puts = [e["path"] for e in s3.log() if e["kind"] == "put"]
    for step in ("0000000001", "0000000002", "0000000003"):
        order = [p.rsplit("/", 1)[1] for p in puts if "/%s/" % step in p]
        assert order[-1] == "manifest.json" and len(order) == 3, order
    # Any number of processes restores any rows.
    with ckpt.Manager(logdir) as m:
        part = ckpt.Rows(np.zeros((3, 3), np.float32), 3, 10)
        idx, _ = m.restore({"emb": part, "own_1": np.zeros(2, np.int64)})
        assert idx == 3 and np.array_equal(part.array, emb[3:6] * 3)
    with ckpt.Step(logdir + "/ckpt/0000000003") as step:
        assert (step.index, step.world_size) == (3, 2)
        assert np.array_equal(step["emb"], emb * 3)


def test_a_step_whose_manifest_never_went_up_is_not_a_checkpoint(s3, tmp_path):
    logdir = "s3://%s/cut" % s3.bucket
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)

    def save(rank, comm):
        with ckpt.Manager(logdir, comm=comm, keep=0) as m:
            rows = slice(0, 5) if rank == 0 else slice(5, 10)
            m.save({"emb": ckpt.Rows(emb[rows], rows.start, 10)}, 1)
            if rank == 0:  # step 2's manifest is refused: its shards are up, the step is not committed
                s3.add_fault(kind="put", action="status", status=403, s3_code="AccessDenied",
                             path_contains="0000000002/manifest.json", times=-1)
            with pytest.raises(ckpt.CkptError) as e:
                m.save({"emb": ckpt.Rows(emb[rows] * 2, rows.start, 10)}, 2)
            return str(e.value)

    messages = run_ranks(2, save)
    assert messages[0] == messages[1] and "HTTP 403 AccessDenied" in messages[0]
    s3.clear_faults()
    # The failed step's shards are gone again; step 1 is untouched.
    step1 = ["cut/ckpt/0000000001/manifest.json", "cut/ckpt/0000000001/shard-00000-of-00002.npz",
             "cut/ckpt/0000000001/shard-00001-of-00002.npz"]
    assert keys(s3, "cut/ckpt/") == step1
    # Shards without a manifest (a job killed before its commit) are no checkpoint.
    (tmp_path / "empty").write_bytes(b"")  # a file, not /dev/null: curl would stream it chunked, which RGW refuses
    curl(s3, "-T", str(tmp_path / "empty"),
         "%s/%s/cut/ckpt/0000000003/shard-00000-of-00002.npz" % (s3.endpoint_url, s3.bucket))
    with ckpt.Manager(logdir) as m:
        assert m.list() == [1]
        got = np.zeros((10, 3), np.float32)
        assert m.restore({"emb": got})[0] == 1 and np.array_equal(got, emb)


def test_a_manager_saves_and_cleans_where_the_server_cannot_list_unfinished_uploads(s3):
    # Servers without ListMultipartUploads answer 501 NotImplemented: nothing to clean there, said once, saves go on.
    logdir = "s3://%s/no-upload-listing" % s3.bucket
    s3.add_fault(kind="list_uploads", action="status", status=501, times=-1)
    said = []
    try:
        with ckpt.Manager(logdir, keep=2, log=lambda level, message: said.append(message)) as m:
            for i in (1, 2, 3):
                m.save({"w": np.full(4, i, np.int64)}, i)
            assert m.list() == [2, 3]
            assert m.clean() == []
    finally:
        s3.clear_faults()
    about = [m for m in said if "unfinished uploads" in m]
    assert len(about) == 2, said  # once for the saves, once for the clean
    assert "no-upload-listing/ckpt" in about[0] and "HTTP 501" in about[0], about[0]
    with ckpt.Manager(logdir) as m:
        idx, arrays = m.read()
        assert idx == 3 and arrays["w"].tolist() == [3] * 4


def test_a_manager_save_and_a_restore_ride_through_the_gateway_restarting_in_their_middle(s3):
    # The server is killed (SIGKILL) while a part of a 40 MiB save is in flight, and started again 3 s later; the
    # same while a restore reads. By default (a 60 s retry window) both wait for it and succeed, bit for bit.
    import threading
    import time
    logdir = "s3://%s/outage" % s3.bucket
    big = {"w": np.random.default_rng(7).standard_normal(5 << 20).astype(np.float64)}  # 40 MiB: 3 parts

    def outage(kind, run, skip=1):
        s3.clear_log()
        s3.add_fault(kind=kind, action="stall", ms=1500, skip=skip, times=1)  # that one waits: the kill lands
        failure = []

        def work():
            try:
                failure.append(run())
            except ckpt.CkptError as e:
                failure.append(e)

        worker = threading.Thread(target=work)
        began = time.monotonic()
        worker.start()
        while sum(e["kind"] == kind for e in s3.log()) <= skip and time.monotonic() - began < 60:
            time.sleep(0.02)  # until the request held by the proxy has reached it
        s3.kill_server()
        time.sleep(3)
        s3.start_server()
        worker.join(120)
        s3.clear_faults()
        assert not worker.is_alive()
        return time.monotonic() - began, failure[0]

    with ckpt.Manager(logdir, keep=2) as m:
        seconds, result = outage("upload_part", lambda: m.save(big, 1))
        assert result is None and seconds > 3, (result, seconds)
        assert any(e["kind"] == "upload_part" and e["error"] for e in s3.log()), "no part failed: no outage"
    with ckpt.Manager(logdir) as m:
        got = {"w": np.zeros_like(big["w"])}
        seconds, result = outage("get", lambda: m.restore(got))
        assert isinstance(result, tuple) and result[0] == 1 and seconds > 3, (result, seconds)
        assert np.array_equal(got["w"], big["w"])
    if s3.server_kind == "rgw":  # an incremental save copies its unchanged parts on the server (UploadPartCopy),
        changed = {"w": big["w"].copy()}  # which s3rver does not implement (its saves upload instead)
        changed["w"][-10:] += 1
        with ckpt.Manager(logdir, keep=2) as m:
            seconds, result = outage("copy_part", lambda: m.save(changed, 2), skip=0)  # one copy: the whole run
            assert result is None and seconds > 3, (result, seconds)
            assert any(e["kind"] == "copy_part" and e["error"] for e in s3.log()), "no copy failed: no outage"
        with ckpt.Manager(logdir) as m:
            idx, arrays = m.read()
            assert idx == 2 and np.array_equal(arrays["w"], changed["w"])


if __name__ == "__main__":
    why = s3_env.unavailable()
    if why:
        print("SKIP: " + why)
        sys.exit(s3_env.SKIP)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))


def test_safetensors_files_and_the_sharded_layout_on_s3_read_back_and_download_as_hugging_face_has_them(s3, tmp_path):
    arrays = {"embed": np.arange(2 * 1024 * 1024, dtype=np.float32).reshape(1024, 2048),  # 8 MiB: multipart
              "norm": np.ones(2048, np.float16), "step": np.int64(3)}
    url = "s3://%s/hf/one/model.safetensors" % s3.bucket
    ckpt.save(url, arrays, metadata={"format": "pt"})
    curl(s3, "-o", str(tmp_path / "down.safetensors"), "%s/%s/hf/one/model.safetensors" % (s3.endpoint_url, s3.bucket))
    n = int.from_bytes((tmp_path / "down.safetensors").read_bytes()[:8], "little")
    header = json.loads((tmp_path / "down.safetensors").read_bytes()[8:8 + n])
    assert header["__metadata__"] == {"format": "pt"} and header["embed"]["shape"] == [1024, 2048]
    back = ckpt.load(url)
    assert back.metadata == {"format": "pt"}
    for name, a in arrays.items():
        assert np.array_equal(back[name], a), name
    with ckpt.open(url) as f:  # no mapping of an object: a view is read once
        assert f.format == "safetensors" and f.map("norm")[5] == 1

    sharded = "s3://%s/hf/sharded/model.safetensors" % s3.bucket
    ckpt.save(sharded, arrays, max_shard_size="6MB")
    assert keys(s3, "hf/sharded/") == ["hf/sharded/model-00001-of-00002.safetensors",
                                        "hf/sharded/model-00002-of-00002.safetensors",
                                        "hf/sharded/model.safetensors.index.json"]
    for where in (sharded + ".index.json", "s3://%s/hf/sharded" % s3.bucket):  # the index, or its folder
        back = ckpt.load(where)
        for name, a in arrays.items():
            assert np.array_equal(back[name], a), (where, name)
