//! The receiver's credit window (the host agent's setting, `credit_window_segment`): a
//! small message costs a few credits, bulk data none, and the window stops when it is left
//! full.

use bytes::Bytes;
use flexpass_core::{
    CreditConfig, Nanos, Receiver, ReceiverConfig, Sender, SenderConfig, MICROS, MILLIS,
};
use flexpass_wire::{Packet, SubFlow, TransportKind};
use harness::{is_credit, receiver, Dir, Pair};

mod harness;

/// A receiver of flow 7 with the host agent's credit window (`segment`; 0: none), credits
/// for a 10 Gbit/s link, feedback period `period`.
fn windowed_receiver(t: TransportKind, segment: u64, period: Nanos) -> Receiver {
    let mut cfg = ReceiverConfig::new(CreditConfig::for_link(10e9, 1.0, period));
    cfg.credit_window_segment = segment;
    Receiver::new(7, t, &cfg).unwrap()
}

#[test]
fn a_small_message_on_an_idle_stream_costs_a_few_windowed_credits_and_bulk_data_none() {
    // An idle ExpressPass stream (IDLE HELLO), 50 µs one way, 10 Gbit/s of credits: the
    // application writes 30 bytes. Without the window the receiver credits at line rate
    // until the sender's CREDIT_STOP is back, a round trip later; with it (the agent's
    // setting), ceil(30 / 1448) + 1 credits, and the two more its data packet opens.
    // An ExpressPass stream idle for `ms` after its HELLO, 50 µs one way; no credits meanwhile.
    let idle_stream = |segment: u64, ms: u64| {
        let r = windowed_receiver(TransportKind::ExpressPass, segment, 100 * MICROS);
        let s = Sender::new(7, SenderConfig::new(TransportKind::ExpressPass), 0, 0).unwrap();
        let mut p = Pair::new(s, r).with_delay(50 * MICROS);
        p.run_until(ms * MILLIS);
        assert_eq!(p.count(Dir::ToSender, is_credit), 0);
        p
    };
    let message = |segment: u64| {
        let mut p = idle_stream(segment, 5);
        p.s.write(Bytes::from_static(&[7; 30]));
        p.run_until(p.now + 5 * MILLIS);
        assert_eq!(p.r.stats().bytes_proactive, 30);
        p.count(Dir::ToSender, is_credit)
    };
    let (plain, windowed) = (message(0), message(1448));
    eprintln!("credits for one message: {plain} plain, {windowed} windowed");
    assert!(plain >= 10, "a round trip of credits expected, got {plain}");
    assert!(windowed <= 4, "{windowed} credits for one 30-byte message");
    // Bulk data after an idle HELLO: the window opens by one per data packet, so 2 MB take
    // about as long as with credits at line rate from the start.
    let bulk = |segment: u64| {
        let mut p = idle_stream(segment, 1);
        let start = p.now;
        p.s.write(Bytes::from(vec![3u8; 2 << 20]));
        p.s.finish();
        p.run(p.now + 100 * MILLIS, |p| p.s.is_complete());
        assert!(p.s.is_complete());
        p.now - start
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
        priority: None,
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
        let r = windowed_receiver(TransportKind::ExpressPass, segment, 100 * MICROS);
        let sc = SenderConfig::new(TransportKind::ExpressPass);
        let mut s = Sender::new(7, sc, declared, 0).unwrap();
        s.write(Bytes::from(vec![5u8; bytes]));
        s.finish();
        let mut p = Pair::new(s, r).with_delay(50 * MICROS);
        p.run(200 * MILLIS, |p| p.s.is_complete());
        assert!(p.s.is_complete(), "{declared} declared, {bytes} sent");
        assert_eq!(p.r.stats().bytes_proactive, bytes as u64);
        (p.count(Dir::ToSender, is_credit), p.now)
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
