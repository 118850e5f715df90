#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A one-node Ceph cluster with its RADOS Gateway on 127.0.0.1: a real S3 server, which checks every signature
(tests/s3/README.md).

    rgw.py start --dir DIR      starts it under DIR (which must not exist or be empty); returns once a bucket PUT
                                succeeds; writes DIR/state.json (pids, endpoint, keys, region)
    rgw.py stop --dir DIR       stops every daemon of DIR/state.json by its pid (SIGTERM, then SIGKILL), and the
                                gateways started over it, and removes DIR
    rgw.py status --dir DIR     prints DIR/state.json, with which of its daemons run

One ceph-mon, one ceph-osd on memstore (its data is in memory, capped at MEMSTORE_BYTES, and lost on stop), and
radosgw with the beast frontend; authentication between them off; every file (configuration, mon and OSD data,
sockets, logs) under DIR. The daemons run in the foreground (-f) in sessions of their own, and are stopped by pid
only: never by name, and only a process whose command line names DIR's configuration. The S3 user has the keys
s3rver has (S3RVER, S3RVER), so that what runs against one runs against the other.

As a module: Cluster(dir).start() / .stop(); Cluster.attach(dir) for a running one (whose state.json is there);
cluster.start_gateway(name) starts another radosgw over the same mon and OSD, on a port of its own (Gateway).
Needs the Debian packages radosgw, ceph-mon, ceph-osd, ceph-common and python3-boto3 (scripts/deps rgw):
unavailable() says which is missing.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ACCESS_KEY = SECRET_KEY = "S3RVER"  # s3rver's built-in account, so that the tests' keys are the same on both
REGION = "us-east-1"
USER = "ckpt-test"
MEMSTORE_BYTES = 2 << 30
STATE = "state.json"
PROGRAMS = {"ceph-mon": "ceph-mon", "ceph-osd": "ceph-osd", "radosgw": "radosgw", "radosgw-admin": "radosgw",
            "ceph": "ceph-common", "monmaptool": "ceph-common"}
MON_SECONDS, OSD_SECONDS, GATEWAY_SECONDS = 60, 90, 120
SKIP = 77


class Unavailable(Exception):
    """Ceph or boto3 is missing here; the message says which."""


def unavailable():
    """Why the cluster cannot run here, or None."""
    missing = sorted({package for program, package in PROGRAMS.items() if not shutil.which(program)})
    if missing:
        return f"Ceph is not installed ({', '.join(missing)} missing; scripts/deps rgw installs them)"
    try:
        import boto3  # noqa: F401
    except ImportError:
        return f"boto3 is missing for {sys.executable} (Debian's python3-boto3; scripts/deps rgw installs it)"
    return None


def free_port():
    """A port that nothing listens on now (the system's choice for port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid, marker):
    """Whether pid runs (not a zombie) with marker in its command line: only then is it ours to signal."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z" and marker in cmdline


def stop_pid(pid, marker, timeout=10):
    """SIGTERM, then SIGKILL after timeout seconds; only if the process is ours (marker in its command line)."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        if not pid or not _alive(pid, marker):
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive(pid, marker):
            _reap(pid)
            time.sleep(0.05)
    _reap(pid)


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: whoever started it (or init) reaps it


def s3_client(endpoint, **config):
    import boto3
    import botocore.config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                        region_name=REGION,
                        config=botocore.config.Config(s3={"addressing_style": "path"},
                                                      retries={"total_max_attempts": 1},
                                                      connect_timeout=5, read_timeout=60, **config))


class Gateway:
    """One radosgw process over the cluster: its pid, port and files (under <dir>/gateways/<name>/)."""

    def __init__(self, cluster, name, port=0):
        self.cluster, self.name, self.port = cluster, name, port or free_port()
        self.dir = cluster.dir / "gateways" / name
        self.process = None
        self.pid = None

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=GATEWAY_SECONDS):
        """Starts radosgw on its port (the same one each time) and returns once a bucket PUT succeeds there."""
        if self.running():
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process = self.cluster.spawn(
            "radosgw", ["-n", f"client.rgw.{self.name}", f"--rgw_frontends=beast endpoint=127.0.0.1:{self.port}",
                        f"--rgw_data={self.dir}", f"--log_file={self.dir}/radosgw.log",
                        f"--admin_socket={self.dir}/radosgw.asok"], self.dir / "radosgw.out")
        self.pid = self.process.pid
        (self.dir / "pid").write_text(f"{self.pid}\n")
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def wait_ready(self, timeout):
        import botocore.exceptions
        client = s3_client(self.endpoint)
        probe = f"ckpt-ready-{self.name}"
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise RuntimeError(f"radosgw {self.name} exited; see {self.dir}/radosgw.log and radosgw.out")
            try:
                client.create_bucket(Bucket=probe)
                client.delete_bucket(Bucket=probe)
                return
            except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError,
                    botocore.exceptions.ReadTimeoutError) as err:
                why = err
            except botocore.exceptions.ClientError as err:
                # Until it has read the user, the gateway refuses the keys (InvalidAccessKeyId).
                why = err
            if time.monotonic() > deadline:
                raise RuntimeError(f"radosgw {self.name} did not accept a bucket PUT within {timeout} s: {why}")
            time.sleep(0.25)

    def running(self):
        if self.process is not None:
            return self.process.poll() is None
        return bool(self.pid) and _alive(self.pid, self.cluster.marker)

    def kill(self):
        """SIGKILL, as a crash: what it was doing is left as it was (RADOS keeps what it wrote)."""
        if self.running():
            os.kill(self.pid, signal.SIGKILL)
            if self.process is not None:
                self.process.wait()
            else:
                stop_pid(self.pid, self.cluster.marker, timeout=0)

    def stop(self):
        if self.pid:
            stop_pid(self.pid, self.cluster.marker)
        if self.process is not None:
            self.process.poll()

    def remove(self):
        """Stops it and removes its files."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """The mon, the OSD and the first gateway, under dir."""

    def __init__(self, directory):
        self.dir = Path(directory).resolve()
        self.conf = self.dir / "ceph.conf"
        self.marker = str(self.conf)  # in every daemon's command line: what makes a pid ours
        self.pids = {}
        self.processes = {}
        self.gateway = None

    # -- starting --

    def start(self):
        why = unavailable()
        if why:
            raise Unavailable(why)
        if self.dir.exists() and any(self.dir.iterdir()):
            raise RuntimeError(f"{self.dir} is not empty (rgw.py stop --dir {self.dir} removes a cluster there)")
        began = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        phases = {}

        def phase(name, step):
            start = time.monotonic()
            step()
            phases[name] = round(time.monotonic() - start, 1)
        try:
            self._configure()
            phase("mon", self._start_mon)
            phase("osd", self._start_osd)
            phase("user", self._create_user)
            self.gateway = Gateway(self, "main")
            phase("gateway", self.gateway.start)
            self.pids["rgw"] = self.gateway.pid
            self.write_state(seconds=round(time.monotonic() - began, 1), phases=phases)
        except BaseException:
            self.stop(remove=False)
            raise
        return self

    def _configure(self):
        d = self.dir
        for sub in ("run", "log", "mon", "osd", "crash", "gateways"):
            (d / sub).mkdir()
        self.fsid = str(uuid.uuid4())
        self.mon_ports = (free_port(), free_port())
        settings = {
            "fsid": self.fsid,
            "mon_host": f"[v2:127.0.0.1:{self.mon_ports[0]},v1:127.0.0.1:{self.mon_ports[1]}]",
            "public_addr": "127.0.0.1",
            "cluster_addr": "127.0.0.1",
            "mon_initial_members": "a",
            "auth_cluster_required": "none",
            "auth_service_required": "none",
            "auth_client_required": "none",
            # With authentication off, a client that insists on "secure" loops on
            # "get_initial_auth_request returned -13": let them fall back to crc.
            "ms_mon_client_mode": "crc secure",
            "ms_client_mode": "crc secure",
            "osd_pool_default_size": "1",
            "osd_pool_default_min_size": "1",
            "mon_allow_pool_size_one": "true",
            "mon_allow_pool_delete": "true",
            "osd_crush_chooseleaf_type": "0",
            "osd_pool_default_pg_num": "8",
            "osd_pool_default_pgp_num": "8",
            "osd_pool_default_pg_autoscale_mode": "off",
            "mon_warn_on_pool_no_redundancy": "false",
            # The mon batches changes (a pool made, an OSD up) for a second by default; the gateway's first start
            # makes a dozen of them in a row.
            "paxos_propose_interval": "0.05",
            "run_dir": f"{d}/run",
            "admin_socket": f"{d}/run/$name.asok",
            "log_file": f"{d}/log/$name.log",
            "pid_file": "",
            "crash_dir": f"{d}/crash",
            "keyring": f"{d}/keyring",
            "mon_data": f"{d}/mon/$id",
            # A mon refuses to start (exit 28, ENOSPC) when its file system has less than 5 % free, which on a
            # large disk is still gigabytes; this mon's data is a few MiB, so only a really full disk stops it.
            "mon_data_avail_crit": "0",
            "mon_data_avail_warn": "1",
            "osd_data": f"{d}/osd/$id",
            "osd_objectstore": "memstore",
            "memstore_device_bytes": str(MEMSTORE_BYTES),
            "rgw_data": f"{d}/gateways/$id",
            "rgw_thread_pool_size": "64",
            # No metadata cache, so no watches for gateways to notify of a change: a gateway killed with SIGKILL
            # leaves watches that the OSD keeps for osd_client_watch_timeout (30 s), and every bucket creation of
            # every other gateway would wait for them. Each gateway reads the metadata from RADOS instead.
            "rgw_cache_enabled": "false",
            # A test's objects are small; the defaults are sized for machines that serve many.
            "osd_memory_target": str(512 << 20),
            # Deleted objects' data is collected within seconds, not after the default 2 hours: the OSD holds
            # MEMSTORE_BYTES in memory, which saves with retention running for minutes (scripts/soak) would fill
            # with what they deleted, until every write stalls.
            "rgw_gc_obj_min_wait": "5",
            "rgw_gc_processor_period": "10",
        }
        self.conf.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))

    def spawn(self, program, args, output):
        """Starts a daemon in the foreground (-f), in a session of its own, its output appended to output."""
        with open(output, "ab") as out:
            return subprocess.Popen([program, "-c", str(self.conf), "-f", *args], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, *argv, timeout=60):
        """A Ceph command over the cluster; its standard output, or RuntimeError with what it said."""
        done = subprocess.run([argv[0], "-c", str(self.conf), *argv[1:]], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def _start_mon(self):
        self.run("monmaptool", "--create", "--fsid", self.fsid, "--addv", "a",
                 f"[v2:127.0.0.1:{self.mon_ports[0]},v1:127.0.0.1:{self.mon_ports[1]}]", str(self.dir / "monmap"))
        self.run("ceph-mon", "--mkfs", "-i", "a", "--monmap", str(self.dir / "monmap"))
        self._daemon("mon", "ceph-mon", ["-i", "a"])
        self._wait("the mon", MON_SECONDS, lambda: self.run("ceph", "mon", "stat", "--connect-timeout", "5"))

    def _start_osd(self):
        osd_uuid = str(uuid.uuid4())
        osd_id = self.run("ceph", "osd", "new", osd_uuid).strip()
        (self.dir / "osd" / osd_id).mkdir()
        self.run("ceph-osd", "-i", osd_id, "--mkfs", "--osd-uuid", osd_uuid)
        self._daemon("osd", "ceph-osd", ["-i", osd_id])

        def up():
            if json.loads(self.run("ceph", "osd", "stat", "-f", "json")).get("num_up_osds") != 1:
                raise RuntimeError("the OSD is not up yet")
        self._wait("the OSD", OSD_SECONDS, up)

    def _create_user(self):
        self.run("radosgw-admin", "user", "create", "--uid", USER, "--display-name", "ckpt tests",
                 "--access-key", ACCESS_KEY, "--secret", SECRET_KEY, timeout=120)

    def _daemon(self, role, program, args):
        process = self.spawn(program, args, self.dir / "log" / f"{role}.out")
        self.processes[role] = process
        self.pids[role] = process.pid
        (self.dir / "pids.json").write_text(json.dumps(self.pids) + "\n")  # for a stop after a failed start

    def _wait(self, what, seconds, check):
        deadline = time.monotonic() + seconds
        while True:
            for role, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"the {role} exited with {process.returncode}; see {self.dir}/log")
            try:
                check()
                return
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} was not ready within {seconds} s: {err}") from None
            time.sleep(0.25)

    # -- state --

    @property
    def endpoint(self):
        return self.gateway.endpoint

    def state(self, **extra):
        return {"dir": str(self.dir), "conf": str(self.conf), "pids": self.pids, "endpoint": self.endpoint,
                "port": self.gateway.port, "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "region": REGION,
                **extra}

    def write_state(self, **extra):
        path = self.dir / STATE
        path.with_suffix(".tmp").write_text(json.dumps(self.state(**extra), indent=1) + "\n")
        path.with_suffix(".tmp").rename(path)

    @classmethod
    def attach(cls, directory):
        """The cluster whose state.json is in directory, as its daemons run now; RuntimeError when one is down."""
        cluster = cls(directory)
        try:
            state = json.loads((cluster.dir / STATE).read_text())
        except (OSError, ValueError) as err:
            raise RuntimeError(f"no running cluster in {cluster.dir} ({err}): rgw.py start --dir starts one")
        cluster.pids = state["pids"]
        down = [role for role, pid in cluster.pids.items() if not _alive(pid, cluster.marker)]
        if down:
            raise RuntimeError(f"the cluster in {cluster.dir} is not running ({', '.join(down)} down)")
        cluster.gateway = Gateway(cluster, "main", state["port"])
        cluster.gateway.pid = cluster.pids["rgw"]
        return cluster

    def start_gateway(self, name):
        """Another radosgw over this cluster's mon and OSD, started; the caller stops it (Gateway.remove)."""
        gateway = Gateway(self, name)
        gateway.start()
        return gateway

    # -- stopping --

    def stop(self, remove=True):
        """Stops the gateways (any started over this cluster, by the pid each left), the OSD and the mon."""
        gateways = self.dir / "gateways"
        for pid_file in sorted(gateways.glob("*/pid")) if gateways.is_dir() else ():
            try:
                stop_pid(int(pid_file.read_text()), self.marker)
            except (OSError, ValueError):
                pass
        for role in ("rgw", "osd", "mon"):
            stop_pid(self.pids.get(role), self.marker)
            if role in self.processes:
                self.processes[role].poll()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)


def peak_memory_kib(pids):
    """The sum of the peak resident sizes (VmHWM) of pids, in KiB."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def _stop_dir(directory):
    """Stops what runs of the cluster in directory, by the pids of its state.json and of its gateways, and removes
    the directory."""
    cluster = Cluster(directory)
    for name in (STATE, "pids.json"):
        try:
            state = json.loads((directory / name).read_text())
            cluster.pids = state.get("pids", state)
            break
        except (OSError, ValueError, AttributeError):
            pass  # nothing was started there, or it failed before writing its state: its gateways may still run
    if directory.exists():
        cluster.stop()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--dir", required=True, type=Path, help="the cluster's directory")
    args = parser.parse_args(argv)
    if args.action == "start":
        if args.dir.exists() and any(args.dir.iterdir()):
            # What an earlier run left (a build tree's cluster whose stop never ran): stopped, by the pids it wrote,
            # and removed. One that still runs is refused: someone may be using it.
            try:
                Cluster.attach(args.dir)
                print(f"rgw: a cluster runs in {args.dir} already (rgw.py stop --dir {args.dir} stops it)")
                return 1
            except RuntimeError:
                _stop_dir(args.dir.resolve())
        try:
            cluster = Cluster(args.dir).start()
        except Unavailable as why:
            print(f"SKIP: {why}")
            return SKIP
        state = json.loads((cluster.dir / STATE).read_text())
        print(f"rgw: {state['endpoint']} ready in {state['seconds']} s (pids {state['pids']})")
        return 0
    if args.action == "stop":
        _stop_dir(args.dir.resolve())
        return 0
    try:
        state = json.loads((args.dir / STATE).read_text())
    except (OSError, ValueError) as err:
        print(f"no cluster in {args.dir}: {err}")
        return 1
    marker = str((args.dir / "ceph.conf").resolve())
    state["running"] = {role: _alive(pid, marker) for role, pid in state["pids"].items()}
    state["peak_rss_kib"] = peak_memory_kib(state["pids"].values())
    print(json.dumps(state, indent=1))
    return 0 if all(state["running"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
