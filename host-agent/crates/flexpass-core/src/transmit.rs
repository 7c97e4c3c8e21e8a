use flexpass_wire::{Ecn, Packet, TrafficClass, TransportKind};

/// A packet the caller must put on the wire, with the IP header fields it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub packet: Packet,
    /// Traffic class: selects the DSCP (via the deployment's `DscpPlan`) and thus the switch queue.
    pub class: TrafficClass,
    /// ECN codepoint for the IP header.
    pub ecn: Ecn,
}

impl Transmit {
    /// Class and ECN codepoint come from the protocol's one marking rule
    /// (`Packet::marking`, docs/protocol.md "DSCP plan" / "ECN").
    pub fn new(packet: Packet, transport: TransportKind) -> Self {
        let (class, ecn) = packet.marking(transport);
        Transmit { packet, class, ecn }
    }
}
