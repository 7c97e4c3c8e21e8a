"""What the switches of an emulated run tell about their queues, in the model's report shape.

flexpass_switch answers from its traffic manager (docs/tm-api.md ``get_stats``: per queue
what left it, was CE-marked, was dropped and why, the depth now and its watermark); stock
BMv2 has no TM statistics, so there the P4 program's counters per port and queue stand in
(packets forwarded, CE-marked, red data dropped, credits dropped by the meter) and BMv2's
own queue drops and depths are not visible (None).

The model numbers a port's queues credits, Q1 (credit-scheduled data: FlexPass's queue, the
one data queue of the naive, FlashPass and pFabric profiles), Q2 (legacy data) — or P0…P7
with the PPT profile — and so does this report
(:func:`model_queues` maps them to the switch's queue ids).  Its keys are the model's
(``bottleneck``, ``queue_summary``, ``data_drops_full``, ``data_drops_red``,
``credit_drops``), so ``flexpass compare`` reads both.
"""

from __future__ import annotations

import math
import time
from typing import Dict, List, Optional, Tuple

from flexpass_cp.config.profiles import CLASS_QUEUES, DEFAULT_BMV2_PRIORITY, PFABRIC, PPT, ppt_qid
from flexpass_cp.dscp import PRIORITY_LEVELS, TrafficClass
from flexpass_cp.p4_program import PORT_QUEUE_COUNTERS, QUEUES_PER_PORT, port_queue_index

#: TM drop reasons of a full buffer (the model's ``data_drops_full``); ``red`` is selective drop.
#: ``pushed_out``: a queued packet a pFabric queue dropped for an arriving one of higher
#: priority (docs/tm-api.md) — the model counts those among its full-buffer drops too.
FULL_REASONS = ("queue_full", "port_full", "pushed_out")


def model_queues(profile: str) -> List[int]:
    """The switch's queue ids in the model's order for `profile`: credits, the queue of
    credit-scheduled data (Q1; the shared data queue of the naive and FlashPass profiles),
    then the legacy queue where it is another (Q2)."""
    if profile == PPT:
        return [ppt_qid(p) for p in range(PRIORITY_LEVELS)]
    if profile == PFABRIC:  # the model's layout: Q0 credits (unused), Q1 the pFabric queue
        return [DEFAULT_BMV2_PRIORITY["credit"], DEFAULT_BMV2_PRIORITY[CLASS_QUEUES[PFABRIC][TrafficClass.LEGACY][0]]]
    classes = CLASS_QUEUES[profile]
    names = [classes[TrafficClass.CREDIT][0], classes[TrafficClass.PROACTIVE_DATA][0]]
    if classes[TrafficClass.LEGACY][0] not in names:
        names.append(classes[TrafficClass.LEGACY][0])
    return [DEFAULT_BMV2_PRIORITY[n] for n in names]


def is_credit_queue(qid: int, profile: str) -> bool:
    return profile != PPT and qid == DEFAULT_BMV2_PRIORITY["credit"]


class DepthSampler:
    """The instantaneous depth of every queue of one port, sampled on demand (flexpass_switch
    only: stock BMv2 does not expose its queues; ``enabled`` is then False)."""

    def __init__(self, net, switch: str, port: int):
        self.enabled = net.switch(switch).switch_kind == "flexpass_switch"
        self.port = port
        self.rows: List[Tuple[float, Dict[int, int]]] = []  # (t_s, queue id -> bytes)
        self.client = None
        if self.enabled:
            from flexpass_cp.tm_client import TmClient

            self.client = TmClient("127.0.0.1", net.fabric.switches[switch].tm_port)
        self.t0 = time.monotonic()

    def sample(self) -> None:
        if self.client is None:
            return
        st = self.client.get_stats(self.port)
        self.rows.append((time.monotonic() - self.t0,
                          {q["queue"]: int(q.get("depth_bytes", 0)) for q in st.get("queues", [])}))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


def read_ports(net, fabric, counters=None) -> Dict[Tuple[str, str], dict]:
    """Every switch port's statistics in the TM's shape, keyed (switch, neighbour): from the TM
    (flexpass_switch) or from the P4 counters (stock BMv2; `counters` reads them, by default
    over P4Runtime)."""
    from flexpass_cp.tm_client import TmClient

    out: Dict[Tuple[str, str], dict] = {}
    for sname, node in fabric.switches.items():
        ports = [(port, nb) for port, nb, _ in fabric.neighbours(sname)]
        if net.switch(sname).switch_kind == "flexpass_switch":
            with TmClient("127.0.0.1", node.tm_port) as tm:
                for port, nb in ports:
                    out[(sname, nb)] = tm.get_stats(port)
        else:
            if counters is None:
                from .experiments import p4_counters as counters
            cells = counters(fabric, sname, PORT_QUEUE_COUNTERS)
            for port, nb in ports:
                out[(sname, nb)] = p4_port_stats(cells, port)
    return out


def p4_port_stats(counters: dict, port: int) -> dict:
    """One port's P4 counters (PORT_QUEUE_COUNTERS) in the shape of the TM's statistics."""
    def cell(name, q, i=0):
        return counters[name].get(port_queue_index(port, q), (0, 0))[i]

    queues = []
    for q in range(QUEUES_PER_PORT):
        drops = {"red": cell("red_dropped", q), "credit_meter": cell("credit_dropped", q)}
        if cell("forwarded", q) or any(drops.values()):
            queues.append({"queue": q, "dequeued_pkts": cell("forwarded", q), "dequeued_bytes": cell("forwarded", q, 1),
                           "ecn_marked_pkts": cell("ecn_marked", q), "dropped_pkts": drops,
                           "max_depth_bytes": None, "max_depth_pkts": None})
    return {"port": port, "queues": queues, "source": "p4 counters"}


def occupancy(values: List[int]) -> Optional[List[float]]:
    """[mean, 90th percentile, max] as the model's queue_summary gives them; None without samples."""
    if not values:
        return None
    s = sorted(values)
    return [sum(s) / len(s), float(s[min(len(s) - 1, max(0, math.ceil(0.9 * len(s)) - 1))]), float(s[-1])]


def _queue(stats: dict, qid: int) -> dict:
    return next((q for q in stats.get("queues", []) if q.get("queue") == qid), {})


def summarize(ports: Dict[Tuple[str, str], dict], profile: str, bottleneck: Optional[Tuple[str, str]],
              depth_rows: List[Tuple[float, Dict[int, int]]], window: Tuple[float, float]) -> dict:
    """The model's queue keys from the ports' statistics and the bottleneck's depth samples
    taken in `window` (seconds since sampling began)."""
    order = model_queues(profile)
    tm = any(st.get("source") != "p4 counters" for st in ports.values())
    full = red = credit = 0
    credit_max: Dict[str, Optional[int]] = {"max_depth_pkts": 0, "max_depth_bytes": 0}
    credit_dequeued = 0
    for st in ports.values():
        for q in st.get("queues", []):
            drops = q.get("dropped_pkts") or {}
            if is_credit_queue(q["queue"], profile):
                credit += sum(drops.values())
                credit_dequeued += int(q.get("dequeued_pkts", 0))
                for k, deepest in credit_max.items():  # None: a port without depths (stock BMv2)
                    m = q.get(k)
                    credit_max[k] = None if m is None or deepest is None else max(deepest, int(m))
            else:
                full += sum(drops.get(k, 0) for k in FULL_REASONS)
                red += drops.get("red", 0)
    out = {
        "data_drops_full": full if tm else None,  # BMv2's own queue drops are not counted anywhere
        "data_drops_red": red,
        "credit_drops": credit,
        "credit_queues": {"ports": len(ports), "dequeued_pkts": credit_dequeued, **credit_max},
        "bottleneck": None,
        "queue_summary": None,
    }
    if bottleneck is None or bottleneck not in ports:
        return out
    st = ports[bottleneck]
    qs = [_queue(st, qid) for qid in order]
    name = f"{bottleneck[0]}->{bottleneck[1]}"
    out["bottleneck"] = {
        "port": name, "source": st.get("source", "tm"),
        "max_queue_bytes": [q.get("max_depth_bytes", 0) if q else 0 for q in qs],
        "max_queue_packets": [q.get("max_depth_pkts", 0) if q else 0 for q in qs],
        "queues": [{"queue": qid, "dequeued_pkts": q.get("dequeued_pkts", 0), "dequeued_bytes": q.get("dequeued_bytes", 0),
                    "ecn_marked": q.get("ecn_marked_pkts", 0), "dropped": q.get("dropped_pkts", {})}
                   for qid, q in zip(order, qs)],
    }
    lo, hi = window
    rows = [d for t, d in depth_rows if lo <= t <= hi]
    if rows and profile != PPT:
        q1 = [d.get(order[1], 0) for d in rows]
        busy = [v for v in q1 if v > 0]
        out["queue_summary"] = {
            "port": name, "samples": len(q1), "window_s": [lo, hi],
            "q1": occupancy(q1), "q1_busy": occupancy(busy),
            "q2": occupancy([d.get(order[2], 0) for d in rows]) if len(order) > 2 else None,
        }
    return out
