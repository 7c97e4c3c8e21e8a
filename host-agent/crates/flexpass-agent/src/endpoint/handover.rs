//! Hand-over of connections to the process that serves their port (docs/datapath.md,
//! "Hand-over of a connection to the serving process"): a HELLO(CONN, role open) for a
//! handed-over port passes admission, then, instead of a `Receiver` here, it is queued
//! for the caller (`take_handed`), which passes it to the process; the process answers
//! HELLO_ACK from its own socket, and the opening side moves the flow there
//! (docs/protocol.md §11, "The peer of a flow"). This endpoint keeps a handed entry only:
//! a retransmitted HELLO is handed over again, anything else of the flow that still
//! reaches this port is dropped silently (a RESET before the HELLO_ACK would fail the
//! flow) and counted.

use super::Endpoint;
use crate::flow::FlowKey;
use flexpass_core::{Nanos, Transmit};
use flexpass_wire::{ConnRole, Hello, Packet, ResetReason};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;

/// How long a handed entry stays once the process took the flow (late datagrams at this
/// port are dropped silently meanwhile).
pub const HANDED_LINGER: Nanos = 2_000_000_000;
/// Handed entries are checked for expiry at most this often.
const EXPIRY_CHECK: Nanos = 100_000_000;

/// A HELLO for the process that serves its port.
#[derive(Clone, Debug, PartialEq)]
pub struct HandedHello {
    /// The opening side (the address and port the HELLO came from).
    pub peer: SocketAddr,
    pub hello: Hello,
}

#[derive(Default)]
pub(super) struct Handover {
    ports: HashSet<u16>,
    /// (peer, flow id) → when handed over, and when the process took it.
    handed: HashMap<FlowKey, (Nanos, Option<Nanos>)>,
    out: VecDeque<HandedHello>,
    next_check: Nanos,
}

impl Endpoint {
    /// Hand connections to `port` over to a process (`on`), or accept them here again.
    pub fn hand_over_port(&mut self, port: u16, on: bool) {
        if on {
            self.handover.ports.insert(port);
        } else {
            self.handover.ports.remove(&port);
        }
    }

    /// The next HELLO to pass to the process serving its port.
    pub fn take_handed(&mut self) -> Option<HandedHello> {
        self.handover.out.pop_front()
    }

    /// The process answered a handed flow: `taken` (it sent HELLO_ACK from its socket), or
    /// refused: RESET from this endpoint's port (the flow's peer until it moves), so the
    /// opening side fails the flow (a connection falls back to kernel TCP).
    pub fn handed_answered(&mut self, key: FlowKey, taken: bool) {
        let now = self.now();
        if taken {
            if let Some(e) = self.handover.handed.get_mut(&key) {
                e.1.get_or_insert(now);
            }
        } else if self.handover.handed.remove(&key).is_some() {
            self.stats.handed_refused += 1;
            self.reset_handed(key, now);
        }
    }

    /// Whether any port is handed over or any handed entry is left.
    pub(super) fn handover_active(&self) -> bool {
        !self.handover.ports.is_empty() || !self.handover.handed.is_empty()
    }

    /// Handed entries now (taken ones linger `HANDED_LINGER`).
    pub fn handed(&self) -> usize {
        self.handover.handed.len()
    }

    fn reset_handed(&mut self, key: FlowKey, now: Nanos) {
        let reset = Packet::Reset(flexpass_wire::Reset {
            flow_id: key.1,
            reason: ResetReason::Unspecified,
        });
        self.transmit(
            key.0,
            Transmit::new(reset, flexpass_wire::TransportKind::FlexPass),
            now,
        );
    }

    /// A datagram for a flow this endpoint does not receive: whether it was a handed
    /// flow's, or a HELLO handed over now (or answered by admission).
    pub(super) fn handed_datagram(&mut self, key: FlowKey, packet: &Packet, now: Nanos) -> bool {
        if self.handover.handed.contains_key(&key) {
            match packet {
                Packet::Hello(h) => self.handover.out.push_back(HandedHello {
                    peer: key.0,
                    hello: h.clone(),
                }),
                _ => self.stats.handed_dropped += 1,
            }
            return true;
        }
        let Packet::Hello(h) = packet else {
            return false;
        };
        let served = h
            .conn
            .is_some_and(|c| c.role == ConnRole::Open && self.handover.ports.contains(&c.dst_port));
        if !served || !self.cfg.accept {
            return false;
        }
        let cookie_ok = self.admission.check_cookie(key.0, h, now, &mut self.stats);
        let flows = self.receivers.len() + self.handover.handed.len();
        let (verdict, dropped) =
            self.admission
                .on_new_hello(key.0, h, cookie_ok, flows, now, &mut self.stats);
        // Half-open: handed, not taken yet (a taken entry lingers for late datagrams only).
        let half_open = self
            .handover
            .handed
            .values()
            .filter(|(_, taken)| taken.is_none())
            .count();
        let full = half_open >= self.cfg.max_half_open;
        if self.answer_hello(key.0, h, verdict, dropped, full, now) {
            return true;
        }
        self.stats.handed_over += 1;
        self.handover.handed.insert(key, (now, None));
        self.handover.out.push_back(HandedHello {
            peer: key.0,
            hello: h.clone(),
        });
        true
    }

    /// Drop taken entries after `HANDED_LINGER`; reset the flows the process never
    /// answered within the half-open timeout (from this port: still their peer).
    pub(super) fn expire_handed(&mut self, now: Nanos) {
        if self.handover.handed.is_empty() || now < self.handover.next_check {
            return;
        }
        self.handover.next_check = now + EXPIRY_CHECK;
        let timeout = self.cfg.half_open_timeout;
        let mut unanswered = vec![];
        self.handover
            .handed
            .retain(|&key, &mut (since, taken)| match taken {
                Some(at) => now < at + HANDED_LINGER,
                None if now < since + timeout => true,
                None => {
                    unanswered.push(key);
                    false
                }
            });
        for key in unanswered {
            self.stats.handed_expired += 1;
            self.reset_handed(key, now);
        }
    }
}
