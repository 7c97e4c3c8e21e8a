//! "A flow's peer is where its HELLO_ACK came from" (docs/protocol.md §6.7, §11 "The peer
//! of a flow"), over loopback UDP: a sending endpoint whose HELLO went to port P and whose
//! HELLO_ACK came from port Q of the same address sends the rest of the flow to Q (the
//! answering host's process that owns the flow: here the sans-IO core's `Receiver` on its
//! own socket, as the in-process datapath will run it, docs/datapath.md), nothing more to
//! P, and ignores P from then on; a HELLO_ACK from another address is ignored and counted.

#[allow(dead_code)]
mod common;

use bytes::Bytes;
use common::pattern;
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey};
use flexpass_core::{CreditConfig, Nanos, Receiver, ReceiverConfig};
use flexpass_wire::{Hello, HelloAck, HelloStatus, Packet, Reset, ResetReason, TransportKind};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const LINK_BPS: f64 = 1e9;
const BASE_RTT: Nanos = 50_000;

fn client() -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = false;
    cfg.link_bps = LINK_BPS;
    cfg.base_rtt = BASE_RTT;
    Endpoint::bind(cfg).unwrap()
}

fn socket(addr: &str) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Every datagram waiting on `s`, decoded.
fn drain(s: &UdpSocket) -> Vec<Packet> {
    let mut buf = [0u8; 65_536];
    let mut out = vec![];
    while let Ok((n, _)) = s.recv_from(&mut buf) {
        out.push(Packet::decode(&buf[..n]).expect("the endpoint sends valid datagrams"));
    }
    out
}

/// Turn the client until `s` has received a HELLO; returns it and what came with it.
fn hello_at(client: &mut Endpoint, s: &UdpSocket) -> (Hello, Vec<Packet>) {
    let end = Instant::now() + Duration::from_secs(2);
    let mut seen = vec![];
    while Instant::now() < end {
        client.poll(Duration::from_micros(200)).unwrap();
        seen.extend(drain(s));
        if let Some(h) = seen.iter().find_map(|p| match p {
            Packet::Hello(h) => Some(h.clone()),
            _ => None,
        }) {
            return (h, seen);
        }
    }
    panic!("no HELLO at {:?}", s.local_addr());
}

fn open(client: &mut Endpoint, to: SocketAddr, data: &[u8]) -> FlowKey {
    let key = client
        .open(to, TransportKind::FlexPass, data.len() as u64)
        .unwrap();
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    key
}

#[test]
fn a_hello_ack_from_another_port_moves_the_rest_of_the_flow_there() {
    let data = pattern(2_000_000, 5);
    let mut client = client();
    let caddr = client.local_addr().unwrap();
    // P: where the HELLO goes (the answering host's agent). Q: the process that owns the
    // flow, on the same address.
    let p = socket("127.0.0.1:0").unwrap();
    let q = socket("127.0.0.1:0").unwrap();
    let (paddr, qaddr) = (p.local_addr().unwrap(), q.local_addr().unwrap());
    let key = open(&mut client, paddr, &data);
    assert_eq!(key.0, paddr);
    let (hello, _) = hello_at(&mut client, &p);
    // The agent at P hands the HELLO over; the process answers from Q (the first-RTT
    // data that went to P is not passed on: the sender retransmits it to Q).
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_nanos() as Nanos;
    let cfg = ReceiverConfig::new(CreditConfig::for_link_mtu(LINK_BPS, 0.5, BASE_RTT, 1500));
    let mut r = Receiver::new(hello.flow_id, hello.transport, &cfg).unwrap();
    r.handle_packet(now(), &Packet::Hello(hello.clone()), false)
        .unwrap();
    let send_from_q = |r: &mut Receiver| {
        while let Some(t) = r.poll_transmit(now()) {
            q.send_to(&t.packet.encode_to_vec(), caddr).unwrap();
        }
    };
    send_from_q(&mut r);
    let end = Instant::now() + Duration::from_secs(2);
    while !client.sender(key).unwrap().is_established() {
        assert!(Instant::now() < end, "HELLO_ACK from Q not taken");
        client.poll(Duration::from_micros(200)).unwrap();
    }
    assert_eq!(client.stats.peer_moved, 1);
    assert_eq!(client.sender_peer(key), qaddr);
    assert_eq!(client.table_sizes().moved, 1);
    assert_eq!(client.table_sizes().awaiting_hello_ack, 0);
    // Whatever the client sent to P before the move has arrived by now (loopback delivers
    // within sendto); from here on P must get nothing.
    drain(&p);
    let mut got = Vec::new();
    let mut at_p = 0;
    let mut data_at_q = 0;
    let end = Instant::now() + Duration::from_secs(30);
    while !(got.len() == data.len() && client.sender(key).unwrap().is_complete()) {
        assert!(
            Instant::now() < end,
            "transfer to Q stalled at {} of {} bytes: {:?}",
            got.len(),
            data.len(),
            client.stats
        );
        client.poll(Duration::from_micros(100)).unwrap();
        at_p += drain(&p).len();
        for packet in drain(&q) {
            data_at_q += matches!(packet, Packet::Data(_)) as usize;
            let _ = r.handle_packet(now(), &packet, false);
        }
        if r.poll_timeout().is_some_and(|d| d <= now()) {
            r.handle_timeout(now());
        }
        send_from_q(&mut r);
        while let Some(b) = r.read() {
            got.extend_from_slice(&b);
        }
    }
    assert!(got == data, "bytes at Q differ from those written");
    assert!(
        data_at_q >= data.len() / 1500,
        "{data_at_q} data datagrams at Q"
    );
    assert_eq!(at_p, 0, "datagrams went to P after the move");
    assert_eq!(client.stats.peer_ignored, 0);
    // P is no longer the flow's peer: its RESET is ignored (counted), the flow unharmed.
    p.send_to(
        &Packet::Reset(Reset {
            flow_id: key.1,
            reason: ResetReason::UnknownFlow,
        })
        .encode_to_vec(),
        caddr,
    )
    .unwrap();
    for _ in 0..20 {
        client.poll(Duration::from_micros(200)).unwrap();
    }
    assert_eq!(client.stats.peer_ignored, 1);
    assert!(client.sender(key).unwrap().error().is_none());
    client.close_sender(key);
    assert_eq!(client.table_sizes().moved, 0);
}

#[test]
fn a_hello_ack_from_another_address_is_ignored_and_counted() {
    let data = pattern(200_000, 9);
    let mut client = client();
    let caddr = client.local_addr().unwrap();
    let p = socket("127.0.0.1:0").unwrap();
    let paddr = p.local_addr().unwrap();
    // Another address of the loopback network (Linux routes 127.0.0.0/8 to lo).
    let other = match socket("127.0.0.2:0") {
        Ok(s) => s,
        Err(e) => panic!("cannot bind 127.0.0.2 on loopback ({e}): this test needs it"),
    };
    let key = open(&mut client, paddr, &data);
    let (hello, _) = hello_at(&mut client, &p);
    let ack = |status| {
        Packet::HelloAck(HelloAck {
            flow_id: hello.flow_id,
            transport: hello.transport,
            status,
        })
        .encode_to_vec()
    };
    let resets = client.stats.resets_sent;
    other.send_to(&ack(HelloStatus::Accepted), caddr).unwrap();
    // Another port of P's address, not `accepted`: ignored too.
    let q = socket("127.0.0.1:0").unwrap();
    q.send_to(&ack(HelloStatus::Refused), caddr).unwrap();
    for _ in 0..20 {
        client.poll(Duration::from_micros(200)).unwrap();
    }
    assert_eq!(client.stats.peer_ignored, 2, "{:?}", client.stats);
    assert_eq!(client.stats.peer_moved, 0);
    assert_eq!(
        client.stats.resets_sent, resets,
        "a forged HELLO_ACK is not answered"
    );
    let s = client.sender(key).unwrap();
    assert!(!s.is_established() && s.error().is_none());
    assert_eq!(client.sender_peer(key), paddr);
    // P's own answer still establishes the flow, which stays at P.
    drain(&p);
    p.send_to(&ack(HelloStatus::Accepted), caddr).unwrap();
    let end = Instant::now() + Duration::from_secs(2);
    let mut data_at_p = 0;
    while data_at_p == 0 {
        assert!(Instant::now() < end, "no data at P after its HELLO_ACK");
        client.poll(Duration::from_micros(200)).unwrap();
        data_at_p += drain(&p)
            .iter()
            .filter(|p| matches!(p, Packet::Data(_)))
            .count();
    }
    assert!(client.sender(key).unwrap().is_established());
    assert_eq!(client.sender_peer(key), paddr);
    assert!(drain(&other).is_empty() && drain(&q).is_empty());
    // Settled at P: a later HELLO_ACK from Q moves nothing (an unknown flow there).
    q.send_to(&ack(HelloStatus::Accepted), caddr).unwrap();
    for _ in 0..20 {
        client.poll(Duration::from_micros(200)).unwrap();
    }
    assert_eq!(client.stats.peer_moved, 0);
    assert_eq!(client.sender_peer(key), paddr);
    assert_eq!(client.table_sizes().awaiting_hello_ack, 0);
}
