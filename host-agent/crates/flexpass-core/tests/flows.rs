//! Sender and receiver driven directly (no network model): the state machines' contracts.

use bytes::Bytes;
use flexpass_core::{
    CreditConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig, MICROS, MILLIS,
};
use flexpass_wire::{Ack, Credit, Packet, SackBlocks, SubFlow, TransportKind};

/// A receiver of flow 7 with the host agent's credit window (`segment`; 0: none), credits
/// for a 10 Gbit/s link, feedback period `period`.
fn windowed_receiver(t: TransportKind, segment: u64, period: Nanos) -> Receiver {
    let mut cfg = ReceiverConfig::new(CreditConfig::for_link(10e9, 1.0, period));
    cfg.credit_window_segment = segment;
    Receiver::new(7, t, &cfg).unwrap()
}

fn receiver(t: TransportKind) -> Receiver {
    Receiver::new(
        7,
        t,
        &ReceiverConfig::new(CreditConfig::for_link(10e9, 0.5, 25 * MICROS)),
    )
    .unwrap()
}

fn drain(s: &mut Sender, now: Nanos) -> Vec<Packet> {
    std::iter::from_fn(|| s.poll_transmit(now))
        .map(|t| t.packet)
        .collect()
}

fn credit(seq: u32) -> Packet {
    Packet::Credit(Credit {
        flow_id: 7,
        credit_seq: seq,
        padding: 6,
    })
}

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
        let mut r = receiver(t);
        let mut got = vec![];
        let mut now: Nanos = 0;
        while !r.is_finished() && now < 100 * MILLIS {
            for p in drain(&mut s, now) {
                let _ = r.handle_packet(now + 5 * MICROS, &p, false);
            }
            while let Some(tx) = r.poll_transmit(now + 5 * MICROS) {
                let _ = s.handle_packet(now + 10 * MICROS, &tx.packet);
            }
            while let Some(b) = r.read() {
                got.extend_from_slice(&b);
            }
            now += MICROS;
            if s.poll_timeout().is_some_and(|d| d <= now) {
                s.handle_timeout(now);
            }
            if r.poll_timeout().is_some_and(|d| d <= now) {
                r.handle_timeout(now);
            }
        }
        assert_eq!(got, data, "{t:?}");
        drain(&mut s, now);
        assert!(s.is_complete(), "{t:?}");
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
    drain(&mut s, 0);
    let ack = Packet::HelloAck(HelloAck {
        flow_id: 7,
        transport: TransportKind::ExpressPass,
        status: HelloStatus::Accepted,
    });
    s.handle_packet(1, &ack).unwrap();
    // The peer then goes silent: no credit, no ACK, ever.
    let mut requests = vec![];
    let mut now = 1;
    while s.error().is_none() && now < 600_000 * MILLIS {
        now = s
            .poll_timeout()
            .expect("a timer is armed while data is owed")
            .max(now);
        s.handle_timeout(now);
        requests.extend(
            drain(&mut s, now)
                .into_iter()
                .filter(|p| matches!(p, Packet::CreditRequest(_)))
                .map(|_| now),
        );
    }
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
        let mut r = receiver(TransportKind::ExpressPass);
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
        let mut now = 1;
        let mut requests_during_outage = 0;
        while s.error().is_none() && !s.is_complete() && now < 120_000 * MILLIS {
            let next = [s.poll_timeout(), r.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + MILLIS);
            now = next.max(now + 1);
            s.handle_timeout(now);
            r.handle_timeout(now);
            // Everything either side sends is lost until the outage ends.
            let up = now >= outage_end;
            for p in drain(&mut s, now) {
                if matches!(p, Packet::CreditRequest(_)) && !up {
                    requests_during_outage += 1;
                }
                if up {
                    let _ = r.handle_packet(now, &p, false);
                }
            }
            while let Some(t) = r.poll_transmit(now) {
                if up {
                    let _ = s.handle_packet(now, &t.packet);
                }
            }
            while r.read().is_some() {}
        }
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
fn hello_is_retried_with_doubling_timeouts_then_the_flow_fails_with_a_fallback_hint() {
    use flexpass_core::SenderError;
    let cfg = SenderConfig::new(TransportKind::FlexPass);
    let (timeout, retries) = (cfg.hello_timeout, cfg.hello_retries);
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from_static(b"x"));
    s.finish();
    let mut hellos = vec![];
    let mut now = 0;
    loop {
        hellos.extend(
            drain(&mut s, now)
                .into_iter()
                .filter(|p| matches!(p, Packet::Hello(_)))
                .map(|_| now),
        );
        if s.error().is_some() {
            break;
        }
        now = s.poll_timeout().expect("HELLO timer armed");
        s.handle_timeout(now);
    }
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

#[test]
fn sparse_credits_and_a_long_rtt_cause_no_spurious_recovery() {
    // An incast share of the credits: one credit every 20 ms, a 10 ms RTT (queueing), far
    // above the 2 ms recovery-timer floor. Packets in flight must not be declared lost.
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    let mut r = receiver(TransportKind::ExpressPass);
    s.write(Bytes::from(vec![9u8; 30 * 1444]));
    s.finish();
    let one_way = 5 * MILLIS;
    let mut to_receiver: Vec<(Nanos, Packet)> = vec![];
    let mut to_sender: Vec<(Nanos, Packet)> = vec![];
    let mut credit_seq = 0;
    let mut now = 0;
    while !s.is_complete() && now < 10_000 * MILLIS {
        if now > 0 && now % (20 * MILLIS) == 0 {
            to_sender.push((now, credit(credit_seq)));
            credit_seq += 1;
        }
        for (_, p) in to_sender.extract_if(.., |(t, _)| *t <= now) {
            let _ = s.handle_packet(now, &p);
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        to_receiver.extend(drain(&mut s, now).into_iter().map(|p| (now + one_way, p)));
        for (_, p) in to_receiver.extract_if(.., |(t, _)| *t <= now) {
            r.handle_packet(now, &p, false).unwrap();
        }
        if r.poll_timeout().is_some_and(|t| t <= now) {
            r.handle_timeout(now);
        }
        while let Some(t) = r.poll_transmit(now) {
            // The test supplies the (sparse) credits itself.
            if !matches!(t.packet, Packet::Credit(_)) {
                to_sender.push((now + one_way, t.packet));
            }
        }
        now += 100 * MICROS;
    }
    assert!(
        s.is_complete(),
        "not complete after {now} ns: {:?}",
        s.stats()
    );
    assert_eq!(s.stats().recovery_timeouts, 0, "{:?}", s.stats());
    assert_eq!(s.stats().retransmissions, 0, "{:?}", s.stats());
}

/// Sender ↔ receiver with no delay until `done` (or for 10 s): both sides drain, packets cross,
/// and when nothing is in flight time jumps to the earliest deadline. `drop` sees every
/// packet (true: sender → receiver) and may lose it.
fn exchange(
    s: &mut Sender,
    r: &mut Receiver,
    now: &mut Nanos,
    mut drop: impl FnMut(&Packet, bool) -> bool,
    done: impl Fn(&Sender, &Receiver, Nanos) -> bool,
) {
    let end = *now + 10_000 * MILLIS;
    while !done(s, r, *now) && *now < end {
        let mut moved = false;
        for p in drain(s, *now) {
            moved = true;
            if !drop(&p, true) {
                let _ = r.handle_packet(*now, &p, false);
            }
        }
        while let Some(tx) = r.poll_transmit(*now) {
            moved = true;
            if !drop(&tx.packet, false) {
                let _ = s.handle_packet(*now, &tx.packet);
            }
        }
        while r.read().is_some() {}
        if !moved {
            match [s.poll_timeout(), r.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            {
                Some(t) => *now = (*now).max(t),
                None => break,
            }
            if s.poll_timeout().is_some_and(|d| d <= *now) {
                s.handle_timeout(*now);
            }
            if r.poll_timeout().is_some_and(|d| d <= *now) {
                r.handle_timeout(*now);
            }
        }
    }
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
        let mut r = receiver(t);
        let mut now = 0;
        exchange(
            &mut s,
            &mut r,
            &mut now,
            |p, _| matches!(p, Packet::Ack(_)),
            |_, r, _| r.is_finished(),
        );
        assert!(r.is_finished(), "{t:?}");
        exchange(
            &mut s,
            &mut r,
            &mut now,
            |_, _| false,
            |s, _, _| s.is_complete() || s.error().is_some(),
        );
        assert_eq!(s.error(), None, "{t:?}");
        assert!(s.is_complete(), "{t:?}");
        assert!(
            now < 100 * MILLIS,
            "{t:?}: completed after one recovery timeout, not {now} ns"
        );
    }
}

#[test]
fn a_lost_credit_stop_is_sent_again_while_credits_keep_coming() {
    // Found by the `pair` fuzz target: an idle stream sends CREDIT_STOP once; when it was
    // lost, the receiver paced credits to the idle sender forever.
    let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
    s.write(Bytes::from(vec![5u8; 3000]));
    let mut r = receiver(TransportKind::ExpressPass);
    let mut now = 0;
    let mut stops_lost = 0;
    exchange(
        &mut s,
        &mut r,
        &mut now,
        |p, _| {
            let first_stop = matches!(p, Packet::CreditStop { .. }) && stops_lost == 0;
            stops_lost += usize::from(first_stop);
            first_stop
        },
        |s, r, now| s.unacked_bytes() == 0 && !r.is_sending_credits() && now > 10 * MILLIS,
    );
    assert_eq!(stops_lost, 1);
    assert_eq!(s.unacked_bytes(), 0);
    assert!(
        !r.is_sending_credits(),
        "credits still flow to an idle sender"
    );
    assert!(s.stats().credit_stops >= 2);
    assert!(
        s.stats().credits_wasted < 100,
        "{} credits wasted",
        s.stats().credits_wasted
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
    let mut now = 3_600_000 * MILLIS;
    while let Some(tx) = r.poll_transmit(0) {
        if matches!(tx.packet, Packet::HelloAck(_)) {
            s.handle_packet(now, &tx.packet).unwrap();
        }
    }
    assert!(s.srtt().unwrap() >= 3_600_000 * MILLIS);
    r.handle_timeout(now);
    let mut stops_lost = 0;
    let start = now;
    exchange(
        &mut s,
        &mut r,
        &mut now,
        |p, _| {
            let first_stop = matches!(p, Packet::CreditStop { .. }) && stops_lost == 0;
            stops_lost += usize::from(first_stop);
            first_stop
        },
        |s, r, _| s.unacked_bytes() == 0 && !r.is_sending_credits(),
    );
    assert_eq!((stops_lost, s.unacked_bytes()), (1, 0));
    assert!(!r.is_sending_credits());
    assert!(now - start <= 2 * SenderConfig::new(TransportKind::ExpressPass).dctcp.rto_max);
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
    let mut r = receiver(transport);
    let hop = 5 * MICROS;
    let mut now: Nanos = 0;
    let mut got = vec![];
    while !s.is_complete() && now < 100 * MILLIS {
        for p in drain(&mut s, now) {
            if let Packet::Data(d) = &p {
                // The original transmissions of the last two segments are lost.
                if d.flow_seq >= 8 * mss as u64 && !d.retransmission {
                    continue;
                }
            }
            let _ = r.handle_packet(now + hop, &p, false);
        }
        while let Some(tx) = r.poll_transmit(now + hop) {
            let _ = s.handle_packet(now + 2 * hop, &tx.packet);
        }
        while let Some(b) = r.read() {
            got.extend_from_slice(&b);
        }
        now += MICROS;
        if s.poll_timeout().is_some_and(|d| d <= now) {
            s.handle_timeout(now);
        }
        if r.poll_timeout().is_some_and(|d| d <= now) {
            r.handle_timeout(now);
        }
    }
    assert!(s.is_complete(), "{transport:?} tlp {tlp}: not complete");
    assert_eq!(got, data);
    (now, s.stats().clone())
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
        let mut r = receiver(t);
        let mut now = 0;
        let mut got = 0usize;
        // Both sides in lockstep until `done(s)` or 1 s of simulated time, in the agent's
        // order: due timers first, then what each side has to send.
        let mut run = |s: &mut Sender,
                       r: &mut Receiver,
                       now: &mut Nanos,
                       done: &dyn Fn(&mut Sender) -> bool| {
            let end = *now + 1_000 * MILLIS;
            while !done(s) && s.error().is_none() && *now < end {
                if s.poll_timeout().is_some_and(|d| d <= *now) {
                    s.handle_timeout(*now);
                }
                if r.poll_timeout().is_some_and(|d| d <= *now) {
                    r.handle_timeout(*now);
                }
                for p in drain(s, *now) {
                    let _ = r.handle_packet(*now, &p, false);
                }
                while let Some(tx) = r.poll_transmit(*now) {
                    let _ = s.handle_packet(*now, &tx.packet);
                }
                while let Some(b) = r.read() {
                    got += b.len();
                }
                let next = [s.poll_timeout(), r.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                *now = next.unwrap_or(*now + MILLIS).max(*now + 1);
            }
        };
        s.write(Bytes::from(vec![3u8; 1000]));
        run(&mut s, &mut r, &mut now, &|s| {
            s.unacked_bytes() == 0 && s.poll_timeout().is_none()
        });
        assert_eq!(s.unacked_bytes(), 0, "{t:?}: first bytes acknowledged");
        assert_eq!(s.poll_timeout(), None, "{t:?}: idle flow has no timer");
        // Idle, silent, for twice the give-up timeout.
        now += 2 * give_up;
        s.write(Bytes::from(vec![4u8; 3000]));
        s.finish();
        run(&mut s, &mut r, &mut now, &|s| s.is_complete());
        assert!(s.is_complete(), "{t:?}: resumed flow: {:?}", s.error());
        assert_eq!(
            s.stats().recovery_timeouts,
            0,
            "{t:?}: no spurious recovery timeout"
        );
        assert_eq!(got, 4000, "{t:?}: every byte delivered");
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

#[test]
fn an_idle_hello_gets_no_credits_until_the_first_bytes_ask_for_them() {
    for t in [TransportKind::FlexPass, TransportKind::ExpressPass] {
        // Nothing written when the HELLO leaves: it says IDLE, and for a whole second of
        // idleness the receiver sends no credit (before: credits at the full rate until the
        // sender's CREDIT_STOP came back).
        let mut s = Sender::new(7, SenderConfig::new(t), 0, 0).unwrap();
        let mut r = receiver(t);
        let mut now = 0;
        let first = drain(&mut s, now);
        assert!(
            matches!(&first[0], Packet::Hello(h) if h.idle),
            "{t:?}: {first:?}"
        );
        for p in &first {
            r.handle_packet(now, p, false).unwrap();
        }
        let mut credits = 0;
        exchange(
            &mut s,
            &mut r,
            &mut now,
            |p, _| {
                credits += usize::from(matches!(p, Packet::Credit(_)));
                false
            },
            |_, _, now| now >= 1_000 * MILLIS,
        );
        assert_eq!(credits, 0, "{t:?}");
        assert_eq!(r.stats().credits_sent, 0, "{t:?}");
        // The first bytes send CREDIT_REQUEST; the flow completes on credits.
        s.write(Bytes::from(vec![5u8; 200_000]));
        s.finish();
        let end = now + 100 * MILLIS;
        run_delayed(&mut s, &mut r, &mut now, 0, end, |s, r| {
            r.is_finished() && s.is_complete()
        });
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

/// Sender and receiver over a path with `delay` one way (no loss): runs until `done` or
/// `until`; returns the credits the receiver sent.
fn run_delayed(
    s: &mut Sender,
    r: &mut Receiver,
    now: &mut Nanos,
    delay: Nanos,
    until: Nanos,
    done: impl Fn(&Sender, &Receiver) -> bool,
) -> u64 {
    let mut to_r: std::collections::VecDeque<(Nanos, Packet)> = Default::default();
    let mut to_s: std::collections::VecDeque<(Nanos, Packet)> = Default::default();
    let mut credits = 0;
    while *now < until && !done(s, r) {
        for p in drain(s, *now) {
            to_r.push_back((*now + delay, p));
        }
        while let Some(tx) = r.poll_transmit(*now) {
            credits += u64::from(matches!(tx.packet, Packet::Credit(_)));
            to_s.push_back((*now + delay, tx.packet));
        }
        while to_r.front().is_some_and(|(t, _)| *t <= *now) {
            let _ = r.handle_packet(*now, &to_r.pop_front().unwrap().1, false);
        }
        while to_s.front().is_some_and(|(t, _)| *t <= *now) {
            let _ = s.handle_packet(*now, &to_s.pop_front().unwrap().1);
        }
        while r.read().is_some() {}
        if s.poll_timeout().is_some_and(|d| d <= *now) {
            s.handle_timeout(*now);
        }
        if r.poll_timeout().is_some_and(|d| d <= *now) {
            r.handle_timeout(*now);
        }
        *now += 200;
    }
    credits
}

#[test]
fn a_small_message_on_an_idle_stream_costs_a_few_windowed_credits_and_bulk_data_none() {
    // An idle ExpressPass stream (IDLE HELLO), 50 µs one way, 10 Gbit/s of credits: the
    // application writes 30 bytes. Without the window the receiver credits at line rate
    // until the sender's CREDIT_STOP is back, a round trip later; with it (the agent's
    // setting), ceil(30 / 1448) + 1 credits, and the two more its data packet opens.
    // An ExpressPass stream idle for `ms` after its HELLO, 50 µs one way; no credits meanwhile.
    let idle_stream = |segment: u64, ms: u64| {
        let mut r = windowed_receiver(TransportKind::ExpressPass, segment, 100 * MICROS);
        let mut s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
        let mut now = 0;
        let idle = run_delayed(
            &mut s,
            &mut r,
            &mut now,
            50 * MICROS,
            ms * MILLIS,
            |_, _| false,
        );
        assert_eq!(idle, 0);
        (s, r, now)
    };
    let message = |segment: u64| {
        let (mut s, mut r, mut now) = idle_stream(segment, 5);
        s.write(Bytes::from_static(&[7; 30]));
        let end = now + 5 * MILLIS;
        let credits = run_delayed(&mut s, &mut r, &mut now, 50 * MICROS, end, |_, _| false);
        assert_eq!(r.stats().bytes_proactive, 30);
        credits
    };
    let (plain, windowed) = (message(0), message(1448));
    eprintln!("credits for one message: {plain} plain, {windowed} windowed");
    assert!(plain >= 10, "a round trip of credits expected, got {plain}");
    assert!(windowed <= 4, "{windowed} credits for one 30-byte message");
    // Bulk data after an idle HELLO: the window opens by one per data packet, so 2 MB take
    // about as long as with credits at line rate from the start.
    let bulk = |segment: u64| {
        let (mut s, mut r, mut now) = idle_stream(segment, 1);
        let start = now;
        s.write(Bytes::from(vec![3u8; 2 << 20]));
        s.finish();
        let end = now + 100 * MILLIS;
        run_delayed(&mut s, &mut r, &mut now, 50 * MICROS, end, |s, _| {
            s.is_complete()
        });
        assert!(s.is_complete());
        now - start
    };
    let (plain, windowed) = (bulk(0), bulk(1448));
    eprintln!("2 MB after an idle HELLO: {plain} ns plain, {windowed} ns windowed");
    assert!(
        (windowed as f64) < 1.1 * plain as f64,
        "2 MB after an idle HELLO: {windowed} ns windowed, {plain} ns not"
    );
}

#[test]
fn a_hello_of_known_size_opens_a_credit_window_only_where_it_starts_credits() {
    // Found by the `receiver` and `pair` fuzz targets (windowed seeds): a HELLO with a
    // flow size opened the credit window even for a transport without credits, so the
    // receiver reported credits on. The window now opens only with credits the HELLO
    // started.
    let hello = |t| {
        Packet::Hello(flexpass_wire::Hello {
            flow_id: 7,
            transport: t,
            flow_size: 100_000,
            conn: None,
            cookie: None,
            idle: false,
        })
    };
    let windowed = |t| windowed_receiver(t, 1448, 25 * MICROS);
    for t in [
        TransportKind::Dctcp,
        TransportKind::FlashPass,
        TransportKind::Ppt,
    ] {
        let mut r = windowed(t);
        r.handle_packet(0, &hello(t), false).unwrap();
        assert!(!r.is_sending_credits(), "{t:?}");
    }
    let mut r = windowed(TransportKind::ExpressPass);
    r.handle_packet(0, &hello(TransportKind::ExpressPass), false)
        .unwrap();
    assert!(r.is_sending_credits() && r.is_pacing_credits());
}

#[test]
fn a_credit_window_left_full_stops_the_credits_and_its_timers() {
    // Found by the `pair` fuzz target (liveness, windowed seeds): a window paused full whose
    // sender had nothing more to send, and whose CREDIT_STOP was lost, stayed "credits on"
    // with its feedback timer firing every period, for ever (no credit arrives at the
    // sender to make it repeat the CREDIT_STOP). After 4 periods paused it now stops the
    // credits as a CREDIT_STOP would; a CREDIT_REQUEST starts them again.
    let mut r = windowed_receiver(TransportKind::ExpressPass, 1448, 25 * MICROS);
    let request = Packet::CreditRequest(flexpass_wire::CreditRequest {
        flow_id: 7,
        pending_bytes: 100,
    });
    r.handle_packet(0, &request, false).unwrap();
    let mut now = 0;
    let mut credits = 0;
    while let Some(t) = r.poll_timeout().filter(|&t| t < 10 * MILLIS) {
        now = now.max(t);
        r.handle_timeout(now);
        while let Some(tx) = r.poll_transmit(now) {
            credits += u32::from(matches!(tx.packet, Packet::Credit(_)));
        }
    }
    assert_eq!(credits, 2, "ceil(100 / 1448) + 1 credits, then paused");
    assert!(!r.is_sending_credits(), "still on at {now} ns");
    assert_eq!(r.poll_timeout(), None, "a timer still runs");
    assert_eq!(r.stats().credit_windows_expired, 1);
    assert!(now <= 5 * 25 * MICROS, "stopped after {now} ns");
    r.handle_packet(now, &request, false).unwrap();
    assert!(r.is_pacing_credits());
}

#[test]
fn an_echo_of_a_credit_from_long_ago_does_not_freeze_the_credit_feedback() {
    // Found by the `receiver` fuzz target (windowed seeds; a deadline 7 years ahead): a
    // credit window paused full keeps its credits' send times, and a data packet echoing
    // one much later (or a forged echo) made the credit RTT, hence the feedback's update
    // period, that long. A sample now counts at most 1024 configured periods.
    let mut r = receiver(TransportKind::ExpressPass);
    let base = r.update_period();
    r.handle_packet(
        0,
        &Packet::Hello(flexpass_wire::Hello {
            flow_id: 7,
            transport: TransportKind::ExpressPass,
            flow_size: 0,
            conn: None,
            cookie: None,
            idle: false,
        }),
        false,
    )
    .unwrap();
    let credit = std::iter::from_fn(|| r.poll_transmit(0))
        .find_map(|t| match t.packet {
            Packet::Credit(c) => Some(c.credit_seq),
            _ => None,
        })
        .expect("a credit");
    let late = 1_000_000 * MILLIS; // 1000 s
    let data = flexpass_wire::Data {
        flow_id: 7,
        subflow: SubFlow::Proactive,
        flow_seq: 0,
        subflow_seq: 0,
        credit_seq: credit,
        tsval: 0,
        fin: false,
        retransmission: false,
        payload: Bytes::from_static(&[1; 100]),
    };
    r.handle_packet(late, &Packet::Data(data), false).unwrap();
    assert!(
        r.update_period() <= 1024 * base,
        "update period {} ns after a 1000 s echo (base {base})",
        r.update_period()
    );
    assert!(r.poll_timeout().unwrap() <= late + 1024 * base);
}

#[test]
fn a_flow_of_known_size_is_credited_for_its_size_and_one_understated_still_completes() {
    // The HELLO of an ExpressPass flow says its size (50 µs one way, 10 Gbit/s of credits).
    // With the agent's window, a 30-byte flow draws ceil(30 / 1448) + 1 credits, not a
    // round trip of them at the initial rate (more on faster links); 2 MB of declared
    // size finish as fast as without the window; and a sender that declares less than it
    // sends (the size is advisory) still completes, the window growing with its data.
    let flow = |segment: u64, declared: u64, bytes: usize| {
        let mut r = windowed_receiver(TransportKind::ExpressPass, segment, 100 * MICROS);
        let sc = SenderConfig::new(TransportKind::ExpressPass);
        let mut s = Sender::new(7, sc, declared, 0).unwrap();
        s.write(Bytes::from(vec![5u8; bytes]));
        s.finish();
        let mut now = 0;
        let credits = run_delayed(
            &mut s,
            &mut r,
            &mut now,
            50 * MICROS,
            200 * MILLIS,
            |s, _| s.is_complete(),
        );
        assert!(s.is_complete(), "{declared} declared, {bytes} sent");
        assert_eq!(r.stats().bytes_proactive, bytes as u64);
        (credits, now)
    };
    let ((plain, _), (windowed, _)) = (flow(0, 30, 30), flow(1448, 30, 30));
    eprintln!("credits for a 30-byte flow of known size: {plain} plain, {windowed} windowed");
    // Plain: a round trip at the initial rate α·max_rate (1/16 of 0.77 M/s, 100 µs).
    assert!(plain >= 4, "a round trip of credits expected, got {plain}");
    assert!(windowed <= 2, "{windowed} credits for a 30-byte flow");
    let ((_, t_plain), (_, t_windowed)) = (flow(0, 2 << 20, 2 << 20), flow(1448, 2 << 20, 2 << 20));
    eprintln!("2 MB of known size: {t_plain} ns plain, {t_windowed} ns windowed");
    assert!((t_windowed as f64) < 1.1 * t_plain as f64);
    // Declared 30 bytes, sent 1 MB: the window opens by one per data packet.
    let (_, t_under) = flow(1448, 30, 1 << 20);
    let (_, t_exact) = flow(1448, 1 << 20, 1 << 20);
    eprintln!("1 MB declared as 30 bytes: {t_under} ns, declared exactly: {t_exact} ns");
    assert!((t_under as f64) < 3.0 * t_exact as f64);
}
