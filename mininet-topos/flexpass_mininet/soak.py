"""Soak: a long mixed workload on the leaf-spine, with the memory and CPU of every
agent and switch process over time (issue #14):
``python3 -m flexpass_mininet soak experiments/soak.toml [--duration S]``.

An experiment is a TOML file (mininet-topos/experiments/soak.toml): the fabric, the
duration, and the traffic, all running at once for the whole duration:

* ``[[workload]]``: one ``flexpass workload`` process per entry — Poisson arrivals of
  flows with sizes from a CDF (web search: host-agent/workloads/search.cdf) from one
  host to a list of hosts, over FlexPass, ExpressPass, DCTCP (the host agent's
  transports) or ``tcp`` (kernel TCP).  The process runs for the whole soak (its flow
  count is the expected number of arrivals in the duration); when it ends early a new
  one continues with the flows still expected.
* ``[[incast]]``: bursts — every ``every_s`` a client asks ``flows`` responses of
  ``bytes`` from the servers at once (``flexpass incast``), cycling through its
  transports.
* Every host runs ``flexpass serve --respond`` (UDP transports and kernel TCP) for the
  whole soak; the resident controller ``flexpass-ctl run`` holds the switches.

Sampled every ``sample_s`` from /proc: resident memory (VmRSS) and CPU (utime + stime)
of every switch process, every host agent (serve, workload, incast) and the
controller.  Checked: every flow a receiver completed is byte-exact — its SHA-256
equals that of the bytes the generators send (``flexpass send``'s pattern; an incast
request, ``GET n\\n``) — so *corrupted bytes* must be 0; flows a sender reported
complete but no receiver has are *lost*.  Counted: flows completed, sender errors,
timeouts and retransmissions.  Writes result.json, resources.csv, flows.csv,
resources.png and the logs into <out>/<name>-<switch>/, and prints progress.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from . import env
from .expfile import ExperimentError, LeafSpineRun, no_leftovers, read, take, take_run
from .faults import ControlPlane
from .fabric import leaf_spine
from .scaling import Scaled

AGENT_PORT = 7890
TCP_PORT = 7891
#: Source ports: workload i binds WORKLOAD_PORT + i, an incast client INCAST_PORT.
WORKLOAD_PORT = 21000
INCAST_PORT = 7990
TRANSPORTS = ("flexpass", "expresspass", "dctcp", "tcp")
#: Mean flow sizes of the compiled-in CDFs (host-agent/workloads/README.md), for the
#: expected number of arrivals.
CDF_MEAN_BYTES = {"search": 1654275, "mining": 7410212, "cachefollower": 701490, "webserver": 63735,
                  "facebook": 504292, "google": 71110}


@dataclass
class Workload:
    src: str
    dst: List[str]
    transport: str
    cdf: str = "search"
    load: float = 0.1
    seed: int = 1


@dataclass
class Incast:
    client: str
    servers: List[str]
    transports: List[str]
    flows: int = 6
    bytes: int = 64000
    every_s: float = 20.0


@dataclass
class Soak(LeafSpineRun):
    duration_s: float = 1800.0
    sample_s: float = 2.0
    progress_s: float = 30.0
    drain_s: float = 60.0
    controller: bool = True
    workloads: List[Workload] = field(default_factory=list)
    incasts: List[Incast] = field(default_factory=list)


def parse_soak(raw: dict, name: str) -> Soak:
    s = Soak(name=name)
    take_run(raw, s, (("duration_s", float), ("sample_s", float), ("progress_s", float), ("drain_s", float),
                      ("controller", bool)))
    for key in ("duration_s", "sample_s", "progress_s"):
        if not getattr(s, key) > 0:
            raise ExperimentError(f"{name}.{key}: must be > 0, got {getattr(s, key)}")
    fab = leaf_spine(s.spines, s.leaves, s.hosts_per_leaf)

    def host(h, p):
        if h not in fab.hosts:
            raise ExperimentError(f"{p}: no host {h!r} (hosts: {', '.join(fab.hosts)})")
        return h

    def transport(t, p):
        if t not in TRANSPORTS:
            raise ExperimentError(f"{p}: transport one of {', '.join(TRANSPORTS)}, got {t!r}")
        return t

    for i, w in enumerate(raw.pop("workload", [])):
        p = f"{name}.workload[{i}]"
        wl = Workload(host(take(w, "src", str, p), f"{p}.src"),
                      [host(h, f"{p}.dst") for h in take(w, "dst", list, p, [])],
                      transport(take(w, "transport", str, p), f"{p}.transport"))
        wl.cdf = take(w, "cdf", str, p, wl.cdf)
        wl.load = take(w, "load", float, p, wl.load)
        wl.seed = take(w, "seed", int, p, i + 1)
        if not wl.dst or wl.src in wl.dst:
            raise ExperimentError(f"{p}.dst: a non-empty list of other hosts")
        if wl.cdf not in CDF_MEAN_BYTES:
            raise ExperimentError(f"{p}.cdf: one of {', '.join(CDF_MEAN_BYTES)}, got {wl.cdf!r}")
        if not 0 < wl.load <= 1:
            raise ExperimentError(f"{p}.load: in (0, 1], got {wl.load}")
        no_leftovers(w, p)
        s.workloads.append(wl)
    for i, c in enumerate(raw.pop("incast", [])):
        p = f"{name}.incast[{i}]"
        ic = Incast(host(take(c, "client", str, p), f"{p}.client"),
                    [host(h, f"{p}.servers") for h in take(c, "servers", list, p, [])],
                    [transport(t, f"{p}.transports") for t in take(c, "transports", list, p, ["flexpass"])])
        ic.flows = take(c, "flows", int, p, ic.flows)
        ic.bytes = take(c, "bytes", int, p, ic.bytes)
        ic.every_s = take(c, "every_s", float, p, ic.every_s)
        if not ic.servers or ic.client in ic.servers or not ic.transports:
            raise ExperimentError(f"{p}: servers (other hosts) and transports must be non-empty lists")
        if ic.flows < 1 or ic.bytes < 1 or not ic.every_s > 0:
            raise ExperimentError(f"{p}: flows, bytes and every_s must be > 0")
        no_leftovers(c, p)
        s.incasts.append(ic)
    if not s.workloads and not s.incasts:
        raise ExperimentError(f"{name}: no [[workload]] and no [[incast]]")
    no_leftovers(raw, name)
    return s


def load_soak(path, overrides: Optional[dict] = None) -> Soak:
    raw, name = read(path, overrides)
    return parse_soak(raw, name)


# -- byte-exact checks -----------------------------------------------------------------

class PatternHashes:
    """SHA-256 of the generators' bytes (byte i = (i · 2654435761 >> 13) & 0xff, the
    pattern of ``flexpass send/workload/serve --respond``), by size, cached."""

    CHUNK = 1 << 20

    def __init__(self):
        import numpy as np

        self.np = np
        self.cache: Dict[int, str] = {}

    def __call__(self, size: int) -> str:
        if size not in self.cache:
            np, h = self.np, hashlib.sha256()
            for off in range(0, size, self.CHUNK):
                i = np.arange(off, min(size, off + self.CHUNK), dtype=np.uint64)
                h.update(((i * np.uint64(2654435761)) >> np.uint64(13)).astype(np.uint8).tobytes())
            self.cache[size] = h.hexdigest()
        return self.cache[size]


def request_sha(size: int) -> str:
    return hashlib.sha256(f"GET {size}\n".encode()).hexdigest()


class LogTail:
    """New complete JSON lines of a growing log file."""

    def __init__(self, path: Path):
        self.path, self.pos, self.buf = path, 0, ""

    def read(self) -> List[dict]:
        try:
            with open(self.path, "r", errors="replace") as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            return []
        lines = (self.buf + data).split("\n")
        self.buf = lines.pop()
        records = (env.json_record(line) for line in lines)
        return [r for r in records if r is not None]


# -- /proc sampling ---------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_usage(pid: int):
    """(VmRSS kB, CPU seconds utime + stime) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss = next(int(l.split()[1]) for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if l.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    if stat[0] in "ZX" or Path(f"/proc/{pid}/comm").read_text().strip() == "mnexec":
        return None  # exiting, or mnexec not yet exec'd into the program
    return rss, (int(stat[11]) + int(stat[12])) / CLK_TCK


class ResourceSampler:
    """RSS and CPU share of named processes; a name may be re-bound to a new PID (a
    restarted workload), its series continues."""

    def __init__(self):
        self.procs: Dict[str, tuple] = {}  # name -> (role, pid)
        self.last: Dict[tuple, tuple] = {}  # (name, pid) -> (t, cpu_s)
        self.rows: List[dict] = []

    def watch(self, name: str, role: str, pid: int) -> None:
        self.procs[name] = (role, pid)

    def sample(self, t_rel: float) -> None:
        now = time.monotonic()
        for name, (role, pid) in self.procs.items():
            u = proc_usage(pid)
            if u is None:
                continue
            rss, cpu = u
            prev = self.last.get((name, pid))
            self.last[(name, pid)] = (now, cpu)
            pct = None if prev is None or now <= prev[0] else 100.0 * (cpu - prev[1]) / (now - prev[0])
            self.rows.append({"t_s": round(t_rel, 2), "process": name, "role": role, "pid": pid,
                              "rss_kb": rss, "cpu_pct": None if pct is None else round(pct, 1),
                              "cpu_s": round(cpu, 2)})

    def series(self, name: str) -> List[dict]:
        return [r for r in self.rows if r["process"] == name]


def memory_summary(rows: List[dict]) -> dict:
    """First, last, peak RSS and the trend over the second half (least squares, kB/min):
    a leak shows as a steady positive slope; a plateau as ~0."""
    if not rows:
        return {"samples": 0}
    half = [r for r in rows if r["t_s"] >= rows[0]["t_s"] + (rows[-1]["t_s"] - rows[0]["t_s"]) / 2]
    slope = None
    if len(half) >= 3:
        ts = [r["t_s"] / 60 for r in half]
        ms = [r["rss_kb"] for r in half]
        mt, mm = sum(ts) / len(ts), sum(ms) / len(ms)
        den = sum((t - mt) ** 2 for t in ts)
        slope = round(sum((t - mt) * (m - mm) for t, m in zip(ts, ms)) / den, 2) if den else None
    cpu = [r["cpu_pct"] for r in rows if r["cpu_pct"] is not None]
    return {"samples": len(rows), "rss_first_kb": rows[0]["rss_kb"], "rss_last_kb": rows[-1]["rss_kb"],
            "rss_peak_kb": max(r["rss_kb"] for r in rows), "rss_slope_second_half_kb_per_min": slope,
            "cpu_mean_pct": round(sum(cpu) / len(cpu), 1) if cpu else None,
            "cpu_max_pct": max(cpu) if cpu else None, "cpu_s_total": rows[-1]["cpu_s"],
            "pids": sorted({r["pid"] for r in rows})}


# -- the runner ----------------------------------------------------------------------------

def expected_flows(w: Workload, link_bps: float, seconds: float) -> int:
    """Poisson arrivals at `load` of the link with the CDF's mean size, in `seconds`."""
    return max(1, round(w.load * link_bps / (CDF_MEAN_BYTES[w.cdf] * 8) * seconds))


def run(s: Soak, out: Path, progress=print) -> dict:
    from .network import start_network

    sc = Scaled(s.link_mbps * 1e6, s.rtt_us / 1e6)
    fab = leaf_spine(s.spines, s.leaves, s.hosts_per_leaf)
    run_dir = out / f"{s.name}-{s.switch}"
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in list(run_dir.glob("*.jsonl")) + list(run_dir.glob("*.err")):
        old.unlink()
    agent = [str(env.FLEXPASS_BIN)]
    net_args = sc.agent_args()
    ip = lambda h: fab.hosts[h].ip  # noqa: E731
    sampler = ResourceSampler()
    hashes = PatternHashes()
    received: List[dict] = []
    sender_records: List[dict] = []
    incast_records: List[dict] = []
    bad: List[dict] = []
    events: List[dict] = []
    tails: Dict[str, LogTail] = {}
    # An incast request ("GET n\n") is a flow too; its hash tells it apart.
    request_shas = {request_sha(ic.bytes) for ic in s.incasts}

    def collect():
        for key, tail in tails.items():
            for rec in tail.read():
                ev = rec.get("event")
                if ev == "flow_received":
                    size, sha = rec.get("bytes", 0), rec.get("sha256")
                    kind = "incast request" if sha in request_shas else "flow"
                    ok = kind == "incast request" or sha == hashes(size)
                    row = {"receiver": key.split()[0], "transport": rec.get("transport"), "peer": rec.get("peer"),
                           "bytes": size, "kind": kind, "byte_exact": ok,
                           "fct_ms": round(rec.get("fct_us", 0) / 1e3, 2), "t_s": round(time.time() - t_start, 1)}
                    received.append(row)
                    if not ok:
                        bad.append(row)
                elif ev == "response_sent":
                    incast_records.append({**rec, "server": key.split()[0]})
                elif ev == "flow" and key.startswith("workload"):
                    sender_records.append({**rec, "workload": key})
                elif ev == "response" and key.startswith("incast"):
                    incast_records.append({**rec, "client_log": key})

    with start_network(fab, sc, s.switch, run_dir, "flexpass") as net:
        for name in sorted(fab.switches):
            sampler.watch(name, "switch", net.switch(name).proc.pid)
        cp = None
        try:
            if s.controller:
                cp = ControlPlane(run_dir / "switch-config.yaml", run_dir, 0.02, 5.0)
                t = cp.start()
                cp.wait_in_sync(t, sorted(fab.switches))
                sampler.watch("controller", "controller", cp.proc.pid)
            for h in sorted(fab.hosts):
                p = net.popen(h, agent + ["serve", "--listen", f"{ip(h)}:{AGENT_PORT}", "--tcp",
                                          f"{ip(h)}:{TCP_PORT}", "--respond", *net_args, "--log-level", "warn"],
                              run_dir / f"{h}-serve.jsonl", run_dir / f"{h}-serve.err")
                sampler.watch(f"{h} serve", "agent", p.pid)
                tails[f"{h} serve"] = LogTail(run_dir / f"{h}-serve.jsonl")
            time.sleep(1.0)
            t_start = time.time()
            t_end = t_start + s.duration_s
            workers: Dict[int, subprocess.Popen] = {}
            launches: Counter = Counter()

            def start_workload(i: int, seconds: float) -> None:
                w = s.workloads[i]
                launches[i] += 1
                port = TCP_PORT if w.transport == "tcp" else AGENT_PORT
                key = f"workload{i}-{launches[i]}"
                count = expected_flows(w, sc.link_rate_bps, seconds)
                p = net.popen(w.src, agent + [
                    "workload", "--to", ",".join(f"{ip(d)}:{port}" for d in w.dst), "--cdf", w.cdf,
                    "--load", f"{w.load:g}", "--count", str(count), "--transport", w.transport,
                    "--seed", str(w.seed * 1000 + launches[i]), "--sample-ms", "0",
                    "--bind", f"{ip(w.src)}:{WORKLOAD_PORT + i}", *net_args, "--log-level", "warn"],
                    run_dir / f"{key}.jsonl", run_dir / f"{key}.err")
                workers[i] = p
                sampler.watch(f"{w.src} {w.transport} workload{i}", "agent", p.pid)
                tails[key] = LogTail(run_dir / f"{key}.jsonl")
                events.append({"t_s": round(time.time() - t_start, 2), "event": "workload started",
                               "workload": i, "launch": launches[i], "flows": count, "pid": p.pid})

            for i in range(len(s.workloads)):
                start_workload(i, s.duration_s)
            incast_next = [t_start + (k + 1) * min(5.0, ic.every_s / 2) for k, ic in enumerate(s.incasts)]
            incast_n = [0] * len(s.incasts)
            incast_procs: List[subprocess.Popen] = []
            next_sample = t_start
            next_progress = t_start + s.progress_s
            progress(f"[soak] {s.name}: {len(s.workloads)} workloads, {len(s.incasts)} incast clients, "
                     f"{s.duration_s:g} s on {s.switch} ({sc.describe()}); results in {run_dir}")
            while True:
                now = time.time()
                if now >= t_end:
                    break
                for i, p in list(workers.items()):
                    if p.poll() is not None and t_end - now > 5:
                        # Ended early (fewer arrivals than expected): continue with the rest.
                        start_workload(i, t_end - now)
                for k, ic in enumerate(s.incasts):
                    if now >= incast_next[k]:
                        t = ic.transports[incast_n[k] % len(ic.transports)]
                        port = TCP_PORT if t == "tcp" else AGENT_PORT
                        key = f"incast{k}-{incast_n[k]}"
                        p = net.popen(ic.client, agent + [
                            "incast", "--servers", ",".join(f"{ip(h)}:{port}" for h in ic.servers),
                            "--flows", str(ic.flows), "--size", str(ic.bytes), "--transport", t,
                            "--bind", f"{ip(ic.client)}:{INCAST_PORT + k}", "--timeout-s", f"{ic.every_s:g}",
                            *net_args, "--log-level", "warn"], run_dir / f"{key}.jsonl", run_dir / f"{key}.err")
                        sampler.watch(f"{ic.client} incast{k}", "agent", p.pid)
                        tails[key] = LogTail(run_dir / f"{key}.jsonl")
                        incast_procs.append(p)
                        incast_n[k] += 1
                        incast_next[k] += ic.every_s
                if now >= next_sample:
                    sampler.sample(now - t_start)
                    collect()
                    next_sample += s.sample_s
                if now >= next_progress:
                    progress(_progress_line(now - t_start, s.duration_s, received, bad, sender_records, sampler))
                    next_progress += s.progress_s
                time.sleep(max(0.01, min(next_sample, next_progress, t_end) - time.time()))
            # Drain: no new flows; the running ones get drain_s to finish.
            events.append({"t_s": round(time.time() - t_start, 2), "event": "duration over, draining"})
            progress(f"[soak] duration over; waiting up to {s.drain_s:g} s for the flows in flight")
            deadline = time.time() + s.drain_s
            while time.time() < deadline and any(p.poll() is None for p in [*workers.values(), *incast_procs]):
                if time.time() >= next_sample:
                    sampler.sample(time.time() - t_start)
                    collect()
                    next_sample += s.sample_s
                time.sleep(0.2)
            stopped = []
            for i, p in workers.items():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(10)
                    stopped.append(i)
            for p in incast_procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(10)
            events.append({"t_s": round(time.time() - t_start, 2), "event": "stopped",
                           "workloads_stopped_in_flight": stopped})
            time.sleep(1.0)  # the receivers report the last flows
            sampler.sample(time.time() - t_start)
            t_stop = time.time()
        finally:
            if cp is not None:
                cp.stop()
    collect()
    return analyse(s, sc, run_dir, sampler, received, bad, sender_records, incast_records, events,
                   t_stop - t_start)


def _progress_line(t: float, dur: float, received, bad, senders, sampler) -> str:
    rss = {}
    for r in sampler.rows[-len(sampler.procs) * 2:]:
        rss[r["process"]] = r["rss_kb"]
    sw = [v for k, v in rss.items() if not k.startswith("h") and k != "controller"]
    ag = [v for k, v in rss.items() if k.startswith("h")]
    errs = sum(1 for r in senders if r.get("error"))
    fmt = lambda xs: f"{min(xs) / 1024:.1f}-{max(xs) / 1024:.1f} MB" if xs else "-"  # noqa: E731
    return (f"[soak] {t:6.0f}/{dur:.0f} s: flows received {len(received)} "
            f"(corrupted {len(bad)}), sender errors {errs}, RSS switches {fmt(sw)}, agents {fmt(ag)}")


def analyse(s: Soak, sc: Scaled, run_dir: Path, sampler: ResourceSampler, received, bad, senders, incast_recs,
            events, elapsed_s: float) -> dict:
    flows = [r for r in received if r["kind"] == "flow"]
    requests = [r for r in received if r["kind"] == "incast request"]
    # Lost: a sender reported a flow complete, but no receiver completed one of that size
    # from it (matched by source address and size; kernel TCP by source host and size).
    got = Counter()
    for r in flows:
        peer_ip = r["peer"].rsplit(":", 1)[0]
        key = (peer_ip, r["bytes"]) if r["transport"] == "tcp" else (r["peer"], r["bytes"])
        got[key] += 1
    lost = []
    hosts = leaf_spine(s.spines, s.leaves, s.hosts_per_leaf).hosts
    for rec in senders:
        if rec.get("error"):
            continue
        i = int(rec["workload"].split("-")[0][len("workload"):])
        w, src_ip = s.workloads[i], hosts[s.workloads[i].src].ip
        key = (src_ip, rec["size"]) if w.transport == "tcp" else (f"{src_ip}:{WORKLOAD_PORT + i}", rec["size"])
        if got[key] > 0:
            got[key] -= 1
        else:
            lost.append(rec)
    responses = [r for r in incast_recs if r.get("event") == "response"]
    by_transport = {}
    for t in TRANSPORTS:
        fs = [r for r in flows if r["transport"] == t]
        sd = [r for r in senders if r.get("transport") == t]
        if not fs and not sd:
            continue
        by_transport[t] = {
            "flows_received": len(fs), "bytes_received": sum(r["bytes"] for r in fs),
            "byte_exact": sum(r["byte_exact"] for r in fs),
            "sender_completed": sum(1 for r in sd if not r.get("error")),
            "sender_errors": sum(1 for r in sd if r.get("error")),
            "timeouts": sum(r.get("timeouts") or 0 for r in sd),
            "retransmissions": sum(r.get("retransmissions") or 0 for r in sd),
            "fct_ms_p50": _pct([r["fct_ms"] for r in fs], 50), "fct_ms_p99": _pct([r["fct_ms"] for r in fs], 99)}
    procs = {}
    for name, (role, _) in sampler.procs.items():
        procs[name] = {"role": role, **memory_summary(sampler.series(name))}
    result = {
        "experiment": s.name, "description": s.description, "switch": s.switch, "scale": sc.describe(),
        "duration_s": s.duration_s, "elapsed_s": round(elapsed_s, 1), "sample_s": s.sample_s,
        "summary": {
            "flows_completed": len(flows), "bytes_received": sum(r["bytes"] for r in flows),
            "byte_exact": sum(r["byte_exact"] for r in flows), "corrupted_flows": len(bad),
            "corrupted_bytes": sum(r["bytes"] for r in bad), "lost_flows": len(lost),
            "sender_errors": sum(1 for r in senders if r.get("error")),
            "timeouts": sum(r.get("timeouts") or 0 for r in senders)
            + sum(r.get("timeouts") or 0 for r in incast_recs if r.get("event") == "response_sent"),
            "incast_requests_received": len(requests), "incast_responses_completed": len(responses),
            "incast_bursts": len({r["client_log"] for r in responses}),
        },
        "by_transport": by_transport,
        "processes": procs,
        "events": events,
        "corrupted": bad[:50],
        "lost": lost[:50],
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2, default=str))
    with open(run_dir / "resources.csv", "w") as f:
        f.write("t_s,process,role,pid,rss_kb,cpu_pct,cpu_s\n")
        for r in sampler.rows:
            f.write(f"{r['t_s']},{r['process']},{r['role']},{r['pid']},{r['rss_kb']},"
                    f"{'' if r['cpu_pct'] is None else r['cpu_pct']},{r['cpu_s']}\n")
    with open(run_dir / "flows.csv", "w") as f:
        f.write("t_s,receiver,transport,peer,kind,bytes,byte_exact,fct_ms\n")
        for r in received:
            f.write(f"{r['t_s']},{r['receiver']},{r['transport']},{r['peer']},{r['kind']},{r['bytes']},"
                    f"{r['byte_exact']},{r['fct_ms']}\n")
    from .plots import plot_soak_resources

    plot_soak_resources(sampler.rows, received, max(1, round(30 / s.sample_s)), f"{s.description or s.name} ({s.switch}, {elapsed_s / 60:.1f} min)",
                        run_dir / "resources.png")
    return result


def _pct(xs: List[float], q: float) -> Optional[float]:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))]


def summary(r: dict) -> str:
    s = r["summary"]
    lines = [f"== soak: {r['experiment']} ({r['switch']}, {r['scale']}), {r['elapsed_s']:.0f} s ==",
             f"  flows completed {s['flows_completed']} ({s['bytes_received'] / 1e6:.1f} MB), byte-exact "
             f"{s['byte_exact']}, corrupted bytes {s['corrupted_bytes']}, lost flows {s['lost_flows']}, "
             f"sender errors {s['sender_errors']}, timeouts {s['timeouts']}",
             f"  incast: {s['incast_bursts']} bursts, {s['incast_responses_completed']} responses, "
             f"{s['incast_requests_received']} requests received"]
    for t, b in r["by_transport"].items():
        lines.append(f"    {t:12} received {b['flows_received']:5} (byte-exact {b['byte_exact']}), sender "
                     f"completed {b['sender_completed']}, errors {b['sender_errors']}, timeouts {b['timeouts']}, "
                     f"FCT p50 {b['fct_ms_p50']} ms p99 {b['fct_ms_p99']} ms")
    lines.append("  process                         RSS first -> last (peak) MB   trend 2nd half kB/min   CPU mean/max %")
    for name, p in sorted(r["processes"].items(), key=lambda kv: (kv[1]["role"], kv[0])):
        if not p["samples"]:
            continue
        lines.append(f"    {name:28} {p['rss_first_kb'] / 1024:6.1f} -> {p['rss_last_kb'] / 1024:6.1f} "
                     f"({p['rss_peak_kb'] / 1024:6.1f})   {p['rss_slope_second_half_kb_per_min']!s:>10}   "
                     f"{p['cpu_mean_pct']!s:>6}/{p['cpu_max_pct']!s}")
    return "\n".join(lines)


# -- the model ---------------------------------------------------------------------------

MODEL_EXPERIMENT = env.REPO / "host-agent" / "experiments" / "soak.toml"


def run_model(experiment: Path, out: Path, sample_s: float = 1.0, progress_s: float = 30.0,
              sets: Optional[List[str]] = None, progress=print) -> dict:
    """The soak on the model (no root): ``flexpass sim EXPERIMENT`` (a long mixed workload),
    its RSS and CPU sampled from /proc while it runs, and its report's flows, corrupted
    bytes (the model checks every delivered byte) and timeouts."""
    run_dir = out / f"{Path(experiment).stem}-model"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)
    sim_dir = run_dir / "sim"
    cmd = [str(env.FLEXPASS_BIN), "sim", str(experiment), "--out", str(sim_dir)]
    for kv in sets or []:
        cmd += ["--set", kv]
    sampler = ResourceSampler()
    err_path = run_dir / "sim.err"
    with open(err_path, "w") as err, open(run_dir / "sim.out", "w") as so:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=so, stderr=err, start_new_session=True)
        sampler.watch("flexpass sim", "model", p.pid)
        progress(f"[soak] model: {' '.join(cmd)}")
        next_progress = t0 + progress_s
        try:
            while p.poll() is None:
                sampler.sample(time.time() - t0)
                if time.time() >= next_progress:
                    tail = err_path.read_text(errors="replace").replace("\x1b[K", "\r").split("\r")
                    last = next((x.strip() for x in reversed(tail) if x.strip()), "")
                    rss = sampler.rows[-1]["rss_kb"] / 1024 if sampler.rows else 0
                    progress(f"[soak] model {time.time() - t0:6.0f} s: RSS {rss:.1f} MB; {last}")
                    next_progress += progress_s
                time.sleep(sample_s)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait()
        elapsed = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"flexpass sim exited with {p.returncode}: {env.first_line(err_path.read_text()[-2000:])}")
    sim = json.loads((sim_dir / "result.json").read_text())
    fct = sim["fct"]
    result = {
        "experiment": Path(experiment).stem, "switch": "model", "command": " ".join(cmd),
        "elapsed_s": round(elapsed, 1), "simulated_ms": sim["duration_us"] / 1e3, "events": sim["events"],
        "summary": {
            "flows": fct["overall"]["flows"], "flows_completed": fct["overall"]["completed"],
            "incomplete": fct["overall"]["incomplete"], "corrupted_bytes": sim["corrupted_bytes"],
            "timeouts": sim["timeouts"], "recovery_timeouts": sim["recovery_timeouts"],
            "path_mismatches": sim["paths"].get("mismatches"),
            "legacy_flows": fct["legacy"]["completed"], "new_flows": fct["new"]["completed"]},
        "processes": {"flexpass sim": {"role": "model", **memory_summary(sampler.rows)}},
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    with open(run_dir / "resources.csv", "w") as f:
        f.write("t_s,process,role,pid,rss_kb,cpu_pct,cpu_s\n")
        for r in sampler.rows:
            f.write(f"{r['t_s']},{r['process']},{r['role']},{r['pid']},{r['rss_kb']},"
                    f"{'' if r['cpu_pct'] is None else r['cpu_pct']},{r['cpu_s']}\n")
    from .plots import plot_soak_resources

    plot_soak_resources(sampler.rows, [], max(1, round(10 / sample_s)),
                        f"model soak: {Path(experiment).name}, {result['simulated_ms']:.0f} ms simulated, "
                        f"{elapsed / 60:.1f} min", run_dir / "resources.png")
    return result


def model_summary(r: dict) -> str:
    s, p = r["summary"], r["processes"]["flexpass sim"]
    return "\n".join([
        f"== soak on the model: {r['experiment']}, {r['simulated_ms']:.0f} ms simulated, {r['events']} events, "
        f"{r['elapsed_s']:.0f} s ==",
        f"  flows completed {s['flows_completed']}/{s['flows']} (FlexPass {s['new_flows']}, DCTCP {s['legacy_flows']}), "
        f"corrupted bytes {s['corrupted_bytes']}, timeouts {s['timeouts']}, recovery timeouts "
        f"{s['recovery_timeouts']}, credit/data path mismatches {s['path_mismatches']}",
        f"  flexpass sim: RSS {p.get('rss_first_kb', 0) / 1024:.1f} -> {p.get('rss_last_kb', 0) / 1024:.1f} MB "
        f"(peak {p.get('rss_peak_kb', 0) / 1024:.1f}), trend over the second half "
        f"{p.get('rss_slope_second_half_kb_per_min')} kB/min, CPU mean {p.get('cpu_mean_pct')} %"])
