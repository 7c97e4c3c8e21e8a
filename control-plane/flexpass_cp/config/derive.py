"""Values derived from a port's config: rates, meter, thresholds in the
target's units (:mod:`.targets`).  The one place that does unit arithmetic;
what each queue of a port becomes is :mod:`.queues`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .. import frames
from ..dscp import PptPriority
from ..p4_program import NO_THRESHOLD
from .model import Config, ConfigError, HostNicConfig, PortConfig, SwitchConfig
from .profiles import FLASHPASS, FLEXPASS, LINE_RATE_CREDITS
from .targets import (
    FCS_BYTES,
    FLEXPASS_SWITCH,
    MAX_CREDIT_WIRE_BYTES,
    TOFINO_BRIDGED_BYTES,
    TOFINO_CHIPS,
    TOFINO_COLOR_LIMITS,
    TOFINO_MAX_DWRR_WEIGHT,
    TOFINO_SPEEDS,
    WIRE_OVERHEAD_NOT_SEEN_BY_BMV2,
    WIRE_OVERHEAD_NOT_SEEN_BY_TOFINO,
    is_tofino,
)


def credit_meter(credit_rate_bps: float, credit_wire_bytes: int, meter_bytes: int,
                 burst_packets: int) -> Tuple[int, int]:
    """(CIR bytes/s, burst bytes) of a credit byte meter: the credit rate in credits/s
    times the bytes the meter counts for one credit (``meter_bytes``), and a burst of
    ``burst_packets`` such credits.  The one place for a credit meter's numbers: the
    switch's P4 meter (:class:`Derived`), the NIC edge's PNA meter and its eBPF token
    bucket (:func:`nic_credit_meter`)."""
    cir = max(1, int(round(credit_rate_bps / (8 * credit_wire_bytes) * meter_bytes)))
    return cir, burst_packets * meter_bytes


def nic_credit_meter(link_bps: float, share: float, mtu: int = frames.DEFAULT_MTU,
                     burst_packets: int = 2, credit_wire_bytes: int = frames.CREDIT_WIRE) -> Tuple[int, int]:
    """(CIR bytes/s, burst bytes) of the NIC edge's credit meter for a link of C =
    ``link_bps``: share·C·84/(84+F) in frame bytes (no preamble, IFG or FCS: 84 -> 60 bytes
    per minimum credit; ``frames.credit_limit_frame_bytes_per_s``, the unit of every edge
    and of the agent's shaper: skb->len, BMv2's and DPDK's meters), and a burst of
    ``burst_packets`` minimum credits.  The same numbers as a BMv2 switch port's meter with
    the same C, w_q (share), credit.mtu, credit.wire_bytes and credit_meter_burst_packets."""
    cir = max(1, int(round(frames.credit_limit_frame_bytes_per_s(link_bps, share, mtu, credit_wire_bytes))))
    return cir, burst_packets * frames.frame_bytes(credit_wire_bytes)


def nic_meter(cfg: Config, nic: HostNicConfig) -> Tuple[int, int]:
    """(CIR bytes/s, burst bytes) of a ``nics:`` entry's credit meter: the PNA meter's
    MeterConfig and the eBPF edge's token bucket (:func:`nic_credit_meter`)."""
    return nic_credit_meter(nic.link_rate_bps, nic.share, nic.mtu, nic.credit_meter_burst_packets,
                            cfg.credit_wire_bytes)


def nic_credits_per_second(cfg: Config, nic: HostNicConfig) -> float:
    """Minimum credits/s the NIC edge passes: share·C·84/(84+F) / (8·84)."""
    cw = cfg.credit_wire_bytes
    return frames.credit_queue_bps(nic.link_rate_bps, nic.share, nic.mtu, cw) / (8 * cw)


def derived(cfg: Config, switch: str, port: int) -> "Derived":
    """The derived values of `switch`'s `port`."""
    sw = cfg.switch(switch)
    return Derived(cfg, sw, sw.ports[port])


@dataclass(frozen=True)
class Derived:
    """Values derived from a port's config (units: :mod:`.targets`)."""

    config: Config
    switch: SwitchConfig
    port: PortConfig

    @property
    def effective_w_q(self) -> float:
        """Share of the link reserved for proactive data (1.0 in the naive and flashpass profiles)."""
        return 1.0 if self.switch.profile in LINE_RATE_CREDITS else self.port.queues.w_q

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
        return is_tofino(self.switch.target)

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
        return credit_meter(self.credit_rate_bps, self.config.credit_wire_bytes,
                            self.credit_meter_bytes, 1)[0]

    @property
    def meter_burst_bytes(self) -> int:
        """Credit meter burst (cburst = pburst): ``credit_meter_burst_packets`` credits
        (two, ExpressPass §3.1, unless configured); FlashPass:
        the emulation queue's depth, so that the queue (shaped at the same rate) and its
        threshold, not the meter, decide which emulation packets are dropped."""
        if self.switch.profile == FLASHPASS:
            return self.port.queues.credit_queue_packets * self.credit_meter_bytes
        return self.port.queues.credit_meter_burst_packets * self.credit_meter_bytes

    def packets(self, nbytes: int) -> int:
        """Bytes -> BMv2 queue-depth packets, rounded up."""
        return int(math.ceil(nbytes / self.config.max_frame_bytes))

    def qdepth(self, nbytes: int) -> int:
        """A byte threshold in the target's enq_qdepth units (module docstring)."""
        if self.switch.target == FLEXPASS_SWITCH:
            return min(nbytes, NO_THRESHOLD)
        if self.is_tofino:
            return min(self.cells(nbytes), NO_THRESHOLD)
        return self.packets(nbytes)

    def frame_qdepth(self, frame_bytes: int) -> int:
        """enq_qdepth units one frame (as sent, without FCS) adds to its queue:
        BMv2 1 packet, flexpass_switch its bytes, Tofino the cells of frame +
        FCS + the bridged header."""
        if self.switch.target == FLEXPASS_SWITCH:
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
        if self.switch.target == FLEXPASS_SWITCH or self.is_tofino:
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
        if self.switch.profile != FLEXPASS:
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
        if self.switch.target == FLEXPASS_SWITCH:
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

