# SPDX-License-Identifier: Apache-2.0
"""ckpt on S3: s3:// URLs wherever the package takes a path, and ckpt.S3Storage, against a real S3 server (s3rver,
started by tests/s3/s3_env.py) on 127.0.0.1, behind the test proxy that checks every request's signature as S3
does. What the tests look at on the server they read from it directly (its listing, its objects), not through
ckpt."""
import io
import os
import re
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import ckpt
from ckpt import s3 as ckpt_s3

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "s3"))
try:
    import s3_env
except ImportError:
    s3_env = None

MiB = 1 << 20


def s3_library_or_skip():
    try:
        ckpt_s3.library()
    except ckpt.UnsupportedError as e:
        if os.path.exists(os.path.join(os.path.dirname(os.environ.get("CKPT_HEADER", "")), "ckpt_s3.h")):
            raise  # installed with its header, the library must load: that is a failure, not a missing feature
        pytest.skip("this ckpt was built without libckpt_s3: %s" % e.message)


@pytest.fixture(scope="module")
def server():
    """The S3 server (and its signature-checking proxy), with the process's environment pointing at it, as the
    AWS tools' would: libckpt_s3 takes the endpoint and the credentials from there."""
    if s3_env is None:
        pytest.skip("tests/s3/s3_env.py is not in this source tree")
    s3_library_or_skip()
    try:
        with s3_env.S3Env(verify_sigv4=True) as env, pytest.MonkeyPatch.context() as mp:
            for name in s3_env.REMOVED_VARIABLES:
                mp.delenv(name, raising=False)
            for name, value in env.environ.items():
                mp.setenv(name, value)
            yield env
    except s3_env.Unavailable as why:
        pytest.skip("no S3 test server: %s" % why)


@pytest.fixture
def where(server, request):
    """A key prefix of the test bucket of this test's own, as (bucket, prefix)."""
    return server.bucket, re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)


@pytest.fixture(autouse=True)
def in_scratch_directory(tmp_path, monkeypatch):
    """Each test runs in an empty directory, so that one that made a local "s3:" directory is seen to."""
    monkeypatch.chdir(tmp_path)
    yield
    assert not os.path.exists(tmp_path / "s3:"), "an s3:// URL was taken for a local path"


def keys(server, prefix):
    """The keys under prefix, as the server lists them (ListObjectsV2, straight to the server)."""
    query = urllib.parse.urlencode({"list-type": "2", "prefix": prefix}, quote_via=urllib.parse.quote)
    with urllib.request.urlopen(s3_env.signed_request("%s/%s?%s" % (server.server_url, server.bucket, query))) as r:
        root = ET.fromstring(r.read())
    return sorted(e.text for e in root.iter() if e.tag.rpartition("}")[2] == "Key")  # whatever its namespace


def get_object(server, key):
    with urllib.request.urlopen(s3_env.signed_request("%s/%s/%s" % (server.server_url, server.bucket, key))) as r:
        return r.read()


def put_object(server, key, data):
    request = s3_env.signed_request("%s/%s/%s" % (server.server_url, server.bucket, key), data=data)
    with urllib.request.urlopen(request) as r:
        assert r.status == 200


def bf16(values):
    """The bfloat16 bits of float32 values (their upper halves), as ckpt.typed takes them."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


# ------------------------------------------------------------------------------------------------- s3:// URLs


def test_arrays_saved_to_an_s3_url_load_restore_and_open_with_their_values(where, server):
    bucket, prefix = where
    url = "s3://%s/%s/model.npz" % (bucket, prefix)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 33)).astype(np.float32)
    bits = bf16([1.0, -2.5, 0.0078125, 3.140625e8])
    ckpt.save(url, {"w": w, "bf": ckpt.typed(bits, "bfloat16"), "step": np.int64(7)}, metadata={"loss": "0.25"})

    back = ckpt.load(url)
    assert list(back) == ["w", "bf", "step"] and back.metadata["loss"] == "0.25"
    np.testing.assert_array_equal(back["w"], w)
    assert back["bf"].ckpt_dtype == "bfloat16" and back["bf"].view(np.uint16).tolist() == bits.tolist()
    assert back["step"] == 7 and back["step"].dtype == np.int64

    into = {"w": np.zeros_like(w), "bf": ckpt.typed(np.zeros(4, np.uint16), "bfloat16"), "step": np.int64(0)}
    assert ckpt.restore(url, into)["loss"] == "0.25"
    np.testing.assert_array_equal(into["w"], w)
    assert into["bf"].bits.tolist() == bits.tolist() and into["step"] == 7
    with ckpt.open(url) as f:
        assert f.keys() == ["w", "bf", "step"] and f.shape("w") == (64, 33) and f.dtype("w") == np.float32
        np.testing.assert_array_equal(f["w"], w)
        assert f.path == url

    # The object is an .npz as numpy writes one: numpy reads the bytes the server holds.
    with np.load(io.BytesIO(get_object(server, prefix + "/model.npz"))) as z:
        np.testing.assert_array_equal(z["w"], w)


def test_a_file_larger_than_the_part_size_goes_up_in_parts_and_comes_back_in_ranges(where, server):
    bucket, prefix = where
    store = ckpt.S3Storage(bucket, prefix, part_size=5 * MiB, parallelism=3)
    big = np.random.default_rng(2).standard_normal(3 * MiB).astype(np.float32)  # 12 MiB: three parts
    server.clear_log()
    ckpt.save("big.npz", {"big": big, "small": np.arange(5)}, storage=store)
    kinds = [entry["kind"] for entry in server.log() if entry["path"].endswith("/big.npz")]
    assert kinds.count("initiate") == 1 and kinds.count("upload_part") == 3 and kinds.count("complete") == 1, kinds
    assert "put" not in kinds
    assert keys(server, prefix + "/") == [prefix + "/big.npz"]  # no temporary, no other object

    server.clear_log()
    back = ckpt.load("big.npz", storage=store)
    np.testing.assert_array_equal(back["big"], big)
    assert back["small"].tolist() == [0, 1, 2, 3, 4]
    ranged = [entry for entry in server.log() if entry["kind"] == "get"]
    assert len(ranged) >= 3, ranged  # 12 MiB read in ranges of part_size
    np.testing.assert_array_equal(ckpt.load("s3://%s/%s/big.npz" % (bucket, prefix))["big"], big)


def test_a_file_of_many_small_arrays_round_trips_through_objax_io(where):
    bucket, prefix = where
    url = "s3://%s/%s/many.npz" % (bucket, prefix)
    vc = {"layer%04d.w" % i: np.full((i % 7 + 1,), i, np.float32) for i in range(1500)}
    vc["layer0000.bf"] = ckpt.typed(bf16([0.5, -1.0]), "bfloat16")
    ckpt.save_var_collection(url, vc)
    target = {name: np.zeros_like(a) for name, a in vc.items() if isinstance(a, np.ndarray)}
    target["layer0000.bf"] = ckpt.typed(np.zeros(2, np.uint16), "bfloat16")
    ckpt.load_var_collection(url, target)
    assert target.pop("layer0000.bf").bits.tolist() == bf16([0.5, -1.0]).tolist()
    for name in target:
        np.testing.assert_array_equal(target[name], vc[name], err_msg=name)
    with ckpt.open(url) as f:
        assert f.layout == "objax" and len(f) == 1501


# ------------------------------------------------------------------------------------------- objax Checkpoint


class Variable:
    """What objax's variables look like to ckpt: a value, and assign()."""

    def __init__(self, value):
        self.value = value

    def assign(self, value):
        self.value = value


def test_an_objax_checkpoint_in_an_s3_logdir_keeps_the_newest_and_restores_the_latest(where, server, capsys):
    bucket, prefix = where
    logdir = "s3://%s/%s" % (bucket, prefix)
    shared = Variable(np.zeros(3, np.float32))
    vc = {"net.w": shared, "opt.w": shared, "net.b": Variable(np.zeros(2, np.float64))}  # objax shares variables
    with ckpt.Checkpoint(logdir, keep_ckpts=3) as trainer:
        evaluator = ckpt.Checkpoint(logdir, keep_ckpts=3, read_only=True)
        for idx in range(1, 7):
            shared.assign(np.full(3, idx, np.float32))
            vc["net.b"].assign(np.full(2, -idx, np.float64))
            trainer.save(vc, idx)
        assert keys(server, prefix + "/") == ["%s/ckpt/%010d.npz" % (prefix, i) for i in (4, 5, 6)]

        seen = {"net.w": Variable(np.zeros(3, np.float32)), "net.b": Variable(np.zeros(2, np.float64))}
        assert evaluator.restore(seen) == (6, "%s/ckpt/0000000006.npz" % logdir)
        assert seen["net.w"].value.tolist() == [6, 6, 6] and seen["net.b"].value.tolist() == [-6, -6]
        assert "Resuming from %s/ckpt/0000000006.npz" % logdir in capsys.readouterr().out

        trainer.save(vc, 7)  # the trainer goes on; the evaluator sees the new one
        assert evaluator.restore(seen)[0] == 7 and trainer.checkpoint_idx(evaluator.restore(seen)[1]) == 7

    # Shared under a first name the files lack: restored from the other name they have (the file is read by URL).
    w = Variable(np.zeros(3, np.float32))
    resumed = {"opt.w": w, "net.w": w, "net.b": Variable(np.zeros(2))}
    restarted = ckpt.Checkpoint(logdir, keep_ckpts=3)
    assert restarted.restore(resumed)[0] == 7  # saved after step 6, with step 6's values
    assert resumed["opt.w"].value.tolist() == [6, 6, 6] and resumed["net.b"].value.tolist() == [-6, -6]
    assert restarted.restore(resumed, idx=5)[0] == 5 and resumed["net.w"].value.tolist() == [5, 5, 5]


def test_a_restore_falls_back_past_a_corrupt_newest_object(where, server):
    bucket, prefix = where
    logdir = "s3://%s/%s" % (bucket, prefix)
    with ckpt.Manager(logdir, keep=5) as m:
        for idx in (1, 2, 3):
            m.save({"w": np.full(4, idx, np.int32)}, idx)
        assert m.list() == [1, 2, 3] and m.path(3) == "%s/ckpt/0000000003.npz" % logdir

    put_object(server, "%s/ckpt/0000000003.npz" % prefix, b"PK\x03\x04 this is not a zip file" * 20)

    with ckpt.Manager(logdir, read_only=True) as m:
        w = np.zeros(4, np.int32)
        assert m.restore({"w": w})[0] == 2 and w.tolist() == [2, 2, 2, 2]
        assert m.read()[0] == 2
    with ckpt.Manager(logdir, read_only=True, fallback=False) as m:
        with pytest.raises(ckpt.FormatError, match="0000000003.npz"):
            m.restore({"w": w})
    assert ckpt.Checkpoint(logdir, keep_ckpts=3, verbose=False).restore({"w": w})[0] == 2


def test_a_manager_over_an_s3_storage_keeps_its_checkpoints_under_the_prefix(where, server):
    bucket, prefix = where
    store = ckpt.S3Storage(bucket, prefix + "/base")
    with ckpt.Manager("run", keep=2, storage=store, asynchronous=True) as m:
        for idx in (10, 20, 30):
            m.save({"w": np.full(2, idx, np.float32)}, idx, metrics={"loss": 1.0 / idx})
        m.wait()
        assert m.list() == [20, 30] and m.path(30) == "run/ckpt/0000000030.npz"
        assert m.metric(30, "loss") == pytest.approx(1 / 30)
    assert keys(server, prefix + "/") == ["%s/base/run/ckpt/%010d.npz" % (prefix, i) for i in (20, 30)]
    assert ckpt.load("s3://%s/%s/base/run/ckpt/0000000030.npz" % (bucket, prefix))["w"].tolist() == [30, 30]

    shared = Variable(np.arange(3.0))
    with ckpt.Checkpoint("objax", keep_ckpts=1, storage=store) as ck:
        ck.save({"a": shared, "b": shared}, 1)
        into = Variable(np.zeros(3))
        assert ck.restore({"b": into, "a": into}) == (1, "objax/ckpt/0000000001.npz")  # a path in the storage
        assert into.value.tolist() == [0, 1, 2]


# --------------------------------------------------------------------------------------------------- writers


@pytest.mark.parametrize("kind", ["SimpleWriter", "ThreadWriter", "ThreadQueueWriter"])
def test_pfn_writers_save_into_an_s3_out_dir(where, server, kind):
    bucket, prefix = where
    writer = getattr(ckpt.writing, kind)(savefun=ckpt.writing.save_npz, out_dir="s3://%s/%s/out" % (bucket, prefix))
    for step in (1, 2):
        writer("snapshot_%d.npz" % step, "ignored", {"w": np.full(3, step, np.float32)})
    writer.save_arrays("arrays.npz", "", {"b": np.arange(4)})
    writer.finalize()
    assert keys(server, prefix + "/") == ["%s/out/%s" % (prefix, n) for n in
                                         ("arrays.npz", "snapshot_1.npz", "snapshot_2.npz")]
    assert ckpt.load("s3://%s/%s/out/snapshot_2.npz" % (bucket, prefix))["w"].tolist() == [2, 2, 2]


def test_a_writer_takes_an_s3_out_dir_or_filename_from_each_call_as_ppe_passes_them(where, server):
    torch = pytest.importorskip("torch")
    bucket, prefix = where
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "iteration": 100}
    with ckpt.writing.ThreadWriter() as writer:  # torch.save, ppe's default
        writer("snapshot_iter_100", "s3://%s/%s/result" % (bucket, prefix), state)
        writer("s3://%s/%s/elsewhere/snapshot_iter_200" % (bucket, prefix), "", dict(state, iteration=200))
    back = torch.load(io.BytesIO(get_object(server, prefix + "/result/snapshot_iter_100")))
    assert back["iteration"] == 100 and torch.equal(back["model"]["w"], state["model"]["w"])
    assert torch.load(io.BytesIO(get_object(server, prefix + "/elsewhere/snapshot_iter_200")))["iteration"] == 200
    assert keys(server, prefix + "/") == [prefix + "/elsewhere/snapshot_iter_200", prefix + "/result/snapshot_iter_100"]


def test_a_writer_over_an_s3_storage_writes_keys_under_its_prefix(where, server):
    bucket, prefix = where
    with ckpt.writing.SimpleWriter(savefun=ckpt.writing.save_npz, fs=ckpt.S3Storage(bucket, prefix)) as writer:
        writer("a.npz", "snapshots", {"w": np.ones(2)})
    assert keys(server, prefix + "/") == [prefix + "/snapshots/a.npz"]


@pytest.mark.parametrize("kind", ["SimpleWriter", "ThreadWriter"])
def test_ppes_snapshot_calls_on_an_s3_writers_fs_retain_and_autoload(where, server, kind):
    """What ppe's snapshot extension does through ``writer.fs`` for an s3:// out_dir: list recursively, order by
    ``stat().last_modified``, remove all but the newest (n_retains=2, in the cleanup hook), open the newest "rb"
    and torch.load it after a restart."""
    torch = pytest.importorskip("torch")
    bucket, prefix = where
    out = "s3://%s/%s/run" % (bucket, prefix)

    def snapshots(fs):
        names = [n for n in fs.list(out, recursive=True) if n.startswith("snapshot_iter_")]
        return sorted((fs.stat(os.path.join(out, n)).last_modified, n) for n in names)

    writer = getattr(ckpt.writing, kind)(out_dir=out)
    assert isinstance(writer.fs, ckpt.filesystem.StorageFiles)
    writer._add_cleanup_hook(lambda: [writer.fs.remove(os.path.join(out, n)) for _, n in snapshots(writer.fs)[:-2]])
    for it in (1, 2, 3):
        writer("snapshot_iter_%d" % it, out, {"iteration": it, "w": torch.full((2,), float(it))})
        writer.wait()
    writer("notes/readme", out, {"not": "a snapshot"})
    writer.finalize()
    assert keys(server, prefix + "/") == ["%s/run/%s" % (prefix, n) for n in
                                         ("notes/readme", "snapshot_iter_2", "snapshot_iter_3")]

    restarted = getattr(ckpt.writing, kind)(out_dir=out)
    fs = restarted.fs
    assert sorted(fs.list(out)) == ["notes", "snapshot_iter_2", "snapshot_iter_3"]
    assert sorted(fs.list(out, recursive=True)) == ["notes", "notes/readme", "snapshot_iter_2", "snapshot_iter_3"]
    found = snapshots(fs)
    assert [n for _, n in found] == ["snapshot_iter_2", "snapshot_iter_3"]
    assert all(abs(t - time.time()) < 300 for t, _ in found)  # the objects' Last-Modified, as seconds
    with fs.open(os.path.join(out, found[-1][1]), "rb") as f:
        state = torch.load(f)
    assert state["iteration"] == 3 and state["w"].tolist() == [3.0, 3.0]
    st = fs.stat(out + "/snapshot_iter_3")
    assert st.size == len(get_object(server, prefix + "/run/snapshot_iter_3")) and not fs.isdir(out + "/snapshot_iter_3")
    assert fs.isdir(out + "/notes") and fs.exists(out + "/notes") and not fs.exists(out + "/nothing")
    with pytest.raises(ckpt.NotFoundError) as e:
        fs.stat(out + "/nothing")
    assert isinstance(e.value, FileNotFoundError) and e.value.filename == out + "/nothing"
    with pytest.raises(ckpt.ExistsError, match="not empty"):
        fs.remove(out + "/notes")
    fs.remove(out + "/notes", recursive=True)  # as ppe's sharded snapshot removes a stale snapshot's directory
    assert keys(server, prefix + "/") == ["%s/run/%s" % (prefix, n) for n in ("snapshot_iter_2", "snapshot_iter_3")]
    with pytest.raises(ckpt.UnsupportedError, match="cannot open .* a file of " + out):
        fs.open(out + "/x", "wb")
    restarted.finalize()


def test_a_writer_over_an_s3_storage_has_an_fs_over_the_same_keys(where, server):
    bucket, prefix = where
    storage = ckpt.S3Storage(bucket, prefix)
    with ckpt.writing.SimpleWriter(savefun=ckpt.writing.save_npz, fs=storage) as writer:
        writer("a.npz", "snapshots", {"w": np.ones(2)})
        assert list(writer.fs.list("snapshots")) == ["a.npz"]
        with writer.fs.open("snapshots/a.npz", "rb") as f:
            assert np.load(f)["w"].tolist() == [1.0, 1.0]
        writer.fs.remove("snapshots/a.npz")
    assert keys(server, prefix + "/") == []


# ---------------------------------------------------------------------------------------------------- errors


def test_a_missing_bucket_is_a_not_found_error_naming_the_bucket_the_key_and_s3s_code(server):
    with pytest.raises(ckpt.NotFoundError) as e:
        ckpt.save("s3://no-such-bucket/run/model.npz", {"w": np.zeros(2)})
    assert "s3://no-such-bucket/run/model.npz" in e.value.message and "NoSuchBucket" in e.value.message
    assert isinstance(e.value, FileNotFoundError) and e.value.filename == "s3://no-such-bucket/run/model.npz"

    with pytest.raises(ckpt.NotFoundError) as e:
        ckpt.Manager("s3://no-such-bucket/run").restore({"w": np.zeros(2)})
    assert "s3://no-such-bucket" in e.value.message and "run/ckpt" in e.value.message
    assert "NoSuchBucket" in e.value.message

    with pytest.raises(ckpt.NotFoundError, match="s3://no-such-bucket/run/model.npz: HTTP 404 NoSuchBucket"):
        ckpt.load("s3://no-such-bucket/run/model.npz")


def test_a_missing_key_is_a_not_found_error_with_the_url_as_its_filename(where):
    bucket, prefix = where
    url = "s3://%s/%s/absent.npz" % (bucket, prefix)
    with pytest.raises(FileNotFoundError) as e:
        ckpt.load(url)
    assert isinstance(e.value, ckpt.NotFoundError) and e.value.filename == url and url in e.value.message


def test_a_wrong_secret_fails_with_http_403_signature_does_not_match(where, server):
    bucket, prefix = where
    key_id = os.environ["AWS_ACCESS_KEY_ID"]
    store = ckpt.S3Storage(bucket, prefix, access_key_id=key_id, secret_access_key="not-the-secret")
    with pytest.raises(ckpt.StorageError) as e:
        ckpt.save("model.npz", {"w": np.zeros(2)}, storage=store)
    assert "s3://%s/%s/model.npz" % (bucket, prefix) in e.value.message
    assert "HTTP 403 SignatureDoesNotMatch" in e.value.message
    # What was used, and what to check: the message a user can act on.
    assert "signed with key id '%s'" % key_id in e.value.message and "a wrong secret access key" in e.value.message
    assert "endpoint %s" % os.environ["AWS_ENDPOINT_URL"] in e.value.message
    assert keys(server, prefix + "/") == []


# These need no server: the options are refused when the storage is made.


def test_a_part_size_under_five_mib_is_refused_with_the_librarys_message():
    s3_library_or_skip()
    with pytest.raises(ckpt.InvalidArgumentError, match=r"part_size 1048576 is below S3's 5 MiB minimum part"):
        ckpt.S3Storage("ckpt-test", part_size=MiB)


def test_the_retry_window_reaches_the_library_in_milliseconds_and_is_unset_by_default():
    from ckpt import s3
    s3_library_or_skip()
    lib = s3.library()
    o = s3._options(lib, "b", None, None, None, None, None, None, None, None, None, None, None, None, "auto",
                    retry_window=2.5)
    assert (o.version, o.retry_window_ms) == (2, 2500)
    assert s3._options(lib, "b", *[None] * 12, "auto").retry_window_ms == 0  # the library's 60 s
    with pytest.raises(ckpt.InvalidArgumentError, match="retry_window must be a positive number of seconds"):
        ckpt.S3Storage("ckpt-test", retry_window=0)


def test_options_of_the_wrong_kind_or_range_are_refused_when_the_storage_is_made():
    s3_library_or_skip()
    with pytest.raises(ckpt.InvalidArgumentError, match="addressing must be one of 'auto', 'path', 'virtual'"):
        ckpt.S3Storage("ckpt-test", addressing="dns")
    with pytest.raises(ckpt.ArgumentTypeError, match="stall_timeout must be a number of seconds"):
        ckpt.S3Storage("ckpt-test", stall_timeout="30")
    with pytest.raises(ckpt.InvalidArgumentError, match="connect_timeout must be a positive number of seconds"):
        ckpt.S3Storage("ckpt-test", connect_timeout=0)
    with pytest.raises(ckpt.InvalidArgumentError, match="parallelism must be between 1 and"):
        ckpt.S3Storage("ckpt-test", parallelism=-1)
    with pytest.raises(ckpt.ArgumentTypeError, match="bucket must be a str"):
        ckpt.S3Storage(b"ckpt-test")
    with pytest.raises(ckpt.InvalidArgumentError, match="bucket name 'B' is not one S3 accepts"):
        ckpt.S3Storage("B")
    with pytest.raises(ckpt.InvalidArgumentError, match="endpoint_url 'ftp://127.0.0.1' is not an http:// or https://"):
        ckpt.S3Storage("ckpt-test", endpoint_url="ftp://127.0.0.1")


def test_from_url_gives_a_storage_over_the_bucket_and_the_key(where):
    bucket, prefix = where
    store, key = ckpt.S3Storage.from_url("s3://%s/%s/x.npz" % (bucket, prefix), max_attempts=2)
    assert key == prefix + "/x.npz" and store.bucket == bucket
    ckpt.save(key, {"w": np.arange(3)}, storage=store)
    assert ckpt.load("s3://%s/%s/x.npz" % (bucket, prefix))["w"].tolist() == [0, 1, 2]
    assert ckpt.S3Storage.from_url("s3://%s" % bucket)[1] == "" and ckpt.S3Storage.from_url("s3://%s/" % bucket)[1] == ""
    with pytest.raises(ckpt.InvalidArgumentError, match="s3:///x: not an s3://<bucket>"):
        ckpt.S3Storage.from_url("s3:///x")
    with pytest.raises(ckpt.ArgumentTypeError, match="the URL gives the prefix"):
        ckpt.S3Storage.from_url("s3://%s/x" % bucket, prefix="y")


def test_a_url_that_pathlib_broke_is_refused_rather_than_made_a_local_directory(server, tmp_path):
    import pathlib
    broken = pathlib.Path("s3://%s/run" % server.bucket)  # "s3:/ckpt-test/run"
    message = "s3:/%s/run: not an s3:// URL .* pass the URL as a str, 's3://%s/run'" % (server.bucket, server.bucket)
    with pytest.raises(ckpt.InvalidArgumentError, match=message):
        ckpt.Checkpoint(broken, keep_ckpts=3)
    with pytest.raises(ckpt.InvalidArgumentError, match="not an s3:// URL"):
        ckpt.save(broken / "model.npz", {"w": np.zeros(1)})
    with pytest.raises(ckpt.InvalidArgumentError, match="not an s3:// URL"):
        ckpt.writing.SimpleWriter(savefun=ckpt.writing.save_npz)("a.npz", broken, {"w": np.zeros(1)})


def test_a_library_older_than_s3_paths_refuses_urls_instead_of_writing_a_local_s3_directory(monkeypatch):
    monkeypatch.setattr(ckpt._native, "VERSION", (0, 5, 3))
    with pytest.raises(ckpt.UnsupportedError, match=r"s3://bucket/m.npz: s3:// paths need libckpt 0.6.0 or newer; "
                                                     r"the library loaded \(.*\) is 0.5.3"):
        ckpt.save("s3://bucket/m.npz", {"w": np.zeros(1)})
    with pytest.raises(ckpt.UnsupportedError, match="S3 storage needs libckpt 0.6.0 or newer"):
        ckpt.S3Storage("bucket")


def test_s3_storage_without_its_library_says_where_it_looked(monkeypatch, tmp_path):
    missing = str(tmp_path / "nowhere" / "libckpt_s3.so.0")
    monkeypatch.setenv("CKPT_S3_LIBRARY", missing)
    with pytest.raises(ckpt.UnsupportedError) as e:
        ckpt.S3Storage("bucket")
    assert "CKPT_S3_LIBRARY=%s" % missing in e.value.message and "CKPT_WITH_S3" in e.value.message


SEARCH = r"""
import os, sys, numpy as np, ckpt
try:
    ckpt.S3Storage("bucket")
    print("storage: made")
except ckpt.UnsupportedError as e:
    print("storage:", e.message)
try:
    ckpt.save(sys.argv[1], {"w": np.arange(3)})
    print("url:", ckpt.load(sys.argv[1])["w"].tolist())
except ckpt.UnsupportedError as e:
    print("url:", e.message)
"""


def test_libckpt_s3_is_looked_for_in_ckpt_s3_library_then_beside_libckpt_then_by_name(where, tmp_path):
    import shutil
    import subprocess
    bucket, prefix = where
    lib = ckpt._native.library_path()
    alone, elsewhere = tmp_path / "alone", tmp_path / "elsewhere"
    alone.mkdir()
    elsewhere.mkdir()
    shutil.copy(lib, alone / "libckpt.so.0")
    shutil.copy(os.path.join(os.path.dirname(lib), "libckpt_s3.so.0"), elsewhere / "libckpt_s3.so.0")
    url = "s3://%s/%s/searched.npz" % (bucket, prefix)

    def run(**env):
        environ = {k: v for k, v in os.environ.items() if k not in ("CKPT_S3_LIBRARY", "LD_LIBRARY_PATH")}
        environ.update(env, CKPT_LIBRARY=str(alone / "libckpt.so.0"), PYTHONPATH=os.pathsep.join(sys.path))
        done = subprocess.run([sys.executable, "-c", SEARCH, url], env=environ, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    found = run(CKPT_S3_LIBRARY=str(elsewhere / "libckpt_s3.so.0"))
    assert found == "storage: made\nurl: [0, 1, 2]\n"
    missing = run()
    if "storage: made" in missing:
        pytest.skip("a libckpt_s3.so.0 is on the loader's paths")
    assert "%s (beside %s)" % (alone / "libckpt_s3.so.0", alone / "libckpt.so.0") in missing
    assert "libckpt_s3.so.0 on the loader's paths" in missing and "CKPT_S3_LIBRARY" in missing
    assert "url: %s: s3:// paths need libckpt_s3, which could not be loaded" % url in missing


def test_libckpt_s3_is_loaded_from_beside_the_libckpt_the_package_loaded(monkeypatch):
    monkeypatch.delenv("CKPT_S3_LIBRARY", raising=False)
    beside = os.path.join(os.path.dirname(ckpt._native.library_path()), "libckpt_s3.so.0")
    if not os.path.exists(beside):
        pytest.skip("no libckpt_s3.so.0 beside %s" % ckpt._native.library_path())
    assert ckpt_s3.library() is ckpt_s3._loaded[beside]
