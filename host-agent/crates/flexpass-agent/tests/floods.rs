//! The endpoint under floods, on loopback (no root): spoofed HELLOs from many source
//! addresses (all of 127/8 is local) fill at most the half-open table, cost bounded credits,
//! are never handed to the application, and a real flow still completes through a cookie;
//! CREDIT_REQUESTs and data for unknown flows create nothing; a credit flood cannot make a
//! sender exceed its link (docs/protocol.md §11, "Half-open flows and cookies").

use bytes::Bytes;
use flexpass_agent::endpoint::CookieMode;
use flexpass_agent::{Endpoint, EndpointConfig};
use flexpass_wire::{
    Credit, CreditRequest, Data, Hello, HelloAck, HelloStatus, Packet, ResetReason, SubFlow,
    TransportKind,
};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

fn endpoint(accept: bool, link_bps: f64, tune: impl FnOnce(&mut EndpointConfig)) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = link_bps;
    cfg.base_rtt = 50_000;
    tune(&mut cfg);
    Endpoint::bind(cfg).unwrap()
}

/// `n` sockets on distinct loopback addresses 127.77.x.y (non-blocking, so the test can
/// drain what the endpoint sends them).
fn spoofers(n: usize) -> Vec<UdpSocket> {
    (0..n)
        .map(|i| {
            let ip = format!("127.77.{}.{}", 1 + i / 250, 1 + i % 250);
            let s = UdpSocket::bind(format!("{ip}:0")).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

fn hello(flow_id: u32, transport: TransportKind, cookie: Option<u64>) -> Vec<u8> {
    Packet::Hello(Hello {
        flow_id,
        transport,
        flow_size: 0,
        conn: None,
        cookie,
        idle: false,
    })
    .encode_to_vec()
}

/// Everything the sockets received, decoded.
fn drain(socks: &[UdpSocket]) -> Vec<Packet> {
    let mut buf = [0u8; 2048];
    let mut out = vec![];
    for s in socks {
        while let Ok(n) = s.recv(&mut buf) {
            if let Ok(p) = Packet::decode(&buf[..n]) {
                out.push(p);
            }
        }
    }
    out
}

fn poll_for(ep: &mut Endpoint, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        ep.poll(Duration::from_micros(200)).unwrap();
    }
}

/// Move one flow from `client` to `server`, both polled here; the bytes the server's
/// application read (it accepts whatever the endpoint hands over: a spoofed flow handed to
/// it would show up as a second key).
fn transfer(
    server: &mut Endpoint,
    client: &mut Endpoint,
    t: TransportKind,
    data: &[u8],
    mut between: impl FnMut(),
) -> (Vec<u8>, Vec<flexpass_agent::FlowKey>) {
    let key = client
        .open(server.local_addr().unwrap(), t, data.len() as u64)
        .unwrap();
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    let mut got = vec![];
    let mut accepted = vec![];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "transfer timed out: {:?}",
            server.stats
        );
        client.poll(Duration::from_micros(100)).unwrap();
        server.poll(Duration::from_micros(100)).unwrap();
        between();
        while let Some(k) = server.accept() {
            accepted.push(k);
        }
        if let Some(&k) = accepted.iter().find(|k| k.1 == key.1) {
            let r = server.receiver_mut(k).unwrap();
            while let Some(b) = r.read() {
                got.extend_from_slice(&b);
            }
            if r.is_finished() && client.sender(key).unwrap().is_complete() {
                break;
            }
        }
    }
    assert!(client.sender(key).unwrap().error().is_none());
    (got, accepted)
}

#[test]
fn spoofed_hellos_fill_only_the_half_open_table_and_a_real_flow_gets_through() {
    let mut server = endpoint(true, 1e9, |c| c.max_half_open = 64);
    let mut client = endpoint(false, 1e9, |_| {});
    let addr = server.local_addr().unwrap();
    let socks = spoofers(200);
    // 10 HELLOs (credit-based: each asks for credits) from each of 200 addresses.
    let mut sent = 0;
    for round in 0..10u32 {
        for (i, s) in socks.iter().enumerate() {
            let id = round << 16 | i as u32;
            s.send_to(&hello(id, TransportKind::ExpressPass, None), addr)
                .unwrap();
            sent += 1;
        }
        poll_for(&mut server, Duration::from_millis(5));
    }
    poll_for(&mut server, Duration::from_millis(100));
    let st = server.stats.clone();
    assert_eq!(st.half_open, 64, "{st:?}");
    assert_eq!(server.flows().1, 64, "receivers: only the half-open table");
    assert_eq!(st.half_open_peak, 64);
    assert_eq!(st.cookies_sent, sent - 64, "{st:?}");
    assert!(
        server.accept().is_none(),
        "no spoofed flow reaches the application"
    );
    // Bounded credits: at most 16 per half-open flow, all within the half-open share.
    let back = drain(&socks);
    let credits = back
        .iter()
        .filter(|p| matches!(p, Packet::Credit(_)))
        .count() as u64;
    let retries = back
        .iter()
        .filter(|p| {
            matches!(
                p,
                Packet::HelloAck(HelloAck {
                    status: HelloStatus::Retry { .. },
                    ..
                })
            )
        })
        .count() as u64;
    assert!(credits <= 64 * 16, "{credits} credits to spoofed flows");
    assert_eq!(st.half_open_credit_stops, 64, "{st:?}");
    assert_eq!(
        retries, st.cookies_sent,
        "every retry is one datagram back, no more"
    );

    // A real flow now: the table is full, so it gets a cookie and goes through confirmed.
    let data: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let (got, accepted) = transfer(
        &mut server,
        &mut client,
        TransportKind::ExpressPass,
        &data,
        || {},
    );
    assert!(
        got == data,
        "byte-exact: {} of {} bytes",
        got.len(),
        data.len()
    );
    assert_eq!(
        accepted.len(),
        1,
        "only the real flow was handed over: {accepted:?}"
    );
    let key = (server.local_addr().unwrap(), accepted[0].1);
    let _ = key;
    assert_eq!(server.stats.cookies_valid, 1, "{:?}", server.stats);
    assert_eq!(server.stats.half_open, 64);
    // The spoofed flows are still bounded by the table, and an old one is dropped when a new
    // HELLO finds the table full after the timeout.
}

#[test]
fn half_open_flows_older_than_the_timeout_make_room_and_are_forgotten() {
    let mut server = endpoint(true, 1e9, |c| {
        c.max_half_open = 8;
        c.half_open_timeout = 50_000_000;
    });
    let addr = server.local_addr().unwrap();
    let socks = spoofers(9);
    for (i, s) in socks[..8].iter().enumerate() {
        s.send_to(&hello(i as u32, TransportKind::Dctcp, None), addr)
            .unwrap();
    }
    poll_for(&mut server, Duration::from_millis(80));
    assert_eq!(server.stats.half_open, 8);
    socks[8]
        .send_to(&hello(99, TransportKind::Dctcp, None), addr)
        .unwrap();
    poll_for(&mut server, Duration::from_millis(20));
    let st = &server.stats;
    assert_eq!(
        (st.half_open, st.half_open_expired, st.cookies_sent),
        (1, 8, 0),
        "{st:?}"
    );
    // A dropped flow's sender, if real, learns it with RESET when it sends again.
    let data = Packet::Data(Data {
        flow_id: 0,
        subflow: SubFlow::Reactive,
        flow_seq: 0,
        subflow_seq: 0,
        credit_seq: 0,
        tsval: 0,
        fin: true,
        retransmission: false,
        priority: None,
        payload: Bytes::from_static(b"x"),
    });
    socks[0].send_to(&data.encode_to_vec(), addr).unwrap();
    poll_for(&mut server, Duration::from_millis(20));
    assert!(drain(&socks[..1])
        .iter()
        .any(|p| matches!(p, Packet::Reset(_))));
}

#[test]
fn with_cookies_off_the_oldest_half_open_flow_is_evicted() {
    let mut server = endpoint(true, 1e9, |c| {
        c.max_half_open = 4;
        c.hello_cookies = CookieMode::Off;
    });
    let addr = server.local_addr().unwrap();
    let socks = spoofers(10);
    for (i, s) in socks.iter().enumerate() {
        s.send_to(&hello(i as u32, TransportKind::FlexPass, None), addr)
            .unwrap();
        poll_for(&mut server, Duration::from_millis(2));
    }
    let st = &server.stats;
    assert_eq!(
        (st.half_open, st.half_open_evicted, st.cookies_sent),
        (4, 6, 0),
        "{st:?}"
    );
    assert_eq!(server.flows().1, 4);
}

#[test]
fn with_cookies_always_no_hello_creates_state_until_its_cookie_comes_back() {
    let mut server = endpoint(true, 1e9, |c| c.hello_cookies = CookieMode::Always);
    let mut client = endpoint(false, 1e9, |_| {});
    let socks = spoofers(20);
    let addr = server.local_addr().unwrap();
    for (i, s) in socks.iter().enumerate() {
        s.send_to(&hello(i as u32, TransportKind::FlexPass, None), addr)
            .unwrap();
        // A guessed cookie is refused (and answered with a fresh one).
        s.send_to(
            &hello(1000 + i as u32, TransportKind::FlexPass, Some(i as u64)),
            addr,
        )
        .unwrap();
    }
    poll_for(&mut server, Duration::from_millis(50));
    assert_eq!(server.flows().1, 0);
    assert_eq!(server.stats.cookies_sent, 40);
    assert_eq!(server.stats.cookies_invalid, 20);
    for t in [
        TransportKind::FlexPass,
        TransportKind::Dctcp,
        TransportKind::ExpressPass,
    ] {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + 1) as u8).collect();
        let (got, accepted) = transfer(&mut server, &mut client, t, &data, || {});
        assert!(got == data, "{t:?}: byte-exact");
        assert_eq!(accepted.len(), 1);
    }
    assert_eq!(server.stats.cookies_valid, 3);
    assert_eq!(server.stats.half_open_peak, 0, "no half-open flow ever");
}

#[test]
fn credit_requests_stops_and_data_for_unknown_flows_create_nothing() {
    let mut server = endpoint(true, 1e9, |_| {});
    let addr = server.local_addr().unwrap();
    let socks = spoofers(100);
    let started = Instant::now();
    for round in 0..20u32 {
        for (i, s) in socks.iter().enumerate() {
            let id = round << 16 | i as u32;
            for p in [
                Packet::CreditRequest(CreditRequest {
                    flow_id: id,
                    pending_bytes: 1 << 30,
                }),
                Packet::CreditStop { flow_id: id },
                Packet::Data(Data {
                    flow_id: id,
                    subflow: SubFlow::Proactive,
                    flow_seq: 0,
                    subflow_seq: 0,
                    credit_seq: 0,
                    tsval: 0,
                    fin: false,
                    retransmission: false,
                    priority: None,
                    payload: Bytes::from_static(b"data"),
                }),
            ] {
                s.send_to(&p.encode_to_vec(), addr).unwrap();
            }
        }
        poll_for(&mut server, Duration::from_millis(3));
    }
    poll_for(&mut server, Duration::from_millis(50));
    let elapsed = started.elapsed().as_secs_f64();
    let st = &server.stats;
    assert_eq!(server.flows(), (0, 0), "{st:?}");
    assert_eq!(st.half_open_peak, 0);
    assert!(st.unknown_flow >= 5000, "{st:?}");
    // No credit, no state. The only answers are RESET(unknown_flow) to CREDIT_REQUESTs: an
    // endpoint in its first 60 s takes them to be flows of its previous run (protocol.md
    // §11, "Forgotten flows"). They come from the RESET bucket (200/s, burst 20), so the
    // flood is not amplified: 6 000 datagrams in, a few dozen out.
    assert_eq!(st.datagrams_out, st.resets_sent, "only RESETs: {st:?}");
    assert!(
        (st.resets_sent as f64) <= 20.0 + 200.0 * elapsed + 1.0,
        "{} RESETs in {elapsed:.3} s: {st:?}",
        st.resets_sent
    );
    let answers = drain(&socks);
    assert_eq!(answers.len() as u64, st.resets_sent);
    assert!(answers.iter().all(|p| matches!(
        p,
        Packet::Reset(r) if r.reason == ResetReason::UnknownFlow
    )));
    assert!(server.accept().is_none());
}

/// A receiver (here: a socket playing one) that answers HELLO and then floods credits at 20
/// times the sender's link credit rate: the sender uses at most its link's worth of them,
/// so its data stays within its link rate.
#[test]
fn a_credit_flood_cannot_make_a_sender_exceed_its_link() {
    let link = 100e6; // credit rate 100e6 / (8 · 1622) ≈ 7706 credits/s
    let mut client = endpoint(false, link, |_| {});
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_nonblocking(true).unwrap();
    let peer_addr: SocketAddr = peer.local_addr().unwrap();
    let key = client
        .open(peer_addr, TransportKind::ExpressPass, 0)
        .unwrap();
    client.write(key, Bytes::from(vec![9u8; 64 << 20]));
    let mut buf = [0u8; 2048];
    let mut client_addr = None;
    let start = Instant::now();
    let mut data_bytes = 0u64;
    let mut data_pkts = 0u64;
    let mut credits = 0u32;
    let mut next_burst = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        client.poll(Duration::from_micros(50)).unwrap();
        while let Ok((n, from)) = peer.recv_from(&mut buf) {
            match Packet::decode(&buf[..n]) {
                Ok(Packet::Hello(h)) => {
                    client_addr = Some(from);
                    let ack = Packet::HelloAck(HelloAck {
                        flow_id: h.flow_id,
                        transport: h.transport,
                        status: HelloStatus::Accepted,
                    });
                    peer.send_to(&ack.encode_to_vec(), from).unwrap();
                }
                Ok(Packet::Data(d)) => {
                    data_pkts += 1;
                    data_bytes += d.payload.len() as u64 + 28 + 28 + 38;
                }
                _ => {}
            }
        }
        // 150 000 credits/s in bursts of 150 every millisecond.
        if let (Some(to), true) = (client_addr, Instant::now() >= next_burst) {
            next_burst += Duration::from_millis(1);
            for _ in 0..150 {
                let c = Packet::Credit(Credit {
                    flow_id: key.1,
                    credit_seq: credits,
                    padding: 6,
                });
                credits += 1;
                let _ = peer.send_to(&c.encode_to_vec(), to);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let st = &client.stats;
    let rate = data_bytes as f64 * 8.0 / secs;
    assert!(st.credits_in_rate_limited > 0, "{st:?}");
    // Link credit rate · 1 s plus the 32-credit burst, with 10 % slack for timing.
    let max_pkts = (link / (8.0 * 1622.0) * secs * 1.1) as u64 + 32;
    assert!(
        data_pkts <= max_pkts,
        "{data_pkts} data packets in {secs:.2} s (at most {max_pkts}): {rate:.3e} bit/s, {st:?}"
    );
    eprintln!(
        "credit flood: {credits} credits sent at the sender in {secs:.2} s, {data_pkts} data packets \
         back ({rate:.3e} bit/s on the wire, link {link:.0e}); {} dropped on arrival",
        st.credits_in_rate_limited
    );
}

/// A forger that follows each spoofed HELLO with a data packet confirms its flows (data is
/// the proof without cookies): they leave the half-open table, but the flow count is capped
/// (`max_flows`): then HELLOs get cookies, and a valid cookie beyond the cap is refused.
/// `--hello-cookies always` is the defence against such forgers (no flow without a cookie).
#[test]
fn hello_and_data_forgers_are_capped_by_max_flows() {
    let mut server = endpoint(true, 1e9, |c| {
        c.max_half_open = 16;
        c.max_flows = 40;
    });
    let mut client = endpoint(false, 1e9, |_| {});
    let addr = server.local_addr().unwrap();
    let socks = spoofers(100);
    for (i, s) in socks.iter().enumerate() {
        let id = i as u32;
        s.send_to(&hello(id, TransportKind::Dctcp, None), addr)
            .unwrap();
        let d = Packet::Data(Data {
            flow_id: id,
            subflow: SubFlow::Reactive,
            flow_seq: 0,
            subflow_seq: 0,
            credit_seq: 0,
            tsval: 0,
            fin: false,
            retransmission: false,
            priority: None,
            payload: Bytes::from_static(b"forged"),
        });
        s.send_to(&d.encode_to_vec(), addr).unwrap();
        poll_for(&mut server, Duration::from_millis(1));
    }
    poll_for(&mut server, Duration::from_millis(50));
    let st = server.stats.clone();
    assert_eq!(server.flows().1, 40, "{st:?}");
    assert_eq!(st.cookies_sent, 60, "{st:?}");
    // A real flow now gets a cookie, and with it a refusal: the host is busy.
    let key = client.open(addr, TransportKind::Dctcp, 10).unwrap();
    client.write(key, Bytes::from_static(b"0123456789"));
    client.sender_mut(key).unwrap().finish();
    let end = Instant::now() + Duration::from_secs(5);
    while client.sender(key).unwrap().error().is_none() && Instant::now() < end {
        client.poll(Duration::from_micros(200)).unwrap();
        server.poll(Duration::from_micros(200)).unwrap();
    }
    assert_eq!(
        client.sender(key).unwrap().error(),
        Some(flexpass_core::SenderError::Refused)
    );
    assert_eq!(server.stats.flows_refused, 1);
    assert_eq!(server.flows().1, 40);
}
