"""Routes and ECMP groups of a switch given the links out of service (pure).

A link taken down removes, on EVERY switch, the next hops that cross it or
that lead to a switch which can no longer reach the destination: leaf2's group
towards a host behind leaf1 drops spine1 when the leaf1-spine1 link fails,
exactly as leaf1's group towards leaf2's hosts does, so both directions of a
flow keep hashing to the same spine (ExpressPass §3.1).  Remaining members keep
their deterministic (next-hop address) order, group and member ids do not
change (a group shrinks by a MODIFY), and a route left with no usable next hop
is withdrawn (the program counts "no route").
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple, Union

from .model import Config, NextHop, Route, SwitchConfig
from .topology import port_at_mac


def member_ids(sw: SwitchConfig) -> Dict[str, int]:
    """Action-profile member id per next hop, 1.. in next-hop order."""
    ordered = sorted(sw.next_hops.values(), key=lambda n: n.sort_key)
    return {nh.name: i + 1 for i, nh in enumerate(ordered)}


def group_ids(sw: SwitchConfig) -> Dict[str, int]:
    return {g: i + 1 for i, g in enumerate(sorted(sw.ecmp_groups))}


class Reachability:
    """Which next hops of a switch still lead to a prefix, given cfg.down_ports."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.at_mac = port_at_mac(cfg)
        self.memo: Dict[Tuple[str, ipaddress.IPv4Network], Tuple[str, ...]] = {}

    @staticmethod
    def route_for(sw: SwitchConfig, prefix: ipaddress.IPv4Network) -> Optional[Route]:
        best = None
        for r in sw.routes:
            if prefix.subnet_of(r.prefix) and (best is None or r.prefix.prefixlen > best.prefix.prefixlen):
                best = r
        return best

    def next_hop_ok(self, switch: str, nh: NextHop, prefix: ipaddress.IPv4Network,
                    visiting: FrozenSet[str]) -> bool:
        if (switch, nh.port) in self.cfg.down_ports:
            return False
        peer = self.at_mac.get(nh.dmac)
        if peer is None or peer[0] == switch:
            return True  # a host (or something outside the config): the link is all there is
        if peer in self.cfg.down_ports:
            return False
        if peer[0] in visiting:
            return False  # a loop: not a path
        return bool(self.usable(peer[0], prefix, visiting | {switch}))

    def usable(self, switch: str, prefix: ipaddress.IPv4Network,
               visiting: FrozenSet[str] = frozenset()) -> Tuple[str, ...]:
        """Names of `switch`'s next hops for `prefix` that still reach it, in group order."""
        key = (switch, prefix)
        if key in self.memo:
            return self.memo[key]
        sw = self.cfg.switches[switch]
        r = self.route_for(sw, prefix)
        if r is None:
            out: Tuple[str, ...] = ()
        else:
            cands = (r.next_hop,) if r.next_hop is not None else sw.ecmp_groups[r.ecmp_group]
            out = tuple(n for n in cands if self.next_hop_ok(switch, sw.next_hops[n], prefix, visiting))
        self.memo[key] = out
        return out


@dataclass(frozen=True)
class Forwarding:
    """A switch's forwarding state given the links out of service.

    ``groups``: group id -> member ids (the configured order); ``routes``:
    (route, member id, group id) with exactly one id set; ``withdrawn``: routes
    with no usable next hop (not installed).  Group ids of the configured groups
    never change; a route whose usable members differ from those of the other
    routes sharing its group gets an extra group (ids after the configured ones)."""

    groups: Dict[int, Tuple[int, ...]]
    routes: Tuple[Tuple[Route, Optional[int], Optional[int]], ...]
    withdrawn: Tuple[Route, ...]


def usable_next_hops(cfg: Config, switch: str, prefix: Union[str, ipaddress.IPv4Network]) -> Tuple[str, ...]:
    """`switch`'s next hops (names, group order) that still reach `prefix`."""
    return Reachability(cfg).usable(switch, ipaddress.IPv4Network(prefix))


def forwarding(cfg: Config, switch: str) -> Forwarding:
    sw = cfg.switch(switch)
    mids, gids = member_ids(sw), group_ids(sw)
    reach = Reachability(cfg) if cfg.down_ports else None
    ordered = sorted(sw.routes, key=lambda r: (-r.prefix.prefixlen, int(r.prefix.network_address)))
    # Usable members of every route (all of them when nothing is down).
    usable: Dict[Route, Tuple[str, ...]] = {}
    for r in ordered:
        cands = (r.next_hop,) if r.next_hop is not None else sw.ecmp_groups[r.ecmp_group]
        usable[r] = cands if reach is None else reach.usable(switch, r.prefix)
    groups: Dict[int, Tuple[int, ...]] = {}
    extra: List[Tuple[str, Tuple[int, ...]]] = []
    subset_gid: Dict[Tuple[str, Tuple[int, ...]], int] = {}
    for gname in sorted(sw.ecmp_groups):
        full = tuple(mids[m] for m in sw.ecmp_groups[gname])
        users = [tuple(mids[m] for m in usable[r]) for r in ordered if r.ecmp_group == gname]
        subsets = [u for u in users if u]
        if not users:  # configured but unused: only its own links matter
            own = tuple(mids[m] for m in sw.ecmp_groups[gname]
                        if (switch, sw.next_hops[m].port) not in cfg.down_ports)
            if own:
                groups[gids[gname]] = own
            continue
        if not subsets:
            continue  # every route through it is withdrawn: the group goes too
        # The configured id keeps the full set if any route still uses it (untouched
        # destinations cost no write), else the most used subset.
        counts: Dict[Tuple[int, ...], int] = {}
        for u in subsets:
            counts[u] = counts.get(u, 0) + 1
        keep = full if full in counts else sorted(counts, key=lambda u: (-counts[u], -len(u), u))[0]
        groups[gids[gname]] = keep
        subset_gid[(gname, keep)] = gids[gname]
        for u in sorted(counts):
            if u != keep:
                extra.append((gname, u))
    next_gid = max(gids.values(), default=0) + 1
    for gname, u in sorted(extra):
        subset_gid[(gname, u)] = next_gid
        groups[next_gid] = u
        next_gid += 1
    routes, withdrawn = [], []
    for r in ordered:
        u = usable[r]
        if not u:
            withdrawn.append(r)
        elif r.next_hop is not None:
            routes.append((r, mids[r.next_hop], None))
        else:
            routes.append((r, None, subset_gid[(r.ecmp_group, tuple(mids[m] for m in u))]))
    return Forwarding(groups, tuple(routes), tuple(withdrawn))

