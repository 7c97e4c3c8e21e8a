//! A persistent connection's later bursts (`SenderConfig::resume_reactively`): a FlexPass
//! flow whose credits are stopped sends a burst its reactive window covers without asking
//! for credits, and asks for them when that burst is lost, not acknowledged in time, or
//! too big for the window.

use bytes::Bytes;
use flexpass_core::{Sender, SenderConfig, MICROS, MILLIS};
use flexpass_wire::{Packet, SubFlow, TransportKind};
use harness::{is_credit, receiver, Dir, Fate, Pair};
use std::cell::Cell;

mod harness;

const ONE_WAY: u64 = 10 * MICROS;

fn is_request(p: &Packet) -> bool {
    matches!(p, Packet::CreditRequest(_))
}

/// A flow that sent 200 kB (on credits), got everything acknowledged and stopped its
/// credits; `resume_reactively` as given.
fn idle_pair<'a>(t: TransportKind, resume_reactively: bool) -> Pair<'a> {
    let mut cfg = SenderConfig::new(t);
    cfg.resume_reactively = resume_reactively;
    let mut s = Sender::new(7, cfg, 0, 0).unwrap();
    s.write(Bytes::from(vec![1u8; 200_000]));
    let mut p = Pair::new(s, receiver(t)).with_delay(ONE_WAY);
    let settled = p.run(100 * MILLIS, |p| {
        p.s.unacked_bytes() == 0 && !p.r.is_sending_credits() && p.s.poll_timeout().is_none()
    });
    assert!(settled, "{t:?}: the first 200 kB settle");
    // Credits already in flight when the CREDIT_STOP left still arrive.
    let t0 = p.now;
    p.run_until(t0 + 10 * MILLIS);
    assert!(p.s.stats().credit_requests + p.s.stats().credit_stops > 0);
    p
}

/// What a burst written now costs: CREDIT_REQUESTs the sender sent and credits the
/// receiver sent until it is acknowledged and everything is quiet again.
fn burst(p: &mut Pair, bytes: usize) -> (usize, usize) {
    let start = p.log.len();
    let delivered = p.delivered.len();
    p.s.write(Bytes::from(vec![2u8; bytes]));
    let done = p.run(p.now + 100 * MILLIS, |p| {
        p.s.unacked_bytes() == 0 && !p.r.is_sending_credits() && p.s.poll_timeout().is_none()
    });
    assert!(done, "the burst is acknowledged and the flow quiet again");
    assert_eq!(p.delivered.len() - delivered, bytes, "every byte delivered");
    let new = &p.log[start..];
    let requests = new
        .iter()
        .filter(|x| x.dir == Dir::ToReceiver && is_request(&x.transmit.packet))
        .count();
    let credits = new
        .iter()
        .filter(|x| x.dir == Dir::ToSender && is_credit(&x.transmit.packet))
        .count();
    (requests, credits)
}

#[test]
fn a_small_burst_after_credit_stop_leaves_on_the_reactive_sub_flow_alone() {
    // A request/response connection: each 1 kB message used to cost a CREDIT_REQUEST, the
    // credits paced for an RTT and more (all wasted: the reactive window had sent it) and a
    // CREDIT_STOP.
    let mut p = idle_pair(TransportKind::FlexPass, true);
    for _ in 0..5 {
        assert_eq!(burst(&mut p, 1000), (0, 0), "no credit asked, none sent");
        p.now += MILLIS;
    }
    // The same flow without the setting asks for credits every time.
    let mut p = idle_pair(TransportKind::FlexPass, false);
    let (requests, credits) = burst(&mut p, 1000);
    assert_eq!(requests, 1);
    assert!(credits > 0);
    // ExpressPass has no reactive sub-flow: every burst asks.
    let mut p = idle_pair(TransportKind::ExpressPass, true);
    assert_eq!(burst(&mut p, 1000).0, 1);
}

#[test]
fn a_burst_beyond_the_reactive_window_asks_for_credits_at_once() {
    let mut p = idle_pair(TransportKind::FlexPass, true);
    let start = p.log.len();
    let t0 = p.now;
    let (requests, credits) = burst(&mut p, 2_000_000);
    assert!(requests >= 1 && credits > 0, "{requests} {credits}");
    let first = p.log[start..]
        .iter()
        .find(|x| is_request(&x.transmit.packet))
        .unwrap();
    assert_eq!(first.at, t0, "the request leaves with the burst, not later");
}

#[test]
fn a_lost_reactive_burst_is_recovered_on_credits_well_before_the_rto() {
    // The burst's only packet is lost (a red packet dropped at the selective-drop
    // threshold): no ACK comes, so no dupACK shows the loss. Credits are asked one RTO
    // estimate (srtt + 4·rttvar, tens of µs here) after the burst, not after the reactive
    // RTO (rto_min 4 ms), and the packet is sent again on a credit.
    let lost = Cell::new(0);
    let mut p = idle_pair(TransportKind::FlexPass, true);
    p.set_path(|t, dir, _| {
        let reactive_data = matches!(&t.packet, Packet::Data(d) if d.subflow == SubFlow::Reactive);
        if dir == Dir::ToReceiver && reactive_data && lost.get() == 0 {
            lost.set(1);
            return Fate::Lost;
        }
        Fate::after(ONE_WAY)
    });
    let t0 = p.now;
    let rto_min = SenderConfig::new(TransportKind::FlexPass).dctcp.rto_min;
    let (requests, credits) = burst(&mut p, 1000);
    assert_eq!(lost.get(), 1);
    assert_eq!(requests, 1, "one request, after the loss");
    assert!(credits > 0);
    let request_at = p
        .sent(Dir::ToReceiver)
        .filter(|(at, pk)| *at >= t0 && is_request(pk))
        .map(|(at, _)| at)
        .next()
        .unwrap();
    assert!(
        request_at > t0 && request_at - t0 < rto_min / 4,
        "request {} µs after the burst",
        (request_at - t0) / MICROS
    );
    assert_eq!(p.s.stats().timeouts, 0, "no reactive RTO");
    assert!(p.r.stats().packets_proactive > 0, "resent on a credit");
}

#[test]
fn small_writes_that_keep_a_stream_busy_ask_nothing_while_their_acks_come() {
    // A writer of 1 kB every 5 µs on a 20 µs round trip: the flow always has bytes in
    // flight, but every one is acknowledged in time. The wait for ACKs runs from the last
    // ACK progress, not from the first burst (which would ask for credits after 2·srtt).
    let mut p = idle_pair(TransportKind::FlexPass, true);
    let start = p.log.len();
    for _ in 0..200 {
        p.s.write(Bytes::from(vec![3u8; 1000]));
        let t = p.now + 5 * MICROS;
        p.run_until(t);
    }
    let quiet = p.run(p.now + 100 * MILLIS, |p| p.s.unacked_bytes() == 0);
    assert!(quiet);
    let requests = p.log[start..]
        .iter()
        .filter(|x| is_request(&x.transmit.packet))
        .count();
    assert_eq!(requests, 0);
    assert_eq!(p.delivered.len(), 200_000 + 200 * 1000);
}
