"""The host agent beside the eBPF edge (root, clang, the agent binary; namespaces of this test).

Namespace a holds the receiving host: `flexpass agent` and the eBPF edge on its veth's egress
(nic/flexpass_ebpf.py apply, credit share 1: ExpressPass). Two ExpressPass flows come from
namespace b, so the receiver's credits together ask for up to twice the link's credit rate
and something must police them at the host: with `--nic-edge ebpf` the edge does it alone
(the agent's `status` says so, its shaper drops nothing), without it the agent's shaper and
the edge both do. Either way the credits on the wire (those the edge let out, counted in its
pinned maps, in frame bytes: the agent's credits are 60-68-byte frames) must be the edge's
rate, share·C·84/(84+F) in 60-byte credits (derive.nic_credit_meter), within 3 %.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from edge_env import A_IP, REPO, E, sh

import flexpass_nic as N

sys.path.insert(0, str(REPO / "host-agent" / "netns-tests"))
from floodnet import Acceptor, stop_processes  # noqa: E402

BIN = Path(os.environ.get("FLEXPASS_BIN", REPO / "host-agent" / "target" / "release" / "flexpass"))
NIC = REPO / "nic" / "flexpass_nic.py"
LINK_MBIT = 50
PORT = 7890
FLOWS, FLOW_BYTES = 2, 6_000_000
WINDOW_S, SAMPLE_S = 1.0, 0.05
NET = ["--link-gbps", str(LINK_MBIT / 1000), "--rtt-us", "200", "--datapath", "udp"]
CREDIT_CELL = 1 << 2  # (KIND_CREDIT, COLOR_GREEN)


def credit_frame_bytes(bpffs):
    """Frame bytes (without FCS: what the bucket charges) of the credits the edge let out."""
    with E.EdgeMaps(bpffs, "va") as m:
        return m.u64("class_bytes", CREDIT_CELL) + 14 * m.u64("class_packets", CREDIT_CELL)


def busiest_rate(samples, window):
    """The largest growth per second of a counter over any `window` s or more between two of
    its samples (t, value)."""
    best, j = 0.0, 0
    for t, n in samples:
        while j < len(samples) and samples[j][0] - t < window:
            j += 1
        if j == len(samples):
            break
        best = max(best, (samples[j][1] - n) / (samples[j][0] - t))
    return best


def status(sock):
    """The agent's `status` over its API socket (in /tmp: reachable from every namespace)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(b'{"op":"status"}\n')
    line = s.makefile("rb").readline()
    s.close()
    return json.loads(line)


# The edge alone at the switch's default burst (2 credits); both at 8 credits (ExpressPass's
# credit queue): two 2-credit buckets in series on different clocks pass 5-8 % less.
@pytest.mark.parametrize("edge_flag, burst", [(True, "2"), (False, "8")], ids=["edge_polices", "both_police"])
def test_the_agent_leaves_the_credit_limit_to_the_edge(veth_pair, edge_flag, burst):
    if not BIN.exists():
        pytest.skip(f"SKIPPED agent beside the eBPF edge: {BIN} not built (cargo build --release -p flexpass-cli)")
    if not shutil.which("chrt"):
        pytest.skip("SKIPPED agent beside the eBPF edge: chrt (util-linux) not installed")
    a, b, bpffs = veth_pair
    r = sh(sys.executable, NIC, "ebpf", "apply", "--dev", "va", "--link-mbit", LINK_MBIT, "--credit-share", "1",
           "--no-htb", "--burst-packets", burst, "--bpffs", bpffs, "--netns", a, check=False)
    assert r.returncode == 0, r.stderr
    flags = next(line for line in r.stdout.splitlines() if line.startswith("agent on this host:"))
    maps = str(E.maps_dir(bpffs, "va"))
    assert f"--nic-edge ebpf --nic-edge-maps {maps}" in flags  # what the loader tells the user
    rate_bytes, _burst = E.EdgeConfig(N.NicConfig(dev="va", link_mbit=LINK_MBIT, credit_share=1.0)).meter()

    sock = f"/tmp/fpea{os.getpid()}-agent.sock"
    extra = ["--nic-edge", "ebpf", "--nic-edge-maps", maps] if edge_flag else []
    procs = []
    try:
        # SCHED_FIFO, as test_ebpf_rate.py's sender: a policer passes its rate only while it
        # is offered more, and an agent descheduled on a shared machine offers nothing.
        agent = subprocess.Popen(["ip", "netns", "exec", a, "chrt", "-f", "10", str(BIN), "agent", "--listen", f"{A_IP}:{PORT}",
                                  "--socket", sock, *NET, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        procs.append(agent)
        for _ in range(100):
            if os.path.exists(sock) or agent.poll() is not None:
                break
            time.sleep(0.05)
        assert os.path.exists(sock), agent.stderr.read()
        acceptor = Acceptor(sock, FLOWS)
        acceptor.start()
        senders = [subprocess.Popen(["ip", "netns", "exec", b, str(BIN), "send", "--to", f"{A_IP}:{PORT}",
                                     "--transport", "expresspass", "--size", str(FLOW_BYTES), "--timeout-s", "60",
                                     *NET], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(FLOWS)]
        procs += senders
        samples = []
        while any(p.poll() is None for p in senders):
            samples.append((time.monotonic(), credit_frame_bytes(bpffs)))
            time.sleep(SAMPLE_S)
        for p in senders:
            assert p.returncode == 0, p.stderr.read()
        acceptor.join(30)
        st = status(sock)
    finally:
        stop_processes(procs)
        if os.path.exists(sock):
            os.unlink(sock)
    assert acceptor.error is None and sorted(f["bytes"] for f in acceptor.flows) == [FLOW_BYTES] * FLOWS

    with E.EdgeMaps(bpffs, "va") as m:
        edge = m.counters()
    # The flows' own credits (HELLO_ACKs etc. excluded): the busiest second between samples,
    # robust to an agent descheduled on a shared machine (that only lowers the rate).
    measured = busiest_rate(samples, WINDOW_S)
    limit, ep = st["credit_limit"], st["endpoint"]
    print(f"\n--nic-edge {'ebpf' if edge_flag else 'none'}: configured {rate_bytes} B/s of credit frames, measured "
          f"{measured:.0f} B/s ({100 * (measured / rate_bytes - 1):+.2f} %) over the busiest {WINDOW_S} s; "
          f"edge dropped {edge['events']['credit_dropped']}, agent shaper dropped {ep['credits_rate_limited']}; "
          f"status credit_limit {limit}")
    assert abs(measured / rate_bytes - 1) < 0.03
    if edge_flag:
        assert limit["policed_by"] == "edge" and limit["nic_edge"] == "ebpf" and limit["agent_bytes_per_s"] is None
        assert ep["credits_rate_limited"] == 0  # the agent did not police
        assert edge["events"]["credit_dropped"] > 0  # the edge did
        # The agent read the edge's maps: its own bucket's settings and counters.
        assert limit["edge_error"] is None and limit["edge"]["maps"] == maps
        assert limit["edge"]["credit_rate_bytes_per_s"] == rate_bytes
        assert limit["edge"]["credits_passed"] == edge["classes"]["credit/green"]["packets"]
        assert limit["edge"]["credits_dropped"] == edge["events"]["credit_dropped"]
    else:
        assert limit["policed_by"] == "agent" and limit["nic_edge"] == "none" and limit["edge"] is None
        # The agent's shaper: the edge's rate, in the same frame bytes (one byte count).
        assert abs(limit["agent_bytes_per_s"] - rate_bytes) < 1
        assert ep["credits_rate_limited"] > 0
