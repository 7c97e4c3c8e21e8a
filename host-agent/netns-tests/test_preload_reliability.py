"""Unmodified programs over FlexPass (`flexpass run`) when things go wrong, in network
namespaces (the topology and helpers of test_preload.py):

    a (10.81.0.1) ---- veth ---- b (10.81.0.2), `flexpass agent` on each

* An application killed (SIGKILL) in the middle of a transfer: its peer application sees
  an error or the end of the stream within a bounded time, and both agents free the
  connection's state (flows, connection and owner tables back to where they were).
* An agent killed and started again under a running connection: both applications get an
  error or end of stream within a bounded time, not a hang; the restarted agent carries
  new connections.
* 1 000 concurrent connections from one process (non-blocking sockets, epoll) to one
  server, each with its own bytes both ways: all byte-exact.

Needs root and `ip netns`; skips loudly otherwise.
"""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from floodnet import BIN
from test_preload import IP, NET_ARGS, PREFIX, SHA_ROUNDTRIP, SKIP, agents, finish, flexpass_conns, hosts  # noqa: F401

pytestmark = pytest.mark.skipif(SKIP is not None, reason=f"SKIPPED netns tier: {SKIP}")

# How long a survivor may take to learn that its peer (application or agent) is gone, and
# the agents to free the state. The agents learn it in one round trip (RESET); these bounds
# leave room for a loaded 2-core VM, and stay far below the flows' give-up timeout (30 s),
# the only other way a connection ends when its peer goes silent.
NOTICE_S = 10
FREED_S = 15

# A connection moving bytes: each end writes (a thread) or reads (the main thread), or
# both ("duplex"); "download" (the server writes) and "upload" (the client writes) are one
# way. When the connection ends one JSON line says how the program learned it: {"read":
# "eof" | an errno name} for a reading end, {"write": an errno name} for a writing-only one.
STREAM = r'''
import errno, json, os, socket, sys, threading
role, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if role == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(); s, _ = l.accept()
else:
    s = socket.create_connection((sys.argv[4], port))
writes = mode == "duplex" or (mode == "download") == (role == "server")
reads = mode == "duplex" or not writes
chunk = os.urandom(1 << 16)
ended = {}
def writer():
    n = 0
    try:
        while True:
            n += s.send(chunk)
            if n >= 2_000_000 and not reads and "said" not in ended:
                print("streaming", flush=True); ended["said"] = True
    except OSError as e:
        ended["write"] = errno.errorcode.get(e.errno, str(e))
w = threading.Thread(target=writer, daemon=True)
if writes:
    w.start()
if reads:
    n, said = 0, False
    try:
        while True:
            d = s.recv(1 << 16)
            if not d:
                how = "eof"; break
            n += len(d)
            if n >= 2_000_000 and not said:
                print("streaming", flush=True); said = True
    except OSError as e:
        how = errno.errorcode.get(e.errno, str(e))
    print(json.dumps({"read": how}), flush=True)
else:
    w.join()
    print(json.dumps({"write": ended["write"]}), flush=True)
os._exit(0)
'''

# State an agent holds for connections: all of it must go when they end.
STATE_KEYS = [("flows", "senders"), ("flows", "receivers"), ("tcp", "open"), ("tables", "conns"),
              ("tables", "owners"), ("tables", "endpoint", "half_open"),
              ("tables", "endpoint", "hello_conn")]


def state(status):
    out = {}
    for path in STATE_KEYS:
        v = status
        for k in path:
            v = v[k]
        out[".".join(path)] = v
    return out


def wait_freed(net, baseline, timeout=FREED_S):
    """Until both agents' connection state is back to `baseline` (else fail, showing it)."""
    end = time.time() + timeout
    while True:
        now = {h: state(net.status(h)) for h in IP}
        if now == baseline:
            return time.time()
        if time.time() > end:
            raise AssertionError(f"agents still hold connection state {timeout} s later: {now}, "
                                 f"before the connection: {baseline}")
        time.sleep(0.2)


def start_stream(net, tmp_path, mode, port):
    """A streaming connection a → b, both programs under `flexpass run`, moving bytes."""
    app = tmp_path / "stream.py"
    app.write_text(STREAM)
    srv = net.run("b", sys.executable, str(app), "server", str(port), mode, stdout=subprocess.PIPE)
    net.wait_port("b", port)
    cli = net.run("a", sys.executable, str(app), "client", str(port), mode, IP["b"], stdout=subprocess.PIPE)
    for p in (cli, srv):                         # both ends have moved 2 MB
        line = p.stdout.readline()
        assert line.strip() == b"streaming", (line, p.poll())
    for h in IP:
        t = net.status(h)["tcp"]
        assert t["open"] == 1, (h, t)            # over FlexPass, and held by the agent
    return {"client": cli, "server": srv}


def outcome(p, deadline):
    """The JSON line a stream program prints when its connection ends (by `deadline`)."""
    try:
        out, _ = p.communicate(timeout=max(0.1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise AssertionError(f"the application still waits on its connection {NOTICE_S} s later: a hang")
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("killed,mode", [("client", "duplex"), ("server", "duplex"), ("client", "download"),
                                         ("server", "upload")])
def test_a_killed_application_frees_its_connection_in_both_agents(agents, tmp_path, killed, mode):
    """SIGKILL one program of a connection moving bytes (both ways, or the killed one only
    reading): its agent sees its socket close, resets the flows (docs/protocol.md §6.8),
    the other agent closes its end: the surviving program's read ends (end of stream or
    ECONNRESET), and both agents' flows and tables are back to their state before the
    connection."""
    baseline = {h: state(agents.status(h)) for h in IP}
    apps = start_stream(agents, tmp_path, mode, 9400)
    survivor = apps["server" if killed == "client" else "client"]
    t = time.time()
    os.kill(apps[killed].pid, signal.SIGKILL)   # `ip netns exec` and `flexpass run` exec: the program
    apps[killed].wait()
    got = outcome(survivor, t + NOTICE_S)
    noticed = time.time() - t
    freed = wait_freed(agents, baseline) - t
    print(f"killed {killed} ({mode}): survivor's connection ended with {got} after {noticed:.2f} s; "
          f"agents freed in {freed:.2f} s")
    records = {h: flexpass_conns(agents.status(h)) for h in IP}
    assert all(len(r) == 1 for r in records.values()), records


def restart_agent(net, host, log_name):
    """A new agent on `host`, on the same API socket (the old one was killed: its socket
    file is still there and the new agent replaces it)."""
    log = open(net.tmp / log_name, "w")
    p = subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{host}", str(BIN), "agent", "--socket",
                          str(net.sock[host]), "--log-level", "debug", *NET_ARGS],
                         stdout=log, stderr=subprocess.STDOUT)
    net.procs.append(p)
    end = time.time() + 10
    while time.time() < end:
        try:
            net.status(host)
            return p
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"restarted agent on {host} does not answer: {(net.tmp / log_name).read_text()}")


@pytest.mark.parametrize("restarted", ["a", "b"], ids=["client-agent", "server-agent"])
def test_an_agent_restarted_under_a_connection_fails_it_instead_of_hanging(agents, tmp_path, restarted):
    """SIGKILL the agent of one host while a connection streams both ways, start a new one
    at once. The program on that host loses its socket's other end with the agent (end of
    stream or ECONNRESET). The program on the other host learns it from its own agent:
    the restarted agent answers the old flows' credits and CREDIT_REQUESTs with
    RESET(unknown_flow) (docs/protocol.md §11, "Forgotten flows"); before that, only the
    flows' 30 s give-up timeout ended them. Then a new connection goes over FlexPass
    through the restarted agent, and neither agent holds anything of the old one."""
    baseline = {h: state(agents.status(h)) for h in IP}
    apps = start_stream(agents, tmp_path, "duplex", 9500)
    old = agents.procs[0 if restarted == "a" else 1]
    t = time.time()
    old.kill()
    old.wait()
    restart_agent(agents, restarted, f"agent-{restarted}-restarted.log")
    got = {role: outcome(p, t + NOTICE_S) for role, p in apps.items()}
    noticed = time.time() - t
    print(f"agent {restarted} restarted: reads ended with {got} within {noticed:.2f} s")
    # A new connection through the restarted agent, over FlexPass (the server program
    # registers its port with the agent running now).
    app = tmp_path / "oneshot.py"
    app.write_text(SHA_ROUNDTRIP)
    srv = agents.run("b", sys.executable, str(app), "server", "9501", "1")
    agents.wait_port("b", 9501)
    out, _ = finish(agents.run("a", sys.executable, str(app), "client", "9501", IP["b"]), 60)
    finish(srv, 30)
    assert out.strip() == b"ok"
    new = [c for c in flexpass_conns(agents.status("a"), "client") if c["remote"].endswith(":9501")]
    assert len(new) == 1 and new[0]["outcome"] == "closed", new
    wait_freed(agents, baseline)


# One process, N connections, one epoll loop. Phase 1 connects them all (non-blocking) and
# waits until every one is writable, then says "connected" and waits for a line on stdin;
# phase 2 sends each connection's own bytes (a pattern seeded by its number), half-closes,
# and reads the server's echo to the end. Prints one JSON line of results.
@contextlib.contextmanager
def descriptors_for(many):
    """RLIMIT_NOFILE raised for `many` connections (4 descriptors each and some) for the
    programs started inside, which inherit it; restored after. Skips where the hard limit
    is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4 * many + 256
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"SKIPPED: RLIMIT_NOFILE hard limit {hard} < {need} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


MANY_CLIENT = r'''
import hashlib, json, os, selectors, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def pattern(i):
    size = 16_000 + (i * 7919) % 24_000
    seed = hashlib.sha256(i.to_bytes(4, "big")).digest()
    return (seed * (size // 32 + 1))[:size]
sel = selectors.EpollSelector()
conns = {}
for i in range(n):
    s = socket.socket(); s.setblocking(False)
    err = s.connect_ex((host, port))
    assert err in (0, 115), (i, err)
    conns[s.fileno()] = {"i": i, "s": s, "out": pattern(i), "sent": 0, "got": bytearray(), "done": False}
    sel.register(s, selectors.EVENT_WRITE, s.fileno())
pending = set(conns)
while pending:
    for key, _ in sel.select(timeout=30):
        c = conns[key.data]
        assert c["s"].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
        pending.discard(key.data); sel.unregister(c["s"])
    if not pending: break
print("connected", flush=True)
sys.stdin.readline()
t = time.time()
for fd, c in conns.items():
    sel.register(c["s"], selectors.EVENT_READ | selectors.EVENT_WRITE, fd)
left = len(conns)
while left:
    events = sel.select(timeout=30)
    assert events, f"no progress for 30 s, {left} connections left"
    for key, ev in events:
        c = conns[key.data]; s = c["s"]
        if ev & selectors.EVENT_WRITE:
            if c["sent"] < len(c["out"]):
                try:
                    c["sent"] += s.send(c["out"][c["sent"]:c["sent"] + 65536])
                except BlockingIOError:
                    pass
            if c["sent"] == len(c["out"]):
                s.shutdown(socket.SHUT_WR)
                sel.modify(s, selectors.EVENT_READ, key.data)
        if ev & selectors.EVENT_READ:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            if d:
                c["got"] += d
            else:
                sel.unregister(s); s.close(); c["done"] = True; left -= 1
exact = sum(1 for c in conns.values() if bytes(c["got"]) == c["out"])
print(json.dumps({"connections": len(conns), "byte_exact": exact, "seconds": time.time() - t,
                  "bytes_each_way": sum(len(c["out"]) for c in conns.values())}), flush=True)
'''

# Echoes every connection's bytes back; half-closes once the client has.
MANY_SERVER = r'''
import selectors, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", port)); l.listen(4096); l.setblocking(False)
sel = selectors.EpollSelector(); sel.register(l, selectors.EVENT_READ, None)
conns = {}; finished = 0
while finished < n:
    for key, ev in sel.select():
        if key.data is None:
            while True:
                try:
                    c, _ = l.accept()
                except BlockingIOError:
                    break
                c.setblocking(False)
                conns[c.fileno()] = {"s": c, "buf": bytearray(), "eof": False}
                sel.register(c, selectors.EVENT_READ, c.fileno())
            continue
        c = conns[key.data]; s = c["s"]
        if ev & selectors.EVENT_READ and not c["eof"]:
            try:
                d = s.recv(65536)
            except BlockingIOError:
                d = None
            if d == b"":
                c["eof"] = True
            elif d:
                c["buf"] += d
        if c["buf"]:
            try:
                del c["buf"][:s.send(c["buf"])]
            except BlockingIOError:
                pass
        if c["eof"] and not c["buf"]:
            sel.unregister(s); s.close(); del conns[key.data]; finished += 1
            continue
        sel.modify(s, (0 if c["eof"] else selectors.EVENT_READ) | (selectors.EVENT_WRITE if c["buf"] else 0)
                   or selectors.EVENT_READ, key.data)
print(finished, flush=True)
'''

MANY = 1000


def test_a_thousand_concurrent_connections_from_one_process_are_byte_exact(agents, tmp_path):
    """1 000 connections open at once from one process to one server, both under `flexpass
    run`: all 1 000 are carried over FlexPass at the same time (the agents' `tcp.open`),
    then each sends its own 16-40 kB and reads the server's echo, byte-exact. Each side's
    agent holds one file descriptor per connection (it raises its RLIMIT_NOFILE soft limit
    to the hard one); the programs here need more than the usual 1 024, so the test raises
    its own limit, which they inherit."""
    with descriptors_for(MANY):
        (tmp_path / "s.py").write_text(MANY_SERVER)
        (tmp_path / "c.py").write_text(MANY_CLIENT)
        t = time.time()
        srv = agents.run("b", sys.executable, str(tmp_path / "s.py"), "9600", str(MANY))
        agents.wait_port("b", 9600)
        cli = agents.run("a", sys.executable, str(tmp_path / "c.py"), IP["b"], "9600", str(MANY),
                         stdin=subprocess.PIPE)
        line = cli.stdout.readline()
        assert line.strip() == b"connected", (line, cli.poll(), cli.stderr.read() if cli.poll() is not None else "")
        connected = time.time() - t
        opened = {h: agents.status(h)["tcp"] for h in IP}
        for h, st in opened.items():
            assert st["open"] == MANY, (h, {k: v for k, v in st.items() if k not in ("conns", "closed")})
        assert opened["a"]["direct"] == 0
        cli.stdin.write(b"go\n")
        cli.stdin.flush()
        out, _ = finish(cli, 60)
        sout, serr = srv.communicate(timeout=30)
        agg = {}
        for h in IP:
            for c in flexpass_conns(agents.status(h)):
                agg[(h, c["outcome"][:60])] = agg.get((h, c["outcome"][:60]), 0) + 1
        assert srv.returncode == 0, (serr.decode(errors="replace")[-2000:], agg)
    r = json.loads(out.decode().strip().splitlines()[-1])
    print(f"{MANY} connections: connected in {connected:.1f} s, {r['bytes_each_way'] / 1e6:.1f} MB each way "
          f"in {r['seconds']:.1f} s")
    assert r["connections"] == MANY and r["byte_exact"] == MANY, r
    assert int(sout.strip()) == MANY
    a = agents.status("a")["tcp"]
    assert a["opened_flexpass"] == MANY, {k: v for k, v in a.items() if k not in ("conns", "closed")}
    # Every connection's bytes went through the agent both ways. One marked aborted moved
    # all of them first: under this load an ACK of a flow's last packets can be lost, and
    # the peer has forgotten the flow (its 2 s linger) when the sender asks again.
    records = flexpass_conns(agents.status("a"), "client")
    assert len(records) == MANY
    short = [c for c in records if not c["bytes_sent"] == c["bytes_received"] >= 16_000]
    assert not short, short[:3]
    late = [c["outcome"] for c in records if c["outcome"] != "closed"]
    print(f"connections marked aborted after all their bytes: {len(late)} {late[:2]}")
