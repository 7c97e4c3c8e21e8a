//! The sender side of PASE's arbitration on real packets (Munir et al., SIGCOMM'14 §3.1;
//! docs/protocol.md §6.11–6.12 and §11 "PASE arbitration"): which PASE flows this endpoint
//! asks its arbitrator about, when the next ARBITRATION_REQUEST is due, and whether an
//! ARBITRATION_RESPONSE answers a request it sent. What an accepted answer does to the flow
//! (queue, window) is the core's `Sender::on_arbitration`.
//!
//! Delegation (§3.1, `with_delegation`; the model's `host.pase.delegation`): this host is a
//! child arbitrator of the arbitrator's link. It asks nothing per flow: once per delegation
//! period it reports its demand (flow id 0, `DELEGATION_FLOW_ID`) and the arbitrator answers
//! with the share of its link it delegates to this host; every arbitration interval the
//! host runs Algorithm 1 over its own flows on that share
//! (`flexpass_core::pase::delegation::arbitrate_virtual`), until the first share over its
//! own link (local arbitration: no latency for the first RTT).

use crate::flow::FlowKey;
use flexpass_core::pase::delegation::arbitrate_virtual;
use flexpass_core::pase::{Arbitration, FlowDemand};
use flexpass_core::Nanos;
use flexpass_wire::{ArbitrationRequest, ArbitrationResponse, Packet};
use std::collections::HashMap;
use std::net::SocketAddr;

/// The flow id of a delegation exchange (no flow has it: endpoints never pick 0):
/// ARBITRATION_REQUEST = a child's demand report (`remaining` the sum over its flows, 0 to
/// leave), ARBITRATION_RESPONSE = its share (`reference_rate_bps`; `queue` 0).
pub const DELEGATION_FLOW_ID: u32 = 0;

/// Delegation periods are this many arbitration intervals (the model's default).
pub const DELEGATION_PERIOD_INTERVALS: u64 = 10;

/// This host as a child arbitrator.
struct Delegated {
    queues: u8,
    base_rate_bps: f64,
    link_bps: f64,
    period: Nanos,
    /// The share of the parent's link for this host (None: not answered yet).
    share_bps: Option<f64>,
    next_arbitration: Nanos,
    next_report: Nanos,
    /// Report numbers: the next, and the oldest an answer may still echo.
    next_seq: u32,
    first_open: u32,
    /// The last report had flows (so an empty period sends one leaving report).
    reported: bool,
}

/// One PASE flow this endpoint sends and asks about.
struct Asking {
    key: FlowKey,
    /// `arb_seq` of the next request.
    next_seq: u32,
    /// The oldest `arb_seq` an answer may still echo: one past the last accepted answer.
    first_open: u32,
    next_at: Nanos,
}

/// Why a response was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Not from the configured arbitrator's address (forged, or a stray).
    Forged,
    /// For no PASE flow of ours, or echoing an `arb_seq` never sent or already superseded.
    Unasked,
}

pub struct PaseRequests {
    /// The arbitrator (None: local arbitration only, no messages).
    arbitrator: Option<SocketAddr>,
    /// Arbitration interval: one request per flow per interval.
    interval: Nanos,
    /// By flow id (this endpoint chooses the ids of the flows it sends, unique among them).
    flows: HashMap<u32, Asking>,
    /// The earliest `next_at` (kept so each loop turn need not look at every flow; may be
    /// early after a release, which costs one empty `due`).
    next_due: Option<Nanos>,
    delegated: Option<Delegated>,
    /// Delegation: the local arbitrations of the last interval, for the endpoint to apply.
    decisions: Vec<(FlowKey, Arbitration)>,
}

impl PaseRequests {
    pub fn new(arbitrator: Option<SocketAddr>, interval: Nanos) -> Self {
        PaseRequests {
            arbitrator,
            interval: interval.max(1),
            flows: HashMap::new(),
            next_due: None,
            delegated: None,
            decisions: Vec::new(),
        }
    }

    /// Delegation on (only with an arbitrator): this host arbitrates its flows over the share
    /// of the arbitrator's link delegated to it, with Algorithm 1's `queues` and base rate;
    /// `link_bps` is its own link (before the first share).
    pub fn with_delegation(mut self, queues: u8, base_rate_bps: f64, link_bps: f64) -> Self {
        if self.arbitrator.is_some() {
            self.delegated = Some(Delegated {
                queues,
                base_rate_bps,
                link_bps,
                period: self.interval * DELEGATION_PERIOD_INTERVALS,
                share_bps: None,
                next_arbitration: 0,
                next_report: 0,
                next_seq: 0,
                first_open: 0,
                reported: false,
            });
        }
        self
    }

    /// The share of the arbitrator's link delegated to this host (delegation, answered).
    pub fn share_bps(&self) -> Option<f64> {
        self.delegated.as_ref().and_then(|d| d.share_bps)
    }

    /// Delegation: the local arbitrations made since the last call.
    pub fn take_decisions(&mut self) -> Vec<(FlowKey, Arbitration)> {
        std::mem::take(&mut self.decisions)
    }

    pub fn arbitrator(&self) -> Option<SocketAddr> {
        self.arbitrator
    }

    /// A new PASE flow: its first request is due at once.
    pub fn add(&mut self, key: FlowKey, now: Nanos) {
        if self.arbitrator.is_some() {
            self.flows.insert(
                key.1,
                Asking {
                    key,
                    next_seq: 0,
                    first_open: 0,
                    next_at: now,
                },
            );
            self.next_due = Some(self.next_due.map_or(now, |d| d.min(now)));
            if let Some(d) = self.delegated.as_mut() {
                // Arbitrated at once; reported at once if the parent has no report of ours.
                d.next_arbitration = now;
                if !d.reported {
                    d.next_report = now;
                }
            }
        }
    }

    /// The earliest request due.
    pub fn next_due(&self) -> Option<Nanos> {
        self.next_due
    }

    /// The requests due at `now`: `remaining(key)` is the flow's remaining bytes, or None
    /// once it is gone, complete or failed (then a release, `remaining` 0, and the flow is
    /// forgotten).
    pub fn due(
        &mut self,
        now: Nanos,
        demand_bps: u64,
        mut remaining: impl FnMut(FlowKey) -> Option<u64>,
        out: &mut Vec<Packet>,
    ) {
        if self.delegated.is_some() {
            return self.due_delegated(now, demand_bps, remaining, out);
        }
        let interval = self.interval;
        let mut next_due: Option<Nanos> = None;
        self.flows.retain(|&flow_id, a| {
            if a.next_at > now {
                next_due = Some(next_due.map_or(a.next_at, |d| d.min(a.next_at)));
                return true;
            }
            let left = remaining(a.key);
            out.push(Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id,
                arb_seq: a.next_seq,
                // A flow with nothing left yet (an idle stream) still holds its place.
                remaining: left.map_or(0, |b| b.max(1)),
                demand_bps: demand_bps.max(1),
            }));
            a.next_seq = a.next_seq.wrapping_add(1);
            a.next_at = now + interval;
            if left.is_some() {
                next_due = Some(next_due.map_or(a.next_at, |d| d.min(a.next_at)));
            }
            left.is_some()
        });
        self.next_due = next_due;
    }

    /// Delegation: the local arbitration every interval, the report every period.
    fn due_delegated(
        &mut self,
        now: Nanos,
        demand_bps: u64,
        mut remaining: impl FnMut(FlowKey) -> Option<u64>,
        out: &mut Vec<Packet>,
    ) {
        let d = self.delegated.as_mut().expect("checked");
        let mut flows = vec![];
        let mut keys = HashMap::new();
        self.flows.retain(|&flow_id, a| {
            let Some(left) = remaining(a.key) else {
                return false;
            };
            keys.insert(flow_id, a.key);
            flows.push(FlowDemand {
                flow: flow_id,
                remaining: left.max(1),
                demand_bps: demand_bps as f64,
            });
            true
        });
        // Ties of remaining size go by flow id, whatever the map's order.
        flows.sort_by_key(|f| (f.remaining, f.flow));
        if now >= d.next_arbitration && !flows.is_empty() {
            let capacity = d.share_bps.unwrap_or(d.link_bps);
            let mut decided = vec![];
            let mut demands = flows.clone();
            arbitrate_virtual(
                capacity,
                d.queues,
                d.base_rate_bps,
                &mut demands,
                &mut decided,
            );
            self.decisions
                .extend(decided.into_iter().map(|(id, a)| (keys[&id], a)));
            d.next_arbitration = now + self.interval;
        }
        if now >= d.next_report && (d.reported || !flows.is_empty()) {
            out.push(Packet::ArbitrationRequest(ArbitrationRequest {
                flow_id: DELEGATION_FLOW_ID,
                arb_seq: d.next_seq,
                // 0: no flows left, the parent forgets this child.
                remaining: flows.iter().map(|f| f.remaining).sum(),
                demand_bps: (demand_bps.saturating_mul(flows.len() as u64)).max(1),
            }));
            d.next_seq = d.next_seq.wrapping_add(1);
            d.reported = !flows.is_empty();
            d.next_report = now + d.period;
        }
        self.next_due = (!flows.is_empty() || d.reported).then(|| {
            if flows.is_empty() {
                d.next_report
            } else {
                d.next_arbitration.min(d.next_report)
            }
        });
    }

    /// Delegation: a share from `src`, taken if it answers a report of ours not yet
    /// superseded by a later answer.
    pub fn on_share(&mut self, src: SocketAddr, r: &ArbitrationResponse) -> Result<f64, Ignored> {
        if Some(src) != self.arbitrator {
            return Err(Ignored::Forged);
        }
        let d = self.delegated.as_mut().ok_or(Ignored::Unasked)?;
        let open = d.next_seq.wrapping_sub(d.first_open);
        if r.arb_seq.wrapping_sub(d.first_open) >= open {
            return Err(Ignored::Unasked);
        }
        d.first_open = r.arb_seq.wrapping_add(1);
        let share = (r.reference_rate_bps as f64).min(d.link_bps);
        d.share_bps = Some(share);
        Ok(share)
    }

    /// The flow is closed: its release, if it was still asking.
    pub fn release(&mut self, key: FlowKey, demand_bps: u64) -> Option<Packet> {
        let a = self.flows.remove(&key.1).filter(|a| a.key == key)?;
        if let Some(d) = self.delegated.as_mut() {
            // The parent knows the host's demand, not its flows: the host leaves with its
            // last flow (a process that exits next does not hold its share till expiry).
            if !self.flows.is_empty() || !d.reported {
                return None;
            }
            d.reported = false;
            let leave = ArbitrationRequest {
                flow_id: DELEGATION_FLOW_ID,
                arb_seq: d.next_seq,
                remaining: 0,
                demand_bps: demand_bps.max(1),
            };
            d.next_seq = d.next_seq.wrapping_add(1);
            return Some(Packet::ArbitrationRequest(leave));
        }
        Some(Packet::ArbitrationRequest(ArbitrationRequest {
            flow_id: key.1,
            arb_seq: a.next_seq,
            remaining: 0,
            demand_bps: demand_bps.max(1),
        }))
    }

    /// A response from `src`: the flow it is for, if it answers a request of ours that no
    /// accepted answer has superseded (`accepted` records one the flow took).
    pub fn on_response(
        &mut self,
        src: SocketAddr,
        r: &ArbitrationResponse,
    ) -> Result<FlowKey, Ignored> {
        if Some(src) != self.arbitrator {
            return Err(Ignored::Forged);
        }
        let a = self.flows.get_mut(&r.flow_id).ok_or(Ignored::Unasked)?;
        // Sent and not superseded: first_open ≤ arb_seq < next_seq (wrapping).
        let open = a.next_seq.wrapping_sub(a.first_open);
        if r.arb_seq.wrapping_sub(a.first_open) >= open {
            return Err(Ignored::Unasked);
        }
        Ok(a.key)
    }

    /// The flow took `r` (`Sender::on_arbitration`): answers to it and to older requests
    /// are superseded (a refused answer supersedes nothing, so a forger that guesses a
    /// request cannot spend it).
    pub fn accepted(&mut self, r: &ArbitrationResponse) {
        if let Some(a) = self.flows.get_mut(&r.flow_id) {
            a.first_open = r.arb_seq.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(flow_id: u32, arb_seq: u32) -> ArbitrationResponse {
        ArbitrationResponse {
            flow_id,
            arb_seq,
            queue: 1,
            reference_rate_bps: 1_000_000,
        }
    }

    #[test]
    fn answers_only_from_the_arbitrator_to_requests_sent_and_not_superseded() {
        let arb: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:7890".parse().unwrap();
        let mut p = PaseRequests::new(Some(arb), 1000);
        let key = (peer, 5);
        p.add(key, 0);
        // Nothing asked yet: any answer is unasked.
        assert_eq!(p.on_response(arb, &response(5, 0)), Err(Ignored::Unasked));
        let mut out = vec![];
        p.due(0, 10, |_| Some(3000), &mut out);
        p.due(500, 10, |_| Some(3000), &mut out);
        assert_eq!(out.len(), 1, "one request per interval");
        p.due(1000, 10, |_| Some(2000), &mut out);
        assert_eq!(out.len(), 2);
        let forger: SocketAddr = "127.0.0.1:9001".parse().unwrap();
        assert_eq!(p.on_response(forger, &response(5, 0)), Err(Ignored::Forged));
        assert_eq!(p.on_response(arb, &response(6, 0)), Err(Ignored::Unasked));
        assert_eq!(
            p.on_response(arb, &response(5, 2)),
            Err(Ignored::Unasked),
            "never sent"
        );
        assert_eq!(p.on_response(arb, &response(5, 1)), Ok(key));
        assert_eq!(
            p.on_response(arb, &response(5, 0)),
            Ok(key),
            "not taken yet"
        );
        p.accepted(&response(5, 1));
        assert_eq!(
            p.on_response(arb, &response(5, 0)),
            Err(Ignored::Unasked),
            "superseded"
        );
        assert_eq!(
            p.on_response(arb, &response(5, 1)),
            Err(Ignored::Unasked),
            "answered"
        );
        // Complete: one release (remaining 0), then no more requests.
        p.due(2000, 10, |_| None, &mut out);
        let Packet::ArbitrationRequest(r) = out.last().unwrap() else {
            panic!()
        };
        assert_eq!((r.remaining, r.arb_seq), (0, 2));
        assert_eq!(p.next_due(), None);
        assert_eq!(p.release(key, 10), None);
    }

    /// Delegation: one demand report per period instead of a request per flow per
    /// interval; the host's flows arbitrated by Algorithm 1 over its own link until a share
    /// comes, then over the share; shares only from the arbitrator, for a report sent.
    #[test]
    fn a_delegated_host_reports_its_demand_and_arbitrates_its_flows_over_its_share() {
        let arb: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:7890".parse().unwrap();
        let mut p = PaseRequests::new(Some(arb), 1000).with_delegation(8, 1e6, 1e9);
        let (small, large) = ((peer, 5), (peer, 6));
        p.add(small, 0);
        p.add(large, 0);
        let left = |k: FlowKey| Some(if k.1 == 5 { 100_000 } else { 5_000_000 });
        let mut out = vec![];
        p.due(0, 1_000_000_000, left, &mut out);
        let Some(Packet::ArbitrationRequest(r)) = out.first() else {
            panic!("{out:?}")
        };
        assert_eq!(out.len(), 1, "one report, no request per flow");
        assert_eq!(
            (r.flow_id, r.arb_seq, r.remaining, r.demand_bps),
            (DELEGATION_FLOW_ID, 0, 5_100_000, 2_000_000_000)
        );
        let queue_rate = |d: &[(FlowKey, Arbitration)], k| {
            let a = d.iter().find(|(key, _)| *key == k).unwrap().1;
            (a.queue, a.reference_rate_bps)
        };
        let d = p.take_decisions();
        assert_eq!(queue_rate(&d, small), (0, 1e9), "own link before a share");
        assert_eq!(queue_rate(&d, large), (1, 1e6), "C of demand ahead");
        let share = |seq, rate| ArbitrationResponse {
            flow_id: DELEGATION_FLOW_ID,
            arb_seq: seq,
            queue: 0,
            reference_rate_bps: rate,
        };
        let forger: SocketAddr = "127.0.0.1:9001".parse().unwrap();
        assert_eq!(p.on_share(forger, &share(0, 1)), Err(Ignored::Forged));
        assert_eq!(p.on_share(arb, &share(1, 1)), Err(Ignored::Unasked));
        assert_eq!(p.on_share(arb, &share(0, 400_000_000)), Ok(4e8));
        assert_eq!(
            p.on_share(arb, &share(0, 1)),
            Err(Ignored::Unasked),
            "taken"
        );
        p.due(999, 1_000_000_000, left, &mut out);
        assert!(p.take_decisions().is_empty(), "not due yet");
        p.due(1000, 1_000_000_000, left, &mut out);
        let d = p.take_decisions();
        assert_eq!(
            queue_rate(&d, small),
            (0, 4e8),
            "the share caps the top flow"
        );
        assert_eq!(queue_rate(&d, large), (2, 1e6), "⌊1 Gbit/s ahead / 0.4⌋");
        assert_eq!(out.len(), 1, "the next report is a period away");
        assert_eq!(p.release(small, 1), None, "nothing per flow to release");
        // The last flow closed: the host leaves at once, then asks nothing.
        let Some(Packet::ArbitrationRequest(r)) = p.release(large, 1) else {
            panic!("a leaving report")
        };
        assert_eq!((r.flow_id, r.remaining), (DELEGATION_FLOW_ID, 0));
        p.due(10_000, 1_000_000_000, |_| None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(p.next_due(), None);
        // Flows that vanish without a close: one leaving report at the next period.
        p.add(small, 20_000);
        p.due(20_000, 1_000_000_000, left, &mut out);
        p.due(30_000, 1_000_000_000, |_| None, &mut out);
        let Some(Packet::ArbitrationRequest(r)) = out.last() else {
            panic!()
        };
        assert_eq!(
            (out.len(), r.flow_id, r.remaining),
            (3, DELEGATION_FLOW_ID, 0)
        );
        assert_eq!(p.next_due(), None);
    }

    #[test]
    fn without_an_arbitrator_nothing_is_asked() {
        let mut p = PaseRequests::new(None, 1000);
        p.add(("127.0.0.1:1".parse().unwrap(), 1), 0);
        assert_eq!(p.next_due(), None);
    }
}
