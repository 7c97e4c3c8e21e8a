#!/usr/bin/env python3
"""Table of a ppt-websearch / ppt-datamining sweep (docs/results-ppt.md).

    python3 host-agent/reports/ppt_table.py RESULTS_DIR [CSV_OUT]

Per scheme (the runs' `name`): the paper's four FCT statistics from the run report
(overall average, small flows <= 100 kB average and p99, large flows average), the
medians of small and large flows, the flows that had a retransmission timeout and the
statistics over the others, and the buffer counters of the report's `ppt` section.
Relative differences are against the `dctcp` run. Prints a Markdown table; writes CSV_OUT if given.
"""

import csv
import json
import os
import sys

ORDER = ["dctcp", "ppt", "ppt-no-ewd", "ppt-no-sched", "ppt-no-lcp", "ppt-lcp-drop",
         "dctcp-tlp", "ppt-tlp", "ppt-pushout", "ppt-tlp-pushout"]


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def avg(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def row(run_dir):
    r = json.load(open(os.path.join(run_dir, "result.json")))
    o = r["fct"]["overall"]
    flows = [f for f in r["flows"] if f["fct_us"] is not None]
    small = [f for f in flows if f["size"] <= 100_000]
    large = [f for f in flows if f["size"] > 100_000]
    ok = lambda fs: [f["fct_us"] for f in fs if f["timeouts"] == 0]
    p = r.get("ppt") or {}
    return {
        "scheme": r["params"]["name"],
        "flows": o["flows"],
        "incomplete": o["incomplete"],
        "avg_ms": o["all"]["avg_us"] / 1e3,
        "small_avg_us": o["small"]["avg_us"],
        "small_p99_us": o["small"]["p99_us"],
        "large_avg_ms": o["not_small"]["avg_us"] / 1e3,
        "small_p50_us": o["small"]["p50_us"],
        "large_p50_us": o["not_small"]["p50_us"],
        "flows_with_rto": sum(1 for f in flows if f["timeouts"] > 0),
        "small_flows_with_rto": sum(1 for f in small if f["timeouts"] > 0),
        "no_rto_avg_ms": avg(ok(flows)) / 1e3,
        "no_rto_small_avg_us": avg(ok(small)),
        "no_rto_small_p99_us": quantile(ok(small), 0.99),
        "no_rto_large_avg_ms": avg(ok(large)) / 1e3,
        "switch_drops": r["data_drops_full"],
        "hcp_drops_lcp_held": p.get("hcp_drops_lcp_held", 0),
        "lcp_pushed_out": p.get("lcp_pushed_out", 0),
        "tlp_probes": r.get("tlp_probes", 0),
        "tlp_recoveries": r.get("tlp_recoveries", 0),
        "lcp_drops": r["data_drops_red"],
        "lcp_byte_share": p.get("lcp_byte_share", 0.0),
        "hcp_max_wait_behind_lcp_ns": p.get("hcp_max_wait_behind_lcp_ns", 0),
        "tor_up_utilization": r["utilization"].get("tor-up", float("nan")),
    }


def main():
    top = sys.argv[1]
    rows = [row(os.path.join(top, d)) for d in os.listdir(top)
            if os.path.exists(os.path.join(top, d, "result.json"))]
    rows.sort(key=lambda x: ORDER.index(x["scheme"]) if x["scheme"] in ORDER else 99)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            for x in rows:
                w.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in x.items()})
    base = next((x for x in rows if x["scheme"] == "dctcp"), None)
    d = lambda x, k: "" if base is None or x is base else f" ({100 * (x[k] / base[k] - 1):+.0f} %)"
    print("| scheme | overall avg (ms) | small avg (µs) | small p99 (µs) | large avg (ms) "
          "| small / large p50 | flows with an RTO (small) "
          "| without them: overall / small avg / small p99 / large "
          "| drops (HCP with LCP held) | LCP pushed out | TLP probes (recovered) | LCP bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['scheme']} | {x['avg_ms']:.3f}{d(x, 'avg_ms')} "
              f"| {x['small_avg_us']:.0f}{d(x, 'small_avg_us')} "
              f"| {x['small_p99_us']:.0f}{d(x, 'small_p99_us')} "
              f"| {x['large_avg_ms']:.3f}{d(x, 'large_avg_ms')} "
              f"| {x['small_p50_us']:.1f}{d(x, 'small_p50_us')} / "
              f"{x['large_p50_us'] / 1e3:.3f}{d(x, 'large_p50_us')} "
              f"| {x['flows_with_rto']} ({x['small_flows_with_rto']}) "
              f"| {x['no_rto_avg_ms']:.3f}{d(x, 'no_rto_avg_ms')} / "
              f"{x['no_rto_small_avg_us']:.1f}{d(x, 'no_rto_small_avg_us')} / "
              f"{x['no_rto_small_p99_us']:.0f}{d(x, 'no_rto_small_p99_us')} / "
              f"{x['no_rto_large_avg_ms']:.3f}{d(x, 'no_rto_large_avg_ms')} "
              f"| {x['switch_drops']} ({x['hcp_drops_lcp_held']}) "
              f"| {x['lcp_pushed_out']} | {x['tlp_probes']} ({x['tlp_recoveries']}) "
              f"| {100 * x['lcp_byte_share']:.1f} % |")


if __name__ == "__main__":
    main()
