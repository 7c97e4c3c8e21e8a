use flexpass_wire::{Ecn, Packet, SubFlow, TrafficClass, TransportKind};

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
    pub fn new(packet: Packet, transport: TransportKind) -> Self {
        let (class, ecn) = classify(&packet, transport);
        Transmit { packet, class, ecn }
    }
}

/// The single place that decides class and ECN codepoint of every packet (docs/protocol.md,
/// "DSCP plan" and "ECN"): credits go to Q0 as Not-ECT; every other FlexPass/ExpressPass
/// packet goes to Q1 as ECT(0) so a RED/ECN queue marks rather than drops it; DCTCP is legacy
/// traffic (Q2): data ECT(0), ACKs and control Not-ECT.
pub fn classify(packet: &Packet, transport: TransportKind) -> (TrafficClass, Ecn) {
    match (transport, packet) {
        (TransportKind::Dctcp, Packet::Data(_)) => (TrafficClass::Legacy, Ecn::Ect0),
        (TransportKind::Dctcp, _) => (TrafficClass::Legacy, Ecn::NotEct),
        (_, Packet::Credit(_)) => (TrafficClass::Credit, Ecn::NotEct),
        (_, Packet::Data(d)) => match d.subflow {
            SubFlow::Proactive => (TrafficClass::ProactiveData, Ecn::Ect0),
            SubFlow::Reactive => (TrafficClass::ReactiveData, Ecn::Ect0),
        },
        (_, _) => (TrafficClass::Control, Ecn::Ect0),
    }
}
