#!/usr/bin/env python3
"""Host-agent benchmark on a veth pair between two namespaces (run by `make bench`).

Reports: goodput of one FlexPass flow vs kernel TCP on the same path (ratio), agent CPU time
per data packet (sender) and per credit (receiver), and the credit pacing error (p50/p99 of
actual credit send time minus the pacer's due time); then the same path with jumbo frames
(veth MTU 9000, `--mtu 9000`): FlexPass and kernel TCP goodput at 9000 and the ratios to
1500. The FlexPass runs use the kernel UDP socket (`--datapath udp`); the same flow over
AF_XDP (`--datapath xdp`, docs/datapath.md) is measured beside it at both MTUs (at 9000
with multi-buffer frames). At 1500 both datapaths are also measured with credits paced in
batches (`--credit-batch`, BENCH_CREDIT_BATCH, default 8), and one ExpressPass flow (every
data packet credit-scheduled) with and without batches, and over AF_XDP with batches; at
9000 ExpressPass over both datapaths. Needs root;
skips loudly otherwise.
BENCH_JUMBO=0 skips the jumbo runs; BENCH_SET=datapath runs only what the datapath
comparison needs (TCP, UDP and AF_XDP at 1500 and 9000).

Also measured first: how often a thread that never sleeps is held up for more than 10 µs
(`stalls_over_10us_of_a_spinning_thread`: vCPU preemption and host interrupts, a floor under
the pacing error's tail that no agent can get below).

Many idle flows (docs/agent-api.md, "Scale"; BENCH_SET=idle_flows runs only this): one
`flexpass serve` holds 100, then 10 000 (BENCH_IDLE_FLOWS) concurrent idle flows from
`flexpass workload --idle` clients; at each level: its RSS per idle flow, its CPU per
second and per event-loop turn while all flows are idle, and its CPU per datagram of one
active 50 MB flow (BENCH_IDLE_ACTIVE_BYTES) beside them; ratios 10 000 / 100 in one run.
BENCH_SERVE_BIN measures another build of the serving agent (e.g. main's, for before/after;
turns are counted only by agents with `serve --stats-ms`).
"""

import gc
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
IDLE_BYTES = int(os.environ.get("BENCH_IDLE_BYTES", 20_000_000))
SPIN_US = os.environ.get("BENCH_SPIN_US", "20")
# BENCH_GSO=0 skips the run without UDP GSO (for agents built without --no-gso).
GSO = os.environ.get("BENCH_GSO", "1") != "0"
# Runs per configuration (the median goodput run is reported): one flow's goodput varies a
# lot from run to run on 2 shared cores.
REPEAT = int(os.environ.get("BENCH_REPEAT", 3))
JUMBO = os.environ.get("BENCH_JUMBO", "1") != "0"
ONLY_DATAPATH = os.environ.get("BENCH_SET", "all") == "datapath"
# Credits paced in batches (--credit-batch; docs/datapath.md "Credit batches"), beside the
# papers' one-by-one pacing.
CREDIT_BATCH = os.environ.get("BENCH_CREDIT_BATCH", "8")
ONLY_IDLE_FLOWS = os.environ.get("BENCH_SET", "all") == "idle_flows"
SERVE_BIN = Path(os.environ.get("BENCH_SERVE_BIN", BIN))
IDLE_FLOWS = int(os.environ.get("BENCH_IDLE_FLOWS", 10_000))
IDLE_LOW = 100
IDLE_ACTIVE_BYTES = int(os.environ.get("BENCH_IDLE_ACTIVE_BYTES", 50_000_000))
IDLE_TRANSPORT = os.environ.get("BENCH_IDLE_TRANSPORT", "flexpass")
# Idle flows opened at once (`workload --idle-wave`): each opening credit-based receiver
# credits at full rate until its sender says CREDIT_STOP, so big waves cost seconds of CPU.
IDLE_WAVE = os.environ.get("BENCH_IDLE_WAVE", "50")
# Seconds of all-idle measurement per level.
IDLE_WINDOW_S = float(os.environ.get("BENCH_IDLE_WINDOW_S", 3))


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


def proc_cpu_ns(pid):
    """CPU time of a process so far, ns (scheduler run time: finer than rusage ticks)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def proc_rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


class Lines:
    """Collects a child's stdout lines in a thread (a full pipe would block the child)."""

    def __init__(self, p):
        import threading
        self.lines, self.p = [], p
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def wait_for(self, event, timeout, after=0):
        """The first JSON line with this event from index `after` on."""
        end = time.time() + timeout
        while time.time() < end:
            for line in self.lines[after:]:
                if f'"{event}"' in line:
                    return json.loads(line)
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"idle-flows bench: no '{event}' line within {timeout} s "
                           f"(exit {self.p.poll()}): {self.p.stderr.read()[-500:] if self.p.poll() is not None else ''}")

    def last_stats(self):
        for line in reversed(self.lines):
            if '"agent_stats"' in line:
                return json.loads(line)
        return None


def stall_probe(seconds=1.0, over_ns=10_000):
    """How often a thread that never sleeps is held up for more than `over_ns`: stalls the
    agent cannot avoid (vCPU preemption, host interrupts), which set a floor under the
    credit pacing error's tail. {"per_s": gaps over 10 µs per second, "max_us": longest}."""
    gc.disable()
    try:
        end = time.perf_counter_ns() + int(seconds * 1e9)
        prev, n, worst = time.perf_counter_ns(), 0, 0
        while prev < end:
            t = time.perf_counter_ns()
            n += t - prev > over_ns
            worst = max(worst, t - prev)
            prev = t
    finally:
        gc.enable()
    return {"per_s": round(n / seconds, 1), "max_us": round(worst / 1e3, 1)}


def idle_flows_case():
    """One serve agent with 100, then IDLE_FLOWS idle flows (see the module doc)."""
    net = ["--link-gbps", LINK_GBPS, "--rtt-us", "50", "--datapath", "udp"]
    stats_ms = "--stats-ms" in sh(str(SERVE_BIN), "serve", "--help").stdout
    srv = subprocess.Popen(["ip", "netns", "exec", f"{P}b", str(SERVE_BIN), "serve", "--listen", "0.0.0.0:7890",
                            "--max-flows", str(2 * IDLE_FLOWS + 1000), "--max-half-open", "4096", *net,
                            *(["--stats-ms", "200"] if stats_ms else [])],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = Lines(srv)
    clients = []
    try:
        time.sleep(0.5)
        rss0 = proc_rss_kb(srv.pid)
        levels = {}
        opened = 0
        for level in (IDLE_LOW, IDLE_FLOWS):
            c = subprocess.Popen(["ip", "netns", "exec", f"{P}a", str(BIN), "workload", "--to", "10.78.0.2:7890",
                                  "--transport", IDLE_TRANSPORT, "--count", "0", "--idle", str(level - opened),
                                  "--idle-wave", IDLE_WAVE, "--hold-s", "36000", "--sample-ms", "0", *net],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            clients.append((c, Lines(c)))
            t_open = time.time()
            clients[-1][1].wait_for("idle_open", 600)
            open_s = time.time() - t_open
            opened = level
            print(f"idle-flows bench: {level} idle flows open ({open_s:.1f} s)", file=sys.stderr, flush=True)
            time.sleep(1.0)  # credits stopped, linger of the opening over
            s0, c0 = out.last_stats(), proc_cpu_ns(srv.pid)
            time.sleep(IDLE_WINDOW_S)
            s1, c1 = out.last_stats(), proc_cpu_ns(srv.pid)
            rss = proc_rss_kb(srv.pid)
            idle_cpu = (c1 - c0) / 1e9
            turns = s1 and s0 and s1["turns"] - s0["turns"]
            # One active flow beside the idle ones: serve's CPU per datagram it handled.
            c2 = proc_cpu_ns(srv.pid)
            t0 = time.time()
            _, err, _, rc = finish(start("a", "send", "--to", "10.78.0.2:7890", "--transport", "flexpass",
                                         "--size", str(IDLE_ACTIVE_BYTES), *net))
            elapsed = time.time() - t0
            c3 = proc_cpu_ns(srv.pid)
            if rc != 0:
                raise RuntimeError(f"idle-flows bench: active flow failed at {level} idle flows: {err[-500:]}")
            st = json.loads(err.strip().splitlines()[-1].split("flexpass send: ", 1)[1])
            datagrams = st["datagrams_in"] + st["datagrams_out"]
            levels[level] = {
                "open_s": round(open_s, 2),
                "rss_kb": rss,
                "idle_cpu_us_per_s": round(idle_cpu * 1e6 / IDLE_WINDOW_S, 1),
                "idle_turns_per_s": turns and round(turns / IDLE_WINDOW_S, 1),
                "idle_cpu_us_per_turn": turns and round(idle_cpu * 1e6 / max(turns, 1), 3),
                "active_gbps": round(IDLE_ACTIVE_BYTES * 8 / elapsed / 1e9, 3),
                "active_cpu_us_per_datagram": round((c3 - c2) / 1e3 / max(datagrams, 1), 3),
                "active_datagrams": datagrams,
            }
            print(f"idle-flows bench: {level}: {json.dumps(levels[level])}", file=sys.stderr, flush=True)
        # End: the clients finish their idle flows (FIN) all at once; serve must receive all.
        t_end = time.time()
        end_errors = []
        for c, _ in clients:
            c.send_signal(2)
        for c, lines in clients:
            c.wait(timeout=300)
            if c.returncode != 0:
                end_errors.append(c.stderr.read().strip()[-300:])
        deadline = time.time() + 60
        while sum('"flow_received"' in line for line in out.lines) < IDLE_FLOWS + 2 and time.time() < deadline:
            time.sleep(0.2)
        received = sum('"flow_received"' in line for line in out.lines)
        end_s = time.time() - t_end
        lo, hi = levels[IDLE_LOW], levels[IDLE_FLOWS]

        def ratio(k):
            return hi[k] and lo[k] and round(hi[k] / lo[k], 2)

        return {
            "agent": str(SERVE_BIN), "idle_transport": IDLE_TRANSPORT, "idle_window_s": IDLE_WINDOW_S,
            "levels": levels,
            "rss_kb_per_idle_flow": round((hi["rss_kb"] - lo["rss_kb"]) / (IDLE_FLOWS - IDLE_LOW), 3),
            "rss_kb_at_start": rss0,
            f"ratio_{IDLE_FLOWS}_over_{IDLE_LOW}": {k: ratio(k) for k in (
                "idle_cpu_us_per_s", "idle_cpu_us_per_turn", "active_cpu_us_per_datagram")},
            "flows_received_by_serve": received, "flows_expected": IDLE_FLOWS + 2,
            "all_idle_flows_finishing_at_once_s": round(end_s, 1), "client_errors": end_errors,
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        for c, _ in clients:
            if c.poll() is None:
                c.kill()
                c.wait()
        srv.send_signal(2)
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


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

        def run(name, transport, size, net):
            """REPEAT runs; the one with the median goodput is reported, with the range."""
            runs = sorted((run_once(name, transport, size, net) for _ in range(REPEAT)), key=lambda r: r["gbps"])
            r = runs[len(runs) // 2]
            r["gbps_min_max"] = [round(runs[0]["gbps"], 3), round(runs[-1]["gbps"], 3)]
            r["name"] = name
            results[name] = r
            return r

        def run_once(name, transport, size, net):
            srv = start("b", "serve", "--listen", "0.0.0.0:7890", "--tcp", "0.0.0.0:7891", "--count", "1", *net)
            time.sleep(0.3)
            port = 7891 if transport == "tcp" else 7890
            t0 = time.time()
            out, err, cpu, rc = finish(start("a", "send", "--to", f"10.78.0.2:{port}", "--transport", transport,
                                             "--size", str(size), *net))
            elapsed = time.time() - t0
            _, serr, server_cpu, _ = finish(srv)
            if rc != 0:
                raise RuntimeError(f"agent bench: {name} send failed: {err}")
            r = {"gbps": size * 8 / elapsed / 1e9, "sender_cpu_s": cpu, "server_cpu_s": server_cpu,
                 "record": json.loads(out.splitlines()[0])}
            if transport != "tcp":
                r["server_stats"] = json.loads(serr.strip().splitlines()[-1].split("flexpass serve: ", 1)[1])
                r["sender_stats"] = json.loads(err.strip().splitlines()[-1].split("flexpass send: ", 1)[1])
            return r

        if ONLY_IDLE_FLOWS:
            print("agent bench:", json.dumps({"idle_flows": idle_flows_case()}))
            return 0
        load_before = os.getloadavg()
        stalls = stall_probe()
        net = ["--link-gbps", LINK_GBPS, "--rtt-us", "50", "--datapath", "udp"]
        xdp = ["--link-gbps", LINK_GBPS, "--rtt-us", "50", "--datapath", "xdp"]
        # "idle": one ExpressPass flow (data only on credits) on a 0.5 Gbit/s link, credits
        # ~26 µs apart and the CPUs mostly idle: the pacing error is the timer wake-up error.
        # Under load (one FlexPass flow at full speed) it is the loop's turn time.
        idle = ["--link-gbps", "0.5", "--rtt-us", "50", "--datapath", "udp"]
        results = {}
        run("flexpass", "flexpass", SIZE, net)
        run("tcp", "tcp", SIZE, net)
        run("flexpass-xdp", "flexpass", SIZE, xdp)
        batch = ["--credit-batch", CREDIT_BATCH]
        run("flexpass-batch", "flexpass", SIZE, net + batch)
        run("flexpass-xdp-batch", "flexpass", SIZE, xdp + batch)
        # ExpressPass: every data packet is credit-scheduled (FlexPass's reactive sub-flow
        # carries what the credits do not, and on a veth nothing slows it).
        run("expresspass", "expresspass", SIZE, net)
        run("expresspass-batch", "expresspass", SIZE, net + batch)
        run("expresspass-xdp-batch", "expresspass", SIZE, xdp + batch)
        if not ONLY_DATAPATH:
            run("flexpass-spin", "flexpass", SIZE, net + ["--spin-us", SPIN_US])
            run("flexpass-sleep", "flexpass", SIZE, net + ["--spin-us", "0"])
            if GSO:
                run("flexpass-nogso", "flexpass", SIZE, net + ["--no-gso"])
            run("idle", "expresspass", IDLE_BYTES, idle)
            run("idle-spin", "expresspass", IDLE_BYTES, idle + ["--spin-us", SPIN_US])
            run("idle-sleep", "expresspass", IDLE_BYTES, idle + ["--spin-us", "0"])
            run("idle-xdp", "expresspass", IDLE_BYTES, idle[:-1] + ["xdp"])
        if JUMBO:
            # Jumbo frames: the same veth at MTU 9000 (kernel TCP uses it too).
            for h, dev in (("a", f"{P}va"), ("b", f"{P}vb")):
                sh("ip", "netns", "exec", f"{P}{h}", "ip", "link", "set", dev, "mtu", "9000")
            run("flexpass-9000", "flexpass", SIZE, net + ["--mtu", "9000"])
            run("tcp-9000", "tcp", SIZE, net)
            # AF_XDP with multi-buffer frames (copy mode on veth, where `auto` takes the UDP
            # socket instead); ExpressPass: the credit path alone.
            run("flexpass-9000-xdp", "flexpass", SIZE, xdp + ["--mtu", "9000"])
            run("expresspass-9000", "expresspass", SIZE, net + ["--mtu", "9000"])
            run("expresspass-9000-xdp", "expresspass", SIZE, xdp + ["--mtu", "9000"])
        fp = results["flexpass"]
        packets = fp["record"]["packets_proactive"] + fp["record"]["packets_reactive"]
        stats = fp["server_stats"]
        credits = fp["record"]["credits_received"]

        def per_call(st, n, calls):
            return round(st[n] / max(st.get(calls, st[n]), 1), 2)

        def timing(r):
            st = r["server_stats"]
            rec = r["record"]
            credits_sent = rec["credits_received"] + rec["credits_wasted"]
            return {"credit_pacing_error_ns_p50_p99_max": st.get("credit_pacing_error_ns"),
                    "gbps": round(r["gbps"], 3),
                    "retransmissions": rec["retransmissions"],
                    "receiver_cpu_s": round(r["server_cpu_s"], 3),
                    "receiver_cpu_us_per_credit_received": round(r["server_cpu_s"] * 1e6 / max(rec["credits_received"], 1), 3),
                    "credits_received_by_sender": credits_sent}

        summary = {
            "bytes": SIZE,
            "repeat": REPEAT,
            "flexpass_gbps": round(fp["gbps"], 3),
            "flexpass_gbps_min_max": fp["gbps_min_max"],
            "kernel_tcp_gbps": round(results["tcp"]["gbps"], 3),
            "kernel_tcp_gbps_min_max": results["tcp"]["gbps_min_max"],
            "goodput_ratio_flexpass_over_tcp": round(fp["gbps"] / results["tcp"]["gbps"], 3),
            "sender_cpu_us_per_data_packet": round(fp["sender_cpu_s"] * 1e6 / max(packets, 1), 3),
            "data_packets": packets,
            "credits_received_by_sender": credits,
            "sender_cpu_us_per_datagram": round(fp["sender_cpu_s"] * 1e6 / max(
                fp["sender_stats"]["datagrams_in"] + fp["sender_stats"]["datagrams_out"], 1), 3),
            "receiver_cpu_us_per_datagram": round(fp["server_cpu_s"] * 1e6 / max(
                stats["datagrams_in"] + stats["datagrams_out"], 1), 3),
            "credits_per_second": round(credits / (SIZE * 8 / fp["gbps"] / 1e9)),
            "receiver_cpu_us_per_packet_handled": round(fp["server_cpu_s"] * 1e6 / max(packets + credits, 1), 3),
            "receiver_cpu_us_per_credit_received": round(fp["server_cpu_s"] * 1e6 / max(credits, 1), 3),
            "credit_pacing_error_ns_p50_p99_max": stats.get("credit_pacing_error_ns"),
            "datagrams_per_syscall": {
                "sender_recv": per_call(fp["sender_stats"], "datagrams_in", "recv_calls"),
                "sender_send": per_call(fp["sender_stats"], "datagrams_out", "send_calls"),
                "receiver_recv": per_call(stats, "datagrams_in", "recv_calls"),
                "receiver_send": per_call(stats, "datagrams_out", "send_calls"),
            },
            "send_errors": fp["sender_stats"]["send_errors"] + stats["send_errors"],
        }
        gso = results.get("flexpass-nogso")
        gso_packets = gso and gso["record"]["packets_proactive"] + gso["record"]["packets_reactive"]
        summary["without_gso"] = gso and {
            "flexpass_gbps": round(gso["gbps"], 3),
            "flexpass_gbps_min_max": gso["gbps_min_max"],
            "sender_cpu_us_per_data_packet": round(gso["sender_cpu_s"] * 1e6 / max(gso_packets, 1), 3),
            "sender_datagrams_per_send_call": per_call(gso["sender_stats"], "datagrams_out", "send_calls"),
        }
        j, jt = results.get("flexpass-9000"), results.get("tcp-9000")
        if j:
            jp = j["record"]["packets_proactive"] + j["record"]["packets_reactive"]
            summary["mtu_9000"] = {
                "flexpass_gbps": round(j["gbps"], 3),
                "flexpass_gbps_min_max": j["gbps_min_max"],
                "kernel_tcp_gbps": round(jt["gbps"], 3),
                "kernel_tcp_gbps_min_max": jt["gbps_min_max"],
                "goodput_ratio_flexpass_over_tcp": round(j["gbps"] / jt["gbps"], 3),
                "flexpass_9000_over_1500": round(j["gbps"] / fp["gbps"], 3),
                "kernel_tcp_9000_over_1500": round(jt["gbps"] / results["tcp"]["gbps"], 3),
                "data_packets": jp,
                "sender_cpu_us_per_data_packet": round(j["sender_cpu_s"] * 1e6 / max(jp, 1), 3),
                "sender_cpu_s_per_gbyte": round(j["sender_cpu_s"] / (SIZE / 1e9), 3),
                "sender_cpu_s_per_gbyte_at_1500": round(fp["sender_cpu_s"] / (SIZE / 1e9), 3),
                "credit_pacing_error_ns_p50_p99_max": j["server_stats"].get("credit_pacing_error_ns"),
            }
        def datapath_row(r, tcp):
            rec, ss, st = r["record"], r["sender_stats"], r["server_stats"]
            n = rec["packets_proactive"] + rec["packets_reactive"]
            return {"datapath": ss.get("datapath"), "flexpass_gbps": round(r["gbps"], 3),
                    "credit_batch": int(CREDIT_BATCH) if "batch" in r["name"] else 1,
                    "credit_scheduled_share": round(rec["packets_proactive"] / max(n, 1), 3),
                    "receiver_datagrams_per_send_call": per_call(st, "datagrams_out", "send_calls"),
                    "credits_dropped_by_host_shaper": st.get("credits_rate_limited"),
                    "flexpass_gbps_min_max": r["gbps_min_max"],
                    "goodput_ratio_flexpass_over_tcp": round(r["gbps"] / tcp["gbps"], 3),
                    "sender_cpu_us_per_data_packet": round(r["sender_cpu_s"] * 1e6 / max(n, 1), 3),
                    "receiver_cpu_us_per_data_packet": round(r["server_cpu_s"] * 1e6 / max(n, 1), 3),
                    "credit_pacing_error_ns_p50_p99_max": st.get("credit_pacing_error_ns"),
                    "retransmissions": rec["retransmissions"], "xdp": [ss.get("xdp"), st.get("xdp")]}

        summary["datapaths"] = {
            "mtu_1500": {"kernel_tcp_gbps": round(results["tcp"]["gbps"], 3),
                         "udp": datapath_row(fp, results["tcp"]),
                         "xdp": datapath_row(results["flexpass-xdp"], results["tcp"]),
                         "udp_batch": datapath_row(results["flexpass-batch"], results["tcp"]),
                         "xdp_batch": datapath_row(results["flexpass-xdp-batch"], results["tcp"]),
                         "expresspass_udp": datapath_row(results["expresspass"], results["tcp"]),
                         "expresspass_udp_batch": datapath_row(results["expresspass-batch"], results["tcp"]),
                         "expresspass_xdp_batch": datapath_row(results["expresspass-xdp-batch"], results["tcp"])},
            "load_average_before_after": [round(x, 2) for x in load_before + os.getloadavg()],
            "stalls_over_10us_of_a_spinning_thread": stalls,
        }
        if j:
            summary["datapaths"]["mtu_9000"] = {"kernel_tcp_gbps": round(jt["gbps"], 3),
                                                "udp": datapath_row(j, jt),
                                                "xdp": datapath_row(results["flexpass-9000-xdp"], jt),
                                                "expresspass_udp": datapath_row(results["expresspass-9000"], jt),
                                                "expresspass_xdp": datapath_row(results["expresspass-9000-xdp"], jt)}
        if ONLY_DATAPATH:
            print("agent bench:", json.dumps(summary))
            return 0
        summary["idle_flows"] = idle_flows_case()
        summary["timing_xdp_idle"] = timing(results["idle-xdp"])
        summary[f"with_spin_{SPIN_US}us"] = timing(results["flexpass-spin"])
        summary["timing"] = {
            "under_load_default": timing(fp),
            f"under_load_spin_{SPIN_US}us": timing(results["flexpass-spin"]),
            "under_load_spin_0": timing(results["flexpass-sleep"]),
            "idle_default": timing(results["idle"]),
            f"idle_spin_{SPIN_US}us": timing(results["idle-spin"]),
            "idle_spin_0": timing(results["idle-sleep"]),
            "note": "idle: one ExpressPass flow on a 0.5 Gbit/s link (credits ~26 µs apart); under load: one "
                    "FlexPass flow at full speed. Default: sleep to a learned lead before each credit (median "
                    "wake-up latency, capped by --spin-us, 30 µs) and busy-wait the rest; --spin-us 0 sleeps only. "
                    "receiver_cpu_s is the price of the busy-wait",
        }
        print("agent bench:", json.dumps(summary))
        return 0
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        for h in ("a", "b"):
            sh("ip", "netns", "del", f"{P}{h}", check=False)


if __name__ == "__main__":
    sys.exit(main())
