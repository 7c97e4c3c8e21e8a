"""PASE (Munir et al., SIGCOMM'14) in an emulation: the rack arbitrator and the agents'
arbitration flags (emulate.py calls these when a flow's transport is ``pase``).

The testbed of PASE Fig. 13(b) is one rack: the arbitrator of the rack's bottleneck, the
link into the busiest receiver (the server), is a ``flexpass arbitrator`` process on a host
of its own on the rack's switch (prepare), told the link's emulated rate C', the emulated
base RTT (Algorithm 1's base rate: one frame per RTT) and the queue count; every agent runs
PASE with ``--arbitrator`` and asks it every arbitration interval (the model's base RTT,
scaled to keep the model's messages per data packet: arbitration_interval_us). In the model the
arbitrator sits in the ToR, one link from each host; here its requests and answers cross
two (client -> switch -> arbitrator host), in P0 like the model's, and never the bottleneck.

The model's ``host.pase`` keys the agent has flags for are honoured (``queues``,
``probing``, ``delegation``); the others are refused by name (emulate.WHY).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

from .env import ExperimentError

#: UDP port of the rack arbitrator (the agents' own port is 7890).
ARBITRATOR_PORT = 7900

#: host.pase keys this backend honours (agent flags), for emulate.HONOURED.
HONOURED = {"host.pase.queues", "host.pase.probing", "host.pase.delegation"}

#: Host keys honoured in a PASE experiment only (`agent_flags` scales them for every case
#: of it), refused elsewhere.
HONOURED_IN_PASE = {"host.rto_min_ms", "host.init_cwnd"}

#: The model's defaults of the other host.pase keys (PaseSpec::default; the resolved
#: defaults leave the pase table out when it is all default): only other values are refused.
DEFAULTS = {"host.pase.arbitration": "end-to-end", "host.pase.reference_rate": True,
            "host.pase.early_pruning_queues": 0, "host.pase.delegation_period_us": 0,
            "host.pase.messages": "packets"}

#: Why the other host.pase keys cannot run here (emulate.WHY).
WHY = {
    "host.pase.arbitration": "without an arbitrator the agent puts every flow in the top queue at line rate, "
                             "not the host link's Algorithm 1: only end-to-end arbitration runs here",
    "host.pase.reference_rate": "the agent has no PASE-DCTCP mode (it always takes the reference rate)",
    "host.pase.early_pruning_queues": "one rack has one arbitrator above the hosts: nothing to prune",
    "host.pase.delegation_period_us": "the agent's delegation period is ten arbitration intervals",
    "host.pase.messages": "arbitration messages are always packets on real links",
}


def uses_pase(plan) -> bool:
    return any(f.transport == "pase" for f in plan.flows)


def arbitrator_host(plan) -> str:
    """The host of the rack arbitrator: one more host on the rack's switch (prepare), the
    last of the fabric's."""
    return f"h{len(plan.fabric.hosts) - 1}"


def prepare(plan) -> None:
    """Refuse the plan's PASE settings this backend cannot run (an error naming the key),
    and give the rack arbitrator its host: one more host on the rack's switch, with its own
    link, so that requests and answers cross the senders' links and that one, never the
    bottleneck into the server (the model's arbitrator of that link is the ToR itself)."""
    if not uses_pase(plan):
        return
    if plan.experiment["topology"]["kind"] != "star":
        raise ExperimentError(f"{plan.name}: transport pase on mininet: one rack only (topology.kind = \"star\", "
                              f"PASE's testbed), got {plan.experiment['topology']['kind']!r}")
    sw = plan.experiment["switch"]
    if plan.profile != "ppt":
        raise ExperimentError(f"{plan.name}: transport pase needs switch.profile = \"ppt\" (eight strict priorities "
                              f"with ECN per queue), got {plan.profile!r}")
    if sw.get("ecn_basis") not in (None, "queue"):
        raise ExperimentError(f"{plan.name}: switch.ecn_basis = {sw['ecn_basis']!r}: not supported on mininet "
                              "(flexpass_switch compares K with the packet's own queue: \"queue\")")
    kinds = {f.kind for f in plan.flows if f.transport == "pase"}
    if kinds - {"listed", "background", "foreground"}:
        raise ExperimentError(f"{plan.name}: pase incast groups: not supported on mininet (`flexpass incast` "
                              "has no arbitrator flag)")
    name = f"h{len(plan.fabric.hosts)}"
    plan.fabric.host(name)
    plan.fabric.link(name, next(iter(plan.fabric.switches)))


def agent_flags(plan) -> List[str]:
    """The agents' PASE flags: the rack arbitrator, the scaled arbitration interval, and the
    host.pase keys the agent has; and in a PASE experiment (deployment.transport = "pase"),
    for every case (DCTCP's too), the model's RTO_min scaled like every other time: a flow
    in a lower queue waits behind the top one, and the agent's own 4 ms would be 4 emulated
    RTTs where the model's is 16 of its RTTs (spurious timeouts, measured: 567 in 150 flows);
    and the initial window (10 packets, half the model's BDP) scaled with the BDP: 10 packets
    from each of 9 clients would overflow the emulated 29-packet buffer at once (DCTCP
    timeouts the model does not have)."""
    flags = []
    if plan.experiment["deployment"].get("transport") == "pase":
        host = plan.experiment["host"]
        init = (host.get("init_cwnd") or 10.0) * plan.scaled.bdp_ratio
        flags += ["--rto-min-ms", f"{host['rto_min_ms'] * plan.time_scale:g}",
                  "--init-cwnd", f"{max(1.0, round(init)):g}"]
    if not uses_pase(plan):
        return flags
    pase = plan.experiment["host"].get("pase") or {}
    ip = plan.fabric.hosts[arbitrator_host(plan)].ip
    interval_us = arbitration_interval_us(plan)
    flags += ["--arbitrator", f"{ip}:{ARBITRATOR_PORT}", "--arbitration-interval-us", f"{interval_us:.0f}",
              "--pase-queues", str(pase.get("queues", 8))]
    if pase.get("probing"):
        flags.append("--pase-probing")
    if pase.get("delegation"):
        flags.append("--pase-delegation")
    return flags


def arbitration_interval_us(plan) -> float:
    """The agents' arbitration interval: the model's (one base RTT) scaled so that a flow
    sends as many ARBITRATION_REQUESTs per data packet as in the model — one per BDP of
    data: the model's base RTT × time scale / BDP ratio. BMv2 forwards every message as it
    forwards a data packet, and at the emulated BDP (a few frames) one request per flow per
    emulated RTT outnumbers the data several times and starves the switch's CPU (measured:
    570 k requests in 100 s, HELLOs lost at the switch's input)."""
    return plan.model_rtt_us * plan.time_scale / plan.scaled.bdp_ratio


def arbitrator_command(plan) -> List[str]:
    """``flexpass arbitrator`` of the link into the arbitrator's host (C', RTT', queues)."""
    pase = plan.experiment["host"].get("pase") or {}
    ip = plan.fabric.hosts[arbitrator_host(plan)].ip
    s = plan.scaled
    return ["arbitrator", "--listen", f"{ip}:{ARBITRATOR_PORT}", "--link-mbit", f"{s.link_rate_bps / 1e6:g}",
            "--queues", str(pase.get("queues", 8)), "--rtt-us", f"{s.base_rtt_s * 1e6:.0f}"]


def describe(plan) -> Optional[str]:
    if not uses_pase(plan):
        return f"  agents: {' '.join(agent_flags(plan))}" if agent_flags(plan) else None
    return (f"  PASE: rack arbitrator on {arbitrator_host(plan)} ({' '.join(arbitrator_command(plan)[1:])}); "
            f"agents: {' '.join(agent_flags(plan))}")


def arbitrator_stats(out: Path) -> Optional[dict]:
    """What the arbitrator printed when it stopped (its link's counters), or None."""
    p = out / "arbitrator.jsonl"
    if not p.is_file():
        return None
    for line in reversed(p.read_text().splitlines()):
        try:
            return json.loads(line).get("stats")
        except (ValueError, AttributeError):
            continue
    return None
