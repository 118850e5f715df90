#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Runs a command, or a block of Python, against a real S3 server on 127.0.0.1 (tests/s3/README.md).

    s3_env.py [--server {s3rver,rgw}] [--proxy] [--verify-sigv4] [--bucket NAME]... -- COMMAND [ARG]...

Starts the server, and with --proxy (implied by --verify-sigv4) tests/s3/fault_proxy.py in front of it; runs COMMAND
with the environment below; stops everything, also when COMMAND fails or on Ctrl-C; exits with COMMAND's status.
The server (--server, else the environment's CKPT_S3_SERVER, else s3rver):
    s3rver  tests/s3/server.js over a data directory in a temporary directory; checks no signature
    rgw     Ceph's RADOS Gateway (tests/s3/rgw.py), which checks every signature as S3 does. When CKPT_RGW_DIR names
            the directory of a running cluster (rgw.py start --dir, ctest's fixture rgw), a gateway of this run's
            own over that cluster's mon and OSD (about 1 s), with a bucket of its own (ckpt-test-<hex>, removed at
            the end) unless --bucket names one; otherwise a cluster of its own (about 10 s).
The buckets are created when missing, and emptied (objects and unfinished multipart uploads) at start.
Without what the server needs (node and tests/s3/node_modules, scripts/deps s3; Ceph and boto3, scripts/deps rgw)
it prints "SKIP: <why>" and exits 77, ctest's SKIP_RETURN_CODE.

The environment (S3Env.environ):
    AWS_ENDPOINT_URL        where to send S3 requests: the proxy when there is one, else the server
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   S3RVER, S3RVER (RGW's user has the same keys)
    AWS_REGION              us-east-1
    AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE   empty files, so that no profile of the user's takes part
    CKPT_S3_TEST_BUCKET     the first bucket (created at start; "ckpt-test" without --bucket, ckpt-test-<hex> on
                            a shared RGW cluster)
    CKPT_S3_PROXY           the proxy's URL, for its /__ckpt_proxy/ endpoints (only with --proxy)
    CKPT_S3_SERVER_CONTROL  a URL: POST <it>/kill kills the server (SIGKILL), POST <it>/start starts it again on the
                            same port and data directory, GET <it> says {"running", "port", "pid"}; on RGW, the
                            gateway (the mon and the OSD, which hold the data, go on)
    CKPT_S3_SERVER          s3rver or rgw: which server this is
    CKPT_S3_DATA_DIR        s3rver's data directory (its layout: <bucket>/<key>._S3rver_object, ...); not set on RGW,
                            whose objects are in RADOS
AWS_SESSION_TOKEN, AWS_ENDPOINT_URL_S3, AWS_PROFILE, AWS_DEFAULT_REGION and AWS_MAX_ATTEMPTS are removed.

As a module (for pytest):

    import s3_env
    try:
        with s3_env.S3Env(proxy=True, verify_sigv4=True) as s3:   # server="rgw" for RGW
            subprocess.run(program, env={**os.environ, **s3.environ})
            s3.add_fault(kind="upload_part", action="status", status=503, times=2)
            s3.kill_server(); s3.start_server()
    except s3_env.Unavailable as why:
        pytest.skip(str(why))
"""

import argparse
import http.server
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import rgw  # noqa: E402

ACCESS_KEY = SECRET_KEY = "S3RVER"  # s3rver's built-in account
REGION = "us-east-1"
DEFAULT_BUCKET = "ckpt-test"
SKIP = 77
STARTUP_SECONDS = 30
REMOVED_VARIABLES = ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_REGION",
                     "AWS_MAX_ATTEMPTS")
SERVERS = ("s3rver", "rgw")
# Set by S3Env when it has a value, and removed from a child's environment when it has none (an outer run's).
OWN_VARIABLES = ("CKPT_S3_PROXY", "CKPT_S3_DATA_DIR")


class Unavailable(Exception):
    """The S3 test server cannot run on this machine; the message says why."""


def default_server():
    """CKPT_S3_SERVER, else s3rver."""
    server = os.environ.get("CKPT_S3_SERVER") or "s3rver"
    if server not in SERVERS:
        raise ValueError(f"CKPT_S3_SERVER={server!r}: it is one of {', '.join(SERVERS)}")
    return server


def unavailable(server=None):
    """Why the server (default_server() when None) cannot run here, or None."""
    if (server or default_server()) == "rgw":
        return rgw.unavailable()
    if not shutil.which("node"):
        return "node is not installed (scripts/deps s3 installs it)"
    if not (HERE / "node_modules" / "s3rver").is_dir():
        return "tests/s3/node_modules is missing (scripts/deps s3 runs npm ci there)"
    return None


def _spawn(argv, what):
    """Starts a child that prints "PORT <n>" once it listens; returns (process, n). The child's standard input is
    a pipe that only this process holds: when this process ends, however it ends, the child sees it close."""
    process = subprocess.Popen(argv + ["--exit-with-stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + STARTUP_SECONDS
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(remaining, 0))
        data = os.read(process.stdout.fileno(), 256) if ready else b""
        if not data:
            process.kill()
            status = process.wait()
            why = f"exited with status {status}" if ready else f"did not listen within {STARTUP_SECONDS} s"
            raise RuntimeError(f"{what} ({' '.join(argv)}) {why}; its errors are above")
        line += data
    word, _, port = line.decode().strip().partition(" ")
    if word != "PORT" or not port.isdigit():
        process.kill()
        process.wait()
        raise RuntimeError(f"{what} printed {line!r} instead of 'PORT <n>'")
    return process, int(port)


def _stop(process):
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class S3Env:
    """The server (and proxy) for the time of a `with` block. server: "s3rver" or "rgw" (None: default_server())."""

    def __init__(self, buckets=None, proxy=False, verify_sigv4=False, server=None):
        self.server_kind = server or default_server()
        if self.server_kind not in SERVERS:
            raise ValueError(f"server={self.server_kind!r}: it is one of {', '.join(SERVERS)}")
        self.named_buckets = bool(buckets)
        self.buckets = list(buckets or ()) or [DEFAULT_BUCKET]
        self.proxy = proxy or verify_sigv4
        self.verify_sigv4 = verify_sigv4
        self.lock = threading.Lock()
        self.server = self.proxy_process = self.control = None
        self.server_port = 0
        self.temporary = None
        self.data_dir = None
        self.cluster = self.gateway = None  # RGW: the cluster, and the gateway this S3Env talks to
        self.shared = False                 # RGW: the cluster is CKPT_RGW_DIR's, not this S3Env's own

    def __enter__(self):
        why = unavailable(self.server_kind)
        if why:
            raise Unavailable(why)
        self.temporary = Path(tempfile.mkdtemp(prefix="ckpt-s3-"))
        try:
            for name in ("aws-config", "aws-credentials"):
                (self.temporary / name).touch()
            if self.server_kind == "rgw":
                self._start_rgw()
            else:
                self.data_dir = self.temporary / "data"
                self.start_server()
            if self.proxy:
                argv = [sys.executable, str(HERE / "fault_proxy.py"), "--upstream", f"127.0.0.1:{self.server_port}",
                        "--region", REGION]
                if self.verify_sigv4:
                    argv += ["--verify-sigv4", f"{ACCESS_KEY}:{SECRET_KEY}"]
                self.proxy_process, self.proxy_port = _spawn(argv, "the fault proxy")
            self.control = _ControlServer(self)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.control:
            self.control.stop()
            self.control = None
        _stop(self.proxy_process)
        self.proxy_process = None
        with self.lock:
            _stop(self.server)
            self.server = None
            self._stop_rgw()
        if self.temporary:
            shutil.rmtree(self.temporary, ignore_errors=True)
            self.temporary = None

    # -- RGW --

    def _start_rgw(self):
        shared_dir = os.environ.get("CKPT_RGW_DIR")
        if shared_dir and (Path(shared_dir) / rgw.STATE).exists():
            # A gateway of this S3Env's own over the running mon and OSD, so that killing it touches no one else.
            self.cluster = rgw.Cluster.attach(shared_dir)
            self.shared = True
            self.gateway = self.cluster.start_gateway(f"env-{uuid.uuid4().hex[:12]}")
            if not self.named_buckets:
                self.buckets = [f"{DEFAULT_BUCKET}-{uuid.uuid4().hex[:16]}"]
        else:
            self.cluster = rgw.Cluster(self.temporary / "rgw").start()
            self.gateway = self.cluster.gateway
        self.server_port = self.gateway.port
        client = rgw.s3_client(self.gateway.endpoint)
        for bucket in self.buckets:
            prepare_bucket(client, bucket)

    def _stop_rgw(self):
        if self.cluster is None:
            return
        try:
            if self.shared and not self.named_buckets:
                # Through the cluster's own gateway: this one may have been killed by the test.
                remove_bucket(rgw.s3_client(self.cluster.endpoint), self.bucket)
        finally:
            if self.shared:
                self.gateway.remove()
            else:
                self.cluster.stop()
            self.cluster = self.gateway = None

    # -- the server --

    def start_server(self):
        """Starts the server unless it runs; on the port and data directory it had, after the first time."""
        with self.lock:
            if self.gateway is not None:
                self.gateway.start()
                return
            if self.server is not None and self.server.poll() is None:
                return
            argv = ["node", str(HERE / "server.js"), "--directory", str(self.data_dir),
                    "--port", str(self.server_port)]
            for bucket in self.buckets:
                argv += ["--bucket", bucket]
            self.server, self.server_port = _spawn(argv, "the S3 server")

    def kill_server(self):
        """Kills the server with SIGKILL, as a crash would: what it was writing is left as it was. On RGW, the
        gateway: the mon and the OSD keep the data."""
        with self.lock:
            if self.gateway is not None:
                self.gateway.kill()
            elif self.server is not None and self.server.poll() is None:
                self.server.kill()
                self.server.wait()

    def server_state(self):
        with self.lock:
            if self.gateway is not None:
                running = self.gateway.running()
                return {"running": running, "port": self.server_port, "pid": self.gateway.pid if running else None}
            running = self.server is not None and self.server.poll() is None
            return {"running": running, "port": self.server_port, "pid": self.server.pid if running else None}

    # -- what the tests use --

    @property
    def server_url(self):
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def proxy_url(self):
        return f"http://127.0.0.1:{self.proxy_port}" if self.proxy else None

    @property
    def endpoint_url(self):
        return self.proxy_url or self.server_url

    @property
    def bucket(self):
        return self.buckets[0]

    @property
    def environ(self):
        values = {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_CONFIG_FILE": str(self.temporary / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.temporary / "aws-credentials"),
            "CKPT_S3_TEST_BUCKET": self.bucket,
            "CKPT_S3_SERVER_CONTROL": self.control.url,
            "CKPT_S3_SERVER": self.server_kind,
        }
        if self.data_dir is not None:
            values["CKPT_S3_DATA_DIR"] = str(self.data_dir)
        if self.proxy:
            values["CKPT_S3_PROXY"] = self.proxy_url
        return values

    def child_environ(self, base=None):
        """base (os.environ by default) without the variables that would override these, and with these."""
        environ = {name: value for name, value in (os.environ if base is None else base).items()
                   if name not in REMOVED_VARIABLES + OWN_VARIABLES}
        environ.update(self.environ)
        return environ

    def _proxy_call(self, method, path, value=None):
        if not self.proxy:
            raise RuntimeError("there is no fault proxy: use S3Env(proxy=True)")
        data = None if value is None else json.dumps(value).encode()
        request = urllib.request.Request(f"{self.proxy_url}/__ckpt_proxy/{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            raise ValueError(f"fault proxy: {method} {path}: {err.read().decode()}") from None

    def add_fault(self, **rule):
        """Adds a fault rule (fault_proxy.py's fields: kind, action, status, s3_code, at, bytes, ms, times, ...)."""
        return self._proxy_call("POST", "faults", rule)

    def clear_faults(self):
        return self._proxy_call("POST", "clear")

    def faults(self):
        return self._proxy_call("GET", "faults")

    def log(self):
        return self._proxy_call("GET", "log")

    def clear_log(self):
        return self._proxy_call("POST", "log/clear")


def signed_request(url, data=None, method=None, headers=()):
    """A urllib.request.Request for url signed with SigV4 with the test keys, as RGW (which refuses unsigned
    requests) and the proxy's --verify-sigv4 take it; s3rver ignores the signature. The query, if any, must be in
    its canonical form (sorted, key=value)."""
    import datetime
    import email.message
    import hashlib
    import hmac
    import urllib.parse
    import sigv4
    parts = urllib.parse.urlsplit(url)
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    message = email.message.Message()
    message["host"] = parts.netloc
    message["x-amz-content-sha256"] = hashlib.sha256(data or b"").hexdigest()
    message["x-amz-date"] = stamp
    signed = ["host", "x-amz-content-sha256", "x-amz-date"]
    method = method or ("PUT" if data is not None else "GET")
    verifier = sigv4.SigV4Verifier(ACCESS_KEY, SECRET_KEY, REGION)
    canonical = verifier.canonical_request(method, parts.path or "/", parts.query, message, signed,
                                           message["x-amz-content-sha256"])
    scope = f"{stamp[:8]}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signature = hmac.new(verifier._key(stamp[:8], REGION, "s3"), to_sign.encode(), hashlib.sha256).hexdigest()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
    request.add_header("x-amz-content-sha256", message["x-amz-content-sha256"])
    request.add_header("x-amz-date", stamp)
    request.add_header("Authorization", f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, "
                                        f"SignedHeaders={';'.join(signed)}, Signature={signature}")
    return request


def prepare_bucket(client, bucket):
    """Creates bucket when it is missing, and empties it: objects and unfinished multipart uploads, so that a run
    sees nothing of an earlier one's."""
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            done = client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            if done.get("Errors"):
                raise RuntimeError(f"emptying {bucket}: {done['Errors'][:3]}")


def remove_bucket(client, bucket):
    """Empties bucket and removes it."""
    try:
        prepare_bucket(client, bucket)
        client.delete_bucket(Bucket=bucket)
    except client.exceptions.NoSuchBucket:
        pass


class _ControlServer:
    """CKPT_S3_SERVER_CONTROL: HTTP endpoints on 127.0.0.1 through which a test kills and restarts the server."""

    PREFIX = "/__ckpt_server"

    def __init__(self, env):
        prefix = self.PREFIX

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                pass

            def answer(self, status, value):
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") != prefix:
                    return self.answer(404, {"error": f"no endpoint GET {self.path}"})
                self.answer(200, env.server_state())

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                actions = {f"{prefix}/kill": env.kill_server, f"{prefix}/start": env.start_server}
                action = actions.get(self.path.rstrip("/"))
                if action is None:
                    return self.answer(404, {"error": f"no endpoint POST {self.path}; there are {sorted(actions)}"})
                try:
                    action()
                except RuntimeError as err:
                    return self.answer(500, {"error": str(err)})
                self.answer(200, env.server_state())

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{prefix}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv):
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].strip())
    parser.add_argument("--server", choices=SERVERS, help="the S3 server (default: $CKPT_S3_SERVER, else s3rver)")
    parser.add_argument("--proxy", action="store_true", help="put fault_proxy.py in front of the server")
    parser.add_argument("--verify-sigv4", action="store_true", help="the proxy checks every request's signature")
    parser.add_argument("--bucket", action="append", default=[], help="a bucket to create (repeatable)")
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("no command after --")

    # SIGTERM (ctest's timeout, a killed job) unwinds like Ctrl-C, so that the servers are stopped.
    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        with S3Env(args.bucket, proxy=args.proxy, verify_sigv4=args.verify_sigv4, server=args.server) as env:
            child = subprocess.Popen(command, env=env.child_environ())
            try:
                status = child.wait()
            except KeyboardInterrupt:
                child.terminate()  # Ctrl-C reached it already; SIGTERM did not
                status = child.wait()
    except Unavailable as why:
        print(f"SKIP: {why}")
        return SKIP
    except KeyboardInterrupt:
        return 130
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
