"""Declarative FlexPass switch configuration (YAML) and its compilation to
P4Runtime entries for ``p4src/v1model/flexpass.p4`` (and, through
:mod:`flexpass_cp.bfrt_ops`, BfRt operations for ``p4src/tna/flexpass.p4``).

Everything is in one module on purpose:

* :func:`load_config` / :func:`parse_config` validate a config and raise
  :class:`ConfigError` with the path of the offending field
  (``switches.s1.ports.3.link_rate: must be > 0, got -1``).
* :class:`Derived` computes every derived value (meter rate, burst, BMv2
  thresholds, queue rates) in ONE place; nothing else does unit arithmetic.
* :func:`switch_entries` turns a switch's config into a list of entities
  (:mod:`flexpass_cp.entities`): a pure function, testable without a switch.

Units
-----
* Rates: an int/float is **bits per second**; strings take a unit:
  ``"10Gbps"``, ``"100Mbps"``, ``"1.5Gbps"``, ``"800kbps"``, ``"42bps"``.
* Sizes: an int is **bytes**; strings take a unit: ``"65KB"`` (1 KB = 1000 B),
  ``"64KiB"`` (1024 B), ``"1MB"``, ``"1538B"``.
* Thresholds are compared with ``standard_metadata.enq_qdepth``.  Stock BMv2
  (``target: simple_switch``) counts **packets**, so byte thresholds are
  converted to ``ceil(bytes / max_frame_bytes)`` packets (max_frame_bytes
  is the maximum frame of ``credit.mtu``, mtu + 38: 1538, a full-size
  Ethernet frame on the wire, at the default MTU of 1500; 9038 at 9000 —
  docs/protocol.md §9, :mod:`flexpass_cp.frames`).  The project's
  target (``target: flexpass_switch``, switch-target/) reports **bytes** as
  BMv2 counts them (no preamble, IFG or FCS), so thresholds are written as
  configured, and its traffic manager (:func:`tm_settings`) does the DWRR,
  the credit shaping and the red admission that stock BMv2 cannot do.
  Tofino (``target: tofino`` / ``tofino2``) reports **cells** (80 bytes on
  Tofino, 176 on Tofino2), so thresholds are ``ceil(bytes / cell)``; its
  traffic manager (:meth:`Derived.tofino_port`, tf1.tm.* / tf2.tm.* over
  BfRt) does strict priority, DWRR, the credit shaper and the red colour drop.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import frames
from .dscp import PRIORITIES, PRIORITY_LEVELS, DscpPlan, PptPriority, TrafficClass
from .entities import (
    ActionProfileGroup,
    ActionProfileMember,
    Entity,
    MeterEntry,
    TableEntry,
)

# --------------------------------------------------------------------------
# Constants that mirror p4src/shared/define.p4
# --------------------------------------------------------------------------

MAX_PORTS = 64  # meter / counter arrays are indexed by port (define.p4)
QUEUES_PER_PORT = 8  # BMv2 --priority-queues 8
ECMP_MAX_GROUP_SIZE = 16
KIND = {  # KIND_* in define.p4
    TrafficClass.LEGACY: 0,
    TrafficClass.CREDIT: 1,
    TrafficClass.PROACTIVE_DATA: 2,
    TrafficClass.REACTIVE_DATA: 3,
    TrafficClass.CONTROL: 4,
}
COLOR_GREEN, COLOR_RED = 0, 2  # p4src/shared/define.p4 (v1model meter encoding)

#: Bytes on the wire that BMv2 does not see in a frame: preamble+SFD (8),
#: inter-frame gap (12) and FCS (4).  BMv2 byte meters count the frame as
#: read from the interface, i.e. wire bytes - 24.
WIRE_OVERHEAD_NOT_SEEN_BY_BMV2 = 24

#: Logical queues of the FlexPass design (paper §4.1): Q0 credits, Q1 FlexPass
#: data + control, Q2 legacy.
LOGICAL_QUEUES = ("credit", "flexpass", "legacy")

#: Default BMv2 priority index of each logical queue.  BMv2 serves the HIGHEST
#: priority index first (strict priority; see p4src/README.md).  Credits are
#: on top.  BMv2 has no DWRR, so the weighted sharing of Q1/Q2 is emulated by
#: serving legacy above FlexPass with legacy capped at (1 - w_q)·C: legacy
#: gets at least its share, FlexPass gets at least w_q·C and everything the
#: legacy queue leaves unused.
DEFAULT_BMV2_PRIORITY = {"credit": 7, "legacy": 6, "flexpass": 5}

#: Tofino chips: BfRt traffic-manager table prefix and TM cell size in bytes
#: (the unit of eg_intr_md.enq_qdepth and of every TM buffer limit).  Cell
#: sizes: Tofino 80 B, Tofino2 176 B; the TM's own tfN.tm.cfg.cell_size_bytes
#: is checked against this at apply time.
TOFINO_CHIPS = {"tofino": ("tf1", 80), "tofino2": ("tf2", 176)}

#: Switch programs a config can drive.  simple_switch covers simple_switch_grpc;
#: tofino / tofino2 run p4src/tna/flexpass.p4 and are configured over BfRt.
TARGETS = ("simple_switch", "flexpass_switch") + tuple(TOFINO_CHIPS)

#: Wire bytes that Tofino's meters, shapers and buffer accounting do not see in
#: a frame: preamble+SFD (8) and inter-frame gap (12); the FCS is counted.  The
#: shaper adds them back with tfN.tm.pipe.sched_cfg.packet_ifg_compensation.
WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO = 20
FCS_BYTES = 4

#: Bytes p4src/tna adds in front of a packet for the traffic manager (the
#: ingress->egress bridged header: qid, colour, kind).
TOFINO_BRIDGED_BYTES = 1

#: Port speeds of the BfRt $PORT table (bits/s -> $SPEED).  A port whose
#: link_rate is below its speed is shaped to link_rate by the TM.
TOFINO_SPEEDS = {"tofino": ((1e9, "BF_SPEED_1G"), (10e9, "BF_SPEED_10G"), (25e9, "BF_SPEED_25G"),
                            (40e9, "BF_SPEED_40G"), (50e9, "BF_SPEED_50G"), (100e9, "BF_SPEED_100G"))}
TOFINO_SPEEDS["tofino2"] = TOFINO_SPEEDS["tofino"] + ((200e9, "BF_SPEED_200G"), (400e9, "BF_SPEED_400G"))

#: Colour drop limits a Tofino queue accepts (tfN.tm.queue.color
#: drop_limit_red), in % of the queue's guaranteed (green) limit.
TOFINO_COLOR_LIMITS = (12.5, 25.0, 37.5, 50.0, 62.5, 75.0, 87.5, 100.0)

#: Largest DWRR weight of a Tofino queue (bf_tm_sched_q_dwrr_weight_set: 0..1023).
TOFINO_MAX_DWRR_WEIGHT = 1023

#: Largest CREDIT frame on the wire (ExpressPass §3.1: 84-92 B).
MAX_CREDIT_WIRE_BYTES = 92

#: enq_qdepth is bit<19> in v1model: "no threshold".
NO_THRESHOLD = 0x7FFFF

#: Traffic class -> (logical queue, colour) for each profile.  The profiles
#: differ only in classifier entries (the P4 program is the same).
PROFILES: Dict[str, Dict[TrafficClass, Tuple[str, int]]] = {
    # FlexPass (EuroSys'23 §4.1): 3 queues, reactive data red in Q1.
    "flexpass": {
        TrafficClass.CREDIT: ("credit", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("flexpass", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("flexpass", COLOR_RED),
        TrafficClass.CONTROL: ("flexpass", COLOR_GREEN),
        TrafficClass.LEGACY: ("legacy", COLOR_GREEN),
    },
    # "Naive" ExpressPass deployment (paper §6.2): credits in their own queue,
    # every data packet shares one queue with legacy traffic, nothing is red,
    # credits are limited for the full line rate (w_q is ignored).
    "expresspass_naive": {
        TrafficClass.CREDIT: ("credit", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("legacy", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("legacy", COLOR_GREEN),
        TrafficClass.CONTROL: ("legacy", COLOR_GREEN),
        TrafficClass.LEGACY: ("legacy", COLOR_GREEN),
    },
    # FlashPass (shallow-buffered WAN §III-B, §III-C, §IV-A; docs/protocol.md §10): the
    # credit queue is the emulation queue (EMULATION, and CREDITs of ExpressPass flows);
    # every data class shares one data queue, where the unscheduled first-RTT data
    # (REACTIVE_DATA) is red.  Over-provisioned (Not-ECT) emulation packets are coloured
    # red by `ecn_color` entries (:func:`flashpass_ecn_color_entries`).
    "flashpass": {
        TrafficClass.CREDIT: ("credit", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("flexpass", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("flexpass", COLOR_RED),
        TrafficClass.CONTROL: ("flexpass", COLOR_GREEN),
        TrafficClass.LEGACY: ("flexpass", COLOR_GREEN),
    },
}
FLASHPASS_PROFILE = "flashpass"

#: PPT (SIGCOMM'24 §4.2, §6.2; docs/protocol.md §10): eight strict priorities.  BMv2
#: and flexpass_switch serve the HIGHEST queue index first, so priority Pp (P0 the
#: highest) is queue 7 - p.  Every DSCP that is not a PPT priority (legacy traffic,
#: the FlexPass classes, unassigned values) goes with P3, the HCP priority of large
#: flows, above every LCP queue.
PPT_PROFILE = "ppt"
PPT_OTHER_PRIORITY = 3


def ppt_qid(level: int) -> int:
    """Queue index of PPT priority P<level> on BMv2 / flexpass_switch."""
    if not 0 <= level < PRIORITY_LEVELS:
        raise ValueError(f"PPT priority must be in 0..{PRIORITY_LEVELS - 1}, got {level}")
    return QUEUES_PER_PORT - 1 - level


# P4 object names (the @name(".x") annotations in p4src/v1model).
T_CLASSIFIER = "classifier"
T_ROUTING = "routing"
T_QUEUE_THRESHOLDS = "queue_thresholds"
T_PORT_SMAC = "port_smac"
T_ECN_COLOR = "ecn_color"
ECN_NOT_ECT = 0
AP_ECMP = "ecmp_selector"
METER_CREDIT = "credit_meter"
PORT_QUEUE_COUNTERS = ("forwarded", "ecn_marked", "red_dropped", "credit_dropped")
INGRESS_EVENTS = "ingress_events"
INGRESS_EVENT_NAMES = {
    0: "parser_error (forwarded)",
    1: "dropped: not IPv4",
    2: "dropped: bad IPv4 checksum",
    3: "dropped: TTL expired",
    4: "dropped: no route",
    5: "FlexPass header seen",
    6: "dropped: IPv4 options",
}


class ConfigError(ValueError):
    """A config is invalid.  ``path`` locates the field (dotted), ``str(e)``
    is ``"<path>: <message>"``."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


# --------------------------------------------------------------------------
# Unit parsing
# --------------------------------------------------------------------------

_RATE_UNITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
_NUM_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_rate(value: Any, path: str) -> float:
    """Rate in bits/s from a number (bits/s) or a string with a unit."""
    if _is_number(value):
        rate = float(value)
    elif isinstance(value, str):
        m = _NUM_UNIT.match(value)
        if not m or m.group(2).lower() not in _RATE_UNITS:
            if value.strip().startswith("-"):
                raise ConfigError(path, f"must be > 0, got {value!r}")
            raise ConfigError(
                path, f"cannot parse rate {value!r}: use bits/s or a unit like '10Gbps' "
                f"(units: {', '.join(_RATE_UNITS)})")
        rate = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    else:
        raise ConfigError(path, f"must be a rate (number of bits/s or '10Gbps'), got {value!r}")
    if not math.isfinite(rate) or rate <= 0:
        raise ConfigError(path, f"must be > 0, got {value!r}")
    return rate


def parse_size(value: Any, path: str) -> int:
    """Size in bytes from an int (bytes) or a string with a unit."""
    if _is_number(value):
        if float(value) != int(value):
            raise ConfigError(path, f"must be a whole number of bytes, got {value!r}")
        size = int(value)
    elif isinstance(value, str):
        m = _NUM_UNIT.match(value)
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            if value.strip().startswith("-"):
                raise ConfigError(path, f"must be > 0, got {value!r}")
            raise ConfigError(
                path, f"cannot parse size {value!r}: use bytes or a unit like '65KB' "
                f"(units: B, KB, KiB, MB, MiB)")
        size = int(math.ceil(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]))
    else:
        raise ConfigError(path, f"must be a size (bytes or '65KB'), got {value!r}")
    if size <= 0:
        raise ConfigError(path, f"must be > 0, got {value!r}")
    return size


def _mac(value: Any, path: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}", value):
        raise ConfigError(path, f"must be a MAC address like '02:00:00:00:00:01', got {value!r}")
    return value.lower()


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


# --------------------------------------------------------------------------
# Typed config
# --------------------------------------------------------------------------


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
    #: them, leave the ECMP groups and routes (:func:`forwarding`).
    down_ports: FrozenSet[Tuple[str, int]] = frozenset()
    # IP MTU of the links (credit.mtu); None only for a config that gives a
    # max_frame_bytes of no MTU.
    mtu: Optional[int] = frames.DEFAULT_MTU
    ppt: PptParams = PptParams()
    flashpass: FlashPassParams = FlashPassParams()

    def switch(self, name: str) -> SwitchConfig:
        if name not in self.switches:
            known = ", ".join(sorted(self.switches)) or "none"
            raise ConfigError("switches", f"no switch named {name!r} (known: {known})")
        return self.switches[name]

    def derived(self, switch: str, port: int) -> "Derived":
        sw = self.switch(switch)
        return Derived(self, sw, sw.ports[port])


# --------------------------------------------------------------------------
# Derived values: the ONE place that does unit arithmetic
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Derived:
    """Values derived from a port's config.  See the module docstring for units."""

    config: Config
    switch: SwitchConfig
    port: PortConfig

    @property
    def effective_w_q(self) -> float:
        """Share of the link reserved for proactive data (1.0 in the naive profile)."""
        return 1.0 if self.switch.profile in ("expresspass_naive", FLASHPASS_PROFILE) else self.port.queues.w_q

    @property
    def credit_rate_bps(self) -> float:
        """Credit limit in wire bits/s: w_q · C · credit / (credit + max_frame), with
        max_frame = max_frame_wire(credit.mtu) (``frames.credit_queue_bps`` for a
        minimum credit)."""
        c, f = self.config.credit_wire_bytes, self.config.max_frame_bytes
        return self.effective_w_q * self.port.link_rate_bps * c / (c + f)

    @property
    def credits_per_second(self) -> float:
        return self.credit_rate_bps / (8 * self.config.credit_wire_bytes)

    @property
    def credit_bmv2_bytes(self) -> int:
        """A minimum credit as BMv2 counts it (no preamble, IFG or FCS): 84 -> 60."""
        return self.config.credit_wire_bytes - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2

    @property
    def is_tofino(self) -> bool:
        return self.switch.target in TOFINO_CHIPS

    @property
    def credit_meter_bytes(self) -> int:
        """A minimum credit as the target's byte meter counts it: BMv2 without
        preamble, IFG and FCS (84 -> 60), Tofino with the FCS (84 -> 64)."""
        if self.is_tofino:
            return self.config.credit_wire_bytes - WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO
        return self.credit_bmv2_bytes

    @property
    def meter_cir_bytes_per_s(self) -> int:
        """Credit meter CIR (= PIR): the credit rate in the bytes the target's
        meter counts (P4Runtime MeterConfig.cir for BMv2)."""
        return max(1, int(round(self.credits_per_second * self.credit_meter_bytes)))

    @property
    def meter_burst_bytes(self) -> int:
        """Credit meter burst (cburst = pburst): ``credit_meter_burst_packets`` credits
        (two, ExpressPass §3.1, unless configured); FlashPass:
        the emulation queue's depth, so that the queue (shaped at the same rate) and its
        threshold, not the meter, decide which emulation packets are dropped."""
        if self.switch.profile == FLASHPASS_PROFILE:
            return self.port.queues.credit_queue_packets * self.credit_meter_bytes
        return self.port.queues.credit_meter_burst_packets * self.credit_meter_bytes

    def packets(self, nbytes: int) -> int:
        """Bytes -> BMv2 queue-depth packets, rounded up."""
        return int(math.ceil(nbytes / self.config.max_frame_bytes))

    def qdepth(self, nbytes: int) -> int:
        """A byte threshold in the target's enq_qdepth units (module docstring)."""
        if self.switch.target == "flexpass_switch":
            return min(nbytes, NO_THRESHOLD)
        if self.is_tofino:
            return min(self.cells(nbytes), NO_THRESHOLD)
        return self.packets(nbytes)

    def frame_qdepth(self, frame_bytes: int) -> int:
        """enq_qdepth units one frame (as sent, without FCS) adds to its queue:
        BMv2 1 packet, flexpass_switch its bytes, Tofino the cells of frame +
        FCS + the bridged header."""
        if self.switch.target == "flexpass_switch":
            return frame_bytes
        if self.is_tofino:
            return self.cells(frame_bytes + FCS_BYTES + TOFINO_BRIDGED_BYTES)
        return 1

    @property
    def ecn_threshold_qdepth(self) -> int:
        return self.qdepth(self.port.queues.ecn_threshold_bytes)

    @property
    def red_threshold_qdepth(self) -> int:
        """P4 egress red threshold; the flexpass_switch and Tofino TMs drop red at admission."""
        if self.switch.target == "flexpass_switch" or self.is_tofino:
            return NO_THRESHOLD
        return self.packets(self.port.queues.red_threshold_bytes)

    @property
    def legacy_ecn_threshold_qdepth(self) -> Optional[int]:
        b = self.port.queues.legacy_ecn_threshold_bytes
        return None if b is None else self.qdepth(b)

    @property
    def data_queue_depth_pkts(self) -> int:
        return self.packets(self.port.queues.buffer_bytes)

    @property
    def legacy_rate_pps(self) -> Optional[int]:
        """BMv2 rate cap of the legacy queue, (1 - w_q)·C in full-size frames/s
        (FlexPass profile only; None: uncapped)."""
        if self.switch.profile != "flexpass":
            return None
        return max(1, int(round((1 - self.port.queues.w_q) * self.port.link_rate_bps
                                / (8 * self.config.max_frame_bytes))))

    @property
    def line_rate_pps(self) -> int:
        return max(1, int(round(self.port.link_rate_bps / (8 * self.config.max_frame_bytes))))

    def qid(self, logical_queue: str) -> int:
        return self.config.bmv2_priority[logical_queue]

    @property
    def credit_buffer_bytes(self) -> int:
        """TM credit queue buffer: credit_queue_packets of the largest credit, in BMv2 bytes."""
        return self.port.queues.credit_queue_packets * (MAX_CREDIT_WIRE_BYTES - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2)

    # ---- FlashPass (profile: flashpass) ------------------------------------

    @property
    def emulation_bmv2_bytes(self) -> int:
        """An EMULATION frame as BMv2 and flexpass_switch count it: 84 wire bytes - 24 = 60."""
        return frames.CREDIT_WIRE - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2

    @property
    def emulation_pps(self) -> int:
        """Emulation packets/s of the port: C·84/(84 + max frame) in 84-byte packets
        (stock BMv2 shapes the emulation queue in packets/s)."""
        return max(1, int(round(self.credits_per_second)))

    def flashpass_thresholds(self) -> Dict[int, Tuple[int, int]]:
        """qid -> (ecn_threshold, red_threshold) of the P4 egress (``queue_thresholds``)
        in the target's enq_qdepth units: above the emulation threshold ECT emulation
        packets are marked and red (Not-ECT) ones dropped; red (unscheduled) data above
        the unscheduled threshold.  enq_qdepth excludes the packet itself, so "n packets
        queued" is depth > n - 1 packets (BMv2) or > n·frame - 1 bytes (flexpass_switch,
        which drops red at admission: no red threshold here)."""
        fp = self.config.flashpass
        e = fp.emulation_threshold_packets
        u = fp.unscheduled_threshold_packets
        if self.switch.target == "flexpass_switch":
            return {self.qid("credit"): (e * self.emulation_bmv2_bytes - 1, NO_THRESHOLD),
                    self.qid("flexpass"): (NO_THRESHOLD, NO_THRESHOLD)}
        if self.is_tofino:
            # Cells; red emulation packets are the TM's (colour drop limit at admission),
            # red data the egress's: 12.5 % steps of a full buffer cannot say 2 frames.
            return {self.qid("credit"): (e * self.emulation_cells - 1, NO_THRESHOLD),
                    self.qid("flexpass"): (NO_THRESHOLD, u * self.data_frame_cells - 1)}
        return {self.qid("credit"): (e - 1, e - 1), self.qid("flexpass"): (NO_THRESHOLD, u - 1)}

    @property
    def emulation_cells(self) -> int:
        """Tofino cells of one EMULATION frame (84 wire bytes: 1 cell of 80 or 176)."""
        return self.frame_qdepth(frames.CREDIT_WIRE - WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO - FCS_BYTES)

    @property
    def data_frame_cells(self) -> int:
        """Tofino cells of one maximum data frame."""
        return self.frame_qdepth(self.config.max_frame_bytes - WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO - FCS_BYTES)

    def flashpass_tm_port(self) -> "TmPort":
        """flexpass_switch TM of a FlashPass port (§III-B, §IV-A): the emulation queue at
        strict priority, shaped to C·84/(84 + max frame), ``credit_queue_packets``
        emulation frames deep, red (Not-ECT) arrivals dropped once the threshold's
        packets are queued, ECT ones marked; one data queue with the port's buffer and
        red (unscheduled) data dropped above its threshold."""
        q, fp = self.port.queues, self.config.flashpass
        emu = self.emulation_bmv2_bytes
        emulation = TmQueue(self.qid("credit"), priority=1, weight=1.0,
                            buffer_bytes=q.credit_queue_packets * emu,
                            shaper_rate_bps=self.credit_rate_bps,
                            shaper_burst_bytes=2 * self.config.credit_wire_bytes,
                            red_threshold=fp.emulation_threshold_packets * emu,
                            ecn_threshold=fp.emulation_threshold_packets * emu - 1)
        frame = self.config.max_frame_bytes - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2
        data = TmQueue(self.qid("flexpass"), priority=0, weight=1.0, buffer_bytes=q.buffer_bytes,
                       red_threshold=fp.unscheduled_threshold_packets * frame)
        return TmPort(self.port.port, self.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
                      (emulation, data))

    def tm_port(self) -> "TmPort":
        """flexpass_switch traffic-manager settings of this port (FlexPass §4.1):
        credits strict priority, shaped to credit_rate_bps with a 2-credit burst and
        a credit_queue_packets (8) buffer; Q1/Q2 DWRR w_q : 1 - w_q; red admission at
        the red threshold on Q1; ECN K reported per queue.  The naive profile shares one data
        queue and shapes credits for the whole link.  PPT: :meth:`ppt_tm_port`."""
        if self.switch.profile == PPT_PROFILE:
            return self.ppt_tm_port()
        if self.switch.profile == FLASHPASS_PROFILE:
            return self.flashpass_tm_port()
        q = self.port.queues
        credit = TmQueue(self.qid("credit"), priority=1, weight=1.0,
                         buffer_bytes=self.credit_buffer_bytes,
                         shaper_rate_bps=self.credit_rate_bps,
                         shaper_burst_bytes=2 * self.config.credit_wire_bytes)
        naive = self.switch.profile == "expresspass_naive"
        flexpass = TmQueue(self.qid("flexpass"), priority=0, weight=1.0 if naive else q.w_q,
                           buffer_bytes=q.buffer_bytes,
                           red_threshold=None if naive else q.red_threshold_bytes,
                           ecn_threshold=None if naive else q.ecn_threshold_bytes)
        legacy = TmQueue(self.qid("legacy"), priority=0, weight=1.0 if naive else 1 - q.w_q,
                         buffer_bytes=q.buffer_bytes, ecn_threshold=q.legacy_ecn_threshold_bytes)
        return TmPort(self.port.port, self.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
                      (credit, flexpass, legacy))

    # ---- PPT (profile: ppt) -------------------------------------------------

    def ppt_ecn_threshold_bytes(self, level: int) -> int:
        """K of PPT priority P<level> in bytes: the configured K of its half, else
        λ·C·RTT (PPT Eq. 3) with λ_HCP for P0-P3 and λ_LCP for P4-P7, at least 1 B."""
        p = self.config.ppt
        lcp = PptPriority(level).is_lcp
        fixed = p.ecn_threshold_lcp_bytes if lcp else p.ecn_threshold_hcp_bytes
        if fixed is not None:
            return fixed
        lam = p.lambda_lcp if lcp else p.lambda_hcp
        return max(1, int(round(lam * self.port.link_rate_bps / 8 * p.base_rtt_us * 1e-6)))

    def ppt_tm_port(self) -> "TmPort":
        """flexpass_switch TM settings of a PPT port (SIGCOMM'24 §4.2, §6.2): eight
        strict-priority queues (P<p> in queue 7 - p at level 7 - p, served first when
        higher), sharing the port's buffer (``buffer``: one limit on the sum of the
        queues, each queue may use all of it); ECN K per queue reported by the TM
        (the P4 egress marks, from ``queue_thresholds``)."""
        buf = self.port.queues.buffer_bytes
        queues = tuple(TmQueue(ppt_qid(p), priority=ppt_qid(p), weight=1.0, buffer_bytes=buf,
                               ecn_threshold=self.ppt_ecn_threshold_bytes(p))
                       for p in range(PRIORITY_LEVELS))
        return TmPort(self.port.port, self.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
                      queues, shared_buffer_bytes=buf)

    # ---- Tofino (target: tofino / tofino2) --------------------------------

    @property
    def cell_bytes(self) -> int:
        """Tofino TM cell size (enq_qdepth and buffer unit)."""
        return TOFINO_CHIPS[self.switch.target][1]

    def cells(self, nbytes: int) -> int:
        """Bytes -> Tofino TM cells, rounded up."""
        return int(math.ceil(nbytes / self.cell_bytes))

    @staticmethod
    def kbps(bps: float) -> int:
        """bits/s -> the kbit/s of BfRt meters and TM shapers (at least 1)."""
        return max(1, int(round(bps / 1000)))

    @property
    def meter_cir_kbps(self) -> int:
        """BfRt $METER_SPEC_CIR_KBPS (= PIR) of the credit meter."""
        return self.kbps(8 * self.meter_cir_bytes_per_s)

    @property
    def meter_burst_kbits(self) -> int:
        """BfRt $METER_SPEC_CBS_KBITS (= PBS): the meter burst rounded UP to whole
        kbit (2 credits x 64 B = 1.024 kbit -> 2 kbit), BfRt's burst unit.  The TM
        shaper of the credit queue keeps the exact burst in bytes."""
        return max(1, int(math.ceil(8 * self.meter_burst_bytes / 1000)))

    @property
    def tofino_speed(self) -> Tuple[float, str]:
        """(bits/s, $SPEED) of the smallest port speed >= link_rate."""
        for bps, name in TOFINO_SPEEDS[self.switch.target]:
            if self.port.link_rate_bps <= bps:
                return bps, name
        raise ConfigError(f"switches.{self.switch.name}.ports.{self.port.port}.link_rate",
                          "faster than any port speed")  # parse_config rejects this first

    @property
    def tofino_red_limit(self) -> Tuple[float, int]:
        """(drop_limit_red %, guaranteed cells) of the FlexPass queue.

        Tofino expresses the red drop limit as a step of 12.5 % of the queue's
        guaranteed (green) limit.  The selective-drop threshold is kept exact
        (rounded up to a cell); the step is the one whose queue limit
        red / step is closest to the configured buffer."""
        q = self.port.queues
        red, buf = self.cells(q.red_threshold_bytes), self.cells(q.buffer_bytes)
        pct = min(TOFINO_COLOR_LIMITS, key=lambda p: (abs(red * 100 / p - buf), -p))
        return pct, int(math.ceil(red * 100 / pct))

    @staticmethod
    def dwrr_weight(weight: float) -> int:
        """A DWRR share in (0, 1] -> Tofino queue weight 1..1023."""
        return max(1, min(TOFINO_MAX_DWRR_WEIGHT, int(round(weight * TOFINO_MAX_DWRR_WEIGHT))))

    def tofino_port(self) -> "TofinoPort":
        """Traffic-manager settings of this Tofino port: the tm_port() design
        (FlexPass §4.1) in Tofino's units.  Credits at scheduling priority 7,
        shaped (max rate) to credit_rate_bps with a 2-credit burst, buffer of
        credit_queue_packets credits; Q1/Q2 at priority 0 under DWRR
        w_q : 1 - w_q; Q1's red colour drop limit at the selective-drop
        threshold (tofino_red_limit); a port slower than its speed is shaped to
        link_rate."""
        if self.switch.profile == PPT_PROFILE:
            return self.ppt_tofino_port()
        if self.switch.profile == FLASHPASS_PROFILE:
            return self.flashpass_tofino_port()
        tm = self.tm_port()
        queues = []
        for role, q in zip(LOGICAL_QUEUES, tm.queues):
            red_pct = None
            if role == "credit":
                # Each credit takes whole cells: 92 wire bytes -> 73 stored -> 1 cell.
                cells = self.port.queues.credit_queue_packets * self.frame_qdepth(
                    MAX_CREDIT_WIRE_BYTES - WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO - FCS_BYTES)
            elif q.red_threshold is not None:
                red_pct, cells = self.tofino_red_limit
            else:
                cells = self.cells(q.buffer_bytes)
            queues.append(TofinoQueue(
                role, q.queue, max_priority=7 if q.priority else 0,
                dwrr_weight=self.dwrr_weight(q.weight), guaranteed_cells=cells,
                red_limit_percent=red_pct,
                shaper_kbps=None if q.shaper_rate_bps is None else self.kbps(q.shaper_rate_bps),
                shaper_burst_bytes=q.shaper_burst_bytes))
        return self._tofino_port(tuple(queues))

    def ppt_tofino_port(self) -> "TofinoPort":
        """A PPT port on Tofino (SIGCOMM'24 §4.2, §6.2; ppt_tm_port() in Tofino's units):
        eight queues at strict priorities, P<p> in qid 7 - p at scheduling priority 7 - p
        (higher first). The port's buffer is one egress limit on the sum of its queues
        (tfN.tm.port.buffer eg_limit_cells); each queue is guaranteed one maximum frame
        and takes the rest from the shared pool, so any queue may fill the port's buffer
        (guaranteed cells are reserved: eight full buffers per port would not fit the
        TM). ECN K per queue is the P4 egress's (queue_thresholds); nothing is red."""
        queues = tuple(TofinoQueue(f"P{p}", ppt_qid(p), max_priority=ppt_qid(p),
                                   dwrr_weight=self.dwrr_weight(1.0), guaranteed_cells=self.data_frame_cells)
                       for p in range(PRIORITY_LEVELS))
        return self._tofino_port(queues, buffer_cells=self.cells(self.port.queues.buffer_bytes))

    def flashpass_tofino_port(self) -> "TofinoPort":
        """A FlashPass port on Tofino (flashpass_tm_port() in Tofino's units): the emulation
        queue at strict priority 7, shaped to C·84/(84 + max frame) with a 2-packet burst,
        ``credit_queue_packets`` emulation frames deep, red (Not-ECT, ``ecn_color``)
        arrivals dropped by the colour drop limit once the emulation threshold's packets
        are queued (2 of 8: 25 %, a step of 12.5 %); one data queue with the port's buffer
        (its red, unscheduled data is dropped by the egress, flashpass_thresholds)."""
        q, fp = self.port.queues, self.config.flashpass
        red_pct = 100.0 * fp.emulation_threshold_packets / q.credit_queue_packets
        if red_pct not in TOFINO_COLOR_LIMITS:
            raise ConfigError("flashpass.emulation_threshold_packets",
                              f"{fp.emulation_threshold_packets} of credit_queue_packets "
                              f"{q.credit_queue_packets} is {red_pct:g} %; a Tofino colour drop limit "
                              f"is one of {', '.join(f'{p:g}' for p in TOFINO_COLOR_LIMITS)} %")
        emulation = TofinoQueue(
            "credit", self.qid("credit"), max_priority=7, dwrr_weight=self.dwrr_weight(1.0),
            guaranteed_cells=q.credit_queue_packets * self.emulation_cells, red_limit_percent=red_pct,
            shaper_kbps=self.kbps(self.credit_rate_bps), shaper_burst_bytes=2 * self.config.credit_wire_bytes)
        data = TofinoQueue("flexpass", self.qid("flexpass"), max_priority=0,
                           dwrr_weight=self.dwrr_weight(1.0), guaranteed_cells=self.cells(q.buffer_bytes))
        return self._tofino_port((emulation, data))

    def _tofino_port(self, queues: Tuple["TofinoQueue", ...],
                     buffer_cells: Optional[int] = None) -> "TofinoPort":
        speed_bps, speed = self.tofino_speed
        shaped = self.port.link_rate_bps < speed_bps
        return TofinoPort(self.port.port, speed,
                          self.kbps(self.port.link_rate_bps) if shaped else None,
                          2 * self.config.max_frame_bytes if shaped else None,
                          queues, buffer_cells)

    def summary(self) -> Dict[str, Any]:
        return {
            "credit_rate_bps": self.credit_rate_bps,
            "credits_per_second": self.credits_per_second,
            "meter_cir_bytes_per_s": self.meter_cir_bytes_per_s,
            "meter_burst_bytes": self.meter_burst_bytes,
            "ecn_threshold_qdepth": self.ecn_threshold_qdepth,
            "red_threshold_qdepth": self.red_threshold_qdepth,
            "legacy_ecn_threshold_qdepth": self.legacy_ecn_threshold_qdepth,
            "data_queue_depth_pkts": self.data_queue_depth_pkts,
            "legacy_rate_pps": self.legacy_rate_pps,
        }


@dataclass(frozen=True)
class TmQueue:
    """One queue of the flexpass_switch traffic manager (docs/tm-api.md, set_queue)."""

    queue: int
    priority: int
    weight: float
    buffer_bytes: int
    red_threshold: Optional[int] = None
    ecn_threshold: Optional[int] = None
    shaper_rate_bps: Optional[float] = None
    shaper_burst_bytes: Optional[int] = None


@dataclass(frozen=True)
class TmPort:
    """A port of the flexpass_switch traffic manager (docs/tm-api.md, set_port)."""

    port: int
    link_rate_bps: float
    wire_overhead_bytes: int
    queues: Tuple[TmQueue, ...]
    shared_buffer_bytes: Optional[int] = None  # limit on the sum of the queues (None: none)


@dataclass(frozen=True)
class TofinoQueue:
    """One queue of a Tofino port in TM units (bfrt_ops writes it to tfN.tm.queue.*)."""

    role: str  # credit / flexpass / legacy (LOGICAL_QUEUES), or P0..P7 (profile ppt)
    qid: int  # ingress queue id (ig_tm_md.qid), from the config's queue indexes
    max_priority: int  # 0..7, higher is served first
    dwrr_weight: int  # 1..1023, among queues of the same priority
    guaranteed_cells: int  # queue limit (and base of the colour limits)
    red_limit_percent: Optional[float] = None  # red colour drop limit, % of guaranteed_cells
    shaper_kbps: Optional[int] = None  # max-rate shaper
    shaper_burst_bytes: Optional[int] = None


@dataclass(frozen=True)
class TofinoPort:
    """A Tofino port: $PORT speed, optional port shaper, its queues."""

    port: int  # dev_port
    speed: str  # BF_SPEED_*
    shaper_kbps: Optional[int]  # link_rate when below the port speed
    shaper_burst_bytes: Optional[int]
    queues: Tuple[TofinoQueue, ...]
    buffer_cells: Optional[int] = None  # egress limit on the sum of the port's queues (ppt)


def tofino_settings(cfg: "Config", switch: str) -> List[TofinoPort]:
    """Tofino traffic-manager settings of every port (pure)."""
    sw = cfg.switch(switch)
    return [Derived(cfg, sw, sw.ports[p]).tofino_port() for p in sorted(sw.ports)]


def tm_settings(cfg: "Config", switch: str) -> List[TmPort]:
    """Traffic-manager settings of every port of a flexpass_switch (pure)."""
    sw = cfg.switch(switch)
    return [Derived(cfg, sw, sw.ports[p]).tm_port() for p in sorted(sw.ports)]


# --------------------------------------------------------------------------
# Parsing / validation
# --------------------------------------------------------------------------


def _mapping(value: Any, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
    return value


def _check_keys(m: Mapping, path: str, allowed: Sequence[str], required: Sequence[str] = ()) -> None:
    for k in m:
        if k not in allowed:
            raise ConfigError(_join(path, k), f"unknown field (allowed: {', '.join(allowed)})")
    for k in required:
        if k not in m:
            raise ConfigError(_join(path, k), "required field is missing")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _int(value: Any, path: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"must be an integer, got {value!r}")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ConfigError(path, f"must be in {lo}..{hi}, got {value}")
    return value


_QUEUE_FIELDS = ("w_q", "ecn_threshold", "red_threshold", "legacy_ecn_threshold",
                 "buffer", "credit_queue_packets", "credit_meter_burst_packets")


#: FlexPass queue fields a PPT or FlashPass switch does not use; a port of those
#: profiles may omit them (the FlexPass testbed values fill them, unused).  A PPT port
#: uses ``buffer`` only, a FlashPass port ``buffer`` and ``credit_queue_packets``.
_PPT_UNUSED_DEFAULTS = {"w_q": 0.5, "ecn_threshold": "60KB", "red_threshold": "100KB"}


def _queue_params(raw: Mapping, path: str, flexpass_fields_unused: bool = False) -> QueueParams:
    if flexpass_fields_unused:
        raw = {**_PPT_UNUSED_DEFAULTS, **raw}
    _check_keys(raw, path, _QUEUE_FIELDS, required=("w_q", "ecn_threshold", "red_threshold"))
    w_q = raw["w_q"]
    if not _is_number(w_q) or not 0 < float(w_q) < 1:
        raise ConfigError(_join(path, "w_q"), f"must be a number in the open interval (0, 1), got {w_q!r}")
    k = parse_size(raw["ecn_threshold"], _join(path, "ecn_threshold"))
    red = parse_size(raw["red_threshold"], _join(path, "red_threshold"))
    if red <= k:
        raise ConfigError(_join(path, "red_threshold"),
                          f"must be greater than ecn_threshold ({k} B), got {red} B "
                          "(FlexPass §5: the selective-drop threshold is above K)")
    legacy_k = raw.get("legacy_ecn_threshold")
    legacy_k = None if legacy_k is None else parse_size(legacy_k, _join(path, "legacy_ecn_threshold"))
    buf = parse_size(raw.get("buffer", "300KB"), _join(path, "buffer"))
    if buf < red and not flexpass_fields_unused:
        raise ConfigError(_join(path, "buffer"),
                          f"must be at least red_threshold ({red} B), got {buf} B")
    cq = _int(raw.get("credit_queue_packets", 8), _join(path, "credit_queue_packets"), 1, 1024)
    cb = _int(raw.get("credit_meter_burst_packets", 2), _join(path, "credit_meter_burst_packets"), 1, 64)
    return QueueParams(float(w_q), k, red, legacy_k, buf, cq, cb)


def _ppt_params(raw: Any) -> PptParams:
    raw = _mapping(raw, "ppt")
    _check_keys(raw, "ppt", ("base_rtt_us", "lambda_hcp", "lambda_lcp", "ecn_threshold_hcp", "ecn_threshold_lcp"))
    d = PptParams()
    rtt = raw.get("base_rtt_us", d.base_rtt_us)
    if not _is_number(rtt) or not math.isfinite(rtt) or rtt <= 0:
        raise ConfigError("ppt.base_rtt_us", f"must be a number of µs > 0, got {rtt!r}")
    lam = {}
    for k in ("lambda_hcp", "lambda_lcp"):
        v = raw.get(k, getattr(d, k))
        if not _is_number(v) or not 0 < float(v) <= 1:
            raise ConfigError(_join("ppt", k), f"must be a number in (0, 1] (PPT Eq. 3: K = λ·C·RTT), got {v!r}")
        lam[k] = float(v)
    ks = {k: None if raw.get(k) is None else parse_size(raw[k], _join("ppt", k))
          for k in ("ecn_threshold_hcp", "ecn_threshold_lcp")}
    return PptParams(float(rtt), lam["lambda_hcp"], lam["lambda_lcp"], ks["ecn_threshold_hcp"], ks["ecn_threshold_lcp"])


def _flashpass_params(raw: Any) -> FlashPassParams:
    raw = _mapping(raw, "flashpass")
    keys = ("emulation_threshold_packets", "unscheduled_threshold_packets")
    _check_keys(raw, "flashpass", keys)
    d = FlashPassParams()
    return FlashPassParams(*(_int(raw.get(k, getattr(d, k)), _join("flashpass", k), 1, 1024) for k in keys))


def parse_config(raw: Any, source: str = "<config>") -> Config:
    """Validate a config already loaded from YAML/JSON into Python objects."""
    raw = _mapping(raw, "")
    _check_keys(raw, "", ("credit", "dscp", "bmv2", "port_defaults", "switches", "down_links", "ppt",
                          "flashpass"),
                required=("switches",))

    credit = _mapping(raw.get("credit", {}), "credit")
    _check_keys(credit, "credit", ("wire_bytes", "max_frame_bytes", "mtu"))
    cw = parse_size(credit.get("wire_bytes", 84), "credit.wire_bytes")
    if not 84 <= cw <= 92:
        raise ConfigError("credit.wire_bytes", f"must be 84..92 (a CREDIT frame on the wire), got {cw}")
    # The maximum frame comes from the links' MTU (docs/protocol.md §9): mtu + 38. An
    # explicit max_frame_bytes must agree with it; without an MTU it stands alone.
    mtu: Optional[int] = None
    if "mtu" in credit or "max_frame_bytes" not in credit:
        mtu = _int(credit.get("mtu", frames.DEFAULT_MTU), "credit.mtu", frames.MIN_MTU, frames.MAX_MTU)
    if "max_frame_bytes" in credit:
        mf = parse_size(credit["max_frame_bytes"], "credit.max_frame_bytes")
        if mf < 84:
            raise ConfigError("credit.max_frame_bytes", f"must be at least 84, got {mf}")
        if mtu is not None and mf != frames.max_frame_wire(mtu):
            raise ConfigError("credit.max_frame_bytes",
                              f"must be the maximum frame of credit.mtu {mtu}: "
                              f"{frames.max_frame_wire(mtu)} (mtu + 38), got {mf}")
        if mtu is None and frames.MIN_MTU <= mf - frames.ETHERNET_WIRE_OVERHEAD <= frames.MAX_MTU:
            mtu = mf - frames.ETHERNET_WIRE_OVERHEAD
    else:
        mf = frames.max_frame_wire(mtu)

    dscp_raw = _mapping(raw.get("dscp", {}), "dscp")
    names = [c.value for c in TrafficClass]
    for k in dscp_raw:
        if k not in names + ["priority"]:
            raise ConfigError(_join("dscp", k), f"unknown DSCP class (classes: {', '.join(names)})")
    seen: Dict[int, str] = {}
    values = {}
    for cls in TrafficClass:
        v = dscp_raw.get(cls.value, getattr(DscpPlan(), cls.value))
        _int(v, _join("dscp", cls.value), 0, 63)
        if v in seen:
            raise ConfigError(_join("dscp", cls.value),
                              f"DSCP {v} is already used by {seen[v]}; values must be distinct")
        seen[v] = cls.value
        values[cls.value] = v
    prio_dscp = dscp_raw.get("priority", list(DscpPlan().priority))
    if not isinstance(prio_dscp, list) or len(prio_dscp) != PRIORITY_LEVELS:
        raise ConfigError("dscp.priority", f"must list {PRIORITY_LEVELS} DSCPs (P0..P7), got {prio_dscp!r}")
    for i, v in enumerate(prio_dscp):
        _int(v, f"dscp.priority[{i}]", 0, 63)
        if v in seen:
            raise ConfigError(f"dscp.priority[{i}]", f"DSCP {v} is already used by {seen[v]}; values must be distinct")
        seen[v] = f"priority P{i}"
    plan = DscpPlan(**values, priority=tuple(prio_dscp))
    plan.validate()
    ppt = _ppt_params(raw.get("ppt", {}))
    flashpass = _flashpass_params(raw.get("flashpass", {}))

    bmv2 = _mapping(raw.get("bmv2", {}), "bmv2")
    _check_keys(bmv2, "bmv2", ("priority",))
    prio_raw = _mapping(bmv2.get("priority", {}), "bmv2.priority")
    _check_keys(prio_raw, "bmv2.priority", LOGICAL_QUEUES)
    prio = dict(DEFAULT_BMV2_PRIORITY)
    for q, v in prio_raw.items():
        prio[q] = _int(v, _join("bmv2.priority", q), 0, QUEUES_PER_PORT - 1)
    if len(set(prio.values())) != len(prio):
        raise ConfigError("bmv2.priority", f"queues must use distinct priorities, got {prio}")

    defaults = _mapping(raw.get("port_defaults", {}), "port_defaults")
    _check_keys(defaults, "port_defaults", _QUEUE_FIELDS)

    switches_raw = _mapping(raw["switches"], "switches")
    if not switches_raw:
        raise ConfigError("switches", "at least one switch is required")
    switches = {}
    for sname, sraw in switches_raw.items():
        switches[str(sname)] = _parse_switch(str(sname), sraw, defaults)
    cfg = Config(cw, mf, plan, prio, switches, source, mtu=mtu, ppt=ppt, flashpass=flashpass)
    down = raw.get("down_links", [])
    if not isinstance(down, list):
        raise ConfigError("down_links", "must be a list of links like 'leaf1:3' or 'leaf1:spine1'")
    return with_down_links(cfg, down, "down_links")


def _parse_switch(name: str, raw: Any, defaults: Mapping) -> SwitchConfig:
    path = f"switches.{name}"
    raw = _mapping(raw, path)
    _check_keys(raw, path, ("device_id", "grpc_addr", "thrift_port", "profile", "ports",
                            "next_hops", "ecmp_groups", "routes", "target", "tm_port"),
                required=("ports",))
    device_id = _int(raw.get("device_id", 0), _join(path, "device_id"), 0, 2**64 - 1)
    target = raw.get("target", "simple_switch")
    if target not in TARGETS:
        raise ConfigError(_join(path, "target"), f"unknown target {target!r} (targets: {', '.join(TARGETS)})")
    # P4Runtime (BMv2) listens on 9559, the BfRt gRPC server of bf_switchd on 50052.
    grpc_addr = raw.get("grpc_addr", "127.0.0.1:50052" if target in TOFINO_CHIPS else "127.0.0.1:9559")
    if not isinstance(grpc_addr, str) or ":" not in grpc_addr:
        raise ConfigError(_join(path, "grpc_addr"), f"must be 'host:port', got {grpc_addr!r}")
    thrift_port = _int(raw.get("thrift_port", 9090), _join(path, "thrift_port"), 1, 65535)
    profile = raw.get("profile", "flexpass")
    if profile not in PROFILES and profile != PPT_PROFILE:
        raise ConfigError(_join(path, "profile"), f"unknown profile {profile!r} "
                                                  f"(profiles: {', '.join(tuple(PROFILES) + (PPT_PROFILE,))})")
    tm_port = _int(raw.get("tm_port", 9191), _join(path, "tm_port"), 1, 65535)

    ports_raw = _mapping(raw["ports"], _join(path, "ports"))
    if not ports_raw:
        raise ConfigError(_join(path, "ports"), "at least one port is required")
    ports: Dict[int, PortConfig] = {}
    for pkey, praw in ports_raw.items():
        ppath = _join(_join(path, "ports"), pkey)
        port = _int(pkey, ppath, 0, MAX_PORTS - 1) if not isinstance(pkey, str) or not pkey.isdigit() \
            else _int(int(pkey), ppath, 0, MAX_PORTS - 1)
        praw = _mapping(praw, ppath)
        _check_keys(praw, ppath, ("name", "link_rate", "mac") + _QUEUE_FIELDS,
                    required=("link_rate", "mac"))
        rate = parse_rate(praw["link_rate"], _join(ppath, "link_rate"))
        if target in TOFINO_CHIPS and rate > TOFINO_SPEEDS[target][-1][0]:
            raise ConfigError(_join(ppath, "link_rate"),
                              f"{target} ports run at most {TOFINO_SPEEDS[target][-1][1][9:]}bps, "
                              f"got {praw['link_rate']!r}")
        mac = _mac(praw["mac"], _join(ppath, "mac"))
        qraw = dict(defaults)
        qraw.update({k: v for k, v in praw.items() if k in _QUEUE_FIELDS})
        # Errors in inherited fields point at the port (the effective value).
        qp = _queue_params(qraw, ppath, flexpass_fields_unused=profile in (PPT_PROFILE, FLASHPASS_PROFILE))
        pname = praw.get("name", f"port{port}")
        if not isinstance(pname, str):
            raise ConfigError(_join(ppath, "name"), f"must be a string, got {pname!r}")
        if port in ports:
            raise ConfigError(ppath, "duplicate port")
        ports[port] = PortConfig(port, pname, rate, mac, qp)

    nh_raw = _mapping(raw.get("next_hops", {}), _join(path, "next_hops"))
    next_hops: Dict[str, NextHop] = {}
    for nname, nraw in nh_raw.items():
        npath = _join(_join(path, "next_hops"), nname)
        nraw = _mapping(nraw, npath)
        _check_keys(nraw, npath, ("ip", "port", "dmac"), required=("ip", "port", "dmac"))
        try:
            ip = ipaddress.IPv4Address(nraw["ip"])
        except (ipaddress.AddressValueError, ValueError):
            raise ConfigError(_join(npath, "ip"), f"must be an IPv4 address, got {nraw['ip']!r}") from None
        nport = _int(nraw["port"], _join(npath, "port"), 0, MAX_PORTS - 1)
        if nport not in ports:
            raise ConfigError(_join(npath, "port"),
                              f"port {nport} is not configured on {name} (ports: {sorted(ports)})")
        next_hops[str(nname)] = NextHop(str(nname), ip, nport, _mac(nraw["dmac"], _join(npath, "dmac")))
    seen_nh: Dict[Tuple, str] = {}
    for nh in next_hops.values():
        k = (nh.port, nh.dmac)
        if k in seen_nh:
            raise ConfigError(_join(_join(path, "next_hops"), nh.name),
                              f"same port and dmac as next hop {seen_nh[k]!r}")
        seen_nh[k] = nh.name

    g_raw = _mapping(raw.get("ecmp_groups", {}), _join(path, "ecmp_groups"))
    groups: Dict[str, Tuple[str, ...]] = {}
    for gname, members in g_raw.items():
        gpath = _join(_join(path, "ecmp_groups"), gname)
        if not isinstance(members, list) or not members:
            raise ConfigError(gpath, "must be a non-empty list of next-hop names")
        if len(members) > ECMP_MAX_GROUP_SIZE:
            raise ConfigError(gpath, f"at most {ECMP_MAX_GROUP_SIZE} members (@max_group_size), got {len(members)}")
        for i, m in enumerate(members):
            if m not in next_hops:
                raise ConfigError(f"{gpath}[{i}]", f"unknown next hop {m!r} (next hops: {', '.join(sorted(next_hops)) or 'none'})")
        if len(set(members)) != len(members):
            raise ConfigError(gpath, "duplicate member")
        # Deterministic member order: sorted by next hop (address).
        groups[str(gname)] = tuple(sorted(members, key=lambda m: next_hops[m].sort_key))

    r_raw = raw.get("routes", [])
    if not isinstance(r_raw, list):
        raise ConfigError(_join(path, "routes"), "must be a list")
    routes: List[Route] = []
    seen_prefix: Dict[ipaddress.IPv4Network, int] = {}
    for i, rraw in enumerate(r_raw):
        rpath = f"{path}.routes[{i}]"
        rraw = _mapping(rraw, rpath)
        _check_keys(rraw, rpath, ("prefix", "next_hop", "ecmp_group", "port"), required=("prefix",))
        try:
            prefix = ipaddress.IPv4Network(rraw["prefix"], strict=True)
        except ValueError as e:
            raise ConfigError(_join(rpath, "prefix"), f"must be an IPv4 prefix like 10.0.0.0/24: {e}") from None
        targets = [k for k in ("next_hop", "ecmp_group", "port") if k in rraw]
        if len(targets) != 1:
            raise ConfigError(rpath, "needs exactly one of next_hop, ecmp_group")
        if "port" in rraw:
            raise ConfigError(_join(rpath, "port"),
                              f"routes point to a next_hop (which names port and dmac), not a port; "
                              f"port {rraw['port']!r} " + ("is not configured" if rraw['port'] not in ports else "needs a next_hop"))
        if "next_hop" in rraw and rraw["next_hop"] not in next_hops:
            raise ConfigError(_join(rpath, "next_hop"), f"unknown next hop {rraw['next_hop']!r}")
        if "ecmp_group" in rraw and rraw["ecmp_group"] not in groups:
            raise ConfigError(_join(rpath, "ecmp_group"), f"unknown ECMP group {rraw['ecmp_group']!r}")
        if prefix in seen_prefix:
            raise ConfigError(_join(rpath, "prefix"), f"duplicate of routes[{seen_prefix[prefix]}]")
        seen_prefix[prefix] = i
        routes.append(Route(prefix, rraw.get("next_hop"), rraw.get("ecmp_group")))

    return SwitchConfig(name, device_id, grpc_addr, thrift_port, profile, ports, next_hops,
                        groups, tuple(routes), target, tm_port)


def load_config(path: Union[str, Path]) -> Config:
    """Read and validate a YAML config file."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError("", f"cannot read config {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError("", f"{p}: not valid YAML: {e}") from None
    try:
        return parse_config(raw, str(p))
    except ConfigError as e:
        raise ConfigError(e.path, f"{e.message} (in {p})") from None


# --------------------------------------------------------------------------
# Links out of service and reachability (pure)
# --------------------------------------------------------------------------
#
# The fabric is not described separately: a next hop whose dmac is another
# switch's port MAC is a link to that port (switch-to-switch), any other next
# hop leads to a host.  A link taken down removes, on EVERY switch, the next hops
# that cross it or that lead to a switch which can no longer reach the
# destination: leaf2's group towards a host behind leaf1 drops spine1 when the
# leaf1-spine1 link fails, exactly as leaf1's group towards leaf2's hosts does,
# so both directions of a flow keep hashing to the same spine (ExpressPass
# §3.1).  Remaining members keep their deterministic (next-hop address) order,
# group and member ids do not change (a group shrinks by a MODIFY), and a route
# left with no usable next hop is withdrawn (the program counts "no route").


def _port_at_mac(cfg: Config) -> Dict[str, Tuple[str, int]]:
    return {p.mac: (s.name, p.port) for s in cfg.switches.values() for p in s.ports.values()}


def link_peer(cfg: Config, switch: str, port: int) -> Optional[Tuple[str, int]]:
    """The (switch, port) at the other end of `switch`'s `port`, when it is a
    switch of the config (found through the next hops' MAC addresses)."""
    at_mac = _port_at_mac(cfg)
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


class _Reachability:
    """Which next hops of a switch still lead to a prefix, given cfg.down_ports."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.at_mac = _port_at_mac(cfg)
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
    return _Reachability(cfg).usable(switch, ipaddress.IPv4Network(prefix))


def forwarding(cfg: Config, switch: str) -> Forwarding:
    sw = cfg.switch(switch)
    mids, gids = member_ids(sw), group_ids(sw)
    reach = _Reachability(cfg) if cfg.down_ports else None
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


# --------------------------------------------------------------------------
# Config -> entities (pure)
# --------------------------------------------------------------------------


def member_ids(sw: SwitchConfig) -> Dict[str, int]:
    """Action-profile member id per next hop, 1.. in next-hop order."""
    ordered = sorted(sw.next_hops.values(), key=lambda n: n.sort_key)
    return {nh.name: i + 1 for i, nh in enumerate(ordered)}


def group_ids(sw: SwitchConfig) -> Dict[str, int]:
    return {g: i + 1 for i, g in enumerate(sorted(sw.ecmp_groups))}


def ppt_classifier_entries(cfg: Config) -> List[TableEntry]:
    """PPT: DSCP of P<p> -> queue 7 - p; every other class and unassigned DSCP -> the
    queue of P3 (docs/protocol.md §10).  Nothing is red; the kinds stay (credits of a
    FlexPass flow crossing a PPT switch are still metered where the meter is set)."""
    other = ppt_qid(PPT_OTHER_PRIORITY)
    out = [TableEntry(T_CLASSIFIER, (("dscp", cfg.dscp.dscp(p)),), "set_class",
                      {"qid": ppt_qid(p.level), "color": COLOR_GREEN, "kind": KIND[TrafficClass.LEGACY]})
           for p in PRIORITIES]
    for cls in TrafficClass:
        out.append(TableEntry(T_CLASSIFIER, (("dscp", cfg.dscp.dscp(cls)),), "set_class",
                              {"qid": other, "color": COLOR_GREEN, "kind": KIND[cls]}))
    out.append(TableEntry(T_CLASSIFIER, (), "set_class",
                          {"qid": other, "color": COLOR_GREEN, "kind": KIND[TrafficClass.LEGACY]},
                          is_default=True))
    return out


def classifier_entries(cfg: Config, sw: SwitchConfig) -> List[TableEntry]:
    if sw.profile == PPT_PROFILE:
        return ppt_classifier_entries(cfg)
    profile = PROFILES[sw.profile]
    out = []
    for cls in TrafficClass:
        queue, color = profile[cls]
        params = {"qid": cfg.bmv2_priority[queue], "color": color, "kind": KIND[cls]}
        out.append(TableEntry(T_CLASSIFIER, (("dscp", cfg.dscp.dscp(cls)),), "set_class", params))
    # Unassigned DSCP values: legacy (docs/protocol.md §10).
    lq, lc = profile[TrafficClass.LEGACY]
    out.append(TableEntry(T_CLASSIFIER, (), "set_class",
                          {"qid": cfg.bmv2_priority[lq], "color": lc, "kind": KIND[TrafficClass.LEGACY]},
                          is_default=True))
    return out


def flashpass_ecn_color_entries(cfg: Config, sw: SwitchConfig) -> List[TableEntry]:
    """``ecn_color`` (every target: v1model and TNA have it): profile flashpass colours a
    Not-ECT packet in the emulation (credit) queue red (FlashPass §III-C: an
    over-provisioned emulation packet, dropped first); every profile writes the default
    (keep the DSCP's colour), so the table is managed and a change of profile removes
    the entries."""
    out = []
    if sw.profile == FLASHPASS_PROFILE:
        out.append(TableEntry(T_ECN_COLOR, (("qid", cfg.bmv2_priority["credit"]), ("ecn", ECN_NOT_ECT)),
                              "set_color", {"color": COLOR_RED}))
    out.append(TableEntry(T_ECN_COLOR, (), "keep_color", {}, is_default=True))
    return out


def switch_entries(cfg: Config, switch: str) -> List[Entity]:
    """Every P4Runtime entity the switch should hold, in a deterministic order."""
    sw = cfg.switch(switch)
    out: List[Entity] = []
    out.extend(classifier_entries(cfg, sw))
    out.extend(flashpass_ecn_color_entries(cfg, sw))

    mids = member_ids(sw)
    for name, mid in sorted(mids.items(), key=lambda kv: kv[1]):
        nh = sw.next_hops[name]
        out.append(ActionProfileMember(AP_ECMP, mid, "set_nexthop",
                                       {"port": nh.port, "dmac": mac_to_int(nh.dmac)}))
    # Members stay even when their link is down: their ids (and BMv2 member
    # handles, whose order is the selector's member order) never change.
    fwd = forwarding(cfg, switch)
    for gid in sorted(fwd.groups):
        out.append(ActionProfileGroup(AP_ECMP, gid, fwd.groups[gid], ECMP_MAX_GROUP_SIZE))
    for r, mid, gid in fwd.routes:
        match = (("dst_addr", (int(r.prefix.network_address), r.prefix.prefixlen)),)
        if mid is not None:
            out.append(TableEntry(T_ROUTING, match, member_id=mid))
        else:
            out.append(TableEntry(T_ROUTING, match, group_id=gid))

    for port in sorted(sw.ports):
        d = Derived(cfg, sw, sw.ports[port])
        out.append(TableEntry(T_PORT_SMAC, (("egress_port", port),), "set_smac",
                              {"smac": mac_to_int(sw.ports[port].mac)}))
        # PPT: ECN at K = λ·C·RTT on each of the eight priority queues, nothing red.
        if sw.profile == PPT_PROFILE:
            for p in range(PRIORITY_LEVELS):
                out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", ppt_qid(p))),
                                      "set_thresholds",
                                      {"ecn_threshold": d.qdepth(d.ppt_ecn_threshold_bytes(p)),
                                       "red_threshold": NO_THRESHOLD}))
        # FlashPass: the emulation queue's single threshold, red data in the data queue.
        if sw.profile == FLASHPASS_PROFILE:
            for qid, (k, red) in sorted(d.flashpass_thresholds().items()):
                out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", qid)),
                                      "set_thresholds", {"ecn_threshold": k, "red_threshold": red}))
        # FlexPass queue: ECN at K and selective dropping of red above the red threshold.
        if sw.profile == "flexpass":
            out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", d.qid("flexpass"))),
                                  "set_thresholds",
                                  {"ecn_threshold": d.ecn_threshold_qdepth, "red_threshold": d.red_threshold_qdepth}))
        # Legacy (or shared, naive) queue: DCTCP-style ECN marking only.
        k = d.legacy_ecn_threshold_qdepth
        if k is not None and sw.profile not in (PPT_PROFILE, FLASHPASS_PROFILE):
            out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", d.qid("legacy"))),
                                  "set_thresholds", {"ecn_threshold": k, "red_threshold": 0x7FFFF}))
        # Stock BMv2 limits credits with the P4 meter; flexpass_switch shapes its credit
        # queue in the traffic manager (an unconfigured meter cell is GREEN); Tofino
        # does both (the meter polices, the TM shapes).
        if sw.target == "simple_switch" or d.is_tofino:
            out.append(MeterEntry(METER_CREDIT, port, d.meter_cir_bytes_per_s, d.meter_burst_bytes,
                                  d.meter_cir_bytes_per_s, d.meter_burst_bytes))
    return out
