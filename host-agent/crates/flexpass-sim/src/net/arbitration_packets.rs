//! PASE's arbitration messages as packets and its arbitrators' soft state
//! (`host.pase.messages = "packets"`, the default). Every update a flow sends is an
//! ARBITRATION_REQUEST (docs/protocol.md §6.11, 94 bytes on the wire) and every answer an
//! ARBITRATION_RESPONSE (§6.12, 90 bytes); they cross the links hop by hop through the
//! modelled ports' queues. A delegation report (child ToR → parent) and its answer are the
//! same two messages between the two switches.
//!
//! Arbitrators (§3.1): each keeps a table of the flows it heard from (their last reported
//! remaining size and demand, and when) and answers each update when it arrives, from its
//! table as it is then: the arriving flow's entry refreshed first, Algorithm 1 with the
//! demand of the entries ahead of it (`pase::arbitrate_flow`). An entry not refreshed for
//! `EXPIRE_INTERVALS` intervals expires (a flow pruned below the arbitrator, or whose host
//! vanished); a finished flow's host sends one last update with remaining 0 at the next
//! round (a release, as the agents do), which removes its entries on the way and is not
//! answered. The host link's arbitrator is the host itself: it answers at once.
//!
//! A round's update leaves the host for the level-1 arbitrator (one link up); each
//! arbitrator answers it back to the host (`level` links) and forwards it one link up to the
//! next level's, unless the path ends there, early pruning stops it (the flow's queue
//! combined so far is k or lower) or delegation (the ToR answers the levels above it over
//! its virtual links, `arbitrate_virtual_flow`, in the same exchange). The flow takes the
//! combination of the answers (minimum rate, lowest queue) when the last is back, unless a
//! later ask's decision came first: busy links delay it (rounds overlap when they are busy
//! enough), and a lost message leaves the flow on its last decision.
//!
//! Queue: the top priority P0 (DSCP 32 + 0), the queue of the top PASE flow's data, FIFO
//! behind it. The evaluation excerpt does not name a queue for control traffic; P0 is our
//! reading of the design (an arbitration answer is what moves a flow up, so it must not wait
//! behind the data it re-orders) and what the P4 profile does (ptf PaseOnPriorityProfile).

use super::arbitration::{Link, Report};
use super::{Ev, Network, NodeId};
use crate::packet::{PathHash, SimPacket};
use flexpass_core::pase::delegation::arbitrate_virtual_flow;
use flexpass_core::pase::{arbitrate_flow, Arbitration};
use flexpass_core::Nanos;
use flexpass_wire::{ArbitrationRequest, ArbitrationResponse, Ecn, Packet, TrafficClass};
use std::collections::{BTreeMap, HashMap};

/// Rounds after which a message not yet arrived is counted lost and forgotten.
const LOST_AFTER_ROUNDS: u64 = 64;

/// Arbitration intervals after which an arbitrator forgets a flow it has not heard from.
pub const EXPIRE_INTERVALS: u64 = 3;

/// What a message in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MsgKind {
    /// A flow's update on its way to the arbitrator of level `hops` of its path.
    Update,
    /// The arbitrator's answer back to the flow's host.
    Answer,
    /// A child ToR's demand report to a parent `hops` links up.
    Report,
    /// The parent's answer (its share) back to the child.
    Share,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Msg {
    kind: MsgKind,
    /// Flow index.
    flow: u32,
    round: u64,
    /// The flow's ask (one per round and flow, and one at its start) it belongs to.
    ask: u64,
    /// Links still to cross; the message is for the node where it reaches 0.
    hops_left: u32,
    /// Links between the two ends (the answer's way back); an update's level.
    hops: u32,
    /// An update: the arbitration combined so far (early pruning); an answer: its answer.
    arbitration: Arbitration,
}

/// A flow's ask whose answers are on their way.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    outstanding: u32,
    /// The answers so far, combined.
    decision: Arbitration,
    sent: Nanos,
    round: u64,
}

/// An arbitrator's entry for a flow it heard from.
#[derive(Clone, Copy, Debug)]
struct Known {
    remaining: u64,
    demand_bps: f64,
    heard: Nanos,
}

/// One arbitrator's soft state: the flows it heard from, by flow index.
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    flows: BTreeMap<u32, Known>,
    /// A virtual link's table: links between the child and the parent.
    hops: usize,
}

impl Table {
    fn expire(&mut self, now: Nanos, expire: Nanos) {
        self.flows
            .retain(|_, k| now.saturating_sub(k.heard) < expire);
    }

    /// Refresh `flow`'s entry; the demand of the entries ahead of it (less remaining, ties
    /// by flow index, as Algorithm 1 orders them).
    fn refresh(
        &mut self,
        now: Nanos,
        expire: Nanos,
        flow: u32,
        remaining: u64,
        demand: f64,
    ) -> f64 {
        self.expire(now, expire);
        let known = Known {
            remaining,
            demand_bps: demand,
            heard: now,
        };
        self.flows.insert(flow, known);
        self.flows
            .iter()
            .filter(|(&f, k)| (k.remaining, f) < (remaining, flow))
            .map(|(_, k)| k.demand_bps)
            .sum()
    }
}

/// The packets mode's state (part of `PaseArbitration`): messages in flight, asks waiting
/// for answers, and the arbitrators' tables.
#[derive(Clone, Debug, Default)]
pub(super) struct InFlight {
    msgs: HashMap<u32, Msg>,
    /// By (flow, ask).
    pending: HashMap<(u32, u64), Pending>,
    /// The ask of each flow's decision in force.
    applied: HashMap<u32, u64>,
    next_token: u32,
    next_ask: u64,
    delay_sum: u128,
    /// Each link's arbitrator's table.
    tables: BTreeMap<Link, Table>,
    /// Delegation: each child's table of its virtual link of a parent link.
    virtual_tables: BTreeMap<(Link, NodeId), Table>,
}

/// Wire bytes of an update and its answer.
pub fn request_wire_bytes() -> u64 {
    request(0, 0, 0, 1).wire_len() as u64
}

pub fn response_wire_bytes() -> u64 {
    response(0, 0).wire_len() as u64
}

fn request(flow_id: u32, token: u32, remaining: u64, demand_bps: u64) -> Packet {
    Packet::ArbitrationRequest(ArbitrationRequest {
        flow_id,
        arb_seq: token,
        remaining,
        demand_bps: demand_bps.max(1),
    })
}

fn response(flow_id: u32, token: u32) -> Packet {
    Packet::ArbitrationResponse(ArbitrationResponse {
        flow_id,
        arb_seq: token,
        queue: 0,
        reference_rate_bps: 1,
    })
}

impl Network {
    /// Sends `msg` as `packet` from `node` toward host `dst` (routed as flow `msg.flow`'s
    /// packets between `src` and `dst`), in P0.
    fn send_arbitration_packet(
        &mut self,
        node: NodeId,
        src: usize,
        dst: usize,
        msg: Msg,
        packet: Packet,
    ) {
        let Some(arb) = self.pase.as_mut() else {
            return;
        };
        let f = &mut arb.in_flight;
        let token = f.next_token;
        f.next_token = f.next_token.wrapping_add(1);
        f.msgs.insert(token, msg);
        let packet = match packet {
            Packet::ArbitrationRequest(mut r) => {
                r.arb_seq = token;
                Packet::ArbitrationRequest(r)
            }
            Packet::ArbitrationResponse(mut r) => {
                r.arb_seq = token;
                Packet::ArbitrationResponse(r)
            }
            p => p,
        };
        let pkt = Box::new(SimPacket {
            src,
            dst,
            class: TrafficClass::Priority(0),
            ecn: Ecn::NotEct,
            wire_len: packet.wire_len() as u32,
            packet,
            created: self.now,
            path: PathHash::new(),
        });
        self.forward(node, pkt);
    }

    /// The egress port of `node` toward flow `flow`'s destination, and whether the link's
    /// far end is that host (the path's last link).
    fn flow_link(&self, node: NodeId, flow: usize) -> Option<(Link, bool)> {
        let s = &self.flows[flow].spec;
        let port = self.route_flow(node, s.id, s.src, s.dst)?;
        let peer = self.nodes[node].ports[port].peer;
        Some(((node, port), self.nodes[peer].host == Some(s.dst)))
    }

    /// Packets: every active flow's host sends its updates; a finished one's its release;
    /// delegated parent links due are divided first. Returns whether any flow is active.
    pub(super) fn ask_round(&mut self) -> bool {
        let mut finished = vec![];
        let active = self.pase_flows(&mut finished);
        for flow in finished {
            self.release_arbitration(flow);
        }
        let arb = self.pase.as_mut().expect("checked by the caller");
        if let Some(period) = arb.delegation_period.filter(|_| arb.end_to_end) {
            let (now, expire) = (self.now, EXPIRE_INTERVALS * arb.interval);
            let mut reports = vec![];
            for (&(link, child), t) in arb.in_flight.virtual_tables.iter_mut() {
                t.expire(now, expire);
                if let Some((&flow, _)) = t.flows.iter().next() {
                    reports.push(Report {
                        link,
                        child,
                        demand_bps: t.flows.values().map(|k| k.demand_bps).sum(),
                        hops: t.hops,
                        flow,
                    });
                }
            }
            let pair_bytes = request_wire_bytes() + response_wire_bytes();
            let (m, b) = self.delegate_links(&reports, period, pair_bytes, true);
            let s = &mut self.pase.as_mut().expect("checked").stats;
            s.messages += m;
            s.link_bytes += b;
        }
        for &(flow, remaining) in &active {
            let (a, sent) = self.ask_arbitrators(flow, remaining);
            if !sent {
                // Answered by its host alone: in force now, over older asks on their way.
                self.arbitration_applied_now(flow as u32);
                let at = self.now;
                self.schedule(at, Ev::arbitration(flow as u32, a));
            }
        }
        !active.is_empty()
    }

    /// Flow `flow` (with `remaining` bytes) asks its arbitrators: its host's answers at once
    /// (returned), and its update goes up the path unless local-only, the path is one link,
    /// or early pruning stops it at the host (`sent` false then).
    pub(super) fn ask_arbitrators(&mut self, flow: usize, remaining: u64) -> (Arbitration, bool) {
        let host = self.hosts[self.flows[flow].spec.src];
        let Some((link, last)) = self.flow_link(host, flow) else {
            let arb = self.pase.as_ref().expect("checked by the caller");
            return (
                Arbitration {
                    queue: arb.queues - 1,
                    reference_rate_bps: arb.base_rate_bps,
                },
                false,
            );
        };
        let demand = self.nodes[host].ports[link.1].link.bps;
        let capacity = demand;
        let (now, round) = (self.now, self.pase.as_ref().map_or(0, |p| p.stats.rounds));
        let arb = self.pase.as_mut().expect("checked by the caller");
        let expire = EXPIRE_INTERVALS * arb.interval;
        let f = &mut arb.in_flight;
        let adh =
            f.tables
                .entry(link)
                .or_default()
                .refresh(now, expire, flow as u32, remaining, demand);
        let a = arbitrate_flow(capacity, arb.queues, arb.base_rate_bps, adh, demand);
        // The host's own update and answer: counted, on no link.
        arb.stats.messages += 2;
        let ask = f.next_ask;
        f.next_ask += 1;
        let prune = arb.early_pruning_queues;
        if !arb.end_to_end || last {
            return (a, false);
        }
        if prune > 0 && a.queue >= prune {
            arb.stats.pruned += 1;
            return (a, false);
        }
        f.pending.insert(
            (flow as u32, ask),
            Pending {
                outstanding: 1,
                decision: a,
                sent: now,
                round,
            },
        );
        self.send_update(host, flow, round, ask, a, remaining, demand as u64);
        (a, true)
    }

    /// Flow `flow`'s update (a release with `remaining` 0), counted, to the arbitrator one
    /// link up from its host; `so_far` is the arbitration combined below it.
    #[allow(clippy::too_many_arguments)]
    fn send_update(
        &mut self,
        host: NodeId,
        flow: usize,
        round: u64,
        ask: u64,
        so_far: Arbitration,
        remaining: u64,
        demand_bps: u64,
    ) {
        let arb = self.pase.as_mut().expect("checked by the caller");
        arb.stats.messages += 1;
        arb.stats.link_bytes += request_wire_bytes();
        let msg = Msg {
            kind: MsgKind::Update,
            flow: flow as u32,
            round,
            ask,
            hops_left: 1,
            hops: 1,
            arbitration: so_far,
        };
        let s = &self.flows[flow].spec;
        let p = request(s.id, 0, remaining, demand_bps);
        self.send_arbitration_packet(host, s.src, s.dst, msg, p);
    }

    /// A finished flow's host removes it from its table and sends its release up the path.
    fn release_arbitration(&mut self, flow: usize) {
        let host = self.hosts[self.flows[flow].spec.src];
        let Some((link, last)) = self.flow_link(host, flow) else {
            return;
        };
        let round = self.pase.as_ref().map_or(0, |p| p.stats.rounds);
        let arb = self.pase.as_mut().expect("checked by the caller");
        if let Some(t) = arb.in_flight.tables.get_mut(&link) {
            t.flows.remove(&(flow as u32));
        }
        if !arb.end_to_end || last {
            return;
        }
        let none = Arbitration {
            queue: 0,
            reference_rate_bps: 0.0,
        };
        self.send_update(host, flow, round, 0, none, 0, 1);
    }

    /// This ask's decision for `flow` took effect without messages (its host's own).
    pub(super) fn arbitration_applied_now(&mut self, flow: u32) {
        if let Some(arb) = self.pase.as_mut() {
            let ask = arb.in_flight.next_ask.saturating_sub(1);
            arb.in_flight.applied.insert(flow, ask);
        }
    }

    /// A delegation report from `child` to the parent `hops` links up flow `flow`'s path.
    pub(super) fn send_delegation_report(&mut self, child: NodeId, flow: usize, hops: usize) {
        let round = self.pase.as_ref().map_or(0, |p| p.stats.rounds);
        let (id, src, dst) = {
            let s = &self.flows[flow].spec;
            (s.id, s.src, s.dst)
        };
        let msg = Msg {
            kind: MsgKind::Report,
            flow: flow as u32,
            round,
            ask: 0,
            hops_left: hops as u32,
            hops: hops as u32,
            arbitration: Arbitration {
                queue: 0,
                reference_rate_bps: 0.0,
            },
        };
        self.send_arbitration_packet(child, src, dst, msg, request(id, 0, 0, 1));
    }

    /// An arbitration message reaches `node`: forwarded on, answered, or taken.
    pub(super) fn arbitration_message_arrives(&mut self, node: NodeId, pkt: Box<SimPacket>) {
        let token = match &pkt.packet {
            Packet::ArbitrationRequest(r) => r.arb_seq,
            Packet::ArbitrationResponse(r) => r.arb_seq,
            _ => return,
        };
        let at_host = self.nodes[node].host.is_some();
        let Some(arb) = self.pase.as_mut() else {
            self.stray_packets += 1;
            return;
        };
        let Some(m) = arb.in_flight.msgs.get_mut(&token) else {
            self.stray_packets += 1;
            return;
        };
        m.hops_left = m.hops_left.saturating_sub(1);
        if m.hops_left > 0 && !at_host {
            self.forward(node, pkt);
            return;
        }
        let m = arb.in_flight.msgs.remove(&token).expect("found above");
        match m.kind {
            MsgKind::Update => self.update_arrives(node, token, m, pkt),
            MsgKind::Report => {
                let back = Msg {
                    kind: MsgKind::Share,
                    hops_left: m.hops,
                    ..m
                };
                let p = response(pkt.packet.flow_id(), 0);
                self.send_arbitration_packet(node, pkt.dst, pkt.src, back, p);
            }
            MsgKind::Share => {}
            MsgKind::Answer => self.answer_arrives(m),
        }
    }

    /// Flow `m.flow`'s update reaches the arbitrator at `node` (level `m.hops` of its path):
    /// its table refreshed and the answer from it sent back; with delegation the ToR answers
    /// the levels above it too; the update goes on up unless pruned or at the path's end. A
    /// release (remaining 0) removes the flow's entries and is not answered.
    fn update_arrives(&mut self, node: NodeId, token: u32, m: Msg, pkt: Box<SimPacket>) {
        let Packet::ArbitrationRequest(r) = &pkt.packet else {
            return;
        };
        let r = r.clone();
        let flow = m.flow as usize;
        let Some((link, mut last)) = self.flow_link(node, flow) else {
            self.stray_packets += 1;
            return;
        };
        let capacity = self.nodes[node].ports[link.1].link.bps;
        let now = self.now;
        let arb = self.pase.as_mut().expect("checked by the caller");
        let (queues, base, prune) = (arb.queues, arb.base_rate_bps, arb.early_pruning_queues);
        let expire = EXPIRE_INTERVALS * arb.interval;
        let delegated = arb.delegation_period.is_some() && m.hops == 1;
        let release = r.remaining == 0;
        let mut answer = if release {
            if let Some(t) = arb.in_flight.tables.get_mut(&link) {
                t.flows.remove(&m.flow);
            }
            m.arbitration
        } else {
            let demand = r.demand_bps as f64;
            let t = arb.in_flight.tables.entry(link).or_default();
            let adh = t.refresh(now, expire, m.flow, r.remaining, demand);
            arbitrate_flow(capacity, queues, base, adh, demand)
        };
        let mut combined = m.arbitration.combine(answer);
        let mut up = !last;
        if delegated {
            // The ToR: the links above it over its virtual links, in this exchange.
            let (mut parent, mut hops) = (link, 0);
            while !last {
                let peer = self.nodes[parent.0].ports[parent.1].peer;
                let Some((l, end)) = self.flow_link(peer, flow) else {
                    break;
                };
                (parent, last, hops) = (l, end, hops + 1);
                let arb = self.pase.as_mut().expect("checked");
                let vt = arb
                    .in_flight
                    .virtual_tables
                    .entry((parent, node))
                    .or_default();
                vt.hops = hops;
                if release {
                    vt.flows.remove(&m.flow);
                    continue;
                }
                if prune > 0 && combined.queue >= prune {
                    arb.stats.pruned += 1;
                    break;
                }
                let share = arb
                    .delegations
                    .get(&parent)
                    .map_or(0.0, |d| d.share(node as u32));
                let demand = r.demand_bps as f64;
                let adh = vt.refresh(now, expire, m.flow, r.remaining, demand);
                let v = arbitrate_virtual_flow(share, queues, base, adh, demand);
                arb.stats.delegated += 1;
                answer = answer.combine(v);
                combined = combined.combine(v);
            }
            up = false;
        } else if up && !release && prune > 0 && combined.queue >= prune {
            arb.stats.pruned += 1;
            up = false;
        }
        let arb = self.pase.as_mut().expect("checked");
        let level = m.hops;
        if !release {
            arb.stats.messages += 1;
            arb.stats.link_bytes += u64::from(level) * response_wire_bytes();
        }
        if up {
            arb.stats.messages += 1;
            arb.stats.link_bytes += request_wire_bytes();
            if let Some(p) = arb.in_flight.pending.get_mut(&(m.flow, m.ask)) {
                p.outstanding += 1;
            }
            let on = Msg {
                hops_left: 1,
                hops: level + 1,
                arbitration: combined,
                ..m
            };
            arb.in_flight.msgs.insert(token, on);
            let (src, dst) = (pkt.src, pkt.dst);
            let flow_id = r.flow_id;
            self.forward(node, pkt);
            if release {
                return;
            }
            let back = Msg {
                kind: MsgKind::Answer,
                hops_left: level,
                arbitration: answer,
                ..m
            };
            self.send_arbitration_packet(node, dst, src, back, response(flow_id, 0));
            return;
        }
        if !release {
            let back = Msg {
                kind: MsgKind::Answer,
                hops_left: level,
                arbitration: answer,
                ..m
            };
            self.send_arbitration_packet(node, pkt.dst, pkt.src, back, response(r.flow_id, 0));
        }
    }

    /// An answer reaches the flow's host: combined into its ask's decision, which applies
    /// when it was the last one out (unless a later ask's is in force).
    fn answer_arrives(&mut self, m: Msg) {
        let now = self.now;
        let arb = self.pase.as_mut().expect("checked by the caller");
        let f = &mut arb.in_flight;
        let key = (m.flow, m.ask);
        let Some(p) = f.pending.get_mut(&key) else {
            return;
        };
        p.decision = p.decision.combine(m.arbitration);
        p.outstanding -= 1;
        if p.outstanding > 0 {
            return;
        }
        let p = f.pending.remove(&key).expect("found above");
        if f.applied.get(&m.flow).is_some_and(|&a| a > m.ask) {
            return; // a later ask's decision is in force
        }
        f.applied.insert(m.flow, m.ask);
        let delay = now - p.sent;
        f.delay_sum += u128::from(delay);
        let s = &mut arb.stats;
        s.decisions_by_packet += 1;
        s.decision_delay_max_ns = s.decision_delay_max_ns.max(delay);
        s.decision_delay_mean_ns = (f.delay_sum / u128::from(s.decisions_by_packet)) as u64;
        self.apply_arbitration(m.flow as usize, p.decision);
        self.service(m.flow as usize, super::Side::Sender);
    }

    /// Forget messages older than `LOST_AFTER_ROUNDS` rounds (dropped by a full queue or a
    /// failed link), counting them lost.
    pub(super) fn forget_lost_arbitration_messages(&mut self) {
        let Some(arb) = self.pase.as_mut() else {
            return;
        };
        let round = arb.stats.rounds;
        if round % LOST_AFTER_ROUNDS != 0 {
            return;
        }
        let before = arb.in_flight.msgs.len();
        let recent = |r: u64| round.saturating_sub(r) <= LOST_AFTER_ROUNDS;
        arb.in_flight.msgs.retain(|_, m| recent(m.round));
        arb.in_flight.pending.retain(|_, p| recent(p.round));
        arb.stats.messages_lost += (before - arb.in_flight.msgs.len()) as u64;
    }
}
