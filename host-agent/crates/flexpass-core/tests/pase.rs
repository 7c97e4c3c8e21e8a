//! PASE's endpoint (SIGCOMM'14 §3.3) driven directly: data in the queue of its last accepted
//! arbitration, the window at reference rate × base RTT, and forged arbitrations refused.

use bytes::Bytes;
use flexpass_core::pase::{Arbitration, ArbitrationError, PaseConfig};
use flexpass_core::{Sender, SenderConfig, MICROS};
use flexpass_wire::{Packet, TrafficClass, TransportKind};

fn config(reference_rate: bool) -> SenderConfig {
    let mut c = SenderConfig::new(TransportKind::Pase);
    c.pase = PaseConfig {
        queues: 8,
        line_rate_bps: 10e9,
        base_rtt: 40 * MICROS,
        reference_rate,
        probing: false,
    };
    c
}

fn sender(reference_rate: bool) -> Sender {
    let mut s = Sender::new(9, config(reference_rate), 1_000_000, 0).unwrap();
    s.write(Bytes::from(vec![5u8; 1_000_000]));
    s.finish();
    s
}

/// The data classes of everything the sender may send now.
fn data_classes(s: &mut Sender) -> Vec<TrafficClass> {
    let mut out = vec![];
    while let Some(t) = s.poll_transmit(0) {
        if matches!(t.packet, Packet::Data(_)) {
            out.push(t.class);
        }
    }
    out
}

#[test]
fn data_follows_the_arbitrated_queue_at_the_reference_rate() {
    let mut s = sender(true);
    let mss = s.config().mss as f64;
    // Before any answer: alone on the link, top queue, line rate × base RTT (50 kB).
    assert_eq!(s.arbitration().unwrap().queue, 0);
    assert!((s.cwnd() - 50_000.0 / mss).abs() < 1e-9);
    let a = Arbitration {
        queue: 3,
        reference_rate_bps: 2e9,
    };
    s.on_arbitration(9, a).unwrap();
    assert_eq!(s.arbitration(), Some(a));
    // 2 Gbit/s × 40 µs = 10 kB: the window shrinks to about 7 packets, all in P3.
    assert!((s.cwnd() - 10_000.0 / mss).abs() < 1e-9);
    let first = data_classes(&mut s);
    assert_eq!(first.len(), (10_000.0 / mss).floor() as usize);
    assert!(first.iter().all(|c| *c == TrafficClass::Priority(3)));
    // Promoted to P2 at line rate: the window opens, the next packets go in P2.
    s.on_arbitration(
        9,
        Arbitration {
            queue: 2,
            reference_rate_bps: 10e9,
        },
    )
    .unwrap();
    let next = data_classes(&mut s);
    assert_eq!(next.len(), (50_000.0 / mss).floor() as usize - first.len());
    assert!(next.iter().all(|c| *c == TrafficClass::Priority(2)));
}

#[test]
fn pase_dctcp_takes_the_queue_but_not_the_rate() {
    let mut s = sender(false);
    let w = s.cwnd();
    s.on_arbitration(
        9,
        Arbitration {
            queue: 5,
            reference_rate_bps: 1e6,
        },
    )
    .unwrap();
    assert_eq!(s.cwnd(), w, "PASE-DCTCP keeps DCTCP's window");
    assert!(data_classes(&mut s)
        .iter()
        .all(|c| *c == TrafficClass::Priority(5)));
}

#[test]
fn forged_or_malformed_arbitrations_are_rejected_and_change_nothing() {
    let mut s = sender(true);
    let before = (s.arbitration(), s.cwnd());
    let ok = Arbitration {
        queue: 1,
        reference_rate_bps: 1e9,
    };
    let cases = [
        (
            8,
            ok,
            ArbitrationError::WrongFlow {
                expected: 9,
                got: 8,
            },
        ),
        (
            9,
            Arbitration { queue: 8, ..ok },
            ArbitrationError::QueueOutOfRange {
                queue: 8,
                queues: 8,
            },
        ),
        (
            9,
            Arbitration {
                reference_rate_bps: 20e9,
                ..ok
            },
            ArbitrationError::BadRate(20e9),
        ),
    ];
    for (flow, a, want) in cases {
        let e = s.on_arbitration(flow, a).unwrap_err();
        assert_eq!(e, want);
        assert!(!e.to_string().is_empty());
    }
    for r in [f64::NAN, 0.0, -5.0, f64::INFINITY] {
        let e = s
            .on_arbitration(
                9,
                Arbitration {
                    reference_rate_bps: r,
                    ..ok
                },
            )
            .unwrap_err();
        assert!(matches!(e, ArbitrationError::BadRate(_)), "{e}");
    }
    assert_eq!((s.arbitration(), s.cwnd()), before);
    // A flow of another transport has no arbitrator.
    let mut d = Sender::new(9, SenderConfig::new(TransportKind::Dctcp), 0, 0).unwrap();
    assert_eq!(
        d.on_arbitration(9, ok).unwrap_err(),
        ArbitrationError::NotPase("dctcp")
    );
}

mod harness;

/// An arbitrator that never answers leaves the flow on its first (local) arbitration and
/// DCTCP's window: it completes, byte for byte, with no stall and no timeout.
#[test]
fn without_any_arbitration_the_flow_completes_as_dctcp_in_its_queue() {
    // Flow 7: the harness's receiver.
    let mut s = Sender::new(7, config(true), 1_000_000, 0).unwrap();
    s.write(Bytes::from(harness::pattern(1_000_000)));
    s.finish();
    let mut pair =
        harness::Pair::new(s, harness::receiver(TransportKind::Pase)).with_delay(10 * MICROS);
    let done = pair.run(100_000 * MICROS, |p| p.s.is_complete());
    assert!(
        done,
        "acked {} of 1 MB, error {:?}, rejected {} / {}, stats {:?}",
        pair.s.acked_bytes(),
        pair.s.error(),
        pair.rejected_by_sender,
        pair.rejected_by_receiver,
        pair.s.stats()
    );
    assert_eq!(pair.delivered, harness::pattern(1_000_000));
    assert_eq!(pair.s.stats().timeouts, 0);
    assert_eq!(pair.s.arbitration().unwrap().queue, 0);
    let data = pair.count(harness::Dir::ToReceiver, |p| matches!(p, Packet::Data(_)));
    assert!(data >= 1_000_000 / pair.s.config().mss);
}

/// Probing (§3.3): once an arbitration puts the flow in the lowest queue it sends only
/// header-only probes (REACTIVE_DATA without payload, `PROBE_SEQ`), one per RTT, in that
/// queue; while their answers are ECN-marked it keeps probing; the first unmarked answer
/// resumes data, and the flow completes byte for byte without a timeout.
#[test]
fn in_the_lowest_queue_only_probes_go_out_until_an_answer_shows_room() {
    use harness::{Dir, Fate};
    let mut c = config(true);
    c.pase.probing = true;
    let mut s = Sender::new(7, c, 1_000_000, 0).unwrap();
    s.write(Bytes::from(harness::pattern(1_000_000)));
    s.finish();
    let is_probe = |p: &Packet| matches!(p, Packet::Data(d) if d.is_probe());
    let mark_probes = |t: &flexpass_core::Transmit, dir: Dir, _now| {
        let probe = matches!(&t.packet, Packet::Data(d) if d.is_probe());
        Fate::Deliver {
            delay: 10 * MICROS,
            ce: probe && dir == Dir::ToReceiver,
        }
    };
    let mut pair =
        harness::Pair::new(s, harness::receiver(TransportKind::Pase)).with_path(mark_probes);
    assert!(pair.run(1000 * MICROS, |p| p.s.is_established()));
    let lowest = Arbitration {
        queue: 7,
        reference_rate_bps: 1e6,
    };
    pair.s.on_arbitration(7, lowest).unwrap();
    let t0 = pair.now;
    pair.run_until(t0 + 2000 * MICROS);
    let after: Vec<(u64, Packet)> = pair
        .sent(Dir::ToReceiver)
        .filter(|&(t, _)| t > t0)
        .map(|(t, p)| (t, p.clone()))
        .collect();
    let probes: Vec<u64> = after
        .iter()
        .filter(|(_, p)| is_probe(p))
        .map(|&(t, _)| t)
        .collect();
    assert!(
        after.iter().all(|(_, p)| is_probe(p)),
        "data left while probing: {:?}",
        after.iter().find(|(_, p)| !is_probe(p))
    );
    // One per RTT (≈ 20 µs here): 2 ms holds dozens, never two within an RTT.
    assert!(probes.len() >= 20, "{} probes in 2 ms", probes.len());
    assert!(probes.windows(2).all(|w| w[1] - w[0] >= 15 * MICROS));
    assert_eq!(pair.s.stats().pase_probe_resumes, 0);
    assert_eq!(pair.rejected_by_receiver + pair.rejected_by_sender, 0);
    // The lowest queue drains: the next probe's answer is unmarked and data resumes.
    pair.set_path(|_, _, _| Fate::after(10 * MICROS));
    let done = pair.run(t0 + 200_000 * MICROS, |p| p.s.is_complete());
    assert!(done, "acked {} of 1 MB", pair.s.acked_bytes());
    assert_eq!(pair.delivered, harness::pattern(1_000_000));
    assert_eq!(pair.s.stats().pase_probe_resumes, 1);
    assert_eq!(pair.s.stats().timeouts, 0);
    // The probe in flight when the path changed was marked; the next one resumed.
    let sent = pair.s.stats().pase_probes as usize;
    assert!(
        (probes.len() + 1..=probes.len() + 2).contains(&sent),
        "{sent} probes"
    );
}

/// Without probing (the default) the same arbitration keeps data flowing in the lowest
/// queue: no probe is ever sent.
#[test]
fn without_probing_the_lowest_queue_still_sends_data() {
    use harness::Dir;
    let mut s = Sender::new(7, config(true), 1_000_000, 0).unwrap();
    s.write(Bytes::from(harness::pattern(1_000_000)));
    s.finish();
    let mut pair =
        harness::Pair::new(s, harness::receiver(TransportKind::Pase)).with_delay(10 * MICROS);
    assert!(pair.run(1000 * MICROS, |p| p.s.is_established()));
    let lowest = Arbitration {
        queue: 7,
        reference_rate_bps: 1e6,
    };
    pair.s.on_arbitration(7, lowest).unwrap();
    assert!(pair.run(200_000 * MICROS, |p| p.s.is_complete()));
    assert_eq!(pair.delivered, harness::pattern(1_000_000));
    let probes = pair.count(
        Dir::ToReceiver,
        |p| matches!(p, Packet::Data(d) if d.is_probe()),
    );
    assert_eq!(probes, 0);
    assert_eq!(pair.s.stats().pase_probes, 0);
}
