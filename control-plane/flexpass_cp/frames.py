"""Frame sizes of an IP MTU and the credit rates they give (docs/protocol.md §9, "Frame
sizes and MTU"; §10, Q0): the Python side of the one definition the Rust wire crate
implements (``flexpass_wire::max_frame_wire``), checked against the same vectors
(docs/mtu-vectors.json, control-plane/tests/test_mtu_vectors.py). No dependencies: the
control plane (:class:`flexpass_cp.config.derive.Derived`), the Scapy layer and the NIC edge
(nic/flexpass_nic.py) all use it.
"""

from __future__ import annotations

IPV4_UDP_OVERHEAD = 28  # IPv4 20 + UDP 8
DATA_HEADER_LEN = 28
ETHERNET_WIRE_OVERHEAD = 38  # Ethernet header 14 + FCS 4 + preamble/SFD 8 + IFG 12
CREDIT_WIRE = 84  # a minimum credit on the wire (MIN_ETHERNET_WIRE)
MAX_CREDIT_WIRE = 92  # a credit with 8 B of options (ExpressPass §3.1: 84-92 B)
# Wire bytes of a frame that no edge counts (preamble/SFD 8, IFG 12, FCS 4): a frame as tc
# (skb->len), BMv2, a PNA/DPDK meter and the agent's credit shaper count it is its wire
# bytes minus these (flexpass_wire::WIRE_BYTES_NOT_IN_FRAME). The one wire <-> frame step.
WIRE_BYTES_NOT_IN_FRAME = 24

DEFAULT_MTU = 1500
MIN_MTU = 576
MAX_MTU = 9000


def check_mtu(mtu: int) -> int:
    """``mtu`` if FlexPass runs on it (576..9000 bytes), else ValueError."""
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not MIN_MTU <= mtu <= MAX_MTU:
        raise ValueError(f"MTU must be an integer in {MIN_MTU}..{MAX_MTU} bytes, got {mtu!r}")
    return mtu


def max_message_for_mtu(mtu: int) -> int:
    """Largest FlexPass message (UDP payload) in one unfragmented IPv4 packet: mtu − 28."""
    return check_mtu(mtu) - IPV4_UDP_OVERHEAD


def max_payload_for_mtu(mtu: int) -> int:
    """Largest DATA payload (segment size): mtu − 20 − 8 − 28 (1444 at 1500, 8944 at 9000)."""
    return max_message_for_mtu(mtu) - DATA_HEADER_LEN


def max_frame_wire(mtu: int) -> int:
    """The maximum frame for MTU ``mtu`` on an Ethernet wire, preamble, IFG and FCS included:
    mtu + 38 (1538 at 1500, 9038 at 9000). A credit is a licence for one such frame."""
    return check_mtu(mtu) + ETHERNET_WIRE_OVERHEAD


def credit_queue_bps(link_bps: float, share: float, mtu: int = DEFAULT_MTU,
                     credit_wire: int = CREDIT_WIRE) -> float:
    """Rate of the credit queue Q0 in wire bits/s: share · C · 84 / (84 + max_frame_wire(mtu))
    (``credit_wire``: a config's credit.wire_bytes in place of 84)."""
    return share * link_bps * credit_wire / (credit_wire + max_frame_wire(mtu))


def credits_per_second(link_bps: float, share: float, mtu: int = DEFAULT_MTU) -> float:
    """The same in minimum credits per second: share · C / (8 · (84 + max_frame_wire(mtu)))."""
    return share * link_bps / (8 * (CREDIT_WIRE + max_frame_wire(mtu)))


def frame_bytes(wire_bytes: int) -> int:
    """A frame's bytes as an edge counts it (no preamble, IFG or FCS) from its wire bytes:
    wire − 24 (a credit: 84..92 -> 60..68)."""
    return wire_bytes - WIRE_BYTES_NOT_IN_FRAME


def credit_limit_frame_bytes_per_s(link_bps: float, share: float, mtu: int = DEFAULT_MTU,
                                   credit_wire: int = CREDIT_WIRE) -> float:
    """The host's credit limit as every edge and the agent count it (docs/protocol.md §9,
    "Credits in frame bytes"): :func:`credit_queue_bps` converted to frame bytes/s with the
    minimum credit's frame, share·C·60/(8·(84+F)). A credit is charged its frame (60..68 B),
    so minimum credits pass at :func:`credits_per_second` and credits with options at 60/68
    of it. flexpass_core::config::credit_limit_frame_bytes_per_s is the same number."""
    return credit_queue_bps(link_bps, share, mtu, credit_wire) / (8 * credit_wire) * frame_bytes(credit_wire)
