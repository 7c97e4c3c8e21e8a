//! Hand-over of a connection to the process serving its port (docs/datapath.md, "Hand-over
//! of a connection to the serving process"), endpoint level, over loopback UDP: the
//! answering endpoint passes a HELLO(CONN, open) for a handed-over port on instead of
//! accepting it; the "process" (the core's `Receiver` on its own socket) answers from its
//! port; the opening endpoint moves the flow there (docs/protocol.md §11, "The peer of a
//! flow") and the bytes arrive at the process with nothing more through the answering
//! endpoint; a refused hand-over resets the flow from the answering endpoint's port.

#[allow(dead_code)]
mod common;

use bytes::Bytes;
use common::pattern;
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey, HandedHello};
use flexpass_core::{CreditConfig, Nanos, Receiver, ReceiverConfig, SenderError};
use flexpass_wire::{ConnRole, HelloConn, Packet, TransportKind};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const SERVICE: u16 = 5201;

fn endpoint(accept: bool) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = 1e9;
    cfg.base_rtt = 50_000;
    Endpoint::bind(cfg).unwrap()
}

/// A connection's open flow from `client` to `agent`'s port, for `SERVICE`.
fn open_conn(client: &mut Endpoint, agent: &Endpoint, data: &[u8]) -> FlowKey {
    let to = agent.local_addr().unwrap();
    let key = client
        .open(to, TransportKind::FlexPass, data.len() as u64)
        .unwrap();
    let s = client.sender_mut(key).unwrap();
    s.set_conn(HelloConn {
        conn_id: key.1,
        src_port: 40_000,
        dst_port: SERVICE,
        role: ConnRole::Open,
    });
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    key
}

/// Turn both endpoints until the agent hands a HELLO over.
fn handed(client: &mut Endpoint, agent: &mut Endpoint) -> HandedHello {
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        assert!(Instant::now() < end, "no HELLO handed over");
        client.poll(Duration::from_micros(100)).unwrap();
        agent.poll(Duration::from_micros(100)).unwrap();
        if let Some(h) = agent.take_handed() {
            return h;
        }
    }
}

#[test]
fn a_handed_connection_runs_between_the_opener_and_the_process() {
    let data = pattern(1_000_000, 3);
    let mut agent = endpoint(true);
    let mut client = endpoint(false);
    agent.hand_over_port(SERVICE, true);
    let caddr = client.local_addr().unwrap();
    let key = open_conn(&mut client, &agent, &data);
    let h = handed(&mut client, &mut agent);
    assert_eq!((h.peer, h.hello.flow_id), (caddr, key.1));
    assert_eq!(h.hello.conn.unwrap().dst_port, SERVICE);
    // Not accepted at the agent: no receiver, nothing for its application.
    assert_eq!(agent.flows().1, 0);
    assert!(agent.accept().is_none());
    assert_eq!((agent.stats.handed_over, agent.handed()), (1, 1));
    // The process takes it: its own socket, the core's receiver, HELLO_ACK from there.
    let q = UdpSocket::bind("127.0.0.1:0").unwrap();
    q.set_nonblocking(true).unwrap();
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_nanos() as Nanos;
    let cfg = ReceiverConfig::new(CreditConfig::for_link_mtu(1e9, 0.5, 50_000, 1500));
    let mut r = Receiver::new(h.hello.flow_id, h.hello.transport, &cfg).unwrap();
    r.handle_packet(now(), &Packet::Hello(h.hello.clone()), false)
        .unwrap();
    agent.handed_answered((h.peer, h.hello.flow_id), true);
    let mut buf = [0u8; 65_536];
    let mut got = Vec::new();
    let mut agent_in_after_move = None;
    let end = Instant::now() + Duration::from_secs(30);
    while !(got.len() == data.len() && client.sender(key).unwrap().is_complete()) {
        assert!(
            Instant::now() < end,
            "stalled at {} of {} bytes: {:?}",
            got.len(),
            data.len(),
            client.stats
        );
        client.poll(Duration::from_micros(100)).unwrap();
        agent.poll(Duration::ZERO).unwrap();
        if agent_in_after_move.is_none() && client.sender(key).unwrap().is_established() {
            // Loopback delivers within sendto: what the client sent the agent before the
            // move is in the agent's socket; one more turn reads it.
            agent.poll(Duration::ZERO).unwrap();
            agent_in_after_move = Some(agent.stats.datagrams_in);
        }
        while let Ok((n, _)) = q.recv_from(&mut buf) {
            let _ = r.handle_packet(now(), &Packet::decode(&buf[..n]).unwrap(), false);
        }
        if r.poll_timeout().is_some_and(|d| d <= now()) {
            r.handle_timeout(now());
        }
        while let Some(t) = r.poll_transmit(now()) {
            q.send_to(&t.packet.encode_to_vec(), h.peer).unwrap();
        }
        while let Some(b) = r.read() {
            got.extend_from_slice(&b);
        }
    }
    assert!(
        got == data,
        "bytes at the process differ from those written"
    );
    assert_eq!(client.stats.peer_moved, 1);
    assert_eq!(client.sender_peer(key), q.local_addr().unwrap());
    for _ in 0..10 {
        agent.poll(Duration::from_micros(100)).unwrap();
    }
    assert_eq!(
        Some(agent.stats.datagrams_in),
        agent_in_after_move,
        "datagrams reached the agent after the move: {:?}",
        agent.stats
    );
    // What reached the agent before the move (first-RTT data) was dropped, not answered.
    assert_eq!(agent.stats.resets_sent, 0);
    assert_eq!(agent.stats.unknown_flow, 0);
    assert!(agent.stats.handed_dropped > 0, "{:?}", agent.stats);
    assert_eq!(agent.flows().1, 0);
    assert!(agent.take_handed().is_none());
}

#[test]
fn a_refused_hand_over_resets_the_flow_and_other_ports_are_accepted_as_before() {
    let mut agent = endpoint(true);
    let mut client = endpoint(false);
    agent.hand_over_port(SERVICE, true);
    let key = open_conn(&mut client, &agent, b"hello");
    let h = handed(&mut client, &mut agent);
    agent.handed_answered((h.peer, h.hello.flow_id), false);
    let end = Instant::now() + Duration::from_secs(2);
    while client.sender(key).unwrap().error().is_none() {
        assert!(Instant::now() < end, "the refused flow did not fail");
        client.poll(Duration::from_micros(100)).unwrap();
        agent.poll(Duration::from_micros(100)).unwrap();
    }
    assert_eq!(
        client.sender(key).unwrap().error(),
        Some(SenderError::Reset)
    );
    assert_eq!((agent.stats.handed_refused, agent.handed()), (1, 0));
    // The port handed back: a connection to it is accepted by the agent itself.
    agent.hand_over_port(SERVICE, false);
    let key = open_conn(&mut client, &agent, b"hello");
    let end = Instant::now() + Duration::from_secs(2);
    let accepted = loop {
        assert!(Instant::now() < end, "not accepted");
        client.poll(Duration::from_micros(100)).unwrap();
        agent.poll(Duration::from_micros(100)).unwrap();
        if let Some(k) = agent.accept() {
            break k;
        }
    };
    assert_eq!(accepted.1, key.1);
    assert_eq!(agent.stats.handed_over, 1);
    assert!(agent.take_handed().is_none());
}

#[test]
fn taken_connections_do_not_count_as_half_open() {
    // max_half_open bounds the flows handed over and not answered yet; a flow the process
    // took lingers (late datagrams) but is open, not half-open: before, 256 taken within
    // the linger (2 s) made every further HELLO of the port meet a full table (cookies,
    // then refusal: the opener fell back to kernel TCP for 744 of 1 000 connections).
    const MAX: usize = 4;
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.link_bps = 1e9;
    cfg.base_rtt = 50_000;
    cfg.max_half_open = MAX;
    let mut agent = Endpoint::bind(cfg).unwrap();
    let mut client = endpoint(false);
    agent.hand_over_port(SERVICE, true);
    for i in 0..3 * MAX {
        open_conn(&mut client, &agent, b"hello");
        let h = handed(&mut client, &mut agent);
        agent.handed_answered((h.peer, h.hello.flow_id), true);
        assert_eq!(agent.handed(), i + 1);
    }
    assert_eq!(agent.stats.handed_over, 3 * MAX as u64);
    assert_eq!(
        (agent.stats.cookies_sent, agent.stats.handed_refused),
        (0, 0)
    );
    // Untaken ones still fill the table: the HELLO after MAX of them is refused.
    for _ in 0..MAX {
        open_conn(&mut client, &agent, b"hello");
        handed(&mut client, &mut agent);
    }
    assert_eq!(agent.stats.flows_refused, 0);
    let key = open_conn(&mut client, &agent, b"hello");
    let end = Instant::now() + Duration::from_secs(2);
    while client.sender(key).unwrap().error().is_none() {
        assert!(
            Instant::now() < end,
            "a HELLO beyond max_half_open was not refused"
        );
        client.poll(Duration::from_micros(100)).unwrap();
        agent.poll(Duration::from_micros(100)).unwrap();
        let _ = agent.take_handed(); // the unanswered ones' retransmitted HELLOs
    }
    assert_eq!(agent.stats.flows_refused, 1);
    assert_eq!(agent.stats.handed_over, 4 * MAX as u64);
}
