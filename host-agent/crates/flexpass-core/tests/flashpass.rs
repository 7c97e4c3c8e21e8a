//! FlashPass sender and receiver over a zero-delay reliable channel: what the fuzz harness
//! (host-agent/fuzz, docs/fuzzing.md) found — data licensed only by genuine grants, and an
//! idle stream that stops emulating.

use bytes::Bytes;
use flexpass_core::{
    CreditConfig, FlashPassConfig, Receiver, ReceiverConfig, Sender, SenderConfig, MICROS, MILLIS,
};
use flexpass_wire::{EmulationCredit, EmulationGrant, Packet, SubFlow, TransportKind};
use harness::{Pair, Sent};

mod harness;

const MSS: usize = 1000;

fn sender(unscheduled: bool) -> Sender {
    let mut c = SenderConfig::new(TransportKind::FlashPass);
    c.mss = MSS;
    c.flashpass = FlashPassConfig::for_link(1e9, 10 * MICROS, 200 * MICROS);
    c.flashpass.unscheduled = unscheduled;
    Sender::new(7, c, 0, 0).unwrap()
}

fn receiver() -> Receiver {
    let cfg = ReceiverConfig::new(CreditConfig::for_link(1e9, 1.0, 10 * MICROS));
    Receiver::new(7, TransportKind::FlashPass, &cfg).unwrap()
}

fn emulations(sent: &[Sent]) -> usize {
    sent.iter()
        .filter(|x| matches!(x.transmit.packet, Packet::Emulation(_)))
        .count()
}

#[test]
fn an_idle_stream_stops_emulating() {
    // Everything both sides send is delivered at once.
    let mut p = Pair::new(sender(true), receiver());
    assert!(p.s.write(Bytes::from(vec![1u8; 5 * MSS])));
    p.run_until(20 * MILLIS);
    assert_eq!(p.s.unacked_bytes(), 0, "everything ACKed");
    assert!(
        emulations(&p.log) > 0,
        "the stream emulated while it had data"
    );
    // Idle: nothing written, nothing lost. Grants of emulation packets still in flight
    // come back; no new emulation packet leaves.
    let mark = p.log.len();
    p.run_until(40 * MILLIS);
    assert_eq!(emulations(&p.log[mark..]), 0, "an idle stream emulates");
    assert_eq!(p.s.poll_timeout(), None, "nothing scheduled while idle");
    // New data: emulation again, and it is delivered.
    assert!(p.s.write(Bytes::from(vec![2u8; 2 * MSS])));
    let mark = p.log.len();
    p.run_until(60 * MILLIS);
    assert!(emulations(&p.log[mark..]) > 0);
    assert_eq!(p.s.unacked_bytes(), 0);
    assert_eq!(p.r.delivered_bytes(), 7 * MSS as u64);
    assert_eq!((p.rejected_by_sender, p.rejected_by_receiver), (0, 0));
}

#[test]
fn only_a_genuine_grant_licenses_data_and_only_once() {
    let mut s = sender(false);
    assert!(s.write(Bytes::from(vec![1u8; 10 * MSS])));
    s.finish();
    let mut now = 0;
    let mut emu = vec![];
    while let Some(t) = s.poll_transmit(now) {
        if let Packet::Emulation(e) = t.packet {
            emu.push(e);
        }
        now += 10 * MICROS;
    }
    let e = emu.first().expect("an emulation packet");
    let genuine = EmulationGrant {
        emu_seq: e.emu_seq,
        timestamp: e.timestamp,
    };
    let grants = vec![
        genuine,
        genuine,
        // A seq never sent, and the right seq with a forged T.
        EmulationGrant {
            emu_seq: e.emu_seq + 1000,
            timestamp: e.timestamp,
        },
        EmulationGrant {
            emu_seq: emu[1].emu_seq,
            timestamp: emu[1].timestamp.wrapping_add(5),
        },
    ];
    let credit = Packet::EmulationCredit(EmulationCredit { flow_id: 7, grants });
    s.handle_packet(now, &credit).unwrap();
    // The same EMULATION_CREDIT again (a duplicate on the network).
    s.handle_packet(now, &credit).unwrap();
    assert_eq!(s.stats().emulation.grants_unmatched, 7);
    // Past every slot: one data packet, for the one genuine grant.
    let later = now + 10 * MILLIS;
    s.handle_timeout(later);
    let data: Vec<_> = std::iter::from_fn(|| s.poll_transmit(later))
        .filter_map(|t| match t.packet {
            Packet::Data(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(data.len(), 1, "data packets sent: {data:?}");
    assert_eq!(data[0].subflow, SubFlow::Proactive);
}
