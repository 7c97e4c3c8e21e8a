"""Long flows into one receiver through one switch:
``python3 -m flexpass_mininet longflows EXPERIMENT.toml`` (``flashpass`` runs
experiments/flashpass.toml).

N senders each send one long flow (``flexpass send``) to one receiver through one switch
(``switch``: ``flexpass_switch``, or stock BMv2 ``simple_switch``, where the P4 credit meter
polices credits) with a ``flexpass-ctl`` profile (``profile``): ``flexpass`` (credit
queue, FlexPass and legacy data queues) or ``flashpass`` (docs/protocol.md §10: the
emulation queue shaped to C·84/(84 + 1538), 8 packets, over-provisioned Not-ECT emulation
dropped at 2 queued; one shallow data queue), the static case of FlashPass §IV-B1 scaled
down.  The same senders run once per transport and receiver credit batch
(``credit_batches``, the agents' ``--credit-batch``): e.g. ``flashpass`` (plain, no
pre-credit phase, as Fig. 10) against ``dctcp`` (the agent's window transport; the data
queue marks nothing, so it is loss-driven like the paper's TCP baseline), or ExpressPass
with credits paced one by one against credits paced in batches.

Measured: every flow byte-exact (sender and receiver SHA-256), its completion time and
retransmissions, the senders' emulation counters; the TM counters (bytes dequeued, maximum
depth, drops per reason) of the bottleneck port's data queue and of every port's credit
queue (ExpressPass's credits queue on the ports back to the senders), and the data queue's
depth sampled every ``sample_ms`` (mean, p99, max).  Stock BMv2 has no TM statistics: there
the P4 program's counters per port and queue stand in for them (packets forwarded, CE-marked,
red data dropped, credits dropped by the meter), and BMv2's own queue drops and depths are
not visible (None).  Data loss is data packets the switch dropped (data queue: full buffer or
red) plus the senders' retransmissions.  Writes result.json, runs.csv, flows.csv, queue.csv
and queue.png into <out>/<name>-<switch>/.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from .expfile import (ExperimentError, Run, check_transports, loader, no_leftovers, result_header, take_run,
                      write_csv)
from .experiments import AGENT_PORT, _agent, _read_json_lines, dumbbell_run, p4_counters
from .network import start_network
from .scaling import Scaled

from flexpass_cp.config.profiles import DEFAULT_BMV2_PRIORITY
from flexpass_cp.p4_program import PORT_QUEUE_COUNTERS, QUEUES_PER_PORT, port_queue_index

TRANSPORTS = ("flexpass", "expresspass", "flashpass", "dctcp")
PROFILES = ("flexpass", "flashpass")
# Both profiles' queues: credits (FlashPass: emulation packets) in the credit queue, the
# data measured in the FlexPass queue.
CREDIT_QUEUE = DEFAULT_BMV2_PRIORITY["credit"]
DATA_QUEUE = DEFAULT_BMV2_PRIORITY["flexpass"]
MAX_CREDIT_BATCH = 63  # the agent's --credit-batch range


@dataclass
class Experiment(Run):
    profile: str = "flexpass"
    senders: int = 4
    flow_bytes: int = 2_000_000
    start_gap_ms: float = 100.0
    t_wait_us: float = 4000.0
    transports: List[str] = field(default_factory=lambda: ["flashpass", "dctcp"])
    credit_batches: List[int] = field(default_factory=lambda: [1])
    # The port buffer; None: the scaling rule's (scaling.py), with its thresholds.
    buffer_bytes: Optional[int] = None
    # Control-plane port settings for credits; None: the config's (8 and 2). A port that
    # polices credits with the meter (stock BMv2) needs B + 1 of both for batches of B.
    credit_queue_packets: Optional[int] = None
    credit_meter_burst_packets: Optional[int] = None
    sample_ms: float = 20.0
    flow_timeout_s: float = 120.0


def parse_experiment(raw: dict, name: str) -> Experiment:
    e = Experiment(name=name)
    take_run(raw, e, (("profile", str), ("senders", int), ("flow_bytes", int), ("start_gap_ms", float),
                      ("t_wait_us", float), ("transports", list), ("credit_batches", list), ("buffer_bytes", int),
                      ("credit_queue_packets", int), ("credit_meter_burst_packets", int),
                      ("sample_ms", float), ("flow_timeout_s", float)))
    no_leftovers(raw, name)
    if e.senders < 1 or e.flow_bytes < 1:
        raise ExperimentError(f"{name}: senders and flow_bytes must be >= 1")
    check_transports(e.transports, TRANSPORTS, name)
    if e.profile not in PROFILES:
        raise ExperimentError(f"{name}.profile: one of {', '.join(PROFILES)}, got {e.profile!r}")
    if not e.credit_batches or not all(isinstance(b, int) and not isinstance(b, bool)
                                       and 1 <= b <= MAX_CREDIT_BATCH for b in e.credit_batches):
        raise ExperimentError(f"{name}.credit_batches: credits per batch, each 1..{MAX_CREDIT_BATCH}, "
                              f"got {e.credit_batches}")
    if "flashpass" in e.transports and e.t_wait_us < e.rtt_us:
        raise ExperimentError(f"{name}: t_wait_us ({e.t_wait_us}) must be at least the RTT rtt_us ({e.rtt_us}): "
                              "FlashPass §III-B, T_wait >= the network's max RTT")
    if e.buffer_bytes is not None and e.buffer_bytes < 3 * 1514:
        raise ExperimentError(f"{name}: buffer_bytes must hold at least 3 full frames (4542 B), got {e.buffer_bytes}")
    for key in ("credit_queue_packets", "credit_meter_burst_packets"):
        v = getattr(e, key)
        if v is not None and not 1 <= v <= 64:
            raise ExperimentError(f"{name}.{key}: credits, 1..64, got {v}")
    if not 0 < e.sample_ms <= 1000 or e.start_gap_ms < 0:
        raise ExperimentError(f"{name}: need 0 < sample_ms <= 1000 and start_gap_ms >= 0")
    return e


load_experiment = loader(parse_experiment)


def switch_config(e: Experiment) -> dict:
    """The flexpass-ctl keys the experiment sets: the port buffer, if it names one (it then
    replaces the scaling rule's port defaults; FlashPass's thresholds are its profile's
    defaults: 8-packet emulation queue, 2 and 2); credit settings go on top of either."""
    credit = {k: getattr(e, k) for k in ("credit_queue_packets", "credit_meter_burst_packets")
              if getattr(e, k) is not None}
    if e.buffer_bytes is not None:
        return {"port_defaults": {"buffer": e.buffer_bytes, **credit}}
    if credit:
        return {"port_defaults": {**Scaled(e.link_mbps * 1e6, e.rtt_us / 1e6).port_defaults(), **credit}}
    return {}


def runs(e: Experiment) -> List[Tuple[str, str, int]]:
    """(label, transport, credit batch) of every run: each transport with each batch, the
    label ``transport`` or, for a batch above one, ``transport-bB``."""
    return [(t if b == 1 else f"{t}-b{b}", t, b) for t in e.transports for b in e.credit_batches]


def _pct(xs: List[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def queue_summary(port_stats: List[dict], depth_samples: List[int]) -> dict:
    """The data queue of the bottleneck port (``port_stats[0]``, towards the receiver) and
    the credit queues of every port: ExpressPass's credits queue on the way back to the
    senders, FlashPass's emulation packets on the way to the receiver.  Counts are summed
    over the ports, depths are the deepest."""
    def deepest(rows, k):
        depths = [r.get(k, 0) for r in rows]
        return None if None in depths else max(int(v) for v in depths)

    def one(q, ports):
        rows = [next((x for x in st.get("queues", []) if x["queue"] == q), {}) for st in ports]
        drops: dict = {}
        for r in rows:
            for k, v in r.get("dropped_pkts", {}).items():
                if v:
                    drops[k] = drops.get(k, 0) + v
        return {"queue": q, "ports": len(ports), "dropped_pkts": drops,
                **{k: sum(int(r.get(k, 0)) for r in rows)
                   for k in ("dequeued_pkts", "dequeued_bytes", "ecn_marked_pkts")},
                **{k: deepest(rows, k) for k in ("max_depth_bytes", "max_depth_pkts")}}
    data = one(DATA_QUEUE, port_stats[:1])
    data["depth_samples"] = len(depth_samples)
    data["mean_depth_bytes"] = sum(depth_samples) / len(depth_samples) if depth_samples else None
    data["p99_depth_bytes"] = _pct(depth_samples, 0.99) if depth_samples else None
    return {"credit": one(CREDIT_QUEUE, port_stats), "data": data}


def p4_port_stats(counters: dict, port: int) -> dict:
    """One port's P4 counters (``p4_counters``, PORT_QUEUE_COUNTERS) in the shape of flexpass_switch's
    TM statistics, for stock BMv2: per queue what left it, was CE-marked, and what the P4
    program dropped (red data above the selective-drop threshold, credits above the meter);
    BMv2's own queue drops and depths are not visible (depths None)."""
    def cell(name, q, i=0):
        return counters[name].get(port_queue_index(port, q), (0, 0))[i]

    queues = []
    for q in range(QUEUES_PER_PORT):
        drops = {"red": cell("red_dropped", q), "credit_meter": cell("credit_dropped", q)}
        if cell("forwarded", q) or any(drops.values()):
            queues.append({"queue": q, "dequeued_pkts": cell("forwarded", q), "dequeued_bytes": cell("forwarded", q, 1),
                           "ecn_marked_pkts": cell("ecn_marked", q), "dropped_pkts": drops,
                           "max_depth_bytes": None, "max_depth_pkts": None})
    return {"port": port, "queues": queues}


def meter_drop_share(run: dict) -> float:
    """The share of a run's credits that the P4 credit meter dropped (stock BMv2)."""
    cq = run["queues"]["credit"]
    dropped = cq["dropped_pkts"].get("credit_meter", 0)
    total = cq["dequeued_pkts"] + dropped
    return dropped / total if total else 0.0


def run_one(e: Experiment, label: str, transport: str, batch: int, out: Path) -> dict:
    d = dumbbell_run(e.link_mbps, e.rtt_us, e.senders, out / f"{e.name}-{e.switch}" / label)
    sc, fab, run_dir, receiver, rip, sw_port = (d.scaled, d.fab, d.run_dir, d.receiver, d.receiver_ip,
                                                d.receiver_port)
    extra = ["--t-wait-us", f"{e.t_wait_us:g}", "--flashpass-no-unscheduled"] if transport == "flashpass" else []
    series: List[tuple] = []
    from flexpass_cp.tm_client import TmClient

    with start_network(fab, sc, e.switch, run_dir, e.profile, config_extra=switch_config(e)) as net:
        has_tm = net.switch("s1").switch_kind == "flexpass_switch"
        ports = [sw_port] + [fab.host_port(f"h{i}")[1] for i in range(1, e.senders + 1)]
        # The receiver paces the credits, so its agent takes the batch.
        net.popen(receiver, _agent("serve", "--listen", f"{rip}:{AGENT_PORT}", "--count", str(e.senders),
                                   "--credit-batch", str(batch), *sc.agent_args()),
                  run_dir / f"{receiver}-serve.jsonl", run_dir / f"{receiver}-serve.err")
        time.sleep(0.5)
        procs = []
        t0 = time.monotonic()
        for i in range(1, e.senders + 1):
            procs.append(net.popen(f"h{i}", _agent(
                "send", "--to", f"{rip}:{AGENT_PORT}", "--transport", transport, "--size", str(e.flow_bytes),
                "--timeout-s", f"{e.flow_timeout_s:g}", *sc.agent_args(), *extra),
                run_dir / f"h{i}-send.jsonl", run_dir / f"h{i}-send.err"))
            time.sleep(e.start_gap_ms / 1e3)
        deadline = t0 + e.flow_timeout_s + 5
        last_print = 0.0
        with TmClient("127.0.0.1", fab.switches["s1"].tm_port) if has_tm else contextlib.nullcontext() as tm:
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                now = time.monotonic() - t0
                if tm:
                    q = {x["queue"]: x for x in tm.get_stats(sw_port).get("queues", [])}
                    series.append((now, int(q.get(DATA_QUEUE, {}).get("depth_bytes", 0)),
                                   int(q.get(CREDIT_QUEUE, {}).get("depth_bytes", 0))))
                if now - last_print >= 2.0:
                    last_print = now
                    done = sum(p.poll() is not None for p in procs)
                    print(f"  {label}: {now:5.1f} s, {done}/{len(procs)} senders done", flush=True)
                time.sleep(e.sample_ms / 1e3)
            if tm:
                stats = [tm.get_stats(p) for p in ports]
            else:
                counters = p4_counters(fab, "s1", PORT_QUEUE_COUNTERS)
                stats = [p4_port_stats(counters, p) for p in ports]
        timed_out = [f"h{i}" for i, p in enumerate(procs, start=1) if p.poll() is None]
        time.sleep(0.5)
    sent = []
    for i in range(1, e.senders + 1):
        sent += [dict(r, sender=f"h{i}") for r in _read_json_lines(run_dir / f"h{i}-send.jsonl")
                 if r.get("event", "").startswith("flow_")]
    received = [r for r in _read_json_lines(run_dir / f"{receiver}-serve.jsonl") if r.get("event") == "flow_received"]
    got = {r["sha256"] for r in received if r.get("bytes") == e.flow_bytes}
    exact = sum(1 for s in sent if not s.get("error") and s["sha256"] in got)
    # Samples while every sender is active (the busy period): the queue FlashPass keeps.
    busy = [d for t, d, _ in series if t >= e.start_gap_ms * (e.senders - 1) / 1e3]
    queues = queue_summary(stats, busy)
    data_drops = sum(queues["data"]["dropped_pkts"].values())
    fcts = [s["fct_us"] for s in sent if not s.get("error")]
    span_s = (max(fcts) / 1e6 + e.start_gap_ms * (e.senders - 1) / 1e3) if fcts else 0.0
    emulation = [s["emulation"] for s in sent if s.get("emulation")]
    em_total = {k: sum(x[k] for x in emulation) for k in (emulation[0] if emulation else {})}
    return {"transport": transport, "credit_batch": batch, "flows": sent, "byte_exact": exact, "senders_timed_out": timed_out,
            "goodput_mbps": (exact * e.flow_bytes * 8 / span_s / 1e6) if span_s else 0.0,
            "retransmissions": sum(int(s.get("retransmissions") or 0) for s in sent),
            "timeouts": sum(int(s.get("timeouts") or 0) for s in sent),
            "data_packets_dropped": data_drops, "emulation": em_total, "queues": queues,
            "series": series, "tm_stats": stats}


def run(e: Experiment, out: Path) -> dict:
    res = {**result_header(e), "switch_config": switch_config(e), "runs": {}}
    for label, t, b in runs(e):
        print(f"{e.name}: {label} ({e.senders} senders x {e.flow_bytes} B, {e.link_mbps:g} Mbit/s, "
              f"RTT {e.rtt_us:g} µs, {e.profile} switch)", flush=True)
        res["runs"][label] = run_one(e, label, t, b, out)
    d = out / f"{e.name}-{e.switch}"
    write_tables(res, d)
    plot(res, d / "queue.png")
    for r in res["runs"].values():
        del r["series"]
    (d / "result.json").write_text(json.dumps(res, indent=2))
    return res


def write_tables(res: dict, d: Path) -> None:
    """runs.csv (a row per run: goodput, loss, the switch's data and credit queues),
    flows.csv (a row per flow) and queue.csv (the data queue's depth over time; empty on a
    switch without depths)."""
    def nz(v):
        return "" if v is None else v
    write_csv(d / "runs.csv", "run,credit_batch,byte_exact,goodput_mbps,retransmissions,timeouts,data_dequeued,"
                              "data_ce_marked,data_dropped,data_max_depth_bytes,credits_dequeued,credits_dropped,"
                              "credit_max_depth_pkts",
              ((t, r["credit_batch"], r["byte_exact"], f"{r['goodput_mbps']:.3f}", r["retransmissions"], r["timeouts"],
                r["queues"]["data"]["dequeued_pkts"], r["queues"]["data"]["ecn_marked_pkts"],
                r["data_packets_dropped"], nz(r["queues"]["data"]["max_depth_bytes"]),
                r["queues"]["credit"]["dequeued_pkts"], sum(r["queues"]["credit"]["dropped_pkts"].values()),
                nz(r["queues"]["credit"]["max_depth_pkts"])) for t, r in res["runs"].items()))
    write_csv(d / "flows.csv", "run,sender,bytes,fct_us,retransmissions,timeouts,error",
              ((t, x["sender"], x["bytes"], f"{x['fct_us']:.0f}", x.get("retransmissions", 0), x.get("timeouts", 0),
                x.get("error") or "") for t, r in res["runs"].items() for x in r["flows"]))
    write_csv(d / "queue.csv", "run,t_s,data_depth_bytes,bottleneck_credit_depth_bytes",
              ((t, f"{s:.3f}", dd, cd) for t, r in res["runs"].items() for s, dd, cd in r["series"]))


def plot(res: dict, path: Path) -> None:
    """The data queue over time; a switch without depths (stock BMv2): per run, goodput and
    the shares of credits the meter dropped and of data packets CE-marked (queue above K)."""
    from .plots import plt, save

    title = (f"{' vs '.join(res['runs'])} on {res['switch']} ({res['settings']['profile']} profile, Mininet): "
             f"{res['experiment']}")
    if not any(r["series"] for r in res["runs"].values()):
        labels = list(res["runs"])
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(7, 3.4))
        a1.bar(labels, [r["goodput_mbps"] for r in res["runs"].values()], color="tab:blue")
        a1.set_ylabel("goodput (Mbit/s)")
        credit = [100.0 * meter_drop_share(r) for r in res["runs"].values()]
        ce = [100.0 * r["queues"]["data"]["ecn_marked_pkts"] / max(1, r["queues"]["data"]["dequeued_pkts"])
              for r in res["runs"].values()]
        xs = range(len(labels))
        a2.bar([x - 0.2 for x in xs], credit, width=0.4, label="credits dropped by the meter")
        a2.bar([x + 0.2 for x in xs], ce, width=0.4, label="data CE-marked (queue > K)")
        a2.set_xticks(list(xs), labels)
        a2.set_ylabel("%")
        a2.legend(fontsize=7)
        fig.suptitle(title, fontsize=9)
        save(fig, path)
        return
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for t, r in res["runs"].items():
        xs = [s for s, _, _ in r["series"]]
        ax.plot(xs, [d / 1e3 for _, d, _ in r["series"]], label=f"{t}: data queue", lw=1)
    if res["settings"]["buffer_bytes"] is not None:
        ax.axhline(res["settings"]["buffer_bytes"] / 1e3, color="grey", ls="--", lw=0.8, label="buffer")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("bottleneck data queue (kB)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    save(fig, path)


def summary(res: dict) -> str:
    def kb(v):
        return "n/a" if v is None else f"{v / 1e3:.2f} kB"

    lines = [f"== {res['experiment']} ({res['switch']}) =="]
    for t, r in res["runs"].items():
        dq, cq = r["queues"]["data"], r["queues"]["credit"]
        lines.append(f"  {t:14} {r['byte_exact']}/{len(r['flows'])} flows byte-exact, goodput {r['goodput_mbps']:.2f} "
                     f"Mbit/s; data queue mean {kb(dq['mean_depth_bytes'])}, p99 {kb(dq['p99_depth_bytes'])}, max "
                     f"{kb(dq['max_depth_bytes'])}, CE-marked {dq['ecn_marked_pkts']} of {dq['dequeued_pkts']}; data "
                     f"drops {dq['dropped_pkts'] or 0}, retransmissions {r['retransmissions']}, timeouts {r['timeouts']}")
        if r["transport"] == "flashpass":
            em = r["emulation"]
            lines.append(f"            emulation: sent {em.get('emulation_sent', 0)}, lost {em.get('emulation_lost', 0)}, "
                         f"over-provisioned {em.get('over_provisioned_sent', 0)}, grants {em.get('grants_received', 0)} "
                         f"(late {em.get('late_grants', 0)}); switch emulation queue: max {cq['max_depth_pkts']} pkts, "
                         f"drops {cq['dropped_pkts'] or 0}, ECN {cq['ecn_marked_pkts']}")
        elif r["transport"] != "dctcp":
            lines.append(f"{'':16} credit queue: max {cq['max_depth_pkts'] if cq['max_depth_pkts'] is not None else 'n/a'} "
                         f"pkts, dequeued {cq['dequeued_pkts']}, drops {cq['dropped_pkts'] or 0}")
    return "\n".join(lines)
