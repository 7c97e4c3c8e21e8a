"""Switch profiles: the names the model uses (flexpass-sim ``switch.profile``),
the queues of each, and which traffic class goes to which queue.

The profiles differ only in table entries and queue settings; the P4 program
is the same.
"""

from __future__ import annotations

from typing import Dict, Tuple

from ..dscp import PRIORITY_LEVELS, TrafficClass
from ..p4_program import COLOR_GREEN, COLOR_RED, QUEUES_PER_PORT

FLEXPASS = "flexpass"
NAIVE = "naive"
PPT = "ppt"
FLASHPASS = "flashpass"
PFABRIC = "pfabric"

#: Profiles a switch can be configured with (a subset of the model's).
PROFILES = (FLEXPASS, NAIVE, PPT, FLASHPASS, PFABRIC)

#: Profiles only some targets implement -> those targets (pFabric's queue is a
#: discipline of flexpass_switch's traffic manager; stock BMv2 and Tofino have none).
PROFILE_TARGETS = {PFABRIC: ("flexpass_switch",)}

#: Old control-plane names -> the model's.
RENAMED = {"expresspass_naive": NAIVE}

#: The model's profiles that only the hosts or an oracle make different.
MODEL_ONLY = {
    "owf": "oracle weighted fair: DWRR weight and credit rate set from the true traffic mix, "
           "known only to the model",
    "layering": "the switch is the naive profile's (use profile: naive); the difference is the hosts' "
                "DCTCP window",
}

#: Logical queues of the FlexPass design (paper §4.1): Q0 credits, Q1 FlexPass
#: data + control, Q2 legacy.
LOGICAL_QUEUES = ("credit", "flexpass", "legacy")

#: Default queue index of each logical queue (config key ``bmv2.priority``).
#: BMv2 serves the HIGHEST priority index first (strict priority; see
#: p4src/README.md).  Credits are on top.  BMv2 has no DWRR, so the weighted
#: sharing of Q1/Q2 is emulated by serving legacy above FlexPass with legacy
#: capped at (1 - w_q)·C: legacy gets at least its share, FlexPass gets at
#: least w_q·C and everything the legacy queue leaves unused.
DEFAULT_BMV2_PRIORITY = {"credit": 7, "legacy": 6, "flexpass": 5}

#: Traffic class -> (logical queue, colour) of the three-queue profiles.
CLASS_QUEUES: Dict[str, Dict[TrafficClass, Tuple[str, int]]] = {
    # FlexPass (EuroSys'23 §4.1): 3 queues, reactive data red in Q1.
    FLEXPASS: {
        TrafficClass.CREDIT: ("credit", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("flexpass", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("flexpass", COLOR_RED),
        TrafficClass.CONTROL: ("flexpass", COLOR_GREEN),
        TrafficClass.LEGACY: ("legacy", COLOR_GREEN),
    },
    # ExpressPass as first deployed (paper §6.2): credits in their own queue,
    # every data packet shares one queue with legacy traffic, nothing is red,
    # credits are limited for the full line rate (w_q is ignored).
    NAIVE: {
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
    # red by `ecn_color` entries (entries.ecn_color_entries).
    FLASHPASS: {
        TrafficClass.CREDIT: ("credit", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("flexpass", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("flexpass", COLOR_RED),
        TrafficClass.CONTROL: ("flexpass", COLOR_GREEN),
        TrafficClass.LEGACY: ("flexpass", COLOR_GREEN),
    },
    # pFabric (SIGCOMM'13 §4.1; docs/protocol.md §10): every packet in one queue, the TM's
    # discipline "pfabric" orders it by the PRIO field (the P4 metadata pfabric_rank).
    PFABRIC: {
        TrafficClass.CREDIT: ("legacy", COLOR_GREEN),
        TrafficClass.PROACTIVE_DATA: ("legacy", COLOR_GREEN),
        TrafficClass.REACTIVE_DATA: ("legacy", COLOR_GREEN),
        TrafficClass.CONTROL: ("legacy", COLOR_GREEN),
        TrafficClass.LEGACY: ("legacy", COLOR_GREEN),
    },
}

#: Profiles whose credits are limited for the full line rate (w_q ignored).
LINE_RATE_CREDITS = (NAIVE, FLASHPASS)

#: PPT (SIGCOMM'24 §4.2, §6.2; docs/protocol.md §10): eight strict priorities.  BMv2
#: and flexpass_switch serve the HIGHEST queue index first, so priority Pp (P0 the
#: highest) is queue 7 - p.  Every DSCP that is not a PPT priority (legacy traffic,
#: the FlexPass classes, unassigned values) goes with P3, the HCP priority of large
#: flows, above every LCP queue.
PPT_OTHER_PRIORITY = 3


def ppt_qid(level: int) -> int:
    """Queue index of PPT priority P<level> on BMv2 / flexpass_switch."""
    if not 0 <= level < PRIORITY_LEVELS:
        raise ValueError(f"PPT priority must be in 0..{PRIORITY_LEVELS - 1}, got {level}")
    return QUEUES_PER_PORT - 1 - level
