# SPDX-License-Identifier: Apache-2.0
"""The soak: training processes saving through managers for a while, one killed with SIGKILL and started again at
random every so often; every save reported durable must restore.

    soak.py [--minutes 10] [--interval 2] [--kill-every 60] [--local 2] [--s3 2] [--dir DIR] [--seed S]

--local workers keep their checkpoints under DIR (default: a fresh directory under /var/tmp), --s3 workers in the
bucket of an S3 server that tests/s3/s3_env.py starts (s3rver, or Ceph's RADOS Gateway with CKPT_S3_SERVER=rgw;
skipped with exit 77 when it cannot run here). Each worker (worker.py) saves 8 MiB every --interval seconds and
acknowledges each save once it returned; at every start it checks that it resumes at its last acknowledged save or
the one after it, bit for bit. At the end every directory is read once more the same way. Prints, per storage,
saves acknowledged, kills, and the saves' p50 and p99 times; exits 1 on any failure.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))] if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--interval", type=float, default=2)
    parser.add_argument("--kill-every", type=float, default=60)
    parser.add_argument("--local", type=int, default=2)
    parser.add_argument("--s3", type=int, default=2)
    parser.add_argument("--dir")
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = args.dir or tempfile.mkdtemp(prefix="ckpt-soak-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    env = None
    if args.s3:
        import s3_env
        why = s3_env.unavailable()
        if why:
            print("skipped: " + why)
            return 77
        env = s3_env.S3Env()
        env.__enter__()
    try:
        workers = []
        for i in range(args.local + args.s3):
            s3 = i >= args.local
            logdir = ("s3://%s/soak-%d-%d" % (env.bucket, os.getpid(), i)) if s3 else os.path.join(work, "w%d" % i)
            workers.append({"name": "%s%d" % ("s3-" if s3 else "local-", i), "logdir": logdir, "s3": s3,
                            "acks": os.path.join(work, "acks-%d" % i), "process": None, "kills": 0})
        child_env = dict(os.environ, **(env.environ if env else {}))
        stop_at = time.time() + args.minutes * 60

        def start(w):
            w["process"] = subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py"), w["logdir"], w["acks"],
                                             str(args.interval), str(stop_at)], env=child_env)

        for w in workers:
            start(w)
        failures = []
        next_kill = time.time() + rng.uniform(0.5, 1.0) * args.kill_every
        while time.time() < stop_at:
            time.sleep(0.05)
            for w in workers:
                if w["process"].poll() not in (None, 0):
                    failures.append("%s exited %d" % (w["name"], w["process"].returncode))
                    start(w)
            if time.time() >= next_kill:
                victim = rng.choice(workers)
                victim["process"].send_signal(signal.SIGKILL)
                victim["process"].wait()
                victim["kills"] += 1
                start(victim)
                next_kill = time.time() + rng.uniform(0.5, 1.5) * args.kill_every
        for w in workers:
            if w["process"].wait(timeout=300) != 0:
                failures.append("%s exited %d" % (w["name"], w["process"].returncode))
        # Once more: every directory resumes at its last acknowledged save (nothing runs after it now).
        for w in workers:
            check = subprocess.run([sys.executable, os.path.join(HERE, "worker.py"), w["logdir"], w["acks"], "0", "0"],
                                   env=child_env, capture_output=True, text=True)
            if check.returncode != 0:
                failures.append("final check of %s: %s" % (w["name"], check.stderr.strip()))
        print("%-10s %8s %6s %9s %9s" % ("storage", "saves", "kills", "p50 (s)", "p99 (s)"))
        for kind in ("local", "s3"):
            group = [w for w in workers if w["s3"] == (kind == "s3")]
            if not group:
                continue
            times = []
            for w in group:
                if os.path.exists(w["acks"]):
                    with open(w["acks"]) as f:
                        times += [float(line.split()[1]) for line in f if line.strip()]
            print("%-10s %8d %6d %9.3f %9.3f" % ("%s x%d" % (kind, len(group)), len(times),
                                                  sum(w["kills"] for w in group), percentile(times, 50),
                                                  percentile(times, 99)))
        for f in failures:
            print("FAILED: " + f)
        return 1 if failures else 0
    finally:
        if env is not None:
            env.__exit__(None, None, None)
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
