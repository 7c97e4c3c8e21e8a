#!/usr/bin/env python3
"""Host-agent benchmark on a veth pair between two namespaces (run by `make bench`).

Reports: goodput of one FlexPass flow vs kernel TCP on the same path (ratio), agent CPU time
per data packet (sender) and per credit (receiver), and the credit pacing error (p50/p99 of
actual credit send time minus the pacer's due time). Needs root; skips loudly otherwise.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("FLEXPASS_BIN", ROOT / "target" / "release" / "flexpass"))
P = f"fpb{os.getpid() % 10000}"
SIZE = int(os.environ.get("BENCH_BYTES", 200_000_000))
LINK_GBPS = os.environ.get("BENCH_LINK_GBPS", "10")


def sh(*a, check=True):
    r = subprocess.run(list(a), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(a)}: {r.stderr.strip()}")
    return r


def start(host, *args):
    return subprocess.Popen(["ip", "netns", "exec", f"{P}{host}", str(BIN), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p):
    """(stdout, stderr, CPU seconds, exit code). `ip netns exec` execs the agent, so the
    child's rusage is the agent's own."""
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return out, err, ru.ru_utime + ru.ru_stime, p.returncode


def main():
    if os.geteuid() != 0:
        print("SKIPPED agent bench: not root (network namespaces need CAP_NET_ADMIN)")
        return 0
    if not BIN.exists():
        print(f"SKIPPED agent bench: {BIN} not built")
        return 0
    try:
        for h in ("a", "b"):
            sh("ip", "netns", "add", f"{P}{h}")
            sh("ip", "netns", "exec", f"{P}{h}", "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", f"{P}va", "type", "veth", "peer", "name", f"{P}vb")
        for h, dev, ip in (("a", f"{P}va", "10.78.0.1"), ("b", f"{P}vb", "10.78.0.2")):
            sh("ip", "link", "set", dev, "netns", f"{P}{h}")
            sh("ip", "netns", "exec", f"{P}{h}", "ip", "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "netns", "exec", f"{P}{h}", "ip", "link", "set", dev, "up")
        net = ["--link-gbps", LINK_GBPS, "--rtt-us", "50"]
        results = {}
        for transport, extra in (("flexpass", []), ("tcp", []), ("flexpass-spin", ["--spin-us", "30"])):
            run_net = net + extra
            transport_arg = transport.split("-")[0]
            srv = start("b", "serve", "--listen", "0.0.0.0:7890", "--tcp", "0.0.0.0:7891", "--count", "1", *run_net)
            time.sleep(0.3)
            port = 7891 if transport_arg == "tcp" else 7890
            t0 = time.time()
            out, err, cpu, rc = finish(start("a", "send", "--to", f"10.78.0.2:{port}", "--transport", transport_arg,
                                             "--size", str(SIZE), *run_net))
            elapsed = time.time() - t0
            _, serr, server_cpu, _ = finish(srv)
            if rc != 0:
                print(f"agent bench: {transport} send failed: {err}", file=sys.stderr)
                return 1
            results[transport] = {"gbps": SIZE * 8 / elapsed / 1e9, "sender_cpu_s": cpu, "server_cpu_s": server_cpu,
                                  "record": json.loads(out.splitlines()[0]),
                                  "server_stats": serr.strip().splitlines()[-1] if serr.strip() else ""}
        fp = results["flexpass"]
        packets = fp["record"]["packets_proactive"] + fp["record"]["packets_reactive"]
        stats = json.loads(fp["server_stats"].split("flexpass serve: ", 1)[1])
        credits = fp["record"]["credits_received"]
        summary = {
            "bytes": SIZE,
            "flexpass_gbps": round(fp["gbps"], 3),
            "kernel_tcp_gbps": round(results["tcp"]["gbps"], 3),
            "goodput_ratio_flexpass_over_tcp": round(fp["gbps"] / results["tcp"]["gbps"], 3),
            "sender_cpu_us_per_data_packet": round(fp["sender_cpu_s"] * 1e6 / max(packets, 1), 3),
            "data_packets": packets,
            "credits_received_by_sender": credits,
            "receiver_cpu_us_per_packet_handled": round(fp["server_cpu_s"] * 1e6 / max(packets + credits, 1), 3),
            "credit_pacing_error_ns_p50_p99_max": stats.get("credit_pacing_error_ns"),
        }
        spin = results["flexpass-spin"]
        spin_stats = json.loads(spin["server_stats"].split("flexpass serve: ", 1)[1])
        summary["with_spin_30us"] = {
            "flexpass_gbps": round(spin["gbps"], 3),
            "credit_pacing_error_ns_p50_p99_max": spin_stats.get("credit_pacing_error_ns"),
            "receiver_cpu_s": round(spin["server_cpu_s"], 3),
            "receiver_cpu_s_without_spin": round(fp["server_cpu_s"], 3),
        }
        print("agent bench:", json.dumps(summary))
        return 0
    finally:
        for h in ("a", "b"):
            sh("ip", "netns", "del", f"{P}{h}", check=False)


if __name__ == "__main__":
    sys.exit(main())
