#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The RGW side of the S3 test infrastructure: tests/s3/rgw.py and s3_env.py with server="rgw", driven with boto3
(an independent client) and the curl program (whose SigV4 signing is libcurl's, which ckpt's S3 storage uses).

    /usr/bin/python3 tests/s3/test_rgw_infra.py     (exits 77 when Ceph or boto3 is missing: scripts/deps rgw)

With CKPT_RGW_DIR naming a running cluster (ctest's fixture rgw) the tests use it, each S3Env with a gateway of its
own; otherwise the S3Env of this module starts a cluster of its own.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rgw  # noqa: E402
import s3_env  # noqa: E402

MIB = 1 << 20
boto3 = pytest.importorskip("boto3")
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.exceptions import ClientError, EndpointConnectionError  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    try:
        with s3_env.S3Env(server="rgw", proxy=True) as env:
            yield env
    except s3_env.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(autouse=True)
def clean(request):
    if "s3" in request.fixturenames:
        env = request.getfixturevalue("s3")
        env.start_server()
        env.clear_faults()
        env.clear_log()
    yield


def client(endpoint, secret=rgw.SECRET_KEY):
    import botocore.config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=rgw.ACCESS_KEY, aws_secret_access_key=secret,
                        region_name=rgw.REGION,
                        config=botocore.config.Config(s3={"addressing_style": "path"},
                                                      retries={"total_max_attempts": 1},
                                                      connect_timeout=5, read_timeout=60))


@pytest.fixture
def direct(s3):
    """boto3 on the gateway itself."""
    return client(s3.server_url)


def data(size, seed):
    """size bytes that differ from part to part and from seed to seed."""
    block = hashlib.sha256(f"{seed}".encode()).digest() * 2048  # 64 KiB
    out = bytearray()
    while len(out) < size:
        out += hashlib.sha256(bytes(out[-32:]) + block[:32]).digest() + block
    return bytes(out[:size])


def keys(c, bucket, **kwargs):
    return [item["Key"] for item in c.list_objects_v2(Bucket=bucket, **kwargs).get("Contents", [])]


def uploads(c, bucket):
    return [(u["Key"], u["UploadId"]) for u in c.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


# -- the environment --

def test_the_environment_is_s3rvers_with_rgw_named_and_no_data_dir(s3):
    env = s3.environ
    assert env["CKPT_S3_SERVER"] == "rgw"
    assert "CKPT_S3_DATA_DIR" not in env and "CKPT_S3_DATA_DIR" not in s3.child_environ(
        {"CKPT_S3_DATA_DIR": "/an/outer/runs"})
    assert env["AWS_ENDPOINT_URL"] == env["CKPT_S3_PROXY"] == s3.proxy_url != s3.server_url
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_REGION"]) == ("S3RVER", "S3RVER",
                                                                                          "us-east-1")
    assert env["CKPT_S3_SERVER_CONTROL"].endswith("/__ckpt_server")
    if s3.shared:
        assert re.fullmatch(r"ckpt-test-[0-9a-f]{16}", env["CKPT_S3_TEST_BUCKET"]), env
        assert s3.server_url != s3.cluster.endpoint  # a gateway of its own
    else:
        assert env["CKPT_S3_TEST_BUCKET"] == "ckpt-test"
    assert env["CKPT_S3_TEST_BUCKET"] in [b["Name"] for b in client(s3.server_url).list_buckets()["Buckets"]]


def test_the_server_defaults_to_the_environments_choice(monkeypatch):
    monkeypatch.setenv("CKPT_S3_SERVER", "rgw")
    assert s3_env.S3Env().server_kind == "rgw"
    monkeypatch.delenv("CKPT_S3_SERVER")
    assert s3_env.S3Env().server_kind == "s3rver"
    assert s3_env.S3Env(server="rgw").server_kind == "rgw"
    monkeypatch.setenv("CKPT_S3_SERVER", "minio")
    with pytest.raises(ValueError, match="minio"):
        s3_env.S3Env()


# -- what RGW does, through boto3 --

def test_put_get_list_through_the_proxy(s3):
    c = client(s3.endpoint_url)
    objects = {f"pgl/{name}": data(1000 + i * 777, name) for i, name in enumerate(["a", "b/c", "b/d", "e f"])}
    for key, value in objects.items():
        c.put_object(Bucket=s3.bucket, Key=key, Body=value)
    for key, value in objects.items():
        assert c.get_object(Bucket=s3.bucket, Key=key)["Body"].read() == value
    assert c.get_object(Bucket=s3.bucket, Key="pgl/a", Range="bytes=10-19")["Body"].read() == objects["pgl/a"][10:20]
    assert keys(c, s3.bucket, Prefix="pgl/") == sorted(objects)
    listed = c.list_objects_v2(Bucket=s3.bucket, Prefix="pgl/", Delimiter="/")
    assert [item["Key"] for item in listed["Contents"]] == ["pgl/a", "pgl/e f"]
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["pgl/b/"]
    assert [(e["kind"], e["status"]) for e in s3.log()][:4] == [("put", 200)] * 4


def test_multipart_upload_with_a_small_threshold(s3, direct, tmp_path):
    source = tmp_path / "big"
    source.write_bytes(data(12 * MIB + 5, "multipart"))
    config = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, use_threads=False)
    client(s3.endpoint_url).upload_file(str(source), s3.bucket, "mp/big", Config=config)
    head = direct.head_object(Bucket=s3.bucket, Key="mp/big")
    assert head["ContentLength"] == 12 * MIB + 5
    assert head["ETag"].endswith('-3"'), head["ETag"]  # S3's multipart ETag: md5 of the parts' md5s, "-<parts>"
    back = tmp_path / "back"
    direct.download_file(s3.bucket, "mp/big", str(back))
    assert back.read_bytes() == source.read_bytes()
    assert [e["kind"] for e in s3.log()] == ["initiate", "upload_part", "upload_part", "upload_part", "complete"]


def test_list_multipart_uploads_sees_a_created_upload_until_it_is_aborted(s3, direct):
    upload = direct.create_multipart_upload(Bucket=s3.bucket, Key="lmu/x")["UploadId"]
    assert ("lmu/x", upload) in uploads(direct, s3.bucket)
    listed = direct.list_multipart_uploads(Bucket=s3.bucket, Prefix="lmu/")
    assert [(u["Key"], u["UploadId"]) for u in listed["Uploads"]] == [("lmu/x", upload)]
    direct.abort_multipart_upload(Bucket=s3.bucket, Key="lmu/x", UploadId=upload)
    assert ("lmu/x", upload) not in uploads(direct, s3.bucket)


def test_upload_part_copy_with_a_copy_source_range(s3, direct):
    value = data(11 * MIB, "copy")
    direct.put_object(Bucket=s3.bucket, Key="upc/source", Body=value)
    upload = direct.create_multipart_upload(Bucket=s3.bucket, Key="upc/copy")["UploadId"]
    parts = []
    for number, (first, last) in enumerate([(0, 5 * MIB - 1), (5 * MIB, 11 * MIB - 2)], start=1):
        done = direct.upload_part_copy(Bucket=s3.bucket, Key="upc/copy", UploadId=upload, PartNumber=number,
                                       CopySource={"Bucket": s3.bucket, "Key": "upc/source"},
                                       CopySourceRange=f"bytes={first}-{last}")
        parts.append({"PartNumber": number, "ETag": done["CopyPartResult"]["ETag"]})
    direct.complete_multipart_upload(Bucket=s3.bucket, Key="upc/copy", UploadId=upload,
                                     MultipartUpload={"Parts": parts})
    assert direct.get_object(Bucket=s3.bucket, Key="upc/copy")["Body"].read() == value[:11 * MIB - 1]


def test_rgw_checks_signatures(s3):
    with pytest.raises(ClientError) as refused:
        client(s3.server_url, secret="not-the-secret").put_object(Bucket=s3.bucket, Key="sig/x", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_a_bucket_is_created_and_emptied_of_objects_and_uploads_at_start(s3, direct):
    bucket = f"ckpt-infra-{uuid.uuid4().hex[:12]}"
    try:
        with s3_env.S3Env(buckets=[bucket], server="rgw") as first:
            assert first.bucket == bucket  # named: not made unique
            c = client(first.server_url)
            c.put_object(Bucket=bucket, Key="left/over", Body=b"from an earlier run")
            c.create_multipart_upload(Bucket=bucket, Key="left/unfinished")
            assert keys(c, bucket) == ["left/over"] and len(uploads(c, bucket)) == 1
            if not first.shared:
                pytest.skip("a cluster of its own is gone with its S3Env: run with CKPT_RGW_DIR to see one reused")
        with s3_env.S3Env(buckets=[bucket], server="rgw") as second:
            c = client(second.server_url)
            assert (keys(c, bucket), uploads(c, bucket)) == ([], [])
    finally:
        if s3.shared:
            s3_env.remove_bucket(direct, bucket)


def test_a_shared_clusters_default_bucket_is_removed_at_the_end(s3, direct):
    if not s3.shared:
        pytest.skip("needs a shared cluster (CKPT_RGW_DIR)")
    with s3_env.S3Env(server="rgw") as other:
        assert other.bucket != s3.bucket and other.server_port != s3.server_port
        client(other.server_url).put_object(Bucket=other.bucket, Key="k", Body=b"v")
        other.kill_server()  # removed all the same, through the cluster's own gateway
        gateway_dir = other.gateway.dir
        assert gateway_dir.is_dir()
    assert other.bucket not in [b["Name"] for b in direct.list_buckets()["Buckets"]]
    assert not gateway_dir.exists()


# -- the gateway killed and started again --

def control(s3, method, action=""):
    request = urllib.request.Request(s3.environ["CKPT_S3_SERVER_CONTROL"] + action, method=method,
                                     data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=150) as response:
        return json.load(response)


def test_the_gateway_is_killed_and_started_again_with_the_data_kept(s3, direct):
    direct.put_object(Bucket=s3.bucket, Key="kill/kept", Body=b"before the kill")
    before = control(s3, "GET")
    assert before["running"] and before["port"] == s3.server_port
    pid = before["pid"]
    assert control(s3, "POST", "/kill") == {"running": False, "port": s3.server_port, "pid": None}
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2][:3]
    with pytest.raises(EndpointConnectionError):
        direct.head_object(Bucket=s3.bucket, Key="kill/kept")
    began = time.monotonic()
    after = control(s3, "POST", "/start")
    seconds = time.monotonic() - began
    assert after["running"] and after["port"] == s3.server_port and after["pid"] != pid
    assert seconds < 20, f"the gateway took {seconds:.1f} s to start again"
    assert direct.get_object(Bucket=s3.bucket, Key="kill/kept")["Body"].read() == b"before the kill"


def test_through_the_proxy_a_killed_gateway_is_a_reset_connection(s3):
    s3.kill_server()
    c = client(s3.endpoint_url)
    with pytest.raises(Exception) as failed:
        c.head_object(Bucket=s3.bucket, Key="anything")
    assert "Connection" in type(failed.value).__name__ or "connection" in str(failed.value).lower(), failed.value
    assert s3.log()[-1]["error"].startswith("upstream: ")
    s3.start_server()
    c.put_object(Bucket=s3.bucket, Key="after/restart", Body=b"v")


# -- the fault proxy in front of RGW --

def test_the_fault_proxy_injects_faults_in_front_of_rgw(s3, direct):
    c = client(s3.endpoint_url)
    s3.add_fault(kind="put", action="status", status=503)
    with pytest.raises(ClientError) as refused:
        c.put_object(Bucket=s3.bucket, Key="fault/x", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "SlowDown"
    s3.add_fault(kind="put", action="reset", at="response")
    with pytest.raises(Exception):
        c.put_object(Bucket=s3.bucket, Key="fault/y", Body=b"done, answer lost")
    c.put_object(Bucket=s3.bucket, Key="fault/z", Body=b"z")
    assert [(e["kind"], e["fault"], e["upstream_status"]) for e in s3.log()] == [
        ("put", "status", None), ("put", "reset", 200), ("put", None, 200)]
    assert keys(direct, s3.bucket, Prefix="fault/") == ["fault/y", "fault/z"]


def test_the_proxy_checking_signatures_passes_what_rgw_accepts():
    """Both check: the proxy (sigv4.py) and, behind it, RGW, which sees the Host header the client signed."""
    try:
        with s3_env.S3Env(server="rgw", verify_sigv4=True) as env:
            c = client(env.endpoint_url)
            c.put_object(Bucket=env.bucket, Key="v/x", Body=b"signed")
            assert c.get_object(Bucket=env.bucket, Key="v/x")["Body"].read() == b"signed"
            with pytest.raises(ClientError) as refused:
                client(env.endpoint_url, secret="wrong").get_object(Bucket=env.bucket, Key="v/x")
            assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
            assert [(e["kind"], e["fault"], e["upstream_status"]) for e in env.log()] == [
                ("put", None, 200), ("get", None, 200), ("get", "sigv4", None)]
    except s3_env.Unavailable as why:
        pytest.skip(str(why))


# -- curl's SigV4 and the Expect header (libcurl before 8.3 signs an emptied header it does not send) --

def curl(endpoint, *args):
    if not shutil.which("curl"):
        pytest.skip("no curl program")
    done = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
                           "--user", f"{rgw.ACCESS_KEY}:{rgw.SECRET_KEY}", *args, endpoint], capture_output=True,
                          text=True,
                          timeout=60)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_curl_signing_an_emptied_expect_header_is_refused_by_rgw(s3, direct, tmp_path):
    payload = tmp_path / "payload"
    payload.write_bytes(data(100_000, "expect"))
    url = f"{s3.server_url}/{s3.bucket}/expect/"
    unsigned = ["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    status, body = curl(url + "suppressed", "-T", str(payload), "-H", "Expect:", *unsigned)
    assert status == 403 and "<Code>SignatureDoesNotMatch</Code>" in body, body
    status, body = curl(url + "sent", "-T", str(payload), *unsigned)
    assert (status, body) == (200, "")
    assert direct.get_object(Bucket=s3.bucket, Key="expect/sent")["Body"].read() == payload.read_bytes()
    assert keys(direct, s3.bucket, Prefix="expect/") == ["expect/sent"]
    # Through the fault proxy, which forwards the Host header as the client sent (and signed) it.
    status, body = curl(f"{s3.proxy_url}/{s3.bucket}/expect/proxied", "-T", str(payload), *unsigned)
    assert (status, body) == (200, "")
    assert direct.head_object(Bucket=s3.bucket, Key="expect/proxied")["ContentLength"] == 100_000


# -- the programs --

def run(argv, env=None, timeout=240):
    return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, env=env,
                          timeout=timeout)


CHILD = """
import json, os, sys
names = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "CKPT_S3_TEST_BUCKET",
         "CKPT_S3_PROXY", "CKPT_S3_SERVER_CONTROL", "CKPT_S3_DATA_DIR", "CKPT_S3_SERVER", "AWS_SESSION_TOKEN")
sys.path.insert(0, sys.argv[1])
import rgw
c = rgw.s3_client(os.environ["AWS_ENDPOINT_URL"])
c.put_object(Bucket=os.environ["CKPT_S3_TEST_BUCKET"], Key="k", Body=b"v")
print(json.dumps({"env": {name: os.environ.get(name) for name in names},
                  "buckets": sorted(b["Name"] for b in c.list_buckets()["Buckets"])}))
sys.exit(3)
"""


@pytest.fixture
def short_tmp():
    """A temporary directory with a short name: the daemons' sockets under it must fit in 107 bytes."""
    where = Path(tempfile.mkdtemp(prefix="rgw-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_the_runner_with_a_cluster_of_its_own(short_tmp):
    """Without CKPT_RGW_DIR, s3_env.py --server rgw starts a cluster for the command, and removes it."""
    if rgw.unavailable():
        pytest.skip(rgw.unavailable())
    tmp_path = short_tmp
    environ = {name: value for name, value in os.environ.items() if name not in ("CKPT_RGW_DIR", "CKPT_S3_SERVER")}
    environ.update(AWS_SESSION_TOKEN="from the user", TMPDIR=str(tmp_path))
    done = run([s3_env.__file__, "--server", "rgw", "--proxy", "--bucket", "first", "--bucket", "second", "--",
                sys.executable, "-c", CHILD, s3_env.HERE], env=environ)
    assert done.returncode == 3, done
    seen = json.loads(done.stdout)
    env = seen["env"]
    assert (env["CKPT_S3_SERVER"], env["CKPT_S3_TEST_BUCKET"], env["CKPT_S3_DATA_DIR"]) == ("rgw", "first", None)
    assert env["AWS_ENDPOINT_URL"] == env["CKPT_S3_PROXY"] and env["AWS_SESSION_TOKEN"] is None
    assert seen["buckets"] == ["first", "second"]
    assert list(tmp_path.iterdir()) == []  # the cluster's directory, removed
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and rgw._alive(int(pid), str(tmp_path))]


def test_the_runner_skips_with_77_when_ceph_is_missing():
    done = run([s3_env.__file__, "--server", "rgw", "--", "true"], env={**os.environ, "PATH": "/nonexistent"})
    assert done.returncode == 77, done
    assert done.stdout.startswith("SKIP: Ceph is not installed (ceph-common, ceph-mon, ceph-osd, radosgw missing")


def test_rgw_py_starts_and_stops_a_cluster_by_pid(short_tmp):
    if rgw.unavailable():
        pytest.skip(rgw.unavailable())
    where = short_tmp / "cluster"
    began = time.monotonic()
    done = run([rgw.__file__, "start", "--dir", where])
    seconds = time.monotonic() - began
    try:
        assert done.returncode == 0, done
        state = json.loads((where / "state.json").read_text())
        assert sorted(state["pids"]) == ["mon", "osd", "rgw"]
        assert (state["access_key"], state["secret_key"], state["region"]) == ("S3RVER", "S3RVER", "us-east-1")
        assert state["endpoint"] == f"http://127.0.0.1:{state['port']}"
        marker = str(where / "ceph.conf")
        assert all(rgw._alive(pid, marker) for pid in state["pids"].values())
        c = client(state["endpoint"])
        c.create_bucket(Bucket="started")
        c.put_object(Bucket="started", Key="k", Body=b"v")
        assert c.get_object(Bucket="started", Key="k")["Body"].read() == b"v"
        status = run([rgw.__file__, "status", "--dir", where])
        assert status.returncode == 0 and json.loads(status.stdout)["running"] == {"mon": True, "osd": True,
                                                                                    "rgw": True}
        again = run([rgw.__file__, "start", "--dir", where])
        assert again.returncode == 1 and "runs in" in again.stdout  # a running cluster is not started over
        print(f"rgw.py start: {seconds:.1f} s, peak RSS {json.loads(status.stdout)['peak_rss_kib'] >> 10} MiB")
    finally:
        stopped = run([rgw.__file__, "stop", "--dir", where])
    assert stopped.returncode == 0, stopped
    assert not where.exists()
    assert not any(rgw._alive(pid, marker) for pid in state["pids"].values())


if __name__ == "__main__":
    why = rgw.unavailable()
    if why:
        print(f"SKIP: {why}")
        sys.exit(rgw.SKIP)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-s", __file__] + sys.argv[1:]))
