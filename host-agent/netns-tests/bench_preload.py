#!/usr/bin/env python3
"""Unmodified applications benchmark (run by `make bench`): programs through libflexpass
(`flexpass run` on both ends) vs the same programs on kernel TCP, on the same veth pair
between two namespaces, measured side by side in one run (the runs of the two alternate).

First the ratios of issue #28's acceptance, with the agents at BENCH_RATIO_ARGS:
  * iperf3 goodput at MTU 1500 and at MTU 9000 (goals: >= 0.8 and >= 0.9 x kernel TCP);
  * redis-benchmark SET and GET, 50 clients, requests/s (>= 0.8 x);
  * curl of 100 MB from `python3 -m http.server` (>= 0.8 x);
  * a 1-byte ping-pong over one connection, p50 round trip (<= 1.5 x kernel TCP's).
Each prints a line with the ratio; a missing program skips its row loudly.

Then, to locate the limit, iperf3 at each BENCH_LINK_GBPS (10 and 1) of the agents and at
the first with credits in batches of BENCH_CREDIT_BATCH (8; docs/datapath.md, "Credit
batches"), next to the agent's own goodput on the same path (`flexpass send` between the
same two agents' engines, no application socket: iperf3-through-libflexpass /
flexpass-send is the cost of the application data path, the AF_UNIX leg on the client
and the loopback TCP leg on the server) and redis-benchmark GET requests/s.

BENCH_LIMITS=0 runs the ratio rows only; BENCH_ROWS (comma-separated, of iperf1500, iperf9000,
redis, curl, pingpong) runs only those ratio rows. BENCH_BASELINE_BIN=path/to/flexpass (with its
libflexpass.so beside it) adds a third column to each ratio row, measured in the same
alternation: the programs through that build's agents (on UDP port 7990) and library, so an
old and a new build are compared on the same veth in one run; each run through libflexpass
then starts its own agents. BENCH_INPROC=1 adds another column: the programs with the
transport in their own processes (FLEXPASS_INPROC=1 on both ends, the agents with
--inproc-listen; the library's settings come from the environment, e.g.
FLEXPASS_CREDIT_BATCH=8). BENCH_VETH_GRO=1 turns GRO on on the veth pair. The JSON goes to stdout (one line) and to BENCH_JSON if set (`make bench`:
results/bench/preload.json). Needs root; skips loudly otherwise.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from floodnet import stop_processes

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
# The agents of the ratio rows (#28's acceptance): default settings but the base RTT.
RATIO_ARGS = os.environ.get("BENCH_RATIO_ARGS", "--link-gbps 10 --rtt-us 50").split()
REDIS_N = os.environ.get("BENCH_REDIS_N", "50000")
# BENCH_VETH_GRO=1: GRO on the veth pair (as on a physical NIC, where it is on by default):
# the receiving side then takes runs of UDP datagrams, and the programs' sockets (UDP_GRO)
# get them coalesced. Kernel TCP runs on the same pair. Off by default (veth's default), so
# the rows compare with the earlier runs (docs/datapath.md, "Batching").
VETH_GRO = os.environ.get("BENCH_VETH_GRO", "0") == "1"
PINGS = int(os.environ.get("BENCH_PINGS", "5000"))
CURL_MB = int(os.environ.get("BENCH_CURL_MB", "100"))
ROWS = [x.strip() for x in os.environ.get("BENCH_ROWS", "iperf1500,iperf9000,redis,curl,pingpong").split(",")
        if x.strip()]
# A second build (old vs new in one run): its agents listen on BASE_PORT, its socket files
# are TMP/<host>-base.sock. The variants of a ratio row: kernel TCP (False), through the
# baseline build ("base"), through BIN (True).
BASE_BIN = Path(os.environ["BENCH_BASELINE_BIN"]) if os.environ.get("BENCH_BASELINE_BIN") else None
BASE_PORT = "7990"
# BENCH_INPROC=1 adds a variant with the transport in the programs' processes (FLEXPASS_INPROC=1
# on both ends, agents with --inproc-listen; docs/datapath.md, "The core in the application's
# process"): "inproc", "inproc_ratio" in the JSON.
INPROC = os.environ.get("BENCH_INPROC") == "1"
VARIANTS = [False] + (["base"] if BASE_BIN else []) + [True] + (["inproc"] if INPROC else [])


def inproc_env():
    """FLEXPASS_INPROC=1 and the agents' link settings (RATIO_ARGS) for the library's flows."""
    a = RATIO_ARGS
    get = (lambda flag, d: a[a.index(flag) + 1] if flag in a else d)
    return dict(os.environ, FLEXPASS_INPROC="1", FLEXPASS_LINK_GBPS=get("--link-gbps", "10"),
                FLEXPASS_RTT_US=get("--rtt-us", "100"))


def sh(*a, check=True):
    r = subprocess.run(list(a), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(a)}: {r.stderr.strip()}")
    return r


def ns(host, *cmd, run=False, **kw):
    argv = ["ip", "netns", "exec", f"{P}{host}"]
    if run == "base":
        argv += [str(BASE_BIN), "run", "--agent-socket", str(TMP / f"{host}-base.sock"), "--"]
    elif run:
        argv += [str(BIN), "run", "--agent-socket", str(TMP / f"{host}.sock"), "--"]
    if run == "inproc":
        kw["env"] = inproc_env()
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


def start_agents(link, batch=1, args=None, build=True):
    """The agents of both hosts: BIN's, or with build="base" BASE_BIN's (on BASE_PORT)."""
    net = args if args is not None else ["--link-gbps", link, "--rtt-us", "50", "--credit-batch", str(batch)]
    if build == "base":
        agents = [ns(h, str(BASE_BIN), "agent", "--socket", str(TMP / f"{h}-base.sock"),
                     "--listen", f"0.0.0.0:{BASE_PORT}", *net) for h in IP]
        socks = [f"{h}-base.sock" for h in IP]
    else:
        extra = ["--inproc-listen"] if INPROC else []
        agents = [ns(h, str(BIN), "agent", "--socket", str(TMP / f"{h}.sock"), *net, *extra) for h in IP]
        socks = [f"{h}.sock" for h in IP]
    for name in socks:
        for _ in range(100):
            if (TMP / name).exists():
                break
            time.sleep(0.05)
    return agents, net


def stop_agents(agents):
    """Stop the agents and remove their API sockets (`start_agents` waits for new ones)."""
    stop_processes(reversed(agents))
    for h in IP:
        (TMP / f"{h}.sock").unlink(missing_ok=True)
        (TMP / f"{h}-base.sock").unlink(missing_ok=True)


def redis_rps(through):
    out = ns("a", "redis-benchmark", "-h", IP["b"], "-p", "6390", "-n", "5000", "-c", "10", "-t", "get", "--csv",
             run=through).communicate(timeout=300)[0]
    rows = [ln.split(",") for ln in out.splitlines() if ln.startswith('"GET"')]
    return float(rows[0][1].strip('"')) if rows else None


def missing(*programs):
    """The programs of a row that are not installed (the row is then skipped, loudly)."""
    gone = [p for p in programs if shutil.which(p) is None]
    if gone:
        print(f"SKIPPED libflexpass bench row: {', '.join(gone)} not installed (make deps as root installs "
              "iperf3 redis-server redis-tools curl)")
    return gone


def compare(runs):
    """Medians, ranges and libflexpass / kernel TCP of {through: [values]} (and the
    baseline build's, if measured)."""
    k, f = sorted(runs[False]), sorted(runs[True])
    mk, mf = k[len(k) // 2], f[len(f) // 2]
    r = {"kernel_tcp": round(mk, 3), "libflexpass": round(mf, 3),
         "kernel_tcp_min_max": [round(k[0], 3), round(k[-1], 3)],
         "libflexpass_min_max": [round(f[0], 3), round(f[-1], 3)],
         "ratio": round(mf / mk, 3) if mk else None}
    if runs.get("inproc"):
        i = sorted(runs["inproc"])
        mi = i[len(i) // 2]
        r.update({"inproc": round(mi, 3), "inproc_min_max": [round(i[0], 3), round(i[-1], 3)],
                  "inproc_ratio": round(mi / mk, 3) if mk else None})
    if runs.get("base"):
        b = sorted(runs["base"])
        mb = b[len(b) // 2]
        r.update({"baseline_libflexpass": round(mb, 3), "baseline_min_max": [round(b[0], 3), round(b[-1], 3)],
                  "baseline_ratio": round(mb / mk, 3) if mk else None})
    return r


def side_by_side(fn, args=None):
    """fn(through) on kernel TCP and through libflexpass, alternating, REPEAT times each.
    With a baseline build, each run through libflexpass gets its own agents (started with
    `args`, stopped after): only one XDP program can hold the veth, so two builds' agents
    side by side would not use the same datapath."""
    runs = {v: [] for v in VARIANTS}
    for _ in range(REPEAT):
        for through in VARIANTS:
            if not (BASE_BIN and through):
                runs[through].append(fn(through))
                continue
            agents, _ = start_agents(None, args=args, build=through)
            try:
                runs[through].append(fn(through))
                carried(agents, "a-base.sock" if through == "base" else "a.sock")
            finally:
                stop_agents(agents)
    return runs


def serve(cmd, port, through):
    """A server program in b (under flexpass run or not), once it listens."""
    p = ns("b", *cmd, run=through)
    wait_port("b", port)
    return p


def redis_set_get(through):
    """redis-benchmark SET and GET, 50 clients: requests/s of each."""
    srv = serve(["redis-server", "--port", "6391", "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                6391, through)
    try:
        out, err = ns("a", "redis-benchmark", "-h", IP["b"], "-p", "6391", "-n", REDIS_N, "-c", "50",
                      "-t", "set,get", "--csv", run=through).communicate(timeout=600)
    finally:
        stop_processes([srv])
    rows = {ln.split(",")[0].strip('"'): float(ln.split(",")[1].strip('"')) for ln in out.splitlines()
            if ln.startswith('"SET"') or ln.startswith('"GET"')}
    if set(rows) != {"SET", "GET"}:
        raise RuntimeError(f"redis-benchmark: {out} {err}")
    return rows


def curl_once(through):
    """curl of a CURL_MB file from `python3 -m http.server`: Gbit/s."""
    srv = serve([sys.executable, "-m", "http.server", "8010", "--bind", "0.0.0.0", "--directory",
                 str(TMP / "www")], 8010, through)
    try:
        cli = ns("a", "curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
                 f"http://{IP['b']}:8010/blob.bin", run=through)
        out, err = cli.communicate(timeout=300)
    finally:
        stop_processes([srv])
    if cli.returncode != 0:
        raise RuntimeError(f"curl failed: {err}")
    size, seconds = out.split()
    if int(size) != CURL_MB << 20:
        raise RuntimeError(f"curl got {size} bytes of {CURL_MB << 20}")
    return int(size) * 8 / float(seconds) / 1e9


PINGPONG = r'''
import json, socket, sys, time
role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(1)
        if not d: break
        c.sendall(d)
    sys.exit(0)
n = int(sys.argv[4])
s = socket.create_connection((sys.argv[3], port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtt = []
for i in range(n + 200):
    t = time.perf_counter_ns(); s.sendall(b"x")
    assert s.recv(1) == b"x"
    rtt.append(time.perf_counter_ns() - t)
rtt = sorted(rtt[200:])
print(json.dumps({"p50_us": rtt[n // 2] / 1e3, "p99_us": rtt[int(n * 0.99)] / 1e3}))
'''


def pingpong_once(through):
    """PINGS round trips of one byte each way over one connection (after 200 for warm-up):
    the p50 in µs."""
    app = TMP / "pingpong.py"
    app.write_text(PINGPONG)
    srv = serve([sys.executable, str(app), "server", "8020"], 8020, through)
    try:
        out, err = ns("a", sys.executable, str(app), "client", "8020", IP["b"], str(PINGS),
                      run=through).communicate(timeout=300)
    finally:
        stop_processes([srv])
    if not out.strip():
        raise RuntimeError(f"ping-pong failed: {err}")
    return json.loads(out)["p50_us"]


def carried(agents, sock="a.sock"):
    """Connections agent a carried over FlexPass and sent to kernel TCP ("direct"): a row
    through libflexpass must have none of the second."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(TMP / sock))
    s.sendall(b'{"op":"status"}\n')
    t = json.loads(s.makefile().readline())["tcp"]
    s.close()
    if t["direct"]:
        raise RuntimeError(f"{t['direct']} connections through libflexpass went to kernel TCP: {t['no_agent_peers']}")
    return t["opened_flexpass"]


def handed_over():
    """Connections b's agent handed to in-process listeners (BENCH_INPROC): the in-process
    rows must have some, else their servers went through the agent."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(TMP / "b.sock"))
    s.sendall(b'{"op":"status"}\n')
    n = json.loads(s.makefile().readline())["endpoint"]["handed_over"]
    s.close()
    return n


def set_mtu(mtu):
    for h in IP:
        sh("ip", "-n", f"{P}{h}", "link", "set", f"{P}v{h}", "mtu", str(mtu))


def ratios():
    """#28's acceptance rows: libflexpass / kernel TCP, measured side by side."""
    r = {"agent_args": " ".join(RATIO_ARGS), "repeat": REPEAT, "iperf3_seconds": float(SECONDS)}
    goals = {}
    for mtu in (1500, 9000):
        key = f"iperf3_mtu{mtu}_gbps"
        if f"iperf{mtu}" not in ROWS:
            continue
        if missing("iperf3"):
            r[key] = "skipped: iperf3 not installed"
            continue
        set_mtu(mtu)
        args = RATIO_ARGS + ["--mtu", str(mtu)]
        agents = [] if BASE_BIN else start_agents(None, args=args)[0]
        try:
            r[key] = compare(side_by_side(iperf_once, args))
            if not BASE_BIN:
                r[key]["connections_over_flexpass"] = carried(agents)
            if INPROC:
                r[key]["inproc_handed_over"] = handed_over()
        finally:
            stop_agents(agents)
            set_mtu(1500)
        goals[key] = (">=", 0.8 if mtu == 1500 else 0.9)
    agents = [] if BASE_BIN else start_agents(None, args=RATIO_ARGS)[0]
    try:
        if "redis" not in ROWS:
            pass
        elif not missing("redis-server", "redis-benchmark"):
            runs = side_by_side(redis_set_get, RATIO_ARGS)
            for op in ("SET", "GET"):
                key = f"redis_{op.lower()}_50_clients_rps"
                r[key] = compare({t: [x[op] for x in v] for t, v in runs.items()})
                goals[key] = (">=", 0.8)
        else:
            r["redis"] = "skipped: redis-server or redis-benchmark not installed"
        key = f"curl_{CURL_MB}mb_gbps"
        if "curl" not in ROWS:
            pass
        elif not missing("curl"):
            www = TMP / "www"
            www.mkdir(exist_ok=True)
            with open(www / "blob.bin", "wb") as f:
                for _ in range(CURL_MB):
                    f.write(os.urandom(1 << 20))
            r[key] = compare(side_by_side(curl_once, RATIO_ARGS))
            goals[key] = (">=", 0.8)
        else:
            r[key] = "skipped: curl not installed"
        if "pingpong" in ROWS:
            r["pingpong_1byte_p50_us"] = compare(side_by_side(pingpong_once, RATIO_ARGS))
            goals["pingpong_1byte_p50_us"] = ("<=", 1.5)
        if not BASE_BIN:
            r["connections_over_flexpass"] = carried(agents)
        if INPROC:
            r["inproc_handed_over"] = handed_over()
    finally:
        stop_agents(agents)
    for key, (cmp, goal) in goals.items():
        row = r[key]
        row["goal"] = f"libflexpass / kernel TCP {cmp} {goal}"
        row["met"] = row["ratio"] >= goal if cmp == ">=" else row["ratio"] <= goal
        base = (f", baseline build {row['baseline_libflexpass']} (ratio {row['baseline_ratio']})"
                if "baseline_ratio" in row else "")
        if "inproc_ratio" in row:
            base += f", in-process {row['inproc']} (ratio {row['inproc_ratio']})"
        print(f"libflexpass bench: {key}: kernel TCP {row['kernel_tcp']}, libflexpass {row['libflexpass']}, "
              f"ratio {row['ratio']} (goal {cmp} {goal}: {'met' if row['met'] else 'NOT met'}){base}", flush=True)
    return r


def main():
    if os.geteuid() != 0:
        print("SKIPPED libflexpass bench: not root (network namespaces need CAP_NET_ADMIN)")
        return 0
    if not BIN.exists() or not BIN.with_name("libflexpass.so").exists():
        print(f"SKIPPED libflexpass bench: {BIN} or libflexpass.so not built")
        return 0
    agents = []
    gro = VETH_GRO and not missing("ethtool")
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
            if gro:
                sh("ip", "netns", "exec", f"{P}{h}", "ethtool", "-K", f"{P}v{h}", "gro", "on")
        summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "veth_gro": gro,
                   "ratios": ratios()}
        if os.environ.get("BENCH_LIMITS", "1") != "0" and not missing("iperf3"):
            limits(summary)
        print("libflexpass bench:", json.dumps(summary))
        if os.environ.get("BENCH_JSON"):
            Path(os.environ["BENCH_JSON"]).write_text(json.dumps(summary, indent=1) + "\n")
        return 0
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        stop_agents(agents)
        for h in IP:
            sh("ip", "netns", "del", f"{P}{h}", check=False)
        shutil.rmtree(TMP, ignore_errors=True)


def limits(summary):
    """iperf3 per agent setting, next to the engine alone (see the module's doc)."""
    agents = []
    try:
        kernel, kernel_range = median_run(lambda: iperf_once(False))
        summary.update({
            "seconds_per_run": float(SECONDS), "repeat": REPEAT,
            "iperf3_kernel_tcp_gbps": round(kernel, 3), "iperf3_kernel_tcp_min_max": kernel_range,
            "goal": "iperf3 through libflexpass >= 0.8 x kernel TCP",
        })
        redis_ok = shutil.which("redis-server") and shutil.which("redis-benchmark")
        if redis_ok:
            redis = ns("b", "redis-server", "--port", "6390", "--save", "", "--appendonly", "no",
                       "--protected-mode", "no")
            wait_port("b", 6390)
            summary["redis_get_rps_kernel_tcp"] = redis_rps(False)
            stop_processes([redis])
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
                    stop_processes([redis])
                summary[f"agents_link_gbps_{link}" + (f"_credit_batch_{batch}" if batch > 1 else "")] = r
            finally:
                stop_agents(agents)
        best = max((v for k, v in summary.items() if k.startswith("agents_link_gbps_")),
                   key=lambda r: r["ratio_libflexpass_over_kernel_tcp"])
        summary["best_ratio_libflexpass_over_kernel_tcp"] = best["ratio_libflexpass_over_kernel_tcp"]
    finally:
        stop_agents(agents)


if __name__ == "__main__":
    sys.exit(main())
