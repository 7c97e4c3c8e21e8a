#!/usr/bin/env python3
"""Unmodified applications benchmark (run by `make bench`): iperf3 through libflexpass
(`flexpass run`) vs iperf3 on kernel TCP, on the same veth pair between two namespaces.

Also reported, to locate the limit: the agent's own goodput on the same path (`flexpass
send` between the same two agents' engines, no application socket), so
iperf3-through-libflexpass / flexpass-send is the cost of the application data path
(AF_UNIX leg on the client, loopback TCP leg on the server), and redis-benchmark GET
requests/s both ways (small request/response latency). The agents run at each
BENCH_LINK_GBPS (10 and 1), and at the first with credits in batches of BENCH_CREDIT_BATCH
(8; docs/datapath.md, "Credit batches"). Needs root, iperf3 (and
redis-benchmark for that row); skips loudly otherwise.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("FLEXPASS_BIN", ROOT / "target" / "release" / "flexpass"))
P = f"fpq{os.getpid() % 10000}"
IP = {"a": "10.82.0.1", "b": "10.82.0.2"}
SECONDS = os.environ.get("BENCH_SECONDS", "4")
REPEAT = int(os.environ.get("BENCH_REPEAT", 3))
# The agents' --link-gbps values to run (comma-separated). The credit shaper paces credits
# up to the configured link's rate: 10 Gbit/s worth is ~770 000 credits/s, more than two
# single-threaded agents on this VM can receive, so a receiver stops crediting while its
# receive buffer is a quarter full (docs/datapath.md) and the credit feedback throttles the
# flows; at 1 Gbit/s they keep up.
LINKS = [x.strip() for x in os.environ.get("BENCH_LINK_GBPS", "10,1").split(",") if x.strip()]
# One more run at the first link rate with credits paced in batches (--credit-batch,
# docs/datapath.md "Credit batches"); 1 skips it.
CREDIT_BATCH = int(os.environ.get("BENCH_CREDIT_BATCH", "8"))
TMP = Path(f"/tmp/{P}")


def sh(*a, check=True):
    r = subprocess.run(list(a), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(a)}: {r.stderr.strip()}")
    return r


def ns(host, *cmd, run=False, **kw):
    argv = ["ip", "netns", "exec", f"{P}{host}"]
    if run:
        argv += [str(BIN), "run", "--agent-socket", str(TMP / f"{host}.sock"), "--"]
    return subprocess.Popen(argv + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_port(host, port):
    for _ in range(200):
        if sh("ip", "netns", "exec", f"{P}{host}", "ss", "-Hltn", f"sport = :{port}", check=False).stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port}")


def iperf_once(through, reverse=False):
    srv = ns("b", "iperf3", "-s", "-1", "-p", "5201", run=through)
    wait_port("b", 5201)
    cli = ns("a", "iperf3", "-c", IP["b"], "-p", "5201", "-t", SECONDS, "--json", *(["-R"] if reverse else []),
             run=through)
    out, err = cli.communicate(timeout=120)
    srv.communicate(timeout=30)
    if cli.returncode != 0:
        raise RuntimeError(f"iperf3 failed: {err or out}")
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def cpu_seconds(pid):
    """utime + stime of a process (the agents: `ip netns exec` execs them, same pid)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_agent_cpu(fn, agents):
    """Run fn; also the agents' CPU use during it, in cores (CPU seconds per wall second)."""
    before = [cpu_seconds(p.pid) for p in agents]
    t = time.time()
    r = fn()
    wall = time.time() - t
    return r, [round((cpu_seconds(p.pid) - b) / wall, 2) for p, b in zip(agents, before)]


def median_run(fn):
    runs = sorted(fn() for _ in range(REPEAT))
    return runs[len(runs) // 2], [round(runs[0], 3), round(runs[-1], 3)]


def agent_send_once(net, size=300_000_000):
    """The engine alone on the same path and settings: `flexpass send` to `flexpass serve`
    (their own UDP ports next to the agents'), no application socket in between."""
    srv = ns("b", str(BIN), "serve", "--listen", "0.0.0.0:7892", "--count", "1", *net)
    time.sleep(0.3)
    t = time.time()
    send = ns("a", str(BIN), "send", "--to", f"{IP['b']}:7892", "--size", str(size), "--bind", "0.0.0.0:7893", *net)
    out, err = send.communicate(timeout=300)
    elapsed = time.time() - t
    srv.communicate(timeout=60)
    if send.returncode != 0:
        raise RuntimeError(f"flexpass send failed: {err}")
    return json.loads(out.splitlines()[0])["bytes"] * 8 / elapsed / 1e9


def rcvbuf_errors():
    """UDP receive-buffer drops in both namespaces so far."""
    n = 0
    for h in IP:
        lines = [ln.split() for ln in sh("ip", "netns", "exec", f"{P}{h}", "cat", "/proc/net/snmp").stdout.splitlines()
                 if ln.startswith("Udp:")]
        n += int(lines[1][lines[0].index("RcvbufErrors")])
    return n


def start_agents(link, batch=1):
    net = ["--link-gbps", link, "--rtt-us", "50", "--credit-batch", str(batch)]
    agents = [ns(h, str(BIN), "agent", "--socket", str(TMP / f"{h}.sock"), *net) for h in IP]
    for h in IP:
        for _ in range(100):
            if (TMP / f"{h}.sock").exists():
                break
            time.sleep(0.05)
    return agents, net


def stop(procs):
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    for h in IP:
        (TMP / f"{h}.sock").unlink(missing_ok=True)


def redis_rps(through):
    out = ns("a", "redis-benchmark", "-h", IP["b"], "-p", "6390", "-n", "5000", "-c", "10", "-t", "get", "--csv",
             run=through).communicate(timeout=300)[0]
    rows = [ln.split(",") for ln in out.splitlines() if ln.startswith('"GET"')]
    return float(rows[0][1].strip('"')) if rows else None


def main():
    if os.geteuid() != 0:
        print("SKIPPED libflexpass bench: not root (network namespaces need CAP_NET_ADMIN)")
        return 0
    if shutil.which("iperf3") is None:
        print("SKIPPED libflexpass bench: iperf3 not installed (make deps as root installs it)")
        return 0
    if not BIN.exists() or not BIN.with_name("libflexpass.so").exists():
        print(f"SKIPPED libflexpass bench: {BIN} or libflexpass.so not built")
        return 0
    agents = []
    try:
        TMP.mkdir(exist_ok=True)
        for h in IP:
            sh("ip", "netns", "add", f"{P}{h}")
            sh("ip", "-n", f"{P}{h}", "link", "set", "lo", "up")
        sh("ip", "link", "add", f"{P}va", "type", "veth", "peer", "name", f"{P}vb")
        for h in IP:
            sh("ip", "link", "set", f"{P}v{h}", "netns", f"{P}{h}")
            sh("ip", "-n", f"{P}{h}", "addr", "add", f"{IP[h]}/24", "dev", f"{P}v{h}")
            sh("ip", "-n", f"{P}{h}", "link", "set", f"{P}v{h}", "up")
        kernel, kernel_range = median_run(lambda: iperf_once(False))
        summary = {
            "seconds_per_run": float(SECONDS), "repeat": REPEAT,
            "iperf3_kernel_tcp_gbps": round(kernel, 3), "iperf3_kernel_tcp_min_max": kernel_range,
            "goal": "iperf3 through libflexpass >= 0.8 x kernel TCP",
        }
        redis_ok = shutil.which("redis-server") and shutil.which("redis-benchmark")
        if redis_ok:
            redis = ns("b", "redis-server", "--port", "6390", "--save", "", "--appendonly", "no",
                       "--protected-mode", "no")
            wait_port("b", 6390)
            summary["redis_get_rps_kernel_tcp"] = redis_rps(False)
            stop([redis])
        runs = [(link, 1) for link in LINKS] + ([(LINKS[0], CREDIT_BATCH)] if CREDIT_BATCH > 1 else [])
        for link, batch in runs:
            agents, net = start_agents(link, batch)
            try:
                drops = rcvbuf_errors()
                fp, fp_range = median_run(lambda: iperf_once(True))
                _, fp_cpu = with_agent_cpu(lambda: iperf_once(True), agents)
                fp_r, fp_r_range = median_run(lambda: iperf_once(True, reverse=True))
                engine, engine_range = median_run(lambda: agent_send_once(net))
                r = {
                    "iperf3_libflexpass_gbps": round(fp, 3), "iperf3_libflexpass_min_max": fp_range,
                    "iperf3_libflexpass_reverse_gbps": round(fp_r, 3),
                    "iperf3_libflexpass_reverse_min_max": fp_r_range,
                    "ratio_libflexpass_over_kernel_tcp": round(fp / kernel, 3),
                    "ratio_reverse_over_kernel_tcp": round(fp_r / kernel, 3),
                    "agent_engine_flexpass_send_gbps": round(engine, 3), "agent_engine_min_max": engine_range,
                    "ratio_libflexpass_over_agent_engine": round(fp / engine, 3),
                    "agent_cpu_cores_during_libflexpass_iperf3_a_b": fp_cpu,
                    "udp_rcvbuf_drops": rcvbuf_errors() - drops,
                }
                if redis_ok:
                    redis = ns("b", "redis-server", "--port", "6390", "--save", "", "--appendonly", "no",
                               "--protected-mode", "no", run=True)
                    wait_port("b", 6390)
                    r["redis_get_rps_libflexpass"] = redis_rps(True)
                    stop([redis])
                summary[f"agents_link_gbps_{link}" + (f"_credit_batch_{batch}" if batch > 1 else "")] = r
            finally:
                stop(agents)
        best = max((v for k, v in summary.items() if k.startswith("agents_link_gbps_")),
                   key=lambda r: r["ratio_libflexpass_over_kernel_tcp"])
        summary["best_ratio_libflexpass_over_kernel_tcp"] = best["ratio_libflexpass_over_kernel_tcp"]
        print("libflexpass bench:", json.dumps(summary))
        return 0
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        stop(agents)
        for h in IP:
            sh("ip", "netns", "del", f"{P}{h}", check=False)
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
