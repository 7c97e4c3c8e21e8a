//! The endpoints under test, wrapped with what the invariants need. Every packet an endpoint
//! receives goes through the wire codec first (encode, then decode, as the agent does), every
//! packet it emits is checked, and [`SenderSut::check`] / [`ReceiverSut::check`] run after
//! every operation. A violated invariant panics with a message naming it.

use crate::alloc::{PER_BYTE, PER_PACKET};
use crate::pattern;
use bytes::Bytes;
use flexpass_core::config::uses_credits;
use flexpass_core::{
    CreditConfig, FlashPassConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig,
    TargetLossRule, Transmit, MICROS, MILLIS,
};
use flexpass_wire::{
    Ecn, EmulationGrant, HelloStatus, Packet, SubFlow, TrafficClass, TransportKind,
    CREDIT_PADDING_MAX, CREDIT_PADDING_MIN, MAX_EMULATION_GRANTS,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod receiver;
mod sender;
pub use receiver::ReceiverSut;
pub use sender::SenderSut;

/// Flow id of the flow under test.
pub const FLOW: u32 = 7;
/// Time advances stop here (about 52 days); timers still fire beyond it. Far below overflow.
pub const MAX_TIME: Nanos = 1 << 52;
/// No deadline may lie beyond this (it would be an overflow in the making).
pub const MAX_DEADLINE: Nanos = 1 << 62;

/// The clock after an `Advance` of `dt`: it stops at MAX_TIME, and never runs backwards
/// (timers fire beyond MAX_TIME; an advance from there leaves the clock where it is: it
/// once moved it back 5.5 s, and the receiver's next credit was then 5.5 s away).
pub fn advanced(now: Nanos, dt: u64) -> Nanos {
    now.max(now.saturating_add(dt).min(MAX_TIME))
}

/// The clock after jumping to deadline `t`.
pub fn jump(now: Nanos, t: Nanos) -> Nanos {
    assert!(
        t < MAX_DEADLINE,
        "deadline {t} ns is absurdly far (now {now})"
    );
    now.max(t)
}
/// Most packets one poll operation drains.
pub const DRAIN_MAX: usize = 4096;

pub fn sf(s: SubFlow) -> usize {
    match s {
        SubFlow::Proactive => 0,
        SubFlow::Reactive => 1,
    }
}

const SUBFLOWS: [SubFlow; 2] = [SubFlow::Proactive, SubFlow::Reactive];

/// Whether a `transport` endpoint may carry data on `subflow`.
pub fn subflow_allowed(transport: TransportKind, subflow: SubFlow) -> bool {
    match transport {
        TransportKind::FlexPass => true,
        TransportKind::ExpressPass => subflow == SubFlow::Proactive,
        TransportKind::Dctcp | TransportKind::PFabric | TransportKind::Pase => {
            subflow == SubFlow::Reactive
        }
        TransportKind::Ppt | TransportKind::FlashPass => true,
    }
}

/// The packet as the peer's decoder would hand it over: encode, decode. None when the
/// decoder rejects the encoding (the agent drops such a datagram before any flow sees it).
/// A packet that validates must come back unchanged.
pub fn through_wire(p: &Packet) -> Option<Packet> {
    let q = Packet::decode(&p.encode_to_vec()).ok()?;
    if p.validate().is_ok() {
        assert_eq!(&q, p, "a valid packet survives encode → decode");
    }
    Some(q)
}

/// Checks every endpoint applies to what it emits.
fn check_emitted(t: &Transmit, transport: TransportKind) {
    let p = &t.packet;
    assert_eq!(
        p.validate(),
        Ok(()),
        "emitted packet must be encodable: {p:?}"
    );
    assert_eq!(p.flow_id(), FLOW, "emitted packet of another flow: {p:?}");
    let (class, ecn) = p.marking(transport);
    match (transport, p) {
        // FlashPass §III-C: emulation packets take the emulation (credit) queue; the ECN
        // field is their dropping priority, ECT(0) ordinary, Not-ECT over-provisioned
        // (SenderSut checks which).
        (TransportKind::FlashPass, Packet::Emulation(_)) => {
            assert_eq!(t.class, TrafficClass::Credit, "marking of {p:?}");
            assert!(matches!(t.ecn, Ecn::Ect0 | Ecn::NotEct), "marking of {p:?}");
        }
        // PPT data carries its flow's priority (SIGCOMM'24 §4.2): the HCP one of P0–P3, the
        // LCP the mirror image P4–P7; the marking gives each half's top.
        (TransportKind::Ppt, Packet::Data(d)) => {
            let level = t.class.priority().expect("PPT data has a priority");
            let lcp = d.subflow == SubFlow::Proactive;
            assert_eq!(level >= 4, lcp, "PPT {:?} data at P{level}", d.subflow);
            assert_eq!(t.ecn, ecn, "marking of {p:?}");
        }
        _ => assert_eq!((t.class, t.ecn), (class, ecn), "marking of {p:?}"),
    }
    assert_eq!(
        Packet::decode(&p.encode_to_vec()).as_ref(),
        Ok(p),
        "emitted packet round-trips"
    );
}

/// What one endpoint saw, for the seed generator: the time and the event.
#[derive(Clone, Debug)]
pub enum Event {
    Write(usize),
    Finish,
    Deliver(Packet, bool),
    Poll(usize),
    Read(usize),
    /// `handle_timeout` after jumping to the endpoint's own deadline; the event's time is
    /// the clock before the jump, `after` the clock after it.
    Timeout {
        after: Nanos,
    },
}

/// `fp`: the FlashPass variant ([`flashpass_config`]; ignored for other transports).
pub fn sender_config(transport: TransportKind, mss: usize, fp: u8) -> SenderConfig {
    let mut c = SenderConfig::new(transport);
    c.mss = mss;
    c.flashpass = flashpass_config(fp, mss);
    c
}

/// FlashPass variants a header picks from (a tag below this).
pub const FLASHPASS_VARIANTS: u8 = 64;

/// FlashPass variant `v`: bits 0–1 pick the path (link rate, base RTT, T_wait), bit 2 turns
/// the pre-credit phase (Aeolus) off, bit 3 over-provisioning, bit 4 delayed feedback; bit 5
/// makes Algorithm 1 wait for 16 resolved packets (`min_update_samples`, the agent's). The
/// pre-credit phase is capped at four segments (a BDP would cover every input's bytes).
pub fn flashpass_config(v: u8, mss: usize) -> FlashPassConfig {
    const PATHS: [(f64, Nanos, Nanos); 4] = [
        (10e9, 100 * MICROS, MILLIS),
        (1e9, 10 * MICROS, 200 * MICROS),
        (10e9, MILLIS, MILLIS),
        (1e9, 40 * MILLIS, 40 * MILLIS),
    ];
    let (link, base_rtt, t_wait) = PATHS[usize::from(v & 3)];
    let mut c = FlashPassConfig::for_link(link, base_rtt, t_wait);
    c.unscheduled = v & 4 == 0;
    c.unscheduled_bytes = c.unscheduled_bytes.min(4 * mss as u64);
    c.over_provisioning = v & 8 == 0;
    c.delayed_feedback = v & 16 == 0;
    c.min_update_samples = if v & 32 == 0 { 1 } else { 16 };
    c
}

/// What the sender target and the invariants remember of one emulation packet sent.
#[derive(Clone, Copy, Debug)]
pub struct EmulationSent {
    pub emu_seq: u32,
    pub timestamp: u32,
    pub sent: Nanos,
    pub hold: u16,
}


/// `rate_scaled`: Algorithm 1 with the ns-2 target-loss rule instead of the paper's.
/// One seed in four paces credits in batches of 8 (`CreditConfig::batch`); half of the
/// seeds window credits as the host agent does (`credit_window_segment`).
pub fn receiver_config(max_reorder: u64, seed: u64, rate_scaled: bool) -> ReceiverConfig {
    let mut c = ReceiverConfig::new(CreditConfig::for_link(10e9, 0.5, 25 * MICROS));
    c.max_reorder_bytes = max_reorder;
    c.seed = seed;
    c.credit.batch = if seed % 4 == 3 { 8 } else { 1 };
    c.credit_window_segment = if (seed / 4) % 2 == 1 { 1448 } else { 0 };
    if rate_scaled {
        c.credit.target_loss_rule = TargetLossRule::RateScaled {
            target_loss_scaling: TargetLossRule::NS2_SCALING,
        };
    }
    c
}
