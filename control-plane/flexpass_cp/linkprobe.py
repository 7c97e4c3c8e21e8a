"""Failure detection for ``flexpass-ctl run --detect probe``: per-link liveness probes.

BMv2 exposes no port status over P4Runtime, and a link can fail without its
interfaces going down (a cut fibre behind a transceiver, or ``tc`` dropping every
frame as the Mininet faults runner does — taking a veth down instead stalls the
whole BMv2 switch, docs/reliability.md).  So the controller probes every link
between two switches of the config, in both directions, the way BFD or LLDP do:
every ``interval_s`` a small frame (ethertype 0x88B5, IEEE "local experimental")
is sent out of each end's interface and must be received on the other end's.
A direction that has heard none of the probes sent over the last ``dead_s``
(at least 3 rounds) takes the link **down**; once both directions have heard
probes again for ``up_s`` the link is **up**.  Silence is counted in probes
*sent*, so a controller that is descheduled for a while (a loaded host) does
not mistake its own pause for a dead link.

The probes are sent and received from the controller's host on the switches'
interfaces (software switches: the veths of Mininet, named ``{switch}-eth{port}``
by default).  The switch's own pipeline sees the probe as a non-IPv4 frame and
drops it.  What they check is the link between the two ports (both directions),
not the switches' forwarding.

:class:`LinkMonitor` holds the state and is driven by the controller's tick; the
frame I/O (:class:`RawProbeIO`, AF_PACKET) is injectable, so the logic is tested
with a fake wire (control-plane/tests/test_faults.py).
"""

from __future__ import annotations

import select
import socket
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .config import Config
from .config.topology import link_peer

ETHERTYPE = 0x88B5
MAGIC = b"FPLP"  # FlexPass link probe
DEFAULT_INTERFACE = "{switch}-eth{port}"

End = Tuple[str, int]


def switch_links(cfg: Config) -> List[Tuple[End, End]]:
    """Every link between two switches of the config, each once, ends sorted."""
    out = set()
    for s, sw in cfg.switches.items():
        for p in sw.ports:
            peer = link_peer(cfg, s, p)
            if peer is not None:
                out.add(tuple(sorted([(s, p), peer])))
    return sorted(out)


def probe_frame(src: End, seq: int) -> bytes:
    name = f"{src[0]}:{src[1]}".encode()[:64]
    # To the LLDP nearest-bridge group (never forwarded by bridges) from a local MAC.
    return (b"\x01\x80\xc2\x00\x00\x0e" + b"\x02\x00\x00\x00\xfe\xfe" + struct.pack("!H", ETHERTYPE) + MAGIC
            + struct.pack("!IB", seq & 0xFFFFFFFF, len(name)) + name).ljust(60, b"\0")


def parse_probe(frame: bytes) -> Optional[Tuple[str, int]]:
    """(sender "switch:port", seq) of a probe frame, else None."""
    if len(frame) < 23 or frame[12:14] != struct.pack("!H", ETHERTYPE) or frame[14:18] != MAGIC:
        return None
    seq, n = struct.unpack("!IB", frame[18:23])
    name = frame[23:23 + n]
    try:
        return name.decode(), seq
    except UnicodeDecodeError:
        return None


class RawProbeIO:
    """Probe frames on real interfaces: one AF_PACKET socket per interface, bound
    to the probe ethertype (needs CAP_NET_RAW)."""

    def __init__(self, interfaces: Sequence[str]):
        self.socks: Dict[str, socket.socket] = {}
        try:
            for name in interfaces:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
                s.bind((name, ETHERTYPE))
                s.setblocking(False)
                self.socks[name] = s
        except OSError as e:
            self.close()
            raise OSError(e.errno, f"link probes: cannot open a raw socket on {name}: {e.strerror}") from None
        self._by_fd = {s.fileno(): n for n, s in self.socks.items()}

    def send(self, interface: str, frame: bytes) -> None:
        try:
            self.socks[interface].send(frame)
        except OSError:
            pass  # a full or dropping queue is a lost probe, which is what is measured

    def receive(self) -> List[Tuple[str, bytes]]:
        out = []
        ready, _, _ = select.select(list(self.socks.values()), [], [], 0)
        for s in ready:
            name = self._by_fd[s.fileno()]
            while True:
                try:
                    data, addr = s.recvfrom(256)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                if addr[2] != socket.PACKET_OUTGOING:
                    out.append((name, data))
        return out

    def close(self) -> None:
        for s in self.socks.values():
            s.close()
        self.socks = {}


@dataclass
class _Dir:
    """One direction of a link: probes sent from `src`'s interface, heard on `dst`'s."""
    src: End
    dst: End
    missed: int = 0  # probe rounds sent since one was last heard
    unheard_since: Optional[float] = None  # when the first of those was sent
    up_since: Optional[float] = None  # heard continuously since


@dataclass
class LinkMonitor:
    cfg: Config
    io: object = None
    interval_s: float = 0.02
    dead_s: float = 0.1
    up_s: float = 0.3
    interface: str = DEFAULT_INTERFACE
    links: List[Tuple[End, End]] = field(default_factory=list)

    def __post_init__(self):
        self.links = self.links or switch_links(self.cfg)
        self.dirs: Dict[Tuple[End, End], _Dir] = {}
        for a, b in self.links:
            self.dirs[(a, b)] = _Dir(a, b)
            self.dirs[(b, a)] = _Dir(b, a)
        self.intf_of = {end: self.interface.format(switch=end[0], port=end[1]) for l in self.links for end in l}
        self.end_of = {v: k for k, v in self.intf_of.items()}
        if self.io is None:
            self.io = RawProbeIO(sorted(self.intf_of.values()))
        self.down: Dict[Tuple[End, End], bool] = {l: False for l in self.links}
        self.dead_rounds = max(3, round(self.dead_s / self.interval_s))
        self.seq = 0
        self.next_send = 0.0

    def poll(self, now: float) -> List[dict]:
        """Send the probes that are due, take in what arrived; returns the links whose
        state changed: {"link": (a, b), "down": bool, "silent_s" | "restored_s": ...}."""
        if now >= self.next_send:
            self.seq += 1
            for end, intf in self.intf_of.items():
                self.io.send(intf, probe_frame(end, self.seq))
            for d in self.dirs.values():
                if d.missed == 0:
                    d.unheard_since = now
                d.missed += 1
            self.next_send = max(self.next_send + self.interval_s, now)
        for intf, frame in self.io.receive():
            p = parse_probe(frame)
            dst = self.end_of.get(intf)
            if p is None or dst is None:
                continue
            sw, _, port = p[0].rpartition(":")
            d = self.dirs.get(((sw, int(port)) if port.isdigit() else None, dst))
            if d is None:
                continue  # a probe from elsewhere (not this link's other end): ignored
            if d.up_since is None or d.missed > self.dead_rounds:
                d.up_since = now
            d.missed = 0
        changes = []
        for link in self.links:
            a, b = link
            ds = (self.dirs[(a, b)], self.dirs[(b, a)])
            dead = [d for d in ds if d.missed >= self.dead_rounds and now - d.unheard_since >= self.dead_s]
            if not self.down[link] and dead:
                self.down[link] = True
                for d in ds:
                    d.up_since = None
                changes.append({"link": link, "down": True,
                                "silent_s": round(max(now - d.unheard_since for d in dead), 4),
                                "directions": [f"{d.src[0]}:{d.src[1]}->{d.dst[0]}:{d.dst[1]}" for d in dead]})
            elif self.down[link] and all(d.missed <= 2 and d.up_since is not None
                                         and now - d.up_since >= self.up_s for d in ds):
                self.down[link] = False
                changes.append({"link": link, "down": False})
        return changes

    def close(self) -> None:
        close = getattr(self.io, "close", None)
        if close:
            close()
