//! "A flow's peer is where its HELLO_ACK came from" (docs/protocol.md §6.7, §11 "The peer
//! of a flow"): the one rule every opening side applies — the agent's endpoint
//! (flexpass-agent's peer_move.rs, which keeps the table of moved flows) and an opening
//! application process (libflexpass's in-process connections).

use flexpass_wire::{HelloAck, HelloStatus};
use std::net::SocketAddr;

/// Whether a HELLO_ACK from `from`, for a sender still waiting for its HELLO_ACK whose
/// HELLO went to `hello_to`, moves the flow to `from`: an `accepted` HELLO_ACK from
/// another UDP port of the same IPv4 address. One from the address itself is the flow's
/// own peer (no move); anything else is ignored, never answered.
pub fn hello_ack_moves(hello_to: SocketAddr, from: SocketAddr, ack: &HelloAck) -> bool {
    from != hello_to && from.ip() == hello_to.ip() && ack.status == HelloStatus::Accepted
}

#[cfg(test)]
mod tests {
    use super::*;
    use flexpass_wire::TransportKind;

    fn ack(status: HelloStatus) -> HelloAck {
        HelloAck {
            flow_id: 9,
            transport: TransportKind::FlexPass,
            status,
        }
    }

    #[test]
    fn only_an_accepted_hello_ack_from_another_port_of_the_address_moves() {
        let p: SocketAddr = "10.0.0.2:7890".parse().unwrap();
        let q: SocketAddr = "10.0.0.2:40000".parse().unwrap();
        let other: SocketAddr = "10.0.0.3:40000".parse().unwrap();
        assert!(hello_ack_moves(p, q, &ack(HelloStatus::Accepted)));
        assert!(!hello_ack_moves(p, p, &ack(HelloStatus::Accepted)));
        assert!(!hello_ack_moves(p, other, &ack(HelloStatus::Accepted)));
        assert!(!hello_ack_moves(p, q, &ack(HelloStatus::Refused)));
        assert!(!hello_ack_moves(
            p,
            q,
            &ack(HelloStatus::Retry { cookie: 1 })
        ));
    }
}
