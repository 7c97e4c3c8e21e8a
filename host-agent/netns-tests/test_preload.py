"""Unmodified programs over FlexPass (libflexpass.so via `flexpass run`) in network namespaces.

Topology (created and always removed by the fixture):

    a (10.81.0.1) ---- veth ---- b (10.81.0.2)

Each host runs `flexpass agent` (the fallback test runs none on b). Real programs from
Debian run unmodified under `flexpass run`: nc, iperf3 (both directions), curl downloading
100 MB from `python3 -m http.server`, redis-server with redis-benchmark, and a Python
program that exercises non-blocking connect, names, socket options, dup, fork/exec
inheritance and half-close. Transfers are checked byte for byte (sha256), and the agents'
connection records prove the bytes went over FlexPass.

Needs root, `ip netns` and the programs (`make deps` installs them as root); skips loudly
otherwise, per program.
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodnet import BIN, sh, skip_reason, stop_processes

ROOT = Path(__file__).resolve().parents[1]
LIB = BIN.with_name("libflexpass.so")
PREFIX = f"fpp{os.getpid() % 10000}"
IP = {"a": "10.81.0.1", "b": "10.81.0.2"}
# 1 Gbit/s: a credit rate the two single-threaded agents sustain on a loaded 2-core VM. At
# 10 Gbit/s (~770 000 credits/s at most) their UDP receive queues overflow and loss recovery
# throttles the flows (see bench_preload.py, which measures both).
NET_ARGS = ["--link-gbps", "1", "--rtt-us", "100"]

SKIP = skip_reason(tools=("ip",), need=[(LIB, "cargo build --release -p flexpass-preload")])
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"SKIPPED netns tier: {SKIP}")


def need(*programs):
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"SKIPPED: {', '.join(missing)} not installed (make deps installs them as root: "
                    "apt-get install iperf3 curl redis-server redis-tools netcat-openbsd)")


class Hosts:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs = []
        self.sock = {h: tmp / f"agent-{h}.sock" for h in IP}

    def up(self):
        for h in IP:
            sh("ip", "netns", "add", f"{PREFIX}{h}")
            sh("ip", "-n", f"{PREFIX}{h}", "link", "set", "lo", "up")
        sh("ip", "link", "add", f"{PREFIX}va", "type", "veth", "peer", "name", f"{PREFIX}vb")
        for h in IP:
            dev = f"{PREFIX}v{h}"
            sh("ip", "link", "set", dev, "netns", f"{PREFIX}{h}")
            sh("ip", "-n", f"{PREFIX}{h}", "addr", "add", f"{IP[h]}/24", "dev", dev)
            sh("ip", "-n", f"{PREFIX}{h}", "link", "set", dev, "up")

    def agent(self, host, extra=()):
        log = open(self.tmp / f"agent-{host}.log", "w")
        p = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{host}", str(BIN), "agent", "--socket",
                              str(self.sock[host]), "--log-level", "debug", *NET_ARGS, *extra],
                             stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        for _ in range(100):
            if self.sock[host].exists():
                return p
            time.sleep(0.05)
        raise RuntimeError(f"agent on {host} did not start: {(self.tmp / f'agent-{host}.log').read_text()}")

    def run(self, host, *cmd, stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=None):
        """A program under `flexpass run` on `host` (not waited for)."""
        e = dict(os.environ, **(env or {}))
        p = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{host}", str(BIN), "run", "--agent-socket",
                              str(self.sock[host]), "--", *cmd], stdin=stdin, stdout=stdout, stderr=stderr, env=e)
        self.procs.append(p)
        return p

    def plain(self, host, *cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        p = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{host}", *cmd], stdout=stdout, stderr=stderr)
        self.procs.append(p)
        return p

    def status(self, host):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(str(self.sock[host]))
        s.sendall(b'{"op":"status"}\n')
        return json.loads(s.makefile().readline())

    def wait_port(self, host, port, timeout=10.0):
        """Until something listens on TCP `port` in `host`."""
        end = time.time() + timeout
        while time.time() < end:
            r = sh("ip", "netns", "exec", f"{PREFIX}{host}", "ss", "-Hltn", f"sport = :{port}", check=False)
            if r.stdout.strip():
                return
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on {host}:{port}")

    def down(self):
        try:
            stop_processes(reversed(self.procs))
        finally:  # the namespaces go even if a process would not end
            for h in IP:
                sh("ip", "netns", "del", f"{PREFIX}{h}", check=False)


def up_for_the_test(n):
    """The hosts `n` for one test (a fixture's body: `yield from`), taken down after it."""
    try:
        n.up()
        yield n
    finally:
        n.down()


@pytest.fixture
def hosts(tmp_path):
    yield from up_for_the_test(Hosts(tmp_path))


@pytest.fixture
def agents(hosts):
    hosts.agent("a")
    hosts.agent("b")
    return hosts


def finish(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}: {err if isinstance(err, str) else err.decode(errors='replace')}"
    return out, err


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def flexpass_conns(status, side=None):
    t = status["tcp"]
    conns = t["closed"] + t["conns"]
    return [c for c in conns if side is None or c["side"] == side]


def test_nc_byte_exact_and_names_mapped(agents, tmp_path):
    need("nc")
    data = os.urandom(3_000_000)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    out = tmp_path / "out.bin"
    with open(out, "wb") as sink:
        srv = agents.run("b", "nc", "-n", "-v", "-l", "-N", "9000", stdout=sink)
        agents.wait_port("b", 9000)
        with open(src, "rb") as f:
            cli = agents.run("a", "nc", "-n", "-N", IP["b"], "9000", stdin=f)
            finish(cli, 60)
        _, err = finish(srv, 60)
    assert sha_file(out) == hashlib.sha256(data).hexdigest()
    # The server saw the real client address, not the agent's loopback connection.
    assert f"Connection received on {IP['a']}" in err.decode(), err
    a, b = agents.status("a"), agents.status("b")
    sent = flexpass_conns(a, "client")
    assert [c["bytes_sent"] for c in sent] == [len(data)], a["tcp"]
    assert flexpass_conns(b, "server")[0]["bytes_received"] == len(data), b["tcp"]
    assert a["endpoint"]["datagrams_out"] > len(data) / 1500 / 2, a["endpoint"]


# A Python program that uses the socket API the way real programs do.
APP = r'''
import hashlib, os, select, socket, subprocess, sys
role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    l = socket.socket(socket.AF_INET6)          # dual stack, like iperf3
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("::", port)); l.listen()
    c, peer = l.accept()
    h = hashlib.sha256(); n = 0
    while True:
        d = c.recv(65536)
        if not d: break
        h.update(d); n += len(d)
    msg = f"{peer[0]} {peer[1]} {c.getpeername()[0]} {c.getsockname()[0]} {c.getsockname()[1]} {n} {h.hexdigest()}\n"
    c.sendall(msg.encode()); c.close()
    sys.exit(0)
host = sys.argv[3]
s = socket.socket()
s.setblocking(False)
err = s.connect_ex((host, port))
assert err in (0, 115), err                    # 0 or EINPROGRESS, like kernel TCP
ep = select.epoll(); ep.register(s.fileno(), select.EPOLLOUT)
assert ep.poll(10) and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0   # epoll readiness
_, w, _ = select.select([], [s], [], 10)
assert w
ep.close()
s.setblocking(True)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) in (0, 1)
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_INET
me, peer = s.getsockname(), s.getpeername()
assert peer == (host, port), peer
part1 = os.urandom(200_000)
d = os.dup(s.fileno())                          # dup: same connection
os.write(d, part1[:50_000]); os.close(d)
os.writev(s.fileno(), [part1[50_000:60_000], part1[60_000:100_000]])   # writev
s.sendmsg([part1[100_000:150_000], part1[150_000:]])                  # sendmsg
# fork/exec: a child program writes the second part on the inherited socket (fd 3).
with open(sys.argv[4], "rb") as f:
    part2 = f.read()
subprocess.run(["sh", "-c", f"cat {sys.argv[4]} >&3"], pass_fds=(s.fileno(),), check=True,
               preexec_fn=lambda: os.dup2(s.fileno(), 3))
with open(sys.argv[4], "rb") as f:              # sendfile(2) on the socket
    s.sendfile(f)
part2 = part2 + part2
s.shutdown(socket.SHUT_WR)                      # half-close: the reply still comes
first = bytearray(8)
reply = bytes(first[:os.readv(s.fileno(), [first])])   # readv, then recvmsg
while True:
    d, _, _, _ = s.recvmsg(4096)
    if not d: break
    reply += d
print(me[0], me[1], reply.decode().strip(), hashlib.sha256(part1 + part2).hexdigest(), len(part1 + part2))
'''


def test_socket_api_of_real_programs(agents, tmp_path):
    app = tmp_path / "app.py"
    app.write_text(APP)
    part2 = tmp_path / "part2.bin"
    part2.write_bytes(os.urandom(700_000))
    srv = agents.run("b", sys.executable, str(app), "server", "9100", stdout=subprocess.PIPE)
    agents.wait_port("b", 9100)
    out, _ = finish(agents.run("a", sys.executable, str(app), "client", "9100", IP["b"], str(part2)), 60)
    finish(srv, 30)
    (my_ip, my_port, seen_ip, seen_port, peer_ip, local_ip, local_port, n, digest, sent_digest,
     sent) = out.decode().split()
    assert my_ip == IP["a"]
    # The server's accept() and getpeername() give the client's real address and port.
    assert seen_ip == peer_ip == f"::ffff:{IP['a']}", out
    assert seen_port == my_port, out
    assert local_ip == f"::ffff:{IP['b']}" and local_port == "9100", out
    assert int(n) == int(sent) and digest == sent_digest, out
    assert flexpass_conns(agents.status("a"), "client"), "the connection did not go over FlexPass"


def iperf(agents, reverse):
    srv = agents.run("b", "iperf3", "-s", "-1", "-p", "5201")
    agents.wait_port("b", 5201)
    args = ["iperf3", "-c", IP["b"], "-p", "5201", "-t", "3", "--json"] + (["-R"] if reverse else [])
    out, _ = finish(agents.run("a", *args), 90)
    finish(srv, 30)
    return json.loads(out)


@pytest.mark.parametrize("reverse", [False, True], ids=["client-sends", "server-sends-R"])
def test_iperf3_both_directions(agents, reverse):
    need("iperf3")
    r = iperf(agents, reverse)
    assert "error" not in r, r.get("error")
    sent, received = r["end"]["sum_sent"]["bytes"], r["end"]["sum_received"]["bytes"]
    assert received > 1_000_000, r["end"]
    print(f"iperf3 through libflexpass{' -R' if reverse else ''}: "
          f"{r['end']['sum_received']['bits_per_second'] / 1e6:.0f} Mbit/s")
    a = agents.status("a")
    conns = flexpass_conns(a, "client")
    assert len(conns) >= 2, a["tcp"]           # control and data connections
    moved = sum(c["bytes_received"] if reverse else c["bytes_sent"] for c in conns)
    assert moved >= received, (moved, received)
    assert a["tcp"]["direct"] == 0


def curl_100mb(agents, tmp_path):
    """curl on a fetches 100 MB of random bytes from `python3 -m http.server` on b; the file
    arrives byte-exact (SHA-256)."""
    need("curl")
    www = tmp_path / "www"
    www.mkdir()
    blob = www / "blob.bin"
    with open(blob, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(1 << 20))
    srv = agents.run("b", sys.executable, "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory",
                     str(www), stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    agents.wait_port("b", 8000)
    got = tmp_path / "got.bin"
    finish(agents.run("a", "curl", "-sS", "--fail", "-o", str(got), f"http://{IP['b']}:8000/blob.bin"), 180)
    srv.terminate()
    assert sha_file(got) == sha_file(blob)


def test_curl_100mb_from_http_server(agents, tmp_path):
    curl_100mb(agents, tmp_path)
    conns = flexpass_conns(agents.status("a"), "client")
    assert sum(c["bytes_received"] for c in conns) >= 100 << 20, conns


def test_redis_benchmark(agents):
    need("redis-server", "redis-benchmark")
    agents.run("b", "redis-server", "--port", "6380", "--save", "", "--appendonly", "no", "--protected-mode", "no",
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agents.wait_port("b", 6380)
    out, err = finish(agents.run("a", "redis-benchmark", "-h", IP["b"], "-p", "6380", "-n", "2000", "-c", "10",
                                 "-t", "set,get", "--csv"), 120)
    text = out.decode() + err.decode()
    assert "error" not in text.lower(), text
    rows = [line.split(",") for line in out.decode().splitlines() if line.startswith('"SET"') or line.startswith('"GET"')]
    assert len(rows) == 2, out
    for row in rows:
        rps = float(row[1].strip('"'))
        assert rps > 0
        print(f"redis-benchmark through libflexpass: {row[0]} {rps:.0f} requests/s")
    a = agents.status("a")
    assert a["tcp"]["opened_flexpass"] >= 10, a["tcp"]
    assert a["tcp"]["direct"] == 0, a["tcp"]


FALLBACK_CLIENT = r'''
import hashlib, socket, sys
for i in range(3):
    s = socket.create_connection((sys.argv[1], 9200), timeout=20)
    s.sendall(b"x" * 100000); s.shutdown(socket.SHUT_WR)
    r = s.makefile("rb").read()
    assert r == hashlib.sha256(b"x" * 100000).hexdigest().encode(), r
print("ok")
'''

# `server PORT COUNT`: takes COUNT connections one after the other, reads each to its end
# and answers the SHA-256 of what came. `client PORT HOST`: sends 1 MB, half-closes, checks
# the answer, prints ok.
SHA_ROUNDTRIP = r'''
import hashlib, socket, sys
port = int(sys.argv[2])
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen()
    for _ in range(int(sys.argv[3])):
        c, _ = l.accept(); h = hashlib.sha256()
        while True:
            d = c.recv(65536)
            if not d: break
            h.update(d)
        c.sendall(h.hexdigest().encode()); c.close()
else:
    data = bytes(range(256)) * 4000
    s = socket.create_connection((sys.argv[3], port), timeout=20)
    s.sendall(data); s.shutdown(socket.SHUT_WR)
    assert s.makefile("rb").read() == hashlib.sha256(data).hexdigest().encode()
    print("ok")
'''


def test_fallback_to_a_peer_without_flexpass(hosts, tmp_path):
    hosts.agent("a")                            # b runs no agent: it does not speak FlexPass
    (tmp_path / "s.py").write_text(SHA_ROUNDTRIP)
    (tmp_path / "c.py").write_text(FALLBACK_CLIENT)
    # The server runs under flexpass run too: with no agent the library stays kernel TCP.
    srv = hosts.run("b", sys.executable, str(tmp_path / "s.py"), "server", "9200", "3")
    hosts.wait_port("b", 9200)
    t = time.time()
    out, err = finish(hosts.run("a", sys.executable, str(tmp_path / "c.py"), IP["b"]), 60)
    elapsed = time.time() - t
    _, serr = finish(srv, 30)
    assert out.decode().strip() == "ok"
    lines = [ln for ln in err.decode().splitlines() if "kernel TCP" in ln]
    assert len(lines) == 1 and IP["b"] in lines[0] and "does not speak FlexPass" in lines[0], err
    assert serr.decode().count("agent not running") == 1, serr
    a = hosts.status("a")
    assert a["tcp"]["direct"] == 3 and a["tcp"]["opened_flexpass"] == 0, a["tcp"]
    assert IP["b"] in a["tcp"]["no_agent_peers"], a["tcp"]
    assert elapsed < 10, elapsed                # one fallback wait, then cached


CLOSE_SERVER = r'''
import hashlib, socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("0.0.0.0", 9300)); l.listen()
c, _ = l.accept()
h = hashlib.sha256(); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    h.update(d); n += len(d)
print(n, h.hexdigest(), flush=True)
try:                                        # a reply to a client that has closed: TCP answers RST
    for _ in range(100):
        c.sendall(b"reply\n" * 1000)
except OSError:
    pass
'''

CLOSE_CLIENT = r'''
import hashlib, socket, sys
data = bytes(range(256)) * 8000
s = socket.create_connection((sys.argv[1], 9300))
s.sendall(data)
s.close()                                   # close, not shutdown: the reply is never read
print(len(data), hashlib.sha256(data).hexdigest())
'''


def test_client_close_after_write_delivers_its_bytes(agents, tmp_path):
    """close() right after the last write: every byte still arrives (as with TCP), and the
    server's reply to the closed socket is refused without cutting the client's bytes."""
    (tmp_path / "s.py").write_text(CLOSE_SERVER)
    (tmp_path / "c.py").write_text(CLOSE_CLIENT)
    srv = agents.run("b", sys.executable, str(tmp_path / "s.py"))
    agents.wait_port("b", 9300)
    out, _ = finish(agents.run("a", sys.executable, str(tmp_path / "c.py"), IP["b"]), 60)
    sout, _ = finish(srv, 60)
    assert sout.decode().split() == out.decode().split()
    assert flexpass_conns(agents.status("a"), "client")
