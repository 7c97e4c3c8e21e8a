"""Scaling the paper's 10 Gbit/s testbed to what BMv2 sustains.

FlexPass §6.1 testbed: C = 10 Gbit/s, ECN threshold K = 60 kB, selective
dropping (red) threshold 100 kB, w_q = 0.5, incast responses of 64 kB,
long flows of 50 MB.  A software switch forwards far fewer packets per second,
and its base RTT is much longer, so the experiments run at a link rate C'
(default 20 Mbit/s) and every byte threshold is scaled so it holds the same
multiple of the bandwidth-delay product (BDP) as on the testbed:

    threshold' = threshold · BDP' / BDP,   BDP = C · RTT

with RTT = 50 µs for the testbed (10 GbE hosts, one Tomahawk switch; the
paper's K = 60 kB ≈ 1 BDP is the usual DCTCP setting) and RTT' the measured
base RTT of the emulated path.  Thresholds never go below a floor in
full-size frames (K' ≥ 4 frames, red' ≥ K' + 3 frames, buffer' ≥ red' + 16
frames) so a queue can still hold a burst of an agent's sends, and the green
data above the red threshold (bounded by the credits in flight, ExpressPass's
8-credit queue) is measured rather than cut off by the buffer.  Sizes that
set an experiment's *duration* (50 MB long flows) scale with C'/C instead;
sizes that set a *pattern* (64 kB incast responses, which matter in packets
per RTT) are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PAPER_LINK_BPS = 10e9
PAPER_RTT_S = 50e-6
PAPER_K_BYTES = 60_000
PAPER_RED_BYTES = 100_000
PAPER_BUFFER_BYTES = 300_000  # per data queue (switch-target FlexPassParams default)
FRAME = 1514  # a full-size frame as BMv2 counts it (no FCS)
K_FLOOR_FRAMES, RED_ABOVE_K_FRAMES, BUFFER_ABOVE_RED_FRAMES = 4, 3, 16
FLASHPASS_BUFFER_FLOOR_FRAMES = 3  # a FlashPass (or pFabric) data queue holds at least a few frames
#: Profiles whose data queue has neither K nor a red threshold: their buffer is scaled
#: without those floors (FlashPass's shallow buffer, pFabric's ~2 BDP, pFabric §5).
NO_THRESHOLD_PROFILES = ("flashpass", "pfabric")


@dataclass(frozen=True)
class Scaled:
    """The emulated network (C', RTT') against a reference: the paper's testbed by
    default, or a model experiment's link rate, base RTT and thresholds (emulate.py)."""
    link_rate_bps: float
    base_rtt_s: float
    w_q: float = 0.5
    ref_link_bps: float = PAPER_LINK_BPS
    ref_rtt_s: float = PAPER_RTT_S
    ref_k_bytes: int = PAPER_K_BYTES
    ref_red_bytes: int = PAPER_RED_BYTES
    ref_buffer_bytes: int = PAPER_BUFFER_BYTES
    credit_queue_packets: int = 8
    # ExpressPass's credit token bucket (the model's switch.credit_burst), in credits.
    credit_burst_packets: int = 2
    # The switch profile: a FlashPass or pFabric port has no K or red threshold on its data
    # queue, so its buffer is scaled without their floors (only FLASHPASS_BUFFER_FLOOR_FRAMES).
    profile: str = "flexpass"

    @property
    def bdp_ratio(self) -> float:
        return (self.link_rate_bps * self.base_rtt_s) / (self.ref_link_bps * self.ref_rtt_s)

    @property
    def ecn_threshold(self) -> int:
        return max(round(self.ref_k_bytes * self.bdp_ratio), K_FLOOR_FRAMES * FRAME)

    @property
    def red_threshold(self) -> int:
        return max(round(self.ref_red_bytes * self.bdp_ratio), self.ecn_threshold + RED_ABOVE_K_FRAMES * FRAME)

    @property
    def buffer(self) -> int:
        if self.profile in NO_THRESHOLD_PROFILES:
            return max(round(self.ref_buffer_bytes * self.bdp_ratio), FLASHPASS_BUFFER_FLOOR_FRAMES * FRAME)
        return max(round(self.ref_buffer_bytes * self.bdp_ratio), self.red_threshold + BUFFER_ABOVE_RED_FRAMES * FRAME)

    def duration_bytes(self, paper_bytes: int) -> int:
        """A size that sets how long a flow lasts: scaled with the link rate."""
        return max(FRAME, int(paper_bytes * self.link_rate_bps / self.ref_link_bps))

    def port_defaults(self) -> dict:
        """control-plane `port_defaults` (bytes); a FlashPass port takes its buffer and
        emulation queue only (its thresholds are the profile's, in packets)."""
        credits = {"credit_queue_packets": self.credit_queue_packets,
                   "credit_meter_burst_packets": self.credit_burst_packets,
                   "credit_shaper_burst_packets": self.credit_burst_packets}
        if self.profile == "flashpass":
            return {"buffer": self.buffer, **credits}
        return {
            "w_q": self.w_q,
            "ecn_threshold": self.ecn_threshold,
            "red_threshold": self.red_threshold,
            "legacy_ecn_threshold": self.ecn_threshold,
            "buffer": self.buffer,
            **credits,
        }

    def agent_args(self) -> list:
        """Host-agent flags for this scale: link rate (credit limit) and base RTT. The kernel UDP
        socket datapath: these runs measure the fabric, and their results stay comparable with
        earlier ones (AF_XDP, docs/datapath.md, is tested and measured on veth in the netns
        tier)."""
        return ["--link-gbps", f"{self.link_rate_bps / 1e9:.6g}", "--w-q", f"{self.w_q:g}",
                "--rtt-us", f"{max(1, math.ceil(self.base_rtt_s * 1e6))}", "--datapath", "udp"]

    def describe(self) -> str:
        return (f"C' = {self.link_rate_bps / 1e6:g} Mbit/s, base RTT {self.base_rtt_s * 1e6:.0f} µs, "
                f"BDP ratio {self.bdp_ratio:.3g}: K {self.ecn_threshold} B, red {self.red_threshold} B, "
                f"buffer {self.buffer} B")
