//! PASE's arbitrators in the model (SIGCOMM'14 §3.1): one per link, each running
//! `flexpass_core::pase::arbitrate` (Algorithm 1) over the PASE flows that cross it, once per
//! arbitration interval (one base RTT). End-to-end arbitration combines the path's links
//! (host → ToR → aggregation → core and down; minimum rate, lowest queue); local-only asks the
//! sender's host link alone. A new flow gets its local arbitration at once (§3.1: no
//! arbitration latency for the first RTT), the end-to-end answer one interval later.
//!
//! Messages: every interval each flow sends one update to each of its arbitrators and gets
//! one answer. The arbitrator of the i-th link of the path sits i links away (the host link's
//! is the host itself), so the pair crosses 2·i links. By default they are packets queued
//! behind data in P0 (`arbitration_packets.rs`): the decision applies when the last answer
//! is back. With `host.pase.messages = "counted"` they are only counted (`messages`,
//! `link_bytes` as 84-byte frames) and the answer arrives after the propagation delay there
//! and back to the farthest arbitrator.
//!
//! Early pruning (§3.1, Fig. 11): the arbitrators are asked level by level up the path (the
//! i-th link is level i); with `early_pruning_queues` = k > 0 a flow whose combined queue
//! after a level is k or lower-priority asks no further (an upper arbitrator could only push
//! it lower still) and keeps the arbitration so far.
//!
//! Delegation (§3.1, Fig. 11; `flexpass_core::pase::delegation`), with `delegation` on: the
//! arbitrator of every link above a flow's first switch (the path's level 2 and up) is a
//! parent, and the flow's first switch (its ToR, the level-1 arbitrator) a child: the parent
//! divides its link into virtual links, one per child, from the children's demand (the sum
//! of their flows' demands on the link) once per `delegation_period`, and the child
//! arbitrates its own flows over its virtual link within the flow's exchange with it. So a
//! flow's update and answer reach only its ToR; the division costs one report and one answer
//! per (parent link, child) per period, crossing the links between them (level − 1 each
//! way).

use super::arbitration_packets::{request_wire_bytes, response_wire_bytes, InFlight};
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
    delegations: BTreeMap<Link, Delegation>,
    pub stats: ArbitrationStats,
    ticking: bool,
    /// Indices of the PASE flows started and not yet complete (pruned every round), so a
    /// round costs the active flows, not every flow of the run.
    active: Vec<usize>,
}

/// Arbitration overhead over the run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ArbitrationStats {
    /// Update and answer messages.
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
    /// Messages as packets: rounds whose answers all came back, the time from the updates
    /// to the last answer (mean, max), and messages that never arrived; absent when counted.
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
type Link = (NodeId, usize);

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

    /// The active PASE flows: (flow index, remaining bytes); the finished ones leave the
    /// list.
    fn pase_flows(&mut self) -> Vec<(usize, u64)> {
        let Some(arb) = self.pase.as_mut() else {
            return vec![];
        };
        let flows = &self.flows;
        let remaining = |i: usize| {
            let f = &flows[i];
            let s = f.sender.as_ref()?;
            (s.transport() == TransportKind::Pase && !s.is_complete()).then(|| {
                let size = f.spec.size.unwrap_or(u64::MAX);
                size.saturating_sub(s.acked_bytes())
            })
        };
        arb.active.retain(|&i| remaining(i).is_some());
        arb.active
            .iter()
            .filter_map(|&i| remaining(i).map(|r| (i, r)))
            .collect()
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
        self.pase.as_mut().expect("checked").active.push(flow);
        let src = self.flows[flow].spec.src;
        let host_link = (self.hosts[src], 0usize);
        let mut link_flows = vec![];
        for (i, remaining) in self.pase_flows() {
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
        if !ticking {
            self.pase.as_mut().expect("checked").ticking = true;
            let at = self.now + interval;
            self.schedule(at, Ev::Arbitrate);
        }
    }

    /// One arbitration round over every active PASE flow, level by level up the paths
    /// (early pruning between levels); answers delivered after their round trip to the
    /// farthest arbitrator asked.
    pub(super) fn arbitration_round(&mut self) {
        let Some(arb) = self.pase.as_ref() else {
            return;
        };
        let (end_to_end, queues, base, interval, prune) = (
            arb.end_to_end,
            arb.queues,
            arb.base_rate_bps,
            arb.interval,
            arb.early_pruning_queues,
        );
        let delegation = arb.delegation_period.filter(|_| end_to_end);
        let packets = arb.packets;
        // Wire bytes of an update and its answer (84-byte frames when only counted).
        let pair_bytes = if packets {
            request_wire_bytes() + response_wire_bytes()
        } else {
            2 * MESSAGE_WIRE_BYTES
        };
        let active = self.pase_flows();
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
            /// Levels ≥ 1 asked (their arbitrators are links away).
            asked: Vec<usize>,
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
                    asked: vec![],
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
                if level > 0 {
                    a.asked.push(level);
                }
                a.farthest = a.one_way;
                a.one_way += self.nodes[n].ports[p].link.delay;
                by_link.entry((n, p)).or_default().push(demand);
            }
            if by_link.is_empty() && by_child.is_empty() {
                break;
            }
            if let Some(period) = delegation {
                let (m, b) = self.delegate_links(&by_child, level, period, pair_bytes, packets);
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
        let by_packet: BTreeMap<u32, (Vec<usize>, u64, f64)> = if packets {
            asking
                .iter_mut()
                .filter(|a| !a.asked.is_empty())
                .map(|a| {
                    (
                        a.flow,
                        (std::mem::take(&mut a.asked), a.remaining, a.demand_bps),
                    )
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        for (flow, a) in decided {
            if let Some((levels, remaining, demand)) = by_packet.get(&flow) {
                self.send_arbitration_updates(flow as usize, a, levels, *remaining, *demand);
                continue;
            }
            if packets {
                // Answered at the host itself: in force now, over older rounds on their way.
                self.arbitration_applied_now(flow);
            }
            let at = self.now + delays[&flow];
            let ev = Ev::Arbitration {
                flow,
                queue: a.queue,
                rate_kbps: (a.reference_rate_bps / 1e3)
                    .round()
                    .clamp(1.0, u32::MAX as f64) as u32,
            };
            self.schedule(at, ev);
        }
        let arb = self.pase.as_mut().expect("checked");
        arb.stats.rounds += 1;
        arb.stats.messages += messages;
        arb.stats.link_bytes += link_bytes;
        arb.stats.pruned += pruned;
        self.forget_lost_arbitration_messages();
        let arb = self.pase.as_mut().expect("checked");
        // Rounds stop when no PASE flow is active; the next one to start restarts them.
        arb.ticking = !active.is_empty();
        if arb.ticking {
            let at = self.now + interval;
            self.schedule(at, Ev::Arbitrate);
        }
    }

    /// Delegation: every parent link of `by_child` whose period is up (or that has none
    /// yet) is divided among its children from their demand now. Returns the messages and
    /// link bytes: per child one report and one answer, `level` − 1 links each way (sent as
    /// packets with `packets`; the division applies at once either way).
    fn delegate_links(
        &mut self,
        by_child: &BTreeMap<(Link, NodeId), Vec<FlowDemand>>,
        level: usize,
        period: Nanos,
        pair_bytes: u64,
        packets: bool,
    ) -> (u64, u64) {
        let mut demands: BTreeMap<Link, Vec<ChildDemand>> = BTreeMap::new();
        for (&(link, child), flows) in by_child {
            demands.entry(link).or_default().push(ChildDemand {
                child: child as u32,
                demand_bps: flows.iter().map(|f| f.demand_bps).sum(),
            });
        }
        let now = self.now;
        let capacity = |l: &Link| self.nodes[l.0].ports[l.1].link.bps;
        let capacities: Vec<(Link, f64)> = demands.keys().map(|l| (*l, capacity(l))).collect();
        let arb = self.pase.as_mut().expect("checked");
        let (mut messages, mut bytes) = (0u64, 0u64);
        let mut reports = vec![];
        for (link, c) in capacities {
            let d = arb
                .delegations
                .entry(link)
                .or_insert_with(|| Delegation::new(c, period));
            if d.due(now) {
                let children = d.update(now, &demands[&link]) as u64;
                arb.stats.delegations += 1;
                messages += 2 * children;
                bytes += children * (level as u64 - 1) * pair_bytes;
                if packets {
                    // Each child's report, routed as one of its flows on the link.
                    reports.extend(
                        by_child
                            .range((link, 0)..=(link, NodeId::MAX))
                            .filter_map(|(&(_, child), f)| Some((child, f.first()?.flow))),
                    );
                }
            }
        }
        for (child, flow) in reports {
            self.send_delegation_report(child, flow as usize, level - 1);
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
