"""The typed config: what :mod:`.schema` builds from YAML, and :class:`ConfigError`."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional, Tuple

from .. import frames
from ..dscp import DscpPlan


class ConfigError(ValueError):
    """A config is invalid.  ``path`` locates the field (dotted), ``str(e)``
    is ``"<path>: <message>"``."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class QueueParams:
    """Per-port queue parameters (bytes, as configured)."""

    w_q: float
    ecn_threshold_bytes: int  # K of Q1 (FlexPass)
    red_threshold_bytes: int  # selective-drop threshold of Q1, > K
    legacy_ecn_threshold_bytes: Optional[int]  # K of Q2 (None: no marking)
    buffer_bytes: int  # per data queue (BMv2 queue depth)
    credit_queue_packets: int  # Q0 depth in credits (ExpressPass: 8)
    # Credits the credit meter (a policer: stock BMv2, Tofino) lets pass at once
    # (ExpressPass's token bucket: 2). Hosts that pace credits in batches of B (agent
    # --credit-batch) need B + 1; a TM credit queue absorbs the batch and re-spaces it.
    credit_meter_burst_packets: int = 2
    # The same token bucket where a TM shapes credits (flexpass_switch): 2 re-spaces a
    # batch; B + 1 passes it whole, as a meter must (the model's switch.credit_burst sets
    # both).
    credit_shaper_burst_packets: int = 2


@dataclass(frozen=True)
class PptParams:
    """PPT switch profile (SIGCOMM'24 §3.2 Eq. 3): ECN threshold K = λ·C·RTT per queue,
    λ_HCP for P0-P3 and λ_LCP for P4-P7, C the port's rate, RTT the base RTT; or K
    given in bytes (PPT §6.2: 96 kB HCP, 86 kB LCP), which takes precedence."""

    base_rtt_us: float = 100.0
    lambda_hcp: float = 0.17
    lambda_lcp: float = 0.1
    ecn_threshold_hcp_bytes: Optional[int] = None
    ecn_threshold_lcp_bytes: Optional[int] = None


@dataclass(frozen=True)
class FlashPassParams:
    """FlashPass switch profile (§III-C, §IV-A): the emulation queue's single threshold
    (an over-provisioned, Not-ECT emulation packet that finds this many queued is
    dropped, an ordinary ECT one CE-marked) and the data queue's selective-drop threshold
    for unscheduled (red) data, both in packets (paper: 2 and 2).  The emulation queue
    is the credit queue: ``credit_queue_packets`` deep (paper: 8)."""

    emulation_threshold_packets: int = 2
    unscheduled_threshold_packets: int = 2


@dataclass(frozen=True)
class PortConfig:
    port: int
    name: str
    link_rate_bps: float
    mac: str
    queues: QueueParams


@dataclass(frozen=True)
class NextHop:
    name: str
    ip: ipaddress.IPv4Address
    port: int
    dmac: str

    @property
    def sort_key(self) -> Tuple[int, int, str]:
        """Deterministic ECMP order: by next-hop address (ExpressPass §3.1)."""
        return (int(self.ip), self.port, self.dmac)


@dataclass(frozen=True)
class Route:
    prefix: ipaddress.IPv4Network
    next_hop: Optional[str] = None
    ecmp_group: Optional[str] = None


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    device_id: int
    grpc_addr: str
    thrift_port: int
    profile: str
    ports: Dict[int, PortConfig]
    next_hops: Dict[str, NextHop]
    ecmp_groups: Dict[str, Tuple[str, ...]]
    routes: Tuple[Route, ...]
    target: str = "simple_switch"
    tm_port: int = 9191  # flexpass_switch traffic-manager API (docs/tm-api.md)


#: How a host's NIC edge is built (docs/smartnic.md): Linux qdiscs (nic/flexpass_nic.py),
#: the tc eBPF program (nic/flexpass_ebpf.py), or the PNA program (p4src/pna).
NIC_EDGES = ("qdisc", "ebpf", "pna")


@dataclass(frozen=True)
class HostNicConfig:
    """A host NIC edge (``nics.<name>``): the host's end of a link, limited like a switch
    port (FlexPass §4.3: the NIC is an edge switch).  ``w_q`` and
    ``credit_meter_burst_packets`` default from ``port_defaults``, ``mtu`` from
    ``credit.mtu``."""

    name: str
    device: str  # the netdev (qdisc, ebpf) or the host's name for the NIC (pna)
    link_rate_bps: float  # C
    mtu: int
    w_q: float
    credit_share: Optional[float]  # None: w_q (FlexPass); 1.0 for ExpressPass
    credit_meter_burst_packets: int
    edge: str  # one of NIC_EDGES
    host_port: int = 0  # PNA: the port towards the host (nic_port: host <-> network)
    network_port: int = 1  # PNA: the port towards the network (the credit meter's cell)

    @property
    def share(self) -> float:
        """The share of C credits may fill: w_q unless credit_share is given."""
        return self.w_q if self.credit_share is None else self.credit_share


@dataclass(frozen=True)
class Config:
    credit_wire_bytes: int
    max_frame_bytes: int
    dscp: DscpPlan
    bmv2_priority: Dict[str, int]
    switches: Dict[str, SwitchConfig]
    source: str = "<config>"
    #: Switch ports taken out of service (``down_links``, or the link state that
    #: ``flexpass-ctl link-down`` records), both ends of every link: next hops on
    #: them, and next hops that can no longer reach a destination because of
    #: them, leave the ECMP groups and routes (:func:`.forwarding.forwarding`).
    down_ports: FrozenSet[Tuple[str, int]] = frozenset()
    # IP MTU of the links (credit.mtu); None only for a config that gives a
    # max_frame_bytes of no MTU.
    mtu: Optional[int] = frames.DEFAULT_MTU
    ppt: PptParams = PptParams()
    flashpass: FlashPassParams = FlashPassParams()
    nics: Dict[str, NicConfig] = field(default_factory=dict)

    def nic(self, name: str) -> NicConfig:
        if name not in self.nics:
            known = ", ".join(sorted(self.nics)) or "none"
            raise ConfigError("nics", f"no NIC named {name!r} (known: {known})")
        return self.nics[name]

    def switch(self, name: str) -> SwitchConfig:
        if name not in self.switches:
            known = ", ".join(sorted(self.switches)) or "none"
            raise ConfigError("switches", f"no switch named {name!r} (known: {known})")
        return self.switches[name]
