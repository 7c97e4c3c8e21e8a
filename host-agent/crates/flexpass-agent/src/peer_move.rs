//! "A flow's peer is where its HELLO_ACK came from" (docs/protocol.md §6.7, §11 "The peer
//! of a flow"): a HELLO_ACK `accepted` may come from another UDP port of the address the
//! HELLO was sent to (the answering host's process that owns the flow); every later
//! datagram of the flow goes to that port, and the flow hears only that port.
//!
//! The rule itself is flexpass_core::peer (shared with the library's in-process opening
//! side); this module keeps the table of flows that wait for their HELLO_ACK or moved.
//!
//! A flow keeps its key (peer the HELLO went to, flow id): the application's handle does
//! not change. Only moved flows and flows waiting for their HELLO_ACK have entries here.

use crate::flow::FlowKey;
use flexpass_wire::Packet;
use std::collections::HashMap;
use std::net::SocketAddr;

#[derive(Default)]
pub(crate) struct PeerMoves {
    /// Senders waiting for their HELLO_ACK: flow id → the address of their key. Flow ids
    /// are chosen by this endpoint, so one id names one such sender (`Endpoint::open`).
    awaiting: HashMap<u32, SocketAddr>,
    /// Moved senders: key → where the flow's datagrams go now.
    to: HashMap<FlowKey, SocketAddr>,
    /// Moved senders: (new peer, flow id) → key.
    from: HashMap<FlowKey, FlowKey>,
}

/// Which sender a datagram from `(src, flow_id)` is for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The sender with this key (its peer).
    Flow(FlowKey),
    /// The sender with this key, moved by this datagram (an accepted HELLO_ACK from another
    /// port of the same address).
    Moved(FlowKey),
    /// Ignored: from the address a moved flow left, or a HELLO_ACK for a sender waiting for
    /// one from another address (or from another port, not `accepted`).
    Ignored,
    /// No sender of this endpoint.
    Unknown,
}

impl PeerMoves {
    /// A sender was opened: it waits for its HELLO_ACK.
    pub(crate) fn opened(&mut self, key: FlowKey) {
        self.awaiting.insert(key.1, key.0);
    }

    /// Whether an opening sender has this flow id (a new flow takes another).
    pub(crate) fn id_in_use(&self, id: u32) -> bool {
        self.awaiting.contains_key(&id)
    }

    /// The sender's handshake is over (established or failed): its peer is settled.
    pub(crate) fn settled(&mut self, key: FlowKey) {
        if self.awaiting.get(&key.1) == Some(&key.0) {
            self.awaiting.remove(&key.1);
        }
    }

    /// The sender is gone.
    pub(crate) fn closed(&mut self, key: FlowKey) {
        self.settled(key);
        if let Some(to) = self.to.remove(&key) {
            self.from.remove(&(to, key.1));
        }
    }

    /// Where the sender's datagrams go.
    pub(crate) fn peer(&self, key: FlowKey) -> SocketAddr {
        if self.to.is_empty() {
            return key.0;
        }
        self.to.get(&key).copied().unwrap_or(key.0)
    }

    /// The sender a datagram from `wire` = (source, flow id) is for; `exists` tells whether
    /// a sender has a key. Moves the flow on an accepted HELLO_ACK from another port of the
    /// address its HELLO went to, while it waits for one.
    pub(crate) fn route(
        &mut self,
        wire: FlowKey,
        packet: &Packet,
        exists: impl Fn(FlowKey) -> bool,
    ) -> Route {
        if !self.from.is_empty() {
            if let Some(&key) = self.from.get(&wire) {
                return Route::Flow(key);
            }
        }
        if exists(wire) {
            // From the address the flow left: not its peer any more.
            if !self.to.is_empty() && self.to.contains_key(&wire) {
                return Route::Ignored;
            }
            return Route::Flow(wire);
        }
        let Packet::HelloAck(ack) = packet else {
            return Route::Unknown;
        };
        let Some(&hello_to) = self.awaiting.get(&wire.1) else {
            return Route::Unknown;
        };
        let key = (hello_to, wire.1);
        if !flexpass_core::peer::hello_ack_moves(hello_to, wire.0, ack) || !exists(key) {
            return Route::Ignored;
        }
        self.awaiting.remove(&wire.1);
        self.to.insert(key, wire.0);
        self.from.insert(wire, key);
        Route::Moved(key)
    }

    /// Entries (memory report): senders waiting for their HELLO_ACK, moved senders.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.awaiting.len(), self.to.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::{HelloAck, HelloStatus, TransportKind};

    fn ack(flow_id: u32, status: HelloStatus) -> Packet {
        Packet::HelloAck(HelloAck {
            flow_id,
            transport: TransportKind::FlexPass,
            status,
        })
    }

    #[test]
    fn an_accepted_hello_ack_from_another_port_of_the_address_moves_the_flow_once() {
        let p: SocketAddr = "10.0.0.2:7946".parse().unwrap();
        let q: SocketAddr = "10.0.0.2:40000".parse().unwrap();
        let other: SocketAddr = "10.0.0.3:40000".parse().unwrap();
        let key = (p, 9);
        let mut m = PeerMoves::default();
        m.opened(key);
        let exists = |k: FlowKey| k == key;
        // Another address, or another port with a status other than accepted: ignored.
        assert_eq!(
            m.route((other, 9), &ack(9, HelloStatus::Accepted), exists),
            Route::Ignored
        );
        assert_eq!(
            m.route((q, 9), &ack(9, HelloStatus::Refused), exists),
            Route::Ignored
        );
        assert_eq!(
            m.route((q, 9), &ack(9, HelloStatus::Retry { cookie: 1 }), exists),
            Route::Ignored
        );
        assert_eq!(m.peer(key), p);
        // Another flow id: unknown.
        assert_eq!(
            m.route((q, 8), &ack(8, HelloStatus::Accepted), exists),
            Route::Unknown
        );
        assert_eq!(
            m.route((q, 9), &ack(9, HelloStatus::Accepted), exists),
            Route::Moved(key)
        );
        assert_eq!(m.peer(key), q);
        // From then on: Q is the peer, P is not, and no second move.
        assert_eq!(
            m.route((q, 9), &ack(9, HelloStatus::Accepted), exists),
            Route::Flow(key)
        );
        assert_eq!(
            m.route((p, 9), &ack(9, HelloStatus::Accepted), exists),
            Route::Ignored
        );
        let q2: SocketAddr = "10.0.0.2:40001".parse().unwrap();
        assert_eq!(
            m.route((q2, 9), &ack(9, HelloStatus::Accepted), exists),
            Route::Unknown
        );
        m.closed(key);
        assert_eq!(m.sizes(), (0, 0));
        assert_eq!(m.peer(key), p);
    }

    #[test]
    fn a_settled_flow_does_not_move() {
        let p: SocketAddr = "10.0.0.2:7946".parse().unwrap();
        let q: SocketAddr = "10.0.0.2:40000".parse().unwrap();
        let key = (p, 9);
        let mut m = PeerMoves::default();
        m.opened(key);
        assert_eq!(
            m.route(key, &ack(9, HelloStatus::Accepted), |k| k == key),
            Route::Flow(key)
        );
        m.settled(key);
        assert_eq!(
            m.route((q, 9), &ack(9, HelloStatus::Accepted), |k| k == key),
            Route::Unknown
        );
        assert_eq!(m.peer(key), p);
        assert_eq!(m.sizes(), (0, 0));
    }
}
