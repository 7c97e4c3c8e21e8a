//! Two endpoints on loopback, real UDP sockets: byte-exact transfers per transport, and
//! hostile datagrams that must be counted and dropped while the flow continues.

use bytes::Bytes;
use flexpass_agent::{Endpoint, EndpointConfig};
use flexpass_wire::{Ack, Credit, Packet, SackBlocks, SubFlow, TransportKind};
use sha2::{Digest, Sha256};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

fn endpoint(accept: bool) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = 1e9;
    cfg.base_rtt = 50_000;
    Endpoint::bind(cfg).unwrap()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32) as u8
        })
        .collect()
}

/// Run a transfer; `hostile` is called every turn with the server and client addresses.
fn transfer(
    t: TransportKind,
    data: &[u8],
    mut hostile: impl FnMut(std::net::SocketAddr, std::net::SocketAddr, u32),
) -> (Vec<u8>, Endpoint, Endpoint) {
    let mut server = endpoint(true);
    let mut client = endpoint(false);
    let addr = server.local_addr().unwrap();
    let key = client.open(addr, t, data.len() as u64).unwrap();
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    let mut got = vec![];
    let mut rkey = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        client.poll(Duration::from_micros(200)).unwrap();
        server.poll(Duration::from_micros(200)).unwrap();
        if let Some(k) = server.accept() {
            rkey = Some(k);
        }
        if let Some(k) = rkey {
            let r = server.receiver_mut(k).unwrap();
            while let Some(b) = r.read() {
                got.extend_from_slice(&b);
            }
            if r.is_finished() && client.sender(key).unwrap().is_complete() {
                break;
            }
        }
        hostile(addr, client.local_addr().unwrap(), key.1);
    }
    assert!(client.sender(key).unwrap().error().is_none());
    (got, server, client)
}

#[test]
fn byte_exact_over_loopback_for_each_transport() {
    let data = pattern(3 << 20, 3);
    for t in [
        TransportKind::FlexPass,
        TransportKind::ExpressPass,
        TransportKind::Dctcp,
    ] {
        let (got, server, _) = transfer(t, &data, |_, _, _| {});
        assert_eq!(got.len(), data.len(), "{t:?}");
        assert_eq!(Sha256::digest(&got), Sha256::digest(&data), "{t:?}");
        assert_eq!(server.stats.malformed, 0);
    }
}

#[test]
fn hostile_datagrams_are_counted_and_the_flow_survives() {
    let data = pattern(1 << 20, 5);
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut turn = 0u32;
    let (got, server, client) = transfer(TransportKind::FlexPass, &data, |server, client, flow| {
        turn += 1;
        if !turn.is_multiple_of(3) {
            return;
        }
        let ack = Packet::Ack(Ack {
            flow_id: flow,
            subflow: SubFlow::Reactive,
            ece: false,
            cum_ack: 1 << 30,
            ack_seq: 1 << 30,
            tsecr: 0,
            flow_ack: 1 << 40,
            sack: SackBlocks::new(),
        });
        let credit = Packet::Credit(Credit {
            flow_id: flow ^ 0xdead,
            credit_seq: turn,
            padding: 6,
        });
        let mut truncated = credit.encode_to_vec();
        truncated.truncate(7);
        let oversized = vec![0x12u8; 9000];
        for (dst, bytes) in [
            (client, ack.encode_to_vec()),
            (client, credit.encode_to_vec()),
            (server, truncated.clone()),
            (server, oversized),
            (client, truncated),
        ] {
            let _ = attacker.send_to(&bytes, dst);
        }
    });
    assert_eq!(Sha256::digest(&got), Sha256::digest(&data));
    assert!(server.stats.malformed > 0, "{:?}", server.stats);
    assert!(
        client.stats.malformed > 0 && client.stats.unknown_flow > 0,
        "{:?}",
        client.stats
    );
}

#[test]
fn packets_of_dropped_flows_get_a_rate_limited_reset_and_unseen_flows_none() {
    use flexpass_wire::{CreditRequest, Hello, ResetReason};
    let mut server = {
        // Room for 300 half-open flows (HELLOs without data, docs/protocol.md §11).
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.link_bps = 1e9;
        cfg.max_half_open = 300;
        Endpoint::bind(cfg).unwrap()
    };
    let addr = server.local_addr().unwrap();
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let me = peer.local_addr().unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let send = |p: Packet| peer.send_to(&p.encode_to_vec(), addr).unwrap();
    let request = |flow_id| {
        Packet::CreditRequest(CreditRequest {
            flow_id,
            pending_bytes: 0,
        })
    };
    let drain_until = |server: &mut Endpoint, ms: u64| {
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            server.poll(Duration::from_millis(2)).unwrap();
        }
    };
    // Open flows 1..=300 with HELLOs (half-open: not handed to the application before
    // their first data), then drop them.
    for flow_id in 1..=300u32 {
        send(Packet::Hello(Hello {
            flow_id,
            transport: TransportKind::ExpressPass,
            flow_size: 0,
            conn: None,
            cookie: None,
        }));
        if flow_id % 20 == 0 {
            server.poll(Duration::ZERO).unwrap();
        }
    }
    drain_until(&mut server, 100);
    assert!(server.accept().is_none());
    assert_eq!(server.stats.half_open, 300);
    for flow_id in 1..=300u32 {
        assert!(server.is_half_open((me, flow_id)));
        server.close_receiver((me, flow_id)).unwrap();
    }
    assert_eq!(server.stats.half_open, 0);
    // Drain what the server sent while the flows were open (HELLO_ACKs, credits).
    let mut buf = [0u8; 2048];
    while peer.recv_from(&mut buf).is_ok() {}
    // A flow never seen: counted, not answered (it may be first-RTT data ahead of a HELLO).
    let before = server.stats.resets_sent;
    send(request(100_000));
    drain_until(&mut server, 20);
    assert_eq!(server.stats.resets_sent, before);
    // A dropped flow: answered RESET(unknown_flow).
    send(request(7));
    drain_until(&mut server, 20);
    let (n, _) = peer.recv_from(&mut buf).expect("a RESET comes back");
    match Packet::decode(&buf[..n]).unwrap() {
        Packet::Reset(r) => assert_eq!((r.flow_id, r.reason), (7, ResetReason::UnknownFlow)),
        p => panic!("expected RESET, got {p:?}"),
    }
    // A flood for dropped flows is answered at most at the rate limit; RESETs never.
    let start = Instant::now();
    for flow_id in 1..=300u32 {
        send(request(flow_id));
        if flow_id % 20 == 0 {
            server.poll(Duration::ZERO).unwrap();
        }
    }
    drain_until(&mut server, 50);
    let allowed = 20.0 + 200.0 * start.elapsed().as_secs_f64();
    let answered = server.stats.resets_sent - before;
    assert!(answered >= 20, "{:?}", server.stats);
    assert!(
        answered as f64 <= allowed + 1.0,
        "{answered} > {allowed}: {:?}",
        server.stats
    );
    let before = server.stats.resets_sent;
    send(Packet::Reset(flexpass_wire::Reset {
        flow_id: 5,
        reason: ResetReason::UnknownFlow,
    }));
    drain_until(&mut server, 20);
    assert_eq!(server.stats.resets_sent, before);
}
