"""Faults on Mininet, as the model's ``[[fault]]`` entries run by ``flexpass emulate``
(emulate.py reads the file; this module carries the faults out and checks the control
plane around them):

* ``kind = "link"``: both veths of a switch-to-switch link drop every frame (tc pfifo
  limit 0: a cut link as the switches see it; taking a veth down in Mininet stalls every
  port of a BMv2 switch, which reads all ports in one thread, and libpcap's blocking read
  on a downed interface polls until it is up again).  ``reroute_after_ms`` later the
  control plane is told (``flexpass-ctl link-down/up --no-apply``) and the resident
  controller (``flexpass-ctl run``) rewrites every switch's ECMP groups; with ``--detect
  probe`` nobody tells it: its liveness probes, which cross the same qdisc, find the cut.
  The groups are read back after each change and checked symmetric.
* ``kind = "switch-restart"``: the switch process is killed (SIGKILL: tables, pipeline, TM
  state gone) and started again after ``down_ms``; the controller reconciles it, then
  ``flexpass-ctl apply`` must find nothing to write.
* ``kind = "controller-restart"``: the controller is killed and started again after
  ``down_ms``: mastership must come back (same election id) with 0 writes and every
  switch's entities unchanged.

Measured per fault, as the model does (report.rs ``FaultReport``): each flow's recovery,
the longest run of empty receiver sample intervals after the fault (:func:`gap`); and the
control plane's reaction from its JSON log.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from . import env
from .env import ExperimentError
from .fabric import asymmetric_pairs, ecmp_member_index, ecmp_paths

_json_lines = env.read_json_lines
#: Probe parameters of ``flexpass emulate --detect probe`` (flexpass-ctl run --detect probe).
PROBE_DEFAULTS = {"interval_ms": 20.0, "dead_ms": 100.0, "up_ms": 300.0}


def pick_source_ports(fab, flows, agent_port: int, base: int = 20000) -> Dict[int, int]:
    """A distinct source port per flow (by id); a flow with `via` gets one that the
    switches' symmetric hash puts through that switch (the reverse direction too)."""
    used, out = set(), {}
    for fl in flows:
        src, dst = fab.hosts[fl.src], fab.hosts[fl.dst]
        sw = fab.host_port(fl.src)[0]
        choices = [n for _, n, _ in fab.next_hops(sw, fl.dst)]  # the group's members, in order
        if fl.via is not None and fl.via not in choices:
            raise ExperimentError(f"flow {fl.id}: via = {fl.via!r} is not an uplink of {sw} ({', '.join(choices)})")
        for port in range(base, base + 4000):
            if port in used:
                continue
            if fl.via is None or choices[ecmp_member_index(src.ip, dst.ip, port, agent_port, len(choices))] == fl.via:
                out[fl.id] = port
                used.add(port)
                break
        else:
            raise ExperimentError(f"flow {fl.id}: no source port puts {fl.src}->{fl.dst} through {fl.via}")
    return out


def gap(rows: List[tuple], t_fault: float, t_end: float) -> float:
    """Recovery of one flow from a fault: the longest run of consecutive empty sample
    intervals among those ending after `t_fault` and starting before `t_end`. `rows`:
    (end of the interval, its length, bytes), seconds on one clock."""
    best = run = 0.0
    for t, dt, b, *_ in rows:
        if t <= t_fault or t - dt >= t_end:
            continue
        run = run + dt if b == 0 else 0.0
        best = max(best, run)
    return best


class FaultDriver:
    """The resident controller of an emulation with faults, and the faults themselves.
    Every fault appends an event to `timeline` (``t``: Unix time) with what the control
    plane did about it."""

    def __init__(self, net, fab, cfg_path: Path, out: Path, detect: str = "told",
                 probe: Optional[Dict[str, float]] = None, interval_s: float = 0.02, resync_s: float = 5.0):
        self.net, self.fab, self.cfg_path, self.out, self.detect = net, fab, cfg_path, out, detect
        p = dict(PROBE_DEFAULTS, **(probe or {}))
        args = [] if detect == "told" else [
            "--detect", "probe", "--probe-interval-ms", f"{p['interval_ms']:g}",
            "--probe-dead-ms", f"{p['dead_ms']:g}", "--probe-up-ms", f"{p['up_ms']:g}"]
        self.cp = ControlPlane(cfg_path, out, interval_s, resync_s, args)
        self.switches = sorted(fab.switches)
        self.timeline: List[dict] = []
        self._links: Dict[int, dict] = {}  # fault index -> its event, until the control plane has acted

    def start(self) -> None:
        t = self.cp.start()
        first = self.cp.wait_in_sync(t, self.switches)
        self.timeline.append({"t": t, "event": "controller started", "writes": sum(e["writes"] for e in first)})

    def _cfg(self):
        from flexpass_cp.links import load

        return load(self.cfg_path)

    def link(self, index: int, a: str, b: str, up: bool) -> None:
        """The link a-b fails (every frame dropped on both veths) or comes back."""
        intfs = [i.name for pair in self.net.net.get(a).connectionsTo(self.net.net.get(b)) for i in pair]
        t0 = time.time()
        dropped = set_link(self.net, a, b, intfs, not up, "drop")
        ev = {"t": t0, "event": f"link {'up' if up else 'down'}", "fault": index, "link": f"{a}:{b}",
              "interfaces": intfs, "frames_dropped_on_link": dropped, "detect": self.detect}
        self.timeline.append(ev)
        if self.detect == "probe":
            self._control_plane_acted(ev, up)
        else:
            self._links[index] = ev

    def reroute(self, index: int, up: bool) -> None:
        """The control plane is told of fault `index`'s link (``flexpass-ctl link-down/up
        --no-apply``, in this process: a fresh Python takes seconds on a loaded machine) and
        the controller rewrites the groups."""
        ev = self._links.pop(index, None)
        if ev is None:  # --detect probe: the controller found it itself
            return
        from flexpass_cp import cli as ctl

        verb = "up" if up else "down"
        log = io.StringIO()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            rc = ctl.main([f"link-{verb}", "--config", str(self.cfg_path), "--link", ev["link"], "--no-apply"])
        (self.out / f"fault{index}-link-{verb}.txt").write_text(log.getvalue())
        if rc != 0:
            raise RuntimeError(f"flexpass-ctl link-{verb} {ev['link']} failed: {log.getvalue().strip()}")
        ev["told_s"] = round(time.time() - ev["t"], 3)
        self._control_plane_acted(ev, up)

    def _control_plane_acted(self, ev: dict, up: bool) -> None:
        """Wait for every switch rewritten after the link change; read the groups back."""
        from flexpass_cp.links import default_state_path, read_state as read_links

        verb = "up" if up else "down"
        evs = self.cp.wait_in_sync(ev["t"], self.switches, timeout=30, reason="links")
        t_done = max(e["t"] for e in evs)
        _, t_rec = read_links(default_state_path(self.cfg_path))
        detected = self.cp.events(ev["t"], event="detected", state=verb)
        state = read_state(self.fab, self._cfg())
        ev.update({
            # --detect probe: the controller's own detection and the probes' silence then.
            "detected_s": round(detected[0]["t"] - ev["t"], 3) if detected else None,
            "probe_silent_ms": detected[0].get("silent_ms") if detected else None,
            # failure -> link state recorded -> every switch rewritten (the controller).
            "recorded_s": round(t_rec - ev["t"], 3) if t_rec else None,
            "controller_ms": round((t_done - t_rec) * 1e3, 1) if t_rec else None,
            "repair_s": round(t_done - ev["t"], 3),
            "writes": {e["switch"]: e["writes"] for e in evs},
            "updates": {e["switch"]: e["changes"] for e in evs if e["changes"]},
            "paths": state["paths"], "asymmetric": state["asymmetric"]})

    def switch_restart(self, index: int, name: str, down_s: float) -> None:
        """Kill the switch process, start it again after `down_s`; the controller
        reconciles it, after which ``flexpass-ctl apply`` must write nothing."""
        sw = self.net.switch(name)
        t0 = time.time()
        sw.kill()
        time.sleep(down_s)
        t_launch = time.time()
        sw.launch()
        t_up = time.time()
        (rec,) = self.cp.wait_in_sync(t_launch, [name], timeout=60)
        # --election-id 2: the controller stays primary of the other switches.
        again = json.loads(sw.apply(self.out / f"fault{index}-apply.txt", "--json", "--election-id", "2")
                           .stdout.strip().splitlines()[-1])
        self.timeline.append({
            "t": t0, "event": f"{name} killed and restarted", "fault": index,
            "process_start_s": round(t_up - t_launch, 3), "repair_s": round(rec["t"] - t0, 3),
            "reconcile_writes": rec["writes"], "pipeline_pushed": rec["pipeline_pushed"], "queues": rec["queues"],
            "apply_again_writes": again["writes"], "apply_again_pipeline_pushed": again["pipeline_pushed"]})

    def controller_restart(self, index: int, down_s: float) -> None:
        """Kill the controller, start it again after `down_s`: mastership back, nothing
        written, nothing lost."""
        cfg = self._cfg()
        before = read_state(self.fab, cfg)["entities"]
        t0 = time.time()
        self.cp.kill()
        time.sleep(down_s)
        between = read_state(self.fab, cfg)["entities"]
        t_start = self.cp.start()
        evs = self.cp.wait_in_sync(t_start, self.switches)
        prim = self.cp.events(t_start, event="primary")
        after = read_state(self.fab, cfg)["entities"]
        self.timeline.append({
            "t": t0, "event": "controller killed and restarted", "fault": index,
            "mastership_s": round(max(e["t"] for e in prim) - t_start, 3) if prim else None,
            "absent_s": round(max(e["t"] for e in prim) - t0, 3) if prim else None,
            "repair_s": 0.0,  # the switches never stopped forwarding
            "election_ids": sorted({e["election_id"] for e in prim}),
            "took_over": any(e["took_over"] for e in prim),
            "writes": sum(e["writes"] for e in evs),
            "pipeline_pushed": any(e["pipeline_pushed"] for e in evs),
            "entries_lost": {s: sorted(set(before[s]) - set(after[s])) for s in before
                             if set(before[s]) - set(after[s])},
            "entries_changed_while_down": before != between,
            "entities": sum(len(v) for v in after.values())})

    def finish(self) -> dict:
        """With the traffic done: the groups read back symmetric, then (controller stopped)
        what ``apply`` would write on every switch, which must be nothing."""
        cfg = self._cfg()
        final = read_state(self.fab, cfg)
        self.cp.stop()
        return {"final_asymmetric": final["asymmetric"], "final_paths": final["paths"],
                "final_apply_writes": pending_writes(cfg)}

    def stop(self) -> None:
        self.cp.stop()


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


