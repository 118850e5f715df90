#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ckpt's saves and restores on an S3 server beside raw transfers of the same bytes, runs interleaved in one process.

    /usr/bin/python3 tests/s3/s3_env.py -- env PYTHONPATH=build-release/python \
        CKPT_LIBRARY=build-release/libckpt.so.0 /usr/bin/python3 bench/bench_s3.py \
        [NAME:MIB:ARRAYS]... [--runs N] [--dir D] [--aws PATH]

bench/run --only-s3 runs it so (workloads W1:512:64 and W2:64:8192, bench_npz's data and names). Against the
server s3_env.py starts (AWS_ENDPOINT_URL, CKPT_S3_TEST_BUCKET; no fault proxy: it would slow both sides), for each
workload, measures N runs after a warm-up, the saves then the restores of each run in one order and the next run's
in the reverse order, so that every side goes first as often as last:
  ckpt   ckpt.save("s3://bucket/key", collection) and ckpt.restore of it into the arrays (a ckpt.Collection built
         once: the C call's cost, the binding's per-array work left out), libckpt_s3's defaults (16 MiB parts,
         4 in flight); then the same through ckpt.S3Storage with a larger part_size: 64 MiB, and the whole file
         (one PUT; a restore's reads then come from one window of that size);
  curl   the same .npz bytes (the file ckpt.save writes locally, which the S3 objects are compared with) as one
         object: one PUT (-T) and one GET to /dev/null by the curl program (SigV4, x-amz-content-sha256:
         UNSIGNED-PAYLOAD, no Expect: 100-continue), the least any client moves; and a multipart upload of the same
         bytes in ckpt's layout (16 MiB parts, 4 in parallel with curl -Z), whose CompleteMultipartUpload is timed
         on its own: what that layout costs on this server;
  aws    `aws s3 cp` of the same file up and down (awscli's defaults: 8 MiB parts, 10 requests in flight; payload
         signing off, as awscli does over https: on plain http it would hash every byte with SHA-256), process
         start-up included; `aws s3 ls` of one object says what the start-up costs.
Also, for each operation, the CPU seconds of the client (this process or the curl/aws child) and of the server
(node, from /proc/<pid>/stat), the bytes the server read and wrote (its sockets and files, /proc/<pid>/io), and
for ckpt's the peak RSS above the state. The warm-up checks every restore into zeroed arrays against the state
and every object (and awscli's download) against the local file. Prints one "s3 key=value ..." line per
operation (the runs' seconds in run order, for ratios paired within a run) for bench/report.py. Nothing passes or
fails on speed; a restore, object or download that does not hold the state's bytes is an error.
"""
import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import urllib.request

import numpy as np

from bench_numpy import make_state, peak_reset, status_kib

try:  # an installed package or the build tree's (PYTHONPATH), else the sources of this tree
    import ckpt
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
    import ckpt  # noqa: E402

MIB = 1 << 20
DEFAULT_PART = 16 * MIB  # libckpt_s3's default part_size and parallelism (include/ckpt/ckpt_s3.h)
DEFAULT_PARALLELISM = 4
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu(pid):
    """CPU seconds (user + system, all threads) of the server process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def server_io(pid):
    """Bytes the server process has passed to read() and write() so far (/proc/<pid>/io rchar, wchar): its
    sockets and its files, so that a multipart upload's second pass over the bytes shows."""
    with open(f"/proc/{pid}/io") as f:
        fields = dict(line.split(": ") for line in f.read().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


def client_cpu():
    """CPU seconds of this process and of its children that have been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def file_digest(path):
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            h.update(chunk)
    return h.hexdigest()


class Curl:
    """The curl program against the server, path-style, signed as libckpt_s3 signs (unsigned payload)."""

    def __init__(self, endpoint, bucket):
        self.base = f"{endpoint.rstrip('/')}/{bucket}"
        self.auth = ["--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3",
                     "--user", f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}",
                     "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-H", "Expect:"]

    def run(self, args):
        done = subprocess.run(["curl", "-sS", "--fail", "-g"] + self.auth + args, check=True, stdout=subprocess.PIPE)
        return done.stdout.decode()

    def put(self, path, key):
        self.run(["-o", "/dev/null", "-T", path, f"{self.base}/{key}"])

    def get(self, key, dest="/dev/null"):
        self.run(["-o", dest, f"{self.base}/{key}"])

    def multipart(self, parts, key, parallel):
        """Uploads the files `parts` as the parts of one object, `parallel` at a time; returns the seconds until
        every part was up (the initiation included) and those the CompleteMultipartUpload took (curl's time_total
        of that request)."""
        started = time.perf_counter()
        answer = self.run(["-X", "POST", f"{self.base}/{key}?uploads"])
        m = re.search(r"<UploadId>([^<]+)</UploadId>", answer)
        if not m:
            sys.exit(f"bench_s3: initiate of {key}: no UploadId in {answer!r}")
        upload = m.group(1)
        args = ["-Z", "--no-progress-meter", "--parallel-max", str(parallel), "-w", "%{url_effective} %header{etag}\\n"]
        for number, part in enumerate(parts, 1):
            args += ["-o", "/dev/null", "-T", part, f"{self.base}/{key}?partNumber={number}&uploadId={upload}"]
        etags = {}
        for line in self.run(args).splitlines():
            url, _, etag = line.partition(" ")
            etags[int(re.search(r"partNumber=(\d+)", url).group(1))] = etag.strip()
        if sorted(etags) != list(range(1, len(parts) + 1)) or not all(etags.values()):
            sys.exit(f"bench_s3: parts of {key}: ETags {etags}")
        uploaded = time.perf_counter() - started
        body = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{etags[n]}</ETag></Part>" for n in sorted(etags)) + \
            "</CompleteMultipartUpload>"
        answer = self.run(["-X", "POST", "-H", "Content-Type: application/xml", "--data-binary", body,
                           "-w", "\\n%{time_total}", f"{self.base}/{key}?uploadId={upload}"])
        result, _, seconds = answer.rpartition("\n")
        if "CompleteMultipartUploadResult" not in result:
            sys.exit(f"bench_s3: complete of {key}: {result!r}")
        return uploaded, float(seconds)


class Aws:
    """awscli's `aws s3`, with a configuration of its own: no profile of the user's, no payload signing."""

    def __init__(self, program, endpoint, bucket, directory):
        self.program, self.endpoint, self.bucket = program, endpoint, bucket
        config = os.path.join(directory, "aws-config")
        with open(config, "w") as f:
            # Over https awscli leaves payloads unsigned; on the test server's plain http it would SHA-256 every
            # byte, a cost neither curl nor ckpt pays here.
            f.write("[default]\ns3 =\n    payload_signing_enabled = false\n")
        self.env = dict(os.environ, AWS_CONFIG_FILE=config, AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="")

    def run(self, args):
        subprocess.run([self.program, "--endpoint-url", self.endpoint, "s3"] + args, env=self.env, check=True,
                       stdout=subprocess.DEVNULL)

    def upload(self, path, key):
        self.run(["cp", "--only-show-errors", "--no-progress", path, f"s3://{self.bucket}/{key}"])

    def download(self, key, dest):
        self.run(["cp", "--only-show-errors", "--no-progress", f"s3://{self.bucket}/{key}", dest])

    def list(self, key):
        self.run(["ls", f"s3://{self.bucket}/{key}"])


class Op:
    """One operation's runs: wall seconds, client and server CPU seconds, peak RSS above the state."""

    def __init__(self, op, who, what, fn, key, in_process=False, part_size=0):
        self.op, self.who, self.what, self.fn, self.key = op, who, what, fn, key
        self.in_process, self.part_size = in_process, part_size
        self.seconds, self.client, self.server, self.read, self.written, self.rss_above = [], [], [], [], [], -1
        self.extra = {}  # name -> the runs' values of a figure the operation returns (the multipart's complete)

    def run(self, pid, state_kib, warmup):
        reset = self.in_process and peak_reset()
        (r0, w0), s0, c0, t0 = server_io(pid), server_cpu(pid), client_cpu(), time.perf_counter()
        got = self.fn()
        wall = time.perf_counter() - t0
        client, server = client_cpu() - c0, server_cpu(pid) - s0
        r1, w1 = server_io(pid)
        if warmup:
            return
        self.seconds.append(wall)
        self.client.append(client)
        self.server.append(server)
        self.read.append(r1 - r0)
        self.written.append(w1 - w0)
        if reset and state_kib >= 0:
            self.rss_above = max(self.rss_above, (status_kib("VmHWM") - state_kib) * 1024)
        for name, value in (got or {}).items():
            self.extra.setdefault(name, []).append(value)

    def line(self, name, state_bytes, file_bytes, count):
        runs = lambda xs: ",".join(f"{x:.6f}" for x in xs)
        extra = "".join(f" {k}={runs(v)}" for k, v in self.extra.items())
        return (f's3 workload={name} op={self.op} who={self.who} what="{self.what}" key={self.key} '
                f"part_size={self.part_size} seconds={statistics.median(self.seconds):.6f} "
                f"per_run={runs(self.seconds)} client_cpu={runs(self.client)} server_cpu={runs(self.server)} "
                f"server_read={int(statistics.median(self.read))} server_written={int(statistics.median(self.written))} "
                f"rss_above={self.rss_above} state_bytes={state_bytes} file_bytes={file_bytes} arrays={count} "
                f"runs={len(self.seconds)}{extra}")


def parts_of(size, part):
    return max(1, -(-size // part))


def measure(name, mib, count, runs, directory, bucket, endpoint, pid, aws_program):
    arrays = make_state(mib, count)
    state_bytes = sum(a.nbytes for a in arrays.values())
    into = {k: np.zeros_like(a) for k, a in arrays.items()}
    saved, restored = ckpt.Collection(arrays), ckpt.Collection(into)
    state_kib = status_kib("VmRSS")  # the state and the arrays restored into, built and touched

    local = os.path.join(directory, f"{name}.npz")
    ckpt.save(local, saved)  # the bytes every side moves
    size = os.path.getsize(local)
    chunks = []  # the local file cut in ckpt's parts, for curl's multipart upload (when ckpt makes one)
    with open(local, "rb") as f:
        for i in range(parts_of(size, DEFAULT_PART) if size > DEFAULT_PART else 0):
            chunks.append(os.path.join(directory, f"{name}.part{i + 1}"))
            with open(chunks[-1], "wb") as out:
                out.write(f.read(DEFAULT_PART))

    curl = Curl(endpoint, bucket)
    aws = Aws(aws_program, endpoint, bucket, directory) if aws_program else None
    prefix = f"bench/{name}"
    whole = -(-size // MIB) * MIB  # a part_size that holds the whole file: one PUT
    # (path, storage, part_size, the save's label, the restore's label)
    variants = [(f"s3://{bucket}/{prefix}/ckpt-16.npz", None, DEFAULT_PART,
                 f"ckpt.save to an s3:// URL (defaults: {DEFAULT_PART // MIB} MiB parts, {DEFAULT_PARALLELISM} in flight)",
                 f"ckpt.restore of an s3:// URL (defaults: {DEFAULT_PART // MIB} MiB ranges, {DEFAULT_PARALLELISM} in "
                 f"flight)")]
    for part in (64 * MIB, whole):
        n = parts_of(size, part)
        if n == parts_of(size, variants[-1][2]):
            continue  # the same layout as the variant before
        option = f"S3Storage(part_size={part // MIB} MiB)"
        if n == 1:
            labels = f"ckpt.save, {option}: one PUT", f"ckpt.restore, {option}: one window of the whole file"
        else:
            labels = f"ckpt.save, {option}: {n} parts", f"ckpt.restore, {option}: {part // MIB} MiB ranges"
        variants.append((f"{prefix}/ckpt-{part // MIB}.npz", ckpt.S3Storage(bucket, part_size=part), part, *labels))

    def ckpt_save(path, storage):
        return lambda: ckpt.save(path, saved, storage=storage)

    def ckpt_restore(path, storage):
        return lambda: ckpt.restore(path, restored, storage=storage)

    def complete(key):
        def upload():
            parts, done = curl.multipart(chunks, key, DEFAULT_PARALLELISM)
            return {"parts": parts, "complete": done}
        return upload

    download = os.path.join(directory, f"{name}-aws.npz")
    saves = [Op("save", "ckpt", what, ckpt_save(path, st), path, True, part) for path, st, part, what, _ in variants]
    saves.append(Op("save", "curl", "curl: one PUT", lambda: curl.put(local, f"{prefix}/curl.npz"),
                    f"{prefix}/curl.npz"))
    if len(chunks) > 1:  # ckpt's default save is a multipart upload: what that layout costs here
        label = f"curl: multipart, {len(chunks)} parts of {DEFAULT_PART // MIB} MiB, {DEFAULT_PARALLELISM} in parallel"
        saves.append(Op("save", "curl-multipart", label, complete(f"{prefix}/curl-mp.npz"), f"{prefix}/curl-mp.npz",
                        part_size=DEFAULT_PART))
    restores = [Op("restore", "ckpt", what, ckpt_restore(path, st), path, True, part)
                for path, st, part, _, what in variants]
    restores += [Op("restore", "curl", "curl: one GET", lambda: curl.get(f"{prefix}/curl.npz"), f"{prefix}/curl.npz")]
    if aws:
        saves.append(Op("save", "aws", "aws s3 cp (upload)", lambda: aws.upload(local, f"{prefix}/aws.npz"),
                        f"{prefix}/aws.npz"))
        restores.append(Op("restore", "aws", "aws s3 cp (download)", lambda: aws.download(f"{prefix}/aws.npz", download),
                           f"{prefix}/aws.npz"))
        restores.append(Op("startup", "aws", "aws s3 ls of one object (start-up and one request)",
                           lambda: aws.list(f"{prefix}/aws.npz"), f"{prefix}/aws.npz"))

    for run in range(runs + 1):  # run 0 warms up (and creates every object the restores read)
        order = 1 if run % 2 == 0 else -1
        for op in saves[::order] + restores[::order]:
            if run == 0 and op.op == "restore" and op.who == "ckpt":
                for a in into.values():
                    a[...] = 0
            op.run(pid, state_kib, warmup=run == 0)
            if run == 0 and op.op == "restore" and op.who == "ckpt":
                for k, a in arrays.items():
                    if not np.array_equal(into[k], a):
                        sys.exit(f"bench_s3: {name}: {op.what} did not give back {k}")
        if run == 0:
            check(name, local, curl, aws, download, saves)
    for op in saves + restores:
        print(op.line(name, state_bytes, size, count), flush=True)
    for path in chunks + [local, download]:
        if os.path.exists(path):
            os.remove(path)


def check(name, local, curl, aws, download, saves):
    """After the warm-up: every object, and awscli's download, holds the local file's bytes."""
    want = file_digest(local)
    fetched = local + ".fetched"
    for op in saves:
        key = op.key[len("s3://"):].split("/", 1)[1] if op.key.startswith("s3://") else op.key
        curl.get(key, fetched)
        if file_digest(fetched) != want:
            sys.exit(f"bench_s3: {name}: the object {key} ({op.what}) is not the bytes of {local}")
    os.remove(fetched)
    if aws and file_digest(download) != want:
        sys.exit(f"bench_s3: {name}: aws s3 cp downloaded other bytes than {local}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", metavar="NAME:MIB:ARRAYS", default=["W1:512:64", "W2:64:8192"])
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--dir", default="/var/tmp")
    p.add_argument("--aws", default="/usr/bin/aws", help="awscli's aws (not a wrapper of another Python's)")
    a = p.parse_args()
    for name in ("AWS_ENDPOINT_URL", "CKPT_S3_TEST_BUCKET", "CKPT_S3_SERVER_CONTROL"):
        if name not in os.environ:
            sys.exit(f"bench_s3: {name} is not set: run it under tests/s3/s3_env.py")
    with urllib.request.urlopen(os.environ["CKPT_S3_SERVER_CONTROL"]) as r:
        pid = json.load(r)["pid"]
    aws = a.aws if os.access(a.aws, os.X_OK) else None
    if not aws:
        print(f"bench_s3: no {a.aws} (scripts/deps bench installs awscli): aws s3 cp is not measured", file=sys.stderr)
    for spec in a.workloads:
        name, mib, count = spec.split(":")
        print(f"==> S3 {name}: {mib} MiB in {count} arrays ({a.runs} runs after a warm-up)", file=sys.stderr)
        measure(name, int(mib), int(count), a.runs, a.dir, os.environ["CKPT_S3_TEST_BUCKET"],
                os.environ["AWS_ENDPOINT_URL"], pid, aws)


if __name__ == "__main__":
    main()
