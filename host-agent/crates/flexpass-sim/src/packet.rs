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
    /// The switches the packet crossed, as a polynomial hash that is the same for a path
    /// and its reverse (`PathHash`): data and its credits must cross the same links.
    pub path: PathHash,
}

/// `SimPacket::short_dst` of a host index beyond u16.
pub const NO_DST: u16 = u16::MAX;

impl SimPacket {
    /// `dst` in 16 bits (`NO_DST` when it does not fit): what an event or a queue entry
    /// carries so that the next hop's route can be prefetched without the packet.
    pub fn short_dst(&self) -> u16 {
        u16::try_from(self.dst).unwrap_or(NO_DST)
    }
}

/// Hash of the sequence of switches a packet crossed. Packets from a flow's sender to its
/// receiver accumulate it forwards (h·P + n), packets the other way backwards (h + n·P^k), so
/// a path and its reverse hash alike: ExpressPass needs credits and data on the same path
/// (symmetric ECMP, ExpressPass §3.1), and the model checks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathHash {
    hash: u64,
    pow: u64,
}

const PATH_BASE: u64 = 0x100_0000_01b3; // FNV prime: odd, so powers never vanish mod 2^64

impl PathHash {
    pub fn new() -> Self {
        PathHash { hash: 0, pow: 1 }
    }

    /// The packet crossed switch `node`; `forward`: travelling sender → receiver.
    pub fn cross(&mut self, node: usize, forward: bool) {
        let n = node as u64 + 1;
        if forward {
            self.hash = self.hash.wrapping_mul(PATH_BASE).wrapping_add(n);
        } else {
            self.hash = self.hash.wrapping_add(n.wrapping_mul(self.pow));
            self.pow = self.pow.wrapping_mul(PATH_BASE);
        }
    }

    pub fn value(self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
pub fn test_packet(class: TrafficClass, wire_len: u32) -> Box<SimPacket> {
    Box::new(SimPacket {
        src: 0,
        dst: 1,
        class,
        ecn: Ecn::NotEct,
        wire_len,
        packet: Packet::CreditStop { flow_id: 0 },
        created: 0,
        path: PathHash::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::PathHash;

    #[test]
    fn a_path_and_its_reverse_hash_alike() {
        let path = [7usize, 3, 11, 4, 9];
        let mut fwd = PathHash::new();
        for &n in &path {
            fwd.cross(n, true);
        }
        let mut rev = PathHash::new();
        for &n in path.iter().rev() {
            rev.cross(n, false);
        }
        assert_eq!(fwd.value(), rev.value());
        // Another path through the same switches in another order does not.
        let mut other = PathHash::new();
        for &n in [7usize, 11, 3, 4, 9].iter().rev() {
            other.cross(n, false);
        }
        assert_ne!(fwd.value(), other.value());
    }
}
