"""PPT (SIGCOMM'24) with real packets: ``python3 -m flexpass_mininet ppt [experiments/ppt.toml]``.

N senders run ``flexpass workload`` (Poisson arrivals, flow sizes from a paper's CDF)
towards one receiver through one ``flexpass_switch`` configured with the PPT profile
(``flexpass-ctl``: DSCP 32 + p -> queue 7 - p, eight strict priorities sharing the
port's buffer, ECN K per queue; docs/protocol.md §10).  The same flows (same seeds)
run once per transport: ``dctcp`` (its packets are legacy DSCP 0, queued with P3
under K_HCP, i.e. DCTCP on the same switch) and ``ppt`` (HCP P0-P3, LCP P4-P7).

Measured: every flow's FCT as the sending agent reports it (open to last ACK), the
overall / small (<= small_bytes) / large averages and the small-flow p99 (PPT §6.2's
metrics); the bottleneck port's TM counters per queue (bytes dequeued per priority:
the LCP's share; maximum depth; drops per reason; ECN reports).  Writes result.json,
fct.csv, queues.csv and fct.png into <out>/<name>-<switch>/.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from .expfile import (ExperimentError, Run, check_transports, loader, no_leftovers, result_header, take_run,
                      write_csv)
from .experiments import AGENT_PORT, _agent, _read_json_lines, dumbbell_run
from .network import start_network

TRANSPORTS = ("dctcp", "ppt")
CDFS = ("search", "mining", "cachefollower", "webserver", "facebook", "google")


@dataclass
class Experiment(Run):
    senders: int = 4
    cdf: str = "search"
    load: float = 0.5  # of the receiver's link, all senders together
    flows_per_sender: int = 20
    seed: int = 1
    small_bytes: int = 100_000
    transports: List[str] = field(default_factory=lambda: list(TRANSPORTS))
    buffer_bytes: int = 30_000
    ecn_threshold_hcp_bytes: int = 6_056
    ecn_threshold_lcp_bytes: int = 4_542
    flow_timeout_s: float = 600.0


def parse_experiment(raw: dict, name: str) -> Experiment:
    e = Experiment(name=name)
    take_run(raw, e, (("senders", int), ("cdf", str), ("load", float), ("flows_per_sender", int), ("seed", int),
                      ("small_bytes", int), ("transports", list), ("buffer_bytes", int),
                      ("ecn_threshold_hcp_bytes", int), ("ecn_threshold_lcp_bytes", int),
                      ("flow_timeout_s", float)))
    no_leftovers(raw, name)
    if e.senders < 1 or e.flows_per_sender < 1:
        raise ExperimentError(f"{name}: senders and flows_per_sender must be >= 1")
    if not 0 < e.load <= 1:
        raise ExperimentError(f"{name}: load must be in (0, 1], got {e.load}")
    if e.cdf not in CDFS and not Path(e.cdf).is_file():
        raise ExperimentError(f"{name}: cdf must be one of {', '.join(CDFS)} or a file, got {e.cdf!r}")
    check_transports(e.transports, TRANSPORTS, name)
    if not 0 < e.ecn_threshold_lcp_bytes <= e.ecn_threshold_hcp_bytes <= e.buffer_bytes:
        raise ExperimentError(f"{name}: need 0 < ecn_threshold_lcp_bytes <= ecn_threshold_hcp_bytes <= buffer_bytes")
    return e


load_experiment = loader(parse_experiment)


def switch_config(e: Experiment) -> dict:
    """The flexpass-ctl keys of the PPT switch: its K per half and the port buffer."""
    return {"ppt": {"base_rtt_us": e.rtt_us, "ecn_threshold_hcp": e.ecn_threshold_hcp_bytes,
                    "ecn_threshold_lcp": e.ecn_threshold_lcp_bytes},
            "port_defaults": {"buffer": e.buffer_bytes}}


# -- metrics ------------------------------------------------------------------------------

def _p99(xs: List[float]) -> Optional[float]:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.99 * len(s)) - 1)]


def fct_summary(flows: List[dict], small_bytes: int) -> dict:
    """PPT §6.2's metrics over the completed flows (µs)."""
    ok = [f for f in flows if not f.get("error")]
    small = [f["fct_us"] for f in ok if f["size"] <= small_bytes]
    large = [f["fct_us"] for f in ok if f["size"] > small_bytes]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    return {"flows": len(flows), "completed": len(ok), "failed": len(flows) - len(ok),
            "overall_avg_us": mean([f["fct_us"] for f in ok]), "small_avg_us": mean(small),
            "small_p99_us": _p99(small), "small_p50_us": statistics.median(small) if small else None,
            "large_avg_us": mean(large), "small_flows": len(small), "large_flows": len(large),
            "timeouts": sum(int(f.get("timeouts") or 0) for f in ok),
            "retransmissions": sum(int(f.get("retransmissions") or 0) for f in ok)}


def queue_summary(stats: dict) -> Dict[str, dict]:
    """Per PPT priority (queue 7 - p) of the bottleneck port: bytes dequeued, their share,
    max depth, ECN reports and drops per reason (TM counters since the switch started)."""
    queues = {q["queue"]: q for q in stats.get("queues", [])}
    total = sum(int(q.get("dequeued_bytes", 0)) for q in queues.values()) or 1
    out = {}
    for p in range(8):
        q = queues.get(7 - p, {})
        out[f"P{p}"] = {"queue": 7 - p, "dequeued_bytes": int(q.get("dequeued_bytes", 0)),
                        "share": int(q.get("dequeued_bytes", 0)) / total,
                        "max_depth_bytes": int(q.get("max_depth_bytes", 0)),
                        "ecn_marked_pkts": int(q.get("ecn_marked_pkts", 0)),
                        "dropped_pkts": q.get("dropped_pkts", {})}
    return out


# -- the run ------------------------------------------------------------------------------

def run_transport(e: Experiment, transport: str, out: Path) -> dict:
    d = dumbbell_run(e.link_mbps, e.rtt_us, e.senders, out / f"{e.name}-{e.switch}" / transport)
    sc, fab, run_dir, receiver, rip, sw_port = (d.scaled, d.fab, d.run_dir, d.receiver, d.receiver_ip,
                                                d.receiver_port)
    stats = None
    with start_network(fab, sc, e.switch, run_dir, "ppt", config_extra=switch_config(e)) as net:
        net.popen(receiver, _agent("serve", "--listen", f"{rip}:{AGENT_PORT}", *sc.agent_args()),
                  run_dir / f"{receiver}-serve.jsonl", run_dir / f"{receiver}-serve.err")
        time.sleep(0.5)
        procs = []
        for i in range(1, e.senders + 1):
            procs.append(net.popen(f"h{i}", _agent(
                "workload", "--to", f"{rip}:{AGENT_PORT}", "--transport", transport, "--cdf", e.cdf,
                "--load", f"{e.load / e.senders:.6g}", "--count", str(e.flows_per_sender),
                "--seed", str(e.seed + i), "--sample-ms", "0", *sc.agent_args()),
                run_dir / f"h{i}-workload.jsonl", run_dir / f"h{i}-workload.err"))
        deadline = time.monotonic() + e.flow_timeout_s
        t0 = time.monotonic()
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(1.0)
            done = sum(p.poll() is not None for p in procs)
            print(f"  {transport}: {time.monotonic() - t0:5.0f} s, {done}/{len(procs)} senders done", flush=True)
        timed_out = [f"h{i}" for i, p in enumerate(procs, start=1) if p.poll() is None]
        if net.switch("s1").switch_kind == "flexpass_switch":
            from flexpass_cp.tm_client import TmClient

            with TmClient("127.0.0.1", fab.switches["s1"].tm_port) as tm:
                stats = tm.get_stats(sw_port)
    flows = []
    for i in range(1, e.senders + 1):
        flows += [dict(r, sender=f"h{i}") for r in _read_json_lines(run_dir / f"h{i}-workload.jsonl")
                  if r.get("event") == "flow"]
    return {"transport": transport, "flows": flows, "fct": fct_summary(flows, e.small_bytes),
            "senders_timed_out": timed_out, "queues": queue_summary(stats) if stats else None,
            "tm_stats": stats}


def run(e: Experiment, out: Path) -> dict:
    res = {**result_header(e), "switch_config": switch_config(e), "runs": {}}
    for t in e.transports:
        print(f"{e.name}: {t} ({e.senders} x {e.flows_per_sender} flows, {e.cdf}, load {e.load})", flush=True)
        res["runs"][t] = run_transport(e, t, out)
    d = out / f"{e.name}-{e.switch}"
    (d / "result.json").write_text(json.dumps(res, indent=2))
    write_tables(res, d)
    plot(res, d / "fct.png")
    return res


def write_tables(res: dict, d: Path) -> None:
    """fct.csv (a row per flow) and queues.csv (a row per run and priority)."""
    write_csv(d / "fct.csv", "transport,sender,size,start_us,fct_us,timeouts,retransmissions,error",
              ((t, x["sender"], x["size"], f"{x.get('start_us', 0):.0f}", f"{x['fct_us']:.0f}", x.get("timeouts", 0),
                x.get("retransmissions", 0), x.get("error") or "") for t, r in res["runs"].items() for x in r["flows"]))
    write_csv(d / "queues.csv",
              "transport,priority,queue,dequeued_bytes,share,max_depth_bytes,ecn_marked_pkts,dropped_pkts",
              ((t, p, q["queue"], q["dequeued_bytes"], f"{q['share']:.4f}", q["max_depth_bytes"], q["ecn_marked_pkts"],
                sum(q["dropped_pkts"].values())) for t, r in res["runs"].items() for p, q in (r["queues"] or {}).items()))


def plot(res: dict, path: Path) -> None:
    from .plots import plt, save

    metrics = [("overall_avg_us", "overall avg"), ("small_avg_us", "small avg"),
               ("small_p99_us", "small p99"), ("large_avg_us", "large avg")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    runs = list(res["runs"].items())
    w = 0.8 / max(1, len(runs))
    for i, (t, r) in enumerate(runs):
        vals = [(r["fct"][m] or 0) / 1e3 for m, _ in metrics]
        ax.bar([j + i * w for j in range(len(metrics))], vals, w, label=t)
    ax.set_xticks([j + w * (len(runs) - 1) / 2 for j in range(len(metrics))], [n for _, n in metrics])
    ax.set_ylabel("FCT (ms)")
    ax.set_yscale("log")
    ax.set_title(f"PPT vs DCTCP on {res['switch']} (Mininet): {res['experiment']}", fontsize=10)
    ax.legend(fontsize=8)
    save(fig, path)


def summary(res: dict) -> str:
    lines = [f"== {res['experiment']} ({res['switch']}) =="]
    base = res["runs"].get("dctcp", {}).get("fct")
    for t, r in res["runs"].items():
        f = r["fct"]

        def ms(k):
            v = f[k]
            if v is None:
                return "     -"
            rel = "" if t == "dctcp" or not base or not base[k] else f" ({100 * (v / base[k] - 1):+.0f} %)"
            return f"{v / 1e3:7.2f}{rel}"
        lines.append(f"  {t:6} {f['completed']}/{f['flows']} flows: overall avg {ms('overall_avg_us')} ms, small avg "
                     f"{ms('small_avg_us')}, small p99 {ms('small_p99_us')}, large avg {ms('large_avg_us')}; "
                     f"timeouts {f['timeouts']}")
        if r["queues"]:
            lcp = sum(r["queues"][f"P{p}"]["share"] for p in range(4, 8))
            drops = {p: sum(q["dropped_pkts"].values()) for p, q in r["queues"].items()}
            lines.append(f"         bottleneck: LCP (P4-P7) {100 * lcp:.1f} % of bytes; drops per priority {drops}")
    return "\n".join(lines)
