"""Topologies as plain data, and the control-plane config each one needs.

A :class:`Fabric` lists hosts, switches and links with port numbers.  It is
independent of Mininet (unit-testable); :mod:`flexpass_mininet.network` builds
the Mininet network from it, and :meth:`Fabric.control_plane_config` writes the
YAML that ``flexpass-ctl apply`` pushes to every switch (routes, ECMP groups,
next-hop MACs, per-port rates and thresholds).

Addressing: host i is 10.0.0.i/8 with MAC 02:00:00:00:00:ii; port p of switch
number s has MAC 02:00:00:00:ss:pp.  Routing is shortest path; several
equal-cost next hops form an ECMP group (the P4 program hashes both directions
of a flow alike, so credits and data share links, ExpressPass §3.1).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from .scaling import Scaled


@dataclass(frozen=True)
class Host:
    name: str
    index: int  # 1..254

    @property
    def ip(self) -> str:
        return f"10.0.0.{self.index}"

    @property
    def mac(self) -> str:
        return f"02:00:00:00:00:{self.index:02x}"


@dataclass(frozen=True)
class SwitchNode:
    name: str
    index: int  # 1..

    @property
    def grpc_port(self) -> int:
        return 9558 + self.index

    @property
    def thrift_port(self) -> int:
        return 9089 + self.index

    @property
    def tm_port(self) -> int:
        return 9190 + self.index

    def port_mac(self, port: int) -> str:
        return f"02:00:00:00:{self.index:02x}:{port:02x}"


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int  # switch port number (hosts: 0, their eth0)
    b: str
    b_port: int


@dataclass
class Fabric:
    name: str
    hosts: Dict[str, Host] = field(default_factory=dict)
    switches: Dict[str, SwitchNode] = field(default_factory=dict)
    links: List[Link] = field(default_factory=list)

    # -- building ---------------------------------------------------------
    def host(self, name: str) -> Host:
        h = Host(name, len(self.hosts) + 1)
        self.hosts[name] = h
        return h

    def switch(self, name: str) -> SwitchNode:
        s = SwitchNode(name, len(self.switches) + 1)
        self.switches[name] = s
        return s

    def _next_port(self, sw: str) -> int:
        used = [l.a_port for l in self.links if l.a == sw] + [l.b_port for l in self.links if l.b == sw]
        return max(used, default=0) + 1

    def link(self, a: str, b: str) -> Link:
        """Connect two nodes; switches get the next free port, hosts port 0 (eth0)."""
        pa = self._next_port(a) if a in self.switches else 0
        pb = self._next_port(b) if b in self.switches else 0
        l = Link(a, pa, b, pb)
        self.links.append(l)
        return l

    # -- queries ----------------------------------------------------------
    def neighbours(self, node: str) -> List[Tuple[int, str, int]]:
        """(local port, neighbour, neighbour's port) for every link of `node`."""
        out = []
        for l in self.links:
            if l.a == node:
                out.append((l.a_port, l.b, l.b_port))
            elif l.b == node:
                out.append((l.b_port, l.a, l.a_port))
        return sorted(out)

    def mac_of(self, node: str, port: int) -> str:
        return self.hosts[node].mac if node in self.hosts else self.switches[node].port_mac(port)

    def distances_to(self, target: str) -> Dict[str, int]:
        dist = {target: 0}
        todo = collections.deque([target])
        while todo:
            n = todo.popleft()
            for _, m, _ in self.neighbours(n):
                if m not in dist and (m in self.switches or m == target):
                    dist[m] = dist[n] + 1
                    todo.append(m)
        return dist

    def next_hops(self, sw: str, dst_host: str) -> List[Tuple[int, str, int]]:
        """Equal-cost next hops (port, neighbour, neighbour port) from `sw` to a host."""
        dist = self.distances_to(dst_host)
        if sw not in dist:
            raise ValueError(f"{dst_host} is not reachable from {sw}")
        return [(p, n, np_) for p, n, np_ in self.neighbours(sw) if dist.get(n, 1 << 30) == dist[sw] - 1]

    def first_hop_mac(self, host: str) -> str:
        """MAC a host sends everything to: its switch's port."""
        (_, sw, sw_port), = self.neighbours(host)
        return self.switches[sw].port_mac(sw_port)

    def host_port(self, host: str) -> Tuple[str, int]:
        (_, sw, sw_port), = self.neighbours(host)
        return sw, sw_port

    # -- control-plane config ----------------------------------------------
    def control_plane_config(self, scaled: Scaled, target: str, profile: str = "flexpass") -> dict:
        """The flexpass-ctl YAML (as a dict) for every switch of the fabric."""
        switches = {}
        for sname, s in sorted(self.switches.items(), key=lambda kv: kv[1].index):
            ports = {}
            for port, nb, nb_port in self.neighbours(sname):
                ports[port] = {"name": nb, "link_rate": scaled.link_rate_bps, "mac": s.port_mac(port)}
            next_hops, groups, routes = {}, {}, []
            for hname, h in sorted(self.hosts.items(), key=lambda kv: kv[1].index):
                hops = self.next_hops(sname, hname)
                names = []
                for port, nb, nb_port in hops:
                    nh = f"{nb}" if nb in self.hosts else f"{nb}-p{nb_port}"
                    ip = h.ip if nb in self.hosts else f"10.255.{s.index}.{port}"
                    next_hops[nh] = {"ip": ip, "port": port, "dmac": self.mac_of(nb, nb_port)}
                    names.append(nh)
                if len(names) == 1:
                    routes.append({"prefix": f"{h.ip}/32", "next_hop": names[0]})
                else:
                    g = "ecmp-" + "-".join(sorted(names))
                    groups[g] = sorted(names)
                    routes.append({"prefix": f"{h.ip}/32", "ecmp_group": g})
            switches[sname] = {
                "device_id": s.index - 1,
                "grpc_addr": f"127.0.0.1:{s.grpc_port}",
                "thrift_port": s.thrift_port,
                "tm_port": s.tm_port,
                "target": target,
                "profile": profile,
                "ports": ports,
                "next_hops": next_hops,
                "ecmp_groups": groups,
                "routes": routes,
            }
            if not groups:
                del switches[sname]["ecmp_groups"]
        return {
            "credit": {"wire_bytes": 84, "max_frame_bytes": 1538},
            "port_defaults": scaled.port_defaults(),
            "switches": switches,
        }


# -- the topologies of issue #5 --------------------------------------------------

def dumbbell(senders: int = 2) -> Fabric:
    """N-to-1 through one switch: h1..hN send to h{N+1} (FlexPass Fig. 7 and 9: N = 2)."""
    f = Fabric(f"dumbbell{senders}")
    s1 = f.switch("s1")
    for i in range(1, senders + 2):
        f.host(f"h{i}")
        f.link(f"h{i}", s1.name)
    return f


def incast(senders: int = 8) -> Fabric:
    """N-to-1 incast (FlexPass Fig. 8: 8 responders, one requester h{N+1})."""
    f = dumbbell(senders)
    f.name = f"incast{senders}"
    return f


def leaf_spine(spines: int = 2, leaves: int = 2, hosts_per_leaf: int = 2) -> Fabric:
    """Two-tier Clos: every leaf connects to every spine; hosts hang off leaves."""
    f = Fabric(f"leafspine{spines}x{leaves}")
    leaf_names = [f.switch(f"leaf{i}").name for i in range(1, leaves + 1)]
    spine_names = [f.switch(f"spine{i}").name for i in range(1, spines + 1)]
    n = 0
    for leaf in leaf_names:
        for _ in range(hosts_per_leaf):
            n += 1
            f.host(f"h{n}")
            f.link(f"h{n}", leaf)
    for leaf in leaf_names:
        for spine in spine_names:
            f.link(leaf, spine)
    return f


TOPOLOGIES = {"dumbbell": dumbbell, "incast": incast, "leafspine": leaf_spine}


# -- ECMP paths ----------------------------------------------------------------------

UDP = 17


def crc16(data: bytes) -> int:
    """BMv2's ``crc16`` (CRC-16/ARC: polynomial 0x8005 reflected, init 0, no final
    xor), the hash of the program's action selector."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _ip_int(ip: str) -> int:
    a, b, c, d = (int(x) for x in ip.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def ecmp_member_index(src_ip: str, dst_ip: str, sport: int, dport: int, n: int, proto: int = UDP) -> int:
    """Index of the member the P4 program's selector picks in an n-member group for
    this flow (either direction: the endpoints are hashed in canonical order, lower
    address first, p4src/v1model/include/control/forwarding.p4): crc16 over
    (addr_lo, addr_hi, port_lo, port_hi, protocol) modulo n; BMv2 orders a group's
    members by member handle, i.e. by member id (next-hop order)."""
    a, b = _ip_int(src_ip), _ip_int(dst_ip)
    if a < b or (a == b and sport <= dport):
        lo, hi = (a, sport), (b, dport)
    else:
        lo, hi = (b, dport), (a, sport)
    key = lo[0].to_bytes(4, "big") + hi[0].to_bytes(4, "big") + lo[1].to_bytes(2, "big") \
        + hi[1].to_bytes(2, "big") + bytes([proto])
    return crc16(key) % n


def ecmp_paths(fabric: Fabric, cfg, groups: Dict[str, Dict[int, Tuple[int, ...]]],
               routes: Dict[str, Dict[str, Tuple[str, int]]]) -> Dict[str, Dict[str, List[str]]]:
    """Per switch and destination host: the neighbours its route spreads over, in
    the selector's order (member id order), from entities read back from the
    switches.  ``groups[switch]``: group id -> member ids; ``routes[switch]``:
    host ip -> ("member"|"group", id); ``cfg``: the flexpass_cp Config (member
    ids -> next hops)."""
    from flexpass_cp.config.forwarding import member_ids

    out: Dict[str, Dict[str, List[str]]] = {}
    for sname, rts in routes.items():
        mids = {v: k for k, v in member_ids(cfg.switch(sname)).items()}
        by_port = {p: nb for p, nb, _ in fabric.neighbours(sname)}
        hops = {}
        for hname, h in fabric.hosts.items():
            if h.ip not in rts:
                hops[hname] = []
                continue
            kind, ident = rts[h.ip]
            members = [ident] if kind == "member" else sorted(groups[sname].get(ident, ()))
            hops[hname] = [by_port[cfg.switch(sname).next_hops[mids[m]].port] for m in members]
        out[sname] = hops
    return out


def asymmetric_pairs(fabric: Fabric, paths: Dict[str, Dict[str, List[str]]]) -> List[str]:
    """Host pairs on different leaves whose two directions do not spread over the
    same spines in the same order (so a flow's credits and data could part)."""
    bad = []
    for a, ha in sorted(fabric.hosts.items()):
        la = fabric.host_port(a)[0]
        for b, hb in sorted(fabric.hosts.items()):
            lb = fabric.host_port(b)[0]
            if la >= lb or la not in paths or lb not in paths:
                continue
            if paths[la].get(b) != paths[lb].get(a):
                bad.append(f"{a}->{b} via {paths[la].get(b)} but {b}->{a} via {paths[lb].get(a)}")
    return bad
