"""Links between the switches of a config, and links out of service.

The fabric is not described separately: a next hop whose dmac is another
switch's port MAC is a link to that port (switch-to-switch), any other next
hop leads to a host.  What a link out of service does to routes and ECMP
groups: :mod:`.forwarding`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .model import Config, ConfigError


def port_at_mac(cfg: Config) -> Dict[str, Tuple[str, int]]:
    """(switch, port) of every switch port MAC."""
    return {p.mac: (s.name, p.port) for s in cfg.switches.values() for p in s.ports.values()}


def link_peer(cfg: Config, switch: str, port: int) -> Optional[Tuple[str, int]]:
    """The (switch, port) at the other end of `switch`'s `port`, when it is a
    switch of the config (found through the next hops' MAC addresses)."""
    at_mac = port_at_mac(cfg)
    sw = cfg.switch(switch)
    for nh in sorted(sw.next_hops.values(), key=lambda n: n.sort_key):
        if nh.port == port and nh.dmac in at_mac and at_mac[nh.dmac][0] != switch:
            return at_mac[nh.dmac]
    if port in sw.ports:
        mine = sw.ports[port].mac
        for other in sorted(cfg.switches.values(), key=lambda s: s.name):
            for nh in sorted(other.next_hops.values(), key=lambda n: n.sort_key):
                if other.name != switch and nh.dmac == mine:
                    return (other.name, nh.port)
    return None


def resolve_link(cfg: Config, spec: Any, path: str = "link") -> Tuple[Tuple[str, int], ...]:
    """Both ends of a link named ``"switch:port"`` (a port number or a port's
    ``name``, e.g. ``leaf1:3`` or ``leaf1:spine1``); one end when the other is a
    host.  Sorted, so the two names of a link resolve alike."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ConfigError(path, f"a link is 'switch:port' (port number or name), got {spec!r}")
    sname, pname = (x.strip() for x in spec.split(":"))
    if sname not in cfg.switches:
        raise ConfigError(path, f"no switch named {sname!r} in {spec!r} "
                                f"(switches: {', '.join(sorted(cfg.switches))})")
    sw = cfg.switches[sname]
    if pname.isdigit():
        port = int(pname)
        if port not in sw.ports:
            raise ConfigError(path, f"{sname} has no port {port} (ports: {sorted(sw.ports)})")
    else:
        named = [p.port for p in sw.ports.values() if p.name == pname]
        if len(named) != 1:
            raise ConfigError(path, f"{sname} has {'no' if not named else 'several'} port named {pname!r} "
                                    f"(ports: {', '.join(f'{p.port}={p.name}' for p in sw.ports.values())})")
        port = named[0]
    ends = {(sname, port)}
    peer = link_peer(cfg, sname, port)
    if peer is not None:
        ends.add(peer)
    return tuple(sorted(ends))


def describe_link(cfg: Config, ends: Sequence[Tuple[str, int]]) -> str:
    names = []
    for s, p in ends:
        pn = cfg.switches[s].ports[p].name if s in cfg.switches and p in cfg.switches[s].ports else ""
        names.append(f"{s}:{p}" + (f" ({pn})" if pn and pn != f"port{p}" else ""))
    return " <-> ".join(names)


def with_down_links(cfg: Config, links: Iterable[Any], path: str = "down_links") -> Config:
    """`cfg` with the given links (specs, see :func:`resolve_link`) out of service,
    in addition to those already down."""
    down = set(cfg.down_ports)
    for i, spec in enumerate(links):
        down.update(resolve_link(cfg, spec, f"{path}[{i}]"))
    return dataclasses.replace(cfg, down_ports=frozenset(down))


def down_links(cfg: Config) -> List[str]:
    """The links out of service, each named once (:func:`describe_link`)."""
    ends = set()
    for s, p in cfg.down_ports:
        peer = link_peer(cfg, s, p)
        ends.add(tuple(sorted({(s, p)} | ({peer} if peer else set()))))
    return [describe_link(cfg, e) for e in sorted(ends)]
