#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ckpt and boto3 (AWS's own Python SDK, Debian's python3-boto3) on the same bucket: what one writes the other reads,
bit for bit, single PUT and multipart both ways; what the manager keeps after retention is what boto3 lists; and
the requests a manager's save and restore make, counted. Runs on the server s3_env.py starts (CKPT_S3_SERVER:
s3rver or Ceph's RGW), behind the proxy that checks every signature (boto3's too) and logs every request."""
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import s3_env  # noqa: E402
import ckpt  # noqa: E402

boto3 = pytest.importorskip("boto3")
from boto3.s3.transfer import TransferConfig  # noqa: E402

ON_RGW = os.environ.get("CKPT_S3_SERVER") == "rgw"
MULTIPART = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20, use_threads=False)


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


@pytest.fixture(scope="module")
def client(s3):
    env = s3.environ
    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])


def state(seed, big):
    rng = np.random.default_rng(seed)
    rows = 2048 if big else 16  # 2048 x 1024 float32: 8 MiB, over the 5 MiB part size below
    return {"layer/w": rng.standard_normal((rows, 1024)).astype(np.float32),
            "b": rng.standard_normal(7), "step": np.int64(seed), "name": np.array("adam")}


def download(client, bucket, key):
    data = io.BytesIO()
    client.download_fileobj(bucket, key, data)
    data.seek(0)
    return data


@pytest.mark.parametrize("big", [False, True], ids=["single PUT", "multipart"])
def test_boto3_downloads_what_ckpt_saved_and_numpy_loads_it(s3, client, big):
    arrays = state(1, big)
    key = "ckpt-wrote/%s.npz" % ("big" if big else "small")
    s3.clear_log()
    ckpt.save(key, arrays, storage=ckpt.S3Storage(s3.bucket, part_size=5 << 20))
    kinds = [e["kind"] for e in s3.log()]
    assert ("upload_part" in kinds) == big and ("put" in kinds) == (not big), kinds
    head = client.head_object(Bucket=s3.bucket, Key=key)
    if ON_RGW:  # S3's multipart ETag, <md5 of the parts' md5s>-<parts> (s3rver's is the MD5 of the whole object)
        assert head["ETag"].endswith('-2"') == big
    with np.load(download(client, s3.bucket, key)) as z:
        assert sorted(z.files) == sorted(arrays)
        for name, a in arrays.items():
            assert z[name].dtype == np.asarray(a).dtype and np.array_equal(z[name], a), name


@pytest.mark.parametrize("big", [False, True], ids=["single PUT", "multipart"])
def test_ckpt_restores_and_maps_what_boto3_uploaded(s3, client, tmp_path, big):
    arrays = state(2, big)
    np.savez(tmp_path / "numpy.npz", **arrays)
    key = "boto3-wrote/%s.npz" % ("big" if big else "small")
    client.upload_file(str(tmp_path / "numpy.npz"), s3.bucket, key, Config=MULTIPART)
    if ON_RGW:
        assert client.head_object(Bucket=s3.bucket, Key=key)["ETag"].endswith('-2"') == big
    url = "s3://%s/%s" % (s3.bucket, key)
    got = {name: np.zeros_like(a) for name, a in arrays.items()}
    ckpt.restore(url, got)
    for name, a in arrays.items():
        assert np.array_equal(got[name], a), name
    with ckpt.open(url) as f:
        view = f.map("layer/w")
        assert view.shape == arrays["layer/w"].shape and np.array_equal(view, arrays["layer/w"])


def listed(client, bucket, prefix):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def test_after_retention_boto3_lists_exactly_the_checkpoints_the_manager_keeps(s3, client):
    logdir = "s3://%s/kept" % s3.bucket
    with ckpt.Manager(logdir, keep=2) as m:
        for step in range(1, 6):
            m.save(state(step, False), step * 10)
        assert m.list() == [40, 50]
    assert listed(client, s3.bucket, "kept/") == ["kept/ckpt/0000000040.npz", "kept/ckpt/0000000050.npz"]
    with np.load(download(client, s3.bucket, "kept/ckpt/0000000050.npz")) as z:
        assert np.array_equal(z["layer/w"], state(5, False)["layer/w"])


def test_no_incomplete_upload_is_left_by_a_save_that_completed(s3, client):
    ckpt.save("complete/big.npz", state(3, True), storage=ckpt.S3Storage(s3.bucket, part_size=5 << 20))
    uploads = client.list_multipart_uploads(Bucket=s3.bucket, Prefix="complete/")
    assert uploads.get("Uploads", []) == []


def kinds(s3):
    return [e["kind"] for e in s3.log()]


def test_a_restore_lists_once_and_a_save_with_retention_lists_once(s3):
    logdir = "s3://%s/counted" % s3.bucket
    with ckpt.Manager(logdir, keep=2) as m:
        s3.clear_log()
        m.save(state(1, False), 1)
        # The first save also looks for what interrupted saves left (temporaries and incomplete uploads) and, in
        # the same listing, for the newest checkpoint to share with (none); after the object, the HEAD that records
        # it as the next save's base, and the listing for retention.
        assert sorted(kinds(s3)) == ["head", "list", "list", "list_uploads", "put"], kinds(s3)
        # Step 2 shares nothing with step 1 (on S3 a shared run is a part of 5 MiB or more): the manager pauses its
        # chunk hashes for one save, which neither reads a base nor records itself as one; the deletion of step 1.
        m.save(state(2, False), 2)
        s3.clear_log()
        m.save(state(3, False), 3)
        assert kinds(s3) == ["put", "list", "delete"], kinds(s3)
        m.save(state(4, False), 4)  # hashes again, with nothing to compare with
        s3.clear_log()
        m.save(state(5, False), 5)
        # The base: unchanged since it was saved (HEAD), opened (HEAD) and its directory and chunk table read (one
        # GET); the object, recorded as the next base; one listing for retention, the deletion of the oldest.
        assert kinds(s3) == ["head", "head", "get", "put", "head", "list", "delete"], kinds(s3)
    got = {name: np.zeros_like(a) for name, a in state(5, False).items()}
    s3.clear_log()
    with ckpt.Manager(logdir) as m:
        assert m.restore(got)[0] == 5
    # One listing, then the file: its size and ETag, its bytes (in one window at this size).
    assert kinds(s3) == ["list", "head", "get"], kinds(s3)
    assert np.array_equal(got["layer/w"], state(5, False)["layer/w"])


SAVER = """
import sys, numpy as np, ckpt
bucket, path, manager = sys.argv[1], sys.argv[2], sys.argv[3] == "manager"
store = ckpt.S3Storage(bucket, part_size=5 << 20, stall_timeout=600)
arrays = {"w": np.ones((3 << 20,), np.float32)}  # 12 MiB: three parts
if manager:
    with ckpt.Manager(path, storage=store) as m:
        m.save(arrays, 1)
else:
    ckpt.save(path, arrays, storage=store)
"""


def killed_mid_upload(s3, path, manager=False):
    """Starts a save in a process of its own, lets the server hold its completion, and SIGKILLs the process: what
    a job killed in the middle of a checkpoint leaves, an incomplete multipart upload."""
    s3.clear_log()
    s3.add_fault(kind="complete", action="stall", times=-1)
    child = subprocess.Popen([sys.executable, "-c", SAVER, s3.bucket, path, "manager" if manager else "file"],
                             env=s3.child_environ())
    try:
        deadline = time.monotonic() + 60
        while not any(e["kind"] == "complete" for e in s3.log()):
            assert child.poll() is None, "the save ended before its completion was held"
            assert time.monotonic() < deadline, "the save never reached its completion"
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
        s3.clear_faults()


def incomplete(client, bucket, prefix):
    return sorted(u["Key"] for u in client.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", []))


def test_ckpt_clean_aborts_the_upload_a_killed_save_left(s3, client):
    killed_mid_upload(s3, "killed/run/model.npz")
    assert incomplete(client, s3.bucket, "killed/") == ["killed/run/model.npz"]
    url = "s3://%s/killed/run" % s3.bucket
    tool = os.environ.get("CKPT_TOOL")
    if tool:
        dry = subprocess.run([tool, "clean", url, "--subdir", "", "--dry-run"], capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
        assert "unfinished upload of killed/run/model.npz" in dry.stdout
        assert incomplete(client, s3.bucket, "killed/") == ["killed/run/model.npz"]  # a dry run aborts nothing
        done = subprocess.run([tool, "clean", url, "--subdir", "", "--json"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["removed"] == [{"path": "killed/run/model.npz", "kind": "upload"}]
    else:
        with ckpt.Manager(url, subdir="") as m:
            assert m.clean() == ["killed/run/model.npz"]
    assert incomplete(client, s3.bucket, "killed/") == []
    assert listed(client, s3.bucket, "killed/") == []  # nothing was ever committed


def test_a_managers_first_save_aborts_its_checkpoints_stale_uploads_and_nothing_else(s3, client):
    killed_mid_upload(s3, "restarted", manager=True)
    other = client.create_multipart_upload(Bucket=s3.bucket, Key="restarted/ckpt/notes.bin")["UploadId"]
    assert incomplete(client, s3.bucket, "restarted/") == ["restarted/ckpt/0000000001.npz",
                                                           "restarted/ckpt/notes.bin"]
    with ckpt.Manager("s3://%s/restarted" % s3.bucket) as m:
        m.save(state(4, False), 2)
        assert m.list() == [2]
    # The killed save's upload is gone; one that is not a checkpoint's is not ckpt's to abort.
    assert incomplete(client, s3.bucket, "restarted/") == ["restarted/ckpt/notes.bin"]
    client.abort_multipart_upload(Bucket=s3.bucket, Key="restarted/ckpt/notes.bin", UploadId=other)


if __name__ == "__main__":
    why = s3_env.unavailable()
    if why:
        print("SKIP: " + why)
        sys.exit(s3_env.SKIP)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))


def uploaded(log):
    """Bytes the requests of a log sent as object data: PUT bodies and uploaded parts (copied parts send none)."""
    return sum(e["body_bytes"] for e in log if e["kind"] in ("put", "upload_part"))


def saves_of_a_frozen_backbone(s3, prefix, **manager_options):
    """Three saves of a manager of s3://bucket/prefix: a frozen 128 MiB backbone and a small trained part. Returns
    each step's state and the requests of its save."""
    rng = np.random.default_rng(5)
    backbone = rng.standard_normal(32 << 20, dtype=np.float32)  # 128 MiB
    states, logs = {}, {}
    with ckpt.Manager("s3://%s/%s" % (s3.bucket, prefix), keep=2, **manager_options) as m:
        for step in (1, 2, 3):
            states[step] = {"backbone": backbone, "adapter": rng.standard_normal((512, 1024), dtype=np.float32),
                            "step": np.int64(step)}
            s3.clear_log()
            m.save(states[step], step)
            logs[step] = s3.log()
        assert m.list() == [2, 3]
    assert [e["kind"] for e in logs[1] if e["kind"] == "copy_part"] == []  # nothing to copy from
    return states, logs


def check_copied_on_the_server(step, log, size):
    """On RGW, the save of `step` copied its unchanged runs on the server (UploadPartCopy) and uploaded at most a
    tenth of its `size` bytes; s3rver answers NotImplemented to the first copy (step 2's), so the saves upload
    everything, and step 2 shares nothing, so the manager pauses its hashing for step 3."""
    copies = [e for e in log if e["kind"] == "copy_part"]
    sent = uploaded(log)
    if ON_RGW:
        assert copies and all(e["status"] == 200 for e in copies), copies
        assert sent <= size // 10, "step %d uploaded %d of its %d bytes" % (step, sent, size)
    else:
        assert [e["status"] for e in copies] == ([501] if step == 2 else []), copies
        assert sent >= size, "step %d uploaded %d of its %d bytes" % (step, sent, size)


def test_a_save_that_changed_little_copies_the_rest_on_the_server_and_numpy_loads_every_checkpoint(s3, client):
    # After the first, a manager's saves upload what changed and have the server copy the unchanged runs from the
    # previous checkpoint, where it can; each checkpoint is still a whole .npz of its own.
    states, logs = saves_of_a_frozen_backbone(s3, "incremental")
    for step in (2, 3):
        key = "incremental/ckpt/%010d.npz" % step
        size = client.head_object(Bucket=s3.bucket, Key=key)["ContentLength"]
        with np.load(download(client, s3.bucket, key)) as z:
            # and the manager's metadata and the table of its chunks' hashes (docs/format.md)
            table = ["__ckpt_chunks__"] if ON_RGW or step == 2 else []
            assert sorted(z.files) == sorted(list(states[step]) + table + ["__ckpt_metadata__"]), step
            for name, a in states[step].items():
                assert np.array_equal(z[name], a), (step, name)
        check_copied_on_the_server(step, logs[step], size)


def test_a_safetensors_managers_save_that_changed_little_copies_the_rest_on_the_server(s3, client, tmp_path):
    # The same with safetensors checkpoints: a safetensors file records no chunk hashes, so a save shares with the
    # checkpoint its manager saved before. Each object is a whole safetensors file (read here by ckpt, held to the
    # reference's rules, from the downloaded bytes).
    states, logs = saves_of_a_frozen_backbone(s3, "incremental-st", format="safetensors")
    for step in (2, 3):
        key = "incremental-st/ckpt/%010d.safetensors" % step
        size = client.head_object(Bucket=s3.bucket, Key=key)["ContentLength"]
        path = tmp_path / ("%d.safetensors" % step)
        path.write_bytes(download(client, s3.bucket, key).getvalue())
        loaded = ckpt.safetensors.load_file(str(path))
        assert sorted(loaded) == sorted(states[step])
        for name, a in states[step].items():
            assert np.array_equal(loaded[name], a), (step, name)
        check_copied_on_the_server(step, logs[step], size)
