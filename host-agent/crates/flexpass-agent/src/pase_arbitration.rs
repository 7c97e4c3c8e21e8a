//! The sender side of PASE's arbitration on real packets (Munir et al., SIGCOMM'14 §3.1;
//! docs/protocol.md §6.11–6.12 and §11 "PASE arbitration"): which PASE flows this endpoint
//! asks its arbitrator about, when the next ARBITRATION_REQUEST is due, and whether an
//! ARBITRATION_RESPONSE answers a request it sent. What an accepted answer does to the flow
//! (queue, window) is the core's `Sender::on_arbitration`.

use crate::flow::FlowKey;
use flexpass_core::Nanos;
use flexpass_wire::{ArbitrationRequest, ArbitrationResponse, Packet};
use std::collections::HashMap;
use std::net::SocketAddr;

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
}

impl PaseRequests {
    pub fn new(arbitrator: Option<SocketAddr>, interval: Nanos) -> Self {
        PaseRequests {
            arbitrator,
            interval: interval.max(1),
            flows: HashMap::new(),
            next_due: None,
        }
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

    /// The flow is closed: its release, if it was still asking.
    pub fn release(&mut self, key: FlowKey, demand_bps: u64) -> Option<Packet> {
        let a = self.flows.remove(&key.1).filter(|a| a.key == key)?;
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

    #[test]
    fn without_an_arbitrator_nothing_is_asked() {
        let mut p = PaseRequests::new(None, 1000);
        p.add(("127.0.0.1:1".parse().unwrap(), 1), 0);
        assert_eq!(p.next_due(), None);
    }
}
