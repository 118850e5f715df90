#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ckpt's saves and restores on an S3 server beside raw transfers of the same bytes, runs interleaved in one process.

    /usr/bin/python3 tests/s3/s3_env.py --server rgw -- env PYTHONPATH=build-release/python \
        CKPT_LIBRARY=build-release/libckpt.so.0 /usr/bin/python3 bench/bench_s3.py \
        [NAME:MIB:ARRAYS]... [--runs N] [--dir D] [--aws PATH]

bench/run --only-s3 runs it so (workloads W1:512:64 and W2:64:8192, bench_npz's data and names; --s3-server s3rver
for s3rver). Against the server s3_env.py starts (AWS_ENDPOINT_URL, CKPT_S3_TEST_BUCKET, CKPT_S3_SERVER; no fault
proxy: it would slow every side), for each workload, measures N runs after a warm-up, the saves then the restores
of each run in one order and the next run's in the reverse order, so that every side goes first as often as last:
  ckpt   ckpt.save("s3://bucket/key", collection) and ckpt.restore into the arrays (a ckpt.Collection built
         once: the C call's cost, the binding's per-array work left out), libckpt_s3's defaults (16 MiB parts,
         4 in flight); then the same through ckpt.S3Storage with a larger part_size: 64 MiB, and the whole file
         (one PUT; a restore's reads then come from one window of that size);
  curl   the same .npz bytes (the file ckpt.save writes locally, which the S3 objects are compared with) as one
         object: one PUT (-T) and one GET to /dev/null by the curl program (SigV4, x-amz-content-sha256:
         UNSIGNED-PAYLOAD), the least any client moves; and a multipart upload of the same bytes in ckpt's layout
         (16 MiB parts, 4 in parallel with curl -Z), whose CompleteMultipartUpload is timed on its own: what that
         layout costs on this server. curl sends the body without waiting for the server's 100 Continue
         (--expect100-timeout 0), as libckpt_s3 does; it cannot leave Expect out: curl 7.88 signs an emptied
         `Expect:` that it then does not send, and RGW refuses such a request (tests/s3/README.md);
  boto3  the same file by boto3 in this process: upload_file, and download_fileobj into a buffer of the file's
         size allocated beforehand (the bytes placed in memory, as ckpt.restore places arrays, without the
         growing copies of a BytesIO), with boto3's default TransferConfig (8 MiB parts and ranges, 10 threads)
         and with ckpt's layout (16 MiB, 4 threads; one PUT up to 16 MiB, as ckpt); payload signing off, as
         libckpt_s3 and curl sign (on plain http boto3 would SHA-256 every byte);
  aws    `aws s3 cp` of the same file up and down (awscli's defaults: 8 MiB parts, 10 requests in flight; payload
         signing off), process start-up included; `aws s3 ls` of one object says what the start-up costs.
Every restore reads one object, saved by ckpt.save with the defaults before the runs; every save writes an
object of its own, deleted once it is measured (and checked), so that the server holds at most about two files
at a time: RGW's OSD keeps its objects in at most 2 GiB of memory, and keeps what a delete frees until its garbage
collection runs (radosgw-admin gc process, between operations, untimed).
Also, for each operation, the CPU seconds of the client (this process or the curl/aws child) and of the server
processes (from /proc/<pid>/stat: on RGW radosgw and ceph-osd, found from the gateway's pid, which
CKPT_S3_SERVER_CONTROL gives, and its cluster's state.json; on s3rver node), the bytes each server process read and
wrote (its sockets and files, /proc/<pid>/io), and for ckpt's and boto3's the peak RSS above the resident memory right
before the operation (what earlier operations left in the process is not its cost). The
warm-up checks every restore into zeroed arrays against the state, and every object and download against the
local file. Prints one "s3 key=value ..." line per operation (the runs' seconds in run order, for ratios paired
within a run) for bench/report.py. Nothing passes or fails on speed; a restore, object or download that does not
hold the state's bytes is an error.
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


HERE = os.path.dirname(os.path.abspath(__file__))
GC_BYTES = 512 * MIB  # RGW: what deleted objects may hold before their garbage collection runs


def process_cpu(pid):
    """CPU seconds (user + system, all threads) of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_io(pid):
    """Bytes a process has passed to read() and write() so far (/proc/<pid>/io rchar, wchar): its sockets and its
    files, so that a multipart upload's second pass over the bytes shows."""
    with open(f"/proc/{pid}/io") as f:
        fields = dict(line.split(": ") for line in f.read().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


class Server:
    """The server's processes, by name (s3rver: node; RGW: radosgw and ceph-osd), and what frees a deleted
    object's space on it."""

    def __init__(self):
        self.kind = os.environ.get("CKPT_S3_SERVER", "s3rver")
        with urllib.request.urlopen(os.environ["CKPT_S3_SERVER_CONTROL"]) as r:
            pid = json.load(r)["pid"]
        self.cluster = None
        if self.kind != "rgw":
            self.pids = {"node": pid}
            return
        # The gateway's command line names its cluster's ceph.conf, whose directory holds state.json with the
        # pids of the mon and the OSD (tests/s3/rgw.py); the gateway is s3_env.py's own (on a cluster of
        # CKPT_RGW_DIR's, another than the cluster's first).
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
        conf = argv[argv.index("-c") + 1]
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "s3"))
        import rgw
        self.cluster = rgw.Cluster.attach(os.path.dirname(conf))
        self.pids = {"radosgw": pid, "ceph-osd": self.cluster.pids["osd"]}
        self.pending = 0  # bytes of deleted objects not yet collected

    def sample(self):
        """{name: (CPU seconds, bytes read, bytes written)} of each process so far."""
        return {name: (process_cpu(pid), *process_io(pid)) for name, pid in self.pids.items()}

    def deleted(self, size):
        """An object of size bytes was deleted: on RGW, its data stays in RADOS until the garbage collection runs
        (after two hours by default); run it when the deleted objects hold GC_BYTES."""
        if self.cluster is None:
            return
        self.pending += size
        if self.pending >= GC_BYTES:
            self.cluster.run("radosgw-admin", "gc", "process", "--include-all", timeout=600)
            self.pending = 0


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
                     "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--expect100-timeout", "0"]

    def run(self, args):
        done = subprocess.run(["curl", "-sS", "--fail", "-g"] + self.auth + args, check=True, stdout=subprocess.PIPE)
        return done.stdout.decode()

    def put(self, path, key):
        self.run(["-o", "/dev/null", "-T", path, f"{self.base}/{key}"])

    def get(self, key, dest="/dev/null"):
        self.run(["-o", dest, f"{self.base}/{key}"])

    def delete(self, key):
        self.run(["-o", "/dev/null", "-X", "DELETE", f"{self.base}/{key}"])

    def multipart(self, parts, key, parallel):
        """Uploads the files `parts` as the parts of one object, `parallel` at a time; returns the seconds until
        every part was up (the initiation included) and those the CompleteMultipartUpload took (curl's time_total
        of that request)."""
        started = time.perf_counter()
        answer = self.run(["-X", "POST", f"{self.base}/{key}?uploads="])  # the query as signed: canonical
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


class Placed:
    """A seekable file object over a buffer of a known size allocated beforehand, into which download_fileobj
    places an object's bytes (s3transfer seeks to each range and writes it there from one thread): the bytes
    placed in memory once, as ckpt.restore places arrays, without the growing copies of a BytesIO."""

    def __init__(self, size):
        self.buffer = np.zeros(size, dtype=np.uint8)  # touched: its pages are resident before the runs
        self.view = memoryview(self.buffer).cast("B")
        self.position = 0

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        self.position = offset + (self.position if whence == 1 else self.buffer.size if whence == 2 else 0)
        return self.position

    def tell(self):
        return self.position

    def write(self, data):
        n = len(data)
        if self.position + n > self.buffer.size:
            raise ValueError(f"a write of {n} bytes at {self.position} passes the end of {self.buffer.size}")
        self.view[self.position:self.position + n] = data
        self.position += n
        return n


class Boto3:
    """boto3's S3 client in this process, path-style, payload signing off (as libckpt_s3 and curl sign: on plain
    http boto3 would SHA-256 every byte); its default TransferConfig and one with ckpt's layout."""

    def __init__(self, endpoint, bucket):
        import boto3
        import boto3.s3.transfer
        import botocore.config
        self.version, self.bucket = boto3.__version__, bucket
        # boto3 1.26 does not read AWS_ENDPOINT_URL: everything is given.
        self.client = boto3.client(
            "s3", endpoint_url=endpoint, region_name=os.environ["AWS_REGION"],
            aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            config=botocore.config.Config(s3={"addressing_style": "path", "payload_signing_enabled": False}))
        self.defaults = boto3.s3.transfer.TransferConfig()
        # ckpt's layout: DEFAULT_PART parts and ranges, DEFAULT_PARALLELISM at a time, one PUT (one GET) for a file
        # of at most one part (s3transfer goes multipart from multipart_threshold bytes on).
        self.matched = boto3.s3.transfer.TransferConfig(multipart_threshold=DEFAULT_PART + 1,
                                                        multipart_chunksize=DEFAULT_PART,
                                                        max_concurrency=DEFAULT_PARALLELISM)

    @staticmethod
    def layout(config, pieces="parts"):
        return f"{config.multipart_chunksize // MIB} MiB {pieces}, {config.max_concurrency} threads"

    def upload(self, path, key, config):
        self.client.upload_file(path, self.bucket, key, Config=config)

    def download(self, key, into, config):
        into.seek(0)
        self.client.download_fileobj(self.bucket, key, into, Config=config)  # the warm-up checks the bytes


class Op:
    """One operation's runs: wall seconds, client and server CPU seconds, peak RSS above the state."""

    def __init__(self, op, who, what, fn, key, in_process=False, part_size=0):
        self.op, self.who, self.what, self.fn, self.key = op, who, what, fn, key
        self.in_process, self.part_size = in_process, part_size
        self.seconds, self.client, self.rss_above = [], [], -1
        self.server = {}  # process name -> [(CPU seconds, bytes read, bytes written) of each run]
        self.extra = {}  # name -> the runs' values of a figure the operation returns (the multipart's complete)

    def run(self, server, warmup):
        # The baseline is the resident memory right before the operation, not the state's taken once: what earlier
        # operations left in the process (a buffer the allocator kept) is not this one's cost.
        reset = self.in_process and peak_reset()
        baseline_kib = status_kib("VmRSS") if reset else -1
        s0, c0, t0 = server.sample(), client_cpu(), time.perf_counter()
        got = self.fn()
        wall = time.perf_counter() - t0
        client, s1 = client_cpu() - c0, server.sample()
        if warmup:
            return
        self.seconds.append(wall)
        self.client.append(client)
        for name, after in s1.items():
            self.server.setdefault(name, []).append(tuple(b - a for a, b in zip(s0[name], after)))
        if reset and baseline_kib >= 0:
            self.rss_above = max(self.rss_above, (status_kib("VmHWM") - baseline_kib) * 1024)
        for name, value in (got or {}).items():
            self.extra.setdefault(name, []).append(value)

    def line(self, name, server, state_bytes, file_bytes, count):
        """server_cpu: the runs' CPU seconds of every server process together; server_read, server_written: the
        medians of the bytes of every process together; server_processes: name:CPU:read:written, medians, of
        each."""
        runs = lambda xs: ",".join(f"{x:.6f}" for x in xs)
        extra = "".join(f" {k}={runs(v)}" for k, v in self.extra.items())
        total = [tuple(map(sum, zip(*each))) for each in zip(*self.server.values())]
        median = statistics.median
        processes = ",".join(f"{p}:{median(c for c, _, _ in v):.6f}:{int(median(r for _, r, _ in v))}:"
                             f"{int(median(w for _, _, w in v))}" for p, v in self.server.items())
        return (f's3 workload={name} server={server} op={self.op} who={self.who} what="{self.what}" key={self.key} '
                f"part_size={self.part_size} seconds={median(self.seconds):.6f} per_run={runs(self.seconds)} "
                f"client_cpu={runs(self.client)} server_cpu={runs(c for c, _, _ in total)} "
                f"server_read={int(median(r for _, r, _ in total))} "
                f"server_written={int(median(w for _, _, w in total))} server_processes={processes} "
                f"rss_above={self.rss_above} state_bytes={state_bytes} file_bytes={file_bytes} arrays={count} "
                f"runs={len(self.seconds)}{extra}")


def parts_of(size, part):
    return max(1, -(-size // part))


def object_key(key):
    """The key in the bucket of an Op's key (an s3:// URL or a key)."""
    return key[len("s3://"):].split("/", 1)[1] if key.startswith("s3://") else key


def measure(name, mib, count, runs, directory, bucket, endpoint, server, aws_program, boto):
    arrays = make_state(mib, count)
    state_bytes = sum(a.nbytes for a in arrays.values())
    into = {k: np.zeros_like(a) for k, a in arrays.items()}
    saved, restored = ckpt.Collection(arrays), ckpt.Collection(into)

    local = os.path.join(directory, f"{name}.npz")
    ckpt.save(local, saved)  # the bytes every side moves
    size = os.path.getsize(local)
    want = file_digest(local)
    placed = Placed(size) if boto else None  # where boto3's downloads go, as the arrays restored into
    chunks = []  # the local file cut in ckpt's parts, for curl's multipart upload (when ckpt makes one)
    with open(local, "rb") as f:
        for i in range(parts_of(size, DEFAULT_PART) if size > DEFAULT_PART else 0):
            chunks.append(os.path.join(directory, f"{name}.part{i + 1}"))
            with open(chunks[-1], "wb") as out:
                out.write(f.read(DEFAULT_PART))

    curl = Curl(endpoint, bucket)
    aws = Aws(aws_program, endpoint, bucket, directory) if aws_program else None
    prefix = f"bench/{name}"
    fetched = local + ".fetched"

    def verify(key, what):
        curl.get(key, fetched)
        if file_digest(fetched) != want:
            sys.exit(f"bench_s3: {name}: the object {key} ({what}) is not the bytes of {local}")
        os.remove(fetched)

    # What every restore reads: ckpt's save with the defaults, made once.
    source = f"{prefix}/source.npz"
    ckpt.save(f"s3://{bucket}/{source}", saved)
    verify(source, "ckpt.save with the defaults")

    whole = -(-size // MIB) * MIB  # a part_size that holds the whole file: one PUT
    # (path, storage, part_size, the save's label, the restore's label)
    variants = [(f"s3://{bucket}/{prefix}/ckpt-16.npz", None, DEFAULT_PART,
                 f"ckpt.save to an s3:// URL (defaults: {DEFAULT_PART // MIB} MiB parts, {DEFAULT_PARALLELISM} in "
                 f"flight)",
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

    def ckpt_restore(storage):
        path = f"s3://{bucket}/{source}" if storage is None else source
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
    restores = [Op("restore", "ckpt", what, ckpt_restore(st), source, True, part)
                for path, st, part, _, what in variants]
    restores += [Op("restore", "curl", "curl: one GET", lambda: curl.get(source), source)]
    if boto:
        # "boto3" is ckpt's layout, the figure the tables compare with; "boto3-defaults" what boto3 does unasked.
        for who, config, label in (("boto3-defaults", boto.defaults, "defaults: {}"),
                                   ("boto3", boto.matched, "TransferConfig({})")):
            key = f"{prefix}/{who}.npz"
            saves.append(Op("save", who, f"boto3 upload_file ({label.format(boto.layout(config))})",
                            lambda key=key, config=config: boto.upload(local, key, config), key, True,
                            config.multipart_chunksize))
            restores.append(Op("restore", who, f"boto3 download_fileobj into a buffer "
                                               f"({label.format(boto.layout(config, 'ranges'))})",
                               lambda config=config: boto.download(source, placed, config), source, True,
                               config.multipart_chunksize))
    if aws:
        saves.append(Op("save", "aws", "aws s3 cp (upload)", lambda: aws.upload(local, f"{prefix}/aws.npz"),
                        f"{prefix}/aws.npz"))
        restores.append(Op("restore", "aws", "aws s3 cp (download)", lambda: aws.download(source, download), source))
        restores.append(Op("startup", "aws", "aws s3 ls of one object (start-up and one request)",
                           lambda: aws.list(source), source))

    for run in range(runs + 1):  # run 0 warms up and checks what every side moved
        order = 1 if run % 2 == 0 else -1
        warmup = run == 0
        for op in saves[::order] + restores[::order]:
            if warmup and op.op == "restore":
                for a in into.values():
                    a[...] = 0
                if placed is not None:
                    placed.buffer.fill(0)
            op.run(server, warmup)
            if op.op == "save":
                # Untimed: the object checked in the warm-up, then deleted, its space collected on RGW.
                key = object_key(op.key)
                if warmup:
                    verify(key, op.what)
                curl.delete(key)
                server.deleted(size)
            elif warmup and op.who == "ckpt" and op.op == "restore":
                for k, a in arrays.items():
                    if not np.array_equal(into[k], a):
                        sys.exit(f"bench_s3: {name}: {op.what} did not give back {k}")
            elif warmup and op.who.startswith("boto3"):
                if hashlib.blake2b(placed.buffer).hexdigest() != want:
                    sys.exit(f"bench_s3: {name}: {op.what} placed other bytes than {local}'s")
            elif warmup and op.who == "aws" and op.op == "restore" and file_digest(download) != want:
                sys.exit(f"bench_s3: {name}: aws s3 cp downloaded other bytes than {local}")
    for op in saves + restores:
        print(op.line(name, server.kind, state_bytes, size, count), flush=True)
    curl.delete(source)
    server.deleted(size)
    for path in chunks + [local, download]:
        if os.path.exists(path):
            os.remove(path)


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
    server = Server()
    aws = a.aws if os.access(a.aws, os.X_OK) else None
    if not aws:
        print(f"bench_s3: no {a.aws} (scripts/deps bench installs awscli): aws s3 cp is not measured", file=sys.stderr)
    bucket, endpoint = os.environ["CKPT_S3_TEST_BUCKET"], os.environ["AWS_ENDPOINT_URL"]
    try:
        boto = Boto3(endpoint, bucket)
    except ImportError:
        boto = None
        print("bench_s3: no boto3 (Debian's python3-boto3; scripts/deps rgw): boto3 is not measured", file=sys.stderr)
    print(f"==> S3 on {server.kind} (processes measured: "
          f"{', '.join(f'{n} {pid}' for n, pid in server.pids.items())})", file=sys.stderr)
    for spec in a.workloads:
        name, mib, count = spec.split(":")
        print(f"==> S3 {name}: {mib} MiB in {count} arrays ({a.runs} runs after a warm-up)", file=sys.stderr)
        measure(name, int(mib), int(count), a.runs, a.dir, bucket, endpoint, server, aws, boto)


if __name__ == "__main__":
    main()
