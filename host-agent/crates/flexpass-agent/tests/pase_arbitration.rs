//! PASE's arbitration on real packets (Munir et al., SIGCOMM'14 §3.1; docs/protocol.md §11,
//! "PASE arbitration"): agents on loopback ask a real arbitrator (flexpass_agent::arbitrator,
//! its own thread and UDP socket) for their flows' queues and reference rates, and ignore
//! answers that are not for them. No timing is asserted beyond generous deadlines.

mod common;

use bytes::Bytes;
use common::{pattern, Received};
use flexpass_agent::arbitrator::{Arbitrator, ArbitratorConfig};
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey};
use flexpass_core::pase::Arbitration;
use flexpass_wire::{ArbitrationResponse, Packet, TransportKind};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LINK_BPS: f64 = 1e9;

fn endpoint(accept: bool, arbitrator: Option<SocketAddr>) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = LINK_BPS;
    cfg.base_rtt = 50_000;
    cfg.arbitrator = arbitrator;
    cfg.arbitration_interval = 2_000_000;
    Endpoint::bind(cfg).unwrap()
}

/// Client and server turns; the bytes each accepted flow delivered, by flow id. Stops when
/// `done` says so (or after 60 s); `each` sees the client every turn.
fn run(
    client: &mut Endpoint,
    server: &mut Endpoint,
    mut each: impl FnMut(&mut Endpoint),
    mut done: impl FnMut(&Endpoint) -> bool,
) -> HashMap<u32, Vec<u8>> {
    let mut got = Received::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !done(client) {
        client.poll(Duration::from_micros(200)).unwrap();
        server.poll(Duration::from_micros(200)).unwrap();
        got.collect(server);
        each(client);
    }
    got.bytes
}

fn open(client: &mut Endpoint, server: SocketAddr, data: &[u8], finish: bool) -> FlowKey {
    let k = client
        .open(server, TransportKind::Pase, data.len() as u64)
        .unwrap();
    client.write(k, Bytes::copy_from_slice(data));
    if finish {
        client.sender_mut(k).unwrap().finish();
    }
    k
}

/// Two PASE flows of different sizes through one arbitrator of a link of the hosts' rate:
/// the smaller gets the top queue at the link's rate, the larger (C of demand ahead of it) a
/// lower queue at the base rate; once the smaller ends (released) the larger is promoted
/// (the larger is finished only then, so it cannot end first on a slow machine); both
/// arrive byte-exact; forged answers from another socket are counted and change nothing.
#[test]
fn the_smaller_flow_gets_the_top_queue_and_forged_answers_are_ignored() {
    let base_rate = 1e6;
    let mut arb = Arbitrator::bind(ArbitratorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        capacity_bps: LINK_BPS,
        queues: 8,
        base_rate_bps: base_rate,
        expire: 5_000_000_000,
    })
    .unwrap();
    let arb_addr = arb.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            arb.run(&stop).unwrap();
            arb
        })
    };
    let mut server = endpoint(true, None);
    let mut client = endpoint(false, Some(arb_addr));
    let saddr = server.local_addr().unwrap();
    let small_data = pattern(300_000, 3);
    let large_data = pattern(8_000_000, 7);
    // The small flow asks first, so the large one's first answer already has it ahead.
    let small = open(&mut client, saddr, &small_data, true);
    client.poll(Duration::ZERO).unwrap();
    let large = open(&mut client, saddr, &large_data, false);
    let mut large_finished = false;
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let caddr = client.local_addr().unwrap();
    // What the flows followed while both were running, and the large flow's after.
    let mut both: Option<(Arbitration, Arbitration)> = None;
    let mut promoted = false;
    let mut forged_sent = 0u64;
    let mut done_at: Option<Instant> = None;
    let got = run(
        &mut client,
        &mut server,
        |c| {
            let s = c.sender(small).unwrap();
            let l = c.sender(large).unwrap();
            let (sa, la) = (s.arbitration().unwrap(), l.arbitration().unwrap());
            if !s.is_complete() && la.queue > 0 {
                both = Some((sa, la));
            }
            if s.is_complete() && both.is_some() && la.queue == 0 {
                promoted = true;
            }
            if promoted && !large_finished {
                large_finished = true;
                c.sender_mut(large).unwrap().finish();
            }
            // Forged answers from another address: the lowest queue and 1 bit/s for every
            // arb_seq the flows may have sent.
            if forged_sent < 64 {
                for (k, seq) in [(large, forged_sent as u32), (small, forged_sent as u32)] {
                    let p = Packet::ArbitrationResponse(ArbitrationResponse {
                        flow_id: k.1,
                        arb_seq: seq,
                        queue: 7,
                        reference_rate_bps: 1,
                    });
                    forger.send_to(&p.encode_to_vec(), caddr).unwrap();
                }
                forged_sent += 1;
            }
        },
        // Past completion, a few intervals more for the releases to leave.
        |c| {
            let complete = [small, large]
                .iter()
                .all(|k| c.sender(*k).unwrap().is_complete());
            if complete && done_at.is_none() {
                done_at = Some(Instant::now());
            }
            done_at.is_some_and(|t| t.elapsed() > Duration::from_millis(20))
        },
    );
    stop.store(true, Ordering::Relaxed);
    let arb = thread.join().unwrap();
    let stats = &client.stats;
    let ids = (small.1, large.1);
    assert_eq!(got.get(&ids.0), Some(&small_data), "small flow byte-exact");
    assert!(
        got.get(&ids.1) == Some(&large_data),
        "large flow byte-exact"
    );
    eprintln!(
        "small/large while both ran: {both:?}; agent {stats:?}; arbitrator {:?}",
        arb.link.stats
    );
    let (sa, la) = both.expect("both flows arbitrated while running");
    assert_eq!(
        sa.queue, 0,
        "the smaller flow is in the top queue: {sa:?} vs {la:?}"
    );
    assert!(sa.queue < la.queue, "{sa:?} vs {la:?}");
    assert!(
        sa.reference_rate_bps > la.reference_rate_bps,
        "higher reference rate for the smaller flow: {sa:?} vs {la:?}"
    );
    assert_eq!(
        sa.reference_rate_bps, LINK_BPS,
        "the small flow alone fills C"
    );
    assert_eq!(
        la.reference_rate_bps, base_rate,
        "C of demand ahead: the base rate"
    );
    assert!(
        promoted,
        "the large flow back in the top queue after the small one ended"
    );
    assert!(stats.arbitrations_accepted >= 3, "{stats:?}");
    assert!(stats.arbitration_forged >= 64, "{stats:?}");
    assert_eq!(stats.arbitration_rejected, 0, "{stats:?}");
    assert_eq!(arb.link.stats.releases, 2, "{:?}", arb.link.stats);
    assert_eq!(arb.link.stats.flows, 0, "{:?}", arb.link.stats);
    assert!(arb.link.stats.responses >= 3, "{:?}", arb.link.stats);
}

/// An arbitrator's answers the sender must refuse: for a flow it never asked about, for a
/// request it never sent, with a rate above its line rate. An honest one after them takes
/// effect (queue and rate). Then the arbitrator falls silent: the flow keeps that
/// arbitration (DCTCP within its queue) and completes byte-exact, no stall.
#[test]
fn answers_for_other_flows_or_out_of_range_are_refused() {
    let fake = UdpSocket::bind("127.0.0.1:0").unwrap();
    fake.set_read_timeout(Some(Duration::from_millis(1)))
        .unwrap();
    let mut server = endpoint(true, None);
    let mut client = endpoint(false, Some(fake.local_addr().unwrap()));
    let data = pattern(3_000_000, 5);
    let key = open(&mut client, server.local_addr().unwrap(), &data, true);
    let honest = Arbitration {
        queue: 3,
        reference_rate_bps: 2e8,
    };
    let mut answered = false;
    let mut followed = false;
    let got = run(
        &mut client,
        &mut server,
        |c| {
            let mut buf = [0u8; 64];
            while let Ok((n, src)) = fake.recv_from(&mut buf) {
                let Ok(Packet::ArbitrationRequest(r)) = Packet::decode(&buf[..n]) else {
                    panic!("the arbitrator got something else");
                };
                if answered || r.remaining == 0 {
                    continue;
                }
                answered = true;
                let resp = |flow_id, arb_seq, queue, rate| {
                    Packet::ArbitrationResponse(ArbitrationResponse {
                        flow_id,
                        arb_seq,
                        queue,
                        reference_rate_bps: rate,
                    })
                    .encode_to_vec()
                };
                for p in [
                    resp(r.flow_id ^ 1, r.arb_seq, 7, 1),
                    resp(r.flow_id, r.arb_seq.wrapping_add(5), 7, 1),
                    resp(r.flow_id, r.arb_seq, 7, (LINK_BPS * 10.0) as u64),
                    resp(
                        r.flow_id,
                        r.arb_seq,
                        honest.queue,
                        honest.reference_rate_bps as u64,
                    ),
                ] {
                    fake.send_to(&p, src).unwrap();
                }
            }
            if c.sender(key).unwrap().arbitration() == Some(honest) {
                followed = true;
            }
        },
        |c| c.sender(key).unwrap().is_complete(),
    );
    let stats = &client.stats;
    assert_eq!(got.get(&key.1), Some(&data), "byte-exact");
    assert!(answered, "the flow asked its arbitrator");
    assert!(followed, "the honest answer took effect");
    assert_eq!(
        client.sender(key).unwrap().arbitration(),
        Some(honest),
        "kept"
    );
    assert_eq!(stats.arbitration_unasked, 2, "{stats:?}");
    assert_eq!(stats.arbitration_rejected, 1, "{stats:?}");
    assert_eq!(stats.arbitrations_accepted, 1, "{stats:?}");
}
