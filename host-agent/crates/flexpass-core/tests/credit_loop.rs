//! The sender's credit loop (ExpressPass Fig. 7's request / stop, the recovery timer, the
//! give-up timeout) against a receiver, or against credits the test makes up.

use bytes::Bytes;
use flexpass_core::{Sender, SenderConfig, MICROS, MILLIS};
use flexpass_wire::{Packet, TransportKind};
use harness::{credit, drain, is_credit, receiver, Dir, Fate, Pair};
use std::cell::Cell;

mod harness;

#[test]
fn proactive_tail_loss_is_recovered_by_the_recovery_timer_despite_wasted_credits() {
    let cfg = SenderConfig::new(TransportKind::ExpressPass);
    let timeout = cfg.recovery_timeout;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from_static(b"tail"));
    s.finish();
    drain(&mut s, 0);
    s.handle_packet(10, &credit(0)).unwrap();
    let lost = drain(&mut s, 10);
    assert!(matches!(&lost[..], [Packet::Data(d)] if d.fin), "{lost:?}");
    // The data packet is lost. Credits keep coming and are wasted until the recovery timer
    // marks the outstanding packet Lost; the next credit then carries it again.
    let mut now = 10;
    let mut resent = None;
    for seq in 1..1000u32 {
        now += 25 * MICROS;
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        s.handle_packet(now, &credit(seq)).unwrap();
        if let Some(Packet::Data(d)) = drain(&mut s, now)
            .into_iter()
            .find(|p| matches!(p, Packet::Data(_)))
        {
            resent = Some((now, d));
            break;
        }
    }
    let (at, d) = resent.expect("the tail packet is sent again");
    assert!(at >= timeout, "not before the recovery timeout");
    assert!(&d.payload[..] == b"tail" && d.retransmission && d.fin);
    assert_eq!(s.stats().recovery_timeouts, 1);
    assert!(s.stats().credits_wasted > 10);
}

#[test]
fn credit_requests_to_a_silent_peer_back_off_and_the_flow_fails() {
    use flexpass_core::SenderError;
    use flexpass_wire::{HelloAck, HelloStatus};
    let cfg = SenderConfig::new(TransportKind::ExpressPass);
    let (timeout, give_up) = (cfg.recovery_timeout, cfg.give_up_timeout);
    assert_eq!(give_up, flexpass_core::DEFAULT_GIVE_UP_TIMEOUT);
    let cap = cfg.dctcp.rto_max.max(timeout).min(timeout << 6);
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from(vec![3u8; 4 * 1444]));
    s.finish();
    // The peer answers the HELLO, then goes silent: no credit, no ACK, ever.
    let mut p = Pair::new(s, receiver(TransportKind::ExpressPass)).with_path(|_, _, _| Fate::Lost);
    p.exchange();
    p.now = 1;
    let ack = Packet::HelloAck(HelloAck {
        flow_id: 7,
        transport: TransportKind::ExpressPass,
        status: HelloStatus::Accepted,
    });
    p.inject(Dir::ToSender, ack, 0, false);
    p.run(600_000 * MILLIS, |p| p.s.error().is_some());
    let (s, now) = (&p.s, p.now);
    let requests: Vec<u64> = p
        .sent(Dir::ToReceiver)
        .filter(|(_, p)| matches!(p, Packet::CreditRequest(_)))
        .map(|(at, _)| at)
        .collect();
    // The flow gives up at the first expiry after the give-up timeout of silence, not sooner.
    let silent = now - 1;
    assert!(
        silent >= give_up && silent < give_up + cap,
        "failed after {silent} ns of silence"
    );
    let Some(SenderError::NoProgress {
        silent_ms,
        expiries,
    }) = s.error()
    else {
        panic!("{:?}", s.error())
    };
    assert_eq!(silent_ms, silent / MILLIS);
    assert_eq!(
        requests.len() as u32 + 1,
        expiries,
        "one CREDIT_REQUEST per expiry but the last"
    );
    // Gaps double up to 64 × the recovery timeout: not a request every timeout for 30 s.
    let gaps: Vec<u64> = requests.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, g) in gaps.iter().enumerate() {
        assert_eq!(*g, timeout << (i + 1).min(6), "gap {i}: {gaps:?}");
    }
}

#[test]
fn a_flow_survives_seconds_of_silence_within_the_give_up_timeout() {
    // An outage of the path (a link down until the control plane repairs it) longer than
    // the old bound of 16 expiries (~1.4 s) but shorter than the give-up timeout: the flow
    // keeps re-requesting credits and completes once the peer is heard again.
    use flexpass_wire::{HelloAck, HelloStatus};
    for (give_up_s, outage_s, survives) in [(30, 10, true), (2, 10, false)] {
        let mut cfg = SenderConfig::new(TransportKind::ExpressPass);
        cfg.give_up_timeout = give_up_s * 1_000 * MILLIS;
        let mut s = Sender::new(7, cfg, 0, 0).unwrap();
        s.write(Bytes::from(vec![5u8; 20 * 1444]));
        s.finish();
        drain(&mut s, 0);
        s.handle_packet(
            1,
            &Packet::HelloAck(HelloAck {
                flow_id: 7,
                transport: TransportKind::ExpressPass,
                status: HelloStatus::Accepted,
            }),
        )
        .unwrap();
        let outage_end = outage_s * 1_000 * MILLIS;
        // Everything either side sends is lost until the outage ends.
        let mut p =
            Pair::new(s, receiver(TransportKind::ExpressPass)).with_path(move |_, _, now| {
                if now >= outage_end {
                    Fate::after(0)
                } else {
                    Fate::Lost
                }
            });
        p.now = 1;
        p.run(120_000 * MILLIS, |p| {
            p.s.error().is_some() || p.s.is_complete()
        });
        let (s, now) = (&p.s, p.now);
        let requests_during_outage = p
            .sent(Dir::ToReceiver)
            .filter(|(at, p)| matches!(p, Packet::CreditRequest(_)) && *at < outage_end)
            .count();
        if survives {
            assert!(s.is_complete(), "give-up {give_up_s} s: {:?}", s.error());
            assert!(now > outage_end);
            assert!(
                (40..200).contains(&requests_during_outage),
                "backed-off requests, {requests_during_outage}"
            );
        } else {
            assert!(
                matches!(s.error(), Some(flexpass_core::SenderError::NoProgress { silent_ms, .. }) if silent_ms >= give_up_s * 1000),
                "{:?}",
                s.error()
            );
        }
    }
}

#[test]
fn sparse_credits_and_a_long_rtt_cause_no_spurious_recovery() {
    // An incast share of the credits: one credit every 20 ms, a 10 ms RTT (queueing), far
    // above the 2 ms recovery-timer floor. Packets in flight must not be declared lost.
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![9u8; 30 * 1444]));
    s.finish();
    let one_way = 5 * MILLIS;
    // The test supplies the (sparse) credits itself.
    let mut p = Pair::new(s, receiver(TransportKind::ExpressPass)).with_path(move |t, dir, _| {
        if dir == Dir::ToSender && matches!(t.packet, Packet::Credit(_)) {
            Fate::Lost
        } else {
            Fate::after(one_way)
        }
    });
    let mut credit_seq = 0;
    while !p.s.is_complete() && p.now < 10_000 * MILLIS {
        p.run_until((p.now / (20 * MILLIS) + 1) * 20 * MILLIS);
        p.inject(Dir::ToSender, credit(credit_seq), 0, false);
        credit_seq += 1;
    }
    let (s, now) = (&p.s, p.now);
    assert!(
        s.is_complete(),
        "not complete after {now} ns: {:?}",
        s.stats()
    );
    assert_eq!(s.stats().recovery_timeouts, 0, "{:?}", s.stats());
    assert_eq!(s.stats().retransmissions, 0, "{:?}", s.stats());
}

#[test]
fn lost_final_acks_do_not_fail_a_credit_based_flow() {
    // Found by the `pair` fuzz target: the receiver has every byte and the FIN, but the
    // ACKs that said so were lost. The sender's recovery timer asks for credits; a complete
    // receiver sends none, so nothing ever acknowledged the tail again and the flow failed
    // with NoProgress although all data had been delivered.
    for t in [TransportKind::FlexPass, TransportKind::ExpressPass] {
        let mut s = Sender::new(7, SenderConfig::new(t), 0, 0).unwrap();
        s.write(Bytes::from_static(b"tail"));
        s.finish();
        let mut p = Pair::new(s, receiver(t)).with_path(|t, _, _| {
            if matches!(t.packet, Packet::Ack(_)) {
                Fate::Lost
            } else {
                Fate::after(0)
            }
        });
        p.run(10_000 * MILLIS, |p| p.r.is_finished());
        assert!(p.r.is_finished(), "{t:?}");
        p.set_path(|_, _, _| Fate::after(0));
        p.run(p.now + 10_000 * MILLIS, |p| {
            p.s.is_complete() || p.s.error().is_some()
        });
        let now = p.now;
        assert_eq!(p.s.error(), None, "{t:?}");
        assert!(p.s.is_complete(), "{t:?}");
        assert!(
            now < 100 * MILLIS,
            "{t:?}: completed after one recovery timeout, not {now} ns"
        );
    }
}

/// The path loses the first CREDIT_STOP (counted in `lost`), nothing else.
fn lose_the_first_credit_stop(t: &flexpass_core::Transmit, lost: &Cell<usize>) -> Fate {
    if matches!(t.packet, Packet::CreditStop { .. }) && lost.get() == 0 {
        lost.set(1);
        return Fate::Lost;
    }
    Fate::after(0)
}

#[test]
fn a_lost_credit_stop_is_sent_again_while_credits_keep_coming() {
    // Found by the `pair` fuzz target: an idle stream sends CREDIT_STOP once; when it was
    // lost, the receiver paced credits to the idle sender forever.
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![5u8; 3000]));
    let stops_lost = Cell::new(0);
    let mut p = Pair::new(s, receiver(TransportKind::ExpressPass))
        .with_path(|t, _, _| lose_the_first_credit_stop(t, &stops_lost));
    p.run(10_000 * MILLIS, |p| {
        p.s.unacked_bytes() == 0 && !p.r.is_sending_credits() && p.now > 10 * MILLIS
    });
    assert_eq!(stops_lost.get(), 1);
    assert_eq!(p.s.unacked_bytes(), 0);
    assert!(
        !p.r.is_sending_credits(),
        "credits still flow to an idle sender"
    );
    assert!(p.s.stats().credit_stops >= 2);
    assert!(
        p.s.stats().credits_wasted < 100,
        "{} credits wasted",
        p.s.stats().credits_wasted
    );
}

#[test]
fn credit_stop_is_repeated_within_rto_max_even_with_an_inflated_rtt() {
    // Found by the `pair` fuzz target: the repeat waited one smoothed RTT, and a HELLO_ACK
    // processed an hour late (a stalled process) had made that an hour.
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![5u8; 1000]));
    let mut r = receiver(TransportKind::ExpressPass);
    for p in drain(&mut s, 0) {
        let _ = r.handle_packet(0, &p, false);
    }
    let now = 3_600_000 * MILLIS;
    while let Some(tx) = r.poll_transmit(0) {
        if matches!(tx.packet, Packet::HelloAck(_)) {
            s.handle_packet(now, &tx.packet).unwrap();
        }
    }
    assert!(s.srtt().unwrap() >= 3_600_000 * MILLIS);
    r.handle_timeout(now);
    let stops_lost = Cell::new(0);
    let mut p = Pair::new(s, r).with_path(|t, _, _| lose_the_first_credit_stop(t, &stops_lost));
    p.now = now;
    p.run(now + 10_000 * MILLIS, |p| {
        p.s.unacked_bytes() == 0 && !p.r.is_sending_credits()
    });
    assert_eq!((stops_lost.get(), p.s.unacked_bytes()), (1, 0));
    assert!(!p.r.is_sending_credits());
    assert!(p.now - now <= 2 * SenderConfig::new(TransportKind::ExpressPass).dctcp.rto_max);
}

#[test]
fn the_recovery_timer_stays_bounded_when_credits_come_only_after_it_fires() {
    // Found by the `pair` fuzz target: the recovery timeout is at least two credit gaps
    // (EWMA) and backs off while the peer is silent; a credit that then arrives after the
    // long silence enters the gap estimate, so each round's timeout was several times the
    // previous one, without bound (the fuzzer's clock passed 2^62 ns; here 1 s by round 4).
    let cfg = SenderConfig::new(TransportKind::ExpressPass);
    let cap = cfg.dctcp.rto_max;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from(vec![1u8; 100]));
    s.handle_packet(0, &credit(0)).unwrap();
    drain(&mut s, 0); // HELLO and the data packet, which is lost
    let mut now = 0;
    for round in 0..30u32 {
        // The peer is silent for three expiries (backing off), then one credit arrives and
        // the packet it carries is lost again.
        for _ in 0..3 {
            let deadline = s.poll_timeout().expect("the recovery timer runs");
            assert!(
                deadline - now <= cap,
                "recovery interval of {} ns in round {round}",
                deadline - now
            );
            now = deadline;
            s.handle_timeout(now);
            drain(&mut s, now); // CREDIT_REQUEST
        }
        s.handle_packet(now, &credit(round + 1)).unwrap();
        drain(&mut s, now);
        assert_eq!(s.error(), None);
    }
}

#[test]
fn layered_expresspass_spends_credits_only_within_its_dctcp_window() {
    // LY (FlexPass §6.2): a data packet goes out only when a credit arrives *and* the DCTCP
    // window allows; credits beyond the window are wasted. Without the window every credit
    // carries data.
    for layered in [false, true] {
        let mut cfg = SenderConfig::new(TransportKind::ExpressPass);
        cfg.layered_window = layered;
        let init = cfg.dctcp.init_cwnd as usize;
        let mut s = Sender::new(7, cfg, 0, 0).unwrap();
        s.write(Bytes::from(vec![1u8; 100 * 1444]));
        drain(&mut s, 0);
        let mut sent = 0;
        for seq in 0..3 * init as u32 {
            s.handle_packet(10, &credit(seq)).unwrap();
            sent += drain(&mut s, 10)
                .iter()
                .filter(|p| matches!(p, Packet::Data(_)))
                .count();
        }
        if layered {
            assert_eq!(sent, init, "window of {init} packets, no ACK yet");
            assert_eq!(s.stats().credits_wasted, 2 * init as u64);
        } else {
            assert_eq!(sent, 3 * init);
            assert_eq!(s.stats().credits_wasted, 0);
        }
    }
}

#[test]
fn a_flow_idle_longer_than_the_give_up_timeout_resumes() {
    // Many idle flows (docs/agent-api.md, "Scale"): a flow sends a little, stops its
    // credits and stays idle (no timer, no packet) far longer than the give-up timeout; new
    // bytes then re-request credits and must complete: the silence that fails a flow counts
    // only while it waits for the peer.
    for t in [TransportKind::FlexPass, TransportKind::ExpressPass] {
        let cfg = SenderConfig::new(t);
        let give_up = cfg.give_up_timeout;
        let mut s = Sender::new(7, cfg, 0, 0).unwrap();
        s.write(Bytes::from(vec![3u8; 1000]));
        let mut p = Pair::new(s, receiver(t));
        p.run(1_000 * MILLIS, |p| {
            p.s.unacked_bytes() == 0 && p.s.poll_timeout().is_none()
        });
        assert_eq!(p.s.unacked_bytes(), 0, "{t:?}: first bytes acknowledged");
        assert_eq!(p.s.poll_timeout(), None, "{t:?}: idle flow has no timer");
        // Idle, silent, for twice the give-up timeout.
        p.now += 2 * give_up;
        p.s.write(Bytes::from(vec![4u8; 3000]));
        p.s.finish();
        p.run(p.now + 1_000 * MILLIS, |p| {
            p.s.is_complete() || p.s.error().is_some()
        });
        let (s, got) = (&p.s, p.delivered.len());
        assert!(s.is_complete(), "{t:?}: resumed flow: {:?}", s.error());
        assert_eq!(
            s.stats().recovery_timeouts,
            0,
            "{t:?}: no spurious recovery timeout"
        );
        assert_eq!(got, 4000, "{t:?}: every byte delivered");
    }
}

#[test]
fn an_idle_hello_gets_no_credits_until_the_first_bytes_ask_for_them() {
    for t in [TransportKind::FlexPass, TransportKind::ExpressPass] {
        // Nothing written when the HELLO leaves: it says IDLE, and for a whole second of
        // idleness the receiver sends no credit (before: credits at the full rate until the
        // sender's CREDIT_STOP came back).
        let mut p = Pair::new(
            Sender::new(7, SenderConfig::new(t), 0, 0).unwrap(),
            receiver(t),
        );
        p.run_until(1_000 * MILLIS);
        let first = &p.log[0].transmit.packet;
        assert!(
            matches!(first, Packet::Hello(h) if h.idle),
            "{t:?}: {first:?}"
        );
        assert_eq!(p.count(Dir::ToSender, is_credit), 0, "{t:?}");
        assert_eq!(p.r.stats().credits_sent, 0, "{t:?}");
        // The first bytes send CREDIT_REQUEST; the flow completes on credits.
        p.s.write(Bytes::from(vec![5u8; 200_000]));
        p.s.finish();
        p.run(p.now + 100 * MILLIS, |p| {
            p.r.is_finished() && p.s.is_complete()
        });
        let (s, r) = (&p.s, &p.r);
        assert!(r.is_finished() && s.is_complete(), "{t:?}");
        assert_eq!(
            r.stats().bytes_proactive + r.stats().bytes_reactive,
            200_000
        );
        assert!(s.stats().credit_requests >= 1, "{t:?}");
        assert!(
            r.stats().packets_proactive > 0,
            "{t:?}: no credit-scheduled data"
        );
        // Bytes written before the HELLO leaves: no IDLE, credits from the HELLO on.
        let mut s = Sender::new(8, SenderConfig::new(t), 0, 0).unwrap();
        s.write(Bytes::from_static(b"x"));
        assert!(
            matches!(&drain(&mut s, 0)[0], Packet::Hello(h) if !h.idle),
            "{t:?}"
        );
    }
    // A transport without credits never says IDLE.
    let mut s = Sender::new(9, SenderConfig::new(TransportKind::Dctcp), 0, 0).unwrap();
    assert!(matches!(&drain(&mut s, 0)[0], Packet::Hello(h) if !h.idle));
}
