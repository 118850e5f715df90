#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Turns the "result ..." lines of bench_npz, bench_numpy.py and bench_peers.py into markdown tables per workload
(ckpt beside numpy and raw I/O; then beside torch and h5py), checks the
goals of the performance work against them (informational: never an exit status), and optionally writes it all
into docs/performance.md between the bench/run markers.

Usage: report.py RESULTS WRITERS META [--mpi MPI_RESULTS MPI_META] [--s3 S3_RESULTS S3_META] [--doc FILE]
       report.py [--mpi MPI_RESULTS MPI_META] [--s3 S3_RESULTS S3_META] [--doc FILE]
  RESULTS  "workload ..." lines from bench/run and the "result ..." lines of both benchmarks
  WRITERS  the output of bench_writers (its table is quoted as it is)
  META     markdown lines saying when, how and where it ran
  --mpi    the "mpi ..." lines of bench_mpi (every world size) and markdown lines saying when, how and where they
           were measured: the table of sharded saves over MPI.
  --s3     the "s3 ..." lines of bench_s3.py and markdown lines saying when, how and where they were measured:
           the tables of saves and restores on the S3 test server beside curl, boto3 and awscli, and their
           goals.
Without RESULTS WRITERS META, only the sections given (each between its own markers, inside bench/run's) are
written into the doc; a full report keeps the doc's sections that it is not given as they were.
"""
import argparse
import re
import shlex
import statistics
import sys

BEGIN, END = "<!-- bench/run: begin -->", "<!-- bench/run: end -->"
MPI_BEGIN, MPI_END = "<!-- bench/run mpi: begin -->", "<!-- bench/run mpi: end -->"
S3_BEGIN, S3_END = "<!-- bench/run s3: begin -->", "<!-- bench/run s3: end -->"
MIB = 1024 * 1024
LIMIT = 64 * MIB  # the RSS goals: at most this much above the state


def records(path):
    """(kind, fields) of each "kind key=value ..." line of a benchmark's output."""
    with open(path) as f:
        for line in f:
            kind, _, rest = line.strip().partition(" ")
            if kind in ("workload", "result", "mpi", "s3"):
                yield kind, dict(kv.split("=", 1) for kv in shlex.split(rest))


def parse(path):
    workloads, results = {}, []
    for kind, fields in records(path):
        if kind == "workload":
            workloads[fields["name"]] = fields["title"]
        elif kind == "result":
            results.append(fields)
    return workloads, results


def paired_ratio(mine, theirs):
    """The median of the runs' time ratios theirs / mine (comma-separated seconds, in run order: each pair ran back to
    back in one process); None if either is missing or they differ in length."""
    if not mine or not theirs or len(mine.split(",")) != len(theirs.split(",")):
        return None
    return statistics.median(float(t) / float(m) for m, t in zip(mine.split(","), theirs.split(",")))


def fmt_ratio(x):
    return f"{x:.2f}" if x is not None else ""


def fmt_rss(b):
    return "n/a" if b < 0 else f"{b / MIB:.0f} MiB"


class Workload:
    def __init__(self, name, title, rows):
        self.name, self.title, self.rows = name, title, rows

    def find(self, op, who, cache="-", what=None):
        for r in self.rows:
            if r["op"] == op and r["who"] == who and r["cache"] == cache and (what is None or what in r["what"]):
                return r
        return None

    def x_raw(self, row):
        """How many times faster row is than raw I/O: the median of the runs' ratios to the raw I/O measured back
        to back with them in the same process (bench_npz's raw rows for ckpt; raw_per_run for numpy), so that a
        minute in which the shared disk is slow slows both sides of each pair. None if not measured."""
        raw = self.find(row["op"], "raw", row["cache"])
        return paired_ratio(row.get("per_run"), row.get("raw_per_run") or (raw or {}).get("per_run"))

    def ratio(self, row, other):
        """How many times faster row is than other (a throughput ratio); None if either is missing. Against raw
        I/O, x_raw; against numpy, the ratio of the two x_raw, each paired within its own process; the ratio of
        the medians where runs were not recorded."""
        if row is None or other is None:
            return None
        mine, theirs = self.x_raw(row), self.x_raw(other)
        if mine is not None and theirs is not None:
            return mine / theirs
        return float(other["seconds"]) / float(row["seconds"])

    def table(self):
        out = [f"### {self.name}: {self.title}", "",
               "| operation | implementation | seconds | MiB/s | x numpy | x raw | CPU/wall | peak RSS above state |",
               "|---|---|---|---|---|---|---|---|"]
        sections = [("save", "-", "save")] + [("restore", c, f"restore, {c} page cache")
                                                for c in ("warm", "cold") if self.find("restore", "raw", c)]
        for op, cache, label in sections:
            numpy, raw = self.find(op, "numpy", cache), self.find(op, "raw", cache)
            order = {"ckpt": 0, "numpy": 1, "raw": 2}
            for r in sorted((x for x in self.rows if x["op"] == op and x["cache"] == cache),
                            key=lambda x: order[x["who"]]):
                s = float(r["seconds"])
                mibs = int(r["state_bytes"]) / MIB / s
                out.append(f"| {label} | {r['what']} | {s:.3f} | {mibs:.0f} | {fmt_ratio(self.ratio(r, numpy))} | "
                           f"{fmt_ratio(self.ratio(r, raw))} | {float(r['cores']):.2f} | "
                           f"{fmt_rss(int(r['rss_above']))} |")
        files = [f"{r['what'].split(' (')[0].split(' +')[0]}{self.level(r)}: {int(r['file_bytes']) / MIB:.0f} MiB "
                 f"({int(r['file_bytes']) / int(r['state_bytes']):.0%})"
                 for r in self.rows if r["op"] == "save" and r["who"] != "raw"]
        out += ["", f"File sizes: {'; '.join(files)}."]
        beside = [f"{r['op']}{'' if r['cache'] == '-' else ' ' + r['cache']} "
                  f"{statistics.median(float(s) for s in r['raw_per_run'].split(',')):.3f} s"
                  for r in self.rows if r["who"] == "numpy" and r.get("raw_per_run")]
        if beside:
            out.append(f"The same raw I/O measured beside numpy, in its process (medians): {', '.join(beside)}.")
        out.append("")
        return out

    @staticmethod
    def level(r):
        m = re.search(r"level \d", r["what"])
        return f" {m.group(0)}" if m else ""


def goal(ok, text):
    if ok is None:
        return f"- not measured: {text}"
    return f"- {'met' if ok else '**not met**'}: {text}"


def at_least(x, limit):
    return None if x is None else x >= limit


def goals(wl, writers_text):
    out = ["### Goals (informational)", ""]

    def speed(w, what, op, other, cache, limit):
        row, base = w.find(op, "ckpt", cache), w.find(op, other, cache)
        x = w.ratio(row, base)
        shown = f"{x:.2f}x" if x is not None else "?"
        where = f" ({cache} cache)" if cache != "-" else ""
        return goal(at_least(x, limit), f"{w.name} {what}{where} >= {limit}x {other}: {shown}")

    caches = ("warm", "cold")
    limits = {"W1": (("raw", 0.8), ("numpy", 1.0)), "W2": (("numpy", 10), ("raw", 0.9)), "W4": (("raw", 0.8),),
              "W5": (("raw", 0.8), ("numpy", 1.0))}
    # Save goals that differ from the restores': W2's against numpy; one large array (W5) at 1.1x raw, as W1's many.
    save_limits = {("W2", "numpy"): 3, ("W5", "raw"): 1.1}
    for name in sorted(wl):
        w = wl[name]
        if name == "W3":
            numpy = w.find("save", "numpy")
            for r in [x for x in w.rows if x["op"] == "save" and x["who"] == "ckpt"]:
                x = w.ratio(r, numpy)
                shown = f"{x:.2f}x" if x is not None else "?"
                out.append(goal(at_least(x, 2), f"W3 {r['what']} >= 2x np.savez_compressed (zlib's default, "
                                                f"level 6): {shown}"))
                out.append(goal(float(r["cores"]) >= 1.5,
                                f"W3 {r['what']} keeps both cores busy (CPU/wall >= 1.5): {float(r['cores']):.2f}"))
        else:
            for other, limit in limits.get(name, ()):
                out.append(speed(w, "save", "save", other, "-", save_limits.get((name, other), limit)))
                out += [speed(w, "restore", "restore", other, c, limit) for c in caches if w.find("restore", other, c)]
        peaks = [(r, int(r["rss_above"])) for r in w.rows if r["who"] == "ckpt" and r["op"] != "map"]  # map: its own
        listed = ", ".join(f"{r['op']}{'' if r['cache'] == '-' else ' ' + r['cache']}{Workload.level(r)} "
                           f"{fmt_rss(b)}" for r, b in peaks)
        out.append(goal(None if any(b < 0 for _, b in peaks) else all(b <= LIMIT for _, b in peaks),
                        f"{name} peak RSS <= 64 MiB above the state: {listed}"))
    m = re.search(r"caller blocked \|[^|]*\|[^|]*\| ([0-9.]+) x memcpy", writers_text)
    out.append(goal(None if not m else float(m.group(1)) <= 1.5,
                    f"background save blocks the caller <= 1.5x a memcpy of the state: "
                    f"{m.group(1) + 'x' if m else '?'}"))
    return out + [""]


def map_table(w):
    """The mapped views of a workload (bench_npz's op=map rows), each paired with warm read()s of the raw file."""
    rows = [r for r in w.rows if r["op"] == "map"]
    if not rows:
        return []
    restore = w.find("restore", "ckpt", "warm")
    out = [f"Mapped views ({w.name}, warm page cache; ckpt_reader_map, each run beside a warm read() of the raw file):", "",
           "| operation | seconds | ms per GiB | x raw read() | x ckpt_restore | CPU/wall | peak RSS above state |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        s = float(r["seconds"])
        out.append(f"| {r['what']} | {s:.4f} | {s * 1000 / (int(r['state_bytes']) / (1024 * MIB)):.2f} | "
                   f"{fmt_ratio(w.x_raw(r))} | {fmt_ratio(w.ratio(r, restore))} | {float(r['cores']):.2f} | "
                   f"{fmt_rss(int(r['rss_above']))} |")
    return out + [""]


def map_goals(wl):
    """The goals of the mapped views (informational)."""
    out = ["### Goals of the mapped views (informational)", ""]
    for name in sorted(wl):
        w = wl[name]
        rows = {r["what"]: r for r in w.rows if r["op"] == "map"}
        touched = next((r for what, r in rows.items() if what.startswith("open + ckpt_reader_map every array + one")), None)
        alone = next((r for what, r in rows.items() if "nothing touched" in what), None)
        if not touched or not alone:
            continue
        gib = int(alone["state_bytes"]) / (1024 * MIB)
        ms = float(alone["seconds"]) * 1000
        if name == "W1":
            x = w.ratio(touched, w.find("restore", "ckpt", "warm"))
            out.append(goal(at_least(x, 1.5), f"W1 open + map + one byte per page >= 1.5x ckpt_restore (warm): "
                                              f"{fmt_ratio(x)}x"))
            x = w.x_raw(touched)
            out.append(goal(at_least(x, 1.5), f"W1 open + map + one byte per page >= 1.5x a read() of the raw file "
                                              f"(warm): {fmt_ratio(x)}x"))
            out.append(goal(ms / gib <= 1, f"W1 map alone, CRC skipped, <= 1 ms per GiB: {ms / gib:.2f} ms per GiB"))
        if name == "W4":
            out.append(goal(ms <= 5, f"W4 lazy open + map of one array, CRC skipped, <= 5 ms: {ms:.2f} ms"))
        grown, file_bytes = int(alone["rss_above"]), int(alone["file_bytes"])
        out.append(goal(None if grown < 0 else grown <= LIMIT,
                        f"{name} RSS grows only by the pages touched: {fmt_rss(grown)} when none are, "
                        f"{fmt_rss(int(touched['rss_above']))} when all are (the file: {fmt_rss(file_bytes)})"))
    return out + [""]
PEERS = ("torch", "h5py")  # bench_peers.py's rows: a table of their own under each workload's


def peer_sections(w):
    return [("save", "-", "save")] + [("restore", c, f"restore, {c} page cache")
                                      for c in ("warm", "cold") if w.find("restore", "ckpt", c)]


def peer_table(w, rows):
    """ckpt beside torch and h5py on workload w: ckpt's rows again, then each peer's, with "x torch" and "x h5py"
    (as "x numpy": each side's runs paired with the raw I/O of its own process) and "x raw" (beside the peer)."""
    if not rows:
        return []
    both = Workload(w.name, w.title, w.rows + rows)
    peers = [p for p in PEERS if any(r["who"] == p for r in rows)]
    out = [f"#### {w.name} beside {' and '.join(peers)}", "",
           f"| operation | implementation | seconds | MiB/s | {' | '.join('x ' + p for p in peers)} | x raw | "
           f"CPU/wall | peak RSS above state |",
           "|---|---|---|---|" + "---|" * len(peers) + "---|---|---|"]
    for op, cache, label in peer_sections(both):
        base = {p: both.find(op, p, cache) for p in peers}
        mine = [r for r in both.rows if r["op"] == op and r["cache"] == cache and r["who"] == "ckpt"]
        for r in mine + [base[p] for p in peers if base[p]]:
            s = float(r["seconds"])
            against = " | ".join(fmt_ratio(both.ratio(r, base[p])) for p in peers)
            out.append(f"| {label} | {r['what']} | {s:.3f} | {int(r['state_bytes']) / MIB / s:.0f} | {against} | "
                       f"{fmt_ratio(both.x_raw(r))} | {float(r['cores']):.2f} | {fmt_rss(int(r['rss_above']))} |")
    saves = [both.find("save", p) for p in peers]
    files = [f"{r['who']}: {int(r['file_bytes']) / MIB:.0f} MiB ({int(r['file_bytes']) / int(r['state_bytes']):.0%})"
             for r in saves if r]
    out += ["", f"File sizes: {'; '.join(files)}."]
    for p in peers:
        beside = [f"{r['op']}{'' if r['cache'] == '-' else ' ' + r['cache']} "
                  f"{statistics.median(float(x) for x in r['raw_per_run'].split(',')):.3f} s"
                  for r in rows if r["who"] == p and r.get("raw_per_run")]
        if beside:
            out.append(f"The same raw I/O measured beside {p}, in its process (medians): {', '.join(beside)}.")
    return out + [""]


def peer_goals(wl, peer_rows):
    """The goals against torch and h5py: ckpt's save and restores at least 1.5x each on W1 (and W1 in bfloat16),
    5x on W2 (informational, like goals())."""
    out = ["### Goals against torch and h5py (informational)", ""]
    for name, limit in (("W1", 1.5), ("W1-bf16", 1.5), ("W2", 5)):
        if name not in wl or not peer_rows.get(name):
            continue
        both = Workload(name, wl[name].title, wl[name].rows + peer_rows[name])
        for p in PEERS:
            for op, cache, label in peer_sections(both):
                other = both.find(op, p, cache)
                if other is None:
                    continue
                x = both.ratio(both.find(op, "ckpt", cache), other)
                shown = f"{x:.2f}x" if x is not None else "?"
                out.append(goal(at_least(x, limit), f"{name} {label} >= {limit}x {p}: {shown}"))
    return out + [""] if len(out) > 2 else []


def mpi_table(path, meta):
    """The sharded saves over MPI: a row per world size from bench_mpi's "mpi" lines, between their own markers."""
    rows = [f for kind, f in records(path) if kind == "mpi"]
    out = [MPI_BEGIN, "### Sharded saves over MPI", "", meta, "",
           "| state | ranks | MiB per rank | save GB/s | raw write GB/s | save x raw | restore warm GB/s | "
           "x raw read | restore cold GB/s | x raw read | commit ms (median, highest) | commit % of save |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    layouts = {"mixed": "mixed", "one": "one array per rank"}
    goals = []
    for layout, ranks in sorted({(r.get("layout", "mixed"), int(r["ranks"])) for r in rows},
                                key=lambda k: (list(layouts).index(k[0]), k[1])):
        mine = {(r["op"], r["who"], r["cache"]): r for r in rows
                if int(r["ranks"]) == ranks and r.get("layout", "mixed") == layout}

        def gbs(op, who, cache):
            r = mine.get((op, who, cache))
            return f"{int(r['state_bytes']) / 1e9 / float(r['seconds']):.2f}" if r else ""

        def x_raw(op, cache):
            a, b = mine.get((op, "ckpt", cache)), mine.get((op, "raw", cache))
            return fmt_ratio(paired_ratio(a["per_run"], b["per_run"]) if a and b else None)

        save, commit = mine[("save", "ckpt", "-")], mine[("commit", "ckpt", "-")]
        per_rank = int(save["state_bytes"]) / ranks / MIB
        if layout == "one":
            x = paired_ratio(save["per_run"], mine[("save", "raw", "-")]["per_run"])
            goals.append(goal(at_least(x, 1.1), f"one array per rank, {ranks} rank{'s' if ranks > 1 else ''}: save "
                                                f">= 1.1x raw write: {fmt_ratio(x)}x"))
        out.append(f"| {layouts[layout]} | {ranks} | {per_rank:.0f} | {gbs('save', 'ckpt', '-')} | "
                   f"{gbs('save', 'raw', '-')} | "
                   f"{x_raw('save', '-')} | {gbs('restore', 'ckpt', 'warm')} | {x_raw('restore', 'warm')} | "
                   f"{gbs('restore', 'ckpt', 'cold')} | {x_raw('restore', 'cold')} | "
                   f"{float(commit['ms']):.1f} (highest {max(float(x) for x in commit['per_run'].split(',')):.1f}) | "
                   f"{100 * float(commit['share']):.1f} |")
    if goals:
        out += ["", "Goals (informational):", ""] + goals
    return out + ["", MPI_END]


S3_GOALS = {"W1": (0.9, "{name} {op} >= 0.9x raw curl"), "W2": (0.5, "{name} {op} within 2x of raw curl (>= 0.5x)")}


def median_of(row, field):
    return statistics.median(float(x) for x in row[field].split(","))


def s3_layout(r):
    """How a ckpt row's file went up (in parts of part_size, or in one PUT when it fits in one) or came down (in
    ranges of part_size, or in one window of the whole file)."""
    part, size = int(r["part_size"]), int(r["file_bytes"])
    if r["op"] == "save":
        return "one PUT" if part >= size else f"{part // MIB} MiB parts"
    return "one window of the whole file" if part >= size else f"{part // MIB} MiB ranges"


def s3_processes(r):
    """[(name, CPU seconds, MiB read, MiB written)] of each server process (medians), from server_processes; one
    entry named "server" for lines without it."""
    if not r.get("server_processes"):
        return [("server", median_of(r, "server_cpu"), float(r["server_read"]) / MIB,
                 float(r["server_written"]) / MIB)]
    out = []
    for entry in r["server_processes"].split(","):
        name, cpu, read, written = entry.rsplit(":", 3)
        out.append((name, float(cpu), float(read) / MIB, float(written) / MIB))
    return out


def s3_io_header(r):
    """The header of the bytes column. On RGW /proc/<pid>/io sees only the messenger between radosgw and the OSD,
    which read()s: the OSD's reads are the bytes going into RADOS, the gateway's those coming out of it (beast's
    sockets to the client use recvmsg and sendmsg, which rchar and wchar do not count)."""
    if {p for p, _, _, _ in s3_processes(r)} == {"radosgw", "ceph-osd"}:
        return "into, out of RADOS MiB"
    return "server read, written MiB"


def s3_server_cells(r):
    """The server CPU and bytes cells: one process as they are; RGW's (radosgw and ceph-osd) as the whole CPU with
    each one's in parentheses, and the bytes that went into RADOS (the OSD's reads) and out of it (the gateway's)."""
    processes = s3_processes(r)
    if len(processes) == 1:
        _, cpu, read, written = processes[0]
        return f"{median_of(r, 'server_cpu'):.2f}", f"{read:.0f}, {written:.0f}"
    cpu = f"{median_of(r, 'server_cpu'):.2f} ({' + '.join(f'{c:.2f}' for _, c, _, _ in processes)})"
    read = {name: read for name, _, read, _ in processes}
    if set(read) == {"radosgw", "ceph-osd"}:
        return cpu, f"{read['ceph-osd']:.0f}, {read['radosgw']:.0f}"
    return cpu, "; ".join(f"{name} {read:.0f}, {written:.0f}" for name, _, read, written in processes)


# What CompleteMultipartUpload does on each server, for the note on what the multipart layout costs.
S3_COMPLETION = {
    "s3rver": "in which s3rver reads the parts back, MD5s them and writes the object a second time; one PUT pays "
              "none of it",
    "rgw": "in which RGW writes the object's manifest over the parts it holds (it copies no bytes: the server's "
           "bytes into RADOS are those of the parts); one PUT has no completion",
}


def s3_tables(path, meta):
    """The saves and restores on the S3 test server (bench_s3.py's "s3" lines): a table per workload with what
    the multipart layout costs on this server below it, then the goals, between their own markers."""
    rows = [f for kind, f in records(path) if kind == "s3"]
    names = list(dict.fromkeys(r["workload"] for r in rows))
    out = [S3_BEGIN, "### On S3 (bench_s3.py)", "", meta, ""]
    goal_lines = []
    for name in names:
        mine = [r for r in rows if r["workload"] == name]
        by = lambda op, who: [r for r in mine if r["op"] == op and r["who"] == who]
        default = {op: by(op, "ckpt")[0] for op in ("save", "restore")}  # libckpt_s3's defaults come first
        curl = {"save": by("save", "curl")[0], "restore": by("restore", "curl")[0]}
        # boto3 with ckpt's layout (16 MiB parts and ranges, 4 threads), where it was measured
        boto = {op: (by(op, "boto3") or [None])[0] for op in ("save", "restore")}
        first = mine[0]
        server = first.get("server", "s3rver")
        state, size = int(first["state_bytes"]), int(first["file_bytes"])
        processes = [p for p, _, _, _ in s3_processes(first)]
        cpu_header = "server CPU s" + (f" ({' + '.join(processes)})" if len(processes) > 1 else "")
        out += [f"#### {name}: {state / MIB:.0f} MiB in {first['arrays']} float32 arrays, stored", "",
                "| operation | implementation | seconds | MiB/s | x raw curl | x boto3 | client CPU s | "
                f"{cpu_header} | {s3_io_header(first)} | peak RSS above state |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for op in ("save", "restore"):
            for r in [r for r in mine if r["op"] == op]:
                s = float(r["seconds"])
                x_boto = paired_ratio(r["per_run"], boto[op]["per_run"]) if boto[op] else None
                cpu, io = s3_server_cells(r)
                out.append(f"| {op} | {r['what']} | {s:.3f} | {state / MIB / s:.0f} | "
                           f"{fmt_ratio(paired_ratio(r['per_run'], curl[op]['per_run']))} | {fmt_ratio(x_boto)} | "
                           f"{median_of(r, 'client_cpu'):.2f} | {cpu} | {io} | "
                           f"{fmt_rss(int(r['rss_above'])) if int(r['rss_above']) >= 0 else ''} |")
        startup = by("startup", "aws")
        out += ["", f"The file: {size / MIB:.1f} MiB ({size / state:.1%} of the state)." +
                (f" Each aws command starts a Python program: `aws s3 ls` of one object takes "
                 f"{float(startup[0]['seconds']):.2f} s." if startup else "")]
        multipart = by("save", "curl-multipart")
        if multipart:
            m, save = multipart[0], default["save"]
            complete = m["complete"].split(",")
            gaps = [float(c) - float(p) for c, p in zip(save["per_run"].split(","), curl["save"]["per_run"].split(","))]
            shares = [float(c) / float(t) for c, t in zip(complete, save["per_run"].split(","))]
            gap, done = statistics.median(gaps), median_of(m, "complete")
            if gap <= 0:
                of_gap = "ckpt's save is not slower than curl's one PUT here"
            elif done >= gap:
                of_gap = f"more than the whole of the {gap:.2f} s by which ckpt's save trails curl's one PUT"
            else:
                of_gap = f"{done / gap:.0%} of the {gap:.2f} s by which ckpt's save trails curl's one PUT"
            out.append(
                f"What the multipart layout costs on this server: curl's upload of the same bytes in "
                f"{m['what'].split('multipart, ')[1]} took {float(m['seconds']):.2f} s, {median_of(m, 'parts'):.2f} s "
                f"until every part was up, then {done:.2f} s for the CompleteMultipartUpload alone "
                f"({100 * statistics.median(float(c) / float(t) for c, t in zip(complete, m['per_run'].split(','))):.0f}% "
                f"of that upload), {S3_COMPLETION.get(server, 'one PUT has no completion')}. That completion is "
                f"{100 * statistics.median(shares):.0f}% of ckpt's default save ({float(save['seconds']):.2f} s) and "
                f"{of_gap}. ckpt's default save is {fmt_ratio(paired_ratio(save['per_run'], m['per_run']))}x curl's "
                f"multipart upload of the same layout.")
        out.append("")
        if name in S3_GOALS:
            limit, text = S3_GOALS[name]
            for op in ("save", "restore"):
                x = paired_ratio(default[op]["per_run"], curl[op]["per_run"])
                others = [(paired_ratio(r["per_run"], curl[op]["per_run"]), r) for r in by(op, "ckpt")
                          if r is not default[op]]
                extra = []
                if op == "save" and multipart:
                    extra.append(f"{fmt_ratio(paired_ratio(default[op]['per_run'], multipart[0]['per_run']))}x "
                                 f"curl's multipart upload of the same parts")
                if boto[op]:
                    extra.append(f"{fmt_ratio(paired_ratio(default[op]['per_run'], boto[op]['per_run']))}x boto3 "
                                 f"with the same {'parts' if op == 'save' else 'ranges'} and parallelism")
                if others:
                    best, r = max(others, key=lambda o: o[0] or 0)
                    extra.append(f"with a larger part_size at best {fmt_ratio(best)}x, {s3_layout(r)}")
                shown = f"{x:.2f}x" if x is not None else "?"
                goal_lines.append(goal(at_least(x, limit), text.format(name=name, op=op) + f": {shown}" +
                                       (f" ({'; '.join(extra)})" if extra else "")))
    if goal_lines:
        out += ["#### Goals on S3 (informational)", "", *goal_lines, ""]
    return out + [S3_END]


def between(doc, begin, end):
    """The text of doc from begin to end, markers included; None if either is missing."""
    if begin not in doc or end not in doc:
        return None
    return doc[doc.index(begin):doc.index(end) + len(end)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("full", nargs="*", metavar="RESULTS WRITERS META")
    p.add_argument("--mpi", nargs=2, metavar=("MPI_RESULTS", "MPI_META"))
    p.add_argument("--s3", nargs=2, metavar=("S3_RESULTS", "S3_META"))
    p.add_argument("--doc")
    a = p.parse_args()
    if len(a.full) not in (0, 3) or not (a.full or a.mpi or a.s3):
        p.error("give RESULTS WRITERS META, --mpi MPI_RESULTS MPI_META, --s3 S3_RESULTS S3_META, or several")
    doc = None
    if a.doc:
        with open(a.doc) as f:
            doc = f.read()
    # The sections with markers of their own: rebuilt from what was given, else kept as the doc has them.
    sections, given = {}, []
    for given_files, begin, end, build in ((a.mpi, MPI_BEGIN, MPI_END, mpi_table), (a.s3, S3_BEGIN, S3_END, s3_tables)):
        if given_files:
            with open(given_files[1]) as f:
                sections[begin] = "\n".join(build(given_files[0], f.read().rstrip("\n")))
            given.append((begin, end))
        elif doc is not None:
            sections[begin] = between(doc, begin, end)
    if not a.full:
        for begin, end in given:
            print(sections[begin])
            if doc is None:
                continue
            old = between(doc, begin, end)
            if old is not None:
                doc = doc.replace(old, sections[begin])
            elif END in doc:
                doc = doc.replace(END, f"{sections[begin]}\n\n{END}")
            else:
                p.error(f"{a.doc} has no bench/run markers: run bench/run first")
        if doc is not None:
            write_doc(a.doc, doc)
        return

    results_path, writers_path, meta_path = a.full
    titles, results = parse(results_path)
    peer_rows = {name: [r for r in results if r["workload"] == name and r["who"] in PEERS] for name in titles}
    results = [r for r in results if r["who"] not in PEERS]
    wl = {name: Workload(name, title, [r for r in results if r["workload"] == name]) for name, title in titles.items()}
    with open(writers_path) as f:
        writers = f.read()
    with open(meta_path) as f:
        meta = f.read().rstrip("\n")

    lines = [meta, ""]
    for w in wl.values():
        lines += w.table() + peer_table(w, peer_rows[w.name])
        lines += map_table(w)
    lines += goals(wl, writers)
    lines += peer_goals(wl, peer_rows)
    lines += map_goals(wl)
    lines += ["### Background and synchronous save (bench_writers)", ""]
    lines += [l for l in writers.splitlines() if l.strip()] + [""]
    for begin in (MPI_BEGIN, S3_BEGIN):
        if sections.get(begin):
            lines += [sections[begin], ""]
    text = "\n".join(lines)
    print(text)

    if doc is not None:
        block = f"{BEGIN}\n{text}\n{END}"
        if BEGIN in doc and END in doc:
            doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
        else:
            doc = (doc.rstrip("\n") + "\n\n## Side by side with numpy and raw I/O (bench/run)\n\n"
                   "Reproduce with `bench/run` (`bench/run --help` for the options); it rewrites what lies between "
                   "the two markers below.\n\n" + block + "\n")
        write_doc(a.doc, doc)


def write_doc(path, doc):
    with open(path, "w") as f:
        f.write(doc)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
