#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The S3 test infrastructure itself: server.js (s3rver and what it adds), fault_proxy.py and s3_env.py, driven with
the curl program (the libcurl that ckpt's S3 storage uses, signing as it signs).

    /usr/bin/python3 tests/s3/test_infra.py     (exits 77 when node or tests/s3/node_modules is missing)
"""

import datetime
import email.message
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import s3_env  # noqa: E402
import sigv4  # noqa: E402

BUCKET = s3_env.DEFAULT_BUCKET
MIB = 1024 * 1024
CURL_PARTIAL_FILE, CURL_TIMEOUT, CURL_SEND_ERROR, CURL_RECV_ERROR = 18, 28, 55, 56


@pytest.fixture(scope="module")
def s3():
    try:
        with s3_env.S3Env(buckets=[BUCKET], verify_sigv4=True) as env:
            yield env
    except s3_env.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(autouse=True)
def clean_proxy(request):
    if "s3" in request.fixturenames:
        env = request.getfixturevalue("s3")
        env.start_server()
        env.clear_faults()
        env.clear_log()
    yield


class Reply:
    def __init__(self, exit_code, status, headers, body, stderr, seconds):
        self.exit_code, self.status, self.headers, self.body = exit_code, status, headers, body
        self.stderr, self.seconds = stderr, seconds

    def xml(self):
        return ET.fromstring(self.body)

    def s3_code(self):
        return self.xml().findtext("Code")

    def __repr__(self):
        return f"Reply(exit={self.exit_code}, status={self.status}, body={self.body[:300]!r}, {self.stderr!r})"


def curl(url, *args, tmp, secret=s3_env.SECRET_KEY, region=s3_env.REGION, sign=True, max_time=30):
    """One request with the curl program, signed with SigV4 as ckpt's S3 storage signs (UNSIGNED-PAYLOAD)."""
    body, headers = tmp / "curl-body", tmp / "curl-headers"
    for path in (body, headers):
        path.unlink(missing_ok=True)
    command = ["curl", "-sS", "-o", str(body), "-D", str(headers), "-w", "%{http_code}", "--max-time", str(max_time)]
    if sign:
        command += ["--aws-sigv4", f"aws:amz:{region}:s3", "--user", f"{s3_env.ACCESS_KEY}:{secret}",
                    "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    started = time.monotonic()
    done = subprocess.run(command + list(args) + [url], capture_output=True, text=True)
    seconds = time.monotonic() - started
    parsed = {}
    if headers.exists():
        # The last block: a 100 Continue comes first when curl waited for one.
        block = headers.read_bytes().decode("latin-1").strip().split("\r\n\r\n")[-1]
        for line in block.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            parsed[name.strip().lower()] = value.strip()
    return Reply(done.returncode, int(done.stdout or 0), parsed, body.read_bytes() if body.exists() else b"",
                 done.stderr, seconds)


def write(tmp, name, data):
    path = tmp / name
    path.write_bytes(data)
    return str(path)


def payload(size, seed):
    return random.Random(seed).randbytes(size)


def md5(data):
    return hashlib.md5(data).hexdigest()


def put_object(s3, tmp, key, data, via=None):
    reply = curl(f"{via or s3.endpoint_url}/{BUCKET}/{key}", "-T", write(tmp, "upload", data), tmp=tmp)
    assert (reply.exit_code, reply.status) == (0, 200), reply
    return reply


def initiate(s3, tmp, key, via=None):
    reply = curl(f"{via or s3.endpoint_url}/{BUCKET}/{key}?uploads=", "-X", "POST", tmp=tmp)
    assert reply.status == 200, reply
    return reply.xml().findtext("UploadId")


def upload_part(s3, tmp, key, upload_id, number, data, via=None):
    reply = curl(f"{via or s3.endpoint_url}/{BUCKET}/{key}?partNumber={number}&uploadId={upload_id}",
                 "-T", write(tmp, f"part{number}", data), tmp=tmp)
    assert reply.status == 200, reply
    return reply.headers["etag"]


def completion(parts):
    return "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag></Part>" for number, etag in parts
    ) + "</CompleteMultipartUpload>"


def open_uploads(s3, tmp, prefix=""):
    reply = curl(f"{s3.endpoint_url}/{BUCKET}?prefix={urllib.parse.quote(prefix, safe='')}&uploads=", tmp=tmp)
    assert reply.status == 200, reply
    return [(upload.findtext("{*}Key"), upload.findtext("{*}UploadId")) for upload in reply.xml().iterfind("{*}Upload")]


def list_keys(s3, tmp, query):
    reply = curl(f"{s3.endpoint_url}/{BUCKET}?{query}", tmp=tmp)
    assert reply.status == 200, reply
    root = reply.xml()
    return ([element.findtext("{*}Key") for element in root.iterfind("{*}Contents")],
            [element.findtext("{*}Prefix") for element in root.iterfind("{*}CommonPrefixes")])


def control(url, method="POST", value=None):
    data = None if value is None else json.dumps(value).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


# -- the server: what s3rver does, and what server.js adds --

def test_an_object_put_reads_back_whole_by_range_and_in_head(s3, tmp_path):
    data = payload(100_000, 1)
    put_object(s3, tmp_path, "dir/object.bin", data)
    whole = curl(f"{s3.endpoint_url}/{BUCKET}/dir/object.bin", tmp=tmp_path)
    assert (whole.status, whole.body) == (200, data)
    assert whole.headers["etag"] == f'"{md5(data)}"'
    part = curl(f"{s3.endpoint_url}/{BUCKET}/dir/object.bin", "-H", "Range: bytes=1000-1999", tmp=tmp_path)
    assert (part.status, part.body) == (206, data[1000:2000])
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    head = curl(f"{s3.endpoint_url}/{BUCKET}/dir/object.bin", "-I", tmp=tmp_path)
    assert (head.status, head.headers["content-length"], head.headers["etag"]) == (200, "100000", f'"{md5(data)}"')
    missing = curl(f"{s3.endpoint_url}/{BUCKET}/dir/none.bin", tmp=tmp_path)
    assert (missing.status, missing.s3_code()) == (404, "NoSuchKey")


def test_listing_v2_gives_keys_under_a_prefix_and_directories_as_common_prefixes(s3, tmp_path):
    for key in ("list/a/1", "list/a/2", "list/b/3", "list/c"):
        put_object(s3, tmp_path, key, key.encode())
    assert list_keys(s3, tmp_path, "delimiter=%2F&list-type=2&prefix=list%2F") == (["list/c"], ["list/a/", "list/b/"])
    assert list_keys(s3, tmp_path, "list-type=2&prefix=list%2Fa%2F") == (["list/a/1", "list/a/2"], [])


def test_a_multipart_upload_is_listed_until_its_completion_makes_the_object(s3, tmp_path):
    first, last = payload(5 * MIB, 2), payload(1000, 3)
    upload_id = initiate(s3, tmp_path, "multi/object")
    etags = [upload_part(s3, tmp_path, "multi/object", upload_id, 1, first),
             upload_part(s3, tmp_path, "multi/object", upload_id, 2, last)]
    assert etags == [f'"{md5(first)}"', f'"{md5(last)}"']
    assert open_uploads(s3, tmp_path, "multi/") == [("multi/object", upload_id)]
    assert curl(f"{s3.endpoint_url}/{BUCKET}/multi/object", tmp=tmp_path).status == 404  # not visible before

    done = curl(f"{s3.endpoint_url}/{BUCKET}/multi/object?uploadId={upload_id}", "-X", "POST",
                "--data-binary", completion(zip((1, 2), etags)), tmp=tmp_path)
    assert done.status == 200, done
    assert done.xml().findtext("Key") == "multi/object"
    assert curl(f"{s3.endpoint_url}/{BUCKET}/multi/object", tmp=tmp_path).body == first + last
    assert open_uploads(s3, tmp_path, "multi/") == []


def test_an_aborted_upload_leaves_no_listing_and_no_folder_and_takes_no_more_parts(s3, tmp_path):
    upload_id = initiate(s3, tmp_path, "aborted/object")
    upload_part(s3, tmp_path, "aborted/object", upload_id, 1, b"part one")
    folder = Path(s3.data_dir) / BUCKET / "._S3rver_uploads" / upload_id
    assert sorted(path.name for path in folder.iterdir()) == ["1", "1.md5", "key", "metadata"]

    url = f"{s3.endpoint_url}/{BUCKET}/aborted/object?uploadId={upload_id}"
    abort = curl(url, "-X", "DELETE", tmp=tmp_path)
    assert (abort.status, abort.body) == (204, b"")
    assert open_uploads(s3, tmp_path, "aborted/") == []
    assert not folder.exists()

    again = curl(url, "-X", "DELETE", tmp=tmp_path)
    assert (again.status, again.s3_code()) == (404, "NoSuchUpload")
    part = curl(f"{s3.endpoint_url}/{BUCKET}/aborted/object?partNumber=2&uploadId={upload_id}",
                "-T", write(tmp_path, "p", b"late part"), tmp=tmp_path)
    assert (part.status, part.s3_code()) == (404, "NoSuchUpload")
    assert not folder.exists()
    complete = curl(url, "-X", "POST", "--data-binary", completion([(1, '"x"')]), tmp=tmp_path)
    assert (complete.status, complete.s3_code()) == (404, "NoSuchUpload")
    other_key = initiate(s3, tmp_path, "aborted/mine")
    wrong = curl(f"{s3.endpoint_url}/{BUCKET}/aborted/other?uploadId={other_key}", "-X", "DELETE", tmp=tmp_path)
    assert (wrong.status, wrong.s3_code()) == (404, "NoSuchUpload")


def test_a_completion_is_refused_for_a_wrong_etag_a_wrong_order_or_a_small_part(s3, tmp_path):
    upload_id = initiate(s3, tmp_path, "checked/object")
    etags = [upload_part(s3, tmp_path, "checked/object", upload_id, 1, b"small"),
             upload_part(s3, tmp_path, "checked/object", upload_id, 2, b"last")]
    url = f"{s3.endpoint_url}/{BUCKET}/checked/object?uploadId={upload_id}"
    cases = {"InvalidPart": [(1, '"0123"'), (2, etags[1])],
             "InvalidPartOrder": [(2, etags[1]), (1, etags[0])],
             "EntityTooSmall": [(1, etags[0]), (2, etags[1])]}
    for code, parts in cases.items():
        reply = curl(url, "-X", "POST", "--data-binary", completion(parts), tmp=tmp_path)
        assert (reply.status, reply.s3_code()) == (400, code), reply
    assert open_uploads(s3, tmp_path, "checked/") == [("checked/object", upload_id)]


def test_if_match_reads_only_the_object_of_that_etag(s3, tmp_path):
    put_object(s3, tmp_path, "pinned", b"version one")
    url = f"{s3.endpoint_url}/{BUCKET}/pinned"
    assert curl(url, "-H", f'If-Match: "{md5(b"version one")}"', tmp=tmp_path).body == b"version one"
    put_object(s3, tmp_path, "pinned", b"version two")
    stale = curl(url, "-H", f'If-Match: "{md5(b"version one")}"', "-H", "Range: bytes=0-3", tmp=tmp_path)
    assert (stale.status, stale.s3_code()) == (412, "PreconditionFailed")
    head = curl(url, "-I", "-H", f'If-Match: "{md5(b"version one")}"', tmp=tmp_path)
    assert head.status == 412


def test_a_server_killed_during_a_put_keeps_the_old_object_and_its_etag(s3, tmp_path):
    put_object(s3, tmp_path, "atomic/object", b"the old object")
    objects = Path(s3.data_dir) / BUCKET / "atomic"
    # Half of a PUT straight to the server (it takes unsigned requests): s3rver writes while the body arrives.
    with socket.create_connection(("127.0.0.1", s3.server_port)) as connection:
        connection.sendall(f"PUT /{BUCKET}/atomic/object HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           f"Content-Length: {2 * MIB}\r\n\r\n".encode() + b"n" * MIB)
        deadline = time.monotonic() + 10
        while not list(objects.glob("*.partial")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert list(objects.glob("*.partial")), "the server did not start writing the new object"
        s3.kill_server()
    s3.start_server()
    reply = curl(f"{s3.endpoint_url}/{BUCKET}/atomic/object", tmp=tmp_path)
    assert (reply.status, reply.body, reply.headers["etag"]) == (200, b"the old object", f'"{md5(b"the old object")}"')
    assert list_keys(s3, tmp_path, "list-type=2&prefix=atomic%2F") == (["atomic/object"], [])


def test_the_control_url_kills_and_restarts_the_server_on_its_port_with_its_objects(s3, tmp_path):
    put_object(s3, tmp_path, "survivor", b"still here")
    url = s3.environ["CKPT_S3_SERVER_CONTROL"]
    status, state = control(url + "/kill")
    assert (status, state["running"], state["port"]) == (200, False, s3.server_port)
    down = curl(f"{s3.endpoint_url}/{BUCKET}/survivor", tmp=tmp_path)
    assert (down.exit_code, down.status) in ((CURL_RECV_ERROR, 0), (52, 0)), down
    assert s3.log()[-1]["error"].startswith("upstream:")
    status, state = control(url + "/start")
    assert (status, state["running"], state["port"]) == (200, True, s3.server_port)
    assert control(url, method="GET")[1] == state
    assert curl(f"{s3.endpoint_url}/{BUCKET}/survivor", tmp=tmp_path).body == b"still here"
    assert curl(f"{s3.server_url}/{BUCKET}/survivor", tmp=tmp_path).body == b"still here"


# -- the proxy's faults, as curl sees them --

def prepare(s3, tmp, kind):
    """A request of the given kind for the fault tests: (url, curl arguments, key). What it needs (an object, an
    upload) is made straight at the server, past the proxy, its faults and its log."""
    key = f"faults/{kind}/{random.randrange(1 << 30)}"
    url = f"{s3.endpoint_url}/{BUCKET}/{key}"
    if kind in ("get", "head", "delete"):
        put_object(s3, tmp, key, payload(3000, 4), via=s3.server_url)
    if kind in ("upload_part", "complete", "abort"):
        upload_id = initiate(s3, tmp, key, via=s3.server_url)
        etag = upload_part(s3, tmp, key, upload_id, 1, b"only part", via=s3.server_url)
    if kind == "put":
        return url, ["-T", write(tmp, "body", payload(3000, 5))], key
    if kind == "upload_part":
        return f"{url}?partNumber=2&uploadId={upload_id}", ["-T", write(tmp, "body", payload(3000, 6))], key
    if kind == "initiate":
        return f"{url}?uploads=", ["-X", "POST"], key
    if kind == "complete":
        return f"{url}?uploadId={upload_id}", ["-X", "POST", "--data-binary", completion([(1, etag)])], key
    if kind == "abort":
        return f"{url}?uploadId={upload_id}", ["-X", "DELETE"], key
    if kind == "list":
        return f"{s3.endpoint_url}/{BUCKET}?list-type=2&prefix=faults%2F", [], key
    if kind == "list_uploads":
        return f"{s3.endpoint_url}/{BUCKET}?uploads=", [], key
    return url, {"get": [], "head": ["-I"], "delete": ["-X", "DELETE"]}[kind], key


FAULT_KINDS = ["put", "upload_part", "initiate", "complete", "abort", "get", "head", "list", "list_uploads", "delete"]
WITH_BODY = {"initiate", "complete", "get", "list", "list_uploads"}  # responses that have a body to truncate


def only_entry(s3, kind):
    entries = [entry for entry in s3.log() if entry["kind"] == kind]
    assert len(entries) == 1, s3.log()
    return entries[0]


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_status_fault_answers_with_an_s3_error_without_forwarding(s3, tmp_path, kind):
    url, args, _ = prepare(s3, tmp_path, kind)
    s3.add_fault(kind=kind, action="status", status=503, s3_code="SlowDown")
    reply = curl(url, *args, tmp=tmp_path)
    assert (reply.exit_code, reply.status) == (0, 503), reply
    if kind != "head":
        assert reply.s3_code() == "SlowDown"
    entry = only_entry(s3, kind)
    assert (entry["status"], entry["upstream_status"], entry["fault"], entry["error"]) == (503, None, "status",
                                                                                            "SlowDown")
    again = curl(url, *args, tmp=tmp_path)  # times defaults to 1
    assert again.status in (200, 204), again


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_reset_fault_ends_the_connection_before_forwarding(s3, tmp_path, kind):
    url, args, key = prepare(s3, tmp_path, kind)
    s3.add_fault(kind=kind, action="reset")
    reply = curl(url, *args, tmp=tmp_path)
    assert reply.exit_code in (CURL_SEND_ERROR, CURL_RECV_ERROR) and reply.status == 0, reply
    assert "reset" in reply.stderr.lower() or "send failure" in reply.stderr.lower(), reply
    entry = only_entry(s3, kind)
    assert (entry["status"], entry["upstream_status"], entry["fault"]) == (None, None, "reset")
    if kind == "put":
        assert curl(f"{s3.server_url}/{BUCKET}/{key}", tmp=tmp_path).status == 404


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_stall_fault_holds_the_request_until_the_client_gives_up(s3, tmp_path, kind):
    url, args, _ = prepare(s3, tmp_path, kind)
    s3.add_fault(kind=kind, action="stall")
    reply = curl(url, *args, tmp=tmp_path, max_time=1)
    assert (reply.exit_code, reply.status) == (CURL_TIMEOUT, 0), reply
    assert reply.body == b""
    assert only_entry(s3, kind)["fault"] == "stall"


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_truncate_fault_cuts_the_response_body(s3, tmp_path, kind):
    url, args, _ = prepare(s3, tmp_path, kind)
    s3.add_fault(kind=kind, action="truncate", bytes=10)
    reply = curl(url, *args, tmp=tmp_path)
    entry = only_entry(s3, kind)
    assert entry["fault"] == "truncate" and entry["upstream_status"] == entry["status"]
    if kind in WITH_BODY:
        assert (reply.exit_code, len(reply.body)) == (CURL_PARTIAL_FILE, 10), reply
        assert "transfer closed" in reply.stderr, reply
    else:  # nothing to cut: the answer arrives whole
        assert (reply.exit_code, reply.status) == (0, entry["status"]), reply


def test_a_reset_in_the_body_forwards_part_of_it_and_the_server_keeps_nothing(s3, tmp_path):
    url, args, key = prepare(s3, tmp_path, "put")
    s3.add_fault(kind="put", action="reset", at="body", bytes=1000)
    reply = curl(url, *args, tmp=tmp_path)
    assert reply.exit_code in (CURL_SEND_ERROR, CURL_RECV_ERROR), reply
    assert curl(f"{s3.server_url}/{BUCKET}/{key}", tmp=tmp_path).status == 404
    # The server removes its partial file once it notices the aborted request: soon, but later on a busy machine.
    folder = Path(s3.data_dir) / BUCKET / "faults" / "put"
    deadline = time.monotonic() + 10
    while list(folder.glob("*.partial")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(folder.glob("*.partial"))


def test_a_reset_after_the_response_loses_only_the_answer(s3, tmp_path):
    url, args, key = prepare(s3, tmp_path, "complete")
    s3.add_fault(kind="complete", action="reset", at="response")
    reply = curl(url, *args, tmp=tmp_path)
    assert reply.exit_code == CURL_RECV_ERROR, reply
    entry = only_entry(s3, "complete")
    assert (entry["status"], entry["upstream_status"]) == (None, 200)
    assert curl(f"{s3.server_url}/{BUCKET}/{key}", tmp=tmp_path).body == b"only part"
    retried = curl(url, *args, tmp=tmp_path)  # what a client that retries the completion meets
    assert (retried.status, retried.s3_code()) == (404, "NoSuchUpload")


def test_a_timed_stall_delays_the_request_and_then_forwards_it(s3, tmp_path):
    url, args, key = prepare(s3, tmp_path, "put")
    s3.add_fault(kind="put", action="stall", ms=700)
    reply = curl(url, *args, tmp=tmp_path)
    assert (reply.exit_code, reply.status) == (0, 200) and reply.seconds >= 0.7, reply
    assert curl(f"{s3.server_url}/{BUCKET}/{key}", tmp=tmp_path).status == 200


def test_a_stall_in_the_body_sends_the_first_bytes_and_then_nothing(s3, tmp_path):
    url, args, _ = prepare(s3, tmp_path, "get")
    s3.add_fault(kind="get", action="stall", bytes=100)
    reply = curl(url, *args, tmp=tmp_path, max_time=1)
    assert (reply.exit_code, reply.status, reply.body) == (CURL_TIMEOUT, 200, payload(3000, 4)[:100]), reply
    s3.add_fault(kind="get", action="stall", bytes=100, ms=300)
    reply = curl(url, *args, tmp=tmp_path)
    assert (reply.exit_code, reply.body) == (0, payload(3000, 4)), reply


def test_a_status_fault_on_a_body_curl_holds_back_for_100_continue(s3, tmp_path):
    key = "faults/expect"
    s3.add_fault(kind="put", action="status", status=500)
    reply = curl(f"{s3.endpoint_url}/{BUCKET}/{key}", "-T", write(tmp_path, "big", payload(2 * MIB, 7)),
                 "-H", "Expect: 100-continue", tmp=tmp_path)
    assert (reply.status, reply.s3_code()) == (500, "InternalError"), reply
    put_object(s3, tmp_path, key, payload(2 * MIB, 7))
    assert curl(f"{s3.endpoint_url}/{BUCKET}/{key}", tmp=tmp_path).body == payload(2 * MIB, 7)


def test_skip_times_and_path_decide_which_requests_a_rule_takes(s3, tmp_path):
    s3.add_fault(kind="get", action="status", status=500, skip=1, times=2, path_contains="/counted")
    s3.add_fault(kind="*", action="status", status=429, path_contains="/other")
    put_object(s3, tmp_path, "counted", b"x")
    statuses = [curl(f"{s3.endpoint_url}/{BUCKET}/counted", tmp=tmp_path).status for _ in range(5)]
    assert statuses == [200, 500, 500, 200, 200]
    assert curl(f"{s3.endpoint_url}/{BUCKET}/other", "-I", tmp=tmp_path).status == 429
    rules = s3.faults()
    assert [(rule["applied"], rule["remaining_times"]) for rule in rules] == [(2, 0), (1, 0)]
    s3.add_fault(kind="head", action="status", status=503, times=-1)
    assert [curl(f"{s3.endpoint_url}/{BUCKET}/counted", "-I", tmp=tmp_path).status for _ in range(3)] == [503] * 3
    s3.clear_faults()
    assert s3.faults() == []
    assert curl(f"{s3.endpoint_url}/{BUCKET}/counted", "-I", tmp=tmp_path).status == 200


def test_the_log_lists_every_request_and_clears(s3, tmp_path):
    put_object(s3, tmp_path, "logged/a%20b", b"x")
    curl(f"{s3.endpoint_url}/{BUCKET}?list-type=2&prefix=logged%2F", tmp=tmp_path)
    log = s3.log()
    assert [{name: entry[name] for name in ("kind", "method", "path", "query", "status", "fault")}
            for entry in log] == [
        {"kind": "put", "method": "PUT", "path": f"/{BUCKET}/logged/a%20b", "query": "", "status": 200,
         "fault": None},
        {"kind": "list", "method": "GET", "path": f"/{BUCKET}", "query": "list-type=2&prefix=logged%2F",
         "status": 200, "fault": None}]
    s3.clear_log()
    assert s3.log() == []


def test_the_control_endpoint_refuses_a_bad_rule_and_names_the_problem(s3):
    base = f"{s3.proxy_url}/__ckpt_proxy"
    assert control(f"{base}/faults", value={"kind": "put", "action": "explode"}) == (
        400, {"error": "action 'explode' is not one of status, reset, stall, truncate"})
    status, answer = control(f"{base}/faults", value={"kind": "puts", "action": "reset"})
    assert status == 400 and "kind 'puts'" in answer["error"]
    status, answer = control(f"{base}/faults", value={"kind": "put", "action": "status", "status": 503, "tmes": 2})
    assert (status, answer) == (400, {"error": "unknown field(s) ['tmes'] in rule {'kind': 'put', 'action': "
                                               "'status', 'status': 503, 'tmes': 2}"})
    status, answer = control(f"{base}/nothing", method="GET")
    assert status == 404 and "GET /__ckpt_proxy/log" in answer["error"]
    assert s3.faults() == []


def test_the_proxy_keeps_the_client_connection_alive_and_takes_chunked_bodies(s3, tmp_path):
    data = payload(300_000, 8)
    put_object(s3, tmp_path, "alive", data)
    url = f"{s3.endpoint_url}/{BUCKET}/alive"
    reused = subprocess.run(["curl", "-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null", "-o", "/dev/null",
                             "-w", "%{num_connects} ", url, url], capture_output=True, text=True)
    assert reused.stdout.split() == ["1", "0"], reused
    chunked = curl(f"{s3.endpoint_url}/{BUCKET}/chunked", "-T", write(tmp_path, "c", data),
                   "-H", "Transfer-Encoding: chunked", tmp=tmp_path)
    assert chunked.status == 200, chunked
    assert curl(f"{s3.server_url}/{BUCKET}/chunked", tmp=tmp_path).body == data


# -- SigV4 verification --

def test_sigv4_accepts_curls_signature_and_rejects_a_wrong_secret_region_or_none(s3, tmp_path):
    url = f"{s3.endpoint_url}/{BUCKET}/signed"
    assert curl(url, "-T", write(tmp_path, "s", b"signed"), tmp=tmp_path).status == 200
    wrong = curl(url, "-T", write(tmp_path, "s", b"forged"), secret="not-the-secret", tmp=tmp_path)
    assert (wrong.status, wrong.s3_code()) == (403, "SignatureDoesNotMatch")
    assert wrong.xml().findtext("CanonicalRequest").startswith(f"PUT\n/{BUCKET}/signed\n\nhost:")
    region = curl(url, region="eu-west-1", tmp=tmp_path)
    assert (region.status, region.s3_code()) == (400, "AuthorizationHeaderMalformed")
    unsigned = curl(url, sign=False, tmp=tmp_path)
    assert (unsigned.status, unsigned.s3_code()) == (403, "AccessDenied")
    assert [entry["upstream_status"] for entry in s3.log()] == [200, None, None, None]
    assert curl(url, tmp=tmp_path).body == b"signed"


def test_sigv4_refuses_a_path_signed_in_a_form_s3_does_not_compute(s3, tmp_path):
    # S3 signs the key encoded: "=" is %3D. curl signs the path as it is given, so a raw "=" fails, as at S3.
    put_object(s3, tmp_path, "step%3D1", b"x")
    assert curl(f"{s3.endpoint_url}/{BUCKET}/step%3D1", tmp=tmp_path).body == b"x"
    raw = curl(f"{s3.endpoint_url}/{BUCKET}/step=1", tmp=tmp_path)
    assert (raw.status, raw.s3_code()) == (403, "SignatureDoesNotMatch")


def test_sigv4_refuses_x_amz_headers_left_out_of_the_signature(s3, tmp_path):
    # curl signs the headers it is given; one added after signing cannot be shown with it, so build it by hand.
    headers = email.message.Message()
    headers["Host"] = "127.0.0.1"
    headers["x-amz-date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    headers["x-amz-meta-extra"] = "1"
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential=S3RVER/{headers['x-amz-date'][:8]}/us-east-1/s3/"
                                "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00")
    verifier = sigv4.SigV4Verifier("S3RVER", "S3RVER", "us-east-1")
    status, code, _, details = verifier.check("GET", "/b/k", "", headers)
    assert (status, code, details) == (403, "AccessDenied", (("HeadersNotSigned", "x-amz-meta-extra"),))


def test_sigv4_refuses_a_signed_header_that_was_not_sent():
    # What libcurl before 8.3 does with "Expect:" (set empty so that it is not sent): it signs "expect" anyway.
    # S3 and Ceph's RGW then compute another signature; so must the proxy, or it would pass what they refuse.
    headers = email.message.Message()
    headers["Host"] = "127.0.0.1"
    headers["x-amz-date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential=S3RVER/{headers['x-amz-date'][:8]}/us-east-1/s3/"
                                "aws4_request, SignedHeaders=expect;host;x-amz-content-sha256;x-amz-date, "
                                "Signature=00")
    verifier = sigv4.SigV4Verifier("S3RVER", "S3RVER", "us-east-1")
    status, code, message, details = verifier.check("PUT", "/b/k", "", headers)
    assert (status, code) == (403, "SignatureDoesNotMatch")
    assert "expect were not sent" in message
    assert ("SignedHeadersNotSent", "expect") in details


# AWS's published examples of SigV4 for S3 (the Signature Version 4 reference: "Examples of signature
# calculations"): their canonical requests and signatures are computed independently of this proxy.
AWS_EXAMPLE_KEY = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.mark.parametrize("path, query, extra, signature", [
    ("/test.txt", "", {"Range": "bytes=0-9"}, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
    ("/", "lifecycle", {}, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
    ("/", "max-keys=2&prefix=J", {}, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
    ("/", "prefix=J&max-keys=2", {}, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
])
def test_sigv4_verifies_aws_published_examples(path, query, extra, signature):
    headers = email.message.Message()
    headers["Host"] = "examplebucket.s3.amazonaws.com"
    for name, value in extra.items():
        headers[name] = value
    headers["x-amz-content-sha256"] = EMPTY_SHA256
    headers["x-amz-date"] = "20130524T000000Z"
    signed = ";".join(sorted(name.lower() for name in headers.keys()))
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={AWS_EXAMPLE_KEY[0]}/20130524/us-east-1/s3/"
                                f"aws4_request,SignedHeaders={signed},Signature={signature}")
    verifier = sigv4.SigV4Verifier(*AWS_EXAMPLE_KEY, "us-east-1")
    when = datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc)
    assert verifier.check("GET", path, query, headers, now=when) is None
    headers.replace_header("Host", "otherbucket.s3.amazonaws.com")
    assert verifier.check("GET", path, query, headers, now=when)[1] == "SignatureDoesNotMatch"


# -- the runner --

def run_runner(*args, env=None):
    return subprocess.run([sys.executable, str(Path(s3_env.__file__)), *args], capture_output=True, text=True,
                          env=env, timeout=120)


CHILD = """
import json, os, subprocess, sys, urllib.request
env = {name: os.environ.get(name) for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
       "AWS_REGION", "CKPT_S3_TEST_BUCKET", "CKPT_S3_PROXY", "CKPT_S3_SERVER_CONTROL", "CKPT_S3_DATA_DIR",
       "AWS_SESSION_TOKEN", "AWS_PROFILE")}
put = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
                      "--user", env["AWS_ACCESS_KEY_ID"] + ":" + env["AWS_SECRET_ACCESS_KEY"],
                      "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--data-binary", "hello", "-X", "PUT",
                      env["AWS_ENDPOINT_URL"] + "/" + env["CKPT_S3_TEST_BUCKET"] + "/k"], capture_output=True,
                      text=True).stdout
log = json.load(urllib.request.urlopen(env["CKPT_S3_PROXY"] + "/__ckpt_proxy/log"))
state = json.load(urllib.request.urlopen(env["CKPT_S3_SERVER_CONTROL"]))
print(json.dumps({"env": env, "put": put, "log": [entry["kind"] for entry in log], "state": state,
                  "files": sorted(os.listdir(env["CKPT_S3_DATA_DIR"]))}))
sys.exit(3)
"""


def test_the_runner_exports_the_environment_runs_the_command_and_returns_its_status():
    if s3_env.unavailable():
        pytest.skip(s3_env.unavailable())
    environ = {**os.environ, "AWS_SESSION_TOKEN": "from the user", "AWS_PROFILE": "users-own"}
    done = run_runner("--verify-sigv4", "--bucket", "first", "--bucket", "second", "--", sys.executable, "-c",
                      CHILD, env=environ)
    assert done.returncode == 3, done
    seen = json.loads(done.stdout)
    env = seen["env"]
    assert env["AWS_ENDPOINT_URL"] == env["CKPT_S3_PROXY"] and env["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_REGION"]) == ("S3RVER", "S3RVER",
                                                                                          "us-east-1")
    assert (env["CKPT_S3_TEST_BUCKET"], env["AWS_SESSION_TOKEN"], env["AWS_PROFILE"]) == ("first", None, None)
    assert env["CKPT_S3_SERVER_CONTROL"].endswith("/__ckpt_server")
    assert (seen["put"], seen["log"], seen["state"]["running"]) == ("200", ["put"], True)
    assert seen["files"] == ["first", "second"]
    assert not Path(env["CKPT_S3_DATA_DIR"]).exists()  # removed at the end


def test_the_runner_skips_with_77_when_node_is_missing():
    done = run_runner("--", "true", env={**os.environ, "PATH": "/nonexistent"})
    assert (done.returncode, done.stdout) == (77, "SKIP: node is not installed (scripts/deps s3 installs it)\n")


if __name__ == "__main__":
    why = s3_env.unavailable()
    if why:
        print(f"SKIP: {why}")
        sys.exit(s3_env.SKIP)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__] + sys.argv[1:]))
