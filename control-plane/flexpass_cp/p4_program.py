"""Names and constants of the P4 programs (p4src/v1model, p4src/tna): the Python
side of p4src/shared/define.p4 and of the ``@name(".x")`` annotations.
control-plane/tests/test_p4_names.py checks them against the P4 source.
"""

from __future__ import annotations

from .dscp import TrafficClass

MAX_PORTS = 64  # meter / counter arrays are indexed by port
QUEUES_PER_PORT = 8  # qid_t is bit<3>; BMv2 runs with --priority-queues 8
ECMP_MAX_GROUP_SIZE = 16
KIND = {  # KIND_*
    TrafficClass.LEGACY: 0,
    TrafficClass.CREDIT: 1,
    TrafficClass.PROACTIVE_DATA: 2,
    TrafficClass.REACTIVE_DATA: 3,
    TrafficClass.CONTROL: 4,
}
COLOR_GREEN, COLOR_RED = 0, 2  # v1model meter encoding
ECN_NOT_ECT = 0

#: A queue threshold no enq_qdepth (bit<19>) exceeds: "no threshold" (QDEPTH_NONE).
NO_THRESHOLD = 0x7FFFF


def port_queue_index(port: int, qid: int) -> int:
    """Cell of (port, queue) in the per-queue counters (PORT_QUEUE_INDEX)."""
    return port * QUEUES_PER_PORT + qid


# Object names.
T_CLASSIFIER = "classifier"
T_ROUTING = "routing"
T_QUEUE_THRESHOLDS = "queue_thresholds"
T_PORT_SMAC = "port_smac"
T_ECN_COLOR = "ecn_color"
T_NIC_PORT = "nic_port"  # the NIC edge (p4src/pna): input_port -> send_to(port)
AP_ECMP = "ecmp_selector"
METER_CREDIT = "credit_meter"
#: Counters indexed by port_queue_index().
PORT_QUEUE_COUNTERS = ("forwarded", "ecn_marked", "red_dropped", "credit_dropped")
INGRESS_EVENTS = "ingress_events"
INGRESS_EVENT_NAMES = {  # EVT_*
    0: "parser_error (forwarded)",
    1: "dropped: not IPv4",
    2: "dropped: bad IPv4 checksum",
    3: "dropped: TTL expired",
    4: "dropped: no route",
    5: "FlexPass header seen",
    6: "dropped: IPv4 options",
}
