#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Incremental saves on S3: a manager's saves of a mostly frozen state with and without a base, side by side in one
run, with the bytes each one uploaded counted at the proxy.

    /usr/bin/python3 tests/s3/s3_env.py --server rgw --proxy -- env PYTHONPATH=build/python \
        CKPT_LIBRARY=build/libckpt.so.0 /usr/bin/python3 bench/bench_s3_incremental.py \
        [--frozen-mib 256] [--changed-mib 16] [--rounds 6]

The state: a frozen backbone (--frozen-mib of float32, never changed) and a trained part (--changed-mib, new values
every round). Two managers (keep=1) in prefixes of their own: one with incremental saves (the default), one with
incremental=False. Each round changes the trained part, then saves with both, in alternating order, and uploads
the incremental save's object once more with boto3 (upload_fileobj of its bytes, ckpt's layout: 16 MiB parts, 4
threads): the raw transfer of the same bytes. The first round has no base (its incremental save is a full one) and
is left out of the medians. Every request goes through tests/s3/fault_proxy.py (which logs each request's kind and
body size, and slows every side alike); "MiB uploaded" is the body bytes of PUTs and uploaded parts, copied parts
sending none. Each object is downloaded with boto3 and checked against the state once, untimed. On RGW, deleted
objects' data stays in the OSD's memory until the garbage collection, run between rounds, untimed.
Prints one "s3inc key=value ..." line per kind of save and a table. Nothing passes or fails on speed.
"""
import argparse
import io
import json
import os
import statistics
import sys
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "s3"))

try:  # an installed package or the build tree's (PYTHONPATH), else the sources of this tree
    import ckpt
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
    import ckpt  # noqa: E402

import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402

MIB = 1 << 20
LAYOUT = TransferConfig(multipart_threshold=16 * MIB, multipart_chunksize=16 * MIB, max_concurrency=4)


def proxy_call(method, path):
    """A control call of the proxy the runner started (tests/s3/README.md)."""
    request = urllib.request.Request(f"{os.environ['CKPT_S3_PROXY']}/__ckpt_proxy/{path}", method=method, data=b"")
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def clear_log():
    proxy_call("POST", "log/clear")


def proxy_log():
    return proxy_call("GET", "log")


def uploaded(log):
    return sum(e["body_bytes"] for e in log if e["kind"] in ("put", "upload_part"))


def collect_garbage():
    """RGW keeps a deleted object's data until its garbage collection: run it (untimed)."""
    if os.environ.get("CKPT_S3_SERVER") != "rgw":
        return
    import rgw
    with urllib.request.urlopen(os.environ["CKPT_S3_SERVER_CONTROL"]) as r:
        pid = json.load(r)["pid"]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode().split("\0")
    rgw.Cluster.attach(os.path.dirname(argv[argv.index("-c") + 1])).run(
        "radosgw-admin", "gc", "process", "--include-all", timeout=600)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frozen-mib", type=int, default=256)
    parser.add_argument("--changed-mib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    if "CKPT_S3_PROXY" not in os.environ:
        sys.exit("bench_s3_incremental: run it under tests/s3/s3_env.py --proxy (the proxy counts the bytes)")
    bucket = os.environ["CKPT_S3_TEST_BUCKET"]
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"])

    rng = np.random.default_rng(1)
    state = {"backbone": rng.standard_normal(args.frozen_mib * MIB // 4, dtype=np.float32),
             "adapter": np.zeros(args.changed_mib * MIB // 4, dtype=np.float32), "step": np.int64(0)}
    kinds = {"incremental": ckpt.Manager("s3://%s/inc" % bucket, keep=1),
             "full": ckpt.Manager("s3://%s/full" % bucket, keep=1, incremental=False)}
    rows = {name: [] for name in list(kinds) + ["boto3"]}
    try:
        for step in range(1, args.rounds + 1):
            state["adapter"][:] = rng.standard_normal(state["adapter"].size, dtype=np.float32)
            state["step"] = np.int64(step)
            order = list(kinds) if step % 2 else list(reversed(kinds))
            for name in order:
                clear_log()
                t = time.perf_counter()
                kinds[name].save(state, step)
                seconds = time.perf_counter() - t
                log = proxy_log()
                key = "%s/ckpt/%010d.npz" % ("inc" if name == "incremental" else "full", step)
                body = io.BytesIO()
                client.download_fileobj(bucket, key, body)
                with np.load(io.BytesIO(body.getvalue())) as z:
                    for array, value in state.items():
                        if not np.array_equal(z[array], value):
                            sys.exit(f"bench_s3_incremental: {key} does not hold {array} of step {step}")
                rows[name].append({"seconds": seconds, "uploaded": uploaded(log), "size": len(body.getvalue()),
                                   "copies": sum(e["kind"] == "copy_part" for e in log)})
                if name == "incremental":
                    raw = body.getvalue()
            clear_log()
            t = time.perf_counter()
            client.upload_fileobj(io.BytesIO(raw), bucket, "raw.npz", Config=LAYOUT)
            rows["boto3"].append({"seconds": time.perf_counter() - t, "uploaded": uploaded(proxy_log()),
                                  "size": len(raw), "copies": 0})
            collect_garbage()
    finally:
        for m in kinds.values():
            m.close()

    def median(name, field, skip_first=True):
        values = [r[field] for r in rows[name][1 if skip_first else 0:]]
        return statistics.median(values)

    full_seconds = [r["seconds"] for r in rows["full"][1:]]
    print("| save | seconds | x full | MiB uploaded | of the object | parts copied |")
    print("|---|---|---|---|---|---|")
    for name, label in (("full", "ckpt, incremental=False"), ("incremental", "ckpt, incremental (default)"),
                        ("boto3", "boto3 upload_fileobj of the same bytes")):
        seconds = [r["seconds"] for r in rows[name][1:]]
        ratio = statistics.median(f / s for f, s in zip(full_seconds, seconds))
        up, size = median(name, "uploaded"), median(name, "size")
        print(f"| {label} | {statistics.median(seconds):.3f} | {ratio:.2f} | {up / MIB:.1f} | {up / size:.1%} | "
              f"{median(name, 'copies'):.0f} |")
        print(f"s3inc save={name} seconds={statistics.median(seconds):.4f} x_full={ratio:.3f} "
              f"uploaded={up:.0f} size={size:.0f} copies={median(name, 'copies'):.0f}", file=sys.stderr)
    first = rows["incremental"][0]
    print(f"\nFirst save (no base): {first['seconds']:.3f} s, {first['uploaded'] / MIB:.1f} MiB uploaded.")


if __name__ == "__main__":
    main()
