"""End-to-end tests of the host agent on real kernel networking.

Topology (all namespaces created and always removed by the fixture):

    h1 (10.77.1.2) --\\
                      r (Linux forwarding; egress to h3: htb by DSCP via u32) -- h3 (10.77.3.2)
    h2 (10.77.2.2) --/

The router's egress towards h3 is the bottleneck, configured by nic/flexpass_nic.py: htb
with a shaped strict-priority credit class, FlexPass and legacy classes (w_q : 1 − w_q) and
pfifo leaves, DSCP classification by u32 (no netem/red/prio qdiscs needed).

Needs root, `ip netns` and `tc`; skips loudly otherwise.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodnet import BIN, pattern_sha, records, sh, skip_reason, stop_processes

ROOT = Path(__file__).resolve().parents[1]
NIC_TOOL = ROOT.parent / "nic" / "flexpass_nic.py"
PREFIX = f"fpt{os.getpid() % 10000}"
RATE_MBIT = 200
PORT = 7890

SKIP = skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"SKIPPED netns tier: {SKIP}")


def ns(name, *args, check=True):
    return sh("ip", "netns", "exec", f"{PREFIX}{name}", *args, check=check)


class Net:
    def __init__(self, mtu=1500):
        self.procs = []
        self.mtu = mtu
        self.ip = {"h1": "10.77.1.2", "h2": "10.77.2.2", "h3": "10.77.3.2"}

    def up(self):
        for n in ("h1", "h2", "h3", "r"):
            sh("ip", "netns", "add", f"{PREFIX}{n}")
            ns(n, "ip", "link", "set", "lo", "up")
        for i, h in ((1, "h1"), (2, "h2"), (3, "h3")):
            a, b = f"{PREFIX}{h}a", f"{PREFIX}{h}b"
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "link", "set", a, "netns", f"{PREFIX}{h}")
            sh("ip", "link", "set", b, "netns", f"{PREFIX}r")
            if self.mtu != 1500:
                ns(h, "ip", "link", "set", a, "mtu", str(self.mtu))
                ns("r", "ip", "link", "set", b, "mtu", str(self.mtu))
            ns(h, "ip", "addr", "add", f"10.77.{i}.2/24", "dev", a)
            ns(h, "ip", "link", "set", a, "up")
            ns(h, "ip", "route", "add", "default", "via", f"10.77.{i}.1")
            ns("r", "ip", "addr", "add", f"10.77.{i}.1/24", "dev", b)
            ns("r", "ip", "link", "set", b, "up")
        ns("r", "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # Bottleneck towards h3: the FlexPass port built by nic/flexpass_nic.py (credit
        # class shaped and strict, FlexPass / legacy classes w_q : 1 − w_q, DSCP by u32).
        ns("r", sys.executable, str(NIC_TOOL), "apply", "--dev", f"{PREFIX}h3b", "--link-mbit", str(RATE_MBIT),
           "--data-limit-pkts", "300", "--mtu", str(self.mtu))

    def spawn(self, host, *args, stdin=None):
        p = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{host}", str(BIN), *args],
                             stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def down(self):
        stop_processes(self.procs)
        for n in ("h1", "h2", "h3", "r"):
            sh("ip", "netns", "del", f"{PREFIX}{n}", check=False)


@pytest.fixture
def net():
    n = Net()
    try:
        n.up()
        yield n
    finally:
        n.down()


@pytest.fixture
def jumbo_net():
    """The same network with jumbo frames: every veth at MTU 9000, the router's FlexPass
    port built for 9038-byte frames (`flexpass_nic.py --mtu 9000`)."""
    n = Net(mtu=9000)
    try:
        n.up()
        yield n
    finally:
        n.down()


NET_ARGS = ["--link-gbps", str(RATE_MBIT / 1000), "--rtt-us", "200"]


def serve(net, count):
    p = net.spawn("h3", "serve", "--listen", f"0.0.0.0:{PORT}", "--tcp", f"0.0.0.0:{PORT + 1}",
                  "--count", str(count), *NET_ARGS)
    time.sleep(0.3)
    return p


def send(net, host, transport, size, bind_port=None):
    port = PORT + 1 if transport == "tcp" else PORT
    args = ["send", "--to", f"{net.ip['h3']}:{port}", "--transport", transport, "--size", str(size),
            "--timeout-s", "60", *NET_ARGS]
    if bind_port:
        args += ["--bind", f"0.0.0.0:{bind_port}"]
    return net.spawn(host, *args)


def finish(p, timeout=90):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}: {err}"
    return out, err


@pytest.mark.parametrize("transport", ["flexpass", "expresspass", "dctcp", "flashpass", "tcp"])
def test_byte_exact_transfer_through_router(net, transport):
    size = 3_000_000
    srv = serve(net, 1)
    out, _ = finish(send(net, "h1", transport, size))
    sent = records(out)[0]
    sout, _ = finish(srv)
    got = records(sout)[0]
    assert sent["sha256"] == got["sha256"] == pattern_sha(size)
    assert got["bytes"] == size
    if transport == "flashpass":
        # FlashPass §III-B: after the pre-credit phase every data packet was licensed by a
        # returned emulation packet (the router's credit class is the emulation queue).
        em = sent["emulation"]
        assert sent["packets_proactive"] > 0 and em["emulation_sent"] > 0
        assert em["grants_received"] >= sent["packets_proactive"], sent


def test_flexpass_and_kernel_tcp_concurrently(net):
    size = 4_000_000
    srv = serve(net, 2)
    a = send(net, "h1", "flexpass", size)
    b = send(net, "h2", "tcp", size)
    finish(a)
    finish(b)
    got = records(finish(srv)[0])
    assert sorted(r["transport"] for r in got) == ["flexpass", "tcp"]
    assert all(r["sha256"] == pattern_sha(size) for r in got)


@pytest.mark.parametrize("transport", ["flexpass", "flashpass"])
def test_incast_two_senders_three_flows_each(net, transport):
    size = 500_000
    srv = serve(net, 6)
    procs = [send(net, h, transport, size) for h in ("h1", "h2") for _ in range(3)]
    sent = [records(finish(p)[0])[0] for p in procs]
    got = records(finish(srv)[0])
    assert len(got) == 6
    assert all(r["sha256"] == pattern_sha(size) for r in got)
    assert all(r["timeouts"] == 0 for r in sent)


def test_incast_responses_over_flashpass(net):
    """`flexpass incast --transport flashpass`: h3 asks h1 and h2 (serve --respond) for
    6 responses at once; each comes back as a FlashPass flow, all of them complete."""
    srvs = [net.spawn(h, "serve", "--listen", f"0.0.0.0:{PORT}", "--respond", *NET_ARGS) for h in ("h1", "h2")]
    time.sleep(0.3)
    p = net.spawn("h3", "incast", "--servers", f"{net.ip['h1']}:{PORT},{net.ip['h2']}:{PORT}", "--flows", "6",
                  "--size", "64000", "--transport", "flashpass", "--bind", f"0.0.0.0:{PORT}", "--timeout-s", "30",
                  *NET_ARGS)
    out, _ = finish(p, timeout=60)
    recs = records(out)
    responses = [r for r in recs if r.get("event") == "response"]
    assert len(responses) == 6 and all(r["transport"] == "flashpass" and r["size"] == 64000 for r in responses)
    assert any(r.get("event") == "summary" and r["flows"] == 6 for r in recs)
    for s in srvs:
        s.terminate()


def test_hostile_traffic_is_dropped_and_the_flow_survives(net):
    scapy = pytest.importorskip("scapy.all")
    size = 20_000_000
    srv = serve(net, 1)
    script = f"""
import random, sys, time
sys.path.insert(0, {str(ROOT.parent / 'control-plane')!r})
from scapy.all import IP, UDP, Raw, send
from flexpass_cp.scapy_flexpass import encode
h1, h3 = {net.ip['h1']!r}, {net.ip['h3']!r}
pkts = []
for i in range(300):
    fid = random.getrandbits(32)
    # forged credits and ACKs for unknown flows, claiming to come from the receiver
    pkts.append(IP(src=h3, dst=h1) / UDP(sport={PORT}, dport={PORT}) / Raw(encode({{"type": "credit", "flow_id": fid, "credit_seq": i, "padding": 6}})))
    pkts.append(IP(src=h3, dst=h1) / UDP(sport={PORT}, dport={PORT}) / Raw(encode({{"type": "ack", "flow_id": fid, "subflow": "reactive", "ece": False, "cum_ack": 5, "ack_seq": 4, "tsecr": 0, "flow_ack": 1 << 40, "sack": []}})))
    # truncated and oversized junk to both ends
    pkts.append(IP(src=h3, dst=h1) / UDP(sport={PORT}, dport={PORT}) / Raw(bytes([0x11, 0, 0])))
    pkts.append(IP(dst=h3) / UDP(sport=4000, dport={PORT}) / Raw(bytes(random.getrandbits(8) for _ in range(1400))))
print("ready", flush=True)
end = time.time() + 3
while time.time() < end:
    send(pkts, verbose=False)
"""
    attack = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}h2", "python3", "-c", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    net.procs.append(attack)
    assert attack.stdout.readline().strip() == "ready", attack.stderr.read()
    sender = send(net, "h1", "flexpass", size, bind_port=PORT)
    out, err = finish(sender)
    sout, serr = finish(srv)
    attack.wait(timeout=60)
    assert records(out)[0]["sha256"] == records(sout)[0]["sha256"] == pattern_sha(size)
    server_stats = json.loads(serr.strip().splitlines()[-1].split("flexpass serve: ", 1)[1])
    sender_stats = json.loads(err.strip().splitlines()[-1].split("flexpass send: ", 1)[1])
    assert server_stats["malformed"] > 0, server_stats
    assert sender_stats["malformed"] > 0 and sender_stats["unknown_flow"] > 0, sender_stats


def test_cat_pipes_stdin_to_the_peers_stdout(net, tmp_path):
    payload = os.urandom(300_000)
    received = tmp_path / "received.bin"
    with open(received, "wb") as sink:
        srv = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}h3", str(BIN), "serve", "--listen", f"0.0.0.0:{PORT}",
                                "--stdout", "--count", "1", *NET_ARGS], stdout=sink, stderr=subprocess.PIPE)
        net.procs.append(srv)
        time.sleep(0.3)
        cat = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}h1", str(BIN), "cat", "--to", f"{net.ip['h3']}:{PORT}",
                                *NET_ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        net.procs.append(cat)
        _, err = cat.communicate(payload, timeout=60)
        assert cat.returncode == 0, err
        srv.communicate(timeout=60)
    assert hashlib.sha256(received.read_bytes()).hexdigest() == hashlib.sha256(payload).hexdigest()


def test_message_mode_sends_one_flow_per_message(net):
    size, count = 20_000, 5
    srv = serve(net, count)
    p = net.spawn("h1", "send", "--to", f"{net.ip['h3']}:{PORT}", "--size", str(size), "--messages", str(count),
                  "--timeout-s", "60", *NET_ARGS)
    sent = records(finish(p)[0])
    got = records(finish(srv)[0])
    assert len(sent) == len(got) == count
    assert len({r["flow_id"] for r in sent}) == count
    assert all(r["sha256"] == pattern_sha(size) for r in sent + got)


@pytest.mark.parametrize("transport", ["flexpass", "expresspass", "dctcp"])
def test_jumbo_frames_byte_exact_through_router(jumbo_net, transport):
    """MTU 9000 end to end (docs/protocol.md §9): both agents find it (`--mtu auto`: the
    route towards the peer, the interfaces of the wildcard bind), send 8944-byte segments
    through the router's NIC edge (credits shaped for 9038-byte frames) byte-exact."""
    net = jumbo_net
    size = 3_000_001
    auto = ["--mtu", "auto", "--log-level", "info"]
    srv = net.spawn("h3", "serve", "--listen", f"0.0.0.0:{PORT}", "--count", "1", *NET_ARGS, *auto)
    time.sleep(0.3)
    p = net.spawn("h1", "send", "--to", f"{net.ip['h3']}:{PORT}", "--transport", transport, "--size", str(size),
                  "--timeout-s", "60", *NET_ARGS, *auto)
    out, err = finish(p)
    sout, serr = finish(srv)
    assert "MTU 9000" in err and "MTU 9000" in serr, (err, serr)
    sent, got = records(out)[0], records(sout)[0]
    assert sent["sha256"] == got["sha256"] == pattern_sha(size)
    # Jumbo segments: every first transmission but the last carries 8944 bytes.
    first = sent["packets_proactive"] + sent["packets_reactive"] - sent["retransmissions"]
    assert first == -(-size // 8944), sent
