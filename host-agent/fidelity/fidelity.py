#!/usr/bin/env python3
"""The model against the FlexPass authors' ns-2 simulator: the fidelity study of docs/fidelity.md.

Runs the matched cases of host-agent/experiments/fidelity/ (ns2-single-flow, ns2-incast,
ns2-dumbbell, ns2-large-scale) on the model three ways — as the model runs by default, with
`compat = "ns2-flexpass"` (the artifact's choices), and with one key of that preset at a time
put back to the model's default (what each choice is worth) — and, given the artifact's
`ns` binary, the same flows on ns-2: the Clos cases through ns2/clos.tcl (the artifact's
large-scale.tcl with the flows read from a file), the dumbbell through the artifact's own
scripts/dumbbell-topology.tcl. Without ns-2 the ns-2 side is the recorded reference,
ns2-reference.json (written by `--update-reference` from a run with ns-2).

Writes into --out: fidelity.json (every metric of every case, point and run), fidelity.csv
(one row per case, point and metric: ns-2, model, ratio, model in compat mode, ratio) and
fidelity.png (model vs ns-2 per case); `--write-docs` also rewrites the generated tables of
docs/fidelity.md and docs/figures/fidelity.{png,csv}.

    python3 host-agent/fidelity/fidelity.py --out results/fidelity            # model side
    NS2=/path/to/ns-2.35/ns python3 host-agent/fidelity/fidelity.py --out results/fidelity
"""

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FLEXPASS = Path(os.environ.get("FLEXPASS_BIN", REPO / "host-agent" / "target" / "release" / "flexpass"))
EXPERIMENTS = REPO / "host-agent" / "experiments" / "fidelity"
REFERENCE = HERE / "ns2-reference.json"
CLOS_TCL = HERE / "ns2" / "clos.tcl"
DOC = REPO / "docs" / "fidelity.md"
FIGURES = REPO / "docs" / "figures"

SMALL = 100_000  # FlexPass §6.2: small flows are below 100 kB
LARGE = 10_000_000  # the "flows of 10 MB and more"

# The cases: experiment file, and how ns-2 runs it.
CASES = {
    "single-flow": {"file": "ns2-single-flow.toml", "ns2": "clos"},
    "incast": {"file": "ns2-incast.toml", "ns2": "clos"},
    "dumbbell": {"file": "ns2-dumbbell.toml", "ns2": "dumbbell"},
    "large-scale": {"file": "ns2-large-scale.toml", "ns2": "clos"},
}

COMPAT = "ns2-flexpass"

# The keys of the compat preset (flexpass-sim experiment/merge.rs COMPAT_NS2): the model's
# default value, the mechanism, and the points of a case where the key can matter (its toggle
# runs).
# A test checks this table against the preset the binary applies.
PRESET = [
    {
        "key": "topology.routing",
        "default": "ecmp",
        "mechanism": "no ECMP: one route per destination (ns-2 static routing; the artifact's Classifier/MultiPath needs rtproto DV)",
        "applies": lambda p: True,
    },
    {
        "key": "host.tcp_handshake",
        "default": False,
        "mechanism": "TCP's three-way handshake before data (FullTcp's SYN, SYN-ACK)",
        "applies": lambda p: p["transport"] in ("dctcp", "flexpass"),
    },
    {
        "key": "measure.tcp_fct",
        "default": "delivered",
        "mechanism": "DCTCP's FCT ends at the sender's last ACK (FullTcp's report_fct), not at the receiver",
        "applies": lambda p: p["transport"] == "dctcp",
    },
    {
        "key": "host.max_cwnd",
        "default": 10000,
        "mechanism": "TCP window cap of 180 packets (Agent/TCP window_ 180)",
        "applies": lambda p: p["transport"] in ("dctcp", "flexpass") or p["profile"] == "layering",
    },
    {
        "key": "host.dctcp_alpha_init",
        "default": 1.0,
        "mechanism": "DCTCP's α starts at 0 (ns-2 dctcp_alpha_), not 1 (Linux)",
        "applies": lambda p: p["transport"] in ("dctcp", "flexpass") or p["profile"] == "layering",
    },
    {
        "key": "host.flexpass_beta",
        "default": False,
        "mechanism": "FlexPass receivers pace credits at the queue share twice (flexpass_beta_ on an already scaled max_credit_rate_)",
        "applies": lambda p: p["transport"] == "flexpass",
    },
    {
        "key": "switch.credit_share_net",
        "default": False,
        "mechanism": "FlexPass credit share w_q·(1538−84)/1538 (actual_xpass_queue_weight), not w_q",
        "applies": lambda p: p["transport"] == "flexpass",
    },
    {
        "key": "switch.red_basis",
        "default": "queue",
        "mechanism": "selective drop counts red bytes only, not Q1's depth",
        "applies": lambda p: p["transport"] == "flexpass",
    },
]

# ns-2 scheme (ns2/clos.tcl) of a model switch profile.
SCHEMES = {"flexpass": "flexpass", "naive": "naive", "owf": "owf", "layering": "layering"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- statistics


def percentile(values, q):
    """Linear-interpolation percentile, as numpy's default (the artifact's generate_figure.py)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo = int(math.floor(k))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def mean(values):
    return sum(values) / len(values) if values else float("nan")


def fct_metrics(flows):
    """avg / p50 / p99 FCT (µs) of small flows, all flows and flows of 10 MB or more, the
    flows that never completed and the DCTCP retransmission timeouts."""
    done = [f for f in flows if f["fct_us"] is not None]
    out = {}
    for name, keep in (
        ("small", lambda s: s < SMALL),
        ("all", lambda s: True),
        ("large", lambda s: s >= LARGE),
    ):
        v = [f["fct_us"] for f in done if keep(f["size"])]
        out[f"{name}_avg_us"] = mean(v)
        out[f"{name}_p50_us"] = percentile(v, 0.5)
        out[f"{name}_p99_us"] = percentile(v, 0.99)
    out["incomplete"] = len(flows) - len(done)
    out["timeouts"] = sum(f.get("timeouts", 0) for f in flows)
    return out


def case_metrics(case, flows, extra):
    """The metrics of one run of a case, from its per-flow records (and `extra`: what a run
    measures beyond flows, e.g. the dumbbell's shares and queues)."""
    if case == "single-flow":
        return {f"fct_us_{f['size']}": f["fct_us"] for f in sorted(flows, key=lambda f: f["size"])}
    if case == "incast":
        # Each incast (the flows that start together) is repeated: per size, the mean of
        # the repetitions' maximum FCTs, and the timeouts and unfinished flows of all.
        by_size = {}
        for g in sorted({f["group"] for f in flows}):
            members = [f for f in flows if f["group"] == g]
            by_size.setdefault(len(members), []).append(members)
        out = {}
        for n, reps in sorted(by_size.items()):
            maxima = [max(f["fct_us"] for f in m) if all(f["fct_us"] is not None for f in m) else float("nan") for m in reps]
            out[f"max_fct_us_{n}"] = mean(maxima)
            out[f"timeouts_{n}"] = sum(f.get("timeouts", 0) for m in reps for f in m)
            out[f"incomplete_{n}"] = sum(f["fct_us"] is None for m in reps for f in m)
        return out
    if case == "dumbbell":
        out = {}
        for kind in ("new", "legacy"):
            v = [f["fct_us"] for f in flows if f["kind"] == kind and f["fct_us"] is not None]
            out[f"{kind}_avg_fct_us"] = mean(v)
        out.update(extra)
        return out
    m = fct_metrics(flows)
    m.update(extra)
    return m


# ---------------------------------------------------------------- the model


def point_of(result):
    """A run's point: its profile, transport and deployment, from result.json."""
    return {
        "profile": result["profile"],
        "transport": result["new_transport"] if result["deployment_fraction"] > 0 else "dctcp",
        "fraction": result["deployment_fraction"],
    }


def read_model_run(case, run_dir):
    result = json.loads((run_dir / "result.json").read_text())
    flows = []
    with open(run_dir / "flows.csv") as f:
        for r in csv.DictReader(f):
            flows.append(
                {
                    "id": int(r["id"]),
                    "size": int(r["size_bytes"]),
                    "start_us": float(r["start_us"]),
                    "src": int(r["src"]),
                    "dst": int(r["dst"]),
                    "transport": r["transport"],
                    "kind": "legacy" if r["transport"] == "dctcp" else "new",
                    "fct_us": float(r["fct_us"]) if r["fct_us"] else None,
                    # Retransmission timeouts as ns-2 counts them (FullTcp's nrexmit_): for
                    # FlexPass every reactive RTO, also those that only hand packets to the
                    # credits.
                    "timeouts": int(r["timeouts"] or 0) + int(r.get("reactive_rtos") or 0),
                }
            )
    starts = sorted({f["start_us"] for f in flows})
    for f in flows:
        f["group"] = starts.index(f["start_us"])
    extra = {}
    if case == "dumbbell":
        extra = model_dumbbell_extra(result, flows)
    if case == "large-scale":
        uplinks = {}
        for p in result["ports"]:
            if p["node"].startswith("tor") and p["towards"].startswith("agg"):
                uplinks.setdefault(p["node"], []).append(p["tx_bytes"])
        extra = {"tor_uplink_max_share": uplink_max_share(uplinks)}
    return point_of(result), flows, extra


def share_window_end(flows):
    """End of the dumbbell's share window: the earlier of the two classes' median
    completion (both classes still have half their flows running until then)."""
    ends = []
    for kind in ("new", "legacy"):
        done = [f["start_us"] + f["fct_us"] for f in flows if f["kind"] == kind and f["fct_us"] is not None]
        ends.append(percentile(done, 0.5))
    return min(ends)


def model_dumbbell_extra(result, flows):
    """The new transport's share of the bottleneck's data bytes from the start to the earlier
    median completion of the two classes, the FlexPass flows' proactive share of their
    bytes, and the maxima of the data queues (FlexPass: Q1 and the legacy Q2; naive: the
    one data queue)."""
    end = share_window_end(flows)
    kinds = ["legacy" if f["transport"] == "dctcp" else "new" for f in sorted(flows, key=lambda f: f["id"])]
    total = {"new": 0, "legacy": 0}
    for s in result["samples"]:
        if s["t_us"] > end:
            break
        for i, k in enumerate(kinds):
            total[k] += s["proactive"][i] + s["reactive"][i]
    both = total["new"] + total["legacy"]
    out = {"share_new": total["new"] / both if both else float("nan")}
    q = result["bottleneck"]["max_queue_bytes"]
    if result["profile"] == "flexpass":
        pro = sum(f["receiver"]["bytes_proactive"] for f in result["flows"] if f["transport"] != "dctcp")
        rea = sum(f["receiver"]["bytes_reactive"] for f in result["flows"] if f["transport"] != "dctcp")
        out["proactive_fraction"] = pro / (pro + rea) if pro + rea else float("nan")
        out["q1_max_bytes"] = q[1]
        out["legacy_queue_max_bytes"] = q[2]
    else:
        out["data_queue_max_bytes"] = q[1]
    return out


def model_sweep(case, out_dir, sets, jobs):
    """`flexpass sweep` of a case's experiment with `sets` into out_dir (resumable)."""
    cmd = [str(FLEXPASS), "sweep", str(EXPERIMENTS / CASES[case]["file"]), "--out", str(out_dir), "-j", str(jobs)]
    for s in sets:
        cmd += ["--set", s]
    log("model: " + " ".join(cmd[1:]))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def model_one(case, point_sets, out_dir, sets):
    """One point of a case (`flexpass sim --no-sweep`) with extra `sets`."""
    if (out_dir / "result.json").exists():
        return
    cmd = [str(FLEXPASS), "sim", str(EXPERIMENTS / CASES[case]["file"]), "--no-sweep", "--out", str(out_dir)]
    for s in point_sets + sets:
        cmd += ["--set", s]
    log("model: " + " ".join(cmd[1:]))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sweep_points(sweep_dir):
    """The run folders of a sweep (named by their point)."""
    return sorted(p for p in sweep_dir.iterdir() if (p / "result.json").exists())


def point_sets(point_name):
    """`--set` arguments of a sweep point from its folder name (key=value,key=value)."""
    return [kv for kv in point_name.split(",") if "=" in kv]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


# ---------------------------------------------------------------- ns-2


def write_ns2_flows(flows, path, offset_s):
    with open(path, "w") as f:
        for fl in sorted(flows, key=lambda x: (x["start_us"], x["id"])):
            f.write(
                f"{fl['id']} {offset_s + fl['start_us'] / 1e6:.9f} {fl['src']} {fl['dst']} {fl['size']} {fl['kind']}\n"
            )


def read_ns2_fct(path):
    """The artifact's fct_ID.out: id, size, FCT (s), agent type, ... (header skipped)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        p = line.split(",")
        try:
            rec = {"size": int(p[1]), "fct_us": float(p[2]) * 1e6, "type": p[3], "cols": p}
        except (ValueError, IndexError):
            continue
        # ns-2 reports some FullTcp/Sack flows twice (a later ACK of the last byte again):
        # the first line is the completion.
        out.setdefault(int(p[0]), rec)
    return out


def run_ns2_clos(ns2, case, point, flows, work, exp_id):
    """The model's flows of one point through ns2/clos.tcl; returns the per-flow records."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "outputs").mkdir(exist_ok=True)
    fct = work / "outputs" / f"fct_{exp_id}.out"
    stats = work / "outputs" / f"stats_{exp_id}.out"
    if not stats.exists():
        flows_file = work / "flows.txt"
        # ns-2 flows start 1 ms into the run (the model's at 0).
        write_ns2_flows(flows, flows_file, 0.001)
        end = 4.0 if case == "large-scale" else 1.0
        cmd = [ns2, str(CLOS_TCL), SCHEMES[point["profile"]], str(int(round(point["fraction"] * 100))), "flows.txt", str(exp_id), str(end)]
        (work / "cmd.txt").write_text(" ".join(cmd) + "\n")
        log(f"ns-2: {case} {point}: {' '.join(cmd)}")
        t0 = time.time()
        env = dict(os.environ, FIDELITY_MONITOR="1")
        with open(work / "stdout.txt", "w") as so:
            subprocess.run(cmd, cwd=work, check=True, stdout=so, stderr=subprocess.STDOUT, env=env)
        (work / "wall_seconds.txt").write_text(f"{time.time() - t0:.1f}\n")
    got = read_ns2_fct(fct)
    timeouts = {}
    with open(stats) as f:
        for r in csv.DictReader(f):
            timeouts[int(r["id"])] = int(r["timeouts"])
    out = []
    for fl in flows:
        g = got.get(fl["id"])
        out.append(dict(fl, fct_us=g["fct_us"] if g else None, timeouts=timeouts.get(fl["id"], 0)))
    extra = {}
    wall = work / "wall_seconds.txt"
    if case == "large-scale" and wall.exists():
        extra["wall_seconds"] = float(wall.read_text())
    if case == "large-scale":
        uplinks = {}
        with open(work / "outputs" / f"ports_{exp_id}.out") as f:
            for r in csv.DictReader(f):
                tor, peer = r["port"].split("->")
                if tor.startswith("tor") and peer.startswith("agg"):
                    uplinks.setdefault(tor, []).append(float(r["bytes_sent"]))
        extra["tor_uplink_max_share"] = uplink_max_share(uplinks)
    return out, extra


def uplink_max_share(uplinks):
    """ECMP's spread: over the ToRs, the mean share of the busier of their uplinks in their
    upward bytes (0.5: even; 1: everything on one uplink)."""
    shares = [max(v) / sum(v) for v in uplinks.values() if sum(v) > 0]
    return mean(shares)


def run_ns2_dumbbell(ns2, ns2_tree, point, work, exp_id):
    """The artifact's scripts/dumbbell-topology.tcl as it is (ccc_type flexpass or xpass)."""
    work.mkdir(parents=True, exist_ok=True)
    ccc = "flexpass" if point["transport"] == "flexpass" else "xpass"
    if not (work / "stdout.txt").exists():
        script = Path(ns2_tree) / "scripts" / "dumbbell-topology.tcl"
        cmd = [ns2, str(script), ccc, str(exp_id)]
        (work / "cmd.txt").write_text(" ".join(cmd) + "\n")
        log(f"ns-2: dumbbell {point}: {' '.join(cmd)}")
        with open(work / "stdout.txt", "w") as so:
            subprocess.run(cmd, cwd=work, check=True, stdout=so, stderr=subprocess.STDOUT)
    got = read_ns2_fct(work / "outputs" / f"fct_{exp_id}.out")
    flows = []
    for fid, g in got.items():
        flows.append({"id": fid, "size": g["size"], "fct_us": g["fct_us"], "kind": "legacy" if g["type"] == "tcp" else "new", "cols": g["cols"]})
    for f in flows:
        f["start_us"] = 1000.0  # the script starts every flow at 1 ms
    # The bottleneck is the link between the script's first two nodes (0 -> 1). From its
    # trace: data bytes sent per class until the share window's end, and the occupancy of
    # its data queues (enqueued "+", sent "-" or dropped "d"; flows 0-9 are the new
    # transport: FlexPass's queue Q1 on the FlexPass switch, the one data queue on naive).
    end_s = share_window_end(flows) / 1e6
    sent = {"new": 0, "legacy": 0}
    depth = {"new": 0, "legacy": 0}
    peak = {"new": 0, "legacy": 0}
    with open(work / "outputs" / f"trace_{exp_id}.out") as tr:
        for line in tr:
            p = line.split()
            if len(p) < 8 or p[2] != "0" or p[3] != "1" or p[4] == "XPASS_CREDIT":
                continue
            kind = "new" if int(p[7]) < 10 else "legacy"
            if ccc == "xpass":
                kind = "new"  # one data queue: count its whole depth
            size = int(p[5])
            if p[0] == "+":
                depth[kind] += size
                peak[kind] = max(peak[kind], depth[kind])
            elif p[0] in ("-", "d"):
                depth[kind] -= size
            if p[0] == "-" and p[4] in ("tcp", "XPASS_DATA") and float(p[1]) <= end_s:
                sent["new" if int(p[7]) < 10 else "legacy"] += size
    both = sent["new"] + sent["legacy"]
    extra = {"share_new": sent["new"] / both if both else float("nan")}
    if ccc == "flexpass":
        pro = sum(int(f["cols"][5]) for f in flows if f["kind"] == "new")
        rea = sum(int(f["cols"][6]) - int(f["cols"][7]) for f in flows if f["kind"] == "new")
        extra["proactive_fraction"] = pro / (pro + rea)
        extra["q1_max_bytes"] = peak["new"]
        extra["legacy_queue_max_bytes"] = peak["legacy"]
    else:
        extra["data_queue_max_bytes"] = peak["new"]
    for f in flows:
        del f["cols"]
    return flows, extra


# ---------------------------------------------------------------- the study


def ratio(a, b):
    if a is None or b is None or not all(isinstance(x, (int, float)) for x in (a, b)):
        return None
    if math.isnan(a) or math.isnan(b) or b == 0:
        return None
    return a / b


def run_study(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not FLEXPASS.exists():
        sys.exit(f"fidelity: {FLEXPASS} not found: run `make build` first")
    results = {"cases": {}}
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {"cases": {}}
    for case in args.cases:
        log(f"== {case}")
        base = out / "model"
        model_sweep(case, base / "default" / case, [], args.jobs)
        points = {}
        for run in sweep_points(base / "default" / case):
            point, flows, extra = read_model_run(case, run)
            points[run.name] = {"point": point, "flows": flows, "runs": {"model": case_metrics(case, flows, extra)}}
        # ns-2 runs the default run's flows; it goes on beside the model's other runs.
        pool = ThreadPoolExecutor(max_workers=args.jobs)
        ns2_jobs = []
        if args.ns2:
            # The all-DCTCP point is the same simulation on every switch profile (DCTCP
            # takes the legacy queue alone): ns-2 runs it once.
            todo = [(n, p) for n, p in sorted(points.items()) if not duplicate_point(points, n, p)]
            for i, (name, pt) in enumerate(todo):
                ns2_jobs.append((name, pool.submit(ns2_point, args, out, case, name, pt, i + 1)))
        model_sweep(case, base / "compat" / case, [f'compat="{COMPAT}"'], args.jobs)
        for run in sweep_points(base / "compat" / case):
            _, flows, extra = read_model_run(case, run)
            points[run.name]["runs"]["compat"] = case_metrics(case, flows, extra)
        # Toggle runs: compat with one key back at the model's default.
        if not args.no_toggles:
            toggles = [
                (p, name)
                for p in PRESET
                for name, pt in points.items()
                if p["applies"](pt["point"]) and not duplicate_point(points, name, pt)
            ]

            def toggle(item):
                p, name = item
                d = base / f"compat-minus-{p['key']}" / case / name
                model_one(case, point_sets(name), d, [f'compat="{COMPAT}"', f"{p['key']}={toml_value(p['default'])}"])
                return p, name, d

            with ThreadPoolExecutor(max_workers=args.jobs) as ex:
                for p, name, d in ex.map(toggle, toggles):
                    _, flows, extra = read_model_run(case, d)
                    points[name]["runs"][f"compat − {p['key']}"] = case_metrics(case, flows, extra)
        if args.ns2:
            for name, job in ns2_jobs:
                points[name]["runs"]["ns2"] = job.result()
            first_zero = [n for n, p in sorted(points.items()) if p["point"]["fraction"] == 0][:1]
            for name, pt in points.items():
                if first_zero and pt["point"]["fraction"] == 0 and "ns2" not in pt["runs"]:
                    pt["runs"]["ns2"] = points[first_zero[0]]["runs"]["ns2"]
        else:
            ref = reference["cases"].get(case, {})
            for name, pt in points.items():
                if name in ref:
                    pt["runs"]["ns2"] = ref[name]
        pool.shutdown()
        for pt in points.values():
            del pt["flows"]
        results["cases"][case] = points
    (out / "fidelity.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    rows = table_rows(results)
    write_csv(rows, out / "fidelity.csv")
    plot(results, out / "fidelity.png")
    if args.ns2 and args.update_reference:
        update_reference(results, args)
    print_summary(rows)
    if args.write_docs:
        write_docs(results, rows, out)
    log(f"fidelity: results in {out}")


def ns2_point(args, out, case, name, pt, exp_id):
    """One point of a case on ns-2: its metrics."""
    work = out / "ns2" / case / name
    if CASES[case]["ns2"] == "dumbbell":
        flows, extra = run_ns2_dumbbell(args.ns2, args.ns2_tree, pt["point"], work, exp_id)
    else:
        flows, extra = run_ns2_clos(args.ns2, case, pt["point"], pt["flows"], work, exp_id)
    return case_metrics(case, flows, extra)


def duplicate_point(points, name, pt):
    """Runs of the all-DCTCP point are the same for every profile: toggle one of them."""
    if pt["point"]["fraction"] > 0:
        return False
    same = sorted(n for n, p in points.items() if p["point"]["fraction"] == 0)
    return name != same[0]


def table_rows(results):
    rows = []
    for case, points in results["cases"].items():
        for name, pt in sorted(points.items()):
            runs = pt["runs"]
            for metric in runs["model"]:
                ns2 = runs.get("ns2", {}).get(metric)
                model = runs["model"].get(metric)
                compat = runs.get("compat", {}).get(metric)
                row = {
                    "case": case,
                    "point": label(pt["point"]),
                    "metric": metric,
                    "ns2": ns2,
                    "model": model,
                    "model_vs_ns2": ratio(model, ns2),
                    "compat": compat,
                    "compat_vs_ns2": ratio(compat, ns2),
                }
                for run, m in runs.items():
                    if run.startswith("compat − "):
                        row[run] = m.get(metric)
                rows.append(row)
    return rows


def label(point):
    if point["fraction"] == 0:
        return f"DCTCP ({point['profile']} switch)" if point["profile"] != "flexpass" else "DCTCP"
    names = {"flexpass": "FlexPass", "naive": "ExpressPass (naive)", "owf": "ExpressPass (oWF)", "layering": "ExpressPass (LY)"}
    return f"{names[point['profile']]} {int(point['fraction'] * 100)} %"


def write_csv(rows, path):
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt_csv(r.get(k)) for k in keys})


def fmt_csv(v):
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else v


def fmt(v, metric=""):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if "share" in metric or "fraction" in metric:
        return f"{100 * v:.1f} %"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def fmt_ratio(r):
    return "–" if r is None else f"{r:.2f}"


def print_summary(rows):
    for r in rows:
        print(
            f"{r['case']:12} {r['point']:24} {r['metric']:22} ns-2 {fmt(r['ns2'], r['metric']):>10}"
            f"  model {fmt(r['model'], r['metric']):>10} ({fmt_ratio(r['model_vs_ns2'])})"
            f"  compat {fmt(r['compat'], r['metric']):>10} ({fmt_ratio(r['compat_vs_ns2'])})"
        )


def update_reference(results, args):
    ref = {
        "source": "kaist-ina/ns2-flexpass (commit 09350a7), built by hand; host-agent/fidelity/fidelity.py --ns2",
        # The binary's last two path components only: the reference names no machine's path.
        "ns2": "/".join(Path(args.ns2).parts[-2:]),
        "date": time.strftime("%Y-%m-%d"),
        "cases": {},
    }
    if REFERENCE.exists():
        ref["cases"] = json.loads(REFERENCE.read_text()).get("cases", {})
    for case, points in results["cases"].items():
        ref["cases"][case] = {n: p["runs"]["ns2"] for n, p in points.items() if "ns2" in p["runs"]}
    REFERENCE.write_text(json.dumps(ref, indent=1, default=str) + "\n")
    log(f"fidelity: ns-2 reference written to {REFERENCE}")


# ---------------------------------------------------------------- figure and docs


def plot(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("fidelity: matplotlib missing, no figure (pip install matplotlib)")
        return
    panels = [c for c in ("single-flow", "incast", "large-scale", "dumbbell") if c in results["cases"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    for ax, case in zip(axes[0], panels):
        points = results["cases"][case]
        if case == "single-flow":
            for name, pt in sorted(points.items()):
                lab = label(pt["point"]).split(" ")[0]
                for run, style in (("ns2", "-o"), ("model", "--x"), ("compat", ":s")):
                    m = pt["runs"].get(run)
                    if not m:
                        continue
                    xs = sorted(int(k.rsplit("_", 1)[1]) for k in m)
                    ax.plot(xs, [m[f"fct_us_{x}"] for x in xs], style, label=f"{lab} {run}", ms=4)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("flow size (bytes)")
            ax.set_ylabel("FCT alone in the Clos (µs)")
        elif case == "incast":
            for name, pt in sorted(points.items()):
                lab = label(pt["point"]).split(" ")[0]
                for run, style in (("ns2", "-o"), ("model", "--x"), ("compat", ":s")):
                    m = pt["runs"].get(run)
                    if not m:
                        continue
                    xs = sorted(int(k.rsplit("_", 1)[1]) for k in m if k.startswith("max_fct"))
                    ax.plot(xs, [m[f"max_fct_us_{x}"] for x in xs], style, label=f"{lab} {run}", ms=4)
            ax.set_xlabel("flows (8 senders, 64 kB each)")
            ax.set_ylabel("max FCT (µs)")
        else:
            metrics = ["small_avg_us", "small_p99_us", "all_avg_us", "large_avg_us"] if case == "large-scale" else ["new_avg_fct_us", "legacy_avg_fct_us"]
            names = sorted(points)
            width = 0.8 / 3
            xs = list(range(len(names) * len(metrics)))
            for k, run in enumerate(("ns2", "model", "compat")):
                vals = []
                for name in names:
                    m = points[name]["runs"].get(run, {})
                    vals += [m.get(x, float("nan")) for x in metrics]
                ax.bar([x + (k - 1) * width for x in xs], vals, width, label=run)
            ax.set_xticks(xs)
            ax.set_xticklabels([f"{label(points[n]['point'])}\n{x.replace('_us', '')}" for n in names for x in metrics], rotation=90, fontsize=6)
            ax.set_yscale("log")
            ax.set_ylabel("FCT (µs)")
        ax.set_title(case)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("The model (default and ns2-flexpass compat) vs the FlexPass authors' ns-2")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


BEGIN = "<!-- fidelity.py: generated tables begin -->"
END = "<!-- fidelity.py: generated tables end -->"


def write_docs(results, rows, out):
    FIGURES.mkdir(parents=True, exist_ok=True)
    if (out / "fidelity.png").exists():
        shutil.copy(out / "fidelity.png", FIGURES / "fidelity.png")
    shutil.copy(out / "fidelity.csv", FIGURES / "fidelity.csv")
    lines = [BEGIN, ""]
    for case in results["cases"]:
        lines.append(f"#### {case}")
        lines.append("")
        case_rows = [r for r in rows if r["case"] == case]
        # The 0 % runs under the other switch profiles repeat the plain DCTCP row (all-DCTCP
        # traffic uses the legacy queue alone); they stay in the CSV, not in the table.
        plain = {r["metric"]: r for r in case_rows if r["point"] == "DCTCP"}
        repeats = [
            r for r in case_rows
            if r["point"].startswith("DCTCP (") and r["metric"] in plain
            and all(r[k] == plain[r["metric"]][k] for k in ("ns2", "model", "compat"))
        ]
        if repeats and len(repeats) == len([r for r in case_rows if r["point"].startswith("DCTCP (")]):
            case_rows = [r for r in case_rows if not r["point"].startswith("DCTCP (")]
            lines.append("The 0 % runs under the naive, oWF and LY switch profiles give the DCTCP row's numbers exactly (all-DCTCP traffic uses the legacy queue alone); figures/fidelity.csv has them.")
            lines.append("")
        toggles = [t for t in dict.fromkeys(k for r in case_rows for k in r if k.startswith("compat − "))]
        head = "| point | metric | ns-2 | model | model / ns-2 | compat | compat / ns-2 |"
        lines.append(head)
        lines.append("|---|---|---|---|---|---|---|")
        for r in case_rows:
            flag = lambda x: f"**{fmt_ratio(x)}**" if x is not None and abs(x - 1) > 0.25 else fmt_ratio(x)
            lines.append(
                f"| {r['point']} | {r['metric']} | {fmt(r['ns2'], r['metric'])} | {fmt(r['model'], r['metric'])} | {flag(r['model_vs_ns2'])} | {fmt(r['compat'], r['metric'])} | {flag(r['compat_vs_ns2'])} |"
            )
        if toggles:
            lines.append("")
            lines.append("Toggle runs (compat with one key back at the model's default) / compat:")
            lines.append("")
            lines.append("| point | metric | " + " | ".join(t.replace("compat − ", "− ") for t in toggles) + " |")
            lines.append("|---|---|" + "---|" * len(toggles))
            for r in case_rows:
                cells = []
                for t in toggles:
                    v = r.get(t)
                    cells.append("" if v is None else fmt_ratio(ratio(v, r["compat"])))
                if any(cells):
                    lines.append(f"| {r['point']} | {r['metric']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(END)
    text = DOC.read_text()
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + "\n".join(lines) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + "\n".join(lines) + "\n"
    DOC.write_text(text)
    log(f"fidelity: tables written to {DOC}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/fidelity", help="results folder (default results/fidelity)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases ({', '.join(CASES)})")
    ap.add_argument("--ns2", default=os.environ.get("NS2"), help="the artifact's ns binary (default $NS2); without it, the recorded reference")
    ap.add_argument("--ns2-tree", default=os.environ.get("NS2_TREE"), help="the artifact's source tree, for scripts/dumbbell-topology.tcl (default $NS2_TREE, else the ns binary's folder)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="runs in parallel")
    ap.add_argument("--no-toggles", action="store_true", help="skip the toggle runs")
    ap.add_argument("--update-reference", action="store_true", help="with --ns2: record its results in ns2-reference.json")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/fidelity.md's tables and docs/figures/fidelity.*")
    args = ap.parse_args()
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in args.cases:
        if c not in CASES:
            sys.exit(f"fidelity: unknown case '{c}' (cases: {', '.join(CASES)})")
    if args.ns2:
        if not (os.path.isfile(args.ns2) and os.access(args.ns2, os.X_OK)):
            sys.exit(f"fidelity: NS2={args.ns2} is not an executable ns binary")
        args.ns2 = os.path.abspath(args.ns2)
        if args.ns2_tree is None:
            args.ns2_tree = os.path.dirname(args.ns2)
        if "dumbbell" in args.cases and not (Path(args.ns2_tree) / "scripts" / "dumbbell-topology.tcl").exists():
            sys.exit(f"fidelity: {args.ns2_tree}/scripts/dumbbell-topology.tcl not found: set NS2_TREE to the artifact's source tree")
    run_study(args)


if __name__ == "__main__":
    main()
