"""``python -m flexpass_mininet <experiment> [options]`` (root).

Experiments: fig7 (a/b/c), fig8 (incast), fig9 (a/b + starvation), leafspine
(path symmetry), all.  Results go to <out>/<experiment>-<switch>/.

``python -m flexpass_mininet emulate EXPERIMENT``: a model experiment file (the model's
schema: host-agent/experiments/, mininet-topos/experiments/*.toml) on real packets,
scaled (flexpass_mininet/emulate.py; its ``[[fault]]`` entries: flexpass_mininet/faults.py);
``flexpass emulate`` runs it. Every run samples the memory and CPU of its processes
(resources.py).

``python -m flexpass_mininet soak [EXPERIMENT.toml] [emulate options]``: ``emulate`` with
the resident controller, experiments/soak.toml by default (30 minutes of mixed traffic;
``--set duration_ms=…`` shortens it); ``soak --model``: the model's soak
(host-agent/experiments/soak.toml) with flexpass sim's memory and CPU.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import List

from . import env
from .faults import PROBE_DEFAULTS


def _cannot_run(switch: str) -> bool:
    problems = env.problems(switch)
    if problems:
        print("flexpass_mininet: cannot run:\n  - " + "\n  - ".join(problems), file=sys.stderr)
    return bool(problems)


SOAK = env.REPO / "mininet-topos" / "experiments" / "soak.toml"


def soak_main(argv) -> int:
    """``soak [FILE] [emulate options]``: ``emulate`` with the resident controller, on
    experiments/soak.toml by default; ``soak --model [SIM.toml]``: the model's soak with
    flexpass sim's own memory and CPU over time (resources.py)."""
    ap = argparse.ArgumentParser(prog="python -m flexpass_mininet soak",
                                 description="Soak: a long mixed workload, memory and CPU of every agent and "
                                             "switch over time (issue #14). Without --model: emulate FILE "
                                             "--controller (every emulate option applies).")
    ap.add_argument("--model", nargs="?", const=True, metavar="SIM.toml",
                    help="soak the model instead (no root): flexpass sim on host-agent/experiments/soak.toml "
                         "or the file given, with its memory and CPU over time")
    a, rest = ap.parse_known_args(argv)
    if not a.model:
        if not rest or rest[0].startswith("-"):
            rest = [str(SOAK), *rest]
        return emulate_main([*rest, "--controller"])
    from . import resources

    ap2 = argparse.ArgumentParser(prog="python -m flexpass_mininet soak --model")
    ap2.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="flexpass sim --set")
    ap2.add_argument("--out", type=Path, default=env.REPO / "results" / "mininet")
    b = ap2.parse_args(rest)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sim = resources.MODEL_EXPERIMENT if a.model is True else Path(a.model)
    if not env.FLEXPASS_BIN.is_file():
        print(f"flexpass_mininet soak: no agent binary at {env.FLEXPASS_BIN} (cargo build --release)", file=sys.stderr)
        return 2
    r = resources.run_model(sim, b.out, sets=b.set, progress=lambda line: print(line, flush=True))
    print(resources.model_summary(r))
    print(f"results: {b.out}/{r['experiment']}-model/ (result.json, resources.csv, resources.png, sim/)")
    return 0 if r["summary"]["corrupted_bytes"] == 0 and r["summary"]["incomplete"] == 0 else 3


def emulate_main(argv) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m flexpass_mininet emulate",
        description="A model experiment file (host-agent/experiments/, `flexpass experiments`) on Mininet: "
                    "the model reads the file (flexpass sim --resolve), this runs it scaled (flexpass_mininet/emulate.py)")
    ap.add_argument("experiment", help="a built-in experiment name or an experiment file (the model's schema)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as flexpass sim --set")
    ap.add_argument("--no-sweep", action="store_true", help="one run with the file's keys, ignoring its [sweep]")
    ap.add_argument("--switch", default="flexpass_switch", choices=sorted(env.SWITCH_BINARIES))
    ap.add_argument("--link-mbps", type=float, default=None,
                    help="scaled link rate C' (Mbit/s; default: the file's emulation.link_mbps, else 20)")
    ap.add_argument("--rtt-us", type=float, default=None,
                    help="base RTT of the emulated path (µs; default: the file's emulation.rtt_us, else 1000)")
    ap.add_argument("--out", type=Path, default=env.REPO / "results" / "emulate",
                    help="results: result.json and flows.csv (a sweep: one folder per point)")
    ap.add_argument("--dry-run", action="store_true", help="print the scaled plan and stop (no root needed)")
    ap.add_argument("--pcap", action="store_true", help="BMv2 writes per-port pcaps into the run directory")
    ap.add_argument("--controller", action="store_true",
                    help="the resident controller (flexpass-ctl run) holds the switches for the whole run, "
                         "as with [[fault]] entries; its memory and CPU are sampled with the rest")
    ap.add_argument("--detect", choices=["told", "probe"], default="told",
                    help="who notices a [[fault]] link's failure and repair: told (flexpass-ctl link-down/up, "
                         "fault.reroute_after_ms after it) or probe (the resident controller's liveness probes, "
                         "flexpass-ctl run --detect probe)")
    for k, v in PROBE_DEFAULTS.items():
        ap.add_argument(f"--probe-{k.replace('_', '-')}", type=float, default=v,
                        help=f"--detect probe: flexpass-ctl run --probe-{k.replace('_', '-')} (default {v:g})")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from . import emulate

    return emulate.main_args(a)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "emulate":
        return emulate_main(argv[1:])
    if argv and argv[0] == "soak":
        return soak_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m flexpass_mininet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["fig7", "fig8", "fig9", "leafspine", "all", "emulate", "soak"])
    ap.add_argument("--switch", default="flexpass_switch", choices=sorted(env.SWITCH_BINARIES),
                    help="flexpass_switch (traffic manager, switch-target/) or stock simple_switch")
    ap.add_argument("--link-mbps", type=float, default=20.0, help="scaled link rate C' (Mbit/s)")
    ap.add_argument("--rtt-us", type=float, default=1000.0,
                    help="base RTT of the emulated path, for the threshold scaling rule (scaling.py)")
    ap.add_argument("--duration", type=float, default=12.0, help="measured seconds of each long-flow run")
    ap.add_argument("--flows", default="8,16,32,48,64", help="fig8: flow counts")
    ap.add_argument("--out", type=Path, default=env.REPO / "results" / "mininet")
    ap.add_argument("--pcap", action="store_true", help="BMv2 writes per-port pcaps into the run directory")
    a = ap.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every network and process started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if _cannot_run(a.switch):
        return 2
    from . import experiments as ex

    opts = ex.Options(switch=a.switch, link_rate_bps=a.link_mbps * 1e6, base_rtt_s=a.rtt_us / 1e6,
                      duration_s=a.duration, out=a.out, pcap=a.pcap)
    names = ["fig7", "fig9", "fig8", "leafspine"] if a.experiment == "all" else [a.experiment]
    results = {}
    for n in names:
        if n == "fig8":
            results[n] = ex.fig8(opts, flow_counts=tuple(int(x) for x in a.flows.split(",")))
        else:
            results[n] = ex.RUNNERS[n](opts)
        print(summary(n, results[n]))
    print(f"results: {opts.out}/<experiment>-{a.switch}/ (result.json, CSV, PNG, switch logs)")
    return 0


def _long_flow_lines(r: dict) -> List[str]:
    out = [f"  {r['title']} [{r['profile']} profile] {r['scale']}"]
    for k, f in r["flows"].items():
        out.append(f"    {k:28} {100 * f['share_of_link']:5.1f} % of the link (proactive "
                   f"{100 * f['proactive_share']:4.1f} %, reactive {100 * f['reactive_share']:4.1f} %), "
                   f"starved {100 * f['starvation_fraction']:5.1f} % of the time")
    if r.get("queues"):
        q = r["queues"]
        out.append(f"    after warm-up: max depth Q1 {q['flexpass']['max_depth_bytes']} B (red threshold "
                   f"{r['thresholds']['red_threshold']} B, buffer {r['thresholds']['buffer']} B), "
                   f"Q2 {q['legacy']['max_depth_bytes']} B, Q0 {q['credit']['max_depth_bytes']} B; "
                   f"Q1 drops {q['flexpass']['drops_after_warmup']}")
    return out


def summary(name: str, r: dict) -> str:
    """A few human lines per experiment (everything else is in result.json)."""
    lines = [f"== {name} =="]
    if name in ("fig7", "fig9"):
        for sub in r.values():
            lines += _long_flow_lines(sub)
    elif name == "fig8":
        lines.append(f"  {r['scale']}; max FCT (ms) by flows, and failed runs / kernel TCP timeouts:")
        for row in r["summary"]:
            fct = "-" if row["avg_max_fct_us"] is None else f"{row['avg_max_fct_us'] / 1e3:8.1f}"
            lines.append(f"    {row['transport']:12} {row['flows']:3} flows: {fct}  failed {row['failed_runs']}"
                         + (f"  tcp timeouts {row['tcp_timeouts']}" if row["tcp_timeouts"] is not None else ""))
        for t, res in r["results"].items():
            if res["agent_timeouts_total"] is not None:
                lines.append(f"    {t}: {res['agent_timeouts_total']} timeouts in all runs")
    elif name == "leafspine":
        lines.append(f"  {r['symmetric_flows']}/{len(r['flows'])} flows had credits and data on the same spine; "
                     f"spines used: {', '.join(r['spines_used'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
