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
fn packets_for_unknown_flows_get_a_rate_limited_reset() {
    use flexpass_wire::{CreditRequest, ResetReason};
    let mut server = endpoint(true);
    let addr = server.local_addr().unwrap();
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let request = |flow_id| {
        Packet::CreditRequest(CreditRequest {
            flow_id,
            pending_bytes: 0,
        })
        .encode_to_vec()
    };
    // One stray CREDIT_REQUEST: answered RESET(unknown_flow) for that flow.
    peer.send_to(&request(41), addr).unwrap();
    server.poll(Duration::from_millis(50)).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = peer.recv_from(&mut buf).expect("a RESET comes back");
    match Packet::decode(&buf[..n]).unwrap() {
        Packet::Reset(r) => assert_eq!((r.flow_id, r.reason), (41, ResetReason::UnknownFlow)),
        p => panic!("expected RESET, got {p:?}"),
    }
    // A flood is answered at most at the rate limit, and RESETs are never answered.
    let start = Instant::now();
    for i in 0..2000u32 {
        peer.send_to(&request(1000 + i), addr).unwrap();
        if i % 20 == 0 {
            server.poll(Duration::ZERO).unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_millis(100);
    while Instant::now() < deadline {
        server.poll(Duration::from_millis(5)).unwrap();
    }
    let allowed = 20.0 + 200.0 * start.elapsed().as_secs_f64();
    assert!(server.stats.unknown_flow >= 1000, "{:?}", server.stats);
    assert!((server.stats.resets_sent as f64) <= allowed + 1.0, "{:?}", server.stats);
    let reset = flexpass_wire::Packet::Reset(flexpass_wire::Reset {
        flow_id: 5,
        reason: ResetReason::UnknownFlow,
    });
    let before = server.stats.resets_sent;
    peer.send_to(&reset.encode_to_vec(), addr).unwrap();
    server.poll(Duration::from_millis(20)).unwrap();
    assert_eq!(server.stats.resets_sent, before);
}
