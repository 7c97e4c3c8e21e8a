"""Network and helpers of the flood tests (test_netns_floods.py) and their longer
measurement (bench_floods.py); its generic helpers (skip_reason, sh, pattern_sha, records)
serve every netns test.

    h1 (10.78.1.2, legit senders) --\\
                                     r (forwarding; egress to h3: nic/flexpass_nic.py, 200 Mbit/s)
    h2 (10.78.2.2, flood generator) -/    198.18.0.0/15 (the spoofed sources) routed to h2
    h3 (10.78.3.2, `flexpass agent` under test, an API client accepting its flows)

Every namespace, veth and process is created here and removed by `down()` (processes: only
the ones started here, by their pid).
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
BIN = Path(os.environ.get("FLEXPASS_BIN", ROOT / "target" / "release" / "flexpass"))
NIC_TOOL = ROOT.parent / "nic" / "flexpass_nic.py"
GEN = HERE / "flood_gen.py"
PORT = 7890
RATE_MBIT = 200
NET_ARGS = ["--link-gbps", str(RATE_MBIT / 1000), "--rtt-us", "200"]


def stop_processes(procs):
    """End the processes a test started (by their handles, never by name): SIGTERM, then
    SIGKILL after 5 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def skip_reason(tools=("ip", "tc"), need=()):
    """Why the netns tests cannot run here (None: they can): root, ``tools`` on PATH, the
    agent binary and the ``need`` files ((path, how to build it) pairs), a namespace."""
    if os.geteuid() != 0:
        return "not root: network namespaces and raw sockets need CAP_NET_ADMIN / CAP_NET_RAW"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"'{tool}' not installed"
    for path, how in ((BIN, "cargo build --release"), *need):
        if not Path(path).exists():
            return f"{path} not built ({how})"
    probe = f"fpfprobe{os.getpid() % 10000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*args, check=True):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {r.stderr.strip()}")
    return r


def pattern_sha(size):
    """sha256 of `flexpass send --size N`'s bytes: byte i = (i * 2654435761 >> 13) & 0xff."""
    h = hashlib.sha256()
    chunk = bytearray()
    for i in range(size):
        chunk.append(((i * 2654435761) >> 13) & 0xFF)
        if len(chunk) == 1 << 16:
            h.update(chunk)
            chunk.clear()
    h.update(chunk)
    return h.hexdigest()


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Net:
    def __init__(self, prefix=None):
        self.p = prefix or f"fpf{os.getpid() % 10000}"
        self.procs = []
        self.ip = {"h1": "10.78.1.2", "h2": "10.78.2.2", "h3": "10.78.3.2"}
        self.sock = f"/tmp/{self.p}-agent.sock"

    # -- topology -----------------------------------------------------------------------
    def ns(self, name, *args, check=True):
        return sh("ip", "netns", "exec", f"{self.p}{name}", *args, check=check)

    def mac(self, host, dev):
        out = self.ns(host, "cat", f"/sys/class/net/{dev}/address").stdout.strip()
        return out

    def up(self):
        for n in ("h1", "h2", "h3", "r"):
            sh("ip", "netns", "add", f"{self.p}{n}")
            self.ns(n, "ip", "link", "set", "lo", "up")
        for i, h in ((1, "h1"), (2, "h2"), (3, "h3")):
            a, b = f"{self.p}{h}a", f"{self.p}{h}b"
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "link", "set", a, "netns", f"{self.p}{h}")
            sh("ip", "link", "set", b, "netns", f"{self.p}r")
            self.ns(h, "ip", "addr", "add", f"10.78.{i}.2/24", "dev", a)
            self.ns(h, "ip", "link", "set", a, "up")
            self.ns(h, "ip", "route", "add", "default", "via", f"10.78.{i}.1")
            self.ns("r", "ip", "addr", "add", f"10.78.{i}.1/24", "dev", b)
            self.ns("r", "ip", "link", "set", b, "up")
        self.ns("r", "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # Answers to the spoofed sources go back to h2, which drops them (no ARP storm, no
        # ICMP unreachable flood from the router).
        self.ns("r", "ip", "route", "add", "198.18.0.0/15", "via", self.ip["h2"])
        for n in ("r", "h3"):
            self.ns(n, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", check=False)
        self.ns("r", sys.executable, str(NIC_TOOL), "apply", "--dev", f"{self.p}h3b",
                "--link-mbit", str(RATE_MBIT), "--data-limit-pkts", "300")
        # Next hops of the generators: r's MAC on h2's link, h1's MAC behind r.
        self.ns("h2", "ping", "-c1", "-W1", "10.78.2.1", check=False)

    def down(self):
        stop_processes(self.procs)
        for n in ("h1", "h2", "h3", "r"):
            sh("ip", "netns", "del", f"{self.p}{n}", check=False)
        try:
            os.unlink(self.sock)
        except OSError:
            pass

    # -- processes ------------------------------------------------------------------------
    def spawn(self, host, *args, binary=True, text=True):
        cmd = ["ip", "netns", "exec", f"{self.p}{host}"]
        cmd += [str(BIN), *args] if binary else list(args)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text)
        self.procs.append(p)
        return p

    def agent(self, *extra):
        """`flexpass agent` on h3; returns the process (its pid is the agent's: `ip netns
        exec` execs it)."""
        p = self.spawn("h3", "agent", "--listen", f"0.0.0.0:{PORT}", "--socket", self.sock,
                       *NET_ARGS, *extra)
        for _ in range(100):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"agent did not start: {p.stderr.read() if p.poll() is not None else ''}")
        return p

    def status(self):
        """The agent's status (the API socket is in the root namespace's /tmp, reachable from
        here: Unix sockets are not per network namespace)."""
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(self.sock)
        s.sendall(b'{"op":"status"}\n')
        line = s.makefile("rb").readline()
        s.close()
        return json.loads(line)

    def flood(self, mode, rate, seconds, **kw):
        """Start flood_gen.py; returns (process, first JSON line)."""
        if mode == "hello":
            host, iface = "h2", f"{self.p}h2a"
            dst_mac, src_mac = self.mac("r", f"{self.p}h2b"), self.mac("h2", iface)
            args = ["--dst", self.ip["h3"]]
        else:
            host, iface = "r", f"{self.p}h1b"
            dst_mac, src_mac = self.mac("h1", f"{self.p}h1a"), self.mac("r", iface)
            args = ["--dst", self.ip["h3"], "--victim", self.ip["h1"]]
        for k, v in kw.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        p = self.spawn(host, sys.executable, str(GEN), mode, "--iface", iface, "--dst-mac", dst_mac,
                       "--src-mac", src_mac, "--rate", str(rate), "--seconds", str(seconds), *args,
                       binary=False)
        first = p.stdout.readline()
        if not first:
            raise RuntimeError(f"flood generator failed: {p.stderr.read()}")
        return p, json.loads(first)


class Acceptor(threading.Thread):
    """API client of the agent under test: accepts flows one after the other and hashes
    their bytes (a flow's record: size, sha256)."""

    def __init__(self, sock, count):
        super().__init__(daemon=True)
        self.sock, self.count = sock, count
        self.flows = []
        self.error = None

    def run(self):
        try:
            for _ in range(self.count):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(120)
                s.connect(self.sock)
                s.sendall(b'{"op":"accept"}\n')
                f = s.makefile("rb")
                hdr = json.loads(f.readline())
                if not hdr.get("ok"):
                    raise RuntimeError(f"accept: {hdr}")
                h = hashlib.sha256()
                n = 0
                while True:
                    b = f.read1(1 << 16)
                    if not b:
                        break
                    h.update(b)
                    n += 1 and len(b)
                self.flows.append({"flow_id": hdr["flow_id"], "peer": hdr["peer"],
                                   "transport": hdr["transport"], "bytes": n,
                                   "sha256": h.hexdigest()})
                s.close()
        except Exception as e:  # reported by the test
            self.error = repr(e)


class Sampler(threading.Thread):
    """Samples a process's VmRSS every `period` seconds (max and series)."""

    def __init__(self, pid, period=0.05):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            v = rss_kb(self.pid)
            if v is not None:
                self.samples.append(v)
            time.sleep(self.period)

    def max(self):
        return max(self.samples) if self.samples else None


def legit_flows(net, transports, size, messages, timeout=120):
    """`flexpass send --messages` from h1 to the agent, one process per transport (run one
    after the other); returns the send records (fct_us per flow)."""
    out = []
    for t in transports:
        p = net.spawn("h1", "send", "--to", f"{net.ip['h3']}:{PORT}", "--transport", t, "--size",
                      str(size), "--messages", str(messages), "--timeout-s", "60", *NET_ARGS)
        o, e = p.communicate(timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"send {t}: exit {p.returncode}: {e[-2000:]}")
        recs = records(o)
        for r in recs:
            r.setdefault("transport", t)
        out += recs
    return out


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def udp_rcvbuf_errors(net, host):
    """Udp RcvbufErrors of a namespace (datagrams the kernel dropped: socket buffer full)."""
    lines = net.ns(host, "cat", "/proc/net/snmp").stdout.splitlines()
    udp = [l.split() for l in lines if l.startswith("Udp:")]
    if len(udp) < 2:
        return None
    return int(dict(zip(udp[0][1:], udp[1][1:])).get("RcvbufErrors", 0))


def link_tx_bytes(net, host, dev):
    return int(net.ns(host, "cat", f"/sys/class/net/{dev}/statistics/tx_bytes").stdout)
