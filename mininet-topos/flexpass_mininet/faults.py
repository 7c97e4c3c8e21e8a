"""Network faults on the leaf-spine under running FlexPass, ExpressPass and DCTCP
flows (issue #14): ``python3 -m flexpass_mininet faults experiments/faults.toml``.

An experiment is a TOML file (mininet-topos/experiments/): the fabric, the long
flows (each pinned to a spine through its source port, :func:`fabric.ecmp_member_index`),
and the faults, run in order while the flows run:

* ``link-down``: a spine link fails — both veths drop every frame (``method =
  "drop"``, tc; ``"ifdown"`` takes them down in Mininet, which stalls the whole
  BMv2 switch, see LINK_METHODS) — then ``flexpass-ctl link-down`` records it (or, with ``detect = "probe"``, the
  controller finds it itself: ``flexpass-ctl run --detect probe``, liveness
  probes over every switch-to-switch link; they pass through the same qdisc
  as the traffic, so a tc-dropped link is detected);
  the resident controller (``flexpass-ctl run``) rewrites the ECMP groups of
  every switch.  After ``hold_s`` the link
  comes back (``flexpass-ctl link-up``).  The groups are read back from the
  switches after each change and checked symmetric (both directions of every
  leaf pair over the same spines, same order).
* ``switch-restart``: the switch process is killed (SIGKILL: tables, pipeline,
  TM state gone) and started again after ``down_s``; the controller (default)
  or ``flexpass-ctl apply`` (``reconcile = "apply"``, controller stopped
  meanwhile) reconciles it: pipeline, entries, TM settings; then ``flexpass-ctl
  apply`` must find nothing to write (idempotent).
* ``controller-restart``: the controller is killed (SIGKILL) and started again
  after ``down_s``: mastership must come back (same election id) with 0 writes,
  every switch's entities unchanged.

Measured: per flow, the throughput gap (longest run of empty ``serve
--sample-ms`` intervals) around every fault, i.e. its recovery time; bytes and
SHA-256 of every flow at both ends (byte-exact delivery); the controller's
reaction (link recorded -> last group written) from its JSON log.  Writes
result.json, throughput.csv, recovery.csv, timeline.png and the logs of the
switches, agents and controller into <out>/<name>-<switch>/.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from . import env
from .expfile import ExperimentError, LeafSpineRun, loader, no_leftovers, take, take_run
from .experiments import _read_json_lines as _json_lines
from .fabric import ecmp_member_index, leaf_spine, ecmp_paths, asymmetric_pairs
from .scaling import Scaled

AGENT_PORT = 7890
TRANSPORTS = ("flexpass", "expresspass", "dctcp")
FAULT_KINDS = ("link-down", "switch-restart", "controller-restart")
#: How a link fails.  "drop": both veths stay up and drop every frame they would send
#: (tc pfifo limit 0): a cut link as the switches see it.  "ifdown": Mininet takes both
#: veths down — which stalls EVERY port of a BMv2 switch while the veth is down (BMv2
#: reads all ports in one thread, and libpcap 1.10's blocking read on a downed
#: interface polls until the interface is up again), so the whole leaf stops.
LINK_METHODS = ("drop", "ifdown")


@dataclass
class Flow:
    src: str
    dst: str
    transport: str
    spine: Optional[str] = None
    bytes: Optional[int] = None
    sport: int = 0


@dataclass
class Fault:
    kind: str
    link: Optional[str] = None
    hold_s: float = 3.0
    switch: Optional[str] = None
    down_s: float = 0.5
    settle_s: float = 3.0
    method: str = "drop"


@dataclass
class Experiment(LeafSpineRun):
    sample_ms: float = 50.0
    warmup_s: float = 3.0
    tail_s: float = 1.0
    completion_timeout_s: float = 120.0
    recovery_bound_s: float = 1.5
    reconcile: str = "controller"
    #: Who notices a link failure: "told" (flexpass-ctl link-down / link-up by the runner)
    #: or "probe" (the controller's own liveness probes, flexpass-ctl run --detect probe).
    detect: str = "told"
    probe_interval_ms: float = 20.0
    probe_dead_ms: float = 100.0
    probe_up_ms: float = 300.0
    controller_interval_s: float = 0.02
    controller_resync_s: float = 5.0
    flow_bytes: Optional[int] = None
    flows: List[Flow] = field(default_factory=list)
    faults: List[Fault] = field(default_factory=list)

    def planned_s(self) -> float:
        t = self.warmup_s + self.tail_s
        for f in self.faults:
            t += f.settle_s + (f.hold_s + f.settle_s if f.kind == "link-down" else f.down_s)
        return t


def parse_experiment(raw: dict, name: str) -> Experiment:
    e = Experiment(name=name)
    take_run(raw, e, (("sample_ms", float), ("warmup_s", float), ("tail_s", float),
                      ("completion_timeout_s", float), ("recovery_bound_s", float), ("reconcile", str),
                      ("flow_bytes", int), ("detect", str)))
    if e.reconcile not in ("controller", "apply"):
        raise ExperimentError(f"{name}.reconcile: 'controller' or 'apply', got {e.reconcile!r}")
    if e.detect not in ("told", "probe"):
        raise ExperimentError(f"{name}.detect: 'told' or 'probe', got {e.detect!r}")
    probe = raw.pop("probe", {})
    for key in ("interval_ms", "dead_ms", "up_ms"):
        v = take(probe, key, float, f"{name}.probe")
        if v is not None:
            setattr(e, f"probe_{key}", v)
    no_leftovers(probe, f"{name}.probe")
    ctl = raw.pop("controller", {})
    e.controller_interval_s = take(ctl, "interval_s", float, f"{name}.controller", e.controller_interval_s)
    e.controller_resync_s = take(ctl, "resync_s", float, f"{name}.controller", e.controller_resync_s)
    no_leftovers(ctl, f"{name}.controller")
    fab = leaf_spine(e.spines, e.leaves, e.hosts_per_leaf)
    for i, fr in enumerate(raw.pop("flow", [])):
        p = f"{name}.flow[{i}]"
        fl = Flow(take(fr, "src", str, p), take(fr, "dst", str, p), take(fr, "transport", str, p),
                  take(fr, "spine", str, p), take(fr, "bytes", int, p))
        for h in (fl.src, fl.dst):
            if h not in fab.hosts:
                raise ExperimentError(f"{p}: no host {h!r} (hosts: {', '.join(fab.hosts)})")
        if fab.host_port(fl.src)[0] == fab.host_port(fl.dst)[0]:
            raise ExperimentError(f"{p}: {fl.src} and {fl.dst} share a leaf: the flow crosses no spine")
        if fl.transport not in TRANSPORTS:
            raise ExperimentError(f"{p}.transport: one of {', '.join(TRANSPORTS)}, got {fl.transport!r}")
        if fl.spine is not None and fl.spine not in fab.switches:
            raise ExperimentError(f"{p}.spine: no switch {fl.spine!r}")
        no_leftovers(fr, p)
        e.flows.append(fl)
    for i, fr in enumerate(raw.pop("fault", [])):
        p = f"{name}.fault[{i}]"
        f = Fault(take(fr, "kind", str, p))
        if f.kind not in FAULT_KINDS:
            raise ExperimentError(f"{p}.kind: one of {', '.join(FAULT_KINDS)}, got {f.kind!r}")
        for key, typ in (("link", str), ("hold_s", float), ("switch", str), ("down_s", float),
                         ("settle_s", float), ("method", str)):
            v = take(fr, key, typ, p)
            if v is not None:
                setattr(f, key, v)
        if f.kind == "link-down" and not f.link:
            raise ExperimentError(f"{p}: link-down needs link = 'switch:port'")
        if f.method not in LINK_METHODS:
            raise ExperimentError(f"{p}.method: one of {', '.join(LINK_METHODS)}, got {f.method!r}")
        if f.kind == "switch-restart" and f.switch not in fab.switches:
            raise ExperimentError(f"{p}.switch: one of {', '.join(fab.switches)}, got {f.switch!r}")
        no_leftovers(fr, p)
        e.faults.append(f)
    if not e.flows:
        raise ExperimentError(f"{name}: no [[flow]]")
    no_leftovers(raw, name)
    return e


load_experiment = loader(parse_experiment)


# -- helpers ------------------------------------------------------------------------

def pick_source_ports(fab, flows: List[Flow], spines: List[str], base: int = 20000) -> None:
    """A distinct source port per flow that hashes it onto its spine (symmetric
    ECMP: the reverse direction lands on the same spine)."""
    used = set()
    for fl in flows:
        want = None if fl.spine is None else spines.index(fl.spine)
        for port in range(base, base + 2000):
            if port in used:
                continue
            if want is None or ecmp_member_index(fab.hosts[fl.src].ip, fab.hosts[fl.dst].ip, port,
                                                 AGENT_PORT, len(spines)) == want:
                fl.sport = port
                used.add(port)
                break
        else:
            raise ExperimentError(f"no source port puts {fl.src}->{fl.dst} on {fl.spine}")


def _proc_start_unix(pid: int) -> Optional[float]:
    """Wall-clock start of a process (/proc: clock ticks since boot + boot time)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(l.split()[1]) for l in Path("/proc/stat").read_text().splitlines()
                     if l.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None


class SampleClock:
    """Puts a ``serve --sample-ms`` log on the wall clock.  A sample line carries the ms
    since that serve started; it is written (line-buffered) the moment it is taken.  A
    thread reads the new lines every 10 ms: each gives t0 <= arrival - t_ms, so the
    smallest such value is serve's start within about the poll period (the process's
    start time from /proc would be early by the agent's own start-up, which was up to
    ~0.5 s on the loaded test machine)."""

    def __init__(self, paths: Dict[str, Path], poll_s: float = 0.01):
        import threading

        self.paths, self.poll_s = paths, poll_s
        self.t0: Dict[str, float] = {}
        self._pos = {h: 0 for h in paths}
        self._buf = {h: "" for h in paths}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        now = time.time()
        for h, p in self.paths.items():
            try:
                with open(p, "r", errors="replace") as f:
                    f.seek(self._pos[h])
                    data = f.read()
                    self._pos[h] = f.tell()
            except FileNotFoundError:
                continue
            lines = (self._buf[h] + data).split("\n")
            self._buf[h] = lines.pop()
            for line in lines:
                if '"sample"' not in line:
                    continue
                try:
                    t_ms = json.loads(line)["t_ms"]
                except (ValueError, KeyError):
                    continue
                est = now - t_ms / 1e3
                if h not in self.t0 or est < self.t0[h]:
                    self.t0[h] = est

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(self.poll_s)

    def stop(self) -> Dict[str, float]:
        self._stop.set()
        self._thread.join(5)
        return dict(self.t0)


class ControlPlane:
    """The resident controller (``flexpass-ctl run``) as a process the runner can
    kill and restart; its JSON event log is appended to controller.jsonl."""

    def __init__(self, config: Path, run_dir: Path, interval_s: float, resync_s: float,
                 detect: Optional[List[str]] = None):
        self.config, self.run_dir = config, run_dir
        self.detect = detect or []  # flexpass-ctl run --detect ... arguments
        self.log = run_dir / "controller.jsonl"
        self.log.write_text("")
        self.interval_s, self.resync_s = interval_s, resync_s
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def build_args(self) -> List[str]:
        return ["--p4info", str(env.P4_BUILD / "flexpass.p4info.txtpb"),
                "--bmv2-json", str(env.P4_BUILD / "flexpass.json")]

    def start(self) -> float:
        from .network import ctl_env

        self.starts += 1
        out = open(self.log, "a")
        err = open(self.run_dir / f"controller-{self.starts}.err", "w")
        t = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flexpass_cp.cli", "run", "--config", str(self.config), *self.build_args(),
             "--interval", str(self.interval_s), "--resync", str(self.resync_s), "--timeout", "5", *self.detect],
            stdout=out, stderr=err, env=ctl_env(), start_new_session=True)
        out.close()
        err.close()
        return t

    def events(self, since: float = 0.0, **match) -> List[dict]:
        return [e for e in _json_lines(self.log)
                if e.get("t", 0) >= since and all(e.get(k) == v for k, v in match.items())]

    def wait(self, pred, timeout: float, what: str):
        deadline = time.time() + timeout
        while time.time() < deadline:
            r = pred()
            if r:
                return r
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"controller exited ({self.proc.returncode}) while waiting for {what}; "
                                   f"see {self.run_dir}/controller-{self.starts}.err")
            time.sleep(0.02)
        raise RuntimeError(f"controller: no {what} within {timeout:.0f} s (log: {self.log})")

    def wait_in_sync(self, since: float, switches: List[str], timeout: float = 60.0, **match) -> List[dict]:
        def done():
            evs = self.events(since, event="reconciled", **match)
            got = {}
            for ev in evs:
                got.setdefault(ev["switch"], ev)
            # Only the switches asked for: others may reconcile meanwhile (periodic resync).
            return [got[s] for s in switches] if set(got) >= set(switches) else None
        return self.wait(done, timeout, f"reconcile of {', '.join(switches)}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def set_link(net, a: str, b: str, intfs: List[str], down: bool, method: str) -> Optional[int]:
    """Fail (or restore) the link between switches a and b; on restore with "drop",
    returns the frames the link dropped while it was down."""
    if method == "ifdown":
        net.net.configLinkStatus(a, b, "down" if down else "up")
        return None
    if down:
        for d in intfs:
            subprocess.run(["tc", "qdisc", "replace", "dev", d, "root", "pfifo", "limit", "0"], check=True)
        return None
    dropped = 0
    for d in intfs:
        out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", d], capture_output=True, text=True).stdout
        for tok in out.replace(",", " ").replace("(", " ").split("dropped")[1:]:
            dropped += int(tok.split()[0])
        subprocess.run(["tc", "qdisc", "del", "dev", d, "root"], check=True)
    return dropped


def _ctl(run_dir: Path, name: str, args: List[str]) -> subprocess.CompletedProcess:
    from .network import ctl_env

    r = subprocess.run([sys.executable, "-m", "flexpass_cp.cli", *args], capture_output=True, text=True,
                       env=ctl_env())
    (run_dir / f"{name}.txt").write_text(f"$ flexpass-ctl {' '.join(args)}\n{r.stdout}{r.stderr}")
    if r.returncode != 0:
        raise RuntimeError(f"flexpass-ctl {args[0]} failed ({r.returncode}): {env.first_line(r.stderr or r.stdout)}")
    return r


def read_state(fab, cfg) -> dict:
    """Every switch's managed entities as read back over P4Runtime (a read-only
    session: no stream, the controller stays primary), plus the ECMP paths."""
    from flexpass_cp.config.entries import switch_entries
    from flexpass_cp.entities import ActionProfileGroup, TableEntry
    from flexpass_cp.p4runtime_client import P4RuntimeClient, state_scope

    entities, groups, routes = {}, {}, {}
    for name in sorted(cfg.switches):
        sw = cfg.switch(name)
        with P4RuntimeClient(sw.grpc_addr, sw.device_id, timeout=5, arbitrate=False) as c:
            c.load_p4info(env.P4_BUILD / "flexpass.p4info.txtpb")
            ents = c.read_state(*state_scope(switch_entries(cfg, name)))
        entities[name] = sorted(e.describe() for e in ents)
        groups[name] = {e.group_id: tuple(e.members) for e in ents if isinstance(e, ActionProfileGroup)}
        routes[name] = {}
        for e in ents:
            if isinstance(e, TableEntry) and e.table == "routing" and not e.is_default:
                v, _ = dict(e.match)["dst_addr"]
                ip = ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))
                routes[name][ip] = ("group", e.group_id) if e.group_id is not None else ("member", e.member_id)
    paths = ecmp_paths(fab, cfg, groups, routes)
    leaves = sorted({fab.host_port(h)[0] for h in fab.hosts})
    return {"entities": entities, "paths": {l: paths[l] for l in leaves},
            "asymmetric": asymmetric_pairs(fab, paths)}


def pending_writes(cfg) -> Dict[str, int]:
    """Per switch: the number of writes ``flexpass-ctl apply`` would make (its plan,
    as primary; no pipeline push pending)."""
    from flexpass_cp.config.entries import switch_entries
    from flexpass_cp.p4runtime_client import P4RuntimeClient

    out = {}
    for name in sorted(cfg.switches):
        sw = cfg.switch(name)
        with P4RuntimeClient(sw.grpc_addr, sw.device_id, timeout=5) as c:
            pushed = c.set_pipeline(env.P4_BUILD / "flexpass.p4info.txtpb", env.P4_BUILD / "flexpass.json")
            out[name] = len(c.plan(switch_entries(cfg, name))) + (1000 if pushed else 0)
    return out


def _series(samples: List[dict], t0_unix: float, key_of) -> Dict[str, List[tuple]]:
    """Per flow: [(unix time at the end of the interval, interval s, bytes)]."""
    out: Dict[str, List[tuple]] = {}
    prev = 0.0
    for s in samples:
        t = s["t_ms"] / 1e3
        dt = t - prev if prev else None
        prev = t
        for f in s["flows"]:
            k = key_of(f["peer"])
            if k is None:
                continue
            out.setdefault(k, []).append((t0_unix + t, dt, f["proactive_bytes"] + f["reactive_bytes"],
                                          f["proactive_bytes"], f["reactive_bytes"]))
    for k, rows in out.items():
        out[k] = [(t, dt if dt else (rows[1][0] - rows[0][0] if len(rows) > 1 else 0.05), b, p, r)
                  for t, dt, b, p, r in rows]
    return out


def recovery(rows: List[tuple], t_fault: float, window_s: float) -> dict:
    """Throughput gap of one flow around a fault: the longest run of consecutive
    empty sample intervals among those ending after the fault and starting
    within `window_s` of it; the rate in the second before and the last second
    of the window."""
    inside = [r for r in rows if r[0] > t_fault and r[0] - r[1] < t_fault + window_s]
    best = run = 0.0
    for t, dt, b, _, _ in inside:
        run = run + dt if b == 0 else 0.0
        best = max(best, run)
    before = [r for r in rows if t_fault - 1.0 <= r[0] - r[1] and r[0] <= t_fault]
    after = [r for r in rows if t_fault + window_s - 1.0 <= r[0] - r[1] and r[0] <= t_fault + window_s]
    rate = lambda rs: sum(r[2] for r in rs) * 8 / sum(r[1] for r in rs) if rs else None  # noqa: E731
    return {"gap_s": round(best, 3), "bps_before": rate(before), "bps_after": rate(after),
            "active": bool(inside)}


# -- the runner ------------------------------------------------------------------------

def run(exp: Experiment, out: Path, pcap: bool = False) -> dict:
    from flexpass_cp.config.topology import describe_link, resolve_link

    from .network import start_network

    sc = Scaled(exp.link_mbps * 1e6, exp.rtt_us / 1e6)
    fab = leaf_spine(exp.spines, exp.leaves, exp.hosts_per_leaf)
    spines = [s for s in fab.switches if s.startswith("spine")]
    pick_source_ports(fab, exp.flows, spines)
    run_dir = out / f"{exp.name}-{exp.switch}"
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in list(run_dir.glob("*.jsonl")) + list(run_dir.glob("*.err")):
        old.unlink()
    senders_per_host: Dict[str, int] = {}
    for fl in exp.flows:
        senders_per_host[fl.src] = senders_per_host.get(fl.src, 0) + 1
    for fl in exp.flows:
        if fl.bytes is None:
            # Lasts the planned time at the flow's fair share of its sender's link: the faults
            # (half the spines, a switch down) slow flows further, so they outlast the plan.
            fl.bytes = exp.flow_bytes or int(sc.link_rate_bps / 8 / senders_per_host[fl.src] * exp.planned_s())
    timeline: List[dict] = []
    checks: Dict[str, object] = {}
    serve_t0: Dict[str, float] = {}
    agent = [str(env.FLEXPASS_BIN)]
    net_args = sc.agent_args()
    with start_network(fab, sc, exp.switch, run_dir, "flexpass", pcap) as net:
        cfg_path = run_dir / "switch-config.yaml"
        from flexpass_cp.links import load as load_cfg

        detect = [] if exp.detect == "told" else [
            "--detect", "probe", "--probe-interval-ms", f"{exp.probe_interval_ms:g}",
            "--probe-dead-ms", f"{exp.probe_dead_ms:g}", "--probe-up-ms", f"{exp.probe_up_ms:g}"]
        cp = ControlPlane(cfg_path, run_dir, exp.controller_interval_s, exp.controller_resync_s, detect)
        try:
            t = cp.start()
            first = cp.wait_in_sync(t, sorted(fab.switches))
            timeline.append({"t": t, "event": "controller started",
                             "writes": sum(e["writes"] for e in first)})
            receivers = sorted({fl.dst for fl in exp.flows})
            serve_procs = {}
            for h in receivers:
                ip = fab.hosts[h].ip
                serve_procs[h] = net.popen(h, agent + ["serve", "--listen", f"{ip}:{AGENT_PORT}", "--sample-ms",
                                                       f"{exp.sample_ms:g}", *net_args, "--log-level", "warn"],
                                           run_dir / f"{h}-serve.jsonl", run_dir / f"{h}-serve.err")
                serve_t0[h] = _proc_start_unix(serve_procs[h].pid) or time.time()  # fallback
            clock = SampleClock({h: run_dir / f"{h}-serve.jsonl" for h in receivers})
            time.sleep(0.5)
            t_flows = time.time()
            senders = []
            for i, fl in enumerate(exp.flows):
                src_ip = fab.hosts[fl.src].ip
                p = net.popen(fl.src, agent + ["send", "--to", f"{fab.hosts[fl.dst].ip}:{AGENT_PORT}", "--transport",
                                               fl.transport, "--size", str(fl.bytes), "--bind",
                                               f"{src_ip}:{fl.sport}", "--timeout-s",
                                               f"{exp.completion_timeout_s + exp.planned_s():g}", *net_args,
                                               "--log-level", "warn"],
                              run_dir / f"flow{i}-send.jsonl", run_dir / f"flow{i}-send.err")
                senders.append(p)
            timeline.append({"t": t_flows, "event": "flows started"})
            time.sleep(exp.warmup_s)
            for k, f in enumerate(exp.faults):
                if f.kind == "link-down":
                    cfg = load_cfg(cfg_path)
                    ends = resolve_link(cfg, f.link)
                    if len(ends) != 2:
                        raise ExperimentError(f"fault {k}: {f.link} is not a link between two switches")
                    (a, _), (b, _) = ends
                    intfs = [i.name for pair in net.net.get(a).connectionsTo(net.net.get(b)) for i in pair]
                    for down in (True, False):
                        verb = "down" if down else "up"
                        t0 = time.time()
                        dropped = set_link(net, a, b, intfs, down, f.method)
                        t_mn = time.time()
                        if exp.detect == "told":
                            # --no-apply: the running controller applies it (without, the CLI finds
                            # every switch held by it and says so — tested in control-plane/tests —
                            # at the cost of a P4Runtime session per switch on the loaded machine).
                            _ctl(run_dir, f"fault{k}-link-{verb}",
                                 [f"link-{verb}", "--config", str(cfg_path), "--link", f.link, "--no-apply"])
                        t_cli = time.time()
                        evs = cp.wait_in_sync(t0, sorted(fab.switches), timeout=30, reason="links")
                        t_done = max(e["t"] for e in evs)
                        from flexpass_cp.links import default_state_path, read_state as read_links

                        _, t_rec = read_links(default_state_path(cfg_path))
                        detected = cp.events(t0, event="detected", state=verb)
                        state = read_state(fab, load_cfg(cfg_path))
                        timeline.append({
                            "t": t0, "event": f"link {verb}", "fault": k, "link": describe_link(cfg, ends),
                            "method": f.method, "interfaces": intfs, "frames_dropped_on_link": dropped,
                            "detect": exp.detect,
                            # --detect probe: the controller's own detection, and the silence
                            # of the probes when it declared the link down.
                            "detected_s": round(detected[0]["t"] - t0, 3) if detected else None,
                            "probe_silent_ms": detected[0].get("silent_ms") if detected else None,
                            "mininet_s": round(t_mn - t0, 3), "cli_s": round(t_cli - t0, 3),
                            # failure -> link state recorded (flexpass-ctl link-down's start-up) ->
                            # every switch rewritten (the controller).
                            "recorded_s": round(t_rec - t0, 3) if t_rec else None,
                            "controller_ms": round((t_done - t_rec) * 1e3, 1) if t_rec else None,
                            "groups_written_s": round(t_done - t0, 3),
                            "writes": {e["switch"]: e["writes"] for e in evs},
                            "updates": {e["switch"]: e["changes"] for e in evs if e["changes"]},
                            "paths": state["paths"], "asymmetric": state["asymmetric"]})
                        time.sleep(f.hold_s if down else f.settle_s)
                elif f.kind == "switch-restart":
                    sw = net.switch(f.switch)
                    if exp.reconcile == "apply":
                        cp.stop()
                    t0 = time.time()
                    sw.kill()
                    time.sleep(f.down_s)
                    t_launch = time.time()
                    sw.launch()
                    t_up = time.time()
                    ev = {"t": t0, "event": f"{f.switch} killed and restarted", "fault": k,
                          "process_start_s": round(t_up - t_launch, 3), "reconciled_by": exp.reconcile}
                    if exp.reconcile == "controller":
                        (rec,) = cp.wait_in_sync(t_launch, [f.switch], timeout=60)
                        ev.update(reconciled_s=round(rec["t"] - t0, 3), reconcile_writes=rec["writes"],
                                  pipeline_pushed=rec["pipeline_pushed"], queues=rec["queues"])
                        eid = ["--election-id", "2"]  # the controller stays primary of the others
                    else:
                        r = sw.apply(run_dir / f"fault{k}-apply-1.txt", "--json")
                        rec = json.loads(r.stdout.strip().splitlines()[-1])
                        ev.update(reconciled_s=round(time.time() - t0, 3), reconcile_writes=rec["writes"],
                                  pipeline_pushed=rec["pipeline_pushed"], queues=rec["queues"])
                        eid = []
                    r2 = sw.apply(run_dir / f"fault{k}-apply-2.txt", "--json", *eid)
                    again = json.loads(r2.stdout.strip().splitlines()[-1])
                    ev.update(apply_again_writes=again["writes"], apply_again_pipeline_pushed=again["pipeline_pushed"])
                    if exp.reconcile == "apply":
                        t_cp = cp.start()
                        cp.wait_in_sync(t_cp, sorted(fab.switches))
                    timeline.append(ev)
                    time.sleep(f.settle_s)
                elif f.kind == "controller-restart":
                    cfg = load_cfg(cfg_path)
                    before = read_state(fab, cfg)["entities"]
                    t0 = time.time()
                    cp.kill()
                    time.sleep(f.down_s)
                    between = read_state(fab, cfg)["entities"]
                    t_start = cp.start()
                    evs = cp.wait_in_sync(t_start, sorted(fab.switches))
                    prim = cp.events(t_start, event="primary")
                    after = read_state(fab, cfg)["entities"]
                    timeline.append({
                        "t": t0, "event": "controller killed and restarted", "fault": k,
                        "mastership_s": round(max(e["t"] for e in prim) - t_start, 3) if prim else None,
                        "absent_s": round(max(e["t"] for e in prim) - t0, 3) if prim else None,
                        "election_ids": sorted({e["election_id"] for e in prim}),
                        "took_over": any(e["took_over"] for e in prim),
                        "writes": sum(e["writes"] for e in evs),
                        "pipeline_pushed": any(e["pipeline_pushed"] for e in evs),
                        "entries_lost": {s: sorted(set(before[s]) - set(after[s])) for s in before
                                         if set(before[s]) - set(after[s])},
                        "entries_changed_while_down": before != between,
                        "entities": sum(len(v) for v in after.values())})
                    time.sleep(f.settle_s)
            time.sleep(exp.tail_s)
            deadline = time.time() + exp.completion_timeout_s
            while time.time() < deadline and any(p.poll() is None for p in senders):
                time.sleep(0.2)
            timeline.append({"t": time.time(), "event": "flows done",
                             "running": sum(p.poll() is None for p in senders)})
            time.sleep(1.0)  # the receivers report the last flows
            serve_t0.update(clock.stop())
            # Final checks with the controller stopped: groups symmetric, and what apply would
            # write on every switch (its plan, read back as primary) is nothing.
            cfg = load_cfg(cfg_path)
            final = read_state(fab, cfg)
            cp.stop()
            idem = pending_writes(cfg)
            checks.update(final_asymmetric=final["asymmetric"], final_paths=final["paths"],
                          final_apply_writes=idem)
        finally:
            cp.stop()
    return analyse(exp, fab, sc, run_dir, timeline, checks, serve_t0)


def analyse(exp: Experiment, fab, sc: Scaled, run_dir: Path, timeline: List[dict], checks: dict,
            serve_t0: Dict[str, float]) -> dict:
    flows = []
    key_of = {}
    for i, fl in enumerate(exp.flows):
        key = f"flow{i} {fl.transport} {fl.src}->{fl.dst} via {fl.spine or 'hash'}"
        key_of[f"{fab.hosts[fl.src].ip}:{fl.sport}"] = key
        sent = [r for r in _json_lines(run_dir / f"flow{i}-send.jsonl") if r.get("event", "").startswith("flow_")]
        recv = [r for r in _json_lines(run_dir / f"{fl.dst}-serve.jsonl")
                if r.get("event") == "flow_received" and r.get("peer") == f"{fab.hosts[fl.src].ip}:{fl.sport}"]
        s = sent[-1] if sent else {}
        r = recv[-1] if recv else {}
        flows.append({
            "flow": key, "index": i, "transport": fl.transport, "src": fl.src, "dst": fl.dst, "spine": fl.spine,
            "sport": fl.sport, "bytes": fl.bytes, "sender_event": s.get("event"), "error": s.get("error"),
            "bytes_sent": s.get("bytes"), "bytes_received": r.get("bytes"),
            "sha256_sent": s.get("sha256"), "sha256_received": r.get("sha256"),
            "complete": s.get("event") == "flow_sent" and bool(r),
            "byte_exact": bool(s) and bool(r) and s.get("sha256") == r.get("sha256")
            and s.get("bytes") == r.get("bytes") == fl.bytes,
            "fct_s": round(s["fct_us"] / 1e6, 3) if s.get("fct_us") else None,
            "timeouts": s.get("timeouts"), "retransmissions": s.get("retransmissions")})
    series: Dict[str, List[tuple]] = {}
    for h in sorted({fl.dst for fl in exp.flows}):
        samples = [x for x in _json_lines(run_dir / f"{h}-serve.jsonl") if x.get("event") == "sample"]
        t0 = serve_t0.get(h)
        if t0 is None:
            continue
        series.update(_series(samples, t0, key_of.get))
    rec_rows = []
    faults = [e for e in timeline if "fault" in e]
    for n, ev in enumerate(faults):
        nxt = faults[n + 1]["t"] if n + 1 < len(faults) else ev["t"] + 5.0
        window = max(0.5, min(nxt - ev["t"], 8.0))
        per = {}
        for f in flows:
            r = recovery(series.get(f["flow"], []), ev["t"], window)
            per[f["flow"]] = r
            rec_rows.append({"event": ev["event"], "flow": f["flow"], "transport": f["transport"],
                             "spine": f["spine"], **r})
        # The control plane's repair: the path is whole again from then on.
        ev["repair_s"] = ev.get("groups_written_s", ev.get("reconciled_s", 0.0))
        for r in per.values():
            r["within_bound"] = (not r["active"]) or r["gap_s"] <= ev["repair_s"] + exp.recovery_bound_s
        ev["recovery"] = per
        active = [r["gap_s"] for r in per.values() if r["active"]]
        ev["max_gap_s"] = max(active, default=None)
    first_fault = faults[0]["t"] if faults else None
    result = {
        "experiment": exp.name, "description": exp.description, "switch": exp.switch, "scale": sc.describe(),
        "link_rate_bps": sc.link_rate_bps, "sample_ms": exp.sample_ms, "recovery_bound_s": exp.recovery_bound_s,
        "reconcile": exp.reconcile, "flows": flows, "timeline": timeline, "checks": checks,
        "serve_start_unix": serve_t0,
        "summary": {
            "flows": len(flows), "complete": sum(f["complete"] for f in flows),
            "byte_exact": sum(f["byte_exact"] for f in flows),
            "lost_bytes": sum(max(0, (f["bytes"] or 0) - (f["bytes_received"] or 0)) for f in flows),
            "corrupted_bytes": sum(f["bytes"] for f in flows
                                   if f["bytes_received"] == f["bytes"] and not f["byte_exact"]),
            "max_gap_s_by_event": {f"{e['event']}": e["max_gap_s"] for e in faults},
            "beyond_bound": [f"{e['event']}: {k} gap {r['gap_s']} s > repair {e['repair_s']} s + "
                             f"{exp.recovery_bound_s} s" for e in faults for k, r in e["recovery"].items()
                             if not r["within_bound"]],
            "asymmetric_after_changes": sum(len(e.get("asymmetric", [])) for e in timeline)
            + len(checks.get("final_asymmetric", [])),
            "final_apply_writes": sum(checks.get("final_apply_writes", {}).values()),
        },
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2, default=str))
    with open(run_dir / "throughput.csv", "w") as fcsv:
        fcsv.write("flow,t_s,interval_s,bps,proactive_bps,reactive_bps\n")
        for k, rows in series.items():
            for t, dt, b, p, r in rows:
                rel = t - (first_fault or 0)
                fcsv.write(f"{k},{rel:.3f},{dt:.3f},{b * 8 / dt:.0f},{p * 8 / dt:.0f},{r * 8 / dt:.0f}\n")
    with open(run_dir / "recovery.csv", "w") as fcsv:
        fcsv.write("event,flow,transport,spine,active,gap_s,bps_before,bps_after\n")
        for r in rec_rows:
            fcsv.write(f"{r['event']},{r['flow']},{r['transport']},{r['spine']},{r['active']},{r['gap_s']},"
                       f"{r['bps_before'] or ''},{r['bps_after'] or ''}\n")
    from .plots import plot_fault_timeline

    plot_fault_timeline(series, timeline, sc.link_rate_bps, f"{exp.description or exp.name} ({exp.switch})",
                        run_dir / "timeline.png")
    return result


def summary(r: dict) -> str:
    s = r["summary"]
    lines = [f"== faults: {r['experiment']} ({r['switch']}, {r['scale']}) ==",
             f"  flows complete {s['complete']}/{s['flows']}, byte-exact {s['byte_exact']}/{s['flows']}, "
             f"lost bytes {s['lost_bytes']}, corrupted bytes {s['corrupted_bytes']}"]
    for ev in r["timeline"]:
        if "fault" not in ev:
            continue
        extra = []
        if "groups_written_s" in ev:
            how = "detected by the probes" if ev.get("detect") == "probe" else "recorded"
            extra.append(f"groups rewritten on every switch {ev['groups_written_s'] * 1e3:.0f} ms after the "
                         f"link went {ev['event'].split()[-1]} ({how} after {ev['recorded_s']} s, controller "
                         f"{ev['controller_ms']} ms; writes {sum(ev['writes'].values())}), "
                         f"asymmetric pairs {len(ev['asymmetric'])}")
        if "reconcile_writes" in ev:
            extra.append(f"reconciled by {ev['reconciled_by']} {ev['reconciled_s']:.2f} s after the kill "
                         f"({ev['reconcile_writes']} writes), apply again: {ev['apply_again_writes']} writes")
        if "mastership_s" in ev:
            extra.append(f"mastership back in {ev['mastership_s']} s (election id {ev['election_ids']}), "
                         f"{ev['writes']} writes, entries lost {len(ev['entries_lost'])}")
        lines.append(f"  {ev['event']}: max throughput gap {ev['max_gap_s']} s; " + "; ".join(extra))
        for k, rc in ev["recovery"].items():
            if rc["gap_s"] > 0:
                lines.append(f"      {k}: gap {rc['gap_s']:.2f} s")
    lines.append(f"  after the last change: asymmetric pairs {len(r['checks'].get('final_asymmetric', []))}, "
                 f"apply on every switch wrote {s['final_apply_writes']}")
    lines.append(f"  recovery bound (gap <= repair + {r['recovery_bound_s']} s): "
                 + ("every flow within it" if not s["beyond_bound"] else "; ".join(s["beyond_bound"])))
    return "\n".join(lines)
