"""An in-process connection whose peer is gone (docs/datapath.md, "the peer is gone").

Both sides in-process (FLEXPASS_INPROC=1), topology of test_preload.py. The client's ACKs
are dropped on a's veth (tc u32 on the message type byte, docs/protocol.md §3: 0x14 ACK)
from the moment it has read every byte but the server has not closed yet: the server's FIN
is never acknowledged, the client reads the EOF, closes (its own FIN is acknowledged: its
connection ends) and exits. The server's retransmitted FIN then meets a closed port: the
kernel answers ICMP port unreachable, which ends the server's connection at once. Without
that, its exit waited the whole exit linger (10 s) for the lost ACK. And a client killed
mid-transfer (the opening side: no agent resets its connection) resets the server's writer
at once instead of at the flow's give-up timeout (30 s).

Needs root, `ip netns` and tc; skips loudly otherwise.
"""

import hashlib
import os
import shutil
import sys
import time

import pytest

import test_preload as tp
from test_preload import IP, agents, finish, sh  # noqa: F401 (agents: fixture)
from test_preload_inproc import DEBUG_ENV, InprocHosts

pytestmark = [
    pytest.mark.skipif(tp.SKIP is not None, reason=f"SKIPPED netns tier: {tp.SKIP}"),
    pytest.mark.skipif(shutil.which("tc") is None, reason="SKIPPED: tc (iproute2) not installed"),
]

SIZE = 3_000_000

# server PORT FILE GO: sends FILE's bytes, waits for the file GO, closes and exits.
# client PORT HOST SIZE: reads SIZE bytes ("got" on stdout), then to the EOF; prints the
# bytes' digest and count, closes and exits.
APP = r'''
import hashlib, os, socket, sys, time
if sys.argv[1] == "server":
    port, path, go = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    c, _ = ls.accept()
    c.sendall(open(path, "rb").read())
    while not os.path.exists(go):
        time.sleep(0.01)
    c.close()
    ls.close()
else:
    port, host, size = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    s = socket.create_connection((host, port))
    h, n, told = hashlib.sha256(), 0, False
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
        if n >= size and not told:
            print("got", flush=True)
            told = True
    print(h.hexdigest(), n, flush=True)
    s.close()
'''


@pytest.fixture
def hosts(tmp_path):
    yield from tp.up_for_the_test(InprocHosts(tmp_path, "1"))


def drop_acks_from_a():
    """a's egress drops every FlexPass ACK (UDP payload byte 0 = 0x14, after a 20-byte IP
    header and the 8-byte UDP header): tc u32 redirects them to a veth that is down (the
    kernel here has no gact module for `action drop`; mirred to a down device drops)."""
    ns, dev, hole = f"{tp.PREFIX}a", f"{tp.PREFIX}va", f"{tp.PREFIX}xa"
    sh("ip", "-n", ns, "link", "add", hole, "type", "veth", "peer", "name", f"{tp.PREFIX}xb")
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "clsact")
    sh("ip", "netns", "exec", ns, "tc", "filter", "add", "dev", dev, "egress", "protocol", "ip",
       "u32", "match", "ip", "protocol", "17", "0xff", "match", "u8", "0x14", "0xff", "at", "28",
       "action", "mirred", "egress", "redirect", "dev", hole)


def test_a_lost_final_ack_does_not_hold_the_servers_exit(agents, tmp_path):
    """The server's FIN is never acknowledged and the client is gone: the server exits well
    under its 10 s exit linger, every byte delivered byte-exact."""
    data = os.urandom(SIZE)
    f, go = tmp_path / "file.bin", tmp_path / "go"
    f.write_bytes(data)
    app = tmp_path / "app.py"
    app.write_text(APP)
    srv = agents.run("b", sys.executable, str(app), "server", "9600", str(f), str(go),
                     env={"FLEXPASS_LOG": "debug"})
    agents.wait_port("b", 9600)
    cli = agents.run("a", sys.executable, str(app), "client", "9600", IP["b"], str(SIZE), env=DEBUG_ENV)
    assert cli.stdout.readline().strip() == b"got"
    time.sleep(0.5)  # the ACKs of the bytes are in
    drop_acks_from_a()
    go.touch()
    t = time.time()
    out, cerr = finish(cli, 30)
    _, serr = finish(srv, 30)
    took = time.time() - t
    assert out.split() == [hashlib.sha256(data).hexdigest().encode(), str(SIZE).encode()], (out, cerr)
    log = serr.decode(errors="replace")
    print(f"server exit {took:.2f} s after its close; "
          + "; ".join(l for l in log.splitlines() if "unreachable" in l or "exit:" in l))
    assert took < 5, f"the server waited {took:.1f} s for its FIN's ACK: {log[-3000:]}"
    # The server's FIN was not acknowledged: the peer's port unreachable ended it.
    assert "port unreachable from the peer" in log and "Some(Left)" in log, log[-3000:]



# Writes without end to whoever connects; prints how it ended.
WRITER = r'''
import socket, sys
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", int(sys.argv[1])))
ls.listen(1)
c, _ = ls.accept()
print("accepted", flush=True)
chunk, n = bytes(1 << 16), 0
try:
    while True:
        n += c.send(chunk)
except OSError as e:
    print(type(e).__name__, n, flush=True)
'''


def test_a_killed_reader_resets_the_writer(agents, tmp_path):
    """SIGKILL of the reading client mid-transfer (the opening side: no agent resets its
    connection): the server's datagrams meet its closed port, and the server's blocked
    writer gets ECONNRESET within a second, as from a RST (before: the flow's give-up
    timeout)."""
    (tmp_path / "w.py").write_text(WRITER)
    srv = agents.run("b", sys.executable, str(tmp_path / "w.py"), "9610", env={"FLEXPASS_LOG": "debug"})
    agents.wait_port("b", 9610)
    cli = agents.run("a", "sh", "-c", f"exec {sys.executable} -c 'import socket,sys; "
                     f"s = socket.create_connection((sys.argv[1], 9610)); print(1, flush=True)\n"
                     f"while s.recv(1 << 16): pass' {IP['b']}")
    assert srv.stdout.readline().strip() == b"accepted"
    assert cli.stdout.readline().strip() == b"1"
    time.sleep(1.0)
    cli.kill()
    cli.wait(10)
    t = time.time()
    out, err = finish(srv, 60)
    took = time.time() - t
    print(f"writer ended {took:.2f} s after the kill: {out.decode().split()[-2:]}")
    how, n = out.split()[-2:]
    assert how == b"ConnectionResetError" and int(n) > 1_000_000, (out, err.decode()[-3000:])
    assert took < 2, f"the writer learned it {took:.1f} s after the kill: {err.decode()[-3000:]}"
