//! PASE's arbitration messages as packets (`host.pase.messages = "packets"`, the default):
//! every update a flow sends to the arbitrator of its path's i-th link is an
//! ARBITRATION_REQUEST (docs/protocol.md §6.11, 94 bytes on the wire) that crosses the i links
//! to it hop by hop through the modelled ports' queues, and the answer an
//! ARBITRATION_RESPONSE (§6.12, 90 bytes) that comes back the reverse path the same way. A
//! delegation report (child ToR → parent) and its answer are the same two messages between
//! the two switches. The flow takes its round's decision when the last of its answers
//! reaches its host, unless a later round's decision came first: busy links delay it (past
//! the next round when they are busy enough: rounds overlap), and a lost message leaves the
//! flow on its last decision (that round never completes).
//!
//! Queue: the top priority P0 (DSCP 32 + 0), the queue of the top PASE flow's data, FIFO
//! behind it. The evaluation excerpt does not name a queue for control traffic; P0 is our
//! reading of the design (an arbitration answer is what moves a flow up, so it must not wait
//! behind the data it re-orders) and what the P4 profile does (ptf PaseOnPriorityProfile).
//! What a decision is, is unchanged: the arbitrators decide at the round from the flows'
//! state then (`arbitration.rs`); the packets carry it, late when the links are busy.

use super::{Network, NodeId};
use crate::packet::{PathHash, SimPacket};
use flexpass_core::pase::Arbitration;
use flexpass_core::Nanos;
use flexpass_wire::{ArbitrationRequest, ArbitrationResponse, Ecn, Packet, TrafficClass};

/// Rounds after which a message not yet arrived is counted lost and forgotten.
const LOST_AFTER_ROUNDS: u64 = 64;

/// What a message in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MsgKind {
    /// A flow's update to an arbitrator `hops` links up its path.
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
    flow: u32,
    round: u64,
    /// Links still to cross; the message is for the node where it reaches 0.
    hops_left: u32,
    /// Links between the two ends (the answer's way back).
    hops: u32,
}

/// A flow's round whose answers are on their way.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    outstanding: u32,
    decision: Arbitration,
    sent: Nanos,
}

/// The state of the messages in flight (part of `PaseArbitration`).
#[derive(Clone, Debug, Default)]
pub(super) struct InFlight {
    msgs: std::collections::HashMap<u32, Msg>,
    /// By (flow, round).
    pending: std::collections::HashMap<(u32, u64), Pending>,
    /// The round of each flow's decision in force.
    applied: std::collections::HashMap<u32, u64>,
    next_token: u32,
    delay_sum: u128,
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

    /// Round `round`'s decision `a` for flow `flow`, whose arbitrators at `levels` (links
    /// up its path, each ≥ 1) are asked by packets; it applies when the last answer is back.
    pub(super) fn send_arbitration_updates(
        &mut self,
        flow: usize,
        a: Arbitration,
        levels: &[usize],
        remaining: u64,
        demand_bps: f64,
    ) {
        let round = self.pase.as_ref().map_or(0, |p| p.stats.rounds);
        let (id, src, dst) = {
            let s = &self.flows[flow].spec;
            (s.id, s.src, s.dst)
        };
        let now = self.now;
        if let Some(arb) = self.pase.as_mut() {
            arb.in_flight.pending.insert(
                (flow as u32, round),
                Pending {
                    outstanding: levels.len() as u32,
                    decision: a,
                    sent: now,
                },
            );
        }
        let host = self.hosts[src];
        for &level in levels {
            let msg = Msg {
                kind: MsgKind::Update,
                flow: flow as u32,
                round,
                hops_left: level as u32,
                hops: level as u32,
            };
            let p = request(id, 0, remaining, demand_bps as u64);
            self.send_arbitration_packet(host, src, dst, msg, p);
        }
    }

    /// This round's decision for `flow` took effect without messages (its host's own).
    pub(super) fn arbitration_applied_now(&mut self, flow: u32) {
        if let Some(arb) = self.pase.as_mut() {
            let round = arb.stats.rounds;
            arb.in_flight.applied.insert(flow, round);
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
            hops_left: hops as u32,
            hops: hops as u32,
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
        let back = |kind| Msg {
            kind,
            hops_left: m.hops,
            ..m
        };
        match m.kind {
            MsgKind::Update => {
                let p = response(pkt.packet.flow_id(), 0);
                self.send_arbitration_packet(node, pkt.dst, pkt.src, back(MsgKind::Answer), p);
            }
            MsgKind::Report => {
                let p = response(pkt.packet.flow_id(), 0);
                self.send_arbitration_packet(node, pkt.dst, pkt.src, back(MsgKind::Share), p);
            }
            MsgKind::Share => {}
            MsgKind::Answer => {
                let now = self.now;
                let f = &mut arb.in_flight;
                let key = (m.flow, m.round);
                let Some(p) = f.pending.get_mut(&key) else {
                    return;
                };
                p.outstanding -= 1;
                if p.outstanding > 0 {
                    return;
                }
                let p = f.pending.remove(&key).expect("found above");
                if f.applied.get(&m.flow).is_some_and(|&r| r > m.round) {
                    return; // a later round's decision is in force
                }
                f.applied.insert(m.flow, m.round);
                let delay = now - p.sent;
                f.delay_sum += u128::from(delay);
                let s = &mut arb.stats;
                s.decisions_by_packet += 1;
                s.decision_delay_max_ns = s.decision_delay_max_ns.max(delay);
                s.decision_delay_mean_ns = (f.delay_sum / u128::from(s.decisions_by_packet)) as u64;
                self.apply_arbitration(m.flow as usize, p.decision);
                self.service(m.flow as usize, super::Side::Sender);
            }
        }
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
        arb.in_flight.pending.retain(|&(_, r), _| recent(r));
        arb.stats.messages_lost += (before - arb.in_flight.msgs.len()) as u64;
    }
}
