//! Two endpoints on loopback, real UDP sockets: byte-exact transfers per transport, and
//! hostile datagrams that must be counted and dropped while the flow continues.

mod common;

use bytes::Bytes;
use common::{pattern, Received};
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey};
use flexpass_core::{SenderConfig, MILLIS};
use flexpass_wire::{Ack, Credit, Ecn, Packet, SackBlocks, SubFlow, TransportKind};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

fn endpoint(accept: bool, setup: &impl Fn(&mut EndpointConfig)) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = accept;
    cfg.link_bps = 1e9;
    cfg.base_rtt = 50_000;
    setup(&mut cfg);
    Endpoint::bind(cfg).unwrap()
}

/// Run a transfer; `hostile` is called every turn with the server and client addresses.
fn transfer(
    t: TransportKind,
    data: &[u8],
    hostile: impl FnMut(std::net::SocketAddr, std::net::SocketAddr, u32),
) -> (Vec<u8>, Endpoint, Endpoint) {
    let r = transfer_with(|_| {}, Duration::from_micros(200), t, data, hostile);
    (r.got, r.server, r.client)
}

struct Transfer {
    got: Vec<u8>,
    server: Endpoint,
    client: Endpoint,
    /// The flow at the client and at the server.
    key: FlowKey,
    rkey: FlowKey,
}

/// `transfer` between endpoints that `setup` configures (both), each turn waiting at most
/// `wait` (0: the two endpoints' turns alternate without sleeping).
fn transfer_with(
    setup: impl Fn(&mut EndpointConfig),
    wait: Duration,
    t: TransportKind,
    data: &[u8],
    mut hostile: impl FnMut(std::net::SocketAddr, std::net::SocketAddr, u32),
) -> Transfer {
    let mut server = endpoint(true, &setup);
    let mut client = endpoint(false, &setup);
    let addr = server.local_addr().unwrap();
    let key = client.open(addr, t, data.len() as u64).unwrap();
    client.write(key, Bytes::copy_from_slice(data));
    client.sender_mut(key).unwrap().finish();
    let mut got = vec![];
    let mut rkey = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        client.poll(wait).unwrap();
        server.poll(wait).unwrap();
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
    let rkey = rkey.expect("the server accepted the flow");
    Transfer {
        got,
        server,
        client,
        key,
        rkey,
    }
}

/// A UDP relay between two endpoints on loopback: the client sends to `front`, which
/// forwards to the server from `back`; replies take the way back. Each datagram is shown to
/// an inspector (direction, bytes, TOS byte), which may drop it by returning false.
struct Relay {
    front: flexpass_agent::socket::TosSocket,
    back: flexpass_agent::socket::TosSocket,
    server: SocketAddr,
    client: SocketAddr,
}

impl Relay {
    fn new(server: &Endpoint, client: &Endpoint) -> Relay {
        let sock = || flexpass_agent::socket::TosSocket::bind("127.0.0.1:0".parse().unwrap());
        Relay {
            front: sock().unwrap(),
            back: sock().unwrap(),
            server: server.local_addr().unwrap(),
            client: client.local_addr().unwrap(),
        }
    }

    /// Where the client sends to reach the server.
    fn addr(&self) -> SocketAddr {
        self.front.local_addr().unwrap()
    }

    fn pump(&mut self, inspect: &mut impl FnMut(bool, &[u8], u8) -> bool) {
        for forward in [true, false] {
            let (from, to, dst) = if forward {
                (&mut self.front, &mut self.back, self.server)
            } else {
                (&mut self.back, &mut self.front, self.client)
            };
            while from.recv_batch(64).unwrap() > 0 {
                for i in 0..from.datagrams() {
                    let m = from.received(i);
                    if inspect(forward, m.data, m.tos) {
                        let d = m.data.to_vec();
                        to.queue(dst, m.tos, |out| out.extend_from_slice(&d))
                            .unwrap();
                    }
                }
                to.flush();
            }
        }
    }

    /// Turn client, relay and server until every flow in `keys` has completed (or 30 s);
    /// the bytes the server read, per flow id.
    fn run(
        &mut self,
        client: &mut Endpoint,
        server: &mut Endpoint,
        keys: &[flexpass_agent::FlowKey],
        mut inspect: impl FnMut(bool, &[u8], u8) -> bool,
    ) -> HashMap<u32, Vec<u8>> {
        let mut got = Received::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            client.poll(Duration::from_micros(100)).unwrap();
            self.pump(&mut inspect);
            server.poll(Duration::from_micros(100)).unwrap();
            got.collect(server);
            if keys
                .iter()
                .all(|k| client.sender(*k).unwrap().is_complete())
            {
                break;
            }
        }
        got.bytes
    }
}

#[test]
fn byte_exact_over_loopback_for_each_transport() {
    let data = pattern(3 << 20, 3);
    for t in TransportKind::ALL {
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
            // Another agent's first-contact probe: counted as such, not as malformed.
            (server, Vec::new()),
        ] {
            let _ = attacker.send_to(&bytes, dst);
        }
    });
    assert_eq!(Sha256::digest(&got), Sha256::digest(&data));
    assert!(server.stats.malformed > 0, "{:?}", server.stats);
    assert!(server.stats.probes > 0, "{:?}", server.stats);
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
            idle: false,
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
    // Data of a flow never seen: counted, not answered (it may be first-RTT data ahead of
    // its HELLO). A CREDIT_REQUEST of a flow never seen would be, in this endpoint's first
    // 60 s: admission.rs `a_restarted_endpoint_resets_the_flows_of_its_previous_run`.
    let before = server.stats.resets_sent;
    send(Packet::Data(flexpass_wire::Data {
        flow_id: 100_000,
        subflow: flexpass_wire::SubFlow::Reactive,
        flow_seq: 0,
        subflow_seq: 0,
        credit_seq: 0,
        tsval: 0,
        fin: false,
        retransmission: false,
        priority: None,
        payload: bytes::Bytes::from_static(b"first-RTT data"),
    }));
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

/// PPT over real sockets, through a relay that reads each datagram's TOS byte: both
/// flows arrive byte-exact, and every packet carries the priority docs/protocol.md §10
/// gives it — the HCP (REACTIVE_DATA) of a small flow in P0 and of a large one in P3, the
/// LCP's opportunistic packets (PROACTIVE_DATA) in the mirror P4 / P7, HCP ACKs in P0 and
/// low-priority ACKs in P4; data ECT(0), everything else Not-ECT.
#[test]
fn ppt_over_loopback_tags_each_loop_with_its_priority() {
    let cfg = |accept: bool| {
        let mut c = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        c.accept = accept;
        // BDP 125 kB: the LCP's first window I = BDP − DCTCP's initial window > 0.
        c.link_bps = 10e9;
        c.base_rtt = 100_000;
        c
    };
    let mut server = Endpoint::bind(cfg(true)).unwrap();
    let mut client = Endpoint::bind(cfg(false)).unwrap();
    let mut relay = Relay::new(&server, &client);

    let small = pattern(60_000, 5);
    let large = pattern(2 << 20, 6);
    let mut keys = vec![];
    for data in [&small, &large] {
        let k = client
            .open(relay.addr(), TransportKind::Ppt, data.len() as u64)
            .unwrap();
        client.write(k, Bytes::copy_from_slice(data));
        client.sender_mut(k).unwrap().finish();
        keys.push(k);
    }
    // (flow id, kind, sub-flow of an ACK or data) -> set of (dscp, ecn) seen.
    let mut seen: HashMap<(u32, &'static str), BTreeSet<(u8, u8)>> = HashMap::new();
    let got = relay.run(&mut client, &mut server, &keys, |_, bytes, tos| {
        let kind = match Packet::decode(bytes).expect("the agent sends valid packets") {
            Packet::Data(d) if d.subflow == SubFlow::Reactive => ("hcp data", d.flow_id),
            Packet::Data(d) => ("lcp data", d.flow_id),
            Packet::Ack(a) if a.subflow == SubFlow::Reactive => ("hcp ack", a.flow_id),
            Packet::Ack(a) => ("lcp ack", a.flow_id),
            p => ("control", p.flow_id()),
        };
        seen.entry((kind.1, kind.0))
            .or_default()
            .insert((tos >> 2, tos & 3));
        true
    });
    for (k, data) in keys.iter().zip([&small, &large]) {
        let s = client.sender(*k).unwrap();
        assert!(
            s.is_complete() && s.error().is_none(),
            "flow {} did not complete",
            k.1
        );
        assert_eq!(Sha256::digest(&got[&k.1]), Sha256::digest(data));
    }
    let dscp = |flow: u32, kind| -> Vec<(u8, u8)> {
        seen.get(&(flow, kind))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    };
    let (ect0, not_ect) = (Ecn::Ect0 as u8, Ecn::NotEct as u8);
    let (s, l) = (keys[0].1, keys[1].1);
    // The small flow stays in P0 / P4 (60 kB < the first demotion at 100 kB).
    assert_eq!(dscp(s, "hcp data"), [(32, ect0)]);
    assert_eq!(
        dscp(s, "lcp data"),
        [(36, ect0)],
        "the LCP opens in the first RTT"
    );
    assert_eq!(dscp(s, "hcp ack"), [(32, not_ect)]);
    // The receiver acknowledges every second opportunistic packet (§3.2): when the HCP
    // meets the small flow's tail after a single LCP packet (a descheduled loop paces
    // fewer), that packet is never acknowledged, so its ACKs are checked only if any came.
    assert!(dscp(s, "lcp ack").iter().all(|&t| t == (36, not_ect)));
    // The large flow (a first write > 100 kB) is identified large: P3 / P7.
    assert_eq!(dscp(l, "hcp data"), [(35, ect0)]);
    assert_eq!(
        dscp(l, "lcp data"),
        [(39, ect0)],
        "the LCP opens in the second RTT"
    );
    assert_eq!(dscp(l, "lcp ack"), [(36, not_ect)]);
    for f in [s, l] {
        assert!(dscp(f, "control")
            .iter()
            .all(|&(d, e)| d == 32 && e == not_ect));
        assert!(!dscp(f, "control").is_empty(), "HELLO / HELLO_ACK");
    }
    let lcp = client.sender(keys[1]).unwrap().stats();
    assert!(lcp.bytes_proactive > 0 && lcp.bytes_reactive > 0);
}

/// FlashPass over real sockets, through a relay that reads each datagram's TOS byte and its
/// arrival time: the flow arrives byte-exact; EMULATION packets carry the credit class
/// (DSCP 46, the emulation queue) with ECT(0), or Not-ECT once over-provisioned (§III-C),
/// EMULATION_CREDITs the control class (24) and data the proactive class (26), ECT(0)
/// (docs/protocol.md §10); without the pre-credit phase no data leaves before T_wait has
/// passed since the flow opened (§III-B), and grants arrived in time.
#[test]
fn flashpass_over_loopback_marks_emulation_and_sends_data_at_t_plus_t_wait() {
    // Large enough that a loaded test machine (other jobs, a debug build) returns grants
    // in time; the receiver may hold each for about half of it.
    const T_WAIT: u64 = 20_000_000;
    let cfg = |accept: bool| {
        let mut c = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        c.accept = accept;
        c.link_bps = 1e9;
        c.base_rtt = 200_000;
        c.t_wait = T_WAIT;
        c.flashpass_unscheduled = false;
        c
    };
    let mut server = Endpoint::bind(cfg(true)).unwrap();
    let mut client = Endpoint::bind(cfg(false)).unwrap();
    let mut relay = Relay::new(&server, &client);

    let data = pattern(1 << 20, 7);
    let start = Instant::now();
    let k = client
        .open(relay.addr(), TransportKind::FlashPass, data.len() as u64)
        .unwrap();
    client.write(k, Bytes::copy_from_slice(&data));
    client.sender_mut(k).unwrap().finish();
    let mut seen: HashMap<&'static str, BTreeSet<(u8, u8)>> = HashMap::new();
    let mut first_data = None;
    let mut not_ect_emulation = 0u64;
    let got = relay.run(&mut client, &mut server, &[k], |_, bytes, tos| {
        let kind = match Packet::decode(bytes).expect("the agent sends valid packets") {
            Packet::Emulation(_) => {
                not_ect_emulation += u64::from(tos & 3 == Ecn::NotEct as u8);
                "emulation"
            }
            Packet::EmulationCredit(_) => "emulation credit",
            Packet::Data(d) if d.subflow == SubFlow::Proactive => {
                first_data.get_or_insert(start.elapsed());
                "proactive data"
            }
            Packet::Data(_) => "reactive data",
            Packet::Ack(_) => "ack",
            _ => "control",
        };
        seen.entry(kind).or_default().insert((tos >> 2, tos & 3));
        true
    });
    let got = got.get(&k.1).cloned().unwrap_or_default();
    let s = client.sender(k).unwrap();
    assert!(
        s.is_complete() && s.error().is_none(),
        "the flow did not complete"
    );
    assert_eq!(Sha256::digest(&got), Sha256::digest(&data));
    let (ect0, not_ect) = (Ecn::Ect0 as u8, Ecn::NotEct as u8);
    let kind = |k: &str| seen.get(k).map(|s| s.iter().copied().collect::<Vec<_>>());
    let em = &s.stats().emulation;
    // Ordinary ones ECT(0); the over-provisioned ones (how many depends on timing: those
    // sent once the grants expected cover what is left) Not-ECT, none dropped on loopback.
    let emulation = kind("emulation").unwrap();
    assert!(emulation.contains(&(46, ect0)), "{emulation:?}");
    assert!(emulation
        .iter()
        .all(|&e| e == (46, ect0) || e == (46, not_ect)));
    assert_eq!(client.stats.emulation_dropped, 0);
    assert_eq!(not_ect_emulation, em.over_provisioned_sent);
    assert_eq!(kind("emulation credit"), Some(vec![(24, ect0)]));
    assert_eq!(kind("proactive data"), Some(vec![(26, ect0)]));
    assert_eq!(kind("reactive data"), None, "no pre-credit phase");
    // The first emulation packet left after `start`, so its data slot is later than this.
    let first = first_data.unwrap();
    assert!(
        first >= Duration::from_nanos(T_WAIT),
        "first data {first:?} after the flow opened, T_wait {T_WAIT} ns"
    );
    assert!(em.grants_received > 0, "{em:?}");
    // Most grants come back in time (a loaded test machine may stall a turn past T_wait).
    assert!(
        em.late_grants * 4 <= em.grants_received,
        "grants late: {em:?}"
    );
}

/// DCTCP's tail-loss probe on real sockets (`EndpointConfig::tlp`, `--tlp`): the relay drops
/// the first transmission of a flow's last data packet. Without the probe the sender learns
/// of it only from its retransmission timeout; with it, 2·SRTT after the last ACK the probe
/// goes out — the last packet again, as there is no new data — and the flow completes
/// without a timeout.
#[test]
fn tail_loss_probe_recovers_a_lost_last_packet_without_a_timeout() {
    for tlp in [false, true] {
        let cfg = |accept: bool| {
            let mut c = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
            c.accept = accept;
            c.link_bps = 1e9;
            c.base_rtt = 50_000;
            c.tlp = tlp;
            // A timeout here must come from the dropped tail, not from a loaded machine
            // descheduling this single-threaded loop past the 4 ms RTO_min.
            c.sender = |t| {
                let mut s = SenderConfig::new(t);
                s.dctcp.rto_min = 50 * MILLIS;
                s.dctcp.rto_init = 50 * MILLIS;
                s
            };
            c
        };
        let mut server = Endpoint::bind(cfg(true)).unwrap();
        let mut client = Endpoint::bind(cfg(false)).unwrap();
        let mut relay = Relay::new(&server, &client);
        let data = pattern(100_000, 9);
        let k = client
            .open(relay.addr(), TransportKind::Dctcp, data.len() as u64)
            .unwrap();
        client.write(k, Bytes::copy_from_slice(&data));
        client.sender_mut(k).unwrap().finish();
        let mut dropped = 0;
        let got = relay.run(&mut client, &mut server, &[k], |forward, bytes, _| {
            let last = forward
                && matches!(Packet::decode(bytes), Ok(Packet::Data(d))
                    if d.flow_seq + d.payload.len() as u64 == data.len() as u64 && !d.retransmission);
            dropped += u32::from(last);
            !last
        });
        let s = client.sender(k).unwrap();
        assert!(
            s.is_complete() && s.error().is_none(),
            "tlp {tlp}: incomplete"
        );
        assert_eq!(dropped, 1, "tlp {tlp}: the last packet's first copy");
        assert_eq!(Sha256::digest(&got[&k.1]), Sha256::digest(&data));
        let st = s.stats();
        if tlp {
            assert!(st.tlp_probes >= 1, "{st:?}");
            assert_eq!((st.timeouts, st.retransmissions), (0, 1), "{st:?}");
        } else {
            assert_eq!(st.tlp_probes, 0, "{st:?}");
            assert!(
                st.timeouts >= 1,
                "without the probe only the RTO finds the tail: {st:?}"
            );
        }
    }
}

#[test]
fn idle_streams_opened_together_draw_no_credits_and_a_small_message_a_few() {
    // 200 ExpressPass streams opened with nothing to send (as a server's reply flows are):
    // their HELLOs say IDLE and no receiver credits them (without IDLE: about 480 credits
    // before their CREDIT_STOPs landed). Then one stream sends 30 bytes: the credits that
    // restarts are windowed by the bytes pending (4; without the window about 27).
    // Credits for a 40 Gbit/s link: a round trip on loopback holds dozens of them.
    let fast = |accept| {
        let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.accept = accept;
        cfg.link_bps = 40e9;
        cfg.base_rtt = 50_000;
        Endpoint::bind(cfg).unwrap()
    };
    let mut server = fast(true);
    let mut client = fast(false);
    let addr = server.local_addr().unwrap();
    let keys: Vec<_> = (0..200)
        .map(|_| client.open(addr, TransportKind::ExpressPass, 0).unwrap())
        .collect();
    let turns = |client: &mut Endpoint, server: &mut Endpoint, ms: u64| {
        let end = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < end {
            client.poll(Duration::ZERO).unwrap();
            server.poll(Duration::ZERO).unwrap();
        }
    };
    turns(&mut client, &mut server, 100);
    assert!(keys
        .iter()
        .all(|&k| client.sender(k).unwrap().error().is_none()));
    let credits: u64 = keys
        .iter()
        .map(|&k| {
            server
                .receiver((addr_of(&client), k.1))
                .map_or(0, |r| r.stats().credits_sent)
        })
        .sum();
    assert_eq!(credits, 0, "idle streams were credited");
    // One HELLO_ACK per HELLO (a loaded machine may stall the loop past the HELLO
    // timeout, and the HELLO goes again), nothing else.
    let hellos: u64 = keys
        .iter()
        .map(|&k| 1 + client.sender(k).unwrap().stats().hello_retransmissions)
        .sum();
    assert!(
        (200..=hellos).contains(&client.stats.datagrams_in),
        "{} datagrams for {hellos} HELLOs: only HELLO_ACKs may come",
        client.stats.datagrams_in
    );
    client.write(keys[7], Bytes::from_static(&[9; 30]));
    turns(&mut client, &mut server, 100);
    let r = server.receiver((addr_of(&client), keys[7].1)).unwrap();
    assert_eq!(r.stats().bytes_proactive, 30);
    let sent = r.stats().credits_sent;
    eprintln!("credits for one 30-byte message: {sent}");
    assert!(
        (1..=4).contains(&sent),
        "{sent} credits for one 30-byte message"
    );
}

fn addr_of(e: &Endpoint) -> SocketAddr {
    e.local_addr().unwrap()
}

#[test]
fn credits_paced_in_batches_leave_in_few_writes_and_every_byte_arrives() {
    // One ExpressPass flow (every data packet credit-scheduled), credits one by one and in
    // batches of 8 (docs/datapath.md, "Credit batches"): with batches the receiver writes
    // several credits per system call; both deliver every byte.
    let data = pattern(4 << 20, 5);
    let run = |batch: u32| {
        let setup = |c: &mut EndpointConfig| {
            c.link_bps = 10e9;
            c.credit_batch = batch;
        };
        let t = transfer_with(
            setup,
            Duration::ZERO,
            TransportKind::ExpressPass,
            &data,
            |_, _, _| {},
        );
        let s = t.client.sender(t.key).unwrap().stats().clone();
        let r = t.server.receiver(t.rkey).unwrap().stats().clone();
        assert!(t.got == data, "batch {batch}: bytes differ");
        // (Resent packets are not asserted: on a loaded 2-core machine a preempted loop
        // overflows loopback's receive buffer either way; quiet, neither resends any.)
        let per_call = t.server.stats.datagrams_out as f64 / t.server.stats.send_calls as f64;
        eprintln!(
            "batch {batch}: {} credits sent, {} used, {} packets resent, receiver {:.2} \
             datagrams a send call",
            r.credits_sent, s.credits_received, s.retransmissions, per_call
        );
        (per_call, r.credits_sent)
    };
    let (one_by_one, _) = run(1);
    let (batched, credits) = run(8);
    assert!(
        batched >= 2.0 * one_by_one && batched >= 3.0,
        "batches of 8: {batched:.2} datagrams a write, one by one {one_by_one:.2}"
    );
    assert!(credits >= (data.len() / 1448) as u64, "{credits} credits");
}
