"""Experiment runners: FlexPass Fig. 7, 8 and 9 and leaf-spine path symmetry.

Each runner builds its topology (:mod:`fabric`), starts BMv2 switches and host
agents (``flexpass serve`` / ``send`` / ``incast``) in Mininet, measures, and
writes into its run directory: ``result.json`` (everything measured),
CSV time series, PNG plots, and the switch logs and configs.  The runners
work with both switches (``flexpass_switch`` with the traffic manager, stock
``simple_switch``), so the same command shows why the TM matters.

Measured where: throughput per flow and per sub-flow is counted by the
receiving agent (``serve --sample-ms``: payload bytes per interval);
queue depths come from the flexpass_switch TM telemetry (``get_stats``
watermarks, cleared every interval); path symmetry from the P4 program's
``forwarded`` counters (P4Runtime), per port and queue.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from . import env
from .fabric import Fabric, dumbbell, incast, leaf_spine
from .network import Network, start_network
from .scaling import Scaled

AGENT_PORT = env.AGENT_PORT
SAMPLE_MS = 100
#: FlexPass Fig. 9c: a transport starves while it gets less than 20 % of the link.
STARVATION_SHARE = 0.2


@dataclass
class Options:
    switch: str = "flexpass_switch"
    link_rate_bps: float = 20e6
    base_rtt_s: float = 1e-3
    duration_s: float = 12.0
    warmup_s: float = 2.0
    out: Path = env.REPO / "results" / "mininet"
    pcap: bool = False

    def scaled(self) -> Scaled:
        return Scaled(self.link_rate_bps, self.base_rtt_s)

    def run_dir(self, name: str) -> Path:
        d = self.out / f"{name}-{self.switch}"
        d.mkdir(parents=True, exist_ok=True)
        return d


# -- host agents ----------------------------------------------------------------

# The agent's command line and its JSON-lines output (env.py: shared with emulate.py).
_agent = env.agent_command
_read_json_lines = env.read_json_lines


@dataclass
class DumbbellRun:
    """One run of N senders into one receiver (the last host) through s1: the scaled
    network, the fabric, the run's directory, and the receiver's name, address and port."""
    scaled: Scaled
    fab: Fabric
    run_dir: Path
    receiver: str
    receiver_ip: str
    receiver_port: int


def dumbbell_run(link_mbps: float, rtt_us: float, senders: int, run_dir: Path) -> DumbbellRun:
    fab = dumbbell(senders)
    run_dir.mkdir(parents=True, exist_ok=True)
    receiver = f"h{senders + 1}"
    return DumbbellRun(Scaled(link_mbps * 1e6, rtt_us / 1e6), fab, run_dir, receiver, fab.hosts[receiver].ip,
                       fab.host_port(receiver)[1])


def p4_counters(fab: Fabric, switch: str, names=("forwarded",)) -> Dict[str, Dict[int, Tuple[int, int]]]:
    """The P4 program's indirect counters `names` of `switch`, read over P4Runtime: per name,
    index (p4_program.port_queue_index(port, queue)) -> (packets, bytes)."""
    from flexpass_cp.p4runtime_client import P4RuntimeClient

    node = fab.switches[switch]
    with P4RuntimeClient(f"127.0.0.1:{node.grpc_port}", node.index - 1, (0, 100 + node.index), timeout=10) as c:
        c.load_p4info(env.P4_BUILD / "flexpass.p4info.txtpb")
        return {n: c.read_counter(n) for n in names}


class TmSampler:
    """Polls the flexpass_switch TM of one port: max depth per queue per interval."""

    def __init__(self, net: Network, switch: str, port: int):
        self.enabled = net.switch(switch).switch_kind == "flexpass_switch"
        self.port = port
        self.rows: List[dict] = []
        self.client = None
        if self.enabled:
            from flexpass_cp.tm_client import TmClient

            self.client = TmClient("127.0.0.1", net.fabric.switches[switch].tm_port)
            self.client.clear_watermarks(port)
        self.t0 = time.monotonic()

    def sample(self) -> None:
        if not self.enabled:
            return
        st = self.client.get_stats(self.port)
        self.client.clear_watermarks(self.port)
        self.rows.append({"t_s": time.monotonic() - self.t0, "stats": st})

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _sample_loop(seconds: float, samplers: List[TmSampler], every_s: float = SAMPLE_MS / 1e3) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(every_s)
        for s in samplers:
            s.sample()


def _queue(row: dict, queue: int) -> dict:
    return next((q for q in row["stats"].get("queues", []) if q.get("queue") == queue), {})


def _queue_report(rows: List[dict], queue: int, warmup_s: float) -> dict:
    """After warm-up: max depth, the median and 90th percentile of the per-interval maxima,
    the most red bytes seen queued at a sample instant, and drops per reason; max depth in
    warm-up."""
    warm = [r for r in rows if r["t_s"] < warmup_s]
    steady = [r for r in rows if r["t_s"] >= warmup_s]
    peak = lambda rs: max((int(_queue(r, queue).get("max_depth_bytes", 0)) for r in rs), default=0)  # noqa: E731
    maxima = sorted(int(_queue(r, queue).get("max_depth_bytes", 0)) for r in steady)
    red_now = [int(_queue(r, queue).get("depth_bytes_by_color", {}).get("red", 0)) for r in steady]
    drops = {}
    if steady:
        first = _queue(warm[-1] if warm else steady[0], queue).get("dropped_pkts", {})
        last = _queue(steady[-1], queue).get("dropped_pkts", {})
        drops = {k: last.get(k, 0) - first.get(k, 0) for k in last}
    return {"max_depth_bytes": peak(steady),
            "p50_interval_max_depth_bytes": maxima[(len(maxima) - 1) // 2] if maxima else 0,
            "p90_interval_max_depth_bytes": maxima[int(0.9 * (len(maxima) - 1))] if maxima else 0,
            "max_red_bytes_sampled": max(red_now, default=0),
            "max_depth_bytes_warmup": peak(warm), "drops_after_warmup": drops}


# -- throughput from serve samples --------------------------------------------------

def _series(samples: List[dict], warmup_s: float) -> Dict[str, List[dict]]:
    """Per flow (peer:flow_id): [{t_s, proactive_bps, reactive_bps}] after warm-up."""
    out: Dict[str, List[dict]] = {}
    prev_t = None
    for s in samples:
        t = s["t_ms"] / 1e3
        dt = (t - prev_t) if prev_t is not None else SAMPLE_MS / 1e3
        prev_t = t
        for f in s["flows"]:
            key = f"{f['transport']} from {f['peer'].rsplit(':', 1)[0]}"  # one flow per sender host
            out.setdefault(key, []).append({
                "t_s": t, "proactive_bps": f["proactive_bytes"] * 8 / dt,
                "reactive_bps": f["reactive_bytes"] * 8 / dt})
    first = min((r[0]["t_s"] for r in out.values() if r), default=0.0)
    return {k: [x for x in v if x["t_s"] >= first + warmup_s] for k, v in out.items()}


def _share_summary(series: Dict[str, List[dict]], link_bps: float) -> Dict[str, dict]:
    # Intervals in which every flow is active: the ones shares are computed over.
    times = set.intersection(*(set(round(x["t_s"], 3) for x in v) for v in series.values())) if series else set()
    res = {}
    for k, v in series.items():
        rows = [x for x in v if round(x["t_s"], 3) in times]
        tot = [x["proactive_bps"] + x["reactive_bps"] for x in rows]
        res[k] = {
            "share_of_link": statistics.fmean(tot) / link_bps if tot else 0.0,
            "proactive_share": statistics.fmean(x["proactive_bps"] for x in rows) / link_bps if rows else 0.0,
            "reactive_share": statistics.fmean(x["reactive_bps"] for x in rows) / link_bps if rows else 0.0,
            "starvation_fraction": (sum(1 for t in tot if t < STARVATION_SHARE * link_bps) / len(tot)) if tot else 1.0,
            "intervals": len(rows),
        }
    return res


def _write_series_csv(path: Path, series: Dict[str, List[dict]]) -> None:
    with open(path, "w") as f:
        f.write("flow,t_s,proactive_bps,reactive_bps\n")
        for k, v in series.items():
            for x in v:
                f.write(f"{k},{x['t_s']:.3f},{x['proactive_bps']:.0f},{x['reactive_bps']:.0f}\n")


# -- long-flow experiments (Fig. 7 and 9) ---------------------------------------------

def long_flows(opts: Options, name: str, transports: List[str], profile: str, title: str) -> dict:
    """len(transports) senders h1..hN each send one long flow to h{N+1} at once."""
    sc = opts.scaled()
    fab = dumbbell(len(transports))
    run_dir = opts.run_dir(name)
    receiver = f"h{len(transports) + 1}"
    rip = fab.hosts[receiver].ip
    size = int(sc.link_rate_bps / 8 * (opts.duration_s + 30))  # outlasts the measurement
    with start_network(fab, sc, opts.switch, run_dir, profile, opts.pcap) as net:
        net.popen(receiver, _agent("serve", "--listen", f"{rip}:{AGENT_PORT}", "--sample-ms", str(SAMPLE_MS),
                                   *sc.agent_args()), run_dir / f"{receiver}-serve.jsonl",
                  run_dir / f"{receiver}-serve.err")
        time.sleep(0.5)
        senders = []
        for i, t in enumerate(transports, start=1):
            senders.append(net.popen(f"h{i}", _agent("send", "--to", f"{rip}:{AGENT_PORT}", "--transport", t,
                                                    "--size", str(size), *sc.agent_args()),
                                     run_dir / f"h{i}-send.jsonl", run_dir / f"h{i}-send.err"))
        sw_port = fab.host_port(receiver)[1]
        tm = TmSampler(net, "s1", sw_port)
        try:
            _sample_loop(opts.warmup_s + opts.duration_s, [tm])
        finally:
            tm.close()
        crashed = [f"h{i}" for i, p in enumerate(senders, start=1) if p.poll() not in (None, 0)]
    samples = [s for s in _read_json_lines(run_dir / f"{receiver}-serve.jsonl") if s.get("event") == "sample"]
    series = _series(samples, opts.warmup_s)
    shares = _share_summary(series, sc.link_rate_bps)
    from flexpass_cp.config.profiles import DEFAULT_BMV2_PRIORITY as QID

    result = {
        "experiment": name, "title": title, "switch": opts.switch, "profile": profile,
        "transports": transports, "scale": sc.describe(), "link_rate_bps": sc.link_rate_bps,
        "thresholds": sc.port_defaults(), "flows": shares, "crashed_senders": crashed,
        "total_share": sum(v["share_of_link"] for v in shares.values()),
        # Bottleneck port (to the receiver), from the flexpass_switch TM; None on simple_switch.
        "queues": {name: _queue_report(tm.rows, QID[name], opts.warmup_s) for name in ("credit", "flexpass", "legacy")}
        if tm.enabled else None,
    }
    _write_series_csv(run_dir / "throughput.csv", series)
    (run_dir / "tm-samples.json").write_text(json.dumps(tm.rows))
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    from .plots import plot_throughput

    plot_throughput(series, sc.link_rate_bps, f"{title} ({opts.switch})", run_dir / "throughput.png")
    return result


FIG7 = {
    "fig7a": (["flexpass"], "flexpass", "Fig. 7a: one FlexPass flow"),
    "fig7b": (["flexpass", "flexpass"], "flexpass", "Fig. 7b: two FlexPass flows"),
    "fig7c": (["flexpass", "dctcp"], "flexpass", "Fig. 7c: FlexPass vs DCTCP"),
}
FIG9 = {
    "fig9a": (["expresspass", "dctcp"], "naive", "Fig. 9a: ExpressPass vs DCTCP"),
    "fig9b": (["flexpass", "dctcp"], "flexpass", "Fig. 9b: FlexPass vs DCTCP"),
}


def fig7(opts: Options) -> dict:
    return {k: long_flows(opts, k, *v) for k, v in FIG7.items()}


def fig9(opts: Options) -> dict:
    res = {k: long_flows(opts, k, *v) for k, v in FIG9.items()}
    from .plots import plot_starvation

    plot_starvation(res, opts.run_dir("fig9") / "starvation.png")
    (opts.run_dir("fig9") / "result.json").write_text(json.dumps(res, indent=2))
    return res


# -- Fig. 8: incast --------------------------------------------------------------------

INCAST_TRANSPORTS = {"tcp": "flexpass", "dctcp": "flexpass", "expresspass": "naive",
                     "flexpass": "flexpass"}


def fig8(opts: Options, flow_counts=(8, 16, 32, 48, 64), size: int = 64_000, senders: int = 8,
         transports=("dctcp", "tcp", "expresspass", "flexpass"), repeats: int = 2) -> dict:
    """8-to-1 incast: h9 requests `size` bytes from h1..h8, n synchronized flows."""
    sc = opts.scaled()
    out = {"experiment": "fig8", "switch": opts.switch, "scale": sc.describe(), "size": size, "results": {}}
    for t in transports:
        fab = incast(senders)
        run_dir = opts.run_dir(f"fig8-{t}")
        client = f"h{senders + 1}"
        rows = []
        with start_network(fab, sc, opts.switch, run_dir, INCAST_TRANSPORTS[t], opts.pcap) as net:
            servers = []
            for i in range(1, senders + 1):
                ip = fab.hosts[f"h{i}"].ip
                if t == "tcp":  # FlexPass §6.1: RTO_min of kernel TCP = 4 ms
                    net.host(f"h{i}").cmd(f"ip route replace 10.0.0.0/8 dev h{i}-eth0 rto_min 4ms")
                args = ["serve", "--listen", f"{ip}:{AGENT_PORT}", "--respond", *sc.agent_args()]
                if t == "tcp":
                    args += ["--tcp", f"{ip}:{AGENT_PORT}"]
                net.popen(f"h{i}", _agent(*args), run_dir / f"h{i}-serve.jsonl", run_dir / f"h{i}-serve.err")
                servers.append(f"{ip}:{AGENT_PORT}")
            time.sleep(0.5)
            for n in flow_counts:
                for rep in range(repeats):
                    before = _tcp_timeouts(net, senders) if t == "tcp" else None
                    log = run_dir / f"incast-{n}-{rep}.jsonl"
                    p = net.popen(client, _agent("incast", "--servers", ",".join(servers), "--flows", str(n),
                                                 "--size", str(size), "--transport", t, "--timeout-s", "60",
                                                 *sc.agent_args()), log, run_dir / f"incast-{n}-{rep}.err")
                    p.wait()
                    summary = [r for r in _read_json_lines(log) if r.get("event") == "summary"]
                    time.sleep(0.5)
                    rows.append({"flows": n, "repeat": rep, "ok": p.returncode == 0 and bool(summary),
                                 "max_fct_us": summary[0]["max_fct_us"] if summary else None,
                                 "tcp_timeouts": (_tcp_timeouts(net, senders) - before) if before is not None else None})
        # Agent transports count recovery-timer expiries per response flow.
        agent_timeouts = 0
        for i in range(1, senders + 1):
            agent_timeouts += sum(int(r.get("timeouts") or 0)
                                  for r in _read_json_lines(run_dir / f"h{i}-serve.jsonl"))
        out["results"][t] = {"runs": rows, "agent_timeouts_total": agent_timeouts if t != "tcp" else None}
    summary_rows = []
    for t, r in out["results"].items():
        for n in flow_counts:
            runs = [x for x in r["runs"] if x["flows"] == n]
            fcts = [x["max_fct_us"] for x in runs if x["max_fct_us"] is not None]
            summary_rows.append({"transport": t, "flows": n, "avg_max_fct_us": statistics.fmean(fcts) if fcts else None,
                                 "failed_runs": sum(1 for x in runs if not x["ok"]),
                                 "tcp_timeouts": sum(x["tcp_timeouts"] or 0 for x in runs) if t == "tcp" else None})
    out["summary"] = summary_rows
    d = opts.run_dir("fig8")
    (d / "result.json").write_text(json.dumps(out, indent=2))
    with open(d / "max_fct.csv", "w") as f:
        f.write("transport,flows,avg_max_fct_us,failed_runs,tcp_timeouts\n")
        for r in summary_rows:
            f.write(f"{r['transport']},{r['flows']},{r['avg_max_fct_us']},{r['failed_runs']},{r['tcp_timeouts']}\n")
    from .plots import plot_incast

    plot_incast(summary_rows, f"Fig. 8: {senders}-to-1 incast, {size // 1000} kB responses ({opts.switch})",
                d / "max_fct.png", size, sc.link_rate_bps)
    return out


def _tcp_timeouts(net: Network, senders: int) -> int:
    total = 0
    for i in range(1, senders + 1):
        out = net.host(f"h{i}").cmd("nstat -az TcpExtTCPTimeouts 2>/dev/null")
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == "TcpExtTCPTimeouts":
                total += int(parts[1])
    return total


# -- leaf-spine: credits and data on the same links ---------------------------------------

def leafspine(opts: Options, pairs: int = 8, flow_bytes: int = 300_000) -> dict:
    """Flows between leaves one at a time; per-spine P4 counters show which spine carried
    each flow's data (FlexPass queue) and which its credits (credit queue)."""
    from flexpass_cp.config.profiles import DEFAULT_BMV2_PRIORITY as QID
    from flexpass_cp.p4_program import port_queue_index

    sc = opts.scaled()
    fab = leaf_spine()
    run_dir = opts.run_dir("leafspine")
    rows = []
    with start_network(fab, sc, opts.switch, run_dir, "flexpass", opts.pcap) as net:
        for h in fab.hosts.values():
            net.popen(h.name, _agent("serve", "--listen", f"{h.ip}:{AGENT_PORT}", *sc.agent_args()),
                      run_dir / f"{h.name}-serve.jsonl", run_dir / f"{h.name}-serve.err")
        time.sleep(0.5)
        spines = sorted(s for s in fab.switches if s.startswith("spine"))

        def counters() -> Dict[str, Dict[int, int]]:
            return {s: {k: v[0] for k, v in p4_counters(fab, s)["forwarded"].items()} for s in spines}

        cross = [(a, b) for a in ("h1", "h2") for b in ("h3", "h4")] + \
                [(a, b) for a in ("h3", "h4") for b in ("h1", "h2")]
        for i in range(pairs):
            src, dst = cross[i % len(cross)]
            before = counters()
            log = run_dir / f"flow-{i}-{src}-{dst}.jsonl"
            p = net.popen(src, _agent("send", "--to", f"{fab.hosts[dst].ip}:{AGENT_PORT}", "--transport",
                                      "flexpass", "--size", str(flow_bytes), "--bind",
                                      f"{fab.hosts[src].ip}:{20000 + i}", *sc.agent_args()), log,
                          run_dir / f"flow-{i}.err")
            p.wait()
            after = counters()
            src_leaf, dst_leaf = fab.host_port(src)[0], fab.host_port(dst)[0]
            row = {"flow": i, "src": src, "dst": dst, "ok": p.returncode == 0}
            for s in spines:
                to_dst = _port_towards(fab, s, dst_leaf)
                to_src = _port_towards(fab, s, src_leaf)

                def d(port, q, s=s):
                    cell = port_queue_index(port, q)
                    return after[s].get(cell, 0) - before[s].get(cell, 0)

                row[s] = {"data_pkts": d(to_dst, QID["flexpass"]), "credit_pkts": d(to_src, QID["credit"])}
            # Flows run one at a time on an otherwise idle fabric, so every packet counted
            # in these (port, queue) cells during the flow is the flow's own.
            data_spines = [s for s in spines if row[s]["data_pkts"] > 0]
            credit_spines = [s for s in spines if row[s]["credit_pkts"] > 0]
            row["data_spines"], row["credit_spines"] = data_spines, credit_spines
            row["symmetric"] = len(data_spines) == 1 and data_spines == credit_spines
            rows.append(row)
    res = {"experiment": "leafspine", "switch": opts.switch, "flows": rows,
           "symmetric_flows": sum(r["symmetric"] for r in rows), "spines_used": sorted({s for r in rows for s in r["data_spines"]})}
    (run_dir / "result.json").write_text(json.dumps(res, indent=2))
    with open(run_dir / "per_spine.csv", "w") as f:
        f.write("flow,src,dst,spine,data_pkts,credit_pkts\n")
        for r in rows:
            for s in spines:
                f.write(f"{r['flow']},{r['src']},{r['dst']},{s},{r[s]['data_pkts']},{r[s]['credit_pkts']}\n")
    from .plots import plot_path_symmetry

    plot_path_symmetry(rows, spines, f"Leaf-spine: each flow's data and credits per spine ({opts.switch})",
                       run_dir / "per_spine.png")
    return res


def _port_towards(fab: Fabric, switch: str, neighbour: str) -> int:
    for port, nb, _ in fab.neighbours(switch):
        if nb == neighbour:
            return port
    raise ValueError(f"{switch} has no link to {neighbour}")


RUNNERS = {"fig7": fig7, "fig8": fig8, "fig9": fig9, "leafspine": leafspine}
