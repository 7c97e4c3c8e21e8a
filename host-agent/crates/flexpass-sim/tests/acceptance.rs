//! Acceptance tests: the papers' claims on the embedded model, run from the built-in
//! experiment files (host-agent/experiments/): 10 Gbps, base RTT ≈ 23 µs, w_q = 0.5,
//! K = 60 kB, selective-drop threshold 100 kB — FlexPass §6.1.

use flexpass_core::TargetLossRule;
use flexpass_sim::convergence::discrete_model_periods;
use flexpass_sim::{Override, RunReport, Source};
use flexpass_wire::TransportKind;

/// Run a built-in experiment with `--set` overrides (its sweep, if any, is not run).
fn run(name: &str, sets: &[String]) -> RunReport {
    let src = Source::load(name).unwrap();
    let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let exp = src.experiment(&o).unwrap_or_else(|e| panic!("{e}"));
    flexpass_sim::run(&exp, &o, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn sets(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// The long-flow experiments, 20 ms.
fn run20(name: &str) -> RunReport {
    run(name, &sets(&["duration_ms=20"]))
}

fn share_of(r: &RunReport, t: TransportKind) -> f64 {
    r.transports
        .iter()
        .find(|x| x.transport == t)
        .expect("transport present")
        .share
}

fn no_corruption(r: &RunReport) {
    for f in &r.flows {
        assert_eq!(
            f.corrupted_bytes, 0,
            "flow {} delivered corrupted bytes",
            f.id
        );
        assert!(f.delivered_bytes > 0, "flow {} delivered nothing", f.id);
    }
}

/// One incast of `n` flows of the `incast` experiment.
fn incast(t: TransportKind, n: usize, extra: &[String]) -> RunReport {
    let (name, profile) = match t {
        TransportKind::ExpressPass => ("expresspass", "naive"),
        TransportKind::FlexPass => ("flexpass", "flexpass"),
        TransportKind::Dctcp => ("dctcp", "flexpass"),
        TransportKind::Ppt => ("ppt", "ppt"),
        TransportKind::FlashPass => ("flashpass", "flashpass"),
        TransportKind::PFabric => ("pfabric", "pfabric"),
        TransportKind::Pase => ("pase", "ppt"),
    };
    let mut s = sets(&[
        &format!("incast.0.transport={name}"),
        &format!("switch.profile={profile}"),
        &format!("incast.0.flows={n}"),
    ]);
    s.extend_from_slice(extra);
    run("incast", &s)
}

#[test]
fn expresspass_alone_fills_the_link_without_loss_or_queue() {
    let r = run20("single-expresspass");
    let b = r.bottleneck.as_ref().unwrap();
    assert!(
        b.data_utilization >= 0.90,
        "data utilization {}",
        b.data_utilization
    );
    assert_eq!(r.data_drops_full + r.data_drops_red, 0);
    assert!(
        b.max_queue_bytes[1] <= 4 * 1538,
        "max data queue {} B",
        b.max_queue_bytes[1]
    );
    no_corruption(&r);
}

#[test]
fn single_flexpass_proactive_takes_w_q_and_reactive_the_rest() {
    let r = run20("single-flexpass");
    let f = &r.flows[0];
    assert!(
        (f.proactive_share - 0.5).abs() <= 0.1 * 0.5 + 0.03,
        "proactive {}",
        f.proactive_share
    );
    assert!(f.reactive_share > 0.4, "reactive {}", f.reactive_share);
    assert!(f.share >= 0.90, "total {}", f.share);
    no_corruption(&r);
}

#[test]
fn two_flexpass_flows_share_fairly() {
    // FlexPass design: the receiver NIC shapes all credits to w_q.
    let r = run20("two-flexpass");
    assert!(r.jain_index.unwrap() >= 0.95, "Jain {:?}", r.jain_index);
    let total: f64 = r.flows.iter().map(|f| f.share).sum();
    assert!(total >= 0.9, "total {total}");
    no_corruption(&r);
    // Testbed configuration (Fig. 7b): NIC shapes credits to the full link; each flow's
    // credits are limited by its own max_rate = w_q: fair and mostly proactive.
    let r = run(
        "two-flexpass",
        &sets(&["duration_ms=20", "switch.nic_credit_share=1.0"]),
    );
    assert!(r.jain_index.unwrap() >= 0.95, "Jain {:?}", r.jain_index);
    for f in &r.flows {
        assert!(
            f.proactive_share > 2.0 * f.reactive_share,
            "flow {}: proactive {} reactive {}",
            f.id,
            f.proactive_share,
            f.reactive_share
        );
    }
    no_corruption(&r);
}

#[test]
fn flexpass_coexists_with_dctcp() {
    let r = run20("flexpass-vs-dctcp");
    for t in [TransportKind::FlexPass, TransportKind::Dctcp] {
        let s = share_of(&r, t);
        assert!((0.4..=0.6).contains(&s), "{t:?} share {s}");
    }
    let fp = r
        .flows
        .iter()
        .find(|f| f.transport == TransportKind::FlexPass)
        .unwrap();
    assert!(
        fp.reactive_share < 0.1,
        "reactive sub-flow should be near zero, got {}",
        fp.reactive_share
    );
    let dctcp = r
        .transports
        .iter()
        .find(|t| t.transport == TransportKind::Dctcp)
        .unwrap();
    assert!(
        dctcp.starvation_fraction < 0.01,
        "DCTCP starved {}",
        dctcp.starvation_fraction
    );
    // Q1 stays bounded: red threshold plus what green (proactive) packets add.
    assert!(r.bottleneck.as_ref().unwrap().max_queue_bytes[1] <= 100_000 + 16 * 1538);
    no_corruption(&r);
}

#[test]
fn naive_expresspass_starves_dctcp() {
    let r = run20("expresspass-vs-dctcp");
    let s = share_of(&r, TransportKind::Dctcp);
    assert!(s < 0.2, "DCTCP share {s} (paper: 9.3%)");
    let st = r
        .transports
        .iter()
        .find(|t| t.transport == TransportKind::Dctcp)
        .unwrap();
    assert!(st.starvation_fraction > 0.5);
    no_corruption(&r);
}

#[test]
fn incast_credit_transports_never_time_out() {
    for n in [8, 16, 32, 48, 64] {
        for t in [TransportKind::FlexPass, TransportKind::ExpressPass] {
            let r = incast(t, n, &[]);
            let what = format!("{t:?} with {n} flows: {:?}", r.fct.overall);
            assert_eq!(
                r.fct.overall.completed, n,
                "not all flows completed: {what}"
            );
            assert_eq!(r.timeouts, 0, "timed out: {what}");
            assert_eq!(r.recovery_timeouts, 0, "{what}");
            assert_eq!(r.corrupted_bytes, 0);
            if t == TransportKind::ExpressPass {
                assert_eq!(
                    r.data_drops_full + r.data_drops_red,
                    0,
                    "ExpressPass must not lose data: {what}"
                );
            }
        }
    }
    // DCTCP with RTO_min 4 ms does time out at high incast degree (paper: above 48 flows).
    let r = incast(TransportKind::Dctcp, 64, &[]);
    assert!(r.timeouts > 0, "{:?}", r.fct.overall);
    let r8 = incast(TransportKind::Dctcp, 8, &[]);
    assert_eq!(r8.timeouts, 0, "{:?}", r8.fct.overall);
}

#[test]
fn algorithm_1_discrete_model_convergence() {
    // ExpressPass §4's discrete model (synchronised updates, equal loss) driving the real
    // CreditFeedback. Credits at max_rate: fair after one period under either rule. A flow
    // joining at α = w_init = 1/16: the published Algorithm 1 (fixed target_loss) needs more
    // than 16 periods — the control law alone cannot meet the 16-RTT bound — while the
    // authors' simulator rule (target scaled by 1 − rate/max_rate) meets it.
    let scaled = TargetLossRule::RateScaled {
        target_loss_scaling: TargetLossRule::NS2_SCALING,
    };
    for rule in [TargetLossRule::Fixed, scaled] {
        assert!(
            discrete_model_periods(rule, 1.0, 0.5).is_some_and(|n| n <= 2),
            "{rule:?}"
        );
    }
    let fixed = discrete_model_periods(TargetLossRule::Fixed, 1.0 / 16.0, 1.0 / 16.0);
    assert!(fixed.is_some_and(|n| n > 16), "fixed: {fixed:?}");
    let fig8a = discrete_model_periods(scaled, 1.0 / 16.0, 0.5);
    assert!(
        fig8a.is_some_and(|n| n <= 8),
        "rate-scaled, Fig. 8a: {fig8a:?}"
    );
    let defaults = discrete_model_periods(scaled, 1.0 / 16.0, 1.0 / 16.0);
    assert!(
        defaults.is_some_and(|n| n <= 16),
        "rate-scaled: {defaults:?}"
    );
}

#[test]
fn joining_expresspass_flow_gets_its_share() {
    // ExpressPass Fig. 8a trade-off over 16 seeds (docs/protocol.md §11, "Credit feedback"):
    // α = 1, Fig. 8a's α = 1/16 with w_init = 0.5, and the §6.3 defaults α = w_init = 1/16;
    // each with the paper's fixed target loss and the authors' simulator's rate-scaled one.
    // RTTs are counted in the receivers' measured credit RTT (≈31 µs: base RTT 22.6 µs plus
    // credit queueing), the period Algorithm 1 runs on and how the paper counts ("100 µs
    // (four RTTs)" at a 25 µs average RTT, §6.1). Every run: the joining flow is never locked
    // out, shares fairly in the long run, the link stays utilised and no data is lost. The
    // per-setting floors are the measured seed counts (docs/protocol.md), minus one seed.
    // The bound for α = w_init = 1/16 under the published Algorithm 1 is what that algorithm
    // gives in the paper's own §4 discrete model (27 update periods, asserted below), not
    // 16: the packet model meets 16 measured RTTs on most seeds (median 12.5).
    // (rule, α, w_init, bound in RTTs, seeds that must meet it)
    let settings = [
        ("fixed", 1.0, Some(0.5), 4.0, 14),
        ("fixed", 1.0 / 16.0, Some(0.5), 16.0, 13),
        ("fixed", 1.0 / 16.0, None, 27.0, 13),
        ("rate-scaled", 1.0, Some(0.5), 4.0, 13),
        ("rate-scaled", 1.0 / 16.0, Some(0.5), 16.0, 14),
        ("rate-scaled", 1.0 / 16.0, None, 16.0, 13),
    ];
    for (rule, alpha, w_init, bound, floor) in settings {
        let mut measured = vec![];
        for seed in 1..=16u64 {
            let mut s = sets(&[
                &format!("seed={seed}"),
                &format!("host.alpha={alpha}"),
                &format!("host.target_loss_rule={rule}"),
            ]);
            if let Some(w) = w_init {
                s.push(format!("host.w_init={w}"));
            }
            let r = run("expresspass-convergence", &s);
            let c = r.convergence.clone().expect("a convergence run");
            let what = format!("{rule} α = {alpha} w_init = {w_init:?} seed {seed}: {c:?}");
            eprintln!("{what}");
            measured.push(c.first_fair_measured_rtts);
            assert!(c.first_fair_rtts.is_some(), "never fair: {what}");
            assert!(c.long_term_jain > 0.9, "{what}");
            assert!(c.mean_jain_after_16_rtts > 0.85, "{what}");
            let b = r.bottleneck.as_ref().unwrap();
            assert!(
                b.data_utilization > 0.88,
                "utilization {}: {what}",
                b.data_utilization
            );
            assert_eq!(r.data_drops_full + r.data_drops_red, 0, "{what}");
        }
        let n = measured
            .iter()
            .filter(|f| f.is_some_and(|x| x <= bound))
            .count();
        assert!(
            n >= floor,
            "{rule} α = {alpha} w_init = {w_init:?}: Jain ≥ 0.98 within {bound} measured RTTs on {n}/16 seeds (floor {floor}): {measured:?}"
        );
    }
}

#[test]
fn runs_are_deterministic_per_seed() {
    let a = run("flexpass-vs-dctcp", &sets(&["duration_ms=3"]));
    let b = run("flexpass-vs-dctcp", &sets(&["duration_ms=3"]));
    let strip = |r: &RunReport| {
        let mut v = serde_json::to_value(r).unwrap();
        for k in ["wall_seconds", "events_per_second", "speed"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn byte_exact_delivery_under_loss_reordering_and_duplication() {
    for seed in 1..=12u64 {
        let size = 200_000 + seed * 1_013;
        for t in [
            TransportKind::FlexPass,
            TransportKind::ExpressPass,
            TransportKind::Dctcp,
            TransportKind::Ppt,
        ] {
            let r = incast(
                t,
                3,
                &sets(&[
                    &format!("seed={seed}"),
                    &format!("impairment.loss={}", 0.01 + 0.01 * (seed % 3) as f64),
                    "impairment.duplicate=0.01",
                    "impairment.reorder=0.02",
                    "impairment.reorder_delay_us=30",
                    "measure.wire_check=true",
                    &format!("incast.0.bytes={size}"),
                    "incast.0.senders=[1, 2, 3]",
                    "topology.hosts=4",
                ]),
            );
            assert_eq!(r.fct.overall.completed, 3, "seed {seed} {t:?}: {:?}", r.fct);
            for f in &r.flows {
                assert_eq!(f.delivered_bytes, size, "seed {seed} {t:?}");
                assert_eq!(f.corrupted_bytes, 0, "seed {seed} {t:?}");
            }
        }
    }
}

#[test]
fn credits_in_batches_of_eight_keep_zero_loss_and_a_one_packet_queue_behind_credit_queues() {
    // The host agent's --credit-batch (docs/datapath.md, "Credit batches") through
    // ExpressPass ports: 8-credit queues, 2-credit token buckets. Four long ExpressPass flows
    // into one receiver, its credits one by one and in batches of 8 (experiment
    // credit-batch): the credit queues absorb the batches and re-space them, so no credit
    // or data is dropped, the data queue stays at one packet, and utilization and fairness
    // stay within a few per cent of one-by-one pacing.
    let one = run("credit-batch", &sets(&["host.credit_batch=1"]));
    let eight = run("credit-batch", &sets(&["host.credit_batch=8"]));
    for (r, name) in [(&one, "one by one"), (&eight, "batches of 8")] {
        no_corruption(r);
        assert_eq!(r.data_drops_full + r.credit_drops, 0, "{name}: drops");
        assert_eq!(r.timeouts, 0, "{name}: timeouts");
        let q = r.bottleneck.as_ref().unwrap().max_queue_bytes[1];
        assert!(q <= 2 * 1538, "{name}: data queue {q} B");
        let jain = r.jain_index.unwrap();
        assert!(jain > 0.99, "{name}: Jain {jain}");
    }
    let (u1, u8) = (
        one.utilization["bottleneck"],
        eight.utilization["bottleneck"],
    );
    assert!(
        u1 > 0.85 && u8 > u1 - 0.05,
        "utilization {u1} one by one, {u8} in batches"
    );
}
