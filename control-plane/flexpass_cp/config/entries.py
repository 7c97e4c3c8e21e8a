"""A switch's config as P4 entities (:mod:`flexpass_cp.entities`): what
P4Runtime writes to p4src/v1model and, through :mod:`flexpass_cp.bfrt_ops`,
BfRt to p4src/tna.  Pure: testable without a switch.
"""

from __future__ import annotations

from typing import List

from ..dscp import PRIORITIES, PRIORITY_LEVELS, TrafficClass
from ..entities import ActionProfileGroup, ActionProfileMember, Entity, MeterEntry, TableEntry
from ..p4_program import (
    AP_ECMP,
    COLOR_GREEN,
    COLOR_RED,
    ECMP_MAX_GROUP_SIZE,
    ECN_NOT_ECT,
    KIND,
    METER_CREDIT,
    NO_THRESHOLD,
    T_CLASSIFIER,
    T_ECN_COLOR,
    T_NIC_PORT,
    T_PORT_SMAC,
    T_QUEUE_THRESHOLDS,
    T_ROUTING,
)
from .derive import Derived, nic_meter
from .forwarding import forwarding, member_ids
from .model import Config, SwitchConfig
from .profiles import CLASS_QUEUES, FLASHPASS, FLEXPASS, PFABRIC, PPT, PPT_OTHER_PRIORITY, ppt_qid
from .targets import SIMPLE_SWITCH
from .units import mac_to_int


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
    return profile_classifier_entries(cfg, sw.profile)


def profile_classifier_entries(cfg: Config, profile_name: str) -> List[TableEntry]:
    """``classifier``: DSCP -> (qid, colour, kind) of the profile's queues."""
    if profile_name == PPT:
        return ppt_classifier_entries(cfg)
    profile = CLASS_QUEUES[profile_name]
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


def ecn_color_entries(cfg: Config, sw: SwitchConfig) -> List[TableEntry]:
    """``ecn_color`` (every target: v1model and TNA have it): profile flashpass colours a
    Not-ECT packet in the emulation (credit) queue red (FlashPass §III-C: an
    over-provisioned emulation packet, dropped first); every profile writes the default
    (keep the DSCP's colour), so the table is managed and a change of profile removes
    the entries."""
    out = []
    if sw.profile == FLASHPASS:
        out.append(TableEntry(T_ECN_COLOR, (("qid", cfg.bmv2_priority["credit"]), ("ecn", ECN_NOT_ECT)),
                              "set_color", {"color": COLOR_RED}))
    out.append(TableEntry(T_ECN_COLOR, (), "keep_color", {}, is_default=True))
    return out


def switch_entries(cfg: Config, switch: str) -> List[Entity]:
    """Every P4Runtime entity the switch should hold, in a deterministic order."""
    sw = cfg.switch(switch)
    out: List[Entity] = []
    out.extend(classifier_entries(cfg, sw))
    out.extend(ecn_color_entries(cfg, sw))

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
        if sw.profile == PPT:
            for p in range(PRIORITY_LEVELS):
                out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", ppt_qid(p))),
                                      "set_thresholds",
                                      {"ecn_threshold": d.qdepth(d.ppt_ecn_threshold_bytes(p)),
                                       "red_threshold": NO_THRESHOLD}))
        # FlashPass: the emulation queue's single threshold, red data in the data queue.
        if sw.profile == FLASHPASS:
            for qid, (k, red) in sorted(d.flashpass_thresholds().items()):
                out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", qid)),
                                      "set_thresholds", {"ecn_threshold": k, "red_threshold": red}))
        # FlexPass queue: ECN at K and selective dropping of red above the red threshold.
        if sw.profile == FLEXPASS:
            out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", d.qid("flexpass"))),
                                  "set_thresholds",
                                  {"ecn_threshold": d.ecn_threshold_qdepth, "red_threshold": d.red_threshold_qdepth}))
        # Legacy (or shared, naive) queue: DCTCP-style ECN marking only (pFabric: no ECN).
        k = d.legacy_ecn_threshold_qdepth
        if k is not None and sw.profile not in (PPT, FLASHPASS, PFABRIC):
            out.append(TableEntry(T_QUEUE_THRESHOLDS, (("egress_port", port), ("qid", d.qid("legacy"))),
                                  "set_thresholds", {"ecn_threshold": k, "red_threshold": NO_THRESHOLD}))
        # Stock BMv2 limits credits with the P4 meter; flexpass_switch shapes its credit
        # queue in the traffic manager (an unconfigured meter cell is GREEN); Tofino
        # does both (the meter polices, the TM shapes).
        if sw.target == SIMPLE_SWITCH or d.is_tofino:
            out.append(MeterEntry(METER_CREDIT, port, d.meter_cir_bytes_per_s, d.meter_burst_bytes,
                                  d.meter_cir_bytes_per_s, d.meter_burst_bytes))
    return out


def nic_entries(cfg: Config, nic_name: str) -> List[Entity]:
    """Every P4Runtime entity of the NIC edge's PNA program (p4src/pna) for ``nics.<name>``:
    the switch's FlexPass classifier (one DSCP plan), ``nic_port`` host <-> network, and the
    credit meter on the network port at :func:`~.derive.nic_meter` (CIR = PIR, CBS = PBS,
    as DPDK's SWX meter needs)."""
    nic = cfg.nic(nic_name)
    out: List[Entity] = list(profile_classifier_entries(cfg, FLEXPASS))
    for src, dst in ((nic.host_port, nic.network_port), (nic.network_port, nic.host_port)):
        out.append(TableEntry(T_NIC_PORT, (("input_port", src),), "send_to", {"port": dst}))
    cir, burst = nic_meter(cfg, nic)
    out.append(MeterEntry(METER_CREDIT, nic.network_port, cir, burst, cir, burst))
    return out
