//! PASE's arbitrators in the model (SIGCOMM'14 §3.1): one per link, each running Algorithm 1
//! (`flexpass_core::pase`) over the PASE flows that cross it. End-to-end arbitration combines
//! the path's links (host → ToR → aggregation → core and down; minimum rate, lowest queue);
//! local-only asks the sender's host link alone. Every arbitration interval (one base RTT)
//! each flow sends one update to each of its arbitrators and gets one answer; the arbitrator
//! of the i-th link of the path sits i links away (the host link's is the host itself). A new
//! flow gets its local arbitration at once (§3.1: no arbitration latency for the first RTT).
//!
//! Two modes. By default (`host.pase.messages = "packets"`, `arbitration_packets.rs`) the
//! messages are packets queued behind data in P0, and each arbitrator keeps soft state of the
//! flows it heard from and answers each update when it arrives, from its table as it is
//! then; a new flow sends its updates at once. With `"counted"` (this file) the arbitrators
//! decide at the round for all active flows at once, from the flows' state then; the
//! messages are only counted (`messages`, `link_bytes` as 84-byte frames, the pair crossing
//! 2·i links) and the answer arrives after the propagation delay there and back to the
//! farthest arbitrator; a new flow's end-to-end answer comes with the next round.
//!
//! Early pruning (§3.1, Fig. 11): the arbitrators are asked level by level up the path (the
//! i-th link is level i); with `early_pruning_queues` = k > 0 a flow whose combined queue
//! after a level is k or lower-priority asks no further (an upper arbitrator could only push
//! it lower still) and keeps the arbitration so far. (Packets: the update goes up the path
//! from arbitrator to arbitrator, and the one that finds it low keeps it.)
//!
//! Delegation (§3.1, Fig. 11; `flexpass_core::pase::delegation`), with `delegation` on: the
//! arbitrator of every link above a flow's first switch (the path's level 2 and up) is a
//! parent, and the flow's first switch (its ToR, the level-1 arbitrator) a child: the parent
//! divides its link into virtual links, one per child, from the children's demand (the sum
//! of their flows' demands on the link) once per `delegation_period`, and the child
//! arbitrates its own flows over its virtual link within the flow's exchange with it. So a
//! flow's update and answer reach only its ToR; the division costs one report and one answer
//! per (parent link, child) per period, crossing the links between them (level − 1 each
//! way). The division is made at the round (both modes); with packets, from the demand in
//! the children's tables (the flows each heard from on the parent link).

use super::arbitration_packets::InFlight;
use super::{Ev, Network, NodeId};
use crate::packet::HostId;
use flexpass_core::pase::delegation::{arbitrate_virtual, ChildDemand, Delegation};
use flexpass_core::pase::{arbitrate, Arbitration, FlowDemand};
use flexpass_core::Nanos;
use flexpass_wire::TransportKind;
use serde::Serialize;
use std::collections::BTreeMap;

/// Wire bytes of one arbitration message (a minimum Ethernet frame with preamble and gap).
pub const MESSAGE_WIRE_BYTES: u64 = 84;

/// The model's PASE control plane.
#[derive(Clone, Debug)]
pub struct PaseArbitration {
    /// End-to-end (true) or local-only (false) arbitration.
    pub end_to_end: bool,
    pub queues: u8,
    /// Arbitration interval: one base RTT.
    pub interval: Nanos,
    /// Algorithm 1's base rate of a flow that does not fit: one packet per RTT, bit/s.
    pub base_rate_bps: f64,
    /// Early pruning: only flows in the top this-many queues go up a level; 0: off.
    pub early_pruning_queues: u8,
    /// Delegation: links above the ToR are divided into virtual links every period (None:
    /// off).
    pub delegation_period: Option<Nanos>,
    /// Messages as packets through the queues (true) or counted only (false).
    pub packets: bool,
    pub(super) in_flight: InFlight,
    /// The parent links' divisions in force.
    pub(super) delegations: BTreeMap<Link, Delegation>,
    pub stats: ArbitrationStats,
    ticking: bool,
    /// Indices of the PASE flows started and not yet complete (pruned every round), so a
    /// round costs the active flows, not every flow of the run.
    active: Vec<usize>,
}

/// Arbitration overhead over the run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ArbitrationStats {
    /// Update and answer messages (packets: an update counts once per arbitrator it
    /// reaches, crossing the one link from the one below; a release likewise, unanswered).
    pub messages: u64,
    /// Their wire bytes summed over the links each crossed.
    pub link_bytes: u64,
    /// Arbitration rounds run.
    pub rounds: u64,
    /// Answers a sender refused (none expected: the model's arbitrators are honest).
    pub rejected: u64,
    /// Flows stopped short of the rest of their path by early pruning, summed over rounds.
    pub pruned: u64,
    /// Delegation: divisions of a parent link among its children (their report and answer
    /// messages are in `messages` and `link_bytes`); absent when off.
    #[serde(skip_serializing_if = "is_zero")]
    pub delegations: u64,
    /// Flow decisions a child made over its virtual link (summed over rounds and levels).
    #[serde(skip_serializing_if = "is_zero")]
    pub delegated: u64,
    /// Probing (§3.3, summed over the PASE senders at the end of the run): probes sent,
    /// and those whose answer showed room; absent when off.
    #[serde(skip_serializing_if = "is_zero")]
    pub probes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub probe_resumes: u64,
    /// Messages as packets: asks (a flow's updates of a round, or at its start) whose
    /// answers all came back, the time from the update to the last answer (mean, max), and
    /// messages that never arrived; absent when counted.
    #[serde(skip_serializing_if = "is_zero")]
    pub decisions_by_packet: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub decision_delay_mean_ns: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub decision_delay_max_ns: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub messages_lost: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl PaseArbitration {
    pub fn new(end_to_end: bool, queues: u8, interval: Nanos, base_rate_bps: f64) -> Self {
        PaseArbitration {
            end_to_end,
            queues,
            interval: interval.max(1),
            base_rate_bps,
            early_pruning_queues: 0,
            delegation_period: None,
            packets: true,
            in_flight: InFlight::default(),
            delegations: BTreeMap::new(),
            stats: ArbitrationStats::default(),
            ticking: false,
            active: Vec::new(),
        }
    }
}

/// A link of a path: the transmitting node and its egress port.
pub(super) type Link = (NodeId, usize);

/// Delegation: a child's demand report to a parent link for the division.
pub(super) struct Report {
    pub link: Link,
    pub child: NodeId,
    pub demand_bps: f64,
    /// Links between child and parent.
    pub hops: usize,
    /// One of the child's flows on the link (the report is routed as its packets).
    pub flow: u32,
}

impl Network {
    /// The egress ports a flow's data crosses from `src` to `dst` (ECMP as `route`).
    fn path_links(&self, flow_id: u32, src: HostId, dst: HostId) -> Vec<Link> {
        let mut out = vec![];
        let mut node = self.hosts[src];
        while self.nodes[node].host != Some(dst) && out.len() < 16 {
            let n = &self.nodes[node];
            let Some(port) = self.route_flow(node, flow_id, src, dst) else {
                break;
            };
            out.push((node, port));
            node = n.ports[port].peer;
        }
        out
    }

    /// A PASE flow's remaining bytes (None once complete).
    pub(super) fn pase_remaining(&self, i: usize) -> Option<u64> {
        let f = &self.flows[i];
        let s = f.sender.as_ref()?;
        (s.transport() == TransportKind::Pase && !s.is_complete()).then(|| {
            let size = f.spec.size.unwrap_or(u64::MAX);
            size.saturating_sub(s.acked_bytes())
        })
    }

    /// The active PASE flows: (flow index, remaining bytes); the finished ones leave the
    /// list into `finished`.
    pub(super) fn pase_flows(&mut self, finished: &mut Vec<usize>) -> Vec<(usize, u64)> {
        let Some(mut active) = self.pase.as_mut().map(|a| std::mem::take(&mut a.active)) else {
            return vec![];
        };
        let mut out = Vec::with_capacity(active.len());
        active.retain(|&i| match self.pase_remaining(i) {
            Some(r) => {
                out.push((i, r));
                true
            }
            None => {
                finished.push(i);
                false
            }
        });
        self.pase.as_mut().expect("checked").active = active;
        out
    }

    /// Algorithm 1 on every link in `by_link`; each flow's decisions combined.
    fn run_arbitrators(
        &self,
        by_link: BTreeMap<Link, Vec<FlowDemand>>,
        queues: u8,
        base_rate_bps: f64,
    ) -> BTreeMap<u32, Arbitration> {
        let mut combined: BTreeMap<u32, Arbitration> = BTreeMap::new();
        let mut out = vec![];
        for ((node, port), mut flows) in by_link {
            out.clear();
            let capacity = self.nodes[node].ports[port].link.bps;
            arbitrate(capacity, queues, base_rate_bps, &mut flows, &mut out);
            for &(flow, a) in &out {
                combined
                    .entry(flow)
                    .and_modify(|c| *c = c.combine(a))
                    .or_insert(a);
            }
        }
        combined
    }

    /// A PASE flow started: its local arbitration now, and the rounds from now on.
    pub(super) fn pase_flow_started(&mut self, flow: usize) {
        let Some(arb) = self.pase.as_ref() else {
            return;
        };
        if self.flows[flow].spec.transport != TransportKind::Pase {
            return;
        }
        let (queues, base, ticking, interval) =
            (arb.queues, arb.base_rate_bps, arb.ticking, arb.interval);
        let packets = arb.packets;
        self.pase.as_mut().expect("checked").active.push(flow);
        if !ticking {
            self.pase.as_mut().expect("checked").ticking = true;
            let at = self.now + interval;
            self.schedule(at, Ev::Arbitrate);
        }
        if packets {
            // Its host answers at once; its updates go up now.
            let remaining = self.pase_remaining(flow).unwrap_or(0);
            let (a, sent) = self.ask_arbitrators(flow, remaining);
            if !sent {
                self.arbitration_applied_now(flow as u32);
            }
            self.apply_arbitration(flow, a);
            return;
        }
        let src = self.flows[flow].spec.src;
        let host_link = (self.hosts[src], 0usize);
        let mut link_flows = vec![];
        for (i, remaining) in self.pase_flows(&mut vec![]) {
            if self.flows[i].spec.src == src {
                let demand_bps = self.nodes[host_link.0].ports[0].link.bps;
                link_flows.push(FlowDemand {
                    flow: i as u32,
                    remaining,
                    demand_bps,
                });
            }
        }
        let decided = self.run_arbitrators(BTreeMap::from([(host_link, link_flows)]), queues, base);
        if let Some(&a) = decided.get(&(flow as u32)) {
            self.apply_arbitration(flow, a);
        }
    }

    /// One arbitration round: with packets, every active flow's host sends its updates
    /// (`ask_round`); counted, the arbitrators decide for every active flow now
    /// (`decide_round`). Rounds stop when no PASE flow is active; the next one to start
    /// restarts them.
    pub(super) fn arbitration_round(&mut self) {
        let Some(arb) = self.pase.as_ref() else {
            return;
        };
        let interval = arb.interval;
        let any = if arb.packets {
            self.ask_round()
        } else {
            self.decide_round()
        };
        let arb = self.pase.as_mut().expect("checked");
        arb.stats.rounds += 1;
        self.forget_lost_arbitration_messages();
        let arb = self.pase.as_mut().expect("checked");
        arb.ticking = any;
        if arb.ticking {
            let at = self.now + interval;
            self.schedule(at, Ev::Arbitrate);
        }
    }

    /// Counted messages: the arbitrators decide for every active PASE flow at the round,
    /// level by level up the paths (early pruning between levels); answers delivered after
    /// their round trip to the farthest arbitrator asked. Returns whether any flow is active.
    fn decide_round(&mut self) -> bool {
        let arb = self.pase.as_ref().expect("checked by the caller");
        let (end_to_end, queues, base, prune) = (
            arb.end_to_end,
            arb.queues,
            arb.base_rate_bps,
            arb.early_pruning_queues,
        );
        let delegation = arb.delegation_period.filter(|_| end_to_end);
        // Wire bytes of an update and its answer: 84-byte frames.
        let pair_bytes = 2 * MESSAGE_WIRE_BYTES;
        let active = self.pase_flows(&mut vec![]);
        // Per flow: its links, its demand (the host link's rate), the one-way delay to the
        // next level's arbitrator and to the farthest asked, and whether it still goes up.
        struct Asking {
            flow: u32,
            remaining: u64,
            links: Vec<Link>,
            demand_bps: f64,
            one_way: Nanos,
            farthest: Nanos,
            going_up: bool,
        }
        let mut asking: Vec<Asking> = active
            .iter()
            .map(|&(i, remaining)| {
                let spec = &self.flows[i].spec;
                let mut links = self.path_links(spec.id, spec.src, spec.dst);
                if !end_to_end {
                    links.truncate(1);
                }
                let demand_bps = links
                    .first()
                    .map_or(0.0, |&(n, p)| self.nodes[n].ports[p].link.bps);
                Asking {
                    flow: i as u32,
                    remaining,
                    links,
                    demand_bps,
                    one_way: 0,
                    farthest: 0,
                    going_up: true,
                }
            })
            .collect();
        let (mut messages, mut link_bytes, mut pruned) = (0u64, 0u64, 0u64);
        let mut decided: BTreeMap<u32, Arbitration> = BTreeMap::new();
        for level in 0.. {
            let mut by_link: BTreeMap<Link, Vec<FlowDemand>> = BTreeMap::new();
            // Delegated levels: (parent link, child) → the child's flows on it.
            let mut by_child: BTreeMap<(Link, NodeId), Vec<FlowDemand>> = BTreeMap::new();
            for a in asking.iter_mut().filter(|a| a.going_up) {
                let Some(&(n, p)) = a.links.get(level) else {
                    a.going_up = false;
                    continue;
                };
                let demand = FlowDemand {
                    flow: a.flow,
                    remaining: a.remaining,
                    demand_bps: a.demand_bps,
                };
                if delegation.is_some() && level >= 2 {
                    // Answered by the flow's ToR (level 1) in the same exchange.
                    by_child
                        .entry(((n, p), a.links[1].0))
                        .or_default()
                        .push(demand);
                    continue;
                }
                // The level's arbitrator is `level` links away: update and answer.
                messages += 2;
                link_bytes += level as u64 * pair_bytes;
                a.farthest = a.one_way;
                a.one_way += self.nodes[n].ports[p].link.delay;
                by_link.entry((n, p)).or_default().push(demand);
            }
            if by_link.is_empty() && by_child.is_empty() {
                break;
            }
            if let Some(period) = delegation {
                let reports: Vec<Report> = by_child
                    .iter()
                    .map(|(&(link, child), flows)| Report {
                        link,
                        child,
                        demand_bps: flows.iter().map(|f| f.demand_bps).sum(),
                        hops: level - 1,
                        flow: flows[0].flow,
                    })
                    .collect();
                let (m, b) = self.delegate_links(&reports, period, pair_bytes, false);
                messages += m;
                link_bytes += b;
                let arb = self.pase.as_mut().expect("checked");
                let mut out = vec![];
                for ((link, child), mut flows) in by_child {
                    let share = arb.delegations[&link].share(child as u32);
                    out.clear();
                    arbitrate_virtual(share, queues, base, &mut flows, &mut out);
                    arb.stats.delegated += out.len() as u64;
                    for &(flow, a) in &out {
                        decided
                            .entry(flow)
                            .and_modify(|c| *c = c.combine(a))
                            .or_insert(a);
                    }
                }
            }
            for (flow, a) in self.run_arbitrators(by_link, queues, base) {
                decided
                    .entry(flow)
                    .and_modify(|c| *c = c.combine(a))
                    .or_insert(a);
            }
            if prune > 0 {
                for a in asking.iter_mut().filter(|a| a.going_up) {
                    let low = decided.get(&a.flow).is_some_and(|d| d.queue >= prune);
                    if low && a.links.len() > level + 1 {
                        a.going_up = false;
                        pruned += 1;
                    }
                }
            }
        }
        let delays: BTreeMap<u32, Nanos> =
            asking.iter().map(|a| (a.flow, 2 * a.farthest)).collect();
        for (flow, a) in decided {
            let at = self.now + delays[&flow];
            self.schedule(at, Ev::arbitration(flow, a));
        }
        let arb = self.pase.as_mut().expect("checked");
        arb.stats.messages += messages;
        arb.stats.link_bytes += link_bytes;
        arb.stats.pruned += pruned;
        !active.is_empty()
    }

    /// Delegation: every parent link of `reports` whose period is up (or that has none yet)
    /// is divided among its children from their demand now. Returns the messages and link
    /// bytes: per child one report and one answer, `hops` links each way (sent as packets
    /// with `packets`; the division applies at once either way).
    pub(super) fn delegate_links(
        &mut self,
        reports: &[Report],
        period: Nanos,
        pair_bytes: u64,
        packets: bool,
    ) -> (u64, u64) {
        let mut demands: BTreeMap<Link, Vec<ChildDemand>> = BTreeMap::new();
        for r in reports {
            demands.entry(r.link).or_default().push(ChildDemand {
                child: r.child as u32,
                demand_bps: r.demand_bps,
            });
        }
        let now = self.now;
        let capacity = |l: &Link| self.nodes[l.0].ports[l.1].link.bps;
        let capacities: Vec<(Link, f64)> = demands.keys().map(|l| (*l, capacity(l))).collect();
        let arb = self.pase.as_mut().expect("checked");
        let (mut messages, mut bytes) = (0u64, 0u64);
        let mut sends = vec![];
        for (link, c) in capacities {
            let d = arb
                .delegations
                .entry(link)
                .or_insert_with(|| Delegation::new(c, period));
            if d.due(now) {
                let children = d.update(now, &demands[&link]) as u64;
                let of_link = || reports.iter().filter(move |r| r.link == link);
                let hops = of_link().next().map_or(0, |r| r.hops) as u64;
                arb.stats.delegations += 1;
                messages += 2 * children;
                bytes += children * hops * pair_bytes;
                if packets {
                    // Each child's report, routed as one of its flows on the link.
                    sends.extend(of_link().map(|r| (r.child, r.flow, r.hops)));
                }
            }
        }
        for (child, flow, hops) in sends {
            self.send_delegation_report(child, flow as usize, hops);
        }
        (messages, bytes)
    }

    /// An arbitration answer reaches its sender.
    pub(super) fn apply_arbitration(&mut self, flow: usize, a: Arbitration) {
        let Some(s) = self.flows[flow].sender.as_mut() else {
            return;
        };
        let id = s.flow_id();
        if s.is_complete() {
            return;
        }
        if s.on_arbitration(id, a).is_err() {
            if let Some(arb) = self.pase.as_mut() {
                arb.stats.rejected += 1;
            }
        }
    }
}
