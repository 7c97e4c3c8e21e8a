"""The queues of a port on each target × profile: one table, :data:`PORT_QUEUES`.

* ``simple_switch``: simple_switch_CLI commands (:class:`QueueCommand`), queue
  depth and rate in packets; strict priority only (p4src/README.md).
* ``flexpass_switch``: its traffic manager (:class:`TmPort`, docs/tm-api.md).
* ``tofino`` / ``tofino2``: the TM in cells (:class:`TofinoPort`, written as
  tfN.tm.* operations by :mod:`flexpass_cp.bfrt_ops`).

Pure: values come from :class:`~.derive.Derived`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..dscp import PRIORITY_LEVELS
from .derive import Derived
from .model import Config, ConfigError
from .profiles import FLASHPASS, FLEXPASS, LOGICAL_QUEUES, NAIVE, PFABRIC, PPT, ppt_qid
from .targets import (
    FCS_BYTES,
    FLEXPASS_SWITCH,
    MAX_CREDIT_WIRE_BYTES,
    SIMPLE_SWITCH,
    TOFINO_COLOR_LIMITS,
    WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
    WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO,
    family,
)

TOFINO = "tofino"  # both chips (targets.family)


@dataclass(frozen=True)
class QueueCommand:
    """One simple_switch_CLI queue setting."""

    verb: str  # set_queue_depth | set_queue_rate
    value: int
    port: int
    priority: int
    why: str

    def line(self) -> str:
        return f"{self.verb} {self.value} {self.port} {self.priority}"


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
    discipline: str = "fifo"  # or "pfabric" (docs/tm-api.md)


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


# ---- simple_switch -------------------------------------------------------------


def _bmv2_three_queues(d: Derived) -> List[QueueCommand]:
    """flexpass and naive: credits on top at line rate (the P4 meter limits them);
    legacy above FlexPass, capped at (1 - w_q)·C (flexpass) or uncapped (naive)."""
    port, q = d.port.port, d.port.queues
    cq, fq, lq = d.qid("credit"), d.qid("flexpass"), d.qid("legacy")
    legacy_rate = d.legacy_rate_pps if d.legacy_rate_pps is not None else d.line_rate_pps
    return [
        QueueCommand("set_queue_depth", q.credit_queue_packets, port, cq,
                     "credit queue: a few credits (ExpressPass: 8)"),
        QueueCommand("set_queue_rate", d.line_rate_pps, port, cq,
                     "credit queue: line rate (the P4 meter limits credits)"),
        QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, fq, "FlexPass queue buffer"),
        QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, lq, "legacy queue buffer"),
        QueueCommand("set_queue_rate", d.line_rate_pps, port, fq,
                     "FlexPass queue: line rate (work-conserving below legacy)"),
        QueueCommand("set_queue_rate", legacy_rate, port, lq,
                     "legacy queue: (1 - w_q)·C" if d.legacy_rate_pps is not None
                     else "shared data queue: line rate"),
    ]


def _bmv2_flashpass(d: Derived) -> List[QueueCommand]:
    """FlashPass §III-B, §IV-A: the emulation queue drains at C·84/(84 + max frame)
    (one emulation packet per maximum frame), a few packets deep; one data queue."""
    port, q = d.port.port, d.port.queues
    cq, fq = d.qid("credit"), d.qid("flexpass")
    return [
        QueueCommand("set_queue_depth", q.credit_queue_packets, port, cq,
                     "emulation queue: a few packets (FlashPass: 8)"),
        QueueCommand("set_queue_rate", d.emulation_pps, port, cq, "emulation queue: C·84/(84 + max frame)"),
        QueueCommand("set_queue_depth", d.data_queue_depth_pkts, port, fq, "data queue buffer"),
        QueueCommand("set_queue_rate", d.line_rate_pps, port, fq, "data queue: line rate"),
    ]


def _bmv2_ppt(d: Derived) -> List[QueueCommand]:
    """Stock BMv2 has no shared port buffer and no port shaper: each priority queue
    gets the whole buffer and the line rate (strict priority between them)."""
    out = []
    for p in range(PRIORITY_LEVELS):
        out.append(QueueCommand("set_queue_depth", d.data_queue_depth_pkts, d.port.port, ppt_qid(p),
                                f"PPT P{p} buffer"))
        out.append(QueueCommand("set_queue_rate", d.line_rate_pps, d.port.port, ppt_qid(p),
                                f"PPT P{p}: line rate"))
    return out


# ---- flexpass_switch -----------------------------------------------------------


def _tm_three_queues(d: Derived) -> TmPort:
    """FlexPass §4.1: credits strict priority, shaped to credit_rate_bps with a burst of
    credit_shaper_burst_packets (ExpressPass's token bucket: 2 credits) and a
    credit_queue_packets (8) buffer; Q1/Q2 DWRR w_q : 1 - w_q;
    red admission at the red threshold on Q1; ECN K reported per queue.  The naive
    profile shares one data queue and shapes credits for the whole link."""
    q = d.port.queues
    credit = TmQueue(d.qid("credit"), priority=1, weight=1.0,
                     buffer_bytes=d.credit_buffer_bytes,
                     shaper_rate_bps=d.credit_rate_bps,
                     shaper_burst_bytes=q.credit_shaper_burst_packets * d.config.credit_wire_bytes)
    naive = d.switch.profile == NAIVE
    flexpass = TmQueue(d.qid("flexpass"), priority=0, weight=1.0 if naive else q.w_q,
                       buffer_bytes=q.buffer_bytes,
                       red_threshold=None if naive else q.red_threshold_bytes,
                       ecn_threshold=None if naive else q.ecn_threshold_bytes)
    legacy = TmQueue(d.qid("legacy"), priority=0, weight=1.0 if naive else 1 - q.w_q,
                     buffer_bytes=q.buffer_bytes, ecn_threshold=q.legacy_ecn_threshold_bytes)
    return TmPort(d.port.port, d.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
                  (credit, flexpass, legacy))


def _tm_flashpass(d: Derived) -> TmPort:
    """FlashPass (§III-B, §IV-A): the emulation queue at strict priority, shaped to
    C·84/(84 + max frame), ``credit_queue_packets`` emulation frames deep, red
    (Not-ECT) arrivals dropped once the threshold's packets are queued, ECT ones
    marked; one data queue with the port's buffer and red (unscheduled) data
    dropped above its threshold."""
    q, fp = d.port.queues, d.config.flashpass
    emu = d.emulation_bmv2_bytes
    emulation = TmQueue(d.qid("credit"), priority=1, weight=1.0,
                        buffer_bytes=q.credit_queue_packets * emu,
                        shaper_rate_bps=d.credit_rate_bps,
                        shaper_burst_bytes=2 * d.config.credit_wire_bytes,
                        red_threshold=fp.emulation_threshold_packets * emu,
                        ecn_threshold=fp.emulation_threshold_packets * emu - 1)
    frame = d.config.max_frame_bytes - WIRE_OVERHEAD_NOT_SEEN_BY_BMV2
    data = TmQueue(d.qid("flexpass"), priority=0, weight=1.0, buffer_bytes=q.buffer_bytes,
                   red_threshold=fp.unscheduled_threshold_packets * frame)
    return TmPort(d.port.port, d.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2, (emulation, data))


def _tm_ppt(d: Derived) -> TmPort:
    """PPT (SIGCOMM'24 §4.2, §6.2): eight strict-priority queues (P<p> in queue
    7 - p at level 7 - p, served first when higher), sharing the port's buffer
    (``buffer``: one limit on the sum of the queues, each queue may use all of
    it); ECN K per queue reported by the TM (the P4 egress marks, from
    ``queue_thresholds``)."""
    buf = d.port.queues.buffer_bytes
    queues = tuple(TmQueue(ppt_qid(p), priority=ppt_qid(p), weight=1.0, buffer_bytes=buf,
                           ecn_threshold=d.ppt_ecn_threshold_bytes(p))
                   for p in range(PRIORITY_LEVELS))
    return TmPort(d.port.port, d.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
                  queues, shared_buffer_bytes=buf)


def _tm_pfabric(d: Derived) -> TmPort:
    """pFabric (SIGCOMM'13 §4.1; docs/protocol.md §10): one queue per port, every
    class in it (the classifier's legacy queue), in the TM's discipline ``pfabric``
    (the smallest PRIO first, that flow's earliest packet; the largest dropped when
    the port's ``buffer`` is full: pFabric §5 takes ~2 BDP); no ECN."""
    q = TmQueue(d.qid("legacy"), priority=0, weight=1.0, buffer_bytes=d.port.queues.buffer_bytes,
                discipline="pfabric")
    return TmPort(d.port.port, d.port.link_rate_bps, WIRE_OVERHEAD_NOT_SEEN_BY_BMV2, (q,))


# ---- tofino / tofino2 ----------------------------------------------------------


def _tofino_port(d: Derived, queues: Tuple[TofinoQueue, ...],
                 buffer_cells: Optional[int] = None) -> TofinoPort:
    """The port around its queues: a port slower than its speed is shaped to link_rate."""
    speed_bps, speed = d.tofino_speed
    shaped = d.port.link_rate_bps < speed_bps
    return TofinoPort(d.port.port, speed,
                      d.kbps(d.port.link_rate_bps) if shaped else None,
                      2 * d.config.max_frame_bytes if shaped else None,
                      queues, buffer_cells)


def _tofino_three_queues(d: Derived) -> TofinoPort:
    """flexpass_switch's three queues (:func:`_tm_three_queues`) in Tofino's units.
    Credits at scheduling priority 7, shaped (max rate) to credit_rate_bps with a
    2-credit burst, buffer of credit_queue_packets credits; Q1/Q2 at priority 0
    under DWRR w_q : 1 - w_q; Q1's red colour drop limit at the selective-drop
    threshold (Derived.tofino_red_limit)."""
    queues = []
    for role, q in zip(LOGICAL_QUEUES, _tm_three_queues(d).queues):
        red_pct = None
        if role == "credit":
            # Each credit takes whole cells: 92 wire bytes -> 73 stored -> 1 cell.
            cells = d.port.queues.credit_queue_packets * d.frame_qdepth(
                MAX_CREDIT_WIRE_BYTES - WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO - FCS_BYTES)
        elif q.red_threshold is not None:
            red_pct, cells = d.tofino_red_limit
        else:
            cells = d.cells(q.buffer_bytes)
        queues.append(TofinoQueue(
            role, q.queue, max_priority=7 if q.priority else 0,
            dwrr_weight=d.dwrr_weight(q.weight), guaranteed_cells=cells,
            red_limit_percent=red_pct,
            shaper_kbps=None if q.shaper_rate_bps is None else d.kbps(q.shaper_rate_bps),
            shaper_burst_bytes=q.shaper_burst_bytes))
    return _tofino_port(d, tuple(queues))


def _tofino_ppt(d: Derived) -> TofinoPort:
    """PPT on Tofino (:func:`_tm_ppt` in Tofino's units): eight queues at strict
    priorities, P<p> in qid 7 - p at scheduling priority 7 - p (higher first). The
    port's buffer is one egress limit on the sum of its queues (tfN.tm.port.buffer
    eg_limit_cells); each queue is guaranteed one maximum frame and takes the rest
    from the shared pool, so any queue may fill the port's buffer (guaranteed cells
    are reserved: eight full buffers per port would not fit the TM). ECN K per
    queue is the P4 egress's (queue_thresholds); nothing is red."""
    queues = tuple(TofinoQueue(f"P{p}", ppt_qid(p), max_priority=ppt_qid(p),
                               dwrr_weight=d.dwrr_weight(1.0), guaranteed_cells=d.data_frame_cells)
                   for p in range(PRIORITY_LEVELS))
    return _tofino_port(d, queues, buffer_cells=d.cells(d.port.queues.buffer_bytes))


def _tofino_flashpass(d: Derived) -> TofinoPort:
    """FlashPass on Tofino (:func:`_tm_flashpass` in Tofino's units): the emulation
    queue at strict priority 7, shaped to C·84/(84 + max frame) with a 2-packet
    burst, ``credit_queue_packets`` emulation frames deep, red (Not-ECT,
    ``ecn_color``) arrivals dropped by the colour drop limit once the emulation
    threshold's packets are queued (2 of 8: 25 %, a step of 12.5 %); one data queue
    with the port's buffer (its red, unscheduled data is dropped by the egress,
    Derived.flashpass_thresholds)."""
    q, fp = d.port.queues, d.config.flashpass
    red_pct = 100.0 * fp.emulation_threshold_packets / q.credit_queue_packets
    if red_pct not in TOFINO_COLOR_LIMITS:
        raise ConfigError("flashpass.emulation_threshold_packets",
                          f"{fp.emulation_threshold_packets} of credit_queue_packets "
                          f"{q.credit_queue_packets} is {red_pct:g} %; a Tofino colour drop limit "
                          f"is one of {', '.join(f'{p:g}' for p in TOFINO_COLOR_LIMITS)} %")
    emulation = TofinoQueue(
        "credit", d.qid("credit"), max_priority=7, dwrr_weight=d.dwrr_weight(1.0),
        guaranteed_cells=q.credit_queue_packets * d.emulation_cells, red_limit_percent=red_pct,
        shaper_kbps=d.kbps(d.credit_rate_bps), shaper_burst_bytes=2 * d.config.credit_wire_bytes)
    data = TofinoQueue("flexpass", d.qid("flexpass"), max_priority=0,
                       dwrr_weight=d.dwrr_weight(1.0), guaranteed_cells=d.cells(q.buffer_bytes))
    return _tofino_port(d, (emulation, data))


#: (target family, profile) -> the settings of one port.
PORT_QUEUES: Dict[Tuple[str, str], Callable[[Derived], Any]] = {
    (SIMPLE_SWITCH, FLEXPASS): _bmv2_three_queues,
    (SIMPLE_SWITCH, NAIVE): _bmv2_three_queues,
    (SIMPLE_SWITCH, PPT): _bmv2_ppt,
    (SIMPLE_SWITCH, FLASHPASS): _bmv2_flashpass,
    (FLEXPASS_SWITCH, FLEXPASS): _tm_three_queues,
    (FLEXPASS_SWITCH, NAIVE): _tm_three_queues,
    (FLEXPASS_SWITCH, PPT): _tm_ppt,
    (FLEXPASS_SWITCH, FLASHPASS): _tm_flashpass,
    (FLEXPASS_SWITCH, PFABRIC): _tm_pfabric,
    (TOFINO, FLEXPASS): _tofino_three_queues,
    (TOFINO, NAIVE): _tofino_three_queues,
    (TOFINO, PPT): _tofino_ppt,
    (TOFINO, FLASHPASS): _tofino_flashpass,
}


def port_queues(d: Derived, target: Optional[str] = None) -> Any:
    """The settings of `d`'s port on `target` (default: its switch's target):
    a list of QueueCommand, a TmPort or a TofinoPort."""
    key = (family(target or d.switch.target), d.switch.profile)
    if key not in PORT_QUEUES:
        raise ConfigError(f"switches.{d.switch.name}.profile",
                          f"profile {key[1]!r} has no queues on target {key[0]!r}")
    return PORT_QUEUES[key](d)


def _every_port(cfg: Config, switch: str, target: str) -> list:
    sw = cfg.switch(switch)
    return [port_queues(Derived(cfg, sw, sw.ports[p]), target) for p in sorted(sw.ports)]


def bmv2_queue_commands(cfg: Config, switch: str) -> List[QueueCommand]:
    """simple_switch_CLI commands of every port (pure)."""
    return [c for cmds in _every_port(cfg, switch, SIMPLE_SWITCH) for c in cmds]


def tm_settings(cfg: Config, switch: str) -> List[TmPort]:
    """Traffic-manager settings of every port of a flexpass_switch (pure)."""
    return _every_port(cfg, switch, FLEXPASS_SWITCH)


def tofino_settings(cfg: Config, switch: str) -> List[TofinoPort]:
    """Tofino traffic-manager settings of every port (pure)."""
    return _every_port(cfg, switch, TOFINO)
