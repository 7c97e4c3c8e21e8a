//! Sender and receiver driven directly (no network model): the state machines' contracts.

use bytes::Bytes;
use flexpass_core::{Nanos, Receiver, Sender, SenderConfig, MICROS, MILLIS};
use flexpass_wire::{Ack, Credit, Packet, SackBlocks, SubFlow, TransportKind};
use harness::{credit, drain, receiver, Dir, Fate, Pair};

mod harness;

#[test]
fn flexpass_sends_reactive_data_in_the_first_rtt() {
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::FlexPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![1u8; 20 * 1444]));
    let out = drain(&mut s, 0);
    assert!(matches!(out[0], Packet::Hello(_)));
    let reactive = out
        .iter()
        .filter(|p| matches!(p, Packet::Data(d) if d.subflow == SubFlow::Reactive))
        .count();
    assert_eq!(
        reactive, 10,
        "initial window of reactive data before any credit"
    );
    // ExpressPass waits for credits.
    let mut e = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    e.write(Bytes::from(vec![1u8; 20 * 1444]));
    assert_eq!(drain(&mut e, 0).len(), 1);
}

#[test]
fn forged_acks_and_credits_are_rejected_without_losing_data() {
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::FlexPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![9u8; 5000]));
    s.finish();
    drain(&mut s, 0);
    let forged = Ack {
        flow_id: 7,
        subflow: SubFlow::Reactive,
        ece: false,
        cum_ack: 50,
        ack_seq: 49,
        tsecr: 0,
        flow_ack: 5000,
        sack: SackBlocks::new(),
    };
    assert!(s.handle_packet(1, &Packet::Ack(forged)).is_err());
    let wrong_flow = Packet::Credit(Credit {
        flow_id: 8,
        credit_seq: 0,
        padding: 6,
    });
    assert!(s.handle_packet(1, &wrong_flow).is_err());
    assert_eq!(s.stats().rejected_packets, 2);
    assert_eq!(
        s.stats().bytes_acked,
        0,
        "nothing was acknowledged by forged packets"
    );
    assert!(!s.is_complete());
    let mut r = receiver(TransportKind::Dctcp);
    assert!(
        r.handle_packet(0, &credit(0), false).is_err(),
        "a DCTCP receiver takes no credits"
    );
}

#[test]
fn flow_completes_over_a_lossless_loop_for_every_transport() {
    for t in [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
        TransportKind::Ppt,
    ] {
        let mut s = Sender::new(7, SenderConfig::new(t), 0, 0).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
        s.write(Bytes::from(data.clone()));
        s.finish();
        let mut p = Pair::new(s, receiver(t)).with_delay(5 * MICROS);
        p.run(100 * MILLIS, |p| p.r.is_finished() && p.s.is_complete());
        assert_eq!(p.delivered, data, "{t:?}");
        assert!(p.s.is_complete(), "{t:?}");
    }
}

#[test]
fn thousands_of_permanent_reactive_holes_do_not_stall_the_receiver() {
    // Every other reactive packet is lost and (as in FlexPass) re-sent on the proactive
    // sub-flow, so the reactive sequence space keeps 10 000 holes forever.
    let mut r = receiver(TransportKind::FlexPass);
    let mut next_proactive = 0u32;
    for i in 0..20_000u32 {
        let payload = Bytes::from(vec![(i % 251) as u8; 100]);
        let (subflow, seq) = if i % 2 == 0 {
            (SubFlow::Reactive, i)
        } else {
            next_proactive += 1;
            (SubFlow::Proactive, next_proactive - 1)
        };
        let d = flexpass_wire::Data {
            flow_id: 7,
            subflow,
            flow_seq: u64::from(i) * 100,
            subflow_seq: seq,
            credit_seq: if subflow == SubFlow::Proactive {
                seq
            } else {
                0
            },
            tsval: 0,
            fin: false,
            retransmission: false,
            priority: None,
            payload,
        };
        r.handle_packet(u64::from(i), &Packet::Data(d), false)
            .unwrap();
        let ack = std::iter::from_fn(|| r.poll_transmit(u64::from(i)))
            .find_map(|t| match t.packet {
                Packet::Ack(a) => Some(a),
                _ => None,
            })
            .expect("every data packet is acknowledged");
        assert_eq!(ack.ack_seq, seq);
        assert_eq!(ack.flow_ack, u64::from(i + 1) * 100);
    }
    assert!(
        r.stats().untracked > 0,
        "the hole list filled up: {:?}",
        r.stats()
    );
    let mut total = 0;
    while let Some(b) = r.read() {
        total += b.len();
    }
    assert_eq!(total, 2_000_000);
}

#[test]
fn hello_is_retried_with_doubling_timeouts_then_the_flow_fails_with_a_fallback_hint() {
    use flexpass_core::SenderError;
    let cfg = SenderConfig::new(TransportKind::FlexPass);
    let (timeout, retries) = (cfg.hello_timeout, cfg.hello_retries);
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from_static(b"x"));
    s.finish();
    // Nothing arrives.
    let mut p = Pair::new(s, receiver(TransportKind::FlexPass)).with_path(|_, _, _| Fate::Lost);
    p.run(600_000 * MILLIS, |p| p.s.error().is_some());
    let (s, now) = (&p.s, p.now);
    let hellos: Vec<u64> = p
        .sent(Dir::ToReceiver)
        .filter(|(_, p)| matches!(p, Packet::Hello(_)))
        .map(|(at, _)| at)
        .collect();
    assert_eq!(s.error(), Some(SenderError::PeerNotResponding));
    assert!(s
        .error()
        .unwrap()
        .to_string()
        .contains("fall back to kernel TCP"));
    assert_eq!(hellos.len() as u32, 1 + retries);
    let gaps: Vec<u64> = hellos.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, g) in gaps.iter().enumerate() {
        assert_eq!(*g, timeout << i, "{gaps:?}");
    }
    assert_eq!(
        now,
        timeout * ((1 << (retries + 1)) - 1),
        "gives up after the last timeout"
    );
}

/// HELLO_ACK `retry` (a receiver under a flood of HELLOs kept no state): the HELLO goes out
/// again at once with the cookie, and so does every later HELLO; the first RTT's reactive
/// data, dropped with the stateless answer, is marked lost without waiting for the RTO;
/// the same cookie again, or a retry after the flow is established, changes nothing.
#[test]
fn a_retry_with_a_cookie_resends_the_hello_with_it() {
    use flexpass_wire::{Hello, HelloAck, HelloStatus};
    for t in [
        TransportKind::FlexPass,
        TransportKind::Dctcp,
        TransportKind::ExpressPass,
    ] {
        let mut s = Sender::new(7, SenderConfig::new(t), 0, 0).unwrap();
        s.write(Bytes::from(vec![5u8; 4 * 1444]));
        let first = drain(&mut s, 0);
        assert!(matches!(
            &first[0],
            Packet::Hello(Hello { cookie: None, .. })
        ));
        let reactive = first
            .iter()
            .filter(|p| matches!(p, Packet::Data(_)))
            .count();
        let retry = |cookie| {
            Packet::HelloAck(HelloAck {
                flow_id: 7,
                transport: t,
                status: HelloStatus::Retry { cookie },
            })
        };
        s.handle_packet(100 * MICROS, &retry(0xc0ffee)).unwrap();
        let again = drain(&mut s, 100 * MICROS);
        assert!(
            matches!(
                &again[0],
                Packet::Hello(Hello {
                    cookie: Some(0xc0ffee),
                    ..
                })
            ),
            "{t:?}: {again:?}"
        );
        assert_eq!(s.stats().cookie_retries, 1);
        assert!(!s.is_established());
        // DCTCP sends the dropped first-RTT data again at once (FlexPass keeps it for
        // credits), and it goes after the HELLO.
        let resent = again
            .iter()
            .filter(|p| matches!(p, Packet::Data(_)))
            .count();
        match t {
            TransportKind::Dctcp => assert_eq!(resent, reactive, "{again:?}"),
            _ => assert_eq!(resent, 0, "{again:?}"),
        }
        assert_eq!(s.stats().losses_reactive, reactive as u64);
        // The same cookie again: nothing new (the HELLO with it is on its way).
        s.handle_packet(150 * MICROS, &retry(0xc0ffee)).unwrap();
        assert!(drain(&mut s, 150 * MICROS)
            .iter()
            .all(|p| !matches!(p, Packet::Hello(_))));
        // A HELLO retransmission carries the cookie too.
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
        assert!(drain(&mut s, at).iter().any(|p| matches!(
            p,
            Packet::Hello(Hello {
                cookie: Some(0xc0ffee),
                ..
            })
        )));
        let ok = Packet::HelloAck(HelloAck {
            flow_id: 7,
            transport: t,
            status: HelloStatus::Accepted,
        });
        s.handle_packet(at + 1, &ok).unwrap();
        assert!(s.is_established());
        // Established: a (late or forged) retry is ignored.
        s.handle_packet(at + 2, &retry(1)).unwrap();
        assert!(drain(&mut s, at + 2)
            .iter()
            .all(|p| !matches!(p, Packet::Hello(_))));
        assert!(s.is_established() && s.error().is_none());
    }
}

/// A peer answering every HELLO with a fresh cookie cannot make the sender ping-pong:
/// after 8 immediate re-sends only the HELLO timer sends it.
#[test]
fn fresh_cookies_forever_do_not_make_the_sender_ping_pong() {
    use flexpass_wire::{HelloAck, HelloStatus};
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    drain(&mut s, 0);
    let mut hellos = 0;
    for i in 0..100u64 {
        let p = Packet::HelloAck(HelloAck {
            flow_id: 7,
            transport: TransportKind::ExpressPass,
            status: HelloStatus::Retry { cookie: i },
        });
        s.handle_packet(i, &p).unwrap();
        hellos += drain(&mut s, i)
            .iter()
            .filter(|p| matches!(p, Packet::Hello(_)))
            .count();
    }
    assert_eq!(hellos, 8);
    assert_eq!(s.stats().cookie_retries, 8);
}

/// A DCTCP flow whose last two data packets are lost (nothing behind them to trigger
/// three duplicate ACKs). Without the tail-loss probe it waits for the RTO; with it
/// (RFC 8985), one probe goes out 2·SRTT after the last ACK, its ACK reveals the hole, and
/// the flow finishes well before RTO_min without a timeout. Returns (completion time,
/// stats, the probe's payload).
fn tail_loss(transport: TransportKind, tlp: bool) -> (Nanos, flexpass_core::SenderStats) {
    let mut cfg = SenderConfig::new(transport);
    cfg.dctcp.tlp = tlp;
    cfg.ppt.lcp = false; // PPT: the HCP alone (the LCP would carry the tail)
    let mss = cfg.mss;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    // Ten segments: exactly DCTCP's initial window, the whole flow in the first RTT.
    let data: Vec<u8> = (0..10 * mss as u32).map(|i| (i * 13 + 1) as u8).collect();
    s.write(Bytes::from(data.clone()));
    s.finish();
    // The original transmissions of the last two segments are lost.
    let mut p = Pair::new(s, receiver(transport)).with_path(move |t, _, _| match &t.packet {
        Packet::Data(d) if d.flow_seq >= 8 * mss as u64 && !d.retransmission => Fate::Lost,
        _ => Fate::after(5 * MICROS),
    });
    p.run(100 * MILLIS, |p| p.s.is_complete());
    assert!(p.s.is_complete(), "{transport:?} tlp {tlp}: not complete");
    assert_eq!(p.delivered, data);
    (p.now, p.s.stats().clone())
}

#[test]
fn tail_loss_probe_recovers_a_lost_tail_without_the_rto() {
    let rto_min = SenderConfig::new(TransportKind::Dctcp).dctcp.rto_min;
    let (without, st) = tail_loss(TransportKind::Dctcp, false);
    assert_eq!(st.timeouts, 1, "without a probe the tail waits for the RTO");
    assert!(without >= rto_min);
    assert_eq!(st.tlp_probes, 0);
    for t in [TransportKind::Dctcp, TransportKind::Ppt] {
        let (with, st) = tail_loss(t, true);
        assert_eq!(st.timeouts, 0, "{t:?}: the probe's ACK recovers the tail");
        assert_eq!((st.tlp_probes, st.tlp_recoveries), (1, 1), "{t:?}");
        // PTO = 2·SRTT (SRTT ≈ 10 µs here) after the last ACK, then one RTT of recovery.
        assert!(with < rto_min / 20, "{t:?}: completed at {with} ns");
    }
}

fn data(subflow: SubFlow, subflow_seq: u32, flow_seq: u64) -> Packet {
    Packet::Data(flexpass_wire::Data {
        flow_id: 7,
        subflow,
        flow_seq,
        subflow_seq,
        credit_seq: subflow_seq,
        tsval: 1,
        fin: false,
        retransmission: false,
        priority: None,
        payload: Bytes::from(vec![1u8; 1000]),
    })
}

/// The ACKs a receiver sends after a batch read with ACKs held (the agent's receive loop).
fn acks(r: &mut Receiver) -> Vec<Ack> {
    r.set_ack_hold(false);
    let a = std::iter::from_fn(|| r.poll_transmit(0))
        .filter_map(|t| match t.packet {
            Packet::Ack(a) => Some(a),
            _ => None,
        })
        .collect();
    r.set_ack_hold(true);
    a
}

#[test]
fn acks_of_credit_scheduled_data_read_together_are_coalesced_only_when_covered() {
    // Without a hold (the model) every data packet gets its own ACK.
    let mut r = receiver(TransportKind::FlexPass);
    for i in 0..3 {
        r.handle_packet(0, &data(SubFlow::Proactive, i, u64::from(i) * 1000), false)
            .unwrap();
    }
    assert_eq!(
        std::iter::from_fn(|| r.poll_transmit(0))
            .filter(|t| matches!(t.packet, Packet::Ack(_)))
            .count(),
        3
    );
    let mut r = receiver(TransportKind::FlexPass);
    acks(&mut r);
    // Three in-order proactive packets in one batch: one ACK.
    for i in 0..3 {
        r.handle_packet(0, &data(SubFlow::Proactive, i, u64::from(i) * 1000), false)
            .unwrap();
    }
    let a = acks(&mut r);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!((a[0].cum_ack, a[0].ack_seq, a[0].flow_ack), (3, 2, 3000));
    // With holes the later ACK's SACK blocks still cover the earlier packets: one ACK.
    r.handle_packet(0, &data(SubFlow::Proactive, 4, 4000), false)
        .unwrap();
    r.handle_packet(0, &data(SubFlow::Proactive, 6, 6000), false)
        .unwrap();
    let a = acks(&mut r);
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0].sack.as_slice(), &[(6, 7), (4, 5)]);
    // A CE-marked ACK is never replaced; reactive (DCTCP) data gets an ACK per packet.
    r.handle_packet(0, &data(SubFlow::Proactive, 7, 7000), true)
        .unwrap();
    r.handle_packet(0, &data(SubFlow::Proactive, 8, 8000), false)
        .unwrap();
    r.handle_packet(0, &data(SubFlow::Reactive, 0, 3000), false)
        .unwrap();
    r.handle_packet(0, &data(SubFlow::Reactive, 1, 5000), false)
        .unwrap();
    let a = acks(&mut r);
    assert_eq!(
        a.iter()
            .map(|a| (a.subflow, a.ack_seq, a.ece))
            .collect::<Vec<_>>(),
        [
            (SubFlow::Proactive, 7, true),
            (SubFlow::Reactive, 0, false),
            (SubFlow::Reactive, 1, false),
            // The held ACK leaves when the batch ends.
            (SubFlow::Proactive, 8, false),
        ]
    );
    assert_eq!(r.stats().acks_coalesced, 3);
    // ExpressPass coalesces too; DCTCP never does.
    let mut e = receiver(TransportKind::ExpressPass);
    let mut d = receiver(TransportKind::Dctcp);
    e.set_ack_hold(true);
    d.set_ack_hold(true);
    for i in 0..4 {
        e.handle_packet(0, &data(SubFlow::Proactive, i, u64::from(i) * 1000), false)
            .unwrap();
        d.handle_packet(0, &data(SubFlow::Reactive, i, u64::from(i) * 1000), false)
            .unwrap();
    }
    assert_eq!(acks(&mut e).len(), 1);
    assert_eq!(acks(&mut d).len(), 4);
}
