#!/usr/bin/env python3
"""The host agent under floods, measured (docs/reliability.md; `make bench-floods`, root).

Same network as the flood tests (floodnet.py). For each cookie mode (auto, always, off) and
each flood rate, `flexpass agent` on h3 serves legitimate flows from h1 (every transport,
FLOODS_MESSAGES flows of FLOODS_SIZE bytes each, one after the other) while flood_gen.py
sends spoofed HELLOs and CREDIT_REQUESTs from random sources for the whole run; then a
forged credit flood against a sender at each rate. Prints one JSON line per run and a
Markdown table of each part.

Environment: FLOODS_RATES (default "0,25000,50000,100000"), FLOODS_MODES ("auto,always,off"),
FLOODS_SIZE (200000), FLOODS_MESSAGES (10), FLOODS_CREDIT_RATES ("0,20000,100000"),
FLEXPASS_BIN. The JSON lines also list every flow slower than 100 ms (HELLO retransmissions,
cookie retries, timeouts) and the machine's 1-minute load average when the run started.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floodnet as fn  # noqa: E402

RATES = [int(x) for x in os.environ.get("FLOODS_RATES", "0,25000,50000,100000").split(",") if x]
MODES = [x for x in os.environ.get("FLOODS_MODES", "auto,always,off").split(",") if x]
SIZE = int(os.environ.get("FLOODS_SIZE", 200_000))
MESSAGES = int(os.environ.get("FLOODS_MESSAGES", 10))
CREDIT_RATES = [int(x) for x in os.environ.get("FLOODS_CREDIT_RATES", "0,20000,100000").split(",") if x]
TRANSPORTS = ["flexpass", "expresspass", "dctcp"]
SLOW_MS = 100  # flows slower than this are listed one by one in the JSON lines


def cpu_seconds(pid):
    """utime + stime of a process (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hello_run(mode, rate, sha):
    load = os.getloadavg()[0]
    net = fn.Net()
    try:
        net.up()
        agent = net.agent("--hello-cookies", mode)
        rss = fn.Sampler(agent.pid)
        rss.start()
        time.sleep(0.3)
        rss0 = fn.rss_kb(agent.pid)
        st0 = net.status()["endpoint"]
        drops0 = fn.udp_rcvbuf_errors(net, "h3")
        gen = None
        cpu0, w0 = cpu_seconds(agent.pid), time.time()
        if rate:
            gen, _ = net.flood("hello", rate, 3600)
            time.sleep(1.5)
        acc = fn.Acceptor(net.sock, len(TRANSPORTS) * MESSAGES)
        acc.start()
        t0 = time.time()
        sent, failed = [], []
        for t in TRANSPORTS:
            try:
                sent += fn.legit_flows(net, [t], SIZE, MESSAGES, timeout=300)
            except Exception as e:  # a refused / evicted flow fails its `send`
                failed.append(f"{t}: {str(e)[-300:]}")
        acc.join(timeout=10)
        elapsed = time.time() - t0
        st = net.status()
        cpu, wall = cpu_seconds(agent.pid) - cpu0, time.time() - w0
        offered = None
        if gen:
            gen.terminate()
            gout, _ = gen.communicate(timeout=30)
            done = [json.loads(x) for x in gout.splitlines() if '"done"' in x]
            offered = done[0]["rate"] if done else None
        rss.stop.set()
        ep = st["endpoint"]
        ok = [f for f in acc.flows if f["bytes"] == SIZE and f["sha256"] == sha]
        rec = {"part": "hello", "mode": mode, "target_per_s": rate, "offered_per_s": offered,
               "agent_received_per_s": round((ep["datagrams_in"] - st0["datagrams_in"]) / (elapsed + 1.5 * bool(rate))),
               "kernel_drops": fn.udp_rcvbuf_errors(net, "h3") - drops0,
               "rss_kb": [rss0, rss.max()],
               "agent_cpu_share": round(cpu / wall, 2),
               "agent_us_per_datagram": round(cpu / max(1, ep["datagrams_in"] - st0["datagrams_in"]) * 1e6, 2), "half_open_peak": ep["half_open_peak"],
               "receivers_end": st["flows"]["receivers"],
               "cookies_sent": ep["cookies_sent"], "cookies_valid": ep["cookies_valid"],
               "evicted": ep["half_open_evicted"], "expired": ep["half_open_expired"],
               "half_open_credits_per_s": round(ep["half_open_credits_sent"] / (elapsed + 1.5 * bool(rate))),
               "flows_ok": len(ok), "flows": len(TRANSPORTS) * MESSAGES, "failed": failed,
               "fct_ms": {}}
        for t in TRANSPORTS:
            xs = [r["fct_us"] / 1000 for r in sent if r["transport"] == t]
            if xs:
                rec["fct_ms"][t] = [round(fn.percentile(xs, 0.5), 1), round(fn.percentile(xs, 0.99), 1)]
        rec["hello_retransmissions"] = sum(r.get("hello_retransmissions", 0) for r in sent)
        rec["cookie_retries"] = sum(r.get("cookie_retries", 0) for r in sent)
        rec["timeouts"] = sum(r.get("timeouts", 0) for r in sent)
        # The tail: every flow slower than SLOW_MS, with what it went through.
        rec["slow"] = [{"transport": r["transport"], "fct_ms": round(r["fct_us"] / 1000, 1),
                        "hello_retransmissions": r.get("hello_retransmissions"),
                        "cookie_retries": r.get("cookie_retries"), "timeouts": r.get("timeouts"),
                        "retransmissions": r.get("retransmissions")}
                       for r in sent if r["fct_us"] / 1000 > SLOW_MS]
        rec["loadavg_1min"] = round(load, 2)
        return rec
    finally:
        net.down()


def credit_run(rate, size=40_000_000):
    net = fn.Net()
    try:
        net.up()
        net.agent()
        acc = fn.Acceptor(net.sock, 1)
        acc.start()
        gen = None
        if rate:
            gen, _ = net.flood("credit", rate, 3600)
        dev = f"{net.p}h1a"
        tx0, t0 = fn.link_tx_bytes(net, "h1", dev), time.time()
        p = net.spawn("h1", "send", "--to", f"{net.ip['h3']}:{fn.PORT}", "--transport", "expresspass",
                      "--size", str(size), "--timeout-s", "120", *fn.NET_ARGS)
        out, err = p.communicate(timeout=300)
        tx1, t1 = fn.link_tx_bytes(net, "h1", dev), time.time()
        acc.join(timeout=30)
        offered = None
        if gen:
            gen.terminate()
            gout, _ = gen.communicate(timeout=30)
            done = [json.loads(x) for x in gout.splitlines() if '"done"' in x]
            offered = done[0]["rate"] if done else None
        stats = json.loads(err.strip().splitlines()[-1].split("flexpass send: ", 1)[1])
        recs = fn.records(out)
        return {"part": "credit", "forged_per_s": rate, "offered_per_s": offered, "completed": p.returncode == 0 and bool(recs),
                "byte_exact": bool(acc.flows) and acc.flows[0]["sha256"] == fn.pattern_sha(size),
                "sender_wire_mbit_s": round((tx1 - tx0) * (1538 / 1514) * 8 / (t1 - t0) / 1e6, 1),
                "link_mbit_s": fn.RATE_MBIT, "fct_s": round(recs[0]["fct_us"] / 1e6, 2) if recs else None,
                "credits_in_rate_limited": stats["credits_in_rate_limited"]}
    finally:
        net.down()


def main():
    reason = fn.skip_reason()
    if reason:
        print(f"SKIPPED flood bench: {reason}")
        return 0
    sha = fn.pattern_sha(SIZE)
    hello = []
    for mode in MODES:
        for rate in RATES:
            r = hello_run(mode, rate, sha)
            print(json.dumps(r), flush=True)
            hello.append(r)
    credit = []
    for rate in CREDIT_RATES:
        r = credit_run(rate)
        print(json.dumps(r), flush=True)
        credit.append(r)
    print(f"\nSpoofed HELLO + CREDIT_REQUEST flood ({SIZE} B flows, {MESSAGES} per transport; FCT p50/p99 ms)\n")
    print("| cookies | flood asked /s | sent /s | agent got /s | agent CPU (µs/datagram) | kernel drops | RSS kB (before → peak) | half-open peak | cookies sent | flows ok | FlexPass | ExpressPass | DCTCP |")
    print("|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|---|---|")
    for r in hello:
        f = r["fct_ms"]
        cell = lambda t: "/".join(map(str, f[t])) if t in f else "—"
        print(f"| {r['mode']} | {r['target_per_s']} | {r['offered_per_s'] or 0} | {r['agent_received_per_s']} | {round(100 * r['agent_cpu_share'])} % ({r['agent_us_per_datagram']}) | {r['kernel_drops']} | "
              f"{r['rss_kb'][0]} → {r['rss_kb'][1]} | {r['half_open_peak']} | {r['cookies_sent']} | "
              f"{r['flows_ok']}/{r['flows']} | {cell('flexpass')} | {cell('expresspass')} | {cell('dctcp')} |")
    print("\nForged credit flood against an ExpressPass sender (40 MB, link 200 Mbit/s)\n")
    print("| forged credits asked /s | sent /s | sender wire Mbit/s | dropped on arrival | FCT s | byte-exact |")
    print("|---:|---:|---:|---:|---:|---|")
    for r in credit:
        print(f"| {r['forged_per_s']} | {r['offered_per_s'] or 0} | {r['sender_wire_mbit_s']} | {r['credits_in_rate_limited']} | "
              f"{r['fct_s']} | {r['byte_exact']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
