use flexpass_core::Nanos;
use flexpass_wire::{Ecn, Packet, TrafficClass};

pub type HostId = usize;

/// A packet in flight in the model: the FlexPass message plus the IP-level fields the
/// network acts on (class → DSCP → queue, ECN codepoint) and its size on the wire.
#[derive(Clone, Debug)]
pub struct SimPacket {
    pub src: HostId,
    pub dst: HostId,
    pub class: TrafficClass,
    pub ecn: Ecn,
    /// Ethernet bytes on the wire including preamble and IFG.
    pub wire_len: u32,
    pub packet: Packet,
    pub created: Nanos,
}

#[cfg(test)]
pub fn test_packet(class: TrafficClass, wire_len: u32) -> SimPacket {
    SimPacket {
        src: 0,
        dst: 1,
        class,
        ecn: Ecn::NotEct,
        wire_len,
        packet: Packet::CreditStop { flow_id: 0 },
        created: 0,
    }
}
