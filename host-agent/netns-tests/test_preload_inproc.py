"""Unmodified programs with the transport in the serving process (FLEXPASS_INPROC=1, #28).

Same topology and programs as test_preload.py (a 10.81.0.1 ---- veth ---- b 10.81.0.2),
with b's agent started with `--inproc-listen` and every program run with
FLEXPASS_INPROC=1: a server's listener registers in-process, the agent hands each
connection's HELLO to it (`tcp_hello`), and the flows then run between a's agent and the
server's own UDP socket (docs/datapath.md, "Next step: the core in the application's
process"). Each test runs twice: servers in-process and clients through a's agent
(FLEXPASS_INPROC=listen), and both sides in-process (FLEXPASS_INPROC=1: no agent on the
data path at all). Checked: bytes exact both ways,
the addresses the programs see, that b's agent handed the connections over and carried
none itself, fallback (no `--inproc-listen`, no agent), a server killed mid-transfer:
the client gets an error within seconds and b's agent frees the port and the flows, and a
listener that registers again with a restarted agent, a connection that lives on in a
duplicate of its descriptor, an idle connection that leaves the timer thread asleep, a
forking server, a program that forks and execs mid-connection, and sendfile(2).

Needs root, `ip netns` and the programs; skips loudly otherwise, per program.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import test_preload as tp
from test_preload import IP, agents, finish, flexpass_conns, need, sha_file  # noqa: F401 (agents: fixture)

pytestmark = pytest.mark.skipif(tp.SKIP is not None, reason=f"SKIPPED netns tier: {tp.SKIP}")

# FLEXPASS_TEST_LOG=debug: the library's lines of some tests' programs in their failures.
DEBUG_ENV = {"FLEXPASS_LOG": os.environ.get("FLEXPASS_TEST_LOG", "")}


class InprocHosts(tp.Hosts):
    """Agents that hand connections to in-process listeners; programs with the switch on:
    `mode` "listen" (servers in-process, clients through their agent) or "1" (both)."""

    inproc_listen = True

    def __init__(self, tmp, mode):
        super().__init__(tmp)
        self.mode = mode
        self.both = mode == "1"

    def agent(self, host, extra=()):
        return super().agent(host, extra=(*(("--inproc-listen",) if self.inproc_listen else ()), *extra))

    def run(self, host, *cmd, env=None, **kw):
        # The flows' link rate, RTT, w_q and credit batch: the agent's (`settings`).
        return super().run(host, *cmd, env=dict(FLEXPASS_INPROC=self.mode, **(env or {})), **kw)


@pytest.fixture(params=["listen", "1"], ids=["listen-only", "both-sides"])
def hosts(tmp_path, request):
    yield from tp.up_for_the_test(InprocHosts(tmp_path, request.param))


def assert_in_process(agents, conns):
    """b's agent handed `conns` connections over and carried none; a's agent moved its flows
    to the server's socket, or (both sides in-process) carried nothing."""
    a, b = agents.status("a"), agents.status("b")
    assert b["endpoint"]["handed_over"] >= conns, b["endpoint"]
    assert b["tcp"]["accepted_flexpass"] == 0, b["tcp"]
    assert a["tcp"]["direct"] == 0, a["tcp"]
    if agents.both:
        assert a["tcp"]["opened_flexpass"] == 0 and a["endpoint"]["datagrams_out"] == 0, a
    else:
        assert a["endpoint"]["peer_moved"] >= conns, a["endpoint"]
    return a, b


def test_nc_byte_exact_both_ways(agents, tmp_path):
    """nc closes its listener right after accept(): the connection goes on (as with TCP)."""
    need("nc")
    up, down = os.urandom(3_000_000), os.urandom(2_000_000)
    (tmp_path / "up.bin").write_bytes(up)
    (tmp_path / "down.bin").write_bytes(down)
    got_up, got_down = tmp_path / "got_up.bin", tmp_path / "got_down.bin"
    with open(got_up, "wb") as sink, open(tmp_path / "down.bin", "rb") as src:
        srv = agents.run("b", "nc", "-n", "-v", "-l", "-N", "9000", stdin=src, stdout=sink)
        agents.wait_port("b", 9000)
        with open(tmp_path / "up.bin", "rb") as f, open(got_down, "wb") as out:
            cli = agents.run("a", "nc", "-n", "-N", IP["b"], "9000", stdin=f, stdout=out)
            finish(cli, 60)
        _, err = finish(srv, 60)
    assert sha_file(got_up) == hashlib.sha256(up).hexdigest(), "client → server bytes differ"
    assert sha_file(got_down) == hashlib.sha256(down).hexdigest(), "server → client bytes differ"
    assert f"Connection received on {IP['a']}" in err.decode(), err
    a, _ = assert_in_process(agents, 1)
    if not agents.both:
        [c] = flexpass_conns(a, "client")
        assert (c["bytes_sent"], c["bytes_received"]) == (len(up), len(down)), c


# Servers in-process only: the program's client side also has a forked-and-exec'd child
# write on the inherited socket, which an exec'd image cannot do on an in-process
# connection (it sees a plain UDP socket: docs/datapath.md, "fork and exec").
@pytest.mark.parametrize("hosts", ["listen"], indirect=True)
def test_socket_api_of_real_programs(agents, tmp_path):
    """test_preload's socket-API program; its server (AF_INET6 dual stack) in-process."""
    app = tmp_path / "app.py"
    app.write_text(tp.APP)
    part2 = tmp_path / "part2.bin"
    part2.write_bytes(os.urandom(700_000))
    srv = agents.run("b", sys.executable, str(app), "server", "9100", stdout=subprocess.PIPE)
    agents.wait_port("b", 9100)
    out, _ = finish(agents.run("a", sys.executable, str(app), "client", "9100", IP["b"], str(part2)), 60)
    finish(srv, 30)
    (my_ip, my_port, seen_ip, seen_port, peer_ip, local_ip, local_port, n, digest, sent_digest,
     sent) = out.decode().split()
    assert seen_ip == peer_ip == f"::ffff:{my_ip}" and seen_port == my_port, out
    assert local_ip == f"::ffff:{IP['b']}" and local_port == "9100", out
    assert int(n) == int(sent) and digest == sent_digest, out
    assert_in_process(agents, 1)


@pytest.mark.parametrize("reverse", [False, True], ids=["client-sends", "server-sends-R"])
def test_iperf3_both_directions(agents, reverse):
    need("iperf3")
    r = tp.iperf(agents, reverse)
    assert "error" not in r, r.get("error")
    received = r["end"]["sum_received"]["bytes"]
    assert received > 1_000_000, r["end"]
    print(f"iperf3, server in-process{' -R' if reverse else ''}: "
          f"{r['end']['sum_received']['bits_per_second'] / 1e6:.0f} Mbit/s")
    a, _ = assert_in_process(agents, 2)        # control and data connections
    if not agents.both:
        conns = flexpass_conns(a, "client")
        moved = sum(c["bytes_received"] if reverse else c["bytes_sent"] for c in conns)
        assert moved >= received, (moved, received)


def test_curl_100mb_from_http_server(agents, tmp_path):
    tp.curl_100mb(agents, tmp_path)
    a, _ = assert_in_process(agents, 1)
    if not agents.both:
        assert sum(c["bytes_received"] for c in flexpass_conns(a, "client")) >= 100 << 20


def test_without_inproc_listen_the_agent_serves_the_port(hosts, tmp_path):
    """b's agent without --inproc-listen refuses the registration: the library says so and
    registers the port the usual way (loopback leg through the agent)."""
    hosts.inproc_listen = False
    hosts.agent("a")
    hosts.agent("b")
    data = os.urandom(500_000)
    (tmp_path / "in.bin").write_bytes(data)
    out = tmp_path / "out.bin"
    with open(out, "wb") as sink:
        srv = hosts.run("b", "nc", "-n", "-l", "-N", "9000", stdout=sink)
        hosts.wait_port("b", 9000)
        with open(tmp_path / "in.bin", "rb") as f:
            finish(hosts.run("a", "nc", "-n", "-N", IP["b"], "9000", stdin=f), 60)
        _, err = finish(srv, 60)
    assert sha_file(out) == hashlib.sha256(data).hexdigest()
    assert "no in-process registration" in err.decode() and "--inproc-listen" in err.decode(), err
    a, b = hosts.status("a"), hosts.status("b")
    assert b["tcp"]["accepted_flexpass"] == 1 and b["endpoint"]["handed_over"] == 0, b
    assert a["tcp"]["opened_flexpass"] == (0 if hosts.both else 1), a["tcp"]


# One connection: the server echoes what it reads until EOF.
ECHO_ONCE = r'''
import socket, sys
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", int(sys.argv[2]))); l.listen(); c, _ = l.accept()
    while d := c.recv(65536): c.sendall(d)
    c.close()
else:
    s = socket.create_connection((sys.argv[3], int(sys.argv[2])), timeout=30)
    s.sendall(b"settings"); s.shutdown(socket.SHUT_WR)
    print(s.recv(100).decode())
'''


def test_in_process_flows_take_their_agents_settings(hosts, tmp_path):
    """A flow run in the program's process is paced as its agent's flows are: it takes the
    agent's --link-gbps, --rtt-us, --w-q and --credit-batch (the `settings` op), each one
    set in the environment winning (a value that is not valid is named, and the agent's
    taken). b's agent runs with w_q 0.3 and credit batches of 4; the library's debug line
    names each value and where it came from."""
    app = tmp_path / "echo.py"
    app.write_text(ECHO_ONCE)
    hosts.agent("a")
    hosts.agent("b", extra=("--w-q", "0.3", "--credit-batch", "4"))
    for port, env, want in [
        (9710, {}, "link 1 Gbit/s (agent), RTT 100 us (agent), w_q 0.3 (agent), credit batch 4 (agent)"),
        (9711, {"FLEXPASS_W_Q": "0.25"},
         "link 1 Gbit/s (agent), RTT 100 us (agent), w_q 0.25 (environment), credit batch 4 (agent)"),
        # Not a number, or out of range: named, and the agent's value instead.
        (9712, {"FLEXPASS_RTT_US": "fast", "FLEXPASS_W_Q": "2"},
         "link 1 Gbit/s (agent), RTT 100 us (agent), w_q 0.3 (agent), credit batch 4 (agent)"),
    ]:
        srv = hosts.run("b", sys.executable, str(app), "server", str(port), env=dict(env, FLEXPASS_LOG="debug"))
        hosts.wait_port("b", port)
        out, _ = finish(hosts.run("a", sys.executable, str(app), "client", str(port), IP["b"]), 30)
        _, err = finish(srv, 30)
        assert out.decode().strip() == "settings"
        assert f"flow settings: {want}" in err.decode(), err.decode()
        for name, value in env.items():
            assert (f"{name}={value} is not valid" in err.decode()) == (port == 9712), err.decode()
    assert hosts.status("b")["endpoint"]["handed_over"] == 3


def test_in_process_connections_appear_in_their_agents_status(agents, tmp_path):
    """An in-process connection never passes through its agent; when it ends, the library
    tells the agent (`tcp_record`), so `status` lists it among the closed connections
    with `in_process` and the bytes the program wrote and read: the server's on b, and
    with both sides in-process the client's on a."""
    app = tmp_path / "echo.py"
    app.write_text(ECHO_ONCE)
    srv = agents.run("b", sys.executable, str(app), "server", "9730")
    agents.wait_port("b", 9730)
    out, _ = finish(agents.run("a", sys.executable, str(app), "client", "9730", IP["b"]), 30)
    finish(srv, 30)
    assert out.decode().strip() == "settings"
    want = {"b": "server", **({"a": "client"} if agents.both else {})}
    deadline = time.time() + 10
    while True:
        got = {h: [c for c in agents.status(h)["tcp"]["closed"] if c.get("in_process")] for h in want}
        if all(got.values()) or time.time() > deadline:
            break
        time.sleep(0.1)
    for h, side in want.items():
        assert [(c["side"], c["transport"], c["bytes_sent"], c["bytes_received"], c["outcome"])
                for c in got[h]] == [(side, "flexpass", 8, 8, "closed")], (h, got)
        assert got[h][0]["local" if side == "server" else "remote"] == f"{IP['b']}:9730", got[h]
    if not agents.both:  # the client's connection is its agent's own record
        assert not [c for c in agents.status("a")["tcp"]["closed"] if c.get("in_process")]


# Bytes both ways: the client sends SIZE random bytes and reads the server's echo.
ECHO_BULK = r'''
import hashlib, os, socket, sys, threading
port, size = int(sys.argv[2]), int(sys.argv[3])
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    while d := c.recv(1 << 16): c.sendall(d)
    c.close()
else:
    data = os.urandom(size)
    s = socket.create_connection((sys.argv[4], port), timeout=60)
    def send():
        s.sendall(data); s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send); t.start()
    h = hashlib.sha256(); n = 0
    while d := s.recv(1 << 16):
        h.update(d); n += len(d)
    t.join()
    assert (n, h.hexdigest()) == (size, hashlib.sha256(data).hexdigest()), n
    print("ok")
'''


@pytest.mark.parametrize("transport", ["expresspass", "dctcp", "ppt", "flashpass", "pfabric"])
def test_every_transport_carries_a_connection_in_process(agents, tmp_path, transport):
    """FLEXPASS_TRANSPORT picks the connection's transport in-process too; each flow fits
    its transport's parameters to the agent's settings as the agent's flows do
    (flexpass_core `SenderConfig::fit_to_path`): 4 MB echoed byte-exact both ways."""
    app = tmp_path / "echo.py"
    app.write_text(ECHO_BULK)
    env = {"FLEXPASS_TRANSPORT": transport}
    srv = agents.run("b", sys.executable, str(app), "server", "9720", str(4 << 20), env=env)
    agents.wait_port("b", 9720)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9720", str(4 << 20), IP["b"],
                                 env=env), 120)
    finish(srv, 30)
    assert out.strip() == b"ok", err
    a, _ = assert_in_process(agents, 1)
    if not agents.both:  # the client's flow is its agent's: its record names the transport
        assert [c["transport"] for c in flexpass_conns(a, "client")] == [transport], a["tcp"]


def test_fallback_to_a_peer_without_flexpass(hosts, tmp_path):
    """No agent on b: the in-process switch changes nothing, kernel TCP as before."""
    hosts.agent("a")
    (tmp_path / "s.py").write_text(tp.SHA_ROUNDTRIP)
    (tmp_path / "c.py").write_text(tp.FALLBACK_CLIENT)
    srv = hosts.run("b", sys.executable, str(tmp_path / "s.py"), "server", "9200", "3")
    hosts.wait_port("b", 9200)
    t = time.time()
    out, err = finish(hosts.run("a", sys.executable, str(tmp_path / "c.py"), IP["b"]), 60)
    elapsed = time.time() - t
    finish(srv, 30)
    assert out.decode().strip() == "ok"
    lines = [ln for ln in err.decode().splitlines() if "kernel TCP" in ln]
    assert len(lines) == 1 and IP["b"] in lines[0] and "does not speak FlexPass" in lines[0], err
    # Through a's agent (listen-only) or from the client process itself (both sides).
    assert hosts.status("a")["tcp"]["direct"] == (0 if hosts.both else 3)
    assert elapsed < 10, elapsed                # one fallback wait, then cached
    if hosts.both:
        # The HELLO's port unreachable (no agent on b) is the answer: no 3 s wait.
        assert elapsed < 1.5, elapsed


SLOW_SERVER = r'''
import socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("0.0.0.0", 9400)); l.listen()
c, _ = l.accept()
print("accepted", flush=True)
while True:
    if not c.recv(65536): break
    time.sleep(0.01)
'''


def test_a_server_killed_mid_transfer_frees_the_agents_state(agents, tmp_path):
    """SIGKILL of the serving process mid-transfer: its registration ends, b's agent resets
    the connection from the socket it kept (the client gets an error within seconds, not at
    its 30 s give-up), no flow or connection is left in either agent."""
    need("nc")
    (tmp_path / "s.py").write_text(SLOW_SERVER)
    srv = agents.run("b", sys.executable, str(tmp_path / "s.py"))
    agents.wait_port("b", 9400)
    cli = agents.run("a", "sh", "-c", f"head -c 200000000 /dev/zero | nc -n -N {IP['b']} 9400")
    assert srv.stdout.readline().decode().strip() == "accepted"
    time.sleep(1.0)
    assert cli.poll() is None, "the transfer ended before the kill"
    srv.send_signal(signal.SIGKILL)
    srv.wait(10)
    t = time.time()
    cli.communicate(timeout=20)
    assert time.time() - t < 10, "the client waited for its give-up timeout"
    deadline = time.time() + 10
    while True:
        a, b = agents.status("a"), agents.status("b")
        if b["flows"]["receivers"] == 0 and b["flows"]["senders"] == 0 and a["tcp"]["open"] == 0:
            break
        assert time.time() < deadline, (a["tcp"], b["tcp"], b["flows"])
        time.sleep(0.2)
    assert b["endpoint"]["handed_over"] == 1, b["endpoint"]


def test_a_listener_registers_again_after_its_agent_restarts(agents, tmp_path):
    """b's agent is killed and a new one started under a listening server: the library sees
    its registration end and registers the port with the new agent (docs/agent-api.md,
    "Agent restart"), so the next connection is handed to the server's process again,
    byte-exact. Before, the port stayed with no registration until the program listened
    again: every later opener fell back to kernel TCP."""
    app = tmp_path / "seq.py"
    app.write_text(tp.SHA_ROUNDTRIP)
    srv = agents.run("b", sys.executable, str(app), "server", "9520", "2")
    agents.wait_port("b", 9520)

    def connect_once():
        out, _ = finish(agents.run("a", sys.executable, str(app), "client", "9520", IP["b"]), 60)
        assert out.strip() == b"ok"

    connect_once()
    assert agents.status("b")["endpoint"]["handed_over"] == 1
    old = agents.procs[1]  # the agents fixture starts a's agent, then b's
    old.kill()
    old.wait()
    agents.sock["b"].unlink()
    agents.agent("b")
    deadline = time.time() + 10
    while 9520 not in agents.status("b")["tcp"]["inproc_listening"]:
        assert time.time() < deadline, "the port was not registered again"
        time.sleep(0.05)
    connect_once()
    finish(srv, 30)
    b = agents.status("b")
    assert b["endpoint"]["handed_over"] == 1 and b["tcp"]["accepted_flexpass"] == 0, b


# Both ends work on duplicates of their sockets (dup(2)) and close the originals first:
# the connection lives on in the duplicate, and ends when the last descriptor closes.
DUPED = r'''
import hashlib, os, socket, sys
port = int(sys.argv[2])
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    d = os.dup(c.fileno()); c.close()
    h = hashlib.sha256()
    while True:
        b = os.read(d, 65536)
        if not b: break
        h.update(b)
    os.write(d, h.hexdigest().encode()); os.close(d)
else:
    data = os.urandom(3_000_000)
    s = socket.create_connection((sys.argv[3], port), timeout=20)
    s.settimeout(None)                   # blocking (a timeout is O_NONBLOCK underneath)
    d = os.dup(s.fileno()); s.close()
    view = memoryview(data)
    while view:
        view = view[os.write(d, view):]
    t = socket.socket(fileno=d)          # the duplicate as a socket object (no new dup)
    t.shutdown(socket.SHUT_WR)
    assert t.makefile("rb").read() == hashlib.sha256(data).hexdigest().encode()
    print("ok")
'''


def test_a_connection_lives_on_in_its_duplicate(agents, tmp_path):
    """dup(2) of a connection's descriptor is the same connection: closing the original
    does not end it (before, its FIN went out and the duplicate was a bare UDP socket);
    the bytes written on the duplicate arrive byte-exact, and closing the last descriptor
    ends it."""
    app = tmp_path / "duped.py"
    app.write_text(DUPED)
    srv = agents.run("b", sys.executable, str(app), "server", "9530")
    agents.wait_port("b", 9530)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9530", IP["b"]), 60)
    finish(srv, 30)
    assert out.strip() == b"ok", err
    assert_in_process(agents, 1)


# After one request and its answer, a connection stays open and idle: the serving
# process's timer thread (flexpass-timer) counts its own wake-ups over a second.
IDLE = r'''
import glob, socket, sys, time
port = int(sys.argv[2])
def timer_wakes():
    for task in glob.glob("/proc/self/task/*"):
        if open(task + "/comm").read().strip() == "flexpass-timer":
            st = dict(l.split(":") for l in open(task + "/status") if "ctxt_switches" in l)
            return sum(int(v) for v in st.values())
    raise SystemExit("no flexpass-timer thread")
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    c.sendall(c.recv(5))
    time.sleep(0.5)                      # the flows settle: ACKs, CREDIT_STOP
    before = timer_wakes(); time.sleep(1.0); print(timer_wakes() - before)
    c.close()
else:
    s = socket.create_connection((sys.argv[3], port), timeout=20)
    s.sendall(b"hello"); assert s.recv(5) == b"hello"
    assert s.recv(1) == b""              # until the server closes
'''


def test_an_idle_connection_does_not_wake_the_timer_thread(agents, tmp_path):
    """An open connection with nothing to send or receive arms no timer: the serving
    process's timer thread sleeps (before the deadline heap it woke every 20 ms, and a
    scan of every connection at each wake made the thread a third of redis's CPU)."""
    app = tmp_path / "idle.py"
    app.write_text(IDLE)
    srv = agents.run("b", sys.executable, str(app), "server", "9540")
    agents.wait_port("b", 9540)
    cli = agents.run("a", sys.executable, str(app), "client", "9540", IP["b"])
    out, _ = finish(srv, 30)
    finish(cli, 30)
    assert int(out) <= 5, f"the timer thread woke {int(out)} times in an idle second"
    assert_in_process(agents, 1)


# A forking server (socketserver.ForkingTCPServer): the parent accepts, forks and closes its
# copy at once; the child reads the request and answers with length, SHA-256 and the bytes,
# then shuts down, closes and leaves with os._exit (no atexit handler runs).
FORKING = r'''
import hashlib, os, socket, socketserver, sys, threading
port = int(sys.argv[2])
if sys.argv[1] == "server":
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            data = os.urandom(int(self.rfile.readline()))
            self.wfile.write(len(data).to_bytes(8, "big") + hashlib.sha256(data).digest())
            self.wfile.write(data)
    socketserver.ForkingTCPServer.allow_reuse_address = True
    with socketserver.ForkingTCPServer(("0.0.0.0", port), Handler) as srv:
        for _ in range(int(sys.argv[3])):
            srv.handle_request()
    # server_close waited for the children
else:
    n, size, bad = int(sys.argv[4]), int(sys.argv[5]), []
    def one(i):
        s = socket.create_connection((sys.argv[3], port), timeout=60)
        s.sendall(b"%d\n" % size)
        f = s.makefile("rb")
        head = f.read(40)
        data = f.read()
        if len(head) != 40 or int.from_bytes(head[:8], "big") != len(data) or hashlib.sha256(data).digest() != head[8:]:
            bad.append((i, len(head), len(data)))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
    print("ok" if not bad else f"bad {bad}")
'''


def test_a_forking_server_serves_concurrent_clients(agents, tmp_path):
    """The parent's close right after fork does not end the connection (no FIN, no RESET):
    the child claims it at its first read (inproc/fork.rs), serves 3 MB byte-exact, and its
    close and _exit end it (FIN, its bytes acknowledged before the process goes). Before,
    the parent's close finished the reply flow and both processes drove their copies."""
    app = tmp_path / "forking.py"
    app.write_text(FORKING)
    n = 4
    srv = agents.run("b", sys.executable, str(app), "server", "9550", str(n), env=DEBUG_ENV)
    agents.wait_port("b", 9550)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9550", IP["b"], str(n),
                                 "3000000"), 90)
    _, serr = finish(srv, 30)
    assert out.strip() == b"ok", (out, err, serr[-3000:])
    assert_in_process(agents, n)


# A program that forks mid-connection while it writes (the client, or the server when only
# servers are in-process): children that close their copy and leave (os._exit, sys.exit
# with its atexit handlers), or exec a program with the socket inherited (not CLOEXEC) or
# not; then subprocess and os.system. Its bytes arrive byte-exact at the other side, which
# answers with their SHA-256.
FORKING_WRITER = r"""
import hashlib, os, socket, subprocess, sys
role, port, forker = sys.argv[1], int(sys.argv[2]), sys.argv[4]
if role == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); s, _ = l.accept()
else:
    s = socket.create_connection((sys.argv[3], port), timeout=30); s.settimeout(None)
if role != forker:
    h = hashlib.sha256()
    while True:
        b = s.recv(1 << 16)
        if not b: break
        h.update(b)
    s.sendall(h.hexdigest().encode()); s.close()
    sys.exit(0)
h = hashlib.sha256()
def chunk():
    b = os.urandom(1_000_000); h.update(b); s.sendall(b)
def close_and_exit():
    s.close(); os._exit(0)
def close_and_sys_exit():
    s.close(); sys.exit(0)
def atexit_only():
    sys.exit(0)                          # the copy still open: the atexit handler lets it go
def exec_inherited():
    os.set_inheritable(s.fileno(), True)
    os.execv("/bin/sh", ["sh", "-c", "sleep 0.2"])
def exec_cloexec():
    os.execv("/bin/sh", ["sh", "-c", "sleep 0.2"])
kids = []
for child in (close_and_exit, close_and_sys_exit, atexit_only, exec_inherited, exec_cloexec):
    chunk()
    pid = os.fork()
    if pid == 0:
        child()                          # sys.exit: the interpreter's exit, atexit handlers
        os._exit(0)
    kids.append(pid)
    chunk()                              # while the child lives
subprocess.run(["sh", "-c", "exit 0"], check=True, close_fds=False)
chunk()
os.system("true")
chunk()
for pid in kids:
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st
chunk()
s.shutdown(socket.SHUT_WR)
got = s.makefile("rb").read()
print("ok" if got == h.hexdigest().encode() else f"bad {got!r}")
"""


def test_a_program_forks_and_execs_mid_connection(agents, tmp_path):
    """Forked children that close their copy, exit or exec do not end the connection of
    the process that forks them (before, a child's close or exit sent the FIN of its copy
    of the flow); that process claims it again at its next write and its 14 MB arrive
    byte-exact. The in-process side forks: the server when only servers are in-process,
    else the client."""
    app = tmp_path / "forking_writer.py"
    app.write_text(FORKING_WRITER)
    forker = "client" if agents.both else "server"
    srv = agents.run("b", sys.executable, str(app), "server", "9560", "-", forker)
    agents.wait_port("b", 9560)
    cli = agents.run("a", sys.executable, str(app), "client", "9560", IP["b"], forker)
    out, err = finish(cli if forker == "client" else srv, 90)
    finish(srv if forker == "client" else cli, 30)
    assert out.strip() == b"ok", (out, err)
    assert_in_process(agents, 1)


# sendfile(2) of a 20 MB file on an accepted connection, three ways: os.sendfile with an
# offset, os.sendfile from the file's position (None: the position moves), and
# socket.sendfile (os.sendfile underneath, falling back to send only if it fails at once).
SENDFILE = r'''
import hashlib, os, socket, sys
port, path = int(sys.argv[2]), sys.argv[3]
if sys.argv[1] == "server":
    size = os.path.getsize(path)
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen()
    for _ in range(3):
        c, _ = l.accept()
        how = c.recv(16)
        with open(path, "rb") as f:
            if how == b"offset":
                off = 0
                while off < size:
                    n = os.sendfile(c.fileno(), f.fileno(), off, size - off)
                    assert n > 0, n
                    off += n
            elif how == b"position":
                while os.sendfile(c.fileno(), f.fileno(), None, 1 << 22):
                    pass
                assert f.tell() == size, f.tell()
            else:
                assert c.sendfile(f) == size
        c.close()
else:
    want = hashlib.sha256(open(path, "rb").read()).hexdigest()
    for how in (b"offset", b"position", b"socket"):
        s = socket.create_connection((sys.argv[4], port), timeout=60)
        s.sendall(how)
        got = hashlib.sha256(s.makefile("rb").read()).hexdigest()
        assert got == want, (how, got, want)
        s.close()
    print("ok")
'''


def test_sendfile_of_a_20mb_file(agents, tmp_path):
    """sendfile(2) on an in-process connection sends the file's bytes through the write
    path (src/sendfile.rs): byte-exact with an offset, from the file's position (which
    moves), and through socket.sendfile. Before, the kernel's sendfile met a bare UDP
    socket (EDESTADDRREQ) and the server failed."""
    app = tmp_path / "sendfile.py"
    app.write_text(SENDFILE)
    f = tmp_path / "file.bin"
    f.write_bytes(os.urandom(20 << 20))
    srv = agents.run("b", sys.executable, str(app), "server", "9570", str(f), env=DEBUG_ENV)
    agents.wait_port("b", 9570)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9570", str(f), IP["b"],
                                 env=DEBUG_ENV), 120)
    _, serr = finish(srv, 30)
    assert out.strip() == b"ok", (out, err, serr[-3000:])
    assert_in_process(agents, 3)


# splice(2) both ways through a pipe: the server sends the file file → pipe → connection,
# the client receives it connection → pipe → file; each end checks the other's bytes.
SPLICE = r'''
import hashlib, os, socket, sys
port, path = int(sys.argv[2]), sys.argv[3]
size = os.path.getsize(path)
r, w = os.pipe()
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    sent = 0
    with open(path, "rb") as f:
        while sent < size:
            n = os.splice(f.fileno(), w, 1 << 20)          # file -> pipe (the kernel's)
            while n:
                m = os.splice(r, c.fileno(), n)            # pipe -> connection (the hook)
                assert m > 0, m
                n -= m; sent += m
    c.shutdown(socket.SHUT_WR)
    assert c.recv(1) == b""
    c.close()
    print(sent)
else:
    s = socket.create_connection((sys.argv[4], port), timeout=60)
    s.settimeout(None)  # blocking: a timeout makes Python's socket non-blocking underneath
    out = path + ".got"
    with open(out, "wb") as f:
        while True:
            n = os.splice(s.fileno(), w, 1 << 20)          # connection -> pipe (the hook)
            if n == 0: break
            while n:
                n -= os.splice(r, f.fileno(), n)           # pipe -> file
    s.close()
    a, b = (hashlib.sha256(open(x, "rb").read()).hexdigest() for x in (path, out))
    assert a == b, (os.path.getsize(out), size)
    print("ok")
'''


def test_splice_through_a_pipe_both_ways(agents, tmp_path):
    """splice(2) between a pipe and an in-process connection copies through the
    connection's read and write paths (src/sendfile.rs): 20 MB file → pipe → connection on
    the server, connection → pipe → file on the client (in-process both sides), byte-exact.
    Before, the kernel spliced into a bare UDP socket (EDESTADDRREQ), or out of one: the
    transport's own datagrams into the pipe."""
    app = tmp_path / "splice.py"
    app.write_text(SPLICE)
    f = tmp_path / "file.bin"
    f.write_bytes(os.urandom(20 << 20))
    srv = agents.run("b", sys.executable, str(app), "server", "9575", str(f), env=DEBUG_ENV)
    agents.wait_port("b", 9575)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9575", str(f), IP["b"],
                                 env=DEBUG_ENV), 120)
    sout, serr = finish(srv, 30)
    assert out.strip() == b"ok", (out, err[-3000:], serr[-3000:])
    assert int(sout) == 20 << 20
    assert_in_process(agents, 1)


# Request/response: the server reads each request, then (WAIT) blocks in select, poll or
# epoll on a pipe that stays empty for 20 ms before it answers; the client checks every
# answer. The server's library prints its connection's send counts at the end (debug).
REPLY = r'''
import os, select, socket, sys
port, n, wait = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept()
    r, _w = os.pipe()
    ep = select.epoll(); ep.register(r, select.EPOLLIN)
    po = select.poll(); po.register(r, select.POLLIN)
    for i in range(n):
        req = c.recv(64)
        if wait == "select": select.select([r], [], [], 0.02)
        elif wait == "poll": po.poll(20)
        elif wait == "epoll": ep.poll(0.02)
        c.sendall(b"re:" + req)
    assert c.recv(1) == b""
    c.close()
else:
    s = socket.create_connection((sys.argv[5], port), timeout=20)
    for i in range(n):
        req = b"request %d" % i
        s.sendall(req)
        got = b""
        while len(got) < len(req) + 3: got += s.recv(64)
        assert got == b"re:" + req, (i, got)
    s.close()
    print("ok")
'''


def send_counts(stderr):
    """The counts of the connection's debug line (inproc/conn.rs SendCounts)."""
    import re
    m = re.search(rb"connection ended; sent SendCounts \{([^}]*)\}", stderr)
    assert m, stderr[-2000:]
    return {k.strip().decode(): int(v) for k, v in (f.split(b":") for f in m.group(1).split(b","))}


@pytest.mark.parametrize("wait", ["none", "select", "poll", "epoll"])
def test_an_ack_leaves_with_the_reply_or_before_a_wait(agents, tmp_path, wait):
    """The ACK of a request waits for the application's reply and leaves with its data in
    one system call (as a TCP reply carries its ACK): one call per answer, not two. An
    application that waits (select, poll, epoll) before it answers sends it first: no ACK
    is held past ACK_HOLD_MAX by a process that sleeps."""
    n = 200
    app = tmp_path / "reply.py"
    app.write_text(REPLY)
    srv = agents.run("b", sys.executable, str(app), "server", "9580", str(n), wait, env={"FLEXPASS_LOG": "debug"})
    agents.wait_port("b", 9580)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9580", str(n), wait, IP["b"]), 120)
    _, serr = finish(srv, 30)
    assert out.strip() == b"ok", err
    c = send_counts(serr)
    # Bounds with room for a loaded machine (a server descheduled for ACK_HOLD_MAX between
    # its read and its answer sends the ACK alone); before, every answer took two calls
    # and no ACK went with data or at a wait.
    if wait == "none":
        assert c["acks_with_data"] >= 0.5 * n, c
        assert c["calls"] <= 1.5 * n, c
    else:
        assert c["held_at_wait"] >= 0.5 * n, c
    assert c["held_expired"] <= 0.25 * n, c
    assert_in_process(agents, 1)


def test_a_thousand_concurrent_connections_from_one_process_are_byte_exact(agents, tmp_path):
    """test_preload_reliability's 1 000 connections from one process (non-blocking, one
    selector), each 16-40 kB echoed back byte-exact, with the server in-process (and the
    client too, both sides): one process's library drives 1 000 connections, its timer
    thread their timers, and the held ACKs of 1 000 connections leave before each wait."""
    from test_preload_reliability import MANY_CLIENT, MANY_SERVER, descriptors_for
    many = 1000
    with descriptors_for(many):
        (tmp_path / "s.py").write_text(MANY_SERVER)
        (tmp_path / "c.py").write_text(MANY_CLIENT)
        srv = agents.run("b", sys.executable, str(tmp_path / "s.py"), "9590", str(many), env=DEBUG_ENV)
        agents.wait_port("b", 9590)
        cli = agents.run("a", sys.executable, str(tmp_path / "c.py"), IP["b"], "9590", str(many),
                        stdin=subprocess.PIPE, env=DEBUG_ENV)
        line = cli.stdout.readline()
        assert line.strip() == b"connected", (line, cli.poll())
        cli.stdin.write(b"go\n")
        cli.stdin.flush()
        out, err = finish(cli, 120)
        sout, serr = finish(srv, 60)
    r = json.loads(out.decode().strip().splitlines()[-1])
    print(f"{many} in-process connections: {r['bytes_each_way'] / 1e6:.1f} MB each way in {r['seconds']:.1f} s")
    assert r["connections"] == many and r["byte_exact"] == many, (r, err[-2000:])
    assert int(sout.strip()) == many
    assert_in_process(agents, many)


# A non-blocking sender that waits for writability with select, poll or epoll (as iperf3,
# curl and event-loop servers do): the server sends SIZE bytes and counts the waits after
# which the first write found the buffer full, and the waits that timed out (5 s).
# Edge-triggered epoll ("epoll-et") writes until EAGAIN after each wait, as it must.
NONBLOCKING = r'''
import hashlib, os, select, socket, sys
port, size, how = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if sys.argv[1] == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); c, _ = l.accept(); c.setblocking(False)
    data = os.urandom(size); sent = full = waits = timeouts = 0
    po = select.poll(); po.register(c, select.POLLOUT)
    ep = select.epoll(); ep.register(c, select.EPOLLOUT | (select.EPOLLET if how == "epoll-et" else 0))
    while sent < size:
        if how == "select": ready = select.select([], [c], [], 5)[1]
        elif how == "poll": ready = po.poll(5000)
        else: ready = ep.poll(5)
        waits += 1; timeouts += not ready
        first = True
        try:
            while sent < size:
                sent += c.send(data[sent:sent + (1 << 20)])
                first = False
                if how != "epoll-et": break
        except BlockingIOError:
            full += first
    c.shutdown(socket.SHUT_WR)
    c.setblocking(True); c.recv(1)  # until the client has read all and closed
    print(hashlib.sha256(data).hexdigest(), full, waits, timeouts)
else:
    s = socket.create_connection((sys.argv[5], port), timeout=60)
    h = hashlib.sha256(); n = 0
    while True:
        d = s.recv(1 << 16)
        if not d: break
        h.update(d); n += len(d)
    print(h.hexdigest(), n)
'''


@pytest.mark.parametrize("how", ["select", "poll", "epoll", "epoll-et"])
def test_a_nonblocking_sender_sleeps_until_its_buffer_has_room(agents, tmp_path, how):
    """A connection's descriptor is a UDP socket, always writable: a sender that met a full
    send buffer woke from select/poll/epoll at once, and wrote into it again and again
    (iperf3: 153 000 writes that found it full in 3 s). Now the wait watches the connection
    instead and returns when a quarter of the buffer is free: 40 MB byte-exact, with a few
    full writes (a wait that ended for another reason), not thousands; edge-triggered epoll
    gets its edge when room comes back (no wait times out)."""
    size = 40 << 20
    app = tmp_path / "nb.py"
    app.write_text(NONBLOCKING)
    srv = agents.run("b", sys.executable, str(app), "server", "9600", str(size), how)
    agents.wait_port("b", 9600)
    out, err = finish(agents.run("a", sys.executable, str(app), "client", "9600", str(size), how, IP["b"]), 120)
    sout, serr = finish(srv, 30)
    digest, n = out.split()
    sdigest, full, waits, timeouts = sout.split()
    assert (digest, int(n)) == (sdigest, size), (out, sout)
    assert int(full) <= 20, f"{int(full)} writes found the buffer full ({int(waits)} waits)"
    assert int(timeouts) == 0, f"{int(timeouts)} of {int(waits)} waits timed out"
    assert_in_process(agents, 1)
