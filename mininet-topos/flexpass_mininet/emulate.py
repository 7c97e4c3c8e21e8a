"""The model's experiment files on real packets: ``flexpass emulate FILE`` (and
``python -m flexpass_mininet emulate FILE``).

One reader: the file is read by the model itself (``flexpass sim FILE --resolve``: every
key after defaults, ``extends``, ``--set`` and sweeps), and this module maps the result
onto Mininet — hosts running the agent, BMv2/flexpass_switch switches configured by the
control plane — scaled by the Mininet scaling rule (scaling.py), printed before the run:

* link rate C → C' (``--link-mbps``); base RTT of the model's path → the emulated one
  (``--rtt-us``); byte thresholds (K, red, buffer) keep their multiple of the BDP;
* every time (start, duration, warm-up, sample interval, fault) × RTT'/RTT;
* a listed flow's size × BDP'/BDP (it sets how long the flow lasts), never below 16
  frames or its own size; an incast's response size is kept (it sets the burst, in
  packets per RTT);
* a workload's or a trace's flows are the ones the model draws (``--resolve`` lists
  them: same seed, same hosts, sizes and arrivals), scaled as listed flows — bytes ×
  BDP'/BDP and times × RTT'/RTT keep the offered load.

Results have the model's report shape (result.json with ``fct``, ``flows``, ``timeouts``;
flows.csv with the same columns) plus ``backend``, ``time_scale`` and the scaling, so
``flexpass compare MODEL_DIR EMULATION_DIR`` puts the two side by side.  A key that this
backend cannot honour is an error naming the key and the backend.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import env, pase, switch_stats
from .env import ExperimentError
from .fabric import Fabric
from .scaling import FRAME, NO_THRESHOLD_PROFILES, Scaled

BACKEND = "mininet"
#: Flows the model draws for a [workload] or a [trace]; they run as `flexpass workload --trace`.
WORKLOAD_KINDS = ("background", "foreground")
AGENT_PORT = env.AGENT_PORT
#: Kernel TCP flows (transport "tcp", which only this backend runs) go to every server's
#: `flexpass serve --tcp` listener on this port.
TCP_PORT = AGENT_PORT + 1
#: A listed flow is never scaled below this many full frames.
MIN_FLOW_FRAMES = 16
#: Extra wall time after the scaled duration for finite flows to finish (× duration).
GRACE = 1.0
#: A plan prints every flow up to this many (else the first half of them and a summary).
MAX_FLOWS_DESCRIBED = 20
#: The floor of PPT's LCP threshold (frames; the HCP's is the scaling rule's K floor).
PPT_LCP_K_FLOOR_FRAMES = 3
#: The credit burst the control plane takes (credit_meter_burst_packets: 1..64 credits).
MAX_CREDIT_BURST = 64

# -- what this backend honours --------------------------------------------------------

TOPOLOGY_KINDS = ("star", "dumbbell", "parking-lot", "leaf-spine")
#: Keys read below; any other key whose value differs from the model's default is refused.
HONOURED = {
    "name", "description", "seed", "duration_ms",
    "topology.kind", "topology.hosts", "topology.link_gbps", "topology.link_delay_us",
    "topology.host_delay_us", "topology.left", "topology.right", "topology.bottleneck_gbps",
    "topology.bottlenecks", "topology.hosts_per_switch", "topology.leaves", "topology.spines",
    "topology.hosts_per_leaf", "topology.uplink_gbps", "topology.oversubscription",
    "switch.profile", "switch.w_q", "switch.k_kb", "switch.k_lcp_kb", "switch.red_kb", "switch.buffer_kb",
    "switch.ecn_basis",  # only "queue" with PASE (pase.prepare): the TM marks on the packet's own queue
    "switch.credit_queue", "switch.credit_burst",
    "host.credit_batch", "host.tlp", "host.target_loss_scaling", "host.flashpass.t_wait_ms",
    "host.flashpass.unscheduled",
    "deployment.fraction", "deployment.transport",
    "measure.sample_us", "measure.warmup_ms", "measure.monitor", "measure.small_flow_kb",
    "flow", "incast", "fault", "workload", "trace", "emulation",
} | pase.HONOURED
#: Why a section cannot run here (the rest: "no agent flag or switch setting for it").
WHY = {
    "convergence": "the convergence study is the model's",
    "impairment": "link impairments are the model's (netem is not on every kernel)",
    "compat": "the ns-2 compatibility preset changes the model's hosts, not the agent",
    "topology.mtu": "the emulated links run at MTU 1500",
    "topology.routing": "the switches always hash flows over equal-cost paths (symmetric ECMP)",
    **pase.WHY,
}


def _leaves(d, prefix=""):
    """(dotted key, value) of every leaf of a JSON object; lists count as leaves."""
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix, d


def refused_keys(exp: dict, defaults: dict) -> List[str]:
    """The keys `exp` sets that this backend cannot honour, each with the reason."""
    out = []
    is_pase = (exp.get("deployment") or {}).get("transport") == "pase"
    for key, value in _leaves(exp):
        if key in HONOURED or key.split(".")[0] in HONOURED:
            continue
        if is_pase and key in pase.HONOURED_IN_PASE:
            continue
        table = key.split(".")[0]
        default = dict(_leaves(defaults.get(table, {}), table)).get(key) if table in defaults else None
        if value in (None, [], {}) or value == default or value == pase.DEFAULTS.get(key, default):
            continue
        if table in WHY and key != table:  # a whole section the backend lacks: named once
            line = f"[{table}]: not supported on {BACKEND} ({WHY[table]})"
        else:
            reason = WHY.get(key) or "no agent flag or switch setting for it"
            line = f"{key} = {json.dumps(value)}: not supported on {BACKEND} ({reason})"
        if line not in out:
            out.append(line)
    return out


# -- the plan ------------------------------------------------------------------------

@dataclass
class FlowPlan:
    id: int
    kind: str  # listed | incast | background | foreground (a workload's or trace's, drawn by the model)
    transport: str
    src: str
    dst: str
    model_bytes: Optional[int]  # None: long-lived
    bytes: Optional[int]
    start_s: float
    group: int = 0  # incast group (one `flexpass incast` run), 0 for listed flows
    via: Optional[str] = None  # listed flows: the switch `flow.via` pins it through
    sport: Optional[int] = None  # listed flows: the source port it binds (faults.pick_source_ports)


@dataclass
class FaultPlan:
    index: int
    kind: str  # link | switch-restart | controller-restart (the model's fault.kind)
    at_s: float
    event: str  # what it does, as the model's report says it (FaultSpec::describe)
    link: Optional[str] = None  # "a->b" as the model names it
    up: bool = False
    reroute_after_s: float = 0.0
    switch: Optional[str] = None
    down_s: float = 0.0


@dataclass
class Plan:
    name: str
    point: str
    fabric: Fabric
    scaled: Scaled
    profile: str
    time_scale: float  # emulated seconds per model second
    model_rtt_us: float
    duration_s: float
    warmup_s: float
    sample_ms: int
    flows: List[FlowPlan] = field(default_factory=list)
    faults: List[FaultPlan] = field(default_factory=list)
    port_rates: Dict[Tuple[str, str], float] = field(default_factory=dict)  # (switch, neighbour) -> bit/s
    small_flow_bytes: int = 100_000
    experiment: dict = field(default_factory=dict)
    # flexpass-ctl keys beyond the ports' (the PPT profile's thresholds).
    switch_extra: dict = field(default_factory=dict)

    def describe(self) -> str:
        s = self.scaled
        lines = [
            f"{self.name}{' [' + self.point + ']' if self.point else ''} on {BACKEND}: "
            f"{len(self.fabric.hosts)} hosts, {len(self.fabric.switches)} switches, profile {self.profile}",
            f"  scaling: C {self.experiment['_link_bps'] / 1e9:g} Gbit/s -> C' {s.link_rate_bps / 1e6:g} Mbit/s, "
            f"base RTT {self.model_rtt_us:g} us -> {s.base_rtt_s * 1e6:g} us; BDP x {s.bdp_ratio:.3g}, "
            f"time x {self.time_scale:.4g}",
            "  switch: " + (f"buffer {s.buffer} B" if self.profile in NO_THRESHOLD_PROFILES else
                              f"K {s.ecn_threshold} B, red {s.red_threshold} B, buffer {s.buffer} B, w_q {s.w_q:g}")
            + f", credit queue {s.credit_queue_packets}, credit burst {s.credit_burst_packets}",
            f"  run: {self.duration_s:.2f} s (warm-up {self.warmup_s:.2f} s, samples every {self.sample_ms} ms)",
        ]
        if self.switch_extra.get("ppt"):
            k = self.switch_extra["ppt"]
            lines.append(f"  PPT: K {k['ecn_threshold_hcp']} B (P0-P3), {k['ecn_threshold_lcp']} B (P4-P7)")
        if pase.describe(self):
            lines.append(pase.describe(self))
        shown = self.flows if len(self.flows) <= MAX_FLOWS_DESCRIBED else self.flows[:MAX_FLOWS_DESCRIBED // 2]
        for f in shown:
            size = "long-lived" if f.bytes is None else f"{f.bytes} B (model {f.model_bytes} B)"
            lines.append(f"  flow {f.id} ({f.kind}): {f.transport} {f.src} -> {f.dst}, {size}, at {f.start_s:.3f} s")
        if len(shown) < len(self.flows):
            finite = [f.bytes for f in self.flows if f.bytes is not None]
            lines.append(f"  … {len(self.flows) - len(shown)} flows more: {len(self.flows)} in all, "
                         f"{sum(finite) / 1e6:.1f} MB, the last at {self.flows[-1].start_s:.3f} s")
        for f in self.faults:
            after = f", the control plane told {f.reroute_after_s:.3f} s later (--detect told)" \
                if f.kind == "link" else ""
            lines.append(f"  fault {f.index}: {f.event} at {f.at_s:.3f} s{after}")
        return "\n".join(lines)


def host_name(ref, hosts: int) -> str:
    """A model host reference (index or "hN") as the fabric's host name."""
    i = ref if isinstance(ref, int) else int(str(ref).lstrip("h"))
    if not 0 <= i < hosts:
        raise ExperimentError(f"host {ref!r} does not exist (the topology has {hosts})")
    return f"h{i}"


def build_fabric(topo: dict, hosts: int) -> Tuple[Fabric, int, Dict[Tuple[str, str], float]]:
    """The model's topology as a Fabric with the model's node names (h0…, s0…, leaf0…,
    spine0…), the links on the longest host-to-host path, and the rate of each
    switch-to-switch port relative to the host links."""
    kind = topo["kind"]
    f = Fabric(kind)
    rel: Dict[Tuple[str, str], float] = {}
    link = topo.get("link_gbps") or 10.0
    if kind == "star":
        f.switch("s0")
        for i in range(hosts):
            f.host(f"h{i}")
            f.link(f"h{i}", "s0")
        return f, 2, rel
    if kind in ("dumbbell", "parking-lot"):
        if kind == "dumbbell":
            switches, per = 2, None
            left = topo.get("left") or 1
            layout = [left, hosts - left]
        else:
            switches = (topo.get("bottlenecks") or 1) + 1
            per = topo.get("hosts_per_switch") or 1
            layout = [per] * switches
        names = [f.switch(f"s{i}").name for i in range(switches)]
        n = 0
        for sw, count in zip(names, layout):
            for _ in range(count):
                f.host(f"h{n}")
                f.link(f"h{n}", sw)
                n += 1
        ratio = (topo.get("bottleneck_gbps") or link) / link
        for a, b in zip(names, names[1:]):
            f.link(a, b)
            rel[(a, b)] = rel[(b, a)] = ratio
        return f, 1 + switches, rel
    if kind == "leaf-spine":
        leaves, spines, per = topo["leaves"], topo["spines"], topo["hosts_per_leaf"]
        leaf_names = [f.switch(f"leaf{i}").name for i in range(leaves)]
        spine_names = [f.switch(f"spine{i}").name for i in range(spines)]
        n = 0
        for leaf in leaf_names:
            for _ in range(per):
                f.host(f"h{n}")
                f.link(f"h{n}", leaf)
                n += 1
        up = topo.get("uplink_gbps")
        if up is None and topo.get("oversubscription"):
            up = per * link / (topo["oversubscription"] * spines)
        ratio = (up or link) / link
        for leaf in leaf_names:
            for spine in spine_names:
                f.link(leaf, spine)
                rel[(leaf, spine)] = rel[(spine, leaf)] = ratio
        return f, 4, rel
    raise ExperimentError(f"topology.kind = {kind!r}: not supported on {BACKEND} (kinds: {', '.join(TOPOLOGY_KINDS)})")


#: The emulated link rate C' (Mbit/s) and base RTT (µs) when neither the command line nor
#: the experiment's ``[emulation]`` gives them.
DEFAULT_LINK_MBPS, DEFAULT_RTT_US = 20.0, 1000.0


def make_plan(resolved: dict, point: dict, link_mbps: Optional[float] = None,
              rtt_us: Optional[float] = None) -> Plan:
    """The emulation of one point of a resolved experiment (``flexpass sim --resolve``), at
    C' = ``link_mbps`` and base RTT ``rtt_us``; each not given comes from the experiment's
    ``[emulation]``, else the defaults."""
    exp, derived = point["experiment"], point["derived"]
    scale = exp.get("emulation") or {}
    link_mbps = link_mbps or scale.get("link_mbps") or DEFAULT_LINK_MBPS
    rtt_us = rtt_us or scale.get("rtt_us") or DEFAULT_RTT_US
    if exp["topology"]["kind"] not in TOPOLOGY_KINDS:
        raise ExperimentError(f"{resolved['name']}: topology.kind = {exp['topology']['kind']!r}: not supported on "
                              f"{BACKEND} (kinds: {', '.join(TOPOLOGY_KINDS)})")
    refused = refused_keys(exp, resolved["defaults"])
    if refused:
        raise ExperimentError(f"{resolved['name']}: " + "; ".join(refused))
    topo, sw, meas = exp["topology"], exp["switch"], exp["measure"]
    hosts = derived["hosts"]
    fabric, path_links, rel = build_fabric(topo, hosts)
    model_rtt_us = 2 * path_links * derived["link_delay_us"] + 2 * derived["host_delay_us"]
    model_rtt_us = max(model_rtt_us, 1.0)
    link_bps = derived["link_bps"]
    burst = sw["credit_burst"]
    if burst != int(burst) or not 1 <= burst <= MAX_CREDIT_BURST:
        raise ExperimentError(f"switch.credit_burst = {burst:g}: not supported on {BACKEND} (a switch's credit "
                              f"meter or shaper passes whole credits: 1..{MAX_CREDIT_BURST})")
    sc = Scaled(link_mbps * 1e6, rtt_us / 1e6, w_q=sw["w_q"], ref_link_bps=link_bps, ref_rtt_s=model_rtt_us / 1e6,
                ref_k_bytes=int(sw["k_kb"] * 1e3), ref_red_bytes=int(sw["red_kb"] * 1e3),
                ref_buffer_bytes=int(sw["buffer_kb"] * 1e3), credit_queue_packets=sw["credit_queue"],
                credit_burst_packets=int(burst), profile=sw["profile"])
    time_scale = rtt_us / model_rtt_us
    dep = exp["deployment"]
    if dep["fraction"] not in (0.0, 1.0):
        raise ExperimentError(f"deployment.fraction = {dep['fraction']}: not supported on {BACKEND} "
                              "(give each flow its transport, or deploy on all or no hosts)")
    default_transport = (dep.get("transport") or "flexpass") if dep["fraction"] == 1.0 else "dctcp"
    duration_ms = exp.get("duration_ms") or 10.0
    plan = Plan(
        name=resolved["name"], point=point.get("id", ""), fabric=fabric, scaled=sc, profile=sw["profile"],
        time_scale=time_scale, model_rtt_us=model_rtt_us, duration_s=duration_ms / 1e3 * time_scale,
        warmup_s=meas["warmup_ms"] / 1e3 * time_scale,
        sample_ms=max(1, round((meas["sample_us"] or 1000.0) / 1e3 * time_scale)),
        small_flow_bytes=int(meas["small_flow_kb"] * 1e3), experiment=dict(exp, _link_bps=link_bps),
    )
    plan.port_rates = {k: v * sc.link_rate_bps for k, v in rel.items()}
    if sw["profile"] == "ppt":
        # PPT's K per half (P0–P3: k_kb, P4–P7: k_lcp_kb, by default k_kb·0.1/0.17 as the
        # model's), scaled as K is, with the floors of the Mininet scaling rule: 4 frames for
        # the HCP, 3 for the LCP (below the HCP's, as in the paper).
        k_lcp = sw["k_lcp_kb"] if sw.get("k_lcp_kb") is not None else sw["k_kb"] * 0.1 / 0.17
        plan.switch_extra = {"ppt": {
            "base_rtt_us": rtt_us, "ecn_threshold_hcp": sc.ecn_threshold,
            "ecn_threshold_lcp": max(round(k_lcp * 1e3 * sc.bdp_ratio), PPT_LCP_K_FLOOR_FRAMES * FRAME)}}

    def scaled_size(b: Optional[int]) -> Optional[int]:
        return None if b is None else min(b, max(round(b * sc.bdp_ratio), MIN_FLOW_FRAMES * FRAME))

    fid = 0
    for i, fl in enumerate(exp["flow"]):
        for k in range(fl["count"]):
            fid += 1
            src = host_name(fl["src"], hosts)
            src = f"h{int(src[1:]) + k}"
            if int(src[1:]) >= hosts:
                raise ExperimentError(f"flow.{i}.count: host {src} does not exist (the topology has {hosts})")
            b = fl.get("bytes")
            start = (fl["start_us"] + fl["start_step_us"] * k) / 1e6 * time_scale
            plan.flows.append(FlowPlan(fid, "listed", fl.get("transport") or default_transport, src,
                                       host_name(fl["dst"], hosts), b, scaled_size(b), start, via=fl.get("via")))
    group = 0
    for i, inc in enumerate(exp["incast"]):
        recv = host_name(inc["receiver"], hosts)
        senders = [host_name(s, hosts) for s in inc["senders"]] if inc.get("senders") else \
            [f"h{j}" for j in range(hosts) if f"h{j}" != recv]
        for r in range(incast_repetitions(inc, exp.get("duration_ms"))):
            group += 1
            start = (inc["start_us"] + inc["repeat_step_us"] * r) / 1e6 * time_scale
            cycle = inc.get("transports") or []
            transport = cycle[r % len(cycle)] if cycle else inc.get("transport") or default_transport
            for k in range(inc["flows"]):
                fid += 1
                plan.flows.append(FlowPlan(fid, "incast", transport,
                                           senders[k % len(senders)], recv, inc["bytes"], inc["bytes"], start, group))
    # A workload's or a trace's flows as the model drew them (same seed, same flows), scaled
    # like listed flows.
    for wf in point.get("workload_flows", []):
        fid += 1
        b = wf["bytes"]
        plan.flows.append(FlowPlan(fid, wf["kind"], wf["transport"], host_name(wf["src"], hosts),
                                   host_name(wf["dst"], hosts), b, scaled_size(b),
                                   wf["start_us"] / 1e6 * time_scale))
    for i, ft in enumerate(exp["fault"]):
        kind, down = ft.get("kind", "link"), (ft.get("down_ms") or 0.0) / 1e3 * time_scale
        fp = FaultPlan(i, kind, ft["at_ms"] / 1e3 * time_scale, _describe_fault(ft), down_s=down)
        if kind == "link":
            a, _, b = ft["link"].partition("->")
            if a not in fabric.switches or b not in fabric.switches:
                raise ExperimentError(f"fault.{i}.link = {ft['link']!r}: on {BACKEND} a fault is a link between "
                                      f"two switches ({', '.join(sorted(fabric.switches))})")
            fp.link, fp.up, fp.reroute_after_s = ft["link"], ft["up"], ft["reroute_after_ms"] / 1e3 * time_scale
        elif kind == "switch-restart":
            fp.switch = ft["switch"]
        plan.faults.append(fp)
    listed = [f for f in plan.flows if f.kind == "listed"]
    if plan.faults or any(f.via for f in listed):
        # Every listed flow binds its own source port: the receivers' samples tell the flows
        # apart (recovery per flow), and `via` picks the port the switches hash onto it.
        from .faults import pick_source_ports

        for f in listed:
            if f.via is not None and f.via not in fabric.switches:
                raise ExperimentError(f"flow {f.id}: via = {f.via!r}: no such switch")
        ports = pick_source_ports(fabric, listed, AGENT_PORT)
        for f in listed:
            f.sport = ports[f.id]
    if not plan.flows:
        raise ExperimentError(f"{resolved['name']}: no flows ([[flow]], [[incast]], [workload] or [trace]) to emulate")
    pase.prepare(plan)
    return plan


def incast_repetitions(inc: dict, duration_ms: Optional[float]) -> int:
    """As the model's IncastEntry::repetitions: `repeat`, or for 0 every `repeat_step_us`
    until `duration_ms`."""
    if inc["repeat"] == 0 and duration_ms and inc["repeat_step_us"] > 0:
        return max(0, math.ceil((duration_ms * 1e3 - inc["start_us"]) / inc["repeat_step_us"]))
    return inc["repeat"]


def port_of(transport: str) -> int:
    return TCP_PORT if transport == "tcp" else AGENT_PORT


def _describe_fault(ft: dict) -> str:
    """As the model's report (FaultSpec::describe)."""
    kind = ft.get("kind", "link")
    if kind == "link":
        return f"link {ft['link']} {'up' if ft.get('up') else 'down'}"
    if kind == "switch-restart":
        return f"{ft['switch']} restarted ({ft.get('down_ms') or 0:g} ms down)"
    return f"controller restarted ({ft.get('down_ms') or 0:g} ms down)"


def resolve(experiment: str, sets: List[str], no_sweep: bool = False) -> dict:
    """The experiment as the model reads it (``flexpass sim FILE --resolve``)."""
    cmd = [str(env.FLEXPASS_BIN), "sim", experiment, "--resolve"]
    for s in sets:
        cmd += ["--set", s]
    if no_sweep:
        cmd.append("--no-sweep")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ExperimentError(f"cannot run {env.FLEXPASS_BIN} (make build): {e.strerror}") from None
    if r.returncode != 0:
        raise ExperimentError((r.stderr or r.stdout).strip().removeprefix("error: "))
    return json.loads(r.stdout)


# -- running it ------------------------------------------------------------------------

_agent = env.agent_command
_json_lines = env.read_json_lines


def agent_flags(plan: Plan) -> List[str]:
    """Every agent's flags: the scaled link and RTT, and the host keys the agent has flags for
    (HONOURED; the agent's defaults are the model's). Times are scaled like every other."""
    host = plan.experiment["host"]
    flags = plan.scaled.agent_args()
    if host.get("credit_batch", 1) != 1:
        flags += ["--credit-batch", str(host["credit_batch"])]
    if host.get("target_loss_scaling") is not None:
        flags += ["--target-loss-scaling", f"{host['target_loss_scaling']:g}"]
    if host.get("tlp"):
        flags.append("--tlp")
    flashpass = host.get("flashpass") or {}
    if flashpass.get("t_wait_ms") is not None:
        flags += ["--t-wait-us", f"{flashpass['t_wait_ms'] * 1e3 * plan.time_scale:.0f}"]
    if flashpass.get("unscheduled") is False:
        flags.append("--flashpass-no-unscheduled")
    return flags + pase.agent_flags(plan)


def run(plan: Plan, switch: str, out: Path, pcap: bool = False, detect: str = "told",
        probe: Optional[Dict[str, float]] = None, controller: bool = False, progress=print) -> dict:
    """Run the plan on Mininet (root); write result.json, flows.csv, throughput.csv and the
    processes' memory and CPU (resources.csv, resources.png). With faults or `controller`,
    the resident controller holds the switches (faults.FaultDriver); `detect` and `probe`:
    who notices a failed link (see ``flexpass emulate --detect``)."""
    from flexpass_cp import cli  # noqa: F401  imported before the traffic starts: it takes a while

    from .faults import FaultDriver, SampleClock
    from .network import start_network
    from .resources import ResourceSampler, RunMonitor

    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.txt").write_text(plan.describe() + "\n")
    sc, fab = plan.scaled, plan.fabric
    agent_net = agent_flags(plan)

    def edit(cfg: dict) -> None:
        for sname, s in cfg["switches"].items():
            for port in s["ports"].values():
                rate = plan.port_rates.get((sname, port["name"]))
                if rate:
                    port["link_rate"] = rate

    procs = []
    started: Dict[int, float] = {}
    t_wall0 = time.monotonic()
    driver: Optional[FaultDriver] = None
    checks: dict = {}
    with start_network(fab, sc, switch, out, plan.profile, pcap, config_extra=plan.switch_extra,
                       config_edit=edit) as net, contextlib.ExitStack() as cleanup:
        cfg_path = out / "switch-config.yaml"
        resources = RunMonitor(ResourceSampler(), plan.duration_s, progress)
        for name in sorted(fab.switches):
            resources.sampler.watch(name, "switch", net.switch(name).proc.pid)
        if plan.faults or controller:
            driver = FaultDriver(net, fab, cfg_path, out, detect, probe)
            cleanup.callback(driver.stop)
            driver.start()
            resources.sampler.watch("controller", "controller", driver.cp.proc.pid)
        # Every host that receives a flow or answers an incast runs one agent server (with a
        # kernel TCP listener when a flow uses kernel TCP).
        servers = sorted({f.dst for f in plan.flows if f.kind != "incast"} | {f.src for f in plan.flows if f.kind == "incast"})
        tcp = any(f.transport == "tcp" for f in plan.flows)
        for h in servers:
            ip = fab.hosts[h].ip
            p = net.popen(h, _agent("serve", "--listen", f"{ip}:{AGENT_PORT}", "--respond", "--sample-ms",
                                    str(plan.sample_ms), *(["--tcp", f"{ip}:{TCP_PORT}"] if tcp else []), *agent_net),
                          out / f"{h}-serve.jsonl", out / f"{h}-serve.err")
            resources.sampler.watch(f"{h} serve", "agent", p.pid)
        if pase.uses_pase(plan):  # the rack arbitrator (pase.py); stopped with the network
            p = net.popen(pase.arbitrator_host(plan), _agent(*pase.arbitrator_command(plan)),
                          out / "arbitrator.jsonl", out / "arbitrator.err")
            resources.sampler.watch("arbitrator", "agent", p.pid)
        # The receivers' samples on the wall clock (recovery from faults).
        clock = SampleClock({h: out / f"{h}-serve.jsonl" for h in servers}) if plan.faults else None
        time.sleep(0.5)
        dsts = [f.dst for f in plan.flows]
        recv = max(set(dsts), key=dsts.count)  # the bottleneck: the busiest receiver's port
        sw, port = fab.host_port(recv)
        bottleneck = (sw, recv)
        monitors = []
        if "bottleneck" in plan.experiment["measure"].get("monitor", []):
            monitors.append(switch_stats.DepthSampler(net, sw, port))
        every_s = plan.sample_ms / 1e3
        samplers = monitors + [resources]
        t0, t0_unix = time.monotonic(), time.time()
        resources.t0 = t0

        def start_flow(f: FlowPlan) -> None:
            size = f.bytes if f.bytes is not None else int(sc.link_rate_bps / 8 * (plan.duration_s + 30))
            started[f.id] = time.monotonic() - t0
            bind = ["--bind", f"{fab.hosts[f.src].ip}:{f.sport}"] if f.sport else []
            p = net.popen(f.src, _agent("send", "--to", f"{fab.hosts[f.dst].ip}:{port_of(f.transport)}", "--transport",
                                        f.transport, "--size", str(size), "--timeout-s",
                                        f"{max(60.0, 4 * plan.duration_s):g}", *bind, *agent_net),
                          out / f"flow{f.id}-send.jsonl", out / f"flow{f.id}-send.err")
            procs.append((f, p))

        def start_workload(flows: List[FlowPlan]) -> None:
            """A workload's flows: one `flexpass workload --trace` per source host and
            transport, replaying that host's flows at their start times (one trace file per
            transport, every flow of it; the agent takes those that leave its host)."""
            by_transport: Dict[str, List[FlowPlan]] = {}
            for f in sorted(flows, key=lambda f: f.start_s):
                by_transport.setdefault(f.transport, []).append(f)
            for t, fl in by_transport.items():
                hosts = ",".join(f"{fab.hosts[f'h{i}'].ip}:{port_of(t)}" for i in range(len(fab.hosts)))
                trace = out / f"workload-{t}.trace"
                trace.write_text("".join(f"{f.id} {f.start_s:.9f} {f.src[1:]} {f.dst[1:]} {f.bytes}\n" for f in fl))
                for src in sorted({f.src for f in fl}, key=lambda h: int(h[1:])):
                    launched = time.monotonic() - t0
                    p = net.popen(src, _agent("workload", "--trace", str(trace), "--host", src[1:], "--hosts", hosts,
                                              "--transport", t, "--sample-ms", "0", *agent_net),
                                  out / f"workload-{src}-{t}.jsonl", out / f"workload-{src}-{t}.err")
                    members = [f for f in fl if f.src == src]
                    for f in members:
                        started[f.id] = launched + f.start_s  # until its record says when it began
                    procs.append((members, p))
                    resources.sampler.watch(f"{src} workload {t}", "agent", p.pid)

        def start_incast(group: int, members: List[FlowPlan]) -> None:
            first = members[0]
            for f in members:
                started[f.id] = time.monotonic() - t0
            servers_of = []
            for f in members:  # one server entry per flow, in flow order: the agent cycles through them
                servers_of.append(f"{fab.hosts[f.src].ip}:{port_of(f.transport)}")
            p = net.popen(first.dst, _agent("incast", "--servers", ",".join(dict.fromkeys(servers_of)),
                                            "--flows", str(len(members)), "--size", str(first.bytes),
                                            "--transport", first.transport, "--timeout-s",
                                            f"{max(60.0, 4 * plan.duration_s):g}", *agent_net),
                          out / f"incast{group}.jsonl", out / f"incast{group}.err")
            procs.append((members, p))

        start_workload([f for f in plan.flows if f.kind in WORKLOAD_KINDS])
        events = []
        for f in plan.flows:
            if f.kind == "listed":
                events.append((f.start_s, "flow", f))
        groups: Dict[int, List[FlowPlan]] = {}
        for f in plan.flows:
            if f.kind == "incast":
                groups.setdefault(f.group, []).append(f)
        for g, members in groups.items():
            events.append((members[0].start_s, "incast", (g, members)))
        for fault in plan.faults:
            events.append((fault.at_s, "fault", fault))
            if fault.kind == "link":
                events.append((fault.at_s + fault.reroute_after_s, "reroute", fault))
        events.sort(key=lambda e: e[0])
        for at, what, obj in events:
            wait_until(t0 + at, samplers, every_s)
            if what == "flow":
                start_flow(obj)
            elif what == "incast":
                start_incast(*obj)
            elif what == "reroute":
                driver.reroute(obj.index, obj.up)
            elif obj.kind == "link":
                a, _, b = obj.link.partition("->")
                driver.link(obj.index, a, b, obj.up)
            elif obj.kind == "switch-restart":
                driver.switch_restart(obj.index, obj.switch, obj.down_s)
            else:
                driver.controller_restart(obj.index, obj.down_s)
        # Long-lived flows run for the duration; finite ones until done (or the grace ends).
        # With finite flows only, the run ends when they are all done, as the model's does.
        end = t0 + plan.duration_s
        finite = [p for fl, p in procs if isinstance(fl, list) or fl.bytes is not None]
        if len(finite) < len(procs):
            wait_until(end, samplers, every_s)
        deadline = end + GRACE * plan.duration_s + 10
        while any(p.poll() is None for p in finite) and time.monotonic() < deadline:
            wait_until(time.monotonic() + 0.1, samplers, every_s)
        # The depth samples count from the last listed flow's start (after warm-up) until the
        # last finite flow completed (or the run's end): the time every listed flow is under
        # way (a workload's flows come and go: from the warm-up on).
        t_done = min(time.monotonic() - t0, _last_completion(plan, out, started) or math.inf)
        for m in monitors:
            m.close()
        depths = [(t - (t0 - m.t0), d) for m in monitors for t, d in m.rows]
        last_listed = max((started[f.id] for f in plan.flows if f.kind == "listed" and f.id in started), default=0.0)
        window = (max(plan.warmup_s, last_listed), t_done)
        queues = switch_stats.summarize(switch_stats.read_ports(net, fab), plan.profile, bottleneck, depths, window)
        serve_t0 = clock.stop() if clock else {}
        if driver:
            checks = driver.finish()
        resources.sample(force=True)
    timeline = []
    faults = []
    if driver:
        timeline = [dict(e, t_s=round(e["t"] - t0_unix, 3)) for e in driver.timeline]
        faults = fault_reports(plan, out, driver.timeline, serve_t0, t0_unix, started)
    if depths:
        write_depths(plan, out, depths, window, f"{sw}->{recv}")
    wall = time.monotonic() - t_wall0
    r = report(plan, switch, out, started, timeline, queues, wall, faults, checks, resources.sampler.summaries())
    resources.write(out, r, f"{plan.name} on {switch}, {wall / 60:.1f} min")
    return r


def sender_records(plan: Plan, out: Path) -> Dict[int, dict]:
    """The last record of every listed or workload flow from its sender, by flow id:
    `flexpass send`'s flow_sent (flow_failed: the agent gave up, its error says why), and
    `flexpass workload --trace`'s per-flow lines (by trace_id; `bytes` is their size)."""
    recs: Dict[int, dict] = {}
    for f in plan.flows:
        if f.kind == "listed":
            rs = [r for r in _json_lines(out / f"flow{f.id}-send.jsonl")
                  if r.get("event") in ("flow_sent", "flow_failed")]
            if rs:
                recs[f.id] = dict(rs[-1])
    for path in sorted(out.glob("workload-*.jsonl")):
        for r in _json_lines(path):
            if r.get("event") == "flow" and r.get("trace_id") is not None:
                recs[int(r["trace_id"])] = dict(r, bytes=r.get("size"))
    return recs


def _last_completion(plan: Plan, out: Path, started: Dict[int, float]) -> Optional[float]:
    """When the last finite flow (listed or a workload's) completed, in s since the run's
    start, from its sender's record; None if one has none or failed, or there is none."""
    ends = []
    sent = sender_records(plan, out)
    for f in plan.flows:
        if f.kind == "incast" or f.bytes is None:
            continue
        r = sent.get(f.id)
        if not r or r.get("error") or r.get("fct_us") is None:
            return None
        ends.append(started.get(f.id, f.start_s) + r["fct_us"] / 1e6)
    return max(ends) if ends else None


def fault_reports(plan: Plan, out: Path, events: List[dict], serve_t0: Dict[str, float], t0_unix: float,
                  started: Dict[int, float]) -> List[dict]:
    """Every fault as the model reports it (report.rs FaultReport): per listed flow under way
    at the fault, its longest run of empty receiver samples from the fault until the next
    one (faults.gap); plus what the control plane did. Writes throughput.csv and
    timeline.png (the flows' throughput with the faults marked)."""
    from .faults import _series, gap
    from .plots import plot_fault_timeline

    listed = [f for f in plan.flows if f.kind == "listed" and f.sport]
    key_of = {f"{plan.fabric.hosts[f.src].ip}:{f.sport}": f.id for f in listed}
    label = {f.id: f"flow{f.id} {f.transport} {f.src}->{f.dst} via {f.via or 'hash'}" for f in listed}
    series: Dict[int, List[tuple]] = {}
    for h in sorted({f.dst for f in listed}):
        if h not in serve_t0:
            continue
        samples = [x for x in _json_lines(out / f"{h}-serve.jsonl") if x.get("event") == "sample"]
        series.update(_series(samples, serve_t0[h], key_of.get))
    sent = sender_records(plan, out)
    by_fault = {}
    for e in events:
        if "fault" in e:
            by_fault.setdefault(e["fault"], e)
    times = sorted(e["t"] for e in by_fault.values())
    end = max((rows[-1][0] for rows in series.values() if rows), default=time.time())
    reports = []
    for fp in plan.faults:
        ev = by_fault.get(fp.index)
        if ev is None:
            continue
        at = ev["t"]
        nxt = min([t for t in times if t > at] + [end])
        recovery = []
        for f in listed:
            begun = t0_unix + started.get(f.id, f.start_s)
            fct = (sent.get(f.id) or {}).get("fct_us")
            done = begun + fct / 1e6 if fct else math.inf
            if begun > at or done <= at:
                continue
            rows = [r for r in series.get(f.id, []) if r[0] - r[1] < done]
            recovery.append({"flow": f.id, "gap_us": round(gap(rows, at, nxt) * 1e6, 1)})
        reports.append({
            "index": fp.index, "kind": fp.kind, "event": fp.event, "at_us": (at - t0_unix) * 1e6,
            "window_us": (nxt - at) * 1e6, "recovery": recovery,
            "max_gap_us": max((r["gap_us"] for r in recovery), default=None),
            "control_plane": {k: v for k, v in ev.items() if k not in ("t", "fault")}})
    with open(out / "throughput.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["flow", "t_s", "interval_s", "bps", "proactive_bps", "reactive_bps"])
        for fid, rows in series.items():
            for t, dt, b, pro, rea in rows:
                w.writerow([fid, f"{t - t0_unix:.3f}", f"{dt:.3f}", round(b * 8 / dt), round(pro * 8 / dt),
                            round(rea * 8 / dt)])
    plot_fault_timeline({label[k]: v for k, v in series.items()}, events, plan.scaled.link_rate_bps,
                        f"{plan.name} on {BACKEND}", out / "timeline.png", sample_ms=plan.sample_ms)
    return reports


def write_depths(plan: Plan, out: Path, depths: List[Tuple[float, Dict[int, int]]], window: Tuple[float, float],
                 port: str) -> None:
    """queue.csv and queue.png: the bottleneck port's queues over time, in the model's order."""
    from .plots import plot_queue_depths

    qids = switch_stats.model_queues(plan.profile)
    names = [f"P{i}" for i in range(len(qids))] if plan.profile == "ppt" else \
        ["credits" if plan.profile != "flashpass" else "emulation", "Q1 data", "Q2 legacy data"][:len(qids)]
    with open(out / "queue.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t_s", *[f"{n} bytes" for n in names]])
        for t, d in depths:
            w.writerow([f"{t:.3f}", *[d.get(q, 0) for q in qids]])
    plot_queue_depths(depths, names, qids, window, plan.scaled.buffer,
                      f"{plan.name} {plan.point} on {BACKEND}: bottleneck {port}", out / "queue.png")


def wait_until(t: float, monitors, every_s: float = 0.1) -> None:
    """Sleep until monotonic time `t`, sampling the monitors every `every_s` meanwhile."""
    while True:
        now = time.monotonic()
        if now >= t:
            return
        time.sleep(min(every_s, t - now))
        for m in monitors:
            m.sample()


# -- the report -------------------------------------------------------------------------

def _stats(values: List[float]) -> dict:
    if not values:
        return {"flows": 0, "avg_us": 0.0, "p50_us": 0.0, "p99_us": 0.0, "std_us": 0.0, "max_us": 0.0}
    v = sorted(values)

    def pct(q):
        k = (len(v) - 1) * q
        lo = math.floor(k)
        return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (k - lo)

    return {"flows": len(v), "avg_us": statistics.fmean(v), "p50_us": pct(0.5), "p99_us": pct(0.99),
            "std_us": statistics.pstdev(v), "max_us": v[-1]}


def _fct_summary(flows: List[dict], small: int) -> dict:
    done = [f for f in flows if f["fct_us"] is not None]
    finite = [f for f in flows if f["size"] is not None]

    def size(f):  # a flow is small or not by its size in the model (an emulated size is scaled)
        return f["model_size"] if f.get("model_size") is not None else f["size"]

    return {
        "flows": len(finite), "completed": len(done), "incomplete": len(finite) - len(done),
        "all": _stats([f["fct_us"] for f in done]),
        "small": _stats([f["fct_us"] for f in done if size(f) < small]),
        "not_small": _stats([f["fct_us"] for f in done if size(f) >= small]),
        "timeouts": sum(f["timeouts"] for f in flows),
        "retransmissions": sum(f["retransmissions"] for f in flows),
    }


def report(plan: Plan, switch: str, out: Path, started: Dict[int, float], timeline: List[dict],
           queues: dict, wall_s: float, faults: Optional[List[dict]] = None, checks: Optional[dict] = None,
           processes: Optional[Dict[str, dict]] = None) -> dict:
    """result.json and flows.csv in the model's shape, from the agents' records."""
    records: Dict[int, dict] = {}
    # Byte-exact: a finite flow counts as delivered when its receiver's agent reports the
    # same byte count and SHA-256 as its sender's.
    received: Dict[str, List[Tuple[int, str]]] = {}
    for h in plan.fabric.hosts:
        received[h] = [(r.get("bytes"), r.get("sha256")) for r in _json_lines(out / f"{h}-serve.jsonl")
                       if r.get("event") == "flow_received"]
    sent = sender_records(plan, out)
    for f in plan.flows:
        if f.kind != "incast":
            rec = sent.get(f.id, {})
            if rec and f.bytes is not None and not rec.get("error"):
                key = (rec.get("bytes"), rec.get("sha256"))
                if key in received[f.dst]:
                    received[f.dst].remove(key)
                else:
                    rec["error"] = "the receiver reported no flow with this flow's bytes and SHA-256"
            records[f.id] = rec
    groups: Dict[int, List[FlowPlan]] = {}
    for f in plan.flows:
        if f.kind == "incast":
            groups.setdefault(f.group, []).append(f)
    for g, members in groups.items():
        got = [r for r in _json_lines(out / f"incast{g}.jsonl") if r.get("event") == "response"]
        # Responses carry their server, not their request: a server's responses fill its
        # flows in completion order (they are alike: same size, same server).
        pending: Dict[str, List[FlowPlan]] = {}
        for f in members:
            pending.setdefault(plan.fabric.hosts[f.src].ip, []).append(f)
        for r in got:
            ip = str(r.get("from", "")).rsplit(":", 1)[0]
            if pending.get(ip):
                records[pending[ip].pop(0).id] = dict(r, bytes=r.get("size"))
    # Receiver-side samples: per flow, bytes per interval, proactive and reactive.
    shares = _shares(plan, out)
    flows = []
    for f in plan.flows:
        r = records.get(f.id, {})
        ok = bool(r) and not r.get("error") and (f.bytes is None or r.get("bytes") == f.bytes)
        fct = r.get("fct_us") if ok and f.bytes is not None else None
        sh = shares.get(f.id, {})
        flows.append({
            "id": f.id, "kind": f.kind, "transport": f.transport, "src": int(f.src[1:]), "dst": int(f.dst[1:]),
            "size": f.bytes, "model_size": f.model_bytes, "start_us": started.get(f.id, f.start_s) * 1e6,
            "fct_us": fct, "delivered_bytes": r.get("bytes"), "retransmissions": int(r.get("retransmissions") or 0),
            "timeouts": int(r.get("timeouts") or 0), "share": sh.get("share"),
            "proactive_share": sh.get("proactive_share"), "reactive_share": sh.get("reactive_share"),
            # A long-lived flow runs until the network stops: its measure is its share.
            "error": (None if sh else "no samples from the receiver") if f.bytes is None
            else r.get("error") or (None if r else "no record from the agent"),
        })
    legacy = [x for x in flows if x["transport"] in ("dctcp", "tcp", "cubic")]
    new = [x for x in flows if x not in legacy]
    result = {
        "experiment": plan.name, "point": plan.point, "backend": BACKEND, "switch": switch,
        "profile": plan.profile, "w_q": plan.scaled.w_q, "time_scale": plan.time_scale,
        "scale": plan.scaled.describe(), "link_rate_bps": plan.scaled.link_rate_bps,
        "model_rtt_us": plan.model_rtt_us, "duration_us": plan.duration_s * 1e6, "wall_seconds": wall_s,
        "fct": {"overall": _fct_summary(flows, plan.small_flow_bytes), "legacy": _fct_summary(legacy, plan.small_flow_bytes),
                "new": _fct_summary(new, plan.small_flow_bytes)},
        "timeouts": sum(x["timeouts"] for x in flows),
        "flows": flows, "timeline": timeline,
        # Every [[fault]] as the model reports it (recovery per flow, µs as emulated: ÷ time_scale
        # for the model's), with what the control plane did (`control_plane`).
        "faults": faults or [], "checks": checks or {},
        # The switches' queues in the model's keys (switch_stats.py), bytes as emulated:
        # × 1 / bdp_ratio for the model's scale.
        "bdp_ratio": plan.scaled.bdp_ratio,
        **queues,
        "emulation": _emulation_totals(records),
        "by_transport": _by_transport(flows),
        # The rack arbitrator's counters (PASE; None without pase flows).
        "pase": {"arbitrator": pase.arbitrator_stats(out)} if pase.uses_pase(plan) else None,
        # Memory and CPU of every switch, agent and the controller (resources.py).
        "processes": processes or {},
        "plan": plan.describe(),
    }
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    with open(out / "flows.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "kind", "transport", "src", "dst", "size_bytes", "start_us", "fct_us", "slowdown",
                    "retransmissions", "timeouts", "delivered_bytes", "corrupted_bytes", "reactive_rtos"])
        for x in flows:
            w.writerow([x["id"], x["kind"], x["transport"], x["src"], x["dst"], x["size"] if x["size"] is not None else "",
                        f"{x['start_us']:.3f}", "" if x["fct_us"] is None else f"{x['fct_us']:.3f}", "",
                        x["retransmissions"], x["timeouts"], x["delivered_bytes"] or 0, 0, ""])
    return result


def _by_transport(flows: List[dict]) -> Dict[str, dict]:
    """Per transport: finite flows completed byte-exact, failed, and their timeouts."""
    out: Dict[str, dict] = {}
    for x in flows:
        if x["size"] is None:
            continue
        b = out.setdefault(x["transport"], {"flows": 0, "completed": 0, "failed": 0, "bytes": 0, "timeouts": 0,
                                            "avg_fct_us": None, "_fcts": []})
        b["flows"] += 1
        b["completed" if x["fct_us"] is not None else "failed"] += 1
        if x["fct_us"] is not None:
            b["bytes"] += x["delivered_bytes"] or 0
            b["_fcts"].append(x["fct_us"])
        b["timeouts"] += x["timeouts"]
    for b in out.values():  # AFCT per transport (PASE Fig. 13(b)'s measure)
        fcts = b.pop("_fcts")
        b["avg_fct_us"] = statistics.fmean(fcts) if fcts else None
    return out


def _emulation_totals(records: Dict[int, dict]) -> Optional[dict]:
    """FlashPass senders' emulation counters, summed (None: no FlashPass flow)."""
    em = [r["emulation"] for r in records.values() if isinstance(r.get("emulation"), dict)]
    if not em:
        return None
    return {k: sum(int(x.get(k) or 0) for x in em) for k in em[0]}


def _shares(plan: Plan, out: Path) -> Dict[int, dict]:
    """Long-lived listed flows: their share of the host link after warm-up, from the
    receiving agents' samples (one flow per sender and transport at a receiver)."""
    res: Dict[int, dict] = {}
    for f in plan.flows:
        if f.kind != "listed" or f.bytes is not None:
            continue
        src_ip = plan.fabric.hosts[f.src].ip
        samples = [s for s in _json_lines(out / f"{f.dst}-serve.jsonl") if s.get("event") == "sample"]
        rows = []
        prev = None
        for s in samples:
            t = s["t_ms"] / 1e3
            dt = (t - prev) if prev is not None else plan.sample_ms / 1e3
            prev = t
            for x in s["flows"]:
                if x["peer"].rsplit(":", 1)[0] == src_ip and x["transport"] == f.transport:
                    rows.append((t, x["proactive_bytes"] * 8 / dt, x["reactive_bytes"] * 8 / dt))
        if not rows:
            continue
        t_first = rows[0][0]
        steady = [r for r in rows if r[0] >= t_first + plan.warmup_s] or rows
        c = plan.scaled.link_rate_bps
        pro = statistics.fmean(r[1] for r in steady) / c
        rea = statistics.fmean(r[2] for r in steady) / c
        res[f.id] = {"share": pro + rea, "proactive_share": pro, "reactive_share": rea}
    return res


def main_args(a) -> int:
    """``python -m flexpass_mininet emulate``: resolve, plan every point, run (or print)."""
    try:
        resolved = resolve(a.experiment, a.set or [], a.no_sweep)
        plans = [make_plan(resolved, p, a.link_mbps, a.rtt_us) for p in resolved["points"]]
    except ExperimentError as e:
        print(f"flexpass emulate: {e}", flush=True)
        return 1
    for p in plans:
        print(p.describe(), flush=True)
    if a.dry_run:
        return 0
    from .__main__ import _cannot_run

    if _cannot_run(a.switch):
        return 2
    base = a.out
    for i, p in enumerate(plans, 1):
        d = base / p.point if p.point else base
        print(f"[{i}/{len(plans)}] {p.name}{' ' + p.point if p.point else ''}: {p.duration_s:.1f} s of traffic -> {d}",
              flush=True)
        probe = {k: getattr(a, f"probe_{k}") for k in ("interval_ms", "dead_ms", "up_ms")} \
            if hasattr(a, "probe_interval_ms") else None
        r = run(p, a.switch, d, a.pcap, getattr(a, "detect", "told"), probe, getattr(a, "controller", False))
        o = r["fct"]["overall"]
        print(f"  {o['completed']}/{o['flows']} finite flows completed, max FCT {o['all']['max_us'] / 1e3:.1f} ms, "
              f"timeouts {r['timeouts']}; " + ", ".join(
                  f"flow {x['id']} ({x['transport']}) {100 * x['share']:.0f} %" for x in r["flows"] if x["share"] is not None),
              flush=True)
        for t, b in r["by_transport"].items():
            print(f"    {t:12} {b['completed']}/{b['flows']} completed byte-exact, {b['bytes'] / 1e6:.1f} MB, "
                  f"timeouts {b['timeouts']}" + (f", AFCT {b['avg_fct_us'] / 1e3:.2f} ms" if b["avg_fct_us"] else ""),
                  flush=True)
        from .resources import PROGRESS_S, summary_lines

        if p.duration_s > 2 * PROGRESS_S:
            print("\n".join(summary_lines(r["processes"])), flush=True)
        for fr in r["faults"]:
            cp = fr["control_plane"]
            print(f"  fault {fr['index']} ({fr['event']}): longest gap of a flow "
                  + (f"{fr['max_gap_us'] / 1e3:.0f} ms" if fr["max_gap_us"] is not None else "- (no flow under way)")
                  + (f", repaired after {cp['repair_s']:.2f} s" if cp.get("repair_s") is not None else ""), flush=True)
    return 0
