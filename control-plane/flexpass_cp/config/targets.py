"""The switch programs a config can drive, and what each one counts.

* ``simple_switch`` (stock BMv2, simple_switch_grpc): enq_qdepth counts
  **packets**, so byte thresholds become ``ceil(bytes / max_frame_bytes)``
  packets (max_frame_bytes: the maximum frame of ``credit.mtu`` on the wire,
  mtu + 38, docs/protocol.md §9).  Queues go over simple_switch_CLI.
* ``flexpass_switch`` (switch-target/): enq_qdepth counts **bytes** as BMv2
  does (no preamble, IFG or FCS), so thresholds are written as configured; its
  traffic manager does the DWRR, the credit shaping and the red admission.
* ``tofino`` / ``tofino2`` (p4src/tna over BfRt): enq_qdepth counts **cells**
  (80 B on Tofino, 176 B on Tofino2); its traffic manager (tfN.tm.*) does
  strict priority, DWRR, the credit shaper and the red colour drop.
"""

from __future__ import annotations

from .. import frames

SIMPLE_SWITCH = "simple_switch"
FLEXPASS_SWITCH = "flexpass_switch"

#: Tofino chips: BfRt traffic-manager table prefix and TM cell size in bytes
#: (the unit of eg_intr_md.enq_qdepth and of every TM buffer limit).  The TM's
#: own tfN.tm.cfg.cell_size_bytes is checked against this at apply time.
TOFINO_CHIPS = {"tofino": ("tf1", 80), "tofino2": ("tf2", 176)}

TARGETS = (SIMPLE_SWITCH, FLEXPASS_SWITCH) + tuple(TOFINO_CHIPS)


def is_tofino(target: str) -> bool:
    return target in TOFINO_CHIPS


def family(target: str) -> str:
    """The target as the queue table keys it: both Tofino chips are ``tofino``."""
    return "tofino" if is_tofino(target) else target


#: Bytes on the wire that BMv2 does not see in a frame: preamble+SFD (8),
#: inter-frame gap (12) and FCS (4).  BMv2 byte meters count the frame as
#: read from the interface, i.e. wire bytes - 24, as every NIC edge does
#: (frames.WIRE_BYTES_NOT_IN_FRAME, the one definition).
WIRE_OVERHEAD_NOT_SEEN_BY_BMV2 = frames.WIRE_BYTES_NOT_IN_FRAME

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
MAX_CREDIT_WIRE_BYTES = frames.MAX_CREDIT_WIRE


#: The eBPF NIC edge (nic/ebpf/flexpass_edge.bpf.c) refills its token bucket for at most
#: 1 s at its rate in nano-bytes, which keeps the arithmetic in u64 up to this rate.
EBPF_EDGE_MAX_CREDIT_BYTES_PER_S = 10**10

#: Where the eBPF edge of device DEV pins its maps: <bpffs>/flexpass-edge/DEV/tc/globals
#: (tc pins by name under TC_BPF_MNT/tc/globals; nic/flexpass_ebpf.py apply).
EBPF_EDGE_PIN_DIR = "flexpass-edge"
DEFAULT_BPFFS = "/sys/fs/bpf"


def ebpf_edge_maps(device: str, bpffs: str = DEFAULT_BPFFS) -> str:
    return f"{bpffs.rstrip('/')}/{EBPF_EDGE_PIN_DIR}/{device}/tc/globals"


def nic_agent_flags(edge: str, device: str, bpffs: str = DEFAULT_BPFFS) -> str:
    """The host agent's flags for a host whose NIC edge is ``edge`` (a ``nics:`` entry's):
    every edge polices the host's credits, so the agent must not police them again
    (docs/agent-api.md, `credit_limit`); with the eBPF and qdisc edges it can read the
    edge's counters (pinned maps; the htb credit class on the device)."""
    flags = f"--nic-edge {edge}"
    if edge == "ebpf":
        flags += f" --nic-edge-maps {ebpf_edge_maps(device, bpffs)}"
    elif edge == "qdisc":
        flags += f" --nic-edge-dev {device}"
    return flags
