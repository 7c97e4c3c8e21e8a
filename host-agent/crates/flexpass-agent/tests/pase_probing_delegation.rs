//! PASE's probing (SIGCOMM'14 §3.3) and delegation (§3.1) on real packets: agents on
//! loopback with a real arbitrator (flexpass_agent::arbitrator, its own thread and UDP
//! socket). Probing: a flow the arbitrator puts in the lowest queue sends header-only probes
//! and resumes on an unmarked answer. Delegation: hosts report their demand, get a share of
//! the arbitrator's link and arbitrate their own flows over it; the arbitrator keeps no
//! per-flow state. No timing is asserted beyond generous deadlines.

mod common;

use bytes::Bytes;
use common::{pattern, Received};
use flexpass_agent::arbitrator::{Arbitrator, ArbitratorConfig, ArbitratorStats};
use flexpass_agent::{Endpoint, EndpointConfig, FlowKey};
use flexpass_core::pase::Arbitration;
use flexpass_wire::TransportKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LINK_BPS: f64 = 1e9;
const BASE_RATE: f64 = 1e6;

struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Arbitrator>,
}

fn arbitrator(queues: u8) -> Running {
    let mut arb = Arbitrator::bind(ArbitratorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        capacity_bps: LINK_BPS,
        queues,
        base_rate_bps: BASE_RATE,
        expire: 5_000_000_000,
    })
    .unwrap();
    let addr = arb.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        arb.run(&s).unwrap();
        arb
    });
    Running { addr, stop, thread }
}

impl Running {
    fn stop(self) -> ArbitratorStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap().link.stats
    }
}

fn endpoint(arbitrator: Option<SocketAddr>, set: impl FnOnce(&mut EndpointConfig)) -> Endpoint {
    let mut cfg = EndpointConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.accept = arbitrator.is_none();
    cfg.link_bps = LINK_BPS;
    cfg.base_rtt = 50_000;
    cfg.arbitrator = arbitrator;
    cfg.arbitration_interval = 500_000;
    set(&mut cfg);
    Endpoint::bind(cfg).unwrap()
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

/// Turns of client/server pairs until `done` (or 60 s); `each` sees the clients every turn.
fn run(
    pairs: &mut [(&mut Endpoint, &mut Endpoint, &mut Received)],
    mut each: impl FnMut(&mut [(&mut Endpoint, &mut Endpoint, &mut Received)]),
    mut done: impl FnMut(&[(&mut Endpoint, &mut Endpoint, &mut Received)]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && !done(pairs) {
        for (c, s, got) in pairs.iter_mut() {
            c.poll(Duration::from_micros(100)).unwrap();
            s.poll(Duration::from_micros(100)).unwrap();
            got.collect(s);
        }
        each(pairs);
    }
}

fn arb(c: &Endpoint, k: FlowKey) -> Arbitration {
    c.sender(k).unwrap().arbitration().unwrap()
}

/// Two flows through an arbitrator of two queues: the larger, C of demand behind the
/// smaller, is put in the lowest queue, where with probing it sends header-only probes and
/// resumes data on an answer without ECN (loopback marks nothing); once the smaller ends it
/// is promoted and probing ends. Both byte-exact. Without probing the same flow sends no
/// probe.
#[test]
fn a_flow_in_the_lowest_queue_probes_and_resumes() {
    for probing in [true, false] {
        let arbitrator = arbitrator(2);
        let mut server = endpoint(None, |_| {});
        let mut client = endpoint(Some(arbitrator.addr), |c| {
            c.pase_queues = 2;
            c.pase_probing = probing;
        });
        let saddr = server.local_addr().unwrap();
        let (small_data, large_data) = (pattern(300_000, 3), pattern(2_000_000, 7));
        // The smaller flow's FIN waits until the arbitrator has put the larger one below
        // it: on a slow moment it could otherwise end before the first answer came.
        let small = open(&mut client, saddr, &small_data, false);
        client.poll(Duration::ZERO).unwrap();
        let large = open(&mut client, saddr, &large_data, false);
        let mut got = Received::default();
        let (mut lowest_seen, mut promoted, mut finished) = (false, false, false);
        let mut small_finished = false;
        let mut done_at: Option<Instant> = None;
        run(
            &mut [(&mut client, &mut server, &mut got)],
            |p| {
                let c = &mut *p[0].0;
                let s_done = c.sender(small).unwrap().is_complete();
                let la = arb(c, large);
                lowest_seen |= !s_done && la.queue == 1 && arb(c, small).queue == 0;
                if lowest_seen && !small_finished {
                    small_finished = true;
                    c.sender_mut(small).unwrap().finish();
                }
                promoted |= s_done && lowest_seen && la.queue == 0;
                if promoted && !finished {
                    finished = true;
                    c.sender_mut(large).unwrap().finish();
                }
            },
            |p| {
                let c = &*p[0].0;
                let complete = [small, large]
                    .iter()
                    .all(|k| c.sender(*k).unwrap().is_complete());
                if complete && done_at.is_none() {
                    done_at = Some(Instant::now());
                }
                done_at.is_some_and(|t| t.elapsed() > Duration::from_millis(5))
            },
        );
        let astats = arbitrator.stop();
        let st = client.sender(large).unwrap().stats().clone();
        eprintln!(
            "probing {probing}: probes {} resumes {}; agent {:?}; arbitrator {astats:?}",
            st.pase_probes, st.pase_probe_resumes, client.stats
        );
        assert_eq!(
            got.bytes.get(&small.1),
            Some(&small_data),
            "small byte-exact"
        );
        assert!(
            got.bytes.get(&large.1) == Some(&large_data),
            "large byte-exact"
        );
        assert!(
            lowest_seen,
            "the larger flow in the lowest queue while both ran"
        );
        assert!(promoted, "promoted once the smaller ended");
        if probing {
            assert!(st.pase_probes >= 1, "probes from the lowest queue: {st:?}");
            assert!(
                st.pase_probe_resumes >= 1,
                "an unmarked answer resumes data"
            );
        } else {
            assert_eq!(st.pase_probes, 0, "no probing unless asked: {st:?}");
        }
    }
}

/// Two hosts with delegation, three flows: each host reports its demand (host A two flows,
/// 2 Gbit/s; host B one, 1 Gbit/s) and gets a share of the arbitrator's 1 Gbit/s link
/// (3 asked > C: shares in proportion, 2/3 and 1/3; the shares in force never sum above C
/// once both are known); A arbitrates its own two flows over its share (the smaller in the
/// top queue, the larger, C of demand behind it, lower at the base rate). The arbitrator
/// keeps no per-flow state and gets far fewer messages than the flows' arbitrations; hosts
/// that end their flows leave. All byte-exact.
#[test]
fn delegated_hosts_arbitrate_their_flows_over_their_shares() {
    let arbitrator = arbitrator(8);
    let delegated = |c: &mut EndpointConfig| c.pase_delegation = true;
    let (mut sa, mut sb) = (endpoint(None, |_| {}), endpoint(None, |_| {}));
    let mut a = endpoint(Some(arbitrator.addr), delegated);
    let mut b = endpoint(Some(arbitrator.addr), delegated);
    let (saddr_a, saddr_b) = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
    let small_data = pattern(2_000_000, 3);
    let (la_data, lb_data) = (pattern(4_000_000, 5), pattern(4_000_000, 9));
    let small = open(&mut a, saddr_a, &small_data, true);
    let large_a = open(&mut a, saddr_a, &la_data, false);
    let large_b = open(&mut b, saddr_b, &lb_data, false);
    let (mut ga, mut gb) = (Received::default(), Received::default());
    let mut ordered: Option<(Arbitration, Arbitration)> = None;
    let mut shares: Option<(f64, f64)> = None;
    let mut finished = false;
    let mut done_at: Option<Instant> = None;
    run(
        &mut [(&mut a, &mut sa, &mut ga), (&mut b, &mut sb, &mut gb)],
        |p| {
            let (ca, cb) = p.split_at_mut(1);
            let (ca, cb) = (&mut *ca[0].0, &mut *cb[0].0);
            if !ca.sender(small).unwrap().is_complete() {
                let (s, l) = (arb(ca, small), arb(ca, large_a));
                if ordered.is_none() && ca.stats.pase_local_arbitrations > 0 {
                    ordered = Some((s, l));
                }
            }
            let small_done = ca.sender(small).unwrap().is_complete();
            if let (Some(x), Some(y)) = (ca.pase_share_bps(), cb.pase_share_bps()) {
                if !small_done && x + y <= LINK_BPS + 2.0 && x < LINK_BPS && y < LINK_BPS {
                    shares.get_or_insert((x, y));
                }
            }
            if shares.is_some() && small_done && !finished {
                finished = true;
                ca.sender_mut(large_a).unwrap().finish();
                cb.sender_mut(large_b).unwrap().finish();
            }
        },
        |p| {
            let complete = p[0].0.sender(small).unwrap().is_complete()
                && p[0].0.sender(large_a).unwrap().is_complete()
                && p[1].0.sender(large_b).unwrap().is_complete();
            if complete && done_at.is_none() {
                done_at = Some(Instant::now());
            }
            // Past completion, two delegation periods (10 ms) for the leaving reports.
            done_at.is_some_and(|t| t.elapsed() > Duration::from_millis(15))
        },
    );
    let astats = arbitrator.stop();
    eprintln!(
        "order {ordered:?}, shares {shares:?}; A {:?}; B {:?}; arbitrator {astats:?}",
        a.stats, b.stats
    );
    assert_eq!(
        ga.bytes.get(&small.1),
        Some(&small_data),
        "small byte-exact"
    );
    assert!(
        ga.bytes.get(&large_a.1) == Some(&la_data),
        "A's large byte-exact"
    );
    assert!(
        gb.bytes.get(&large_b.1) == Some(&lb_data),
        "B's large byte-exact"
    );
    let (s, l) = ordered.expect("A arbitrated its flows while both ran");
    assert_eq!(s.queue, 0, "{s:?} {l:?}");
    assert!(l.queue >= 1, "{s:?} {l:?}");
    assert!(l.reference_rate_bps < s.reference_rate_bps, "{s:?} {l:?}");
    let (x, y) = shares.expect("both hosts got shares that fit C while A had two flows");
    assert!(
        (x - LINK_BPS * 2.0 / 3.0).abs() < 0.01 * LINK_BPS
            && (y - LINK_BPS / 3.0).abs() < 0.01 * LINK_BPS,
        "A (2 Gbit/s asked) 2/3 of C, B (1 Gbit/s) 1/3: {x} vs {y}"
    );
    assert_eq!(astats.flows_peak, 0, "no per-flow state at the arbitrator");
    assert_eq!(astats.children_peak, 2, "{astats:?}");
    assert_eq!(astats.children, 0, "both hosts left: {astats:?}");
    assert!(a.stats.pase_shares >= 1 && b.stats.pase_shares >= 1);
    let messages = a.stats.arbitration_requests + b.stats.arbitration_requests;
    let decisions = a.stats.pase_local_arbitrations + b.stats.pase_local_arbitrations;
    assert!(
        messages < decisions,
        "reports per period, not requests per flow: {messages} vs {decisions}"
    );
    assert_eq!(
        a.stats.arbitration_rejected + b.stats.arbitration_rejected,
        0
    );
}
