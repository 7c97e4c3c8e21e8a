//! PASE's arbitrators (SIGCOMM'14 §3.1) answer each update when it arrives, from the flows
//! they heard from (`host.pase.messages = "packets"`, net/arbitration_packets.rs), on
//! tests/experiments/small-pase-arrivals.toml: a dumbbell whose rack link (20 µs) is longer
//! than a host link (5 µs), so that the right ToR hears a right-rack flow's update 20 µs
//! before a left-rack flow's sent at the same time. Flow F (host 0 → host 2, 2 MB) runs from
//! the start; each test adds flows at chosen points of the arbitration rounds and reads the
//! queue a flow is in. Each also runs `"counted"`, whose arbitrators decide at the round
//! from every active flow, and checks that it answers otherwise: the round-based model fails
//! these tests.

use flexpass_core::Nanos;
use flexpass_sim::{prepare, FlowSpec, Network, Override, Source};

const US: Nanos = 1_000;
/// Host 0 (left rack) → host 2 (right rack), 2 MB: the path's third link, the right ToR's
/// port to host 2, is arbitrated 25 µs from host 0 and 5 µs from host 3.
const F: usize = 0;

fn network(sets: &[&str]) -> Network {
    let path = format!(
        "{}/tests/experiments/small-pase-arrivals.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let e = Source::load(&path).unwrap().experiment(&o).unwrap();
    prepare(&e).unwrap().net
}

const COUNTED: &str = "host.pase.messages=\"counted\"";

/// A flow like F from `src` to `dst` of `bytes`, starting at `start`; its index.
fn add(net: &mut Network, src: usize, dst: usize, bytes: u64, start: Nanos) -> usize {
    let spec = FlowSpec {
        id: net.flows.iter().map(|f| f.spec.id).max().unwrap_or(0) + 1,
        src,
        dst,
        size: Some(bytes),
        start,
        ..net.flows[F].spec.clone()
    };
    net.add_flow(spec);
    net.flows.len() - 1
}

fn queue(net: &Network, flow: usize) -> u8 {
    let s = net.flows[flow]
        .sender
        .as_ref()
        .expect("started, not retired");
    s.arbitration().expect("a PASE flow").queue
}

/// The arbitration interval; rounds fire at its multiples (F starts at 0).
fn interval(net: &Network) -> Nanos {
    net.pase.as_ref().expect("PASE runs").interval
}

fn run_to(net: &mut Network, t: Nanos) {
    net.run_until(t, |_, _| {});
}

/// Round K's updates are the ones the tests look at (F has run alone before).
const K: u64 = 5;

/// N (host 3 → host 2, 100 kB) starts 1 µs after round K: its first update reaches the
/// right ToR 6 µs later; F's round-K update (sent at the round) 25 µs later. The ToR answers
/// F from its table, which has N by then: F goes below N (queue 1) with round K's answers,
/// before round K+1. A model that decides at the round (N not started then) keeps F in
/// queue 0 until round K+1's answer. When N has finished, its host's release takes it out
/// of the tables: F is back in queue 0 within two intervals (expiry alone would take three).
#[test]
fn an_update_is_answered_with_the_flows_heard_from_before_it_in_the_same_interval() {
    for counted in [false, true] {
        let mut net = network(if counted { &[COUNTED] } else { &[] });
        let i = interval(&net);
        assert!(
            i > 50 * US,
            "rounds far apart enough for the timings: {i} ns"
        );
        run_to(&mut net, K * i);
        assert_eq!(queue(&net, F), 0, "F alone");
        let n = add(&mut net, 3, 2, 100_000, K * i + US);
        run_to(&mut net, (K + 1) * i + 5 * US);
        eprintln!(
            "counted {counted}: interval {i} ns, F in queue {}",
            queue(&net, F)
        );
        if counted {
            assert_eq!(queue(&net, F), 0, "decided at round K without N");
            continue;
        }
        assert_eq!(queue(&net, F), 1, "round K's answer knew N");
        let mut t = (K + 1) * i;
        while net.flows[n].completed_at.is_none() {
            t += US;
            run_to(&mut net, t);
            if t >= 40 * i {
                let s = net.flows[n].sender.as_ref().unwrap();
                panic!(
                    "N did not complete: {:?} {:?} stray {} acked {} delivered {}",
                    s.arbitration(),
                    s.stats(),
                    net.stray_packets,
                    s.acked_bytes(),
                    net.flows[n].delivered
                );
            }
        }
        let done = net.flows[n].completed_at.unwrap();
        run_to(&mut net, done + 2 * i);
        assert_eq!(
            queue(&net, F),
            0,
            "N released within two intervals of its end"
        );
    }
}

/// M (host 3 → host 2, 5 MB) runs from the start behind F at the right ToR (queue 1). S
/// (host 1 → host 2, 100 kB) starts 1 µs before round K: its update reaches the right ToR
/// 24 µs after the round, M's round-K update 5 µs after it. The ToR has not heard from S
/// when it answers M: M stays in queue 1 through round K's answer and goes to queue 2
/// (behind F and S) with round K+1's. A model that decides at the round would count S
/// (active at the round) at once. (The counted model answers otherwise still: it arbitrates
/// a link per level of the paths, and the right ToR's port is level 1 of M's path and level
/// 2 of F's and S's, so M is never behind them there.)
#[test]
fn an_arbitrator_never_answers_from_flows_it_has_not_heard_from() {
    let observe = |sets: &[&str]| {
        let mut net = network(sets);
        let i = interval(&net);
        let m = add(&mut net, 3, 2, 5_000_000, US);
        run_to(&mut net, K * i - 2 * US);
        let before = queue(&net, m);
        let s = add(&mut net, 1, 2, 100_000, K * i - US);
        run_to(&mut net, (K + 1) * i - US);
        let after_k = queue(&net, m);
        run_to(&mut net, (K + 2) * i - US);
        assert_eq!(queue(&net, s), 0, "S ahead of both");
        [before, after_k, queue(&net, m)]
    };
    let (packets, counted) = (observe(&[]), observe(&[COUNTED]));
    eprintln!(
        "M's queue before round K, after its answer, after K+1's: {packets:?}, counted {counted:?}"
    );
    assert_eq!(
        packets,
        [1, 1, 2],
        "behind F; S unheard at round K; behind both"
    );
    assert_ne!(counted, packets);
}

/// Early pruning (k = 1) makes the right ToR stop hearing from F: P (host 1 → host 3,
/// 1 MB, smaller than what F has left) starts 1 µs after round K on F's rack link, so from
/// round K+1 on F is in queue 1 at its ToR and its update goes no further. The right ToR
/// last heard from F with round K; its entry expires `EXPIRE_INTERVALS` (3) intervals later,
/// and M (host 3 → host 2, 5 MB), behind F there until then, moves up to queue 0 with the
/// first answer after. Without expiry M would stay behind F's stale entry until P ends; a
/// model that decides at the round drops F at the right ToR as soon as it is pruned.
#[test]
fn an_entry_not_refreshed_expires_after_three_intervals() {
    let observe = |sets: &[&str]| {
        let mut net = network(sets);
        let i = interval(&net);
        let m = add(&mut net, 3, 2, 5_000_000, US);
        run_to(&mut net, K * i);
        let mut seen = vec![queue(&net, m)];
        let p = add(&mut net, 1, 3, 1_000_000, K * i + US);
        for r in K + 1..K + 6 {
            run_to(&mut net, r * i + 40 * US);
            seen.push(queue(&net, m));
        }
        assert!(net.flows[p].completed_at.is_none(), "P still runs");
        assert_eq!(queue(&net, F), 1, "F behind P");
        seen
    };
    let prune = "host.pase.early_pruning_queues=1";
    let (packets, counted) = (observe(&[prune]), observe(&[prune, COUNTED]));
    eprintln!("M's queue at round K, after rounds K+1..K+5: {packets:?}, counted {counted:?}");
    // F's entry at the right ToR heard ≈ K·i + 25 µs: in force for round K+3's update,
    // gone for round K+4's.
    assert_eq!(packets, [1, 1, 1, 1, 0, 0]);
    assert_ne!(counted, packets);
}

/// Same seed, same run: byte-identical results (the tables are ordered by flow, the
/// messages' map is only looked up).
#[test]
fn per_arrival_arbitration_is_deterministic() {
    let a = flexpass_sim::run(&load_dumbbell(), &[], &mut |_| {}).unwrap();
    let b = flexpass_sim::run(&load_dumbbell(), &[], &mut |_| {}).unwrap();
    let key = |r: &flexpass_sim::RunReport| {
        let flows: Vec<_> = r.flows.iter().map(|f| (f.id, f.fct_us)).collect();
        format!(
            "{flows:?} {:?}",
            r.pase.as_ref().map(|s| serde_json::to_string(s).unwrap())
        )
    };
    assert_eq!(key(&a), key(&b));
}

fn load_dumbbell() -> flexpass_sim::Experiment {
    let path = format!(
        "{}/tests/experiments/small-pase-dumbbell.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    Source::load(&path).unwrap().experiment(&[]).unwrap()
}
