"""The host agent reads the qdisc edge's counters (root, tc, the agent binary; namespaces of
this test).

Namespace a holds the receiving host: the qdisc edge on its veth (nic/flexpass_nic.py apply,
credit share 1: ExpressPass) and `flexpass agent --nic-edge qdisc --nic-edge-dev va`. Two
ExpressPass flows come from namespace b, so the receiver's credits ask for up to twice the
credit rate and the edge's htb credit class (1:10, 8 credits deep) shapes and drops them.
`status` → `credit_limit.edge` must then be that class: its rate and burst as tc shows them,
and the credits it sent and dropped, equal to what `tc -s class show` says after the flows,
with at least one credit per data packet the flows needed.
"""

import contextlib
import os
import re
import subprocess
import sys
import time

import pytest
from edge_env import A_IP, B_IP, REPO, E, sh

import flexpass_nic as N

sys.path.insert(0, str(REPO / "host-agent" / "netns-tests"))
from floodnet import Acceptor, stop_processes  # noqa: E402
from test_ebpf_agent import BIN, NIC, PORT, status  # noqa: E402

LINK_MBIT = 50
FLOWS, FLOW_BYTES = 2, 2_000_000
NET = ["--link-gbps", str(LINK_MBIT / 1000), "--rtt-us", "200", "--datapath", "udp"]


def htb_credit_class(ns):
    """(rate bits/s, burst bytes, packets sent, dropped) of class 1:10, from tc's own text."""
    out = sh("ip", "netns", "exec", ns, "tc", "-s", "class", "show", "dev", "va", "classid", "1:10").stdout
    m = re.search(r"rate (\d+)Kbit .*burst (\d+)b .*Sent \d+ bytes (\d+) pkt \(dropped (\d+),", out, re.S)
    assert m, out
    return int(m.group(1)) * 1000, int(m.group(2)), int(m.group(3)), int(m.group(4))


@pytest.fixture
def veth_netns():
    if os.geteuid() != 0:
        pytest.skip("SKIPPED agent beside the qdisc edge: needs root (tc, netns)")
    tag = os.getpid()
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(E.netns(f"fpqa{tag}"))
        b = stack.enter_context(E.netns(f"fpqb{tag}"))
        sh("ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "vb", "netns", b)
        for ns, dev, ip in ((a, "va", f"{A_IP}/24"), (b, "vb", f"{B_IP}/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        yield a, b


def test_status_reads_the_qdisc_edges_credit_class(veth_netns):
    if not BIN.exists():
        pytest.skip(f"SKIPPED agent beside the qdisc edge: {BIN} not built (cargo build --release -p flexpass-cli)")
    a, b = veth_netns
    r = sh("ip", "netns", "exec", a, sys.executable, NIC, "apply", "--dev", "va", "--link-mbit", LINK_MBIT,
           "--credit-share", "1", check=False)
    assert r.returncode == 0, r.stderr
    assert "--nic-edge qdisc --nic-edge-dev va" in r.stdout  # what apply tells the user
    configured_kbit = N.NicConfig(dev="va", link_mbit=LINK_MBIT, credit_share=1.0).credit_kbit()

    sock = f"/tmp/fpqa{os.getpid()}-agent.sock"
    procs = []
    try:
        agent = subprocess.Popen(["ip", "netns", "exec", a, str(BIN), "agent", "--listen", f"{A_IP}:{PORT}",
                                  "--socket", sock, *NET, "--nic-edge", "qdisc", "--nic-edge-dev", "va"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(agent)
        for _ in range(100):
            if os.path.exists(sock) or agent.poll() is not None:
                break
            time.sleep(0.05)
        assert os.path.exists(sock), agent.stderr.read()
        before = status(sock)["credit_limit"]
        acceptor = Acceptor(sock, FLOWS)
        acceptor.start()
        senders = [subprocess.Popen(["ip", "netns", "exec", b, str(BIN), "send", "--to", f"{A_IP}:{PORT}",
                                     "--transport", "expresspass", "--size", str(FLOW_BYTES), "--timeout-s", "60",
                                     *NET], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(FLOWS)]
        procs += senders
        for p in senders:
            p.wait(90)
            assert p.returncode == 0, p.stderr.read()
        acceptor.join(30)
        time.sleep(0.3)  # the last credits of the finished flows leave the class
        st = status(sock)
        tc = htb_credit_class(a)
    finally:
        stop_processes(procs)
        if os.path.exists(sock):
            os.unlink(sock)
    assert acceptor.error is None and sorted(f["bytes"] for f in acceptor.flows) == [FLOW_BYTES] * FLOWS

    limit, ep = st["credit_limit"], st["endpoint"]
    edge = limit["edge"]
    print(f"\nqdisc edge: configured {configured_kbit} kbit/s; status credit_limit {limit}; tc {tc}")
    assert limit["policed_by"] == "edge" and limit["nic_edge"] == "qdisc" and limit["agent_bytes_per_s"] is None
    assert limit["edge_error"] is None and edge["dev"] == "va" and edge["maps"] is None
    assert before["edge"]["credits_passed"] < 10  # read at each status, not once
    rate_bits, burst, sent, dropped = tc
    # The class's rate is flexpass_nic.py's share·C·84/(84+F) in frame bytes (tc prints 4 digits).
    assert abs(edge["credit_rate_bytes_per_s"] * 8 / (configured_kbit * 1000) - 1) < 0.001
    assert edge["credit_rate_bytes_per_s"] == rate_bits // 8 and edge["credit_burst_bytes"] == burst
    # Every data packet of ExpressPass needs a credit that left through the class; the
    # status was read after the flows, so it has what tc has now (a credit or two of
    # the closing handshake may leave in between).
    mss = 1500 - 20 - 8  # at most this much data per credit
    assert sent >= FLOWS * FLOW_BYTES // mss
    assert 0 <= sent - edge["credits_passed"] <= 2, (edge, tc)
    assert edge["credits_dropped"] == dropped > 0  # two flows ask for twice the class's rate
    assert ep["credits_rate_limited"] == 0  # the agent did not police
